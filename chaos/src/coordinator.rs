//! The coordinator nemesis: kills the transaction coordinator of a producer's
//! `transactional.id` while its EndTxn is in flight, and the group coordinator of the group
//! consumers' group during a rebalance. The coordinator is the node FindCoordinator names
//! (key type 1 for a transactional id, 0 for a group), asked just before the kill.
//!
//! When the kill lands:
//! - **EndTxn, SIGKILL on Brook**: a crash rule on the coordinator (`docs/FAULTS.md`), at
//!   [`TXN_CRASH_POINTS`] in turn: `txn-after-prepare-before-markers`, where the node dies
//!   once PrepareCommit/PrepareAbort is replicated, before it answers EndTxn and before any
//!   WriteTxnMarkers (the window Kafka's `TransactionCoordinator.endTransaction` leaves to
//!   `TransactionMarkerChannelManager`, which a new coordinator's `TransactionStateManager`
//!   load must complete), and `txn-after-marker`, where it dies with some markers written and
//!   no Complete record. The next EndTxn that coordinator serves fires it.
//! - **EndTxn otherwise** (SIGTERM, or Kafka, which has no fault API): the workload marks each
//!   `transactional.id` whose `commit_transaction` call is in flight
//!   ([`crate::workload::Progress::committing`]); the nemesis looks up those ids'
//!   coordinators and signals the first one whose producer is committing, at once.
//! - **Rebalance**: once every member holds an assignment (only such a member revokes), the
//!   joiner member comes or goes ([`crate::group::joiner`]), and the kill follows the first
//!   revocation another member gets: an eager member revokes when it learns of the
//!   rebalance and sends JoinGroup next, so the group is between JoinGroup and SyncGroup.
//!   The same on Brook and Kafka.
//!
//! After the kill the nemesis waits for FindCoordinator to name another node (the
//! coordinator's failover time is noted), keeps the node down for the step's `down_ms` and
//! starts it again.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use brook_protocol_tests::errors;
use brook_protocol_tests::wire::{WireClient, METADATA_V};
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::MetadataResponse;
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

use crate::group::group_id;
use crate::nemesis::{Nemesis, FAILOVER_TIMEOUT};
use crate::schedule::{KillSignal, Rebalance};
use crate::security::ClientSecurity;
use crate::share::share_group_id;
use crate::target::wait_for;

/// FindCoordinator's key type for a consumer group (Kafka's `CoordinatorType.GROUP`).
pub const KEY_TYPE_GROUP: i8 = 0;
/// FindCoordinator's key type for a transactional id (`CoordinatorType.TRANSACTION`).
pub const KEY_TYPE_TRANSACTION: i8 = 1;
/// FindCoordinator v3: one key, a node id in the answer (every Kafka 4.x serves it).
const FIND_COORDINATOR_V: i16 = 3;
/// Bound on one FindCoordinator call.
const FIND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a step may wait for a producer to be committing, or for a rebalance to begin.
pub const MOMENT_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the group may take to assign after the joiner came or went before the step.
const REBALANCE_TIMEOUT: Duration = Duration::from_secs(30);
/// The crash points a SIGKILL of a transaction coordinator uses on Brook, one after the
/// other.
pub const TXN_CRASH_POINTS: [&str; 2] = ["txn-after-prepare-before-markers", "txn-after-marker"];
/// How often the nemesis looks at which producers are committing (a commit takes a few ms).
const COMMITTING_POLL: Duration = Duration::from_millis(1);

/// The coordinator of `key` as the first node that answers FindCoordinator names it: its node
/// id and `host:port`.
pub fn find_coordinator(
    bootstrap: &str,
    security: &ClientSecurity,
    key: &str,
    key_type: i8,
) -> Result<(i32, String), String> {
    let mut req = FindCoordinatorRequest::default();
    req.key = StrBytes::from_string(key.to_string());
    req.key_type = key_type;
    let mut failures = Vec::new();
    for addr in bootstrap.split(',') {
        let answer = security
            .connect(addr, FIND_TIMEOUT)
            .and_then(|mut c| c.try_request(FIND_COORDINATOR_V, &req));
        match answer {
            Ok(r) if r.error_code == errors::NONE => {
                return Ok((r.node_id.0, format!("{}:{}", r.host.as_str(), r.port)))
            }
            Ok(r) => failures.push(format!("{addr}: error {}", r.error_code)),
            Err(e) => failures.push(format!("{addr}: {e}")),
        }
    }
    Err(format!(
        "FindCoordinator({key}, key type {key_type}): {}",
        failures.join("; ")
    ))
}

impl Nemesis<'_> {
    /// The node `key`'s coordinator is on, as the first node that answers says.
    fn find_coordinator(&self, key: &str, key_type: i8) -> Result<i32, String> {
        let security = self.target.client_security();
        find_coordinator(&self.target.bootstrap(), &security, key, key_type).map(|(n, _)| n)
    }

    /// `key`'s coordinator once it is on a node other than `dead` (and live), within
    /// [`FAILOVER_TIMEOUT`]; noted either way.
    fn await_coordinator_moved(&mut self, key: &str, key_type: i8, dead: i32, died: Instant) {
        let moved = wait_for(FAILOVER_TIMEOUT, || {
            self.find_coordinator(key, key_type)
                .is_ok_and(|n| n != dead)
        });
        let node = self.find_coordinator(key, key_type).unwrap_or(-1);
        self.note(match moved {
            true => format!(
                "coordinator of {key} on node {node} after {} ms",
                died.elapsed().as_millis()
            ),
            false => format!("coordinator of {key} not moved within {FAILOVER_TIMEOUT:?}"),
        });
    }

    fn signal_node(&mut self, node: i32, signal: KillSignal) -> Result<(), String> {
        match signal {
            KillSignal::Kill => self.target.kill(node),
            KillSignal::Term => self.target.terminate(node),
        }
    }

    /// Keeps `node` down until `down_ms` after `died`, then starts it.
    fn restart_after(&mut self, node: i32, died: Instant, down_ms: u64) -> Result<(), String> {
        // The schedule's down time, counted from the death: part of the fault.
        std::thread::sleep(Duration::from_millis(down_ms).saturating_sub(died.elapsed()));
        self.target.start(node)?;
        self.note(format!("node {node} started"));
        Ok(())
    }

    pub(crate) fn kill_txn_coordinator(
        &mut self,
        signal: KillSignal,
        down_ms: u64,
    ) -> Result<(), String> {
        let (id, node) = match signal {
            KillSignal::Kill => match self.crash_txn_coordinator()? {
                Some(killed) => killed,
                None => self.signal_committing_coordinator(signal)?,
            },
            KillSignal::Term => self.signal_committing_coordinator(signal)?,
        };
        let died = Instant::now();
        self.stats.txn_coordinator_kills += 1;
        self.await_coordinator_moved(&id, KEY_TYPE_TRANSACTION, node, died);
        self.restart_after(node, died, down_ms)
    }

    /// The transactional ids being committed now (waiting up to [`MOMENT_TIMEOUT`] for one).
    fn committing(&self) -> Result<Vec<String>, String> {
        let mut ids = Vec::new();
        let found = wait_for(MOMENT_TIMEOUT, || {
            let set = self
                .progress
                .committing
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            ids = set.iter().cloned().collect();
            !ids.is_empty()
        });
        if found {
            Ok(ids)
        } else {
            Err(format!("no producer committed within {MOMENT_TIMEOUT:?}"))
        }
    }

    /// Brook: a crash rule at `txn-after-prepare-before-markers` on a committing producer's
    /// coordinator; `Some((id, node))` once it fired, `None` when the target has no fault API
    /// (or it did not fire: then the rule is cleared and the signal path runs).
    fn crash_txn_coordinator(&mut self) -> Result<Option<(String, i32)>, String> {
        let id = self.committing()?.remove(0);
        let node = self.find_coordinator(&id, KEY_TYPE_TRANSACTION)?;
        let point =
            TXN_CRASH_POINTS[self.stats.txn_coordinator_kills as usize % TXN_CRASH_POINTS.len()];
        let rule = json!({"action": "crash", "point": point});
        let Some(rule_id) = self.target.add_rule(node, rule.clone())? else {
            self.stats.mapped += 1;
            self.note(format!(
                "no fault API on {}: the EndTxn crash point becomes a SIGKILL during a commit",
                self.target.name()
            ));
            return Ok(None);
        };
        self.note(format!(
            "node {node} (transaction coordinator of {id}): rule {rule_id} {rule}"
        ));
        let crashed = wait_for(MOMENT_TIMEOUT, || matches!(self.target.pid(node), Ok(None)));
        if !crashed {
            self.target.clear_rules(node)?;
            self.note(format!(
                "node {node}: no EndTxn reached the crash point within {MOMENT_TIMEOUT:?}"
            ));
            return Ok(None);
        }
        self.note(format!(
            "node {node} crashed at {point} (an EndTxn in flight)"
        ));
        Ok(Some((id, node)))
    }

    /// Signals the coordinator of the first producer seen committing, while it commits.
    fn signal_committing_coordinator(
        &mut self,
        signal: KillSignal,
    ) -> Result<(String, i32), String> {
        let mut coordinators: BTreeMap<String, i32> = BTreeMap::new();
        let deadline = Instant::now() + MOMENT_TIMEOUT;
        while Instant::now() < deadline {
            let now: Vec<String> = self
                .progress
                .committing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned()
                .collect();
            if let Some((id, node)) = now
                .iter()
                .find_map(|id| coordinators.get(id).map(|n| (id.clone(), *n)))
            {
                self.note(format!(
                    "{signal:?} node {node}: transaction coordinator of {id}, its commit in flight"
                ));
                self.signal_node(node, signal)?;
                return Ok((id, node));
            }
            // Learn the coordinators of ids seen committing; the next commit of one is the
            // moment (a lookup outlasts the commit that showed the id).
            for id in now {
                if coordinators.contains_key(&id) {
                    continue;
                }
                if let Ok(node) = self.find_coordinator(&id, KEY_TYPE_TRANSACTION) {
                    coordinators.insert(id, node);
                }
            }
            std::thread::sleep(COMMITTING_POLL);
        }
        Err(format!(
            "no commit in flight to a known coordinator within {MOMENT_TIMEOUT:?}"
        ))
    }

    /// Waits (up to [`REBALANCE_TIMEOUT`]) until every group member holds an assignment:
    /// an eager librdkafka member that holds none when a rebalance begins (the group's first
    /// generation still forming, or a member that lost its assignment to a session timeout
    /// after an earlier coordinator failover) rejoins without a revocation, so a rebalance
    /// started then shows the nemesis no revocation at all.
    fn await_members_holding(&mut self, group: &str) {
        let p = self.progress;
        let all_hold = || {
            let started = p.members_started.load(Ordering::Relaxed);
            started > 0 && p.members_holding.load(Ordering::Relaxed) == started
        };
        if all_hold() {
            return;
        }
        let since = Instant::now();
        let held = wait_for(REBALANCE_TIMEOUT, all_hold);
        self.note(format!(
            "group {group}: every member assigned after {} ms: {held}",
            since.elapsed().as_millis()
        ));
    }

    pub(crate) fn kill_group_coordinator(
        &mut self,
        signal: KillSignal,
        rebalance: Rebalance,
        down_ms: u64,
    ) -> Result<(), String> {
        let group = group_id(&self.topic);
        let joiner = &self.progress.joiner_wanted;
        // The joiner must be out of the group to join it, in it to leave it.
        let in_before = rebalance == Rebalance::Leave;
        if joiner.load(Ordering::Relaxed) != in_before {
            let assigned = self.progress.assignments.load(Ordering::Relaxed);
            joiner.store(in_before, Ordering::Relaxed);
            let done = wait_for(REBALANCE_TIMEOUT, || {
                self.progress.assignments.load(Ordering::Relaxed) > assigned
            });
            self.note(format!(
                "group {group}: joiner {} before the step (rebalanced: {done})",
                if in_before { "in" } else { "out" }
            ));
        }
        self.await_members_holding(&group);
        let node = self.find_coordinator(&group, KEY_TYPE_GROUP)?;
        let begun = self.progress.rebalances.load(Ordering::Relaxed);
        joiner.store(!in_before, Ordering::Relaxed);
        let revoked = wait_for(MOMENT_TIMEOUT, || {
            self.progress.rebalances.load(Ordering::Relaxed) > begun
        });
        if !revoked {
            return Err(format!(
                "group {group}: no member revoked within {MOMENT_TIMEOUT:?} of a {rebalance:?}"
            ));
        }
        self.note(format!(
            "{signal:?} node {node}: group coordinator of {group}, during the rebalance of a {rebalance:?}"
        ));
        self.signal_node(node, signal)?;
        let died = Instant::now();
        self.stats.group_coordinator_kills += 1;
        self.await_coordinator_moved(&group, KEY_TYPE_GROUP, node, died);
        self.restart_after(node, died, down_ms)
    }
}

/// `String.hashCode` of Java, over UTF-16 code units.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// A topic id as Kafka's `Uuid.toString` prints it: URL-safe base64, no padding.
pub fn kafka_uuid(id: &[u8; 16]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

/// The `__share_group_state` partition of a coordinator key, as Kafka's
/// `ShareCoordinatorService.partitionFor` computes it: `Utils.abs(key.hashCode()) %
/// numPartitions`, the key being `SharePartitionKey.asCoordinatorKey()`,
/// `groupId:topicId:partition`.
pub fn share_state_partition(coordinator_key: &str, n: i32) -> i32 {
    let h = java_string_hash(coordinator_key);
    // Kafka's Utils.abs: Integer.MIN_VALUE maps to 0.
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % n.max(1)
}

/// The share coordinator's topic.
pub const SHARE_STATE_TOPIC: &str = "__share_group_state";

impl Nemesis<'_> {
    /// One Metadata answer for `topics` from the first node that gives one.
    fn wire_metadata(&self, topics: &[&str]) -> Result<MetadataResponse, String> {
        let req = WireClient::metadata_request(topics, false);
        let security = self.target.client_security();
        let mut failures = Vec::new();
        for addr in self.target.bootstrap().split(',') {
            match security
                .connect(addr, FIND_TIMEOUT)
                .and_then(|mut c| c.try_request(METADATA_V, &req))
            {
                Ok(r) => return Ok(r),
                Err(e) => failures.push(e),
            }
        }
        Err(format!("metadata: {}", failures.join("; ")))
    }

    /// The share coordinator of the run's share group for `partition`: the
    /// `__share_group_state` partition its key hashes to, and that partition's leader.
    fn share_coordinator(&self, partition: i32) -> Result<(String, i32, i32), String> {
        let md = self.wire_metadata(&[&self.topic, SHARE_STATE_TOPIC])?;
        let find = |name: &str| {
            md.topics
                .iter()
                .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == name) && t.error_code == 0)
                .ok_or_else(|| format!("metadata lists no topic {name}"))
        };
        let (topic, state) = (find(&self.topic)?, find(SHARE_STATE_TOPIC)?);
        let group = share_group_id(&self.topic);
        let n = state.partitions.len() as i32;
        let key = format!(
            "{group}:{}:{partition}",
            kafka_uuid(topic.topic_id.as_bytes())
        );
        let index = share_state_partition(&key, n);
        let leader = state
            .partitions
            .iter()
            .find(|p| p.partition_index == index)
            .map_or(-1, |p| p.leader_id.0);
        Ok((key, index, leader))
    }

    /// Kills the share coordinator of the share-partition `partition` while the share
    /// consumers acknowledge (an acknowledgement's WriteShareGroupState goes to it), waits
    /// for `__share_group_state` to have another leader there, keeps the node down
    /// `down_ms` and starts it again.
    pub(crate) fn kill_share_coordinator(
        &mut self,
        signal: KillSignal,
        partition: i32,
        down_ms: u64,
    ) -> Result<(), String> {
        let (key, index, node) = self.share_coordinator(partition)?;
        if node < 0 {
            return Err(format!("{SHARE_STATE_TOPIC}-{index} has no leader"));
        }
        let acks = self.progress.share_acks.load(Ordering::Relaxed);
        let acking = wait_for(MOMENT_TIMEOUT, || {
            self.progress.share_acks.load(Ordering::Relaxed) > acks
        });
        self.note(format!(
            "{signal:?} node {node}: share coordinator of {key} ({SHARE_STATE_TOPIC}-{index}), share consumers acknowledging: {acking}"
        ));
        self.signal_node(node, signal)?;
        let died = Instant::now();
        self.stats.share_coordinator_kills += 1;
        let moved = wait_for(FAILOVER_TIMEOUT, || {
            self.share_coordinator(partition)
                .is_ok_and(|(_, _, n)| n >= 0 && n != node)
        });
        self.note(format!(
            "{SHARE_STATE_TOPIC}-{index} led by another node: {moved}, after {} ms",
            died.elapsed().as_millis()
        ));
        self.restart_after(node, died, down_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_state_partition_is_kafkas() {
        // java.lang.String#hashCode values.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // Kafka's Uuid.toString of the bytes 0..16, URL-safe base64 without padding.
        let id: [u8; 16] = std::array::from_fn(|i| i as u8);
        assert_eq!(kafka_uuid(&id), "AAECAwQFBgcICQoLDA0ODw");
        // abs("hello".hashCode()) % 50 = 99162322 % 50 = 22; MIN_VALUE's abs is 0.
        assert_eq!(share_state_partition("hello", 50), 22);
        assert_eq!(share_state_partition("polygenelubricants", 50), 0);
    }
}
