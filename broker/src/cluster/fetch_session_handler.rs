//! A follower's half of an incremental fetch session (KIP-227), as Kafka's client-side
//! `FetchSessionHandler` keeps it; the leader's half is `crate::cluster::fetch_session`.
//!
//! The first fetch names every partition with epoch 0; once the leader answers a session
//! id, each later fetch names only the partitions that joined the set or whose fetch
//! position changed, lists the ones that left as forgotten, and carries the next epoch.
//! What the leader's session holds is what was last sent and answered: a fetch that fails
//! (an i/o error, a cancelled exchange, a session error) makes the next one full again,
//! closing the old session, so the two halves can never disagree for longer than one fetch.

use std::collections::HashMap;

use kafka_protocol::ResponseError;

use crate::cluster::fetch_session::{next_epoch, FetchParams, INITIAL_EPOCH, INVALID_SESSION_ID};

/// A partition by topic name and index (followers fetch by name).
pub type PartitionKey = (String, i32);

/// One fetch's session fields and partitions.
#[derive(Debug)]
pub struct FetchBuild {
    pub session_id: i32,
    pub epoch: i32,
    /// The partitions the request names: all of them in a full fetch.
    pub to_send: Vec<(PartitionKey, FetchParams)>,
    /// The partitions the session drops.
    pub forgotten: Vec<PartitionKey>,
}

/// The follower's view of its session with one leader.
#[derive(Debug, Default)]
pub struct FetchSessionHandler {
    session_id: i32,
    /// The epoch of the next fetch; [`INITIAL_EPOCH`] makes it full.
    next_epoch: i32,
    /// What the leader's session holds, per partition.
    sent: HashMap<PartitionKey, FetchParams>,
    /// The set a fetch in flight will leave in the session once answered.
    pending: HashMap<PartitionKey, FetchParams>,
}

impl FetchSessionHandler {
    /// Whether the next fetch is full (names every partition, opens a session).
    pub fn next_is_full(&self) -> bool {
        self.next_epoch == INITIAL_EPOCH
    }

    /// The fetch for the partitions `next`, all of which the session should hold after it.
    pub fn build(&mut self, next: &[(PartitionKey, FetchParams)]) -> FetchBuild {
        self.pending = next.iter().cloned().collect();
        if self.next_epoch == INITIAL_EPOCH {
            return FetchBuild {
                session_id: self.session_id,
                epoch: INITIAL_EPOCH,
                to_send: next.to_vec(),
                forgotten: Vec::new(),
            };
        }
        let to_send = next
            .iter()
            .filter(|(key, params)| self.sent.get(key) != Some(params))
            .cloned()
            .collect();
        let forgotten = self
            .sent
            .keys()
            .filter(|key| !self.pending.contains_key(*key))
            .cloned()
            .collect();
        FetchBuild {
            session_id: self.session_id,
            epoch: self.next_epoch,
            to_send,
            forgotten,
        }
    }

    /// Takes the answer's session fields (Kafka's `FetchSessionHandler.handleResponse`).
    /// False when the answer is a session error and carries no partitions; the next fetch
    /// is then full.
    pub fn handle_response(&mut self, error_code: i16, session_id: i32) -> bool {
        if error_code != 0 {
            if error_code == ResponseError::FetchSessionIdNotFound.code() {
                // Nothing to close.
                self.session_id = INVALID_SESSION_ID;
            }
            self.reset();
            return false;
        }
        if self.next_epoch == INITIAL_EPOCH {
            // A full fetch: the leader opened a session, or had no slot for one.
            self.session_id = session_id;
            self.next_epoch = if session_id == INVALID_SESSION_ID {
                INITIAL_EPOCH
            } else {
                next_epoch(INITIAL_EPOCH)
            };
        } else if session_id == INVALID_SESSION_ID {
            // The leader closed the session (it was left without partitions); this answer
            // still stands, and the next fetch opens a new one.
            self.session_id = INVALID_SESSION_ID;
            self.reset();
            return true;
        } else {
            self.next_epoch = next_epoch(self.next_epoch);
        }
        self.sent = std::mem::take(&mut self.pending);
        true
    }

    /// The fetch failed without an answer: start over with a full fetch, which closes the
    /// current session on the leader.
    pub fn handle_error(&mut self) {
        self.reset();
    }

    fn reset(&mut self) {
        self.next_epoch = INITIAL_EPOCH;
        self.sent.clear();
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64) -> FetchParams {
        FetchParams {
            fetch_offset: offset,
            log_start_offset: 0,
            partition_max_bytes: 1 << 20,
            current_leader_epoch: 1,
            last_fetched_epoch: 1,
        }
    }

    fn key(p: i32) -> PartitionKey {
        ("t".to_string(), p)
    }

    #[test]
    fn after_a_full_fetch_only_changes_are_sent() {
        let mut h = FetchSessionHandler::default();
        let b = h.build(&[(key(0), at(5)), (key(1), at(7))]);
        assert_eq!((b.session_id, b.epoch, b.to_send.len()), (0, 0, 2));
        assert!(h.handle_response(0, 42));
        // Partition 0 moved on, 1 did not, 2 joined.
        let b = h.build(&[(key(0), at(6)), (key(1), at(7)), (key(2), at(0))]);
        assert_eq!((b.session_id, b.epoch), (42, 1));
        let sent: Vec<i32> = b.to_send.iter().map(|(k, _)| k.1).collect();
        assert_eq!(sent, vec![0, 2]);
        assert!(b.forgotten.is_empty());
        assert!(h.handle_response(0, 42));
        // Partition 1 left.
        let b = h.build(&[(key(0), at(6)), (key(2), at(0))]);
        assert_eq!(b.epoch, 2);
        assert!(b.to_send.is_empty());
        assert_eq!(b.forgotten, vec![key(1)]);
    }

    #[test]
    fn a_failed_fetch_or_session_error_makes_the_next_one_full() {
        let mut h = FetchSessionHandler::default();
        h.build(&[(key(0), at(5))]);
        assert!(h.handle_response(0, 42));
        h.build(&[(key(0), at(5))]);
        h.handle_error();
        let b = h.build(&[(key(0), at(5))]);
        // Full, naming the old session so the leader closes it.
        assert_eq!((b.session_id, b.epoch, b.to_send.len()), (42, 0, 1));
        assert!(h.handle_response(0, 43));
        h.build(&[(key(0), at(5))]);
        assert!(!h.handle_response(ResponseError::FetchSessionIdNotFound.code(), 0));
        let b = h.build(&[(key(0), at(5))]);
        assert_eq!((b.session_id, b.epoch, b.to_send.len()), (0, 0, 1));
    }

    #[test]
    fn a_session_the_leader_closed_still_answers_and_the_next_fetch_opens_one() {
        let mut h = FetchSessionHandler::default();
        h.build(&[(key(0), at(5))]);
        assert!(h.handle_response(0, 42));
        h.build(&[(key(0), at(6))]);
        assert!(h.handle_response(0, INVALID_SESSION_ID));
        let b = h.build(&[(key(0), at(6))]);
        assert_eq!((b.session_id, b.epoch, b.to_send.len()), (0, 0, 1));
    }

    #[test]
    fn without_a_slot_on_the_leader_every_fetch_is_full() {
        let mut h = FetchSessionHandler::default();
        h.build(&[(key(0), at(5))]);
        assert!(h.handle_response(0, INVALID_SESSION_ID));
        let b = h.build(&[(key(0), at(5))]);
        assert_eq!((b.session_id, b.epoch, b.to_send.len()), (0, 0, 1));
    }
}
