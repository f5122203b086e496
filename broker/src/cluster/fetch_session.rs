//! Incremental fetch sessions (KIP-227), as Kafka's `FetchManager`, `FetchContext`,
//! `FetchSession` and `FetchSessionCacheShard` keep them.
//!
//! A fetcher (a Java consumer, franz-go, a follower) sends one full fetch naming every
//! partition with session epoch 0; the answer carries a session id. Its later fetches name
//! only the partitions whose fetch position changed (and the ones to drop, the "forgotten"
//! topics), with the epoch the previous answer implies; the broker fetches every partition
//! of the session and answers only those with records, a changed high watermark or log
//! start offset, or an error. A fetcher over many partitions then sends and receives a few
//! bytes per idle partition instead of a full entry each time.
//!
//! Epochs: 0 asks for a new session (a full fetch), -1 asks for none (a full fetch without
//! a session, what every pre-v7 fetch is), anything else is the next fetch of an existing
//! session, which must carry exactly the epoch that follows the last one the broker saw;
//! the broker moves the epoch on when the fetch arrives, so a duplicate is refused
//! (`INVALID_FETCH_SESSION_EPOCH`). A session without partitions is closed.
//!
//! The cache holds `max.incremental.fetch.session.cache.slots` sessions. When it is full, a
//! new session takes the slot of one unused for [`FETCH_SESSION_EVICTION_MS`], or else of
//! one less valuable than itself (a consumer's before a follower's, then the one with fewer
//! partitions), among those created at least that long ago (Kafka's `tryEvict`). A fetch
//! that finds no slot is answered without a session, and the fetcher keeps sending full
//! fetches.
//!
//! Locking: a session's own mutex guards its partitions and epoch. The map of sessions is
//! a `DashMap`; no map guard is held while a session is locked and no session lock while
//! the map is touched, so the two can never wait on each other. Creation and eviction,
//! which look at every session, go one at a time under `admission`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::TopicName;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use uuid::Uuid;

/// No session (`FetchMetadata.INVALID_SESSION_ID`).
pub const INVALID_SESSION_ID: i32 = 0;
/// The epoch of a full fetch that asks for a new session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a full fetch that wants no session (and closes the one it names).
pub const FINAL_EPOCH: i32 = -1;
/// How long a session must go unused before any new session may take its slot, and how
/// old a session must be before a more valuable one may (Kafka's
/// `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`).
pub const FETCH_SESSION_EVICTION_MS: i64 = 120_000;

/// The epoch after `epoch` (Kafka's `FetchMetadata.nextEpoch`): it wraps to 1, never to 0.
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// One partition in a session: by topic id in a session of v13+ fetches, by topic name
/// before (then the id is nil), as Kafka's `CachedPartition.equals` tells them apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    pub topic_id: Uuid,
    pub topic: TopicName,
    pub partition: i32,
}

impl SessionKey {
    /// The key of a partition of a fetch of `version`.
    pub fn new(version: i16, topic: &TopicName, topic_id: Uuid, partition: i32) -> SessionKey {
        if version >= 13 {
            SessionKey {
                topic_id,
                topic: TopicName::default(),
                partition,
            }
        } else {
            SessionKey {
                topic_id: Uuid::nil(),
                topic: topic.clone(),
                partition,
            }
        }
    }
}

/// What a fetcher asks of one partition; a session keeps the last values it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchParams {
    pub fetch_offset: i64,
    /// A follower's own log start offset.
    pub log_start_offset: i64,
    pub partition_max_bytes: i32,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
}

/// A session's copy of one partition (Kafka's `CachedPartition`): the fetcher's last
/// request, and what the fetcher was last told of the high watermark and log start, so
/// that an answer can leave out a partition where nothing changed.
#[derive(Debug, Clone)]
struct CachedPartition {
    key: SessionKey,
    params: FetchParams,
    /// -1 until answered, and again after an error, so the partition is sent once the
    /// error clears.
    high_watermark: i64,
    local_log_start_offset: i64,
}

impl CachedPartition {
    /// Whether `data` must be in the answer (Kafka's `maybeUpdateResponseData`): records,
    /// a changed high watermark or log start offset, an error, or a diverging epoch. With
    /// `update`, remembers what the answer tells.
    fn must_respond(&mut self, data: &PartitionData, update: bool) -> bool {
        let mut must = data.records.as_ref().is_some_and(|r| !r.is_empty());
        if self.high_watermark != data.high_watermark {
            must = true;
            if update {
                self.high_watermark = data.high_watermark;
            }
        }
        if self.local_log_start_offset != data.log_start_offset {
            must = true;
            if update {
                self.local_log_start_offset = data.log_start_offset;
            }
        }
        if data.preferred_read_replica.0 >= 0 {
            must = true;
        }
        if data.error_code != 0 {
            if update {
                self.high_watermark = -1;
            }
            must = true;
        }
        if data.diverging_epoch.epoch >= 0 || data.diverging_epoch.end_offset >= 0 {
            must = true;
        }
        must
    }
}

/// One session.
#[derive(Debug)]
pub struct FetchSession {
    id: i32,
    /// A follower's session: consumers' sessions cannot evict it while it is young.
    privileged: bool,
    /// Keyed by topic id (v13+ fetches) or by name; a session serves only fetches of its kind.
    by_id: bool,
    created_ms: i64,
    last_used_ms: i64,
    /// The epoch the next fetch must carry.
    epoch: i32,
    /// In fetch order: a partition that was answered records moves to the back, so that
    /// the response size limit does not always favour the same partitions.
    partitions: Vec<CachedPartition>,
    index: HashMap<SessionKey, usize>,
}

impl FetchSession {
    fn reindex(&mut self) {
        self.index = self
            .partitions
            .iter()
            .enumerate()
            .map(|(i, p)| (p.key.clone(), i))
            .collect();
    }

    /// Applies an incremental fetch's partitions and forgotten partitions (Kafka's
    /// `FetchSession.update`).
    fn update(&mut self, fetch: &[(SessionKey, FetchParams)], forgotten: &[SessionKey]) {
        for (key, params) in fetch {
            match self.index.get(key) {
                Some(&i) => self.partitions[i].params = *params,
                None => {
                    self.index.insert(key.clone(), self.partitions.len());
                    self.partitions.push(CachedPartition {
                        key: key.clone(),
                        params: *params,
                        high_watermark: -1,
                        local_log_start_offset: -1,
                    });
                }
            }
        }
        let dropped: Vec<usize> = forgotten
            .iter()
            .filter_map(|k| self.index.get(k).copied())
            .collect();
        if !dropped.is_empty() {
            let mut keep = vec![true; self.partitions.len()];
            for i in dropped {
                keep[i] = false;
            }
            let mut keep = keep.into_iter();
            self.partitions.retain(|_| keep.next().unwrap_or(true));
            self.reindex();
        }
    }

    /// Moves the partitions at `answered` (indexes) behind the others, each part in its order.
    fn move_to_back(&mut self, answered: &[usize]) {
        if answered.is_empty() {
            return;
        }
        let mut back = vec![false; self.partitions.len()];
        for &i in answered {
            back[i] = true;
        }
        let (front, rear): (Vec<_>, Vec<_>) = std::mem::take(&mut self.partitions)
            .into_iter()
            .zip(back)
            .partition(|(_, b)| !b);
        self.partitions = front.into_iter().chain(rear).map(|(p, _)| p).collect();
        self.reindex();
    }

    fn snapshot(&self) -> Vec<(SessionKey, FetchParams)> {
        self.partitions
            .iter()
            .map(|p| (p.key.clone(), p.params))
            .collect()
    }

    /// (privileged, partitions, id): the smallest is the least valuable (Kafka's
    /// `EvictableKey` ordering).
    fn evictable_key(&self) -> (bool, usize, i32) {
        (self.privileged, self.partitions.len(), self.id)
    }
}

/// How a fetch relates to sessions (Kafka's `FetchContext` kinds).
#[derive(Debug)]
pub enum FetchContext {
    /// The session named cannot serve this fetch: the answer is this error alone.
    SessionError(ResponseError),
    /// A full fetch that wants no session: answered in full, with session id 0.
    Sessionless,
    /// A full fetch asking for a session: answered in full, with a new session's id if a
    /// slot is free.
    Full { privileged: bool, by_id: bool },
    /// The next fetch of a session: its partitions are the session's.
    Incremental {
        session: Arc<Mutex<FetchSession>>,
        /// The session epoch after this fetch; a different one when answering means a
        /// duplicate fetch of the same epoch overtook this one.
        expected_epoch: i32,
    },
}

/// The answer's session fields and which partitions it carries.
pub struct Answer {
    pub session_id: i32,
    pub error: Option<ResponseError>,
    /// One flag per fetched partition: whether the answer carries it.
    pub keep: Vec<bool>,
}

/// Every session on this broker.
pub struct FetchSessionCache {
    slots: usize,
    sessions: DashMap<i32, Arc<Mutex<FetchSession>>>,
    admission: Mutex<()>,
    evictions: AtomicU64,
}

impl FetchSessionCache {
    /// A cache of at most `slots` sessions (`max.incremental.fetch.session.cache.slots`).
    pub fn new(slots: usize) -> FetchSessionCache {
        FetchSessionCache {
            slots,
            sessions: DashMap::new(),
            admission: Mutex::new(()),
            evictions: AtomicU64::new(0),
        }
    }

    /// Sessions open now (Kafka's `NumIncrementalFetchSessions`).
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Partitions held over all sessions (Kafka's `NumIncrementalFetchPartitionsCached`).
    pub fn partition_count(&self) -> usize {
        self.all().iter().map(|s| s.lock().partitions.len()).sum()
    }

    /// Sessions evicted to make room for others, since start.
    pub fn eviction_count(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    fn all(&self) -> Vec<Arc<Mutex<FetchSession>>> {
        self.sessions.iter().map(|e| e.value().clone()).collect()
    }

    fn get(&self, id: i32) -> Option<Arc<Mutex<FetchSession>>> {
        self.sessions.get(&id).map(|e| e.value().clone())
    }

    /// The context of a fetch with `session_id` and `epoch` (Kafka's `FetchManager.newContext`).
    /// For an incremental fetch, applies its partitions and forgotten partitions to the
    /// session and moves the session epoch on.
    pub fn new_context(
        &self,
        version: i16,
        (session_id, epoch): (i32, i32),
        follower: bool,
        fetch: &[(SessionKey, FetchParams)],
        forgotten: &[SessionKey],
        now_ms: i64,
    ) -> FetchContext {
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            // A full fetch closes the session it names.
            if session_id != INVALID_SESSION_ID && self.sessions.remove(&session_id).is_some() {
                tracing::debug!(session = session_id, "fetch session closed by a full fetch");
            }
            return if epoch == FINAL_EPOCH {
                FetchContext::Sessionless
            } else {
                FetchContext::Full {
                    privileged: follower,
                    by_id: version >= 13,
                }
            };
        }
        let Some(session) = self.get(session_id) else {
            return FetchContext::SessionError(ResponseError::FetchSessionIdNotFound);
        };
        let mut s = session.lock();
        if s.epoch != epoch {
            return FetchContext::SessionError(ResponseError::InvalidFetchSessionEpoch);
        }
        if s.by_id != (version >= 13) {
            return FetchContext::SessionError(ResponseError::FetchSessionTopicIdError);
        }
        s.update(fetch, forgotten);
        if s.partitions.is_empty() {
            drop(s);
            self.sessions.remove(&session_id);
            return FetchContext::Sessionless;
        }
        s.last_used_ms = now_ms;
        s.epoch = next_epoch(s.epoch);
        let expected_epoch = s.epoch;
        drop(s);
        FetchContext::Incremental {
            session,
            expected_epoch,
        }
    }

    /// The partitions a fetch reads when they are not the request's own: the session's, in
    /// its order, for an incremental fetch; none after a session error (Kafka's
    /// `SessionErrorContext.foreachPartition`).
    pub fn partitions(context: &FetchContext) -> Option<Vec<(SessionKey, FetchParams)>> {
        match context {
            FetchContext::Incremental { session, .. } => Some(session.lock().snapshot()),
            FetchContext::SessionError(_) => Some(Vec::new()),
            FetchContext::Sessionless | FetchContext::Full { .. } => None,
        }
    }

    /// Decides the answer's session id and partitions once `fetched` (what was read) has
    /// `results` (Kafka's `updateAndGenerateResponseData`): a full fetch may open a session
    /// holding every partition with what it is answered; an incremental one leaves out the
    /// partitions where nothing changed.
    pub fn answer(
        &self,
        context: &FetchContext,
        fetched: &[(SessionKey, FetchParams)],
        results: &[PartitionData],
        now_ms: i64,
    ) -> Answer {
        let all = vec![true; results.len()];
        match context {
            FetchContext::SessionError(e) => Answer {
                session_id: INVALID_SESSION_ID,
                error: Some(*e),
                keep: vec![false; results.len()],
            },
            FetchContext::Sessionless => Answer {
                session_id: INVALID_SESSION_ID,
                error: None,
                keep: all,
            },
            FetchContext::Full { privileged, by_id } => {
                let partitions = fetched
                    .iter()
                    .zip(results)
                    .map(|((key, params), data)| CachedPartition {
                        key: key.clone(),
                        params: *params,
                        high_watermark: data.high_watermark,
                        local_log_start_offset: data.log_start_offset,
                    })
                    .collect();
                let session_id = self.maybe_create(*privileged, *by_id, partitions, now_ms);
                Answer {
                    session_id,
                    error: None,
                    keep: all,
                }
            }
            FetchContext::Incremental {
                session,
                expected_epoch,
            } => {
                let mut s = session.lock();
                if s.epoch != *expected_epoch {
                    return Answer {
                        session_id: s.id,
                        error: Some(ResponseError::InvalidFetchSessionEpoch),
                        keep: vec![false; results.len()],
                    };
                }
                let mut keep = Vec::with_capacity(results.len());
                let mut answered = Vec::new();
                for ((key, _), data) in fetched.iter().zip(results) {
                    let must = match s.index.get(key).copied() {
                        Some(i) => {
                            let must = s.partitions[i].must_respond(data, true);
                            if must && data.records.as_ref().is_some_and(|r| !r.is_empty()) {
                                answered.push(i);
                            }
                            must
                        }
                        None => false,
                    };
                    keep.push(must);
                }
                s.move_to_back(&answered);
                Answer {
                    session_id: s.id,
                    error: None,
                    keep,
                }
            }
        }
    }

    /// The session fields of a throttled answer, which carries no partitions and leaves the
    /// session as it was (Kafka's `FetchContext.getThrottledResponse`): a session error
    /// stays one; an incremental fetch answers its session's id, or
    /// INVALID_FETCH_SESSION_EPOCH if another fetch of that epoch overtook it; a full fetch
    /// opens no session.
    pub fn throttled(context: &FetchContext) -> (i32, Option<ResponseError>) {
        match context {
            FetchContext::SessionError(e) => (INVALID_SESSION_ID, Some(*e)),
            FetchContext::Sessionless | FetchContext::Full { .. } => (INVALID_SESSION_ID, None),
            FetchContext::Incremental {
                session,
                expected_epoch,
            } => {
                let s = session.lock();
                let error =
                    (s.epoch != *expected_epoch).then_some(ResponseError::InvalidFetchSessionEpoch);
                (s.id, error)
            }
        }
    }

    /// Opens a session if a slot is free or can be freed (Kafka's `maybeCreateSession`);
    /// returns its id, or [`INVALID_SESSION_ID`].
    fn maybe_create(
        &self,
        privileged: bool,
        by_id: bool,
        partitions: Vec<CachedPartition>,
        now_ms: i64,
    ) -> i32 {
        let _admission = self.admission.lock();
        if self.sessions.len() >= self.slots
            && !self.try_evict(privileged, partitions.len(), now_ms)
        {
            return INVALID_SESSION_ID;
        }
        let id = loop {
            let id = (Uuid::new_v4().as_u128() as u32 & i32::MAX as u32) as i32;
            if id != INVALID_SESSION_ID && !self.sessions.contains_key(&id) {
                break id;
            }
        };
        let mut session = FetchSession {
            id,
            privileged,
            by_id,
            created_ms: now_ms,
            last_used_ms: now_ms,
            epoch: next_epoch(INITIAL_EPOCH),
            partitions,
            index: HashMap::new(),
        };
        session.reindex();
        tracing::debug!(
            session = id,
            privileged,
            partitions = session.partitions.len(),
            "fetch session opened"
        );
        self.sessions.insert(id, Arc::new(Mutex::new(session)));
        id
    }

    /// Frees one slot for a new session of `size` partitions (Kafka's `tryEvict`): the
    /// session unused longest if unused for [`FETCH_SESSION_EVICTION_MS`]; else the least
    /// valuable one the newcomer may displace, if the newcomer is worth more.
    fn try_evict(&self, privileged: bool, size: usize, now_ms: i64) -> bool {
        struct Seen {
            id: i32,
            last_used_ms: i64,
            created_ms: i64,
            key: (bool, usize, i32),
        }
        let seen: Vec<Seen> = self
            .all()
            .iter()
            .map(|s| {
                let s = s.lock();
                Seen {
                    id: s.id,
                    last_used_ms: s.last_used_ms,
                    created_ms: s.created_ms,
                    key: s.evictable_key(),
                }
            })
            .collect();
        let Some(stalest) = seen.iter().min_by_key(|s| (s.last_used_ms, s.id)) else {
            return false;
        };
        let victim = if now_ms - stalest.last_used_ms > FETCH_SESSION_EVICTION_MS {
            Some(stalest.id)
        } else {
            // A follower's session may displace any consumer's; otherwise only a session
            // older than the eviction time can be displaced.
            seen.iter()
                .filter(|s| {
                    let old = now_ms - s.created_ms > FETCH_SESSION_EVICTION_MS;
                    old || (privileged && !s.key.0)
                })
                .min_by_key(|s| s.key)
                .filter(|s| (privileged, size, 0) >= s.key)
                .map(|s| s.id)
        };
        match victim {
            Some(id) => {
                self.sessions.remove(&id);
                self.evictions.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kafka_protocol::protocol::StrBytes;

    fn key(topic: &str, partition: i32) -> SessionKey {
        SessionKey::new(
            12,
            &TopicName(StrBytes::from_string(topic.to_string())),
            Uuid::nil(),
            partition,
        )
    }

    fn params(offset: i64) -> FetchParams {
        FetchParams {
            fetch_offset: offset,
            log_start_offset: -1,
            partition_max_bytes: 1 << 20,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
        }
    }

    fn data(hw: i64, records: usize) -> PartitionData {
        PartitionData::default()
            .with_high_watermark(hw)
            .with_log_start_offset(0)
            .with_records(Some(Bytes::from(vec![0u8; records])))
    }

    /// Opens a session over `parts` with a full fetch, answered with high watermark 10.
    fn open(cache: &FetchSessionCache, parts: &[SessionKey], follower: bool, now: i64) -> i32 {
        let fetch: Vec<_> = parts.iter().map(|k| (k.clone(), params(0))).collect();
        let ctx = cache.new_context(12, (0, INITIAL_EPOCH), follower, &fetch, &[], now);
        let results: Vec<_> = fetch.iter().map(|_| data(10, 0)).collect();
        cache.answer(&ctx, &fetch, &results, now).session_id
    }

    #[test]
    fn epochs_wrap_to_one_and_final_stays_final() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(FINAL_EPOCH), FINAL_EPOCH);
    }

    #[test]
    fn an_incremental_fetch_answers_only_changed_partitions_and_moves_answered_ones_back() {
        let cache = FetchSessionCache::new(10);
        let (a, b, c) = (key("t", 0), key("t", 1), key("t", 2));
        let id = open(&cache, &[a.clone(), b.clone(), c.clone()], false, 0);
        assert_ne!(id, INVALID_SESSION_ID);
        // Nothing named: the session's three partitions are read.
        let ctx = cache.new_context(12, (id, 1), false, &[], &[], 1);
        let fetched = FetchSessionCache::partitions(&ctx).unwrap();
        assert_eq!(fetched.len(), 3);
        // a has records, b a new high watermark, c nothing new.
        let results = vec![data(10, 5), data(11, 0), data(10, 0)];
        let ans = cache.answer(&ctx, &fetched, &results, 1);
        assert_eq!((ans.session_id, ans.error), (id, None));
        assert_eq!(ans.keep, vec![true, true, false]);
        // a moved behind b and c.
        let ctx = cache.new_context(12, (id, 2), false, &[], &[], 2);
        let order: Vec<_> = FetchSessionCache::partitions(&ctx)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k.partition)
            .collect();
        assert_eq!(order, vec![1, 2, 0]);
    }

    #[test]
    fn a_replayed_epoch_or_unknown_session_is_refused() {
        let cache = FetchSessionCache::new(10);
        let id = open(&cache, &[key("t", 0)], false, 0);
        let ctx = cache.new_context(12, (id, 1), false, &[], &[], 1);
        assert!(matches!(ctx, FetchContext::Incremental { .. }));
        let again = cache.new_context(12, (id, 1), false, &[], &[], 1);
        assert!(matches!(
            again,
            FetchContext::SessionError(ResponseError::InvalidFetchSessionEpoch)
        ));
        let unknown = cache.new_context(12, (id ^ 1, 1), false, &[], &[], 1);
        assert!(matches!(
            unknown,
            FetchContext::SessionError(ResponseError::FetchSessionIdNotFound)
        ));
        // A session of v12 fetches cannot serve a v13 one.
        let by_id = cache.new_context(13, (id, 2), false, &[], &[], 1);
        assert!(matches!(
            by_id,
            FetchContext::SessionError(ResponseError::FetchSessionTopicIdError)
        ));
    }

    #[test]
    fn forgetting_every_partition_closes_the_session_and_a_full_fetch_replaces_it() {
        let cache = FetchSessionCache::new(10);
        let id = open(&cache, &[key("t", 0)], false, 0);
        let ctx = cache.new_context(12, (id, 1), false, &[], &[key("t", 0)], 1);
        assert!(matches!(ctx, FetchContext::Sessionless));
        assert_eq!(cache.session_count(), 0);
        let id = open(&cache, &[key("t", 0)], false, 0);
        let ctx = cache.new_context(12, (id, INITIAL_EPOCH), false, &[], &[], 1);
        assert!(matches!(ctx, FetchContext::Full { .. }));
        assert_eq!(
            cache.session_count(),
            0,
            "the full fetch closed the session it named"
        );
    }

    #[test]
    fn forgetting_one_partition_keeps_the_others_in_order() {
        let cache = FetchSessionCache::new(10);
        let id = open(&cache, &[key("t", 0), key("t", 1), key("t", 2)], false, 0);
        let ctx = cache.new_context(12, (id, 1), false, &[], &[key("t", 1), key("u", 9)], 1);
        let order: Vec<_> = FetchSessionCache::partitions(&ctx)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k.partition)
            .collect();
        assert_eq!(order, vec![0, 2]);
        assert_eq!(cache.partition_count(), 2);
    }

    #[test]
    fn a_full_cache_admits_a_follower_over_a_consumer_and_a_stale_session_over_anyone() {
        let cache = FetchSessionCache::new(1);
        let consumer = open(&cache, &[key("t", 0)], false, 0);
        // Another consumer of the same size is not worth more: no session.
        assert_eq!(open(&cache, &[key("t", 0)], false, 1), INVALID_SESSION_ID);
        // A follower displaces a consumer at once.
        let follower = open(&cache, &[key("t", 0)], true, 2);
        assert_ne!(follower, INVALID_SESSION_ID);
        assert!(cache.get(consumer).is_none());
        assert_eq!(cache.eviction_count(), 1);
        // A young follower session is not displaced by a consumer with more partitions...
        assert_eq!(
            open(&cache, &[key("t", 0), key("t", 1)], false, 3),
            INVALID_SESSION_ID
        );
        // ...but is once it has gone unused for the eviction time.
        let later = 3 + FETCH_SESSION_EVICTION_MS + 1;
        assert_ne!(
            open(&cache, &[key("t", 0)], false, later),
            INVALID_SESSION_ID
        );
        assert!(cache.get(follower).is_none());
    }

    #[test]
    fn no_slots_means_no_sessions() {
        let cache = FetchSessionCache::new(0);
        assert_eq!(open(&cache, &[key("t", 0)], true, 0), INVALID_SESSION_ID);
    }
}
