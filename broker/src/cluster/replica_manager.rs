//! The ReplicaManager owns every partition on this node and the topic metadata that names
//! them. The API handlers go through it for appends, reads and topic changes.
//!
//! Hot paths (produce, fetch) only touch the `DashMap` of partitions, which is sharded; the
//! metadata image behind its `RwLock` is read on Metadata requests and written only by topic
//! administration.

use kafka_protocol::ResponseError;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use dashmap::DashMap;
use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::watch;
use uuid::Uuid;

use super::partition::{Partition, Role};
use super::replica_fetcher::ReplicaFetchers;
use crate::config::{BrokerConfig, ConfigError};
use crate::controller::{AlterPartitionRequest, ClusterImage, Controller};
use crate::fault::FaultEngine;
use crate::log::checkpoint::{
    self, OffsetMap, HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
};
use crate::log::loader::LogCheckpoints;
use crate::log::{LogError, UnifiedLog};
use crate::metadata::{validate_topic_name, MetadataError, MetadataImage, TopicMeta};

/// Written at clean shutdown; its absence at start-up means the logs need recovery.
pub const CLEAN_SHUTDOWN_FILE: &str = ".brook_cleanshutdown";
/// Producer ids are handed out in blocks; one metadata write per block.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
/// Upper bound on partitions in one topic (Kafka has none, but a typo should not create
/// a million directories).
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 10_000;

/// Errors of topic administration and partition lookup.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("unknown topic or partition {0}")]
    UnknownTopicOrPartition(String),
    #[error("unknown topic id {0}")]
    UnknownTopicId(Uuid),
    #[error("topic {0} already exists")]
    TopicExists(String),
    #[error("{0}")]
    InvalidTopic(String),
    #[error("invalid partitions: {0}")]
    InvalidPartitions(String),
    #[error("invalid replication factor: {0}")]
    InvalidReplicationFactor(String),
    #[error("invalid config: {0}")]
    InvalidConfig(#[from] ConfigError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    #[error("storage error: {0}")]
    Io(#[from] std::io::Error),
}

impl ReplicaError {
    /// The Kafka error a client sees for this error.
    pub fn response_error(&self) -> ResponseError {
        match self {
            ReplicaError::UnknownTopicOrPartition(_) => ResponseError::UnknownTopicOrPartition,
            ReplicaError::UnknownTopicId(_) => ResponseError::UnknownTopicId,
            ReplicaError::TopicExists(_) => ResponseError::TopicAlreadyExists,
            ReplicaError::InvalidTopic(_) => ResponseError::InvalidTopicException,
            ReplicaError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
            ReplicaError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
            ReplicaError::InvalidConfig(_) => ResponseError::InvalidConfig,
            ReplicaError::Log(e) => e.response_error(),
            ReplicaError::Metadata(_) | ReplicaError::Io(_) => ResponseError::KafkaStorageError,
        }
    }

    /// Its code on the wire.
    pub fn error_code(&self) -> i16 {
        self.response_error().code()
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Replication events on this node, counted where they happen (Kafka's `ReplicaManager`
/// meters `IsrShrinksPerSec` and `IsrExpandsPerSec`), read by `/metrics`.
#[derive(Debug, Default)]
pub struct ReplicationStats {
    /// ISR shrinks of partitions this node leads, once the controller committed them.
    pub isr_shrinks: Counter,
    /// ISR expansions of partitions this node leads, once the controller committed them.
    pub isr_expands: Counter,
    /// Follower truncations to a leader's diverging epoch (shared with the fetchers).
    pub follower_truncations: Counter,
}

/// All partitions of this node and the metadata that names them.
pub struct ReplicaManager {
    pub config: Arc<BrokerConfig>,
    /// Replication events, for `/metrics`.
    pub stats: ReplicationStats,
    partitions: DashMap<(String, i32), Arc<Partition>>,
    /// Topic id to name, for Produce v13 and Fetch v13+ which name topics by id.
    topic_names: DashMap<Uuid, String>,
    image: RwLock<MetadataImage>,
    /// Serialises topic administration so that create/delete/alter see a consistent image.
    admin: Mutex<()>,
    next_producer_id: AtomicI64,
    producer_id_block_end: Mutex<i64>,
    /// The metadata quorum, in cluster mode (`process.roles` includes controller).
    controller: std::sync::OnceLock<Controller>,
    /// Follower fetchers, one per source broker.
    fetchers: Mutex<ReplicaFetchers>,
    /// Bumped after each metadata image is applied, for callers waiting to see their change.
    applied: watch::Sender<u64>,
    /// Cluster mode: the metadata offset this node had replayed locally at start-up. Roles
    /// are only taken from an image that holds this process's own registration (recorded
    /// after it), so a restarted node never acts on the stale leadership it remembers.
    startup_metadata_offset: AtomicI64,
    /// Cluster mode: an applied image held this process's registration, unfenced, so every
    /// partition it hosts has its role. Clients are served only from then on.
    roles_applied: AtomicBool,
    /// Cluster mode: one cluster id for every node, derived from the voter set.
    quorum_cluster_id: std::sync::OnceLock<String>,
    /// Cluster mode: the producer id block this node hands out from (next, end).
    quorum_pid_block: tokio::sync::Mutex<(i64, i64)>,
    /// Whether the clean-shutdown marker was there at start-up. In cluster mode partition logs
    /// are opened as metadata images name them, after start-up; without the marker each is
    /// recovered (Kafka's `LogManager.loadLogs` passes the same flag to every `LogLoader`).
    had_clean_shutdown: bool,
    /// The broker epoch the clean-shutdown marker recorded: the epoch of the incarnation that
    /// shut down cleanly, which the next registration names so that the controller can tell a
    /// clean restart from an unclean one (Kafka's `previousBrokerEpoch`, KIP-966). `None` after
    /// a crash, on a fresh directory, or when the previous run had no broker epoch.
    previous_broker_epoch: Option<i64>,
    /// The log directory's checkpoints as read at start-up; each partition takes its entries
    /// when it is opened (at start-up on a single node, from the first metadata image in
    /// cluster mode). From then on the partitions own the offsets, and
    /// [`Self::write_checkpoint`] writes them back.
    startup_checkpoints: Mutex<StartupCheckpoints>,
    /// Serialises checkpoint writes (the periodic task and shutdown).
    checkpoint_write: Mutex<()>,
}

/// The three per-directory checkpoint files (Kafka's `OffsetCheckpointFile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetCheckpoint {
    /// `recovery-point-offset-checkpoint` (log.flush.offset.checkpoint.interval.ms).
    RecoveryPoint,
    /// `log-start-offset-checkpoint` (log.flush.start.offset.checkpoint.interval.ms).
    LogStartOffset,
    /// `replication-offset-checkpoint` (replica.high.watermark.checkpoint.interval.ms).
    HighWatermark,
}

impl OffsetCheckpoint {
    /// Every checkpoint, for shutdown.
    pub const ALL: [OffsetCheckpoint; 3] = [
        OffsetCheckpoint::RecoveryPoint,
        OffsetCheckpoint::LogStartOffset,
        OffsetCheckpoint::HighWatermark,
    ];

    /// The file name in the log directory.
    pub fn file(self) -> &'static str {
        match self {
            OffsetCheckpoint::RecoveryPoint => RECOVERY_POINT_CHECKPOINT,
            OffsetCheckpoint::LogStartOffset => LOG_START_OFFSET_CHECKPOINT,
            OffsetCheckpoint::HighWatermark => HIGH_WATERMARK_CHECKPOINT,
        }
    }

    /// The partition's current offset that this checkpoint records.
    fn offset_of(self, p: &Partition) -> i64 {
        match self {
            OffsetCheckpoint::RecoveryPoint => p.recovery_point(),
            OffsetCheckpoint::LogStartOffset => p.offsets().0,
            OffsetCheckpoint::HighWatermark => p.high_watermark(),
        }
    }
}

/// What the checkpoint files held at start-up, not yet taken by a partition.
#[derive(Default)]
struct StartupCheckpoints {
    recovery_points: OffsetMap,
    log_start_offsets: OffsetMap,
    high_watermarks: OffsetMap,
}

impl StartupCheckpoints {
    fn read(dir: &Path) -> Self {
        StartupCheckpoints {
            recovery_points: read_or_empty(dir, RECOVERY_POINT_CHECKPOINT),
            log_start_offsets: read_or_empty(dir, LOG_START_OFFSET_CHECKPOINT),
            high_watermarks: read_or_empty(dir, HIGH_WATERMARK_CHECKPOINT),
        }
    }

    /// Takes one partition's entries: the log's, and the high watermark.
    fn take(&mut self, topic: &str, partition: i32) -> (LogCheckpoints, Option<i64>) {
        let key = (topic.to_string(), partition);
        let log = LogCheckpoints {
            recovery_point: self.recovery_points.remove(&key),
            log_start_offset: self.log_start_offsets.remove(&key),
        };
        (log, self.high_watermarks.remove(&key))
    }

    /// The entries of `which` that no partition has taken yet.
    fn untaken(&self, which: OffsetCheckpoint) -> &OffsetMap {
        match which {
            OffsetCheckpoint::RecoveryPoint => &self.recovery_points,
            OffsetCheckpoint::LogStartOffset => &self.log_start_offsets,
            OffsetCheckpoint::HighWatermark => &self.high_watermarks,
        }
    }
}

/// A damaged checkpoint costs a full recovery (or a high watermark learnt again from the
/// leader), never the start: Kafka's `LogManager` resets a bad recovery-point file the same way.
fn read_or_empty(dir: &Path, name: &str) -> OffsetMap {
    checkpoint::read_offsets(dir, name).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "ignoring a damaged checkpoint");
        OffsetMap::new()
    })
}

impl ReplicaManager {
    /// Opens the log directory: loads metadata, recovers every partition's log.
    pub fn open(config: Arc<BrokerConfig>) -> Result<Self, ReplicaError> {
        let dir = config.log_dir.clone();
        std::fs::create_dir_all(&dir)?;
        remove_deleted_dirs(&dir);
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        // A directory without metadata is new: nothing to recover.
        let fresh = !dir.join(crate::metadata::METADATA_FILE).exists();
        let clean = fresh || marker.exists();
        let previous_broker_epoch = marker
            .exists()
            .then(|| read_clean_shutdown_epoch(&marker))
            .flatten();
        if marker.exists() {
            // Removed now so that a crash from here on is detected at the next start.
            std::fs::remove_file(&marker)?;
        }
        if !clean {
            tracing::info!(dir = %dir.display(), "no clean-shutdown marker: recovering logs");
        }
        let image = MetadataImage::load_or_create(&dir, config.cluster_id.as_deref())?;
        let mut startup_checkpoints = StartupCheckpoints::read(&dir);
        let partitions = DashMap::new();
        let now = now_ms();
        for topic in image.topics.values() {
            let log_config = config.log_config(&image.broker_configs, &topic.configs)?;
            for p in 0..topic.partitions {
                // A single node's high watermark is its log end offset: it is the only replica.
                let (checkpoints, _) = startup_checkpoints.take(&topic.name, p);
                let log = UnifiedLog::open_at(
                    partition_dir(&dir, &topic.name, p),
                    log_config.clone(),
                    clean,
                    checkpoints,
                    now,
                )?;
                let part = Partition::new(
                    topic.name.clone(),
                    topic.id,
                    p,
                    config.node_id,
                    config.min_insync_replicas(&image.broker_configs, &topic.configs),
                    config.replica_lag_time_max_ms,
                    log,
                );
                partitions.insert((topic.name.clone(), p), Arc::new(part));
            }
        }
        let next_pid = image.next_producer_id_block;
        let topic_names = image
            .topics
            .values()
            .map(|t| (t.id, t.name.clone()))
            .collect();
        let stats = ReplicationStats::default();
        let fetchers = ReplicaFetchers::new(stats.follower_truncations.clone());
        Ok(ReplicaManager {
            config,
            stats,
            partitions,
            topic_names,
            image: RwLock::new(image),
            admin: Mutex::new(()),
            next_producer_id: AtomicI64::new(next_pid),
            producer_id_block_end: Mutex::new(next_pid),
            controller: std::sync::OnceLock::new(),
            fetchers: Mutex::new(fetchers),
            applied: watch::channel(0).0,
            quorum_pid_block: tokio::sync::Mutex::new((0, 0)),
            startup_metadata_offset: AtomicI64::new(i64::MAX),
            roles_applied: AtomicBool::new(false),
            quorum_cluster_id: std::sync::OnceLock::new(),
            had_clean_shutdown: clean,
            previous_broker_epoch,
            startup_checkpoints: Mutex::new(startup_checkpoints),
            checkpoint_write: Mutex::new(()),
        })
    }

    /// The broker epoch of the incarnation that last shut this log directory down cleanly.
    pub fn previous_broker_epoch(&self) -> Option<i64> {
        self.previous_broker_epoch
    }

    /// The cluster id.
    pub fn cluster_id(&self) -> String {
        if let Some(id) = self.quorum_cluster_id.get() {
            return id.clone();
        }
        self.image.read().cluster_id.clone()
    }

    /// A copy of one topic's metadata.
    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        self.image.read().topics.get(name).cloned()
    }

    /// A copy of one topic's metadata, by id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<TopicMeta> {
        self.image.read().topic_by_id(id).cloned()
    }

    /// A topic's name, by id, without touching the metadata image.
    pub fn topic_name_by_id(&self, id: Uuid) -> Option<String> {
        self.topic_names.get(&id).map(|n| n.clone())
    }

    /// Copies of all topics' metadata.
    pub fn topics(&self) -> Vec<TopicMeta> {
        self.image.read().topics.values().cloned().collect()
    }

    /// Looks up a partition.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.partitions
            .get(&(topic.to_string(), index))
            .map(|p| p.clone())
    }

    /// Every partition, for background work (retention) and shutdown.
    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions.iter().map(|e| e.value().clone()).collect()
    }

    /// Creates a topic. `partitions`/`replication_factor` of -1 mean the broker defaults.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicMeta, ReplicaError> {
        validate_topic_name(name).map_err(ReplicaError::InvalidTopic)?;
        let partitions = if partitions == -1 {
            self.config.num_partitions
        } else {
            partitions
        };
        if partitions <= 0 || partitions > MAX_PARTITIONS_PER_TOPIC {
            return Err(ReplicaError::InvalidPartitions(format!(
                "number of partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}, got {partitions}"
            )));
        }
        let rf = if replication_factor == -1 {
            self.config.default_replication_factor
        } else {
            replication_factor
        };
        if rf <= 0 {
            return Err(ReplicaError::InvalidReplicationFactor(format!(
                "replication factor must be larger than 0, got {rf}"
            )));
        }
        if rf > 1 {
            return Err(ReplicaError::InvalidReplicationFactor(format!(
                "replication factor {rf} is larger than the number of available brokers: 1"
            )));
        }
        self.config
            .validate_topic_configs(&self.dynamic_broker_configs(), &configs)?;
        let _admin = self.admin.lock();
        if self.image.read().topics.contains_key(name) {
            return Err(ReplicaError::TopicExists(name.to_string()));
        }
        // Kafka refuses names that collide once '.' and '_' are treated alike (metric names).
        let collides = |a: &str| a.replace('.', "_") == name.replace('.', "_");
        if let Some(other) = self.image.read().topics.keys().find(|t| collides(t)) {
            return Err(ReplicaError::InvalidTopic(format!(
                "topic {name:?} collides with existing topic {other:?}"
            )));
        }
        let meta = TopicMeta {
            name: name.to_string(),
            id: Uuid::new_v4(),
            partitions,
            replication_factor: rf,
            configs,
        };
        if validate_only {
            return Ok(meta);
        }
        self.open_local_partitions(&meta, 0..partitions)?;
        self.topic_names.insert(meta.id, name.to_string());
        let mut image = self.image.write();
        image.topics.insert(name.to_string(), meta.clone());
        image.persist(&self.config.log_dir)?;
        tracing::info!(topic = name, partitions, "created topic");
        Ok(meta)
    }

    /// Opens (creating if needed) the logs of a single-node topic's partitions in `range`,
    /// led by this node.
    fn open_local_partitions(
        &self,
        meta: &TopicMeta,
        range: std::ops::Range<i32>,
    ) -> Result<(), ReplicaError> {
        let dynamic = self.dynamic_broker_configs();
        let log_config = self.config.log_config(&dynamic, &meta.configs)?;
        let min_isr = self.config.min_insync_replicas(&dynamic, &meta.configs);
        let now = now_ms();
        for p in range {
            let log = UnifiedLog::open(
                partition_dir(&self.config.log_dir, &meta.name, p),
                log_config.clone(),
                true,
                now,
            )?;
            let part = Partition::new(
                meta.name.clone(),
                meta.id,
                p,
                self.config.node_id,
                min_isr,
                self.config.replica_lag_time_max_ms,
                log,
            );
            self.partitions
                .insert((meta.name.clone(), p), Arc::new(part));
        }
        Ok(())
    }

    /// Deletes a topic and its data.
    pub fn delete_topic(&self, name: &str) -> Result<TopicMeta, ReplicaError> {
        let _admin = self.admin.lock();
        let meta = {
            let mut image = self.image.write();
            let meta = image
                .topics
                .remove(name)
                .ok_or_else(|| ReplicaError::UnknownTopicOrPartition(name.to_string()))?;
            image.persist(&self.config.log_dir)?;
            meta
        };
        self.topic_names.remove(&meta.id);
        for p in 0..meta.partitions {
            if let Some((_, part)) = self.partitions.remove(&(name.to_string(), p)) {
                if let Err(e) = part.delete_dir() {
                    tracing::warn!(topic = name, partition = p, error = %e, "could not delete partition directory");
                }
            }
        }
        tracing::info!(topic = name, "deleted topic");
        Ok(meta)
    }

    /// Adds partitions to a topic (CreatePartitions).
    pub fn create_partitions(
        &self,
        name: &str,
        new_total: i32,
        validate_only: bool,
    ) -> Result<(), ReplicaError> {
        let _admin = self.admin.lock();
        let meta = self
            .topic(name)
            .ok_or_else(|| ReplicaError::UnknownTopicOrPartition(name.to_string()))?;
        if new_total <= meta.partitions {
            return Err(ReplicaError::InvalidPartitions(format!(
                "topic currently has {} partitions, {new_total} would not be an increase",
                meta.partitions
            )));
        }
        if new_total > MAX_PARTITIONS_PER_TOPIC {
            return Err(ReplicaError::InvalidPartitions(format!(
                "at most {MAX_PARTITIONS_PER_TOPIC} partitions"
            )));
        }
        if validate_only {
            return Ok(());
        }
        self.open_local_partitions(&meta, meta.partitions..new_total)?;
        let mut image = self.image.write();
        if let Some(t) = image.topics.get_mut(name) {
            t.partitions = new_total;
        }
        image.persist(&self.config.log_dir)?;
        Ok(())
    }

    /// Replaces a topic's config overrides and applies them to its logs.
    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), ReplicaError> {
        let _admin = self.admin.lock();
        let meta = self
            .topic(name)
            .ok_or_else(|| ReplicaError::UnknownTopicOrPartition(name.to_string()))?;
        let dynamic = self.dynamic_broker_configs();
        self.config.validate_topic_configs(&dynamic, &configs)?;
        if validate_only {
            return Ok(());
        }
        self.reconfigure_topic(&dynamic, name, meta.partitions, &configs)?;
        let mut image = self.image.write();
        if let Some(t) = image.topics.get_mut(name) {
            t.configs = configs;
        }
        image.persist(&self.config.log_dir)?;
        Ok(())
    }

    /// Applies a topic's effective configs to the logs of its partitions here.
    fn reconfigure_topic(
        &self,
        dynamic: &crate::config::DynamicBrokerConfigs,
        name: &str,
        partitions: i32,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), ReplicaError> {
        let log_config = self.config.log_config(dynamic, configs)?;
        let min_isr = self.config.min_insync_replicas(dynamic, configs);
        for p in 0..partitions {
            if let Some(part) = self.partition(name, p) {
                part.update_config(log_config.clone(), min_isr);
            }
        }
        Ok(())
    }

    /// The dynamic broker configs in force (from brook-metadata.json on a single node, a copy
    /// of the quorum image's in a cluster).
    pub fn dynamic_broker_configs(&self) -> crate::config::DynamicBrokerConfigs {
        self.image.read().broker_configs.clone()
    }

    /// Single node: replaces the dynamic configs of one broker resource (a node id, or "" for
    /// the cluster default), persists them, and re-applies every topic's log settings, since
    /// topic defaults derive from them (Kafka's `DynamicLogConfig.reconfigure`).
    pub fn set_broker_configs(
        &self,
        resource: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ReplicaError> {
        let _admin = self.admin.lock();
        let mut dynamic = self.dynamic_broker_configs();
        if configs.is_empty() {
            dynamic.remove(resource);
        } else {
            dynamic.insert(resource.to_string(), configs);
        }
        for t in self.topics() {
            self.config.log_config(&dynamic, &t.configs)?;
        }
        for t in self.topics() {
            self.reconfigure_topic(&dynamic, &t.name, t.partitions, &t.configs)?;
        }
        let mut image = self.image.write();
        image.broker_configs = dynamic;
        image.persist(&self.config.log_dir)?;
        Ok(())
    }

    /// The metadata quorum, in cluster mode.
    pub fn controller(&self) -> Option<&Controller> {
        self.controller.get()
    }

    /// Switches to cluster mode: topics, leaders and ISRs come from the quorum from now on.
    pub fn attach_controller(&self, controller: Controller) {
        let offset = controller.image().borrow().metadata_offset;
        self.startup_metadata_offset
            .store(offset as i64, Ordering::Release);
        let voters = self
            .config
            .values
            .get("controller.quorum.voters")
            .cloned()
            .unwrap_or_default();
        let id = self
            .config
            .cluster_id
            .clone()
            .unwrap_or_else(|| crate::metadata::cluster_id_from_seed(&voters));
        let _ = self.quorum_cluster_id.set(id);
        let _ = self.controller.set(controller);
    }

    /// Waits (bounded) until the applied metadata satisfies `done`.
    pub async fn wait_for_metadata<F: Fn(&ReplicaManager) -> bool>(
        &self,
        timeout: std::time::Duration,
        done: F,
    ) -> bool {
        let mut rx = self.applied.subscribe();
        let wait = async {
            loop {
                if done(self) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok() && done(self)
    }

    /// Whether this node may serve clients: always on a single node; in cluster mode once an
    /// applied image held its own registration, unfenced, and gave every hosted partition its
    /// role (what Kafka's `BrokerServer.startup` waits for before it opens the listeners).
    pub fn ready_to_serve(&self) -> bool {
        self.controller.get().is_none() || self.roles_applied.load(Ordering::Acquire)
    }

    /// Whether broker `id` is registered and unfenced in the committed metadata image (Kafka's
    /// `MetadataCache.hasAliveBroker`); a single node has no other brokers to ask about.
    pub fn is_broker_alive(&self, id: i32) -> bool {
        match self.controller.get() {
            Some(c) => c
                .image()
                .borrow()
                .brokers
                .get(&id)
                .is_some_and(|b| !b.fenced),
            None => id == self.config.node_id,
        }
    }

    /// Changes after each applied metadata image (the group coordinator follows leadership
    /// of the offsets topic with it).
    pub fn metadata_applied(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }

    /// Applies a committed metadata image: topics, and this node's role for every partition
    /// it hosts (leader, follower with a fetcher, or gone).
    pub fn apply_image(&self, image: &ClusterImage, faults: &Arc<FaultEngine>) {
        let Some(controller) = self.controller.get() else {
            return;
        };
        let me = self.config.node_id;
        let now = now_ms();
        let startup = self.startup_metadata_offset.load(Ordering::Acquire);
        let registered = image
            .brokers
            .get(&me)
            .is_some_and(|b| !b.fenced && b.registration_offset as i64 > startup);
        let mut topics = BTreeMap::new();
        for t in image.topics.values() {
            let rf = t
                .partitions
                .first()
                .map(|p| p.replicas.len() as i16)
                .unwrap_or(0);
            topics.insert(
                t.name.clone(),
                TopicMeta {
                    name: t.name.clone(),
                    id: t.id,
                    partitions: t.partitions.len() as i32,
                    replication_factor: rf,
                    configs: t.configs.clone(),
                },
            );
        }
        // Partitions this node should no longer host: deleted topics, moved replicas.
        let stale: Vec<(String, i32)> = self
            .partitions
            .iter()
            .filter(|e| {
                let p = e.value();
                image
                    .topics
                    .get(&p.topic_id)
                    .and_then(|t| t.partitions.iter().find(|r| r.index == p.index))
                    .is_none_or(|r| !r.replicas.contains(&me))
            })
            .map(|e| e.key().clone())
            .collect();
        for key in stale {
            self.stop_fetcher(&key);
            if let Some((_, part)) = self.partitions.remove(&key) {
                self.topic_names.remove(&part.topic_id);
                if let Err(e) = part.delete_dir() {
                    tracing::warn!(topic = %key.0, partition = key.1, error = %e, "could not delete partition directory");
                }
            }
        }
        for t in image.topics.values() {
            self.topic_names.insert(t.id, t.name.clone());
            let log_config = match self.config.log_config(&image.broker_configs, &t.configs) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(topic = %t.name, error = %e, "topic configs are invalid; keeping the old ones");
                    continue;
                }
            };
            let min_isr = self
                .config
                .min_insync_replicas(&image.broker_configs, &t.configs);
            for reg in &t.partitions {
                if !reg.replicas.contains(&me) {
                    continue;
                }
                let key = (t.name.clone(), reg.index);
                let part = match self.partitions.get(&key).map(|p| p.clone()) {
                    Some(p) => {
                        p.update_config(log_config.clone(), min_isr);
                        p
                    }
                    None => {
                        match self.open_replica_log(&t.name, reg.index, log_config.clone(), now) {
                            Ok((log, checkpointed_hw)) => {
                                let p = Arc::new(Partition::new_replica(
                                    t.name.clone(),
                                    t.id,
                                    reg.index,
                                    me,
                                    min_isr,
                                    self.config.replica_lag_time_max_ms,
                                    log,
                                ));
                                if let Some(hw) = checkpointed_hw {
                                    p.restore_high_watermark(hw);
                                }
                                self.partitions.insert(key.clone(), p.clone());
                                p
                            }
                            Err(e) => {
                                tracing::error!(topic = %t.name, partition = reg.index, error = %e, "cannot open partition log");
                                continue;
                            }
                        }
                    }
                };
                if !registered {
                    continue;
                }
                if let Some(role) = part.apply_registration(
                    reg.leader,
                    reg.leader_epoch,
                    reg.partition_epoch,
                    reg.replicas.clone(),
                    reg.isr.clone(),
                    now,
                ) {
                    let mut fetchers = self.fetchers.lock();
                    match role {
                        Role::Follower { leader } => fetchers.follow(
                            part.clone(),
                            leader,
                            me,
                            controller.image(),
                            faults.clone(),
                        ),
                        _ => fetchers.unfollow(&key),
                    }
                }
            }
        }
        {
            let mut img = self.image.write();
            img.topics = topics;
            img.broker_configs = image.broker_configs.clone();
            img.next_producer_id_block = image.next_producer_id_block;
        }
        // Every partition this node hosts is open now; entries of others are stale.
        *self.startup_checkpoints.lock() = StartupCheckpoints::default();
        if registered {
            self.roles_applied.store(true, Ordering::Release);
        }
        self.applied.send_modify(|v| *v += 1);
    }

    /// Opens a cluster partition's log with its start-up checkpoints; returns it with its
    /// checkpointed high watermark.
    fn open_replica_log(
        &self,
        topic: &str,
        partition: i32,
        config: crate::log::LogConfig,
        now: i64,
    ) -> Result<(UnifiedLog, Option<i64>), LogError> {
        let (checkpoints, hw) = self.startup_checkpoints.lock().take(topic, partition);
        let log = UnifiedLog::open_at(
            partition_dir(&self.config.log_dir, topic, partition),
            config,
            self.had_clean_shutdown,
            checkpoints,
            now,
        )?;
        Ok((log, hw))
    }

    /// Writes one of the log directory's checkpoint files from every partition's current
    /// offset (Kafka's `LogManager.checkpointLogRecoveryOffsets` and
    /// `checkpointLogStartOffsets`, `ReplicaManager.checkpointHighWatermarks`).
    /// Entries read at start-up for partitions not opened yet (cluster mode, before the first
    /// metadata image) are kept, so an early write does not lose them.
    pub fn write_checkpoint(&self, which: OffsetCheckpoint) -> Result<(), ReplicaError> {
        let mut offsets = self.startup_checkpoints.lock().untaken(which).clone();
        offsets.extend(
            self.all_partitions()
                .iter()
                .map(|p| ((p.topic.clone(), p.index), which.offset_of(p))),
        );
        let _one_writer = self.checkpoint_write.lock();
        checkpoint::write_offsets(&self.config.log_dir, which.file(), &offsets)?;
        Ok(())
    }

    fn stop_fetcher(&self, key: &(String, i32)) {
        self.fetchers.lock().unfollow(key);
    }

    /// The number of follower fetchers running (one per broker this node follows from).
    pub fn replica_fetcher_count(&self) -> usize {
        self.fetchers.lock().fetcher_count()
    }

    /// Sends an ISR change for a partition this node leads to the controller, in the
    /// background; the partition learns the outcome when it completes.
    pub fn propose_isr(&self, part: &Arc<Partition>, isr: Vec<i32>) {
        let Some(controller) = self.controller.get().cloned() else {
            part.complete_isr_change(None, now_ms());
            return;
        };
        let req = AlterPartitionRequest {
            topic_id: part.topic_id,
            partition: part.index,
            leader_id: self.config.node_id,
            leader_epoch: part.leader_epoch(),
            partition_epoch: part.partition_epoch(),
            new_isr: isr,
        };
        // Kafka marks a shrink or an expansion by the kind of change proposed, once committed.
        let shrink = req.new_isr.len() < part.isr().len();
        let counter = if shrink {
            self.stats.isr_shrinks.clone()
        } else {
            self.stats.isr_expands.clone()
        };
        let part = part.clone();
        tokio::spawn(async move {
            match controller.alter_partition(req).await {
                Ok(reg) => {
                    counter.inc();
                    part.complete_isr_change(Some((reg.partition_epoch, reg.isr)), now_ms())
                }
                Err(e) => {
                    tracing::info!(topic = %part.topic, partition = part.index, error = %e, "ISR change refused");
                    part.complete_isr_change(None, now_ms());
                }
            }
        });
    }

    /// Leader duty, run periodically: drop followers that lag more than replica.lag.time.max.ms.
    pub fn shrink_isrs(&self) {
        let now = now_ms();
        for p in self.all_partitions() {
            if let Some(isr) = p.isr_shrink_proposal(now) {
                tracing::info!(topic = %p.topic, partition = p.index, ?isr, "shrinking ISR");
                self.propose_isr(&p, isr);
            }
        }
    }

    /// Hands out a producer id: from the local block file on a single node, from blocks the
    /// controller allocates in cluster mode (so ids are unique across nodes).
    pub async fn next_producer_id(&self) -> Result<i64, ResponseError> {
        let Some(controller) = self.controller.get() else {
            return self.allocate_producer_id().map_err(|e| e.response_error());
        };
        let mut block = self.quorum_pid_block.lock().await;
        if block.0 >= block.1 {
            let (first, size) = controller
                .allocate_producer_id_block(self.config.node_id)
                .await
                .map_err(|e| e.response_error())?;
            *block = (first, first + size);
        }
        let id = block.0;
        block.0 += 1;
        Ok(id)
    }

    /// Hands out a producer id for an idempotent producer.
    pub fn allocate_producer_id(&self) -> Result<i64, ReplicaError> {
        let mut end = self.producer_id_block_end.lock();
        let id = self.next_producer_id.fetch_add(1, Ordering::AcqRel);
        if id >= *end {
            // Persist the end of a new block before handing out ids from it, so ids are
            // never reused after a crash.
            let new_end = id + PRODUCER_ID_BLOCK_SIZE;
            let mut image = self.image.write();
            image.next_producer_id_block = new_end;
            image.persist(&self.config.log_dir)?;
            *end = new_end;
        }
        Ok(id)
    }

    /// Runs retention and producer-id expiration on every partition.
    pub fn run_retention(&self) {
        let now = now_ms();
        for p in self.all_partitions() {
            p.remove_expired_producers(now, self.config.producer_id_expiration_ms);
            match p.delete_old_segments(now) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(topic = %p.topic, partition = p.index, segments = n, "retention deleted segments")
                }
                Err(e) => {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "retention failed")
                }
            }
        }
    }

    /// Flushes and closes every log, writes the checkpoints, then the clean-shutdown marker.
    pub fn shutdown(&self) -> Result<(), ReplicaError> {
        let mut failed = false;
        for p in self.all_partitions() {
            if let Err(e) = p.close() {
                failed = true;
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "could not close log");
            }
        }
        for which in OffsetCheckpoint::ALL {
            if let Err(e) = self.write_checkpoint(which) {
                failed = true;
                tracing::error!(file = which.file(), error = %e, "could not write checkpoint");
            }
        }
        if !failed {
            let marker = self.config.log_dir.join(CLEAN_SHUTDOWN_FILE);
            let epoch = self.controller().and_then(Controller::broker_epoch);
            let mut f = std::fs::File::create(&marker)?;
            f.write_all(clean_shutdown_content(epoch).as_bytes())?;
            f.sync_all()?;
            std::fs::File::open(&self.config.log_dir)?.sync_all()?;
        }
        Ok(())
    }
}

/// Bound on the clean-shutdown marker's size; a larger file is not one Brook wrote.
const CLEAN_SHUTDOWN_FILE_MAX_BYTES: u64 = 4096;

/// The clean-shutdown marker's content, Kafka's `CleanShutdownFileHandler` format:
/// `{"version":0,"brokerEpoch":N}`, with -1 when this node had no broker epoch.
fn clean_shutdown_content(broker_epoch: Option<i64>) -> String {
    format!(
        "{{\"version\":0,\"brokerEpoch\":{}}}",
        broker_epoch.unwrap_or(-1)
    )
}

/// The broker epoch recorded in a clean-shutdown marker, if it names one. An empty or
/// unreadable marker (older Brook versions wrote an empty file) still means a clean
/// shutdown, of an incarnation whose epoch is unknown.
fn read_clean_shutdown_epoch(marker: &Path) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Marker {
        #[serde(rename = "brokerEpoch")]
        broker_epoch: i64,
    }
    let len = std::fs::metadata(marker).ok()?.len();
    if len > CLEAN_SHUTDOWN_FILE_MAX_BYTES {
        return None;
    }
    let text = std::fs::read(marker).ok()?;
    let m: Marker = serde_json::from_slice(&text).ok()?;
    (m.broker_epoch >= 0).then_some(m.broker_epoch)
}

/// `<log.dirs>/<topic>-<partition>`, Kafka's layout.
pub fn partition_dir(log_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    log_dir.join(format!("{topic}-{partition}"))
}

/// Finishes deletions interrupted by a crash.
fn remove_deleted_dirs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().ends_with("-delete") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
