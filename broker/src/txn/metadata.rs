//! A transactional id's state and its transitions (Kafka's `TransactionMetadata`,
//! `TransactionState`, `TxnTransitMetadata`).
//!
//! A change is made in two steps, as in Kafka: `prepare_*` checks the transition, records
//! the target as the pending state and returns the new values ([`TxnTransit`]); the
//! coordinator writes them to `__transaction_state`, and only once the record is replicated
//! does [`TransactionMetadata::complete_transition`] apply them. While a transition is
//! pending no other one can start, which is what CONCURRENT_TRANSACTIONS reports.

use std::collections::BTreeSet;

/// Kafka's `RecordBatch.NO_PRODUCER_ID` / `NO_PRODUCER_EPOCH`.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// The states of a transactional id, with Kafka's ids (stored in the log) and names
/// (reported by DescribeTransactions and ListTransactions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

use TransactionState::*;

impl TransactionState {
    pub const ALL: [TransactionState; 8] = [
        Empty,
        Ongoing,
        PrepareCommit,
        PrepareAbort,
        CompleteCommit,
        CompleteAbort,
        Dead,
        PrepareEpochFence,
    ];

    pub fn id(self) -> i8 {
        match self {
            Empty => 0,
            Ongoing => 1,
            PrepareCommit => 2,
            PrepareAbort => 3,
            CompleteCommit => 4,
            CompleteAbort => 5,
            Dead => 6,
            PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            Empty => "Empty",
            Ongoing => "Ongoing",
            PrepareCommit => "PrepareCommit",
            PrepareAbort => "PrepareAbort",
            CompleteCommit => "CompleteCommit",
            CompleteAbort => "CompleteAbort",
            Dead => "Dead",
            PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The states a transition into `self` may start from.
    fn valid_previous(self) -> &'static [TransactionState] {
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[Ongoing, PrepareEpochFence],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether an idle id in this state may expire (`transactional.id.expiration.ms`).
    pub fn is_expiration_allowed(self) -> bool {
        matches!(self, Empty | CompleteCommit | CompleteAbort)
    }

    /// A transaction is open or being completed.
    pub fn has_pending_transaction(self) -> bool {
        matches!(self, Ongoing | PrepareAbort | PrepareCommit)
    }
}

/// A transition that is not allowed; the coordinator answers it as an internal error
/// (Kafka throws `IllegalStateException`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transactional id {id}: illegal transition from {from:?} to {to:?}: {why}")]
pub struct IllegalTransition {
    pub id: String,
    pub from: TransactionState,
    pub to: TransactionState,
    pub why: &'static str,
}

/// The target of a transition: the values written to the log and applied once it is
/// replicated (Kafka's `TxnTransitMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnTransit {
    pub producer_id: i64,
    pub previous_producer_id: i64,
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TransactionState,
    pub partitions: BTreeSet<(String, i32)>,
    pub txn_start_timestamp: i64,
    pub txn_last_update_timestamp: i64,
}

/// One transactional id as the coordinator holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    pub previous_producer_id: i64,
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump, so that a retried InitProducerId (KIP-360) is
    /// answered with the current epoch instead of being fenced.
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TransactionState,
    /// (topic, partition) of every partition in the open transaction.
    pub partitions: BTreeSet<(String, i32)>,
    pub txn_start_timestamp: i64,
    pub txn_last_update_timestamp: i64,
    pub client_transaction_version: i16,
    /// The state a transition in flight leads to.
    pub pending_state: Option<TransactionState>,
    /// A bumped epoch for fencing was not written: the next fence reuses it.
    pub has_failed_epoch_fence: bool,
}

/// Kafka's `TransactionMetadata.isEpochExhausted`.
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

impl TransactionMetadata {
    /// A new transactional id: producer id allocated, no epoch yet.
    pub fn new(transactional_id: &str, producer_id: i64, txn_timeout_ms: i32, now_ms: i64) -> Self {
        TransactionMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms,
            state: Empty,
            partitions: BTreeSet::new(),
            txn_start_timestamp: -1,
            txn_last_update_timestamp: now_ms,
            client_transaction_version: 0,
            pending_state: None,
            has_failed_epoch_fence: false,
        }
    }

    pub fn is_producer_epoch_exhausted(&self) -> bool {
        is_epoch_exhausted(self.producer_epoch)
    }

    pub fn pending_transition_in_progress(&self) -> bool {
        self.pending_state.is_some()
    }

    #[allow(clippy::too_many_arguments)]
    fn prepare_transition_to(
        &mut self,
        state: TransactionState,
        producer_id: i64,
        producer_epoch: i16,
        last_producer_epoch: i16,
        txn_timeout_ms: i32,
        partitions: BTreeSet<(String, i32)>,
        txn_start_timestamp: i64,
        now_ms: i64,
    ) -> Result<TxnTransit, IllegalTransition> {
        let fail = |why| IllegalTransition {
            id: self.transactional_id.clone(),
            from: self.state,
            to: state,
            why,
        };
        if self.pending_state.is_some() {
            return Err(fail("another transition is pending"));
        }
        if producer_id < 0 {
            return Err(fail("negative producer id"));
        }
        if state != Dead && producer_epoch < 0 {
            return Err(fail("negative producer epoch"));
        }
        if !state.valid_previous().contains(&self.state) {
            return Err(fail("not a valid previous state"));
        }
        self.pending_state = Some(state);
        Ok(TxnTransit {
            producer_id,
            previous_producer_id: self.producer_id,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch,
            last_producer_epoch,
            txn_timeout_ms,
            state,
            partitions,
            txn_start_timestamp,
            txn_last_update_timestamp: now_ms,
        })
    }

    /// Fencing an open transaction (InitProducerId of a new producer, or the transaction
    /// timed out): the epoch is bumped and the transaction aborted at that epoch, so the old
    /// producer's writes are refused from then on (Kafka's `prepareFenceProducerEpoch`).
    /// Only the pending state is set here; the abort that follows writes the bump.
    pub fn prepare_fence_producer_epoch(&mut self) -> Result<TxnTransit, IllegalTransition> {
        if self.producer_epoch == i16::MAX {
            return Err(IllegalTransition {
                id: self.transactional_id.clone(),
                from: self.state,
                to: PrepareEpochFence,
                why: "the epoch would overflow",
            });
        }
        let bumped = if self.has_failed_epoch_fence {
            self.producer_epoch
        } else {
            self.producer_epoch + 1
        };
        self.prepare_transition_to(
            PrepareEpochFence,
            self.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            self.partitions.clone(),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )
    }

    /// InitProducerId on an id without an open transaction: bump the epoch (Kafka's
    /// `prepareIncrementProducerEpoch`). With `expected_epoch` (KIP-360: the producer sends
    /// its current id and epoch) a retry of a bump that succeeded gets the same epoch back,
    /// and any other epoch is fenced. `Err(None)` is PRODUCER_FENCED.
    pub fn prepare_increment_producer_epoch(
        &mut self,
        txn_timeout_ms: i32,
        expected_epoch: Option<i16>,
        now_ms: i64,
    ) -> Result<TxnTransit, Option<IllegalTransition>> {
        let bumped = self.producer_epoch.saturating_add(1);
        let (epoch, last) = match expected_epoch {
            None => (bumped, NO_PRODUCER_EPOCH),
            Some(e) if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch => {
                (bumped, self.producer_epoch)
            }
            Some(e) if e == self.last_producer_epoch => {
                (self.producer_epoch, self.last_producer_epoch)
            }
            Some(_) => return Err(None),
        };
        self.prepare_transition_to(
            Empty,
            self.producer_id,
            epoch,
            last,
            txn_timeout_ms,
            BTreeSet::new(),
            -1,
            now_ms,
        )
        .map_err(Some)
    }

    /// The epoch is exhausted: a new producer id at epoch 0 (Kafka's
    /// `prepareProducerIdRotation`).
    pub fn prepare_producer_id_rotation(
        &mut self,
        new_producer_id: i64,
        txn_timeout_ms: i32,
        now_ms: i64,
        record_last_epoch: bool,
    ) -> Result<TxnTransit, IllegalTransition> {
        let last = if record_last_epoch {
            self.producer_epoch
        } else {
            NO_PRODUCER_EPOCH
        };
        self.prepare_transition_to(
            Empty,
            new_producer_id,
            0,
            last,
            txn_timeout_ms,
            BTreeSet::new(),
            -1,
            now_ms,
        )
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: the transaction starts (or grows).
    pub fn prepare_add_partitions(
        &mut self,
        added: &BTreeSet<(String, i32)>,
        now_ms: i64,
    ) -> Result<TxnTransit, IllegalTransition> {
        let start = match self.state {
            Empty | CompleteAbort | CompleteCommit => now_ms,
            _ => self.txn_start_timestamp,
        };
        let partitions = self.partitions.union(added).cloned().collect();
        self.prepare_transition_to(
            Ongoing,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            partitions,
            start,
            now_ms,
        )
    }

    /// EndTxn: PrepareCommit or PrepareAbort (transaction version 1: the epoch stays).
    pub fn prepare_abort_or_commit(
        &mut self,
        state: TransactionState,
        now_ms: i64,
    ) -> Result<TxnTransit, IllegalTransition> {
        self.prepare_transition_to(
            state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.partitions.clone(),
            self.txn_start_timestamp,
            now_ms,
        )
    }

    /// The abort that follows a fence: the bumped epoch replaces the current one in memory
    /// at once (it is never handed to a client before the abort is written), and the
    /// PrepareAbort record carries it, so markers fence the old producer.
    pub fn prepare_fenced_abort(
        &mut self,
        bumped_epoch: i16,
        now_ms: i64,
    ) -> Result<TxnTransit, IllegalTransition> {
        if self.pending_state != Some(PrepareEpochFence) {
            return Err(IllegalTransition {
                id: self.transactional_id.clone(),
                from: self.state,
                to: PrepareAbort,
                why: "no fence pending",
            });
        }
        self.pending_state = None;
        self.producer_epoch = bumped_epoch;
        self.last_producer_epoch = NO_PRODUCER_EPOCH;
        self.prepare_abort_or_commit(PrepareAbort, now_ms)
    }

    /// Every marker is written: CompleteCommit or CompleteAbort, no partitions.
    pub fn prepare_complete(&mut self, now_ms: i64) -> Result<TxnTransit, IllegalTransition> {
        let state = if self.state == PrepareCommit {
            CompleteCommit
        } else {
            CompleteAbort
        };
        self.has_failed_epoch_fence = false;
        self.prepare_transition_to(
            state,
            self.producer_id,
            self.producer_epoch,
            self.producer_epoch,
            self.txn_timeout_ms,
            BTreeSet::new(),
            self.txn_start_timestamp,
            now_ms,
        )
    }

    /// The id expired: a tombstone is written, then the metadata removed.
    pub fn prepare_dead(&mut self) -> Result<TxnTransit, IllegalTransition> {
        self.prepare_transition_to(
            Dead,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            BTreeSet::new(),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )
    }

    /// The transition's record is replicated: apply it (Kafka's `completeTransitionTo`, with
    /// the same consistency checks).
    pub fn complete_transition(&mut self, t: &TxnTransit) -> Result<(), IllegalTransition> {
        let fail = |m: &Self, why| IllegalTransition {
            id: m.transactional_id.clone(),
            from: m.state,
            to: t.state,
            why,
        };
        if self.pending_state != Some(t.state) {
            return Err(fail(self, "the target is not the pending state"));
        }
        let same_epoch =
            t.producer_epoch == self.producer_epoch && t.producer_id == self.producer_id;
        match t.state {
            Empty => {
                let bump = t.producer_epoch == self.producer_epoch.wrapping_add(1)
                    || (t.producer_epoch == 0 && t.producer_id != self.producer_id);
                if (self.producer_epoch != t.producer_epoch && !bump)
                    || !t.partitions.is_empty()
                    || t.txn_start_timestamp != -1
                {
                    return Err(fail(self, "inconsistent epoch bump"));
                }
                self.txn_timeout_ms = t.txn_timeout_ms;
                self.producer_epoch = t.producer_epoch;
                self.last_producer_epoch = t.last_producer_epoch;
                self.producer_id = t.producer_id;
                self.previous_producer_id = t.previous_producer_id;
            }
            Ongoing => {
                if !same_epoch
                    || !self.partitions.is_subset(&t.partitions)
                    || self.txn_timeout_ms != t.txn_timeout_ms
                {
                    return Err(fail(self, "inconsistent partitions or epoch"));
                }
                self.txn_start_timestamp = t.txn_start_timestamp;
                self.partitions.extend(t.partitions.iter().cloned());
            }
            PrepareAbort | PrepareCommit => {
                if !same_epoch
                    || self.partitions != t.partitions
                    || self.txn_timeout_ms != t.txn_timeout_ms
                    || self.txn_start_timestamp != t.txn_start_timestamp
                {
                    return Err(fail(self, "inconsistent prepare"));
                }
            }
            CompleteAbort | CompleteCommit => {
                if !same_epoch
                    || self.txn_timeout_ms != t.txn_timeout_ms
                    || t.txn_start_timestamp == -1
                {
                    return Err(fail(self, "inconsistent completion"));
                }
                self.txn_start_timestamp = t.txn_start_timestamp;
                self.partitions.clear();
            }
            PrepareEpochFence | Dead => {
                return Err(fail(self, "never completed; only pending"));
            }
        }
        self.txn_last_update_timestamp = t.txn_last_update_timestamp;
        self.pending_state = None;
        self.state = t.state;
        Ok(())
    }

    /// The metadata a loaded record stands for (no pending state).
    pub fn from_log(transactional_id: &str, v: &super::records::TxnLogValue) -> Self {
        TransactionMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id: v.producer_id,
            previous_producer_id: v.previous_producer_id,
            next_producer_id: v.next_producer_id,
            producer_epoch: v.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms: v.txn_timeout_ms,
            state: v.state,
            partitions: v.partitions.clone(),
            txn_start_timestamp: v.txn_start_timestamp,
            txn_last_update_timestamp: v.txn_last_update_timestamp,
            client_transaction_version: v.client_transaction_version,
            pending_state: None,
            has_failed_epoch_fence: false,
        }
    }

    /// The metadata as it will be once `t` is applied, for writing `t` to the log.
    pub fn with_transit(&self, t: &TxnTransit) -> Self {
        let mut m = self.clone();
        m.producer_id = t.producer_id;
        m.previous_producer_id = t.previous_producer_id;
        m.next_producer_id = t.next_producer_id;
        m.producer_epoch = t.producer_epoch;
        m.last_producer_epoch = t.last_producer_epoch;
        m.txn_timeout_ms = t.txn_timeout_ms;
        m.state = t.state;
        m.partitions = t.partitions.clone();
        m.txn_start_timestamp = t.txn_start_timestamp;
        m.txn_last_update_timestamp = t.txn_last_update_timestamp;
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: i32) -> BTreeSet<(String, i32)> {
        [(t.to_string(), p)].into_iter().collect()
    }

    fn initialized() -> TransactionMetadata {
        let mut m = TransactionMetadata::new("tx", 1000, 60_000, 1);
        let t = m.prepare_increment_producer_epoch(60_000, None, 2).unwrap();
        m.complete_transition(&t).unwrap();
        m
    }

    #[test]
    fn a_commit_walks_empty_ongoing_prepare_complete() {
        let mut m = initialized();
        assert_eq!(
            (m.state, m.producer_epoch, m.last_producer_epoch),
            (Empty, 0, -1)
        );
        let t = m.prepare_add_partitions(&tp("a", 0), 10).unwrap();
        assert_eq!(m.pending_state, Some(Ongoing));
        // A second transition cannot start while one is pending.
        assert!(m.prepare_add_partitions(&tp("a", 1), 11).is_err());
        m.complete_transition(&t).unwrap();
        assert_eq!((m.state, m.txn_start_timestamp), (Ongoing, 10));
        let t = m.prepare_add_partitions(&tp("b", 0), 12).unwrap();
        m.complete_transition(&t).unwrap();
        assert_eq!(m.partitions.len(), 2);
        assert_eq!(
            m.txn_start_timestamp, 10,
            "the start stays with the transaction"
        );
        let t = m.prepare_abort_or_commit(PrepareCommit, 13).unwrap();
        m.complete_transition(&t).unwrap();
        let t = m.prepare_complete(14).unwrap();
        assert_eq!(t.state, CompleteCommit);
        m.complete_transition(&t).unwrap();
        assert_eq!(
            (m.state, m.partitions.len(), m.producer_epoch),
            (CompleteCommit, 0, 0)
        );
        // The next transaction starts afresh.
        let t = m.prepare_add_partitions(&tp("c", 0), 20).unwrap();
        assert_eq!(t.txn_start_timestamp, 20);
    }

    #[test]
    fn illegal_transitions_are_refused() {
        let mut m = initialized();
        assert!(
            m.prepare_abort_or_commit(PrepareCommit, 5).is_err(),
            "Empty -> PrepareCommit"
        );
        assert_eq!(
            m.pending_state, None,
            "a refused transition leaves nothing pending"
        );
        assert!(
            m.prepare_fence_producer_epoch().is_err(),
            "Empty -> PrepareEpochFence"
        );
        let t = m.prepare_dead().unwrap();
        assert!(
            m.complete_transition(&t).is_err(),
            "Dead is never completed"
        );
    }

    #[test]
    fn fencing_bumps_the_epoch_once_even_after_a_failed_write() {
        let mut m = initialized();
        let t = m.prepare_add_partitions(&tp("a", 0), 10).unwrap();
        m.complete_transition(&t).unwrap();
        let t = m.prepare_fence_producer_epoch().unwrap();
        assert_eq!((t.state, t.producer_epoch), (PrepareEpochFence, 1));
        let abort = m.prepare_fenced_abort(t.producer_epoch, 11).unwrap();
        assert_eq!((abort.state, abort.producer_epoch), (PrepareAbort, 1));
        // The abort's write failed: the coordinator clears the pending state and notes it.
        m.pending_state = None;
        m.has_failed_epoch_fence = true;
        let t = m.prepare_fence_producer_epoch().unwrap();
        assert_eq!(t.producer_epoch, 1, "not bumped twice");
    }

    #[test]
    fn kip_360_retries_and_fencing() {
        let mut m = initialized(); // epoch 0
        let t = m
            .prepare_increment_producer_epoch(60_000, Some(0), 3)
            .unwrap();
        assert_eq!((t.producer_epoch, t.last_producer_epoch), (1, 0));
        m.complete_transition(&t).unwrap();
        // The producer did not get the answer and asks again with epoch 0: same epoch back.
        let t = m
            .prepare_increment_producer_epoch(60_000, Some(0), 4)
            .unwrap();
        assert_eq!(t.producer_epoch, 1);
        m.complete_transition(&t).unwrap();
        // Some older epoch: fenced.
        assert_eq!(
            m.prepare_increment_producer_epoch(60_000, Some(7), 5),
            Err(None)
        );
    }

    #[test]
    fn state_ids_and_names_are_kafkas() {
        let names: Vec<_> = TransactionState::ALL
            .iter()
            .map(|s| (s.id(), s.name()))
            .collect();
        assert_eq!(
            names,
            vec![
                (0, "Empty"),
                (1, "Ongoing"),
                (2, "PrepareCommit"),
                (3, "PrepareAbort"),
                (4, "CompleteCommit"),
                (5, "CompleteAbort"),
                (6, "Dead"),
                (7, "PrepareEpochFence")
            ]
        );
        assert_eq!(TransactionState::from_name("Ongoing"), Some(Ongoing));
    }
}
