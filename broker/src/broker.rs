//! The state every request handler reaches: the node's config, its replicas, coordinators,
//! fault rules, metrics and events. `server.rs` builds it and runs the listener; the API
//! handlers (`api/*`) take it and never the server.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::cluster::replica_manager::ReplicaManager;
use crate::config::BrokerConfig;
use crate::fault::FaultEngine;
use crate::group::GroupCoordinator;
use crate::metrics::BrokerMetrics;
use crate::net::memory_pool::RequestMemoryPool;
use crate::txn::TransactionCoordinator;

/// Everything a request handler can reach.
pub struct Broker {
    pub config: Arc<BrokerConfig>,
    /// The TLS listeners' contexts as new connections get them: `config.tls.servers`, with
    /// key stores reloaded at run time ([`crate::security::ssl::reload`]).
    pub tls: crate::security::ssl::reload::LiveTls,
    pub replicas: Arc<ReplicaManager>,
    /// Host and port published in Metadata (the advertised listener).
    pub advertised_host: String,
    pub advertised_port: i32,
    /// Protocol-level fault rules for this node.
    pub faults: Arc<FaultEngine>,
    /// Turns true when shutdown starts, so that long waits (fault delays) end early.
    pub(crate) shutting_down: watch::Sender<bool>,
    /// The group coordinator (consumer groups and committed offsets).
    pub groups: Arc<GroupCoordinator>,
    /// The transaction coordinator (transactional ids, `__transaction_state`, markers).
    pub txn: Arc<TransactionCoordinator>,
    /// Bytes of requests being read and in flight, across connections
    /// (`queued.max.request.bytes`).
    pub request_memory: RequestMemoryPool,
    /// Request, connection and purgatory metrics (`GET /metrics` on the admin listener).
    pub metrics: BrokerMetrics,
    /// The process's event log (`GET /v1/events`, [`crate::events`]).
    pub events: Arc<crate::events::EventLog>,
    /// Incremental fetch sessions (KIP-227) of consumers and followers fetching here.
    pub fetch_sessions: crate::cluster::fetch_session::FetchSessionCache,
    /// KIP-932 share-partitions and share sessions of the partitions this node leads.
    pub share: crate::share::SharePartitionManager,
    /// The share coordinator (`__share_group_state`, the state APIs' server side).
    pub share_coordinator: Arc<crate::share::coordinator::ShareCoordinator>,
    /// Metadata's topic auto-creations in flight.
    pub auto_topics: crate::auto_topic_creation::AutoTopicCreationManager,
    /// Client byte-rate quotas of produce and fetch (Kafka's `QuotaManagers`).
    pub quotas: crate::quota::QuotaManagers,
    /// KIP-714 client instances and their last pushed metrics.
    pub telemetry: crate::telemetry::ClientMetricsManager,
}

impl Broker {
    /// This node's id.
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// The authorizer, when `authorizer.class.name` is set (the replica manager owns it: it
    /// feeds it each applied image's ACLs).
    pub fn authorizer(&self) -> Option<&crate::security::authorizer::Authorizer> {
        self.replicas.authorizer.as_deref()
    }

    /// Sleeps for a fault rule's delay; returns false if shutdown cut it short.
    pub async fn fault_sleep(&self, delay: Duration) -> bool {
        let mut rx = self.shutting_down.subscribe();
        tokio::select! {
            _ = tokio::time::sleep(delay) => true,
            _ = rx.wait_for(|stopping| *stopping) => false,
        }
    }

    /// The broker side of a controlled shutdown, as Kafka's `BrokerServer.shutdown` runs it
    /// before `SocketServer.stopProcessingRequests`: heartbeats with `want_shut_down` until the
    /// active controller grants it (`BrokerLifecycleManager.controlledShutdownFuture`), then
    /// waits until this node has applied the hand-over; the node keeps serving meanwhile.
    /// Bounded by `broker.session.timeout.ms`, past which the controller would fence it
    /// anyway. Runs again at no cost once granted (SIGTERM after `POST
    /// /controlled-shutdown`). True once granted and applied; a single voter has no other
    /// member to hand its leaderships to and returns at once.
    pub async fn controlled_shutdown(&self) -> bool {
        let c = self.replicas.controller();
        if c.is_single_voter() {
            return true;
        }
        let timeout = Duration::from_millis(self.config.broker_session_timeout_ms);
        let deadline = tokio::time::Instant::now() + timeout;
        if !c.controlled_shutdown(timeout).await {
            tracing::warn!(
                ?timeout,
                "controlled shutdown not acknowledged; stopping anyway"
            );
            return false;
        }
        tracing::info!("controlled shutdown: the controller moved this node's leaderships");
        if tokio::time::timeout_at(deadline, hand_over_applied(self))
            .await
            .is_err()
        {
            tracing::warn!("the hand-over was not applied here in time; stopping anyway");
            return false;
        }
        true
    }
}

/// Returns once this node has applied an image marking it in controlled shutdown (the
/// controller commits the mark with the leadership moves, in one batch), or fenced, and
/// every local partition has taken that image's leadership: none still leads where the
/// image names another leader.
async fn hand_over_applied(broker: &Broker) {
    let me = broker.node_id();
    loop {
        let image = broker.replicas.image();
        // A fenced (or unregistered) broker was granted its shutdown without a hand-over.
        let marked = image
            .brokers
            .get(&me)
            .is_none_or(|b| b.in_controlled_shutdown || b.fenced);
        let applied = broker.replicas.all_partitions().iter().all(|p| {
            !p.is_leader()
                || image
                    .topic_by_name(&p.topic)
                    .and_then(|t| t.partitions.iter().find(|r| r.index == p.index))
                    .is_none_or(|r| r.leader == me)
        });
        if marked && applied {
            return;
        }
        // The image watch fires before the partitions apply it; a short poll covers both.
        tokio::time::sleep(Duration::from_millis(HAND_OVER_POLL_MS)).await;
    }
}

/// How often a stopping node looks whether its partitions have applied the hand-over.
const HAND_OVER_POLL_MS: u64 = 5;
