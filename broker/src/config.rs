//! Broker configuration, read from a Kafka-style `server.properties` file.
//!
//! Brook accepts Kafka's own property names so that a user can carry a config file between a
//! real Kafka and Brook. Every key Brook acts on is parsed and range-checked here; any other
//! broker key Kafka 4.4 declares (`config_def::kafka_broker_keys`: thread counts, socket
//! buffers, security settings) is type-checked, logged as not acted on, and kept for
//! DescribeConfigs; anything else is a start-up error that names the key, because a silently
//! ignored typo (`min.insync.replica=2`) would change the semantics a test relies on.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::config_def;
// In `config_def`, with the validation that raises most of them, so that the modules
// `BrokerConfig` is built from (`listeners`, `security`) report errors without importing `config`.
pub use crate::config_def::ConfigError;
use crate::security::authorizer::{AuthorizerConfig, AUTHORIZER_KEYS};
use brook_storage::{LogConfig, TimestampType};

/// The log cleaner's broker settings (Kafka's `CleanerConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogCleanerConfig {
    /// `log.cleaner.enable`: compacted logs are cleaned.
    pub enable: bool,
    /// `log.cleaner.threads`: cleaner threads; 0 runs none.
    pub threads: usize,
    /// `log.cleaner.backoff.ms`: how long a thread sleeps when no log is due.
    pub backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: the offset maps' memory over all threads.
    pub dedupe_buffer_bytes: u64,
}

/// Topic-level keys Kafka defines as internal (`ConfigDef.defineInternal`): accepted on a
/// topic but not listed by DescribeConfigs, and with no broker-level default.
/// `internal.segment.bytes` overrides `segment.bytes` without its 1 MiB minimum, for tests
/// that need many small segments (Kafka's `LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG`).
pub const INTERNAL_TOPIC_CONFIG_KEYS: &[&str] = &["internal.segment.bytes"];

/// The broker keys the same tool sets and clears (Kafka's `QuotaConfig` rates, bytes per
/// second): accepted by IncrementalAlterConfigs, not acted on.
pub const REPLICATION_THROTTLE_BROKER_KEYS: &[&str] = &[
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

/// The smallest topic `segment.bytes` (Kafka 4.4's `LogConfig`: `atLeast(1024 * 1024)`).
pub const TOPIC_SEGMENT_BYTES_MIN: i32 = 1024 * 1024;
/// The smallest `log.segment.bytes` (Kafka's `atLeast(LegacyRecord.RECORD_OVERHEAD_V0)`), also
/// the floor for `internal.segment.bytes` and for the effective value of a log.
pub const LOG_SEGMENT_BYTES_MIN: i32 = 14;

/// Broker keys with their Kafka 4.4 defaults. The table is the single source of truth for
/// which keys are known; `BrokerConfig` reads typed values out of the merged map.
pub const BROKER_DEFAULTS: &[(&str, &str)] = &[
    ("node.id", "1"),
    ("listeners", "PLAINTEXT://127.0.0.1:9092"),
    ("advertised.listeners", ""),
    // Named listeners (crate::listeners), Kafka's defaults.
    (
        "listener.security.protocol.map",
        crate::listeners::DEFAULT_SECURITY_PROTOCOL_MAP,
    ),
    ("inter.broker.listener.name", ""),
    ("security.inter.broker.protocol", "PLAINTEXT"),
    // SASL (crate::security::sasl), Kafka's defaults; `listener.name.<l>.` may override them.
    ("sasl.enabled.mechanisms", "GSSAPI"),
    ("sasl.mechanism.inter.broker.protocol", "GSSAPI"),
    // The controller listener's own login (crate::controller::channel).
    ("sasl.mechanism.controller.protocol", "GSSAPI"),
    ("connection.failed.authentication.delay.ms", "100"),
    ("connections.max.reauth.ms", "0"),
    ("log.dirs", "./data"),
    ("log.dir", ""),
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("min.insync.replicas", "1"),
    ("auto.create.topics.enable", "true"),
    ("delete.topic.enable", "true"),
    ("socket.request.max.bytes", "104857600"),
    ("queued.max.request.bytes", "-1"),
    // Connection limits (crate::net::connection_quotas), Kafka's defaults: no limit.
    ("max.connections", "2147483647"),
    ("max.connections.per.ip", "2147483647"),
    ("max.connection.creation.rate", "2147483647"),
    // A connection with no bytes read or written for this long is closed
    // (crate::connection); negative: never.
    ("connections.max.idle.ms", "600000"),
    // The most record bytes one Fetch answer holds, whatever the request asks (55 MiB).
    ("fetch.max.bytes", "57671680"),
    // Incremental fetch sessions held at once (crate::cluster::fetch_session).
    ("max.incremental.fetch.session.cache.slots", "1000"),
    // The client quotas' sampled rates (crate::quota), Kafka's defaults.
    ("quota.window.num", "11"),
    ("quota.window.size.seconds", "1"),
    // The controller mutation quota's token bucket (crate::quota), Kafka's defaults.
    ("controller.quota.window.num", "11"),
    ("controller.quota.window.size.seconds", "1"),
    ("message.max.bytes", "1048588"),
    ("log.segment.bytes", "1073741824"),
    ("log.roll.ms", ""),
    ("log.roll.hours", "168"),
    ("log.retention.ms", ""),
    ("log.retention.minutes", ""),
    ("log.retention.hours", "168"),
    ("log.retention.bytes", "-1"),
    ("log.index.size.max.bytes", "10485760"),
    ("log.index.interval.bytes", "4096"),
    ("log.flush.interval.messages", "9223372036854775807"),
    ("log.cleanup.policy", "delete"),
    ("log.message.timestamp.type", "CreateTime"),
    ("log.message.timestamp.before.max.ms", "9223372036854775807"),
    ("log.message.timestamp.after.max.ms", "3600000"),
    ("compression.type", "producer"),
    ("unclean.leader.election.enable", "false"),
    // Defaults of topic keys Brook accepts and describes but does not act on (docs/CONFIGS.md);
    // Kafka 4.4's values.
    ("log.roll.jitter.ms", ""),
    ("log.roll.jitter.hours", "0"),
    ("log.flush.interval.ms", ""),
    ("log.flush.scheduler.interval.ms", "9223372036854775807"),
    ("max.decompressed.message.bytes", "2147483639"),
    ("log.segment.delete.delay.ms", "60000"),
    ("compression.gzip.level", "-1"),
    ("compression.lz4.level", "9"),
    ("compression.zstd.level", "3"),
    ("log.preallocate", "false"),
    ("log.local.retention.ms", "-2"),
    ("log.local.retention.bytes", "-2"),
    ("log.remote.copy.lag.ms", "0"),
    ("log.remote.copy.lag.bytes", "-1"),
    ("log.retention.check.interval.ms", "300000"),
    // The log cleaner (crate::cluster::log_cleaner), Kafka 4.4's defaults.
    ("log.cleaner.enable", "true"),
    ("log.cleaner.threads", "1"),
    ("log.cleaner.backoff.ms", "15000"),
    ("log.cleaner.dedupe.buffer.size", "134217728"),
    ("log.cleaner.delete.retention.ms", "86400000"),
    ("log.cleaner.min.compaction.lag.ms", "0"),
    ("log.cleaner.max.compaction.lag.ms", "9223372036854775807"),
    ("log.cleaner.min.cleanable.ratio", "0.5"),
    ("offsets.topic.segment.bytes", "104857600"),
    // Log directory checkpoints (brook_storage::checkpoint).
    ("replica.high.watermark.checkpoint.interval.ms", "5000"),
    ("log.flush.offset.checkpoint.interval.ms", "60000"),
    ("log.flush.start.offset.checkpoint.interval.ms", "60000"),
    ("cluster.id", ""),
    ("producer.id.expiration.ms", "86400000"),
    ("replica.lag.time.max.ms", "30000"),
    ("admin.listener", ""),
    // Brook's own: the admin listener's authentication (crate::admin_security).
    ("admin.basic.auth.credentials.file", ""),
    ("admin.metrics.authentication.required", "true"),
    // Brook's own: how many events `/v1/events` keeps for replay (crate::events).
    ("admin.event.buffer.len.max", "10000"),
    // KRaft (read by `controller::ControllerConfig::from_broker_config`).
    ("process.roles", ""),
    ("controller.quorum.voters", ""),
    ("controller.quorum.bootstrap.servers", ""),
    ("controller.listener.names", ""),
    ("controller.quorum.election.timeout.ms", "1000"),
    ("controller.quorum.fetch.timeout.ms", "2000"),
    // Bounds a write routed to the active controller (crate::controller).
    ("controller.socket.timeout.ms", "30000"),
    // Automatic preferred-leader election by the active controller.
    ("auto.leader.rebalance.enable", "true"),
    ("leader.imbalance.check.interval.seconds", "300"),
    // Kafka 4 accepts it; a KRaft controller balances every imbalanced partition regardless.
    ("leader.imbalance.per.broker.percentage", "10"),
    ("broker.heartbeat.interval.ms", "2000"),
    // Cluster mode: SIGTERM hands leaderships over first (crate::server).
    ("controlled.shutdown.enable", "true"),
    ("broker.session.timeout.ms", "9000"),
    // Cluster mode: how long a starting broker may take to register, catch up and be
    // unfenced before it gives up (crate::server).
    ("initial.broker.registration.timeout.ms", "60000"),
    // Group coordinator (see crate::group::GroupConfig).
    ("group.min.session.timeout.ms", "6000"),
    ("group.max.session.timeout.ms", "1800000"),
    ("group.initial.rebalance.delay.ms", "3000"),
    ("group.max.size", "2147483647"),
    ("group.consumer.heartbeat.interval.ms", "5000"),
    ("group.consumer.min.heartbeat.interval.ms", "5000"),
    ("group.consumer.max.heartbeat.interval.ms", "15000"),
    ("group.consumer.session.timeout.ms", "45000"),
    ("group.consumer.min.session.timeout.ms", "45000"),
    ("group.consumer.max.session.timeout.ms", "60000"),
    ("group.consumer.max.size", "2147483647"),
    ("group.consumer.migration.policy", "bidirectional"),
    // Share groups (see crate::group::share and crate::share).
    ("group.share.heartbeat.interval.ms", "5000"),
    ("group.share.session.timeout.ms", "45000"),
    ("group.share.max.size", "200"),
    ("group.share.record.lock.duration.ms", "30000"),
    ("group.share.min.record.lock.duration.ms", "15000"),
    ("group.share.max.record.lock.duration.ms", "60000"),
    ("group.share.delivery.count.limit", "5"),
    ("group.share.partition.max.record.locks", "2000"),
    ("group.share.max.share.sessions", "2000"),
    // Streams groups (see crate::group::streams).
    ("group.streams.heartbeat.interval.ms", "5000"),
    ("group.streams.session.timeout.ms", "45000"),
    ("group.streams.num.standby.replicas", "0"),
    ("group.streams.initial.rebalance.delay.ms", "3000"),
    ("group.streams.max.size", "2147483647"),
    ("offsets.topic.num.partitions", "50"),
    ("offsets.topic.replication.factor", "3"),
    ("offsets.commit.timeout.ms", "5000"),
    ("offsets.retention.minutes", "10080"),
    ("offsets.retention.check.interval.ms", "600000"),
    ("offset.metadata.max.bytes", "4096"),
    // Transaction coordinator (see crate::txn::TxnConfig).
    ("transaction.state.log.num.partitions", "50"),
    ("transaction.state.log.replication.factor", "3"),
    ("transaction.state.log.min.isr", "2"),
    ("transaction.state.log.segment.bytes", "104857600"),
    ("transaction.max.timeout.ms", "900000"),
    (
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "10000",
    ),
    ("transactional.id.expiration.ms", "604800000"),
    (
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "3600000",
    ),
    ("transaction.partition.verification.enable", "true"),
    ("add.partitions.to.txn.retry.backoff.ms", "20"),
    ("add.partitions.to.txn.retry.backoff.max.ms", "100"),
];

// The metadata owns the dynamic broker configs and the min-ISR rule the controller and the
// partitions share (brook-controller).
pub use brook_controller::configuration_control::effective_min_isr;
pub use brook_controller::image::DynamicBrokerConfigs;

/// The parsed broker configuration.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Every known key with its effective value (defaults merged with the file and overrides).
    pub values: BTreeMap<String, String>,
    /// Keys set explicitly in the file or by an override (reported as STATIC_BROKER_CONFIG).
    pub explicit: std::collections::BTreeSet<String>,
    pub node_id: i32,
    /// The named listeners (`listeners`, `advertised.listeners`,
    /// `listener.security.protocol.map`, `inter.broker.listener.name`).
    pub listeners: crate::listeners::Listeners,
    /// The TLS contexts of SSL and SASL_SSL listeners and of TLS links to other nodes
    /// (`ssl.*` keys, [`crate::security::ssl`]).
    pub tls: crate::security::ssl::TlsContexts,
    /// The SASL settings of each SASL listener, by listener name.
    pub sasl:
        BTreeMap<std::sync::Arc<str>, std::sync::Arc<crate::security::sasl::SaslServerConfig>>,
    /// The credentials inter-broker connections authenticate with, when the inter-broker
    /// listener uses SASL.
    pub inter_broker_sasl: Option<std::sync::Arc<crate::security::sasl::InterBrokerSasl>>,
    pub log_dir: PathBuf,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics: bool,
    pub socket_request_max_bytes: usize,
    /// Bound on the bytes of requests being read and in flight across all connections;
    /// `None` for Kafka's default -1 (unbounded; Kafka treats any value <= 0 so).
    pub queued_max_request_bytes: Option<usize>,
    /// `max.connections`: open client connections across the broker listener; at the limit
    /// the listener stops accepting until one closes.
    pub max_connections: usize,
    /// `max.connections.per.ip`: open connections from one address; one more is closed
    /// right after accept.
    pub max_connections_per_ip: usize,
    /// `max.connection.creation.rate`: new connections per second across the broker's
    /// listeners; over it the acceptor holds each new one (`i32::MAX`: no limit).
    pub max_connection_creation_rate: i32,
    /// Each broker listener's own creation rate, by listener name:
    /// `listener.name.<l>.max.connection.creation.rate`, else `max.connection.creation.rate`
    /// (Kafka's `ListenerConnectionQuota`, configured from the listener's prefixed values).
    pub listener_max_connection_creation_rate: BTreeMap<Arc<str>, i32>,
    /// `connections.max.idle.ms`: a connection that reads and writes nothing for this long is
    /// closed (Kafka's `Selector` idle expiry); `None` for a negative value (never).
    pub connections_max_idle_ms: Option<u64>,
    /// `fetch.max.bytes`: the broker's cap on one Fetch answer's record bytes, applied to
    /// the request's `max_bytes` (Kafka's `KafkaApis.handleFetchRequest`).
    pub fetch_max_bytes: usize,
    /// `max.incremental.fetch.session.cache.slots`: the most incremental fetch sessions
    /// (KIP-227) held at once; 0 turns sessions off.
    pub fetch_session_cache_slots: usize,
    /// `quota.window.num` samples of `quota.window.size.seconds` each: the window client
    /// byte rates are measured over (Kafka's `ClientQuotaManagerConfig`).
    pub quota_window: crate::quota::QuotaWindow,
    /// `controller.quota.window.num` windows of `controller.quota.window.size.seconds`: the
    /// burst of the `controller_mutation_rate` token bucket.
    pub controller_quota_window: crate::quota::QuotaWindow,
    pub retention_check_interval_ms: u64,
    /// The log cleaner's settings (Kafka's `log.cleaner.*` broker keys).
    pub log_cleaner: LogCleanerConfig,
    /// `offsets.topic.segment.bytes`: segment.bytes of `__consumer_offsets`, so that its
    /// segments roll and get compacted (Kafka's `GroupCoordinatorConfig`).
    pub offsets_topic_segment_bytes: i32,
    /// How often the high watermarks are checkpointed
    /// (replica.high.watermark.checkpoint.interval.ms).
    pub high_watermark_checkpoint_interval_ms: u64,
    /// How often the recovery points are checkpointed (log.flush.offset.checkpoint.interval.ms).
    pub recovery_point_checkpoint_interval_ms: u64,
    /// How often the log start offsets are checkpointed
    /// (log.flush.start.offset.checkpoint.interval.ms).
    pub log_start_offset_checkpoint_interval_ms: u64,
    /// Idle producers' dedup state is dropped after this long (producer.id.expiration.ms).
    pub producer_id_expiration_ms: i64,
    /// A follower not caught up for this long leaves the ISR (replica.lag.time.max.ms).
    pub replica_lag_time_max_ms: i64,
    pub cluster_id: Option<String>,
    /// The admin HTTP listener (`admin.listener=127.0.0.1:PORT`), if any.
    pub admin_listener: Option<SocketAddr>,
    /// Its TLS and authentication ([`crate::admin_security`]).
    pub admin_http: crate::admin_security::AdminHttp,
    /// `admin.event.buffer.len.max`: the event stream's ring buffer ([`crate::events`]).
    pub admin_event_buffer_len_max: usize,
    /// `broker.heartbeat.interval.ms`.
    pub broker_heartbeat_interval_ms: u64,
    /// `controlled.shutdown.enable`: on SIGTERM, hand leaderships over before stopping.
    pub controlled_shutdown_enable: bool,
    /// `broker.session.timeout.ms`.
    pub broker_session_timeout_ms: u64,
    /// `initial.broker.registration.timeout.ms`: the longest a starting cluster node waits
    /// to be registered and unfenced before it exits.
    pub initial_broker_registration_timeout_ms: u64,
    /// `controller.quorum.election.timeout.ms`.
    pub controller_election_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms`.
    pub controller_fetch_timeout_ms: u64,
    /// `controller.socket.timeout.ms`: how long a write routed to the active controller may
    /// take, waiting for an election included (Kafka's `NodeToControllerChannelManager` request
    /// timeout, `min(controller.socket.timeout.ms, retryTimeoutMs)`).
    pub controller_socket_timeout_ms: u64,
    /// `authorizer.class.name` with `super.users` and `allow.everyone.if.no.acl.found`;
    /// `None`: no authorization.
    pub authorizer: Option<AuthorizerConfig>,
}

impl BrokerConfig {
    /// Reads a properties file (if given) and applies `key=value` overrides on top.
    pub fn load(path: Option<&std::path::Path>, overrides: &[String]) -> Result<Self, ConfigError> {
        let mut raw = BTreeMap::new();
        if let Some(path) = path {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            raw.extend(parse_properties(&text)?);
        }
        for (i, o) in overrides.iter().enumerate() {
            let (k, v) = split_kv(o).ok_or(ConfigError::Syntax {
                line: i + 1,
                text: o.clone(),
            })?;
            raw.insert(k, v);
        }
        Self::from_map(raw)
    }

    /// Builds the configuration from already-split key/value pairs, as Kafka's `KafkaConfig`
    /// does: the defaults merged with the given keys and checked (`AbstractConfig` parsing
    /// against `AbstractKafkaConfig.CONFIG_DEF`), the families read, then each SASL listener's
    /// settings and the topic-config defaults (`LogConfig.validate`).
    pub fn from_map(raw: BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let (values, explicit) = merge_with_defaults(raw)?;
        validate_broker_values(&values, &explicit)?;
        let mut cfg = Self::read_families(values, explicit)?;
        for l in &cfg.listeners.broker {
            if l.security_protocol.uses_sasl() {
                let sasl = crate::security::sasl::SaslServerConfig::for_listener(&cfg, l)?;
                cfg.sasl.insert(l.name.clone(), std::sync::Arc::new(sasl));
            }
        }
        cfg.inter_broker_sasl =
            crate::security::sasl::InterBrokerSasl::from_config(&cfg)?.map(std::sync::Arc::new);
        // Validate the topic-config defaults once at start-up so that a bad broker default
        // is a start-up error rather than a failure on the first topic creation.
        cfg.log_config(&DynamicBrokerConfigs::new(), &BTreeMap::new())?;
        Ok(cfg)
    }

    /// Reads the merged values into the configuration's fields, family by family as
    /// `AbstractKafkaConfig.CONFIG_DEF` merges Kafka's `ConfigDef`s (`ServerConfigs`,
    /// `SocketServerConfigs`, `ServerLogConfigs`, `CleanerConfig`, `ReplicationConfigs`,
    /// `QuotaConfig`, `KRaftConfigs`, `QuorumConfig`, ...); the SASL settings are left for
    /// `from_map`, as they read the listeners from the finished configuration.
    fn read_families(
        values: BTreeMap<String, String>,
        explicit: BTreeSet<String>,
    ) -> Result<Self, ConfigError> {
        let r = TypedValues(&values);
        let get = |k: &str| r.raw(k);
        let node_id = parse_num::<i32>("node.id", &get("node.id"))?;
        let listeners = crate::listeners::parse(&values, &explicit)?;
        crate::listeners::refuse_unsupported(&listeners)?;
        let tls = crate::security::ssl::contexts(&values, &listeners)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let log_dir = single_log_dir(&get)?;
        let (admin_listener, admin_http) = admin_listener(&values)?;
        // Kafka's INT type: a segment position is 32 bits, so the value must fit an i32.
        r.int_at_least("log.segment.bytes", LOG_SEGMENT_BYTES_MIN)?;
        let listener_max_connection_creation_rate =
            listener_connection_creation_rates(&values, &listeners)?;
        Ok(BrokerConfig {
            // ServerConfigs, SocketServerConfigs and ServerLogConfigs.
            node_id,
            listeners,
            tls,
            sasl: BTreeMap::new(),
            inter_broker_sasl: None,
            log_dir,
            num_partitions: r.positive("num.partitions")?,
            default_replication_factor: r.positive::<i16>("default.replication.factor")?,
            auto_create_topics: r.bool("auto.create.topics.enable")?,
            socket_request_max_bytes: r.positive::<i64>("socket.request.max.bytes")? as usize,
            queued_max_request_bytes: queued_max_request_bytes(
                &get("queued.max.request.bytes"),
                &get("socket.request.max.bytes"),
            )?,
            max_connections: r.at_least_zero("max.connections")?,
            max_connections_per_ip: max_connections_per_ip(&get("max.connections.per.ip"))?,
            max_connection_creation_rate: r.at_least_zero("max.connection.creation.rate")? as i32,
            listener_max_connection_creation_rate,
            connections_max_idle_ms: u64::try_from(r.num::<i64>("connections.max.idle.ms")?).ok(),
            fetch_max_bytes: r.int_at_least("fetch.max.bytes", 1024)? as usize,
            fetch_session_cache_slots: r
                .at_least_zero("max.incremental.fetch.session.cache.slots")?,
            // QuotaConfig.
            quota_window: quota_window(&get, "quota.window")?,
            controller_quota_window: quota_window(&get, "controller.quota.window")?,
            // CleanerConfig.
            log_cleaner: r.log_cleaner()?,
            // GroupCoordinatorConfig, then ServerLogConfigs' and ReplicationConfigs' intervals.
            offsets_topic_segment_bytes: r
                .int_at_least("offsets.topic.segment.bytes", LOG_SEGMENT_BYTES_MIN)?,
            retention_check_interval_ms: r.positive_ms("log.retention.check.interval.ms")?,
            high_watermark_checkpoint_interval_ms: r
                .positive_ms("replica.high.watermark.checkpoint.interval.ms")?,
            recovery_point_checkpoint_interval_ms: r
                .positive_ms("log.flush.offset.checkpoint.interval.ms")?,
            log_start_offset_checkpoint_interval_ms: r
                .positive_ms("log.flush.start.offset.checkpoint.interval.ms")?,
            replica_lag_time_max_ms: r.positive("replica.lag.time.max.ms")?,
            // TransactionLogConfig.
            producer_id_expiration_ms: r.positive("producer.id.expiration.ms")?,
            // Brook's own: the cluster id and the admin HTTP listener.
            cluster_id: Some(get("cluster.id")).filter(|s| !s.is_empty()),
            admin_listener,
            admin_http,
            admin_event_buffer_len_max: r.positive::<i64>("admin.event.buffer.len.max")? as usize,
            // ServerConfigs' controlled shutdown, KRaftConfigs and QuorumConfig.
            controlled_shutdown_enable: r.bool("controlled.shutdown.enable")?,
            broker_heartbeat_interval_ms: r.positive_ms("broker.heartbeat.interval.ms")?,
            broker_session_timeout_ms: r.positive_ms("broker.session.timeout.ms")?,
            initial_broker_registration_timeout_ms: r
                .positive_ms("initial.broker.registration.timeout.ms")?,
            controller_election_timeout_ms: r
                .positive_ms("controller.quorum.election.timeout.ms")?,
            controller_fetch_timeout_ms: r.positive_ms("controller.quorum.fetch.timeout.ms")?,
            controller_socket_timeout_ms: r.positive_ms("controller.socket.timeout.ms")?,
            // The authorizer (`authorizer.class.name`, `super.users`, ...).
            authorizer: AuthorizerConfig::from_values(&values).map_err(ConfigError::Invalid)?,
            values,
            explicit,
        })
    }

    /// The first broker listener's bind address (the one `brook serve` reports as ready).
    pub fn listener(&self) -> SocketAddr {
        self.listeners.broker[0].addr
    }

    /// The controller listener's bind address (KRaft), if `listeners` has one.
    pub fn controller_listener(&self) -> Option<SocketAddr> {
        self.listeners.controller.as_ref().map(|l| l.addr)
    }

    /// A setting as it applies to listener `listener_name`, with Kafka's precedence
    /// (`AbstractConfig.valuesWithPrefixOverride(listenerName.configPrefix())`):
    /// `listener.name.<lower case name>.<key>`, else `<key>` (set or defaulted, Brook's
    /// default or else Kafka's). `None` when neither has a value.
    pub fn listener_value(&self, listener_name: &str, key: &str) -> Option<String> {
        let prefixed = format!("{}{key}", crate::listeners::config_prefix(listener_name));
        self.values
            .get(&prefixed)
            .or_else(|| self.values.get(key))
            .cloned()
            .or_else(|| {
                config_def::kafka_broker_key(key)
                    .and_then(|k| k.default)
                    .map(str::to_string)
            })
            .filter(|v| !v.is_empty())
    }

    /// The JAAS configuration of SASL `mechanism` on listener `listener_name`: only
    /// `listener.name.<listener>.<mechanism lower case>.sasl.jaas.config`, as Kafka's
    /// `JaasContext.loadServerContext` reads it (a broker-level `sasl.jaas.config` is ignored
    /// on the server side, with a warning, in Kafka too).
    pub fn listener_jaas_config(&self, listener_name: &str, mechanism: &str) -> Option<&str> {
        let key = format!(
            "{}{}.sasl.jaas.config",
            crate::listeners::config_prefix(listener_name),
            mechanism.to_ascii_lowercase()
        );
        self.values.get(&key).map(String::as_str)
    }

    /// A broker key's effective value: this node's dynamic config, else the cluster-wide
    /// dynamic default, else server.properties or the default (Kafka's `DynamicBrokerConfig`
    /// precedence). `None` for an unset key (a null default).
    pub fn broker_value(&self, dynamic: &DynamicBrokerConfigs, key: &str) -> Option<String> {
        let layer = |name: &str| dynamic.get(name).and_then(|l| l.get(key)).cloned();
        layer(&self.node_id.to_string())
            .or_else(|| layer(""))
            .or_else(|| self.values.get(key).cloned())
            .filter(|v| !v.is_empty())
    }

    /// The broker-level default for a topic config key, as Kafka reports it in DescribeConfigs:
    /// the first of the key's broker synonyms that is set, in the topic key's unit, else
    /// `LogConfig`'s own default (Kafka's `KafkaConfig.extractLogConfigMap`).
    pub fn topic_default(&self, dynamic: &DynamicBrokerConfigs, topic_key: &str) -> Option<String> {
        let key = config_def::topic_key(topic_key)?;
        let from_broker = key.synonyms.iter().find_map(|syn| {
            let v = self.broker_value(dynamic, syn)?;
            config_def::synonym_to_topic_value(syn, &v)
        });
        Some(from_broker.unwrap_or_else(|| key.default.to_string()))
    }

    /// The effective value of a topic config: the topic's override, else the broker default.
    pub fn topic_value(
        &self,
        dynamic: &DynamicBrokerConfigs,
        overrides: &BTreeMap<String, String>,
        key: &str,
    ) -> Option<String> {
        overrides
            .get(key)
            .cloned()
            .or_else(|| self.topic_default(dynamic, key))
    }

    /// The min.insync.replicas in force for a topic: its override, else this node's dynamic
    /// config, the cluster default, then server.properties. The one resolution both the
    /// partition (acks=all, the high watermark) and the controller (the ELR) use.
    pub fn min_insync_replicas(
        &self,
        dynamic: &DynamicBrokerConfigs,
        overrides: &BTreeMap<String, String>,
    ) -> i32 {
        self.topic_value(dynamic, overrides, "min.insync.replicas")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1)
    }

    /// Builds a log's settings from the broker defaults and a topic's overrides.
    pub fn log_config(
        &self,
        dynamic: &DynamicBrokerConfigs,
        overrides: &BTreeMap<String, String>,
    ) -> Result<LogConfig, ConfigError> {
        let val = |k: &str| self.topic_value(dynamic, overrides, k).unwrap_or_default();
        let ts_type = match val("message.timestamp.type").as_str() {
            "CreateTime" => TimestampType::CreateTime,
            "LogAppendTime" => TimestampType::LogAppendTime,
            v => {
                return Err(invalid(
                    "message.timestamp.type",
                    v,
                    "expected CreateTime or LogAppendTime",
                ))
            }
        };
        let flush = parse_num::<i64>("flush.messages", &val("flush.messages"))?;
        Ok(LogConfig {
            segment_bytes: effective_segment_bytes(overrides, &val("segment.bytes"))?,
            segment_ms: positive("segment.ms", &val("segment.ms"))?,
            segment_index_bytes: positive::<i64>(
                "segment.index.bytes",
                &val("segment.index.bytes"),
            )? as u64,
            index_interval_bytes: parse_num::<u64>(
                "index.interval.bytes",
                &val("index.interval.bytes"),
            )?,
            retention_ms: at_least_minus_one("retention.ms", &val("retention.ms"))?,
            retention_bytes: at_least_minus_one("retention.bytes", &val("retention.bytes"))?,
            flush_interval_messages: if flush <= 0 { 1 } else { flush as u64 },
            message_timestamp_type: ts_type,
            max_message_bytes: positive::<i64>("max.message.bytes", &val("max.message.bytes"))?
                as usize,
            message_timestamp_before_max_ms: parse_num(
                "message.timestamp.before.max.ms",
                &val("message.timestamp.before.max.ms"),
            )?,
            message_timestamp_after_max_ms: parse_num(
                "message.timestamp.after.max.ms",
                &val("message.timestamp.after.max.ms"),
            )?,
            cleanup_policy_delete: val("cleanup.policy")
                .split(',')
                .any(|p| p.trim() == "delete"),
            cleanup_policy_compact: val("cleanup.policy")
                .split(',')
                .any(|p| p.trim() == "compact"),
            delete_retention_ms: parse_num("delete.retention.ms", &val("delete.retention.ms"))?,
            min_compaction_lag_ms: parse_num(
                "min.compaction.lag.ms",
                &val("min.compaction.lag.ms"),
            )?,
            max_compaction_lag_ms: parse_num(
                "max.compaction.lag.ms",
                &val("max.compaction.lag.ms"),
            )?,
            min_cleanable_dirty_ratio: parse_num(
                "min.cleanable.dirty.ratio",
                &val("min.cleanable.dirty.ratio"),
            )?,
        })
    }

    /// Checks a set of topic config overrides (CreateTopics, IncrementalAlterConfigs) as
    /// Kafka's `LogConfig.validate` does: known names, each value's type and range, the
    /// cross-key rules, and that Brook can build the log's settings from them.
    pub fn validate_topic_configs(
        &self,
        dynamic: &DynamicBrokerConfigs,
        overrides: &BTreeMap<String, String>,
    ) -> Result<(), ConfigError> {
        for (k, v) in overrides {
            if INTERNAL_TOPIC_CONFIG_KEYS.contains(&k.as_str()) {
                continue;
            }
            let key = config_def::topic_key(k)
                .ok_or_else(|| ConfigError::UnknownTopicConfig(k.clone()))?;
            config_def::validate(key.name, key.ty, key.validator, v)
                .map_err(ConfigError::Invalid)?;
        }
        validate_topic_cross_keys(overrides, |k| self.topic_value(dynamic, overrides, k))?;
        self.log_config(dynamic, &canonical_topic_configs(overrides))
            .map(|_| ())
    }
}

/// The rules of Kafka's `LogConfig.validateValues` and `validateTopicLogConfigValues` that
/// span keys: the compaction lags' order, and tiered storage, which a broker without
/// `remote.log.storage.system.enable` refuses (Brook has no tiered storage).
fn validate_topic_cross_keys(
    overrides: &BTreeMap<String, String>,
    value: impl Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let long = |k: &str| value(k).and_then(|v| v.trim().parse::<i64>().ok());
    if let (Some(min), Some(max)) = (long("min.compaction.lag.ms"), long("max.compaction.lag.ms")) {
        if min > max {
            return Err(ConfigError::Invalid(format!(
                "conflict topic config setting min.compaction.lag.ms ({min}) > max.compaction.lag.ms ({max})"
            )));
        }
    }
    let remote = overrides
        .get("remote.storage.enable")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if remote {
        return Err(ConfigError::Invalid(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.".into(),
        ));
    }
    Ok(())
}

/// Topic overrides as Kafka prints them back (`config_def::canonical`): stored so, they
/// describe as Kafka's parsed values do and parse the same in `BrokerConfig::log_config`.
pub fn canonical_topic_configs(overrides: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    overrides
        .iter()
        .map(|(k, v)| {
            let v = match config_def::topic_key(k) {
                Some(key) => config_def::canonical(key.ty, v),
                None => v.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// Checks each key set in the file against Kafka's type and validator for it
/// (`config_def::broker_key`). `log.segment.bytes` is Brook's exception: it keeps the floor of
/// [`LOG_SEGMENT_BYTES_MIN`] so that tests can roll tiny segments.
fn validate_broker_values(
    values: &BTreeMap<String, String>,
    explicit: &std::collections::BTreeSet<String>,
) -> Result<(), ConfigError> {
    for k in explicit.iter().filter(|k| *k != "log.segment.bytes") {
        let (Some(key), Some(v)) = (config_def::broker_key(k), values.get(k)) else {
            continue;
        };
        if !v.is_empty() {
            config_def::validate(key.name, key.ty, key.validator, v)
                .map_err(ConfigError::Invalid)?;
        }
    }
    Ok(())
}

fn invalid(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

/// The broker's defaults with the given keys over them, and the set of keys given: Kafka's
/// `AbstractConfig` keeps the originals apart from the parsed values the same way. A key
/// neither Brook nor Kafka knows is an error; a Kafka key Brook does not act on is accepted
/// and logged.
fn merge_with_defaults(
    raw: BTreeMap<String, String>,
) -> Result<(BTreeMap<String, String>, BTreeSet<String>), ConfigError> {
    let mut explicit = BTreeSet::new();
    let mut values: BTreeMap<String, String> = BROKER_DEFAULTS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in raw {
        if crate::listeners::is_listener_prefixed_key(&k, |s| {
            config_def::kafka_broker_key(s).is_some() || values.contains_key(s)
        }) {
            // Read per listener (`listener_value`); never logged, as it may hold a secret.
        } else if crate::admin_security::is_https_key(&k) {
            // The admin listener's TLS keys (crate::admin_security); never logged either.
        } else if !values.contains_key(&k) && !AUTHORIZER_KEYS.contains(&k.as_str()) {
            let Some(kafka) = config_def::kafka_broker_key(&k) else {
                return Err(ConfigError::UnknownKey(k));
            };
            // A password is never logged (DescribeConfigs hides it too).
            let shown = if kafka.ty.is_sensitive() {
                "[hidden]"
            } else {
                v.as_str()
            };
            if k != "authorizer.class.name" {
                tracing::info!(key = %k, value = shown, "Kafka broker key accepted; Brook does not act on it");
            }
        }
        explicit.insert(k.clone());
        values.insert(k, v);
    }
    Ok((values, explicit))
}

/// `log.dir`, else `log.dirs` (Kafka's `KafkaConfig.logDirs` precedence), which must name one
/// directory: Brook has no JBOD.
fn single_log_dir(get: &impl Fn(&str) -> String) -> Result<PathBuf, ConfigError> {
    let log_dirs = match get("log.dir").as_str() {
        "" => get("log.dirs"),
        v => v.to_string(),
    };
    if log_dirs.contains(',') {
        return Err(invalid(
            "log.dirs",
            &log_dirs,
            "Brook supports one log directory",
        ));
    }
    Ok(PathBuf::from(log_dirs))
}

/// `admin.listener` (Brook's own key) and its TLS and authentication; none when unset.
fn admin_listener(
    values: &BTreeMap<String, String>,
) -> Result<(Option<SocketAddr>, crate::admin_security::AdminHttp), ConfigError> {
    match values.get("admin.listener").map(String::as_str) {
        None | Some("") => Ok((None, Default::default())),
        Some(v) => {
            let (addr, https) = crate::admin_security::parse_listener(v)
                .map_err(|why| invalid("admin.listener", v, &why))?;
            let http =
                crate::admin_security::from_values(values, https).map_err(ConfigError::Invalid)?;
            Ok((Some(addr), http))
        }
    }
}

/// Typed reads of the merged values by key, each checked as Kafka's `ConfigDef` type and
/// validator for that key check it; a missing key reads as the empty string.
struct TypedValues<'a>(&'a BTreeMap<String, String>);

impl TypedValues<'_> {
    fn raw(&self, key: &str) -> String {
        self.0.get(key).cloned().unwrap_or_default()
    }

    fn num<T: std::str::FromStr>(&self, key: &str) -> Result<T, ConfigError> {
        parse_num(key, &self.raw(key))
    }

    fn positive<T: std::str::FromStr + PartialOrd + Default>(
        &self,
        key: &str,
    ) -> Result<T, ConfigError> {
        positive(key, &self.raw(key))
    }

    /// A positive LONG of milliseconds.
    fn positive_ms(&self, key: &str) -> Result<u64, ConfigError> {
        Ok(positive::<i64>(key, &self.raw(key))? as u64)
    }

    fn bool(&self, key: &str) -> Result<bool, ConfigError> {
        parse_bool(key, &self.raw(key))
    }

    fn at_least_zero(&self, key: &str) -> Result<usize, ConfigError> {
        at_least_zero_int(key, &self.raw(key))
    }

    fn int_at_least(&self, key: &str, min: i32) -> Result<i32, ConfigError> {
        int_at_least(key, &self.raw(key), min)
    }

    /// Kafka's `CleanerConfig` keys.
    fn log_cleaner(&self) -> Result<LogCleanerConfig, ConfigError> {
        Ok(LogCleanerConfig {
            enable: self.bool("log.cleaner.enable")?,
            threads: self.at_least_zero("log.cleaner.threads")?,
            backoff_ms: self.num::<u64>("log.cleaner.backoff.ms")?,
            dedupe_buffer_bytes: self.num::<u64>("log.cleaner.dedupe.buffer.size")?,
        })
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError> {
    v.trim()
        .parse()
        .map_err(|_| invalid(key, v, "not a number in range"))
}

fn positive<T: std::str::FromStr + PartialOrd + Default>(
    key: &str,
    v: &str,
) -> Result<T, ConfigError> {
    let n: T = parse_num(key, v)?;
    if n <= T::default() {
        return Err(invalid(key, v, "must be positive"));
    }
    Ok(n)
}

/// `<prefix>.num` samples of `<prefix>.size.seconds` each (Kafka's `ClientQuotaManagerConfig`
/// from `quota.window.*` or `controller.quota.window.*`).
fn quota_window(
    get: &impl Fn(&str) -> String,
    prefix: &str,
) -> Result<crate::quota::QuotaWindow, ConfigError> {
    let num = format!("{prefix}.num");
    let size = format!("{prefix}.size.seconds");
    Ok(crate::quota::QuotaWindow {
        samples: positive::<i32>(&num, &get(&num))? as usize,
        window_ms: positive::<i32>(&size, &get(&size))? as i64 * 1000,
    })
}

/// `queued.max.request.bytes`: a value <= 0 means no bound; a bound must hold the largest
/// frame the broker accepts (Kafka's `KafkaConfig.validateValues` requires the same), so that
/// every frame can be served once the pool is free.
fn queued_max_request_bytes(
    v: &str,
    socket_request_max: &str,
) -> Result<Option<usize>, ConfigError> {
    const KEY: &str = "queued.max.request.bytes";
    let n: i64 = parse_num(KEY, v)?;
    if n <= 0 {
        return Ok(None);
    }
    let frame_max: i64 = parse_num("socket.request.max.bytes", socket_request_max)?;
    if n < frame_max {
        return Err(invalid(
            KEY,
            v,
            "must be larger or equal to socket.request.max.bytes",
        ));
    }
    Ok(Some(n as usize))
}

/// An INT config with Kafka's `atLeast(0)` validator.
fn at_least_zero_int(key: &str, v: &str) -> Result<usize, ConfigError> {
    let n: i32 = parse_num(key, v)?;
    if n < 0 {
        return Err(invalid(key, v, "must be 0 or more"));
    }
    Ok(n as usize)
}

/// Each broker listener's `max.connection.creation.rate` as Kafka's `ConnectionQuotas.addListener`
/// configures its `ListenerConnectionQuota`: from `valuesWithPrefixOverride(configPrefix)`, so
/// the listener's prefixed key, else the broker-wide key, parsed and checked by the key's own
/// definition (`atLeast(0)`), whose name the error carries.
fn listener_connection_creation_rates(
    values: &BTreeMap<String, String>,
    listeners: &crate::listeners::Listeners,
) -> Result<BTreeMap<Arc<str>, i32>, ConfigError> {
    const KEY: &str = "max.connection.creation.rate";
    let mut rates = BTreeMap::new();
    for l in &listeners.broker {
        let prefixed = format!("{}{KEY}", l.config_prefix());
        let v = values.get(&prefixed).or_else(|| values.get(KEY));
        let rate = at_least_zero_int(KEY, v.map_or("2147483647", String::as_str))?;
        rates.insert(l.name.clone(), rate as i32);
    }
    Ok(rates)
}

/// `max.connections.per.ip`: Kafka accepts 0 only together with
/// `max.connections.per.ip.overrides` (`KafkaConfig.validateValues`), which Brook does not
/// offer, so here it must be at least 1.
fn max_connections_per_ip(v: &str) -> Result<usize, ConfigError> {
    const KEY: &str = "max.connections.per.ip";
    match at_least_zero_int(KEY, v)? {
        0 => Err(invalid(
            KEY,
            v,
            "0 needs max.connections.per.ip.overrides, which Brook does not support",
        )),
        n => Ok(n),
    }
}

/// A replication throttle rate (bytes per second), Kafka's LONG with `atLeast(0)`.
pub fn validate_throttle_rate(key: &str, v: &str) -> Result<(), ConfigError> {
    let n: i64 = parse_num(key, v)?;
    if n < 0 {
        return Err(invalid(key, v, "must be at least 0"));
    }
    Ok(())
}

/// An INT config (it must fit an i32, as Kafka's `ConfigDef.Type.INT`) of at least `min`.
fn int_at_least(key: &str, v: &str, min: i32) -> Result<i32, ConfigError> {
    let n: i32 = parse_num(key, v)?;
    if n < min {
        return Err(invalid(key, v, &format!("must be at least {min}")));
    }
    Ok(n)
}

/// The segment size a log rolls at: `internal.segment.bytes` when the topic sets it, else
/// `segment.bytes` (the topic's or the broker's `log.segment.bytes`), as Kafka's
/// `LogConfig.segmentSize()` chooses. Either must fit an i32: positions in a segment and its
/// index are 32-bit.
fn effective_segment_bytes(
    overrides: &BTreeMap<String, String>,
    segment_bytes: &str,
) -> Result<u64, ConfigError> {
    let n = match overrides.get("internal.segment.bytes") {
        Some(v) => int_at_least("internal.segment.bytes", v, LOG_SEGMENT_BYTES_MIN)?,
        None => int_at_least("segment.bytes", segment_bytes, LOG_SEGMENT_BYTES_MIN)?,
    };
    Ok(n as u64)
}

fn at_least_minus_one(key: &str, v: &str) -> Result<i64, ConfigError> {
    let n: i64 = parse_num(key, v)?;
    if n < -1 {
        return Err(invalid(key, v, "must be -1 (unlimited) or more"));
    }
    Ok(n)
}

fn parse_bool(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, v, "expected true or false")),
    }
}

fn split_kv(s: &str) -> Option<(String, String)> {
    let (k, v) = s.split_once('=')?;
    let k = k.trim();
    if k.is_empty() {
        return None;
    }
    Some((k.to_string(), v.trim().to_string()))
}

/// Parses Java-properties-style text: `key=value` lines, `#` and `!` comments, blank lines,
/// and a line ending in a backslash continued on the next (its leading blanks dropped), as
/// `java.util.Properties` reads them (long `sasl.jaas.config` values are written so).
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with('!') {
            continue;
        }
        let mut logical = t.to_string();
        while ends_in_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        out.push(split_kv(&logical).ok_or(ConfigError::Syntax {
            line: i + 1,
            text: logical.clone(),
        })?);
    }
    Ok(out)
}

/// Whether a line ends in an odd number of backslashes (an even number is escaped ones).
fn ends_in_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(lines: &[&str]) -> Result<BrokerConfig, ConfigError> {
        let o: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        BrokerConfig::load(None, &o)
    }

    #[test]
    fn defaults_match_kafka() {
        let none = DynamicBrokerConfigs::new();
        let c = load(&[]).unwrap();
        assert_eq!(c.listener().port(), 9092);
        assert_eq!(c.topic_default(&none, "retention.ms").unwrap(), "604800000");
        assert_eq!(c.topic_default(&none, "min.insync.replicas").unwrap(), "1");
        assert_eq!(c.topic_default(&none, "cleanup.policy").unwrap(), "delete");
        let lc = c.log_config(&none, &BTreeMap::new()).unwrap();
        assert_eq!(lc.segment_bytes, 1 << 30);
        assert_eq!(lc.flush_interval_messages, i64::MAX as u64);
    }

    #[test]
    fn queued_max_request_bytes_is_kafkas() {
        assert_eq!(
            load(&[]).unwrap().queued_max_request_bytes,
            None,
            "-1 by default"
        );
        assert_eq!(
            load(&["queued.max.request.bytes=0"])
                .unwrap()
                .queued_max_request_bytes,
            None
        );
        let c = load(&["queued.max.request.bytes=104857600"]).unwrap();
        assert_eq!(c.queued_max_request_bytes, Some(104_857_600));
        let e = load(&["queued.max.request.bytes=1000"]).unwrap_err();
        assert!(e.to_string().contains("queued.max.request.bytes"), "{e}");
        let c = load(&[
            "socket.request.max.bytes=1000",
            "queued.max.request.bytes=1000",
        ])
        .unwrap();
        assert_eq!(c.queued_max_request_bytes, Some(1000));
    }

    #[test]
    fn unknown_key_is_named() {
        let e = load(&["min.insync.replica=2"]).unwrap_err();
        assert!(e.to_string().contains("min.insync.replica"), "{e}");
    }

    /// A Kafka server.properties loads: keys Brook does not act on are kept, type-checked as
    /// Kafka checks them, and reported as set in the file.
    #[test]
    fn kafka_keys_brook_does_not_act_on_are_accepted_and_type_checked() {
        let c = load(&["num.replica.fetchers=4", "ssl.keystore.password=secret"]).unwrap();
        assert_eq!(c.values["num.replica.fetchers"], "4");
        assert!(c.explicit.contains("num.replica.fetchers"));
        let e = load(&["num.replica.fetchers=four"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid value four for configuration num.replica.fetchers: Not a number of type INT"
        );
    }

    #[test]
    fn malformed_values_are_named() {
        let e = load(&["num.partitions=zero"]).unwrap_err();
        assert!(e.to_string().contains("num.partitions"), "{e}");
        let e = load(&["listeners=SSL://127.0.0.1:9093"]).unwrap_err();
        assert!(e.to_string().contains("listeners"), "{e}");
        assert!(matches!(
            load(&["novalue"]),
            Err(ConfigError::Syntax { .. })
        ));
    }

    #[test]
    fn continued_lines_join_as_java_properties_do() {
        let p = parse_properties("a=one \\\n    two\nb=x\\\\\n").unwrap();
        assert_eq!(
            p,
            vec![("a".into(), "one two".into()), ("b".into(), "x\\\\".into())]
        );
    }

    #[test]
    fn properties_file_syntax() {
        let p = parse_properties("# c\n\nnode.id = 3\n! x\nlog.dirs=/tmp/x\n").unwrap();
        assert_eq!(
            p,
            vec![
                ("node.id".into(), "3".into()),
                ("log.dirs".into(), "/tmp/x".into())
            ]
        );
    }

    #[test]
    fn kraft_listeners_and_keys() {
        let c = load(&[
            "process.roles=broker,controller",
            "controller.quorum.voters=1@127.0.0.1:9192",
            "controller.listener.names=CONTROLLER",
            "listeners=CONTROLLER://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9092",
            "broker.session.timeout.ms=500",
        ])
        .unwrap();
        assert_eq!(c.listener().port(), 9092);
        assert_eq!(c.controller_listener().unwrap().port(), 9192);
        assert_eq!(c.broker_session_timeout_ms, 500);
        assert_eq!(c.broker_heartbeat_interval_ms, 2000);
        // Single-node configs are unchanged: the first listener is the broker's.
        let c = load(&["listeners=PLAINTEXT://127.0.0.1:9093"]).unwrap();
        assert_eq!(c.listener().port(), 9093);
        assert!(c.controller_listener().is_none());
        assert!(load(&["broker.session.timeout.ms=0"]).is_err());
    }

    #[test]
    fn retention_hours_and_minutes() {
        let none = DynamicBrokerConfigs::new();
        let c = load(&["log.retention.hours=1"]).unwrap();
        assert_eq!(c.topic_default(&none, "retention.ms").unwrap(), "3600000");
        let c = load(&["log.retention.minutes=2", "log.retention.hours=1"]).unwrap();
        assert_eq!(c.topic_default(&none, "retention.ms").unwrap(), "120000");
    }

    #[test]
    fn segment_bytes_bounds_are_kafkas() {
        let none = DynamicBrokerConfigs::new();
        let e = load(&["log.segment.bytes=2147483648"]).unwrap_err();
        assert!(e.to_string().contains("log.segment.bytes"), "{e}");
        let e = load(&["log.segment.bytes=13"]).unwrap_err();
        assert!(e.to_string().contains("log.segment.bytes"), "{e}");
        let c = load(&["log.segment.bytes=14"]).unwrap();
        assert_eq!(
            c.log_config(&none, &BTreeMap::new()).unwrap().segment_bytes,
            14
        );
        let c = load(&["log.segment.bytes=2147483647"]).unwrap();
        let check = |k: &str, v: &str| {
            let o = BTreeMap::from([(k.to_string(), v.to_string())]);
            c.validate_topic_configs(&none, &o)
        };
        assert!(check("segment.bytes", "2147483648").is_err());
        assert!(check("segment.bytes", "1048575").is_err());
        assert!(check("segment.bytes", "1048576").is_ok());
        assert!(check("segment.bytes", "2147483647").is_ok());
        assert!(check("internal.segment.bytes", "200").is_ok());
        assert!(check("internal.segment.bytes", "2147483648").is_err());
        let o = BTreeMap::from([("internal.segment.bytes".to_string(), "200".to_string())]);
        assert_eq!(c.log_config(&none, &o).unwrap().segment_bytes, 200);
    }

    #[test]
    fn connection_limits_are_kafkas() {
        let c = load(&[]).unwrap();
        assert_eq!(c.max_connections, i32::MAX as usize);
        assert_eq!(c.max_connections_per_ip, i32::MAX as usize);
        let c = load(&["max.connections=0", "max.connections.per.ip=2"]).unwrap();
        assert_eq!((c.max_connections, c.max_connections_per_ip), (0, 2));
        for bad in [
            "max.connections=-1",
            "max.connections.per.ip=0",
            "max.connections.per.ip=2147483648",
        ] {
            let key = bad.split('=').next().unwrap();
            let e = load(&[bad]).unwrap_err();
            assert!(e.to_string().contains(key), "{bad}: {e}");
        }
    }

    #[test]
    fn topic_overrides_are_validated() {
        let none = DynamicBrokerConfigs::new();
        let c = load(&[]).unwrap();
        let mut o = BTreeMap::new();
        o.insert("retention.ms".to_string(), "-5".to_string());
        assert!(c.validate_topic_configs(&none, &o).is_err());
        o.insert("retention.ms".to_string(), "1000".to_string());
        assert!(c.validate_topic_configs(&none, &o).is_ok());
        o.insert("bogus".to_string(), "1".to_string());
        assert!(matches!(
            c.validate_topic_configs(&none, &o),
            Err(ConfigError::UnknownTopicConfig(_))
        ));
    }
}
