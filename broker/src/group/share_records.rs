//! The records a KIP-932 share group writes to `__consumer_offsets`, in Kafka 4.4's layout,
//! and their replay (Kafka's `GroupMetadataManager.replay` for `ShareGroupMetadataKey` and
//! `ShareGroupStatePartitionMetadataKey`).
//!
//! A key is its record type as an i16, then the group id, non-flexible. Both values are
//! version 0 and flexible:
//! - 11 `ShareGroupMetadata`: the group epoch and the metadata hash;
//! - 15 `ShareGroupStatePartitionMetadata`: the share-partitions whose state is being
//!   initialized, those initialized, and the topics whose state is being deleted.
//!
//! The second is what keeps a restarted or moved coordinator from initializing a
//! share-partition again: InitializeShareGroupState writes a fresh snapshot, which would
//! drop the acknowledged and released records the share coordinator holds.
//!
//! Brook does not write the member and assignment records (types 10, 12, 13 and 14): a
//! share group's members rejoin at epoch 0 after a coordinator restart or move. Partitions
//! that were initializing are not restored either: the next heartbeat asks for them again
//! (re-initializing a share-partition no member was assigned yet loses nothing).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::records::{put_compact_str, put_str, put_uvarint, Reader, RecordError};
use super::share::ShareGroup;
use super::{GroupEntry, GroupKind};

/// Record type (key version) of `ShareGroupMetadata`.
pub const METADATA: i16 = 11;
/// Record type of `ShareGroupStatePartitionMetadata`.
pub const STATE_PARTITION_METADATA: i16 = 15;
/// The only value version of both records.
const VALUE_VERSION: i16 = 0;
/// Bound on the elements of one array read back from a record (topics, partitions): a
/// corrupt length cannot make replay allocate without limit.
const ARRAY_ELEMENTS_MAX: usize = 100_000;

/// A decoded share record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareKey {
    pub record_type: i16,
    pub group: String,
}

/// True for the record types this file reads.
pub fn is_share_type(record_type: i16) -> bool {
    matches!(record_type, METADATA | STATE_PARTITION_METADATA)
}

/// Decodes the rest of a share record key (after its type).
pub(crate) fn decode_key(record_type: i16, r: &mut Reader<'_>) -> Result<ShareKey, RecordError> {
    Ok(ShareKey {
        record_type,
        group: r.str()?,
    })
}

/// The key of a share group's record of `record_type`.
pub fn key(record_type: i16, group: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + group.len());
    out.put_i16(record_type);
    put_str(&mut out, group);
    out.freeze()
}

/// Both record keys of a group, for its tombstones.
pub fn group_keys(group: &str) -> [Bytes; 2] {
    [key(METADATA, group), key(STATE_PARTITION_METADATA, group)]
}

impl ShareGroup {
    /// The records that describe this group now (Kafka's
    /// `GroupCoordinatorRecordHelpers.newShareGroupEpochRecord` and
    /// `newShareGroupStatePartitionMetadataRecord`). `name_of` gives a topic's name by id;
    /// a deleted topic's name is written empty.
    pub fn records(&self, name_of: &dyn Fn(Uuid) -> Option<String>) -> Vec<(Bytes, Bytes)> {
        let mut epoch = BytesMut::with_capacity(15);
        epoch.put_i16(VALUE_VERSION);
        epoch.put_i32(self.group_epoch);
        // Kafka hashes the subscribed topics' metadata here to notice a change on load;
        // Brook recomputes the assignment at the first heartbeat instead.
        epoch.put_i64(0);
        epoch.put_u8(0);
        let mut state = BytesMut::new();
        state.put_i16(VALUE_VERSION);
        put_topic_partitions(&mut state, &self.initializing, name_of);
        put_topic_partitions(&mut state, &self.state_topics, name_of);
        put_uvarint(&mut state, 1); // deleting topics: Brook deletes state before answering
        state.put_u8(0);
        vec![
            (key(METADATA, &self.group_id), epoch.freeze()),
            (
                key(STATE_PARTITION_METADATA, &self.group_id),
                state.freeze(),
            ),
        ]
    }
}

/// `TopicPartitionsInfo` entries: topic id, topic name, partitions.
fn put_topic_partitions(
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

/// Decodes `ShareGroupStatePartitionMetadataValue`: its initialized share-partitions.
pub fn decode_initialized(value: &[u8]) -> Result<BTreeMap<Uuid, BTreeSet<i32>>, RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    let _initializing = read_topic_partitions(&mut r)?;
    let initialized = read_topic_partitions(&mut r)?;
    for _ in 0..array_len(&mut r)? {
        r.take(16)?; // a deleting topic's id, name and tagged fields
        r.compact_str()?;
        r.tagged_fields()?;
    }
    r.tagged_fields()?;
    Ok(initialized)
}

fn read_topic_partitions(r: &mut Reader<'_>) -> Result<BTreeMap<Uuid, BTreeSet<i32>>, RecordError> {
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
/// as, so that the first change after a load writes only differences.
pub fn replay(
    groups: &mut HashMap<String, GroupEntry>,
    k: ShareKey,
    value: Option<&[u8]>,
) -> Result<(), RecordError> {
    let record_key = key(k.record_type, &k.group);
    let Some(v) = value else {
        if k.record_type == METADATA {
            super::loading::group_tombstone(groups, &k.group);
        } else if let Some(e) = groups.get_mut(&k.group) {
            e.persisted.remove(&record_key);
            if let GroupKind::Share(g) = &mut e.kind {
                g.state_topics.clear();
            }
        }
        return Ok(());
    };
    let (entry, g) = share_for_replay(groups, &k.group);
    if k.record_type == METADATA {
        g.group_epoch = decode_metadata_value(v)?;
    } else {
        g.state_topics = decode_initialized(v)?;
    }
    entry.insert(record_key, Bytes::copy_from_slice(v));
    Ok(())
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
        let written = g.records(&|_| Some("t".into()));
        let mut groups = HashMap::new();
        for (k, v) in &written {
            let RecordKey::Share(k) = decode_key(k).unwrap() else {
                panic!("not a share key");
            };
            replay(&mut groups, k, Some(v)).unwrap();
        }
        let e = &groups["g"];
        let GroupKind::Share(back) = &e.kind else {
            panic!("not a share group");
        };
        assert_eq!(back.group_epoch, 4);
        assert_eq!(back.state_topics, g.state_topics);
        assert!(
            back.initializing.is_empty(),
            "initializing is asked for again"
        );
        assert_eq!(e.persisted, written.into_iter().collect());
    }

    #[test]
    fn truncated_share_values_are_errors() {
        let mut g = ShareGroup::new("g".into());
        g.state_topics
            .insert(Uuid::from_u128(1), BTreeSet::from([0]));
        let (_, v) = g.records(&|_| None).pop().unwrap();
        for cut in 0..v.len() {
            assert!(decode_initialized(&v[..cut]).is_err(), "cut at {cut}");
        }
    }
}
