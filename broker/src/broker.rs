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
}
