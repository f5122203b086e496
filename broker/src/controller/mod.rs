//! The metadata quorum and the active controller (Kafka's KRaft, combined mode).
//!
//! Every node listed in `controller.quorum.voters` is a Raft voter. The Raft log (openraft) is
//! the metadata log: entries are [`MetadataBatch`]es of [`MetadataRecord`]s, applied on every
//! node to a [`MetadataImage`] that is published on a watch channel ([`Controller::image`]).
//! The Raft leader is the **active controller**: it alone decides metadata changes
//! ([`request::decide`] and the control managers it hands each request to), fences brokers
//! that stop heartbeating, and elects partition leaders.
//!
//! Writes: every write method may be called on any node. A node that is not active forwards
//! the request to the active controller over the controller listener and returns its answer;
//! while no active controller is known (an election), the call waits for one, up to
//! `request_timeout_ms` (`controller.socket.timeout.ms`), then fails with NOT_CONTROLLER so
//! the caller can retry. A forwarded request is never forwarded again.
//!
//! Consistency: the active controller decides one request at a time (`write_lock`), on an
//! image that contains every committed record (`ensure_linearizable` before deciding), and
//! answers after the records are committed and applied locally.
//!
//! What is durable (`<log.dirs>/__cluster_metadata/`, see [`storage`]): the log, the vote,
//! the commit index and snapshots. Broker liveness (last heartbeat times) is not: a newly
//! active controller gives every unfenced broker a full session timeout, as Kafka does.

// The decisions are brook-controller's (no network, disk or clock); re-exported so that
// `crate::controller::image` and the like name the one definition.
pub use brook_controller::{
    acl_control, client_quota_control, cluster_control, configuration_control, error,
    feature_control, image, producer_id_control, replication_control, request, scram_control,
};
pub mod channel;
pub mod dynamic_voters;
mod network;
pub mod quorum;
mod storage;
pub mod voter_control;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, InitializeError, RaftError};
use openraft::{BasicNode, Raft, SnapshotPolicy};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

use crate::config::{BrokerConfig, ConfigError};
use crate::fault::FaultEngine;
use crate::log_limit::{key_of, RepeatLimiter};
pub use error::ControllerError;
pub use image::{
    BrokerRegistration, MetadataBatch, MetadataImage, MetadataRecord, PartitionRegistration,
    TopicImage, NO_LEADER,
};
pub use quorum::QuorumDescription;
pub use replication_control::list_partition_reassignments;
pub use request::{
    AlterPartitionRequest, ControllerReply, ControllerRequest, ElectionOutcome, ElectionType,
    ReassignmentResults,
};
pub use storage::METADATA_DIR;

/// Raft node ids are Kafka node ids (`node.id`), widened.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// openraft's type parameters for the metadata quorum.
    pub TypeConfig:
        D = MetadataBatch,
        R = (),
        NodeId = NodeId,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = std::io::Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A snapshot is taken after this many applied entries; the log before it is then purged,
/// which keeps `log.jsonl` rewrites (truncate, purge) short.
pub const SNAPSHOT_LOGS_SINCE_LAST: u64 = 1000;

/// Entries kept in the log behind a snapshot (at most; a fifth of the snapshot interval when
/// that is smaller), so a follower slightly behind catches up from the log rather than
/// needing the whole snapshot.
pub const LOGS_KEPT_AFTER_SNAPSHOT: u64 = 200;

/// Snapshot chunk size on the wire; far below `network::MAX_RPC_BODY_BYTES`.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1 << 20;

/// Entries per AppendEntries request; bounds the request body with the entry size bound
/// (`replication_control::MAX_PARTITIONS_PER_REQUEST`).
pub const MAX_ENTRIES_PER_APPEND: u64 = 64;

/// Attempts of one write against changing active controllers before giving up (each waits
/// at most an election timeout for leadership to move; `request_timeout_ms` bounds the sum).
pub const MAX_SUBMIT_ATTEMPTS: usize = 16;

/// NOT_CONTROLLER answers from one node, while it remains the known leader, before a write
/// gives up (see `Inner::submit`).
pub const MAX_SAME_LEADER_REFUSALS: usize = 4;

/// Writes queued on the active controller (waiting for `write_lock`) at most; more are
/// refused with REQUEST_TIMED_OUT rather than queued without bound.
pub const MAX_PENDING_WRITES: usize = 1024;

/// The controller listener's name when `controller.listener.names` is empty (Kafka's usual one).
pub const DEFAULT_LISTENER_NAME: &str = "CONTROLLER";

/// How long DescribeQuorum waits for a Raft leader to be known, and for its forwarded answer.
pub const DESCRIBE_QUORUM_TIMEOUT: Duration = Duration::from_secs(5);

/// The address a single node's one voter is recorded under in the quorum's membership: it
/// has no controller listener, since no other voter ever calls it.
pub const SINGLE_VOTER_ADDRESS: &str = "127.0.0.1:0";

/// Settings of the quorum and of the active controller's broker liveness checks.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// This node's id (`node.id`); must be one of `voters`.
    pub node_id: i32,
    /// `controller.quorum.voters`: id → `host:port` of each voter's controller listener: the
    /// voters a new quorum starts with, else the voter set `brook format --standalone` or
    /// `--initial-controllers` wrote ([`dynamic_voters`]). Empty for a node that joins a
    /// running quorum through `bootstrap_servers` (KIP-853). Once the quorum runs, its membership (openraft's, in the
    /// Raft log) is the owner of who votes and where each member listens ([`Inner::node_address`]).
    pub voters: BTreeMap<i32, String>,
    /// `controller.quorum.bootstrap.servers` (KIP-853): controller listeners (`host:port`) that
    /// a node not among `voters` asks to take it in as an observer (a Raft learner), as a
    /// Kafka observer fetches from them; AddRaftVoter then makes it a voter.
    pub bootstrap_servers: Vec<String>,
    /// The controller listener's name (the first of `controller.listener.names`), which
    /// DescribeQuorum shows with each voter's address.
    pub listener_name: String,
    /// Where this node's controller listener binds (the CONTROLLER entry of `listeners`).
    pub listen: SocketAddr,
    /// `<log.dirs>/__cluster_metadata`.
    pub metadata_dir: PathBuf,
    /// With the broker role: the advertised host and port this node registers with, after
    /// which a task heartbeats for it. `None`: controller only, or the broker side registers
    /// itself through [`Controller::register_broker`] and [`Controller::heartbeat`].
    pub broker_endpoint: Option<(String, u16)>,
    /// With the broker role: every advertised broker listener, registered with the
    /// broker so that each client is answered the endpoints of the listener it came in on.
    pub broker_listeners: Vec<image::BrokerEndpoint>,
    /// `broker.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: u64,
    /// `broker.session.timeout.ms`: a broker not heard from for this long is fenced.
    pub session_timeout_ms: u64,
    /// The node's static configuration, under the dynamic broker configs of the image, for
    /// the defaults of `unclean.leader.election.enable` and `min.insync.replicas` (topics may
    /// override both). The controller needs the min ISR for the ELR (KIP-966): a replica
    /// leaving an ISR that is below it stays eligible to lead.
    pub broker_config: Arc<BrokerConfig>,
    /// With the broker role: the broker epoch that this node's log directory recorded at its
    /// last clean shutdown, sent with the first registration of this process (Kafka's
    /// `previousBrokerEpoch`). `None` after a crash.
    pub previous_broker_epoch: Option<i64>,
    /// `auto.leader.rebalance.enable` and `leader.imbalance.check.interval.seconds`: every
    /// interval, the active controller moves leadership back to each partition's preferred
    /// replica (the first in its assignment) when that replica is live and in the ISR.
    /// `None` when disabled.
    pub leader_imbalance_check_interval: Option<Duration>,
    /// `controller.quorum.election.timeout.ms`: how long a candidate waits for votes; the
    /// random part of the election timer (see [`raft_timing`]).
    pub election_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms`: how long a voter goes without hearing from the
    /// leader before it starts an election (see [`raft_timing`]).
    pub fetch_timeout_ms: u64,
    /// Bound on one write, including waiting for an election.
    pub request_timeout_ms: u64,
    /// A snapshot is taken every this many applied entries, and the log before it purged
    /// (default [`SNAPSHOT_LOGS_SINCE_LAST`]).
    pub snapshot_interval_entries: u64,
    /// How the controller listener is secured (TLS, SASL, authorization).
    pub channel: Arc<channel::ControllerChannel>,
}

/// `key`'s value refused for `reason`.
fn invalid_value(cfg: &BrokerConfig, key: &str, reason: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.into(),
        value: cfg.values.get(key).cloned().unwrap_or_default(),
        reason: reason.into(),
    }
}

/// The quorum's voters, and whether the quorum is dynamic. Kafka's `QuorumConfig`: static
/// voters when `controller.quorum.voters` is set, else the node finds the quorum through
/// the bootstrap servers (`has_bootstrap_servers`); a dynamic quorum's node formatted with a
/// voter set (`brook format --standalone`, `--initial-controllers`) starts with those
/// voters, another waits to be taken in.
fn quorum_voters(
    cfg: &BrokerConfig,
    has_bootstrap_servers: bool,
) -> Result<(BTreeMap<i32, String>, bool), ConfigError> {
    let configured = cfg
        .values
        .get("controller.quorum.voters")
        .map_or("", |v| v.trim());
    let voters = match configured {
        "" if has_bootstrap_servers => BTreeMap::new(),
        v => parse_voters(v).map_err(|r| invalid_value(cfg, "controller.quorum.voters", &r))?,
    };
    if !voters.is_empty() {
        if !voters.contains_key(&cfg.node_id) {
            return Err(invalid_value(
                cfg,
                "controller.quorum.voters",
                "node.id is not among the voters",
            ));
        }
        return Ok((voters, false));
    }
    let metadata_dir = cfg.log_dir.join(METADATA_DIR);
    let formatted = dynamic_voters::read(&metadata_dir).map_err(|e| {
        ConfigError::Invalid(format!(
            "{}: {e}",
            dynamic_voters::path(&metadata_dir).display()
        ))
    })?;
    let voters = formatted
        .into_iter()
        .flat_map(|b| b.voters)
        .map(|v| (v.node_id, v.address()))
        .collect();
    Ok((voters, true))
}

/// Where the controller listens: the CONTROLLER listener of `listeners`, else this node's
/// own voter address (`own`) when it is IP:PORT.
fn controller_listen_addr(
    cfg: &BrokerConfig,
    own: Option<&String>,
) -> Result<SocketAddr, ConfigError> {
    match (cfg.controller_listener(), own) {
        (Some(a), _) => Ok(a),
        (None, Some(own)) => own.parse().map_err(|_| {
            invalid_value(
                cfg,
                "controller.listener.names",
                "no CONTROLLER listener in listeners and the voter address is not IP:PORT",
            )
        }),
        (None, None) => Err(invalid_value(
            cfg,
            "controller.listener.names",
            "no CONTROLLER listener in listeners",
        )),
    }
}

/// How often the controller checks the leaders' balance
/// (`leader.imbalance.check.interval.seconds`); `None` with
/// `auto.leader.rebalance.enable=false`.
fn leader_imbalance_check_interval(cfg: &BrokerConfig) -> Result<Option<Duration>, ConfigError> {
    let get = |k: &str| cfg.values.get(k).cloned().unwrap_or_default();
    if get("auto.leader.rebalance.enable") == "false" {
        return Ok(None);
    }
    let secs = get("leader.imbalance.check.interval.seconds");
    match secs.trim().parse::<u64>() {
        Ok(s) if s > 0 => Ok(Some(Duration::from_secs(s))),
        _ => Err(invalid_value(
            cfg,
            "leader.imbalance.check.interval.seconds",
            "must be a positive number of seconds",
        )),
    }
}

impl ControllerConfig {
    /// The quorum settings of a node whose `process.roles` includes `controller`; `None` for
    /// a broker-only or single-node (no `process.roles`) configuration.
    pub fn from_broker_config(cfg: &BrokerConfig) -> Result<Option<Self>, ConfigError> {
        let get = |k: &str| cfg.values.get(k).cloned().unwrap_or_default();
        let roles = get("process.roles");
        let roles: Vec<&str> = roles.split(',').map(str::trim).collect();
        if !roles.contains(&"controller") {
            return Ok(None);
        }
        let invalid = |key: &str, reason: &str| ConfigError::InvalidValue {
            key: key.into(),
            value: get(key),
            reason: reason.into(),
        };
        let bootstrap_servers =
            parse_bootstrap_servers(&get("controller.quorum.bootstrap.servers"))
                .map_err(|r| invalid("controller.quorum.bootstrap.servers", &r))?;
        let (voters, dynamic) = quorum_voters(cfg, !bootstrap_servers.is_empty())?;
        let own = voters.get(&cfg.node_id);
        if dynamic && cfg.cluster_id.is_none() {
            // A joining node must name the cluster it joins, as `kafka-storage format
            // --cluster-id` does; a static quorum derives its id from its voters.
            return Err(invalid(
                "controller.quorum.bootstrap.servers",
                "a node without controller.quorum.voters needs cluster.id",
            ));
        }
        let listen = controller_listen_addr(cfg, own)?;
        let broker_endpoint = roles.contains(&"broker").then(|| {
            let l = cfg.listeners.inter_broker_listener();
            match &l.advertised {
                crate::listeners::Advertised::At(host, port) => (host.clone(), *port),
                _ => (l.addr.ip().to_string(), l.addr.port()),
            }
        });
        let listener_name = get("controller.listener.names")
            .split(',')
            .map(str::trim)
            .find(|n| !n.is_empty())
            .unwrap_or(DEFAULT_LISTENER_NAME)
            .to_string();
        Ok(Some(ControllerConfig {
            node_id: cfg.node_id,
            voters,
            bootstrap_servers,
            listener_name,
            listen,
            metadata_dir: cfg.log_dir.join(METADATA_DIR),
            broker_endpoint,
            broker_listeners: Vec::new(),
            heartbeat_interval_ms: cfg.broker_heartbeat_interval_ms,
            session_timeout_ms: cfg.broker_session_timeout_ms,
            broker_config: Arc::new(cfg.clone()),
            previous_broker_epoch: None,
            leader_imbalance_check_interval: leader_imbalance_check_interval(cfg)?,
            election_timeout_ms: cfg.controller_election_timeout_ms,
            fetch_timeout_ms: cfg.controller_fetch_timeout_ms,
            request_timeout_ms: cfg.controller_socket_timeout_ms,
            snapshot_interval_entries: SNAPSHOT_LOGS_SINCE_LAST,
            channel: Arc::new(channel::ControllerChannel::from_broker_config(cfg)?),
        }))
    }
}

impl ControllerConfig {
    /// The quorum of a single node (`brook serve` without `process.roles`): this node is its
    /// only voter, with no controller listener, and its broker registers with `endpoint`.
    /// Like a one-node KRaft cluster, it keeps every piece of metadata in the Raft log under
    /// `<log.dirs>/__cluster_metadata`.
    pub fn single_voter(cfg: &BrokerConfig, endpoint: (String, u16)) -> Self {
        ControllerConfig {
            node_id: cfg.node_id,
            voters: BTreeMap::from([(cfg.node_id, SINGLE_VOTER_ADDRESS.to_string())]),
            bootstrap_servers: Vec::new(),
            listener_name: DEFAULT_LISTENER_NAME.to_string(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            metadata_dir: cfg.log_dir.join(METADATA_DIR),
            broker_endpoint: Some(endpoint),
            broker_listeners: Vec::new(),
            heartbeat_interval_ms: cfg.broker_heartbeat_interval_ms,
            session_timeout_ms: cfg.broker_session_timeout_ms,
            broker_config: Arc::new(cfg.clone()),
            previous_broker_epoch: None,
            // One broker: every partition's preferred replica is its only one.
            leader_imbalance_check_interval: None,
            election_timeout_ms: cfg.controller_election_timeout_ms,
            fetch_timeout_ms: cfg.controller_fetch_timeout_ms,
            request_timeout_ms: cfg.controller_socket_timeout_ms,
            snapshot_interval_entries: SNAPSHOT_LOGS_SINCE_LAST,
            channel: Arc::new(channel::ControllerChannel::plaintext()),
        }
    }
}

/// Parses Kafka's `controller.quorum.voters`: `1@host:9093,2@host:9094`.
pub fn parse_voters(s: &str) -> Result<BTreeMap<i32, String>, String> {
    let mut out = BTreeMap::new();
    for v in s.split(',').map(str::trim).filter(|v| !v.is_empty()) {
        let (id, addr) = v
            .split_once('@')
            .ok_or_else(|| format!("{v:?} is not ID@HOST:PORT"))?;
        let id: i32 = id
            .trim()
            .parse()
            .map_err(|_| format!("{id:?} is not a node id"))?;
        let (host, port) = addr
            .rsplit_once(':')
            .ok_or_else(|| format!("{addr:?} is not HOST:PORT"))?;
        if host.is_empty() || port.parse::<u16>().is_err() {
            return Err(format!("{addr:?} is not HOST:PORT"));
        }
        if out.insert(id, addr.to_string()).is_some() {
            return Err(format!("voter {id} is listed twice"));
        }
    }
    if out.is_empty() {
        return Err("no voters".into());
    }
    Ok(out)
}

/// Parses `controller.quorum.bootstrap.servers`: `host:port,host:port` (Kafka's
/// `QuorumConfig.parseBootstrapServers`).
pub fn parse_bootstrap_servers(s: &str) -> Result<Vec<String>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| match v.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(v.to_string())
            }
            _ => Err(format!("{v:?} is not HOST:PORT")),
        })
        .collect()
}

/// What the active controller knows about broker liveness (Kafka's `BrokerHeartbeatManager`).
/// Not replicated: it is rebuilt, with a grace period, whenever a node becomes active.
#[derive(Default)]
struct Liveness {
    /// The Raft term in which `last_contact` was started; a new term starts it afresh.
    term: Option<u64>,
    last_contact: HashMap<i32, Instant>,
    /// When the next preferred-leader balance is due, while this node is active controller.
    next_balance: Option<Instant>,
}

pub(crate) struct Inner {
    config: ControllerConfig,
    raft: Raft<TypeConfig>,
    /// A handle on the Raft log (shared with openraft): the owner of the commit index.
    log: storage::LogStore,
    /// The followers' last AppendEntries, while this node leads.
    clocks: Arc<quorum::FollowerClocks>,
    image_rx: watch::Receiver<Arc<MetadataImage>>,
    /// Serialises decisions on the active controller, as Kafka's single controller thread.
    write_lock: tokio::sync::Mutex<()>,
    /// Bounds the writes waiting for `write_lock` ([`MAX_PENDING_WRITES`]).
    pending_writes: tokio::sync::Semaphore,
    liveness: parking_lot::Mutex<Liveness>,
    heartbeats_enabled: watch::Sender<bool>,
    /// Set when this node's broker starts a controlled shutdown: its heartbeats then carry
    /// `want_shut_down`.
    shut_down_wanted: watch::Sender<bool>,
    /// Set when the active controller answered `should_shut_down` (this broker leads nothing).
    shut_down_granted: watch::Sender<bool>,
    /// The node's fault rules: link rules with traffic `controller` act on the quorum's RPCs.
    faults: Option<Arc<FaultEngine>>,
    /// With the broker role: this process's broker epoch once registered. Written at a clean
    /// shutdown, so that the next incarnation can prove the shutdown was clean.
    broker_epoch: watch::Sender<Option<i64>>,
    /// With the broker role: this process's incarnation (Kafka's `incarnationId`), new at
    /// every start; a registration under a new one ends the previous incarnation.
    incarnation: Uuid,
    /// Leader changes this node committed as active controller (Kafka's `ControllerStats`
    /// leader election rate), for `/metrics`.
    leader_elections: AtomicU64,
    /// Held by the one voter change (AddRaftVoter, RemoveRaftVoter) in flight on the active
    /// controller; another is refused, as Kafka's `LeaderState.isOperationPending`.
    voter_change: tokio::sync::Mutex<()>,
    /// The directory id each observer this node took in as leader sent
    /// (`voter_control::observe`): one entry per node id that asked, a few.
    observer_directory_ids: parking_lot::Mutex<HashMap<i32, Uuid>>,
    /// The clients' `controller_mutation_rate` buckets, charged here while this node is the
    /// active controller, for the topic mutations every broker sends (Kafka's
    /// `ControllerServer` `quotaManagers.controllerMutation`, over `controller.quota.window.*`).
    mutation_quotas: crate::quota::ClientQuotaManager,
}

impl Inner {
    /// The controller's state around its Raft client: the write path's lock and bound, the
    /// brokers' liveness and the controller-mutation quota (Kafka's `QuorumController`
    /// constructor, given the `KafkaRaftManager`'s client), with every watch at its start.
    fn new(
        config: ControllerConfig,
        raft: Raft<TypeConfig>,
        log: storage::LogStore,
        clocks: Arc<quorum::FollowerClocks>,
        image_rx: watch::Receiver<Arc<MetadataImage>>,
        faults: Option<Arc<FaultEngine>>,
    ) -> Inner {
        let controller_quota_window = config.broker_config.controller_quota_window;
        Inner {
            config,
            raft,
            log,
            clocks,
            image_rx,
            write_lock: tokio::sync::Mutex::new(()),
            pending_writes: tokio::sync::Semaphore::new(MAX_PENDING_WRITES),
            liveness: parking_lot::Mutex::new(Liveness::default()),
            heartbeats_enabled: watch::channel(true).0,
            shut_down_wanted: watch::channel(false).0,
            shut_down_granted: watch::channel(false).0,
            faults,
            broker_epoch: watch::channel(None).0,
            incarnation: Uuid::new_v4(),
            leader_elections: AtomicU64::new(0),
            voter_change: tokio::sync::Mutex::new(()),
            observer_directory_ids: parking_lot::Mutex::new(HashMap::new()),
            mutation_quotas: crate::quota::ClientQuotaManager::new(
                crate::quota::QuotaType::ControllerMutation,
                controller_quota_window,
            ),
        }
    }
}

/// A running quorum member. Cheap to clone.
#[derive(Clone)]
pub struct Controller {
    inner: Arc<Inner>,
    tasks: Arc<parking_lot::Mutex<Vec<JoinHandle<()>>>>,
    /// The controller listener's bound address; `None` for a single voter, which has none.
    local_addr: Option<SocketAddr>,
}

fn internal(e: impl std::fmt::Display) -> ControllerError {
    ControllerError::Internal(e.to_string())
}

impl Controller {
    /// Binds the controller listener and starts the node.
    pub async fn start(config: ControllerConfig) -> Result<Controller, ControllerError> {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| internal(format!("bind {}: {e}", config.listen)))?;
        Self::start_with_listener(config, listener).await
    }

    /// [`Controller::start`] with the node's fault engine: its link rules (traffic
    /// `controller`) then partition or delay the quorum's RPCs to and from other nodes.
    pub async fn start_with_faults(
        config: ControllerConfig,
        faults: Option<Arc<FaultEngine>>,
    ) -> Result<Controller, ControllerError> {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| internal(format!("bind {}: {e}", config.listen)))?;
        Self::start_with_listener_and_faults(config, listener, faults).await
    }

    /// Starts a single voter without a controller listener (see
    /// [`ControllerConfig::single_voter`]). It is the active controller once this returns:
    /// a one-voter quorum elects itself at once rather than after an election timeout.
    /// `import` (metadata an earlier version kept outside the quorum) is committed first, as
    /// one batch, if the quorum holds no broker and no topic yet; otherwise it was imported
    /// before and is ignored.
    pub async fn start_single_voter(
        config: ControllerConfig,
        faults: Option<Arc<FaultEngine>>,
        import: Vec<MetadataRecord>,
    ) -> Result<Controller, ControllerError> {
        if config.voters.len() != 1 {
            return Err(internal("a single voter's quorum lists exactly one voter"));
        }
        Self::start_node(config, None, faults, import).await
    }

    /// Starts the node on an already bound controller listener (tests bind port 0 first to
    /// learn the addresses they put in `voters`).
    pub async fn start_with_listener(
        config: ControllerConfig,
        listener: tokio::net::TcpListener,
    ) -> Result<Controller, ControllerError> {
        Self::start_with_listener_and_faults(config, listener, None).await
    }

    /// [`Controller::start_with_listener`] with the node's fault engine (see
    /// [`Controller::start_with_faults`]).
    pub async fn start_with_listener_and_faults(
        config: ControllerConfig,
        listener: tokio::net::TcpListener,
        faults: Option<Arc<FaultEngine>>,
    ) -> Result<Controller, ControllerError> {
        Self::start_node(config, Some(listener), faults, Vec::new()).await
    }

    /// Starts the node; `listener` serves the other voters' RPCs and forwarded writes.
    async fn start_node(
        config: ControllerConfig,
        listener: Option<tokio::net::TcpListener>,
        faults: Option<Arc<FaultEngine>>,
        import: Vec<MetadataRecord>,
    ) -> Result<Controller, ControllerError> {
        // Not a voter of a new quorum: it joins a running one through the bootstrap servers.
        let observer = !config.voters.contains_key(&config.node_id);
        if observer && config.bootstrap_servers.is_empty() {
            return Err(internal(format!(
                "node {} is not in controller.quorum.voters and has no \
                 controller.quorum.bootstrap.servers",
                config.node_id
            )));
        }
        let local_addr = match &listener {
            Some(l) => Some(l.local_addr().map_err(internal)?),
            None => None,
        };
        let log_store = storage::LogStore::open(&config.metadata_dir).map_err(internal)?;
        let log = log_store.clone();
        let clocks = Arc::new(quorum::FollowerClocks::default());
        let (state_machine, image_rx) =
            storage::StateMachine::open(&config.metadata_dir).map_err(internal)?;
        let raft_config = raft_config(&config)?;
        let raft = Raft::new(
            config.node_id as NodeId,
            Arc::new(raft_config),
            network::NetworkFactory {
                node_id: config.node_id,
                faults: faults.clone(),
                log: log.clone(),
                clocks: clocks.clone(),
                channel: config.channel.clone(),
            },
            log_store,
            state_machine,
        )
        .await
        .map_err(internal)?;
        let initialized = initialize_membership(&raft, &config, observer).await?;
        let initialize_later = !observer
            && !initializes_first(&config)
            && !raft.is_initialized().await.map_err(internal)?;
        // A quorum that grew past its one configured voter (AddRaftVoter) elects as any other.
        let alone = config.voters.len() == 1 && stored_voter_count(&raft, &config).await? == 1;
        if alone {
            become_leader_alone(&raft, &config, initialized).await?;
            import_into_empty_image(&raft, &image_rx, import).await?;
        }
        let later = initialize_later.then(|| (raft.clone(), config.clone()));
        let inner = Arc::new(Inner::new(config, raft, log, clocks, image_rx, faults));
        let mut tasks = spawn_tasks(&inner, listener);
        if let Some((raft, config)) = later {
            // After the listener is up: the first voter's vote request must be answered.
            tasks.push(tokio::spawn(initialize_unless_led(raft, config)));
        }
        Ok(Controller {
            inner,
            tasks: Arc::new(parking_lot::Mutex::new(tasks)),
            local_addr,
        })
    }

    /// This node's id.
    pub fn node_id(&self) -> i32 {
        self.inner.config.node_id
    }

    /// The bound address of the controller listener; `None` for a single voter, which has
    /// no listener.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// Whether this quorum is a single node's own (one voter, no controller listener), which
    /// has no other voter to describe or to hand leaderships to.
    pub fn is_single_voter(&self) -> bool {
        self.local_addr.is_none()
    }

    /// This process's incarnation (Kafka's `incarnationId`): new at every start, carried by
    /// its broker registration, so an image can tell this process's registration from one a
    /// previous run of the node left behind.
    pub fn incarnation(&self) -> Uuid {
        self.inner.incarnation
    }

    /// This process's broker epoch, once its broker is registered.
    pub fn broker_epoch(&self) -> Option<i64> {
        *self.inner.broker_epoch.borrow()
    }

    /// The committed metadata image, updated as this node applies the log.
    pub fn image(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.inner.image_rx.clone()
    }

    /// Partition leader changes this node decided and committed as active controller.
    pub fn leader_elections(&self) -> u64 {
        self.inner.leader_elections.load(Ordering::Relaxed)
    }

    /// Whether this node is the active controller (the Raft leader).
    pub fn is_active(&self) -> bool {
        self.active_controller_id() == Some(self.node_id())
    }

    /// The active controller as this node knows it.
    pub fn active_controller_id(&self) -> Option<i32> {
        self.inner.active()
    }

    /// The Raft leader as this node knows it, and this node's current Raft term (from
    /// openraft's metrics: their only owner).
    pub fn raft_leader_and_term(&self) -> (Option<i32>, u64) {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        (m.current_leader.map(|id| id as i32), m.current_term)
    }

    /// The controller listener's name and its SASL authentications so far (successful,
    /// failed), when it speaks SASL (for `/metrics`).
    pub fn controller_listener_authentications(&self) -> Option<(Arc<str>, u64, u64)> {
        let c = &self.inner.config.channel;
        c.sasl_server.as_ref()?;
        let a = &c.authentications;
        Some((
            c.listener_name.clone(),
            a.successful.load(std::sync::atomic::Ordering::Relaxed),
            a.failed.load(std::sync::atomic::Ordering::Relaxed),
        ))
    }

    /// This node's own view of the metadata quorum (for `/metrics`).
    pub fn local_quorum_state(&self) -> quorum::LocalQuorumState {
        quorum::local_state(&self.inner)
    }

    /// DescribeQuorum: the Raft leader's view of the quorum. A follower asks the leader over
    /// the controller listener, as a Kafka broker forwards DescribeQuorum to the active
    /// controller, so every node gives the same answer. NOT_CONTROLLER while no leader is
    /// known or the leader cannot be reached within [`DESCRIBE_QUORUM_TIMEOUT`].
    pub async fn describe_quorum(&self) -> Result<QuorumDescription, ControllerError> {
        let inner = &self.inner;
        let deadline = Instant::now() + DESCRIBE_QUORUM_TIMEOUT;
        let active = inner.wait_for_active(deadline).await?;
        if active == inner.config.node_id {
            return quorum::describe_as_leader(inner);
        }
        let addr = inner
            .node_address(active)
            .ok_or(ControllerError::NotController { active: None })?;
        let addr = &addr;
        let link = network::Link {
            from: inner.config.node_id,
            to: active,
            faults: inner.faults.clone(),
            channel: inner.config.channel.clone(),
        };
        let timeout = deadline.saturating_duration_since(Instant::now());
        network::post_json(&link, addr, "/controller/quorum", &(), timeout)
            .await
            .unwrap_or_else(|e| {
                tracing::debug!(error = %e, active, "DescribeQuorum: leader unreachable");
                Err(ControllerError::NotController {
                    active: Some(active),
                })
            })
    }

    /// AddRaftVoter (KIP-853): makes `voter_id`, listening at `address` (`host:port` of its
    /// controller listener), a voter once it has caught up, within `timeout_ms`; answered
    /// once the new voter set is committed, or appended if not `ack_when_committed`
    /// (KIP-1186). See [`voter_control`].
    pub async fn add_voter(
        &self,
        voter_id: i32,
        directory_id: Uuid,
        address: String,
        timeout_ms: u64,
        ack_when_committed: bool,
    ) -> Result<(), ControllerError> {
        let change = voter_control::VoterChange::Add {
            voter_id,
            directory_id,
            address,
            timeout_ms,
            ack_when_committed,
        };
        self.inner.change_voters(change, false).await
    }

    /// RemoveRaftVoter (KIP-853): `voter_id` stops voting and stays an observer.
    pub async fn remove_voter(
        &self,
        voter_id: i32,
        directory_id: Uuid,
    ) -> Result<(), ControllerError> {
        let change = voter_control::VoterChange::Remove {
            voter_id,
            directory_id,
        };
        self.inner.change_voters(change, false).await
    }

    /// Waits until some active controller is known, up to `timeout`.
    pub async fn wait_for_active(&self, timeout: Duration) -> Result<i32, ControllerError> {
        self.inner.wait_for_active(Instant::now() + timeout).await
    }

    /// Turns this node's automatic broker heartbeats on or off (with `broker_endpoint`).
    /// Off, the broker looks dead to the active controller and is fenced after the session
    /// timeout; on again, its next heartbeat unfences it (re-registering if needed).
    pub fn set_broker_heartbeats(&self, enabled: bool) {
        self.inner.heartbeats_enabled.send_replace(enabled);
    }

    /// CreateTopics for one topic: replicas round-robin over unfenced brokers, leader the
    /// first replica, ISR all replicas.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> Result<(Uuid, Vec<PartitionRegistration>), ControllerError> {
        let req = ControllerRequest::CreateTopic {
            name: name.to_string(),
            partitions,
            replication_factor,
            configs,
            assignments: Vec::new(),
            validate_only: false,
        };
        self.submit_create_topic(req).await
    }

    /// CreateTopics for one topic as a client asked it (manual assignments, validate-only);
    /// `req` must be a [`ControllerRequest::CreateTopic`].
    pub async fn submit_create_topic(
        &self,
        req: ControllerRequest,
    ) -> Result<(Uuid, Vec<PartitionRegistration>), ControllerError> {
        match self.inner.submit(req).await? {
            ControllerReply::TopicCreated { id, partitions } => Ok((id, partitions)),
            other => Err(unexpected(other)),
        }
    }

    /// A topic mutation (CreateTopic, DeleteTopic, CreatePartitions) charged to `quota`'s
    /// bucket on the active controller: its reply, `None` when refused as over a strict
    /// quota, and the throttle time the controller answered.
    pub async fn submit_mutation(
        &self,
        req: ControllerRequest,
        quota: request::MutationQuotaKey,
    ) -> Result<(Option<ControllerReply>, i32), ControllerError> {
        let req = ControllerRequest::WithMutationQuota {
            quota,
            request: Box::new(req),
        };
        match self.inner.submit(req).await? {
            ControllerReply::MutationQuota { reply, throttle_ms } => {
                Ok((reply.map(|r| *r), throttle_ms))
            }
            other => Err(unexpected(other)),
        }
    }

    /// DeleteTopics for one topic.
    pub async fn delete_topic(&self, name: &str) -> Result<(), ControllerError> {
        let req = ControllerRequest::DeleteTopic {
            name: name.to_string(),
        };
        self.inner.submit(req).await.map(|_| ())
    }

    /// CreatePartitions: grows `name` to `total_count` partitions, placed by the controller or
    /// as `assignments` says; `validate_only` records nothing.
    pub async fn create_partitions(
        &self,
        name: &str,
        total_count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let req = ControllerRequest::CreatePartitions {
            name: name.to_string(),
            total_count,
            assignments,
            validate_only,
        };
        self.inner.submit(req).await.map(|_| ())
    }

    /// AlterPartitionReassignments through the active controller: per topic and partition
    /// whether the reassignment (or its cancellation, for `None`) was accepted.
    pub async fn alter_partition_reassignments(
        &self,
        topics: request::ReassignmentTargets,
        allow_replication_factor_change: bool,
    ) -> Result<request::ReassignmentResults, ControllerError> {
        let req = ControllerRequest::AlterPartitionReassignments {
            topics,
            allow_replication_factor_change,
        };
        match self.inner.submit(req).await? {
            ControllerReply::Reassignments(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// Sets (`Some`) or removes (`None`) topic config overrides; the caller has validated
    /// them (`BrokerConfig::validate_topic_configs`).
    pub async fn alter_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, Option<String>>,
    ) -> Result<(), ControllerError> {
        let req = ControllerRequest::AlterConfigs {
            name: name.to_string(),
            configs,
        };
        self.inner.submit(req).await.map(|_| ())
    }

    /// Sets (`Some`) or removes (`None`) dynamic broker configs of a resource: a node id or
    /// "" for the cluster default.
    pub async fn alter_broker_configs(
        &self,
        resource: &str,
        configs: BTreeMap<String, Option<String>>,
    ) -> Result<(), ControllerError> {
        let req = ControllerRequest::AlterBrokerConfigs {
            resource: resource.to_string(),
            configs,
        };
        self.inner.submit(req).await.map(|_| ())
    }

    /// Group config overrides of `group` set (`Some`) or removed (`None`), already validated.
    pub async fn alter_group_configs(
        &self,
        group: &str,
        configs: BTreeMap<String, Option<String>>,
    ) -> Result<(), ControllerError> {
        let req = ControllerRequest::AlterGroupConfigs {
            group: group.to_string(),
            configs,
        };
        self.inner.submit(req).await.map(|_| ())
    }

    /// UpdateFeatures through the active controller (Kafka's `QuorumController.updateFeatures`).
    pub async fn update_features(
        &self,
        updates: Vec<feature_control::FeatureUpdate>,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let req = ControllerRequest::UpdateFeatures {
            updates,
            validate_only,
        };
        self.inner.submit(req).await.map(|_| ())
    }

    /// Client-metrics subscription `name`'s keys set or removed; the caller has validated the
    /// resulting set (`telemetry::validate_subscription`).
    pub async fn alter_client_metrics_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, Option<String>>,
    ) -> Result<(), ControllerError> {
        let req = ControllerRequest::AlterClientMetricsConfigs {
            name: name.to_string(),
            configs,
        };
        self.inner.submit(req).await.map(|_| ())
    }

    /// CreateAcls through the active controller: per binding, `None` when created (or
    /// present already), else the INVALID_REQUEST message.
    pub async fn create_acls(
        &self,
        acls: Vec<crate::security::acl::StandardAcl>,
    ) -> Result<acl_control::AclCreateResults, ControllerError> {
        match self
            .inner
            .submit(ControllerRequest::CreateAcls { acls })
            .await?
        {
            ControllerReply::AclsCreated(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// DeleteAcls through the active controller: per filter, the ACLs deleted or the
    /// INVALID_REQUEST message.
    pub async fn delete_acls(
        &self,
        filters: Vec<crate::security::acl::AclBindingFilter>,
    ) -> Result<acl_control::AclDeleteResults, ControllerError> {
        match self
            .inner
            .submit(ControllerRequest::DeleteAcls { filters })
            .await?
        {
            ControllerReply::AclsDeleted(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// AlterUserScramCredentials through the active controller: each user's result.
    pub async fn alter_user_scram_credentials(
        &self,
        deletions: Vec<(String, i8)>,
        upsertions: Vec<scram_control::ScramUpsertion>,
    ) -> Result<Vec<scram_control::ScramResult>, ControllerError> {
        let req = ControllerRequest::AlterUserScramCredentials {
            deletions,
            upsertions,
        };
        match self.inner.submit(req).await? {
            ControllerReply::ScramResults(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// AlterClientQuotas through the active controller: each entity's result.
    pub async fn alter_client_quotas(
        &self,
        alterations: Vec<client_quota_control::QuotaAlteration>,
        validate_only: bool,
    ) -> Result<Vec<client_quota_control::QuotaResult>, ControllerError> {
        let req = ControllerRequest::AlterClientQuotas {
            alterations,
            validate_only,
        };
        match self.inner.submit(req).await? {
            ControllerReply::ClientQuotaResults(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// Records the credentials this node was formatted with, unless the cluster already
    /// recorded its bootstrap credentials.
    pub async fn bootstrap_scram_credentials(
        &self,
        credentials: Vec<(String, i8, crate::security::scram::ScramCredential)>,
    ) -> Result<(), ControllerError> {
        let req = ControllerRequest::BootstrapScramCredentials { credentials };
        self.inner.submit(req).await.map(|_| ())
    }

    /// Records the formatted voter set's directory ids and `kraft.version`
    /// ([`dynamic_voters`]) unless the cluster has recorded its `kraft.version` already.
    pub async fn bootstrap_voters(
        &self,
        bootstrap: dynamic_voters::BootstrapVoters,
    ) -> Result<(), ControllerError> {
        let req = ControllerRequest::BootstrapVoters { bootstrap };
        self.inner.submit(req).await.map(|_| ())
    }

    /// ElectLeaders: elections through the active controller; per topic and partition what
    /// was done.
    pub async fn elect_leaders(
        &self,
        election: request::ElectionType,
        partitions: Option<Vec<(String, Vec<i32>)>>,
        timeout_ms: i32,
    ) -> Result<request::ElectionResults, ControllerError> {
        let req = ControllerRequest::ElectLeaders {
            election,
            partitions,
            timeout_ms: Some(timeout_ms),
        };
        match self.inner.submit(req).await? {
            ControllerReply::Elections(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// AlterPartition: the partition leader's ISR change. Returns the new partition state.
    pub async fn alter_partition(
        &self,
        req: AlterPartitionRequest,
    ) -> Result<PartitionRegistration, ControllerError> {
        let leader_id = req.leader_id;
        match self
            .inner
            .submit(ControllerRequest::AlterPartition(req))
            .await?
        {
            // The change completed a reassignment that moved the leadership: it is written,
            // but the sender must learn its new role from the metadata (Kafka's
            // NEW_LEADER_ELECTED).
            ControllerReply::Partition(p) if p.leader != leader_id => {
                Err(ControllerError::NewLeaderElected)
            }
            ControllerReply::Partition(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// BrokerRegistration: returns the broker epoch to heartbeat with. The broker starts
    /// fenced; its first heartbeat unfences it.
    pub async fn register_broker(
        &self,
        node_id: i32,
        host: &str,
        port: u16,
    ) -> Result<i64, ControllerError> {
        let req = ControllerRequest::RegisterBroker {
            node_id,
            host: host.to_string(),
            port,
            incarnation: self.inner.incarnation,
            previous_epoch: self.inner.config.previous_broker_epoch,
            endpoints: self.inner.config.broker_listeners.clone(),
        };
        match self.inner.submit(req).await? {
            ControllerReply::BrokerRegistered { epoch } => {
                self.inner.broker_epoch.send_replace(Some(epoch));
                Ok(epoch)
            }
            other => Err(unexpected(other)),
        }
    }

    /// BrokerHeartbeat: keeps the broker unfenced, and unfences a fenced one once
    /// `metadata_offset` (the last metadata offset the broker has applied) has reached its
    /// registration. Returns whether the broker is (still) fenced.
    pub async fn heartbeat(
        &self,
        node_id: i32,
        epoch: i64,
        metadata_offset: u64,
    ) -> Result<bool, ControllerError> {
        let req = ControllerRequest::Heartbeat {
            node_id,
            epoch,
            metadata_offset,
            want_shut_down: false,
        };
        match self.inner.submit(req).await? {
            ControllerReply::Heartbeat { fenced, .. } => Ok(fenced),
            other => Err(unexpected(other)),
        }
    }

    /// UnregisterBroker: removes broker `node_id`'s registration through the active
    /// controller (a running broker registers again with its next heartbeat).
    pub async fn unregister_broker(&self, node_id: i32) -> Result<(), ControllerError> {
        let req = ControllerRequest::UnregisterBroker { node_id };
        self.inner.submit(req).await.map(|_| ())
    }

    /// The controller listener's name, as the quorum's endpoints carry it.
    pub fn listener_name(&self) -> &str {
        &self.inner.config.listener_name
    }

    /// AllocateProducerIds: returns `(first_id, count)` of a fresh block for `node_id`.
    pub async fn allocate_producer_id_block(
        &self,
        node_id: i32,
    ) -> Result<(i64, i64), ControllerError> {
        match self
            .inner
            .submit(ControllerRequest::AllocateProducerIds { node_id })
            .await?
        {
            ControllerReply::ProducerIds { first_id, size } => Ok((first_id, size)),
            other => Err(unexpected(other)),
        }
    }

    /// Stops the node: the listener, the background tasks and Raft. Everything acknowledged
    /// is already durable, so this is equivalent to a crash for what survives it.
    /// Controlled shutdown (Kafka's `BrokerLifecycleManager.beginControlledShutdown`): this
    /// node's broker heartbeats with `want_shut_down` at once, and the active controller moves
    /// its leaderships to other ISR members and takes it out of the ISRs. Returns whether the
    /// controller let it go (it leads nothing) within `timeout`; a broker that cannot reach a
    /// controller stops anyway, and is fenced after its session timeout as before.
    pub async fn controlled_shutdown(&self, timeout: Duration) -> bool {
        if self.inner.config.broker_endpoint.is_none() {
            return true;
        }
        self.inner.shut_down_wanted.send_replace(true);
        let mut granted = self.inner.shut_down_granted.subscribe();
        tokio::time::timeout(timeout, granted.wait_for(|g| *g))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    pub async fn shutdown(&self) {
        let tasks: Vec<JoinHandle<()>> = self.tasks.lock().drain(..).collect();
        for t in &tasks {
            t.abort();
        }
        // Abort takes effect at the task's next poll; wait for it, so that the listener is
        // closed (and its port free to bind again) when this returns.
        for t in tasks {
            let _ = t.await;
        }
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
    }
}

/// How many voters the stored membership has. openraft reports the membership it loaded (or
/// the one `initialize` just wrote) through its metrics only after its core task first runs,
/// and until then the metrics show an empty membership; so this waits for a membership with a
/// log id (every stored or initialized one has one), within the request timeout.
async fn stored_voter_count(
    raft: &Raft<TypeConfig>,
    config: &ControllerConfig,
) -> Result<usize, ControllerError> {
    let timeout = Duration::from_millis(config.request_timeout_ms);
    let metrics = raft
        .wait(Some(timeout))
        .metrics(
            |m| m.membership_config.log_id().is_some(),
            "the stored membership is loaded",
        )
        .await
        .map_err(|e| internal(format!("the quorum's membership did not load: {e}")))?;
    Ok(metrics.membership_config.membership().voter_ids().count())
}

/// A one-voter quorum needs no votes but its own. On a fresh log `initialize` has already
/// started the election. After a restart openraft resumes as leader when its last vote was
/// committed; otherwise (it stopped mid-election) the node campaigns now rather than after
/// openraft's election timer (`controller.quorum.fetch.timeout.ms` and more, see
/// [`raft_timing`]). A leader ignores the trigger. Either way it wins at once.
async fn become_leader_alone(
    raft: &Raft<TypeConfig>,
    config: &ControllerConfig,
    initialized: bool,
) -> Result<(), ControllerError> {
    let me = config.node_id as NodeId;
    if !initialized {
        raft.trigger().elect().await.map_err(internal)?;
    }
    let timeout = Duration::from_millis(config.request_timeout_ms);
    raft.wait(Some(timeout))
        .metrics(|m| m.current_leader == Some(me), "the single voter leads")
        .await
        .map_err(|e| internal(format!("the single voter did not become leader: {e}")))?;
    Ok(())
}

fn unexpected(reply: ControllerReply) -> ControllerError {
    internal(format!("unexpected controller reply {reply:?}"))
}

impl Inner {
    /// What the decisions depend on besides the image: ELR as the image's
    /// `eligible.leader.replicas.version` has it (1 on a new cluster, as Kafka 4.4 formats
    /// one; Kafka's `FeatureControlManager.isElrFeatureEnabled`), and the defaults resolved as
    /// the partition resolves them (`BrokerConfig::topic_default`: this node's dynamic config,
    /// the cluster default, then server.properties), as Kafka's
    /// `ConfigurationControlManager.getTopicConfig` does for the current controller.
    fn policy(&self, image: &MetadataImage) -> configuration_control::ElectionPolicy {
        let cfg = &self.config.broker_config;
        let default = |key: &str| cfg.topic_default(&image.broker_configs, key);
        configuration_control::ElectionPolicy {
            default_unclean: default(configuration_control::UNCLEAN_KEY).as_deref() == Some("true"),
            default_min_isr: cfg.min_insync_replicas(&image.broker_configs, &BTreeMap::new()),
            elr_enabled: image.feature_level(crate::features::ELR_VERSION) >= 1,
            node_id: self.config.node_id,
        }
    }

    /// The controller listener (`host:port`) of quorum member `node_id`: from the Raft
    /// membership, the owner once the quorum runs (AddRaftVoter adds members the
    /// configuration never named), else from `controller.quorum.voters`.
    fn node_address(&self, node_id: i32) -> Option<String> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        m.membership_config
            .membership()
            .get_node(&(node_id as NodeId))
            .map(|n| n.addr.clone())
            .or_else(|| self.config.voters.get(&node_id).cloned())
    }

    /// Whether `node_id` is a voter or a learner (an observer) of the quorum.
    fn is_member(&self, node_id: i32) -> bool {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        m.membership_config
            .membership()
            .get_node(&(node_id as NodeId))
            .is_some()
    }

    /// The link this node calls node `to` over (fault rules, security).
    fn link_to(&self, to: i32) -> network::Link {
        network::Link {
            from: self.config.node_id,
            to,
            faults: self.faults.clone(),
            channel: self.config.channel.clone(),
        }
    }

    /// A voter change, on the active controller or forwarded to it once (a forwarded change
    /// is never forwarded again: a node that is no longer active answers NOT_CONTROLLER).
    async fn change_voters(
        &self,
        change: voter_control::VoterChange,
        forwarded: bool,
    ) -> Result<(), ControllerError> {
        let deadline = Instant::now() + Duration::from_millis(self.config.request_timeout_ms);
        let active = self.wait_for_active(deadline).await?;
        if active == self.config.node_id {
            return voter_control::change_locally(self, change).await;
        }
        if forwarded {
            return Err(self.not_controller());
        }
        let addr = self
            .node_address(active)
            .ok_or(ControllerError::NotController { active: None })?;
        // An AddRaftVoter waits up to its own timeout for the new voter to catch up.
        let timeout = match &change {
            voter_control::VoterChange::Add { timeout_ms, .. } => {
                Duration::from_millis(*timeout_ms)
                    .max(deadline.saturating_duration_since(Instant::now()))
            }
            _ => deadline.saturating_duration_since(Instant::now()),
        };
        network::post_json(
            &self.link_to(active),
            &addr,
            "/controller/voters",
            &change,
            timeout,
        )
        .await
        .unwrap_or_else(|e| {
            tracing::debug!(error = %e, active, "voter change: leader unreachable");
            Err(ControllerError::NotController {
                active: Some(active),
            })
        })
    }

    fn active(&self) -> Option<i32> {
        self.raft
            .metrics()
            .borrow()
            .current_leader
            .map(|id| id as i32)
    }

    async fn wait_for_active(&self, deadline: Instant) -> Result<i32, ControllerError> {
        let mut metrics = self.raft.metrics();
        // A leader the membership no longer lists as a voter (RemoveRaftVoter removed it) is
        // stepping down, as Kafka's resigning leader: wait for the voters' next one.
        let voting_leader = |m: &openraft::RaftMetrics<NodeId, BasicNode>| {
            m.current_leader
                .is_some_and(|l| m.membership_config.membership().voter_ids().any(|v| v == l))
        };
        let found = tokio::time::timeout_at(deadline, metrics.wait_for(voting_leader)).await;
        match found {
            Ok(Ok(m)) => Ok(m.current_leader.map_or(NO_LEADER, |id| id as i32)),
            _ => Err(ControllerError::NotController { active: None }),
        }
    }

    fn not_controller(&self) -> ControllerError {
        ControllerError::NotController {
            active: self.active().filter(|&a| a != self.config.node_id),
        }
    }

    /// Routes a write to the active controller, waiting for one during an election and
    /// following leadership changes, a bounded number of times.
    async fn submit(&self, req: ControllerRequest) -> Result<ControllerReply, ControllerError> {
        let timeout = Duration::from_millis(self.config.request_timeout_ms);
        self.submit_within(req, timeout).await
    }

    /// [`Inner::submit`] with its own bound on the whole exchange: past `timeout` it fails
    /// with REQUEST_TIMED_OUT (or NOT_CONTROLLER) even when the active controller is this node.
    async fn submit_within(
        &self,
        req: ControllerRequest,
        timeout: Duration,
    ) -> Result<ControllerReply, ControllerError> {
        let deadline = Instant::now() + timeout;
        let mut last = ControllerError::NotController { active: None };
        let mut refusals = (NO_LEADER, 0usize);
        for _ in 0..MAX_SUBMIT_ATTEMPTS {
            let active = self.wait_for_active(deadline).await?;
            let result =
                if active == self.config.node_id {
                    let local = tokio::time::timeout_at(deadline, self.handle_locally(req.clone()));
                    Some(local.await.unwrap_or_else(|_| {
                        Err(ControllerError::RequestTimedOut(format!("{req:?}")))
                    }))
                } else {
                    self.forward(active, &req, deadline).await
                };
            match result {
                // Unreachable (None) or refused: try again once leadership has had a chance
                // to move.
                None | Some(Err(ControllerError::NotController { .. })) => {
                    last = ControllerError::NotController {
                        active: Some(active),
                    };
                    // The same node *answering* NOT_CONTROLLER again and again while it stays
                    // the leader means the request itself is the problem (AlterPartition with
                    // epochs newer than the controller's): give the caller the answer. An
                    // unreachable leader does not count: it is about to be replaced.
                    if result.is_some() {
                        refusals = if refusals.0 == active {
                            (active, refusals.1 + 1)
                        } else {
                            (active, 1)
                        };
                        if refusals.1 >= MAX_SAME_LEADER_REFUSALS {
                            return Err(last);
                        }
                    }
                    // Wait for the view of leadership to change rather than spin, but not
                    // forever: a leader that could not confirm its quorum a moment ago (a
                    // follower still starting) usually can on the next attempt.
                    let retry_at = (Instant::now()
                        + Duration::from_millis(self.config.election_timeout_ms))
                    .min(deadline);
                    let mut metrics = self.raft.metrics();
                    let _ = tokio::time::timeout_at(
                        retry_at,
                        metrics.wait_for(|m| m.current_leader != Some(active as NodeId)),
                    )
                    .await;
                    if Instant::now() >= deadline {
                        return Err(last);
                    }
                }
                Some(other) => return other,
            }
        }
        Err(last)
    }

    /// Sends `req` to the active controller; `None` when it could not be reached (or its
    /// answer was lost: the request may then have been applied, as with any timeout).
    async fn forward(
        &self,
        active: i32,
        req: &ControllerRequest,
        deadline: Instant,
    ) -> Option<Result<ControllerReply, ControllerError>> {
        let addr = self.node_address(active)?;
        let addr = &addr;
        let timeout = deadline.saturating_duration_since(Instant::now());
        let link = network::Link {
            from: self.config.node_id,
            to: active,
            faults: self.faults.clone(),
            channel: self.config.channel.clone(),
        };
        let answer: Result<Result<ControllerReply, ControllerError>, _> =
            network::post_json(&link, addr, "/controller/request", req, timeout).await;
        match answer {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::debug!(error = %e, active, "forwarding to the active controller failed");
                None
            }
        }
    }

    /// Decides and commits one request; only on the active controller.
    pub(crate) async fn handle_locally(
        &self,
        req: ControllerRequest,
    ) -> Result<ControllerReply, ControllerError> {
        if let ControllerRequest::Heartbeat { node_id, epoch, .. } = &req {
            self.track_broker_heartbeat(*node_id, *epoch);
        }
        let Ok(_slot) = self.pending_writes.try_acquire() else {
            return Err(ControllerError::RequestTimedOut(format!(
                "{MAX_PENDING_WRITES} controller writes already pending"
            )));
        };
        let deadline = req.decide_within().map(|within| Instant::now() + within);
        let timeout = Duration::from_millis(self.config.request_timeout_ms);
        match tokio::time::timeout(timeout, self.decide_and_commit(&req, deadline)).await {
            Ok(r) => r,
            Err(_) => Err(ControllerError::RequestTimedOut(format!("{req:?}"))),
        }
    }

    /// Records a broker's heartbeat when it arrives, before it waits its turn for
    /// `write_lock`: Kafka 4.4's `QuorumController.processBrokerHeartbeat` calls
    /// `BrokerHeartbeatTracker.updateContactTime(BrokerIdAndEpoch)` before it queues the
    /// heartbeat's event. This is the only place a contact time is recorded. A controller busy with a backlog of writes (the
    /// AlterPartitions of every internal partition after a node dies) would otherwise fence
    /// live brokers whose heartbeats are only queued, and each fencing moves leaderships and
    /// shrinks ISRs, which makes more writes. Only on the active controller, in the term whose
    /// sessions it counts, and for the broker's current registration (a previous incarnation's
    /// heartbeat keeps nothing alive).
    fn track_broker_heartbeat(&self, node_id: i32, epoch: i64) {
        let active_term = {
            let m = self.raft.metrics();
            let m = m.borrow();
            (m.current_leader == Some(self.config.node_id as NodeId)).then_some(m.current_term)
        };
        let Some(term) = active_term else {
            return;
        };
        let current = self
            .image_rx
            .borrow()
            .brokers
            .get(&node_id)
            .is_some_and(|b| b.epoch == epoch);
        let mut l = self.liveness.lock();
        if current && l.term == Some(term) {
            l.last_contact.insert(node_id, Instant::now());
        }
    }

    async fn decide_and_commit(
        &self,
        req: &ControllerRequest,
        deadline: Option<Instant>,
    ) -> Result<ControllerReply, ControllerError> {
        let _turn = self.write_lock.lock().await;
        // Kafka's controller event queue (`KafkaEventQueue`) fails an event whose deadline
        // passed before its turn came with a TimeoutException (REQUEST_TIMED_OUT); once
        // begun, it runs to its commit.
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(ControllerError::RequestTimedOut(format!(
                "{req:?}: its deadline passed before the controller took it"
            )));
        }
        // The image must hold every committed record (a new leader may not have applied its
        // predecessor's last entries yet) before a decision is taken on it.
        self.raft.ensure_linearizable().await.map_err(|e| match e {
            RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_))
            | RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_)) => self.not_controller(),
            RaftError::Fatal(f) => internal(f),
        })?;
        let image = self.image_rx.borrow().clone();
        let (records, reply) = self.decide_charged(&image, req)?;
        let elections = leader_changes(&image, &records);
        if !records.is_empty() {
            self.raft
                .client_write(MetadataBatch(records))
                .await
                .map_err(|e| match e {
                    RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => {
                        self.not_controller()
                    }
                    other => internal(other),
                })?;
            self.leader_elections
                .fetch_add(elections, Ordering::Relaxed);
        }
        Ok(reply)
    }

    /// Decides `req` on `image`. A topic mutation sent with its client's quota is charged to
    /// the client's `controller_mutation_rate` bucket here, on the active controller, so a
    /// client's requests through any broker share one bucket (Kafka's `ControllerApis`,
    /// `controllerMutationQuotaRecorderFor`, and `ReplicationControlManager`'s
    /// `applyPartitionChangeQuota` after its validation).
    fn decide_charged(
        &self,
        image: &MetadataImage,
        req: &ControllerRequest,
    ) -> Result<request::ControllerResult, ControllerError> {
        let policy = self.policy(image);
        let ControllerRequest::WithMutationQuota {
            quota: key,
            request: inner,
        } = req
        else {
            return request::decide(image, req, &policy);
        };
        let now = crate::clock::now_ms();
        let mut quota = self.mutation_quotas.mutation_quota(
            image.client_quotas.clone(),
            &key.user,
            &key.client_id,
            key.strict,
        );
        let charge = inner.quota_charge(image);
        if charge != request::QuotaCharge::Free && quota.exceeded(now).is_some() {
            if let request::QuotaCharge::Charged(Some(probe)) = charge {
                request::decide(image, &probe, &policy)?;
            }
            let refused = ControllerReply::MutationQuota {
                reply: None,
                throttle_ms: quota.throttle_time_ms(now),
            };
            return Ok((Vec::new(), refused));
        }
        let (records, reply) = request::decide(image, inner, &policy)?;
        quota.record(inner.mutation_permits(image, &reply), now);
        let charged = ControllerReply::MutationQuota {
            reply: Some(Box::new(reply)),
            throttle_ms: quota.throttle_time_ms(now),
        };
        Ok((records, charged))
    }

    /// Brokers the active controller should fence now: unfenced, and silent for longer than
    /// the session timeout. Starts the bookkeeping afresh in a new term.
    fn expired_brokers(&self, term: u64, image: &MetadataImage) -> Vec<i32> {
        let now = Instant::now();
        let session = Duration::from_millis(self.config.session_timeout_ms);
        let mut l = self.liveness.lock();
        if l.term != Some(term) {
            l.term = Some(term);
            l.last_contact.clear();
        }
        let mut expired = Vec::new();
        for b in image.brokers.values().filter(|b| !b.fenced) {
            // A broker not heard from in this term gets a full session from now.
            let last = *l.last_contact.entry(b.node_id).or_insert(now);
            if now.duration_since(last) > session {
                expired.push(b.node_id);
            }
        }
        expired
    }

    /// When the next live broker's session ends, if no heartbeat comes first; brokers
    /// already `expired` (being fenced) are retried by the regular check instead.
    fn next_session_expiry(&self, image: &MetadataImage, expired: &[i32]) -> Option<Instant> {
        let session = Duration::from_millis(self.config.session_timeout_ms);
        let mut contacts = self.liveness.lock().last_contact.clone();
        contacts.retain(|id, _| !expired.contains(id));
        cluster_control::next_session_expiry(&contacts, image, session)
    }
}

/// The partition changes in `records` that give a partition a new leader (a leader moved,
/// or a leaderless partition got one): Kafka's leader elections. A change to no leader, or
/// of the ISR only, is not an election.
fn leader_changes(image: &MetadataImage, records: &[MetadataRecord]) -> u64 {
    let elected = |r: &MetadataRecord| match r {
        MetadataRecord::PartitionChange {
            topic_id,
            partition,
            leader,
            ..
        } => {
            let before = image
                .topics
                .get(topic_id)
                .and_then(|t| {
                    usize::try_from(*partition)
                        .ok()
                        .and_then(|i| t.partitions.get(i))
                })
                .map(|p| p.leader);
            *leader != NO_LEADER && before != Some(*leader)
        }
        _ => false,
    };
    records.iter().filter(|r| elected(r)).count() as u64
}

/// An idle follower hears from the leader at least this often: KRaft's leader answers a
/// follower's parked Fetch after at most `KafkaRaftClient.MAX_FETCH_WAIT_MS` (500 ms).
pub const RAFT_HEARTBEAT_INTERVAL_MS_MAX: u64 = 500;

/// The widest spread of the moments followers campaign at after the fetch timeout
/// ([`raft_timing`]): wide against the few milliseconds a vote takes on a busy machine, so two
/// followers rarely split a vote, and short against the fetch timeout it adds to.
pub const CAMPAIGN_SPREAD_MS_MAX: u64 = 200;

/// The Raft library's timers, from Kafka's quorum settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftTiming {
    pub election_timeout_min: u64,
    pub election_timeout_max: u64,
    /// Also the bound on one AppendEntries call: openraft times each one out after a
    /// heartbeat interval, so this is what a slow follower (a stalled fsync, a busy machine)
    /// must answer within.
    pub heartbeat_interval: u64,
}

/// Maps KRaft's timers onto openraft's, as `KafkaRaftClient`, `FollowerState` and
/// `QuorumConfig` define them: a voter that has not heard from the leader for
/// `controller.quorum.fetch.timeout.ms` becomes a candidate at once
/// (`KafkaRaftClient.pollFollowerAsVoter`: "Become candidate due to fetch timeout"), and until
/// then refuses to vote for anyone else; `controller.quorum.election.timeout.ms` is how long a
/// candidate then waits for votes (randomised) before it tries again. So an election starts
/// at the fetch timeout after the leader's last contact; the voters' last contacts differ a
/// little, which keeps them from campaigning at the same moment.
///
/// openraft 0.9 has one randomised timer, `[election_timeout_min, election_timeout_max)`,
/// and a leader lease of `election_timeout_max`: a follower refuses votes for the lease after
/// the leader's last contact, and campaigns only after the lease *plus* its timer. Setting
/// the timer to the fetch timeout (as a first mapping did) made a follower campaign 5 to 6 s
/// after the leader died, at Kafka's defaults. Here `max + min = fetch` and `max - min` is a
/// short spread ([`CAMPAIGN_SPREAD_MS_MAX`], or the election timeout if shorter), so lease
/// plus timer spans `[fetch, fetch + spread)`: the campaign starts at Kafka's moment, and the
/// spread keeps two followers from splitting the vote. (A spread of the whole election
/// timeout, as a second mapping had, started elections 0.5 s later than Kafka's on average,
/// which the failover benchmark, `benches/src/bin/failover.rs`, showed.) The lease (`max`)
/// ends before any follower campaigns. A spread over half the fetch timeout is cut to half.
///
/// The leader contacts each follower every [`RAFT_HEARTBEAT_INTERVAL_MS_MAX`] (or a fifth of
/// the fetch timeout, if that is shorter: openraft wants it below `min`), so a follower
/// misses several heartbeats before it campaigns. Deriving the heartbeat from the election
/// timeout alone (a tenth of it) gave each AppendEntries 100 ms at Kafka's defaults: a busy
/// machine then failed every commit and the quorum changed leader over and over.
pub fn raft_timing(fetch_timeout_ms: u64, election_timeout_ms: u64) -> RaftTiming {
    let fetch = fetch_timeout_ms.max(20);
    let spread = election_timeout_ms
        .min(CAMPAIGN_SPREAD_MS_MAX)
        .clamp(1, fetch / 2);
    RaftTiming {
        election_timeout_min: (fetch - spread) / 2,
        election_timeout_max: (fetch + spread) / 2,
        heartbeat_interval: (fetch / 5).clamp(1, RAFT_HEARTBEAT_INTERVAL_MS_MAX),
    }
}

/// When a follower of openraft 0.9 campaigns after the leader's last contact, given its
/// timers: the leader lease (`election_timeout_max`) plus its randomised election timer
/// (`RaftCore::handle_tick_election`). The range's bounds, in milliseconds.
#[cfg(test)]
fn campaign_after_ms(t: RaftTiming) -> (u64, u64) {
    (
        t.election_timeout_max + t.election_timeout_min,
        2 * t.election_timeout_max,
    )
}

/// How often the active controller looks for expired sessions: a quarter of the session
/// timeout, within bounds, so a dead broker is fenced at most 25% late.
fn liveness_check_interval(session_timeout_ms: u64) -> Duration {
    Duration::from_millis((session_timeout_ms / 4).clamp(10, 1000))
}

/// Logs each change of the metadata quorum's leader or term, one line each (Kafka's
/// `QuorumState.transitionTo` logs "Completed transition to ..." at INFO): the Raft library's own per-vote
/// and per-append lines are kept at WARN by default, so a node's log reads as the cluster's
/// story rather than the library's internals.
async fn quorum_leader_log_task(inner: Arc<Inner>) {
    let mut metrics = inner.raft.metrics();
    let mut seen = None;
    loop {
        let now = {
            let m = metrics.borrow_and_update();
            (m.current_leader, m.current_term)
        };
        if seen != Some(now) {
            let (leader, term) = now;
            match leader {
                Some(leader) => tracing::info!(leader, term, "metadata quorum leader"),
                None => tracing::info!(term, "metadata quorum has no leader"),
            }
            seen = Some(now);
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// Writes `import` (a legacy metadata file's records) as the first batch of a single
/// voter's quorum whose image is still empty; an image with brokers or topics has it already.
async fn import_into_empty_image(
    raft: &Raft<TypeConfig>,
    image_rx: &watch::Receiver<Arc<MetadataImage>>,
    import: Vec<MetadataRecord>,
) -> Result<(), ControllerError> {
    let empty = {
        let image = image_rx.borrow();
        image.brokers.is_empty() && image.topics.is_empty()
    };
    if empty && !import.is_empty() {
        raft.client_write(MetadataBatch(import))
            .await
            .map_err(internal)?;
    }
    Ok(())
}

/// openraft's settings from the quorum's (Kafka's `QuorumConfig` timeouts, mapped by
/// `raft_timing`), with the snapshot policy and the append and snapshot chunk bounds.
fn raft_config(config: &ControllerConfig) -> Result<openraft::Config, ControllerError> {
    let timing = raft_timing(config.fetch_timeout_ms, config.election_timeout_ms);
    openraft::Config {
        cluster_name: "brook".into(),
        election_timeout_min: timing.election_timeout_min,
        election_timeout_max: timing.election_timeout_max,
        heartbeat_interval: timing.heartbeat_interval,
        install_snapshot_timeout: timing.election_timeout_min.max(1000),
        max_payload_entries: MAX_ENTRIES_PER_APPEND,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_interval_entries.max(1)),
        max_in_snapshot_log_to_keep: LOGS_KEPT_AFTER_SNAPSHOT
            .min(config.snapshot_interval_entries / 5),
        snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
        ..Default::default()
    }
    .validate()
    .map_err(internal)
}

/// Every voter initialises the same membership, the configured voters, on its first start;
/// whether this start did. Only a node with an empty log and no vote takes the membership;
/// asking a restarted one makes openraft log an error. An observer takes its membership
/// from the leader that adds it (as a Kafka observer reads the voters from the log it
/// fetches), never from its configuration.
async fn initialize_membership(
    raft: &Raft<TypeConfig>,
    config: &ControllerConfig,
    observer: bool,
) -> Result<bool, ControllerError> {
    if observer || raft.is_initialized().await.map_err(internal)? {
        return Ok(false);
    }
    if !initializes_first(config) {
        // [`initialize_unless_led`] does it later, if no leader has by then.
        return Ok(false);
    }
    initialize_now(raft, config).await
}

/// At a new quorum's first start the lowest-numbered voter initializes it and campaigns at
/// once. openraft's `initialize` starts a campaign on every voter that calls it: three voters
/// started together would all campaign in term 1, each voting for itself, and split the vote
/// (5 of 30 starts did), costing a whole election timeout. Kafka's voters start unattached and
/// each campaigns only after its own randomised `controller.quorum.election.timeout.ms`
/// (`KafkaRaftClient`'s `UnattachedState`), so one of them is usually first.
fn initializes_first(config: &ControllerConfig) -> bool {
    config.voters.keys().next() == Some(&config.node_id)
}

/// The other voters of a new quorum: they wait one election timeout for the first voter's
/// leadership to reach them (an uninitialized voter grants its vote and takes the membership
/// from the leader's first AppendEntries), then initialize and campaign themselves, so a
/// quorum whose lowest-numbered voter is down still elects a leader.
async fn initialize_unless_led(raft: Raft<TypeConfig>, config: ControllerConfig) {
    let wait = Duration::from_millis(config.election_timeout_ms);
    let mut metrics = raft.metrics();
    let led = metrics.wait_for(|m| m.last_log_index.is_some() || m.current_leader.is_some());
    if tokio::time::timeout(wait, led).await.is_ok() {
        return;
    }
    match raft.is_initialized().await {
        Ok(false) => {
            tracing::info!("no quorum leader after the election timeout; campaigning");
            if let Err(e) = initialize_now(&raft, &config).await {
                tracing::warn!(error = %e, "could not initialize the quorum");
            }
        }
        Ok(true) => {}
        Err(e) => tracing::warn!(error = %e, "could not read the quorum's state"),
    }
}

/// Initializes the quorum with the configured voters; false when it already was.
async fn initialize_now(
    raft: &Raft<TypeConfig>,
    config: &ControllerConfig,
) -> Result<bool, ControllerError> {
    let members: BTreeMap<NodeId, BasicNode> = config
        .voters
        .iter()
        .map(|(id, addr)| (*id as NodeId, BasicNode::new(addr)))
        .collect();
    match raft.initialize(members).await {
        Ok(()) => Ok(true),
        Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(false),
        Err(e) => Err(internal(e)),
    }
}

/// The controller's tasks: its listener (when it has one) and the join of an observer, the
/// liveness and leader log tasks, and the broker's lifecycle when this node is a broker.
fn spawn_tasks(
    inner: &Arc<Inner>,
    listener: Option<tokio::net::TcpListener>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    if let Some(listener) = listener {
        tasks.push(tokio::spawn(serve_controller_listener(
            inner.clone(),
            listener,
        )));
        tasks.push(tokio::spawn(voter_control::observer_join_task(
            inner.clone(),
        )));
    }
    tasks.push(tokio::spawn(liveness_task(inner.clone())));
    tasks.push(tokio::spawn(quorum_leader_log_task(inner.clone())));
    if inner.config.broker_endpoint.is_some() {
        tasks.push(tokio::spawn(broker_lifecycle_task(inner.clone())));
    }
    tasks
}

/// Serves the controller listener: Raft's and the controller's requests, over TLS or SASL
/// when the controller channel is secured.
async fn serve_controller_listener(inner: Arc<Inner>, listener: tokio::net::TcpListener) {
    let router = network::router(inner.clone());
    let channel = inner.config.channel.clone();
    let image = inner.image_rx.clone();
    let served = match channel.secured() {
        true => {
            let listener = channel::SecuredListener::new(listener, channel, image);
            let app = router.into_make_service_with_connect_info::<channel::ControllerPeer>();
            axum::serve(listener, app).await
        }
        false => axum::serve(listener, router).await,
    };
    if let Err(e) = served {
        tracing::error!(error = %e, "controller listener failed");
    }
}

/// Runs on every node; acts only while the node is the active controller.
async fn liveness_task(inner: Arc<Inner>) {
    let mut tick = tokio::time::interval(liveness_check_interval(inner.config.session_timeout_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let me = inner.config.node_id as NodeId;
    let mut metrics = inner.raft.metrics();
    let mut next_expiry: Option<Instant> = None;
    // The term this node was last seen active controller in.
    let mut active_term: Option<u64> = None;
    loop {
        // The regular check; the moment the next session ends, if sooner; and the moment this
        // node becomes active controller, so that the brokers' sessions count from then
        // (Kafka's `ClusterControlManager.activate`), not from the next regular check.
        let session_end = async {
            match next_expiry {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let activated = async {
            let newly_active = |m: &openraft::RaftMetrics<NodeId, BasicNode>| {
                m.current_leader == Some(me) && Some(m.current_term) != active_term
            };
            // A closed watch (the quorum shutting down) never wakes this again.
            if metrics.wait_for(newly_active).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = tick.tick() => {}
            _ = session_end => {}
            _ = activated => {}
        }
        next_expiry = None;
        let (leader, term) = {
            let m = metrics.borrow();
            (m.current_leader, m.current_term)
        };
        active_term = (leader == Some(me)).then_some(term);
        if leader != Some(me) {
            let mut l = inner.liveness.lock();
            l.term = None;
            l.next_balance = None;
            continue;
        }
        let image = inner.image_rx.borrow().clone();
        next_expiry = fence_stale_brokers(&inner, term, &image).await;
        maybe_balance_partition_leaders(&inner, &image).await;
    }
}

/// Fences the brokers whose sessions expired (Kafka's
/// `QuorumController.maybeFenceStaleBroker`); returns when the next session ends.
async fn fence_stale_brokers(
    inner: &Arc<Inner>,
    term: u64,
    image: &MetadataImage,
) -> Option<Instant> {
    let expired = inner.expired_brokers(term, image);
    let next_expiry = inner.next_session_expiry(image, &expired);
    for node_id in expired {
        tracing::info!(node_id, "broker session expired; fencing");
        if let Err(e) = inner
            .handle_locally(ControllerRequest::FenceBroker { node_id })
            .await
        {
            // Tried again each liveness check while the quorum cannot commit.
            static FENCING: RepeatLimiter = RepeatLimiter::new();
            if let Some(note) = FENCING.admit(key_of(node_id)) {
                tracing::warn!(node_id, error = %e, "fencing failed{note}");
            }
        }
    }
    next_expiry
}

/// Preferred-leader balance (Kafka's `QuorumController.maybeScheduleNextBalancePartitionLeaders`):
/// the interval counts from this node becoming active controller (or from its last
/// balance), as Kafka schedules it; an election runs when a partition is not led by its
/// preferred replica.
async fn maybe_balance_partition_leaders(inner: &Arc<Inner>, image: &MetadataImage) {
    let Some(interval) = inner.config.leader_imbalance_check_interval else {
        return;
    };
    let due = {
        let mut l = inner.liveness.lock();
        let now = Instant::now();
        let next = *l.next_balance.get_or_insert(now + interval);
        if now >= next {
            l.next_balance = Some(now + interval);
        }
        now >= next
    };
    if due && replication_control::has_imbalanced_partitions(image) {
        tracing::info!("electing preferred leaders");
        if let Err(e) = inner
            .handle_locally(ControllerRequest::ElectPreferredLeaders)
            .await
        {
            tracing::warn!(error = %e, "preferred leader election failed");
        }
    }
}

/// The broker side of this node: register, then heartbeat every
/// `broker.heartbeat.interval.ms`, re-registering when the epoch is refused.
/// Backoff of registration while the broker is not yet registered (no quorum leader yet).
pub const BROKER_STARTUP_RETRY: Duration = Duration::from_millis(50);
/// Next heartbeat of a freshly registered broker the controller still fences (it has not
/// caught up with its own registration yet; a broker fenced later keeps the 50 ms): Kafka's `BrokerLifecycleManager` re-sends a STARTING
/// broker's heartbeat after 10 ms, "so that in the case where there is no recovery work to be
/// done, we start up a bit quicker".
pub const FENCED_HEARTBEAT_RETRY: Duration = Duration::from_millis(10);

async fn broker_lifecycle_task(inner: Arc<Inner>) {
    let Some((host, port)) = inner.config.broker_endpoint.clone() else {
        return;
    };
    let mut enabled = inner.heartbeats_enabled.subscribe();
    let mut tick = tokio::time::interval(Duration::from_millis(
        inner.config.heartbeat_interval_ms.max(1),
    ));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut epoch: Option<i64> = None;
    let mut wanted = inner.shut_down_wanted.subscribe();
    // Until this broker is registered and unfenced, it retries on a short backoff rather
    // than a full heartbeat interval: a fresh cluster is usable as soon as the quorum has a
    // leader, not one heartbeat interval later. A controlled shutdown heartbeats at once.
    let mut hurry: Option<Duration> = None;
    // Registered and not yet unfenced: Kafka's STARTING state.
    let mut starting = false;
    loop {
        if let Some(backoff) = hurry.take() {
            tokio::time::sleep(backoff).await;
        } else {
            tokio::select! {
                _ = tick.tick() => {}
                _ = wanted.changed() => {}
            }
        }
        if enabled.wait_for(|on| *on).await.is_err() {
            return;
        }
        let e = match epoch {
            Some(e) => e,
            None => match register_broker(&inner, &host, port).await {
                Some(e) => {
                    epoch = Some(e);
                    starting = true;
                    e
                }
                None => {
                    hurry = Some(BROKER_STARTUP_RETRY);
                    continue;
                }
            },
        };
        match send_broker_heartbeat(&inner, e).await {
            HeartbeatOutcome::Alive => starting = false,
            HeartbeatOutcome::Failed => {}
            HeartbeatOutcome::Fenced if starting => hurry = Some(FENCED_HEARTBEAT_RETRY),
            HeartbeatOutcome::Fenced => hurry = Some(BROKER_STARTUP_RETRY),
            HeartbeatOutcome::Unregistered => {
                epoch = None;
                hurry = Some(BROKER_STARTUP_RETRY);
            }
        }
    }
}

/// Registers this node's broker (Kafka's `BrokerLifecycleManager.sendBrokerRegistration`):
/// its broker epoch, published to `broker_epoch`; `None` when the registration failed.
async fn register_broker(inner: &Arc<Inner>, host: &str, port: u16) -> Option<i64> {
    let req = ControllerRequest::RegisterBroker {
        node_id: inner.config.node_id,
        host: host.to_string(),
        port,
        incarnation: inner.incarnation,
        previous_epoch: inner.config.previous_broker_epoch,
        endpoints: inner.config.broker_listeners.clone(),
    };
    match inner.submit(req).await {
        Ok(ControllerReply::BrokerRegistered { epoch }) => {
            inner.broker_epoch.send_replace(Some(epoch));
            Some(epoch)
        }
        Ok(_) => None,
        Err(err) => {
            tracing::debug!(error = %err, "broker registration failed; retrying");
            None
        }
    }
}

/// What a broker heartbeat found.
enum HeartbeatOutcome {
    /// Answered: the broker is unfenced (or its shutdown was granted).
    Alive,
    /// Failed in a way the next heartbeat retries.
    Failed,
    /// The broker is fenced: heartbeat again soon.
    Fenced,
    /// The broker epoch was refused: register again.
    Unregistered,
}

/// One heartbeat of this node's broker at broker epoch `epoch` (Kafka's
/// `BrokerLifecycleManager.sendBrokerHeartbeat`), with the offset of the image it serves
/// from and whether it wants to shut down; a granted shutdown is published to
/// `shut_down_granted`.
async fn send_broker_heartbeat(inner: &Arc<Inner>, epoch: i64) -> HeartbeatOutcome {
    // This node's image is what its broker side serves from.
    let metadata_offset = inner.image_rx.borrow().metadata_offset;
    let want_shut_down = *inner.shut_down_wanted.borrow();
    let req = ControllerRequest::Heartbeat {
        node_id: inner.config.node_id,
        epoch,
        metadata_offset,
        want_shut_down,
    };
    // A heartbeat waits at most half a session (Kafka's heartbeat channel in `BrokerServer`,
    // KAFKA-14392): one held up in a busy controller's queue must not keep the next from
    // being sent, since the controller counts each heartbeat as it arrives.
    let timeout = Duration::from_millis((inner.config.session_timeout_ms / 2).max(1));
    match inner.submit_within(req, timeout).await {
        Ok(ControllerReply::Heartbeat {
            should_shut_down: true,
            ..
        }) if want_shut_down => {
            inner.shut_down_granted.send_replace(true);
            HeartbeatOutcome::Alive
        }
        Ok(ControllerReply::Heartbeat { fenced: true, .. }) => HeartbeatOutcome::Fenced,
        Ok(_) => HeartbeatOutcome::Alive,
        Err(
            ControllerError::StaleBrokerEpoch { .. } | ControllerError::BrokerIdNotRegistered(_),
        ) => HeartbeatOutcome::Unregistered,
        Err(err) => {
            tracing::debug!(error = %err, "broker heartbeat failed");
            HeartbeatOutcome::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quorum_campaigns_after_kafkas_fetch_timeout_as_openraft_counts_it() {
        // Kafka's defaults: campaign 2 to 2.2 s after the leader's last contact; votes
        // refused until 1.1 s; a heartbeat every 400 ms, below openraft's minimum timer.
        let t = raft_timing(2000, 1000);
        assert_eq!(campaign_after_ms(t), (2000, 2200));
        assert!(
            t.election_timeout_max < 2000,
            "{t:?}: the lease outlasts the fetch timeout"
        );
        assert!(t.heartbeat_interval < t.election_timeout_min, "{t:?}");
        assert_eq!(t.heartbeat_interval, 400);
        for (fetch, election) in [(300, 300), (20, 1), (10_000, 100), (1, 1), (2000, 0)] {
            let t = raft_timing(fetch, election);
            let (from, to) = campaign_after_ms(t);
            assert!(
                from >= fetch.max(20) - 1 && from < to,
                "{fetch}/{election}: {t:?}"
            );
            assert!(t.election_timeout_max < from, "{fetch}/{election}: {t:?}");
            assert!(
                0 < t.heartbeat_interval && t.heartbeat_interval < t.election_timeout_min,
                "{fetch}/{election}: {t:?}"
            );
        }
    }

    #[test]
    fn config_from_kafka_keys() {
        let load = |extra: &[&str]| {
            let mut o: Vec<String> = [
                "node.id=2",
                "log.dirs=/tmp/brook-2",
                "listeners=PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9193",
                "controller.listener.names=CONTROLLER",
                "controller.quorum.voters=1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194",
                "controller.quorum.bootstrap.servers=127.0.0.1:9192",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            o.extend(extra.iter().map(|s| s.to_string()));
            BrokerConfig::load(None, &o).unwrap()
        };
        assert!(ControllerConfig::from_broker_config(&load(&[]))
            .unwrap()
            .is_none());
        let c = ControllerConfig::from_broker_config(&load(&[
            "process.roles=broker,controller",
            "broker.session.timeout.ms=3000",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.node_id, 2);
        assert_eq!(c.voters.len(), 3);
        assert_eq!(c.listener_name, "CONTROLLER");
        assert_eq!(c.listen.port(), 9193);
        assert_eq!(
            c.metadata_dir,
            PathBuf::from("/tmp/brook-2/__cluster_metadata")
        );
        assert_eq!(c.broker_endpoint, Some(("127.0.0.1".to_string(), 9093)));
        assert_eq!(
            (c.heartbeat_interval_ms, c.session_timeout_ms),
            (2000, 3000)
        );
        let c = ControllerConfig::from_broker_config(&load(&["process.roles=controller"]))
            .unwrap()
            .unwrap();
        assert_eq!(c.broker_endpoint, None);
        let bad = load(&[
            "process.roles=controller",
            "controller.quorum.voters=1@127.0.0.1:9192",
        ]);
        assert!(ControllerConfig::from_broker_config(&bad).is_err());
    }

    #[test]
    fn a_node_without_voters_joins_through_the_bootstrap_servers() {
        let load = |extra: &[&str]| {
            let mut o: Vec<String> = [
                "node.id=4",
                "log.dirs=/tmp/brook-4",
                "process.roles=broker,controller",
                "listeners=PLAINTEXT://127.0.0.1:9095,CONTROLLER://127.0.0.1:9195",
                "controller.listener.names=CONTROLLER",
                "controller.quorum.bootstrap.servers=127.0.0.1:9192, 127.0.0.1:9193",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            o.extend(extra.iter().map(|s| s.to_string()));
            BrokerConfig::load(None, &o).unwrap()
        };
        // It must name the cluster it joins.
        assert!(ControllerConfig::from_broker_config(&load(&[])).is_err());
        let c = ControllerConfig::from_broker_config(&load(&["cluster.id=MkU3OEVBNTcwNTJENDM2Qk"]))
            .unwrap()
            .unwrap();
        assert!(c.voters.is_empty());
        assert_eq!(c.bootstrap_servers, ["127.0.0.1:9192", "127.0.0.1:9193"]);
        assert_eq!(c.listen.port(), 9195);
        assert!(parse_bootstrap_servers("127.0.0.1").is_err());
        assert_eq!(parse_bootstrap_servers(""), Ok(Vec::new()));
    }

    #[test]
    fn voters_parse_kafka_format() {
        let v = parse_voters("1@127.0.0.1:9192,2@127.0.0.1:9193, 3@localhost:9194").unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[&3], "localhost:9194");
        assert!(parse_voters("1@127.0.0.1").is_err());
        assert!(parse_voters("x@127.0.0.1:1").is_err());
        assert!(parse_voters("1@a:1,1@b:2").is_err());
        assert!(parse_voters("").is_err());
    }
}
