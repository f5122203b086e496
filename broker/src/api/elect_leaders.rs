//! ElectLeaders (Kafka's `kafka-leader-election`, Admin `electLeaders`): preferred and unclean
//! elections, decided by the active controller (`replication_control::elect_leaders`, Kafka's
//! `ReplicationControlManager.electLeaders`). A single node is the only replica of each of its
//! partitions, so every election there is already done (ELECTION_NOT_NEEDED).
//!
//! The request's `timeout_ms` is a deadline for the active controller to take the request
//! up, as Kafka's `ControllerApis.handleElectLeaders` gives `QuorumController` (a
//! `ControllerRequestContext` deadline): past it the answer is REQUEST_TIMED_OUT on every
//! named partition and at the top level, so `timeout_ms` 0 always times out. An empty
//! partition list is answered at once, before any deadline (`QuorumController.electLeaders`).

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::ResponseError;

use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::controller::{ElectionOutcome, ElectionType};

/// Kafka's `ElectionType` values on the wire.
const ELECTION_PREFERRED: i8 = 0;
const ELECTION_UNCLEAN: i8 = 1;

/// Answers ElectLeaders. v0 has no election type (preferred only) and no top-level error.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ElectLeadersRequest,
) -> ElectLeadersResponse {
    // ALTER on the cluster (Kafka's `handleElectLeaders`).
    if !super::auth_helper::authorize_cluster(
        broker,
        ctx,
        crate::security::acl::AclOperation::Alter,
    ) {
        return error_response(
            &req,
            ctx.api_version,
            ResponseError::ClusterAuthorizationFailed,
        );
    }
    let election = match req.election_type {
        _ if ctx.api_version == 0 => ElectionType::Preferred,
        ELECTION_PREFERRED => ElectionType::Preferred,
        ELECTION_UNCLEAN => ElectionType::Unclean,
        _ => return error_response(&req, ctx.api_version, ResponseError::InvalidRequest),
    };
    if req
        .topic_partitions
        .as_ref()
        .is_some_and(|tps| tps.is_empty())
    {
        return ElectLeadersResponse::default();
    }
    let partitions: Option<Vec<(String, Vec<i32>)>> = req.topic_partitions.as_ref().map(|tps| {
        tps.iter()
            .map(|t| (t.topic.to_string(), t.partitions.clone()))
            .collect()
    });
    let results = match broker
        .replicas
        .controller()
        .elect_leaders(election, partitions, req.timeout_ms)
        .await
    {
        Ok(r) => r,
        Err(e) => return error_response(&req, ctx.api_version, e.response_error()),
    };
    broker.replicas.wait_caught_up().await;
    ElectLeadersResponse::default().with_replica_election_results(
        results
            .into_iter()
            .map(|(topic, parts)| {
                ReplicaElectionResult::default()
                    .with_topic(sb(topic).into())
                    .with_partition_result(
                        parts
                            .into_iter()
                            .map(|(index, outcome)| partition_result(index, outcome))
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn partition_result(index: i32, outcome: ElectionOutcome) -> PartitionResult {
    let error = outcome.error();
    PartitionResult::default()
        .with_partition_id(index)
        .with_error_code(error.map_or(0, |e| e.code()))
        .with_error_message(error.map(|e| sb(e.to_string())))
}

/// The error on every named partition (and at the top level from v1), as Kafka's
/// `ElectLeadersRequest.getErrorResponse` answers a request it could not carry out. The
/// top-level `ErrorCode` arrived with v1 and is not ignorable (ElectLeadersResponse.json): at
/// v0 it stays 0, or the answer cannot be encoded.
fn error_response(
    req: &ElectLeadersRequest,
    version: i16,
    error: ResponseError,
) -> ElectLeadersResponse {
    let results = req
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            ReplicaElectionResult::default()
                .with_topic(t.topic.clone())
                .with_partition_result(
                    t.partitions
                        .iter()
                        .map(|&i| {
                            PartitionResult::default()
                                .with_partition_id(i)
                                .with_error_code(error.code())
                        })
                        .collect(),
                )
        })
        .collect();
    let top_level = if version >= 1 { error.code() } else { 0 };
    ElectLeadersResponse::default()
        .with_error_code(top_level)
        .with_replica_election_results(results)
}
