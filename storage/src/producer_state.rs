//! Per-producer idempotence state of one partition (Kafka's `ProducerStateManager`,
//! `ProducerStateEntry` and `ProducerAppendInfo`).
//!
//! For each producer id we keep its epoch and the metadata of its last
//! [`NUM_BATCHES_TO_RETAIN`] batches. A retry of one of those batches is answered with the
//! original offsets instead of being appended twice. The state is derived from the log: it is
//! rebuilt by replaying batches, and snapshot files (`<20-digit offset>.snapshot`) bound how much
//! of the log a restart has to replay.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::batch::{increment_sequence, NO_SEQUENCE};
use super::control::EndTxnMarker;
use super::validator::AppendOrigin;
use super::verification::{VerificationGuard, VerificationStateEntry};
use super::LogError;

/// Batches remembered per producer (Kafka's NUM_BATCHES_TO_RETAIN).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
/// Suffix of producer state snapshot files.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// Snapshots kept on disk; older ones are deleted after each new one.
pub const SNAPSHOTS_TO_KEEP: usize = 2;
/// Largest snapshot file we will read; a larger file is treated as corrupt.
pub const SNAPSHOT_MAX_BYTES: u64 = 512 * 1024 * 1024;
/// "No epoch yet".
pub const NO_PRODUCER_EPOCH: i16 = -1;

const SNAPSHOT_MAGIC: &[u8; 4] = b"BRPS";
const SNAPSHOT_VERSION: u16 = 1;
const SNAPSHOT_HEADER_BYTES: usize = 4 + 2 + 4;
const ENTRY_FIXED_BYTES: usize = 8 + 2 + 4 + 8 + 8 + 1;
const BATCH_BYTES: usize = 4 + 4 + 8 + 4 + 8;

/// Metadata of one retained batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// Sequence of the first record.
    pub first_seq: i32,
    /// Sequence of the last record.
    pub last_seq: i32,
    /// Offset of the first record.
    pub first_offset: i64,
    /// last offset - first offset.
    pub last_offset_delta: i32,
    /// The batch's maxTimestamp.
    pub timestamp: i64,
}

impl BatchMetadata {
    /// Offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.first_offset + self.last_offset_delta as i64
    }
}

/// The transaction version from which a marker's epoch must be newer than the producer's
/// (Kafka's `ProducerAppendInfo.checkProducerEpoch`: transaction version 2 bumps the epoch at
/// every EndTxn).
pub const TRANSACTION_VERSION_BUMPS_MARKER_EPOCH: i8 = 2;

/// State of one producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    /// The producer id.
    pub producer_id: i64,
    /// The latest epoch seen.
    pub producer_epoch: i16,
    /// Coordinator epoch of the last transaction marker, -1 if none.
    pub coordinator_epoch: i32,
    /// maxTimestamp of the producer's last batch (used for expiration).
    pub last_timestamp: i64,
    /// First offset of the producer's open transaction, if any (for the last stable offset).
    pub current_txn_first_offset: Option<i64>,
    /// The last batches, oldest first; at most [`NUM_BATCHES_TO_RETAIN`].
    batches: VecDeque<BatchMetadata>,
}

impl ProducerStateEntry {
    fn new(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch: NO_PRODUCER_EPOCH,
            coordinator_epoch: -1,
            last_timestamp: -1,
            current_txn_first_offset: None,
            batches: VecDeque::with_capacity(NUM_BATCHES_TO_RETAIN),
        }
    }

    /// The retained batches, oldest first.
    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batches.iter()
    }

    /// Sequence of the last retained batch's last record, or -1.
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// The retained batch with exactly this sequence range, if any.
    pub fn find_duplicate(
        &self,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
    ) -> Option<BatchMetadata> {
        if epoch != self.producer_epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
            .copied()
    }

    fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        if epoch != self.producer_epoch {
            // A new epoch starts a new sequence space: older batches cannot be retried any more.
            self.batches.clear();
            self.producer_epoch = epoch;
        }
        if self.batches.len() == NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
        self.last_timestamp = batch.timestamp;
        // Kafka's five-batch window (ProducerStateEntry.NUM_BATCHES_TO_RETAIN): duplicate
        // detection is only as good as this bound, so it holds in release builds too.
        assert!(
            self.batches.len() <= NUM_BATCHES_TO_RETAIN,
            "producer batch window overflow"
        );
    }
}

/// What the producer state says about an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Accept,
    /// It is a retry of this batch: answer with its offsets, append nothing.
    Duplicate(BatchMetadata),
}

/// A transaction that a marker just ended (Kafka's `CompletedTxn`), with the last stable
/// offset its `.txnindex` entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    /// The transaction's producer.
    pub producer_id: i64,
    /// Offset of its first record.
    pub first_offset: i64,
    /// Offset of the marker that ended it.
    pub last_offset: i64,
    /// Ended by an ABORT marker.
    pub is_aborted: bool,
    /// Kafka's `ProducerStateManager.lastStableOffset(completedTxn)`: the first offset of the
    /// earliest transaction still open of another producer, else the marker's offset + 1.
    pub last_stable_offset: i64,
}

impl CompletedTxn {
    /// The entry for the aborted transaction index.
    pub fn aborted_txn(&self) -> super::txn_index::AbortedTxn {
        super::txn_index::AbortedTxn {
            producer_id: self.producer_id,
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            last_stable_offset: self.last_stable_offset,
        }
    }
}

/// All producers' state for one partition.
#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerStateEntry>,
    /// The state reflects every batch below this offset.
    map_end_offset: i64,
    /// Open transactions: first offset -> producer id (Kafka's `ongoingTxns`). Mirrors each
    /// entry's `current_txn_first_offset`, ordered so the earliest is found at once.
    ongoing_txns: BTreeMap<i64, i64>,
    /// Ended transactions whose marker may not be replicated yet: first offset -> marker
    /// offset (Kafka's `unreplicatedTxns`). They stay unstable until the high watermark
    /// passes the marker ([`Self::on_high_watermark_updated`]), so that no reader sees their
    /// records before every in-sync replica knows how they ended.
    unreplicated_txns: BTreeMap<i64, i64>,
    /// Verifications in progress, by producer id (Kafka's `verificationStates`): at most one
    /// per producer, removed by the producer's next transactional batch or marker, or by
    /// [`Self::remove_expired`]. Not in snapshots (a restart forgets them, as Kafka's do: a
    /// guard from before it no longer matches, and the producer verifies again).
    verification_states: HashMap<i64, VerificationStateEntry>,
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

impl ProducerStateManager {
    /// Empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// The offset up to which the state has been built.
    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }

    /// Number of producers tracked.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is tracked.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// One producer's state.
    pub fn get(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    /// All producers (for admin views): id, epoch and the last batches.
    pub fn iter(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.producers.values()
    }

    /// The earliest offset that is not yet stable (Kafka's `firstUnstableOffset`): the first
    /// offset of an open transaction, or of an ended one whose marker the high watermark has
    /// not passed yet. O(log n): two ordered maps.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let ongoing = self.ongoing_txns.keys().next().copied();
        let unreplicated = self.unreplicated_txns.keys().next().copied();
        match (ongoing, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The open transactions, earliest first: each one's first offset and its producer
    /// (Kafka's `ongoingTxns`, read for the admin views).
    pub fn ongoing_transactions(&self) -> impl Iterator<Item = (i64, &ProducerStateEntry)> {
        self.ongoing_txns
            .iter()
            .filter_map(|(first, id)| Some((*first, self.producers.get(id)?)))
    }

    /// The earliest first offset of an open transaction (Kafka's `firstUndecidedOffset`).
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing_txns.keys().next().copied()
    }

    /// The high watermark moved: transactions whose marker is below it are stable now.
    pub fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        if !self.unreplicated_txns.is_empty() {
            self.unreplicated_txns
                .retain(|_, marker| *marker >= high_watermark);
        }
    }

    /// The log start offset moved: forget ended transactions below it (Kafka's
    /// `onLogStartOffsetIncremented`).
    pub fn on_log_start_offset_incremented(&mut self, log_start_offset: i64) {
        self.unreplicated_txns
            .retain(|_, marker| *marker >= log_start_offset);
        self.map_end_offset = self.map_end_offset.max(log_start_offset);
    }

    /// Kafka's duplicate, verification, epoch and sequence rules for a data batch, without
    /// changing state. Order matters and follows Kafka: duplicates first (same epoch, same
    /// range), then the verification guard of a transactional batch outside an ongoing
    /// transaction, then the epoch, then the sequence (client appends only). `verification` is
    /// the guard the append carries where the append is subject to KIP-890 verification
    /// (`None`: it is not, as with `transaction.partition.verification.enable=false`).
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &self,
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
        is_transactional: bool,
        origin: AppendOrigin,
        verification: Option<VerificationGuard>,
    ) -> Result<SequenceCheck, LogError> {
        if origin == AppendOrigin::Replication {
            return Ok(SequenceCheck::Accept);
        }
        let entry = self.producers.get(&producer_id);
        if origin == AppendOrigin::Client {
            if let Some(dup) = entry.and_then(|e| e.find_duplicate(epoch, first_seq, last_seq)) {
                return Ok(SequenceCheck::Duplicate(dup));
            }
        }
        if let Some(guard) = verification.filter(|_| is_transactional) {
            self.check_verification(producer_id, epoch, guard)?;
        }
        let Some(entry) = entry else {
            // No state (new producer, or its batches were all deleted): any sequence is
            // accepted, except against a verification in progress.
            if origin == AppendOrigin::Client {
                self.check_verifying_sequence(producer_id, first_seq, true)?;
            }
            return Ok(SequenceCheck::Accept);
        };
        if epoch < entry.producer_epoch {
            return Err(LogError::InvalidProducerEpoch(format!(
                "producer {producer_id} epoch {epoch} is older than the current epoch {}",
                entry.producer_epoch
            )));
        }
        if entry.current_txn_first_offset.is_some() && !is_transactional {
            // Kafka's `ProducerAppendInfo.appendDataBatch`: no plain write inside a transaction.
            return Err(LogError::InvalidTxnState(format!(
                "producer {producer_id} wrote a non-transactional batch while its transaction is open"
            )));
        }
        if origin != AppendOrigin::Client {
            return Ok(SequenceCheck::Accept);
        }
        self.check_verifying_sequence(producer_id, first_seq, entry.batches.is_empty())?;
        if entry.producer_epoch == NO_PRODUCER_EPOCH {
            return Ok(SequenceCheck::Accept);
        }
        if epoch != entry.producer_epoch {
            if first_seq != 0 {
                return Err(LogError::OutOfOrderSequence(format!(
                    "producer {producer_id}: new epoch {epoch} must start at sequence 0, got {first_seq}"
                )));
            }
        } else if !in_sequence(entry.last_seq(), first_seq) {
            return Err(LogError::OutOfOrderSequence(format!(
                "producer {producer_id} epoch {epoch}: expected sequence {}, got {first_seq}",
                increment_sequence(entry.last_seq(), 1)
            )));
        }
        Ok(SequenceCheck::Accept)
    }

    /// Kafka's `UnifiedLog.analyzeAndValidateProducerState` for a transactional batch: outside
    /// an ongoing transaction of this epoch, an older epoch is INVALID_PRODUCER_EPOCH and an
    /// append whose guard is not the producer's current verification is INVALID_TXN_STATE (the
    /// transaction it was verified for has ended since, or it never verified).
    fn check_verification(
        &self,
        producer_id: i64,
        epoch: i16,
        request: VerificationGuard,
    ) -> Result<(), LogError> {
        if self.has_ongoing_transaction(producer_id, epoch) {
            return Ok(());
        }
        if let Some(entry) = self.producers.get(&producer_id) {
            if epoch < entry.producer_epoch {
                return Err(LogError::InvalidProducerEpoch(format!(
                    "producer {producer_id} epoch {epoch} is older than the current epoch {}",
                    entry.producer_epoch
                )));
            }
        }
        let current = self.verification_guard(producer_id);
        if !current.verify(request) {
            tracing::debug!(
                producer_id,
                epoch,
                ?request,
                ?current,
                state = ?self.producers.get(&producer_id),
                "transactional append refused: verification guard no longer current"
            );
            return Err(LogError::InvalidTxnState(format!(
                "producer {producer_id}: record was not part of an ongoing transaction"
            )));
        }
        Ok(())
    }

    /// Kafka's `ProducerAppendInfo.checkSequence` against a verification in progress: a
    /// transaction version 2 producer with no batches retained here (`no_batches`: no state,
    /// or a marker's epoch bump dropped them) starts its transaction at sequence 0; and while
    /// a batch with a lower sequence may still be verified and retried, a higher one may not
    /// be written first (with no state yet, any sequence would be accepted).
    fn check_verifying_sequence(
        &self,
        producer_id: i64,
        first_seq: i32,
        no_batches: bool,
    ) -> Result<(), LogError> {
        let Some(v) = self.verification_states.get(&producer_id) else {
            return Ok(());
        };
        if v.supports_epoch_bump && first_seq != 0 && no_batches {
            return Err(LogError::OutOfOrderSequence(format!(
                "producer {producer_id}: sequence {first_seq}, expected 0 for a transaction \
                 version 2 producer with no state"
            )));
        }
        if first_seq > v.lowest_sequence {
            return Err(LogError::OutOfOrderSequence(format!(
                "producer {producer_id}: sequence {first_seq} is above {}, the earliest still \
                 being verified",
                v.lowest_sequence
            )));
        }
        Ok(())
    }

    /// Whether the producer has a transaction open here at this epoch (Kafka's
    /// `UnifiedLog.hasOngoingTransaction`): its batches need no verification.
    pub fn has_ongoing_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.current_txn_first_offset.is_some() && e.producer_epoch == epoch)
    }

    /// Starts or joins the producer's verification (Kafka's
    /// `maybeCreateVerificationStateEntry`) and returns the guard its append must carry.
    /// `supports_epoch_bump`: transaction version 2 (see [`VerificationStateEntry`]), fixed by
    /// the request that creates the entry.
    pub fn maybe_create_verification_state_entry(
        &mut self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        supports_epoch_bump: bool,
        now_ms: i64,
    ) -> VerificationGuard {
        let entry = self
            .verification_states
            .entry(producer_id)
            .or_insert_with(|| {
                VerificationStateEntry::new(now_ms, sequence, epoch, supports_epoch_bump)
            });
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch);
        entry.guard
    }

    /// The producer's verification in progress, if any.
    pub fn verification_state_entry(&self, producer_id: i64) -> Option<&VerificationStateEntry> {
        self.verification_states.get(&producer_id)
    }

    /// The guard of the producer's verification in progress, else the sentinel (Kafka's
    /// `UnifiedLog.verificationGuard`).
    pub fn verification_guard(&self, producer_id: i64) -> VerificationGuard {
        self.verification_states
            .get(&producer_id)
            .map_or(VerificationGuard::SENTINEL, |v| v.guard)
    }

    /// Records an appended data batch.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
        first_offset: i64,
        last_offset: i64,
        timestamp: i64,
        is_transactional: bool,
    ) {
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerStateEntry::new(producer_id));
        entry.add_batch(
            epoch,
            BatchMetadata {
                first_seq,
                last_seq,
                first_offset,
                last_offset_delta: (last_offset - first_offset) as i32,
                timestamp,
            },
        );
        if is_transactional {
            // Whichever way the transaction goes now, it is known here: a guard from before
            // must not admit another batch (Kafka's `UnifiedLog.updateProducers`).
            self.verification_states.remove(&producer_id);
        }
        if is_transactional && entry.current_txn_first_offset.is_none() {
            // The producer's first transactional batch since its last marker begins a transaction.
            entry.current_txn_first_offset = Some(first_offset);
            self.ongoing_txns.insert(first_offset, producer_id);
        }
        self.map_end_offset = self.map_end_offset.max(last_offset + 1);
    }

    /// Kafka's checks of a marker a coordinator writes (`ProducerAppendInfo.appendEndTxnMarker`
    /// and `checkProducerEpoch`): an epoch older than the producer's is INVALID_PRODUCER_EPOCH,
    /// a coordinator epoch older than the last marker's is TRANSACTION_COORDINATOR_FENCED (a
    /// zombie coordinator). A newer producer epoch is accepted (the coordinator bumped it, e.g.
    /// aborting on a timeout). A marker of transaction version 2 (WriteTxnMarkers v2) carries
    /// the epoch its coordinator bumped at EndTxn, so the producer's own epoch is refused too,
    /// except as a retry of a marker already written (no transaction open any more) or at the
    /// last epoch, which cannot be bumped.
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        transaction_version: i8,
    ) -> Result<(), LogError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        let strict = transaction_version >= TRANSACTION_VERSION_BUMPS_MARKER_EPOCH;
        let retry = epoch == entry.producer_epoch
            && (entry.current_txn_first_offset.is_none() || epoch == i16::MAX);
        let stale = match strict {
            true => epoch <= entry.producer_epoch && !retry,
            false => epoch < entry.producer_epoch,
        };
        if stale {
            return Err(LogError::InvalidProducerEpoch(format!(
                "marker epoch {epoch} (transaction version {transaction_version}) is not newer \
                 than producer {producer_id}'s epoch {}",
                entry.producer_epoch
            )));
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(LogError::TransactionCoordinatorFenced(format!(
                "marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, \
                 older than {}",
                entry.coordinator_epoch
            )));
        }
        Ok(())
    }

    /// Records a transaction marker at `offset`: the producer's open transaction ends (Kafka's
    /// `appendEndTxnMarker` then `completeTxn`). The epoch may move forward (a coordinator bumps
    /// it when it aborts on a timeout); the retained batches are then dropped. Returns the ended
    /// transaction, `None` for a marker with no transaction open (it changes no offset).
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        marker: EndTxnMarker,
        offset: i64,
        timestamp: i64,
    ) -> Option<CompletedTxn> {
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerStateEntry::new(producer_id));
        if epoch != entry.producer_epoch {
            entry.batches.clear();
            entry.producer_epoch = epoch;
        }
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp = timestamp;
        // The transaction a verification in progress was answered for has ended, unless the
        // verification is of the transaction version 2 transaction that follows it.
        match self.verification_states.get(&producer_id) {
            Some(v) if v.survives_marker(epoch) => {}
            Some(_) => {
                let v = self.verification_states.remove(&producer_id);
                tracing::debug!(producer_id, epoch, verification = ?v, "marker cleared a verification");
            }
            None => {}
        }
        let first_offset = entry.current_txn_first_offset.take();
        self.map_end_offset = self.map_end_offset.max(offset + 1);
        let first_offset = first_offset?;
        self.ongoing_txns.remove(&first_offset);
        // Computed once this transaction is out of the open set: the earliest open one left
        // belongs to another producer (a producer has one transaction open at a time).
        let last_stable_offset = self.first_undecided_offset().unwrap_or(offset + 1);
        self.unreplicated_txns.insert(first_offset, offset);
        Some(CompletedTxn {
            producer_id,
            first_offset,
            last_offset: offset,
            is_aborted: !marker.commit,
            last_stable_offset,
        })
    }

    /// Marks the state as covering every offset below `offset` (after appends without producers).
    pub fn advance_to(&mut self, offset: i64) {
        self.map_end_offset = self.map_end_offset.max(offset);
    }

    /// Forgets everything; state will be rebuilt from `offset`.
    pub fn reset(&mut self, offset: i64) {
        self.producers.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        self.map_end_offset = offset;
    }

    /// Drops producers idle for longer than `expiration_ms` with no open transaction (Kafka's
    /// producer.id.expiration.ms), and verifications started that long ago that no append
    /// ended (Kafka's `removeExpiredProducers`). Returns how many producers were removed.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, p| {
            p.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(p.last_timestamp) < expiration_ms
        });
        self.verification_states
            .retain(|_, v| now_ms.saturating_sub(v.timestamp_ms) < expiration_ms);
        before - self.producers.len()
    }

    // ---------------------------------------------------------------------------------------
    // Snapshots
    // ---------------------------------------------------------------------------------------

    /// Encodes the state (magic, version, CRC-32C of the rest, end offset, entries).
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(
            12 + self.producers.len() * (ENTRY_FIXED_BYTES + NUM_BATCHES_TO_RETAIN * BATCH_BYTES),
        );
        body.extend_from_slice(&self.map_end_offset.to_be_bytes());
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort();
        for id in ids {
            let p = &self.producers[id];
            body.extend_from_slice(&p.producer_id.to_be_bytes());
            body.extend_from_slice(&p.producer_epoch.to_be_bytes());
            body.extend_from_slice(&p.coordinator_epoch.to_be_bytes());
            body.extend_from_slice(&p.last_timestamp.to_be_bytes());
            body.extend_from_slice(&p.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
            body.push(p.batches.len() as u8);
            for b in &p.batches {
                body.extend_from_slice(&b.first_seq.to_be_bytes());
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.first_offset.to_be_bytes());
                body.extend_from_slice(&b.last_offset_delta.to_be_bytes());
                body.extend_from_slice(&b.timestamp.to_be_bytes());
            }
        }
        let mut out = Vec::with_capacity(SNAPSHOT_HEADER_BYTES + body.len());
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Decodes a snapshot; `None` if it is damaged in any way.
    pub fn decode_snapshot(buf: &[u8]) -> Option<ProducerStateManager> {
        if buf.len() < SNAPSHOT_HEADER_BYTES + 12 || &buf[..4] != SNAPSHOT_MAGIC {
            return None;
        }
        if u16::from_be_bytes([buf[4], buf[5]]) != SNAPSHOT_VERSION {
            return None;
        }
        let crc = u32::from_be_bytes([buf[6], buf[7], buf[8], buf[9]]);
        let body = &buf[SNAPSHOT_HEADER_BYTES..];
        if crc32c::crc32c(body) != crc {
            return None;
        }
        let mut r = Reader { buf: body, pos: 0 };
        let map_end_offset = r.i64()?;
        let count = r.u32()? as usize;
        // Each entry takes at least ENTRY_FIXED_BYTES, which bounds the loop by the file size.
        if count > body.len() / ENTRY_FIXED_BYTES {
            return None;
        }
        let mut producers = HashMap::with_capacity(count);
        let mut ongoing_txns = BTreeMap::new();
        for _ in 0..count {
            let producer_id = r.i64()?;
            let producer_epoch = r.i16()?;
            let coordinator_epoch = r.i32()?;
            let last_timestamp = r.i64()?;
            let txn = r.i64()?;
            let n = r.u8()? as usize;
            if n > NUM_BATCHES_TO_RETAIN {
                return None;
            }
            let mut batches = VecDeque::with_capacity(NUM_BATCHES_TO_RETAIN);
            for _ in 0..n {
                batches.push_back(BatchMetadata {
                    first_seq: r.i32()?,
                    last_seq: r.i32()?,
                    first_offset: r.i64()?,
                    last_offset_delta: r.i32()?,
                    timestamp: r.i64()?,
                });
            }
            let entry = ProducerStateEntry {
                producer_id,
                producer_epoch,
                coordinator_epoch,
                last_timestamp,
                current_txn_first_offset: (txn >= 0).then_some(txn),
                batches,
            };
            if let Some(first) = entry.current_txn_first_offset {
                ongoing_txns.insert(first, producer_id);
            }
            producers.insert(producer_id, entry);
        }
        if r.pos != body.len() {
            return None;
        }
        Some(ProducerStateManager {
            producers,
            map_end_offset,
            ongoing_txns,
            // Not in snapshots, as in Kafka: markers below the snapshot count as stable, and
            // those replayed after it wait for the restored high watermark again.
            unreplicated_txns: BTreeMap::new(),
            verification_states: HashMap::new(),
        })
    }

    /// Writes `<dir>/<map_end_offset>.snapshot` (through a temporary file and a rename, so a
    /// crash leaves either the old set of snapshots or the new one), then keeps only the newest
    /// [`SNAPSHOTS_TO_KEEP`]. `sync` fsyncs the file and the directory.
    pub fn write_snapshot(&self, dir: &Path, sync: bool) -> io::Result<PathBuf> {
        let path = snapshot_path(dir, self.map_end_offset);
        let body = self.encode_snapshot();
        crate::checkpoint::replace_file(&path, sync, |f| f.write_all(&body))?;
        // An old snapshot that a crash brings back is harmless: loading takes the newest.
        let mut all = list_snapshots(dir)?;
        while all.len() > SNAPSHOTS_TO_KEEP {
            let (_, old) = all.remove(0);
            let _ = fs::remove_file(old);
        }
        Ok(path)
    }

    /// Loads the newest valid snapshot whose offset is within `[min_offset, max_offset]`,
    /// deleting damaged ones and those past `max_offset` (they describe truncated data).
    pub fn load_latest_snapshot(
        dir: &Path,
        min_offset: i64,
        max_offset: i64,
    ) -> io::Result<Option<ProducerStateManager>> {
        let mut all = list_snapshots(dir)?;
        while let Some((offset, path)) = all.pop() {
            if offset > max_offset {
                let _ = fs::remove_file(&path);
                continue;
            }
            if offset < min_offset {
                return Ok(None);
            }
            let len = fs::metadata(&path)?.len();
            let state = if len <= SNAPSHOT_MAX_BYTES {
                fs::read(&path).ok().and_then(|b| Self::decode_snapshot(&b))
            } else {
                None
            };
            match state {
                Some(s) if s.map_end_offset == offset => return Ok(Some(s)),
                _ => {
                    tracing::warn!(path = %path.display(), "discarding damaged producer state snapshot");
                    let _ = fs::remove_file(&path);
                }
            }
        }
        Ok(None)
    }
}

/// `<dir>/<20-digit offset>.snapshot`.
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

/// All snapshot files in `dir`, sorted by offset.
pub fn list_snapshots(dir: &Path) -> io::Result<Vec<(i64, PathBuf)>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(stem) = name.strip_suffix(SNAPSHOT_SUFFIX) {
            if let Ok(off) = stem.parse::<i64>() {
                out.push((off, e.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Deletes snapshots with an offset > `offset`.
pub fn delete_snapshots_after(dir: &Path, offset: i64) -> io::Result<()> {
    for (o, p) in list_snapshots(dir)? {
        if o > offset {
            fs::remove_file(p)?;
        }
    }
    Ok(())
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let s = self.buf.get(self.pos..self.pos.checked_add(N)?)?;
        self.pos += N;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|a| a[0])
    }
    fn i16(&mut self) -> Option<i16> {
        self.take().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Option<i32> {
        self.take().map(i32::from_be_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const C: AppendOrigin = AppendOrigin::Client;

    fn append(
        m: &mut ProducerStateManager,
        pid: i64,
        epoch: i16,
        first: i32,
        n: i32,
        offset: i64,
    ) -> Result<SequenceCheck, LogError> {
        let last = increment_sequence(first, n - 1);
        let r = m.check(pid, epoch, first, last, false, C, None)?;
        if r == SequenceCheck::Accept {
            m.update(
                pid,
                epoch,
                first,
                last,
                offset,
                offset + n as i64 - 1,
                0,
                false,
            );
        }
        Ok(r)
    }

    #[test]
    fn dedup_and_errors() {
        let mut m = ProducerStateManager::new();
        assert_eq!(
            append(&mut m, 1, 0, 0, 2, 0).unwrap(),
            SequenceCheck::Accept
        );
        assert_eq!(
            append(&mut m, 1, 0, 2, 3, 2).unwrap(),
            SequenceCheck::Accept
        );
        // retry of the first batch: original offsets
        match append(&mut m, 1, 0, 0, 2, 99).unwrap() {
            SequenceCheck::Duplicate(b) => assert_eq!((b.first_offset, b.last_offset()), (0, 1)),
            other => panic!("{other:?}"),
        }
        // gap
        assert_eq!(append(&mut m, 1, 0, 7, 1, 5).unwrap_err().error_code(), 45);
        // overlapping but not identical range
        assert_eq!(append(&mut m, 1, 0, 1, 2, 5).unwrap_err().error_code(), 45);
        // older epoch
        assert_eq!(append(&mut m, 1, -1, 5, 1, 5).unwrap_err().error_code(), 47);
        // new epoch must start at 0
        assert_eq!(append(&mut m, 1, 1, 5, 1, 5).unwrap_err().error_code(), 45);
        assert_eq!(
            append(&mut m, 1, 1, 0, 1, 5).unwrap(),
            SequenceCheck::Accept
        );
        // old epoch's batches are gone: the former retry is now an epoch error
        assert_eq!(append(&mut m, 1, 0, 0, 2, 6).unwrap_err().error_code(), 47);
        // unknown producer: any sequence
        assert_eq!(
            append(&mut m, 2, 4, 1234, 1, 6).unwrap(),
            SequenceCheck::Accept
        );
    }

    #[test]
    fn sequence_wraps() {
        let mut m = ProducerStateManager::new();
        append(&mut m, 1, 0, i32::MAX - 1, 2, 0).unwrap();
        assert_eq!(m.get(1).unwrap().last_seq(), i32::MAX);
        assert_eq!(
            append(&mut m, 1, 0, 0, 1, 2).unwrap(),
            SequenceCheck::Accept
        );
    }

    #[test]
    fn snapshot_round_trip_and_corruption() {
        let mut m = ProducerStateManager::new();
        for i in 0..7 {
            append(&mut m, 10, 2, i * 3, 3, i as i64 * 3).unwrap();
        }
        m.update(11, 0, 0, 0, 21, 21, 5, true);
        let buf = m.encode_snapshot();
        let back = ProducerStateManager::decode_snapshot(&buf).unwrap();
        assert_eq!(back.map_end_offset(), 22);
        assert_eq!(back.get(10), m.get(10));
        assert_eq!(back.get(10).unwrap().batches().count(), 5);
        assert_eq!(back.first_unstable_offset(), Some(21));
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            assert!(
                ProducerStateManager::decode_snapshot(&bad).is_none(),
                "byte {i}"
            );
        }
        assert!(ProducerStateManager::decode_snapshot(&buf[..buf.len() - 1]).is_none());
    }

    #[test]
    fn snapshot_files_keep_two() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new();
        for off in [10i64, 20, 30] {
            m.update(1, 0, off as i32, off as i32, off, off, 0, false);
            m.advance_to(off);
            m.map_end_offset = off;
            m.write_snapshot(dir.path(), false).unwrap();
        }
        let snaps = list_snapshots(dir.path()).unwrap();
        assert_eq!(snaps.iter().map(|s| s.0).collect::<Vec<_>>(), vec![20, 30]);
        let s = ProducerStateManager::load_latest_snapshot(dir.path(), 0, 25)
            .unwrap()
            .unwrap();
        assert_eq!(s.map_end_offset(), 20);
        // the one past max_offset was deleted
        assert_eq!(list_snapshots(dir.path()).unwrap().len(), 1);
        std::fs::write(snapshot_path(dir.path(), 20), b"garbage").unwrap();
        assert!(
            ProducerStateManager::load_latest_snapshot(dir.path(), 0, 25)
                .unwrap()
                .is_none()
        );
    }

    fn marker(commit: bool, coordinator_epoch: i32) -> EndTxnMarker {
        EndTxnMarker {
            commit,
            coordinator_epoch,
        }
    }

    #[test]
    fn transactions_open_and_complete_in_first_offset_order() {
        let mut m = ProducerStateManager::new();
        m.update(1, 0, 0, 1, 10, 11, 0, true);
        m.update(2, 0, 0, 0, 12, 12, 0, true);
        m.update(1, 0, 2, 2, 13, 13, 0, true);
        assert_eq!(m.get(1).unwrap().current_txn_first_offset, Some(10));
        assert_eq!(m.first_unstable_offset(), Some(10));
        let done = m.append_marker(1, 0, marker(false, 3), 14, 0).unwrap();
        assert_eq!(
            done,
            CompletedTxn {
                producer_id: 1,
                first_offset: 10,
                last_offset: 14,
                is_aborted: true,
                last_stable_offset: 12,
            }
        );
        assert_eq!(m.first_undecided_offset(), Some(12));
        assert_eq!(
            m.first_unstable_offset(),
            Some(10),
            "marker not replicated yet"
        );
        m.on_high_watermark_updated(15);
        assert_eq!(m.first_unstable_offset(), Some(12));
        // A snapshot keeps the open transaction.
        let back = ProducerStateManager::decode_snapshot(&m.encode_snapshot()).unwrap();
        assert_eq!(back.first_unstable_offset(), Some(12));
        assert_eq!(back.get(1).unwrap().coordinator_epoch, 3);
        let done = m.append_marker(2, 0, marker(true, 3), 15, 0).unwrap();
        assert_eq!((done.is_aborted, done.last_stable_offset), (false, 16));
        // A marker with no open transaction ends nothing.
        assert_eq!(m.append_marker(2, 0, marker(true, 3), 16, 0), None);
        m.on_high_watermark_updated(17);
        assert_eq!(m.first_unstable_offset(), None);
    }

    #[test]
    fn marker_checks_follow_kafka() {
        let mut m = ProducerStateManager::new();
        assert!(m.check_marker(5, 0, 0, 0).is_ok(), "unknown producer");
        m.update(5, 2, 0, 0, 0, 0, 0, true);
        m.append_marker(5, 2, marker(false, 4), 1, 0);
        assert_eq!(m.check_marker(5, 1, 4, 0).unwrap_err().error_code(), 47);
        assert_eq!(m.check_marker(5, 2, 3, 0).unwrap_err().error_code(), 52);
        assert!(
            m.check_marker(5, 3, 4, 0).is_ok(),
            "a bumped epoch is accepted"
        );
        // Transaction version 2: the producer's own epoch is a retry once its transaction
        // ended, and refused while one is open; a bumped epoch is accepted.
        assert!(m.check_marker(5, 2, 4, 2).is_ok(), "a retried marker");
        m.update(5, 2, 0, 0, 2, 2, 0, true);
        assert_eq!(m.check_marker(5, 2, 4, 2).unwrap_err().error_code(), 47);
        assert!(
            m.check_marker(5, 2, 4, 1).is_ok(),
            "version 1 accepts the same epoch"
        );
        assert!(
            m.check_marker(5, 3, 4, 2).is_ok(),
            "a bumped epoch is accepted"
        );
        m.update(6, 0, 0, 0, 2, 2, 0, true);
        let plain = m.check(6, 0, 1, 1, false, C, None);
        assert_eq!(plain.unwrap_err().error_code(), 48);
        assert!(m.check(6, 0, 1, 1, true, C, None).is_ok());
    }

    /// A transactional data check of producer `pid` at epoch 0, sequence `seq`, carrying `guard`.
    fn check_txn(
        m: &ProducerStateManager,
        pid: i64,
        seq: i32,
        guard: Option<VerificationGuard>,
    ) -> Result<SequenceCheck, LogError> {
        m.check(pid, 0, seq, seq, true, C, guard)
    }

    #[test]
    fn verification_entry_is_created_once_and_cleared_by_a_transactional_batch() {
        let mut m = ProducerStateManager::new();
        let g = m.maybe_create_verification_state_entry(1, 0, 0, false, 100);
        assert!(!g.is_sentinel());
        assert_eq!(
            m.maybe_create_verification_state_entry(1, 0, 0, false, 200),
            g
        );
        assert_eq!(m.verification_state_entry(1).unwrap().timestamp_ms, 100);
        // Only the guard that was handed out admits the first transactional batch.
        let refused = check_txn(&m, 1, 0, Some(VerificationGuard::SENTINEL));
        assert_eq!(refused.unwrap_err().error_code(), 48);
        assert_eq!(check_txn(&m, 1, 0, Some(g)).unwrap(), SequenceCheck::Accept);
        // A plain idempotent batch of the producer leaves the verification in place.
        m.update(1, 0, 0, 0, 0, 0, 0, false);
        assert_eq!(m.verification_guard(1), g);
        m.update(1, 0, 1, 1, 1, 1, 0, true);
        assert!(m.verification_state_entry(1).is_none());
        // Inside the ongoing transaction no guard is needed.
        assert!(m.has_ongoing_transaction(1, 0));
        let inside = check_txn(&m, 1, 2, Some(VerificationGuard::SENTINEL));
        assert_eq!(inside.unwrap(), SequenceCheck::Accept);
    }

    #[test]
    fn a_marker_between_verification_and_append_refuses_the_append() {
        let mut m = ProducerStateManager::new();
        m.update(1, 0, 0, 0, 0, 0, 0, true);
        m.append_marker(1, 0, marker(true, 0), 1, 0);
        // The next transaction verifies, then the coordinator aborts it before the append.
        let g = m.maybe_create_verification_state_entry(1, 1, 0, false, 0);
        assert_eq!(m.append_marker(1, 0, marker(false, 0), 2, 0), None);
        assert!(m.verification_state_entry(1).is_none());
        assert_eq!(check_txn(&m, 1, 1, Some(g)).unwrap_err().error_code(), 48);
        // ABA: a newer verification does not revive the old guard.
        let g2 = m.maybe_create_verification_state_entry(1, 1, 0, false, 0);
        assert_ne!(g, g2);
        assert_eq!(check_txn(&m, 1, 1, Some(g)).unwrap_err().error_code(), 48);
        assert_eq!(
            check_txn(&m, 1, 1, Some(g2)).unwrap(),
            SequenceCheck::Accept
        );
        // Without verification (None) the guard is not looked at, as with the switch off.
        assert_eq!(check_txn(&m, 1, 1, None).unwrap(), SequenceCheck::Accept);
    }

    /// Transaction version 2: the commit's marker comes at the bumped epoch, which the next
    /// transaction, verified before that marker landed, already uses.
    #[test]
    fn a_version_2_verification_survives_the_previous_transactions_marker_only() {
        let mut m = ProducerStateManager::new();
        m.update(1, 0, 0, 0, 0, 0, 0, true); // transaction at epoch 0
        let g = m.maybe_create_verification_state_entry(1, 0, 1, true, 0); // next, at 1
        assert_eq!(
            m.append_marker(1, 1, marker(true, 0), 1, 0)
                .unwrap()
                .first_offset,
            0
        );
        assert_eq!(
            m.verification_guard(1),
            g,
            "the commit at epoch 1 leaves it"
        );
        let first = m.check(1, 1, 0, 0, true, C, Some(g));
        assert_eq!(first.unwrap(), SequenceCheck::Accept);
        m.update(1, 1, 0, 0, 2, 2, 0, true);
        assert!(
            m.verification_state_entry(1).is_none(),
            "its first batch clears it"
        );
        // Verified, then aborted before the append: the abort bumps the epoch to 2.
        m.append_marker(1, 2, marker(false, 0), 3, 0);
        let g = m.maybe_create_verification_state_entry(1, 0, 2, true, 0);
        m.append_marker(1, 3, marker(false, 0), 4, 0);
        assert!(
            m.verification_state_entry(1).is_none(),
            "a marker at a newer epoch clears it"
        );
        let late = m.check(1, 2, 0, 0, true, C, Some(g));
        assert_eq!(
            late.unwrap_err().error_code(),
            47,
            "older than the producer's epoch"
        );
        // Version 1 verifications end at any marker, at any epoch.
        m.update(2, 0, 0, 0, 5, 5, 0, true);
        let g = m.maybe_create_verification_state_entry(2, 1, 0, false, 0);
        m.append_marker(2, 0, marker(true, 0), 6, 0);
        assert!(m.verification_state_entry(2).is_none());
        let stale = m.check(2, 0, 1, 1, true, C, Some(g));
        assert_eq!(stale.unwrap_err().error_code(), 48);
    }

    /// Kafka's `ProducerAppendInfo.checkSequence`: a version 2 producer with no batches here
    /// starts its transaction at sequence 0; a version 1 one may start anywhere.
    #[test]
    fn a_version_2_producer_with_no_state_starts_at_sequence_zero() {
        let mut m = ProducerStateManager::new();
        let g = m.maybe_create_verification_state_entry(1, 4, 0, true, 0);
        assert_eq!(check_txn(&m, 1, 4, Some(g)).unwrap_err().error_code(), 45);
        let g = m.maybe_create_verification_state_entry(1, 0, 0, true, 0);
        assert_eq!(check_txn(&m, 1, 0, Some(g)).unwrap(), SequenceCheck::Accept);
        // After a marker's epoch bump the producer has no batches left: 0 again.
        m.update(1, 0, 0, 0, 0, 0, 0, true);
        m.append_marker(1, 1, marker(true, 0), 1, 0);
        let g = m.maybe_create_verification_state_entry(1, 3, 1, true, 0);
        let bumped = m.check(1, 1, 3, 3, true, C, Some(g));
        assert_eq!(bumped.unwrap_err().error_code(), 45);
        let g = m.maybe_create_verification_state_entry(2, 4, 0, false, 0);
        assert_eq!(check_txn(&m, 2, 4, Some(g)).unwrap(), SequenceCheck::Accept);
    }

    #[test]
    fn verification_checks_the_epoch_and_the_lowest_sequence() {
        let mut m = ProducerStateManager::new();
        let g = m.maybe_create_verification_state_entry(1, 3, 0, false, 0);
        assert_eq!(
            m.maybe_create_verification_state_entry(1, 1, 0, false, 0),
            g
        );
        assert_eq!(m.verification_state_entry(1).unwrap().lowest_sequence, 1);
        // No producer state yet, but a higher sequence may not overtake the lower one.
        assert_eq!(check_txn(&m, 1, 3, Some(g)).unwrap_err().error_code(), 45);
        assert_eq!(check_txn(&m, 1, 1, Some(g)).unwrap(), SequenceCheck::Accept);
        // An epoch older than the producer's is refused before the guard is looked at.
        m.update(2, 5, 0, 0, 0, 0, 0, false);
        let g2 = m.maybe_create_verification_state_entry(2, 0, 4, false, 0);
        let old = m.check(2, 4, 0, 0, true, C, Some(g2));
        assert_eq!(old.unwrap_err().error_code(), 47);
    }

    #[test]
    fn verification_entries_expire_with_producer_ids() {
        let mut m = ProducerStateManager::new();
        m.maybe_create_verification_state_entry(1, 0, 0, false, 1_000);
        m.maybe_create_verification_state_entry(2, 0, 0, false, 5_000);
        m.remove_expired(10_999, 10_000);
        assert!(m.verification_state_entry(1).is_some(), "not yet");
        m.remove_expired(11_000, 10_000);
        assert!(m.verification_state_entry(1).is_none());
        assert!(m.verification_state_entry(2).is_some());
        // Snapshots do not carry them.
        let back = ProducerStateManager::decode_snapshot(&m.encode_snapshot()).unwrap();
        assert!(back.verification_state_entry(2).is_none());
    }

    /// A plain model of Kafka's rules: the full history per producer, scanned naively.
    #[derive(Default)]
    struct Model {
        epoch: HashMap<i64, i16>,
        history: HashMap<i64, Vec<(i32, i32, i64)>>, // (first, last, offset) in the current epoch
    }

    impl Model {
        fn apply(
            &mut self,
            pid: i64,
            epoch: i16,
            first: i32,
            n: i32,
            next_offset: i64,
        ) -> Result<Option<i64>, i16> {
            let last = increment_sequence(first, n - 1);
            let Some(&cur) = self.epoch.get(&pid) else {
                self.epoch.insert(pid, epoch);
                self.history.insert(pid, vec![(first, last, next_offset)]);
                return Ok(None);
            };
            let hist = self.history.get_mut(&pid).unwrap();
            if epoch == cur {
                let window = &hist[hist.len().saturating_sub(NUM_BATCHES_TO_RETAIN)..];
                if let Some(&(_, _, off)) =
                    window.iter().find(|&&(f, l, _)| f == first && l == last)
                {
                    return Ok(Some(off));
                }
            }
            if epoch < cur {
                return Err(47);
            }
            if cur == NO_PRODUCER_EPOCH {
                // Kafka: no known epoch accepts any sequence.
                self.epoch.insert(pid, epoch);
                if epoch != cur {
                    hist.clear();
                }
            } else if epoch > cur {
                if first != 0 {
                    return Err(45);
                }
                self.epoch.insert(pid, epoch);
                hist.clear();
            } else if !in_sequence(hist.last().unwrap().1, first) {
                return Err(45);
            }
            hist.push((first, last, next_offset));
            Ok(None)
        }
    }

    proptest! {
        #[test]
        fn window_matches_model(ops in proptest::collection::vec((0i64..3, 0u8..6, 0usize..8, 0i32..20, 1i32..4), 1..300)) {
            let mut m = ProducerStateManager::new();
            let mut model = Model::default();
            let mut next_offset = 0i64;
            for (pid, kind, pick, random_seq, n) in ops {
                let cur_epoch = model.epoch.get(&pid).copied().unwrap_or(0);
                let hist = model.history.get(&pid).cloned().unwrap_or_default();
                let next_seq = hist.last().map_or(0, |h| increment_sequence(h.1, 1));
                // Mostly in-sequence appends and retries, with some gaps and epoch changes.
                let (epoch, first, n) = match kind {
                    0 | 1 => (cur_epoch, next_seq, n),
                    2 if !hist.is_empty() => {
                        let (f, l, _) = hist[hist.len() - 1 - pick % hist.len()];
                        (cur_epoch, f, (l - f) + 1)
                    }
                    3 => (cur_epoch, random_seq, n),
                    4 => (cur_epoch + 1, if pick % 2 == 0 { 0 } else { random_seq }, n),
                    _ => (cur_epoch - 1, 0, n),
                };
                let expect = model.apply(pid, epoch, first, n, next_offset);
                let got = append(&mut m, pid, epoch, first, n, next_offset);
                match (expect, got) {
                    (Ok(None), Ok(SequenceCheck::Accept)) => next_offset += n as i64,
                    (Ok(Some(off)), Ok(SequenceCheck::Duplicate(b))) => prop_assert_eq!(off, b.first_offset),
                    (Err(code), Err(e)) => prop_assert_eq!(code, e.error_code()),
                    (e, g) => prop_assert!(false, "model {:?} vs manager {:?}", e, g),
                }
            }
            // The snapshot reproduces the same state.
            let back = ProducerStateManager::decode_snapshot(&m.encode_snapshot()).unwrap();
            for p in m.iter() {
                prop_assert_eq!(Some(p), back.get(p.producer_id));
            }
        }
    }
}
