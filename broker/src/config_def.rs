//! The typed definition of every config key Brook answers for, as Kafka 4.4 declares it:
//! topic keys (Kafka's `LogConfig` with `TopicConfig`'s names and `ServerTopicConfigSynonyms`),
//! broker keys (`KafkaConfig`'s `ConfigDef`, with `DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS`
//! for which of them Kafka can change at run time) and group keys (`GroupConfig`).
//!
//! Each key carries its `ConfigDef` type, default and validator, so that validation answers
//! with the same INVALID_CONFIG message a Kafka broker gives
//! (`Invalid value V for configuration K: REASON`), and DescribeConfigs reports the same type,
//! default and synonyms. Broker defaults themselves live in `config::BROKER_DEFAULTS`; this
//! module only adds what a key is.

/// Errors found while reading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("line {line}: expected key=value, got {text:?}")]
    Syntax { line: usize, text: String },
    #[error("unknown config key {0:?}")]
    UnknownKey(String),
    /// A topic key Kafka does not define (the message is Kafka's `LogConfig.validateNames`).
    #[error("Unknown topic config name: {0}")]
    UnknownTopicConfig(String),
    /// A value refused with the message Kafka's `ConfigDef` validation gives.
    #[error("{0}")]
    Invalid(String),
    #[error("Invalid value {value} for configuration {key}: {reason}")]
    InvalidValue {
        key: String,
        value: String,
        reason: String,
    },
}

/// Kafka's `ConfigDef.Type`; [`ConfigType::code`] is DescribeConfigs' `config_type`
/// (`DescribeConfigsResponse.ConfigType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
    Password,
}

impl ConfigType {
    /// The wire id of the type in DescribeConfigs v3+.
    pub fn code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Short => 4,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
            ConfigType::Class => 8,
            ConfigType::Password => 9,
        }
    }

    /// The type a Kafka name (`ConfigDef.Type`'s) stands for.
    pub fn from_kafka_name(name: &str) -> Option<ConfigType> {
        [
            ConfigType::Boolean,
            ConfigType::String,
            ConfigType::Int,
            ConfigType::Short,
            ConfigType::Long,
            ConfigType::Double,
            ConfigType::List,
            ConfigType::Class,
            ConfigType::Password,
        ]
        .into_iter()
        .find(|t| t.kafka_name() == name)
    }

    /// The name Kafka's parse errors use ("Not a number of type LONG").
    fn kafka_name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::String => "STRING",
            ConfigType::Int => "INT",
            ConfigType::Short => "SHORT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::List => "LIST",
            ConfigType::Class => "CLASS",
            ConfigType::Password => "PASSWORD",
        }
    }

    /// Kafka's `KafkaConfig.maybeSensitive`: only passwords are hidden.
    pub fn is_sensitive(self) -> bool {
        self == ConfigType::Password
    }
}

/// The validators of Kafka's `ConfigDef` that the keys below use.
#[derive(Debug, Clone, Copy)]
pub enum Validator {
    None,
    /// `Range.atLeast`.
    AtLeast(i64),
    /// `Range.between` (inclusive).
    Between(i64, i64),
    /// `ValidString.in`.
    OneOf(&'static [&'static str]),
    /// `ValidList.in`: every item of a list must be one of these.
    ListOf(&'static [&'static str]),
    /// gzip's level: 1 to 9, or -1 for the codec's default (`GzipCompression.LevelValidator`).
    GzipLevel,
    /// `ThrottledReplicaListValidator`: `*` or `partition:broker` pairs.
    ThrottledReplicas,
    /// `ShareGroupAutoOffsetResetStrategy.Validator`: `earliest`, `latest` or
    /// `by_duration:<ISO-8601 duration>`.
    ShareAutoOffsetReset,
}

/// One topic config key (Kafka's `LogConfig` definition of it).
#[derive(Debug, Clone, Copy)]
pub struct TopicConfigKey {
    pub name: &'static str,
    pub ty: ConfigType,
    /// `LogConfig`'s own default, used when no broker key supplies one.
    pub default: &'static str,
    pub validator: Validator,
    /// The broker keys that supply the default, highest precedence first
    /// (`ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS`); empty for keys without a
    /// broker-level default.
    pub synonyms: &'static [&'static str],
    /// Whether Brook acts on the key; the others are accepted, stored and described only
    /// (see docs/CONFIGS.md).
    pub applied: bool,
    pub doc: &'static str,
}

const LONG_MAX: &str = "9223372036854775807";

macro_rules! topic_key {
    ($name:expr, $ty:ident, $default:expr, $validator:expr, [$($syn:expr),*], $applied:expr, $doc:expr) => {
        TopicConfigKey {
            name: $name,
            ty: ConfigType::$ty,
            default: $default,
            validator: $validator,
            synonyms: &[$($syn),*],
            applied: $applied,
            doc: $doc,
        }
    };
}

/// Every topic config key of Kafka 4.4 that DescribeConfigs lists, in `LogConfig`'s order.
/// (`internal.segment.bytes`, an internal key, is in `config::INTERNAL_TOPIC_CONFIG_KEYS`.)
pub const TOPIC_CONFIGS: &[TopicConfigKey] = &[
    topic_key!("segment.bytes", Int, "1073741824", Validator::AtLeast(1024 * 1024), ["log.segment.bytes"], true,
        "Size in bytes at which the active segment of a partition is rolled."),
    topic_key!("segment.ms", Long, "604800000", Validator::AtLeast(1), ["log.roll.ms", "log.roll.hours"], true,
        "Age in milliseconds of the active segment after which it is rolled, even if not full."),
    topic_key!("segment.jitter.ms", Long, "0", Validator::AtLeast(0), ["log.roll.jitter.ms", "log.roll.jitter.hours"], false,
        "Random amount up to which segment.ms is shortened per segment, to spread rolls."),
    topic_key!("segment.index.bytes", Int, "10485760", Validator::AtLeast(4), ["log.index.size.max.bytes"], true,
        "Size in bytes preallocated for a segment's offset and time indexes."),
    topic_key!("flush.messages", Long, LONG_MAX, Validator::AtLeast(1), ["log.flush.interval.messages"], true,
        "Number of appended records after which the log is fsynced."),
    topic_key!("flush.ms", Long, LONG_MAX, Validator::AtLeast(0), ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"], false,
        "Time in milliseconds after which unflushed records are fsynced."),
    topic_key!("retention.bytes", Long, "-1", Validator::None, ["log.retention.bytes"], true,
        "Size in bytes a partition may reach before its oldest segments are deleted; -1 for no limit."),
    topic_key!("retention.ms", Long, "604800000", Validator::AtLeast(-1), ["log.retention.ms", "log.retention.minutes", "log.retention.hours"], true,
        "Age in milliseconds after which a segment is deleted; -1 for no limit."),
    topic_key!("max.message.bytes", Int, "1048588", Validator::AtLeast(0), ["message.max.bytes"], true,
        "Largest record batch in bytes the topic accepts."),
    topic_key!("max.decompressed.message.bytes", Int, "2147483639", Validator::Between(1, 2147483639), ["max.decompressed.message.bytes"], false,
        "Largest size in bytes a compressed batch may have once decompressed."),
    topic_key!("index.interval.bytes", Int, "4096", Validator::AtLeast(0), ["log.index.interval.bytes"], true,
        "Bytes of log between two offset-index entries."),
    topic_key!("delete.retention.ms", Long, "86400000", Validator::AtLeast(0), ["log.cleaner.delete.retention.ms"], true,
        "How long tombstones of a compacted topic are kept after compaction."),
    topic_key!("min.compaction.lag.ms", Long, "0", Validator::AtLeast(0), ["log.cleaner.min.compaction.lag.ms"], true,
        "Minimum age of a record before compaction may remove it."),
    topic_key!("max.compaction.lag.ms", Long, LONG_MAX, Validator::AtLeast(1), ["log.cleaner.max.compaction.lag.ms"], true,
        "Maximum age of a record before its segment must be compacted."),
    topic_key!("file.delete.delay.ms", Long, "60000", Validator::AtLeast(0), ["log.segment.delete.delay.ms"], false,
        "Delay between marking a segment deleted and removing its files."),
    topic_key!("min.cleanable.dirty.ratio", Double, "0.5", Validator::Between(0, 1), ["log.cleaner.min.cleanable.ratio"], true,
        "Share of uncompacted log above which the cleaner compacts a partition."),
    topic_key!("cleanup.policy", List, "delete", Validator::ListOf(&["compact", "delete"]), ["log.cleanup.policy"], true,
        "delete (drop old segments), compact (keep the last record per key), or both."),
    topic_key!("unclean.leader.election.enable", Boolean, "false", Validator::None, ["unclean.leader.election.enable"], true,
        "Whether a replica outside the ISR and ELR may become leader, at the cost of data loss."),
    topic_key!("min.insync.replicas", Int, "1", Validator::AtLeast(1), ["min.insync.replicas"], true,
        "Fewest in-sync replicas for an acks=all produce to succeed."),
    topic_key!("compression.type", String, "producer", Validator::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]), ["compression.type"], true,
        "Codec batches are stored with; producer keeps the producer's codec."),
    topic_key!("compression.gzip.level", Int, "-1", Validator::GzipLevel, ["compression.gzip.level"], false,
        "Level used when the broker compresses with gzip."),
    topic_key!("compression.lz4.level", Int, "9", Validator::Between(1, 17), ["compression.lz4.level"], false,
        "Level used when the broker compresses with lz4."),
    topic_key!("compression.zstd.level", Int, "3", Validator::Between(-131072, 22), ["compression.zstd.level"], false,
        "Level used when the broker compresses with zstd."),
    topic_key!("preallocate", Boolean, "false", Validator::None, ["log.preallocate"], false,
        "Whether a new segment file is preallocated on disk."),
    topic_key!("message.timestamp.type", String, "CreateTime", Validator::OneOf(&["CreateTime", "LogAppendTime"]), ["log.message.timestamp.type"], true,
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append."),
    topic_key!("message.timestamp.before.max.ms", Long, LONG_MAX, Validator::AtLeast(0), ["log.message.timestamp.before.max.ms"], true,
        "How far in the past a CreateTime timestamp may be, against the broker's clock."),
    topic_key!("message.timestamp.after.max.ms", Long, "3600000", Validator::AtLeast(0), ["log.message.timestamp.after.max.ms"], true,
        "How far in the future a CreateTime timestamp may be, against the broker's clock."),
    topic_key!("leader.replication.throttled.replicas", List, "", Validator::ThrottledReplicas, [], false,
        "Replicas (partition:broker, or *) whose leader-side replication is throttled."),
    topic_key!("follower.replication.throttled.replicas", List, "", Validator::ThrottledReplicas, [], false,
        "Replicas (partition:broker, or *) whose follower-side replication is throttled."),
    topic_key!("remote.storage.enable", Boolean, "false", Validator::None, [], false,
        "Tiered storage for the topic; Brook has none, so only false is accepted."),
    topic_key!("local.retention.ms", Long, "-2", Validator::AtLeast(-2), ["log.local.retention.ms"], false,
        "Local retention by age with tiered storage; -2 means retention.ms."),
    topic_key!("local.retention.bytes", Long, "-2", Validator::AtLeast(-2), ["log.local.retention.bytes"], false,
        "Local retention by size with tiered storage; -2 means retention.bytes."),
    topic_key!("remote.log.copy.disable", Boolean, "false", Validator::None, [], false,
        "Stops copying segments to tiered storage."),
    topic_key!("remote.copy.lag.ms", Long, "0", Validator::AtLeast(-1), ["log.remote.copy.lag.ms"], false,
        "Age a rolled segment reaches before it is copied to tiered storage."),
    topic_key!("remote.copy.lag.bytes", Long, "-1", Validator::AtLeast(-1), ["log.remote.copy.lag.bytes"], false,
        "Bytes of rolled segments kept before they are copied to tiered storage."),
    topic_key!("remote.log.delete.on.disable", Boolean, "false", Validator::None, [], false,
        "Whether tiered data is deleted when tiered storage is turned off for the topic."),
    topic_key!("errors.deadletterqueue.group.enable", Boolean, "false", Validator::None, [], false,
        "Whether groups may write failed records of this topic to a dead-letter queue."),
];

/// The topic key named `name`, if Kafka 4.4 defines it.
pub fn topic_key(name: &str) -> Option<&'static TopicConfigKey> {
    TOPIC_CONFIGS.iter().find(|k| k.name == name)
}

/// One broker key: its type, whether Kafka can change it at run time, and what it does.
#[derive(Debug, Clone, Copy)]
pub struct BrokerConfigKey {
    pub name: &'static str,
    pub ty: ConfigType,
    pub validator: Validator,
    /// In Kafka's `DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS`: DescribeConfigs reports it as not
    /// read-only.
    pub dynamic: bool,
    pub doc: &'static str,
}

macro_rules! broker_key {
    ($name:expr, $ty:ident, $validator:expr, $dynamic:expr, $doc:expr) => {
        BrokerConfigKey {
            name: $name,
            ty: ConfigType::$ty,
            validator: $validator,
            dynamic: $dynamic,
            doc: $doc,
        }
    };
}

const DYNAMIC: bool = true;
const STATIC: bool = false;

/// Broker keys whose definition is not a topic key's synonym (those are derived from
/// [`TOPIC_CONFIGS`] by [`broker_key`]).
const BROKER_KEYS: &[BrokerConfigKey] = &[
    broker_key!(
        "node.id",
        Int,
        Validator::AtLeast(0),
        STATIC,
        "Id of this node in the cluster."
    ),
    broker_key!(
        "listeners",
        List,
        Validator::None,
        DYNAMIC,
        "Addresses the node listens on, one per listener name."
    ),
    broker_key!(
        "advertised.listeners",
        List,
        Validator::None,
        STATIC,
        "Addresses published to clients in Metadata."
    ),
    broker_key!(
        "log.dirs",
        List,
        Validator::None,
        STATIC,
        "Directory holding the partition logs and metadata."
    ),
    broker_key!(
        "log.dir",
        List,
        Validator::None,
        STATIC,
        "The log directory when log.dirs is not set."
    ),
    broker_key!(
        "num.partitions",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Partitions of an auto-created topic."
    ),
    broker_key!(
        "default.replication.factor",
        Int,
        Validator::None,
        STATIC,
        "Replication factor of an auto-created topic."
    ),
    broker_key!(
        "auto.create.topics.enable",
        Boolean,
        Validator::None,
        STATIC,
        "Whether Metadata for an unknown topic creates it."
    ),
    broker_key!(
        "delete.topic.enable",
        Boolean,
        Validator::None,
        STATIC,
        "Whether DeleteTopics is allowed."
    ),
    broker_key!(
        "socket.request.max.bytes",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Largest request frame in bytes."
    ),
    broker_key!(
        "telemetry.max.bytes",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Largest PushTelemetry metrics payload in bytes (KIP-714); larger is TELEMETRY_TOO_LARGE."
    ),
    broker_key!(
        "queued.max.request.bytes",
        Long,
        Validator::None,
        STATIC,
        "Bytes of requests read and in flight across connections; -1 for no bound."
    ),
    broker_key!(
        "max.connections",
        Int,
        Validator::AtLeast(0),
        DYNAMIC,
        "Most open client connections on the broker listener."
    ),
    broker_key!(
        "max.connections.per.ip",
        Int,
        Validator::AtLeast(0),
        DYNAMIC,
        "Most open connections from one address."
    ),
    broker_key!(
        "connections.max.idle.ms",
        Long,
        Validator::None,
        STATIC,
        "Idle connections timeout: a connection with no bytes read or written for this long is closed."
    ),
    broker_key!(
        "fetch.max.bytes",
        Int,
        Validator::AtLeast(1024),
        STATIC,
        "The maximum number of bytes the broker returns for a fetch request."
    ),
    broker_key!(
        "max.incremental.fetch.session.cache.slots",
        Int,
        Validator::AtLeast(0),
        STATIC,
        "The maximum number of incremental fetch sessions that we will maintain."
    ),
    broker_key!(
        "log.roll.hours",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "segment.ms default in hours, when log.roll.ms is not set."
    ),
    broker_key!(
        "log.roll.jitter.hours",
        Int,
        Validator::AtLeast(0),
        STATIC,
        "segment.jitter.ms default in hours, when log.roll.jitter.ms is not set."
    ),
    broker_key!(
        "log.retention.minutes",
        Int,
        Validator::None,
        STATIC,
        "retention.ms default in minutes, when log.retention.ms is not set."
    ),
    broker_key!(
        "log.retention.hours",
        Int,
        Validator::None,
        STATIC,
        "retention.ms default in hours, when neither log.retention.ms nor minutes is set."
    ),
    broker_key!(
        "log.flush.scheduler.interval.ms",
        Long,
        Validator::None,
        STATIC,
        "flush.ms default when log.flush.interval.ms is not set."
    ),
    broker_key!(
        "log.cleaner.enable",
        Boolean,
        Validator::None,
        STATIC,
        "Whether logs with cleanup.policy=compact are cleaned."
    ),
    broker_key!(
        "log.cleaner.threads",
        Int,
        Validator::AtLeast(0),
        DYNAMIC,
        "Number of log cleaner threads."
    ),
    broker_key!(
        "log.cleaner.backoff.ms",
        Long,
        Validator::AtLeast(0),
        DYNAMIC,
        "How long a cleaner thread sleeps when no log is due for cleaning."
    ),
    broker_key!(
        "log.cleaner.dedupe.buffer.size",
        Long,
        Validator::None,
        DYNAMIC,
        "Memory for the cleaners' offset maps, over all cleaner threads."
    ),
    broker_key!(
        "offsets.topic.segment.bytes",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "segment.bytes of __consumer_offsets, kept small for faster compaction."
    ),
    broker_key!(
        "log.retention.check.interval.ms",
        Long,
        Validator::AtLeast(1),
        STATIC,
        "How often retention is enforced."
    ),
    broker_key!(
        "replica.high.watermark.checkpoint.interval.ms",
        Long,
        Validator::None,
        STATIC,
        "How often high watermarks are checkpointed."
    ),
    broker_key!(
        "log.flush.offset.checkpoint.interval.ms",
        Int,
        Validator::AtLeast(0),
        STATIC,
        "How often recovery points are checkpointed."
    ),
    broker_key!(
        "log.flush.start.offset.checkpoint.interval.ms",
        Int,
        Validator::AtLeast(0),
        STATIC,
        "How often log start offsets are checkpointed."
    ),
    broker_key!(
        "producer.id.expiration.ms",
        Int,
        Validator::AtLeast(1),
        DYNAMIC,
        "Idle time after which a producer's dedup state is dropped."
    ),
    broker_key!(
        "replica.lag.time.max.ms",
        Long,
        Validator::None,
        STATIC,
        "Time a follower may stay behind before it leaves the ISR."
    ),
    broker_key!(
        "process.roles",
        List,
        Validator::ListOf(&["broker", "controller"]),
        STATIC,
        "Roles of this node in KRaft mode."
    ),
    broker_key!(
        "controller.quorum.voters",
        List,
        Validator::None,
        STATIC,
        "The static metadata quorum: id@host:port entries."
    ),
    broker_key!(
        "controller.listener.names",
        List,
        Validator::None,
        STATIC,
        "Listener names used by the controller quorum."
    ),
    broker_key!(
        "controller.quorum.election.timeout.ms",
        Int,
        Validator::AtLeast(0),
        STATIC,
        "How long a candidate waits for votes before a new election (the random part of the election timer)."
    ),
    broker_key!(
        "controller.quorum.fetch.timeout.ms",
        Int,
        Validator::AtLeast(0),
        STATIC,
        "Time without hearing from the quorum leader before a voter starts an election."
    ),
    broker_key!(
        "controller.socket.timeout.ms",
        Int,
        Validator::None,
        STATIC,
        "How long a write routed to the active controller may take, waiting for an election included."
    ),
    broker_key!(
        "auto.leader.rebalance.enable",
        Boolean,
        Validator::None,
        STATIC,
        "Whether the controller moves leadership back to preferred replicas."
    ),
    broker_key!(
        "leader.imbalance.check.interval.seconds",
        Long,
        Validator::AtLeast(1),
        STATIC,
        "How often leader imbalance is checked."
    ),
    broker_key!(
        "broker.heartbeat.interval.ms",
        Int,
        Validator::None,
        STATIC,
        "How often a broker heartbeats to the controller."
    ),
    broker_key!(
        "controlled.shutdown.enable",
        Boolean,
        Validator::None,
        STATIC,
        "Whether a stopping broker hands its leaderships over first."
    ),
    broker_key!(
        "broker.session.timeout.ms",
        Int,
        Validator::None,
        STATIC,
        "Time without heartbeats after which a broker is fenced."
    ),
    broker_key!(
        "initial.broker.registration.timeout.ms",
        Int,
        Validator::None,
        STATIC,
        "How long a starting broker waits to be registered and unfenced before it exits."
    ),
    broker_key!(
        "group.min.session.timeout.ms",
        Int,
        Validator::None,
        STATIC,
        "Smallest session timeout of a classic group member."
    ),
    broker_key!(
        "group.max.session.timeout.ms",
        Int,
        Validator::None,
        STATIC,
        "Largest session timeout of a classic group member."
    ),
    broker_key!(
        "group.initial.rebalance.delay.ms",
        Int,
        Validator::None,
        STATIC,
        "Wait before the first rebalance of an empty classic group."
    ),
    broker_key!(
        "group.max.size",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Most members of a classic group."
    ),
    broker_key!(
        "group.consumer.heartbeat.interval.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Heartbeat interval of consumer-protocol group members."
    ),
    broker_key!(
        "group.consumer.min.heartbeat.interval.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Smallest heartbeat interval a consumer group may set."
    ),
    broker_key!(
        "group.consumer.max.heartbeat.interval.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Largest heartbeat interval a consumer group may set."
    ),
    broker_key!(
        "group.share.heartbeat.interval.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Heartbeat interval of share group members."
    ),
    broker_key!(
        "group.share.session.timeout.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Session timeout of share group members."
    ),
    broker_key!(
        "group.share.max.size",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Most members a share group may have."
    ),
    broker_key!(
        "group.share.record.lock.duration.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "How long a share group member holds the records it acquired."
    ),
    broker_key!(
        "group.share.min.record.lock.duration.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Smallest acquisition lock duration."
    ),
    broker_key!(
        "group.share.max.record.lock.duration.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Largest acquisition lock duration."
    ),
    broker_key!(
        "group.share.delivery.count.limit",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Deliveries of a record before it is archived."
    ),
    broker_key!(
        "group.share.partition.max.record.locks",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Most records in flight per share-partition."
    ),
    broker_key!(
        "group.share.max.share.sessions",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Most share sessions this broker keeps."
    ),
    broker_key!(
        "group.streams.heartbeat.interval.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Heartbeat interval of streams group members."
    ),
    broker_key!(
        "group.streams.session.timeout.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Session timeout of streams group members."
    ),
    broker_key!(
        "group.streams.num.standby.replicas",
        Int,
        Validator::AtLeast(0),
        STATIC,
        "Standby replicas of each stateful task of a streams group (at most group.streams.max.standby.replicas)."
    ),
    broker_key!(
        "group.streams.initial.rebalance.delay.ms",
        Int,
        Validator::AtLeast(0),
        STATIC,
        "How long the first member of an empty streams group waits for others before the first target assignment."
    ),
    broker_key!(
        "group.streams.max.size",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Most members a streams group may have."
    ),
    broker_key!(
        "group.consumer.session.timeout.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Session timeout of consumer-protocol group members."
    ),
    broker_key!(
        "group.consumer.min.session.timeout.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Smallest session timeout a consumer group may set."
    ),
    broker_key!(
        "group.consumer.max.session.timeout.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Largest session timeout a consumer group may set."
    ),
    broker_key!(
        "group.consumer.max.size",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Most members of a consumer group."
    ),
    broker_key!(
        "group.consumer.migration.policy",
        String,
        Validator::None,
        STATIC,
        "Online migration of non-empty groups between the classic and consumer protocols: bidirectional, upgrade, downgrade or disabled (case-insensitive)."
    ),
    broker_key!(
        "offsets.topic.num.partitions",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Partitions of __consumer_offsets."
    ),
    broker_key!(
        "offsets.topic.replication.factor",
        Short,
        Validator::AtLeast(1),
        STATIC,
        "Replication factor of __consumer_offsets."
    ),
    broker_key!(
        "offsets.commit.timeout.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "How long an offset commit waits for replication."
    ),
    broker_key!(
        "offsets.retention.minutes",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "How long committed offsets of an empty group are kept."
    ),
    broker_key!(
        "offsets.retention.check.interval.ms",
        Long,
        Validator::AtLeast(1),
        STATIC,
        "How often expired offsets and empty groups are cleaned up."
    ),
    broker_key!(
        "offset.metadata.max.bytes",
        Int,
        Validator::None,
        STATIC,
        "Largest metadata string of a committed offset."
    ),
    broker_key!(
        "transaction.state.log.num.partitions",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Partitions of __transaction_state."
    ),
    broker_key!(
        "transaction.state.log.replication.factor",
        Short,
        Validator::AtLeast(1),
        STATIC,
        "Replication factor of __transaction_state."
    ),
    broker_key!(
        "transaction.state.log.min.isr",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "min.insync.replicas of __transaction_state."
    ),
    broker_key!(
        "transaction.state.log.segment.bytes",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "segment.bytes of __transaction_state."
    ),
    broker_key!(
        "share.coordinator.state.topic.num.partitions",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Partitions of __share_group_state."
    ),
    broker_key!(
        "share.coordinator.state.topic.replication.factor",
        Short,
        Validator::AtLeast(1),
        STATIC,
        "Replication factor of __share_group_state."
    ),
    broker_key!(
        "share.coordinator.state.topic.min.isr",
        Short,
        Validator::AtLeast(1),
        STATIC,
        "min.insync.replicas of __share_group_state."
    ),
    broker_key!(
        "share.coordinator.state.topic.segment.bytes",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "segment.bytes of __share_group_state."
    ),
    broker_key!(
        "share.coordinator.snapshot.update.records.per.snapshot",
        Int,
        Validator::Between(0, 500),
        STATIC,
        "ShareUpdate records of a share-partition between two ShareSnapshot records."
    ),
    broker_key!(
        "share.coordinator.write.timeout.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "How long a share state write waits for replication."
    ),
    broker_key!(
        "transaction.max.timeout.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Largest transaction timeout a producer may ask for."
    ),
    broker_key!(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "How often timed-out transactions are aborted."
    ),
    broker_key!(
        "transactional.id.expiration.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Idle time after which a transactional id is forgotten."
    ),
    broker_key!(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "How often expired transactional ids are removed."
    ),
    broker_key!(
        "transaction.partition.verification.enable",
        Boolean,
        Validator::None,
        DYNAMIC,
        "Whether a transactional produce is verified with the coordinator first."
    ),
    broker_key!(
        "add.partitions.to.txn.retry.backoff.ms",
        Int,
        Validator::AtLeast(1),
        STATIC,
        "Wait between a leader's attempts to add a partition to a transaction."
    ),
    broker_key!(
        "add.partitions.to.txn.retry.backoff.max.ms",
        Int,
        Validator::AtLeast(0),
        STATIC,
        "How long a leader retries adding a partition to a transaction \
         (at most request.timeout.ms)."
    ),
];

/// Brook's own keys, which Kafka does not define: accepted in server.properties and not
/// listed by DescribeConfigs.
pub const BROOK_ONLY_BROKER_KEYS: &[&str] = &[
    "admin.basic.auth.credentials.file",
    "admin.event.buffer.len.max",
    "admin.listener",
    "admin.metrics.authentication.required",
    "cluster.id",
    "leader.imbalance.per.broker.percentage",
];

/// Kafka 4.4's dynamic broker keys that are topic-default synonyms
/// (`DynamicLogConfig.ReconfigurableConfigs`): the first synonym of each topic key, plus
/// `log.roll.jitter.ms` and `log.flush.interval.ms`, which are first synonyms too.
fn synonym_is_dynamic(name: &str) -> bool {
    TOPIC_CONFIGS
        .iter()
        .any(|k| k.synonyms.first() == Some(&name))
}

/// The definition of broker key `name`: its own entry, or the one derived from the topic key
/// it is a synonym of (the topic key's type, except the hour/minute forms, which are INT), or
/// else Kafka's declaration of a key Brook does not act on.
pub fn broker_key(name: &str) -> Option<BrokerConfigKey> {
    brook_broker_key(name).or_else(|| {
        kafka_broker_key(name).map(|k| BrokerConfigKey {
            name: k.name,
            ty: k.ty,
            validator: Validator::None,
            dynamic: k.dynamic,
            doc: NOT_ACTED_ON_DOC,
        })
    })
}

/// The documentation DescribeConfigs gives a Kafka broker key Brook does not act on.
pub const NOT_ACTED_ON_DOC: &str =
    "A Kafka broker key that Brook accepts and describes with Kafka's default but does not act on.";

/// Whether Brook acts on broker key `name` at all (its own definition, or a topic key's
/// synonym); the other Kafka keys are only accepted and described.
pub fn brook_acts_on(name: &str) -> bool {
    brook_broker_key(name).is_some()
}

/// A broker key Brook defines itself or through a topic key.
fn brook_broker_key(name: &str) -> Option<BrokerConfigKey> {
    if let Some(k) = BROKER_KEYS.iter().find(|k| k.name == name) {
        return Some(*k);
    }
    let topic = TOPIC_CONFIGS.iter().find(|k| k.synonyms.contains(&name))?;
    Some(BrokerConfigKey {
        name: topic.synonyms.iter().find(|s| **s == name).copied()?,
        ty: topic.ty,
        validator: topic.validator,
        dynamic: synonym_is_dynamic(name),
        doc: topic.doc,
    })
}

/// One broker key as Kafka 4.4's `KafkaConfig` declares it (`kafka_broker_keys.tsv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KafkaBrokerKey {
    pub name: &'static str,
    pub ty: ConfigType,
    /// `None` for a null default or a required key (`process.roles`, `node.id`).
    pub default: Option<&'static str>,
    /// In `DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS`.
    pub dynamic: bool,
}

/// Kafka 4.4's broker keys (non-internal), generated from the reference jars by
/// `scripts/gen-kafka-broker-keys`. Compiled in; parsed once.
const KAFKA_BROKER_KEYS_TSV: &str = include_str!("kafka_broker_keys.tsv");

/// Every broker key Kafka 4.4 declares, by name.
pub fn kafka_broker_keys() -> &'static [KafkaBrokerKey] {
    static KEYS: std::sync::LazyLock<Vec<KafkaBrokerKey>> = std::sync::LazyLock::new(|| {
        KAFKA_BROKER_KEYS_TSV
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                parse_kafka_broker_key(l)
                    .unwrap_or_else(|| panic!("kafka_broker_keys.tsv: bad row {l:?}"))
            })
            .collect()
    });
    &KEYS
}

/// Kafka 4.4's declaration of broker key `name`.
pub fn kafka_broker_key(name: &str) -> Option<&'static KafkaBrokerKey> {
    let keys = kafka_broker_keys();
    keys.binary_search_by(|k| k.name.cmp(name))
        .ok()
        .map(|i| &keys[i])
}

fn parse_kafka_broker_key(row: &'static str) -> Option<KafkaBrokerKey> {
    let mut f = row.split('\t');
    let (name, ty, default, dynamic) = (f.next()?, f.next()?, f.next()?, f.next()?);
    Some(KafkaBrokerKey {
        name,
        ty: ConfigType::from_kafka_name(ty)?,
        default: (!matches!(default, "<null>" | "<none>")).then_some(default),
        dynamic: dynamic.parse().ok()?,
    })
}

/// Kafka's `DynamicBrokerConfig.brokerConfigSynonyms` (without listener prefixes, which
/// Brook has none of): the keys that define the same setting, highest precedence first.
pub fn broker_config_synonyms(name: &str) -> Vec<&'static str> {
    const GROUPS: &[&[&str]] = &[
        &["log.roll.ms", "log.roll.hours"],
        &["log.roll.jitter.ms", "log.roll.jitter.hours"],
        &["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
        &[
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
        ],
    ];
    // `log.flush.scheduler.interval.ms` on its own has only itself as a synonym in Kafka:
    // the pair is listed under `log.flush.interval.ms` only.
    match GROUPS
        .iter()
        .find(|g| g.contains(&name) && name != "log.flush.scheduler.interval.ms")
    {
        Some(g) => g.to_vec(),
        None => broker_key(name).map(|k| vec![k.name]).unwrap_or_default(),
    }
}

/// How a broker synonym's value turns into the topic key's unit (Kafka's `ConfigSynonym`
/// converters: hours and minutes to milliseconds).
pub fn synonym_to_topic_value(synonym: &str, value: &str) -> Option<String> {
    let factor = if synonym.ends_with(".hours") {
        3_600_000
    } else if synonym.ends_with(".minutes") {
        60_000
    } else {
        return Some(value.to_string());
    };
    let n: i64 = value.trim().parse().ok()?;
    Some(n.saturating_mul(factor).to_string())
}

/// Whether Brook applies a dynamic broker key at run time: the defaults of the topic keys
/// (each topic's log settings are rebuilt when they change; the controller resolves
/// `min.insync.replicas` as the partition does), except `unclean.leader.election.enable`:
/// Kafka's controller elects leaderless partitions uncleanly when it turns true, which Brook's
/// controller does not do for a dynamic change.
pub fn dynamic_key_applied(name: &str) -> bool {
    synonym_is_dynamic(name) && name != "unclean.leader.election.enable"
}

/// One group config key (Kafka's `GroupConfig`) and the broker key that supplies its default.
#[derive(Debug, Clone, Copy)]
pub struct GroupConfigKey {
    pub name: &'static str,
    pub ty: ConfigType,
    pub validator: Validator,
    /// The broker key that supplies the default (`GroupConfig.brokerSynonym`), if any.
    pub broker_synonym: Option<&'static str>,
    /// The group key's own default, for keys without a broker synonym.
    pub default: &'static str,
    pub doc: &'static str,
}

/// Documentation of the streams group keys: Brook serves no streams groups.
const NOT_SERVED_GROUP_DOC: &str =
    "A Kafka streams group key; Brook serves no streams groups and describes it with Kafka's default.";

macro_rules! group_key {
    ($name:expr, $ty:ident, $validator:expr, $synonym:expr, $default:expr, $doc:expr) => {
        GroupConfigKey {
            name: $name,
            ty: ConfigType::$ty,
            validator: $validator,
            broker_synonym: $synonym,
            default: $default,
            doc: $doc,
        }
    };
}

/// Kafka 4.4's group keys (`GroupConfig`, without its internal ones), in name order. Brook's
/// group coordinator reads the `consumer.*` ones through their broker synonyms.
pub const GROUP_CONFIGS: &[GroupConfigKey] = &[
    group_key!(
        "consumer.assignment.interval.ms",
        Int,
        Validator::AtLeast(0),
        Some("group.consumer.assignment.interval.ms"),
        "",
        "Minimum time between two target assignments of this consumer group."
    ),
    group_key!(
        "consumer.heartbeat.interval.ms",
        Int,
        Validator::AtLeast(1),
        Some("group.consumer.heartbeat.interval.ms"),
        "",
        "Heartbeat interval of this group's members, within the broker's min and max."
    ),
    group_key!(
        "consumer.session.timeout.ms",
        Int,
        Validator::AtLeast(1),
        Some("group.consumer.session.timeout.ms"),
        "",
        "Session timeout of this group's members, within the broker's min and max."
    ),
    group_key!(
        "errors.deadletterqueue.copy.record.enable",
        Boolean,
        Validator::None,
        None,
        "false",
        "Whether a dead-letter record of this group copies the original record."
    ),
    group_key!(
        "errors.deadletterqueue.topic.name",
        String,
        Validator::None,
        None,
        "",
        "The dead-letter topic of this group, empty for none."
    ),
    group_key!(
        "share.assignment.interval.ms",
        Int,
        Validator::AtLeast(0),
        Some("group.share.assignment.interval.ms"),
        "",
        "Minimum time between two target assignments of this share group (stored; Brook assigns at each group epoch)."
    ),
    group_key!(
        "share.auto.offset.reset",
        String,
        Validator::ShareAutoOffsetReset,
        None,
        "latest",
        "Where a new share-partition of this group starts: earliest, latest or by_duration:<ISO-8601>; read when the share-partition is initialized."
    ),
    group_key!(
        "share.delivery.count.limit",
        Int,
        Validator::AtLeast(2),
        Some("group.share.delivery.count.limit"),
        "",
        "Deliveries of a record to this group before it is archived, within the broker's min and max."
    ),
    group_key!(
        "share.heartbeat.interval.ms",
        Int,
        Validator::AtLeast(1),
        Some("group.share.heartbeat.interval.ms"),
        "",
        "Heartbeat interval of this share group's members, within the broker's min and max."
    ),
    group_key!(
        "share.isolation.level",
        String,
        Validator::OneOf(&["read_committed", "read_uncommitted"]),
        None,
        "read_uncommitted",
        "read_committed hands this group records up to the last stable offset and archives aborted ones; read at each ShareFetch."
    ),
    group_key!(
        "share.partition.max.record.locks",
        Int,
        Validator::AtLeast(100),
        Some("group.share.partition.max.record.locks"),
        "",
        "Most records in flight per share-partition of this group, within the broker's min and max."
    ),
    group_key!(
        "share.record.lock.duration.ms",
        Int,
        Validator::AtLeast(1000),
        Some("group.share.record.lock.duration.ms"),
        "",
        "How long this group's members hold the records they acquire, within the broker's min and max."
    ),
    group_key!(
        "share.renew.acknowledge.enable",
        Boolean,
        Validator::None,
        None,
        "true",
        "Whether this group's members may RENEW their acquisition locks (ShareFetch and ShareAcknowledge v2)."
    ),
    group_key!(
        "share.session.timeout.ms",
        Int,
        Validator::AtLeast(1),
        Some("group.share.session.timeout.ms"),
        "",
        "Session timeout of this share group's members, within the broker's min and max."
    ),
    group_key!(
        "streams.assignment.interval.ms",
        Int,
        Validator::AtLeast(0),
        Some("group.streams.assignment.interval.ms"),
        "",
        NOT_SERVED_GROUP_DOC
    ),
    group_key!(
        "streams.assignor.name",
        String,
        Validator::None,
        Some("group.streams.assignors"),
        "",
        NOT_SERVED_GROUP_DOC
    ),
    group_key!(
        "streams.heartbeat.interval.ms",
        Int,
        Validator::AtLeast(1),
        Some("group.streams.heartbeat.interval.ms"),
        "",
        NOT_SERVED_GROUP_DOC
    ),
    group_key!(
        "streams.initial.rebalance.delay.ms",
        Int,
        Validator::AtLeast(0),
        Some("group.streams.initial.rebalance.delay.ms"),
        "",
        "How long the first member of the empty streams group waits for others before its first target assignment."
    ),
    group_key!(
        "streams.num.standby.replicas",
        Int,
        Validator::AtLeast(0),
        Some("group.streams.num.standby.replicas"),
        "",
        NOT_SERVED_GROUP_DOC
    ),
    group_key!(
        "streams.rack.aware.assignment.tags",
        List,
        Validator::None,
        Some("group.streams.rack.aware.assignment.tags"),
        "",
        NOT_SERVED_GROUP_DOC
    ),
    group_key!(
        "streams.session.timeout.ms",
        Int,
        Validator::AtLeast(1),
        Some("group.streams.session.timeout.ms"),
        "",
        NOT_SERVED_GROUP_DOC
    ),
];
/// Checks `value` against a key's type and validator, answering Kafka's `ConfigException`
/// message on failure: `Invalid value V for configuration K: REASON`, where V is the value,
/// the offending item of a `ValidList`, or the parsed list of a throttled-replica list.
pub fn validate(
    name: &str,
    ty: ConfigType,
    validator: Validator,
    value: &str,
) -> Result<(), String> {
    let failure = match parse_typed(ty, value) {
        Err(reason) => Some((value.to_string(), reason)),
        Ok(number) => check(name, validator, value, number.unwrap_or(0.0)),
    };
    match failure {
        None => Ok(()),
        Some((shown, reason)) => Err(format!(
            "Invalid value {shown} for configuration {name}: {reason}"
        )),
    }
}

/// A parsed number for range checks, or nothing for non-numeric types.
fn parse_typed(ty: ConfigType, value: &str) -> Result<Option<f64>, String> {
    let v = value.trim();
    let nan = || format!("Not a number of type {}", ty.kafka_name());
    match ty {
        ConfigType::Int => v.parse::<i32>().map(|n| Some(n as f64)).map_err(|_| nan()),
        ConfigType::Short => v.parse::<i16>().map(|n| Some(n as f64)).map_err(|_| nan()),
        ConfigType::Long => v.parse::<i64>().map(|n| Some(n as f64)).map_err(|_| nan()),
        ConfigType::Double => v.parse::<f64>().map(Some).map_err(|_| nan()),
        ConfigType::Boolean
            if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") =>
        {
            Ok(None)
        }
        ConfigType::Boolean => Err("Expected value to be either true or false".into()),
        _ => Ok(None),
    }
}

/// The shown value and the reason of a validator's refusal, if it refuses.
fn check(name: &str, validator: Validator, value: &str, n: f64) -> Option<(String, String)> {
    let plain = |reason: String| Some((value.to_string(), reason));
    match validator {
        Validator::None => None,
        Validator::AtLeast(min) if n < min as f64 => plain(format!("Value must be at least {min}")),
        Validator::Between(min, _) if n < min as f64 => {
            plain(format!("Value must be at least {min}"))
        }
        Validator::Between(_, max) if n > max as f64 => {
            plain(format!("Value must be no more than {max}"))
        }
        Validator::OneOf(allowed) if !allowed.contains(&value.trim()) => {
            plain(format!("String must be one of: {}", allowed.join(", ")))
        }
        Validator::ListOf(allowed) => list_items(value)
            .into_iter()
            .find(|i| !allowed.contains(i))
            .map(|bad| {
                (
                    bad.to_string(),
                    format!("String must be one of: {}", allowed.join(", ")),
                )
            }),
        Validator::GzipLevel if n != -1.0 && !(1.0..=9.0).contains(&n) => {
            plain("Value must be between 1 and 9 or equal to -1".into())
        }
        Validator::ShareAutoOffsetReset if AutoOffsetReset::parse(value).is_none() => {
            plain(format!(
                "Invalid value `{value}` for configuration {name}. The value must be either \
                 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
            ))
        }
        Validator::ThrottledReplicas if !throttled_replicas_valid(value) => Some((
            format!("[{}]", list_items(value).join(", ")),
            format!(
                "{name} must be the literal '*' or a list of replicas in the following format: \
                 [partitionId]:[brokerId],[partitionId]:[brokerId],..."
            ),
        )),
        _ => None,
    }
}

/// `*`, or comma-separated `partition:broker` pairs of integers (Kafka's
/// `ThrottledReplicaListValidator`).
fn throttled_replicas_valid(value: &str) -> bool {
    let items = list_items(value);
    if items == ["*"] {
        return true;
    }
    items.iter().all(|i| {
        i.split_once(':').is_some_and(|(p, b)| {
            p.trim().parse::<i32>().is_ok() && b.trim().parse::<i32>().is_ok()
        })
    })
}

/// The items of a LIST value, trimmed, empty ones dropped (Kafka's `ConfigDef.parseType`).
pub fn list_items(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// A value as Kafka prints it back (`ConfigDef.convertToString` of the parsed value):
/// numbers and booleans normalised, list items joined by commas.
pub fn canonical(ty: ConfigType, value: &str) -> String {
    let v = value.trim();
    match ty {
        ConfigType::Boolean => v.to_ascii_lowercase(),
        ConfigType::List => list_items(value).join(","),
        ConfigType::Int | ConfigType::Short | ConfigType::Long => v
            .parse::<i64>()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| v.to_string()),
        ConfigType::Double => v
            .parse::<f64>()
            .map(java_number)
            .unwrap_or_else(|_| v.to_string()),
        _ => v.to_string(),
    }
}

/// A double as Java's `Double.toString` prints ordinary values: `0.5`, `1.0`.
fn java_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e7 {
        format!("{n:.1}")
    } else {
        n.to_string()
    }
}

/// Kafka's `ShareGroupAutoOffsetResetStrategy`: where a new share-partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoOffsetReset {
    /// The log start offset.
    Earliest,
    /// The high watermark (Kafka's default).
    Latest,
    /// The first offset whose timestamp is at or after now minus this many milliseconds.
    ByDurationMs(i64),
}

impl AutoOffsetReset {
    /// Kafka's `ShareGroupAutoOffsetResetStrategy.fromString` (through the client's
    /// `AutoOffsetResetStrategy.fromString`): `earliest`, `latest`, or
    /// `by_duration:<ISO-8601 duration>` not negative; `none` is not a share strategy.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "earliest" => Some(AutoOffsetReset::Earliest),
            "latest" => Some(AutoOffsetReset::Latest),
            v => {
                let duration = v.strip_prefix("by_duration:")?;
                iso8601_duration_ms(duration)
                    .filter(|ms| *ms >= 0)
                    .map(AutoOffsetReset::ByDurationMs)
            }
        }
    }
}

/// Java's `Duration.parse` in milliseconds: `[-+]P[nD][T[nH][nM][n[.f]S]]`, letters in either
/// case, each number optionally signed, at least one part; `None` when it does not parse.
pub fn iso8601_duration_ms(text: &str) -> Option<i64> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let rest = rest.strip_prefix(['P', 'p'])?;
    let (date, time) = match rest.find(['T', 't']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mut total: i128 = 0;
    let mut parts = 0;
    if !date.is_empty() {
        let days = date.strip_suffix(['D', 'd'])?;
        total += parse_signed(days)? * 86_400_000;
        parts += 1;
    }
    if let Some(mut time) = time {
        if time.is_empty() {
            return None;
        }
        for (unit, ms) in [(['H', 'h'], 3_600_000i128), (['M', 'm'], 60_000)] {
            if let Some(i) = time.find(unit) {
                total += parse_signed(&time[..i])? * ms;
                time = &time[i + 1..];
                parts += 1;
            }
        }
        if !time.is_empty() {
            total += seconds_ms(time.strip_suffix(['S', 's'])?)?;
            parts += 1;
        }
    }
    if parts == 0 {
        return None;
    }
    let total = if negative { -total } else { total };
    i64::try_from(total).ok()
}

fn parse_signed(s: &str) -> Option<i128> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i128>().ok()
}

/// `n[.f]` seconds (up to 9 fraction digits), in milliseconds.
fn seconds_ms(s: &str) -> Option<i128> {
    let (whole, fraction) = match s.find(['.', ',']) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    };
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = parse_signed(whole)?;
    let nanos: i128 = format!("{fraction:0<9}").parse().ok()?;
    let nanos = if whole.starts_with('-') {
        -nanos
    } else {
        nanos
    };
    Some(secs * 1000 + nanos / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_broker_keys_are_read_sorted_and_whole() {
        let keys = kafka_broker_keys();
        assert!(keys.len() >= 340, "{} keys", keys.len());
        assert!(
            keys.windows(2).all(|w| w[0].name < w[1].name),
            "sorted by name"
        );
        let fetchers = kafka_broker_key("num.replica.fetchers").unwrap();
        assert_eq!(
            (fetchers.ty, fetchers.default, fetchers.dynamic),
            (ConfigType::Int, Some("1"), true)
        );
        assert_eq!(kafka_broker_key("process.roles").unwrap().default, None);
        assert!(kafka_broker_key("min.insync.replica").is_none());
    }

    /// Brook's own definitions of Kafka keys say what Kafka's say: type and dynamic flag.
    #[test]
    fn brooks_broker_keys_agree_with_kafkas_declarations() {
        let names = BROKER_KEYS.iter().map(|k| k.name).chain(
            TOPIC_CONFIGS
                .iter()
                .flat_map(|t| t.synonyms.iter().copied()),
        );
        let mut checked = 0;
        for name in names {
            let brook = brook_broker_key(name).unwrap();
            let Some(kafka) = kafka_broker_key(name) else {
                panic!("{name}: not a Kafka 4.4 broker key");
            };
            assert_eq!(
                (brook.ty, brook.dynamic),
                (kafka.ty, kafka.dynamic),
                "{name}: Brook's (type, dynamic) against Kafka's"
            );
            checked += 1;
        }
        assert!(checked > 90, "{checked} keys checked");
    }

    /// Brook's defaults are Kafka's, except where Brook's own start-up needs another value.
    /// An empty string stands for a null default (and for Kafka's empty `controller.quorum.voters`).
    #[test]
    fn brooks_broker_defaults_are_kafkas() {
        const OWN: &[&str] = &["node.id", "listeners", "log.dirs", "log.dir"];
        for (name, brook) in crate::config::BROKER_DEFAULTS {
            if OWN.contains(name) || BROOK_ONLY_BROKER_KEYS.contains(name) {
                continue;
            }
            let Some(kafka) = kafka_broker_key(name) else {
                panic!("{name}: not a Kafka 4.4 broker key (or add it to BROOK_ONLY_BROKER_KEYS)");
            };
            assert_eq!(
                Some(*brook).filter(|v| !v.is_empty()),
                kafka.default.filter(|v| !v.is_empty()),
                "{name}: Brook's default against Kafka's"
            );
        }
    }

    fn topic(name: &str, value: &str) -> Result<(), String> {
        let k = topic_key(name).unwrap();
        validate(k.name, k.ty, k.validator, value)
    }

    #[test]
    fn messages_are_kafkas() {
        // Each expected text is what Kafka 4.4's LogConfig.validate answers.
        let cases = [
            ("retention.ms", "-5", "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
            ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
            ("segment.bytes", "3000000000", "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"),
            ("min.cleanable.dirty.ratio", "1.5", "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
            ("cleanup.policy", "foo", "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"),
            ("compression.type", "brotli", "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
            ("preallocate", "yes", "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
            ("compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
            ("compression.zstd.level", "23", "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
            ("local.retention.ms", "-3", "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"),
            ("max.compaction.lag.ms", "0", "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1"),
        ];
        for (k, v, want) in cases {
            assert_eq!(topic(k, v).unwrap_err(), want, "{k}={v}");
        }
        for (k, v) in [
            ("retention.bytes", "-7"),
            ("cleanup.policy", "compact, delete"),
            ("cleanup.policy", ""),
            ("unclean.leader.election.enable", "True"),
            ("segment.ms", " 5 "),
            ("leader.replication.throttled.replicas", "*"),
            ("follower.replication.throttled.replicas", "0:1,1:2"),
            ("min.cleanable.dirty.ratio", "0.25"),
        ] {
            assert!(topic(k, v).is_ok(), "{k}={v}");
        }
        assert_eq!(
            topic("leader.replication.throttled.replicas", "abc").unwrap_err(),
            "Invalid value [abc] for configuration leader.replication.throttled.replicas: \
             leader.replication.throttled.replicas must be the literal '*' or a list of replicas \
             in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
        );
    }

    #[test]
    fn canonical_values_are_kafkas() {
        assert_eq!(canonical(ConfigType::Boolean, "True"), "true");
        assert_eq!(
            canonical(ConfigType::List, "compact, delete"),
            "compact,delete"
        );
        assert_eq!(canonical(ConfigType::Double, "1"), "1.0");
        assert_eq!(canonical(ConfigType::Long, " 5 "), "5");
    }

    #[test]
    fn broker_keys_and_synonyms() {
        assert_eq!(broker_key("log.retention.ms").unwrap().ty, ConfigType::Long);
        assert!(broker_key("log.retention.ms").unwrap().dynamic);
        assert!(!broker_key("log.retention.hours").unwrap().dynamic);
        assert_eq!(
            broker_key("log.retention.hours").unwrap().ty,
            ConfigType::Int
        );
        assert!(!broker_key("node.id").unwrap().dynamic);
        assert_eq!(
            broker_config_synonyms("log.retention.hours"),
            [
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours"
            ]
        );
        assert_eq!(
            synonym_to_topic_value("log.roll.hours", "2").unwrap(),
            "7200000"
        );
    }
}
