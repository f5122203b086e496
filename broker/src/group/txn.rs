//! Offsets inside transactions (KIP-98/447), as Kafka's `OffsetMetadataManager` keeps them.
//!
//! TxnOffsetCommit writes a group's offsets to its `__consumer_offsets` partition as a
//! transactional batch of the committing producer. Until the transaction ends they are
//! *pending* ([`GroupEntry::pending_txn`], by producer id): OffsetFetch does not return them,
//! and with `require_stable` it answers UNSTABLE_OFFSET_COMMIT for their partitions. The
//! transaction coordinator then has a COMMIT or ABORT marker written to the partition
//! (WriteTxnMarkers); after that append, [`GroupCoordinator::complete_txn_offsets`] moves the
//! producer's pending offsets into the committed ones, or drops them. Reading the partition
//! back replays the same decisions from the batches and markers in the log.

use super::store::TxnProducer;
use super::{records, CommitPartition, Committer, GroupCoordinator, GroupEntry};

impl GroupEntry {
    /// Whether a transaction still open holds an offset of (topic, partition) for this group
    /// (Kafka's `hasPendingTransactionalOffsets`).
    pub fn has_pending_txn_offset(&self, key: &(String, i32)) -> bool {
        self.pending_txn.values().any(|o| o.contains_key(key))
    }

    /// Applies a transaction marker of `producer_id` (Kafka's `replayEndTransactionMarker`).
    /// COMMIT: each pending offset becomes the committed one unless a commit whose record is
    /// later in the log is already there. ABORT: the pending offsets are dropped.
    pub fn end_txn(&mut self, producer_id: i64, commit: bool) {
        let Some(pending) = self.pending_txn.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (key, offset) in pending {
            let newer_committed = self
                .offsets
                .get(&key)
                .is_some_and(|c| c.record_offset > offset.record_offset);
            if !newer_committed {
                self.offsets.insert(key, offset);
            }
        }
    }

    /// An offset tombstone: the committed offset goes, and so does every pending one of the
    /// partition (Kafka's replay of a null `OffsetCommitValue`).
    pub fn remove_offset(&mut self, key: &(String, i32)) {
        self.offsets.remove(key);
        for pending in self.pending_txn.values_mut() {
            pending.remove(key);
        }
        self.pending_txn.retain(|_, o| !o.is_empty());
    }
}

impl GroupCoordinator {
    /// TxnOffsetCommit: validates the committer as Kafka does for transactional commits
    /// (`validateTransactionalOffsetCommit`), writes the offsets as `producer`'s transactional
    /// batch, keeps them pending for the group, and answers once the batch is on every
    /// in-sync replica. One error code per partition, in request order.
    pub async fn commit_txn_offsets(
        &self,
        group_id: &str,
        who: &Committer,
        producer: TxnProducer,
        partitions: Vec<CommitPartition>,
    ) -> Vec<i16> {
        debug_assert!(who.transactional);
        self.commit(group_id, who, partitions, Some(producer)).await
    }

    /// Called once a COMMIT or ABORT marker of `producer_id` is on `__consumer_offsets`
    /// partition `offsets_partition` (Kafka's `GroupCoordinatorService.completeTransaction`):
    /// the offsets that producer committed inside its transaction to groups of that partition
    /// become their committed offsets (commit) or are dropped (abort). A partition this node
    /// does not coordinate has nothing in memory; one it leads at a new leader epoch is read
    /// back from the log first, marker included.
    pub fn complete_txn_offsets(&self, offsets_partition: i32, producer_id: i64, commit: bool) {
        let mut st = self.state.lock();
        if self.acquire_partition(&mut st, offsets_partition).is_err() {
            return;
        }
        let partitions = self.store.partitions();
        let mut completed = 0usize;
        for (group_id, entry) in st.groups.iter_mut() {
            if entry.pending_txn.contains_key(&producer_id)
                && records::partition_for(group_id, partitions) == offsets_partition
            {
                entry.end_txn(producer_id, commit);
                completed += 1;
            }
        }
        tracing::debug!(
            partition = offsets_partition,
            producer_id,
            commit,
            groups = completed,
            "transaction marker applied to group offsets"
        );
    }
}
