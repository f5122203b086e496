//! Old versions that real clients send, answered as at the newest version (issue 39's four
//! drops): ListOffsets v1-v3 (kafka-go v1, kcat v2, KafkaJS, aiokafka and rskafka v3) once
//! closed the connection because a v4 field was set; DescribeQuorum v0/v1 set a v2 field;
//! ElectLeaders v0 set a v1 field on its error path; Metadata v0 took an empty list for none.
//!
//! Each test keeps one connection for every version it sends, so a version that closes the
//! connection fails the next request, not only its own. The cluster tests take turns.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::cluster::CALL;
use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::wire::topic_name;
use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::describe_quorum_request::{
    PartitionData as QuorumPartition, TopicData as QuorumTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    DescribeQuorumRequest, ElectLeadersRequest, ListOffsetsRequest, MetadataRequest,
};

const LIST_OFFSETS_V_MAX: i16 = 10;
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
/// How long a fresh cluster may take to agree on a quorum leader.
const FAILOVER_WAIT: Duration = Duration::from_secs(45);

/// How long an ElectLeaders answer may take with the controller cut off: past the controller's
/// request timeout (30 s), which bounds a forwarded write.
const ELECTION_ANSWER_WAIT: Duration = Duration::from_secs(45);

/// One 3-node cluster at a time.
fn serial() -> MutexGuard<'static, ()> {
    static CLUSTER: Mutex<()> = Mutex::new(());
    CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

fn list_offsets(topic: &str, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])])
}

/// (error, offset, timestamp) of partition 0 at `version`, on the one connection `c`.
fn offset_at(c: &mut WireClient, version: i16, topic: &str, timestamp: i64) -> (i16, i64, i64) {
    let r = c
        .try_request(version, &list_offsets(topic, timestamp))
        .unwrap_or_else(|e| panic!("ListOffsets v{version} timestamp {timestamp}: {e}"));
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp)
}

#[test]
fn list_offsets_v1_to_v3_answer_what_the_newest_version_answers() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("old-list-offsets");
    c.ensure_topic(&topic);
    let recs: Vec<Rec> = (0..5)
        .map(|i| Rec::kv(&format!("k{i}"), &format!("v{i}"), 1_000 * (i + 1)))
        .collect();
    let r = c.produce(&topic, 0, encode_batch(Producer::NONE, &recs));
    assert_eq!(r.error_code, NONE, "{r:?}");

    let queries = [LATEST, EARLIEST, 2_500, 5_000, 9_999];
    let newest: Vec<_> = queries
        .iter()
        .map(|ts| offset_at(&mut c, LIST_OFFSETS_V_MAX, &topic, *ts))
        .collect();
    assert_eq!(
        newest,
        vec![
            (NONE, 5, -1),
            (NONE, 0, -1),
            (NONE, 2, 3_000),
            (NONE, 4, 5_000),
            (NONE, -1, -1)
        ]
    );
    for version in 1..LIST_OFFSETS_V_MAX {
        let got: Vec<_> = queries
            .iter()
            .map(|ts| offset_at(&mut c, version, &topic, *ts))
            .collect();
        assert_eq!(got, newest, "ListOffsets v{version} for {queries:?}");
    }
}

#[test]
fn metadata_v0_with_an_empty_list_returns_every_topic() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topics = [unique_topic("old-meta-a"), unique_topic("old-meta-b")];
    for t in &topics {
        c.ensure_topic(t);
    }
    let empty = MetadataRequest::default().with_topics(Some(Vec::<MetadataRequestTopic>::new()));
    let names = |r: &kafka_protocol::messages::MetadataResponse| -> Vec<String> {
        r.topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect()
    };
    // Kafka's MetadataRequest.isAllTopics: v0 has no null list, so empty means all.
    let v0 = c.request(0, &empty);
    for t in &topics {
        assert!(
            names(&v0).contains(t),
            "v0, empty list: {t} missing: {v0:?}"
        );
    }
    // From v1 an empty list asks for no topic.
    let v1 = c.request(1, &empty);
    assert!(names(&v1).is_empty(), "v1, empty list: {v1:?}");
}

fn quorum_request() -> DescribeQuorumRequest {
    DescribeQuorumRequest::default().with_topics(vec![QuorumTopic::default()
        .with_topic_name(topic_name("__cluster_metadata"))
        .with_partitions(vec![QuorumPartition::default().with_partition_index(0)])])
}

/// (leader, voters) of node `addr`'s answer at `version`, on one connection.
fn quorum_at(c: &mut WireClient, version: i16) -> Result<(i32, Vec<i32>), String> {
    let r = c.try_request(version, &quorum_request())?;
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| format!("v{version}: no partition: {r:?}"))?;
    if (r.error_code, p.error_code) != (NONE, NONE) {
        return Err(format!("v{version}: {r:?}"));
    }
    let mut voters: Vec<i32> = p.current_voters.iter().map(|v| v.replica_id.0).collect();
    voters.sort_unstable();
    Ok((p.leader_id.0, voters))
}

#[test]
fn describe_quorum_v0_and_v1_on_a_cluster_answer_what_v2_answers() {
    let _turn = serial();
    let c = Cluster::start(3, &[]);
    let addr = c.address(c.ids()[0]);
    let newest = poll_until_ok("the quorum has a leader", FAILOVER_WAIT, || {
        let mut client = WireClient::try_connect(&addr, CALL).map_err(|e| e.to_string())?;
        quorum_at(&mut client, 2)
    });
    assert_eq!(newest.1, vec![1, 2, 3]);
    let mut client = WireClient::connect(&addr);
    for version in [0, 1, 2] {
        let got = quorum_at(&mut client, version).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, newest, "DescribeQuorum v{version}");
    }
}

#[test]
fn elect_leaders_v0_answers_when_the_controller_cannot_be_reached() {
    let _turn = serial();
    // The node gives up on the controller after `controller.socket.timeout.ms`.
    let c = Cluster::start(3, &[("controller.socket.timeout.ms", "3000")]);
    let topic = unique_topic("old-elect");
    c.create_topic(&topic, 1, 3, &[]);
    let node = c.leader_of(&topic, 0);
    c.cut_link(node, "*", "controller");
    let req = ElectLeadersRequest::default()
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(topic_name(&topic))
            .with_partitions(vec![0])]))
        .with_timeout_ms(5_000);
    // The node waits for the controller up to its timeout; the socket waits longer.
    let mut client = WireClient::try_connect(&c.address(node), ELECTION_ANSWER_WAIT)
        .unwrap_or_else(|e| panic!("connect: {e}"));
    // v0 has no top-level error: the error is the partition's, and the connection stays open.
    let r = client
        .try_request(0, &req)
        .unwrap_or_else(|e| panic!("ElectLeaders v0 with the controller cut off: {e}"));
    let p = &r.replica_election_results[0].partition_result[0];
    assert_ne!(p.error_code, NONE, "{r:?}");
    assert_eq!(r.error_code, NONE, "v0 has no top-level error: {r:?}");
}
