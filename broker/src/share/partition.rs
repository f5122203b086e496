//! One share-partition: a share group's view of one topic partition (Kafka's
//! `SharePartition`, with `InFlightBatch`/`InFlightState` kept per offset here).
//!
//! The share-partition start offset (SPSO) is the first offset not yet finished with; the
//! end offset is the next offset to read from the log. Each offset in between is in flight:
//!
//! ```text
//!            acquire (delivery_count += 1)
//!  Available ─────────────────────────────> Acquired ──ACCEPT──> Acknowledged
//!      ^                                     │  │
//!      └──── RELEASE / lock timeout ─────────┘  └──REJECT / GAP──> Archived
//!            (Archived instead once delivery_count reaches the delivery limit)
//! ```
//!
//! Acknowledged and Archived are final; the SPSO moves past a run of final offsets. At most
//! `group.share.partition.max.record.locks` offsets are in flight (Kafka's
//! `maxInFlightRecords`): past that, nothing new is acquired until the SPSO moves.
//! Nothing here awaits or reads the clock: `now_ms` is explicit; the limits are the group's
//! at the time of each call ([`super::config`]).

use std::collections::BTreeMap;

use super::records::StateBatch;

/// Kafka's `RecordState` ids in persisted state batches.
const STATE_AVAILABLE: i8 = 0;
const STATE_ACKNOWLEDGED: i8 = 2;
const STATE_ARCHIVED: i8 = 4;

/// Kafka's `RecordState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    Archived,
}

/// Kafka's `AcknowledgeType` (0 is GAP: an offset with no record, such as a marker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcknowledgeType {
    Gap,
    Accept,
    Release,
    Reject,
    /// KIP-1222 (ShareFetch/ShareAcknowledge v2): the record stays acquired by its member,
    /// under a new acquisition lock.
    Renew,
}

/// The wire byte of RENEW, the highest acknowledge type (v2 only; the API checks versions).
pub const ACKNOWLEDGE_TYPE_RENEW: i8 = 4;

impl AcknowledgeType {
    pub fn from_byte(b: i8) -> Option<Self> {
        match b {
            0 => Some(AcknowledgeType::Gap),
            1 => Some(AcknowledgeType::Accept),
            2 => Some(AcknowledgeType::Release),
            3 => Some(AcknowledgeType::Reject),
            ACKNOWLEDGE_TYPE_RENEW => Some(AcknowledgeType::Renew),
            _ => None,
        }
    }
}

/// Why an acknowledgement is refused, as Kafka's error codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// INVALID_RECORD_STATE: an offset not acquired by this member.
    #[error("{0}")]
    InvalidRecordState(String),
    /// INVALID_REQUEST: a malformed batch.
    #[error("{0}")]
    InvalidRequest(String),
}

/// One in-flight offset.
#[derive(Debug, Clone)]
struct InFlight {
    state: RecordState,
    delivery_count: i16,
    /// The member holding the acquisition lock, while Acquired.
    member: Option<String>,
    lock_deadline_ms: i64,
}

impl InFlight {
    fn available(delivery_count: i16) -> Self {
        InFlight {
            state: RecordState::Available,
            delivery_count,
            member: None,
            lock_deadline_ms: 0,
        }
    }
}

/// Limits the state machine enforces (`group.share.*`).
#[derive(Debug, Clone, Copy)]
pub struct ShareLimits {
    pub lock_duration_ms: i64,
    pub delivery_count_limit: i16,
    pub max_in_flight: i64,
}

/// A run of acquired offsets with one delivery count (ShareFetch's `AcquiredRecords`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquiredRange {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: i16,
}

/// How many records one acquisition may take: ShareFetch's MaxRecords, and v2's
/// ShareAcquireMode (KIP-1206).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxRecords {
    pub count: usize,
    /// Record-limit mode (1): at most `count`, the last batch split (its other offsets enter
    /// the window Available, as Kafka's `SharePartition.createBatches`). Batch-optimized (0):
    /// whole batches until `count` is reached.
    pub record_limit: bool,
}

impl From<usize> for MaxRecords {
    /// Batch-optimized, the default mode.
    fn from(count: usize) -> Self {
        MaxRecords {
            count,
            record_limit: false,
        }
    }
}

/// A record batch of the log, as the acquisition sees it.
#[derive(Debug, Clone, Copy)]
pub struct LogBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    /// A transaction marker (its offset holds no record to deliver) or, at read_committed,
    /// a batch of an aborted transaction: Archived as soon as it enters the window, and
    /// never handed out.
    pub archive: bool,
}

/// Bound on the offsets a share-partition's persisted state may put in flight when it is
/// loaded; offsets past it are read from the log again as new.
pub const LOADED_WINDOW_MAX: i64 = 100_000;

/// A share-partition.
#[derive(Debug)]
pub struct SharePartition {
    start_offset: i64,
    end_offset: i64,
    in_flight: BTreeMap<i64, InFlight>,
    /// The partition's leader epoch when this node loaded it: a later leadership loads again.
    pub leader_epoch: i32,
    /// The state epoch read from the share coordinator.
    pub state_epoch: i32,
    /// The state to write for a change Kafka's `SharePartition` persists (an
    /// acknowledgement, a release, a lock timeout) not yet written to the share coordinator,
    /// taken before that change moved the start offset ([`Self::changed`]).
    unwritten: Option<WriteSnapshot>,
}

/// What a write of the state carries (Kafka's `writeShareGroupState` arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteSnapshot {
    pub start_offset: i64,
    /// Offsets at or after `start_offset` whose delivery is complete (Acknowledged or
    /// Archived; Kafka's `SharePartition.deliveryCompleteCount`).
    pub delivery_complete_count: i32,
    pub batches: Vec<StateBatch>,
}

impl SharePartition {
    /// A share-partition starting at `offset` (from `share.auto.offset.reset`).
    pub fn new(offset: i64) -> Self {
        SharePartition {
            start_offset: offset,
            end_offset: offset,
            in_flight: BTreeMap::new(),
            leader_epoch: -1,
            state_epoch: 0,
            unwritten: None,
        }
    }

    /// A share-partition from its persisted state (Kafka's `SharePartition.maybeInitialize`):
    /// each batch's offsets in their state with their delivery count, offsets between the
    /// batches Available and never delivered, the end after the last batch.
    pub fn from_state(start_offset: i64, batches: &[StateBatch]) -> Self {
        let mut sp = SharePartition::new(start_offset);
        let cap = start_offset.saturating_add(LOADED_WINDOW_MAX);
        let end = batches
            .iter()
            .map(|b| b.last_offset.saturating_add(1))
            .max()
            .unwrap_or(start_offset)
            .clamp(start_offset, cap);
        for offset in start_offset..end {
            sp.in_flight.insert(offset, InFlight::available(0));
        }
        for b in batches {
            for offset in b.first_offset.max(start_offset)..=b.last_offset.min(end - 1) {
                let state = match b.delivery_state {
                    STATE_ACKNOWLEDGED => RecordState::Acknowledged,
                    STATE_ARCHIVED => RecordState::Archived,
                    _ => RecordState::Available,
                };
                sp.in_flight.insert(
                    offset,
                    InFlight {
                        state,
                        ..InFlight::available(b.delivery_count.max(0))
                    },
                );
            }
        }
        sp.end_offset = end;
        sp.advance_start();
        sp
    }

    /// The state to persist, if it changed since the last call ([`Self::changed`]).
    pub fn take_dirty_state(&mut self) -> Option<WriteSnapshot> {
        self.unwritten.take()
    }

    /// Records a change to persist, before the change moves the start offset: Kafka's
    /// `SharePartition` writes the state (`writeShareGroupState`) with the start offset and
    /// delivery complete count it has while the change's transition is in progress, and only
    /// once the write succeeds moves the start offset past it (`maybeUpdateCachedStateAndOffsets`).
    /// So the state written after every record is acknowledged keeps the old start offset,
    /// with those records Acknowledged and counted delivered (the lag is 0 all the same).
    fn changed(&mut self) {
        self.unwritten = Some(self.snapshot());
    }

    /// The start offset and every in-flight offset as runs of one state and count. An
    /// Acquired offset is written as Available with the count before its acquisition, as
    /// Kafka persists no acquisition: after a failover it is delivered again, counted once
    /// more only if it had been released.
    fn snapshot(&self) -> WriteSnapshot {
        let mut runs: Vec<StateBatch> = Vec::new();
        let mut complete: i32 = 0;
        for (&offset, r) in &self.in_flight {
            let (state, count) = match r.state {
                RecordState::Available => (STATE_AVAILABLE, r.delivery_count),
                RecordState::Acquired => (STATE_AVAILABLE, r.delivery_count - 1),
                RecordState::Acknowledged => (STATE_ACKNOWLEDGED, r.delivery_count),
                RecordState::Archived => (STATE_ARCHIVED, r.delivery_count),
            };
            if state != STATE_AVAILABLE && offset >= self.start_offset {
                complete = complete.saturating_add(1);
            }
            match runs.last_mut() {
                Some(l)
                    if l.last_offset + 1 == offset
                        && l.delivery_state == state
                        && l.delivery_count == count =>
                {
                    l.last_offset = offset
                }
                _ => runs.push(StateBatch {
                    first_offset: offset,
                    last_offset: offset,
                    delivery_state: state,
                    delivery_count: count,
                }),
            }
        }
        WriteSnapshot {
            start_offset: self.start_offset,
            delivery_complete_count: complete,
            batches: runs,
        }
    }

    /// Marks the state changed again (a write of it failed): the next write carries the
    /// state as it is then, unless a newer change is already waiting.
    pub fn mark_dirty(&mut self) {
        if self.unwritten.is_none() {
            self.unwritten = Some(self.snapshot());
        }
    }

    /// Whether the state changed since it was last written.
    pub fn is_dirty(&self) -> bool {
        self.unwritten.is_some()
    }

    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    /// The log's start moved past the SPSO (retention, DeleteRecords): those offsets are gone.
    pub fn on_log_start(&mut self, log_start: i64) {
        if log_start > self.start_offset {
            self.in_flight = self.in_flight.split_off(&log_start);
            self.start_offset = log_start;
            self.end_offset = self.end_offset.max(log_start);
        }
    }

    /// Where the next acquisition reads the log: the first Available offset, else the end.
    pub fn fetch_offset(&self) -> i64 {
        self.in_flight
            .iter()
            .find(|(_, r)| r.state == RecordState::Available)
            .map_or(self.end_offset, |(o, _)| *o)
    }

    /// Whether an acquisition could return anything below `read_limit` (the high watermark).
    pub fn can_acquire(&self, read_limit: i64, limits: &ShareLimits) -> bool {
        let has_available = self
            .in_flight
            .values()
            .any(|r| r.state == RecordState::Available);
        has_available
            || (self.end_offset < read_limit
                && self.end_offset - self.start_offset < limits.max_in_flight)
    }

    /// The earliest acquisition lock deadline, for a parked fetch to wake at.
    pub fn next_lock_deadline_ms(&self) -> Option<i64> {
        self.in_flight
            .values()
            .filter(|r| r.state == RecordState::Acquired)
            .map(|r| r.lock_deadline_ms)
            .min()
    }

    /// Acquisition locks past their deadline end (Kafka's `AcquisitionLockTimerTask`):
    /// the records go back to Available, or to Archived at the delivery limit. Returns
    /// whether anything changed.
    pub fn expire_locks(&mut self, now_ms: i64, limits: &ShareLimits) -> bool {
        let mut changed = false;
        for r in self.in_flight.values_mut() {
            if r.state == RecordState::Acquired && r.lock_deadline_ms <= now_ms {
                release(r, limits);
                changed = true;
            }
        }
        if changed {
            self.changed();
            self.advance_start();
        }
        changed
    }

    /// Acquires for `member`, from `batches` read at [`Self::fetch_offset`]: Available
    /// offsets within the in-flight window, then new offsets past the end, whole batches at
    /// a time (or, in record-limit mode, up to the count exactly), until `max_records` are
    /// acquired or the in-flight limit is reached. Returns the acquired ranges and the indexes
    /// of the batches holding any of them.
    pub fn acquire(
        &mut self,
        member: &str,
        batches: &[LogBatch],
        max_records: MaxRecords,
        now_ms: i64,
        limits: &ShareLimits,
    ) -> (Vec<AcquiredRange>, Vec<usize>) {
        let max = max_records.count;
        let mut acquired: Vec<(i64, i16)> = Vec::new();
        let mut used = Vec::new();
        let deadline = now_ms.saturating_add(limits.lock_duration_ms);
        for (i, b) in batches.iter().enumerate() {
            if acquired.len() >= max {
                break;
            }
            let before = acquired.len();
            for offset in b.base_offset.max(self.start_offset)..=b.last_offset {
                if offset >= self.end_offset {
                    if offset - self.start_offset >= limits.max_in_flight {
                        break;
                    }
                    let state = if b.archive {
                        RecordState::Archived
                    } else {
                        RecordState::Available
                    };
                    self.in_flight.insert(
                        offset,
                        InFlight {
                            state,
                            delivery_count: 0,
                            member: None,
                            lock_deadline_ms: 0,
                        },
                    );
                    self.end_offset = offset + 1;
                }
                let Some(r) = self.in_flight.get_mut(&offset) else {
                    continue;
                };
                if r.state != RecordState::Available {
                    continue;
                }
                if b.archive {
                    // Available from a read_uncommitted acquisition, aborted at read_committed.
                    r.state = RecordState::Archived;
                    continue;
                }
                if max_records.record_limit && acquired.len() >= max {
                    continue;
                }
                r.state = RecordState::Acquired;
                r.delivery_count = r.delivery_count.saturating_add(1);
                r.member = Some(member.to_string());
                r.lock_deadline_ms = deadline;
                acquired.push((offset, r.delivery_count));
            }
            if acquired.len() > before {
                used.push(i);
            }
        }
        self.advance_start();
        (ranges(&acquired), used)
    }

    /// Applies one member's acknowledgements, all or none (Kafka's `SharePartition.acknowledge`):
    /// every offset named must be Acquired by `member`. Each batch has one type for all its
    /// offsets or one per offset. RENEW (Kafka's `acknowledgeCompleteBatch` and
    /// `acknowledgePerOffsetBatchRecords`) keeps the record Acquired by `member` at its
    /// delivery count and restarts its lock at `renew_deadline_ms`; `None` when the group
    /// disabled renewal (`share.renew.acknowledge.enable=false`: INVALID_RECORD_STATE). A
    /// renewal alone changes nothing persisted, as Kafka writes no state for it.
    pub fn acknowledge(
        &mut self,
        member: &str,
        batches: &[(i64, i64, Vec<i8>)],
        limits: &ShareLimits,
        renew_deadline_ms: Option<i64>,
    ) -> Result<(), AckError> {
        let mut plan: Vec<(i64, AcknowledgeType)> = Vec::new();
        for (first, last, types) in batches {
            if last < first {
                return Err(AckError::InvalidRequest(format!(
                    "batch {first}..{last}: last offset before first"
                )));
            }
            let len = last - first + 1;
            if types.len() != 1 && types.len() as i64 != len {
                return Err(AckError::InvalidRequest(format!(
                    "batch {first}..{last}: {} acknowledge types for {len} offsets",
                    types.len()
                )));
            }
            for (i, offset) in (*first..=*last).enumerate() {
                let raw = if types.len() == 1 { types[0] } else { types[i] };
                let t = AcknowledgeType::from_byte(raw).ok_or_else(|| {
                    AckError::InvalidRequest(format!("invalid acknowledge type {raw}"))
                })?;
                let held = self.in_flight.get(&offset).is_some_and(|r| {
                    r.state == RecordState::Acquired && r.member.as_deref() == Some(member)
                });
                if !held {
                    return Err(AckError::InvalidRecordState(format!(
                        "offset {offset} is not acquired by member {member}"
                    )));
                }
                if t == AcknowledgeType::Renew && renew_deadline_ms.is_none() {
                    return Err(AckError::InvalidRecordState(
                        "Renewing acquisition locks is not enabled for the group.".into(),
                    ));
                }
                plan.push((offset, t));
            }
        }
        let mut persisted = false;
        for (offset, t) in plan {
            if let Some(r) = self.in_flight.get_mut(&offset) {
                persisted |= t != AcknowledgeType::Renew;
                match t {
                    AcknowledgeType::Accept => finish(r, RecordState::Acknowledged),
                    AcknowledgeType::Reject | AcknowledgeType::Gap => {
                        finish(r, RecordState::Archived)
                    }
                    AcknowledgeType::Release => release(r, limits),
                    AcknowledgeType::Renew => {
                        r.lock_deadline_ms = renew_deadline_ms.unwrap_or(r.lock_deadline_ms)
                    }
                }
            }
        }
        if persisted {
            self.changed();
            self.advance_start();
        }
        Ok(())
    }

    /// Releases every record `member` holds (its share session closed: Kafka's
    /// `SharePartition.releaseAcquiredRecords`). Returns whether anything was released.
    pub fn release_member(&mut self, member: &str, limits: &ShareLimits) -> bool {
        let mut changed = false;
        for r in self.in_flight.values_mut() {
            if r.state == RecordState::Acquired && r.member.as_deref() == Some(member) {
                release(r, limits);
                changed = true;
            }
        }
        if changed {
            self.changed();
            self.advance_start();
        }
        changed
    }

    /// Moves the SPSO past finished offsets (and past offsets the log does not have).
    fn advance_start(&mut self) {
        while self.start_offset < self.end_offset {
            match self.in_flight.get(&self.start_offset) {
                Some(r)
                    if !matches!(r.state, RecordState::Acknowledged | RecordState::Archived) =>
                {
                    break
                }
                _ => {
                    self.in_flight.remove(&self.start_offset);
                    self.start_offset += 1;
                }
            }
        }
    }

    /// (offset, state, delivery count) of every in-flight offset, for views and tests.
    pub fn in_flight(&self) -> Vec<(i64, RecordState, i16)> {
        self.in_flight
            .iter()
            .map(|(o, r)| (*o, r.state, r.delivery_count))
            .collect()
    }
}

/// Ends an acquisition: Available again, or Archived at the delivery limit (Kafka archives a
/// record whose delivery count reached `group.share.delivery.count.limit`).
fn release(r: &mut InFlight, limits: &ShareLimits) {
    r.member = None;
    r.state = if r.delivery_count >= limits.delivery_count_limit {
        RecordState::Archived
    } else {
        RecordState::Available
    };
}

fn finish(r: &mut InFlight, state: RecordState) {
    r.member = None;
    r.state = state;
}

/// Runs of consecutive offsets with the same delivery count.
fn ranges(acquired: &[(i64, i16)]) -> Vec<AcquiredRange> {
    let mut out: Vec<AcquiredRange> = Vec::new();
    for &(offset, count) in acquired {
        match out.last_mut() {
            Some(r) if r.last_offset + 1 == offset && r.delivery_count == count => {
                r.last_offset = offset
            }
            _ => out.push(AcquiredRange {
                first_offset: offset,
                last_offset: offset,
                delivery_count: count,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ShareLimits = ShareLimits {
        lock_duration_ms: 1000,
        delivery_count_limit: 3,
        max_in_flight: 100,
    };

    fn batch(a: i64, b: i64) -> LogBatch {
        LogBatch {
            base_offset: a,
            last_offset: b,
            archive: false,
        }
    }

    #[test]
    fn release_redelivers_until_the_limit_then_archives() {
        let mut sp = SharePartition::new(0);
        for round in 1..=3 {
            let (r, _) = sp.acquire("m", &[batch(0, 1)], 10.into(), 0, &LIMITS);
            assert_eq!(r[0].delivery_count, round);
            sp.acknowledge("m", &[(0, 1, vec![2])], &LIMITS, None)
                .unwrap();
        }
        assert_eq!(sp.start_offset(), 2, "archived at the limit");
        assert!(sp
            .acquire("m", &[batch(0, 1)], 10.into(), 0, &LIMITS)
            .0
            .is_empty());
    }

    #[test]
    fn only_the_holder_may_acknowledge_and_locks_expire() {
        let mut sp = SharePartition::new(5);
        sp.acquire("a", &[batch(0, 9)], 10.into(), 0, &LIMITS);
        assert!(matches!(
            sp.acknowledge("b", &[(5, 5, vec![1])], &LIMITS, None),
            Err(AckError::InvalidRecordState(_))
        ));
        assert!(matches!(
            sp.acknowledge("a", &[(9, 10, vec![1])], &LIMITS, None),
            Err(AckError::InvalidRecordState(_))
        ));
        assert!(sp.expire_locks(1000, &LIMITS));
        let (r, _) = sp.acquire("b", &[batch(5, 9)], 10.into(), 1000, &LIMITS);
        assert_eq!(r[0].delivery_count, 2);
        sp.acknowledge("b", &[(5, 9, vec![1])], &LIMITS, None)
            .unwrap();
        assert_eq!(sp.start_offset(), 10);
    }

    #[test]
    fn record_limit_mode_splits_the_last_batch() {
        let mut sp = SharePartition::new(0);
        let strict = MaxRecords {
            count: 3,
            record_limit: true,
        };
        let (r, used) = sp.acquire("m", &[batch(0, 4), batch(5, 9)], strict, 0, &LIMITS);
        assert_eq!((r[0].first_offset, r[0].last_offset, used), (0, 2, vec![0]));
        // The rest of the batch waits Available for the next acquisition.
        assert_eq!(sp.end_offset(), 5);
        assert_eq!(sp.fetch_offset(), 3);
        let (r, _) = sp.acquire("m", &[batch(0, 4), batch(5, 9)], 3.into(), 0, &LIMITS);
        assert_eq!(
            (r[0].first_offset, r[0].last_offset),
            (3, 9),
            "batch-optimized: whole batches"
        );
    }

    #[test]
    fn renew_keeps_the_acquisition_under_a_new_lock_and_writes_nothing() {
        let mut sp = SharePartition::new(0);
        sp.acquire("m", &[batch(0, 1)], 10.into(), 0, &LIMITS);
        let renew = vec![ACKNOWLEDGE_TYPE_RENEW];
        assert!(matches!(
            sp.acknowledge("m", &[(0, 1, renew.clone())], &LIMITS, None),
            Err(AckError::InvalidRecordState(_))
        ));
        assert!(matches!(
            sp.acknowledge("n", &[(0, 1, renew.clone())], &LIMITS, Some(1500)),
            Err(AckError::InvalidRecordState(_))
        ));
        sp.acknowledge("m", &[(0, 1, renew)], &LIMITS, Some(1500))
            .unwrap();
        assert!(
            sp.take_dirty_state().is_none(),
            "a renewal is not persisted"
        );
        assert_eq!(sp.next_lock_deadline_ms(), Some(1500));
        assert!(
            !sp.expire_locks(1000, &LIMITS),
            "the old lock no longer expires"
        );
        sp.acknowledge("m", &[(0, 1, vec![1])], &LIMITS, None)
            .unwrap();
        assert_eq!(sp.start_offset(), 2);
        assert_eq!(sp.take_dirty_state().unwrap().delivery_complete_count, 2);
    }

    #[test]
    fn the_persisted_state_loads_back_as_it_was_left() {
        let mut sp = SharePartition::new(0);
        assert!(sp.take_dirty_state().is_none(), "nothing changed yet");
        sp.acquire("m", &[batch(0, 9)], 10.into(), 0, &LIMITS);
        assert!(
            sp.take_dirty_state().is_none(),
            "an acquisition is not persisted"
        );
        sp.acknowledge(
            "m",
            &[(0, 3, vec![1]), (5, 6, vec![2]), (8, 8, vec![3])],
            &LIMITS,
            None,
        )
        .unwrap();
        let w = sp.take_dirty_state().unwrap();
        let (start, batches) = (w.start_offset, w.batches);
        let b = |first, last, state, count| StateBatch {
            first_offset: first,
            last_offset: last,
            delivery_state: state,
            delivery_count: count,
        };
        // Written as Kafka writes it: the start offset before the acknowledgement moved it,
        // and the acknowledged offsets counted delivered.
        assert_eq!((start, w.delivery_complete_count), (0, 5));
        assert_eq!(sp.start_offset(), 4);
        assert_eq!(
            batches,
            [
                b(0, 3, STATE_ACKNOWLEDGED, 1),
                b(4, 4, STATE_AVAILABLE, 0),
                b(5, 6, STATE_AVAILABLE, 1),
                b(7, 7, STATE_AVAILABLE, 0),
                b(8, 8, STATE_ARCHIVED, 1),
                b(9, 9, STATE_AVAILABLE, 0),
            ]
        );
        let loaded = SharePartition::from_state(start, &batches);
        assert_eq!((loaded.start_offset(), loaded.end_offset()), (4, 10));
        let mut loaded = loaded;
        let (r, _) = loaded.acquire("n", &[batch(4, 9)], 10.into(), 0, &LIMITS);
        let counts: Vec<(i64, i64, i16)> = r
            .iter()
            .map(|r| (r.first_offset, r.last_offset, r.delivery_count))
            .collect();
        assert_eq!(counts, [(4, 4, 1), (5, 6, 2), (7, 7, 1), (9, 9, 1)]);
        // The next change is written at the start offset the last one left.
        loaded
            .acknowledge("n", &[(4, 4, vec![1])], &LIMITS, None)
            .unwrap();
        let w = loaded.take_dirty_state().unwrap();
        assert_eq!((w.start_offset, w.delivery_complete_count), (4, 2));
        // A gap between batches is Available, never delivered; nothing past the cap loads.
        let far = SharePartition::from_state(0, &[b(0, i64::MAX - 1, STATE_ACKNOWLEDGED, 1)]);
        assert_eq!(far.end_offset(), LOADED_WINDOW_MAX);
    }
}
