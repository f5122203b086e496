//! AlterPartitionReassignments and ListPartitionReassignments (Kafka's
//! `kafka-reassign-partitions`, Admin `alterPartitionReassignments` and
//! `listPartitionReassignments`). In a cluster the active controller decides
//! (`replication_control::alter_partition_reassignments`, Kafka's
//! `ReplicationControlManager.alterPartitionReassignments`) and the brokers move the replicas
//! as they apply the image (`ReplicaManager::apply_image`). A single node answers as a Kafka
//! cluster of one broker would: its partitions already sit on the only broker, so a target
//! naming only this node changes nothing, and no reassignment is ever in progress.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::controller::{list_partition_reassignments, ControllerError, ReassignmentResults};
use crate::security::acl::AclOperation;
use kafka_protocol::ResponseError;

/// How long an accepted reassignment waits for this node's image to show it, so a
/// ListPartitionReassignments sent here right after sees it (as after CreateTopics).
const REASSIGNMENT_VISIBLE_WAIT_MS: u64 = 10_000;

/// Per topic, per partition: the target replicas, or `None` to cancel.
type Targets = Vec<(String, Vec<(i32, Option<Vec<i32>>)>)>;

/// Answers AlterPartitionReassignments (v0-1; v1 adds `AllowReplicationFactorChange`).
pub async fn handle_alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    if !super::auth_helper::authorize_cluster(broker, ctx, AclOperation::Alter) {
        return AlterPartitionReassignmentsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(sb(super::auth_helper::cluster_denied_message(ctx))));
    }
    // Below v1 the field does not exist, and Kafka takes it as true.
    let allow_rf_change = ctx.api_version < 1 || req.allow_replication_factor_change;
    let targets: Targets = req
        .topics
        .iter()
        .map(|t| {
            let parts = t
                .partitions
                .iter()
                .map(|p| {
                    let replicas = p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
                    (p.partition_index, replicas)
                })
                .collect();
            (t.name.to_string(), parts)
        })
        .collect();
    let c = broker.replicas.controller();
    let results = match c
        .alter_partition_reassignments(targets.clone(), allow_rf_change)
        .await
    {
        Ok(results) => {
            wait_until_visible(broker, c, &targets, &results).await;
            results
        }
        Err(e) => return alter_error(&req, &e),
    };
    AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_rf_change)
        .with_responses(results.into_iter().map(topic_response).collect())
}

/// Waits (bounded) until this node's image shows every accepted change (the target's
/// replicas in the assignment, or a cancellation's reassignment over), so a
/// ListPartitionReassignments sent here next sees it; the answer goes out either way.
async fn wait_until_visible(
    broker: &Broker,
    c: &crate::controller::Controller,
    targets: &Targets,
    results: &ReassignmentResults,
) {
    let accepted: Vec<(&str, i32, Option<&[i32]>)> = targets
        .iter()
        .zip(results)
        .flat_map(|((topic, parts), (_, outcomes))| {
            parts
                .iter()
                .zip(outcomes)
                .filter(|(_, (_, r))| r.is_ok())
                .map(move |((index, target), _)| (topic.as_str(), *index, target.as_deref()))
        })
        .collect();
    let visible = |_: &crate::cluster::replica_manager::ReplicaManager| {
        let image = c.image().borrow().clone();
        accepted.iter().all(|&(topic, index, target)| {
            let Some(p) = image
                .topic_by_name(topic)
                .and_then(|t| image.partition(t.id, index))
            else {
                return true;
            };
            match target {
                Some(t) => t.iter().all(|r| p.replicas.contains(r)),
                None => !p.is_reassigning(),
            }
        })
    };
    let wait = std::time::Duration::from_millis(REASSIGNMENT_VISIBLE_WAIT_MS);
    broker.replicas.wait_for_metadata(wait, visible).await;
}

fn topic_response(
    (name, parts): crate::controller::request::TopicReassignmentResults,
) -> ReassignableTopicResponse {
    ReassignableTopicResponse::default()
        .with_name(sb(name).into())
        .with_partitions(
            parts
                .into_iter()
                .map(|(index, outcome)| {
                    let r = ReassignablePartitionResponse::default().with_partition_index(index);
                    match outcome {
                        Ok(()) => r,
                        Err(e) => r
                            .with_error_code(e.code())
                            .with_error_message(Some(sb(e.to_string()))),
                    }
                })
                .collect(),
        )
}

/// The controller could not take the request at all: its error on every partition, as
/// Kafka's `AlterPartitionReassignmentsRequest.getErrorResponse`.
fn alter_error(
    req: &AlterPartitionReassignmentsRequest,
    e: &ControllerError,
) -> AlterPartitionReassignmentsResponse {
    let responses = req
        .topics
        .iter()
        .map(|t| {
            ReassignableTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            ReassignablePartitionResponse::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(e.code())
                                .with_error_message(Some(sb(e.to_string())))
                        })
                        .collect(),
                )
        })
        .collect();
    AlterPartitionReassignmentsResponse::default()
        .with_error_code(e.code())
        .with_error_message(Some(sb(e.to_string())))
        .with_responses(responses)
}

/// Answers ListPartitionReassignments v0 from this node's committed image: every
/// reassigning partition, or those of the named ones (Kafka's
/// `ReplicationControlManager.listPartitionReassignments`).
pub async fn handle_list(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !super::auth_helper::authorize_cluster(broker, ctx, AclOperation::Describe) {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(sb(super::auth_helper::cluster_denied_message(ctx))));
    }
    let c = broker.replicas.controller();
    let named: Option<Vec<(String, Vec<i32>)>> = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let image = c.image().borrow().clone();
    let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let topics = list_partition_reassignments(&image, named.as_deref())
        .into_iter()
        .map(|(name, parts)| {
            OngoingTopicReassignment::default()
                .with_name(sb(name.to_string()).into())
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|p| {
                            OngoingPartitionReassignment::default()
                                .with_partition_index(p.index)
                                .with_replicas(ids(&p.replicas))
                                .with_adding_replicas(ids(&p.adding_replicas))
                                .with_removing_replicas(ids(&p.removing_replicas))
                        })
                        .collect(),
                )
        })
        .collect();
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}
