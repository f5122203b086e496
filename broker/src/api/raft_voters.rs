//! The metadata quorum's membership (KIP-853) and broker decommissioning, as
//! `kafka-metadata-quorum add-controller` / `remove-controller` and `kafka-cluster
//! unregister` use them: AddRaftVoter (API 80), RemoveRaftVoter (81) and UnregisterBroker
//! (64).
//!
//! Kafka's broker forwards all three to the active controller (`KafkaApis`:
//! `forwardToControllerOrFail`), whose `ControllerApis` checks ALTER on the cluster; the
//! request checks before the leader's are `KafkaRaftClient.handleAddVoterRequest` /
//! `handleRemoveVoterRequest` (cluster id, a valid voter, the controller listener among the
//! new voter's endpoints). Brook checks the same here and hands the change to the controller
//! (`Controller::add_voter`, `remove_voter`, `unregister_broker`), which routes it to the
//! active controller. AddRaftVoter v1 (KIP-1186) adds `AckWhenCommitted`: false answers once
//! the leader has appended the new voter set rather than committed it.
//!
//! A single node (no `process.roles`) has no quorum to change: INVALID_REQUEST, as
//! DescribeQuorum answers it.

use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse,
    UnregisterBrokerRequest, UnregisterBrokerResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::quorum::NO_QUORUM_MESSAGE;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::controller::ControllerError;
use crate::security::acl::AclOperation;

/// An error code and its message, as the three responses carry them.
type Refusal = (i16, Option<String>);

fn refusal(e: ControllerError) -> Refusal {
    (e.code(), Some(e.to_string()))
}

/// No error.
const NONE: i16 = 0;

/// ALTER on the cluster (`ControllerApis.handleAddRaftVoter`, `handleRemoveRaftVoter`,
/// `handleUnregisterBroker`).
fn authorize(broker: &Broker, ctx: &RequestContext) -> Result<(), Refusal> {
    match super::auth_helper::authorize_cluster(broker, ctx, AclOperation::Alter) {
        true => Ok(()),
        false => Err((ResponseError::ClusterAuthorizationFailed.code(), None)),
    }
}

/// The checks every voter change shares: authorized, a quorum to change, this cluster
/// (`KafkaRaftClient.hasValidClusterId`: null or equal).
fn check_voter_request(
    broker: &Broker,
    ctx: &RequestContext,
    cluster_id: Option<&StrBytes>,
) -> Result<(), Refusal> {
    authorize(broker, ctx)?;
    if broker.replicas.controller().is_single_voter() {
        return Err((
            ResponseError::InvalidRequest.code(),
            Some(NO_QUORUM_MESSAGE.to_string()),
        ));
    }
    let ours = broker.replicas.cluster_id();
    match cluster_id {
        Some(id) if id.as_str() != ours => Err((
            ResponseError::InconsistentClusterId.code(),
            Some(format!(
                "The given id \"{id}\" doesn't match the cluster id \"{ours}\""
            )),
        )),
        _ => Ok(()),
    }
}

/// Handles one AddRaftVoter request.
pub async fn handle_add(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddRaftVoterRequest,
) -> AddRaftVoterResponse {
    let (error, message) = match add(broker, ctx, &req).await {
        Ok(()) => (NONE, None),
        Err(r) => r,
    };
    AddRaftVoterResponse::default()
        .with_error_code(error)
        .with_error_message(message.map(sb))
}

async fn add(
    broker: &Broker,
    ctx: &RequestContext,
    req: &AddRaftVoterRequest,
) -> Result<(), Refusal> {
    check_voter_request(broker, ctx, req.cluster_id.as_ref())?;
    if req.voter_id < 0 || req.voter_directory_id == Uuid::nil() {
        return Err((
            ResponseError::InvalidRequest.code(),
            Some("Add voter request didn't include a valid voter".into()),
        ));
    }
    let controller = broker.replicas.controller();
    let listener = controller.listener_name();
    let Some(endpoint) = req.listeners.iter().find(|l| l.name.as_str() == listener) else {
        let given: Vec<String> = req
            .listeners
            .iter()
            .map(|l| format!("{}://{}:{}", l.name.as_str(), l.host.as_str(), l.port))
            .collect();
        return Err((
            ResponseError::InvalidRequest.code(),
            Some(format!(
                "Add voter request didn't include the endpoint ({given:?}) for the default \
                 listener {listener}"
            )),
        ));
    };
    let address = format!("{}:{}", endpoint.host.as_str(), endpoint.port);
    let timeout_ms = u64::try_from(req.timeout_ms).unwrap_or(0);
    controller
        .add_voter(
            req.voter_id,
            req.voter_directory_id,
            address,
            timeout_ms,
            req.ack_when_committed,
        )
        .await
        .map_err(refusal)
}

/// Handles one RemoveRaftVoter request: the voter is removed only if its recorded directory
/// id is the request's (see `controller::voter_control`).
pub async fn handle_remove(
    broker: &Broker,
    ctx: &RequestContext,
    req: RemoveRaftVoterRequest,
) -> RemoveRaftVoterResponse {
    let result = match check_voter_request(broker, ctx, req.cluster_id.as_ref()) {
        Err(r) => Err(r),
        Ok(()) if req.voter_id < 0 => Err((
            ResponseError::InvalidRequest.code(),
            Some("Remove voter request didn't include a valid voter".into()),
        )),
        Ok(()) => broker
            .replicas
            .controller()
            .remove_voter(req.voter_id, req.voter_directory_id)
            .await
            .map_err(refusal),
    };
    let (error, message) = result.err().unwrap_or((NONE, None));
    RemoveRaftVoterResponse::default()
        .with_error_code(error)
        .with_error_message(message.map(sb))
}

/// Handles one UnregisterBroker request.
pub async fn handle_unregister_broker(
    broker: &Broker,
    ctx: &RequestContext,
    req: UnregisterBrokerRequest,
) -> UnregisterBrokerResponse {
    let result = match authorize(broker, ctx) {
        Err(r) => Err(r),
        Ok(()) => broker
            .replicas
            .controller()
            .unregister_broker(req.broker_id.0)
            .await
            .map_err(refusal),
    };
    // Kafka's `ControllerApis` answers the code alone.
    let error = result.err().map_or(NONE, |(code, _)| code);
    UnregisterBrokerResponse::default().with_error_code(error)
}
