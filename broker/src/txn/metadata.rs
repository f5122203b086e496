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
            // Empty and Complete*: transaction version 2 aborts without a partition added.
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
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
    pub client_transaction_version: i16,
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

/// The feature table owns the level (`brook_controller::features`).
pub use brook_controller::features::TRANSACTION_VERSION_2;

/// Kafka's `TransactionVersion.supportsEpochBump`.
pub fn supports_epoch_bump(client_transaction_version: i16) -> bool {
    client_transaction_version >= TRANSACTION_VERSION_2
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

    /// The current values, as the starting point of a transition to `state` (Kafka's
    /// `TransitionData`): each `prepare_*` changes only what its transition changes.
    fn transit_to(&self, state: TransactionState) -> TxnTransit {
        TxnTransit {
            producer_id: self.producer_id,
            previous_producer_id: self.producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            last_producer_epoch: self.last_producer_epoch,
            txn_timeout_ms: self.txn_timeout_ms,
            state,
            partitions: self.partitions.clone(),
            txn_start_timestamp: self.txn_start_timestamp,
            txn_last_update_timestamp: self.txn_last_update_timestamp,
            client_transaction_version: self.client_transaction_version,
        }
    }

    /// Checks a transition and records its target as the pending state (Kafka's
    /// `prepareTransitionTo`).
    fn prepare(&mut self, t: TxnTransit) -> Result<TxnTransit, IllegalTransition> {
        let fail = |why| IllegalTransition {
            id: self.transactional_id.clone(),
            from: self.state,
            to: t.state,
            why,
        };
        if self.pending_state.is_some() {
            return Err(fail("another transition is pending"));
        }
        if t.producer_id < 0 {
            return Err(fail("negative producer id"));
        }
        if t.state != Dead && t.producer_epoch < 0 {
            return Err(fail("negative producer epoch"));
        }
        if !t.state.valid_previous().contains(&self.state) {
            return Err(fail("not a valid previous state"));
        }
        self.pending_state = Some(t.state);
        Ok(t)
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
        let mut t = self.transit_to(PrepareEpochFence);
        if !self.has_failed_epoch_fence {
            t.producer_epoch = self.producer_epoch + 1;
        }
        t.last_producer_epoch = NO_PRODUCER_EPOCH;
        self.prepare(t)
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
        let mut t = self.transit_to(Empty);
        t.producer_epoch = epoch;
        t.last_producer_epoch = last;
        t.txn_timeout_ms = txn_timeout_ms;
        t.partitions = BTreeSet::new();
        t.txn_start_timestamp = -1;
        t.txn_last_update_timestamp = now_ms;
        self.prepare(t).map_err(Some)
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
        let mut t = self.transit_to(Empty);
        t.producer_id = new_producer_id;
        t.producer_epoch = 0;
        t.last_producer_epoch = if record_last_epoch {
            self.producer_epoch
        } else {
            NO_PRODUCER_EPOCH
        };
        t.txn_timeout_ms = txn_timeout_ms;
        t.partitions = BTreeSet::new();
        t.txn_start_timestamp = -1;
        t.txn_last_update_timestamp = now_ms;
        self.prepare(t)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn, or a partition added implicitly by a Produce
    /// or TxnOffsetCommit of transaction version 2: the transaction starts (or grows). The
    /// transaction takes the version of the client that adds to it.
    pub fn prepare_add_partitions(
        &mut self,
        added: &BTreeSet<(String, i32)>,
        now_ms: i64,
        client_transaction_version: i16,
    ) -> Result<TxnTransit, IllegalTransition> {
        let mut t = self.transit_to(Ongoing);
        if matches!(self.state, Empty | CompleteAbort | CompleteCommit) {
            t.txn_start_timestamp = now_ms;
        }
        t.partitions = self.partitions.union(added).cloned().collect();
        t.txn_last_update_timestamp = now_ms;
        t.client_transaction_version = client_transaction_version;
        self.prepare(t)
    }

    /// EndTxn: PrepareCommit or PrepareAbort (Kafka's `prepareAbortOrCommit`). From
    /// transaction version 2 the epoch is bumped with every transaction, and the markers
    /// carry the bumped epoch, so nothing the producer sent before the end can be appended
    /// after it; `next_producer_id` is the id that replaces an exhausted one. An abort from
    /// Empty or Complete* (version 2) has added no partition: it starts now.
    pub fn prepare_abort_or_commit(
        &mut self,
        state: TransactionState,
        client_transaction_version: i16,
        next_producer_id: i64,
        now_ms: i64,
        no_partition_added: bool,
    ) -> Result<TxnTransit, IllegalTransition> {
        let mut t = self.transit_to(state);
        if supports_epoch_bump(client_transaction_version) {
            t.producer_epoch = self.producer_epoch.saturating_add(1);
            t.last_producer_epoch = self.producer_epoch;
        }
        if no_partition_added {
            t.txn_start_timestamp = now_ms;
        }
        t.next_producer_id = next_producer_id;
        t.txn_last_update_timestamp = now_ms;
        t.client_transaction_version = client_transaction_version;
        self.prepare(t)
    }

    /// The abort that follows a fence. Below transaction version 2 the bumped epoch
    /// replaces the current one in memory at once (it is never handed to a client before the
    /// abort is written) and the PrepareAbort record carries it, so markers fence the old
    /// producer. From version 2 the abort bumps the epoch itself and that is the fence's one
    /// bump: a late EndTxn of the fenced producer names the epoch just below, which version 2
    /// reads as a retry, so a late commit gets INVALID_TXN_STATE as from Kafka 4.4.
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
        self.last_producer_epoch = NO_PRODUCER_EPOCH;
        let tv = self.client_transaction_version;
        if supports_epoch_bump(tv) {
            return self.prepare_abort_or_commit(PrepareAbort, tv, NO_PRODUCER_ID, now_ms, false);
        }
        self.producer_epoch = bumped_epoch;
        let mut t = self.transit_to(PrepareAbort);
        t.txn_last_update_timestamp = now_ms;
        self.prepare(t)
    }

    /// Every marker is written: CompleteCommit or CompleteAbort, no partitions (Kafka's
    /// `prepareComplete`). A version 2 transaction that exhausted its epoch moves to its
    /// next producer id at epoch 0 here.
    pub fn prepare_complete(&mut self, now_ms: i64) -> Result<TxnTransit, IllegalTransition> {
        let state = if self.state == PrepareCommit {
            CompleteCommit
        } else {
            CompleteAbort
        };
        self.has_failed_epoch_fence = false;
        let mut t = self.transit_to(state);
        if supports_epoch_bump(self.client_transaction_version)
            && self.next_producer_id != NO_PRODUCER_ID
        {
            t.producer_id = self.next_producer_id;
            t.producer_epoch = 0;
        }
        t.next_producer_id = NO_PRODUCER_ID;
        t.partitions = BTreeSet::new();
        t.txn_last_update_timestamp = now_ms;
        self.prepare(t)
    }

    /// The id expired: a tombstone is written, then the metadata removed.
    pub fn prepare_dead(&mut self) -> Result<TxnTransit, IllegalTransition> {
        let mut t = self.transit_to(Dead);
        t.partitions = BTreeSet::new();
        self.prepare(t)
    }

    /// Kafka's `validProducerEpoch`: the identity a transition may carry. Version 2 bumps the
    /// epoch at Prepare* (the last epoch is then the current one) and may move to a new
    /// producer id at Complete* (the previous id is then the current one).
    fn valid_producer_epoch(&self, t: &TxnTransit) -> bool {
        let v2 = supports_epoch_bump(t.client_transaction_version);
        match t.state {
            CompleteCommit | CompleteAbort if v2 && t.producer_epoch == 0 => {
                t.last_producer_epoch == self.last_producer_epoch
                    && t.previous_producer_id == self.producer_id
            }
            PrepareCommit | PrepareAbort if v2 => {
                t.last_producer_epoch == self.producer_epoch && t.producer_id == self.producer_id
            }
            _ => t.producer_epoch == self.producer_epoch && t.producer_id == self.producer_id,
        }
    }

    /// The transition's record is replicated: apply it (Kafka's `completeTransitionTo`, with
    /// the same consistency checks, then every field taken from the transition).
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
        let consistent = match t.state {
            Empty => {
                let bump = t.producer_epoch == self.producer_epoch.wrapping_add(1)
                    || (t.producer_epoch == 0 && t.producer_id != self.producer_id);
                (self.producer_epoch == t.producer_epoch || bump)
                    && t.partitions.is_empty()
                    && t.txn_start_timestamp == -1
            }
            Ongoing => {
                self.valid_producer_epoch(t)
                    && self.partitions.is_subset(&t.partitions)
                    && self.txn_timeout_ms == t.txn_timeout_ms
            }
            PrepareAbort | PrepareCommit => {
                // Version 2 aborts from Empty and Complete* with a new start time.
                let empty_abort = t.state == PrepareAbort
                    && supports_epoch_bump(t.client_transaction_version)
                    && matches!(self.state, Empty | CompleteCommit | CompleteAbort);
                self.valid_producer_epoch(t)
                    && self.partitions == t.partitions
                    && self.txn_timeout_ms == t.txn_timeout_ms
                    && (self.txn_start_timestamp == t.txn_start_timestamp || empty_abort)
            }
            CompleteAbort | CompleteCommit => {
                self.valid_producer_epoch(t)
                    && self.txn_timeout_ms == t.txn_timeout_ms
                    && t.txn_start_timestamp != -1
            }
            PrepareEpochFence | Dead => {
                return Err(fail(self, "never completed; only pending"));
            }
        };
        if !consistent {
            return Err(fail(self, "inconsistent with the current metadata"));
        }
        self.take_values(t);
        self.pending_state = None;
        Ok(())
    }

    /// Every value of `t`, the state included (the one place a transition's values land).
    fn take_values(&mut self, t: &TxnTransit) {
        self.producer_id = t.producer_id;
        self.previous_producer_id = t.previous_producer_id;
        self.next_producer_id = t.next_producer_id;
        self.producer_epoch = t.producer_epoch;
        self.last_producer_epoch = t.last_producer_epoch;
        self.txn_timeout_ms = t.txn_timeout_ms;
        self.partitions = t.partitions.clone();
        self.txn_start_timestamp = t.txn_start_timestamp;
        self.txn_last_update_timestamp = t.txn_last_update_timestamp;
        self.client_transaction_version = t.client_transaction_version;
        self.state = t.state;
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
        m.take_values(t);
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
        let t = m.prepare_add_partitions(&tp("a", 0), 10, 0).unwrap();
        assert_eq!(m.pending_state, Some(Ongoing));
        // A second transition cannot start while one is pending.
        assert!(m.prepare_add_partitions(&tp("a", 1), 11, 0).is_err());
        m.complete_transition(&t).unwrap();
        assert_eq!((m.state, m.txn_start_timestamp), (Ongoing, 10));
        let t = m.prepare_add_partitions(&tp("b", 0), 12, 0).unwrap();
        m.complete_transition(&t).unwrap();
        assert_eq!(m.partitions.len(), 2);
        assert_eq!(
            m.txn_start_timestamp, 10,
            "the start stays with the transaction"
        );
        let t = m
            .prepare_abort_or_commit(PrepareCommit, 0, NO_PRODUCER_ID, 13, false)
            .unwrap();
        m.complete_transition(&t).unwrap();
        let t = m.prepare_complete(14).unwrap();
        assert_eq!(t.state, CompleteCommit);
        m.complete_transition(&t).unwrap();
        assert_eq!(
            (m.state, m.partitions.len(), m.producer_epoch),
            (CompleteCommit, 0, 0)
        );
        // The next transaction starts afresh.
        let t = m.prepare_add_partitions(&tp("c", 0), 20, 0).unwrap();
        assert_eq!(t.txn_start_timestamp, 20);
    }

    #[test]
    fn illegal_transitions_are_refused() {
        let mut m = initialized();
        assert!(
            m.prepare_abort_or_commit(PrepareCommit, 0, NO_PRODUCER_ID, 5, false)
                .is_err(),
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
        let t = m.prepare_add_partitions(&tp("a", 0), 10, 0).unwrap();
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

    const V2: i16 = TRANSACTION_VERSION_2;

    #[test]
    fn version_2_bumps_the_epoch_at_prepare_and_keeps_it_at_complete() {
        let mut m = initialized(); // epoch 0
        let t = m.prepare_add_partitions(&tp("a", 0), 10, V2).unwrap();
        m.complete_transition(&t).unwrap();
        assert_eq!(m.client_transaction_version, V2);
        let t = m
            .prepare_abort_or_commit(PrepareCommit, V2, NO_PRODUCER_ID, 11, false)
            .unwrap();
        assert_eq!((t.producer_epoch, t.last_producer_epoch), (1, 0));
        m.complete_transition(&t).unwrap();
        let t = m.prepare_complete(12).unwrap();
        assert_eq!(
            (t.state, t.producer_id, t.producer_epoch),
            (CompleteCommit, 1000, 1)
        );
        m.complete_transition(&t).unwrap();
        // An abort with no partition added, from a completed state, starts now.
        let t = m
            .prepare_abort_or_commit(PrepareAbort, V2, NO_PRODUCER_ID, 20, true)
            .unwrap();
        assert_eq!((t.producer_epoch, t.txn_start_timestamp), (2, 20));
        m.complete_transition(&t).unwrap();
        assert!(t.partitions.is_empty());
    }

    #[test]
    fn version_2_moves_to_the_next_producer_id_when_the_epoch_runs_out() {
        let mut m = initialized();
        m.producer_epoch = i16::MAX - 1;
        let t = m.prepare_add_partitions(&tp("a", 0), 10, V2).unwrap();
        m.complete_transition(&t).unwrap();
        assert!(m.is_producer_epoch_exhausted());
        let t = m
            .prepare_abort_or_commit(PrepareCommit, V2, 2000, 11, false)
            .unwrap();
        assert_eq!(
            (t.producer_id, t.producer_epoch, t.next_producer_id),
            (1000, i16::MAX, 2000)
        );
        m.complete_transition(&t).unwrap();
        let t = m.prepare_complete(12).unwrap();
        assert_eq!(
            (
                t.producer_id,
                t.producer_epoch,
                t.previous_producer_id,
                t.next_producer_id
            ),
            (2000, 0, 1000, NO_PRODUCER_ID)
        );
        assert_eq!(
            t.last_producer_epoch,
            i16::MAX - 1,
            "the last epoch the client saw"
        );
        m.complete_transition(&t).unwrap();
        assert_eq!((m.producer_id, m.producer_epoch), (2000, 0));
    }

    #[test]
    fn version_2_fence_and_abort_bump_the_epoch_once() {
        let mut m = initialized(); // epoch 0
        let t = m.prepare_add_partitions(&tp("a", 0), 10, V2).unwrap();
        m.complete_transition(&t).unwrap();
        let fence = m.prepare_fence_producer_epoch().unwrap();
        assert_eq!(fence.producer_epoch, 1);
        let abort = m.prepare_fenced_abort(fence.producer_epoch, 11).unwrap();
        assert_eq!(
            (abort.state, abort.producer_epoch, abort.last_producer_epoch),
            (PrepareAbort, 1, 0)
        );
        m.complete_transition(&abort).unwrap();
        let t = m.prepare_complete(12).unwrap();
        m.complete_transition(&t).unwrap();
        assert_eq!((m.state, m.producer_epoch), (CompleteAbort, 1));
    }
}
