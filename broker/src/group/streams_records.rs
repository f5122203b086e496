//! The records a KIP-1071 streams group writes to `__consumer_offsets`, in Kafka 4.4's
//! layout (the `StreamsGroup*Key`/`*Value` coordinator records, built as Kafka's
//! `StreamsCoordinatorRecordHelpers` builds them), and their replay (Kafka's
//! `GroupMetadataManager.replay` for streams records).
//!
//! A key starts with its record type as an i16, then the group id (and member id), all
//! non-flexible. Every value is version 0 and flexible (compact strings and arrays, tagged
//! fields):
//! - 17 `StreamsGroupMetadata` (group): group epoch, metadata hash, and tagged the validated
//!   topology epoch (tag 0) and the last assignment configs (tag 1);
//! - 19 `StreamsGroupMemberMetadata` (group, member): the member's identity and topology epoch;
//! - 20 `StreamsGroupTargetAssignmentMetadata` (group): the target assignment's epoch;
//! - 21 `StreamsGroupTargetAssignmentMember` (group, member): the member's target tasks;
//! - 22 `StreamsGroupCurrentMemberAssignment` (group, member): its epochs, state and tasks;
//! - 23 `StreamsGroupTopology` (group): the topology the members sent.
//!
//! Record type 18 (`StreamsGroupPartitionMetadata`) existed before Kafka 4.4 replaced it with
//! the metadata hash; it is neither written nor read.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::time::Instant;

use super::records::{put_compact_str, put_str, put_uvarint, Reader, RecordError};
use super::store::Record;
use super::streams::{MemberState, StreamsGroup, StreamsMember, Tasks, TasksTuple};
use super::streams_topology::{Subtopology, TopicInfo, Topology};
use super::{GroupEntry, GroupKind};

/// Record type (key version) of `StreamsGroupMetadata`.
pub const METADATA: i16 = 17;
/// Record type of `StreamsGroupMemberMetadata`.
pub const MEMBER_METADATA: i16 = 19;
/// Record type of `StreamsGroupTargetAssignmentMetadata`.
pub const TARGET_ASSIGNMENT_METADATA: i16 = 20;
/// Record type of `StreamsGroupTargetAssignmentMember`.
pub const TARGET_ASSIGNMENT_MEMBER: i16 = 21;
/// Record type of `StreamsGroupCurrentMemberAssignment`.
pub const CURRENT_MEMBER_ASSIGNMENT: i16 = 22;
/// Record type of `StreamsGroupTopology`.
pub const TOPOLOGY: i16 = 23;

/// The only value version of every streams record.
const VALUE_VERSION: i16 = 0;
/// `StreamsGroupMetadataValue`'s tag of `ValidatedTopologyEpoch` (default -1).
const VALIDATED_TOPOLOGY_EPOCH_TAG: u64 = 0;
/// `StreamsGroupMetadataValue`'s tag of `LastAssignmentConfigs` (default null).
const LAST_ASSIGNMENT_CONFIGS_TAG: u64 = 1;
/// The assignment config Kafka's streams heartbeat records (`LastAssignmentConfigs`).
const NUM_STANDBY_REPLICAS: &str = "num.standby.replicas";
/// Bound on the elements of one array read back from a record (subtopologies, tasks,
/// topics, configs): a corrupt length cannot make replay allocate without limit.
const ARRAY_ELEMENTS_MAX: usize = 100_000;

/// A decoded streams record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsKey {
    pub record_type: i16,
    pub group: String,
    /// Set for the member records (19, 21, 22).
    pub member: Option<String>,
}

/// Whether a key version is a streams record this module reads.
pub fn is_streams_type(version: i16) -> bool {
    matches!(version, METADATA | TOPOLOGY)
        || (MEMBER_METADATA..=CURRENT_MEMBER_ASSIGNMENT).contains(&version)
}

/// Decodes the rest of a streams key whose type `record_type` was read already.
pub(super) fn decode_key(record_type: i16, r: &mut Reader) -> Result<StreamsKey, RecordError> {
    let group = r.str()?;
    let member = match record_type {
        MEMBER_METADATA | TARGET_ASSIGNMENT_MEMBER | CURRENT_MEMBER_ASSIGNMENT => Some(r.str()?),
        _ => None,
    };
    Ok(StreamsKey {
        record_type,
        group,
        member,
    })
}

fn key(record_type: i16, group: &str, member: Option<&str>) -> Bytes {
    let mut out = BytesMut::with_capacity(6 + group.len() + member.map_or(0, str::len));
    out.put_i16(record_type);
    put_str(&mut out, group);
    if let Some(m) = member {
        put_str(&mut out, m);
    }
    out.freeze()
}

fn value_start() -> BytesMut {
    let mut out = BytesMut::with_capacity(64);
    out.put_i16(VALUE_VERSION);
    out
}

fn put_compact_nullable_str(out: &mut BytesMut, s: Option<&str>) {
    match s {
        None => put_uvarint(out, 0),
        Some(s) => put_compact_str(out, s),
    }
}

fn put_len(out: &mut BytesMut, n: usize) {
    put_uvarint(out, n as u64 + 1);
}

fn put_strings(out: &mut BytesMut, items: &[String]) {
    put_len(out, items.len());
    for s in items {
        put_compact_str(out, s);
    }
}

/// (key, value) pairs as a compact array of structs with tagged fields.
fn put_key_values(out: &mut BytesMut, kvs: &BTreeMap<String, String>) {
    put_len(out, kvs.len());
    for (k, v) in kvs {
        put_compact_str(out, k);
        put_compact_str(out, v);
        out.put_u8(0);
    }
}

/// `[]TaskIds` sorted by subtopology, partitions sorted (as Kafka's helpers sort them).
/// Brook does not write the tagged `AssignmentEpochs` of a current assignment; it is
/// optional (null) in the schema.
fn put_tasks(out: &mut BytesMut, tasks: &Tasks) {
    let nonempty: Vec<_> = tasks.iter().filter(|(_, ps)| !ps.is_empty()).collect();
    put_len(out, nonempty.len());
    for (subtopology, partitions) in nonempty {
        put_compact_str(out, subtopology);
        put_len(out, partitions.len());
        for p in partitions {
            out.put_i32(*p);
        }
        out.put_u8(0);
    }
}

fn put_tuple(out: &mut BytesMut, t: &TasksTuple) {
    put_tasks(out, &t.active);
    put_tasks(out, &t.standby);
    put_tasks(out, &t.warmup);
}

/// `StreamsGroupMetadataValue`: the tagged fields are written only when they differ from
/// their defaults, in tag order, as Kafka's generated writer does.
pub fn metadata_value(
    epoch: i32,
    metadata_hash: i64,
    validated_topology_epoch: i32,
    num_standby_replicas: i32,
) -> Bytes {
    let mut out = value_start();
    out.put_i32(epoch);
    out.put_i64(metadata_hash);
    let mut configs = BTreeMap::new();
    configs.insert(
        NUM_STANDBY_REPLICAS.to_string(),
        num_standby_replicas.to_string(),
    );
    let mut body = BytesMut::new();
    put_key_values(&mut body, &configs);
    let validated = validated_topology_epoch != -1;
    put_uvarint(&mut out, 1 + validated as u64);
    if validated {
        put_uvarint(&mut out, VALIDATED_TOPOLOGY_EPOCH_TAG);
        put_uvarint(&mut out, 4);
        out.put_i32(validated_topology_epoch);
    }
    put_uvarint(&mut out, LAST_ASSIGNMENT_CONFIGS_TAG);
    put_uvarint(&mut out, body.len() as u64);
    out.put_slice(&body);
    out.freeze()
}

/// `StreamsGroupMemberMetadataValue` of a member.
pub fn member_metadata_value(m: &StreamsMember) -> Bytes {
    let mut out = value_start();
    put_compact_nullable_str(&mut out, m.instance_id.as_deref());
    put_compact_nullable_str(&mut out, m.rack_id.as_deref());
    put_compact_str(&mut out, &m.client_id);
    put_compact_str(&mut out, &m.client_host);
    out.put_i32(m.rebalance_timeout_ms);
    out.put_i32(m.topology_epoch);
    put_compact_str(&mut out, &m.process_id);
    match &m.user_endpoint {
        // A nullable struct: -1 for null, 1 then the struct.
        None => out.put_i8(-1),
        Some((host, port)) => {
            out.put_i8(1);
            put_compact_str(&mut out, host);
            out.put_u16(*port);
            out.put_u8(0);
        }
    }
    put_key_values(&mut out, &m.client_tags);
    out.put_u8(0);
    out.freeze()
}

/// `StreamsGroupTargetAssignmentMetadataValue`. The tagged `AssignmentTimestamp` (Kafka
/// 4.3, KIP-1263) keeps its default 0: Brook does not record when it computed a target.
pub fn target_assignment_metadata_value(assignment_epoch: i32) -> Bytes {
    let mut out = value_start();
    out.put_i32(assignment_epoch);
    out.put_u8(0);
    out.freeze()
}

/// `StreamsGroupTargetAssignmentMemberValue`.
pub fn target_assignment_member_value(target: &TasksTuple) -> Bytes {
    let mut out = value_start();
    put_tuple(&mut out, target);
    out.put_u8(0);
    out.freeze()
}

/// Kafka's `streams.MemberState` byte values.
fn state_byte(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 1,
        MemberState::UnrevokedTasks => 2,
        MemberState::UnreleasedTasks => 3,
    }
}

fn state_from_byte(b: i8) -> MemberState {
    match b {
        2 => MemberState::UnrevokedTasks,
        3 => MemberState::UnreleasedTasks,
        // 1, and Kafka's UNKNOWN (127), which a heartbeat reconciles again.
        _ => MemberState::Stable,
    }
}

/// `StreamsGroupCurrentMemberAssignmentValue` of a member.
pub fn current_member_assignment_value(m: &StreamsMember) -> Bytes {
    let mut out = value_start();
    out.put_i32(m.member_epoch);
    out.put_i32(m.previous_member_epoch);
    out.put_i8(state_byte(m.state));
    put_tuple(&mut out, &m.assigned);
    put_tuple(&mut out, &m.pending_revocation);
    out.put_u8(0);
    out.freeze()
}

fn put_topic_infos(out: &mut BytesMut, topics: &[TopicInfo]) {
    put_len(out, topics.len());
    for t in topics {
        put_compact_str(out, &t.name);
        out.put_i32(t.partitions);
        out.put_i16(t.replication_factor);
        put_key_values(out, &t.configs);
        out.put_u8(0);
    }
}

fn put_i16s(out: &mut BytesMut, items: &[i16]) {
    put_len(out, items.len());
    for i in items {
        out.put_i16(*i);
    }
}

/// `StreamsGroupTopologyValue` (Kafka's `convertToStreamsGroupTopologyRecord`). Brook refuses
/// source topic regular expressions, so those arrays are empty.
pub fn topology_value(t: &Topology) -> Bytes {
    let mut out = value_start();
    out.put_i32(t.epoch);
    put_len(&mut out, t.subtopologies.len());
    for s in &t.subtopologies {
        put_compact_str(&mut out, &s.id);
        put_strings(&mut out, &s.source_topics);
        put_strings(&mut out, &[]);
        put_topic_infos(&mut out, &s.state_changelog_topics);
        put_strings(&mut out, &s.repartition_sink_topics);
        put_topic_infos(&mut out, &s.repartition_source_topics);
        put_len(&mut out, s.copartition_groups.len());
        for (sources, repartition) in &s.copartition_groups {
            put_i16s(&mut out, sources);
            put_i16s(&mut out, &[]);
            put_i16s(&mut out, repartition);
            out.put_u8(0);
        }
        out.put_u8(0);
    }
    out.put_u8(0);
    out.freeze()
}

impl StreamsGroup {
    /// The group as records: its epoch record, target assignment epoch and topology, and per
    /// member its metadata, target and current assignment. The coordinator writes the ones
    /// that changed since its last write and tombstones for keys no longer produced (a
    /// member gone), in Kafka's order ([`kafka_order`]).
    pub fn records(&self) -> Vec<(Bytes, Bytes)> {
        let g = &self.group_id;
        let mut out = Vec::with_capacity(3 + 3 * self.members.len());
        out.push((
            key(METADATA, g, None),
            metadata_value(
                self.group_epoch,
                self.metadata_hash,
                self.validated_topology_epoch,
                self.standby_seen,
            ),
        ));
        out.push((
            key(TARGET_ASSIGNMENT_METADATA, g, None),
            target_assignment_metadata_value(self.assignment_epoch),
        ));
        if let Some(t) = &self.topology {
            out.push((key(TOPOLOGY, g, None), topology_value(t)));
        }
        let empty = TasksTuple::default();
        for (id, m) in &self.members {
            out.push((key(MEMBER_METADATA, g, Some(id)), member_metadata_value(m)));
            let target = self.target.get(id).unwrap_or(&empty);
            out.push((
                key(TARGET_ASSIGNMENT_MEMBER, g, Some(id)),
                target_assignment_member_value(target),
            ));
            out.push((
                key(CURRENT_MEMBER_ASSIGNMENT, g, Some(id)),
                current_member_assignment_value(m),
            ));
        }
        out
    }
}

/// The keys of a streams group's own records, tombstoned when it is deleted (Kafka's
/// `StreamsGroup.createGroupTombstoneRecords`; a deleted group has no members left).
pub fn group_keys(group: &str) -> [Bytes; 3] {
    [
        key(TARGET_ASSIGNMENT_METADATA, group, None),
        key(METADATA, group, None),
        key(TOPOLOGY, group, None),
    ]
}

/// Puts a write's records in the order Kafka writes them, which its replay depends on:
/// tombstones first, a member's current assignment before its target before its metadata
/// (`removeStreamsMember`), and the target epoch before the group epoch before the topology
/// (`createGroupTombstoneRecords`: the group's tombstone needs the target epoch gone); then
/// values as a heartbeat writes them: member, topology, group epoch, targets, target epoch,
/// current assignments.
pub fn kafka_order(mut records: Vec<Record>) -> Vec<Record> {
    let record_type = |k: &Bytes| match k.get(..2) {
        Some(b) => i16::from_be_bytes([b[0], b[1]]),
        None => -1,
    };
    let rank = |(k, v): &Record| {
        let order: &[i16] = match v {
            None => &[
                CURRENT_MEMBER_ASSIGNMENT,
                TARGET_ASSIGNMENT_MEMBER,
                TARGET_ASSIGNMENT_METADATA,
                MEMBER_METADATA,
                METADATA,
                TOPOLOGY,
            ],
            Some(_) => &[
                MEMBER_METADATA,
                TOPOLOGY,
                METADATA,
                TARGET_ASSIGNMENT_MEMBER,
                TARGET_ASSIGNMENT_METADATA,
                CURRENT_MEMBER_ASSIGNMENT,
            ],
        };
        let t = record_type(k);
        (
            v.is_some(),
            order.iter().position(|o| *o == t).unwrap_or(order.len()),
        )
    };
    // Stable: within a type the keys stay in the order given (sorted by member).
    records.sort_by_key(rank);
    records
}

// -----------------------------------------------------------------------------------------
// Decoding
// -----------------------------------------------------------------------------------------

fn bounded_len(r: &mut Reader) -> Result<usize, RecordError> {
    let n = r.compact_len()?.unwrap_or(0);
    if n > ARRAY_ELEMENTS_MAX {
        return Err(RecordError(format!("array of {n} elements")));
    }
    Ok(n)
}

fn read_strings(r: &mut Reader) -> Result<Vec<String>, RecordError> {
    (0..bounded_len(r)?).map(|_| r.compact_str()).collect()
}

fn read_key_values(r: &mut Reader) -> Result<BTreeMap<String, String>, RecordError> {
    let mut out = BTreeMap::new();
    for _ in 0..bounded_len(r)? {
        let k = r.compact_str()?;
        let v = r.compact_str()?;
        r.tagged_fields()?;
        out.insert(k, v);
    }
    Ok(out)
}

fn read_tasks(r: &mut Reader) -> Result<Tasks, RecordError> {
    let mut out = Tasks::new();
    for _ in 0..bounded_len(r)? {
        let subtopology = r.compact_str()?;
        let partitions = out.entry(subtopology).or_default();
        for _ in 0..bounded_len(r)? {
            partitions.insert(r.i32()?);
        }
        // `AssignmentEpochs` (tag 0) is skipped.
        r.tagged_fields()?;
    }
    Ok(out)
}

fn read_tuple(r: &mut Reader) -> Result<TasksTuple, RecordError> {
    Ok(TasksTuple {
        active: read_tasks(r)?,
        standby: read_tasks(r)?,
        warmup: read_tasks(r)?,
    })
}

fn read_nullable_str(r: &mut Reader) -> Result<Option<String>, RecordError> {
    match r.compact_len()? {
        None => Ok(None),
        Some(len) => String::from_utf8(r.take(len)?.to_vec())
            .map(Some)
            .map_err(|_| RecordError("string is not UTF-8".into())),
    }
}

/// A decoded `StreamsGroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataValue {
    pub epoch: i32,
    pub metadata_hash: i64,
    pub validated_topology_epoch: i32,
    /// From `LastAssignmentConfigs`, when recorded.
    pub num_standby_replicas: Option<i32>,
}

pub fn decode_metadata_value(value: &[u8]) -> Result<MetadataValue, RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    let mut out = MetadataValue {
        epoch: r.i32()?,
        metadata_hash: r.i64()?,
        validated_topology_epoch: -1,
        num_standby_replicas: None,
    };
    for _ in 0..r.uvarint()? {
        let tag = r.uvarint()?;
        let size = usize::try_from(r.uvarint()?).map_err(|_| RecordError("tag size".into()))?;
        let mut field = Reader::new(r.take(size)?);
        match tag {
            VALIDATED_TOPOLOGY_EPOCH_TAG => out.validated_topology_epoch = field.i32()?,
            LAST_ASSIGNMENT_CONFIGS_TAG => {
                let configs = read_key_values(&mut field)?;
                out.num_standby_replicas = configs
                    .get(NUM_STANDBY_REPLICAS)
                    .and_then(|v| v.parse().ok());
            }
            // The description plugin's topology epochs (tags 2, 3): Brook has no plugin.
            _ => {}
        }
    }
    Ok(out)
}

/// Decodes `StreamsGroupMemberMetadataValue` into a member's metadata fields (its
/// assignment comes from its current assignment record).
pub fn decode_member_metadata_value(
    value: &[u8],
    m: &mut StreamsMember,
) -> Result<(), RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    m.instance_id = read_nullable_str(&mut r)?;
    m.rack_id = read_nullable_str(&mut r)?;
    m.client_id = r.compact_str()?;
    m.client_host = r.compact_str()?;
    m.rebalance_timeout_ms = r.i32()?;
    m.topology_epoch = r.i32()?;
    m.process_id = r.compact_str()?;
    m.user_endpoint = match r.i8()? {
        -1 => None,
        _ => {
            let host = r.compact_str()?;
            let b = r.take(2)?;
            let port = u16::from_be_bytes([b[0], b[1]]);
            r.tagged_fields()?;
            Some((host, port))
        }
    };
    m.client_tags = read_key_values(&mut r)?;
    r.tagged_fields()
}

pub fn decode_target_assignment_metadata_value(value: &[u8]) -> Result<i32, RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    r.i32()
}

pub fn decode_target_assignment_member_value(value: &[u8]) -> Result<TasksTuple, RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    let t = read_tuple(&mut r)?;
    r.tagged_fields()?;
    Ok(t)
}

/// A decoded `StreamsGroupCurrentMemberAssignmentValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: TasksTuple,
    pub pending_revocation: TasksTuple,
}

pub fn decode_current_member_assignment_value(
    value: &[u8],
) -> Result<CurrentAssignment, RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    let out = CurrentAssignment {
        member_epoch: r.i32()?,
        previous_member_epoch: r.i32()?,
        state: state_from_byte(r.i8()?),
        assigned: read_tuple(&mut r)?,
        pending_revocation: read_tuple(&mut r)?,
    };
    r.tagged_fields()?;
    Ok(out)
}

fn read_topic_infos(r: &mut Reader) -> Result<Vec<TopicInfo>, RecordError> {
    let mut out = Vec::new();
    for _ in 0..bounded_len(r)? {
        out.push(TopicInfo {
            name: r.compact_str()?,
            partitions: r.i32()?,
            replication_factor: r.i16()?,
            configs: read_key_values(r)?,
        });
        r.tagged_fields()?;
    }
    Ok(out)
}

fn read_i16s(r: &mut Reader) -> Result<Vec<i16>, RecordError> {
    (0..bounded_len(r)?).map(|_| r.i16()).collect()
}

fn read_subtopology(r: &mut Reader) -> Result<Subtopology, RecordError> {
    let id = r.compact_str()?;
    let source_topics = read_strings(r)?;
    let _source_topic_regex = read_strings(r)?;
    let state_changelog_topics = read_topic_infos(r)?;
    let repartition_sink_topics = read_strings(r)?;
    let repartition_source_topics = read_topic_infos(r)?;
    let mut copartition_groups = Vec::new();
    for _ in 0..bounded_len(r)? {
        let sources = read_i16s(r)?;
        let _regex = read_i16s(r)?;
        let repartition = read_i16s(r)?;
        r.tagged_fields()?;
        copartition_groups.push((sources, repartition));
    }
    r.tagged_fields()?;
    Ok(Subtopology {
        id,
        source_topics,
        repartition_sink_topics,
        state_changelog_topics,
        repartition_source_topics,
        copartition_groups,
    })
}

pub fn decode_topology_value(value: &[u8]) -> Result<Topology, RecordError> {
    let mut r = Reader::new(value);
    let _version = r.i16()?;
    let epoch = r.i32()?;
    let subtopologies = (0..bounded_len(&mut r)?)
        .map(|_| read_subtopology(&mut r))
        .collect::<Result<_, _>>()?;
    r.tagged_fields()?;
    Ok(Topology {
        epoch,
        subtopologies,
    })
}

// -----------------------------------------------------------------------------------------
// Replay
// -----------------------------------------------------------------------------------------

/// The streams group a replayed record belongs to: created if new, converted (keeping its
/// offsets) if it was only an offsets holder so far (Kafka's
/// `getOrMaybeCreatePersistedStreamsGroup`).
fn streams_for_replay<'a>(
    groups: &'a mut HashMap<String, GroupEntry>,
    group: &str,
) -> &'a mut StreamsGroup {
    let e = super::loading::entry_for_replay(groups, group);
    if !matches!(e.kind, GroupKind::Streams(_)) {
        e.kind = GroupKind::Streams(StreamsGroup::new(group.to_string()));
    }
    match &mut e.kind {
        GroupKind::Streams(g) => g,
        GroupKind::Classic(_) | GroupKind::Consumer(_) | GroupKind::Share(_) => {
            unreachable!("converted just above")
        }
    }
}

/// The existing streams group of a tombstone; a tombstone never creates one.
fn existing<'a>(
    groups: &'a mut HashMap<String, GroupEntry>,
    group: &str,
) -> Option<&'a mut StreamsGroup> {
    match groups.get_mut(group).map(|e| &mut e.kind) {
        Some(GroupKind::Streams(g)) => Some(g),
        _ => None,
    }
}

/// Applies one replayed streams record. A restored member's session starts now
/// (`session`), and one still revoking tasks gets its rebalance timeout again, as Kafka
/// reschedules both on load.
pub(super) fn replay(
    groups: &mut HashMap<String, GroupEntry>,
    key: StreamsKey,
    value: Option<&[u8]>,
    session: Duration,
) -> Result<(), RecordError> {
    let group = key.group.as_str();
    let member = key.member.as_deref().unwrap_or_default();
    let Some(v) = value else {
        replay_tombstone(groups, &key);
        return Ok(());
    };
    let g = streams_for_replay(groups, group);
    match key.record_type {
        METADATA => g.restore_metadata(decode_metadata_value(v)?),
        TOPOLOGY => g.restore_topology(decode_topology_value(v)?),
        TARGET_ASSIGNMENT_METADATA => {
            g.assignment_epoch = decode_target_assignment_metadata_value(v)?;
        }
        TARGET_ASSIGNMENT_MEMBER => {
            let t = decode_target_assignment_member_value(v)?;
            g.target.insert(member.to_string(), t);
        }
        MEMBER_METADATA => {
            let m = g.restored_member(member, Instant::now() + session);
            decode_member_metadata_value(v, m)?;
        }
        CURRENT_MEMBER_ASSIGNMENT => {
            let a = decode_current_member_assignment_value(v)?;
            let m = g.restored_member(member, Instant::now() + session);
            m.member_epoch = a.member_epoch;
            m.previous_member_epoch = a.previous_member_epoch;
            m.state = a.state;
            m.assigned = a.assigned;
            m.pending_revocation = a.pending_revocation;
            m.revocation_deadline = (m.state == MemberState::UnrevokedTasks).then(|| {
                Instant::now() + Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64)
            });
        }
        _ => {}
    }
    Ok(())
}

/// A streams tombstone: a member's record goes (its metadata's tombstone removes it), or the
/// group's (its epoch record's tombstone removes the group, keeping committed offsets).
fn replay_tombstone(groups: &mut HashMap<String, GroupEntry>, key: &StreamsKey) {
    let member = key.member.as_deref().unwrap_or_default();
    if key.record_type == METADATA {
        super::loading::group_tombstone(groups, &key.group);
        return;
    }
    let Some(g) = existing(groups, &key.group) else {
        return;
    };
    match key.record_type {
        MEMBER_METADATA => {
            g.members.remove(member);
        }
        TARGET_ASSIGNMENT_MEMBER => {
            g.target.remove(member);
        }
        CURRENT_MEMBER_ASSIGNMENT => {
            if let Some(m) = g.members.get_mut(member) {
                m.assigned = TasksTuple::default();
                m.pending_revocation = TasksTuple::default();
            }
        }
        TOPOLOGY => g.restore_topology_removed(),
        // The target epoch's tombstone precedes the group's.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn tasks(pairs: &[(&str, &[i32])]) -> Tasks {
        pairs
            .iter()
            .map(|(s, ps)| (s.to_string(), ps.iter().copied().collect::<BTreeSet<_>>()))
            .collect()
    }

    fn topology() -> Topology {
        let info = |name: &str| TopicInfo {
            name: name.into(),
            partitions: 0,
            replication_factor: 0,
            configs: [("cleanup.policy".to_string(), "compact".to_string())].into(),
        };
        Topology {
            epoch: 3,
            subtopologies: vec![Subtopology {
                id: "0".into(),
                source_topics: vec!["in".into()],
                repartition_sink_topics: vec!["app-rep".into()],
                state_changelog_topics: vec![info("app-log")],
                repartition_source_topics: vec![info("app-rep2")],
                copartition_groups: vec![(vec![0], vec![0])],
            }],
        }
    }

    #[test]
    fn values_round_trip() {
        let t = topology();
        assert_eq!(decode_topology_value(&topology_value(&t)).unwrap(), t);
        let meta = decode_metadata_value(&metadata_value(7, -42, 3, 1)).unwrap();
        assert_eq!(
            meta,
            MetadataValue {
                epoch: 7,
                metadata_hash: -42,
                validated_topology_epoch: 3,
                num_standby_replicas: Some(1),
            }
        );
        let none = decode_metadata_value(&metadata_value(1, 0, -1, 0)).unwrap();
        assert_eq!(none.validated_topology_epoch, -1);
        let tuple = TasksTuple {
            active: tasks(&[("0", &[0, 2]), ("1", &[1])]),
            standby: tasks(&[("1", &[0])]),
            warmup: Tasks::new(),
        };
        let v = target_assignment_member_value(&tuple);
        assert_eq!(decode_target_assignment_member_value(&v).unwrap(), tuple);
        let v = target_assignment_metadata_value(9);
        assert_eq!(decode_target_assignment_metadata_value(&v).unwrap(), 9);
    }

    #[test]
    fn member_values_round_trip() {
        let mut m = StreamsMember::new("m1", Instant::now());
        m.instance_id = Some("i".into());
        m.client_id = "c".into();
        m.client_host = "/127.0.0.1".into();
        m.rebalance_timeout_ms = 30_000;
        m.topology_epoch = 2;
        m.process_id = "p".into();
        m.user_endpoint = Some(("localhost".into(), 65_000));
        m.client_tags = [("zone".to_string(), "a".to_string())].into();
        m.member_epoch = 5;
        m.previous_member_epoch = 4;
        m.state = MemberState::UnrevokedTasks;
        m.assigned.active = tasks(&[("0", &[1])]);
        m.pending_revocation.active = tasks(&[("0", &[0])]);
        let mut back = StreamsMember::new("m1", Instant::now());
        decode_member_metadata_value(&member_metadata_value(&m), &mut back).unwrap();
        assert_eq!(back.instance_id, m.instance_id);
        assert_eq!(back.user_endpoint, m.user_endpoint);
        assert_eq!(back.client_tags, m.client_tags);
        assert_eq!(
            (
                back.rebalance_timeout_ms,
                back.topology_epoch,
                back.process_id
            ),
            (30_000, 2, "p".to_string())
        );
        let a =
            decode_current_member_assignment_value(&current_member_assignment_value(&m)).unwrap();
        assert_eq!((a.member_epoch, a.previous_member_epoch), (5, 4));
        assert_eq!(a.state, MemberState::UnrevokedTasks);
        assert_eq!(
            (a.assigned, a.pending_revocation),
            (m.assigned, m.pending_revocation)
        );
    }

    #[test]
    fn truncated_values_are_errors_not_panics() {
        let t = topology_value(&topology());
        for cut in 0..t.len() {
            assert!(decode_topology_value(&t[..cut]).is_err(), "cut at {cut}");
        }
        let m = metadata_value(1, 2, 3, 1);
        for cut in 0..m.len() {
            assert!(decode_metadata_value(&m[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn kafka_order_puts_tombstones_in_replay_order() {
        let k = |t, m: Option<&str>| key(t, "g", m);
        let v = Some(Bytes::from_static(b"v"));
        let ordered = kafka_order(vec![
            (k(METADATA, None), v.clone()),
            (k(MEMBER_METADATA, Some("a")), None),
            (k(TARGET_ASSIGNMENT_MEMBER, Some("a")), None),
            (k(CURRENT_MEMBER_ASSIGNMENT, Some("a")), None),
            (k(TARGET_ASSIGNMENT_METADATA, None), v.clone()),
        ]);
        let types: Vec<(i16, bool)> = ordered
            .iter()
            .map(|(k, v)| (i16::from_be_bytes([k[0], k[1]]), v.is_some()))
            .collect();
        assert_eq!(
            types,
            vec![
                (CURRENT_MEMBER_ASSIGNMENT, false),
                (TARGET_ASSIGNMENT_MEMBER, false),
                (MEMBER_METADATA, false),
                (METADATA, true),
                (TARGET_ASSIGNMENT_METADATA, true),
            ]
        );
    }
}
