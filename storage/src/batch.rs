//! A zero-copy view of a v2 record batch (Kafka's `DefaultRecordBatch`): its header, its
//! CRC-32C and the header fields the broker patches. The records inside are walked by
//! [`super::records`], a client's batch is checked by [`super::validator`], and transaction
//! markers are [`super::control`].
//!
//! We parse the 61-byte header ourselves because kafka-protocol's decoder drops
//! `lastOffsetDelta` and `maxTimestamp`, and because a client's batch must be stored exactly as
//! it was sent: decoding and re-encoding would merge duplicate header keys and recompress.
//!
//! Layout of the header (all integers big-endian):
//!
//! | offset | field                |
//! |-------:|----------------------|
//! |      0 | baseOffset i64       |
//! |      8 | length i32           |
//! |     12 | partitionLeaderEpoch |
//! |     16 | magic i8             |
//! |     17 | crc u32              |
//! |     21 | attributes i16       |
//! |     23 | lastOffsetDelta i32  |
//! |     27 | baseTimestamp i64    |
//! |     35 | maxTimestamp i64     |
//! |     43 | producerId i64       |
//! |     51 | producerEpoch i16    |
//! |     53 | baseSequence i32     |
//! |     57 | recordCount i32      |
//! |     61 | records...           |

use super::{LogError, TimestampType};

/// Size of the v2 batch header; the records follow it.
pub const HEADER_LEN: usize = 61;
/// baseOffset and length: the part of every batch that precedes the `length` bytes it counts.
pub const LOG_OVERHEAD: usize = 12;
/// The only magic value this broker stores.
pub const MAGIC_V2: i8 = 2;
/// The smallest legal value of the `length` field for a v2 batch.
pub const MIN_BATCH_LENGTH_FIELD: i32 = (HEADER_LEN - LOG_OVERHEAD) as i32;
/// The smallest legal `length` of any message format (Kafka's v0 record overhead); smaller values
/// mean the bytes are not a batch at all.
pub(super) const MIN_ANY_FORMAT_LENGTH_FIELD: i32 = 14;
/// Bytes up to and including the magic byte.
pub(super) const HEADER_LEN_UP_TO_MAGIC: usize = 17;

/// "No producer id" as written by clients that are not idempotent.
pub const NO_PRODUCER_ID: i64 = -1;
/// "No sequence" for non-idempotent batches.
pub const NO_SEQUENCE: i32 = -1;
/// "No timestamp".
pub const NO_TIMESTAMP: i64 = -1;

pub(super) const BASE_OFFSET_AT: usize = 0;
pub(super) const LENGTH_AT: usize = 8;
pub(super) const PARTITION_LEADER_EPOCH_AT: usize = 12;
pub(super) const MAGIC_AT: usize = 16;
pub(crate) const CRC_AT: usize = 17;
/// The CRC covers everything from the attributes to the end of the batch.
pub const CRC_COVERED_FROM: usize = 21;
pub(super) const ATTRIBUTES_AT: usize = 21;
pub(super) const LAST_OFFSET_DELTA_AT: usize = 23;
pub(super) const BASE_TIMESTAMP_AT: usize = 27;
pub(super) const MAX_TIMESTAMP_AT: usize = 35;
pub(super) const PRODUCER_ID_AT: usize = 43;
pub(super) const PRODUCER_EPOCH_AT: usize = 51;
pub(super) const BASE_SEQUENCE_AT: usize = 53;
pub(super) const RECORD_COUNT_AT: usize = 57;

pub(super) const CODEC_MASK: i16 = 0x07;
pub(crate) const TIMESTAMP_TYPE_BIT: i16 = 0x08;
pub(crate) const TRANSACTIONAL_BIT: i16 = 0x10;
pub(crate) const CONTROL_BIT: i16 = 0x20;
/// Attribute bit 6: the base timestamp is the delete horizon the cleaner set (KIP-534, Kafka's
/// `DELETE_HORIZON_FLAG_MASK`).
pub(crate) const DELETE_HORIZON_BIT: i16 = 0x40;

/// The compression codec of a batch (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    /// The codec for an attribute codec id, or `None` for ids Kafka does not define.
    pub fn from_id(id: u8) -> Option<Codec> {
        match id {
            0 => Some(Codec::None),
            1 => Some(Codec::Gzip),
            2 => Some(Codec::Snappy),
            3 => Some(Codec::Lz4),
            4 => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// The attribute id of this codec.
    pub fn id(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }
}

pub(super) fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
pub(super) fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
pub(super) fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Adds `increment` to a producer sequence, wrapping at `i32::MAX` back to 0 as Kafka does.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// Reads the `length` field of the batch at the start of `buf` and returns the whole batch size
/// (length + 12), or `None` if fewer than 12 bytes are present or the length is impossible.
pub fn batch_size_at(buf: &[u8]) -> Option<usize> {
    if buf.len() < LOG_OVERHEAD {
        return None;
    }
    let length = be_i32(buf, LENGTH_AT);
    if length < MIN_BATCH_LENGTH_FIELD {
        return None;
    }
    Some(length as usize + LOG_OVERHEAD)
}

/// A read-only view of one v2 batch header. Holds at least [`HEADER_LEN`] bytes; it may hold the
/// whole batch (see [`RecordBatch`]) or only the header (when scanning a file).
#[derive(Clone, Copy)]
pub struct BatchHeader<'a> {
    buf: &'a [u8],
}

impl<'a> BatchHeader<'a> {
    /// A view of the header at the start of `buf`; `None` if `buf` is shorter than a header.
    /// Does not check magic or length: callers that need a valid batch use [`RecordBatch::parse`].
    pub fn new(buf: &'a [u8]) -> Option<Self> {
        if buf.len() < HEADER_LEN {
            return None;
        }
        Some(BatchHeader { buf })
    }
    /// The first offset in the batch.
    pub fn base_offset(&self) -> i64 {
        be_i64(self.buf, BASE_OFFSET_AT)
    }
    /// The `length` field: the batch size minus 12.
    pub fn length(&self) -> i32 {
        be_i32(self.buf, LENGTH_AT)
    }
    /// Total size of the batch in bytes, header included.
    pub fn size_in_bytes(&self) -> usize {
        (self.length().max(0) as usize) + LOG_OVERHEAD
    }
    /// The leader epoch stamped by the leader that appended this batch.
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.buf, PARTITION_LEADER_EPOCH_AT)
    }
    /// The magic (format version) byte.
    pub fn magic(&self) -> i8 {
        self.buf[MAGIC_AT] as i8
    }
    /// The stored CRC-32C.
    pub fn crc(&self) -> u32 {
        be_i32(self.buf, CRC_AT) as u32
    }
    /// The raw attributes.
    pub fn attributes(&self) -> i16 {
        be_i16(self.buf, ATTRIBUTES_AT)
    }
    /// The raw codec id (attribute bits 0-2).
    pub fn codec_id(&self) -> u8 {
        (self.attributes() & CODEC_MASK) as u8
    }
    /// The codec, or `None` for an undefined id (5-7).
    pub fn codec(&self) -> Option<Codec> {
        Codec::from_id(self.codec_id())
    }
    /// Whether the records are compressed.
    pub fn is_compressed(&self) -> bool {
        self.codec_id() != 0
    }
    /// Which timestamp the batch carries (attribute bit 3).
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    /// Attribute bit 4.
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_BIT != 0
    }
    /// Attribute bit 5: a transaction marker batch.
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_BIT != 0
    }
    /// lastOffset - baseOffset.
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.buf, LAST_OFFSET_DELTA_AT)
    }
    /// The offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .saturating_add(self.last_offset_delta() as i64)
    }
    /// The offset right after this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }
    /// The first record's timestamp (CreateTime batches).
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.buf, BASE_TIMESTAMP_AT)
    }
    /// The largest record timestamp, or the append time for LogAppendTime batches.
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.buf, MAX_TIMESTAMP_AT)
    }
    /// The producer id, -1 for non-idempotent producers.
    pub fn producer_id(&self) -> i64 {
        be_i64(self.buf, PRODUCER_ID_AT)
    }
    /// Whether a producer id is set (Kafka's `hasProducerId`).
    pub fn has_producer_id(&self) -> bool {
        self.producer_id() > NO_PRODUCER_ID
    }
    /// The producer epoch.
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.buf, PRODUCER_EPOCH_AT)
    }
    /// The first record's sequence number, -1 when not idempotent.
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.buf, BASE_SEQUENCE_AT)
    }
    /// The last record's sequence number, wrapping at `i32::MAX`.
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence();
        if base == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        increment_sequence(base, self.last_offset_delta())
    }
    /// The declared number of records.
    pub fn record_count(&self) -> i32 {
        be_i32(self.buf, RECORD_COUNT_AT)
    }
}

/// A whole v2 batch: the header plus exactly `length` bytes after the first 12.
#[derive(Clone, Copy)]
pub struct RecordBatch<'a> {
    pub(super) buf: &'a [u8],
}

impl<'a> RecordBatch<'a> {
    /// Parses the batch at the start of `buf`, returning it and its size. Checks only framing
    /// (length within `buf`, magic 2); CRC and semantics are the caller's choice.
    pub fn parse(buf: &'a [u8]) -> Result<(RecordBatch<'a>, usize), LogError> {
        if buf.len() < LOG_OVERHEAD {
            return Err(LogError::CorruptMessage(format!(
                "{} bytes cannot hold a batch",
                buf.len()
            )));
        }
        let length = be_i32(buf, LENGTH_AT);
        if length < MIN_BATCH_LENGTH_FIELD {
            return Err(LogError::CorruptMessage(format!(
                "batch length {length} is smaller than a v2 header"
            )));
        }
        let size = length as usize + LOG_OVERHEAD;
        if size > buf.len() {
            return Err(LogError::CorruptMessage(format!(
                "batch of {size} bytes exceeds the {} bytes present",
                buf.len()
            )));
        }
        let magic = buf[MAGIC_AT] as i8;
        if magic != MAGIC_V2 {
            return Err(LogError::CorruptMessage(format!(
                "unsupported magic {magic}"
            )));
        }
        Ok((RecordBatch { buf: &buf[..size] }, size))
    }
    /// The header view.
    pub fn header(&self) -> BatchHeader<'a> {
        BatchHeader { buf: self.buf }
    }
    /// All bytes of the batch.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }
    /// The records section (possibly compressed).
    pub fn records_bytes(&self) -> &'a [u8] {
        &self.buf[HEADER_LEN..]
    }
    /// CRC-32C over attributes..end.
    pub fn compute_crc(&self) -> u32 {
        crc32c::crc32c(&self.buf[CRC_COVERED_FROM..])
    }
    /// Whether the stored CRC matches the content.
    pub fn is_crc_valid(&self) -> bool {
        self.compute_crc() == self.header().crc()
    }
}

/// Overwrites baseOffset. It lies outside the CRC, so the CRC stays valid.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites partitionLeaderEpoch. It lies outside the CRC, so the CRC stays valid.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Sets maxTimestamp and the timestamp-type bit, then recomputes the CRC, which covers both.
/// This is the only content change the broker makes to a client batch (LogAppendTime topics, and
/// a CreateTime batch whose declared maxTimestamp is wrong, as Kafka does).
pub fn set_max_timestamp(batch: &mut [u8], timestamp_type: TimestampType, max_timestamp: i64) {
    let mut attributes = be_i16(batch, ATTRIBUTES_AT);
    match timestamp_type {
        TimestampType::LogAppendTime => attributes |= TIMESTAMP_TYPE_BIT,
        TimestampType::CreateTime => attributes &= !TIMESTAMP_TYPE_BIT,
    }
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_COVERED_FROM..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

// ---------------------------------------------------------------------------------------------
// Test helper: encode valid batches, for tests and benchmarks only. Not behind a cargo feature:
// a feature that only tests turn on gives the test build another brook-storage, brook and
// brook-tools to compile; scripts/check_features.py checks that only test code names it.
// ---------------------------------------------------------------------------------------------

pub mod testutil {
    //! Valid v2 batches for tests and benchmarks, on top of the production
    //! [`BatchBuilder`](crate::batch_builder::BatchBuilder).

    use bytes::Bytes;

    use super::*;
    pub use crate::batch_builder::{BatchBuilder, SimpleRecord};
    use crate::control::{build_end_txn_marker, EndTxnMarker};

    /// A batch of `n` records with `value_len`-byte values, no producer id.
    pub fn build_batch(n: usize, value_len: usize, base_timestamp: i64) -> Bytes {
        BatchBuilder::new(base_timestamp)
            .records(n, value_len)
            .build()
    }

    /// An idempotent batch of `n` records.
    pub fn build_idempotent_batch(
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
        n: usize,
        base_timestamp: i64,
    ) -> Bytes {
        BatchBuilder::new(base_timestamp)
            .idempotent(producer_id, epoch, base_sequence)
            .records(n, 16)
            .build()
    }

    /// A control (transaction marker) batch: key = (version 0, type), value = (version 0,
    /// coordinator epoch). `commit` picks COMMIT (1) or ABORT (0).
    pub fn build_control_batch(
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        timestamp: i64,
    ) -> Bytes {
        let marker = EndTxnMarker {
            commit,
            coordinator_epoch,
        };
        build_end_txn_marker(producer_id, epoch, marker, timestamp)
    }

    /// Recomputes the CRC after a test mutated covered bytes.
    pub fn fix_crc(batch: &mut [u8]) {
        let crc = crc32c::crc32c(&batch[CRC_COVERED_FROM..]);
        batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::testutil::*;
    use crate::records::RecordIter;

    const NOW: i64 = 1_700_000_000_000;

    #[test]
    fn header_fields_round_trip() {
        let b = BatchBuilder::new(NOW)
            .idempotent(7, 3, 11)
            .records(4, 10)
            .build();
        let (batch, size) = RecordBatch::parse(&b).unwrap();
        assert_eq!(size, b.len());
        let h = batch.header();
        assert_eq!(h.base_offset(), 0);
        assert_eq!(h.magic(), 2);
        assert_eq!(h.last_offset_delta(), 3);
        assert_eq!(h.record_count(), 4);
        assert_eq!(h.producer_id(), 7);
        assert_eq!(h.producer_epoch(), 3);
        assert_eq!(h.base_sequence(), 11);
        assert_eq!(h.last_sequence(), 14);
        assert_eq!(h.base_timestamp(), NOW);
        assert_eq!(h.max_timestamp(), NOW + 3);
        assert_eq!(h.codec(), Some(Codec::None));
        assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
        assert!(!h.is_transactional() && !h.is_control());
        assert!(batch.is_crc_valid());
        assert_eq!(RecordIter::new(batch.records_bytes()).count(), 4);
    }

    #[test]
    fn last_sequence_wraps_at_i32_max() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        let b = BatchBuilder::new(NOW)
            .idempotent(1, 0, i32::MAX - 1)
            .records(3, 1)
            .build();
        assert_eq!(BatchHeader::new(&b).unwrap().last_sequence(), 0);
    }

    #[test]
    fn setters_outside_crc_keep_it_valid() {
        let mut b = build_batch(3, 5, NOW).to_vec();
        set_base_offset(&mut b, 1234);
        set_partition_leader_epoch(&mut b, 9);
        let (batch, _) = RecordBatch::parse(&b).unwrap();
        assert!(batch.is_crc_valid());
        assert_eq!(batch.header().base_offset(), 1234);
        assert_eq!(batch.header().last_offset(), 1236);
        assert_eq!(batch.header().partition_leader_epoch(), 9);
    }

    #[test]
    fn log_append_time_recomputes_crc() {
        let mut b = build_batch(2, 5, NOW).to_vec();
        set_max_timestamp(&mut b, TimestampType::LogAppendTime, NOW + 50);
        let (batch, _) = RecordBatch::parse(&b).unwrap();
        assert!(batch.is_crc_valid());
        assert_eq!(
            batch.header().timestamp_type(),
            TimestampType::LogAppendTime
        );
        assert_eq!(batch.header().max_timestamp(), NOW + 50);
    }
}
