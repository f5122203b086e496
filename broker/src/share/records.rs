//! The `__share_group_state` record layout, Kafka 4.4's (`ShareSnapshotKey.json`,
//! `ShareSnapshotValue.json`, `ShareUpdateKey.json`, `ShareUpdateValue.json` of the
//! share-coordinator module, framed by Kafka's `CoordinatorRecordSerde`), so Kafka's
//! `kafka-dump-log --share-group-state-decoder` reads Brook's segments.
//!
//! Key: the record type as an i16 (0 a snapshot, 1 an update: the key message's `apiKey`),
//! then the key at version 0: group id (i16-length string), topic id (16 bytes), partition
//! (i32). Value: its version as an i16 (0), then a flexible struct. A snapshot's:
//! snapshot epoch (i32), state epoch (i32), leader epoch (i32), start offset (i64), create
//! timestamp (i64), write timestamp (i64), state batches; an update's: snapshot epoch (i32),
//! leader epoch (i32), start offset (i64), state batches. State batches are a compact array
//! of first offset i64, last offset i64, delivery state i8, delivery count i16, tagged
//! fields. The value's tagged fields end it: tag 0 is the delivery complete count (i32,
//! KIP-1226; -1, its default, is not written). A null value is a tombstone.
//!
//! As Kafka's `CoordinatorLoaderImpl`, a key of an unknown record type is skipped (a left
//! over of a newer writer), and a value that cannot be read (an unknown version, or a record
//! of an older layout: Brook wrote a 2-byte snapshot epoch and no timestamps before) fails
//! the load of its partition with an error naming the record.

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::group::records::{put_uvarint, Reader, RecordError};

/// Record type (key version) of a `ShareSnapshot` record (Kafka's `ShareSnapshotKey` apiKey).
pub const SNAPSHOT_KEY_VERSION: i16 = 0;
/// Record type (key version) of a `ShareUpdate` record (Kafka's `ShareUpdateKey` apiKey).
pub const UPDATE_KEY_VERSION: i16 = 1;
/// The only value version of both (`validVersions` "0").
const VALUE_VERSION: i16 = 0;
/// The value's tagged field holding the delivery complete count (Kafka's
/// `ShareSnapshotValue`/`ShareUpdateValue` tag 0).
const DELIVERY_COMPLETE_COUNT_TAG: u64 = 0;
/// The delivery complete count of a record without one (written before KIP-1226).
pub const DELIVERY_COMPLETE_COUNT_UNKNOWN: i32 = -1;
/// Bound on the state batches one decoded value may hold (a corrupt count is refused
/// instead of allocated).
pub const STATE_BATCHES_MAX: usize = 100_000;

/// One run of offsets with one delivery state and count (Kafka's `PersisterStateBatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    /// 0 Available, 2 Acknowledged, 4 Archived (Kafka's `RecordState` ids).
    pub delivery_state: i8,
    pub delivery_count: i16,
}

/// The fields only a snapshot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotFields {
    pub state_epoch: i32,
    /// When the snapshot's state was created, milliseconds since the epoch (Kafka's
    /// `CreateTimestamp`).
    pub create_timestamp_ms: i64,
    /// When the snapshot was written (Kafka's `WriteTimestamp`).
    pub write_timestamp_ms: i64,
}

/// A record's value: a snapshot (with its state epoch and timestamps) or an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateValue {
    pub snapshot_epoch: i32,
    /// `None` for an update.
    pub snapshot: Option<SnapshotFields>,
    pub leader_epoch: i32,
    /// -1 in an update that does not move it.
    pub start_offset: i64,
    /// The offsets at or after the start offset whose delivery is complete (Acknowledged
    /// or Archived), -1 when unknown.
    pub delivery_complete_count: i32,
    pub batches: Vec<StateBatch>,
}

/// (key version, group, topic id, partition).
pub type StateKey = (i16, String, Uuid, i32);

pub fn encode_key(version: i16, group: &str, topic_id: Uuid, partition: i32) -> Bytes {
    let mut b = BytesMut::with_capacity(2 + 2 + group.len() + 16 + 4);
    b.put_i16(version);
    crate::group::records::put_str(&mut b, group);
    b.put_slice(topic_id.as_bytes());
    b.put_i32(partition);
    b.freeze()
}

pub fn encode_value(v: &StateValue) -> Bytes {
    let mut b = BytesMut::with_capacity(48 + v.batches.len() * 20);
    b.put_i16(VALUE_VERSION);
    b.put_i32(v.snapshot_epoch);
    if let Some(s) = v.snapshot {
        b.put_i32(s.state_epoch);
    }
    b.put_i32(v.leader_epoch);
    b.put_i64(v.start_offset);
    if let Some(s) = v.snapshot {
        b.put_i64(s.create_timestamp_ms);
        b.put_i64(s.write_timestamp_ms);
    }
    put_uvarint(&mut b, v.batches.len() as u64 + 1);
    for s in &v.batches {
        b.put_i64(s.first_offset);
        b.put_i64(s.last_offset);
        b.put_i8(s.delivery_state);
        b.put_i16(s.delivery_count);
        put_uvarint(&mut b, 0);
    }
    // Kafka writes a tagged field only when it is not its default.
    if v.delivery_complete_count == DELIVERY_COMPLETE_COUNT_UNKNOWN {
        put_uvarint(&mut b, 0);
    } else {
        put_uvarint(&mut b, 1);
        put_uvarint(&mut b, DELIVERY_COMPLETE_COUNT_TAG);
        put_uvarint(&mut b, 4);
        b.put_i32(v.delivery_complete_count);
    }
    b.freeze()
}

/// A record key; `None` for a record type this coordinator does not know (Kafka's
/// `UnknownRecordTypeException`, which its loader logs and skips).
pub fn decode_key(buf: &[u8]) -> Result<Option<StateKey>, String> {
    let mut r = Reader::new(buf);
    let version = r.i16().map_err(text)?;
    if version != SNAPSHOT_KEY_VERSION && version != UPDATE_KEY_VERSION {
        return Ok(None);
    }
    let group = r.str().map_err(text)?;
    let id = Uuid::from_slice(r.take(16).map_err(text)?).map_err(|e| e.to_string())?;
    Ok(Some((version, group, id, r.i32().map_err(text)?)))
}

/// A record value, of a snapshot key (`snapshot`) or an update key.
pub fn decode_value(buf: &[u8], snapshot: bool) -> Result<StateValue, String> {
    let mut r = Reader::new(buf);
    let version = r.i16().map_err(text)?;
    if version != VALUE_VERSION {
        return Err(format!("unknown value version {version}"));
    }
    decode_value_fields(&mut r, snapshot).map_err(text)
}

fn decode_value_fields(r: &mut Reader, snapshot: bool) -> Result<StateValue, RecordError> {
    let snapshot_epoch = r.i32()?;
    let state_epoch = if snapshot { Some(r.i32()?) } else { None };
    let leader_epoch = r.i32()?;
    let start_offset = r.i64()?;
    let snapshot = match state_epoch {
        Some(state_epoch) => Some(SnapshotFields {
            state_epoch,
            create_timestamp_ms: r.i64()?,
            write_timestamp_ms: r.i64()?,
        }),
        None => None,
    };
    let n = r.compact_len()?.unwrap_or(0);
    if n > STATE_BATCHES_MAX {
        return Err(RecordError(format!("{n} state batches")));
    }
    let mut batches = Vec::with_capacity(n);
    for _ in 0..n {
        batches.push(StateBatch {
            first_offset: r.i64()?,
            last_offset: r.i64()?,
            delivery_state: r.i8()?,
            delivery_count: r.i16()?,
        });
        r.tagged_fields()?;
    }
    let mut delivery_complete_count = DELIVERY_COMPLETE_COUNT_UNKNOWN;
    for _ in 0..r.uvarint()? {
        let tag = r.uvarint()?;
        let len = usize::try_from(r.uvarint()?).map_err(|_| RecordError("tag size".into()))?;
        let field = r.take(len)?;
        if tag == DELIVERY_COMPLETE_COUNT_TAG {
            let b: [u8; 4] = field
                .try_into()
                .map_err(|_| RecordError("delivery complete count is not 4 bytes".into()))?;
            delivery_complete_count = i32::from_be_bytes(b);
        }
    }
    Ok(StateValue {
        snapshot_epoch,
        snapshot,
        leader_epoch,
        start_offset,
        delivery_complete_count,
        batches,
    })
}

fn text(e: RecordError) -> String {
    e.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn batch(first: i64, last: i64, state: i8, count: i16) -> StateBatch {
        StateBatch {
            first_offset: first,
            last_offset: last,
            delivery_state: state,
            delivery_count: count,
        }
    }

    /// The bytes Kafka 4.4's generated `ShareSnapshotValue`, `ShareUpdateValue` and
    /// `ShareUpdateKey` write for the same fields (`MessageUtil.toVersionPrefixedByteBuffer`,
    /// `toCoordinatorTypePrefixedByteBuffer`, run against the 4.4.0 jars).
    #[test]
    fn records_are_byte_for_byte_kafka_4_4s() {
        let snapshot = StateValue {
            snapshot_epoch: 3,
            snapshot: Some(SnapshotFields {
                state_epoch: 1,
                create_timestamp_ms: 1000,
                write_timestamp_ms: 2000,
            }),
            leader_epoch: 7,
            start_offset: 5,
            delivery_complete_count: 3,
            batches: vec![batch(5, 9, 0, 2)],
        };
        let kafka = hex(
            "0000000000030000000100000007000000000000000500000000000003e800000000000007d0\
             02000000000000000500000000000000090000020001000400000003",
        );
        assert_eq!(encode_value(&snapshot).as_ref(), kafka.as_slice());
        assert_eq!(decode_value(&kafka, true).unwrap(), snapshot);

        let update = StateValue {
            snapshot_epoch: 3,
            snapshot: None,
            leader_epoch: 7,
            start_offset: -1,
            delivery_complete_count: DELIVERY_COMPLETE_COUNT_UNKNOWN,
            batches: vec![batch(5, 9, 2, 1)],
        };
        let kafka = hex(
            "00000000000300000007ffffffffffffffff020000000000000005000000000000000902000100\
             00",
        );
        assert_eq!(encode_value(&update).as_ref(), kafka.as_slice());
        assert_eq!(decode_value(&kafka, false).unwrap(), update);

        let id = Uuid::from_u128(42);
        let key = encode_key(UPDATE_KEY_VERSION, "g", id, 3);
        assert_eq!(
            key.as_ref(),
            hex("00010001670000000000000000000000000000002a00000003").as_slice()
        );
        assert_eq!(
            decode_key(&key).unwrap(),
            Some((UPDATE_KEY_VERSION, "g".to_string(), id, 3))
        );
    }

    /// A record of another type is skipped; a value Brook's older layout wrote (2-byte
    /// snapshot epoch, no timestamps) or of an unknown version is an error, never a panic.
    #[test]
    fn unknown_types_are_skipped_and_unreadable_values_are_errors() {
        let mut other = encode_key(UPDATE_KEY_VERSION, "g", Uuid::from_u128(1), 0).to_vec();
        other[1] = 7;
        assert_eq!(decode_key(&other).unwrap(), None);
        assert!(decode_key(&other[..1]).is_err());
        // The old layout: version 0, u16 snapshot epoch, i32 state epoch, i32 leader epoch,
        // i64 start offset, one batch, no tagged fields.
        let mut old = vec![0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 7];
        old.extend_from_slice(&5i64.to_be_bytes());
        old.push(2);
        old.extend_from_slice(&5i64.to_be_bytes());
        old.extend_from_slice(&9i64.to_be_bytes());
        old.extend_from_slice(&[0, 0, 2, 0]);
        assert!(decode_value(&old, true).is_err());
        let mut v1 = encode_value(&StateValue {
            snapshot_epoch: 0,
            snapshot: None,
            leader_epoch: 0,
            start_offset: 0,
            delivery_complete_count: -1,
            batches: Vec::new(),
        })
        .to_vec();
        v1[1] = 1;
        assert_eq!(
            decode_value(&v1, false).unwrap_err(),
            "unknown value version 1"
        );
        for cut in 0..v1.len() {
            assert!(decode_value(&v1[..cut], false).is_err());
        }
    }
}
