//! Loading and unloading groups as this node gains and loses the leadership of
//! `__consumer_offsets` partitions (Kafka's `GroupMetadataManager.loadGroupsAndOffsets` and
//! `removeGroupsForPartition`): a partition's records are replayed into groups and offsets
//! before the node serves any group that hashes to it.

use super::*;

impl GroupCoordinator {
    /// This node coordinates a group only while it leads the group's offsets partition (a
    /// single node leads every one).
    pub(super) fn acquire(&self, st: &mut State, group_id: &str) -> Result<(), GroupError> {
        let Some(topic) = self.replicas.topic(OFFSETS_TOPIC) else {
            return Err(GroupError::CoordinatorNotAvailable);
        };
        self.acquire_partition(
            st,
            records::partition_for(group_id, topic.partition_count()),
        )
    }

    /// Checks this node's leadership of offsets partition `index`. Led at a leader epoch not
    /// loaded yet: the partition's groups are read back from the log first (leadership moved
    /// here, or away and back, so what is in memory may be stale). Not led: its groups are
    /// dropped, their parked requests answered NOT_COORDINATOR, and so is this request.
    pub(super) fn acquire_partition(&self, st: &mut State, index: i32) -> Result<(), GroupError> {
        let epoch = self
            .replicas
            .partition(OFFSETS_TOPIC, index)
            .filter(|p| p.is_leader())
            .map(|p| p.leader_epoch());
        match epoch {
            None => {
                self.unload(st, index);
                Err(GroupError::NotCoordinator)
            }
            Some(e) if st.loaded.get(&index) == Some(&e) => Ok(()),
            Some(e) => {
                self.unload(st, index);
                let sessions = ReplaySessions {
                    consumer: self.consumer_session(),
                    streams: self.streams_session(),
                    share: self.share_session(),
                };
                let (groups, n) = load_partition(&self.store, index, sessions)?;
                tracing::info!(
                    partition = index,
                    leader_epoch = e,
                    records = n,
                    groups = groups.len(),
                    "loaded groups of {OFFSETS_TOPIC}-{index}"
                );
                // Restored members have session deadlines: make the timer see them.
                let earliest = groups.values().filter_map(|g| g.next_deadline()).min();
                st.groups.extend(groups);
                st.loaded.insert(index, e);
                if let Some(d) = earliest {
                    if st.timer_at.is_none_or(|t| d < t) {
                        st.timer_at = Some(d);
                        self.timer.notify_one();
                    }
                }
                Ok(())
            }
        }
    }

    /// Drops the groups of offsets partition `index` from memory (this node no longer leads
    /// it); their parked JoinGroup/SyncGroup requests are answered NOT_COORDINATOR, which
    /// sends the clients to look up the new coordinator.
    pub(super) fn unload(&self, st: &mut State, index: i32) {
        if st.loaded.remove(&index).is_none() {
            return;
        }
        let partitions = self.store.partitions();
        let gone: Vec<String> = st
            .groups
            .keys()
            .filter(|g| records::partition_for(g, partitions) == index)
            .cloned()
            .collect();
        for g in &gone {
            if let Some(mut e) = st.groups.remove(g) {
                if let GroupKind::Classic(c) = &mut e.kind {
                    c.fail_waiters(GroupError::NotCoordinator.error_code());
                }
            }
        }
        tracing::info!(
            partition = index,
            groups = gone.len(),
            "unloaded groups of {OFFSETS_TOPIC}-{index}"
        );
    }

    /// Brings every offsets partition in line with this node's leadership (loads newly led
    /// ones, drops lost ones). Run after each metadata image and before ListGroups, so that
    /// groups are known without waiting for a client to touch them.
    pub(super) fn acquire_all(&self, st: &mut State) {
        let Some(topic) = self.replicas.topic(OFFSETS_TOPIC) else {
            return;
        };
        for index in 0..topic.partition_count() {
            if let Err(e) = self.acquire_partition(st, index) {
                if e != GroupError::NotCoordinator {
                    tracing::warn!(partition = index, error = %e, "could not load groups");
                }
            }
        }
    }
}

/// The sessions members read back from the log start with, by protocol.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReplaySessions {
    pub consumer: std::time::Duration,
    pub streams: std::time::Duration,
    pub share: std::time::Duration,
}

/// Reads offsets partition `index` back: its groups with their members, committed offsets
/// and the offsets of transactions still open. Returns them and the number of records read.
pub(super) fn load_partition(
    store: &OffsetsStore,
    index: i32,
    sessions: ReplaySessions,
) -> Result<(HashMap<String, GroupEntry>, usize), GroupError> {
    let mut groups: HashMap<String, GroupEntry> = HashMap::new();
    let n = store.replay_partition(index, &mut |item| match item {
        Replayed::Record {
            key,
            value,
            offset,
            txn,
        } => replay_record(&mut groups, key, value, offset, txn, sessions),
        // Every group read here lives on this partition, where the marker is.
        Replayed::Marker {
            producer_id,
            commit,
        } => {
            for e in groups.values_mut() {
                e.end_txn(producer_id, commit);
            }
        }
    })?;
    note_persisted(&mut groups);
    Ok((groups, n))
}

/// Applies one replayed record (at log offset `offset`, in a transaction of producer `txn`
/// if set) to the groups being rebuilt. Mirrors Kafka's `GroupCoordinatorShard.replay`: one
/// arm per record type, each record family replayed by its own step below.
pub(super) fn replay_record(
    groups: &mut HashMap<String, GroupEntry>,
    key: RecordKey,
    value: Option<&[u8]>,
    offset: i64,
    txn: Option<i64>,
    sessions: ReplaySessions,
) {
    match key {
        RecordKey::OffsetCommit {
            group,
            topic,
            partition,
        } => replay_offset_commit(groups, group, (topic, partition), value, offset, txn),
        RecordKey::GroupMetadata { group } => replay_group_metadata(groups, group, value),
        RecordKey::Streams(k) => {
            if let Err(e) = super::streams_records::replay(groups, k, value, sessions.streams) {
                tracing::warn!(error = %e, "skipping streams group record");
            }
        }
        RecordKey::Share(k) => {
            if let Err(e) = super::share_records::replay(groups, k, value, sessions.share) {
                tracing::warn!(error = %e, "skipping share group record");
            }
        }
        RecordKey::Other(_) => {}
        consumer => replay_consumer_record(groups, consumer, value, sessions.consumer),
    }
}

/// Offsets family (Kafka's `OffsetMetadataManager.replay`): a commit, into the group's
/// offsets or its producer's pending transaction; a tombstone removes it.
fn replay_offset_commit(
    groups: &mut HashMap<String, GroupEntry>,
    group: String,
    tp: (String, i32),
    value: Option<&[u8]>,
    offset: i64,
    txn: Option<i64>,
) {
    match value {
        Some(v) => match records::decode_offset_value(v) {
            Ok(value) => {
                let e = entry_for_replay(groups, &group);
                let stored = StoredOffset {
                    value,
                    record_offset: offset,
                };
                let target = match txn {
                    None => &mut e.offsets,
                    Some(producer_id) => e.pending_txn.entry(producer_id).or_default(),
                };
                target.insert(tp, stored);
            }
            Err(e) => tracing::warn!(error = %e, "skipping offset record"),
        },
        None => {
            if let Some(e) = groups.get_mut(&group) {
                e.remove_offset(&tp);
            }
        }
    }
}

/// Classic family (Kafka's `GroupMetadataManager.replay(GroupMetadataKey, ...)`): the whole
/// classic group from one record; a tombstone ends it.
fn replay_group_metadata(
    groups: &mut HashMap<String, GroupEntry>,
    group: String,
    value: Option<&[u8]>,
) {
    match value {
        Some(v) => match records::decode_group_metadata_value(v) {
            Ok(meta) => {
                let e = entry_for_replay(groups, &group);
                e.kind = GroupKind::Classic(ClassicGroup::from_record(
                    group.clone(),
                    meta,
                    Instant::now(),
                ));
            }
            Err(e) => tracing::warn!(error = %e, "skipping group record"),
        },
        None => group_tombstone(groups, &group),
    }
}

/// KIP-848 consumer family (Kafka's `GroupMetadataManager.replay` for the
/// `ConsumerGroup*` records): group and member metadata and current assignments here, the
/// target assignment in `replay_target_assignment`.
fn replay_consumer_record(
    groups: &mut HashMap<String, GroupEntry>,
    key: RecordKey,
    value: Option<&[u8]>,
    consumer_session: std::time::Duration,
) {
    match key {
        RecordKey::ConsumerGroupMetadata { group } => match value {
            Some(v) => match records::decode_consumer_group_metadata_value(v) {
                Ok(epoch) => consumer_for_replay(groups, &group).group_epoch = epoch,
                Err(e) => tracing::warn!(error = %e, "skipping consumer group record"),
            },
            None => group_tombstone(groups, &group),
        },
        RecordKey::ConsumerMemberMetadata { group, member } => match value {
            Some(v) => match records::decode_consumer_member_metadata_value(v) {
                Ok(meta) => consumer_for_replay(groups, &group).restore_member_metadata(
                    &member,
                    meta,
                    Instant::now() + consumer_session,
                ),
                Err(e) => tracing::warn!(error = %e, "skipping consumer member record"),
            },
            None => {
                if let Some(GroupKind::Consumer(g)) = groups.get_mut(&group).map(|e| &mut e.kind) {
                    g.restore_member_removed(&member);
                }
            }
        },
        RecordKey::CurrentMemberAssignment { group, member } => {
            if let Some(v) = value {
                match records::decode_current_member_assignment_value(v) {
                    Ok(a) => consumer_for_replay(groups, &group).restore_member_assignment(
                        &member,
                        a,
                        Instant::now() + consumer_session,
                    ),
                    Err(e) => tracing::warn!(error = %e, "skipping member assignment record"),
                }
            }
        }
        target => replay_target_assignment(groups, target, value),
    }
}

/// KIP-848 target assignment records (Kafka's `ConsumerGroupTargetAssignmentMember` and
/// `ConsumerGroupTargetAssignmentMetadata`): one member's target, and the epoch of the
/// whole target.
fn replay_target_assignment(
    groups: &mut HashMap<String, GroupEntry>,
    key: RecordKey,
    value: Option<&[u8]>,
) {
    match key {
        RecordKey::TargetAssignmentMember { group, member } => match value {
            Some(v) => match records::decode_target_assignment_member_value(v) {
                Ok(t) => {
                    consumer_for_replay(groups, &group).target.insert(member, t);
                }
                Err(e) => tracing::warn!(error = %e, "skipping target assignment record"),
            },
            None => {
                if let Some(GroupKind::Consumer(g)) = groups.get_mut(&group).map(|e| &mut e.kind) {
                    g.target.remove(&member);
                }
            }
        },
        RecordKey::TargetAssignmentMetadata { group } => {
            if let Some(v) = value {
                match records::decode_target_assignment_metadata_value(v) {
                    Ok((epoch, timestamp_ms)) => {
                        let g = consumer_for_replay(groups, &group);
                        g.assignment_epoch = epoch;
                        g.assignment_timestamp_ms = timestamp_ms;
                    }
                    Err(e) => tracing::warn!(error = %e, "skipping target assignment record"),
                }
            }
        }
        // The other families are dispatched by `replay_record` before reaching here.
        RecordKey::OffsetCommit { .. }
        | RecordKey::GroupMetadata { .. }
        | RecordKey::ConsumerGroupMetadata { .. }
        | RecordKey::ConsumerMemberMetadata { .. }
        | RecordKey::CurrentMemberAssignment { .. }
        | RecordKey::Streams(_)
        | RecordKey::Share(_)
        | RecordKey::Other(_) => {}
    }
}

/// The KIP-848 group a replayed record belongs to: created if new, converted (keeping its
/// offsets) if it was only an offsets holder so far.
/// A group record's tombstone: the group is gone, but offsets committed to it stay (a
/// deletion tombstones them first; a conversion between the classic and KIP-848 protocols
/// writes the new group's records right after).
pub(super) fn group_tombstone(groups: &mut HashMap<String, GroupEntry>, group: &str) {
    let Some(e) = groups.get_mut(group) else {
        return;
    };
    if e.offsets.is_empty() && e.pending_txn.is_empty() {
        groups.remove(group);
    } else {
        e.kind = GroupKind::Classic(ClassicGroup::new(group.to_string()));
    }
}

/// The group a replayed record belongs to; a group first seen here starts as an empty
/// classic group (an offsets holder), which a group record then turns into its kind.
pub(super) fn entry_for_replay<'a>(
    groups: &'a mut HashMap<String, GroupEntry>,
    group: &str,
) -> &'a mut GroupEntry {
    groups
        .entry(group.to_string())
        .or_insert_with(|| GroupEntry::classic(group))
}

pub(super) fn consumer_for_replay<'a>(
    groups: &'a mut HashMap<String, GroupEntry>,
    group: &str,
) -> &'a mut ConsumerGroup {
    let e = entry_for_replay(groups, group);
    if !matches!(e.kind, GroupKind::Consumer(_)) {
        // Kafka's `getOrMaybeCreatePersistedConsumerGroup`: a group first seen in a record
        // other than its epoch record has a new group's epochs until that record comes.
        e.kind = GroupKind::Consumer(ConsumerGroup::new(
            group.to_string(),
            super::INITIAL_GROUP_EPOCH,
        ));
    }
    match &mut e.kind {
        GroupKind::Consumer(g) => g,
        GroupKind::Classic(_) | GroupKind::Share(_) | GroupKind::Streams(_) => {
            unreachable!("converted just above")
        }
    }
}

/// After replay: what each KIP-848 and streams group's records are now, so that the next change writes
/// only differences (and tombstones for members that go). A share group's are the values
/// replay read ([`super::share_records::replay`]).
pub(super) fn note_persisted(groups: &mut HashMap<String, GroupEntry>) {
    for e in groups.values_mut() {
        match &e.kind {
            GroupKind::Consumer(g) => e.persisted = g.records().into_iter().collect(),
            GroupKind::Streams(g) => e.persisted = g.records().into_iter().collect(),
            GroupKind::Classic(_) | GroupKind::Share(_) => {}
        }
    }
}
