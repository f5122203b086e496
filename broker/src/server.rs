//! The broker process: the listener, background tasks and graceful shutdown of a
//! [`Broker`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::broker::Broker;
use crate::cluster::replica_manager::{OffsetCheckpoint, ReplicaError, ReplicaManager};
use crate::config::BrokerConfig;
use crate::controller::image::{BrokerEndpoint, MetadataImage};
use crate::fault::FaultEngine;
use crate::group::GroupCoordinator;
use crate::listeners::{Advertised, Listener};
use crate::log_limit::{key_of, RepeatLimiter};
use crate::metrics::BrokerMetrics;
use crate::net::connection_quotas::{Accepted, ConnectionQuotas, ConnectionRateLimits};
use crate::net::memory_pool::RequestMemoryPool;
use crate::txn::TransactionCoordinator;

/// How long the listener pauses after a failed accept (out of descriptors, say) before it
/// tries again.
const ACCEPT_ERROR_BACKOFF_MS: u64 = 100;

/// Puts `broker_fenced` / `broker_unfenced` on the event stream for brokers whose fencing
/// changed between two committed images. Only the active controller reports it (it decided
/// it), so a cluster's stream has each change once.
fn report_fencing(previous: &MetadataImage, current: &MetadataImage) {
    for (id, b) in &current.brokers {
        let was_fenced = previous.brokers.get(id).is_none_or(|p| p.fenced);
        if was_fenced == b.fenced {
            continue;
        }
        let (broker, broker_epoch) = (*id, b.registration_offset);
        crate::events::emit(|| match b.fenced {
            true => crate::events::EventKind::BrokerFenced {
                broker,
                broker_epoch,
            },
            false => crate::events::EventKind::BrokerUnfenced {
                broker,
                broker_epoch,
            },
        });
    }
}

/// Errors that stop the broker from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("metadata quorum: {0}")]
    Controller(#[from] crate::controller::ControllerError),
    #[error(transparent)]
    Groups(#[from] crate::group::GroupOpenError),
    #[error(
        "not registered and unfenced by the metadata quorum within {timeout_ms} ms \
         (initial.broker.registration.timeout.ms); is a majority of controller.quorum.voters up?"
    )]
    NotRegistered { timeout_ms: u64 },
}

/// A started broker: logs recovered, the listeners bound (or, for a cluster node on fixed
/// ports, to be bound once the node may serve).
pub struct Server {
    pub broker: Arc<Broker>,
    listeners: Vec<BrokerListener>,
    /// The first broker listener's address: bound, or the configured one while binding waits.
    pub local_addr: SocketAddr,
    admin: Option<TcpListener>,
    /// The bound admin HTTP address, when `admin.listener` is set.
    pub admin_addr: Option<SocketAddr>,
}

/// One broker listener (a `listeners` entry) and, once bound, its socket.
struct BrokerListener {
    config: Arc<Listener>,
    socket: Option<TcpListener>,
    /// Bound, or the configured address while binding waits.
    addr: SocketAddr,
}

impl Server {
    /// Opens the logs and binds the listeners. With port 0, the bound port is advertised.
    ///
    /// A cluster node on fixed ports binds only in [`Server::run_with`], once it may serve:
    /// Kafka's `SocketServer` acceptors likewise open configured ports only when
    /// `BrokerServer.startup` enables request processing, so a client meanwhile gets a refused
    /// connection, not answers from a node that has not yet learnt its partitions.
    pub async fn start(config: BrokerConfig) -> Result<Server, ServerError> {
        let config = Arc::new(config);
        // A cluster node on a fixed port binds once it may serve (`run_with`).
        let clustered = crate::controller::ControllerConfig::from_broker_config(&config)?.is_some();
        let listeners = bind_broker_listeners(&config, clustered).await?;
        let local_addr = listeners[0].addr;
        let endpoints: Vec<BrokerEndpoint> =
            listeners.iter().filter_map(advertised_endpoint).collect();
        let (host, port) = endpoints
            .first()
            .map(|e| (e.host.clone(), e.port as i32))
            .unwrap_or_else(|| (local_addr.ip().to_string(), local_addr.port() as i32));
        let faults = Arc::new(FaultEngine::new(config.node_id));
        let events = crate::events::install(crate::events::EventLog::new(
            config.node_id,
            config.admin_event_buffer_len_max,
        ));
        let (admin, admin_addr) = bind_admin(config.admin_listener).await?;
        // Every node is a voter of a metadata quorum (a cluster's, or alone its own) and
        // registers its broker with its advertised (or bound) listeners.
        let replicas =
            Arc::new(ReplicaManager::start(config.clone(), endpoints, Some(faults.clone())).await?);
        let groups = Arc::new(GroupCoordinator::open(&config, replicas.clone())?);
        let request_memory = RequestMemoryPool::new(config.queued_max_request_bytes);
        let txn = Arc::new(TransactionCoordinator::new(
            &config,
            replicas.clone(),
            faults.clone(),
        )?);
        let fetch_sessions =
            crate::cluster::fetch_session::FetchSessionCache::new(config.fetch_session_cache_slots);
        let share = crate::share::SharePartitionManager::from_config(&config)?;
        let share_coordinator = Arc::new(crate::share::coordinator::ShareCoordinator::new(
            &config,
            replicas.clone(),
        )?);
        let auto_topics = crate::auto_topic_creation::AutoTopicCreationManager::new(
            replicas.clone(),
            groups.clone(),
            txn.clone(),
            config.num_partitions,
            config.default_replication_factor,
        );
        let quotas =
            crate::quota::QuotaManagers::new(config.quota_window, config.controller_quota_window);
        let broker = Arc::new(Broker {
            tls: crate::security::ssl::reload::LiveTls::new(&config.tls.servers),
            quotas,
            config,
            request_memory,
            replicas,
            advertised_host: host,
            advertised_port: port,
            faults,
            shutting_down: watch::channel(false).0,
            groups,
            txn,
            metrics: BrokerMetrics::new(crate::api::SUPPORTED_APIS),
            events,
            fetch_sessions,
            share,
            share_coordinator,
            telemetry: Default::default(),
            auto_topics,
        });
        Ok(Server {
            broker,
            listeners,
            local_addr,
            admin,
            admin_addr,
        })
    }

    /// Each broker listener's name and address (bound, or configured while binding waits).
    pub fn listener_addrs(&self) -> Vec<(Arc<str>, SocketAddr)> {
        self.listeners
            .iter()
            .map(|l| (l.config.name.clone(), l.addr))
            .collect()
    }

    /// [`Server::run_with`], with nothing to do when serving starts.
    pub async fn run(self, shutdown: watch::Receiver<bool>) -> Result<(), ServerError> {
        self.run_with(shutdown, |_| {}).await
    }

    /// Accepts connections until `shutdown` turns true, then waits for in-flight requests,
    /// flushes every log and writes the clean-shutdown marker. A cluster node first waits
    /// until it may serve ([`await_serving`]); `serving` gets the listener's address when
    /// accepting starts.
    pub async fn run_with(
        self,
        mut shutdown: watch::Receiver<bool>,
        serving: impl FnOnce(SocketAddr),
    ) -> Result<(), ServerError> {
        let broker = self.broker.clone();
        // Clients are served, and metadata applied, until the hand-over of a controlled
        // shutdown is applied here (`hand_over_then_stop`), not only until the signal.
        let (stop_serving, serve_until) = watch::channel(false);
        let tasks = BackgroundTasks::start(&broker, self.admin, &shutdown, &serve_until);
        // The group timer task stops once requests are no longer processed, so the parked
        // JoinGroup/SyncGroup it answers then are closed unanswered (`api::unless_stopped`).
        let group_timers =
            tokio::spawn(broker.groups.clone().run(broker.shutting_down.subscribe()));
        let txn_timers = tokio::spawn(broker.txn.clone().run(serve_until.clone()));
        let quotas = ConnectionQuotas::new(
            broker.config.max_connections,
            broker.config.max_connections_per_ip,
            connection_rate_limits(&broker),
        );
        let (listeners, startup_error) =
            bind_when_serving(&broker, &mut shutdown, self.listeners).await;
        if let Some(e) = &startup_error {
            tracing::error!(error = %e, "cannot serve clients; stopping");
        }
        let served = !listeners.is_empty();
        let hand_over = tokio::spawn(hand_over_then_stop(
            broker.clone(),
            shutdown.clone(),
            served,
            stop_serving,
        ));
        let mut connections = Vec::new();
        if served {
            serving(self.local_addr);
            connections = accept_on_all(&broker, listeners, &quotas, &serve_until).await;
        }
        let _ = hand_over.await;
        broker.shutting_down.send_replace(true);
        // No request is served from here: parked acks=all waits end now (the connections
        // they came on are closed, as Kafka's `SocketServer.stopProcessingRequests` does).
        for p in broker.replicas.all_partitions() {
            p.release_waits();
        }
        tracing::info!("shutting down: finishing in-flight requests");
        // The group timer task answers parked JoinGroup/SyncGroup requests at shutdown, so
        // the connections waiting on them can finish.
        let _ = group_timers.await;
        let _ = txn_timers.await;
        for mut set in connections {
            while set.join_next().await.is_some() {}
        }
        tasks.stop(&broker).await?;
        tracing::info!("shutdown complete");
        match startup_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Binds each broker listener, or (a cluster node on a fixed port, `clustered`) keeps its
/// configured address to bind once the node may serve.
async fn bind_broker_listeners(
    config: &BrokerConfig,
    clustered: bool,
) -> Result<Vec<BrokerListener>, ServerError> {
    let mut listeners = Vec::new();
    for l in &config.listeners.broker {
        let (socket, addr) = if clustered && l.addr.port() != 0 {
            (None, l.addr)
        } else {
            let s = bind(l.addr).await?;
            let addr = s.local_addr().map_err(|source| ServerError::Bind {
                addr: l.addr,
                source,
            })?;
            (Some(s), addr)
        };
        listeners.push(BrokerListener {
            config: Arc::new(l.clone()),
            socket,
            addr,
        });
    }
    Ok(listeners)
}

/// Binds the admin HTTP listener (`admin.listener`), when set: the socket and its address.
async fn bind_admin(
    admin_listener: Option<SocketAddr>,
) -> Result<(Option<TcpListener>, Option<SocketAddr>), ServerError> {
    let Some(addr) = admin_listener else {
        return Ok((None, None));
    };
    let l = crate::admin::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let bound = l
        .local_addr()
        .map_err(|source| ServerError::Bind { addr, source })?;
    Ok((Some(l), Some(bound)))
}

/// The node's background tasks: retention, the log cleaner, the offset checkpoints, the
/// admin HTTP listener and the metadata follower (which applies images and replicates).
struct BackgroundTasks {
    retention: tokio::task::JoinHandle<()>,
    cleaner: Arc<crate::cluster::log_cleaner::LogCleaner>,
    checkpoints: [tokio::task::JoinHandle<()>; 3],
    admin: Option<tokio::task::JoinHandle<()>>,
    replication: tokio::task::JoinHandle<()>,
}

impl BackgroundTasks {
    /// Starts the tasks; they run until `shutdown`, the metadata follower until
    /// `serve_until` (the hand-over of a controlled shutdown).
    fn start(
        broker: &Arc<Broker>,
        admin: Option<TcpListener>,
        shutdown: &watch::Receiver<bool>,
        serve_until: &watch::Receiver<bool>,
    ) -> BackgroundTasks {
        let retention = {
            let b = broker.clone();
            tokio::spawn(every(
                Duration::from_millis(broker.config.retention_check_interval_ms),
                shutdown.clone(),
                move || b.replicas.run_retention(),
            ))
        };
        let cleaner = crate::cluster::log_cleaner::LogCleaner::start(
            broker.replicas.clone(),
            broker.faults.clone(),
        );
        let checkpoints = spawn_checkpoints(broker, shutdown);
        let admin =
            admin.map(|l| tokio::spawn(crate::admin::serve(l, broker.clone(), shutdown.clone())));
        let replication = {
            let controller = broker.replicas.controller().clone();
            broker.replicas.follow_metadata(
                broker.faults.clone(),
                serve_until.clone(),
                move |previous, current| {
                    if controller.is_active() {
                        report_fencing(previous, current);
                    }
                },
            )
        };
        BackgroundTasks {
            retention,
            cleaner,
            checkpoints,
            admin,
            replication,
        }
    }

    /// Waits for the tasks to end, stops the metadata quorum, then the cleaner, and closes
    /// every log (final flush, checkpoints, the clean-shutdown marker).
    async fn stop(self, broker: &Arc<Broker>) -> Result<(), ServerError> {
        let _ = self.retention.await;
        for c in self.checkpoints {
            let _ = c.await;
        }
        let _ = self.replication.await;
        broker.replicas.controller().shutdown().await;
        if let Some(a) = self.admin {
            let _ = a.await;
        }
        let b = broker.clone();
        let cleaner = self.cleaner;
        tokio::task::spawn_blocking(move || {
            // The cleaner stops before the logs close: no swap after the final flush.
            cleaner.shutdown();
            b.replicas.shutdown()
        })
        .await
        .map_err(|e| ReplicaError::Io(std::io::Error::other(e)))??;
        Ok(())
    }
}

/// The periodic checkpoint writers: high watermarks (Kafka's `ReplicaManager` high watermark
/// checkpoint task), recovery points and log start offsets (`LogManager`'s scheduled tasks).
fn spawn_checkpoints(
    broker: &Arc<Broker>,
    shutdown: &watch::Receiver<bool>,
) -> [tokio::task::JoinHandle<()>; 3] {
    [
        (
            OffsetCheckpoint::HighWatermark,
            broker.config.high_watermark_checkpoint_interval_ms,
        ),
        (
            OffsetCheckpoint::RecoveryPoint,
            broker.config.recovery_point_checkpoint_interval_ms,
        ),
        (
            OffsetCheckpoint::LogStartOffset,
            broker.config.log_start_offset_checkpoint_interval_ms,
        ),
    ]
    .map(|(which, period_ms)| {
        // Shutdown writes every checkpoint once more, after closing the logs.
        let b = broker.clone();
        tokio::spawn(every(
            Duration::from_millis(period_ms),
            shutdown.clone(),
            move || {
                if let Err(e) = b.replicas.write_checkpoint(which) {
                    tracing::warn!(file = which.file(), error = %e, "checkpoint write failed");
                }
            },
        ))
    })
}

/// Waits until the node may serve ([`await_serving`]), applies the dynamic stores and the
/// bootstrap SCRAM users and voters, then binds the listeners. No listeners when shutdown
/// came first or starting failed (the error).
async fn bind_when_serving(
    broker: &Arc<Broker>,
    shutdown: &mut watch::Receiver<bool>,
    listeners: Vec<BrokerListener>,
) -> (Vec<(Arc<Listener>, TcpListener)>, Option<ServerError>) {
    let ready = match await_serving(broker, shutdown).await {
        Ok(true) => {
            apply_dynamic_stores(broker);
            match bootstrap_scram(broker).await {
                Ok(()) => bootstrap_voters(broker).await.map(|()| true),
                Err(e) => Err(e),
            }
        }
        other => other,
    };
    match ready {
        Ok(true) => match bind_all(listeners).await {
            Ok(l) => (l, None),
            Err(e) => (Vec::new(), Some(e)),
        },
        Ok(false) => (Vec::new(), None),
        Err(e) => (Vec::new(), Some(e)),
    }
}

/// One acceptor per listener until `serve_until`; returns each one's connection tasks, for
/// the drain at shutdown.
async fn accept_on_all(
    broker: &Arc<Broker>,
    listeners: Vec<(Arc<Listener>, TcpListener)>,
    quotas: &Arc<ConnectionQuotas>,
    serve_until: &watch::Receiver<bool>,
) -> Vec<JoinSet<()>> {
    let acceptors: Vec<_> = listeners
        .into_iter()
        .map(|(config, socket)| {
            let (broker, quotas, mut shutdown) =
                (broker.clone(), quotas.clone(), serve_until.clone());
            tokio::spawn(async move {
                let mut set = JoinSet::new();
                accept_until_shutdown(&broker, socket, config, &quotas, &mut set, &mut shutdown)
                    .await;
                set
            })
        })
        .collect();
    let mut connections = Vec::new();
    for a in acceptors {
        if let Ok(set) = a.await {
            connections.push(set);
        }
    }
    connections
}

/// Waits for the stop signal, then (a cluster node that served, with
/// `controlled.shutdown.enable`) hands this node's leaderships over while it still serves and
/// applies metadata, as Kafka's `BrokerServer.shutdown` waits for its controlled shutdown
/// before `SocketServer.stopProcessingRequests`: a produce parked on a moved partition then
/// ends NOT_LEADER_OR_FOLLOWER naming the new leader (KIP-951), and the client goes there at
/// once instead of finding a closed connection and refreshing its metadata. Then tells the
/// acceptors, connections and metadata follower to stop (`stop`). A single node has no other
/// member to hand its leaderships to; a node that never served was given none.
async fn hand_over_then_stop(
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
    served: bool,
    stop: watch::Sender<bool>,
) {
    if !served {
        // Stopping already (signalled while starting, or unable to serve).
        stop.send_replace(true);
        return;
    }
    let _ = shutdown.wait_for(|s| *s).await;
    if broker.config.controlled_shutdown_enable {
        broker.controlled_shutdown().await;
    }
    stop.send_replace(true);
}

/// The endpoint a listener is registered with: its `advertised.listeners` entry, else its
/// bound address (the loopback address for a wildcard bind); `None` when
/// `advertised.listeners` leaves it out.
fn advertised_endpoint(l: &BrokerListener) -> Option<BrokerEndpoint> {
    let (host, port) = match &l.config.advertised {
        Advertised::No => return None,
        Advertised::At(host, port) => (host.clone(), *port),
        Advertised::Bound => {
            let ip = l.addr.ip();
            let host = if ip.is_unspecified() {
                "127.0.0.1".to_string()
            } else {
                ip.to_string()
            };
            (host, l.addr.port())
        }
    };
    Some(BrokerEndpoint {
        name: l.config.name.to_string(),
        host,
        port,
        security_protocol: l.config.security_protocol.name().to_string(),
    })
}

/// Binds every listener not bound yet.
async fn bind_all(
    listeners: Vec<BrokerListener>,
) -> Result<Vec<(Arc<Listener>, TcpListener)>, ServerError> {
    let mut out = Vec::with_capacity(listeners.len());
    for l in listeners {
        let socket = match l.socket {
            Some(s) => s,
            None => bind(l.addr).await?,
        };
        out.push((l.config, socket));
    }
    Ok(out)
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

/// Waits until this node may serve clients. A single node may at once. A cluster node waits,
/// as Kafka's `BrokerServer.startup` does before it enables request processing, until the
/// metadata quorum has committed its registration and unfenced it and the image that says
/// so is applied: until then it does not know which partitions it leads, and an answer such
/// as UNKNOWN_TOPIC_OR_PARTITION would tell an idempotent producer that a batch it sent was
/// not written, which it then re-sequences under a new epoch. `Ok(false)`: shutdown came
/// first.
async fn await_serving(
    broker: &Broker,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<bool, ServerError> {
    if broker.replicas.ready_to_serve() {
        return Ok(true);
    }
    let timeout_ms = broker.config.initial_broker_registration_timeout_ms;
    tracing::info!(
        timeout_ms,
        "waiting to be registered and unfenced before serving clients"
    );
    let ready = broker
        .replicas
        .wait_for_metadata(Duration::from_millis(timeout_ms), |r| r.ready_to_serve());
    tokio::select! {
        ok = ready => match ok {
            true => Ok(true),
            false => Err(ServerError::NotRegistered { timeout_ms }),
        },
        _ = shutdown.changed() => Ok(false),
    }
}

/// The listener stores altered at run time (kept in the metadata log) replace the
/// `server.properties` ones before clients are served, as Kafka's `DynamicBrokerConfig`
/// applies a broker's dynamic configs at start-up ([`crate::security::ssl::reload`]).
fn apply_dynamic_stores(broker: &Broker) {
    let dynamic = broker.replicas.dynamic_broker_configs();
    let Some(mine) = dynamic.get(&broker.config.node_id.to_string()) else {
        return;
    };
    let keys = mine.keys().map(String::as_str);
    match broker.tls.prepare(&broker.config.values, mine, keys) {
        Ok(prepared) => broker.tls.install(prepared),
        Err(e) => tracing::warn!(
            error = %e,
            "the listener stores altered at run time are not usable; serving server.properties' stores"
        ),
    }
}

/// Records the SCRAM users this node was formatted with (`brook format --add-scram`), unless
/// the cluster has recorded its bootstrap users already, before clients are served.
async fn bootstrap_scram(broker: &Broker) -> Result<(), ServerError> {
    let credentials = crate::security::bootstrap::read(&broker.config.log_dir).map_err(|e| {
        ReplicaError::Io(std::io::Error::other(format!("bootstrap SCRAM users: {e}")))
    })?;
    if credentials.is_empty() {
        return Ok(());
    }
    broker
        .replicas
        .controller()
        .bootstrap_scram_credentials(credentials)
        .await?;
    broker.replicas.wait_caught_up().await;
    Ok(())
}

/// Records the voter set this node was formatted with (`brook format --standalone` or
/// `--initial-controllers`: its directory ids and `kraft.version` 1), unless the cluster has
/// recorded its `kraft.version` already, before clients are served.
async fn bootstrap_voters(broker: &Broker) -> Result<(), ServerError> {
    let metadata_dir = broker.config.log_dir.join(crate::controller::METADATA_DIR);
    let formatted = crate::controller::dynamic_voters::read(&metadata_dir)
        .map_err(|e| ReplicaError::Io(std::io::Error::other(format!("bootstrap voters: {e}"))))?;
    let Some(bootstrap) = formatted else {
        return Ok(());
    };
    broker
        .replicas
        .controller()
        .bootstrap_voters(bootstrap)
        .await?;
    broker.replicas.wait_caught_up().await;
    Ok(())
}

/// The connection creation rates: the broker's and each listener's from its config, each
/// address's from the client quotas of the image this node has applied.
fn connection_rate_limits(broker: &Arc<Broker>) -> ConnectionRateLimits {
    let image_of = Arc::downgrade(broker);
    ConnectionRateLimits {
        max_connection_creation_rate: broker.config.max_connection_creation_rate,
        listener_rates: broker
            .config
            .listener_max_connection_creation_rate
            .iter()
            .map(|(name, rate)| (name.clone(), *rate))
            .collect(),
        window: broker.config.quota_window,
        ip_rate: Box::new(move |ip| {
            let broker = image_of.upgrade()?;
            crate::quota::ip_connection_creation_rate(&broker.replicas.image().client_quotas, ip)
        }),
    }
}

/// Lines about refused connections, per client address.
static REFUSED: RepeatLimiter = RepeatLimiter::new();
/// Lines about throttled connections, per client address.
static THROTTLED: RepeatLimiter = RepeatLimiter::new();
/// Throttled connections held open at once; beyond it one closes at once. Each holds a
/// descriptor for at most one quota window.
const THROTTLED_CONNECTIONS_MAX: usize = 1024;
/// Lines about failed accepts.
static ACCEPT_ERRORS: RepeatLimiter = RepeatLimiter::new();

/// The accept loop of one listener: one task per connection, within the connection quotas
/// (shared by every listener), until shutdown.
async fn accept_until_shutdown(
    broker: &Arc<Broker>,
    listener: TcpListener,
    config: Arc<Listener>,
    quotas: &Arc<ConnectionQuotas>,
    connections: &mut JoinSet<()>,
    shutdown: &mut watch::Receiver<bool>,
) {
    // Kafka's `protectedListener`: the inter-broker listener is exempt from the broker's
    // creation rate when clients have a listener of their own (not from its own rate).
    let listeners = &broker.config.listeners;
    let protected = listeners.broker.len() > 1 && config.name == listeners.inter_broker;
    let mut throttled = JoinSet::new();
    loop {
        tokio::select! {
            // Waits while max.connections are open; refuses an address at its limit.
            accepted = quotas.accept(&listener, &config.name, protected) => match accepted {
                Ok(Accepted::Connection(stream, slot)) => {
                    let serve = crate::connection::serve(
                        broker.clone(),
                        stream,
                        config.clone(),
                        shutdown.clone(),
                    );
                    // The slot lives as long as the connection's task, however it ends.
                    connections.spawn(async move {
                        serve.await;
                        drop(slot);
                    });
                }
                // Left unread, then closed: the client sees its connection end after the
                // throttle time (Kafka's `closeThrottledConnections`).
                Ok(Accepted::Throttled { stream, ip, throttle_ms }) => {
                    if throttled.len() < THROTTLED_CONNECTIONS_MAX {
                        throttled.spawn(async move {
                            tokio::time::sleep(Duration::from_millis(throttle_ms as u64)).await;
                            drop(stream);
                        });
                    }
                    if let Some(note) = THROTTLED.admit(key_of(ip)) {
                        tracing::debug!(%ip, throttle_ms, "delaying the close of a connection over its address's connection_creation_rate{note}");
                    }
                }
                // A client reconnecting in a loop is refused on every attempt.
                Ok(Accepted::Refused { ip, max_connections_per_ip }) => {
                    if let Some(note) = REFUSED.admit(key_of(ip)) {
                        tracing::info!(
                            %ip, max_connections_per_ip,
                            "rejected connection: the address already has the configured maximum of connections{note}"
                        );
                    }
                }
                Err(e) => {
                    // EMFILE and the like stay until a descriptor frees: pause instead of
                    // spinning on the same error.
                    if let Some(note) = ACCEPT_ERRORS.admit(0) {
                        tracing::warn!(error = %e, "accept failed{note}");
                    }
                    tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_BACKOFF_MS)).await;
                }
            },
            // Reap finished connection tasks so the set stays bounded by live connections.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            Some(_) = throttled.join_next(), if !throttled.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
}

/// Runs the blocking `job` every `period` until shutdown.
async fn every<F>(period: Duration, mut stop: watch::Receiver<bool>, job: F)
where
    F: Fn() + Clone + Send + 'static,
{
    let mut tick = tokio::time::interval(period);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let _ = tokio::task::spawn_blocking(job.clone()).await;
            }
            _ = stop.changed() => break,
        }
    }
}

/// Returns on SIGTERM or Ctrl-C: what stops `brook serve` and `brook cluster` gracefully.
pub async fn wait_for_shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
