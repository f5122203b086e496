//! The authorization checks handlers make (Kafka's `AuthHelper`): each is one branch when no
//! authorizer is configured (everything is allowed, as Kafka's `authorizer.forall`), and one
//! index lookup per resource when one is.

use super::RequestContext;
use crate::broker::Broker;
use crate::security::acl::{supported_operations, AclOperation, ResourceType, CLUSTER_NAME};

/// Kafka's `AuthHelper.authorize` on one LITERAL resource.
pub fn authorize(
    broker: &Broker,
    ctx: &RequestContext,
    op: AclOperation,
    rt: ResourceType,
    name: &str,
) -> bool {
    match broker.authorizer() {
        None => true,
        Some(a) => a.authorize(&ctx.session, op, rt, name),
    }
}

/// `op` on the CLUSTER resource (`kafka-cluster`).
pub fn authorize_cluster(broker: &Broker, ctx: &RequestContext, op: AclOperation) -> bool {
    authorize(broker, ctx, op, ResourceType::Cluster, CLUSTER_NAME)
}

/// Kafka's `AuthHelper.authorizeByResourceType`: `op` on some resource of type `rt`.
pub fn authorize_by_resource_type(
    broker: &Broker,
    ctx: &RequestContext,
    op: AclOperation,
    rt: ResourceType,
) -> bool {
    match broker.authorizer() {
        None => true,
        Some(a) => a.authorize_by_resource_type(&ctx.session, op, rt),
    }
}

/// Kafka's `AuthHelper.authorizedOperations`: the bit field of the operations on `name` this
/// session may perform; with no authorizer, every operation the type supports.
pub fn authorized_operations(
    broker: &Broker,
    ctx: &RequestContext,
    rt: ResourceType,
    name: &str,
) -> i32 {
    match broker.authorizer() {
        None => supported_operations(rt)
            .iter()
            .fold(0, |bits, op| bits | (1 << op.code())),
        Some(a) => a.authorized_operations(&ctx.session, rt, name),
    }
}

/// The message Kafka's `ClusterAuthorizationException` carries for a refused request.
pub fn cluster_denied_message(ctx: &RequestContext) -> String {
    format!(
        "Request {:?} v{} is not authorized.",
        ctx.api_key, ctx.api_version
    )
}
