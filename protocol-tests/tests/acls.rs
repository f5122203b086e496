//! ACLs over the raw wire, with `authorizer.class.name` set to Kafka's StandardAuthorizer:
//! CreateAcls/DescribeAcls/DeleteAcls validation as Kafka's `AclApis` and
//! `AclControlManager` answer it, enforcement of what is created (PLAINTEXT connections are
//! `User:ANONYMOUS` from 127.0.0.1), and on three nodes an ACL created through one node
//! enforced by the others while replication (CLUSTER_ACTION) goes on.
//!
//! The nodes run with `allow.everyone.if.no.acl.found=true` and no super user: resources
//! without ACLs (the cluster, so replication and ACL management) stay open, and each case's
//! own ACLs deny.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const AUTHORIZER: &[(&str, &str)] = &[
    (
        "authorizer.class.name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    ),
    ("allow.everyone.if.no.acl.found", "true"),
];

const V: i16 = 3;
const METADATA_V: i16 = 12;
const TOPIC: i8 = 2;
const CLUSTER: i8 = 4;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const ANY: i8 = 1;
const READ: i8 = 3;
const WRITE: i8 = 4;
const DESCRIBE: i8 = 8;
const DENY: i8 = 2;
const ALLOW: i8 = 3;
const INVALID_REQUEST: i16 = 42;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const UNKNOWN_SERVER_ERROR: i16 = -1;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn acl(
    rt: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    host: &str,
    op: i8,
    perm: i8,
) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern)
        .with_principal(s(principal))
        .with_host(s(host))
        .with_operation(op)
        .with_permission_type(perm)
}

fn create(c: &mut WireClient, acls: Vec<AclCreation>) -> Vec<(i16, Option<String>)> {
    let r = c.request(V, &CreateAclsRequest::default().with_creations(acls));
    r.results
        .iter()
        .map(|x| {
            (
                x.error_code,
                x.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

fn any_filter() -> DeleteAclsFilter {
    DeleteAclsFilter::default()
        .with_resource_type_filter(ANY)
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(ANY)
        .with_operation(ANY)
        .with_permission_type(ANY)
}

/// The (resource name, principal, operation, permission) of every ACL DescribeAcls lists.
fn described(c: &mut WireClient) -> Vec<(String, String, i8, i8)> {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(ANY)
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(ANY)
        .with_operation(ANY)
        .with_permission_type(ANY);
    let r = c.request(V, &req);
    assert_eq!(r.error_code, 0, "DescribeAcls: {r:?}");
    let mut out: Vec<_> = r
        .resources
        .iter()
        .flat_map(|res| {
            res.acls.iter().map(|a| {
                (
                    res.resource_name.to_string(),
                    a.principal.to_string(),
                    a.operation,
                    a.permission_type,
                )
            })
        })
        .collect();
    out.sort();
    out
}

/// The error Metadata answers for one named topic.
fn topic_error(c: &mut WireClient, topic: &str) -> i16 {
    let r = c.request(METADATA_V, &WireClient::metadata_request(&[topic], false));
    r.topics[0].error_code
}

fn produce_error(c: &mut WireClient, topic: &str) -> i16 {
    let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_700_000_000_000)]);
    let r = c.request(9, &WireClient::produce_request(topic, 0, batch, -1));
    r.responses[0].partition_responses[0].error_code
}

/// Per binding and filter, Kafka's AclApis and AclControlManager checks; creates one DENY
/// DESCRIBE on `secret`.
fn validation_errors(c: &mut WireClient, secret: &str) {
    let c = &mut *c;
    // Per binding: Kafka's AclApis and AclControlManager checks.
    let results = create(
        c,
        vec![
            acl(TOPIC, secret, LITERAL, "User:*", "*", DESCRIBE, DENY),
            acl(
                CLUSTER,
                "not-the-cluster",
                LITERAL,
                "User:a",
                "*",
                READ,
                ALLOW,
            ),
            acl(TOPIC, "", LITERAL, "User:a", "*", READ, ALLOW),
            acl(TOPIC, "t", 9, "User:a", "*", READ, ALLOW),
        ],
    );
    let codes: Vec<i16> = results.iter().map(|r| r.0).collect();
    assert_eq!(
        codes,
        [0, INVALID_REQUEST, INVALID_REQUEST, INVALID_REQUEST],
        "{results:?}"
    );
    assert_eq!(results[3].1.as_deref(), Some("Invalid patternType UNKNOWN"));
    // An ANY resource type cannot even be a binding in Kafka: the whole request fails.
    let results = create(
        c,
        vec![
            acl(TOPIC, "fine", LITERAL, "User:a", "*", READ, ALLOW),
            acl(ANY, "t", LITERAL, "User:a", "*", READ, ALLOW),
        ],
    );
    assert!(
        results.iter().all(|r| r.0 == UNKNOWN_SERVER_ERROR),
        "{results:?}"
    );
    // A filter with an unknown operation is refused; the others delete nothing here.
    let bad = any_filter().with_operation(99);
    let r = c.request(V, &DeleteAclsRequest::default().with_filters(vec![bad]));
    assert_eq!(r.filter_results[0].error_code, INVALID_REQUEST, "{r:?}");
}

#[test]
fn acl_apis_validate_as_kafka_and_their_acls_are_enforced() {
    let broker = Broker::start_with(AUTHORIZER);
    let mut c = WireClient::connect(&broker.bootstrap());
    let secret = unique_topic("secret");
    let open = unique_topic("open");
    c.ensure_topic(&secret);
    c.ensure_topic(&open);

    validation_errors(&mut c, &secret);

    // Enforcement: DENY DESCRIBE hides the topic from all-topics Metadata and refuses it by
    // name; the open topic is unaffected (no ACL on it, and the default allows).
    assert_eq!(topic_error(&mut c, &secret), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(topic_error(&mut c, &open), 0);
    let all = c.request(METADATA_V, &MetadataRequest::default().with_topics(None));
    let names: Vec<String> = all
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    assert!(
        names.contains(&open) && !names.contains(&secret),
        "{names:?}"
    );

    // A PREFIXED DENY for this host's principal; a LITERAL ALLOW does not override it.
    let prefix = unique_topic("pre");
    let under = format!("{prefix}-x");
    c.ensure_topic(&under);
    let results = create(
        &mut c,
        vec![
            acl(
                TOPIC,
                &prefix,
                PREFIXED,
                "User:ANONYMOUS",
                "127.0.0.1",
                WRITE,
                DENY,
            ),
            acl(TOPIC, &under, LITERAL, "User:ANONYMOUS", "*", WRITE, ALLOW),
        ],
    );
    assert!(results.iter().all(|r| r.0 == 0), "{results:?}");
    assert_eq!(produce_error(&mut c, &under), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(produce_error(&mut c, &open), 0);
    assert_eq!(described(&mut c).len(), 3);

    // DeleteAcls returns what it removed; then everything is open again.
    let r = c.request(
        V,
        &DeleteAclsRequest::default().with_filters(vec![any_filter()]),
    );
    assert_eq!(r.filter_results[0].matching_acls.len(), 3, "{r:?}");
    assert!(described(&mut c).is_empty());
    assert_eq!(produce_error(&mut c, &under), 0);
    assert_eq!(topic_error(&mut c, &secret), 0);

    // A binding with Kafka's UNKNOWN code cannot be parsed: the connection is closed.
    c.send(
        V,
        &CreateAclsRequest::default()
            .with_creations(vec![acl(0, "t", LITERAL, "User:a", "*", READ, ALLOW)]),
    );
    c.expect_closed(Duration::from_secs(10)).unwrap();
}

#[test]
fn an_acl_created_through_one_node_is_enforced_by_every_node_of_three() {
    let cluster = Cluster::start(3, AUTHORIZER);
    let secret = unique_topic("secret");
    let replicated = unique_topic("replicated");
    cluster.create_topic(&secret, 1, 3, &[]);
    cluster.create_topic(&replicated, 1, 3, &[]);
    let mut first = WireClient::connect(&cluster.address(1));
    let results = create(
        &mut first,
        vec![acl(
            TOPIC,
            &secret,
            LITERAL,
            "User:ANONYMOUS",
            "*",
            DESCRIBE,
            DENY,
        )],
    );
    assert_eq!(results[0].0, 0, "{results:?}");
    for id in [2, 3] {
        let mut c = WireClient::connect(&cluster.address(id));
        poll_until_ok(
            &format!("node {id} enforces the ACL"),
            Duration::from_secs(10),
            || match topic_error(&mut c, &secret) {
                TOPIC_AUTHORIZATION_FAILED => Ok(()),
                e => Err(format!("Metadata error {e}")),
            },
        );
        assert_eq!(described(&mut c).len(), 1, "node {id} lists the ACL");
    }
    // The followers still replicate (Fetch with a replica id needs CLUSTER_ACTION, which the
    // no-ACL default allows): acks=all with min.insync.replicas=2 commits.
    let leader = cluster.leader_of(&replicated, 0);
    let mut c = WireClient::connect(&cluster.address(leader));
    assert_eq!(produce_error(&mut c, &replicated), 0);
}

/// Share groups check the topics as Kafka's `KafkaApis` does: DESCRIBE on every subscribed
/// topic in ShareGroupHeartbeat (TOPIC_AUTHORIZATION_FAILED for the whole heartbeat), READ on
/// each topic of ShareFetch and ShareAcknowledge (TOPIC_AUTHORIZATION_FAILED on its partitions,
/// the fetch of the others going on).
#[test]
fn share_group_apis_check_topic_acls() {
    use kafka_protocol::messages::share_acknowledge_request as sar;
    use kafka_protocol::messages::share_fetch_request as sfr;
    let broker = Broker::start_with(AUTHORIZER);
    let mut c = WireClient::connect(&broker.bootstrap());
    let (hidden, unread, open) = (
        unique_topic("sh-h"),
        unique_topic("sh-u"),
        unique_topic("sh-o"),
    );
    let mut ids = Vec::new();
    for t in [&hidden, &unread, &open] {
        ids.push(c.ensure_topic(t).topic_id);
    }
    let denied = [(&hidden, DESCRIBE), (&unread, READ)]
        .map(|(t, op)| acl(TOPIC, t, LITERAL, "User:ANONYMOUS", "*", op, DENY));
    // An ACL on a topic turns off `allow.everyone.if.no.acl.found` for it: DESCRIBE is allowed
    // on `unread` explicitly.
    let mut acls = denied.to_vec();
    acls.push(acl(
        TOPIC,
        &unread,
        LITERAL,
        "User:ANONYMOUS",
        "*",
        DESCRIBE,
        ALLOW,
    ));
    assert!(create(&mut c, acls).iter().all(|r| r.0 == 0));
    let heartbeat = |c: &mut WireClient, topics: &[&String]| {
        let req = ShareGroupHeartbeatRequest::default()
            .with_group_id(s("sh-acl-g").into())
            .with_member_id(s("m-sh-acl-0000000000000000000"))
            .with_member_epoch(0)
            .with_subscribed_topic_names(Some(topics.iter().map(|t| s(t).into()).collect()));
        c.request(1, &req).error_code
    };
    assert_eq!(
        heartbeat(&mut c, &[&open, &hidden]),
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(heartbeat(&mut c, &[&open, &unread]), 0);

    let partition = |acks: Vec<sfr::AcknowledgementBatch>| {
        vec![sfr::FetchPartition::default()
            .with_partition_index(0)
            .with_acknowledgement_batches(acks)]
    };
    let ack = sfr::AcknowledgementBatch::default()
        .with_first_offset(0)
        .with_last_offset(0)
        .with_acknowledge_types(vec![1]);
    let req = ShareFetchRequest::default()
        .with_group_id(Some(s("sh-acl-g").into()))
        .with_member_id(Some(s("m-sh-acl-0000000000000000000")))
        .with_share_session_epoch(0)
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_max_records(10)
        .with_batch_size(10)
        .with_topics(vec![
            sfr::FetchTopic::default()
                .with_topic_id(ids[1])
                .with_partitions(partition(vec![])),
            sfr::FetchTopic::default()
                .with_topic_id(ids[2])
                .with_partitions(partition(vec![])),
        ]);
    let r = c.request(1, &req);
    assert_eq!(r.error_code, 0, "{r:?}");
    let code = |id| {
        let t = r
            .responses
            .iter()
            .find(|t| t.topic_id == id)
            .expect("topic answered");
        t.partitions[0].error_code
    };
    assert_eq!(
        (code(ids[1]), code(ids[2])),
        (TOPIC_AUTHORIZATION_FAILED, 0),
        "{r:?}"
    );

    let req = ShareAcknowledgeRequest::default()
        .with_group_id(Some(s("sh-acl-g").into()))
        .with_member_id(Some(s("m-sh-acl-0000000000000000000")))
        .with_share_session_epoch(1)
        .with_topics(vec![sar::AcknowledgeTopic::default()
            .with_topic_id(ids[1])
            .with_partitions(vec![sar::AcknowledgePartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(vec![
                    sar::AcknowledgementBatch::default()
                        .with_first_offset(ack.first_offset)
                        .with_last_offset(ack.last_offset)
                        .with_acknowledge_types(ack.acknowledge_types.clone()),
                ])])]);
    let r = c.request(1, &req);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        r.responses[0].partitions[0].error_code, TOPIC_AUTHORIZATION_FAILED,
        "{r:?}"
    );
}
