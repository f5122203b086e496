//! The metadata quorum as DescribeQuorum shows it (Kafka's `LeaderState.describeQuorum` and
//! `RaftUtil.singletonDescribeQuorumResponse`).
//!
//! Only the Raft leader knows its followers' progress, so only the leader describes the
//! quorum (`describe_as_leader`); other nodes forward to it, as a Kafka broker forwards
//! DescribeQuorum to the active controller.
//!
//! Offsets: Kafka offsets of the metadata log are Brook's Raft log indexes (the first entry,
//! the initial membership, is index 0). A log end offset is the last index plus one, and the
//! high watermark the committed index plus one, so both count entries as Kafka's do.
//!
//! Timestamps: openraft pushes AppendEntries rather than being fetched from, so a follower's
//! "fetch" is an AppendEntries (or heartbeat) it accepted. [`FollowerClocks`] records, per
//! follower and leader term, when that last happened and when the follower last reached the
//! leader's log end offset as it was when the request was sent (Kafka's `lastCaughtUpTimestamp`).

use std::collections::HashMap;

use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
use openraft::ServerState;
use serde::{Deserialize, Serialize};

use super::{ControllerError, Inner, NodeId, TypeConfig};
use crate::clock::now_ms;

/// Kafka's "unknown" for offsets and timestamps of a replica.
pub const UNKNOWN: i64 = -1;

/// One replica of the metadata log as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumReplica {
    pub replica_id: i32,
    /// Its recorded directory id (Kafka's `ReplicaKey`); the zero uuid if none.
    #[serde(default)]
    pub directory_id: uuid::Uuid,
    /// [`UNKNOWN`] until the follower has matched an entry in this term.
    pub log_end_offset: i64,
    /// Leader wall clock, ms; [`UNKNOWN`] if not seen in this term.
    pub last_fetch_timestamp_ms: i64,
    /// Leader wall clock, ms; [`UNKNOWN`] if not caught up in this term.
    pub last_caught_up_timestamp_ms: i64,
}

/// A voter's controller listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumEndpoint {
    pub node_id: i32,
    pub listener: String,
    pub host: String,
    pub port: u16,
}

/// The leader's description of the metadata quorum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumDescription {
    pub leader_id: i32,
    /// The Raft term.
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<QuorumReplica>,
    /// Raft learners: nodes that joined through `controller.quorum.bootstrap.servers` and
    /// are not (or no longer) voters.
    pub observers: Vec<QuorumReplica>,
    pub endpoints: Vec<QuorumEndpoint>,
}

#[derive(Debug, Clone, Copy)]
struct FollowerClock {
    term: u64,
    last_fetch_ms: i64,
    last_caught_up_ms: i64,
}

impl FollowerClock {
    fn unknown(term: u64) -> Self {
        FollowerClock {
            term,
            last_fetch_ms: UNKNOWN,
            last_caught_up_ms: UNKNOWN,
        }
    }
}

/// When each follower last accepted the leader's AppendEntries, and last caught up. One entry
/// per Raft peer: bounded by the membership, never by traffic.
#[derive(Default)]
pub struct FollowerClocks {
    by_node: parking_lot::Mutex<HashMap<NodeId, FollowerClock>>,
}

impl FollowerClocks {
    /// Records the answer to one AppendEntries sent at `sent_ms`, when the leader's log ended
    /// at index `leader_last_index`.
    pub fn record(
        &self,
        target: NodeId,
        rpc: &AppendEntriesRequest<TypeConfig>,
        sent_ms: i64,
        leader_last_index: Option<u64>,
        answer: &AppendEntriesResponse<NodeId>,
    ) {
        let matched = match answer {
            AppendEntriesResponse::Success => rpc
                .entries
                .last()
                .map(|e| e.log_id.index)
                .or(rpc.prev_log_id.map(|l| l.index)),
            AppendEntriesResponse::PartialSuccess(m) => m.map(|l| l.index),
            AppendEntriesResponse::Conflict | AppendEntriesResponse::HigherVote(_) => return,
        };
        let term = rpc.vote.leader_id().term;
        let mut clocks = self.by_node.lock();
        let clock = clocks
            .entry(target)
            .or_insert_with(|| FollowerClock::unknown(term));
        if clock.term != term {
            // A new leadership starts every follower unknown, as Kafka's new LeaderState does.
            *clock = FollowerClock::unknown(term);
        }
        clock.last_fetch_ms = clock.last_fetch_ms.max(now_ms());
        if matched >= leader_last_index {
            clock.last_caught_up_ms = clock.last_caught_up_ms.max(sent_ms);
        }
    }

    /// `(last fetch, last caught up)` of `node` in `term`.
    fn get(&self, node: NodeId, term: u64) -> (i64, i64) {
        match self.by_node.lock().get(&node) {
            Some(c) if c.term == term => (c.last_fetch_ms, c.last_caught_up_ms),
            _ => (UNKNOWN, UNKNOWN),
        }
    }
}

/// Kafka offset after Raft index `index`.
fn offset_after(index: Option<u64>) -> i64 {
    index.map_or(0, |i| {
        i64::try_from(i).unwrap_or(i64::MAX).saturating_add(1)
    })
}

/// This node's own view of the metadata quorum, as Kafka's `raft-metrics` group
/// (`KafkaRaftMetrics`) shows it
/// on every node (`current-state`, `current-leader`, `current-epoch`, `log-end-offset`,
/// `high-watermark`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalQuorumState {
    /// Kafka's state names: `leader`, `candidate`, `follower`, `observer` (a learner);
    /// `shutdown` once openraft stopped.
    pub state: &'static str,
    pub leader: Option<i32>,
    pub epoch: i64,
    pub log_end_offset: i64,
    pub high_watermark: i64,
}

/// The states [`LocalQuorumState::state`] takes, for a gauge per state.
pub const QUORUM_STATES: [&str; 5] = ["leader", "candidate", "follower", "observer", "shutdown"];

/// Reads [`LocalQuorumState`] from openraft's metrics and the Raft log (their only owners).
pub(super) fn local_state(inner: &Inner) -> LocalQuorumState {
    let m = inner.raft.metrics().borrow().clone();
    let state = match m.state {
        ServerState::Leader => "leader",
        ServerState::Candidate => "candidate",
        ServerState::Follower => "follower",
        ServerState::Learner => "observer",
        ServerState::Shutdown => "shutdown",
    };
    LocalQuorumState {
        state,
        leader: m.current_leader.map(|id| id as i32),
        epoch: i64::try_from(m.current_term).unwrap_or(i64::MAX),
        log_end_offset: offset_after(m.last_log_index),
        high_watermark: offset_after(inner.log.committed_index()),
    }
}

/// Describes the quorum from this node's Raft state; NOT_CONTROLLER unless it is the leader.
pub(super) fn describe_as_leader(inner: &Inner) -> Result<QuorumDescription, ControllerError> {
    let metrics = inner.raft.metrics().borrow().clone();
    let own = inner.config.node_id as NodeId;
    let voter = metrics
        .membership_config
        .membership()
        .voter_ids()
        .any(|v| v == own);
    // A leader removed from the voters is stepping down: it describes no quorum.
    if metrics.state != ServerState::Leader || metrics.current_leader != Some(own) || !voter {
        return Err(inner.not_controller());
    }
    let term = metrics.current_term;
    let now = now_ms();
    let replication = metrics.replication.unwrap_or_default();
    let image = inner.image_rx.borrow().clone();
    let observed = inner.observer_directory_ids.lock().clone();
    let replica = |id: NodeId| {
        // A voter's recorded `ReplicaKey`, else the one it sent as an observer.
        let directory_id = match super::voter_control::directory_id_of(&image, id as i32) {
            d if d.is_nil() => observed.get(&(id as i32)).copied().unwrap_or_default(),
            d => d,
        };
        if id == own {
            // Kafka reports the leader as fetched and caught up now.
            return QuorumReplica {
                replica_id: id as i32,
                directory_id,
                log_end_offset: offset_after(metrics.last_log_index),
                last_fetch_timestamp_ms: now,
                last_caught_up_timestamp_ms: now,
            };
        }
        let (fetch, caught_up) = inner.clocks.get(id, term);
        QuorumReplica {
            replica_id: id as i32,
            directory_id,
            log_end_offset: match replication.get(&id) {
                Some(Some(matched)) => offset_after(Some(matched.index)),
                _ => UNKNOWN,
            },
            last_fetch_timestamp_ms: fetch,
            last_caught_up_timestamp_ms: caught_up,
        }
    };
    let membership = metrics.membership_config.membership();
    let voters: Vec<QuorumReplica> = membership.voter_ids().map(replica).collect();
    let observers = membership.learner_ids().map(replica).collect();
    Ok(QuorumDescription {
        leader_id: inner.config.node_id,
        leader_epoch: i32::try_from(term).unwrap_or(i32::MAX),
        high_watermark: offset_after(inner.log.committed_index()),
        endpoints: voters
            .iter()
            .filter_map(|v| endpoint(inner, v.replica_id))
            .collect(),
        voters,
        observers,
    })
}

/// A voter's controller listener, from the quorum's membership.
fn endpoint(inner: &Inner, node_id: i32) -> Option<QuorumEndpoint> {
    let addr = inner.node_address(node_id)?;
    let (host, port) = addr.rsplit_once(':')?;
    Some(QuorumEndpoint {
        node_id,
        listener: inner.config.listener_name.clone(),
        host: host.to_string(),
        port: port.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};

    fn log_id(term: u64, index: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    /// An AppendEntries of leader 1 in `term`, after `prev` and carrying entries up to `last`.
    fn append(term: u64, prev: Option<u64>, last: Option<u64>) -> AppendEntriesRequest<TypeConfig> {
        let first = prev.map_or(0, |p| p + 1);
        let entries = last
            .map(|l| {
                (first..=l)
                    .map(|i| Entry {
                        log_id: log_id(term, i),
                        payload: EntryPayload::Blank,
                    })
                    .collect()
            })
            .unwrap_or_default();
        AppendEntriesRequest {
            vote: Vote::new_committed(term, 1),
            prev_log_id: prev.map(|p| log_id(term, p)),
            entries,
            leader_commit: None,
        }
    }

    #[test]
    fn accepted_appends_set_fetch_and_caught_up_times() {
        let clocks = FollowerClocks::default();
        assert_eq!(clocks.get(2, 1), (UNKNOWN, UNKNOWN));
        // Reaches the leader's end (index 5) as it was at send time: caught up at send time.
        let ok = AppendEntriesResponse::Success;
        clocks.record(2, &append(1, Some(3), Some(5)), 1_000, Some(5), &ok);
        let (fetch, caught_up) = clocks.get(2, 1);
        assert!(fetch >= 1_000, "{fetch}");
        assert_eq!(caught_up, 1_000);
        // Accepted but short of the leader's end (a capped batch): fetched, not caught up.
        clocks.record(2, &append(1, Some(5), Some(6)), 2_000, Some(9), &ok);
        assert_eq!(clocks.get(2, 1).1, 1_000);
        // A heartbeat at the end: caught up again.
        clocks.record(2, &append(1, Some(9), None), 3_000, Some(9), &ok);
        assert_eq!(clocks.get(2, 1).1, 3_000);
        // A partial success counts what it matched.
        let partial = AppendEntriesResponse::PartialSuccess(Some(log_id(1, 9)));
        clocks.record(2, &append(1, Some(9), Some(12)), 4_000, Some(9), &partial);
        assert_eq!(clocks.get(2, 1).1, 4_000);
    }

    #[test]
    fn refused_appends_and_new_terms_do_not_count() {
        let clocks = FollowerClocks::default();
        clocks.record(
            3,
            &append(1, Some(1), Some(2)),
            1_000,
            Some(2),
            &AppendEntriesResponse::Conflict,
        );
        assert_eq!(clocks.get(3, 1), (UNKNOWN, UNKNOWN));
        let ok = AppendEntriesResponse::Success;
        clocks.record(3, &append(1, Some(1), Some(2)), 1_000, Some(2), &ok);
        assert_ne!(clocks.get(3, 1), (UNKNOWN, UNKNOWN));
        // Another term's leader knows nothing of this follower yet.
        assert_eq!(clocks.get(3, 2), (UNKNOWN, UNKNOWN));
        clocks.record(3, &append(2, Some(2), None), 5_000, Some(4), &ok);
        let (fetch, caught_up) = clocks.get(3, 2);
        assert!(fetch >= 5_000);
        assert_eq!(caught_up, UNKNOWN, "index 2 is behind the leader's end 4");
    }

    #[test]
    fn offsets_count_entries() {
        assert_eq!(offset_after(None), 0);
        assert_eq!(offset_after(Some(0)), 1);
        assert_eq!(offset_after(Some(u64::MAX)), i64::MAX);
    }
}
