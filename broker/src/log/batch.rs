//! A zero-copy view of a v2 record batch, its CRC-32C, and the produce-side validation rules.
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

use super::{LogConfig, LogError, TimestampType, KEYLESS_RECORDS_LISTED_MAX};

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
const MIN_ANY_FORMAT_LENGTH_FIELD: i32 = 14;
/// Bytes up to and including the magic byte.
const HEADER_LEN_UP_TO_MAGIC: usize = 17;

/// "No producer id" as written by clients that are not idempotent.
pub const NO_PRODUCER_ID: i64 = -1;
/// "No sequence" for non-idempotent batches.
pub const NO_SEQUENCE: i32 = -1;
/// "No timestamp".
pub const NO_TIMESTAMP: i64 = -1;

const BASE_OFFSET_AT: usize = 0;
const LENGTH_AT: usize = 8;
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
pub(crate) const CRC_AT: usize = 17;
/// The CRC covers everything from the attributes to the end of the batch.
pub const CRC_COVERED_FROM: usize = 21;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORD_COUNT_AT: usize = 57;

const CODEC_MASK: i16 = 0x07;
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

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
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
    buf: &'a [u8],
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
// Record framing (uncompressed records section)
// ---------------------------------------------------------------------------------------------

/// Longest varint encoding of an i32 (Kafka rejects longer ones).
const VARINT_MAX_BYTES: usize = 5;
/// Longest varint encoding of an i64.
const VARLONG_MAX_BYTES: usize = 10;

/// A cursor over a records section. Every read is bounds-checked and returns `None` on
/// malformed input instead of panicking.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    fn unsigned_varint(&mut self, max_bytes: usize) -> Option<u64> {
        // Fast path: most lengths and deltas in a batch fit in one byte.
        let first = *self.buf.get(self.pos)?;
        if first < 0x80 {
            self.pos += 1;
            return Some(first as u64);
        }
        // Two bytes cover values up to 16383: record sizes and value lengths of small records.
        let second = *self.buf.get(self.pos + 1)?;
        if second < 0x80 {
            self.pos += 2;
            return Some((first & 0x7f) as u64 | ((second as u64) << 7));
        }
        self.unsigned_varint_slow(max_bytes)
    }
    #[inline(never)]
    fn unsigned_varint_slow(&mut self, max_bytes: usize) -> Option<u64> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let byte = *self.buf.get(self.pos)?;
            self.pos += 1;
            value |= ((byte & 0x7f) as u64) << (7 * i);
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    #[inline(always)]
    fn varint(&mut self) -> Option<i32> {
        let raw = self.unsigned_varint(VARINT_MAX_BYTES)? as u32;
        Some(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }
    #[inline(always)]
    fn varlong(&mut self) -> Option<i64> {
        let raw = self.unsigned_varint(VARLONG_MAX_BYTES)?;
        Some(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }
    #[inline(always)]
    fn skip(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    /// A varint length followed by that many bytes; -1 means null.
    #[inline(always)]
    fn nullable_bytes(&mut self) -> Option<Option<&'a [u8]>> {
        let len = self.varint()?;
        if len < 0 {
            return if len == -1 { Some(None) } else { None };
        }
        Some(Some(self.skip(len as usize)?))
    }
}

/// One record of an uncompressed records section, borrowed from the batch.
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    /// The record's attributes byte (unused by Kafka today).
    pub attributes: i8,
    /// Added to the batch's baseTimestamp.
    pub timestamp_delta: i64,
    /// Added to the batch's baseOffset.
    pub offset_delta: i32,
    /// The key, `None` when null.
    pub key: Option<&'a [u8]>,
    /// The value, `None` when null.
    pub value: Option<&'a [u8]>,
}

/// Iterates over records of an uncompressed records section, checking each record's framing:
/// the varint length must match the bytes the fields use, header counts must be >= 0 and header
/// keys non-null. Yields `Err` once and then stops at the first malformed record.
pub struct RecordIter<'a> {
    cursor: Cursor<'a>,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    /// Iterates over `records` (the bytes after the 61-byte header, decompressed if needed).
    pub fn new(records: &'a [u8]) -> Self {
        RecordIter {
            cursor: Cursor {
                buf: records,
                pos: 0,
            },
            failed: false,
        }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.cursor.buf.len() - self.cursor.pos
    }

    #[inline(always)]
    fn read_one(&mut self) -> Option<RecordView<'a>> {
        let length = self.cursor.varint()?;
        if length < 0 {
            return None;
        }
        let body = self.cursor.skip(length as usize)?;
        let mut c = Cursor { buf: body, pos: 0 };
        let attributes = *c.skip(1)?.first()? as i8;
        let timestamp_delta = c.varlong()?;
        let offset_delta = c.varint()?;
        let key = c.nullable_bytes()?;
        let value = c.nullable_bytes()?;
        let header_count = c.varint()?;
        if header_count < 0 {
            return None;
        }
        // Each header uses at least two bytes, so the loop is bounded by the body size.
        for _ in 0..header_count {
            let _header_key: &[u8] = c.nullable_bytes()??; // must not be null
            c.nullable_bytes()?;
        }
        if c.pos != body.len() {
            return None;
        }
        Some(RecordView {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
        })
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordView<'a>, LogError>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.remaining() == 0 {
            return None;
        }
        match self.read_one() {
            Some(r) => Some(Ok(r)),
            None => {
                self.failed = true;
                Some(Err(LogError::InvalidRecord(
                    "malformed record framing".into(),
                )))
            }
        }
    }
}

/// Bound on a batch's records section once decompressed. A compressed batch is at most
/// `max.message.bytes` on the wire, but a decompression bomb of that size could expand to
/// gigabytes; past this bound the batch is refused (INVALID_RECORD) instead of allocated.
pub const MAX_DECOMPRESSED_BATCH_BYTES: usize = 128 * 1024 * 1024;

/// The 16-byte header of snappy-java's framed ("xerial") format, which Kafka's Java client
/// writes; without it a snappy section is one raw block.
const XERIAL_SNAPPY_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// Decompresses a records section for reading (produce validation, timestamp lookups,
/// recovery). Never used to write: batches are stored as received. At most
/// [`MAX_DECOMPRESSED_BATCH_BYTES`] are produced.
pub fn decompress_records(codec: Codec, records: &[u8]) -> Result<bytes::Bytes, LogError> {
    decompress_records_bounded(codec, records, MAX_DECOMPRESSED_BATCH_BYTES)
}

/// [`decompress_records`] with an explicit bound.
pub fn decompress_records_bounded(
    codec: Codec,
    records: &[u8],
    limit: usize,
) -> Result<bytes::Bytes, LogError> {
    use std::io::Read;
    let corrupt = |e: &dyn std::fmt::Display| {
        LogError::CorruptMessage(format!("cannot decompress {codec:?} batch: {e}"))
    };
    let too_big = || {
        LogError::InvalidRecord(format!(
            "{codec:?} batch decompresses to more than {limit} bytes"
        ))
    };
    // Streaming decoders read through `take(limit + 1)`: one byte past the bound is enough
    // to know the batch is too big, without allocating the rest.
    let read_bounded = |mut r: Box<dyn Read + '_>| -> Result<bytes::Bytes, LogError> {
        let mut out = Vec::with_capacity(records.len().saturating_mul(4).min(limit));
        r.by_ref()
            .take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| corrupt(&e))?;
        if out.len() > limit {
            return Err(too_big());
        }
        Ok(out.into())
    };
    match codec {
        Codec::None => Ok(bytes::Bytes::copy_from_slice(records)),
        Codec::Gzip => read_bounded(Box::new(flate2::read::GzDecoder::new(records))),
        Codec::Lz4 => read_bounded(Box::new(
            lz4::Decoder::new(records).map_err(|e| corrupt(&e))?,
        )),
        Codec::Zstd => read_bounded(Box::new(
            zstd::stream::read::Decoder::new(records).map_err(|e| corrupt(&e))?,
        )),
        Codec::Snappy => decompress_snappy(records, limit).map_err(|e| match e {
            SnappyError::TooBig => too_big(),
            SnappyError::Corrupt(m) => corrupt(&m),
        }),
    }
}

enum SnappyError {
    TooBig,
    Corrupt(String),
}

/// Snappy as Kafka clients write it: xerial framing (magic header, then blocks each prefixed
/// by its compressed length), or a single raw block. Each block declares its decompressed
/// length, which is checked against what is left of the bound before allocating.
fn decompress_snappy(records: &[u8], limit: usize) -> Result<bytes::Bytes, SnappyError> {
    let block = |b: &[u8], out: &mut Vec<u8>| -> Result<(), SnappyError> {
        let len = snap::raw::decompress_len(b).map_err(|e| SnappyError::Corrupt(e.to_string()))?;
        if len > limit - out.len() {
            return Err(SnappyError::TooBig);
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new()
            .decompress(b, &mut out[start..])
            .map_err(|e| SnappyError::Corrupt(e.to_string()))?;
        Ok(())
    };
    let mut out = Vec::new();
    let Some(mut rest) = records.strip_prefix(&XERIAL_SNAPPY_MAGIC[..]) else {
        block(records, &mut out)?;
        return Ok(out.into());
    };
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(SnappyError::Corrupt("truncated block length".into()));
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > tail.len() {
            return Err(SnappyError::Corrupt("truncated block".into()));
        }
        let (b, next) = tail.split_at(len);
        block(b, &mut out)?;
        rest = next;
    }
    Ok(out.into())
}

// ---------------------------------------------------------------------------------------------
// Produce validation
// ---------------------------------------------------------------------------------------------

/// What validation learned about a client batch; used for offset assignment and producer state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidatedBatch {
    /// Size in bytes of the batch (the whole payload).
    pub size: usize,
    /// Number of records (lastOffsetDelta + 1).
    pub record_count: i32,
    /// Producer id, -1 if none.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// First sequence.
    pub base_sequence: i32,
    /// Last sequence (wrapping).
    pub last_sequence: i32,
    /// Attribute bit 4.
    pub is_transactional: bool,
    /// Attribute bit 5 (only coordinators may write these).
    pub is_control: bool,
    /// The largest record timestamp as declared (or computed, for uncompressed batches).
    pub max_timestamp: i64,
    /// For an uncompressed CreateTime batch whose declared maxTimestamp differs from the records,
    /// the value to write (Kafka corrects it and recomputes the CRC).
    pub corrected_max_timestamp: Option<i64>,
}

/// Who is appending: decides how strict validation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer's Produce request: full validation, sequence checks.
    Client,
    /// A coordinator of this broker (transaction markers, group offsets): control batches allowed,
    /// no sequence checks.
    Coordinator,
    /// A follower copying the leader: batches already carry offsets.
    Replication,
}

/// Kafka's per-record timestamp rule, with the bounds computed once per batch: CreateTime
/// topics bound each set timestamp; a batch that claims LogAppendTime is refused otherwise.
struct TimestampRule {
    /// `Some((min, max))` for CreateTime topics.
    create_time_bounds: Option<(i64, i64)>,
    batch_claims_log_append_time: bool,
}

impl TimestampRule {
    fn new(batch: &BatchHeader<'_>, now_ms: i64, config: &LogConfig) -> Self {
        let create_time_bounds =
            (config.message_timestamp_type == TimestampType::CreateTime).then(|| {
                (
                    now_ms.saturating_sub(config.message_timestamp_before_max_ms.max(0)),
                    now_ms.saturating_add(config.message_timestamp_after_max_ms.max(0)),
                )
            });
        TimestampRule {
            create_time_bounds,
            batch_claims_log_append_time: batch.timestamp_type() == TimestampType::LogAppendTime,
        }
    }

    #[inline(always)]
    fn check(&self, ts: i64) -> Result<(), LogError> {
        if let (Some((min, max)), true) = (self.create_time_bounds, ts != NO_TIMESTAMP) {
            if ts < min || ts > max {
                return Err(LogError::InvalidTimestamp(format!(
                    "timestamp {ts} is out of range [{min}, {max}]"
                )));
            }
        } else if self.batch_claims_log_append_time {
            return Err(LogError::InvalidTimestamp(
                "producers must not set the LogAppendTime attribute".into(),
            ));
        }
        Ok(())
    }
}

/// The produce-time walk over an uncompressed records section: checks each record's framing
/// (as [`RecordIter`] does), that offset deltas run 0..n-1, and each timestamp; with
/// `COMPACTED`, also that each record has a key (Kafka's `LogValidator.validateKey`, which
/// only compacted topics pay for). Returns the number of records and the largest timestamp.
/// A separate loop from `RecordIter` because this is the hot path: it builds no record views.
/// `COMPACTED` is a const parameter so that the loop other topics run has no key check at all.
fn walk_records_for_validation<const COMPACTED: bool>(
    records: &[u8],
    count: i32,
    base_timestamp: i64,
    rule: &TimestampRule,
) -> Result<(i32, i64), LogError> {
    let mut keyless = Vec::new();
    let mut keyless_count = 0usize;
    let framing = || LogError::InvalidRecord("malformed record framing".into());
    let mut c = Cursor {
        buf: records,
        pos: 0,
    };
    let mut n: i32 = 0;
    let mut max_ts = NO_TIMESTAMP;
    while c.pos < records.len() {
        if n >= count {
            return Err(LogError::InvalidRecord(
                "more records than the declared count".into(),
            ));
        }
        let len = c.varint().ok_or_else(framing)?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| c.pos.checked_add(l))
            .filter(|&e| e <= records.len())
            .ok_or_else(framing)?;
        let mut r = Cursor {
            buf: &records[..end],
            pos: c.pos + 1,
        }; // skip attributes
        let ts_delta = r.varlong().ok_or_else(framing)?;
        let offset_delta = r.varint().ok_or_else(framing)?;
        let key = r.nullable_bytes().ok_or_else(framing)?;
        if COMPACTED && key.is_none() {
            // Every keyless record is reported, as Kafka reports each as a record error.
            if keyless.len() < KEYLESS_RECORDS_LISTED_MAX {
                keyless.push(n);
            }
            keyless_count += 1;
        }
        r.nullable_bytes().ok_or_else(framing)?; // value
        let headers = r.varint().ok_or_else(framing)?;
        if headers < 0 {
            return Err(framing());
        }
        for _ in 0..headers {
            r.nullable_bytes().flatten().ok_or_else(framing)?; // key: never null
            r.nullable_bytes().ok_or_else(framing)?;
        }
        if r.pos != end {
            return Err(framing());
        }
        if offset_delta != n {
            return Err(LogError::InvalidRecord(format!(
                "record {n} has offset delta {offset_delta}"
            )));
        }
        let ts = base_timestamp.wrapping_add(ts_delta);
        rule.check(ts)?;
        max_ts = max_ts.max(ts);
        n += 1;
        c.pos = end;
    }
    if keyless_count > 0 {
        return Err(LogError::KeylessRecordsOnCompactedTopic {
            record_indices: keyless,
            count: keyless_count,
        });
    }
    Ok((n, max_ts))
}

/// Validates a Produce payload for one partition, following Kafka's rules for v2 (ProduceRequest
/// validation, `UnifiedLog.analyzeAndValidateRecords` and `LogValidator`). Never panics: every
/// length and varint is bounds-checked.
pub fn validate_produce(
    buf: &[u8],
    config: &LogConfig,
    now_ms: i64,
    origin: AppendOrigin,
) -> Result<ValidatedBatch, LogError> {
    // Framing, in the order Kafka's batch iterator checks it.
    if buf.len() < LOG_OVERHEAD {
        return Err(LogError::InvalidRecord(
            "produce payload holds no record batch".into(),
        ));
    }
    let length = be_i32(buf, LENGTH_AT);
    if length < MIN_ANY_FORMAT_LENGTH_FIELD {
        return Err(LogError::CorruptMessage(format!(
            "record size {length} is less than the minimum record overhead"
        )));
    }
    if buf.len() < HEADER_LEN_UP_TO_MAGIC {
        return Err(LogError::InvalidRecord(
            "produce payload holds no complete record batch".into(),
        ));
    }
    let magic = buf[MAGIC_AT] as i8;
    if !(0..=MAGIC_V2).contains(&magic) {
        return Err(LogError::CorruptMessage(format!("invalid magic {magic}")));
    }
    let size = length as usize + LOG_OVERHEAD;
    if size > buf.len() {
        return Err(LogError::InvalidRecord(format!(
            "batch of {size} bytes is cut short at {} bytes",
            buf.len()
        )));
    }
    if magic != MAGIC_V2 {
        return Err(LogError::InvalidRecord(format!(
            "produce requests must use magic v2, got v{magic}"
        )));
    }
    if size != buf.len() {
        return Err(LogError::InvalidRecord(
            "produce payload holds more than one record batch".into(),
        ));
    }
    if length < MIN_BATCH_LENGTH_FIELD {
        return Err(LogError::CorruptMessage(format!(
            "batch length {length} is smaller than a v2 header"
        )));
    }
    let batch = RecordBatch { buf };
    let h = batch.header();
    if origin == AppendOrigin::Client && h.base_offset() != 0 {
        return Err(LogError::InvalidRecord(format!(
            "baseOffset must be 0, got {}",
            h.base_offset()
        )));
    }
    if size > config.max_message_bytes {
        return Err(LogError::MessageTooLarge {
            size,
            max: config.max_message_bytes,
        });
    }
    if !batch.is_crc_valid() {
        return Err(LogError::CorruptMessage(format!(
            "record is corrupt (stored crc = {})",
            h.crc()
        )));
    }
    // LogValidator.validateBatch
    let Some(codec) = h.codec() else {
        return Err(LogError::CorruptMessage(format!(
            "unknown compression codec id {}",
            h.codec_id()
        )));
    };
    let count_from_offsets = h.last_offset_delta() as i64 + 1;
    if count_from_offsets <= 0 {
        return Err(LogError::InvalidRecord(format!(
            "invalid lastOffsetDelta {}",
            h.last_offset_delta()
        )));
    }
    let count = h.record_count();
    if count <= 0 {
        return Err(LogError::InvalidRecord(format!(
            "invalid record count {count}"
        )));
    }
    if count as i64 != count_from_offsets {
        return Err(LogError::InvalidRecord(format!(
            "record count {count} does not match lastOffsetDelta {}",
            h.last_offset_delta()
        )));
    }
    if h.is_control() && origin == AppendOrigin::Client {
        return Err(LogError::InvalidRecord(
            "clients may not write control batches".into(),
        ));
    }
    if h.has_producer_id() && h.base_sequence() < 0 && origin == AppendOrigin::Client {
        return Err(LogError::InvalidRecord(format!(
            "invalid sequence {} for producer id {}",
            h.base_sequence(),
            h.producer_id()
        )));
    }

    let mut corrected_max_timestamp = None;
    let mut max_timestamp = h.max_timestamp();
    let rule = TimestampRule::new(&h, now_ms, config);
    // One pass over the varint framing: count, offset deltas 0..n-1, timestamps. No
    // allocation for an uncompressed batch. A compressed one is decompressed (bounded) for the
    // walk, as Kafka's LogValidator does, and still stored exactly as received.
    let decompressed;
    let records = if codec == Codec::None {
        batch.records_bytes()
    } else {
        decompressed = decompress_records(codec, batch.records_bytes())?;
        &decompressed[..]
    };
    let (n, seen_max) = if config.cleanup_policy_compact {
        walk_records_for_validation::<true>(records, count, h.base_timestamp(), &rule)?
    } else {
        walk_records_for_validation::<false>(records, count, h.base_timestamp(), &rule)?
    };
    if n != count {
        return Err(LogError::InvalidRecord(format!(
            "declared {count} records, found {n}"
        )));
    }
    if config.message_timestamp_type == TimestampType::CreateTime && seen_max != h.max_timestamp() {
        corrected_max_timestamp = Some(seen_max);
        max_timestamp = seen_max;
    }

    Ok(ValidatedBatch {
        size,
        record_count: count,
        producer_id: h.producer_id(),
        producer_epoch: h.producer_epoch(),
        base_sequence: h.base_sequence(),
        last_sequence: h.last_sequence(),
        is_transactional: h.is_transactional(),
        is_control: h.is_control(),
        max_timestamp,
        corrected_max_timestamp,
    })
}

// ---------------------------------------------------------------------------------------------
// Transaction markers (Kafka's EndTransactionMarker and ControlRecordType)
// ---------------------------------------------------------------------------------------------

/// Control record type of an ABORT marker (Kafka's `ControlRecordType.ABORT`).
pub const CONTROL_TYPE_ABORT: i16 = 0;
/// Control record type of a COMMIT marker (Kafka's `ControlRecordType.COMMIT`).
pub const CONTROL_TYPE_COMMIT: i16 = 1;
/// Version of the marker's key and value written (Kafka's `CURRENT_END_TXN_MARKER_VERSION`).
const END_TXN_MARKER_VERSION: i16 = 0;
/// Key: version i16, type i16.
const CONTROL_KEY_BYTES: usize = 4;
/// Value: version i16, coordinator epoch i32.
const END_TXN_MARKER_VALUE_BYTES: usize = 6;

/// The record of a COMMIT or ABORT control batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// COMMIT (true) or ABORT (false).
    pub commit: bool,
    /// The epoch of the transaction coordinator that wrote it.
    pub coordinator_epoch: i32,
}

/// The transaction marker a control batch carries: `Ok(None)` for a control batch of another
/// type (KRaft's leader-change and snapshot records) or with no record; an error when the key
/// or value is too short for their version-0 layout (Kafka's `EndTransactionMarker.deserialize`).
pub fn parse_end_txn_marker(batch: &RecordBatch<'_>) -> Result<Option<EndTxnMarker>, LogError> {
    let h = batch.header();
    let codec = h.codec().ok_or_else(|| {
        LogError::CorruptMessage(format!("unknown compression codec id {}", h.codec_id()))
    })?;
    let decompressed;
    let raw: &[u8] = if codec == Codec::None {
        batch.records_bytes()
    } else {
        decompressed = decompress_records(codec, batch.records_bytes())?;
        &decompressed
    };
    let Some(record) = RecordIter::new(raw).next().transpose()? else {
        return Ok(None);
    };
    let key = record.key.unwrap_or_default();
    if key.len() < CONTROL_KEY_BYTES {
        return Err(LogError::InvalidRecord(
            "control record key is shorter than 4 bytes".into(),
        ));
    }
    let commit = match i16::from_be_bytes([key[2], key[3]]) {
        CONTROL_TYPE_ABORT => false,
        CONTROL_TYPE_COMMIT => true,
        _ => return Ok(None),
    };
    let value = record.value.unwrap_or_default();
    if value.len() < END_TXN_MARKER_VALUE_BYTES {
        return Err(LogError::InvalidRecord(
            "transaction marker value is shorter than 6 bytes".into(),
        ));
    }
    Ok(Some(EndTxnMarker {
        commit,
        coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
    }))
}

/// A COMMIT or ABORT control batch as a coordinator writes it (Kafka's
/// `MemoryRecords.withEndTransactionMarker`): transactional and control bits set, the
/// producer's id and epoch, base sequence -1, one uncompressed CreateTime record with the
/// marker's key and value, timestamp `timestamp_ms`. Offset and leader epoch are set at append.
pub fn build_end_txn_marker(
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
    timestamp_ms: i64,
) -> bytes::Bytes {
    let control_type = if marker.commit {
        CONTROL_TYPE_COMMIT
    } else {
        CONTROL_TYPE_ABORT
    };
    // The record: attributes, timestamp delta 0, offset delta 0, key, value, no headers. All
    // lengths are small, so every varint is one byte (zigzag: n -> 2n).
    let mut record = Vec::with_capacity(32);
    record.extend_from_slice(&[0, 0, 0, (CONTROL_KEY_BYTES as u8) << 1]);
    record.extend_from_slice(&END_TXN_MARKER_VERSION.to_be_bytes());
    record.extend_from_slice(&control_type.to_be_bytes());
    record.push((END_TXN_MARKER_VALUE_BYTES as u8) << 1);
    record.extend_from_slice(&END_TXN_MARKER_VERSION.to_be_bytes());
    record.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    record.push(0);
    let records_len = 1 + record.len();
    let mut b = Vec::with_capacity(HEADER_LEN + records_len);
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD + records_len) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.push(MAGIC_V2 as u8);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&(TRANSACTIONAL_BIT | CONTROL_BIT).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&timestamp_ms.to_be_bytes());
    b.extend_from_slice(&timestamp_ms.to_be_bytes());
    b.extend_from_slice(&producer_id.to_be_bytes());
    b.extend_from_slice(&producer_epoch.to_be_bytes());
    b.extend_from_slice(&NO_SEQUENCE.to_be_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    b.push((record.len() as u8) << 1);
    b.extend_from_slice(&record);
    let crc = crc32c::crc32c(&b[CRC_COVERED_FROM..]);
    b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    bytes::Bytes::from(b)
}

// ---------------------------------------------------------------------------------------------
// Test helper: encode valid batches. Public so the rest of the broker's tests can use it.
// ---------------------------------------------------------------------------------------------

pub mod testutil {
    //! Valid v2 batches for tests and benchmarks, on top of the production
    //! [`BatchBuilder`](crate::log::batch_builder::BatchBuilder).

    use bytes::Bytes;

    use super::*;
    pub use crate::log::batch_builder::{BatchBuilder, SimpleRecord};

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
    use super::testutil::*;
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn cfg() -> LogConfig {
        LogConfig::default()
    }

    fn validate(b: &[u8]) -> Result<ValidatedBatch, LogError> {
        validate_produce(b, &cfg(), NOW, AppendOrigin::Client)
    }

    #[test]
    fn compacted_logs_refuse_keyless_records() {
        let compacted = LogConfig {
            cleanup_policy_compact: true,
            ..cfg()
        };
        for codec in [Codec::None, Codec::Gzip, Codec::Zstd] {
            let b = BatchBuilder::new(NOW)
                .codec(codec)
                .record(0, Some(b"k"), b"a")
                .record(0, None, b"b")
                .record(0, Some(b""), b"c")
                .record(0, None, b"d")
                .build();
            assert!(validate(&b).is_ok(), "{codec:?}: a delete log takes them");
            match validate_produce(&b, &compacted, NOW, AppendOrigin::Client) {
                Err(LogError::KeylessRecordsOnCompactedTopic {
                    record_indices,
                    count,
                }) => {
                    assert_eq!((record_indices, count), (vec![1, 3], 2), "{codec:?}");
                }
                other => panic!("{codec:?}: {other:?}"),
            }
            let keyed = BatchBuilder::new(NOW)
                .codec(codec)
                .record(0, Some(b"k"), b"a")
                .build();
            assert!(validate_produce(&keyed, &compacted, NOW, AppendOrigin::Client).is_ok());
        }
        // The answer lists a bounded number of record errors but counts them all.
        let many = KEYLESS_RECORDS_LISTED_MAX + 5;
        let b = BatchBuilder::new(NOW).records(many, 0).build();
        match validate_produce(&b, &compacted, NOW, AppendOrigin::Client) {
            Err(LogError::KeylessRecordsOnCompactedTopic {
                record_indices,
                count,
            }) => {
                assert_eq!(record_indices.len(), KEYLESS_RECORDS_LISTED_MAX);
                assert_eq!(count, many);
            }
            other => panic!("{other:?}"),
        }
    }

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

    #[test]
    fn crc_detects_flipped_byte() {
        let mut b = build_batch(2, 5, NOW).to_vec();
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(matches!(validate(&b), Err(LogError::CorruptMessage(_))));
    }

    #[test]
    fn valid_batches_pass() {
        let v = validate(&build_batch(5, 100, NOW)).unwrap();
        assert_eq!(v.record_count, 5);
        assert_eq!(v.max_timestamp, NOW + 4);
        assert_eq!(v.corrected_max_timestamp, None);
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let b = BatchBuilder::new(NOW).codec(codec).records(5, 100).build();
            assert_eq!(validate(&b).unwrap().record_count, 5, "{codec:?}");
        }
    }

    #[test]
    fn framing_errors() {
        assert_eq!(validate(&[]).unwrap_err().error_code(), 87);
        assert_eq!(validate(&[0u8; 11]).unwrap_err().error_code(), 87);
        let b = build_batch(2, 5, NOW);
        // length field too small
        let mut x = b.to_vec();
        x[8..12].copy_from_slice(&5i32.to_be_bytes());
        assert_eq!(validate(&x).unwrap_err().error_code(), 2);
        // cut short
        assert_eq!(validate(&b[..b.len() - 1]).unwrap_err().error_code(), 87);
        // two batches
        let mut two = b.to_vec();
        two.extend_from_slice(&b);
        assert_eq!(validate(&two).unwrap_err().error_code(), 87);
        // magic 1 → INVALID_RECORD, magic 3 → CORRUPT_MESSAGE
        let mut m = b.to_vec();
        m[16] = 1;
        assert_eq!(validate(&m).unwrap_err().error_code(), 87);
        m[16] = 3;
        assert_eq!(validate(&m).unwrap_err().error_code(), 2);
        // length smaller than a v2 header but large enough for v0
        let mut small = b[..40].to_vec();
        small[8..12].copy_from_slice(&28i32.to_be_bytes());
        assert_eq!(validate(&small).unwrap_err().error_code(), 2);
    }

    #[test]
    fn semantic_errors() {
        // base offset must be 0
        let mut b = build_batch(2, 5, NOW).to_vec();
        set_base_offset(&mut b, 5);
        assert_eq!(validate(&b).unwrap_err().error_code(), 87);
        // record count mismatch
        let mut b = build_batch(2, 5, NOW).to_vec();
        b[57..61].copy_from_slice(&3i32.to_be_bytes());
        fix_crc(&mut b);
        assert_eq!(validate(&b).unwrap_err().error_code(), 87);
        // zero records
        let mut b = build_batch(1, 5, NOW).to_vec();
        b[57..61].copy_from_slice(&0i32.to_be_bytes());
        b[23..27].copy_from_slice(&(-1i32).to_be_bytes());
        fix_crc(&mut b);
        assert_eq!(validate(&b).unwrap_err().error_code(), 87);
        // control batch from a client
        let c = build_control_batch(1, 0, true, 0, NOW);
        assert_eq!(validate(&c).unwrap_err().error_code(), 87);
        assert!(validate_produce(&c, &cfg(), NOW, AppendOrigin::Coordinator).is_ok());
        // negative sequence with a producer id
        let b = BatchBuilder::new(NOW)
            .idempotent(5, 0, -1)
            .records(1, 1)
            .build();
        assert_eq!(validate(&b).unwrap_err().error_code(), 87);
        // too large
        let big = build_batch(1, 2_000_000, NOW);
        assert!(matches!(
            validate(&big),
            Err(LogError::MessageTooLarge { .. })
        ));
        assert_eq!(validate(&big).unwrap_err().error_code(), 10);
        // unknown codec
        let mut b = build_batch(1, 5, NOW).to_vec();
        b[22] |= 5;
        fix_crc(&mut b);
        assert_eq!(validate(&b).unwrap_err().error_code(), 2);
    }

    #[test]
    fn record_framing_errors() {
        // record count says 2 but lastOffsetDelta and records say 3
        let b = build_batch(3, 5, NOW);
        let mut x = b.to_vec();
        x[57..61].copy_from_slice(&2i32.to_be_bytes());
        x[23..27].copy_from_slice(&1i32.to_be_bytes());
        fix_crc(&mut x);
        assert_eq!(validate(&x).unwrap_err().error_code(), 87);
        // garbage inside the records section
        let mut x = b.to_vec();
        x[61] = 0xff;
        x[62] = 0xff;
        fix_crc(&mut x);
        assert_eq!(validate(&x).unwrap_err().error_code(), 87);
        // offset deltas not 0..n-1: record 0 is [len][attributes][tsDelta=0][offsetDelta]...
        let mut x = build_batch(2, 3, NOW).to_vec();
        assert_eq!(x[64], 0);
        x[64] = 2; // zigzag(1)
        fix_crc(&mut x);
        assert_eq!(validate(&x).unwrap_err().error_code(), 87);
    }

    #[test]
    fn timestamp_errors() {
        let mut c = cfg();
        c.message_timestamp_before_max_ms = 1000;
        let old = build_batch(1, 5, NOW - 5000);
        assert_eq!(
            validate_produce(&old, &c, NOW, AppendOrigin::Client)
                .unwrap_err()
                .error_code(),
            32
        );
        let future = build_batch(1, 5, NOW + 3_600_001);
        assert_eq!(validate(&future).unwrap_err().error_code(), 32);
        let fine = build_batch(1, 5, NOW + 3_600_000);
        assert!(validate(&fine).is_ok());
        // compressed: each record is checked, as for an uncompressed batch
        let z = BatchBuilder::new(NOW + 4_000_000)
            .codec(Codec::Gzip)
            .records(2, 5)
            .build();
        assert_eq!(validate(&z).unwrap_err().error_code(), 32);
        // a producer claiming LogAppendTime on a LogAppendTime topic
        let mut b = BatchBuilder::new(NOW).records(1, 1);
        b.log_append_time = true;
        let mut c = cfg();
        c.message_timestamp_type = TimestampType::LogAppendTime;
        assert_eq!(
            validate_produce(&b.build(), &c, NOW, AppendOrigin::Client)
                .unwrap_err()
                .error_code(),
            32
        );
    }

    #[test]
    fn wrong_declared_max_timestamp_is_corrected() {
        let mut b = build_batch(3, 5, NOW).to_vec();
        b[35..43].copy_from_slice(&(NOW + 100).to_be_bytes());
        fix_crc(&mut b);
        let v = validate(&b).unwrap();
        assert_eq!(v.corrected_max_timestamp, Some(NOW + 2));
    }

    /// A compressed batch whose header is consistent but whose records are not: Kafka's
    /// LogValidator decompresses and finds it; so does Brook.
    #[test]
    fn compressed_records_are_validated_one_by_one() {
        const CODECS: [Codec; 4] = [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];
        for codec in CODECS {
            // Header says 3 records, the compressed section holds 2.
            let mut b = BatchBuilder::new(NOW)
                .codec(codec)
                .records(2, 5)
                .build()
                .to_vec();
            b[57..61].copy_from_slice(&3i32.to_be_bytes());
            b[23..27].copy_from_slice(&2i32.to_be_bytes()); // lastOffsetDelta
            fix_crc(&mut b);
            assert_eq!(validate(&b).unwrap_err().error_code(), 87, "{codec:?}");
            // One record's timestamp is out of range although the header's are fine.
            let mut far = BatchBuilder::new(NOW).codec(codec).records(2, 5);
            far.records[1].timestamp_delta = 4_000_000;
            let mut b = far.build().to_vec();
            b[35..43].copy_from_slice(&NOW.to_be_bytes()); // header claims max = NOW
            fix_crc(&mut b);
            assert_eq!(validate(&b).unwrap_err().error_code(), 32, "{codec:?}");
            // A wrong declared maxTimestamp is corrected, as for uncompressed batches.
            let mut b = BatchBuilder::new(NOW)
                .codec(codec)
                .records(3, 5)
                .build()
                .to_vec();
            b[35..43].copy_from_slice(&(NOW + 100).to_be_bytes());
            fix_crc(&mut b);
            assert_eq!(
                validate(&b).unwrap().corrected_max_timestamp,
                Some(NOW + 2),
                "{codec:?}"
            );
            // A section that does not decompress.
            let mut b = BatchBuilder::new(NOW)
                .codec(codec)
                .records(3, 50)
                .build()
                .to_vec();
            let mid = HEADER_LEN + (b.len() - HEADER_LEN) / 2;
            for x in &mut b[mid..] {
                *x = 0xA5;
            }
            fix_crc(&mut b);
            assert!(validate(&b).is_err(), "{codec:?}");
        }
    }

    #[test]
    fn decompression_is_bounded() {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            // 200 records of 1000 equal bytes: about 200 KB raw, a few KB compressed.
            let b = BatchBuilder::new(NOW)
                .codec(codec)
                .records(200, 1000)
                .build();
            let (batch, _) = RecordBatch::parse(&b).unwrap();
            let full = decompress_records(codec, batch.records_bytes()).unwrap();
            assert!(full.len() > 200_000);
            assert_eq!(
                decompress_records_bounded(codec, batch.records_bytes(), full.len())
                    .unwrap()
                    .len(),
                full.len(),
                "{codec:?}: exactly at the bound"
            );
            let err =
                decompress_records_bounded(codec, batch.records_bytes(), 64 * 1024).unwrap_err();
            assert_eq!(err.error_code(), 87, "{codec:?}: {err}");
        }
        // A raw snappy block declaring a huge length is refused before allocating.
        let mut bomb = Vec::new();
        let mut n: u64 = 1 << 31;
        while n >= 0x80 {
            bomb.push((n as u8) | 0x80);
            n >>= 7;
        }
        bomb.push(n as u8);
        bomb.extend_from_slice(&[0u8; 8]);
        assert_eq!(
            decompress_records(Codec::Snappy, &bomb)
                .unwrap_err()
                .error_code(),
            87
        );
    }

    #[test]
    fn decompress_round_trip() {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let b = BatchBuilder::new(NOW).codec(codec).records(3, 7).build();
            let (batch, _) = RecordBatch::parse(&b).unwrap();
            let raw = decompress_records(codec, batch.records_bytes()).unwrap();
            let recs: Vec<_> = RecordIter::new(&raw).collect::<Result<_, _>>().unwrap();
            assert_eq!(recs.len(), 3);
            assert_eq!(recs[2].offset_delta, 2);
            assert_eq!(recs[2].value.unwrap().len(), 7);
        }
    }

    proptest::proptest! {
        #[test]
        fn validation_never_panics(data in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = validate(&data);
            let _ = RecordBatch::parse(&data);
            for r in RecordIter::new(&data) { let _ = r; }
        }

        #[test]
        fn mutated_batches_never_panic(idx in 0usize..200, val in proptest::num::u8::ANY) {
            let mut b = BatchBuilder::new(NOW).idempotent(1, 0, 0).records(3, 20).build().to_vec();
            let i = idx % b.len();
            b[i] = val;
            fix_crc(&mut b);
            let _ = validate(&b);
        }
    }
}
