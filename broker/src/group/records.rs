//! The records the group coordinator writes to `__consumer_offsets`, in Kafka's layout.
//!
//! Each record's key starts with an i16 version that says what the record is, as in Kafka's
//! `CoordinatorRecord` serde:
//! - version 0/1: an offset commit, key (group, topic, partition), value `OffsetCommitValue`;
//! - version 2: classic group metadata, key (group), value `GroupMetadataValue`;
//! - version 3: KIP-848 consumer group metadata, key (group), value `ConsumerGroupMetadataValue`.
//!
//! A null value is a tombstone: the offset or the group is deleted. Brook writes offset
//! values at version 3 and group metadata values at version 3, the versions Kafka 4 writes
//! for those fields, so that `kafka-dump-log --offsets-decoder` can read Brook's segments.
//! Kafka versions Brook does not write are still read back where the layout is known.

use bytes::{BufMut, Bytes, BytesMut};

/// Key version of an offset commit record (Kafka writes 1; 0 is the same layout).
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// Key version of a classic group metadata record.
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;
/// Key version of a KIP-848 consumer group metadata record.
pub const CONSUMER_GROUP_METADATA_KEY_VERSION: i16 = 3;
/// Value version Brook writes for offset commits (offset, leader epoch, metadata, timestamp).
pub const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
/// Value version Brook writes for classic group metadata.
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// A decoded record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    /// A committed offset.
    OffsetCommit {
        group: String,
        topic: String,
        partition: i32,
    },
    /// A classic group's metadata.
    GroupMetadata { group: String },
    /// A KIP-848 consumer group's metadata.
    ConsumerGroupMetadata { group: String },
    /// A record type Brook does not replay (Kafka's other coordinator records).
    Other(i16),
}

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    /// -1 when the client did not send one.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// One member of a classic group, as written in `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A classic group's metadata as written in `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp_ms: i64,
    pub members: Vec<MemberRecord>,
}

/// Why a stored record could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed __consumer_offsets record: {0}")]
pub struct RecordError(pub String);

fn put_str(out: &mut BytesMut, s: &str) {
    // Group ids, topics and metadata are bounded well below i16::MAX by the coordinator.
    out.put_i16(s.len().min(i16::MAX as usize) as i16);
    out.put_slice(&s.as_bytes()[..s.len().min(i16::MAX as usize)]);
}

fn put_nullable_str(out: &mut BytesMut, s: Option<&str>) {
    match s {
        None => out.put_i16(-1),
        Some(s) => put_str(out, s),
    }
}

fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

/// Encodes the key of an offset commit record.
pub fn offset_commit_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut out = BytesMut::with_capacity(2 + 2 + group.len() + 2 + topic.len() + 4);
    out.put_i16(OFFSET_COMMIT_KEY_VERSION);
    put_str(&mut out, group);
    put_str(&mut out, topic);
    out.put_i32(partition);
    out.freeze()
}

/// Encodes an offset commit value (version 3).
pub fn offset_commit_value(v: &OffsetValue) -> Bytes {
    let mut out = BytesMut::with_capacity(2 + 8 + 4 + 2 + v.metadata.len() + 8);
    out.put_i16(OFFSET_COMMIT_VALUE_VERSION);
    out.put_i64(v.offset);
    out.put_i32(v.leader_epoch);
    put_str(&mut out, &v.metadata);
    out.put_i64(v.commit_timestamp_ms);
    out.freeze()
}

/// Encodes the key of a classic group metadata record.
pub fn group_metadata_key(group: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + group.len());
    out.put_i16(GROUP_METADATA_KEY_VERSION);
    put_str(&mut out, group);
    out.freeze()
}

/// Encodes a classic group metadata value (version 3).
pub fn group_metadata_value(v: &GroupMetadataValue) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(GROUP_METADATA_VALUE_VERSION);
    put_str(&mut out, &v.protocol_type);
    out.put_i32(v.generation);
    put_nullable_str(&mut out, v.protocol.as_deref());
    put_nullable_str(&mut out, v.leader.as_deref());
    out.put_i64(v.current_state_timestamp_ms);
    out.put_i32(v.members.len() as i32);
    for m in &v.members {
        put_str(&mut out, &m.member_id);
        put_nullable_str(&mut out, m.group_instance_id.as_deref());
        put_str(&mut out, &m.client_id);
        put_str(&mut out, &m.client_host);
        out.put_i32(m.rebalance_timeout_ms);
        out.put_i32(m.session_timeout_ms);
        put_bytes(&mut out, &m.subscription);
        put_bytes(&mut out, &m.assignment);
    }
    out.freeze()
}

/// Encodes the key of a KIP-848 consumer group metadata record.
pub fn consumer_group_metadata_key(group: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + group.len());
    out.put_i16(CONSUMER_GROUP_METADATA_KEY_VERSION);
    put_str(&mut out, group);
    out.freeze()
}

/// Encodes `ConsumerGroupMetadataValue` version 0 (flexible: the group epoch, then an empty
/// tagged-field section).
pub fn consumer_group_metadata_value(epoch: i32) -> Bytes {
    let mut out = BytesMut::with_capacity(7);
    out.put_i16(0);
    out.put_i32(epoch);
    out.put_u8(0);
    out.freeze()
}

/// A bounds-checked reader over a record key or value.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.buf.len() - self.pos < n {
            return Err(RecordError(format!(
                "needs {n} bytes at {}, has {}",
                self.pos,
                self.buf.len() - self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn i16(&mut self) -> Result<i16, RecordError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Result<i32, RecordError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, RecordError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn nullable_str(&mut self) -> Result<Option<String>, RecordError> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let b = self.take(len as usize)?;
        String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| RecordError("string is not UTF-8".into()))
    }
    fn str(&mut self) -> Result<String, RecordError> {
        self.nullable_str()?
            .ok_or_else(|| RecordError("null where a string is required".into()))
    }
    fn bytes(&mut self) -> Result<Bytes, RecordError> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(Bytes::new());
        }
        Ok(Bytes::copy_from_slice(self.take(len as usize)?))
    }
}

/// Decodes a record key.
pub fn decode_key(key: &[u8]) -> Result<RecordKey, RecordError> {
    let mut r = Reader { buf: key, pos: 0 };
    let version = r.i16()?;
    Ok(match version {
        0 | 1 => RecordKey::OffsetCommit {
            group: r.str()?,
            topic: r.str()?,
            partition: r.i32()?,
        },
        GROUP_METADATA_KEY_VERSION => RecordKey::GroupMetadata { group: r.str()? },
        CONSUMER_GROUP_METADATA_KEY_VERSION => RecordKey::ConsumerGroupMetadata { group: r.str()? },
        other => RecordKey::Other(other),
    })
}

/// Decodes an offset commit value of version 0 to 3 (version 4 and later are flexible and
/// not written by Brook).
pub fn decode_offset_value(value: &[u8]) -> Result<OffsetValue, RecordError> {
    let mut r = Reader { buf: value, pos: 0 };
    let version = r.i16()?;
    if !(0..=3).contains(&version) {
        return Err(RecordError(format!("offset value version {version}")));
    }
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.str()?;
    let commit_timestamp_ms = r.i64()?;
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

/// Decodes a classic group metadata value of version 0 to 3.
pub fn decode_group_metadata_value(value: &[u8]) -> Result<GroupMetadataValue, RecordError> {
    let mut r = Reader { buf: value, pos: 0 };
    let version = r.i16()?;
    if !(0..=3).contains(&version) {
        return Err(RecordError(format!("group metadata version {version}")));
    }
    let protocol_type = r.str()?;
    let generation = r.i32()?;
    let protocol = r.nullable_str()?;
    let leader = r.nullable_str()?;
    let current_state_timestamp_ms = if version >= 2 { r.i64()? } else { -1 };
    let count = r.i32()?;
    let mut members = Vec::new();
    for _ in 0..count.max(0) {
        let member_id = r.str()?;
        let group_instance_id = if version >= 3 {
            r.nullable_str()?
        } else {
            None
        };
        let client_id = r.str()?;
        let client_host = r.str()?;
        let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { -1 };
        let session_timeout_ms = r.i32()?;
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        members.push(MemberRecord {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Ok(GroupMetadataValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

/// Decodes `ConsumerGroupMetadataValue`: the group epoch.
pub fn decode_consumer_group_metadata_value(value: &[u8]) -> Result<i32, RecordError> {
    let mut r = Reader { buf: value, pos: 0 };
    let _version = r.i16()?;
    r.i32()
}

/// Java's `String.hashCode`: sum of UTF-16 code units times powers of 31, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// The `__consumer_offsets` partition of a group: Kafka's `Utils.abs(groupId.hashCode()) %
/// partitions`, where `Utils.abs(Integer.MIN_VALUE)` is 0.
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let h = java_string_hash(group);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_known_values() {
        // Values from java.lang.String#hashCode.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99162322);
        // "polygenelubricants" hashes to Integer.MIN_VALUE, which Utils.abs maps to 0.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // Non-ASCII: hashing is over UTF-16 code units.
        assert_eq!(java_string_hash("é"), 0xe9);
    }

    #[test]
    fn partition_for_is_in_range() {
        for g in ["a", "group-1", "consumer-x", "Ωmega", "polygenelubricants"] {
            let p = partition_for(g, 50);
            assert!((0..50).contains(&p), "{g} -> {p}");
        }
        // Kafka: abs("hello".hashCode()) % 50 = 99162322 % 50 = 22.
        assert_eq!(partition_for("hello", 50), 22);
    }

    #[test]
    fn offset_record_round_trip() {
        let k = offset_commit_key("g", "t", 7);
        assert_eq!(
            decode_key(&k).unwrap(),
            RecordKey::OffsetCommit {
                group: "g".into(),
                topic: "t".into(),
                partition: 7
            }
        );
        // Kafka's layout: version, then length-prefixed strings, then the partition.
        assert_eq!(&k[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7]);
        let v = OffsetValue {
            offset: 42,
            leader_epoch: 3,
            metadata: "meta".into(),
            commit_timestamp_ms: 1000,
        };
        assert_eq!(decode_offset_value(&offset_commit_value(&v)).unwrap(), v);
    }

    #[test]
    fn group_record_round_trip() {
        let k = group_metadata_key("grp");
        assert_eq!(
            decode_key(&k).unwrap(),
            RecordKey::GroupMetadata {
                group: "grp".into()
            }
        );
        let v = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp_ms: 77,
            members: vec![MemberRecord {
                member_id: "m1".into(),
                group_instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300000,
                session_timeout_ms: 45000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(
            decode_group_metadata_value(&group_metadata_value(&v)).unwrap(),
            v
        );
        let k = consumer_group_metadata_key("c");
        assert_eq!(
            decode_key(&k).unwrap(),
            RecordKey::ConsumerGroupMetadata { group: "c".into() }
        );
        assert_eq!(
            decode_consumer_group_metadata_value(&consumer_group_metadata_value(9)).unwrap(),
            9
        );
    }

    #[test]
    fn truncated_records_are_errors_not_panics() {
        let k = offset_commit_key("group", "topic", 1);
        for n in 0..k.len() {
            assert!(decode_key(&k[..n]).is_err(), "prefix {n}");
        }
        let v = offset_commit_value(&OffsetValue {
            offset: 1,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 0,
        });
        for n in 0..v.len() {
            assert!(decode_offset_value(&v[..n]).is_err(), "prefix {n}");
        }
    }
}
