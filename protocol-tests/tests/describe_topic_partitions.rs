//! DescribeTopicPartitions on a single node, over the raw wire: the paging rules of Kafka's
//! `KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse` (topics in name order, at most
//! `response_partition_limit` partitions, a cursor to go on from) and its errors.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::wire::{topic_name, CREATE_TOPICS_V};
use brook_protocol_tests::{unique_topic, Broker, WireClient};
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::{DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse};
use kafka_protocol::ResponseError;

const V: i16 = 0;

fn request(
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsRequest {
    DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(topic_name(t)))
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            Cursor::default()
                .with_topic_name(topic_name(t))
                .with_partition_index(p)
        }))
}

/// (topic, partition) of every partition in an answer, and its next cursor.
type Listing = (Vec<(String, i32)>, Option<(String, i32)>);

fn listed(r: &DescribeTopicPartitionsResponse) -> Listing {
    let parts = r
        .topics
        .iter()
        .flat_map(|t| {
            let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
            t.partitions
                .iter()
                .map(move |p| (name.clone(), p.partition_index))
        })
        .collect();
    let next = r
        .next_cursor
        .as_ref()
        .map(|c| (c.topic_name.to_string(), c.partition_index));
    (parts, next)
}

#[test]
fn pages_through_topics_in_name_order_with_a_cursor() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let prefix = unique_topic("dtp");
    let (a, b) = (format!("{prefix}-a"), format!("{prefix}-b"));
    for (t, n) in [(&b, 2), (&a, 3)] {
        let req = WireClient::create_topics_request(t, n, 1, &[], Duration::from_secs(10));
        let resp = c.request(CREATE_TOPICS_V, &req);
        assert_eq!(resp.topics[0].error_code, NONE, "{resp:?}");
    }
    let at = |t: &str, p: i32| (t.to_string(), p);

    // Named in any order, answered in name order; two partitions per page.
    let r = c.request(V, &request(&[&b, &a], 2, None));
    assert_eq!(listed(&r), (vec![at(&a, 0), at(&a, 1)], Some(at(&a, 2))));
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, NONE);
    assert_eq!(p.leader_id.0, 1, "{p:?}");
    assert_eq!(
        p.eligible_leader_replicas.as_deref(),
        Some(&[][..]),
        "{p:?}"
    );
    let r = c.request(V, &request(&[&b, &a], 2, Some((&a, 2))));
    assert_eq!(listed(&r), (vec![at(&a, 2), at(&b, 0)], Some(at(&b, 1))));
    let r = c.request(V, &request(&[&b, &a], 2, Some((&b, 1))));
    assert_eq!(listed(&r), (vec![at(&b, 1)], None));
    // A page that ends with a topic's last partition points at the next topic's start.
    let r = c.request(V, &request(&[&b, &a], 3, None));
    assert_eq!(
        listed(&r),
        (vec![at(&a, 0), at(&a, 1), at(&a, 2)], Some(at(&b, 0)))
    );

    // An unknown topic is answered with its error; the others as usual.
    let missing = format!("{prefix}-c");
    let r = c.request(V, &request(&[&missing, &b], 10, None));
    assert_eq!(listed(&r).0, vec![at(&b, 0), at(&b, 1)]);
    let t = r
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(missing.as_str()))
        .unwrap();
    assert_eq!(
        t.error_code,
        ResponseError::UnknownTopicOrPartition.code(),
        "{t:?}"
    );

    // No topic named: every topic, from the cursor on.
    let r = c.request(V, &request(&[], 10, Some((&b, 0))));
    assert!(listed(&r).0.starts_with(&[at(&b, 0), at(&b, 1)]), "{r:?}");

    // A cursor outside the named topics, or at a negative partition, is INVALID_REQUEST.
    for cursor in [(missing.as_str(), 0), (a.as_str(), -1)] {
        let r = c.request(V, &request(&[&a], 10, Some(cursor)));
        assert_eq!(
            r.topics[0].error_code,
            ResponseError::InvalidRequest.code(),
            "cursor {cursor:?}: {r:?}"
        );
    }
}
