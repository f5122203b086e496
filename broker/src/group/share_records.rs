//! The records a KIP-932 share group writes to `__consumer_offsets`, in Kafka 4.4's layout,
//! and their replay (Kafka's `GroupMetadataManager.replay` for the `ShareGroup*` keys).
//!
//! A key is its record type as an i16, then the group id (and for a member's records the
//! member id), non-flexible. Every value is version 0 and flexible:
//! - 10 `ShareGroupMemberMetadata`: a member's rack, client id, client host and subscribed
//!   topic names;
//! - 11 `ShareGroupMetadata`: the group epoch and the metadata hash;
//! - 12 `ShareGroupTargetAssignmentMetadata`: the epoch of the target assignment;
//! - 13 `ShareGroupTargetAssignmentMember`: a member's target partitions;
//! - 14 `ShareGroupCurrentMemberAssignment`: a member's epoch, previous epoch, state (always
//!   Stable: share groups revoke nothing) and assigned partitions;
//! - 15 `ShareGroupStatePartitionMetadata`: the share-partitions whose state is being
//!   initialized, those initialized, and the topics whose state is being deleted.
//!
//! The members' records let a restarted or moved coordinator answer a member's next
//! heartbeat at its epoch with its partitions (Kafka's `onLoaded` starts every loaded share
//! member's session). The last keeps it from initializing a share-partition again:
//! InitializeShareGroupState writes a fresh snapshot, which would drop the acknowledged and
//! released records the share coordinator holds. Partitions that were initializing are not
//! restored: the next heartbeat asks for them again (re-initializing a share-partition no
//! member was assigned yet loses nothing).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::time::{Duration, Instant};
use uuid::Uuid;

use super::records::{
    self, member_key, put_compact_nullable_str, put_compact_str, put_str, put_topic_partitions,
    put_uvarint, Reader, RecordError,
};
use super::share::{ShareGroup, ShareMember};
use super::{GroupEntry, GroupKind};

/// Record type (key version) of `ShareGroupMemberMetadata`.
pub const MEMBER_METADATA: i16 = 10;
/// Record type of `ShareGroupMetadata`.
pub const METADATA: i16 = 11;
/// Record type of `ShareGroupTargetAssignmentMetadata`.
pub const TARGET_ASSIGNMENT_METADATA: i16 = 12;
/// Record type of `ShareGroupTargetAssignmentMember`.
pub const TARGET_ASSIGNMENT_MEMBER: i16 = 13;
/// Record type of `ShareGroupCurrentMemberAssignment`.
pub const CURRENT_MEMBER_ASSIGNMENT: i16 = 14;
/// Record type of `ShareGroupStatePartitionMetadata`.
pub const STATE_PARTITION_METADATA: i16 = 15;
/// The only value version of every share record.
const VALUE_VERSION: i16 = 0;
/// Kafka's `MemberState.STABLE`, the only state a share member is in.
const MEMBER_STATE_STABLE: i8 = 0;
/// Bound on the elements of one array read back from a record (topics, partitions): a
/// corrupt length cannot make replay allocate without limit.
const ARRAY_ELEMENTS_MAX: usize = 100_000;

/// A decoded share record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareKey {
    pub record_type: i16,
    pub group: String,
    /// The member of a member's record (types 10, 13 and 14).
    pub member: Option<String>,
}

/// True for the record types this file reads.
pub fn is_share_type(record_type: i16) -> bool {
    (MEMBER_METADATA..=STATE_PARTITION_METADATA).contains(&record_type)
}

fn is_member_type(record_type: i16) -> bool {
    matches!(
        record_type,
        MEMBER_METADATA | TARGET_ASSIGNMENT_MEMBER | CURRENT_MEMBER_ASSIGNMENT
    )
}

/// Decodes the rest of a share record key (after its type).
pub(crate) fn decode_key(record_type: i16, r: &mut Reader<'_>) -> Result<ShareKey, RecordError> {
    let group = r.str()?;
    let member = if is_member_type(record_type) {
        Some(r.str()?)
    } else {
        None
    };
    Ok(ShareKey {
        record_type,
        group,
        member,
    })
}

/// The key of a share group's record of `record_type` (one of the group's own, not a
/// member's).
pub fn key(record_type: i16, group: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + group.len());
    out.put_i16(record_type);
    put_str(&mut out, group);
    out.freeze()
}

fn key_of(k: &ShareKey) -> Bytes {
    match &k.member {
        Some(m) => member_key(k.record_type, &k.group, m),
        None => key(k.record_type, &k.group),
    }
}

/// The group's own record keys, for its tombstones (its members' are among the persisted).
pub fn group_keys(group: &str) -> [Bytes; 3] {
    [
        key(METADATA, group),
        key(TARGET_ASSIGNMENT_METADATA, group),
        key(STATE_PARTITION_METADATA, group),
    ]
}

impl ShareGroup {
    /// The records that describe this group now (Kafka's `GroupCoordinatorRecordHelpers`:
    /// `newShareGroupEpochRecord`, `newShareGroupMemberSubscriptionRecord`,
    /// `newShareGroupTargetAssignmentRecord` and its epoch record,
    /// `newShareGroupCurrentAssignmentRecord` and `newShareGroupStatePartitionMetadataRecord`).
    /// `name_of` gives a topic's name by id; a deleted topic's name is written empty.
    pub fn records(&self, name_of: &dyn Fn(Uuid) -> Option<String>) -> Vec<(Bytes, Bytes)> {
        let g = &self.group_id;
        let mut epoch = BytesMut::with_capacity(15);
        epoch.put_i16(VALUE_VERSION);
        epoch.put_i32(self.group_epoch);
        // Kafka hashes the subscribed topics' metadata here to notice a change on load;
        // Brook takes the topics at the first heartbeat after a load as the ones seen.
        epoch.put_i64(0);
        epoch.put_u8(0);
        let mut state = BytesMut::new();
        state.put_i16(VALUE_VERSION);
        put_topic_infos(&mut state, &self.initializing, name_of);
        put_topic_infos(&mut state, &self.state_topics, name_of);
        put_uvarint(&mut state, 1); // deleting topics: Brook deletes state before answering
        state.put_u8(0);
        let mut out = vec![
            (key(METADATA, g), epoch.freeze()),
            (
                key(TARGET_ASSIGNMENT_METADATA, g),
                records::target_assignment_metadata_value(self.assignment_epoch, 0),
            ),
            (key(STATE_PARTITION_METADATA, g), state.freeze()),
        ];
        for (id, m) in &self.members {
            out.push((member_key(MEMBER_METADATA, g, id), member_value(m)));
            out.push((
                member_key(CURRENT_MEMBER_ASSIGNMENT, g, id),
                current_assignment_value(m),
            ));
        }
        for (id, target) in &self.target {
            out.push((
                member_key(TARGET_ASSIGNMENT_MEMBER, g, id),
                records::target_assignment_member_value(target),
            ));
        }
        out
    }
}

/// `ShareGroupMemberMetadataValue`: rack, client id, client host, subscribed topics.
fn member_value(m: &ShareMember) -> Bytes {
    let mut out = BytesMut::with_capacity(48);
    out.put_i16(VALUE_VERSION);
    put_compact_nullable_str(&mut out, m.rack_id.as_deref());
    put_compact_str(&mut out, &m.client_id);
    put_compact_str(&mut out, &m.client_host);
    put_uvarint(&mut out, m.subscribed_topics.len() as u64 + 1);
    for t in &m.subscribed_topics {
        put_compact_str(&mut out, t);
    }
    out.put_u8(0);
    out.freeze()
}

/// `ShareGroupCurrentMemberAssignmentValue`: epochs, state and assigned partitions.
fn current_assignment_value(m: &ShareMember) -> Bytes {
    let mut out = BytesMut::with_capacity(32);
    out.put_i16(VALUE_VERSION);
    out.put_i32(m.member_epoch);
    out.put_i32(m.previous_member_epoch);
    out.put_i8(MEMBER_STATE_STABLE);
    put_topic_partitions(&mut out, &m.assigned);
    out.put_u8(0);
    out.freeze()
}

/// `TopicPartitionsInfo` entries: topic id, topic name, partitions.
fn put_topic_infos(
    out: &mut BytesMut,
    topics: &BTreeMap<Uuid, BTreeSet<i32>>,
    name_of: &dyn Fn(Uuid) -> Option<String>,
) {
    put_uvarint(out, topics.len() as u64 + 1);
    for (id, partitions) in topics {
        out.put_slice(id.as_bytes());
        put_compact_str(out, &name_of(*id).unwrap_or_default());
        put_uvarint(out, partitions.len() as u64 + 1);
        for p in partitions {
            out.put_i32(*p);
        }
        out.put_u8(0);
    }
}

/// Decodes `ShareGroupMetadataValue`: the group epoch.
pub fn decode_metadata_value(value: &[u8]) -> Result<i32, RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    r.i32()
}

/// A decoded `ShareGroupMemberMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topics: Vec<String>,
}

/// Decodes `ShareGroupMemberMetadataValue`.
pub fn decode_member_value(value: &[u8]) -> Result<MemberMetadata, RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    let rack_id = r.compact_nullable_str()?;
    let client_id = r.compact_str()?;
    let client_host = r.compact_str()?;
    let mut subscribed_topics = Vec::new();
    for _ in 0..array_len(&mut r)? {
        subscribed_topics.push(r.compact_str()?);
    }
    r.tagged_fields()?;
    Ok(MemberMetadata {
        rack_id,
        client_id,
        client_host,
        subscribed_topics,
    })
}

/// Decodes `ShareGroupCurrentMemberAssignmentValue`: member epoch, previous member epoch
/// and assigned partitions (the state is always Stable).
pub fn decode_current_assignment_value(
    value: &[u8],
) -> Result<(i32, i32, super::consumer::TopicPartitions), RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    let epoch = r.i32()?;
    let previous = r.i32()?;
    let _state = r.i8()?;
    let assigned = r.topic_partitions()?;
    r.tagged_fields()?;
    Ok((epoch, previous, assigned))
}

/// Decodes `ShareGroupStatePartitionMetadataValue`: its initialized share-partitions.
pub fn decode_initialized(value: &[u8]) -> Result<BTreeMap<Uuid, BTreeSet<i32>>, RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    let _initializing = read_topic_infos(&mut r)?;
    let initialized = read_topic_infos(&mut r)?;
    for _ in 0..array_len(&mut r)? {
        r.take(16)?; // a deleting topic's id, name and tagged fields
        r.compact_str()?;
        r.tagged_fields()?;
    }
    r.tagged_fields()?;
    Ok(initialized)
}

fn read_topic_infos(r: &mut Reader<'_>) -> Result<BTreeMap<Uuid, BTreeSet<i32>>, RecordError> {
    let n = array_len(r)?;
    let mut out = BTreeMap::new();
    for _ in 0..n {
        let id = Uuid::from_slice(r.take(16)?).map_err(|e| RecordError(e.to_string()))?;
        let _name = r.compact_str()?;
        let partitions = out.entry(id).or_insert_with(BTreeSet::new);
        for _ in 0..array_len(r)? {
            partitions.insert(r.i32()?);
        }
        r.tagged_fields()?;
    }
    Ok(out)
}

fn array_len(r: &mut Reader<'_>) -> Result<usize, RecordError> {
    match r.compact_len()? {
        Some(n) if n <= ARRAY_ELEMENTS_MAX => Ok(n),
        Some(n) => Err(RecordError(format!("{n} array elements"))),
        None => Err(RecordError("null array".into())),
    }
}

/// Applies one replayed share record. The value read is also what the group is persisted
/// as, so that the first change after a load writes only differences. A member read back
/// gets a full `session` from now.
pub fn replay(
    groups: &mut HashMap<String, GroupEntry>,
    k: ShareKey,
    value: Option<&[u8]>,
    session: Duration,
) -> Result<(), RecordError> {
    let record_key = key_of(&k);
    let Some(v) = value else {
        replay_tombstone(groups, &k, &record_key);
        return Ok(());
    };
    let (entry, g) = share_for_replay(groups, &k.group);
    let member = k.member.as_deref().unwrap_or_default();
    match k.record_type {
        METADATA => g.group_epoch = decode_metadata_value(v)?,
        TARGET_ASSIGNMENT_METADATA => {
            g.assignment_epoch = records::decode_target_assignment_metadata_value(v)?.0;
        }
        STATE_PARTITION_METADATA => g.state_topics = decode_initialized(v)?,
        MEMBER_METADATA => {
            let meta = decode_member_value(v)?;
            let m = g.restored_member(member, Instant::now() + session);
            m.rack_id = meta.rack_id;
            m.client_id = meta.client_id;
            m.client_host = meta.client_host;
            m.subscribed_topics = meta.subscribed_topics;
            m.subscribed_topics.sort();
            m.subscribed_topics.dedup();
        }
        CURRENT_MEMBER_ASSIGNMENT => {
            let (epoch, previous, assigned) = decode_current_assignment_value(v)?;
            let m = g.restored_member(member, Instant::now() + session);
            m.member_epoch = epoch;
            m.previous_member_epoch = previous;
            m.assigned = assigned;
        }
        TARGET_ASSIGNMENT_MEMBER => {
            let target = records::decode_target_assignment_member_value(v)?;
            g.target.insert(member.to_string(), target);
        }
        other => return Err(RecordError(format!("share record type {other}"))),
    }
    entry.insert(record_key, Bytes::copy_from_slice(v));
    Ok(())
}

/// A share record's tombstone: the group's epoch record's removes the group (Kafka's
/// `removeGroup` on a `ShareGroupMetadata` tombstone); a member's subscription's removes the
/// member, its target's the target.
fn replay_tombstone(groups: &mut HashMap<String, GroupEntry>, k: &ShareKey, record_key: &Bytes) {
    if k.record_type == METADATA {
        super::loading::group_tombstone(groups, &k.group);
        return;
    }
    let Some(e) = groups.get_mut(&k.group) else {
        return;
    };
    e.persisted.remove(record_key);
    let GroupKind::Share(g) = &mut e.kind else {
        return;
    };
    let member = k.member.as_deref().unwrap_or_default();
    match k.record_type {
        STATE_PARTITION_METADATA => g.state_topics.clear(),
        MEMBER_METADATA => {
            g.members.remove(member);
        }
        TARGET_ASSIGNMENT_MEMBER => {
            g.target.remove(member);
        }
        _ => {}
    }
}

/// The share group a replayed record belongs to, created if new (keeping offsets of an
/// offsets-only holder), with its persisted records.
fn share_for_replay<'a>(
    groups: &'a mut HashMap<String, GroupEntry>,
    group: &str,
) -> (&'a mut HashMap<Bytes, Bytes>, &'a mut ShareGroup) {
    let e = super::loading::entry_for_replay(groups, group);
    if !matches!(e.kind, GroupKind::Share(_)) {
        e.kind = GroupKind::Share(ShareGroup::new(group.to_string()));
        e.persisted.clear();
    }
    match &mut e.kind {
        GroupKind::Share(g) => (&mut e.persisted, g),
        GroupKind::Classic(_) | GroupKind::Consumer(_) | GroupKind::Streams(_) => {
            unreachable!("converted just above")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::records::{decode_key, RecordKey};

    #[test]
    fn share_records_round_trip_through_replay() {
        let id = Uuid::from_u128(7);
        let mut g = ShareGroup::new("g".into());
        g.group_epoch = 4;
        g.state_topics.insert(id, BTreeSet::from([0, 2]));
        g.initializing
            .insert(Uuid::from_u128(8), BTreeSet::from([1]));
        g.assignment_epoch = 4;
        let m = g.restored_member("m1", Instant::now());
        m.rack_id = Some("r1".into());
        m.client_id = "c1".into();
        m.client_host = "/127.0.0.1".into();
        m.subscribed_topics = vec!["a".into(), "t".into()];
        m.member_epoch = 4;
        m.previous_member_epoch = 3;
        m.assigned.insert(id, BTreeSet::from([0]));
        g.target
            .insert("m1".into(), BTreeMap::from([(id, BTreeSet::from([0, 2]))]));
        let written = g.records(&|_| Some("t".into()));
        assert_eq!(written.len(), 6, "3 of the group's, 3 of its member's");
        let log: Vec<_> = written
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        let groups = replay_all(&log);
        let e = &groups["g"];
        let GroupKind::Share(back) = &e.kind else {
            panic!("not a share group");
        };
        assert_eq!((back.group_epoch, back.assignment_epoch), (4, 4));
        assert_eq!(back.state_topics, g.state_topics);
        assert!(
            back.initializing.is_empty(),
            "initializing is asked for again"
        );
        let (m, was) = (&back.members["m1"], &g.members["m1"]);
        assert_eq!(
            (
                &m.rack_id,
                &m.client_id,
                &m.client_host,
                &m.subscribed_topics
            ),
            (
                &was.rack_id,
                &was.client_id,
                &was.client_host,
                &was.subscribed_topics
            )
        );
        assert_eq!(
            (m.member_epoch, m.previous_member_epoch, &m.assigned),
            (4, 3, &was.assigned)
        );
        assert_eq!(back.target, g.target);
        assert_eq!(e.persisted, written.into_iter().collect());
    }

    fn replay_all(written: &[(Bytes, Option<Bytes>)]) -> HashMap<String, GroupEntry> {
        let mut groups = HashMap::new();
        for (k, v) in written {
            let RecordKey::Share(k) = decode_key(k).unwrap() else {
                panic!("not a share key");
            };
            replay(&mut groups, k, v.as_deref(), Duration::from_secs(45)).unwrap();
        }
        groups
    }

    #[test]
    fn a_members_tombstones_remove_it_and_the_groups_remove_the_group() {
        let mut g = ShareGroup::new("g".into());
        g.restored_member("m1", Instant::now()).member_epoch = 2;
        g.target.insert("m1".into(), BTreeMap::new());
        let mut log: Vec<(Bytes, Option<Bytes>)> = g
            .records(&|_| None)
            .into_iter()
            .map(|(k, v)| (k, Some(v)))
            .collect();
        for t in [
            MEMBER_METADATA,
            TARGET_ASSIGNMENT_MEMBER,
            CURRENT_MEMBER_ASSIGNMENT,
        ] {
            log.push((member_key(t, "g", "m1"), None));
        }
        let groups = replay_all(&log);
        let GroupKind::Share(back) = &groups["g"].kind else {
            panic!("not a share group");
        };
        assert!(
            back.members.is_empty() && back.target.is_empty(),
            "{back:?}"
        );
        assert_eq!(
            groups["g"].persisted.len(),
            3,
            "the group's own records stay"
        );
        log.push((key(METADATA, "g"), None));
        assert!(
            replay_all(&log).is_empty(),
            "the epoch tombstone removes the group"
        );
    }

    #[test]
    fn truncated_share_values_are_errors() {
        let mut g = ShareGroup::new("g".into());
        g.state_topics
            .insert(Uuid::from_u128(1), BTreeSet::from([0]));
        let state = g.records(&|_| None);
        let v = &state[2].1;
        for cut in 0..v.len() {
            assert!(decode_initialized(&v[..cut]).is_err(), "cut at {cut}");
        }
        let m = g.restored_member("m", Instant::now());
        m.subscribed_topics = vec!["t".into()];
        m.assigned.insert(Uuid::from_u128(1), BTreeSet::from([0]));
        let records = g.records(&|_| None);
        let member = &records[3].1;
        for cut in 0..member.len() {
            assert!(decode_member_value(&member[..cut]).is_err(), "cut at {cut}");
        }
        let current = &records[4].1;
        for cut in 0..current.len() {
            assert!(
                decode_current_assignment_value(&current[..cut]).is_err(),
                "cut at {cut}"
            );
        }
    }
}
