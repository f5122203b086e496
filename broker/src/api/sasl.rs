//! The SASL family once a connection is past its exchange (which `security::sasl` runs), and
//! the SCRAM credential APIs:
//! - SaslHandshake and SaslAuthenticate after authentication, or on a listener without SASL,
//!   get ILLEGAL_SASL_STATE (Kafka's `KafkaApis.handleSaslHandshakeRequest` and
//!   `handleSaslAuthenticateRequest`);
//! - AlterUserScramCredentials goes to the active controller (`ScramControlManager`), and
//!   DescribeUserScramCredentials reads the image (Kafka's `ScramImage.describe`).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::ResponseError;

use super::auth_helper::authorize_cluster;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::controller::scram_control::ScramUpsertion;
use crate::security::acl::AclOperation;
use crate::security::scram::ScramMechanism;

/// Kafka's `ScramImage.DESCRIBE_USER_THAT_DOES_NOT_EXIST`.
const DESCRIBE_USER_THAT_DOES_NOT_EXIST: &str =
    "Attempt to describe a user credential that does not exist: ";
/// Kafka's `ScramImage.DESCRIBE_DUPLICATE_USER`.
const DESCRIBE_DUPLICATE_USER: &str =
    "Cannot describe SCRAM credentials for the same user twice in a single request: ";

pub async fn handle_sasl_handshake(
    _broker: &Broker,
    _ctx: &RequestContext,
    _req: SaslHandshakeRequest,
) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code())
}

pub async fn handle_sasl_authenticate(
    _broker: &Broker,
    _ctx: &RequestContext,
    _req: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(sb(
            "SaslAuthenticate request received after successful authentication",
        )))
}

pub async fn handle_alter_user_scram_credentials(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let deletions: Vec<(String, i8)> = req
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), d.mechanism))
        .collect();
    let upsertions: Vec<ScramUpsertion> = req
        .upsertions
        .iter()
        .map(|u| ScramUpsertion {
            name: u.name.to_string(),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        })
        .collect();
    let users: Vec<String> = deletions
        .iter()
        .map(|(n, _)| n.clone())
        .chain(upsertions.iter().map(|u| u.name.clone()))
        .collect();
    // ALTER on the cluster, as Kafka's `ControllerApis` checks; every user is refused
    // otherwise.
    if !authorize_cluster(broker, ctx, AclOperation::Alter) {
        let e = ResponseError::ClusterAuthorizationFailed;
        let mut seen = std::collections::BTreeSet::new();
        return alter_response(
            users
                .into_iter()
                .filter(|u| seen.insert(u.clone()))
                .map(|u| (u, e.code(), Some(e.to_string())))
                .collect(),
        );
    }
    let controller = broker.replicas.controller();
    let results = match controller
        .alter_user_scram_credentials(deletions, upsertions)
        .await
    {
        Ok(r) => {
            // Kafka answers once the change is in this broker's image.
            broker.replicas.wait_caught_up().await;
            r
        }
        Err(e) => {
            let mut seen = std::collections::BTreeSet::new();
            users
                .into_iter()
                .filter(|u| seen.insert(u.clone()))
                .map(|u| (u, e.code(), Some(e.to_string())))
                .collect()
        }
    };
    alter_response(results)
}

/// AlterUserScramCredentials' answer: per user, its error code and message.
fn alter_response(
    results: Vec<(String, i16, Option<String>)>,
) -> AlterUserScramCredentialsResponse {
    AlterUserScramCredentialsResponse::default().with_results(
        results
            .into_iter()
            .map(|(user, code, message)| {
                AlterUserScramCredentialsResult::default()
                    .with_user(sb(user))
                    .with_error_code(code)
                    .with_error_message(message.map(sb))
            })
            .collect(),
    )
}

pub async fn handle_describe_user_scram_credentials(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    // DESCRIBE on the cluster (Kafka's `KafkaApis.handleDescribeUserScramCredentialsRequest`).
    if !authorize_cluster(broker, ctx, AclOperation::Describe) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(sb(e.to_string())));
    }
    let image = broker.replicas.controller().image().borrow().clone();
    // User → named twice; all users when none is named (Kafka's `ScramImage.describe`).
    let mut users: BTreeMap<String, bool> = BTreeMap::new();
    match req.users.as_deref() {
        None | Some([]) => {
            for u in image.scram_credentials.keys() {
                users.insert(u.clone(), false);
            }
        }
        Some(named) => {
            for u in named {
                users
                    .entry(u.name.to_string())
                    .and_modify(|twice| *twice = true)
                    .or_insert(false);
            }
        }
    }
    let results = users
        .into_iter()
        .map(|(user, duplicate)| {
            let r = DescribeUserScramCredentialsResult::default().with_user(sb(user.clone()));
            if duplicate {
                return r
                    .with_error_code(ResponseError::DuplicateResource.code())
                    .with_error_message(Some(sb(format!("{DESCRIBE_DUPLICATE_USER}{user}"))));
            }
            let infos: Vec<CredentialInfo> = ScramMechanism::ALL
                .into_iter()
                .filter_map(|m| {
                    let c = image.scram_credential(&user, m)?;
                    Some(
                        CredentialInfo::default()
                            .with_mechanism(m.type_id())
                            .with_iterations(c.iterations),
                    )
                })
                .collect();
            if infos.is_empty() {
                r.with_error_code(ResponseError::ResourceNotFound.code())
                    .with_error_message(Some(sb(format!(
                        "{DESCRIBE_USER_THAT_DOES_NOT_EXIST}{user}"
                    ))))
            } else {
                r.with_credential_infos(infos)
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}
