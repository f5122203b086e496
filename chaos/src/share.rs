//! The share workload (`--workload share`): the producers of the `send` workload write the
//! topic, and `--share-consumers` members of one share group (KIP-932) consume it. Each member
//! is a real Java `KafkaShareConsumer` in a child process: Kafka 4.4's own test tool
//! `org.apache.kafka.tools.VerifiableShareConsumer` (from the jars of
//! `scripts/kafka-reference fetch`, `--kafka-lib`), with explicit, synchronous
//! acknowledgement and an `--ack-pattern` that accepts most records, releases one in ten and
//! rejects one in ten ([`ACK_PATTERN`]; the tool picks `pattern[offset % len]`, so each
//! offset's type is known: [`ack_type`]). Its JSON events (`records_consumed`,
//! `offsets_acknowledged` with `success`) become [`Op::ShareDelivery`] and [`Op::ShareAck`].
//! After the nemesis heals and the producers stop, [`drain`] waits until every partition's
//! share-partition lag (DescribeShareGroupOffsets v1) is 0.
//!
//! The checks mirror Kafka's system test of share consumers under broker failures
//! (`tests/kafkatest/tests/client/share_consumer_test.py`, which asserts that the unique
//! records consumed cover what the producer had acknowledged) and add what KIP-932's state
//! machine (`SharePartition`: ACCEPT → ACKNOWLEDGED, REJECT → ARCHIVED, RELEASE → AVAILABLE
//! or ARCHIVED once the delivery count reaches `group.share.delivery.count.limit`) promises
//! across leader kills, given that a state change is durable once the persister's
//! WriteShareGroupState is answered (`ShareCoordinatorShard`) and that records acquired but
//! not acknowledged come back AVAILABLE on a new leader (a redelivery of those is allowed):
//!
//! - `redelivered-after-accept`: an offset of type ACCEPT (or REJECT) acknowledged with
//!   success more than once: after the first, the record is ACKNOWLEDGED (ARCHIVED), durably,
//!   and no member can hold it again. Successful acknowledgements are counted rather than
//!   deliveries because the client may hand out records it fetched before a failover whose
//!   acquisition the new leader no longer has; their acknowledgement fails.
//! - `delivered-after-limit`: an offset of type RELEASE released with success more than
//!   [`DELIVERY_COUNT_LIMIT`] times: each release is persisted with the delivery count, so
//!   the count only rises, and the release at the limit archives the record. The tool's events
//!   carry no delivery count (`RecordsConsumed` lists offsets only), so this is the part of
//!   "delivery counts only rise" a client can see.
//! - `undelivered`: a record the producer had acknowledged that no member was ever delivered.
//! - `unsettled`: once drained, a partition whose share-partition lag (DescribeShareGroupOffsets
//!   v1) is not 0 and whose start offset is below the end of its log: some record is neither
//!   acknowledged nor archived. (The lag, not the start offset alone: Kafka writes the state
//!   of an acknowledgement with the start offset it found, `SharePartition.writeShareGroupState`
//!   before `maybeUpdateCachedStateAndOffsets`, so the persisted start offset may stay behind
//!   the last records acknowledged.)

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use brook_protocol_tests::errors;
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::checker::{Anomaly, PartitionReport};
use crate::coordinator::{find_coordinator, KEY_TYPE_GROUP};
use crate::history::{History, Op, Outcome, FINAL_READER};
use crate::target::{signal, wait_for};
use crate::workload::{Clients, Progress};

/// The tool's class in `kafka-tools-4.4.0.jar`.
pub const TOOL_CLASS: &str = "org.apache.kafka.tools.VerifiableShareConsumer";
/// The jar that must be in `--kafka-lib`.
pub const TOOLS_JAR: &str = "kafka-tools-4.4.0.jar";
/// Where `scripts/kafka-reference fetch` puts the jars, from the repository root.
pub const DEFAULT_KAFKA_LIB: &str = "target/kafka-reference/lib";

/// What a member does with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    Accept,
    Release,
    Reject,
}

/// The members' `--ack-pattern`: eight accepts, a release, a reject.
pub const ACK_PATTERN: [AckType; 10] = [
    AckType::Accept,
    AckType::Accept,
    AckType::Accept,
    AckType::Accept,
    AckType::Accept,
    AckType::Accept,
    AckType::Accept,
    AckType::Accept,
    AckType::Release,
    AckType::Reject,
];

/// The broker's `group.share.delivery.count.limit` in a share run (Kafka's default).
pub const DELIVERY_COUNT_LIMIT: u32 = 5;
/// The broker's `group.share.record.lock.duration.ms` in a share run: short, so that records
/// whose acknowledgement failed come back within the drain (Kafka's default is 30 s).
pub const RECORD_LOCK_DURATION_MS: u64 = 10_000;
/// How long the drain may take: a few lock durations, and the releases' redeliveries.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the members may take to start and get their first records.
pub const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a member may take to exit after SIGTERM (the tool closes its consumer).
const STOP_GRACE: Duration = Duration::from_secs(30);
/// Bound on one DescribeShareGroupOffsets.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(5);
/// DescribeShareGroupOffsets v1: start offsets and lags.
const DESCRIBE_SHARE_GROUP_OFFSETS_V: i16 = 1;
/// Pause between two looks at the start offsets during the drain.
const DRAIN_POLL: Duration = Duration::from_millis(500);

/// The share group of a run's members.
pub fn share_group_id(topic: &str) -> String {
    format!("{topic}-share")
}

/// The type the members acknowledge `offset` with (the tool's `offset % pattern length`).
pub fn ack_type(offset: i64) -> AckType {
    ACK_PATTERN[offset.rem_euclid(ACK_PATTERN.len() as i64) as usize]
}

fn pattern_arg() -> String {
    let names: Vec<&str> = ACK_PATTERN
        .iter()
        .map(|t| match t {
            AckType::Accept => "accept",
            AckType::Release => "release",
            AckType::Reject => "reject",
        })
        .collect();
    names.join(",")
}

/// The broker settings a share run needs (Brook and Kafka read the same names).
pub fn broker_overrides() -> Vec<(String, String)> {
    [
        (
            "group.share.min.record.lock.duration.ms",
            "1000".to_string(),
        ),
        (
            "group.share.record.lock.duration.ms",
            RECORD_LOCK_DURATION_MS.to_string(),
        ),
        (
            "group.share.delivery.count.limit",
            DELIVERY_COUNT_LIMIT.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Refuses to start without `java` on PATH or without the tool's jar in `lib`: one error
/// naming the cause.
pub fn check_java(lib: &Path) -> Result<(), String> {
    let java = Command::new("java")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !java.is_ok_and(|s| s.success()) {
        return Err("the share workload runs Kafka's VerifiableShareConsumer: no working `java` on PATH (Java 17+)".into());
    }
    if !lib.join(TOOLS_JAR).is_file() {
        return Err(format!(
            "the share workload runs Kafka's VerifiableShareConsumer: no {TOOLS_JAR} in {} (run scripts/kafka-reference fetch, or give --kafka-lib)",
            lib.display()
        ));
    }
    Ok(())
}

/// The running members.
pub struct ShareConsumers {
    members: Vec<(Child, JoinHandle<()>)>,
}

impl ShareConsumers {
    /// Starts `n` members `s0`.. (their stderr goes to `<temp>/<topic>-sN.log`).
    pub fn start(
        n: usize,
        lib: &Path,
        c: &Clients,
        history: &History,
        progress: &Arc<Progress>,
    ) -> Result<ShareConsumers, String> {
        // The tool stamps events with the wall clock; the history counts from its start.
        let wall_start_ms = wall_ms().saturating_sub(history.now_ms());
        // Members already started are killed (Drop) if a later one cannot start.
        let mut started = ShareConsumers {
            members: Vec::new(),
        };
        for i in 0..n {
            let process = format!("s{i}");
            let log = std::env::temp_dir().join(format!("{}-{process}.log", c.topic));
            let mut child = spawn_member(lib, c, &log)?;
            let Some(out) = child.stdout.take() else {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{process}: no stdout"));
            };
            let (h, p) = (history.clone(), progress.clone());
            let reader = std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    record_event(&line, &process, wall_start_ms, &h, &p);
                }
            });
            history.nemesis(format!(
                "share consumer s{i} started (pid {}, log {})",
                child.id(),
                log.display()
            ));
            started.members.push((child, reader));
        }
        Ok(started)
    }

    /// SIGTERM to every member (the tool closes its consumer, acknowledging what it holds),
    /// SIGKILL after [`STOP_GRACE`]; returns what went wrong.
    pub fn stop(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        for (child, _) in &self.members {
            let _ = signal(child.id(), Signal::SIGTERM);
        }
        for (i, (mut child, reader)) in self.members.drain(..).enumerate() {
            let exited = wait_for(STOP_GRACE, || child.try_wait().is_ok_and(|s| s.is_some()));
            if !exited {
                errors.push(format!(
                    "share consumer s{i} did not exit within {STOP_GRACE:?} of SIGTERM"
                ));
                let _ = child.kill();
                let _ = child.wait();
            }
            if reader.join().is_err() {
                errors.push(format!("share consumer s{i}'s reader panicked"));
            }
        }
        errors
    }
}

impl Drop for ShareConsumers {
    fn drop(&mut self) {
        for (child, _) in &mut self.members {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// One member: the tool with explicit synchronous acknowledgement, from the earliest offset
/// (as Kafka's system test sets `offset_reset_strategy="earliest"`), small heap, quick JIT.
fn spawn_member(lib: &Path, c: &Clients, log: &Path) -> Result<Child, String> {
    let stderr = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let classpath = format!("{}/*", lib.display());
    Command::new("java")
        .args(["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"])
        .args(["-cp", &classpath, TOOL_CLASS])
        .args(["--topic", &c.topic])
        .args(["--group-id", &share_group_id(&c.topic)])
        .args(["--bootstrap-server", &c.bootstrap])
        .args(["--acknowledgement-mode", "sync"])
        .args(["--ack-pattern", &pattern_arg()])
        .args(["--offset-reset-strategy", "earliest"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("java {TOOL_CLASS}: {e}"))
}

/// The ops of one line of the tool's output (none for events the checker does not need).
pub fn parse_event(line: &str, process: &str, wall_start_ms: u64) -> Vec<Op> {
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return Vec::new();
    };
    let at_ms = v["timestamp"]
        .as_u64()
        .map_or(0, |t| t.saturating_sub(wall_start_ms));
    let partitions = v["partitions"].as_array().cloned().unwrap_or_default();
    let offsets_of = |p: &Value| -> (i32, Vec<i64>) {
        let partition = p["partition"].as_i64().unwrap_or(-1) as i32;
        let offsets = p["offsets"]
            .as_array()
            .map(|o| o.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default();
        (partition, offsets)
    };
    match v["name"].as_str() {
        Some("records_consumed") => partitions
            .iter()
            .map(|p| {
                let (partition, offsets) = offsets_of(p);
                Op::ShareDelivery {
                    process: process.to_string(),
                    at_ms,
                    partition,
                    offsets,
                }
            })
            .collect(),
        Some("offsets_acknowledged") => {
            let success = v["success"].as_bool().unwrap_or(false);
            let error = v["error"].as_str().map(str::to_string);
            partitions
                .iter()
                .map(|p| {
                    let (partition, offsets) = offsets_of(p);
                    Op::ShareAck {
                        process: process.to_string(),
                        at_ms,
                        partition,
                        offsets,
                        success,
                        error: error.clone(),
                    }
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Records one line's ops and counts them for the nemesis.
fn record_event(line: &str, process: &str, wall_start_ms: u64, h: &History, p: &Progress) {
    for op in parse_event(line, process, wall_start_ms) {
        match &op {
            Op::ShareDelivery { .. } => p.share_deliveries.fetch_add(1, Ordering::Relaxed),
            Op::ShareAck { success: true, .. } => p.share_acks.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        if !h.push(op) {
            return;
        }
    }
}

/// Waits until the members have been delivered records and acknowledged some.
pub fn await_started(progress: &Progress) -> Result<(), String> {
    let started = wait_for(START_TIMEOUT, || {
        progress.share_acks.load(Ordering::Relaxed) > 0
    });
    if started {
        Ok(())
    } else {
        Err(format!(
            "the share consumers acknowledged nothing within {START_TIMEOUT:?} (their logs are in the temp dir)"
        ))
    }
}

/// Each partition's end: one past the last offset the final read saw (0 when it saw none).
pub fn end_offsets(ops: &[Op], partitions: i32) -> BTreeMap<i32, i64> {
    let mut ends: BTreeMap<i32, i64> = (0..partitions).map(|p| (p, 0)).collect();
    for op in ops {
        if let Op::Poll {
            process, records, ..
        } = op
        {
            if process != FINAL_READER {
                continue;
            }
            for r in records {
                let end = ends.entry(r.partition).or_default();
                *end = (*end).max(r.offset + 1);
            }
        }
    }
    ends
}

/// The share-partition start offset and lag of each partition, from the group coordinator.
fn start_offsets(c: &Clients) -> Result<BTreeMap<i32, (i64, i64)>, String> {
    let group = share_group_id(&c.topic);
    let (_, addr) = find_coordinator(&c.bootstrap, &c.security, &group, KEY_TYPE_GROUP)?;
    let mut topic = DescribeShareGroupOffsetsRequestTopic::default();
    topic.topic_name = TopicName(StrBytes::from_string(c.topic.clone()));
    topic.partitions = (0..c.settings.partitions).collect();
    let mut g = DescribeShareGroupOffsetsRequestGroup::default();
    g.group_id = GroupId(StrBytes::from_string(group.clone()));
    g.topics = Some(vec![topic]);
    let mut req = DescribeShareGroupOffsetsRequest::default();
    req.groups = vec![g];
    let r = c
        .security
        .connect(&addr, DESCRIBE_TIMEOUT)?
        .try_request(DESCRIBE_SHARE_GROUP_OFFSETS_V, &req)?;
    let g = r.groups.first().ok_or("no group in the answer")?;
    if g.error_code != errors::NONE {
        return Err(format!(
            "DescribeShareGroupOffsets({group}): error {}",
            g.error_code
        ));
    }
    Ok(g.topics
        .iter()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.error_code == errors::NONE)
        .map(|p| (p.partition_index, (p.start_offset, p.lag)))
        .collect())
}

/// Whether a share-partition's delivery is complete up to `end`.
fn settled(start_offset: i64, lag: i64, end: i64) -> bool {
    lag == 0 || start_offset >= end
}

/// After the producers stop and the final read: waits (up to [`DRAIN_TIMEOUT`]) until every
/// partition's share-partition is [`settled`], then records the start offsets and lags. An
/// answer never had is a run error.
pub fn drain(c: &Clients, history: &History) -> Result<(), String> {
    let ends = end_offsets(&history.snapshot(), c.settings.partitions);
    let mut last = Err("not asked yet".to_string());
    let drained = wait_for(DRAIN_TIMEOUT, || {
        last = start_offsets(c);
        let done = last.as_ref().is_ok_and(|starts| {
            ends.iter().all(|(p, end)| {
                starts
                    .get(p)
                    .is_some_and(|(s, lag)| settled(*s, *lag, *end))
            })
        });
        if !done {
            std::thread::sleep(DRAIN_POLL);
        }
        done
    });
    let starts = last.map_err(|e| format!("share-partition start offsets not read: {e}"))?;
    history.nemesis(format!(
        "share group drained: {drained}; (start offset, lag) {starts:?}, log ends {ends:?}"
    ));
    let at_ms = history.now_ms();
    for (partition, end_offset) in ends {
        let (start_offset, lag) = starts.get(&partition).copied().unwrap_or((-1, -1));
        history.push(Op::ShareStartOffset {
            at_ms,
            partition,
            start_offset,
            lag,
            end_offset,
        });
    }
    Ok(())
}

/// A share run's totals, for the report.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Records delivered, each delivery counted.
    pub deliveries: u64,
    /// Records acknowledged with success, and without.
    pub acked: u64,
    pub ack_failed: u64,
    /// Partitions drained to lag 0.
    pub drained: u64,
}

/// The totals of a history's share ops.
pub fn totals(ops: &[Op]) -> Totals {
    let mut t = Totals::default();
    for op in ops {
        match op {
            Op::ShareDelivery { offsets, .. } => t.deliveries += offsets.len() as u64,
            Op::ShareAck {
                offsets, success, ..
            } => match success {
                true => t.acked += offsets.len() as u64,
                false => t.ack_failed += offsets.len() as u64,
            },
            Op::ShareStartOffset {
                start_offset,
                lag,
                end_offset,
                ..
            } if settled(*start_offset, *lag, *end_offset) => t.drained += 1,
            _ => {}
        }
    }
    t
}

/// What the share ops say about one offset.
#[derive(Default)]
struct OffsetView<'a> {
    deliveries: u64,
    /// Successful acknowledgements: (process, at_ms).
    acked: Vec<(&'a str, u64)>,
}

/// The share anomalies (see the module comment), per partition. Histories without share
/// ops get none.
pub fn check(ops: &[Op], reports: &mut BTreeMap<i32, PartitionReport>) {
    let mut offsets: BTreeMap<(i32, i64), OffsetView<'_>> = BTreeMap::new();
    let mut share_run = false;
    for op in ops {
        match op {
            Op::ShareDelivery {
                partition,
                offsets: o,
                ..
            } => {
                share_run = true;
                reports.entry(*partition).or_default().share_deliveries += o.len() as u64;
                for off in o {
                    offsets.entry((*partition, *off)).or_default().deliveries += 1;
                }
            }
            Op::ShareAck {
                process,
                at_ms,
                partition,
                offsets: o,
                success: true,
                ..
            } => {
                for off in o {
                    let v = offsets.entry((*partition, *off)).or_default();
                    v.acked.push((process, *at_ms));
                }
            }
            Op::ShareStartOffset { .. } => share_run = true,
            _ => {}
        }
    }
    if !share_run {
        return;
    }
    check_acks(&offsets, reports);
    check_delivered(ops, &offsets, reports);
    check_settled(ops, reports);
}

/// `redelivered-after-accept` and `delivered-after-limit`.
fn check_acks(
    offsets: &BTreeMap<(i32, i64), OffsetView<'_>>,
    reports: &mut BTreeMap<i32, PartitionReport>,
) {
    for ((p, off), v) in offsets {
        let kind = ack_type(*off);
        let (anomaly, allowed) = match kind {
            AckType::Accept | AckType::Reject => (Anomaly::RedeliveredAfterAccept, 1),
            AckType::Release => (Anomaly::DeliveredAfterLimit, DELIVERY_COUNT_LIMIT as usize),
        };
        if v.acked.len() > allowed {
            reports.entry(*p).or_default().note(anomaly, || {
                format!(
                    "offset {off} ({kind:?}), delivered {} times, acknowledged with success {} times (at most {allowed}): {:?}",
                    v.deliveries,
                    v.acked.len(),
                    v.acked
                )
            });
        }
    }
}

/// `undelivered`: a record the producer had acknowledged that no member got. A send
/// acknowledged without an offset (librdkafka's -1001 after a retry's
/// DUPLICATE_SEQUENCE_NUMBER) is found at the offset the final read has its value at; one the
/// final read lacks is the other checks' `lost-write` or `unseen`.
fn check_delivered(
    ops: &[Op],
    offsets: &BTreeMap<(i32, i64), OffsetView<'_>>,
    reports: &mut BTreeMap<i32, PartitionReport>,
) {
    let mut finally: BTreeMap<(i32, &str), i64> = BTreeMap::new();
    for op in ops {
        if let Op::Poll {
            process, records, ..
        } = op
        {
            if process == FINAL_READER {
                for r in records {
                    finally.insert((r.partition, r.value.as_str()), r.offset);
                }
            }
        }
    }
    for op in ops {
        let Op::Send {
            process,
            seq,
            partition,
            value,
            outcome: Outcome::Ok { offset },
            ..
        } = op
        else {
            continue;
        };
        let at = match *offset {
            o if o >= 0 => o,
            _ => match finally.get(&(*partition, value.as_str())) {
                Some(o) => *o,
                None => continue,
            },
        };
        if offsets
            .get(&(*partition, at))
            .is_some_and(|v| v.deliveries > 0)
        {
            continue;
        }
        reports.entry(*partition).or_default().note(Anomaly::Undelivered, || {
            format!("offset {at} ({process}/{seq}, acknowledged to the producer) never delivered to a share consumer")
        });
    }
}

/// `unsettled`: a share-partition with records neither acknowledged nor archived once drained.
fn check_settled(ops: &[Op], reports: &mut BTreeMap<i32, PartitionReport>) {
    for op in ops {
        let Op::ShareStartOffset {
            partition,
            start_offset,
            lag,
            end_offset,
            ..
        } = op
        else {
            continue;
        };
        if !settled(*start_offset, *lag, *end_offset) {
            reports.entry(*partition).or_default().note(Anomaly::Unsettled, || {
                format!("share-partition start offset {start_offset}, lag {lag}, log end {end_offset} after the drain: records neither acknowledged nor archived")
            });
        }
    }
}

/// The `--kafka-lib` default: `$KAFKA_REFERENCE_LIB` as `scripts/kafka-reference` reads it,
/// else [`DEFAULT_KAFKA_LIB`].
pub fn default_kafka_lib() -> PathBuf {
    std::env::var_os("KAFKA_REFERENCE_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_KAFKA_LIB))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check as check_all;

    fn delivery(process: &str, at_ms: u64, offsets: &[i64]) -> Op {
        Op::ShareDelivery {
            process: process.into(),
            at_ms,
            partition: 0,
            offsets: offsets.to_vec(),
        }
    }

    fn ack(process: &str, at_ms: u64, offsets: &[i64], success: bool) -> Op {
        Op::ShareAck {
            process: process.into(),
            at_ms,
            partition: 0,
            offsets: offsets.to_vec(),
            success,
            error: (!success).then(|| "INVALID_RECORD_STATE".into()),
        }
    }

    fn sent(seq: u64, offset: i64) -> Op {
        Op::Send {
            process: "p0".into(),
            seq,
            partition: 0,
            value: format!("p0-{seq}"),
            invoked_ms: 0,
            completed_ms: 1,
            outcome: Outcome::Ok { offset },
        }
    }

    fn drained(start_offset: i64, lag: i64, end_offset: i64) -> Op {
        Op::ShareStartOffset {
            at_ms: 99,
            partition: 0,
            start_offset,
            lag,
            end_offset,
        }
    }

    fn count(ops: &[Op], kind: Anomaly) -> u64 {
        check_all(ops).get(&0).map_or(0, |r| r.count(kind))
    }

    #[test]
    fn the_pattern_names_each_offsets_type() {
        assert_eq!(ack_type(0), AckType::Accept);
        assert_eq!(ack_type(8), AckType::Release);
        assert_eq!(ack_type(19), AckType::Reject);
        assert_eq!(
            pattern_arg(),
            "accept,accept,accept,accept,accept,accept,accept,accept,release,reject"
        );
    }

    /// A clean history: offset 1 delivered to s0 whose ack failed (a failover took its
    /// acquisition), then to s1 which accepted it; offset 8 released five times.
    #[test]
    fn redelivery_before_an_accept_and_releases_up_to_the_limit_are_allowed() {
        let mut ops = vec![sent(0, 0), sent(1, 1), sent(2, 8)];
        ops.extend([
            delivery("s0", 10, &[0, 1]),
            ack("s0", 11, &[0, 1], false),
            delivery("s1", 20, &[0, 1]),
            ack("s1", 21, &[0, 1], true),
            // A stale delivery after the accept whose ack fails is the client's buffer.
            delivery("s0", 30, &[1]),
            ack("s0", 31, &[1], false),
        ]);
        for i in 0..5 {
            ops.push(delivery("s0", 40 + i, &[8]));
            ops.push(ack("s0", 41 + i, &[8], true));
        }
        // Kafka's persisted start offset may trail the last acknowledgements: lag 0 settles.
        ops.push(drained(7, 0, 9));
        // The other checks want a final read; only the share anomalies are of interest here.
        let reports = check_all(&ops);
        let share: Vec<_> = reports[&0].anomalies.keys().filter(|a| a.share()).collect();
        assert!(share.is_empty(), "{reports:?}");
        assert_eq!(reports[&0].share_deliveries, 10);
        assert_eq!(
            totals(&ops),
            Totals {
                deliveries: 10,
                acked: 7,
                ack_failed: 3,
                drained: 1
            }
        );
    }

    #[test]
    fn an_accepted_record_acknowledged_again_is_redelivered_after_accept() {
        let ops = vec![
            sent(0, 3),
            delivery("s0", 10, &[3]),
            ack("s0", 11, &[3], true),
            delivery("s1", 20, &[3]),
            ack("s1", 21, &[3], true),
            drained(4, 0, 4),
        ];
        assert_eq!(count(&ops, Anomaly::RedeliveredAfterAccept), 1);
        let rejected = vec![
            delivery("s0", 10, &[9]),
            ack("s0", 11, &[9], true),
            delivery("s1", 20, &[9]),
            ack("s1", 21, &[9], true),
        ];
        assert_eq!(count(&rejected, Anomaly::RedeliveredAfterAccept), 1);
    }

    #[test]
    fn a_release_past_the_limit_is_delivered_after_limit() {
        let mut ops = Vec::new();
        for i in 0..=DELIVERY_COUNT_LIMIT as u64 {
            ops.push(delivery("s0", 10 * i, &[18]));
            ops.push(ack("s0", 10 * i + 1, &[18], true));
        }
        assert_eq!(count(&ops, Anomaly::DeliveredAfterLimit), 1);
    }

    #[test]
    fn an_acknowledged_send_never_delivered_and_a_start_offset_short_of_the_end_are_failures() {
        let ops = vec![
            sent(0, 0),
            sent(1, 1),
            delivery("s0", 10, &[0]),
            ack("s0", 11, &[0], true),
            drained(1, 1, 2),
        ];
        assert_eq!(count(&ops, Anomaly::Undelivered), 1);
        assert_eq!(count(&ops, Anomaly::Unsettled), 1);
        // Acknowledged without an offset: found by value in the final read, at offset 1.
        let mut no_offset = vec![sent(7, -1001)];
        no_offset.push(Op::Poll {
            process: FINAL_READER.into(),
            at_ms: 50,
            records: vec![crate::history::Read {
                partition: 0,
                offset: 1,
                value: "p0-7".into(),
            }],
        });
        assert_eq!(count(&no_offset, Anomaly::Undelivered), 0);
        no_offset.push(delivery("s0", 10, &[0]));
        assert_eq!(count(&no_offset, Anomaly::Undelivered), 1);
        no_offset.push(delivery("s1", 20, &[1]));
        assert_eq!(count(&no_offset, Anomaly::Undelivered), 0);
        // Without share ops (another workload) nothing is checked.
        assert_eq!(count(&[sent(0, 0)], Anomaly::Undelivered), 0);
    }

    #[test]
    fn the_tools_events_become_ops() {
        let consumed = r#"{"timestamp":1500,"name":"records_consumed","count":3,"partitions":[{"topic":"t","partition":2,"count":3,"offsets":[4,5,6]}]}"#;
        let acked = r#"{"timestamp":1600,"name":"offsets_acknowledged","count":1,"partitions":[{"topic":"t","partition":0,"count":1,"offsets":[7]}],"success":false,"error":"boom"}"#;
        let expected = [
            (
                consumed,
                Op::ShareDelivery {
                    process: "s1".into(),
                    at_ms: 500,
                    partition: 2,
                    offsets: vec![4, 5, 6],
                },
            ),
            (
                acked,
                Op::ShareAck {
                    process: "s1".into(),
                    at_ms: 600,
                    partition: 0,
                    offsets: vec![7],
                    success: false,
                    error: Some("boom".into()),
                },
            ),
        ];
        for (line, op) in expected {
            assert_eq!(parse_event(line, "s1", 1000), vec![op], "{line}");
        }
        assert!(parse_event(r#"{"timestamp":1,"name":"startup_complete"}"#, "s0", 0).is_empty());
        assert!(parse_event("not json", "s0", 0).is_empty());
    }
}
