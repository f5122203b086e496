//! DescribeQuorum (API 55): the metadata quorum, `__cluster_metadata` partition 0, as
//! `kafka-metadata-quorum describe --status` and `--replication` show it (Kafka's
//! `KafkaRaftClient.handleDescribeQuorumRequest` and `RaftUtil.singletonDescribeQuorumResponse`).
//!
//! In Kafka a broker forwards DescribeQuorum to the active controller, which is the Raft leader,
//! so the tool gets the leader's view from any bootstrap address. Brook does the same: a node
//! that is not the Raft leader asks the leader ([`Controller::describe_quorum`]).
//!
//! Directory ids (`replica_directory_id`, v2): each replica's recorded one (Kafka's
//! `ReplicaKey`, see `controller::voter_control`); a static voter has none, the zero uuid
//! (the tool prints `null`). Nodes (v2) carry each voter's controller listener from the
//! Raft membership; observers are the nodes that joined through
//! `controller.quorum.bootstrap.servers` and do not vote (`controller::voter_control`).
//!
//! A single node (`brook serve` without `process.roles`) has no Raft log: it answers
//! INVALID_REQUEST (not retriable) with a message saying so, rather than inventing a quorum.
//!
//! [`Controller::describe_quorum`]: crate::controller::Controller::describe_quorum

use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::ResponseError;

use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::controller::quorum::QuorumReplica;
use crate::controller::QuorumDescription;

/// The metadata log's topic, Kafka's `Topic.CLUSTER_METADATA_TOPIC_NAME`.
pub const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

/// What a single node answers: its one-voter quorum has no other voter and no controller
/// listener, so there is nothing to describe.
pub const NO_QUORUM_MESSAGE: &str =
    "this Brook node runs without a metadata quorum of other voters (no process.roles): its \
     __cluster_metadata log has this node as its only voter and no controller listener";

/// Handles one DescribeQuorum request.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    let controller = broker.replicas.controller();
    // DESCRIBE on the cluster (Kafka's `ControllerApis.handleDescribeQuorum`).
    if !super::auth_helper::authorize_cluster(
        broker,
        ctx,
        crate::security::acl::AclOperation::Describe,
    ) {
        return DescribeQuorumResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    if controller.is_single_voter() {
        return DescribeQuorumResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(sb(NO_QUORUM_MESSAGE)));
    };
    if !asks_for_metadata_partition(&req) {
        return partition_errors(&req, ResponseError::UnknownTopicOrPartition);
    }
    match controller.describe_quorum().await {
        Ok(d) => describe(&d, ctx.api_version),
        Err(e) => {
            tracing::debug!(error = %e, "DescribeQuorum: no leader answer");
            single_partition(
                PartitionData::default()
                    .with_error_code(ResponseError::NotLeaderOrFollower.code())
                    .with_error_message(Some(sb(e.to_string())))
                    .with_leader_id((-1).into())
                    .with_leader_epoch(-1)
                    .with_high_watermark(-1),
            )
        }
    }
}

/// Kafka's `hasValidTopicPartition`: exactly `__cluster_metadata` partition 0.
fn asks_for_metadata_partition(req: &DescribeQuorumRequest) -> bool {
    matches!(req.topics.as_slice(), [t] if t.topic_name.as_str() == CLUSTER_METADATA_TOPIC
        && matches!(t.partitions.as_slice(), [p] if p.partition_index == 0))
}

/// Every asked partition answered with `error` (Kafka's `getPartitionLevelErrorResponse`).
fn partition_errors(req: &DescribeQuorumRequest, error: ResponseError) -> DescribeQuorumResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    PartitionData::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error.code())
                })
                .collect();
            TopicData::default()
                .with_topic_name(t.topic_name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DescribeQuorumResponse::default().with_topics(topics)
}

fn single_partition(partition: PartitionData) -> DescribeQuorumResponse {
    DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(sb(CLUSTER_METADATA_TOPIC).into())
        .with_partitions(vec![partition.with_partition_index(0)])])
}

/// One replica at `version`: `ReplicaDirectoryId` arrived with v2 and is not ignorable.
fn replica_state(r: &QuorumReplica, version: i16) -> ReplicaState {
    let directory_id = if version >= 2 {
        r.directory_id
    } else {
        uuid::Uuid::nil()
    };
    ReplicaState::default()
        .with_replica_id(r.replica_id.into())
        .with_replica_directory_id(directory_id)
        .with_log_end_offset(r.log_end_offset)
        .with_last_fetch_timestamp(r.last_fetch_timestamp_ms)
        .with_last_caught_up_timestamp(r.last_caught_up_timestamp_ms)
}

/// The leader's description in Kafka's shape at `version`. `Nodes` arrived with v2 and is
/// not ignorable (DescribeQuorumResponse.json): below v2 it stays empty, or the answer cannot
/// be encoded.
fn describe(d: &QuorumDescription, version: i16) -> DescribeQuorumResponse {
    let partition = PartitionData::default()
        .with_leader_id(d.leader_id.into())
        .with_leader_epoch(d.leader_epoch)
        .with_high_watermark(d.high_watermark)
        .with_current_voters(d.voters.iter().map(|r| replica_state(r, version)).collect())
        .with_observers(
            d.observers
                .iter()
                .map(|r| replica_state(r, version))
                .collect(),
        );
    let nodes = d
        .endpoints
        .iter()
        .map(|e| {
            Node::default()
                .with_node_id(e.node_id.into())
                .with_listeners(vec![Listener::default()
                    .with_name(sb(e.listener.clone()))
                    .with_host(sb(e.host.clone()))
                    .with_port(e.port)])
        })
        .collect();
    let nodes = if version >= 2 { nodes } else { Vec::new() };
    single_partition(partition).with_nodes(nodes)
}
