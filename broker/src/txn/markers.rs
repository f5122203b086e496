//! Sending transaction markers to partition leaders (Kafka's
//! `TransactionMarkerChannelManager` and `TransactionMarkerRequestCompletionHandler`).
//!
//! A marker is a WriteTxnMarkers request to the leader of each partition of the
//! transaction, over TCP to the leader's advertised listener (this node's own listener
//! when it leads the partition too). There is one connection per destination node; the
//! requests waiting for it form that destination's queue, bounded by
//! [`MARKER_QUEUE_PER_DESTINATION_MAX`] (a sender waits for room, so the bound pushes back
//! on EndTxn instead of growing memory).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use crate::log_limit::{key_of, RepeatLimiter};
use crate::net::client::{BrokerConnection, ClientError};

/// The WriteTxnMarkers version the coordinator sends: v2, which names each marker's
/// transaction version (Kafka's `TransactionMarkerChannelManager` sends the newest the
/// destination serves; Kafka 4.4 and Brook serve 1-2).
pub const WRITE_TXN_MARKERS_VERSION: i16 = 2;
/// Requests queued or in flight per destination node.
pub const MARKER_QUEUE_PER_DESTINATION_MAX: usize = 64;
/// Bound on one WriteTxnMarkers round trip, connecting included.
pub const MARKER_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Wait before a partition whose marker failed is tried again.
pub const MARKER_RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// What to do with one partition after a WriteTxnMarkers answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerOutcome {
    /// The marker is in the partition's log.
    Written,
    /// Try again later (leader moving, too few replicas, unreachable...).
    Retry,
    /// The partition's producer state has a newer epoch or coordinator: a newer coordinator
    /// owns this transaction; stop sending for it (Kafka's "abort sending").
    Fenced,
}

/// Kafka's `TransactionMarkerRequestCompletionHandler` classification of a partition's
/// error code.
pub fn classify(code: i16) -> MarkerOutcome {
    if code == 0 {
        return MarkerOutcome::Written;
    }
    match ResponseError::try_from_code(code) {
        Some(ResponseError::InvalidProducerEpoch)
        | Some(ResponseError::TransactionCoordinatorFenced) => MarkerOutcome::Fenced,
        _ => MarkerOutcome::Retry,
    }
}

/// One destination: its queue bound and its connection.
struct Destination {
    addr: String,
    room: Semaphore,
    conn: tokio::sync::Mutex<BrokerConnection>,
}

/// The marker senders of this coordinator, one per destination node.
pub struct TransactionMarkerChannelManager {
    node_id: i32,
    /// The inter-broker listener's TLS client context, when it uses TLS.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The inter-broker listener's SASL credentials, if it speaks SASL.
    sasl: Option<Arc<crate::security::sasl::InterBrokerSasl>>,
    destinations: Mutex<HashMap<i32, Arc<Destination>>>,
}

/// The marker of one transaction for some partitions of one destination.
pub struct MarkerRequest {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    /// The transaction's client transaction version (Kafka's `TxnMarkerEntry.transactionVersion`).
    pub transaction_version: i8,
    pub partitions: Vec<(String, i32)>,
}

impl TransactionMarkerChannelManager {
    pub fn new(node_id: i32, tls: Option<Arc<rustls::ClientConfig>>) -> Self {
        TransactionMarkerChannelManager {
            node_id,
            tls,
            sasl: None,
            destinations: Mutex::new(HashMap::new()),
        }
    }

    /// Authenticates marker connections with `sasl`.
    pub fn with_sasl(mut self, sasl: Option<Arc<crate::security::sasl::InterBrokerSasl>>) -> Self {
        self.sasl = sasl;
        self
    }

    fn destination(&self, node: i32, addr: &str) -> Arc<Destination> {
        let mut d = self.destinations.lock();
        match d.get(&node) {
            Some(dest) if dest.addr == addr => dest.clone(),
            _ => {
                // New node, or it re-registered at another address.
                let dest = Arc::new(Destination {
                    addr: addr.to_string(),
                    room: Semaphore::new(MARKER_QUEUE_PER_DESTINATION_MAX),
                    conn: tokio::sync::Mutex::new(
                        BrokerConnection::new(
                            addr.to_string(),
                            format!("brook-txn-coordinator-{}", self.node_id),
                            MARKER_REQUEST_TIMEOUT,
                        )
                        .with_tls(self.tls.clone())
                        .with_sasl(self.sasl.clone()),
                    ),
                });
                d.insert(node, dest.clone());
                dest
            }
        }
    }

    /// Sends one WriteTxnMarkers to `node` at `addr`; returns each partition's outcome.
    /// A failed round trip retries every partition.
    pub async fn send(
        &self,
        node: i32,
        addr: &str,
        m: &MarkerRequest,
    ) -> Vec<((String, i32), MarkerOutcome)> {
        let dest = self.destination(node, addr);
        let Ok(_permit) = dest.room.acquire().await else {
            return retry_all(m);
        };
        let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
        for (t, p) in &m.partitions {
            match topics.last_mut() {
                Some(last) if last.name.as_str() == t => last.partition_indexes.push(*p),
                _ => topics.push(
                    WritableTxnMarkerTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.clone())))
                        .with_partition_indexes(vec![*p]),
                ),
            }
        }
        let req =
            WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
                .with_producer_id(m.producer_id.into())
                .with_producer_epoch(m.producer_epoch)
                .with_transaction_result(m.commit)
                .with_topics(topics)
                .with_coordinator_epoch(m.coordinator_epoch)
                .with_transaction_version(m.transaction_version)]);
        let resp = {
            let mut conn = dest.conn.lock().await;
            conn.send(WRITE_TXN_MARKERS_VERSION, &req).await
        };
        match resp {
            Ok(resp) => {
                let mut out = Vec::new();
                for marker in resp
                    .markers
                    .iter()
                    .filter(|r| r.producer_id.0 == m.producer_id)
                {
                    for t in &marker.topics {
                        for p in &t.partitions {
                            out.push((
                                (t.name.to_string(), p.partition_index),
                                classify(p.error_code),
                            ));
                        }
                    }
                }
                // A partition the answer left out is tried again.
                for tp in &m.partitions {
                    if !out.iter().any(|(k, _)| k == tp) {
                        out.push((tp.clone(), MarkerOutcome::Retry));
                    }
                }
                out
            }
            Err(e) => {
                log_send_error(node, &e);
                retry_all(m)
            }
        }
    }
}

fn retry_all(m: &MarkerRequest) -> Vec<((String, i32), MarkerOutcome)> {
    m.partitions
        .iter()
        .map(|tp| (tp.clone(), MarkerOutcome::Retry))
        .collect()
}

/// Every retry of a marker to a node that is cut off fails the same way: one line per node
/// per window, with the count of the others.
fn log_send_error(node: i32, e: &ClientError) {
    static SEND_ERRORS: RepeatLimiter = RepeatLimiter::new();
    if let Some(note) = SEND_ERRORS.admit(key_of(node)) {
        tracing::info!(node, error = %e, "WriteTxnMarkers failed; will retry{note}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fencing_errors_stop_others_retry() {
        assert_eq!(classify(0), MarkerOutcome::Written);
        assert_eq!(
            classify(ResponseError::InvalidProducerEpoch.code()),
            MarkerOutcome::Fenced
        );
        assert_eq!(
            classify(ResponseError::TransactionCoordinatorFenced.code()),
            MarkerOutcome::Fenced
        );
        for e in [
            ResponseError::NotLeaderOrFollower,
            ResponseError::NotEnoughReplicas,
            ResponseError::UnknownTopicOrPartition,
            ResponseError::RequestTimedOut,
        ] {
            assert_eq!(classify(e.code()), MarkerOutcome::Retry, "{e:?}");
        }
    }
}
