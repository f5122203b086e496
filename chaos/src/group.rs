//! The group consumers (`--group-consumers N`): members `g0`..`gN-1` of one consumer group
//! (the classic protocol, librdkafka's eager `range,roundrobin` assignors) that subscribe to
//! the topic, read it read_committed and commit the next offset of every partition they read
//! after each poll, synchronously. A further member, `gj.K`, joins and leaves when the
//! nemesis asks ([`Progress::joiner_wanted`]): the rebalances a group coordinator is killed
//! in ([`crate::schedule::Step::KillGroupCoordinator`]).
//!
//! What they record: each assignment ([`Op::GroupAssign`]), the first record read of each
//! assigned partition ([`Op::GroupStart`]) and each commit with its outcome
//! ([`Op::OffsetCommit`]). [`check_offsets`] then finds `lost-offset-commit`: a member
//! started reading a partition below an offset whose commit was acknowledged before that
//! member got the partition. A commit acknowledged is stored (Kafka's `GroupMetadataManager`
//! answers an OffsetCommit once its record is replicated to `__consumer_offsets`), and a
//! member's position after an assignment is the group's committed offset (librdkafka sends
//! OffsetFetch after the assignment callback), so the start must be at or above it, whatever
//! coordinator died in between.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

use crate::checker::{Anomaly, PartitionReport};
use crate::history::{History, Op};
use crate::workload::{Clients, Progress, ISOLATION_LEVEL};

/// The members' `session.timeout.ms`: Kafka's `group.min.session.timeout.ms` (6 s), so a
/// member that lost its coordinator is out of the group soon.
pub const SESSION_TIMEOUT_MS: u64 = 6_000;
/// The members' `heartbeat.interval.ms`: how soon a member learns that a rebalance began.
pub const HEARTBEAT_INTERVAL_MS: u64 = 500;
/// One poll of a member.
const POLL_WAIT: Duration = Duration::from_millis(100);
/// Records one member takes from librdkafka before it commits.
const POLL_RECORDS_MAX: usize = 500;
/// How long the joiner waits between looks at whether it is wanted.
const JOINER_IDLE: Duration = Duration::from_millis(20);

/// The group of a run's group consumers.
pub fn group_id(topic: &str) -> String {
    format!("{topic}-group")
}

/// The member's callbacks: its assignments into the history, a rebalance's start into
/// [`Progress::rebalances`].
struct Member {
    process: String,
    history: History,
    progress: Arc<Progress>,
    /// The joiner's revocations are its own leaving, not a rebalance it learnt of.
    joiner: bool,
    /// Partitions assigned whose first record is still to be read.
    fresh: std::sync::Mutex<Vec<i32>>,
    /// Whether this member holds an assignment (counted in [`Progress::members_holding`]).
    holding: AtomicBool,
}

impl Member {
    /// Notes whether the member holds an assignment now; the joiner is not counted.
    fn set_holding(&self, now: bool) {
        if self.joiner || self.holding.swap(now, Ordering::Relaxed) == now {
            return;
        }
        match now {
            true => self
                .progress
                .members_holding
                .fetch_add(1, Ordering::Relaxed),
            false => self
                .progress
                .members_holding
                .fetch_sub(1, Ordering::Relaxed),
        };
    }
}

impl ClientContext for Member {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
            self.history.push(Op::ClientError {
                process: self.process.clone(),
                at_ms: self.history.now_ms(),
                error: format!("librdkafka {fac}: {message}"),
            });
        }
    }
}

impl ConsumerContext for Member {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        // An eager member revokes everything when it learns of a rebalance, then sends
        // JoinGroup: the group is between JoinGroup and SyncGroup from here.
        if !self.joiner && matches!(rebalance, Rebalance::Revoke(_)) {
            self.progress.rebalances.fetch_add(1, Ordering::Relaxed);
            self.set_holding(false);
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Assign(tpl) = rebalance else {
            return;
        };
        let partitions: Vec<i32> = tpl.elements().iter().map(|e| e.partition()).collect();
        *self.fresh.lock().unwrap_or_else(|e| e.into_inner()) = partitions.clone();
        self.progress.assignments.fetch_add(1, Ordering::Relaxed);
        self.set_holding(true);
        self.history.push(Op::GroupAssign {
            process: self.process.clone(),
            at_ms: self.history.now_ms(),
            partitions,
        });
    }
}

fn member(
    process: &str,
    c: &Clients,
    h: &History,
    p: &Arc<Progress>,
) -> Option<BaseConsumer<Member>> {
    let session = SESSION_TIMEOUT_MS.to_string();
    let heartbeat = HEARTBEAT_INTERVAL_MS.to_string();
    let mut config = ClientConfig::new();
    c.security.apply(&mut config);
    let consumer = config
        .set("bootstrap.servers", &c.bootstrap)
        .set("group.id", group_id(&c.topic))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", &session)
        .set("heartbeat.interval.ms", &heartbeat)
        .set(ISOLATION_LEVEL.0, ISOLATION_LEVEL.1)
        .create_with_context(Member {
            process: process.to_string(),
            history: h.clone(),
            progress: p.clone(),
            joiner: process.starts_with("gj"),
            fresh: Default::default(),
            holding: AtomicBool::new(false),
        });
    let subscribed = consumer.and_then(|m: BaseConsumer<Member>| {
        m.subscribe(&[c.topic.as_str()])?;
        Ok(m)
    });
    match subscribed {
        Ok(m) => Some(m),
        Err(e) => {
            h.nemesis(format!("{process}: group consumer not started: {e}"));
            None
        }
    }
}

/// One member until `stop` says so: poll, record first reads, commit.
fn run_member(m: &BaseConsumer<Member>, c: &Clients, h: &History, stop: impl Fn() -> bool) {
    while !stop() && !h.is_full() {
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        let mut wait = POLL_WAIT;
        while next.len() < POLL_RECORDS_MAX {
            match m.poll(wait) {
                Some(Ok(r)) => {
                    first_read(m.context(), h, r.partition(), r.offset());
                    next.insert(r.partition(), r.offset() + 1);
                }
                Some(Err(e)) => {
                    h.push(Op::ClientError {
                        process: m.context().process.clone(),
                        at_ms: h.now_ms(),
                        error: e.to_string(),
                    });
                }
                None => break,
            }
            wait = Duration::ZERO;
        }
        if !next.is_empty() {
            commit(m, c, h, &next);
        }
    }
}

fn first_read(ctx: &Member, h: &History, partition: i32, offset: i64) {
    let mut fresh = ctx.fresh.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = fresh.iter().position(|p| *p == partition) {
        fresh.swap_remove(i);
        h.push(Op::GroupStart {
            process: ctx.process.clone(),
            at_ms: h.now_ms(),
            partition,
            offset,
        });
    }
}

/// Commits `next` (partition to the next offset to read) synchronously and records it.
fn commit(m: &BaseConsumer<Member>, c: &Clients, h: &History, next: &BTreeMap<i32, i64>) {
    let mut tpl = TopicPartitionList::new();
    for (p, o) in next {
        if tpl
            .add_partition_offset(&c.topic, *p, Offset::Offset(*o))
            .is_err()
        {
            return;
        }
    }
    let invoked_ms = h.now_ms();
    let result = m.commit(&tpl, CommitMode::Sync);
    let completed_ms = h.now_ms();
    let error = result.err().map(|e: KafkaError| e.to_string());
    for (p, o) in next {
        h.push(Op::OffsetCommit {
            process: m.context().process.clone(),
            partition: *p,
            offset: *o,
            invoked_ms,
            completed_ms,
            error: error.clone(),
        });
    }
}

/// Group member `g{index}` until `stop`.
pub fn consume(index: usize, c: &Clients, h: &History, stop: &AtomicBool, p: &Arc<Progress>) {
    let process = format!("g{index}");
    if let Some(m) = member(&process, c, h, p) {
        p.members_started.fetch_add(1, Ordering::Relaxed);
        run_member(&m, c, h, || stop.load(Ordering::Relaxed));
    }
}

/// The joiner: a member `gj.K` while [`Progress::joiner_wanted`], none otherwise (dropping
/// the consumer closes it, which leaves the group).
pub fn joiner(c: &Clients, h: &History, stop: &AtomicBool, p: &Arc<Progress>) {
    for k in 0.. {
        while !p.joiner_wanted.load(Ordering::Relaxed) {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(JOINER_IDLE);
        }
        let process = format!("gj.{k}");
        h.nemesis(format!("{process} joins group {}", group_id(&c.topic)));
        if let Some(m) = member(&process, c, h, p) {
            run_member(&m, c, h, || {
                stop.load(Ordering::Relaxed) || !p.joiner_wanted.load(Ordering::Relaxed)
            });
            m.unsubscribe();
            h.nemesis(format!("{process} leaves group {}", group_id(&c.topic)));
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
    }
}

/// `lost-offset-commit`: a member's first read of a partition after an assignment below the
/// highest offset whose commit was acknowledged before the assignment.
pub fn check_offsets(ops: &[Op], reports: &mut BTreeMap<i32, PartitionReport>) {
    // Acknowledged commits per partition, (completed_ms, offset) in history order.
    let mut acked: HashMap<i32, Vec<(u64, i64, &str)>> = HashMap::new();
    let mut assigned_at: HashMap<&str, u64> = HashMap::new();
    for op in ops {
        match op {
            Op::OffsetCommit {
                process,
                partition,
                offset,
                completed_ms,
                error: None,
                ..
            } => acked
                .entry(*partition)
                .or_default()
                .push((*completed_ms, *offset, process)),
            Op::GroupAssign { process, at_ms, .. } => {
                assigned_at.insert(process, *at_ms);
            }
            Op::GroupStart {
                process,
                partition,
                offset,
                ..
            } => {
                let Some(since) = assigned_at.get(process.as_str()) else {
                    continue;
                };
                let before = acked.get(partition).into_iter().flatten();
                let highest = before
                    .filter(|(done, _, _)| done < since)
                    .max_by_key(|(_, o, _)| *o);
                if let Some((done, committed, by)) = highest.filter(|h| h.1 > *offset) {
                    reports
                        .entry(*partition)
                        .or_default()
                        .note(Anomaly::LostOffsetCommit, || {
                            format!(
                                "{process}, assigned at {since} ms, started at offset {offset}; \
                                 {by}'s commit of offset {committed} was acknowledged at {done} ms"
                            )
                        });
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(process: &str, offset: i64, completed_ms: u64, error: Option<&str>) -> Op {
        Op::OffsetCommit {
            process: process.into(),
            partition: 0,
            offset,
            invoked_ms: completed_ms - 1,
            completed_ms,
            error: error.map(str::to_string),
        }
    }

    fn assign(process: &str, at_ms: u64) -> Op {
        Op::GroupAssign {
            process: process.into(),
            at_ms,
            partitions: vec![0],
        }
    }

    fn start(process: &str, offset: i64, at_ms: u64) -> Op {
        Op::GroupStart {
            process: process.into(),
            at_ms,
            partition: 0,
            offset,
        }
    }

    fn lost(ops: &[Op]) -> u64 {
        let mut reports = BTreeMap::new();
        check_offsets(ops, &mut reports);
        reports
            .get(&0)
            .map_or(0, |r| r.count(Anomaly::LostOffsetCommit))
    }

    #[test]
    fn a_start_below_an_acknowledged_commit_is_a_lost_offset_commit() {
        let ops = [
            assign("g0", 1),
            start("g0", 0, 2),
            commit("g0", 40, 10, None),
            assign("g1", 20),
            start("g1", 12, 21),
        ];
        assert_eq!(lost(&ops), 1);
    }

    #[test]
    fn failed_commits_later_commits_and_starts_at_or_above_are_fine() {
        let ops = [
            assign("g0", 1),
            start("g0", 0, 2),
            commit("g0", 40, 10, None),
            commit("g0", 90, 15, Some("coordinator gone")),
            assign("g1", 20),
            start("g1", 40, 21),
            commit("g1", 60, 30, None),
            // Acknowledged after g0's assignment: g0 may have fetched before it was stored.
            assign("g0", 25),
            start("g0", 41, 31),
        ];
        assert_eq!(lost(&ops), 0);
    }
}
