//! The records the transaction coordinator writes to `__transaction_state`, in Kafka's
//! layout (`TransactionLogKey.json`, `TransactionLogValue.json`, Kafka's `TransactionLog`).
//!
//! Key: version i16 (0), then the transactional id as an i16-length string.
//! Value: version i16, then `TransactionLogValue`. Version 0 is a fixed layout; version 1
//! (transaction.version 1, what Brook writes) is flexible: compact strings and arrays, and
//! tagged fields for the previous and next producer ids and the client's transaction
//! version, each written only when it differs from its default. The partitions field is
//! null in state Empty. A null value is a tombstone: the transactional id expired.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};

use super::metadata::{TransactionMetadata, TransactionState};
use crate::group::records::{put_uvarint, Reader, RecordError};

/// The only key version Kafka defines.
pub const TXN_KEY_VERSION: i16 = 0;
/// The value version Brook writes (Kafka's `TransactionVersion.transactionLogValueVersion`
/// for transaction.version 1).
pub const TXN_VALUE_VERSION: i16 = 1;

/// Tags of `TransactionLogValue`'s tagged fields.
const TAG_PREVIOUS_PRODUCER_ID: u64 = 0;
const TAG_NEXT_PRODUCER_ID: u64 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u64 = 2;

/// Why a stored record could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed __transaction_state record: {0}")]
pub struct TxnRecordError(pub String);

/// The value fields, as stored (the in-memory metadata is built from them on load).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogValue {
    pub producer_id: i64,
    pub previous_producer_id: i64,
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TransactionState,
    pub partitions: BTreeSet<(String, i32)>,
    pub txn_last_update_timestamp: i64,
    pub txn_start_timestamp: i64,
    pub client_transaction_version: i16,
}

impl TxnLogValue {
    /// The value the coordinator writes for a metadata's state.
    pub fn of(m: &TransactionMetadata) -> Self {
        TxnLogValue {
            producer_id: m.producer_id,
            previous_producer_id: m.previous_producer_id,
            next_producer_id: m.next_producer_id,
            producer_epoch: m.producer_epoch,
            txn_timeout_ms: m.txn_timeout_ms,
            state: m.state,
            partitions: m.partitions.clone(),
            txn_last_update_timestamp: m.txn_last_update_timestamp,
            txn_start_timestamp: m.txn_start_timestamp,
            client_transaction_version: m.client_transaction_version,
        }
    }
}

/// The key of a transactional id's record.
pub fn txn_key(transactional_id: &str) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(TXN_KEY_VERSION);
    // Transactional ids are bounded by MAX_TRANSACTIONAL_ID_BYTES, below i16::MAX.
    let id = &transactional_id.as_bytes()[..transactional_id.len().min(i16::MAX as usize)];
    out.put_i16(id.len() as i16);
    out.put_slice(id);
    out.freeze()
}

/// The partitions grouped by topic, in topic order (Kafka groups them the same way).
fn by_topic(partitions: &BTreeSet<(String, i32)>) -> Vec<(&str, Vec<i32>)> {
    let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
    for (t, p) in partitions {
        match out.last_mut() {
            Some((last, ps)) if *last == t.as_str() => ps.push(*p),
            _ => out.push((t.as_str(), vec![*p])),
        }
    }
    out
}

/// Encodes a value at [`TXN_VALUE_VERSION`].
pub fn txn_value(v: &TxnLogValue) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(TXN_VALUE_VERSION);
    out.put_i64(v.producer_id);
    out.put_i16(v.producer_epoch);
    out.put_i32(v.txn_timeout_ms);
    out.put_i8(v.state.id());
    if v.state == TransactionState::Empty {
        put_uvarint(&mut out, 0); // null
    } else {
        let topics = by_topic(&v.partitions);
        put_uvarint(&mut out, topics.len() as u64 + 1);
        for (topic, ps) in topics {
            put_uvarint(&mut out, topic.len() as u64 + 1);
            out.put_slice(topic.as_bytes());
            put_uvarint(&mut out, ps.len() as u64 + 1);
            for p in ps {
                out.put_i32(p);
            }
            put_uvarint(&mut out, 0); // no tagged fields
        }
    }
    out.put_i64(v.txn_last_update_timestamp);
    out.put_i64(v.txn_start_timestamp);
    let mut tags: Vec<(u64, Vec<u8>)> = Vec::new();
    if v.previous_producer_id != -1 {
        tags.push((
            TAG_PREVIOUS_PRODUCER_ID,
            v.previous_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if v.next_producer_id != -1 {
        tags.push((
            TAG_NEXT_PRODUCER_ID,
            v.next_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if v.client_transaction_version != 0 {
        tags.push((
            TAG_CLIENT_TRANSACTION_VERSION,
            v.client_transaction_version.to_be_bytes().to_vec(),
        ));
    }
    put_uvarint(&mut out, tags.len() as u64);
    for (tag, data) in tags {
        put_uvarint(&mut out, tag);
        put_uvarint(&mut out, data.len() as u64);
        out.put_slice(&data);
    }
    out.freeze()
}

impl From<RecordError> for TxnRecordError {
    fn from(e: RecordError) -> Self {
        TxnRecordError(e.0)
    }
}

/// A fixed-layout array count, no larger than the bytes left (each element takes at least
/// one byte), so a corrupt count cannot make the decoder allocate without bound.
fn array_len(r: &mut Reader<'_>) -> Result<Option<usize>, TxnRecordError> {
    let n = r.i32()?;
    if n < 0 {
        return Ok(None);
    }
    if n as usize > r.remaining() {
        return Err(TxnRecordError(format!("array of {n} elements")));
    }
    Ok(Some(n as usize))
}

/// Decodes a key: the transactional id, or `None` for a key version Kafka does not define
/// (skipped on load, as Kafka's `UnknownKey`).
pub fn decode_txn_key(key: &[u8]) -> Result<Option<String>, TxnRecordError> {
    let mut r = Reader::new(key);
    if r.i16()? != TXN_KEY_VERSION {
        return Ok(None);
    }
    Ok(Some(r.str()?))
}

/// Decodes a value of version 0 or 1.
pub fn decode_txn_value(value: &[u8]) -> Result<TxnLogValue, TxnRecordError> {
    let mut r = Reader::new(value);
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(TxnRecordError(format!("unknown value version {version}")));
    }
    let flexible = version >= 1;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let txn_timeout_ms = r.i32()?;
    let status = r.i8()?;
    let state = TransactionState::from_id(status)
        .ok_or_else(|| TxnRecordError(format!("unknown transaction status {status}")))?;
    let mut partitions = BTreeSet::new();
    let topics = if flexible {
        r.compact_len()?
    } else {
        array_len(&mut r)?
    };
    for _ in 0..topics.unwrap_or(0) {
        let topic = if flexible { r.compact_str()? } else { r.str()? };
        let n = if flexible {
            r.compact_len()?
        } else {
            array_len(&mut r)?
        }
        .unwrap_or(0);
        for _ in 0..n {
            partitions.insert((topic.clone(), r.i32()?));
        }
        if flexible {
            r.tagged_fields()?;
        }
    }
    let txn_last_update_timestamp = r.i64()?;
    let txn_start_timestamp = r.i64()?;
    let mut v = TxnLogValue {
        producer_id,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch,
        txn_timeout_ms,
        state,
        // Kafka ignores partitions stored with state Empty.
        partitions: if state == TransactionState::Empty {
            BTreeSet::new()
        } else {
            partitions
        },
        txn_last_update_timestamp,
        txn_start_timestamp,
        client_transaction_version: 0,
    };
    if flexible {
        let n = r.uvarint()?;
        for _ in 0..n {
            let tag = r.uvarint()?;
            let size = r.uvarint()? as usize;
            let data = r.take(size)?;
            let mut field = Reader::new(data);
            match tag {
                TAG_PREVIOUS_PRODUCER_ID => v.previous_producer_id = field.i64()?,
                TAG_NEXT_PRODUCER_ID => v.next_producer_id = field.i64()?,
                TAG_CLIENT_TRANSACTION_VERSION => v.client_transaction_version = field.i16()?,
                _ => {}
            }
        }
    }
    Ok(v)
}

/// One record as Kafka's `DumpLogSegments --transaction-log-decoder` prints it
/// (`TransactionLog.formatRecordKeyAndValue`): (key, value).
pub fn format_record(key: &[u8], value: Option<&[u8]>) -> (String, String) {
    match decode_txn_key(key) {
        Ok(Some(id)) => {
            let value = match value.map(decode_txn_value) {
                None => "<DELETE>".to_string(),
                Some(Ok(v)) => format!(
                    "producerId:{},producerEpoch:{},state={},partitions=[{}],\
                     txnLastUpdateTimestamp={},txnTimeoutMs={}",
                    v.producer_id,
                    v.producer_epoch,
                    v.state.name(),
                    v.partitions
                        .iter()
                        .map(|(t, p)| format!("{t}-{p}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    v.txn_last_update_timestamp,
                    v.txn_timeout_ms
                ),
                Some(Err(e)) => format!("<{e}>"),
            };
            (format!("transaction_metadata::transactionalId={id}"), value)
        }
        Ok(None) => {
            let version = key
                .get(..2)
                .map(|b| i16::from_be_bytes([b[0], b[1]]))
                .unwrap_or(-1);
            (format!("unknown::version={version}"), String::new())
        }
        Err(e) => (format!("<{e}>"), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> TxnLogValue {
        TxnLogValue {
            producer_id: 4000,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 3,
            txn_timeout_ms: 60_000,
            state: TransactionState::Ongoing,
            partitions: [
                ("a".to_string(), 1),
                ("a".to_string(), 0),
                ("bc".to_string(), 2),
            ]
            .into_iter()
            .collect(),
            txn_last_update_timestamp: 1_700_000_000_123,
            txn_start_timestamp: 1_700_000_000_000,
            client_transaction_version: 0,
        }
    }

    #[test]
    fn key_is_version_zero_and_a_short_string() {
        assert_eq!(
            txn_key("tx-1").as_ref(),
            &[0, 0, 0, 4, b't', b'x', b'-', b'1']
        );
        assert_eq!(
            decode_txn_key(&txn_key("tx-1")).unwrap().as_deref(),
            Some("tx-1")
        );
        assert_eq!(decode_txn_key(&[0, 9, 0, 0]).unwrap(), None);
    }

    #[test]
    fn value_bytes_match_a_hand_built_kafka_record() {
        // TransactionLogValue v1, built field by field from the JSON schema.
        let mut want = vec![0u8, 1]; // version 1
        want.extend(4000i64.to_be_bytes()); // ProducerId
        want.extend(3i16.to_be_bytes()); // ProducerEpoch
        want.extend(60_000i32.to_be_bytes()); // TransactionTimeoutMs
        want.push(1); // TransactionStatus: Ongoing
        want.push(3); // TransactionPartitions: compact array of 2
        want.extend([2, b'a', 3]); // Topic "a", PartitionIds: compact array of 2
        want.extend(0i32.to_be_bytes());
        want.extend(1i32.to_be_bytes());
        want.push(0); // no tagged fields in the element
        want.extend([3, b'b', b'c', 2]); // Topic "bc", 1 partition
        want.extend(2i32.to_be_bytes());
        want.push(0);
        want.extend(1_700_000_000_123i64.to_be_bytes()); // TransactionLastUpdateTimestampMs
        want.extend(1_700_000_000_000i64.to_be_bytes()); // TransactionStartTimestampMs
        want.push(0); // no tagged fields: previous/next producer id -1, client version 0
        assert_eq!(txn_value(&ongoing()).as_ref(), want.as_slice());
        assert_eq!(decode_txn_value(&want).unwrap(), ongoing());
    }

    #[test]
    fn empty_state_writes_null_partitions_and_tags_round_trip() {
        let mut v = ongoing();
        v.state = TransactionState::Empty;
        v.partitions.clear();
        v.previous_producer_id = 17;
        v.client_transaction_version = 2;
        let bytes = txn_value(&v);
        // version, pid, epoch, timeout, status, then the null array.
        assert_eq!(bytes[2 + 8 + 2 + 4], 0, "status Empty");
        assert_eq!(bytes[2 + 8 + 2 + 4 + 1], 0, "partitions null");
        assert_eq!(decode_txn_value(&bytes).unwrap(), v);
    }

    #[test]
    fn version_zero_values_are_read() {
        let mut b = vec![0u8, 0];
        b.extend(9i64.to_be_bytes());
        b.extend(1i16.to_be_bytes());
        b.extend(1000i32.to_be_bytes());
        b.push(2); // PrepareCommit
        b.extend(1i32.to_be_bytes()); // one topic
        b.extend([0, 1, b't']);
        b.extend(1i32.to_be_bytes());
        b.extend(5i32.to_be_bytes());
        b.extend(20i64.to_be_bytes());
        b.extend(10i64.to_be_bytes());
        let v = decode_txn_value(&b).unwrap();
        assert_eq!(v.state, TransactionState::PrepareCommit);
        assert_eq!(v.partitions, [("t".to_string(), 5)].into_iter().collect());
        assert_eq!(
            (v.txn_last_update_timestamp, v.txn_start_timestamp),
            (20, 10)
        );
    }

    #[test]
    fn corrupt_values_are_errors_not_panics() {
        let good = txn_value(&ongoing());
        for n in 0..good.len() {
            assert!(decode_txn_value(&good[..n]).is_err(), "prefix of {n} bytes");
        }
        let mut huge = good[..17].to_vec();
        huge.extend([0xff, 0xff, 0xff, 0x0f]);
        assert!(decode_txn_value(&huge).is_err());
    }

    #[test]
    fn dump_format_is_kafkas() {
        let (k, v) = format_record(&txn_key("t1"), Some(&txn_value(&ongoing())));
        assert_eq!(k, "transaction_metadata::transactionalId=t1");
        assert_eq!(
            v,
            "producerId:4000,producerEpoch:3,state=Ongoing,partitions=[a-0,a-1,bc-2],\
             txnLastUpdateTimestamp=1700000000123,txnTimeoutMs=60000"
        );
        assert_eq!(format_record(&txn_key("t1"), None).1, "<DELETE>");
    }
}
