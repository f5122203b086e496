//! FindCoordinator: this node coordinates every group (and, later, every transactional id).

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};

use super::{sb, RequestContext};
use crate::server::Broker;

/// Key types: 0 = group, 1 = transactional id.
const KEY_TYPE_GROUP: i8 = 0;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;

/// Answers FindCoordinator for one key (v0-3) or a batch of keys (v4+).
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    // Transactions have no coordinator yet; say so rather than send clients to a node that
    // cannot answer their transactional requests.
    let error = if req.key_type == KEY_TYPE_GROUP {
        0
    } else {
        COORDINATOR_NOT_AVAILABLE
    };
    let (node, host, port) = if error == 0 {
        (
            broker.node_id(),
            broker.advertised_host.clone(),
            broker.advertised_port,
        )
    } else {
        (-1, String::new(), -1)
    };
    if ctx.api_version >= 4 {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(node.into())
                    .with_host(sb(host.clone()))
                    .with_port(port)
                    .with_error_code(error)
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    FindCoordinatorResponse::default()
        .with_error_code(error)
        .with_node_id(node.into())
        .with_host(sb(host))
        .with_port(port)
}
