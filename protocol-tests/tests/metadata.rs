//! Metadata's topic auto-creation over the raw wire, as Kafka 4.4 answers it
//! (`KafkaApis.getTopicMetadata`, `DefaultAutoTopicCreationManager.createTopics` in KRaft
//! mode): the creation is sent to the controller and the request is answered without waiting
//! for it, the topic UNKNOWN_TOPIC_OR_PARTITION with no partitions. Clients retry Metadata
//! until the topic shows up with its partitions.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::{INVALID_TOPIC_EXCEPTION, NONE, UNKNOWN_TOPIC_OR_PARTITION};
use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, WireClient};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;

const CREATED_WAIT: Duration = Duration::from_secs(20);

/// The one topic of a Metadata answer for `topic`.
fn metadata_topic(c: &mut WireClient, topic: &str, auto_create: bool) -> MetadataResponseTopic {
    let md = c.metadata(&[topic], auto_create);
    assert_eq!(md.topics.len(), 1, "Metadata for {topic}: {md:?}");
    md.topics[0].clone()
}

/// Polls Metadata without auto-creation until `topic` is listed without error; its
/// partition count.
fn await_listed(c: &mut WireClient, topic: &str) -> usize {
    poll_until_ok(&format!("{topic} listed by Metadata"), CREATED_WAIT, || {
        let t = metadata_topic(c, topic, false);
        match t.error_code {
            NONE => Ok(t.partitions.len()),
            code => Err(format!("error {code}")),
        }
    })
}

#[test]
fn auto_creation_answers_unknown_topic_at_once_and_creates_in_the_background() {
    let broker = Broker::start_with(&[("num.partitions", "3")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("auto-create");

    let t = metadata_topic(&mut c, &topic, true);
    assert_eq!(
        (t.error_code, t.partitions.len(), t.is_internal),
        (UNKNOWN_TOPIC_OR_PARTITION, 0, false),
        "the Metadata that starts the creation: {t:?}"
    );
    // Asked again at once: in flight (UNKNOWN_TOPIC_OR_PARTITION again), or already done.
    let t = metadata_topic(&mut c, &topic, true);
    assert!(
        t.error_code == UNKNOWN_TOPIC_OR_PARTITION && t.partitions.is_empty()
            || t.error_code == NONE && t.partitions.len() == 3,
        "asked again: {t:?}"
    );
    assert_eq!(await_listed(&mut c, &topic), 3, "num.partitions");

    // An invalid name is refused, and nothing is created for it.
    let t = metadata_topic(&mut c, "bad/name", true);
    assert_eq!(
        (t.error_code, t.partitions.len()),
        (INVALID_TOPIC_EXCEPTION, 0),
        "{t:?}"
    );
}

/// Produce does not auto-create (Kafka 4.4 never did): the topic stays unknown.
#[test]
fn produce_to_a_missing_topic_creates_nothing() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("produce-no-create");
    let r = c.produce(
        &topic,
        0,
        encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1)]),
    );
    assert_eq!(r.error_code, UNKNOWN_TOPIC_OR_PARTITION, "{r:?}");
    // A topic auto-created after it is listed first: the controller would have created the
    // produced-to topic before it.
    let later = unique_topic("produce-no-create-later");
    metadata_topic(&mut c, &later, true);
    await_listed(&mut c, &later);
    let t = metadata_topic(&mut c, &topic, false);
    assert_eq!(t.error_code, UNKNOWN_TOPIC_OR_PARTITION, "{t:?}");
}

/// An internal topic is auto-created as its coordinator creates it (Kafka's
/// `DefaultAutoTopicCreationManager.creatableTopic`): `__consumer_offsets` with
/// `offsets.topic.num.partitions`, not `num.partitions`; the answer marks it internal.
#[test]
fn auto_creating_the_offsets_topic_uses_the_coordinators_settings() {
    let broker = Broker::start_with(&[
        ("num.partitions", "3"),
        ("offsets.topic.num.partitions", "2"),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let t = metadata_topic(&mut c, "__consumer_offsets", true);
    assert_eq!(
        (t.error_code, t.partitions.len(), t.is_internal),
        (UNKNOWN_TOPIC_OR_PARTITION, 0, true),
        "{t:?}"
    );
    assert_eq!(
        await_listed(&mut c, "__consumer_offsets"),
        2,
        "offsets.topic.num.partitions"
    );
}

/// Only Kafka's own internal topics are marked internal (`Topic.isInternal`): a user topic
/// whose name starts with `__` is an ordinary topic, which a client-side regex may match.
#[test]
fn only_kafkas_internal_topics_are_internal() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let user = format!("__{}", unique_topic("user"));
    c.ensure_topic(&user);
    // FindCoordinator creates `__consumer_offsets`, as a group's first client does.
    c.ensure_topic("__consumer_offsets");
    for (topic, internal) in [(user.as_str(), false), ("__consumer_offsets", true)] {
        let t = metadata_topic(&mut c, topic, false);
        assert_eq!((t.error_code, t.is_internal), (NONE, internal), "{t:?}");
    }
}

/// A leader that Metadata names has taken its role: a produce sent the moment an
/// auto-created topic is listed is accepted, not refused NOT_LEADER_OR_FOLLOWER while the
/// node still opens the topic's partition logs. (Metadata once answered from the quorum's
/// newest image, ahead of the node applying it; kafka-go's `TestConn` subtests, which
/// produce once on a fresh topic without retrying, failed on it.) Many partitions per topic
/// make the apply long enough to be seen: the last partition takes its role last.
#[test]
fn a_listed_leader_accepts_a_produce_at_once() {
    const PARTITIONS: i32 = 64;
    let broker = Broker::start_with(&[("num.partitions", &PARTITIONS.to_string())]);
    let mut c = WireClient::connect(&broker.bootstrap());
    for round in 0..3 {
        let topic = unique_topic(&format!("listed-leader-{round}"));
        metadata_topic(&mut c, &topic, true);
        await_listed(&mut c, &topic);
        let r = c.produce(
            &topic,
            PARTITIONS - 1,
            encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1)]),
        );
        assert_eq!(
            r.error_code, NONE,
            "produce to {topic}'s last partition right after Metadata listed it: {r:?}"
        );
    }
}
