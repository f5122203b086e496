//! CreateAcls, DescribeAcls and DeleteAcls (Kafka's `AclApis`): ACLs are written through the
//! active controller as metadata records and read from this node's authorizer.
//!
//! Kafka refuses some requests while parsing them, before any handler: a creation or filter
//! carrying the UNKNOWN code (0) of a resource type, pattern type, operation or permission
//! (`CreateAclsRequest.validate`, `DescribeAclsRequest`/`DeleteAclsRequest`
//! `normalizeAndValidate`) closes the connection, as any unparsable request does. A creation
//! with an ANY or MATCH code cannot even be turned into a binding (`ResourcePattern` and
//! `AccessControlEntry` throw), which fails the whole request with UNKNOWN_SERVER_ERROR.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::auth_helper::{authorize_cluster, cluster_denied_message};
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::net::codec::CodecError;
use crate::security::acl::{
    AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType, StandardAcl,
    CLUSTER_NAME,
};

/// Kafka's `SecurityDisabledException` message for CreateAcls and DeleteAcls.
const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// Kafka's UNKNOWN_SERVER_ERROR message.
const UNKNOWN_SERVER_ERROR_MESSAGE: &str =
    "The server experienced an unexpected error when processing the request.";

/// Whether any of the four codes is UNKNOWN (0): Kafka cannot parse such a request.
fn has_unknown_code(codes: [i8; 4]) -> bool {
    codes.contains(&0)
}

fn unparsable(ctx: &RequestContext, what: &str) -> CodecError {
    CodecError::Malformed(format!(
        "{:?} v{}: {what} contain UNKNOWN elements",
        ctx.api_key, ctx.api_version
    ))
}

fn filter_of(
    rt: i8,
    name: &Option<StrBytes>,
    pt: i8,
    principal: &Option<StrBytes>,
    host: &Option<StrBytes>,
    op: i8,
    perm: i8,
) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: ResourceType::from_code(rt),
        resource_name: name.as_ref().map(|s| s.to_string()),
        pattern_type: PatternType::from_code(pt),
        principal: principal.as_ref().map(|s| s.to_string()),
        host: host.as_ref().map(|s| s.to_string()),
        operation: AclOperation::from_code(op),
        permission_type: AclPermissionType::from_code(perm),
    }
}

/// DescribeAcls: DESCRIBE on the cluster; the ACLs the filter selects, by resource pattern.
pub async fn handle_describe_acls(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeAclsRequest,
) -> Result<DescribeAclsResponse, CodecError> {
    let codes = [
        req.resource_type_filter,
        req.pattern_type_filter,
        req.operation,
        req.permission_type,
    ];
    if has_unknown_code(codes) {
        return Err(unparsable(ctx, "DescribeAclsRequest"));
    }
    let error = |e: ResponseError, message: String| {
        DescribeAclsResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(sb(message)))
    };
    if !authorize_cluster(broker, ctx, AclOperation::Describe) {
        return Ok(error(
            ResponseError::ClusterAuthorizationFailed,
            cluster_denied_message(ctx),
        ));
    }
    let Some(authorizer) = broker.authorizer() else {
        return Ok(error(
            ResponseError::SecurityDisabled,
            "No Authorizer is configured on the broker".into(),
        ));
    };
    let filter = filter_of(
        req.resource_type_filter,
        &req.resource_name_filter,
        req.pattern_type_filter,
        &req.principal_filter,
        &req.host_filter,
        req.operation,
        req.permission_type,
    );
    Ok(DescribeAclsResponse::default().with_resources(described(authorizer.acls(&filter))))
}

/// Kafka's `DescribeAclsResponse.aclsResources`: the ACLs grouped by resource pattern
/// (here in a stable order: type, name, pattern type).
fn described(acls: Vec<StandardAcl>) -> Vec<DescribeAclsResource> {
    let mut by_pattern: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for a in acls {
        let key = (
            a.resource_type.code(),
            a.resource_name.clone(),
            a.pattern_type.code(),
        );
        by_pattern.entry(key).or_default().push(
            AclDescription::default()
                .with_principal(sb(a.principal))
                .with_host(sb(a.host))
                .with_operation(a.operation.code())
                .with_permission_type(a.permission_type.code()),
        );
    }
    by_pattern
        .into_iter()
        .map(|((rt, name, pt), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(rt)
                .with_resource_name(sb(name))
                .with_pattern_type(pt)
                .with_acls(acls)
        })
        .collect()
}

/// Kafka's `AclApis.handleCreateAcls` checks before the controller's: the CLUSTER resource
/// has one name, and no resource name is empty. Per binding its refusal, and the bindings
/// that passed.
fn broker_checks(
    bindings: Vec<StandardAcl>,
) -> (Vec<Option<(ResponseError, String)>>, Vec<StandardAcl>) {
    let mut results: Vec<Option<(ResponseError, String)>> = Vec::with_capacity(bindings.len());
    let mut valid = Vec::new();
    for acl in bindings {
        let refused =
            if acl.resource_type == ResourceType::Cluster && acl.resource_name != CLUSTER_NAME {
                Some(format!(
                    "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
                ))
            } else if acl.resource_name.is_empty() {
                Some("Invalid empty resource name".to_string())
            } else {
                None
            };
        results.push(refused.map(|m| (ResponseError::InvalidRequest, m)));
        if results.last().is_some_and(Option::is_none) {
            valid.push(acl);
        }
    }
    (results, valid)
}

fn creation_result(error: Option<(ResponseError, String)>) -> AclCreationResult {
    match error {
        None => AclCreationResult::default(),
        Some((e, message)) => AclCreationResult::default()
            .with_error_code(e.code())
            .with_error_message(Some(sb(message))),
    }
}

fn create_response(results: Vec<AclCreationResult>) -> CreateAclsResponse {
    CreateAclsResponse::default().with_results(results)
}

/// Kafka's `CreateAclsRequest.aclBinding`: `None` where Kafka's `ResourcePattern` or
/// `AccessControlEntry` constructor throws (ANY resource type, MATCH or ANY pattern, ANY
/// operation or permission).
fn binding(c: &AclCreation) -> Option<StandardAcl> {
    let acl = StandardAcl {
        resource_type: ResourceType::from_code(c.resource_type),
        resource_name: c.resource_name.to_string(),
        pattern_type: PatternType::from_code(c.resource_pattern_type),
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: AclOperation::from_code(c.operation),
        permission_type: AclPermissionType::from_code(c.permission_type),
    };
    let throws = acl.resource_type == ResourceType::Any
        || matches!(acl.pattern_type, PatternType::Match | PatternType::Any)
        || acl.operation == AclOperation::Any
        || acl.permission_type == AclPermissionType::Any;
    (!throws).then_some(acl)
}

/// CreateAcls: ALTER on the cluster; each binding checked here (`AclApis.handleCreateAcls`)
/// and by the controller (`AclControlManager.validateNewAcl`), then written.
pub async fn handle_create_acls(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreateAclsRequest,
) -> Result<CreateAclsResponse, CodecError> {
    let all = |e: ResponseError, m: &str| {
        create_response(vec![
            creation_result(Some((e, m.to_string())));
            req.creations.len()
        ])
    };
    if req.creations.iter().any(|c| {
        has_unknown_code([
            c.resource_type,
            c.resource_pattern_type,
            c.operation,
            c.permission_type,
        ])
    }) {
        return Err(unparsable(ctx, "CreatableAcls"));
    }
    if !authorize_cluster(broker, ctx, AclOperation::Alter) {
        return Ok(all(
            ResponseError::ClusterAuthorizationFailed,
            &cluster_denied_message(ctx),
        ));
    }
    if broker.authorizer().is_none() {
        return Ok(all(ResponseError::SecurityDisabled, NO_AUTHORIZER));
    }
    let Some(bindings) = req
        .creations
        .iter()
        .map(binding)
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(all(
            ResponseError::UnknownServerError,
            UNKNOWN_SERVER_ERROR_MESSAGE,
        ));
    };
    let (results, valid) = broker_checks(bindings);
    let decided = broker.replicas.controller().create_acls(valid).await;
    broker.replicas.wait_caught_up().await;
    let mut decided = match decided {
        Ok(r) => r
            .into_iter()
            .map(|e| e.map(|m| (ResponseError::InvalidRequest, m)))
            .collect::<Vec<_>>(),
        Err(e) => {
            let n = results.iter().filter(|r| r.is_none()).count();
            vec![Some((e.response_error(), e.to_string())); n]
        }
    }
    .into_iter();
    let results = results
        .into_iter()
        .map(|r| creation_result(r.or_else(|| decided.next().flatten())))
        .collect();
    Ok(create_response(results))
}

fn filter_result(error: ResponseError, message: String) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(error.code())
        .with_error_message(Some(sb(message)))
}

fn matching_acl(a: StandardAcl) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(a.resource_type.code())
        .with_resource_name(sb(a.resource_name))
        .with_pattern_type(a.pattern_type.code())
        .with_principal(sb(a.principal))
        .with_host(sb(a.host))
        .with_operation(a.operation.code())
        .with_permission_type(a.permission_type.code())
}

fn delete_filter(f: &DeleteAclsFilter) -> AclBindingFilter {
    filter_of(
        f.resource_type_filter,
        &f.resource_name_filter,
        f.pattern_type_filter,
        &f.principal_filter,
        &f.host_filter,
        f.operation,
        f.permission_type,
    )
}

/// DeleteAcls: ALTER on the cluster; every ACL each filter selects is deleted and returned.
pub async fn handle_delete_acls(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteAclsRequest,
) -> Result<DeleteAclsResponse, CodecError> {
    if req.filters.iter().any(|f| {
        has_unknown_code([
            f.resource_type_filter,
            f.pattern_type_filter,
            f.operation,
            f.permission_type,
        ])
    }) {
        return Err(unparsable(ctx, "Filters"));
    }
    let all = |e: ResponseError, m: String| {
        DeleteAclsResponse::default()
            .with_filter_results(vec![filter_result(e, m); req.filters.len()])
    };
    if !authorize_cluster(broker, ctx, AclOperation::Alter) {
        return Ok(all(
            ResponseError::ClusterAuthorizationFailed,
            cluster_denied_message(ctx),
        ));
    }
    if broker.authorizer().is_none() {
        return Ok(all(ResponseError::SecurityDisabled, NO_AUTHORIZER.into()));
    }
    let filters = req.filters.iter().map(delete_filter).collect();
    let decided = broker.replicas.controller().delete_acls(filters).await;
    broker.replicas.wait_caught_up().await;
    let results = match decided {
        Ok(r) => r
            .into_iter()
            .map(|r| match r {
                Ok(acls) => DeleteAclsFilterResult::default()
                    .with_matching_acls(acls.into_iter().map(matching_acl).collect()),
                Err(m) => filter_result(ResponseError::InvalidRequest, m),
            })
            .collect(),
        Err(e) => vec![filter_result(e.response_error(), e.to_string()); req.filters.len()],
    };
    Ok(DeleteAclsResponse::default().with_filter_results(results))
}
