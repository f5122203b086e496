//! DescribeCluster: the brokers and the controller, for Admin clients.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{DescribeClusterRequest, DescribeClusterResponse};

use super::{sb, RequestContext};
use crate::server::Broker;

/// Kafka's "authorized operations not requested" marker.
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Answers DescribeCluster with this node as the only broker and the controller.
pub async fn handle_describe_cluster(
    broker: &Broker,
    _ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    // endpoint_type 1 = brokers; 2 (controllers) is answered the same way, since every node
    // plays both roles.
    let _ = req;
    let node = DescribeClusterBroker::default()
        .with_broker_id(broker.node_id().into())
        .with_host(sb(broker.advertised_host.clone()))
        .with_port(broker.advertised_port);
    DescribeClusterResponse::default()
        .with_endpoint_type(1)
        .with_cluster_id(sb(broker.replicas.cluster_id()))
        .with_controller_id(broker.node_id().into())
        .with_brokers(vec![node])
        .with_cluster_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}
