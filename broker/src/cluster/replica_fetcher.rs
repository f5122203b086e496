//! ReplicaFetcher: a follower copies its partitions from their leaders with ordinary Fetch
//! requests carrying its replica id, exactly as a Kafka follower does, so a packet capture of
//! replication decodes with any Kafka tool.
//!
//! One fetcher per source broker, as Kafka's `ReplicaFetcherThread` with
//! `num.replica.fetchers=1`: every partition this node follows from leader L is fetched in
//! the same request, over one connection to L. Each round: send Fetch with, per partition,
//! fetch offset = log end offset and last fetched epoch = the log's latest leader epoch; the
//! leader answers records, its high watermark and log start offset, or a diverging epoch, in
//! which case the follower truncates ([`offset_truncation`]) before fetching that partition
//! again (KIP-320/KIP-595 style truncation, no separate OffsetForLeaderEpoch round trip): to
//! the earlier end of the shared epoch, or, for an epoch it never had, to its own end of its
//! largest epoch below it, and asks again with that older epoch. A partition whose answer is an error sits out for
//! `REPLICA_FETCH_BACKOFF` (the leader answers errors at once, so it would otherwise spin);
//! the others go on. Fetches run in an incremental fetch session (KIP-227,
//! [`super::fetch_session_handler`]): after the first, a fetch names only the partitions
//! whose position changed, and the answer only those with news.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::net::stream::{connect, BrokerStream};
use crate::security::sasl::InterBrokerSasl;
use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::partition::{Partition, Role};
use crate::controller::MetadataImage;
use crate::fault::{CrashPoint, Direction, FaultEngine, LinkAction, Traffic};
use crate::log_limit::{key_of, RepeatLimiter};

/// The Fetch version followers send: the last one with the replica id in the body and
/// topic names (v13+ name topics by id).
pub const REPLICA_FETCH_VERSION: i16 = 12;
/// How long the leader may hold a follower's fetch (replica.fetch.wait.max.ms).
pub const REPLICA_FETCH_WAIT_MAX_MS: i32 = 500;
/// Bytes per partition in a follower fetch (replica.fetch.max.bytes).
pub const REPLICA_FETCH_MAX_BYTES: i32 = 1024 * 1024;
/// Bytes per follower fetch response, all partitions together
/// (replica.fetch.response.max.bytes).
pub const REPLICA_FETCH_RESPONSE_MAX_BYTES: i32 = 10 * 1024 * 1024;
/// Largest response frame a follower accepts before dropping the connection: the response
/// limit plus room for headers and the one oversized batch KIP-74 allows.
pub const REPLICA_FETCH_FRAME_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Pause after a failed round (connection refused, leader not ready), or for one partition
/// whose answer was an error, so a dead or lagging leader is not hammered. A change in the
/// set of followed partitions wakes the fetcher at once.
pub const REPLICA_FETCH_BACKOFF: Duration = Duration::from_millis(200);
/// Bound on one request/response exchange.
pub const REPLICA_FETCH_IO_TIMEOUT: Duration = Duration::from_secs(10);

use super::fetch_session_handler::{FetchBuild, FetchSessionHandler, PartitionKey};
use crate::cluster::fetch_session::{FetchParams, INITIAL_EPOCH};

/// A partition in a fetcher's set.
struct Followed {
    partition: Arc<Partition>,
    /// Set after an error answer for this partition: it is left out of requests until then.
    backoff_until: Option<Instant>,
}

/// What a fetcher task shares with the [`ReplicaFetchers`] that started it.
struct FetcherShared {
    partitions: Mutex<HashMap<PartitionKey, Followed>>,
    /// Signalled when the set changes, so a fetcher in backoff or idle looks again.
    changed: Notify,
}

struct SourceFetcher {
    shared: Arc<FetcherShared>,
    task: tokio::task::JoinHandle<()>,
}

/// This node's fetchers, one per leader it follows partitions from.
pub struct ReplicaFetchers {
    by_leader: HashMap<i32, SourceFetcher>,
    leader_of: HashMap<PartitionKey, i32>,
    /// Counts truncations to a diverging epoch (owned by `ReplicationStats`).
    truncations: Counter,
    /// The inter-broker listener's TLS client context, when it uses TLS.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The inter-broker listener's SASL credentials, if it speaks SASL.
    sasl: Option<Arc<InterBrokerSasl>>,
}

impl ReplicaFetchers {
    /// No fetchers yet; every one started will count its truncations in `truncations`.
    pub fn new(truncations: Counter) -> ReplicaFetchers {
        ReplicaFetchers {
            by_leader: HashMap::new(),
            leader_of: HashMap::new(),
            truncations,
            tls: None,
            sasl: None,
        }
    }

    /// Fetchers connect to leaders with TLS when given (the inter-broker listener's).
    pub fn with_tls(mut self, tls: Option<Arc<rustls::ClientConfig>>) -> Self {
        self.tls = tls;
        self
    }

    /// Fetchers authenticate their connections with `sasl`.
    pub fn with_sasl(mut self, sasl: Option<Arc<InterBrokerSasl>>) -> Self {
        self.sasl = sasl;
        self
    }

    /// Follows `partition` from `leader`, starting that leader's fetcher if needed. A
    /// partition followed from another leader before is moved; one followed from this
    /// leader already stays in its fetcher, which keeps its connection and fetch session.
    pub fn follow(
        &mut self,
        partition: Arc<Partition>,
        leader: i32,
        node_id: i32,
        image: watch::Receiver<Arc<MetadataImage>>,
        faults: Arc<FaultEngine>,
    ) {
        let key = (partition.topic.clone(), partition.index);
        if self.leader_of.get(&key) != Some(&leader) {
            self.unfollow(&key);
        }
        let truncations = self.truncations.clone();
        let tls = self.tls.clone();
        let sasl = self.sasl.clone();
        let fetcher = self.by_leader.entry(leader).or_insert_with(|| {
            let shared = Arc::new(FetcherShared {
                partitions: Mutex::new(HashMap::new()),
                changed: Notify::new(),
            });
            let task = tokio::spawn(
                Fetcher {
                    leader,
                    node_id,
                    image,
                    faults,
                    shared: shared.clone(),
                    truncations,
                    tls,
                    sasl,
                    conn: None,
                    correlation_id: 0,
                    session: FetchSessionHandler::default(),
                }
                .run(),
            );
            SourceFetcher { shared, task }
        });
        fetcher.shared.partitions.lock().insert(
            key.clone(),
            Followed {
                partition,
                backoff_until: None,
            },
        );
        fetcher.shared.changed.notify_one();
        self.leader_of.insert(key, leader);
    }

    /// Stops fetching `key`. A fetcher left with no partitions is stopped, closing its
    /// connection.
    pub fn unfollow(&mut self, key: &PartitionKey) {
        let Some(leader) = self.leader_of.remove(key) else {
            return;
        };
        let Some(fetcher) = self.by_leader.get(&leader) else {
            return;
        };
        let empty = {
            let mut parts = fetcher.shared.partitions.lock();
            parts.remove(key);
            parts.is_empty()
        };
        if empty {
            if let Some(f) = self.by_leader.remove(&leader) {
                f.task.abort();
            }
        } else {
            fetcher.shared.changed.notify_one();
        }
    }

    /// The number of fetcher tasks (one per source broker).
    pub fn fetcher_count(&self) -> usize {
        self.by_leader.len()
    }
}

impl Drop for ReplicaFetchers {
    fn drop(&mut self) {
        for f in self.by_leader.values() {
            f.task.abort();
        }
    }
}

struct Fetcher {
    leader: i32,
    node_id: i32,
    image: watch::Receiver<Arc<MetadataImage>>,
    faults: Arc<FaultEngine>,
    shared: Arc<FetcherShared>,
    truncations: Counter,
    tls: Option<Arc<rustls::ClientConfig>>,
    conn: Option<BrokerStream>,
    sasl: Option<Arc<InterBrokerSasl>>,
    correlation_id: i32,
    /// This fetcher's fetch session with the leader.
    session: FetchSessionHandler,
}

/// One partition in one request: what was asked, to check the answer against.
struct Asked {
    partition: Arc<Partition>,
    leader_epoch: i32,
    fetch_offset: i64,
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
    async fn run(mut self) {
        loop {
            let now = Instant::now();
            let (ready, next_retry) = self.ready_partitions(now);
            if ready.is_empty() {
                // Nothing to fetch now: wait for a backoff to end or the set to change.
                let until = next_retry.unwrap_or(now + Duration::from_secs(3600));
                tokio::select! {
                    _ = tokio::time::sleep_until(until) => {}
                    _ = self.shared.changed.notified() => {}
                }
                continue;
            }
            // A change in the set (a partition added, moved or dropped) cancels a fetch held
            // by the leader, so that a new partition does not wait out the long poll. The
            // cancel can only land while the exchange is in flight (answers are applied with
            // no await in between); the connection, mid-exchange, is dropped. A full fetch,
            // answered at once, is not cancelled: the session it may open on the leader
            // would be lost with its answer, and stay there unused.
            let shared = self.shared.clone();
            let result = if self.session.next_is_full() {
                self.round(ready).await
            } else {
                tokio::select! {
                    r = self.round(ready) => r,
                    _ = shared.changed.notified() => {
                        self.drop_connection();
                        continue;
                    }
                }
            };
            if let Err(e) = result {
                // Kafka's `AbstractFetcherThread.processFetchRequest` warns of a failed fetch
                // ("Error in response for fetch request") and backs off; a cut link fails
                // every round, so the warning is rate-limited per leader.
                static FETCH_FAILURES: RepeatLimiter = RepeatLimiter::new();
                if let Some(note) = FETCH_FAILURES.admit(key_of(self.leader)) {
                    tracing::warn!(leader = self.leader, error = %e, "replica fetch failed{note}");
                }
                self.drop_connection();
                tokio::select! {
                    _ = tokio::time::sleep(REPLICA_FETCH_BACKOFF) => {}
                    _ = self.shared.changed.notified() => {}
                }
            }
        }
    }

    /// The partitions to fetch now (still following this leader, not backing off), and the
    /// earliest end of a backoff.
    fn ready_partitions(&self, now: Instant) -> (Vec<Arc<Partition>>, Option<Instant>) {
        let mut parts = self.shared.partitions.lock();
        let mut ready = Vec::with_capacity(parts.len());
        let mut next_retry: Option<Instant> = None;
        for f in parts.values_mut() {
            if f.partition.role()
                != (Role::Follower {
                    leader: self.leader,
                })
            {
                // Leadership moved; the next metadata image moves the partition elsewhere.
                continue;
            }
            match f.backoff_until {
                Some(t) if t > now => {
                    next_retry = Some(next_retry.map_or(t, |n| n.min(t)));
                }
                _ => {
                    f.backoff_until = None;
                    ready.push(f.partition.clone());
                }
            }
        }
        (ready, next_retry)
    }

    fn back_off(&self, partition: &Partition) {
        if let Some(f) = self
            .shared
            .partitions
            .lock()
            .get_mut(&(partition.topic.clone(), partition.index))
        {
            f.backoff_until = Some(Instant::now() + REPLICA_FETCH_BACKOFF);
        }
    }

    fn leader_addr(&self) -> Option<String> {
        let image = self.image.borrow();
        image
            .brokers
            .get(&self.leader)
            .map(|b| format!("{}:{}", b.host, b.port))
    }

    /// Drops the connection mid-exchange or after a failure; the fetch session cannot be
    /// trusted then, so the next fetch is full.
    fn drop_connection(&mut self) {
        self.conn = None;
        self.session.handle_error();
    }

    /// One Fetch for `ready`, and each partition's answer applied (Kafka's
    /// `AbstractFetcherThread.maybeFetch`).
    async fn round(&mut self, ready: Vec<Arc<Partition>>) -> Result<(), FetchRoundError> {
        let (req, asked) = self.build_fetch(ready);
        let resp = self.exchange(&req).await?;
        if !self
            .session
            .handle_response(resp.error_code, resp.session_id)
        {
            // A session error answers no partitions; the next fetch, at once, is full
            // (Kafka's `RemoteLeaderEndPoint.fetch` returns no data for it, no backoff).
            tracing::debug!(
                leader = self.leader,
                error = resp.error_code,
                session = resp.session_id,
                "fetch session reset"
            );
            return Ok(());
        }
        self.process_fetch_response(resp, asked)
    }

    /// The Fetch for `ready` from their fetch positions, through the fetch session (Kafka's
    /// `RemoteLeaderEndPoint.buildFetch`), and what was asked of each partition.
    fn build_fetch(
        &mut self,
        ready: Vec<Arc<Partition>>,
    ) -> (FetchRequest, HashMap<PartitionKey, Asked>) {
        let mut asked: HashMap<PartitionKey, Asked> = HashMap::with_capacity(ready.len());
        let mut next = Vec::with_capacity(ready.len());
        for p in ready {
            let (leo, last_epoch, log_start) = p.fetch_position();
            let leader_epoch = p.leader_epoch();
            let key = (p.topic.clone(), p.index);
            next.push((
                key.clone(),
                FetchParams {
                    fetch_offset: leo,
                    log_start_offset: log_start,
                    partition_max_bytes: REPLICA_FETCH_MAX_BYTES,
                    current_leader_epoch: leader_epoch,
                    last_fetched_epoch: last_epoch,
                },
            ));
            asked.insert(
                key,
                Asked {
                    partition: p,
                    leader_epoch,
                    fetch_offset: leo,
                },
            );
        }
        let req = fetch_request(self.node_id, self.session.build(&next));
        (req, asked)
    }

    /// Applies each partition's answer that is still wanted: the partition kept its role
    /// and leader epoch while the fetch was out (Kafka's
    /// `AbstractFetcherThread.processFetchRequest`). A partition that fails backs off.
    fn process_fetch_response(
        &mut self,
        resp: FetchResponse,
        mut asked: HashMap<PartitionKey, Asked>,
    ) -> Result<(), FetchRoundError> {
        for t in resp.responses {
            let topic = t.topic.to_string();
            for data in t.partitions {
                let Some(a) = asked.remove(&(topic.clone(), data.partition_index)) else {
                    return Err(FetchRoundError::Protocol(format!(
                        "answer for {topic}-{} which was not asked",
                        data.partition_index
                    )));
                };
                // The partition may have changed role or epoch while the fetch was out.
                if a.partition.leader_epoch() != a.leader_epoch
                    || a.partition.role()
                        != (Role::Follower {
                            leader: self.leader,
                        })
                {
                    continue;
                }
                if let Err(e) = self.apply(&a, data) {
                    tracing::debug!(topic = %a.partition.topic, partition = a.partition.index, leader = self.leader, error = %e, "replica fetch of a partition failed");
                    self.back_off(&a.partition);
                }
            }
        }
        Ok(())
    }

    /// Applies one partition's answer: truncation, or an append with the leader's HW.
    fn apply(&self, a: &Asked, data: PartitionData) -> Result<(), FetchRoundError> {
        let part = &a.partition;
        let leo = a.fetch_offset;
        if data.error_code == ResponseError::OffsetOutOfRange.code() && data.log_start_offset > leo
        {
            // This follower fell below the leader's log start: start over from there.
            part.truncate_fully_and_start_at(data.log_start_offset)
                .map_err(|e| FetchRoundError::Local(e.to_string()))?;
            report_truncation(part, leo, data.log_start_offset, true);
            return Ok(());
        }
        if data.error_code != 0 {
            return Err(FetchRoundError::Leader(data.error_code));
        }
        if data.diverging_epoch.epoch >= 0 || data.diverging_epoch.end_offset >= 0 {
            let leader = (data.diverging_epoch.epoch, data.diverging_epoch.end_offset);
            let t = offset_truncation(
                leader,
                part.end_offset_for_epoch(leader.0),
                leo,
                part.high_watermark(),
            );
            tracing::info!(topic = %part.topic, partition = part.index, from = leo, to = t.offset, epoch = leader.0, leader_end_offset = leader.1, completed = t.completed, "truncating to the leader's log");
            part.truncate_to(t.offset)
                .map_err(|e| FetchRoundError::Local(e.to_string()))?;
            self.truncations.inc();
            report_truncation(part, leo, t.offset, false);
            return Ok(());
        }
        let records = data.records.unwrap_or_default();
        if !records.is_empty() {
            self.faults.crash_point(
                CrashPoint::FollowerAfterFetchBeforeAppend,
                &part.topic,
                part.index,
            );
        }
        let now_ms = super::replica_manager::now_ms();
        part.append_as_follower(
            records,
            (data.high_watermark, data.log_start_offset),
            now_ms,
        )
        .map(|_| ())
        .map_err(|e| FetchRoundError::Local(e.to_string()))
    }

    /// Sends `req` to the leader on this fetcher's connection (opened first when there is
    /// none) and reads its answer, each within [`REPLICA_FETCH_IO_TIMEOUT`].
    async fn exchange(&mut self, req: &FetchRequest) -> Result<FetchResponse, FetchRoundError> {
        self.link_fault().await?;
        if self.conn.is_none() {
            self.conn = Some(self.connect_to_leader().await?);
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
        // The leader may hold the fetch for REPLICA_FETCH_WAIT_MAX_MS; anything much longer
        // means the leader or the link is gone.
        let mut buf =
            tokio::time::timeout(REPLICA_FETCH_IO_TIMEOUT, send_and_receive(conn, &frame))
                .await
                .map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "fetch timed out")
                })??;
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

    /// A link rule on this node's replication traffic to the leader: a cut link drops the
    /// connection and fails the exchange, a slow one delays it.
    async fn link_fault(&mut self) -> Result<(), FetchRoundError> {
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
        Ok(())
    }

    /// A connection to the leader's inter-broker listener, over TLS and SASL when the
    /// listener uses them, within [`REPLICA_FETCH_IO_TIMEOUT`].
    async fn connect_to_leader(&self) -> Result<BrokerStream, FetchRoundError> {
        let addr = self
            .leader_addr()
            .ok_or(FetchRoundError::NoAddress(self.leader))?;
        let client_id = format!("brook-replica-fetcher-{}", self.node_id);
        let connecting = async {
            let mut stream = connect(&addr, self.tls.as_ref()).await?;
            if let Some(sasl) = &self.sasl {
                crate::net::client::sasl_authenticate(&mut stream, sasl, &client_id).await?;
            }
            Ok::<_, std::io::Error>(stream)
        };
        Ok(tokio::time::timeout(REPLICA_FETCH_IO_TIMEOUT, connecting)
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
            })??)
    }
}

/// The Fetch request of a session's build: the partitions to send by topic, the forgotten
/// ones, and the wait. A full fetch is answered at once (min_bytes 0), so that it is never
/// cancelled mid-wait; the incremental ones after it wait for records.
fn fetch_request(node_id: i32, build: FetchBuild) -> FetchRequest {
    let mut topics: BTreeMap<String, Vec<FetchPartition>> = BTreeMap::new();
    for ((topic, index), params) in build.to_send {
        topics.entry(topic).or_default().push(
            FetchPartition::default()
                .with_partition(index)
                .with_current_leader_epoch(params.current_leader_epoch)
                .with_fetch_offset(params.fetch_offset)
                .with_last_fetched_epoch(params.last_fetched_epoch)
                .with_log_start_offset(params.log_start_offset)
                .with_partition_max_bytes(params.partition_max_bytes),
        );
    }
    let mut forgotten: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (topic, index) in build.forgotten {
        forgotten.entry(topic).or_default().push(index);
    }
    let full = build.epoch == INITIAL_EPOCH;
    FetchRequest::default()
        .with_replica_id(node_id.into())
        .with_max_wait_ms(if full { 0 } else { REPLICA_FETCH_WAIT_MAX_MS })
        .with_min_bytes(if full { 0 } else { 1 })
        .with_max_bytes(REPLICA_FETCH_RESPONSE_MAX_BYTES)
        .with_session_id(build.session_id)
        .with_session_epoch(build.epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(name)))
                        .with_partitions(partitions)
                })
                .collect(),
        )
        .with_forgotten_topics_data(
            forgotten
                .into_iter()
                .map(|(name, partitions)| {
                    ForgottenTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(name)))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

/// Writes a request frame and reads the answer's frame, refusing one larger than
/// [`REPLICA_FETCH_FRAME_MAX_BYTES`].
async fn send_and_receive(
    conn: &mut BrokerStream,
    frame: &[u8],
) -> Result<bytes::Bytes, std::io::Error> {
    conn.write_all(frame).await?;
    conn.flush().await?;
    let size = conn.read_i32().await?;
    if size < 0 || size as usize > REPLICA_FETCH_FRAME_MAX_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("response of {size} bytes"),
        ));
    }
    // Filled as it arrives, without zeroing first: the answer is up to
    // REPLICA_FETCH_RESPONSE_MAX_BYTES of records.
    let size = size as usize;
    let mut buf = BytesMut::with_capacity(size);
    while buf.len() < size {
        if (&mut *conn)
            .take((size - buf.len()) as u64)
            .read_buf(&mut buf)
            .await?
            == 0
        {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(buf.freeze())
}

/// Where a follower truncates when the leader answers that its log diverged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetTruncation {
    /// Remove every record at or after this offset.
    pub offset: i64,
    /// False when the leader's epoch was unknown here: the truncation only drops the epochs
    /// the leader does not have, and the next fetch (with an older last fetched epoch) asks
    /// again.
    pub completed: bool,
}

/// The truncation offset for the leader's diverging-epoch answer `leader` (epoch, end offset),
/// given this replica's `own` answer for that epoch (the largest epoch it has at or below it
/// and where that ends, [`Partition::end_offset_for_epoch`]), its log end offset and high
/// watermark. Kafka's `AbstractFetcherThread.getOffsetTruncationState`:
/// - the leader knows no end offset: fall back to the high watermark, which is committed;
/// - no epoch in the answer, or this replica has no epoch at or below it: the leader's offset;
/// - this replica's largest epoch at or below the leader's is another one (it never had the
///   leader's epoch): its own end offset for that epoch, not the leader's. That removes every
///   epoch above it, so the next fetch carries a strictly older epoch and the exchange ends;
/// - the same epoch: where the first of the two copies ends.
///
/// The result never exceeds the log end offset, and is never negative.
pub fn offset_truncation(
    leader: (i32, i64),
    own: (i32, i64),
    log_end_offset: i64,
    high_watermark: i64,
) -> OffsetTruncation {
    let (leader_epoch, leader_end) = leader;
    let (own_epoch, own_end) = own;
    let (offset, completed) = if leader_end < 0 {
        (high_watermark, true)
    } else if leader_epoch < 0 || own_end < 0 {
        (leader_end, true)
    } else if own_epoch != leader_epoch {
        (own_end, false)
    } else {
        (own_end.min(leader_end), true)
    };
    OffsetTruncation {
        offset: offset.min(log_end_offset).max(0),
        completed,
    }
}

/// Puts a `follower_truncation` event on the stream.
fn report_truncation(part: &Partition, from: i64, to: i64, full: bool) {
    crate::events::emit(|| crate::events::EventKind::FollowerTruncation {
        topic: part.topic.clone(),
        partition: part.index,
        leader: part.leader_id(),
        from_log_end_offset: from,
        to_offset: to,
        full,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn truncation(offset: i64, completed: bool) -> OffsetTruncation {
        OffsetTruncation { offset, completed }
    }

    #[test]
    fn truncation_for_an_epoch_this_replica_never_had_uses_its_own_end_offset() {
        // Follower epochs [1@0, 3@5], log end 10; the leader has [1@0, 2@5, 4@10] and answers
        // epoch 2 ending at 10 for the follower's epoch 3. The follower's largest epoch at or
        // below 2 is 1, which ends at 5 (where its epoch 3 starts).
        let t = offset_truncation((2, 10), (1, 5), 10, 0);
        assert_eq!(t, truncation(5, false));
        // min(leader end, log end) would be 10: no change, and the same answer forever.
        // The next fetch carries epoch 1; the leader's epoch 1 also ends at 5: done.
        assert_eq!(offset_truncation((1, 5), (1, 5), 5, 0), truncation(5, true));
    }

    #[test]
    fn truncation_for_a_shared_epoch_goes_to_the_earlier_end() {
        assert_eq!(
            offset_truncation((3, 7), (3, 10), 10, 0),
            truncation(7, true)
        );
        assert_eq!(
            offset_truncation((3, 12), (3, 9), 10, 0),
            truncation(9, true)
        );
        // Never past the log end.
        assert_eq!(
            offset_truncation((3, 12), (3, 12), 10, 0),
            truncation(10, true)
        );
    }

    #[test]
    fn truncation_without_epoch_information() {
        // The leader knows no end offset: the high watermark, bounded by the log end.
        assert_eq!(
            offset_truncation((-1, -1), (-1, -1), 10, 4),
            truncation(4, true)
        );
        assert_eq!(
            offset_truncation((-1, -1), (-1, -1), 3, 4),
            truncation(3, true)
        );
        // This replica has no epoch at or below the leader's: the leader's offset.
        assert_eq!(
            offset_truncation((2, 6), (-1, -1), 10, 0),
            truncation(6, true)
        );
        assert_eq!(
            offset_truncation((-1, 6), (2, 8), 10, 0),
            truncation(6, true)
        );
    }

    /// The exchange a follower and a leader go through, each step a fetch with the
    /// follower's latest epoch: it ends at the first offset where the two logs differ, in at
    /// most one step per follower epoch.
    #[test]
    fn truncation_converges_against_divergent_epoch_histories() {
        use brook_storage::leader_epoch::LeaderEpochCache;
        let dir = tempfile::tempdir().unwrap();
        let cache = |entries: &[(i32, i64)], name: &str| {
            let mut c = LeaderEpochCache::empty(&dir.path().join(name));
            for (e, o) in entries {
                c.assign(*e, *o);
            }
            c
        };
        // Leader [0@0, 2@5, 4@8, 6@9] end 12; follower [0@0, 1@3, 3@6, 5@7] end 11.
        let leader = cache(&[(0, 0), (2, 5), (4, 8), (6, 9)], "l");
        let mut follower = cache(&[(0, 0), (1, 3), (3, 6), (5, 7)], "f");
        let (leader_end, mut follower_end) = (12, 11);
        let mut steps = 0;
        loop {
            let last = follower.latest_epoch().unwrap();
            let answer = leader.end_offset_for(last, leader_end);
            if answer.0 == last && answer.1 >= follower_end {
                break; // no divergence: fetching goes on from follower_end
            }
            let own = follower.end_offset_for(answer.0, follower_end);
            let t = offset_truncation(answer, own, follower_end, 0);
            assert!(
                t.offset < follower_end || !t.completed,
                "step {steps}: {t:?}"
            );
            follower_end = t.offset;
            follower.truncate_from_end(follower_end);
            steps += 1;
            assert!(steps <= 4, "no convergence after {steps} truncations");
        }
        assert_eq!(
            follower_end, 3,
            "the logs share epoch 0 up to offset 3 only"
        );
    }
    use brook_storage::{LogConfig, UnifiedLog};

    fn replica(dir: &std::path::Path, topic: &str, index: i32) -> Arc<Partition> {
        let log = UnifiedLog::open(
            dir.join(format!("{topic}-{index}")),
            LogConfig::default(),
            true,
            0,
        )
        .unwrap();
        Arc::new(Partition::new_replica(
            topic.into(),
            uuid::Uuid::new_v4(),
            index,
            1,
            1,
            30_000,
            log,
        ))
    }

    #[tokio::test]
    async fn one_fetcher_per_source_broker() {
        let dir = tempfile::tempdir().unwrap();
        let image = watch::channel(Arc::new(MetadataImage::default())).1;
        let faults = Arc::new(FaultEngine::new(1));
        let mut fetchers = ReplicaFetchers::new(Counter::default());
        let t0 = replica(dir.path(), "t", 0);
        let t1 = replica(dir.path(), "t", 1);
        let u0 = replica(dir.path(), "u", 0);
        let follow = |f: &mut ReplicaFetchers, p: &Arc<Partition>, leader: i32| {
            f.follow(p.clone(), leader, 1, image.clone(), faults.clone())
        };
        follow(&mut fetchers, &t0, 2);
        follow(&mut fetchers, &t1, 2);
        follow(&mut fetchers, &u0, 3);
        assert_eq!(fetchers.fetcher_count(), 2, "three partitions, two leaders");
        // t-1's leadership moves to node 3: both fetchers still have a partition.
        follow(&mut fetchers, &t1, 3);
        assert_eq!(fetchers.fetcher_count(), 2);
        // Leader 2 has nothing left to serve this node: its fetcher stops.
        fetchers.unfollow(&("t".to_string(), 0));
        assert_eq!(fetchers.fetcher_count(), 1);
        fetchers.unfollow(&("t".to_string(), 0));
        fetchers.unfollow(&("t".to_string(), 1));
        fetchers.unfollow(&("u".to_string(), 0));
        assert_eq!(fetchers.fetcher_count(), 0);
    }
}
