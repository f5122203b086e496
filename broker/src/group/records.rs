//! The records the group coordinator writes to `__consumer_offsets`, in Kafka's layout.
//!
//! Each record's key starts with an i16 version that says what the record is, as in Kafka's
//! `CoordinatorRecord` serde:
//! - version 0/1: an offset commit, key (group, topic, partition), value `OffsetCommitValue`;
//! - version 2: classic group metadata, key (group), value `GroupMetadataValue`;
//! - version 3: KIP-848 consumer group metadata, key (group), value `ConsumerGroupMetadataValue`;
//! - version 5: a KIP-848 member's subscription, key (group, member),
//!   `ConsumerGroupMemberMetadataValue`;
//! - version 6: the target assignment's epoch, key (group),
//!   `ConsumerGroupTargetAssignmentMetadataValue`;
//! - version 7: a member's target assignment, key (group, member),
//!   `ConsumerGroupTargetAssignmentMemberValue`;
//! - version 8: a member's current assignment, epochs and state, key (group, member),
//!   `ConsumerGroupCurrentMemberAssignmentValue`;
//! - versions 11 and 15: a KIP-932 share group's epoch and initialized share-partitions
//!   ([`super::share_records`]);
//! - versions 17 and 19 to 23: a KIP-1071 streams group's records ([`super::streams_records`]).
//!
//! The KIP-848 values are flexible versions (compact strings and arrays, tagged fields).
//!
//! A null value is a tombstone: the offset or the group is deleted. Brook writes offset
//! values at version 3 and group metadata values at version 3, the versions Kafka 4 writes
//! for those fields, so that `kafka-dump-log --offsets-decoder` can read Brook's segments.
//! Kafka versions Brook does not write are still read back where the layout is known.

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::consumer::TopicPartitions;

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
/// Key version of a KIP-848 member's metadata (subscription) record.
pub const CONSUMER_MEMBER_METADATA_KEY_VERSION: i16 = 5;
/// Key version of a KIP-848 group's target assignment epoch record.
pub const TARGET_ASSIGNMENT_METADATA_KEY_VERSION: i16 = 6;
/// Key version of a KIP-848 member's target assignment record.
pub const TARGET_ASSIGNMENT_MEMBER_KEY_VERSION: i16 = 7;
/// Key version of a KIP-848 member's current assignment record.
pub const CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION: i16 = 8;

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
    /// A KIP-848 member's subscription.
    ConsumerMemberMetadata { group: String, member: String },
    /// A KIP-848 group's target assignment epoch.
    TargetAssignmentMetadata { group: String },
    /// A KIP-848 member's target assignment.
    TargetAssignmentMember { group: String, member: String },
    /// A KIP-848 member's current assignment.
    CurrentMemberAssignment { group: String, member: String },
    /// A KIP-1071 streams group's record ([`super::streams_records`]).
    Streams(super::streams_records::StreamsKey),
    /// A KIP-932 share group's record ([`super::share_records`]).
    Share(super::share_records::ShareKey),
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

/// A KIP-848 member's subscription, as written in `ConsumerGroupMemberMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerMemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    /// Set for a member that speaks the classic protocol (JoinGroup/SyncGroup) in a KIP-848
    /// group: Kafka's tagged `ClassicMemberMetadata` (tag 0).
    pub classic: Option<ClassicMemberMetadata>,
}

/// A classic-protocol member of a KIP-848 group (Kafka's
/// `ConsumerGroupMemberMetadataValue.ClassicMemberMetadata`): its session timeout and the
/// (name, metadata) of the protocols its JoinGroup offered, in its order of preference.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
}

/// The tag of `ClassicMemberMetadata` in `ConsumerGroupMemberMetadataValue`.
const CLASSIC_MEMBER_METADATA_TAG: u64 = 0;

/// Bound on protocols read back from one member's classic metadata.
const MAX_CLASSIC_PROTOCOLS: usize = 1024;

/// The struct body of `ClassicMemberMetadata` (flexible: compact arrays and bytes).
fn classic_member_metadata_body(c: &ClassicMemberMetadata) -> BytesMut {
    let mut out = BytesMut::with_capacity(64);
    out.put_i32(c.session_timeout_ms);
    put_uvarint(&mut out, c.protocols.len() as u64 + 1);
    for (name, metadata) in &c.protocols {
        put_compact_str(&mut out, name);
        put_uvarint(&mut out, metadata.len() as u64 + 1);
        out.put_slice(metadata);
        out.put_u8(0);
    }
    out.put_u8(0);
    out
}

fn decode_classic_member_metadata(field: &[u8]) -> Result<ClassicMemberMetadata, RecordError> {
    let mut r = Reader::new(field);
    // A nullable struct in a tagged field starts with its presence marker.
    if r.uvarint()? == 0 {
        return Err(RecordError("null classic member metadata".into()));
    }
    let session_timeout_ms = r.i32()?;
    let n = r.compact_len()?.unwrap_or(0);
    if n > MAX_CLASSIC_PROTOCOLS {
        return Err(RecordError(format!("{n} classic protocols")));
    }
    let mut protocols = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.compact_str()?;
        let len = r.compact_len()?.unwrap_or(0);
        let metadata = Bytes::copy_from_slice(r.take(len)?);
        r.tagged_fields()?;
        protocols.push((name, metadata));
    }
    r.tagged_fields()?;
    Ok(ClassicMemberMetadata {
        session_timeout_ms,
        protocols,
    })
}

/// A KIP-848 member's current assignment, as written in
/// `ConsumerGroupCurrentMemberAssignmentValue`. `state` is Kafka's `MemberState` byte.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerMemberAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: i8,
    pub assigned: TopicPartitions,
    pub pending_revocation: TopicPartitions,
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

pub(crate) fn put_str(out: &mut BytesMut, s: &str) {
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

pub(crate) fn member_key(version: i16, group: &str, member: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(6 + group.len() + member.len());
    out.put_i16(version);
    put_str(&mut out, group);
    put_str(&mut out, member);
    out.freeze()
}

/// The key of a KIP-848 member's metadata record.
pub fn consumer_member_metadata_key(group: &str, member: &str) -> Bytes {
    member_key(CONSUMER_MEMBER_METADATA_KEY_VERSION, group, member)
}

/// The key of a KIP-848 group's target assignment epoch record.
pub fn target_assignment_metadata_key(group: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + group.len());
    out.put_i16(TARGET_ASSIGNMENT_METADATA_KEY_VERSION);
    put_str(&mut out, group);
    out.freeze()
}

/// The key of a KIP-848 member's target assignment record.
pub fn target_assignment_member_key(group: &str, member: &str) -> Bytes {
    member_key(TARGET_ASSIGNMENT_MEMBER_KEY_VERSION, group, member)
}

/// The key of a KIP-848 member's current assignment record.
pub fn current_member_assignment_key(group: &str, member: &str) -> Bytes {
    member_key(CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION, group, member)
}

// Flexible-version encoding: unsigned varints, lengths + 1 (0 = null), tagged fields.
pub(crate) fn put_uvarint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

pub(crate) fn put_compact_nullable_str(out: &mut BytesMut, s: Option<&str>) {
    match s {
        None => put_uvarint(out, 0),
        Some(s) => {
            put_uvarint(out, s.len() as u64 + 1);
            out.put_slice(s.as_bytes());
        }
    }
}

pub(crate) fn put_compact_str(out: &mut BytesMut, s: &str) {
    put_compact_nullable_str(out, Some(s));
}

pub(crate) fn put_topic_partitions(out: &mut BytesMut, tps: &TopicPartitions) {
    put_uvarint(out, tps.len() as u64 + 1);
    for (topic, partitions) in tps {
        out.put_slice(topic.as_bytes());
        put_uvarint(out, partitions.len() as u64 + 1);
        for p in partitions {
            out.put_i32(*p);
        }
        out.put_u8(0); // tagged fields
    }
}

/// Encodes `ConsumerGroupMemberMetadataValue` version 0.
pub fn consumer_member_metadata_value(m: &ConsumerMemberMetadata) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.put_i16(0);
    put_compact_nullable_str(&mut out, m.instance_id.as_deref());
    put_compact_nullable_str(&mut out, m.rack_id.as_deref());
    put_compact_str(&mut out, &m.client_id);
    put_compact_str(&mut out, &m.client_host);
    put_uvarint(&mut out, m.subscribed_topic_names.len() as u64 + 1);
    for t in &m.subscribed_topic_names {
        put_compact_str(&mut out, t);
    }
    put_compact_nullable_str(&mut out, m.subscribed_topic_regex.as_deref());
    out.put_i32(m.rebalance_timeout_ms);
    put_compact_nullable_str(&mut out, m.server_assignor.as_deref());
    match &m.classic {
        None => out.put_u8(0),
        Some(c) => {
            // One tagged field: the tag, its size, the nullable struct's presence marker (1)
            // and the struct, as Kafka's generated writer lays a tagged nullable struct out.
            let body = classic_member_metadata_body(c);
            put_uvarint(&mut out, 1);
            put_uvarint(&mut out, CLASSIC_MEMBER_METADATA_TAG);
            put_uvarint(&mut out, body.len() as u64 + 1);
            put_uvarint(&mut out, 1);
            out.put_slice(&body);
        }
    }
    out.freeze()
}

/// The tag of `AssignmentTimestamp` in the target assignment metadata values of consumer,
/// share and streams groups (Kafka 4.3, KIP-1263).
const ASSIGNMENT_TIMESTAMP_TAG: u64 = 0;

/// Encodes `ConsumerGroupTargetAssignmentMetadataValue` version 0 (the layout of share
/// groups' `ShareGroupTargetAssignmentMetadataValue` too): the epoch, and the tagged
/// `AssignmentTimestamp` when it is not its default 0, as Kafka's generated writer leaves
/// a tagged field at its default out.
pub fn target_assignment_metadata_value(assignment_epoch: i32, timestamp_ms: i64) -> Bytes {
    let mut out = BytesMut::with_capacity(18);
    out.put_i16(0);
    out.put_i32(assignment_epoch);
    if timestamp_ms == 0 {
        out.put_u8(0);
    } else {
        put_uvarint(&mut out, 1);
        put_uvarint(&mut out, ASSIGNMENT_TIMESTAMP_TAG);
        put_uvarint(&mut out, 8);
        out.put_i64(timestamp_ms);
    }
    out.freeze()
}

/// Encodes `ConsumerGroupTargetAssignmentMemberValue` version 0.
pub fn target_assignment_member_value(target: &TopicPartitions) -> Bytes {
    let mut out = BytesMut::with_capacity(32);
    out.put_i16(0);
    put_topic_partitions(&mut out, target);
    out.put_u8(0);
    out.freeze()
}

/// Encodes `ConsumerGroupCurrentMemberAssignmentValue` version 0.
pub fn current_member_assignment_value(a: &ConsumerMemberAssignment) -> Bytes {
    let mut out = BytesMut::with_capacity(48);
    out.put_i16(0);
    out.put_i32(a.member_epoch);
    out.put_i32(a.previous_member_epoch);
    out.put_i8(a.state);
    put_topic_partitions(&mut out, &a.assigned);
    put_topic_partitions(&mut out, &a.pending_revocation);
    out.put_u8(0);
    out.freeze()
}

/// A bounds-checked reader over a record key or value.
/// A bounded reader of Kafka's record encodings (shared with the transaction log records).
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
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
    pub(crate) fn i16(&mut self) -> Result<i16, RecordError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    pub(crate) fn i32(&mut self) -> Result<i32, RecordError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn i64(&mut self) -> Result<i64, RecordError> {
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
    pub(crate) fn str(&mut self) -> Result<String, RecordError> {
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
    pub(crate) fn i8(&mut self) -> Result<i8, RecordError> {
        Ok(self.take(1)?[0] as i8)
    }
    pub(crate) fn uvarint(&mut self) -> Result<u64, RecordError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(RecordError("varint longer than 10 bytes".into()))
    }
    /// A compact array or string length: `None` for null.
    pub(crate) fn compact_len(&mut self) -> Result<Option<usize>, RecordError> {
        match self.uvarint()? {
            0 => Ok(None),
            n => usize::try_from(n - 1)
                .ok()
                .filter(|&l| l <= self.buf.len() - self.pos)
                .map(Some)
                .ok_or_else(|| RecordError(format!("length {} past the end", n - 1))),
        }
    }
    pub(crate) fn compact_nullable_str(&mut self) -> Result<Option<String>, RecordError> {
        let Some(len) = self.compact_len()? else {
            return Ok(None);
        };
        String::from_utf8(self.take(len)?.to_vec())
            .map(Some)
            .map_err(|_| RecordError("string is not UTF-8".into()))
    }
    pub(crate) fn compact_str(&mut self) -> Result<String, RecordError> {
        self.compact_nullable_str()?
            .ok_or_else(|| RecordError("null where a string is required".into()))
    }
    /// Skips a tagged-field section.
    pub(crate) fn tagged_fields(&mut self) -> Result<(), RecordError> {
        let n = self.uvarint()?;
        for _ in 0..n {
            self.uvarint()?; // tag
            let size = self.uvarint()?;
            let size = usize::try_from(size).map_err(|_| RecordError("tag too large".into()))?;
            self.take(size)?;
        }
        Ok(())
    }
    pub(crate) fn topic_partitions(&mut self) -> Result<TopicPartitions, RecordError> {
        let n = self.compact_len()?.unwrap_or(0);
        let mut out = TopicPartitions::new();
        for _ in 0..n {
            let id =
                Uuid::from_slice(self.take(16)?).map_err(|_| RecordError("bad topic id".into()))?;
            let count = self.compact_len()?.unwrap_or(0);
            let set = out.entry(id).or_default();
            for _ in 0..count {
                set.insert(self.i32()?);
            }
            self.tagged_fields()?;
        }
        Ok(out)
    }
}

/// Decodes `ConsumerGroupMemberMetadataValue` version 0.
pub fn decode_consumer_member_metadata_value(
    value: &[u8],
) -> Result<ConsumerMemberMetadata, RecordError> {
    let mut r = Reader { buf: value, pos: 0 };
    let _version = r.i16()?;
    let instance_id = r.compact_nullable_str()?;
    let rack_id = r.compact_nullable_str()?;
    let client_id = r.compact_str()?;
    let client_host = r.compact_str()?;
    let n = r.compact_len()?.unwrap_or(0);
    let mut subscribed_topic_names = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        subscribed_topic_names.push(r.compact_str()?);
    }
    let subscribed_topic_regex = r.compact_nullable_str()?;
    let rebalance_timeout_ms = r.i32()?;
    let server_assignor = r.compact_nullable_str()?;
    let mut classic = None;
    for _ in 0..r.uvarint()? {
        let tag = r.uvarint()?;
        let size =
            usize::try_from(r.uvarint()?).map_err(|_| RecordError("tag too large".into()))?;
        let field = r.take(size)?;
        if tag == CLASSIC_MEMBER_METADATA_TAG {
            classic = Some(decode_classic_member_metadata(field)?);
        }
    }
    Ok(ConsumerMemberMetadata {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    })
}

/// Decodes a target assignment metadata value (consumer, share or streams group): the
/// assignment epoch and the tagged `AssignmentTimestamp` (0 when absent, as written before
/// Kafka 4.3).
pub fn decode_target_assignment_metadata_value(value: &[u8]) -> Result<(i32, i64), RecordError> {
    let mut r = Reader { buf: value, pos: 0 };
    let _version = r.i16()?;
    let epoch = r.i32()?;
    let mut timestamp_ms = 0;
    // Records without a tagged-field section (some older writers) end after the epoch.
    if r.pos == r.buf.len() {
        return Ok((epoch, timestamp_ms));
    }
    for _ in 0..r.uvarint()? {
        let tag = r.uvarint()?;
        let size =
            usize::try_from(r.uvarint()?).map_err(|_| RecordError("tag too large".into()))?;
        if tag == ASSIGNMENT_TIMESTAMP_TAG && size == 8 {
            timestamp_ms = r.i64()?;
        } else {
            r.take(size)?;
        }
    }
    Ok((epoch, timestamp_ms))
}

/// Decodes `ConsumerGroupTargetAssignmentMemberValue`.
pub fn decode_target_assignment_member_value(value: &[u8]) -> Result<TopicPartitions, RecordError> {
    let mut r = Reader { buf: value, pos: 0 };
    let _version = r.i16()?;
    let t = r.topic_partitions()?;
    r.tagged_fields()?;
    Ok(t)
}

/// Decodes `ConsumerGroupCurrentMemberAssignmentValue`.
pub fn decode_current_member_assignment_value(
    value: &[u8],
) -> Result<ConsumerMemberAssignment, RecordError> {
    let mut r = Reader { buf: value, pos: 0 };
    let _version = r.i16()?;
    let member_epoch = r.i32()?;
    let previous_member_epoch = r.i32()?;
    let state = r.i8()?;
    let assigned = r.topic_partitions()?;
    let pending_revocation = r.topic_partitions()?;
    r.tagged_fields()?;
    Ok(ConsumerMemberAssignment {
        member_epoch,
        previous_member_epoch,
        state,
        assigned,
        pending_revocation,
    })
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
        CONSUMER_MEMBER_METADATA_KEY_VERSION => RecordKey::ConsumerMemberMetadata {
            group: r.str()?,
            member: r.str()?,
        },
        TARGET_ASSIGNMENT_METADATA_KEY_VERSION => {
            RecordKey::TargetAssignmentMetadata { group: r.str()? }
        }
        TARGET_ASSIGNMENT_MEMBER_KEY_VERSION => RecordKey::TargetAssignmentMember {
            group: r.str()?,
            member: r.str()?,
        },
        CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION => RecordKey::CurrentMemberAssignment {
            group: r.str()?,
            member: r.str()?,
        },
        v if super::share_records::is_share_type(v) => {
            RecordKey::Share(super::share_records::decode_key(v, &mut r)?)
        }
        v if super::streams_records::is_streams_type(v) => {
            RecordKey::Streams(super::streams_records::decode_key(v, &mut r)?)
        }
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
    fn consumer_group_records_round_trip() {
        let meta = ConsumerMemberMetadata {
            instance_id: Some("i-1".into()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topic_names: vec!["a".into(), "b".into()],
            subscribed_topic_regex: Some("x.*".into()),
            rebalance_timeout_ms: 300_000,
            server_assignor: Some("uniform".into()),
            classic: None,
        };
        let v = consumer_member_metadata_value(&meta);
        assert_eq!(decode_consumer_member_metadata_value(&v).unwrap(), meta);
        // A classic member's metadata rides in tag 0 and comes back.
        let classic = ConsumerMemberMetadata {
            classic: Some(ClassicMemberMetadata {
                session_timeout_ms: 45_000,
                protocols: vec![("range".into(), Bytes::from_static(&[0, 1, 2]))],
            }),
            ..meta.clone()
        };
        let cv = consumer_member_metadata_value(&classic);
        assert_eq!(decode_consumer_member_metadata_value(&cv).unwrap(), classic);
        // A tagged field Brook does not know is skipped.
        let mut tagged = v[..v.len() - 1].to_vec();
        tagged.extend_from_slice(&[1, 5, 3, 9, 9, 9]);
        assert_eq!(
            decode_consumer_member_metadata_value(&tagged).unwrap(),
            meta
        );

        let t = Uuid::from_u128(7);
        let mut tps = TopicPartitions::new();
        tps.entry(t).or_default().extend([0, 3]);
        let a = ConsumerMemberAssignment {
            member_epoch: 5,
            previous_member_epoch: 4,
            state: 1,
            assigned: tps.clone(),
            pending_revocation: TopicPartitions::new(),
        };
        let v = current_member_assignment_value(&a);
        assert_eq!(decode_current_member_assignment_value(&v).unwrap(), a);
        let v = target_assignment_member_value(&tps);
        assert_eq!(decode_target_assignment_member_value(&v).unwrap(), tps);
        let v = target_assignment_metadata_value(9, 0);
        assert_eq!(decode_target_assignment_metadata_value(&v).unwrap(), (9, 0));
        // Kafka 4.4's bytes for epoch 9 stamped at 1_700_000_000_123 ms: tag 0, size 8.
        let v = target_assignment_metadata_value(9, 1_700_000_000_123);
        let mut kafka = vec![0, 0, 0, 0, 0, 9, 1, 0, 8];
        kafka.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        assert_eq!(&v[..], &kafka[..]);
        assert_eq!(
            decode_target_assignment_metadata_value(&v).unwrap(),
            (9, 1_700_000_000_123)
        );
        assert_eq!(
            decode_key(&current_member_assignment_key("g", "m")).unwrap(),
            RecordKey::CurrentMemberAssignment {
                group: "g".into(),
                member: "m".into()
            }
        );
        assert_eq!(
            decode_key(&target_assignment_metadata_key("g")).unwrap(),
            RecordKey::TargetAssignmentMetadata { group: "g".into() }
        );
        // Truncations are errors, never panics.
        let full = current_member_assignment_value(&a);
        for cut in 0..full.len() {
            let _ = decode_current_member_assignment_value(&full[..cut]);
        }
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
