//! The checks a produced batch passes before it is written (Kafka's `LogValidator`): framing,
//! CRC, magic, producer fields, every record (streamed through a bounded buffer when the
//! batch is compressed),
//! timestamps, keys on compacted topics.

use super::batch::*;
use super::decompress::RecordStream;
use super::records::*;
use super::{LogConfig, LogError, TimestampType, KEYLESS_RECORDS_LISTED_MAX};

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

/// The produce-time walk over a records section, in place when uncompressed and streamed when
/// compressed (Kafka's `LogValidator.validateMessagesAndAssignOffsetsCompressed` over
/// `skipKeyValueIterator`, which reads each record's key, value and headers only to pass
/// over them): checks each record's framing ([`read_record`]), that offset deltas run
/// 0..n-1, and each timestamp; with `COMPACTED`, also that each record has a key (Kafka's
/// `LogValidator.validateKey`, which only compacted topics pay for). Returns the number of
/// records and the largest timestamp. `COMPACTED` is a const parameter so that the loop
/// other topics run has no key check at all. A stream's own failure (decoder error, size
/// bound) outranks what the walk found ([`RecordBytes::settle`]).
fn walk_records_for_validation<R: RecordBytes, const COMPACTED: bool>(
    records: &mut R,
    count: i32,
    base_timestamp: i64,
    rule: &TimestampRule,
) -> Result<(i32, i64), LogError> {
    walk_records_inner::<R, COMPACTED>(records, count, base_timestamp, rule)
        .map_err(|e| records.settle(e))
}

#[inline(always)]
fn walk_records_inner<R: RecordBytes, const COMPACTED: bool>(
    records: &mut R,
    count: i32,
    base_timestamp: i64,
    rule: &TimestampRule,
) -> Result<(i32, i64), LogError> {
    let mut keyless = Vec::new();
    let mut keyless_count = 0usize;
    let framing = || LogError::InvalidRecord("malformed record framing".into());
    let mut n: i32 = 0;
    let mut max_ts = NO_TIMESTAMP;
    while records.has_more()? {
        if n >= count {
            return Err(LogError::InvalidRecord(
                "more records than the declared count".into(),
            ));
        }
        let r = read_record(records, RecordSink::default(), false).ok_or_else(framing)?;
        if COMPACTED && !r.has_key {
            // Every keyless record is reported, as Kafka reports each as a record error.
            if keyless.len() < KEYLESS_RECORDS_LISTED_MAX {
                keyless.push(n);
            }
            keyless_count += 1;
        }
        if r.offset_delta != n {
            return Err(LogError::InvalidRecord(format!(
                "record {n} has offset delta {}",
                r.offset_delta
            )));
        }
        let ts = base_timestamp.wrapping_add(r.timestamp_delta);
        rule.check(ts)?;
        max_ts = max_ts.max(ts);
        n += 1;
    }
    if keyless_count > 0 {
        return Err(LogError::KeylessRecordsOnCompactedTopic {
            record_indices: keyless,
            count: keyless_count,
        });
    }
    Ok((n, max_ts))
}

/// [`walk_records_for_validation`] over an uncompressed section, in place: the same checks in
/// the same order, as a loop of its own because this is the hot path (it builds no record
/// views and reads no field twice; the generic walk costs about a fifth more instructions per
/// record).
fn walk_uncompressed_for_validation<const COMPACTED: bool>(
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

/// [`walk_records_for_validation`] with the key check when the log is compacted.
#[inline(always)]
fn walk<R: RecordBytes>(
    records: &mut R,
    compacted: bool,
    count: i32,
    h: &BatchHeader<'_>,
    rule: &TimestampRule,
) -> Result<(i32, i64), LogError> {
    if compacted {
        walk_records_for_validation::<R, true>(records, count, h.base_timestamp(), rule)
    } else {
        walk_records_for_validation::<R, false>(records, count, h.base_timestamp(), rule)
    }
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
    let size = check_framing(buf)?;
    let batch = RecordBatch { buf };
    let h = batch.header();
    analyze_batch(&batch, &h, size, config, origin)?;
    let (codec, count) = validate_batch(&h, origin)?;

    let mut corrected_max_timestamp = None;
    let mut max_timestamp = h.max_timestamp();
    let rule = TimestampRule::new(&h, now_ms, config);
    let (n, seen_max) = validate_records(&batch, &h, codec, count, config, &rule)?;
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

/// The payload's framing, in the order Kafka's batch iterator checks it
/// (`ByteBufferLogInputStream.nextBatchSize`), then the Produce rules: magic v2, exactly one
/// batch, a complete v2 header. Returns the batch's size in bytes.
fn check_framing(buf: &[u8]) -> Result<usize, LogError> {
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
    Ok(size)
}

/// Kafka's `UnifiedLog.analyzeAndValidateRecords` for the one batch: a client's base offset
/// is 0, the batch fits `max.message.bytes`, its CRC is right.
fn analyze_batch(
    batch: &RecordBatch<'_>,
    h: &BatchHeader<'_>,
    size: usize,
    config: &LogConfig,
    origin: AppendOrigin,
) -> Result<(), LogError> {
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
    Ok(())
}

/// Kafka's `LogValidator.validateBatch`: a known codec, a record count that matches the
/// offset range, no control batch and no negative sequence from a client. Returns the codec
/// and the record count.
fn validate_batch(h: &BatchHeader<'_>, origin: AppendOrigin) -> Result<(Codec, i32), LogError> {
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
    Ok((codec, count))
}

/// One pass over the records' varint framing: count, offset deltas 0..n-1, timestamps (and
/// keys on a compacted log), as Kafka's `LogValidator` checks each record. In place and
/// without allocation for an uncompressed batch; a compressed one is streamed through a
/// bounded buffer (never held whole) and still stored exactly as received. Returns the
/// records found and their largest timestamp.
fn validate_records(
    batch: &RecordBatch<'_>,
    h: &BatchHeader<'_>,
    codec: Codec,
    count: i32,
    config: &LogConfig,
    rule: &TimestampRule,
) -> Result<(i32, i64), LogError> {
    match codec {
        Codec::None if config.cleanup_policy_compact => walk_uncompressed_for_validation::<true>(
            batch.records_bytes(),
            count,
            h.base_timestamp(),
            rule,
        ),
        Codec::None => walk_uncompressed_for_validation::<false>(
            batch.records_bytes(),
            count,
            h.base_timestamp(),
            rule,
        ),
        codec => {
            let mut s = RecordStream::open(codec, batch.records_bytes())?;
            walk(&mut s, config.cleanup_policy_compact, count, h, rule)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::testutil::*;

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

    #[test]
    fn crc_detects_flipped_byte() {
        let mut b = build_batch(2, 5, NOW).to_vec();
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(matches!(validate(&b), Err(LogError::CorruptMessage(_))));
    }
}
