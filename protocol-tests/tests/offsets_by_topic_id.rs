//! OffsetCommit v10, OffsetFetch v10 and TxnOffsetCommit v6 name topics by id (Kafka's
//! `KafkaApis.handleOffsetCommitRequest`, `fetchOffsetsForGroup`, `fetchAllOffsetsForGroup` and
//! `handleTxnOffsetCommitRequest`): a known id commits and fetches as its name does below
//! these versions, and answers with the id; an id the metadata does not know answers
//! UNKNOWN_TOPIC_ID on each of its partitions (OffsetFetch after the found topics, with offset
//! -1), while the request's other topics are served. Runs on Kafka 4.4 too
//! (`BROOK_BIN=protocol-tests/java/scripts/kafka-as-brook.sh`).
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::{poll_until, unique_topic, Broker, WireClient};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

const UNKNOWN_TOPIC_ID: i16 = ResponseError::UnknownTopicId.code();

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// An admin commit (no member) of `offset + p` to partitions 0 and 1 of each topic id.
fn commit_by_id(
    c: &mut WireClient,
    group: &str,
    ids: &[Uuid],
    offset: i64,
) -> OffsetCommitResponse {
    let topic = |id: &Uuid| {
        OffsetCommitRequestTopic::default()
            .with_topic_id(*id)
            .with_partitions(
                (0..2)
                    .map(|p| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(offset + p as i64)
                    })
                    .collect(),
            )
    };
    let req = OffsetCommitRequest::default()
        .with_group_id(s(group).into())
        .with_generation_id_or_member_epoch(-1)
        .with_topics(ids.iter().map(topic).collect());
    c.request(10, &req)
}

/// (topic id, partition, offset, error) of every partition of an OffsetFetch v10 answer.
fn fetched(r: &OffsetFetchResponse) -> Vec<(Uuid, i32, i64, i16)> {
    r.groups
        .iter()
        .flat_map(|g| &g.topics)
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.topic_id,
                    p.partition_index,
                    p.committed_offset,
                    p.error_code,
                )
            })
        })
        .collect()
}

fn fetch_by_id(c: &mut WireClient, group: &str, ids: Option<&[Uuid]>) -> OffsetFetchResponse {
    let topics = ids.map(|ids| {
        ids.iter()
            .map(|id| {
                OffsetFetchRequestTopics::default()
                    .with_topic_id(*id)
                    .with_partition_indexes(vec![0, 1])
            })
            .collect()
    });
    let req = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(s(group).into())
        .with_topics(topics)]);
    c.request(10, &req)
}

#[test]
fn offsets_by_topic_id_and_unknown_ids() {
    let broker = Broker::start_with(&[("offsets.topic.num.partitions", "1")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("by-id");
    let req = WireClient::create_topics_request(&topic, 2, 1, &[], Duration::from_secs(10));
    let created: CreateTopicsResponse = c.request(7, &req);
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let id = created.topics[0].topic_id;
    let unknown = Uuid::new_v4();
    let group = unique_topic("by-id-group");

    // OffsetCommit v10: the known id commits, the unknown one (and the nil id) answer
    // UNKNOWN_TOPIC_ID per partition; each topic answers with its id. (Kafka answers the
    // refused topics first, Brook in request order: a client matches them by id. Kafka's
    // offsets topic is created by the first FindCoordinator: the commit is retried until its
    // coordinator serves it.)
    let codes = poll_until(
        "the group's coordinator commits",
        Duration::from_secs(30),
        || {
            // Kafka creates its offsets topic on the first FindCoordinator.
            let find = FindCoordinatorRequest::default().with_key(s(&group));
            let _: FindCoordinatorResponse = c.request(3, &find);
            let r = commit_by_id(&mut c, &group, &[id, unknown, Uuid::nil()], 5);
            let mut codes: Vec<(Uuid, Vec<i16>)> = r
                .topics
                .iter()
                .map(|t| {
                    (
                        t.topic_id,
                        t.partitions.iter().map(|p| p.error_code).collect(),
                    )
                })
                .collect();
            codes.sort();
            codes
                .iter()
                .any(|(t, cs)| *t == id && cs == &[0, 0])
                .then_some(codes)
        },
    );
    let mut expected = vec![
        (id, vec![0, 0]),
        (unknown, vec![UNKNOWN_TOPIC_ID; 2]),
        (Uuid::nil(), vec![UNKNOWN_TOPIC_ID; 2]),
    ];
    expected.sort();
    assert_eq!(codes, expected);

    // OffsetFetch v10, named by id: the found topic first, the unknown id after it.
    let r = fetch_by_id(&mut c, &group, Some(&[unknown, id]));
    assert_eq!(r.groups[0].error_code, 0, "{r:?}");
    assert_eq!(
        fetched(&r),
        vec![
            (id, 0, 5, 0),
            (id, 1, 6, 0),
            (unknown, 0, -1, UNKNOWN_TOPIC_ID),
            (unknown, 1, -1, UNKNOWN_TOPIC_ID),
        ],
        "{r:?}"
    );
    // All topics: the committed topic, by id.
    let r = fetch_by_id(&mut c, &group, None);
    assert_eq!(fetched(&r), vec![(id, 0, 5, 0), (id, 1, 6, 0)], "{r:?}");

    // Below v10 the same offsets are the topic name's.
    let req = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(s(&group).into())
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(s(&topic).into())
            .with_partition_indexes(vec![1])]))]);
    let r: OffsetFetchResponse = c.request(9, &req);
    let t = &r.groups[0].topics[0];
    assert_eq!(
        (t.name.as_str(), t.partitions[0].committed_offset),
        (topic.as_str(), 6)
    );

    // TxnOffsetCommit v6: an unknown id answers UNKNOWN_TOPIC_ID before the transaction is
    // looked at (this producer has none: the known id gets the coordinator's answer).
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(s("no-such-txn").into())
        .with_group_id(s(&group).into())
        .with_producer_id((-1).into())
        .with_producer_epoch(-1)
        .with_generation_id(-1)
        .with_topics(
            [unknown, id]
                .iter()
                .map(|t| {
                    TxnOffsetCommitRequestTopic::default()
                        .with_topic_id(*t)
                        .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(9)])
                })
                .collect(),
        );
    let r: TxnOffsetCommitResponse = c.request(6, &req);
    assert_eq!(r.topics[0].topic_id, unknown, "{r:?}");
    assert_eq!(
        r.topics[0].partitions[0].error_code, UNKNOWN_TOPIC_ID,
        "{r:?}"
    );
    assert_eq!(r.topics[1].topic_id, id, "{r:?}");
    assert_ne!(
        r.topics[1].partitions[0].error_code, UNKNOWN_TOPIC_ID,
        "{r:?}"
    );
}
