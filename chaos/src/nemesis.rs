//! The nemesis: applies the schedule's steps to a [`Target`] one after the other, while the
//! clients run, and heals after each. Every fault applied and healed is an [`Op::Nemesis`] in
//! the history.
//!
//! Leaders and ISRs come from Metadata (librdkafka's), at the moment a step starts. On Kafka,
//! which has no fault API, a step that needs one is mapped to what a process can do, and the
//! history says so: an ISR cut becomes a SIGSTOP of the follower for as long (a paused
//! follower falls out of the ISR the same way and rejoins when resumed), a crash point
//! becomes a SIGKILL of the leader under load, and link delays are left out. The coordinator
//! kills are in [`crate::coordinator`].
//!
//! [`Op::Nemesis`]: crate::history::Op::Nemesis

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use brook_protocol_tests::rd;
use nix::sys::signal::Signal;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde::Serialize;
use serde_json::json;

use crate::history::History;
use crate::schedule::{Role, Step};
use crate::target::{signal, wait_for, Target};
use crate::workload::Progress;

/// How long a partition may take to elect a leader other than the one killed.
pub const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the cluster may take to have every node up and every ISR full: at the start, at
/// the end, and after a step unless the run says otherwise (`RunConfig::settle_secs`).
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the clients may take to get this many more acknowledgements before a kill (so it
/// lands mid-ack).
pub const PROGRESS_TIMEOUT: Duration = Duration::from_secs(15);
pub const PROGRESS_ACKS: u64 = 50;
/// How long a crash rule may take to fire.
pub const CRASH_TIMEOUT: Duration = Duration::from_secs(20);
/// Bound on one Metadata request.
const METADATA_TIMEOUT: Duration = Duration::from_secs(5);

/// What the nemesis did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NemesisStats {
    pub steps: u64,
    /// SIGKILLs of a partition leader, and crash points that fired on one.
    pub leader_kills: u64,
    pub pauses: u64,
    pub isr_cuts: u64,
    pub crash_points: u64,
    pub link_delays: u64,
    /// Steps mapped to another fault, or skipped, because the target has no fault API.
    pub mapped: u64,
    /// Steps after which the cluster did not settle in time, or the
    /// clients made no progress: availability, not safety, but worth a look.
    pub unsettled: u64,
    /// Steps that could not be applied as drawn (a partition without a leader, a crash point
    /// that no produce reached).
    pub skipped: u64,
    /// Sum of the times from a leader's death to Metadata naming another leader.
    pub failover_ms_total: u64,
    /// Transaction coordinators killed (SIGKILL, SIGTERM or a crash point) while an EndTxn
    /// was in flight.
    pub txn_coordinator_kills: u64,
    /// Group coordinators killed during a rebalance.
    pub group_coordinator_kills: u64,
    /// Share coordinators killed while the share consumers acknowledged.
    pub share_coordinator_kills: u64,
}

/// One partition as Metadata describes it.
#[derive(Debug, Clone)]
pub struct PartitionView {
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

pub struct Nemesis<'a> {
    pub(crate) target: &'a mut dyn Target,
    meta: BaseConsumer,
    pub(crate) topic: String,
    /// The topic's partition count: Metadata must list them all.
    partitions: usize,
    pub(crate) history: History,
    pub(crate) progress: &'a Progress,
    pub stats: NemesisStats,
    /// Problems applying steps (the run proves less when there are any).
    pub errors: Vec<String>,
}

impl<'a> Nemesis<'a> {
    pub fn new(
        target: &'a mut dyn Target,
        topic: &str,
        partitions: i32,
        history: History,
        progress: &'a Progress,
    ) -> Nemesis<'a> {
        let security = target.client_security();
        let meta = rd::consumer(&target.bootstrap(), &security.rdkafka());
        Nemesis {
            target,
            meta,
            topic: topic.to_string(),
            partitions: partitions.max(0) as usize,
            history,
            progress,
            stats: NemesisStats::default(),
            errors: Vec::new(),
        }
    }

    pub(crate) fn note(&self, event: String) {
        self.history.nemesis(event);
    }

    /// Every partition's state, from one Metadata answer.
    pub fn partitions(&self) -> Result<Vec<PartitionView>, String> {
        let md = self
            .meta
            .fetch_metadata(Some(&self.topic), METADATA_TIMEOUT)
            .map_err(|e| format!("metadata: {e}"))?;
        let t = md
            .topics()
            .iter()
            .find(|t| t.name() == self.topic)
            .ok_or_else(|| format!("metadata lists no topic {}", self.topic))?;
        // A broker that has not applied the topic's creation yet answers
        // UNKNOWN_TOPIC_OR_PARTITION with no partitions: not an answer about the partitions.
        if let Some(e) = t.error() {
            return Err(format!("metadata of topic {}: error {e:?}", self.topic));
        }
        let mut parts: Vec<_> = t
            .partitions()
            .iter()
            .map(|p| {
                (
                    p.id(),
                    PartitionView {
                        leader: p.leader(),
                        replicas: p.replicas().to_vec(),
                        isr: p.isr().to_vec(),
                    },
                )
            })
            .collect();
        parts.sort_by_key(|(id, _)| *id);
        Ok(parts.into_iter().map(|(_, v)| v).collect())
    }

    fn partition(&self, p: i32) -> Result<PartitionView, String> {
        self.partitions()?
            .into_iter()
            .nth(p as usize)
            .ok_or_else(|| format!("metadata lists no partition {p}"))
    }

    /// The partition once it has a leader (waiting up to [`FAILOVER_TIMEOUT`]); `None`, and
    /// the step counted as skipped, when it has none: a step acts on a leader and its
    /// followers, and an offline partition is an availability fact, not a safety one.
    fn led(&mut self, partition: i32) -> Result<Option<PartitionView>, String> {
        // The view that showed the leader: another Metadata answer may come from a node that
        // lags behind it.
        let mut led = None;
        wait_for(FAILOVER_TIMEOUT, || {
            led = self.partition(partition).ok().filter(|p| p.leader >= 0);
            led.is_some()
        });
        if led.is_some() {
            return Ok(led);
        }
        self.stats.skipped += 1;
        self.note(format!(
            "partition {partition} has no leader after {FAILOVER_TIMEOUT:?}: step skipped"
        ));
        Ok(None)
    }

    /// Waits until Metadata lists every node as a broker (a cluster's READY comes before its
    /// brokers are registered).
    pub fn await_brokers(&self, timeout: Duration) -> Result<(), String> {
        let want = self.target.node_ids().len();
        let listed = || {
            self.meta
                .fetch_metadata(None, METADATA_TIMEOUT)
                .map(|md| md.brokers().len())
        };
        if wait_for(timeout, || listed().is_ok_and(|n| n >= want)) {
            Ok(())
        } else {
            Err(format!(
                "Metadata does not list {want} brokers within {timeout:?}: {:?}",
                listed()
            ))
        }
    }

    /// Waits until every node runs and every partition has a live leader and a full ISR.
    pub fn settle(&mut self, timeout: Duration) -> bool {
        let ids = self.target.node_ids();
        let settled = wait_for(timeout, || {
            let up = ids
                .iter()
                .all(|id| matches!(self.target.pid(*id), Ok(Some(_))));
            up && self.partitions().is_ok_and(|ps| {
                ps.len() == self.partitions
                    && ps
                        .iter()
                        .all(|p| p.leader >= 0 && p.isr.len() == p.replicas.len())
            })
        });
        if !settled {
            self.stats.unsettled += 1;
            let state = self.partitions().map(|ps| format!("{ps:?}"));
            self.note(format!("not settled within {timeout:?}: {state:?}"));
        }
        settled
    }

    /// Waits until the clients got [`PROGRESS_ACKS`] more acknowledgements.
    fn await_progress(&mut self) {
        let acked = || self.progress.acknowledged.load(Ordering::Relaxed);
        let from = acked();
        if !wait_for(PROGRESS_TIMEOUT, || acked() >= from + PROGRESS_ACKS) {
            self.stats.unsettled += 1;
            self.note(format!(
                "the clients got fewer than {PROGRESS_ACKS} acknowledgements in {PROGRESS_TIMEOUT:?}"
            ));
        }
    }

    /// Applies one step and heals it. Errors are recorded, not returned: the run goes on.
    pub fn run_step(&mut self, n: usize, step: &Step, settle: Duration) {
        self.stats.steps += 1;
        self.note(format!(
            "step {n}: {}",
            serde_json::to_string(step).unwrap_or_default()
        ));
        if let Err(e) = self.apply(step) {
            self.note(format!("step {n} failed: {e}"));
            self.errors.push(format!("step {n} ({step:?}): {e}"));
        }
        self.heal();
        self.settle(settle);
    }

    fn apply(&mut self, step: &Step) -> Result<(), String> {
        match step {
            Step::KillLeader {
                partition,
                lag_ms,
                down_ms,
            } => self.kill_leader(*partition, *lag_ms, *down_ms),
            Step::Pause {
                partition,
                role,
                pause_ms,
            } => self.pause(*partition, *role, *pause_ms),
            Step::IsrChurn {
                partition,
                cut_ms,
                controller_delay_ms,
                kill_after_ms,
            } => self.isr_churn(*partition, *cut_ms, *controller_delay_ms, *kill_after_ms),
            Step::CrashPoint { partition, point } => self.crash_point(*partition, point),
            Step::DelayReplication {
                partition,
                delay_ms,
                for_ms,
            } => self.delay_replication(*partition, *delay_ms, *for_ms),
            Step::KillTxnCoordinator { signal, down_ms } => {
                self.kill_txn_coordinator(*signal, *down_ms)
            }
            Step::KillGroupCoordinator {
                signal,
                rebalance,
                down_ms,
            } => self.kill_group_coordinator(*signal, *rebalance, *down_ms),
            Step::KillShareCoordinator {
                signal,
                partition,
                down_ms,
            } => self.kill_share_coordinator(*signal, *partition, *down_ms),
        }
    }

    /// A link rule on `node`, or `None` (noted as mapped) when the target has no fault API.
    fn link_rule(&mut self, node: i32, rule: serde_json::Value) -> Result<Option<u64>, String> {
        let id = self.target.add_rule(node, rule.clone())?;
        match id {
            Some(id) => self.note(format!("node {node}: rule {id} {rule}")),
            None => {
                self.stats.mapped += 1;
                self.note(format!(
                    "node {node}: no fault API on {}: left out {rule}",
                    self.target.name()
                ));
            }
        }
        Ok(id)
    }

    /// SIGKILL `node` (the leader of `partition`), wait for another leader, keep it down
    /// `down_ms`, start it again.
    fn kill_and_restart(&mut self, partition: i32, node: i32, down_ms: u64) -> Result<(), String> {
        self.target.kill(node)?;
        self.note(format!(
            "SIGKILL node {node} (leader of partition {partition})"
        ));
        self.stats.leader_kills += 1;
        self.after_leader_death(partition, node, down_ms)
    }

    pub(crate) fn after_leader_death(
        &mut self,
        partition: i32,
        node: i32,
        down_ms: u64,
    ) -> Result<(), String> {
        let died = Instant::now();
        let moved = wait_for(FAILOVER_TIMEOUT, || {
            self.partition(partition)
                .is_ok_and(|p| p.leader >= 0 && p.leader != node)
        });
        let elected = died.elapsed();
        if moved {
            self.stats.failover_ms_total += elected.as_millis() as u64;
            let leader = self.partition(partition).map(|p| p.leader).unwrap_or(-1);
            self.note(format!(
                "partition {partition}: node {leader} leads after {} ms",
                elected.as_millis()
            ));
        } else {
            self.note(format!(
                "partition {partition}: no other leader within {FAILOVER_TIMEOUT:?}"
            ));
        }
        // The schedule's down time, counted from the death: part of the fault, not a wait
        // for a condition.
        std::thread::sleep(Duration::from_millis(down_ms).saturating_sub(died.elapsed()));
        self.target.start(node)?;
        self.note(format!("node {node} started"));
        Ok(())
    }

    fn kill_leader(
        &mut self,
        partition: i32,
        lag_ms: Option<u64>,
        down_ms: u64,
    ) -> Result<(), String> {
        let Some(leader) = self.led(partition)?.map(|p| p.leader) else {
            return Ok(());
        };
        if let Some(lag) = lag_ms {
            // Hold the followers' fetches at the leader: they trail it by `lag` when it dies.
            let rule = json!({"kind": "link", "action": "delay", "delay_ms": lag,
                              "to": "*", "direction": "in", "traffic": "replication"});
            if self.link_rule(leader, rule)?.is_some() {
                std::thread::sleep(Duration::from_millis(2 * lag));
            }
        }
        self.await_progress();
        self.kill_and_restart(partition, leader, down_ms)
    }

    fn pause(&mut self, partition: i32, role: Role, pause_ms: u64) -> Result<(), String> {
        let Some(p) = self.led(partition)? else {
            return Ok(());
        };
        let node = match role {
            Role::Leader => p.leader,
            Role::Follower => *p
                .replicas
                .iter()
                .find(|r| **r != p.leader)
                .ok_or("no follower")?,
        };
        self.pause_node(
            node,
            pause_ms,
            &format!("{role:?} of partition {partition}"),
        )
    }

    fn pause_node(&mut self, node: i32, pause_ms: u64, what: &str) -> Result<(), String> {
        let pid = self
            .target
            .pid(node)?
            .ok_or_else(|| format!("node {node} does not run"))?;
        signal(pid, Signal::SIGSTOP)?;
        self.note(format!("SIGSTOP node {node} ({what}) for {pause_ms} ms"));
        self.stats.pauses += 1;
        std::thread::sleep(Duration::from_millis(pause_ms));
        signal(pid, Signal::SIGCONT)?;
        self.note(format!("SIGCONT node {node}"));
        Ok(())
    }

    fn isr_churn(
        &mut self,
        partition: i32,
        cut_ms: u64,
        controller_delay_ms: u64,
        kill_after_ms: u64,
    ) -> Result<(), String> {
        let Some(p) = self.led(partition)? else {
            return Ok(());
        };
        let leader = p.leader;
        // A follower in the ISR (the cut makes it leave); else any other replica.
        let follower = *p
            .isr
            .iter()
            .chain(&p.replicas)
            .find(|r| **r != leader)
            .ok_or("no replica other than the leader")?;
        let cut = json!({"kind": "link", "action": "partition", "to": follower,
                         "direction": "both", "traffic": "replication"});
        self.stats.isr_cuts += 1;
        match self.target.add_rule(leader, cut.clone())? {
            Some(cut_id) => {
                self.note(format!("node {leader}: rule {cut_id} {cut} (cut follower {follower} off for {cut_ms} ms)"));
                std::thread::sleep(Duration::from_millis(cut_ms));
                let slow = json!({"kind": "link", "action": "delay", "delay_ms": controller_delay_ms,
                                  "to": "*", "direction": "out", "traffic": "controller"});
                self.link_rule(leader, slow)?;
                self.target.remove_rule(leader, cut_id)?;
                self.note(format!(
                    "node {leader}: rule {cut_id} removed (follower {follower} catches up)"
                ));
            }
            None => {
                self.stats.mapped += 1;
                self.note(format!(
                    "no fault API on {}: the cut becomes a pause",
                    self.target.name()
                ));
                self.pause_node(
                    follower,
                    cut_ms,
                    &format!("follower of partition {partition}, cut off"),
                )?;
            }
        }
        std::thread::sleep(Duration::from_millis(kill_after_ms));
        let isr = self.partition(partition).map(|p| p.isr);
        self.note(format!(
            "partition {partition}: ISR {isr:?} as the leader dies"
        ));
        self.kill_and_restart(partition, leader, 0)
    }

    fn crash_point(&mut self, partition: i32, point: &str) -> Result<(), String> {
        let Some(leader) = self.led(partition)?.map(|p| p.leader) else {
            return Ok(());
        };
        let rule =
            json!({"action": "crash", "point": point, "topic": self.topic, "partition": partition});
        match self.target.add_rule(leader, rule.clone())? {
            Some(id) => {
                self.note(format!("node {leader}: rule {id} {rule}"));
                let crashed = wait_for(CRASH_TIMEOUT, || {
                    matches!(self.target.pid(leader), Ok(None))
                });
                if !crashed {
                    // The leader moved before a produce reached the point: nothing to heal.
                    self.target.clear_rules(leader)?;
                    self.stats.skipped += 1;
                    self.note(format!(
                        "crash point {point} did not fire within {CRASH_TIMEOUT:?}: step skipped"
                    ));
                    return Ok(());
                }

                self.note(format!("node {leader} crashed at {point}"));
                self.stats.crash_points += 1;
                self.stats.leader_kills += 1;
                self.after_leader_death(partition, leader, 0)
            }
            None => {
                self.stats.mapped += 1;
                self.note(format!(
                    "no fault API on {}: crash point {point} becomes a SIGKILL of the leader",
                    self.target.name()
                ));
                self.await_progress();
                self.kill_and_restart(partition, leader, 0)
            }
        }
    }

    fn delay_replication(
        &mut self,
        partition: i32,
        delay_ms: u64,
        for_ms: u64,
    ) -> Result<(), String> {
        let Some(leader) = self.led(partition)?.map(|p| p.leader) else {
            return Ok(());
        };
        let rule = json!({"kind": "link", "action": "delay", "delay_ms": delay_ms,
                          "to": "*", "direction": "both", "traffic": "replication"});
        if let Some(id) = self.link_rule(leader, rule)? {
            self.stats.link_delays += 1;
            std::thread::sleep(Duration::from_millis(for_ms));
            self.target.remove_rule(leader, id)?;
            self.note(format!("node {leader}: rule {id} removed"));
        }
        Ok(())
    }

    /// Resumes paused nodes, starts dead ones, clears every rule.
    pub fn heal(&mut self) {
        for id in self.target.node_ids() {
            match self.target.pid(id) {
                Ok(Some(pid)) => {
                    let _ = signal(pid, Signal::SIGCONT);
                    if let Err(e) = self.target.clear_rules(id) {
                        self.note(format!("heal: node {id}: {e}"));
                    }
                }
                Ok(None) => match self.target.start(id) {
                    Ok(()) => self.note(format!("heal: node {id} started")),
                    Err(e) => {
                        self.note(format!("heal: node {id}: {e}"));
                        self.errors.push(format!("heal: start node {id}: {e}"));
                    }
                },
                Err(e) => self.note(format!("heal: node {id}: {e}")),
            }
        }
    }
}
