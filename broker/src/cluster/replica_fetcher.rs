//! ReplicaFetcher: a follower copies its partition from the leader with ordinary Fetch
//! requests carrying its replica id, exactly as a Kafka follower does, so a packet capture of
//! replication decodes with any Kafka tool.
//!
//! One task per followed partition. Each round: send Fetch(fetch offset = log end offset,
//! last fetched epoch = the log's latest leader epoch); the leader answers records, its high
//! watermark and log start offset, or a diverging epoch, in which case the follower truncates
//! to the leader's end offset for that epoch before fetching again (KIP-320/KIP-595 style
//! truncation, no separate OffsetForLeaderEpoch round trip).

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::partition::{Partition, Role};
use crate::controller::ClusterImage;
use crate::fault::{CrashPoint, Direction, FaultEngine, LinkAction, Traffic};

/// The Fetch version followers send: the last one with the replica id in the body and
/// topic names (v13+ name topics by id).
pub const REPLICA_FETCH_VERSION: i16 = 12;
/// How long the leader may hold a follower's fetch (replica.fetch.wait.max.ms).
pub const REPLICA_FETCH_WAIT_MAX_MS: i32 = 500;
/// Bytes per follower fetch (replica.fetch.max.bytes).
pub const REPLICA_FETCH_MAX_BYTES: i32 = 1024 * 1024;
/// Largest response a follower accepts before dropping the connection.
pub const REPLICA_FETCH_RESPONSE_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Pause after a failed round (connection refused, leader not ready), so a dead leader is
/// not hammered; the task also wakes at once when the partition's role changes.
pub const REPLICA_FETCH_BACKOFF: Duration = Duration::from_millis(200);
/// Bound on one request/response exchange.
pub const REPLICA_FETCH_IO_TIMEOUT: Duration = Duration::from_secs(10);

const OFFSET_OUT_OF_RANGE: i16 = 1;

/// Starts the fetcher for `partition`, following `leader` until the role changes.
pub fn spawn(
    partition: Arc<Partition>,
    leader: i32,
    node_id: i32,
    image: watch::Receiver<Arc<ClusterImage>>,
    faults: Arc<FaultEngine>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut fetcher = Fetcher {
            partition,
            leader,
            node_id,
            image,
            faults,
            conn: None,
            correlation_id: 0,
        };
        fetcher.run().await;
    })
}

struct Fetcher {
    partition: Arc<Partition>,
    leader: i32,
    node_id: i32,
    image: watch::Receiver<Arc<ClusterImage>>,
    faults: Arc<FaultEngine>,
    conn: Option<TcpStream>,
    correlation_id: i32,
}

/// Why a round ended without progress.
#[derive(Debug, thiserror::Error)]
enum FetchRoundError {
    #[error("leader {0} has no known address")]
    NoAddress(i32),
    #[error("i/o with the leader: {0}")]
    Io(#[from] std::io::Error),
    #[error("bad response: {0}")]
    Protocol(String),
    #[error("leader answered error {0}")]
    Leader(i16),
    #[error("local log: {0}")]
    Local(String),
}

impl Fetcher {
    async fn run(&mut self) {
        let mut role_rx = self.partition.role_changes();
        loop {
            if self.partition.role()
                != (Role::Follower {
                    leader: self.leader,
                })
            {
                return;
            }
            match self.round().await {
                Ok(()) => {}
                Err(e) => {
                    tracing::debug!(topic = %self.partition.topic, partition = self.partition.index, leader = self.leader, error = %e, "replica fetch failed");
                    self.conn = None;
                    tokio::select! {
                        _ = tokio::time::sleep(REPLICA_FETCH_BACKOFF) => {}
                        _ = role_rx.changed() => {}
                    }
                }
            }
        }
    }

    fn leader_addr(&self) -> Option<String> {
        let image = self.image.borrow();
        image
            .brokers
            .get(&self.leader)
            .map(|b| format!("{}:{}", b.host, b.port))
    }

    async fn round(&mut self) -> Result<(), FetchRoundError> {
        let (leo, last_epoch, log_start) = self.partition.fetch_position();
        let req = FetchRequest::default()
            .with_replica_id(self.node_id.into())
            .with_max_wait_ms(REPLICA_FETCH_WAIT_MAX_MS)
            .with_min_bytes(1)
            .with_max_bytes(REPLICA_FETCH_MAX_BYTES)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(
                    self.partition.topic.clone(),
                )))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(self.partition.index)
                    .with_current_leader_epoch(self.partition.leader_epoch())
                    .with_fetch_offset(leo)
                    .with_last_fetched_epoch(last_epoch)
                    .with_log_start_offset(log_start)
                    .with_partition_max_bytes(REPLICA_FETCH_MAX_BYTES)])]);
        let resp = self.exchange(&req).await?;
        let Some(data) = resp
            .responses
            .into_iter()
            .next()
            .and_then(|t| t.partitions.into_iter().next())
        else {
            return Err(FetchRoundError::Protocol(
                "no partition in the answer".into(),
            ));
        };
        if data.error_code == OFFSET_OUT_OF_RANGE && data.log_start_offset > leo {
            // This follower fell below the leader's log start: start over from there.
            self.partition
                .truncate_fully_and_start_at(data.log_start_offset)
                .map_err(|e| FetchRoundError::Local(e.to_string()))?;
            return Ok(());
        }
        if data.error_code != 0 {
            return Err(FetchRoundError::Leader(data.error_code));
        }
        if data.diverging_epoch.epoch >= 0 || data.diverging_epoch.end_offset >= 0 {
            let target = data.diverging_epoch.end_offset.min(leo);
            tracing::info!(topic = %self.partition.topic, partition = self.partition.index, from = leo, to = target, epoch = data.diverging_epoch.epoch, "truncating to the leader's log");
            self.partition
                .truncate_to(target.max(0))
                .map_err(|e| FetchRoundError::Local(e.to_string()))?;
            return Ok(());
        }
        let records = data.records.unwrap_or_default();
        if !records.is_empty() {
            self.faults.crash_point(
                CrashPoint::FollowerAfterFetchBeforeAppend,
                &self.partition.topic,
                self.partition.index,
            );
        }
        self.partition
            .append_as_follower(records, data.high_watermark)
            .map_err(|e| FetchRoundError::Local(e.to_string()))?;
        Ok(())
    }

    async fn exchange(&mut self, req: &FetchRequest) -> Result<FetchResponse, FetchRoundError> {
        // A link rule cuts or slows this node's replication traffic to the leader.
        match self
            .faults
            .link_fault(self.leader, Traffic::Replication, Direction::Out)
        {
            Some(LinkAction::Partition) => {
                self.conn = None;
                return Err(FetchRoundError::Io(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "link partitioned by a fault rule",
                )));
            }
            Some(LinkAction::Delay(d)) => tokio::time::sleep(d).await,
            None => {}
        }
        if self.conn.is_none() {
            let addr = self
                .leader_addr()
                .ok_or(FetchRoundError::NoAddress(self.leader))?;
            let stream = tokio::time::timeout(REPLICA_FETCH_IO_TIMEOUT, TcpStream::connect(&addr))
                .await
                .map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
                })??;
            let _ = stream.set_nodelay(true);
            self.conn = Some(stream);
        }
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let version = REPLICA_FETCH_VERSION;
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Fetch as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_string(format!(
                "brook-replica-fetcher-{}",
                self.node_id
            ))));
        let mut body = BytesMut::new();
        let enc = |e: anyhow::Error| FetchRoundError::Protocol(e.to_string());
        header
            .encode(&mut body, ApiKey::Fetch.request_header_version(version))
            .map_err(enc)?;
        req.encode(&mut body, version).map_err(enc)?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        let Some(conn) = self.conn.as_mut() else {
            return Err(FetchRoundError::Protocol("no connection".into()));
        };
        let io = async {
            conn.write_all(&frame).await?;
            let size = conn.read_i32().await?;
            if size < 0 || size as usize > REPLICA_FETCH_RESPONSE_MAX_BYTES {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("response of {size} bytes"),
                ));
            }
            let mut buf = vec![0u8; size as usize];
            conn.read_exact(&mut buf).await?;
            Ok(Bytes::from(buf))
        };
        // The leader may hold the fetch for REPLICA_FETCH_WAIT_MAX_MS; anything much longer
        // means the leader or the link is gone.
        let mut buf = tokio::time::timeout(REPLICA_FETCH_IO_TIMEOUT, io)
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "fetch timed out"))??;
        let rh = ResponseHeader::decode(&mut buf, ApiKey::Fetch.response_header_version(version))
            .map_err(enc)?;
        if rh.correlation_id != self.correlation_id {
            return Err(FetchRoundError::Protocol("correlation id mismatch".into()));
        }
        let resp = FetchResponse::decode(&mut buf, version).map_err(enc)?;
        if buf.has_remaining() {
            return Err(FetchRoundError::Protocol("trailing bytes".into()));
        }
        Ok(resp)
    }
}
