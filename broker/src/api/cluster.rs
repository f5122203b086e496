//! DescribeCluster: the brokers and the controller, for Admin clients.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{DescribeClusterRequest, DescribeClusterResponse};

use super::{sb, RequestContext};
use crate::broker::Broker;

/// Kafka's "authorized operations not requested" marker.
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// What Kafka answers, with no authorizer configured, for authorized operations on a topic:
/// every operation the resource type supports (`AuthHelper.authorizedOperations` with
/// `AclEntry.supportedOperations(TOPIC)`: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
/// DESCRIBE_CONFIGS, ALTER_CONFIGS), one bit per `AclOperation` code.
pub const TOPIC_AUTHORIZED_OPERATIONS: i32 = 3576;
/// The same for the cluster: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
/// ALTER_CONFIGS, IDEMPOTENT_WRITE.
pub const CLUSTER_AUTHORIZED_OPERATIONS: i32 = 8096;
/// The same for a group: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
pub const GROUP_AUTHORIZED_OPERATIONS: i32 = 3400;

/// `all` when the client asked for authorized operations, else Kafka's "not requested".
pub fn authorized_operations(requested: bool, all: i32) -> i32 {
    if requested {
        all
    } else {
        AUTHORIZED_OPERATIONS_OMITTED
    }
}

/// Answers DescribeCluster with the live brokers of the applied image and the controller.
pub async fn handle_describe_cluster(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    // endpoint_type 1 = brokers; 2 (controllers) is answered the same way, since every node
    // plays both roles.
    let cluster_ops = authorized_operations(
        req.include_cluster_authorized_operations,
        CLUSTER_AUTHORIZED_OPERATIONS,
    );
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
