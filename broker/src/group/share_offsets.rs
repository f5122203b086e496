//! The group coordinator's side of a share group's offsets (KIP-932's admin APIs and
//! DeleteGroups): which share-partitions of a group may hold state at the share coordinator
//! (Kafka's `ShareGroupStatePartitionMetadata` initialized topics, [`ShareGroup::state_topics`]),
//! and the checks Kafka's `GroupMetadataManager` makes before the persister is called:
//! - AlterShareGroupOffsets (`alterShareGroupOffsets`): creates the group if it does not
//!   exist (`getOrMaybeCreateShareGroup`), refuses a group with members
//!   (`throwIfShareGroupIsNotEmpty`, NON_EMPTY_GROUP), and records the altered topics;
//! - DeleteShareGroupOffsets (`sharePartitionsEligibleForOffsetDeletion`): the group must exist
//!   and be empty; a topic without state is UNKNOWN_TOPIC_OR_PARTITION;
//! - DeleteGroups (`shareGroupBuildPartitionDeleteRequest`): every share-partition with state.
//!
//! The persister calls themselves are made by the API handlers
//! ([`crate::api::share_offsets`]), outside the coordinator's lock.

use super::*;

/// A share group's share-partitions that may hold state, by topic id.
pub type StateTopics = BTreeMap<Uuid, BTreeSet<i32>>;

impl GroupCoordinator {
    /// The share-partitions of `group_id` whose state the share coordinator may hold (Kafka's
    /// `initializedShareGroupPartitions`): none for an unknown group or one of another type.
    pub fn share_state_topics(&self, group_id: &str) -> Result<StateTopics, GroupError> {
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        Ok(match st.groups.get(group_id).map(|e| &e.kind) {
            Some(GroupKind::Share(g)) => g.state_topics.clone(),
            _ => StateTopics::new(),
        })
    }

    /// Records the answer to a heartbeat's InitializeShareGroupState
    /// ([`ShareGroup::initialized`]) and writes it (Kafka's
    /// `performShareGroupStateMetadataInitialize`), answering once it is committed: a
    /// coordinator that restarts or moves must not initialize these share-partitions again.
    /// Nothing when the group is gone or moved.
    pub async fn share_initialized(
        &self,
        group_id: &str,
        done: &[(Uuid, i32)],
        failed: &[(Uuid, i32)],
    ) -> Result<(), GroupError> {
        let written = {
            let mut st = self.state.lock();
            self.acquire(&mut st, group_id)?;
            match st.groups.get_mut(group_id).map(|e| &mut e.kind) {
                Some(GroupKind::Share(g)) => g.initialized(done, failed),
                _ => return Ok(()),
            }
            self.after_change_or_error(&mut st, group_id)?
        };
        self.wait_committed(written).await
    }

    /// AlterShareGroupOffsets' checks (Kafka's `GroupMetadataManager.alterShareGroupOffsets`):
    /// the group is created when absent and must have no members; `topics`' partitions are
    /// recorded as holding state. Returns the group epoch, the state epoch Kafka initializes
    /// the altered share-partitions at.
    pub fn alter_share_offsets(
        &self,
        group_id: &str,
        topics: &StateTopics,
    ) -> Result<i32, GroupError> {
        Self::check_group_id(group_id)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let entry = st
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| GroupEntry {
                kind: GroupKind::Share(ShareGroup::new(group_id.to_string())),
                offsets: BTreeMap::new(),
                pending_txn: BTreeMap::new(),
                persisted: HashMap::new(),
            });
        let GroupKind::Share(g) = &mut entry.kind else {
            return Err(GroupError::NotShareGroup(group_id.into()));
        };
        if !g.members.is_empty() {
            return Err(GroupError::NonEmptyGroup);
        }
        for (id, partitions) in topics {
            g.state_topics
                .entry(*id)
                .or_default()
                .extend(partitions.iter().copied());
        }
        let epoch = g.group_epoch;
        self.after_change(&mut st, group_id);
        Ok(epoch)
    }

    /// DeleteShareGroupOffsets' checks (Kafka's `initiateDeleteShareGroupOffsets`): the
    /// group must be an empty share group. Returns, of `topic_ids`, those with state and
    /// their share-partitions; they are forgotten once their state is deleted
    /// ([`Self::forget_share_state`]).
    pub fn share_offsets_to_delete(
        &self,
        group_id: &str,
        topic_ids: &[Uuid],
    ) -> Result<StateTopics, GroupError> {
        let held = self.empty_share_group(group_id)?;
        Ok(topic_ids
            .iter()
            .filter_map(|id| Some((*id, held.get(id)?.clone())))
            .collect())
    }

    /// DeleteGroups' share step (Kafka's `sharePartitionDeleteRequests`): `None` unless
    /// `group_id` is a share group; NON_EMPTY_GROUP while it has members; else every
    /// share-partition that may hold state.
    pub fn share_group_state_to_delete(
        &self,
        group_id: &str,
    ) -> Result<Option<StateTopics>, GroupError> {
        match self.empty_share_group(group_id) {
            Ok(held) => Ok(Some(held)),
            Err(GroupError::GroupIdNotFound | GroupError::NotShareGroup(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Forgets topics whose state was deleted (Kafka's `completeDeleteShareGroupOffsets`).
    pub fn forget_share_state(&self, group_id: &str, topic_ids: &[Uuid]) {
        let mut st = self.state.lock();
        if let Some(GroupKind::Share(g)) = st.groups.get_mut(group_id).map(|e| &mut e.kind) {
            for id in topic_ids {
                g.state_topics.remove(id);
            }
            self.after_change(&mut st, group_id);
        }
    }

    /// The state topics of `group_id` if it is a share group without members.
    fn empty_share_group(&self, group_id: &str) -> Result<StateTopics, GroupError> {
        Self::check_group_id(group_id)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        match st.groups.get(group_id).map(|e| &e.kind) {
            Some(GroupKind::Share(g)) if !g.members.is_empty() => Err(GroupError::NonEmptyGroup),
            Some(GroupKind::Share(g)) => Ok(g.state_topics.clone()),
            Some(_) => Err(GroupError::NotShareGroup(group_id.into())),
            None => Err(GroupError::GroupIdNotFound),
        }
    }
}
