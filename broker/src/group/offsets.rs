//! Committed offsets (Kafka's `OffsetMetadataManager`): OffsetCommit, OffsetFetch and
//! OffsetDelete, and the expiry of offsets past `offsets.retention.minutes`. A commit is
//! appended to `__consumer_offsets` and answered once it is below that partition's high
//! watermark; the in-memory offsets change after the append, never before.

use super::*;

impl GroupCoordinator {
    /// OffsetCommit: validates the committer, writes the offsets, applies them, and answers
    /// once the offsets partition's high watermark has passed them (every in-sync replica
    /// has them, so they survive the coordinator's failure). Returns one error code per
    /// partition, in request order.
    pub async fn commit_offsets(
        &self,
        group_id: &str,
        who: &Committer,
        partitions: Vec<CommitPartition>,
    ) -> Vec<i16> {
        self.commit(group_id, who, partitions, None).await
    }

    /// OffsetCommit, or with `txn` TxnOffsetCommit: the offsets are then written as that
    /// producer's transactional batch and kept pending for the group.
    pub(super) async fn commit(
        &self,
        group_id: &str,
        who: &Committer,
        partitions: Vec<CommitPartition>,
        txn: Option<TxnProducer>,
    ) -> Vec<i16> {
        self.prepare_write().await;
        let (codes, written) = self.commit_offsets_now(group_id, who, partitions, txn);
        match self.wait_committed(written).await {
            Ok(()) => codes,
            Err(e) => codes
                .into_iter()
                .map(|c| if c == 0 { e.error_code() } else { c })
                .collect(),
        }
    }

    /// Waits until a coordinator write is on every in-sync replica, for at most
    /// `offsets.commit.timeout.ms`.
    pub(super) async fn wait_committed(&self, written: Option<Written>) -> Result<(), GroupError> {
        let Some(w) = written else {
            return Ok(());
        };
        let timeout =
            std::time::Duration::from_millis(self.config.offsets_commit_timeout_ms as u64);
        self.store.wait_committed(&w, timeout).await
    }

    /// The part of OffsetCommit (and TxnOffsetCommit) done under the coordinator's lock.
    pub(super) fn commit_offsets_now(
        &self,
        group_id: &str,
        who: &Committer,
        partitions: Vec<CommitPartition>,
        txn: Option<TxnProducer>,
    ) -> (Vec<i16>, Option<Written>) {
        let fail = |e: GroupError, n: usize| (vec![e.error_code(); n], None);
        if let Err(e) = Self::check_group_id(group_id) {
            return fail(e, partitions.len());
        }
        let mut st = self.state.lock();
        if let Err(e) = self.acquire(&mut st, group_id) {
            return fail(e, partitions.len());
        }
        if let Err(e) = self.validate_commit(&mut st, group_id, who) {
            return fail(e, partitions.len());
        }
        let now = now_ms();
        let mut codes = Vec::with_capacity(partitions.len());
        let mut records: Vec<Record> = Vec::new();
        let mut accepted = Vec::new();
        for p in partitions {
            let code = self.check_commit_partition(&p);
            if code == 0 {
                let v = OffsetValue {
                    offset: p.offset,
                    leader_epoch: p.leader_epoch,
                    metadata: p.metadata.unwrap_or_default(),
                    commit_timestamp_ms: now,
                };
                records.push((
                    records::offset_commit_key(group_id, &p.topic, p.partition),
                    Some(records::offset_commit_value(&v)),
                ));
                accepted.push(((p.topic, p.partition), v));
            }
            codes.push(code);
        }
        let appended = match txn {
            None => self.store.append(group_id, records),
            Some(p) => self.store.append_transactional(group_id, p, records),
        };
        let written = match appended {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(group = group_id, error = %e, "offset commit not written");
                let code = e.error_code();
                let codes = codes
                    .iter()
                    .map(|c| if *c == 0 { code } else { *c })
                    .collect();
                return (codes, None);
            }
        };
        if let (Some(entry), Some(w)) = (st.groups.get_mut(group_id), &written) {
            let target = match txn {
                None => &mut entry.offsets,
                Some(p) => entry.pending_txn.entry(p.producer_id).or_default(),
            };
            // One batch: record i sits at first_offset + i.
            for ((key, value), record_offset) in accepted.into_iter().zip(w.first_offset..) {
                target.insert(
                    key,
                    StoredOffset {
                        value,
                        record_offset,
                    },
                );
            }
        }
        (codes, written)
    }

    pub(super) fn check_commit_partition(&self, p: &CommitPartition) -> i16 {
        match self.replicas.topic(&p.topic) {
            Some(t) if p.partition >= 0 && p.partition < t.partition_count() => {}
            _ => return GroupError::UnknownTopicOrPartition.error_code(),
        }
        if p.metadata
            .as_ref()
            .is_some_and(|m| m.len() > self.config.offset_metadata_max_bytes)
        {
            return GroupError::OffsetMetadataTooLarge.error_code();
        }
        0
    }

    pub(super) fn validate_commit(
        &self,
        st: &mut State,
        group_id: &str,
        who: &Committer,
    ) -> Result<(), GroupError> {
        let entry = match st.groups.get_mut(group_id) {
            Some(e) => e,
            None if who.generation_or_epoch < 0 => {
                // A simple consumer or the admin client: Kafka creates an empty classic group.
                st.groups
                    .entry(group_id.to_string())
                    .or_insert_with(|| GroupEntry::classic(group_id))
            }
            None if who.api_version >= 9 && !who.transactional => {
                return Err(GroupError::GroupIdNotFound)
            }
            None => return Err(GroupError::IllegalGeneration),
        };
        match &entry.kind {
            GroupKind::Classic(g) => g.validate_offset_commit(
                &who.member_id,
                who.group_instance_id.as_deref(),
                who.generation_or_epoch,
                who.transactional,
            ),
            // Kafka's TxnOffsetCommit answers a stale member epoch ILLEGAL_GENERATION
            // (OffsetMetadataManager.validateTransactionalOffsetCommit).
            GroupKind::Consumer(g) => g
                .validate_offset_commit(&who.member_id, who.generation_or_epoch)
                .map_err(|e| match e {
                    GroupError::StaleMemberEpoch if who.transactional => {
                        GroupError::IllegalGeneration
                    }
                    e => e,
                }),
            // Share groups keep no committed offsets (their progress is the share-partition
            // state).
            GroupKind::Share(_) => Err(GroupError::GroupIdNotFound),
            // Kafka's `StreamsGroup.validateOffsetCommit`, with the same TxnOffsetCommit rule.
            GroupKind::Streams(g) => g
                .validate_offset_commit(&who.member_id, who.generation_or_epoch)
                .map_err(|e| match e {
                    GroupError::StaleMemberEpoch if who.transactional => {
                        GroupError::IllegalGeneration
                    }
                    e => e,
                }),
        }
    }

    /// OffsetFetch for one group. `topics: None` means every committed partition. With a
    /// member (v9, KIP-848), its epoch is checked. Unknown partitions read offset -1. With
    /// `require_stable` (v7+), a partition with transactional offsets still pending answers
    /// UNSTABLE_OFFSET_COMMIT, and the client asks again (Kafka's
    /// `OffsetMetadataManager.fetchOffsets`).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        member: Option<(&str, i32)>,
        topics: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
    ) -> Result<FetchedOffsets, GroupError> {
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let entry = st.groups.get(group_id);
        if let (Some((id, epoch)), Some(e)) = (member, entry) {
            if !id.is_empty() || epoch >= 0 {
                match &e.kind {
                    GroupKind::Consumer(g) => g.validate_offset_fetch(id, epoch)?,
                    GroupKind::Streams(g) => g.validate_offset_fetch(id, epoch)?,
                    _ => {}
                }
            }
        }
        let lookup = |t: &str, p: i32| {
            let key = (t.to_string(), p);
            match entry {
                Some(e) if require_stable && e.has_pending_txn_offset(&key) => {
                    Err(GroupError::UnstableOffsetCommit)
                }
                Some(e) => Ok(e.offsets.get(&key).map(|o| o.value.clone())),
                None => Ok(None),
            }
        };
        Ok(match topics {
            Some(list) => list
                .into_iter()
                .map(|(t, ps)| {
                    let parts = ps.into_iter().map(|p| (p, lookup(&t, p))).collect();
                    (t, parts)
                })
                .collect(),
            None => {
                type Found = Result<Option<OffsetValue>, GroupError>;
                let mut by_topic: BTreeMap<String, Vec<(i32, Found)>> = BTreeMap::new();
                if let Some(e) = entry {
                    for (t, p) in e.offsets.keys() {
                        by_topic
                            .entry(t.clone())
                            .or_default()
                            .push((*p, lookup(t, *p)));
                    }
                }
                by_topic.into_iter().collect()
            }
        })
    }

    /// OffsetDelete: removes offsets of topics the group no longer reads. Per-partition
    /// codes in request order, once the tombstones are on every in-sync replica.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<i16>, GroupError> {
        self.prepare_write().await;
        let (codes, written) = self.delete_offsets_now(group_id, partitions)?;
        self.wait_committed(written).await?;
        Ok(codes)
    }

    pub(super) fn delete_offsets_now(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<(Vec<i16>, Option<Written>), GroupError> {
        Self::check_group_id(group_id)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let entry = existing_group_mut(&mut st, group_id)?;
        let subscribed: Option<BTreeSet<String>> = match &entry.kind {
            GroupKind::Classic(g) if g.is_empty() => Some(BTreeSet::new()),
            GroupKind::Classic(g) => match g.subscribed_topics() {
                Some(t) => Some(t.into_iter().collect()),
                // Kafka refuses OffsetDelete on a non-empty group whose subscriptions it
                // cannot read.
                None => return Err(GroupError::NonEmptyGroup),
            },
            GroupKind::Consumer(g) => Some(g.subscribed_topics()),
            GroupKind::Share(g) => Some(g.subscribed_topics()),
            GroupKind::Streams(g) => Some(g.subscribed_topics()),
        };
        let subscribed = subscribed.unwrap_or_default();
        let mut codes = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        let mut removed = Vec::new();
        for (t, p) in partitions {
            if subscribed.contains(t) {
                codes.push(GroupError::GroupSubscribedToTopic.error_code());
                continue;
            }
            // Kafka writes the tombstone for a pending transactional offset too; it drops the
            // pending one, so a later COMMIT does not bring the offset back.
            let key = (t.clone(), *p);
            if entry.offsets.contains_key(&key) || entry.has_pending_txn_offset(&key) {
                records.push((records::offset_commit_key(group_id, t, *p), None));
                removed.push(key);
            }
            codes.push(0);
        }
        let written = self.store.append(group_id, records)?;
        for k in removed {
            entry.remove_offset(&k);
        }
        Ok((codes, written))
    }

    /// Kafka's `GroupCoordinatorShard.cleanupGroupMetadata`, run every
    /// `offsets.retention.check.interval.ms`: each group's expired offsets get tombstones
    /// ([`GroupEntry::expired_offsets`]), and a group left empty with no offsets at all is
    /// deleted (`GroupMetadataManager.maybeDeleteGroup`).
    pub(super) fn cleanup_group_metadata(&self, st: &mut State) {
        let now = now_ms();
        let retention_ms = self.config.offsets_retention_ms;
        let ids: Vec<String> = st.groups.keys().cloned().collect();
        for id in ids {
            self.cleanup_group(st, &id, now, retention_ms);
        }
    }

    fn cleanup_group(&self, st: &mut State, group_id: &str, now_ms: i64, retention_ms: i64) {
        let Some(e) = st.groups.get_mut(group_id) else {
            return;
        };
        let (expired, all_expired) = e.expired_offsets(now_ms, retention_ms);
        let delete = all_expired && e.is_empty();
        if expired.is_empty() && !delete {
            return;
        }
        let mut records: Vec<Record> = expired
            .iter()
            .map(|(t, p)| (records::offset_commit_key(group_id, t, *p), None))
            .collect();
        if delete {
            records.extend(group_record_tombstones(group_id, e));
        }
        if let Err(err) = self.store.append(group_id, records) {
            // The next check tries again.
            tracing::warn!(group = %group_id, error = ?err, "could not write expired offsets");
            return;
        }
        for k in &expired {
            e.offsets.remove(k);
        }
        tracing::info!(group = %group_id, expired = expired.len(), deleted = delete, "group metadata cleanup");
        if delete {
            if let Some(mut e) = st.groups.remove(group_id) {
                if let GroupKind::Classic(g) = &mut e.kind {
                    g.mark_dead();
                }
            }
        }
    }
}
