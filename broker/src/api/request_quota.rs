//! `request_percentage` (Kafka's `ClientRequestQuotaManager`): the time a client's requests
//! take to handle, per (user principal, client-id), as a percentage of one thread (the quota
//! of a client allowed all the broker's capacity would be (`num.io.threads` +
//! `num.network.threads`) x 100), sampled over `quota.window.num` windows of
//! `quota.window.size.seconds` like the byte rates, its throttle time bounded by one window.
//!
//! Request time. Kafka counts the time a request holds a request-handler thread (and, after
//! the answer, a network thread), not the time it waits in a purgatory. Brook's handlers are
//! tasks that give their thread back at every wait, so it counts the time the request's
//! handling is being polled: from the decoded request to the built answer, on whichever
//! executor thread, excluding every await (a Fetch parked for `max_wait_ms`, a CreateTopics
//! waiting on the controller). `RequestTimer` adds up those polls.
//!
//! The answer's `throttle_time_ms` is the larger of this throttle and the handler's own (a
//! byte-rate or mutation quota's); the connection is muted for it (KIP-219). Exempt, as
//! Kafka's `sendResponseExemptThrottle` callers are: a follower's Fetch and WriteTxnMarkers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use parking_lot::Mutex;

use super::RequestContext;
use crate::broker::Broker;
use kafka_protocol::messages::ApiKey;

/// Kafka's `ClientRequestQuotaManager.NanosToPercentagePerSecond`: a second of request time
/// is 100 (percent of one thread for that second).
const NANOS_TO_PERCENTAGE_PER_SECOND: f64 = 100.0 / 1_000_000_000.0;

/// The time a request's handling has been polled so far, and whether it has been recorded
/// against the client's quota (once per request).
#[derive(Debug, Clone, Default)]
pub struct RequestTimer(Arc<Mutex<TimerState>>);

#[derive(Debug, Default)]
struct TimerState {
    spent: Duration,
    polling_since: Option<Instant>,
    recorded: bool,
}

impl RequestTimer {
    /// Runs one poll of the request's handling, counting its time.
    pub fn poll<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.lock().polling_since = Some(Instant::now());
        let out = f();
        let mut st = self.0.lock();
        if let Some(since) = st.polling_since.take() {
            st.spent += since.elapsed();
        }
        out
    }

    /// The time spent so far, the poll under way included; `None` once recorded.
    fn take_for_recording(&self) -> Option<Duration> {
        let mut st = self.0.lock();
        if st.recorded {
            return None;
        }
        st.recorded = true;
        let current = st.polling_since.map_or(Duration::ZERO, |s| s.elapsed());
        Some(st.spent + current)
    }
}

/// Records the request's time against the client's `request_percentage` and, over the
/// quota, counts the throttle and mutes the connection for it after the answer. Returns the
/// throttle time, 0 when within the quota, exempt, without a quota, or already recorded.
pub(crate) fn record(broker: &Broker, ctx: &RequestContext) -> i32 {
    let throttle_ms = measure(broker, ctx);
    super::client_quotas::throttle(ctx, &broker.quotas.request, throttle_ms);
    throttle_ms
}

/// Records the request's time against the client's `request_percentage` (Kafka's
/// `maybeRecordAndGetThrottleTimeMs`), once per request, without counting or muting (the
/// Produce and Fetch handlers settle it against their byte-rate quota's throttle). Returns
/// the throttle time, 0 when within the quota, exempt, without a quota, or already recorded.
pub(crate) fn measure(broker: &Broker, ctx: &RequestContext) -> i32 {
    if ctx.api_key == ApiKey::WriteTxnMarkers {
        return 0;
    }
    let Some(spent) = ctx.request_time.take_for_recording() else {
        return 0;
    };
    let quotas = broker.replicas.image().client_quotas.clone();
    // Every request passes here: without any client quota, skip the manager's lock.
    if quotas.is_empty() {
        return 0;
    }
    broker.quotas.request.record_and_get_throttle_ms(
        &quotas,
        &ctx.session.principal.name,
        ctx.client_id.as_deref().unwrap_or(""),
        spent.as_nanos() as f64 * NANOS_TO_PERCENTAGE_PER_SECOND,
        crate::cluster::replica_manager::now_ms(),
    )
}

/// A response's `throttle_time_ms`, for the answers that have one.
pub trait ThrottleTimeField: Clone {
    fn throttle_time_field(&mut self) -> Option<&mut i32>;
}

/// `resp` with `throttle_ms` as its throttle time if that is more than it carries; `None`
/// when it carries as much already, or has no such field (the connection is muted anyway).
pub(crate) fn with_throttle<T: ThrottleTimeField>(resp: &T, throttle_ms: i32) -> Option<T> {
    let mut raised = resp.clone();
    let field = raised.throttle_time_field()?;
    if *field >= throttle_ms {
        return None;
    }
    *field = throttle_ms;
    Some(raised)
}

macro_rules! with_field {
    ($($t:ty),* $(,)?) => {
        $(impl ThrottleTimeField for $t {
            fn throttle_time_field(&mut self) -> Option<&mut i32> {
                Some(&mut self.throttle_time_ms)
            }
        })*
    };
}

macro_rules! without_field {
    ($($t:ty),* $(,)?) => {
        $(impl ThrottleTimeField for $t {
            fn throttle_time_field(&mut self) -> Option<&mut i32> {
                None
            }
        })*
    };
}

// Every response of the codec, so that any API answered through `respond` has one.
with_field!(
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    AddRaftVoterResponse,
    AllocateProducerIdsResponse,
    AlterClientQuotasResponse,
    AlterConfigsResponse,
    AlterPartitionReassignmentsResponse,
    AlterPartitionResponse,
    AlterReplicaLogDirsResponse,
    AlterShareGroupOffsetsResponse,
    AlterUserScramCredentialsResponse,
    ApiVersionsResponse,
    AssignReplicasToDirsResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    ControllerRegistrationResponse,
    CreateAclsResponse,
    CreateDelegationTokenResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteAclsResponse,
    DeleteGroupsResponse,
    DeleteRecordsResponse,
    DeleteShareGroupOffsetsResponse,
    DeleteTopicsResponse,
    DescribeAclsResponse,
    DescribeClientQuotasResponse,
    DescribeClusterResponse,
    DescribeConfigsResponse,
    DescribeDelegationTokenResponse,
    DescribeGroupsResponse,
    DescribeLogDirsResponse,
    DescribeProducersResponse,
    DescribeShareGroupOffsetsResponse,
    DescribeTopicPartitionsResponse,
    DescribeTransactionsResponse,
    DescribeUserScramCredentialsResponse,
    ElectLeadersResponse,
    EndTxnResponse,
    ExpireDelegationTokenResponse,
    FetchResponse,
    FetchSnapshotResponse,
    FindCoordinatorResponse,
    GetTelemetrySubscriptionsResponse,
    HeartbeatResponse,
    IncrementalAlterConfigsResponse,
    InitProducerIdResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListConfigResourcesResponse,
    ListGroupsResponse,
    ListOffsetsResponse,
    ListPartitionReassignmentsResponse,
    ListTransactionsResponse,
    MetadataResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    OffsetForLeaderEpochResponse,
    ProduceResponse,
    PushTelemetryResponse,
    RemoveRaftVoterResponse,
    RenewDelegationTokenResponse,
    ShareAcknowledgeResponse,
    ShareFetchResponse,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
    StreamsGroupDescribeResponse,
    StreamsGroupHeartbeatResponse,
    SyncGroupResponse,
    TxnOffsetCommitResponse,
    UnregisterBrokerResponse,
    UpdateFeaturesResponse,
    UpdateRaftVoterResponse,
);

without_field!(
    BeginQuorumEpochResponse,
    DeleteShareGroupStateResponse,
    DescribeQuorumResponse,
    EndQuorumEpochResponse,
    EnvelopeResponse,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
    VoteResponse,
    WriteShareGroupStateResponse,
    WriteTxnMarkersResponse,
);
