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
    let (brokers, controller_id) = match broker.replicas.controller() {
        Some(controller) => {
            // Every unfenced broker of the cluster, and the active controller when it is a
            // live broker (the same rule Metadata follows).
            let image = controller.image().borrow().clone();
            let live = image.live_brokers();
            let brokers = image
                .brokers
                .values()
                .filter(|b| !b.fenced)
                .map(|b| {
                    DescribeClusterBroker::default()
                        .with_broker_id(b.node_id.into())
                        .with_host(sb(b.host.clone()))
                        .with_port(b.port as i32)
                })
                .collect();
            let id = controller
                .active_controller_id()
                .filter(|id| live.contains(id))
                .or_else(|| live.first().copied())
                .unwrap_or(broker.node_id());
            (brokers, id)
        }
        None => {
            let node = DescribeClusterBroker::default()
                .with_broker_id(broker.node_id().into())
                .with_host(sb(broker.advertised_host.clone()))
                .with_port(broker.advertised_port);
            (vec![node], broker.node_id())
        }
    };
    DescribeClusterResponse::default()
        .with_endpoint_type(1)
        .with_cluster_id(sb(broker.replicas.cluster_id()))
        .with_controller_id(controller_id.into())
        .with_brokers(brokers)
        .with_cluster_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}
