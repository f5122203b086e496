//! A broker embedded in the test process, driven through its Rust fault API: the lost-ack
//! scenario at the wire level. The broker appends an idempotent batch, the fault rule closes
//! the connection instead of answering, the "client" resends the same bytes on a new
//! connection and gets the original offset back, and the log holds one copy.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use brook::broker::Broker;
use brook::config::BrokerConfig;
use brook::fault::FaultSpec;
use brook::server::Server;
use brook_storage::batch::testutil::build_idempotent_batch;

/// Sends one request and reads its response; `None` when the broker closed the connection.
async fn call<Req: Encodable + kafka_protocol::protocol::HeaderVersion, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    req: &Req,
) -> Option<Resp> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("embedded-test")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, key.request_header_version(version))
        .unwrap();
    req.encode(&mut body, version).unwrap();
    let mut frame = BytesMut::new();
    frame.put_i32(body.len() as i32);
    frame.extend_from_slice(&body);
    stream.write_all(&frame).await.ok()?;
    let size = stream.read_i32().await.ok()?;
    let mut buf = vec![0u8; size as usize];
    stream.read_exact(&mut buf).await.ok()?;
    let mut buf = Bytes::from(buf);
    ResponseHeader::decode(&mut buf, key.response_header_version(version)).unwrap();
    let resp = Resp::decode(&mut buf, version).unwrap();
    assert!(!buf.has_remaining());
    Some(resp)
}

fn produce(topic: &str, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

/// A running broker with `topic` created (one partition), its address, its stop switch and
/// its log directory.
async fn start(
    topic: &str,
) -> (
    Arc<Broker>,
    std::net::SocketAddr,
    watch::Sender<bool>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig::load(
        None,
        &[
            "listeners=PLAINTEXT://127.0.0.1:0".to_string(),
            format!("log.dirs={}", dir.path().display()),
        ],
    )
    .unwrap();
    let server = Server::start(config).await.unwrap();
    let (broker, addr) = (server.broker.clone(), server.local_addr);
    let (tx, rx) = watch::channel(false);
    tokio::spawn(server.run(rx));
    broker
        .replicas
        .create_topic(topic, 1, 1, Default::default(), false)
        .await
        .unwrap();
    (broker, addr, tx, dir)
}

#[tokio::test]
async fn lost_ack_then_retry_returns_the_original_offset() {
    let (broker, addr, stop, _dir) = start("lost-ack").await;
    let rule = broker
        .faults
        .add(FaultSpec {
            action: "close".into(),
            when: Some(brook::fault::When::After),
            api: Some("produce".into()),
            ..Default::default()
        })
        .unwrap();

    let mut s = TcpStream::connect(addr).await.unwrap();
    let first = build_idempotent_batch(100, 0, 0, 2, 1_000);
    let resp: Option<ProduceResponse> =
        call(&mut s, ApiKey::Produce, 9, &produce("lost-ack", first)).await;
    assert!(
        resp.is_none(),
        "the fault rule closes the connection after the append"
    );
    assert_eq!(
        broker
            .faults
            .list()
            .iter()
            .find(|r| r.id == rule)
            .unwrap()
            .fired
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );

    // The client never saw the ack, so it resends the very same batch.
    let retry = build_idempotent_batch(100, 0, 0, 2, 1_000);
    let mut s = TcpStream::connect(addr).await.unwrap();
    let resp: ProduceResponse = call(&mut s, ApiKey::Produce, 9, &produce("lost-ack", retry))
        .await
        .unwrap();
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(
        p.base_offset, 0,
        "a retried batch gets its original offset back"
    );

    // The next batch continues the sequence and lands right after the single copy.
    let next = build_idempotent_batch(100, 0, 2, 1, 1_001);
    let resp: ProduceResponse = call(&mut s, ApiKey::Produce, 9, &produce("lost-ack", next))
        .await
        .unwrap();
    assert_eq!(
        resp.responses[0].partition_responses[0].base_offset, 2,
        "the retry was not appended twice"
    );
    assert_eq!(
        broker
            .replicas
            .partition("lost-ack", 0)
            .unwrap()
            .offsets()
            .1,
        3
    );
    stop.send(true).unwrap();
}

#[tokio::test]
async fn injected_error_is_not_processed_and_fires_once() {
    let (broker, addr, stop, _dir) = start("dropped").await;
    broker
        .faults
        .add(FaultSpec {
            action: "error".into(),
            error_code: Some(6),
            api: Some("produce".into()),
            ..Default::default()
        })
        .unwrap();
    let mut s = TcpStream::connect(addr).await.unwrap();
    let resp: ProduceResponse = call(
        &mut s,
        ApiKey::Produce,
        9,
        &produce("dropped", build_idempotent_batch(5, 0, 0, 1, 1)),
    )
    .await
    .unwrap();
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code, 6,
        "NOT_LEADER_OR_FOLLOWER injected"
    );
    assert_eq!(
        broker.replicas.partition("dropped", 0).unwrap().offsets().1,
        0,
        "an injected error is not processed"
    );
    let resp: ProduceResponse = call(
        &mut s,
        ApiKey::Produce,
        9,
        &produce("dropped", build_idempotent_batch(5, 0, 0, 1, 1)),
    )
    .await
    .unwrap();
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code, 0,
        "the rule fired once"
    );
    stop.send(true).unwrap();
}

/// Not a fault, but the same machinery: clients may not write to `__consumer_offsets`,
/// which only the group coordinator appends to (Kafka answers INVALID_TOPIC_EXCEPTION).
#[tokio::test]
async fn produce_to_the_offsets_topic_is_refused() {
    let (broker, addr, stop, _dir) = start("__consumer_offsets").await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let resp: ProduceResponse = call(
        &mut s,
        ApiKey::Produce,
        9,
        &produce("__consumer_offsets", build_idempotent_batch(9, 0, 0, 1, 1)),
    )
    .await
    .unwrap();
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 17);
    assert_eq!(
        broker
            .replicas
            .partition("__consumer_offsets", 0)
            .unwrap()
            .offsets()
            .1,
        0
    );
    stop.send(true).unwrap();
}

/// A retried idempotent batch is one `duplicate_batch` event, emitted by the partition from
/// what the log's append returned, with the retry's producer, sequences and the offset it is
/// answered with; a new batch of the producer is none.
#[tokio::test]
async fn a_retried_batch_is_one_duplicate_batch_event() {
    let (broker, addr, stop, _dir) = start("dup-event").await;
    // Events are recorded only while someone listens; the stream counts as a listener until
    // it is dropped, whether or not it is polled.
    let listening = broker.events.stream(None);
    let mut s = TcpStream::connect(addr).await.unwrap();
    for batch in [
        build_idempotent_batch(300, 2, 0, 2, 1_000),
        build_idempotent_batch(300, 2, 0, 2, 1_000),
        build_idempotent_batch(300, 2, 2, 1, 1_001),
    ] {
        let resp: ProduceResponse = call(&mut s, ApiKey::Produce, 9, &produce("dup-event", batch))
            .await
            .unwrap();
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    }
    // Other tests of this process share the event log: only this topic's events count.
    let events: Vec<serde_json::Value> = broker
        .events
        .read_after(0, usize::MAX)
        .events
        .iter()
        .map(|e| serde_json::from_str(&e.json).unwrap())
        .filter(|e: &serde_json::Value| e["type"] == "duplicate_batch" && e["topic"] == "dup-event")
        .collect();
    drop(listening);
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert_eq!(
        (
            &e["partition"],
            &e["producer_id"],
            &e["producer_epoch"],
            &e["first_sequence"],
            &e["last_sequence"],
            &e["first_offset"]
        ),
        (
            &serde_json::json!(0),
            &serde_json::json!(300),
            &serde_json::json!(2),
            &serde_json::json!(0),
            &serde_json::json!(1),
            &serde_json::json!(0)
        ),
        "{e}"
    );
    stop.send(true).unwrap();
}
