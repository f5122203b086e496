//! Incremental fetch sessions (KIP-227) over the raw wire against a real `brook` process:
//! a full fetch with epoch 0 opens a session; a later fetch naming no partitions reads the
//! session's and is answered only the partitions with news; a replayed epoch, an unknown
//! session, or a session of the other topic-naming kind get Kafka's session errors; dropping
//! every partition closes the session; with no cache slots no session opens.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::wire::topic_name;
use brook_protocol_tests::{unique_topic, Broker, WireClient};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;
use uuid::Uuid;

const PARTITIONS: i32 = 3;

/// A fetch of `partitions` of `topic` (by name before v13, by `topic_id` from v13) from
/// offset 0, answered at once.
fn fetch_request(
    topic: &str,
    topic_id: Uuid,
    partitions: &[i32],
    (session_id, epoch): (i32, i32),
) -> FetchRequest {
    let parts = partitions
        .iter()
        .map(|&p| {
            FetchPartition::default()
                .with_partition(p)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(0)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)
        })
        .collect::<Vec<_>>();
    let topics = if parts.is_empty() {
        vec![]
    } else {
        vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_topic_id(topic_id)
            .with_partitions(parts)]
    };
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(4 << 20)
        .with_session_id(session_id)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

/// (partition, records bytes, high watermark) of each partition answered, in order.
fn answered(resp: &FetchResponse) -> Vec<(i32, usize, i64)> {
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                p.records.as_ref().map_or(0, |r| r.len()),
                p.high_watermark,
            )
        })
        .collect()
}

fn produce_one(c: &mut WireClient, topic: &str, partition: i32) {
    let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_000)]);
    let r = c.produce(topic, partition, batch);
    assert_eq!(r.error_code, NONE, "{r:?}");
}

/// Creates `topic` (3 partitions) with one record in partition 0; returns its id.
fn setup(c: &mut WireClient, topic: &str) -> Uuid {
    let t = c.ensure_topic(topic);
    assert_eq!(t.partitions.len(), PARTITIONS as usize);
    produce_one(c, topic, 0);
    t.topic_id
}

#[test]
fn an_incremental_fetch_answers_only_the_partitions_with_news() {
    let broker = Broker::start_with(&[("num.partitions", "3")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("fetch-session");
    let id = setup(&mut c, &topic);
    let all = [0, 1, 2];

    // Full fetch asking for a session: every partition answered, and a session id.
    let full = c.request(12, &fetch_request(&topic, id, &all, (0, 0)));
    assert_eq!(full.error_code, 0, "{full:?}");
    let session = full.session_id;
    assert_ne!(
        session, 0,
        "a full fetch with epoch 0 opens a session: {full:?}"
    );
    let got = answered(&full);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got[0].1 > 0, "partition 0's record: {got:?}");

    // Epoch 1, no partitions named: the session's partitions are read, nothing changed
    // (the record is fetched again from the cached offset 0, so partition 0 is answered).
    let inc = c.request(12, &fetch_request(&topic, id, &[], (session, 1)));
    assert_eq!((inc.error_code, inc.session_id), (0, session), "{inc:?}");
    assert_eq!(
        answered(&inc).iter().map(|p| p.0).collect::<Vec<_>>(),
        vec![0],
        "only the partition with records: {inc:?}"
    );

    // A record in partition 2: its high watermark moved and it has records. Partition 0,
    // answered records last time, moved to the back of the session's order.
    produce_one(&mut c, &topic, 2);
    let inc = c.request(12, &fetch_request(&topic, id, &[], (session, 2)));
    let got = answered(&inc);
    assert_eq!(
        got.iter().map(|p| p.0).collect::<Vec<_>>(),
        vec![2, 0],
        "{inc:?}"
    );
    assert_eq!(got[0].2, 1, "partition 2's new high watermark: {got:?}");

    // The same epoch again is a duplicate; an unknown session is not found.
    let dup = c.request(12, &fetch_request(&topic, id, &[], (session, 2)));
    assert_eq!(
        (dup.error_code, answered(&dup).len()),
        (ResponseError::InvalidFetchSessionEpoch.code(), 0),
        "{dup:?}"
    );
    let unknown = c.request(12, &fetch_request(&topic, id, &[], (session ^ 1, 1)));
    assert_eq!(
        unknown.error_code,
        ResponseError::FetchSessionIdNotFound.code(),
        "{unknown:?}"
    );
    // This session names topics by name; a v13 fetch names them by id.
    let by_id = c.request(13, &fetch_request(&topic, id, &[], (session, 3)));
    assert_eq!(
        by_id.error_code,
        ResponseError::FetchSessionTopicIdError.code(),
        "{by_id:?}"
    );

    // Forgetting every partition closes the session: the answer has no session id.
    let mut forget = fetch_request(&topic, id, &[], (session, 3));
    forget.forgotten_topics_data = vec![ForgottenTopic::default()
        .with_topic(topic_name(&topic))
        .with_partitions(all.to_vec())];
    let closed = c.request(12, &forget);
    assert_eq!((closed.error_code, closed.session_id), (0, 0), "{closed:?}");
    let gone = c.request(12, &fetch_request(&topic, id, &[], (session, 4)));
    assert_eq!(
        gone.error_code,
        ResponseError::FetchSessionIdNotFound.code(),
        "{gone:?}"
    );
}

#[test]
fn a_session_by_topic_id_reads_what_the_fetcher_moved_on_from() {
    let broker = Broker::start_with(&[("num.partitions", "3")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("fetch-session-id");
    let id = setup(&mut c, &topic);

    let full = c.request(17, &fetch_request(&topic, id, &[0, 1, 2], (0, 0)));
    let session = full.session_id;
    assert_ne!(session, 0, "{full:?}");
    assert!(full.responses.iter().all(|t| t.topic_id == id), "{full:?}");
    // The fetcher moves partition 0 past its record: named with its new offset, it has
    // nothing new and is left out.
    let mut moved = fetch_request(&topic, id, &[0], (session, 1));
    moved.topics[0].partitions[0].fetch_offset = 1;
    let inc = c.request(17, &moved);
    assert_eq!((inc.error_code, inc.session_id), (0, session), "{inc:?}");
    assert!(answered(&inc).is_empty(), "{inc:?}");
    // A full fetch naming the session closes it and opens another.
    let again = c.request(17, &fetch_request(&topic, id, &[0], (session, 0)));
    assert_ne!(again.session_id, 0, "{again:?}");
    assert_ne!(again.session_id, session, "{again:?}");
    let old = c.request(17, &fetch_request(&topic, id, &[], (session, 2)));
    assert_eq!(
        old.error_code,
        ResponseError::FetchSessionIdNotFound.code(),
        "{old:?}"
    );
}

#[test]
fn without_cache_slots_no_session_opens_and_a_final_epoch_wants_none() {
    let broker = Broker::start_with(&[
        ("num.partitions", "3"),
        ("max.incremental.fetch.session.cache.slots", "0"),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("fetch-session-none");
    let id = setup(&mut c, &topic);
    let full = c.request(12, &fetch_request(&topic, id, &[0, 1, 2], (0, 0)));
    assert_eq!((full.error_code, full.session_id), (0, 0), "{full:?}");
    assert_eq!(answered(&full).len(), 3, "{full:?}");

    let broker = Broker::start_with(&[("num.partitions", "3")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let id = setup(&mut c, &topic);
    let sessionless = c.request(12, &fetch_request(&topic, id, &[0, 1, 2], (0, -1)));
    assert_eq!(
        (sessionless.error_code, sessionless.session_id),
        (0, 0),
        "{sessionless:?}"
    );
    assert_eq!(answered(&sessionless).len(), 3, "{sessionless:?}");
}
