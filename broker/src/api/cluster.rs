//! DescribeCluster: the brokers and the controller, for Admin clients.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{DescribeClusterRequest, DescribeClusterResponse};

use super::auth_helper::{authorize_cluster, authorized_operations};
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

/// Kafka's "authorized operations not requested" marker.
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Answers DescribeCluster with the live brokers of the applied image and the controller.
pub async fn handle_describe_cluster(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    // endpoint_type 1 = brokers; 2 (controllers) is answered the same way, since every node
    // plays both roles. The cluster's operations only with DESCRIBE on it, else 0 (Kafka's
    // `AuthHelper.computeDescribeClusterResponse`).
    let cluster_ops = if !req.include_cluster_authorized_operations {
        AUTHORIZED_OPERATIONS_OMITTED
    } else if authorize_cluster(broker, ctx, AclOperation::Describe) {
        authorized_operations(broker, ctx, ResourceType::Cluster, CLUSTER_NAME)
    } else {
        0
    };
    // Every unfenced broker of the cluster, and the active controller when it is a live
    // broker (the same rule Metadata follows).
    let controller = broker.replicas.controller();
    let image = controller.image().borrow().clone();
    let brokers = image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .filter_map(|b| {
            // The endpoints of the listener the request came in on, as Metadata answers.
            let (host, port) = b.endpoint(&ctx.session.listener_name)?;
            Some(
                DescribeClusterBroker::default()
                    .with_broker_id(b.node_id.into())
                    .with_host(sb(host.to_string()))
                    .with_port(port as i32),
            )
        })
        .collect();
    let controller_id =
        image.controller_id_for_clients(controller.active_controller_id(), broker.node_id());
    DescribeClusterResponse::default()
        .with_endpoint_type(1)
        .with_cluster_id(sb(broker.replicas.cluster_id()))
        .with_controller_id(controller_id.into())
        .with_brokers(brokers)
        .with_cluster_authorized_operations(cluster_ops)
}
