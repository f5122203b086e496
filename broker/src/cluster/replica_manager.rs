//! The ReplicaManager owns every partition on this node and the latest metadata image it
//! applied, which names them. The API handlers go through it for appends and reads, and
//! through its [`Controller`] for topic changes.
//!
//! Every node, alone or in a cluster, takes its topics and roles from the metadata quorum: a
//! single node (`brook serve` without `process.roles`) is the one voter of its own quorum.
//! Hot paths (produce, fetch) only touch the `DashMap` of partitions, which is sharded; the
//! applied image behind its `RwLock` is read on Metadata requests and replaced only when a
//! newer one is applied.

use kafka_protocol::ResponseError;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::watch;
use uuid::Uuid;

use super::partition::{IsrEligibility, Partition, Role};
use super::replica_fetcher::ReplicaFetchers;
use crate::config::{BrokerConfig, ConfigError};
use crate::controller::{
    AlterPartitionRequest, Controller, ControllerConfig, ControllerError, MetadataImage,
    MetadataRecord, PartitionRegistration,
};
use crate::fault::FaultEngine;
use crate::log_limit::{key_of, RepeatLimiter};
use crate::metadata::{LegacyMetadataFile, MetadataError, TopicMeta};
use brook_storage::checkpoint::{
    self, OffsetMap, HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
};
use brook_storage::loader::LogCheckpoints;
use brook_storage::{LogError, UnifiedLog};

/// Written at clean shutdown; its absence at start-up means the logs need recovery.
pub const CLEAN_SHUTDOWN_FILE: &str = ".brook_cleanshutdown";
/// How long a single node waits at start-up for its own quorum to register and unfence its
/// broker (two local commits, normally a few milliseconds).
pub const SINGLE_NODE_STARTUP_TIMEOUT_MS: u64 = 30_000;

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
    #[error("metadata quorum: {0}")]
    Controller(#[from] ControllerError),
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
            ReplicaError::Controller(e) => e.response_error(),
            ReplicaError::Metadata(_) | ReplicaError::Io(_) => ResponseError::KafkaStorageError,
        }
    }

    /// Its code on the wire.
    pub fn error_code(&self) -> i16 {
        self.response_error().code()
    }
}

// In `clock`, a module with no imports of the crate, so that `net` reads the clock without
// importing `cluster`; re-exported for the coordinators that name it here.
pub use crate::clock::now_ms;

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
    /// The last metadata image applied here (see [`Self::apply_image`]).
    image: RwLock<Arc<MetadataImage>>,
    /// The authorizer (`authorizer.class.name`), which takes each applied image's ACLs
    /// before the image is published here; `None`: no authorization.
    pub authorizer: Option<Arc<crate::security::authorizer::Authorizer>>,
    /// The metadata quorum: this node's voter, of a cluster or of its own one-voter quorum.
    controller: Controller,
    /// Follower fetchers, one per source broker.
    fetchers: Mutex<ReplicaFetchers>,
    /// Bumped after each metadata image is applied, for callers waiting to see their change.
    applied: watch::Sender<u64>,
    /// The cluster id: a cluster's is derived from its voter set; a single node's is kept in
    /// `meta.properties` in its log directory.
    cluster_id: String,
    /// An applied image held this process's registration, unfenced, so every partition it
    /// hosts has its role. Clients are served only from then on.
    roles_applied: AtomicBool,
    /// The producer id block this node hands out from (next, end).
    quorum_pid_block: tokio::sync::Mutex<(i64, i64)>,
    /// Whether the clean-shutdown marker was there at start-up. Partition logs are opened as
    /// metadata images name them, after start-up; without the marker each is recovered
    /// (Kafka's `LogManager.loadLogs` passes the same flag to every `LogLoader`).
    had_clean_shutdown: bool,
    /// The broker epoch the clean-shutdown marker recorded: the epoch of the incarnation that
    /// shut down cleanly, which the next registration names so that the controller can tell a
    /// clean restart from an unclean one (Kafka's `previousBrokerEpoch`, KIP-966). `None` after
    /// a crash, on a fresh directory, or when the previous run had no broker epoch.
    previous_broker_epoch: Option<i64>,
    /// The log directory's checkpoints as read at start-up; each partition takes its entries
    /// when the first metadata image that names it opens it. From then on the partitions own
    /// the offsets, and
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

/// What a log directory held at start-up, read before the quorum starts.
struct StartupState {
    clean: bool,
    previous_broker_epoch: Option<i64>,
    checkpoints: StartupCheckpoints,
    /// A single node's metadata as an earlier Brook version kept it, to import.
    legacy: Option<LegacyMetadataFile>,
}

impl StartupState {
    /// Reads the clean-shutdown marker (and removes it, so that a crash from here on is seen
    /// at the next start), the checkpoints, and a legacy metadata file.
    fn read(dir: &Path) -> Result<Self, ReplicaError> {
        std::fs::create_dir_all(dir)?;
        remove_deleted_dirs(dir);
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let legacy = LegacyMetadataFile::read(dir)?;
        // A directory without metadata is new: nothing to recover.
        let fresh = legacy.is_none() && !dir.join(crate::controller::METADATA_DIR).exists();
        let clean = fresh || marker.exists();
        let previous_broker_epoch = marker
            .exists()
            .then(|| read_clean_shutdown_epoch(&marker))
            .flatten();
        if marker.exists() {
            std::fs::remove_file(&marker)?;
        }
        if !clean {
            tracing::info!(dir = %dir.display(), "no clean-shutdown marker: recovering logs");
        }
        Ok(StartupState {
            clean,
            previous_broker_epoch,
            checkpoints: StartupCheckpoints::read(dir),
            legacy,
        })
    }
}

/// Starts this node's voter of the metadata quorum: a cluster's (`process.roles` includes
/// `controller`), with the cluster id configured or derived from the voters, or alone its
/// own one-voter quorum, importing a legacy metadata file. Returns it with the cluster id.
async fn start_quorum(
    config: &Arc<BrokerConfig>,
    endpoints: Vec<crate::controller::image::BrokerEndpoint>,
    state: &StartupState,
    faults: Option<Arc<FaultEngine>>,
) -> Result<(Controller, String), ReplicaError> {
    let dir = &config.log_dir;
    let broker_endpoint = endpoints
        .iter()
        .find(|e| *e.name == *config.listeners.inter_broker)
        .or(endpoints.first())
        .map(|e| (e.host.clone(), e.port))
        .unwrap_or_default();
    let Some(mut cc) = ControllerConfig::from_broker_config(config)? else {
        let mut cc = ControllerConfig::single_voter(config, broker_endpoint);
        cc.broker_listeners = endpoints;
        cc.previous_broker_epoch = state.previous_broker_epoch;
        let legacy_id = state.legacy.as_ref().map(|l| l.cluster_id.as_str());
        let id = crate::metadata::single_node_cluster_id(
            dir,
            config.node_id,
            config.cluster_id.as_deref(),
            legacy_id,
        )?;
        let import = state
            .legacy
            .as_ref()
            .map(|l| legacy_import_records(l, config.node_id))
            .unwrap_or_default();
        return Ok((
            Controller::start_single_voter(cc, faults, import).await?,
            id,
        ));
    };
    cc.broker_endpoint = Some(broker_endpoint);
    cc.broker_listeners = endpoints;
    cc.previous_broker_epoch = state.previous_broker_epoch;
    let voters = config
        .values
        .get("controller.quorum.voters")
        .cloned()
        .unwrap_or_default();
    let id = config
        .cluster_id
        .clone()
        .unwrap_or_else(|| crate::metadata::cluster_id_from_seed(&voters));
    crate::metadata::ensure_directory_id(dir, config.node_id, &id)?;
    Ok((Controller::start_with_faults(cc, faults).await?, id))
}

impl ReplicaManager {
    /// Opens the log directory and starts this node's voter of the metadata quorum: a
    /// cluster's (`process.roles` includes `controller`) or, alone, its own one-voter quorum.
    /// `endpoints` are the advertised broker listeners the broker registers with; the
    /// inter-broker one is the address followers and other brokers use.
    ///
    /// A single node is ready when this returns: its broker is registered and unfenced and
    /// every partition of the image is open and led here. A cluster node takes its roles
    /// from the first image that holds its registration, later ([`Self::apply_image`]).
    pub async fn start(
        config: Arc<BrokerConfig>,
        endpoints: Vec<crate::controller::image::BrokerEndpoint>,
        faults: Option<Arc<FaultEngine>>,
    ) -> Result<Self, ReplicaError> {
        let dir = config.log_dir.clone();
        crate::metadata::verify_meta_properties(
            &dir,
            config.node_id,
            config.cluster_id.as_deref(),
        )?;
        let state = StartupState::read(&dir)?;
        let (controller, cluster_id) = start_quorum(&config, endpoints, &state, faults).await?;
        let stats = ReplicationStats::default();
        let fetchers = ReplicaFetchers::new(stats.follower_truncations.clone())
            .with_tls(config.tls.inter_broker.clone())
            .with_sasl(config.inter_broker_sasl.clone());
        let single_voter = controller.is_single_voter();
        let authorizer = config
            .authorizer
            .clone()
            .map(|c| Arc::new(crate::security::authorizer::Authorizer::new(c)));
        let rm = ReplicaManager {
            config,
            stats,
            partitions: DashMap::new(),
            topic_names: DashMap::new(),
            image: RwLock::new(Arc::default()),
            authorizer,
            controller,
            fetchers: Mutex::new(fetchers),
            applied: watch::channel(0).0,
            quorum_pid_block: tokio::sync::Mutex::new((0, 0)),
            cluster_id,
            roles_applied: AtomicBool::new(false),
            had_clean_shutdown: state.clean,
            previous_broker_epoch: state.previous_broker_epoch,
            startup_checkpoints: Mutex::new(state.checkpoints),
            checkpoint_write: Mutex::new(()),
        };
        if single_voter {
            rm.take_single_node_roles().await?;
        }
        // Imported (a single node), or a cluster node's, which held no topics: either way the
        // quorum has what it said.
        if state.legacy.is_some() {
            LegacyMetadataFile::retire(&dir)?;
        }
        Ok(rm)
    }

    /// A single node: waits until its quorum has registered and unfenced its broker, then
    /// applies that image, so that the node leads every partition before it serves.
    async fn take_single_node_roles(&self) -> Result<(), ReplicaError> {
        let me = self.config.node_id;
        let incarnation = self.controller.incarnation();
        let mut images = self.controller.image();
        let ready = images.wait_for(|image| image.registered_and_unfenced(me, incarnation));
        let timeout = std::time::Duration::from_millis(SINGLE_NODE_STARTUP_TIMEOUT_MS);
        let image = match tokio::time::timeout(timeout, ready).await {
            Ok(Ok(image)) => image.clone(),
            _ => {
                return Err(ReplicaError::Controller(ControllerError::Internal(
                    format!(
                        "the single node's quorum did not register its broker within {timeout:?}"
                    ),
                )))
            }
        };
        self.apply_image(&image, &Arc::new(FaultEngine::new(me)));
        Ok(())
    }

    /// Applies every committed image from now on (and the current one) until `stop` turns
    /// true or the quorum stops (a `stop` whose sender is gone never stops it); every `lag / 2`
    /// a leader also drops lagging followers from its ISRs. `on_change` sees each new image
    /// with the one before it.
    pub fn follow_metadata(
        self: &Arc<Self>,
        faults: Arc<FaultEngine>,
        mut stop: watch::Receiver<bool>,
        on_change: impl Fn(&MetadataImage, &MetadataImage) + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let rm = self.clone();
        tokio::spawn(async move {
            let mut image = rm.controller.image();
            let lag = rm.config.replica_lag_time_max_ms.max(200) as u64;
            let mut isr_tick = tokio::time::interval(std::time::Duration::from_millis(lag / 2));
            let mut current = image.borrow_and_update().clone();
            rm.apply_image(&current, &faults);
            let mut stoppable = true;
            loop {
                tokio::select! {
                    r = image.changed() => {
                        if r.is_err() {
                            break;
                        }
                        let previous = std::mem::replace(&mut current, image.borrow_and_update().clone());
                        rm.apply_image(&current, &faults);
                        on_change(&previous, &current);
                    }
                    _ = isr_tick.tick() => rm.shrink_isrs(),
                    r = stop.changed(), if stoppable => match r {
                        Ok(()) => break,
                        Err(_) => stoppable = false,
                    },
                }
            }
        })
    }

    /// The broker epoch of the incarnation that last shut this log directory down cleanly.
    pub fn previous_broker_epoch(&self) -> Option<i64> {
        self.previous_broker_epoch
    }

    /// The cluster id.
    pub fn cluster_id(&self) -> String {
        self.cluster_id.clone()
    }

    /// The last metadata image applied on this node.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().clone()
    }

    /// One topic of the applied image.
    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        let image = self.image();
        let id = *image.topic_ids.get(name)?;
        TopicMeta::new(image, id)
    }

    /// One topic of the applied image, by id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<TopicMeta> {
        TopicMeta::new(self.image(), id)
    }

    /// A topic's name, by id, without touching the metadata image.
    pub fn topic_name_by_id(&self, id: Uuid) -> Option<String> {
        self.topic_names.get(&id).map(|n| n.clone())
    }

    /// Every topic of the applied image, in name order.
    pub fn topics(&self) -> Vec<TopicMeta> {
        let image = self.image();
        image
            .topic_ids
            .values()
            .filter_map(|&id| TopicMeta::new(image.clone(), id))
            .collect()
    }

    /// Looks up a partition.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.partitions
            .get(&(topic.to_string(), index))
            .map(|p| p.clone())
    }

    /// The partition if this node hosts it, else the error Kafka's
    /// `ReplicaManager.getPartitionOrError` answers: NOT_LEADER_OR_FOLLOWER for a partition
    /// the metadata knows but this node does not host (its replicas exclude this node, or
    /// it is not open here yet: the client refreshes its metadata and retries),
    /// UNKNOWN_TOPIC_OR_PARTITION for one it does not know. "Knows" is the committed image
    /// Metadata answers from, as Kafka asks the `MetadataCache` that Metadata reads. Every
    /// handler that looks a client's partition up goes through here.
    pub fn partition_or_error(
        &self,
        topic: &str,
        index: i32,
    ) -> Result<Arc<Partition>, ResponseError> {
        if let Some(part) = self.partition(topic, index) {
            return Ok(part);
        }
        let known = self
            .controller
            .image()
            .borrow()
            .topic_by_name(topic)
            .is_some_and(|t| (0..t.partition_count()).contains(&index));
        Err(if known {
            ResponseError::NotLeaderOrFollower
        } else {
            ResponseError::UnknownTopicOrPartition
        })
    }

    /// Every partition, for background work (retention) and shutdown.
    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions.iter().map(|e| e.value().clone()).collect()
    }

    /// CreateTopics for one topic with the controller's placement, answered with the topic the
    /// controller created once this node has applied it (`validate_only` only checks). For
    /// tools and tests; the CreateTopics handler submits the client's request as it is.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: std::collections::BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<crate::controller::TopicImage, ReplicaError> {
        let req = crate::controller::ControllerRequest::CreateTopic {
            name: name.to_string(),
            partitions,
            replication_factor,
            configs: configs.clone(),
            assignments: Vec::new(),
            validate_only,
        };
        let (id, parts) = self.controller.submit_create_topic(req).await?;
        if !validate_only {
            self.wait_for_metadata(std::time::Duration::from_secs(10), |rm| {
                rm.topic(name).is_some()
            })
            .await;
        }
        Ok(crate::controller::TopicImage {
            name: name.to_string(),
            id,
            partitions: parts,
            configs,
        })
    }

    /// The dynamic broker configs in force, from the applied image.
    pub fn dynamic_broker_configs(&self) -> crate::config::DynamicBrokerConfigs {
        self.image.read().broker_configs.clone()
    }

    /// A group's config overrides, as the last applied image has them (empty for none).
    pub fn group_configs(&self, group_id: &str) -> std::collections::BTreeMap<String, String> {
        self.image
            .read()
            .group_configs
            .get(group_id)
            .cloned()
            .unwrap_or_default()
    }

    /// The metadata quorum.
    pub fn controller(&self) -> &Controller {
        &self.controller
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

    /// Whether this node may serve clients: once an applied image held its own registration,
    /// unfenced, and gave every hosted partition its role (what Kafka's `BrokerServer.startup`
    /// waits for before it opens the listeners).
    pub fn ready_to_serve(&self) -> bool {
        self.roles_applied.load(Ordering::Acquire)
    }

    /// Waits (bounded) until this node has applied every record its quorum voter has, so that
    /// an answer to a metadata change is followed by reads that see it here.
    pub async fn wait_caught_up(&self) {
        let target = self.controller.image().borrow().metadata_offset;
        let timeout = std::time::Duration::from_secs(10);
        self.wait_for_metadata(timeout, |rm| rm.image.read().metadata_offset >= target)
            .await;
    }

    /// Whether broker `id` is registered and unfenced in the committed metadata image (Kafka's
    /// `MetadataCache.hasAliveBroker`).
    pub fn is_broker_alive(&self, id: i32) -> bool {
        self.controller
            .image()
            .borrow()
            .brokers
            .get(&id)
            .is_some_and(|b| !b.fenced)
    }

    /// Which brokers may join an ISR, read from the metadata image at the moment a partition
    /// asks (Kafka's `Partition.isReplicaIsrEligible` reads the KRaft metadata cache the same
    /// way): active, i.e. registered, unfenced and not in controlled shutdown.
    fn isr_eligibility(&self) -> IsrEligibility {
        let images = self.controller.image();
        Arc::new(move |id| images.borrow().is_active(id))
    }

    /// Changes after each applied metadata image (the group coordinator follows leadership
    /// of the offsets topic with it).
    pub fn metadata_applied(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }

    /// Applies a committed metadata image: topics, and this node's role for every partition
    /// it hosts (leader, follower with a fetcher, or gone).
    pub fn apply_image(&self, image: &Arc<MetadataImage>, faults: &Arc<FaultEngine>) {
        let controller = &self.controller;
        let me = self.config.node_id;
        let now = now_ms();
        // Roles are only taken from an image that holds this process's own registration, so a
        // restarted node never acts on the stale leadership it remembers.
        let registered = image.registered_and_unfenced(me, controller.incarnation());
        self.stop_stale_partitions(image);
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
            for reg in t.partitions.iter().filter(|r| r.replicas.contains(&me)) {
                let Some(part) = self.get_or_create_partition(t, reg, &log_config, min_isr, now)
                else {
                    continue;
                };
                if registered {
                    self.apply_role(&part, reg, faults, now);
                }
            }
        }
        // The ACLs first, so that whoever sees this image applied (a CreateAcls answer waiting
        // for it) sees them enforced.
        if let Some(authorizer) = &self.authorizer {
            authorizer.follow(&image.acls, image.metadata_offset);
        }
        *self.image.write() = image.clone();
        // Every partition this node hosts is open now; entries of others are stale.
        *self.startup_checkpoints.lock() = StartupCheckpoints::default();
        if registered {
            self.roles_applied.store(true, Ordering::Release);
        }
        self.applied.send_modify(|v| *v += 1);
    }

    /// Stops and deletes the partitions this node should no longer host: deleted topics,
    /// moved replicas (Kafka's `ReplicaManager.stopPartitions` for the image's deletes).
    fn stop_stale_partitions(&self, image: &MetadataImage) {
        let me = self.config.node_id;
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
    }

    /// The hosted partition of `reg`, with the topic's current configs, its log opened when
    /// it is new here (Kafka's `ReplicaManager.getOrCreatePartition`). `None` when the log
    /// cannot be opened.
    fn get_or_create_partition(
        &self,
        t: &crate::controller::TopicImage,
        reg: &PartitionRegistration,
        log_config: &brook_storage::LogConfig,
        min_isr: i32,
        now: i64,
    ) -> Option<Arc<Partition>> {
        let key = (t.name.clone(), reg.index);
        if let Some(p) = self.partitions.get(&key).map(|p| p.clone()) {
            p.update_config(log_config.clone(), min_isr);
            return Some(p);
        }
        match self.open_replica_log(&t.name, reg.index, log_config.clone(), now) {
            Ok((log, checkpointed_hw)) => {
                let p = Arc::new(
                    Partition::new_replica(
                        t.name.clone(),
                        t.id,
                        reg.index,
                        self.config.node_id,
                        min_isr,
                        self.config.replica_lag_time_max_ms,
                        log,
                    )
                    .with_isr_eligibility(self.isr_eligibility()),
                );
                if let Some(hw) = checkpointed_hw {
                    p.restore_high_watermark(hw);
                }
                self.partitions.insert(key, p.clone());
                Some(p)
            }
            Err(e) => {
                tracing::error!(topic = %t.name, partition = reg.index, error = %e, "cannot open partition log");
                None
            }
        }
    }

    /// Applies `reg` to the hosted partition: when its role changes, a follower fetches from
    /// its new leader and a leader stops fetching (Kafka's `applyLocalLeadersDelta` and
    /// `applyLocalFollowersDelta`).
    fn apply_role(
        &self,
        part: &Arc<Partition>,
        reg: &PartitionRegistration,
        faults: &Arc<FaultEngine>,
        now: i64,
    ) {
        let Some(role) = part.apply_registration(
            reg.leader,
            reg.leader_epoch,
            reg.partition_epoch,
            reg.replicas.clone(),
            reg.isr.clone(),
            now,
        ) else {
            return;
        };
        let mut fetchers = self.fetchers.lock();
        match role {
            Role::Follower { leader } => fetchers.follow(
                part.clone(),
                leader,
                self.config.node_id,
                self.controller.image(),
                faults.clone(),
            ),
            _ => fetchers.unfollow(&(part.topic.clone(), reg.index)),
        }
    }

    /// Opens a cluster partition's log with its start-up checkpoints; returns it with its
    /// checkpointed high watermark.
    fn open_replica_log(
        &self,
        topic: &str,
        partition: i32,
        config: brook_storage::LogConfig,
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
        let controller = self.controller.clone();
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
                    // A leader cut off from the controller proposes again and again.
                    static REFUSED: RepeatLimiter = RepeatLimiter::new();
                    if let Some(note) = REFUSED.admit(key_of((&part.topic, part.index))) {
                        tracing::info!(topic = %part.topic, partition = part.index, error = %e, "ISR change refused{note}");
                    }
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

    /// Hands out a producer id, from blocks the controller allocates (so ids are unique
    /// across nodes and never reused after a restart).
    pub async fn next_producer_id(&self) -> Result<i64, ResponseError> {
        let controller = &self.controller;
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
            let epoch = self.controller.broker_epoch();
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

/// The records that import a single node's legacy metadata file into its new quorum: each
/// topic with its id, partitions (led by this node at leader epoch 0, the epoch its logs
/// were written at) and configs, the dynamic broker configs, and the producer id block
/// watermark, so that no id handed out before is handed out again.
fn legacy_import_records(legacy: &LegacyMetadataFile, node_id: i32) -> Vec<MetadataRecord> {
    let mut records: Vec<MetadataRecord> = legacy
        .topics
        .values()
        .map(|t| MetadataRecord::CreateTopic {
            name: t.name.clone(),
            id: t.id,
            partitions: (0..t.partitions)
                .map(|index| PartitionRegistration::new(index, vec![node_id]))
                .collect(),
            configs: t.configs.clone(),
        })
        .collect();
    records.extend(legacy.broker_configs.iter().map(|(resource, configs)| {
        MetadataRecord::AlterBrokerConfigs {
            resource: resource.clone(),
            configs: configs
                .iter()
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect(),
        }
    }));
    if legacy.next_producer_id_block > 0 {
        records.push(MetadataRecord::AllocateProducerIds {
            node_id,
            next_block: legacy.next_producer_id_block,
        });
    }
    records
}
