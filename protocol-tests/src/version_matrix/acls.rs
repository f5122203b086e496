//! The cases of the ACL APIs. The matrix's nodes run without an authorizer (as the
//! reference Kafka of `scripts/differential` does), so each answers SECURITY_DISABLED at
//! every version, per binding or filter where the answer has them
//! (`protocol-tests/tests/acls.rs` covers them with an authorizer).

use kafka_protocol::messages::*;

use super::env::{s, Env};
use super::Meaning;

type R = Result<Meaning, String>;

/// Kafka's codes: TOPIC, LITERAL, READ, ALLOW, and ANY for the filters.
const TOPIC: i8 = 2;
const LITERAL: i8 = 3;
const READ: i8 = 3;
const ALLOW: i8 = 3;
const ANY: i8 = 1;

pub fn describe_acls(env: &mut Env, v: i16) -> R {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(ANY)
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(ANY)
        .with_operation(ANY)
        .with_permission_type(ANY);
    let any = env.any();
    let r = env.call(any, v, &req)?;
    Ok(format!(
        "error {} resources {}",
        r.error_code,
        r.resources.len()
    ))
}

pub fn create_acls(env: &mut Env, v: i16) -> R {
    let topic = env.fresh("acl");
    let req = CreateAclsRequest::default().with_creations(vec![
        create_acls_request::AclCreation::default()
            .with_resource_type(TOPIC)
            .with_resource_name(s(&topic))
            .with_resource_pattern_type(LITERAL)
            .with_principal(s("User:alice"))
            .with_host(s("*"))
            .with_operation(READ)
            .with_permission_type(ALLOW),
    ]);
    let any = env.any();
    let r = env.call(any, v, &req)?;
    let codes: Vec<i16> = r.results.iter().map(|c| c.error_code).collect();
    Ok(format!("results {codes:?}"))
}

pub fn delete_acls(env: &mut Env, v: i16) -> R {
    let req = DeleteAclsRequest::default().with_filters(vec![
        delete_acls_request::DeleteAclsFilter::default()
            .with_resource_type_filter(ANY)
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_pattern_type_filter(ANY)
            .with_operation(ANY)
            .with_permission_type(ANY),
    ]);
    let any = env.any();
    let r = env.call(any, v, &req)?;
    let out: Vec<(i16, usize)> = r
        .filter_results
        .iter()
        .map(|f| (f.error_code, f.matching_acls.len()))
        .collect();
    Ok(format!("(error, matches) {out:?}"))
}
