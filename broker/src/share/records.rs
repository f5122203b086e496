//! The `__share_group_state` record layout, Kafka's (`ShareSnapshotKey.json`,
//! `ShareSnapshotValue.json`, `ShareUpdateKey.json`, `ShareUpdateValue.json`, written by
//! Kafka's `ShareCoordinatorRecordSerde`).
//!
//! Key: version i16 (0 a snapshot, 1 an update), then group id (i16-length string), topic id
//! (16 bytes), partition (i32). Value: version i16 (0), then a flexible struct: snapshot
//! epoch (u16), for a snapshot the state epoch (i32), leader epoch (i32), start offset
//! (i64), state batches (compact array of first offset i64, last offset i64, delivery state
//! i8, delivery count i16, tagged fields), tagged fields: tag 0 is the delivery complete
//! count (i32, KIP-1226; -1 when absent, as Kafka 4.4's `DeliveryCompleteCount`). A null
//! value is a tombstone (DeleteShareGroupState).

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

/// Key version of a `ShareSnapshot` record.
pub const SNAPSHOT_KEY_VERSION: i16 = 0;
/// Key version of a `ShareUpdate` record.
pub const UPDATE_KEY_VERSION: i16 = 1;
/// The only value version of both.
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

/// A record's value: a snapshot (with its state epoch) or an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateValue {
    pub snapshot_epoch: u16,
    /// `None` for an update (it has no state epoch).
    pub state_epoch: Option<i32>,
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
    b.put_i16(group.len() as i16);
    b.put_slice(group.as_bytes());
    b.put_slice(topic_id.as_bytes());
    b.put_i32(partition);
    b.freeze()
}

pub fn encode_value(v: &StateValue) -> Bytes {
    let mut b = BytesMut::with_capacity(32 + v.batches.len() * 20);
    b.put_i16(VALUE_VERSION);
    b.put_u16(v.snapshot_epoch);
    if let Some(state_epoch) = v.state_epoch {
        b.put_i32(state_epoch);
    }
    b.put_i32(v.leader_epoch);
    b.put_i64(v.start_offset);
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

/// A record key; `None` for a key version this coordinator does not write.
pub fn decode_key(buf: &[u8]) -> Result<Option<StateKey>, String> {
    let mut r = Reader(buf);
    let version = r.i16()?;
    if version != SNAPSHOT_KEY_VERSION && version != UPDATE_KEY_VERSION {
        return Ok(None);
    }
    let len = r.i16()?;
    let group = String::from_utf8(r.take(len.max(0) as usize)?.to_vec())
        .map_err(|_| "group id is not UTF-8".to_string())?;
    let id: [u8; 16] = r.take(16)?.try_into().map_err(|_| "short topic id")?;
    Ok(Some((version, group, Uuid::from_bytes(id), r.i32()?)))
}

/// A record value, of a snapshot key (`snapshot`) or an update key.
pub fn decode_value(buf: &[u8], snapshot: bool) -> Result<StateValue, String> {
    let mut r = Reader(buf);
    let version = r.i16()?;
    if version != VALUE_VERSION {
        return Err(format!("unknown value version {version}"));
    }
    let snapshot_epoch = r.i16()? as u16;
    let state_epoch = if snapshot { Some(r.i32()?) } else { None };
    let leader_epoch = r.i32()?;
    let start_offset = r.i64()?;
    let n = r.uvarint()?.saturating_sub(1) as usize;
    if n > STATE_BATCHES_MAX {
        return Err(format!("{n} state batches"));
    }
    let mut batches = Vec::with_capacity(n);
    for _ in 0..n {
        batches.push(StateBatch {
            first_offset: r.i64()?,
            last_offset: r.i64()?,
            delivery_state: r.i8()?,
            delivery_count: r.i16()?,
        });
        r.skip_tags()?;
    }
    // A record written before KIP-1226 may end here, without its tagged fields.
    let mut delivery_complete_count = DELIVERY_COMPLETE_COUNT_UNKNOWN;
    if !r.0.is_empty() {
        for _ in 0..r.uvarint()? {
            let tag = r.uvarint()?;
            let len = r.uvarint()? as usize;
            let field = r.take(len)?;
            if tag == DELIVERY_COMPLETE_COUNT_TAG {
                let b: [u8; 4] = field.try_into().map_err(|_| "delivery complete count")?;
                delivery_complete_count = i32::from_be_bytes(b);
            }
        }
    }
    Ok(StateValue {
        snapshot_epoch,
        state_epoch,
        leader_epoch,
        start_offset,
        delivery_complete_count,
        batches,
    })
}

fn put_uvarint(b: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("record too short".into());
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn i16(&mut self) -> Result<i16, String> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i8(&mut self) -> Result<i8, String> {
        Ok(self.take(1)?[0] as i8)
    }
    fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, String> {
        let b: [u8; 8] = self.take(8)?.try_into().map_err(|_| "short i64")?;
        Ok(i64::from_be_bytes(b))
    }
    fn uvarint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }
    /// Skips a tagged-field section (a state batch defines none).
    fn skip_tags(&mut self) -> Result<(), String> {
        let n = self.uvarint()?;
        for _ in 0..n {
            self.uvarint()?;
            let len = self.uvarint()? as usize;
            self.take(len)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_and_update_values_round_trip() {
        let batches = vec![StateBatch {
            first_offset: 5,
            last_offset: 9,
            delivery_state: 0,
            delivery_count: 2,
        }];
        let snapshot = StateValue {
            snapshot_epoch: 3,
            state_epoch: Some(1),
            leader_epoch: 7,
            start_offset: 5,
            delivery_complete_count: 3,
            batches: batches.clone(),
        };
        let bytes = encode_value(&snapshot);
        assert_eq!(decode_value(&bytes, true).unwrap(), snapshot);
        let update = StateValue {
            state_epoch: None,
            delivery_complete_count: DELIVERY_COMPLETE_COUNT_UNKNOWN,
            ..snapshot.clone()
        };
        assert_eq!(decode_value(&encode_value(&update), false).unwrap(), update);
        // Tag 0 is the delivery complete count, after the batches.
        assert_eq!(&bytes[bytes.len() - 7..], [1, 0, 4, 0, 0, 0, 3]);
        let id = Uuid::from_u128(42);
        let key = encode_key(UPDATE_KEY_VERSION, "g", id, 3);
        assert_eq!(
            decode_key(&key).unwrap(),
            Some((UPDATE_KEY_VERSION, "g".to_string(), id, 3))
        );
        assert!(decode_value(&bytes[..bytes.len() - 3], true).is_err());
        // A value without the tagged fields (an older writer's) has no count.
        let old = decode_value(&bytes[..bytes.len() - 7], true).unwrap();
        assert_eq!(old.delivery_complete_count, DELIVERY_COMPLETE_COUNT_UNKNOWN);
    }
}
