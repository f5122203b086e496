//! KIP-890 part 1: the state that ties a transactional append to the coordinator's answer
//! (Kafka's `VerificationGuard` and `VerificationStateEntry`).
//!
//! A leader asks the transaction coordinator whether a partition is in a producer's
//! transaction before the producer's first transactional batch there. The answer is stale as
//! soon as it is given: the coordinator may write an ABORT marker (a timeout, an EndTxn) before
//! the append. So the leader first records a [`VerificationStateEntry`] for the producer in the
//! partition's producer state, holding a unique [`VerificationGuard`]; any transactional batch
//! or marker of that producer clears the entry; and the append carries the guard it was given
//! and is refused with INVALID_TXN_STATE when the entry is gone or holds another guard
//! (`UnifiedLog.analyzeAndValidateProducerState`). A unique guard, not a flag, also refuses the
//! ABA case: abort, a new transaction that never added this partition, then the stale answer.
//!
//! Transaction version 2 (KIP-890 part 2, Produce v12+) changes two things, as Kafka 4.4 does.
//! The coordinator bumps the producer epoch when it ends a transaction and writes the markers at
//! the bumped epoch, which is also the epoch of the producer's next transaction; a client that
//! pipelines its next produce behind EndTxn gets it verified (and its entry created) before the
//! previous transaction's marker reaches this partition. That marker, at the entry's own epoch,
//! ends the previous transaction, not the one verified, so it leaves the entry in place
//! (`UnifiedLog.updateProducers`, "isV2NextTransactionStarted"); a stale verification of an ended
//! transaction still has the older epoch and is cleared. And a producer with no state here
//! starts every transaction at sequence 0 (`ProducerAppendInfo.checkSequence`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Source of guard values; 0 is the sentinel. Unique across every partition of the process,
/// as Kafka's `VerificationGuard.INCREMENTING_ID`.
static NEXT_GUARD: AtomicU64 = AtomicU64::new(1);

/// A token naming one verification of one producer on one partition (Kafka's
/// `VerificationGuard`). [`VerificationGuard::SENTINEL`] is what a request carries when it did
/// not verify; it never matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VerificationGuard(u64);

impl VerificationGuard {
    /// "No verification": an append carrying it passes only inside an ongoing transaction.
    pub const SENTINEL: VerificationGuard = VerificationGuard(0);

    /// A guard no other verification has.
    fn next() -> VerificationGuard {
        VerificationGuard(NEXT_GUARD.fetch_add(1, Ordering::Relaxed))
    }

    /// Whether an append carrying `request` may rely on the verification this guard names
    /// (Kafka's `VerificationGuard.verify`).
    pub fn verify(self, request: VerificationGuard) -> bool {
        request != Self::SENTINEL && request == self
    }

    /// Whether this is the sentinel (no verification started).
    pub fn is_sentinel(self) -> bool {
        self == Self::SENTINEL
    }
}

/// One producer's verification in progress on a partition (Kafka's `VerificationStateEntry`):
/// created before the coordinator is asked, cleared by the producer's next transactional batch
/// or marker, dropped after `producer.id.expiration.ms` if no append ever comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerificationStateEntry {
    /// When the verification started (for expiry).
    pub timestamp_ms: i64,
    /// The guard the append must carry.
    pub guard: VerificationGuard,
    /// Lowest first sequence of a batch that started verifying at [`Self::epoch`]: a batch
    /// with a higher one may not be written first (the lower one may still be retried).
    pub lowest_sequence: i32,
    /// Producer epoch of [`Self::lowest_sequence`].
    pub epoch: i16,
    /// Whether the verification came from transaction version 2 (Kafka's
    /// `TransactionSupportedOperation.supportsEpochBump`: Produce v12+, which adds the partition
    /// itself and whose transactions end with an epoch bump).
    pub supports_epoch_bump: bool,
}

impl VerificationStateEntry {
    pub(crate) fn new(
        timestamp_ms: i64,
        sequence: i32,
        epoch: i16,
        supports_epoch_bump: bool,
    ) -> Self {
        VerificationStateEntry {
            timestamp_ms,
            guard: VerificationGuard::next(),
            lowest_sequence: sequence,
            epoch,
            supports_epoch_bump,
        }
    }

    /// Whether a marker of the producer at `marker_epoch` leaves this verification in place
    /// (Kafka's `UnifiedLog.updateProducers`): only a transaction version 2 verification at
    /// the marker's epoch, i.e. of the transaction that starts after the one the marker ends.
    /// Safe because a producer's epoch is always bumped on its way to transaction version 2.
    pub fn survives_marker(&self, marker_epoch: i16) -> bool {
        self.supports_epoch_bump && marker_epoch == self.epoch
    }

    /// Kafka's `maybeUpdateLowestSequenceAndEpoch`: a lower sequence at the same epoch lowers
    /// the bar; a newer epoch restarts sequences, so its sequence replaces the old one.
    pub(crate) fn maybe_update_lowest_sequence_and_epoch(&mut self, sequence: i32, epoch: i16) {
        if epoch == self.epoch && sequence < self.lowest_sequence {
            self.lowest_sequence = sequence;
        }
        if epoch > self.epoch {
            self.epoch = epoch;
            self.lowest_sequence = sequence;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_are_unique_and_the_sentinel_never_verifies() {
        let a = VerificationGuard::next();
        let b = VerificationGuard::next();
        assert_ne!(a, b);
        assert!(a.verify(a));
        assert!(!a.verify(b));
        assert!(!a.verify(VerificationGuard::SENTINEL));
        assert!(!VerificationGuard::SENTINEL.verify(VerificationGuard::SENTINEL));
    }

    #[test]
    fn lowest_sequence_follows_kafka() {
        let mut e = VerificationStateEntry::new(0, 5, 1, false);
        e.maybe_update_lowest_sequence_and_epoch(7, 1);
        assert_eq!(
            (e.lowest_sequence, e.epoch),
            (5, 1),
            "higher sequence: kept"
        );
        e.maybe_update_lowest_sequence_and_epoch(3, 1);
        assert_eq!(
            (e.lowest_sequence, e.epoch),
            (3, 1),
            "lower sequence: lowered"
        );
        e.maybe_update_lowest_sequence_and_epoch(0, 0);
        assert_eq!((e.lowest_sequence, e.epoch), (3, 1), "older epoch: ignored");
        e.maybe_update_lowest_sequence_and_epoch(9, 2);
        assert_eq!(
            (e.lowest_sequence, e.epoch),
            (9, 2),
            "newer epoch: replaced"
        );
    }

    #[test]
    fn only_a_version_2_verification_at_the_markers_epoch_survives_it() {
        let v2 = VerificationStateEntry::new(0, 0, 4, true);
        assert!(
            v2.survives_marker(4),
            "the marker of the previous transaction"
        );
        assert!(
            !v2.survives_marker(5),
            "a marker that ends the verified transaction"
        );
        assert!(!v2.survives_marker(3));
        let v1 = VerificationStateEntry::new(0, 0, 4, false);
        assert!(
            !v1.survives_marker(4),
            "transaction version 1: any marker ends it"
        );
    }
}
