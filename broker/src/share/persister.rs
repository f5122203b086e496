//! The partition leader's side of durable share state (Kafka's `DefaultStatePersister` and
//! `PersisterStateManager`): the share-partition's state is read from, initialized at, and
//! written to its share coordinator with the state APIs (83-87), over the coordinator node's
//! inter-broker listener (this node's own one included, as the transaction markers go).
//!
//! The coordinator is the leader of the key's `__share_group_state` partition
//! ([`super::coordinator`]), found in this node's metadata image; the topic is created on
//! first use. A request answered NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or
//! COORDINATOR_LOAD_IN_PROGRESS, or lost with its connection, is sent again after
//! [`PERSISTER_RETRY_BACKOFF`], at most [`PERSISTER_ATTEMPTS_MAX`] times (Kafka's
//! `PersisterStateManager` backs off and looks the coordinator up again).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{
    delete_share_group_state_request as delete_req,
    initialize_share_group_state_request as init_req, read_share_group_state_request as read_req,
    read_share_group_state_summary_request as summary_req,
    write_share_group_state_request as write_req, DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest, ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest, WriteShareGroupStateRequest,
};
use kafka_protocol::protocol::Request;
use kafka_protocol::ResponseError;

use super::coordinator::{coordinator_key, WriteState, SHARE_GROUP_STATE_TOPIC};
use super::records::StateBatch;
use super::SharePartitionKey;
use crate::broker::Broker;
use crate::net::client::{BrokerConnection, ClientError};
use crate::net::codec::sb;

/// The one partition of a persister answer (each call names one share-partition): every
/// share-group-state response nests it as `results[0].partitions[0]`.
macro_rules! only_partition {
    ($resp:expr) => {
        $resp.results.first().and_then(|t| t.partitions.first())
    };
}

/// The error code of a persister answer's one partition; a malformed answer is an
/// UNKNOWN_SERVER_ERROR.
macro_rules! only_partition_code {
    ($resp:expr) => {
        only_partition!($resp).map_or(ResponseError::UnknownServerError.code(), |p| p.error_code)
    };
}

/// Sends of one request before its error is the answer.
pub const PERSISTER_ATTEMPTS_MAX: u32 = 40;
/// Wait before a request is sent again.
pub const PERSISTER_RETRY_BACKOFF: Duration = Duration::from_millis(250);
/// Bound on one round trip, connecting included.
pub const PERSISTER_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A share-partition's state as read (Kafka's `PartitionAllData`).
#[derive(Debug, Clone)]
pub struct ReadState {
    pub state_epoch: i32,
    /// -1 when the share-partition has no state yet.
    pub start_offset: i64,
    pub batches: Vec<StateBatch>,
}

/// A share-partition's state summary (Kafka's `PartitionStateSummaryData`).
#[derive(Debug, Clone, Copy)]
pub struct StateSummary {
    /// -1 when the share-partition has no state.
    pub start_offset: i64,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    /// -1 when unknown (state written without it).
    pub delivery_complete_count: i32,
}

/// One connection per coordinator node.
#[derive(Default)]
pub struct Persister {
    conns: parking_lot::Mutex<HashMap<i32, (String, Conn)>>,
}

type Conn = Arc<tokio::sync::Mutex<BrokerConnection>>;

/// The leader of `topic`'s partition `index` and its inter-broker address, from this
/// node's metadata image.
pub fn leader_address(broker: &Broker, topic: &str, index: i32) -> Option<(i32, String)> {
    let image = broker.replicas.controller().image().borrow().clone();
    let leader = image
        .topic_by_name(topic)
        .and_then(|t| t.partitions.iter().find(|p| p.index == index))
        .map(|p| p.leader)?;
    let b = image.brokers.get(&leader).filter(|b| !b.fenced)?;
    Some((b.node_id, format!("{}:{}", b.host, b.port)))
}

fn retriable(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::NotCoordinator
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::NetworkException
    )
}

impl Persister {
    /// Sends `req` to `key`'s coordinator until it answers other than a retriable error;
    /// `code` picks the share-partition's error code out of the answer.
    async fn call<R: Request>(
        &self,
        broker: &Broker,
        key: &SharePartitionKey,
        req: &R,
        code: impl Fn(&R::Response) -> i16,
    ) -> Result<R::Response, ResponseError> {
        let mut last = ResponseError::CoordinatorNotAvailable;
        for attempt in 0..PERSISTER_ATTEMPTS_MAX {
            if attempt > 0 {
                tokio::time::sleep(PERSISTER_RETRY_BACKOFF).await;
            }
            match self.send_once(broker, key, req).await {
                Ok(resp) => match ResponseError::try_from_code(code(&resp)) {
                    None => return Ok(resp),
                    Some(e) if retriable(e) => last = e,
                    Some(e) => return Err(e),
                },
                Err(e) if retriable(e) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    async fn send_once<R: Request>(
        &self,
        broker: &Broker,
        key: &SharePartitionKey,
        req: &R,
    ) -> Result<R::Response, ResponseError> {
        broker.share_coordinator.ensure_topic().await?;
        let index = broker
            .share_coordinator
            .partition_for(&coordinator_key(key));
        let (node, addr) = leader_address(broker, SHARE_GROUP_STATE_TOPIC, index)
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let conn = {
            let mut conns = self.conns.lock();
            match conns.get(&node) {
                Some((a, c)) if *a == addr => c.clone(),
                // A new node, or one that re-registered at another address.
                _ => {
                    let c = new_conn(broker, &addr);
                    conns.insert(node, (addr, c.clone()));
                    c
                }
            }
        };
        // The newest version the coordinator's node advertises (Kafka's `NetworkClient`
        // under `PersisterStateManager`): WriteShareGroupState and ReadShareGroupStateSummary
        // v1 carry the delivery complete count (KIP-1226), a node serving v0 gets the rest.
        let resp = conn.lock().await.send_negotiated(req).await;
        match resp {
            Ok((_, resp)) => Ok(resp),
            Err(e @ ClientError::UnsupportedVersion { .. }) => {
                tracing::warn!(error = %e, node, "share state request not sent");
                Err(ResponseError::UnsupportedVersion)
            }
            Err(e) => {
                tracing::debug!(error = %e, node, "share state request lost");
                self.conns.lock().remove(&node);
                Err(ResponseError::NetworkException)
            }
        }
    }

    /// ReadShareGroupState for one share-partition, at the partition's leader epoch.
    pub async fn read(
        &self,
        broker: &Broker,
        key: &SharePartitionKey,
        leader_epoch: i32,
    ) -> Result<ReadState, ResponseError> {
        let req = ReadShareGroupStateRequest::default()
            .with_group_id(sb(key.0.clone()))
            .with_topics(vec![read_req::ReadStateData::default()
                .with_topic_id(key.1)
                .with_partitions(vec![read_req::PartitionData::default()
                    .with_partition(key.2)
                    .with_leader_epoch(leader_epoch)])]);
        let resp = self
            .call(broker, key, &req, |r| only_partition_code!(r))
            .await?;
        let p = only_partition!(resp).ok_or(ResponseError::UnknownServerError)?;
        Ok(ReadState {
            state_epoch: p.state_epoch,
            start_offset: p.start_offset,
            batches: p
                .state_batches
                .iter()
                .map(|b| StateBatch {
                    first_offset: b.first_offset,
                    last_offset: b.last_offset,
                    delivery_state: b.delivery_state,
                    delivery_count: b.delivery_count,
                })
                .collect(),
        })
    }

    /// InitializeShareGroupState: the share-partition's first start offset.
    pub async fn initialize(
        &self,
        broker: &Broker,
        key: &SharePartitionKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ResponseError> {
        let req = InitializeShareGroupStateRequest::default()
            .with_group_id(sb(key.0.clone()))
            .with_topics(vec![init_req::InitializeStateData::default()
                .with_topic_id(key.1)
                .with_partitions(vec![init_req::PartitionData::default()
                    .with_partition(key.2)
                    .with_state_epoch(state_epoch)
                    .with_start_offset(start_offset)])]);
        self.call(broker, key, &req, |r| only_partition_code!(r))
            .await
            .map(|_| ())
    }

    /// ReadShareGroupStateSummary (DescribeShareGroupOffsets reads it, as Kafka's
    /// `GroupCoordinatorService.describeShareGroupOffsets` does).
    pub async fn read_summary(
        &self,
        broker: &Broker,
        key: &SharePartitionKey,
    ) -> Result<StateSummary, ResponseError> {
        let req = ReadShareGroupStateSummaryRequest::default()
            .with_group_id(sb(key.0.clone()))
            .with_topics(vec![summary_req::ReadStateSummaryData::default()
                .with_topic_id(key.1)
                .with_partitions(vec![
                    summary_req::PartitionData::default().with_partition(key.2)
                ])]);
        let resp = self
            .call(broker, key, &req, |r| only_partition_code!(r))
            .await?;
        let p = only_partition!(resp).ok_or(ResponseError::UnknownServerError)?;
        Ok(StateSummary {
            start_offset: p.start_offset,
            state_epoch: p.state_epoch,
            leader_epoch: p.leader_epoch,
            delivery_complete_count: p.delivery_complete_count,
        })
    }

    /// DeleteShareGroupState: the share-partition's state is removed (DeleteGroups and
    /// DeleteShareGroupOffsets, as Kafka's `persister.deleteState`).
    pub async fn delete(
        &self,
        broker: &Broker,
        key: &SharePartitionKey,
    ) -> Result<(), ResponseError> {
        let req = DeleteShareGroupStateRequest::default()
            .with_group_id(sb(key.0.clone()))
            .with_topics(vec![delete_req::DeleteStateData::default()
                .with_topic_id(key.1)
                .with_partitions(vec![
                    delete_req::PartitionData::default().with_partition(key.2)
                ])]);
        self.call(broker, key, &req, |r| only_partition_code!(r))
            .await
            .map(|_| ())
    }

    /// WriteShareGroupState: the share-partition's start offset and state batches.
    pub async fn write(
        &self,
        broker: &Broker,
        key: &SharePartitionKey,
        w: &WriteState,
    ) -> Result<(), ResponseError> {
        let batches = w
            .batches
            .iter()
            .map(|b| {
                write_req::StateBatch::default()
                    .with_first_offset(b.first_offset)
                    .with_last_offset(b.last_offset)
                    .with_delivery_state(b.delivery_state)
                    .with_delivery_count(b.delivery_count)
            })
            .collect();
        let req = WriteShareGroupStateRequest::default()
            .with_group_id(sb(key.0.clone()))
            .with_topics(vec![write_req::WriteStateData::default()
                .with_topic_id(key.1)
                .with_partitions(vec![write_req::PartitionData::default()
                    .with_partition(key.2)
                    .with_state_epoch(w.state_epoch)
                    .with_leader_epoch(w.leader_epoch)
                    .with_start_offset(w.start_offset)
                    .with_delivery_complete_count(w.delivery_complete_count)
                    .with_state_batches(batches)])]);
        self.call(broker, key, &req, |r| only_partition_code!(r))
            .await
            .map(|_| ())
    }
}

fn new_conn(broker: &Broker, addr: &str) -> Conn {
    Arc::new(tokio::sync::Mutex::new(
        BrokerConnection::new(
            addr.to_string(),
            format!("brook-share-persister-{}", broker.node_id()),
            PERSISTER_REQUEST_TIMEOUT,
        )
        .with_tls(broker.config.tls.inter_broker.clone())
        .with_sasl(broker.config.inter_broker_sasl.clone()),
    ))
}
