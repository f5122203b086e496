//! Control records: the transaction markers a coordinator writes (Kafka's
//! `EndTransactionMarker` and `ControlRecordType`).

use super::batch::*;
use super::decompress::BatchRecords;
use super::records::*;
use super::LogError;

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
    // Only the first record is read (Kafka's `batch.iterator().next()`), streamed when the
    // batch is compressed: what follows it is never decompressed.
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let found = first_record(&mut BatchRecords::open(batch)?, &mut key, &mut value)?;
    if !found {
        return Ok(None);
    }
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

/// Reads the first record's key and value (empty when null); false when there is none.
fn first_record<R: RecordBytes>(
    r: &mut R,
    key: &mut Vec<u8>,
    value: &mut Vec<u8>,
) -> Result<bool, LogError> {
    if !r.has_more()? {
        return Ok(false);
    }
    let sink = RecordSink {
        key: Some(key),
        value: Some(value),
    };
    match read_record(r, sink, false) {
        Some(_) => Ok(true),
        None => Err(r.settle(LogError::InvalidRecord("malformed record framing".into()))),
    }
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
