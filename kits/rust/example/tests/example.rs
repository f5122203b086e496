//! What a user's tests look like with `brook-testkit` and rdkafka: an embedded broker per
//! test for produce, group consume, a transaction and a fault rule; a 3-node cluster of
//! `brook` processes for a leader kill.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use brook_testkit::{Cluster, EmbeddedBroker, FaultSpec};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;

const WAIT: Duration = Duration::from_secs(30);

fn config(bootstrap: &str, settings: &[(&str, &str)]) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap);
    for (k, v) in settings {
        c.set(*k, *v);
    }
    c
}

async fn create_topic(bootstrap: &str, topic: &str, replication: i32) {
    let admin: AdminClient<DefaultClientContext> =
        config(bootstrap, &[]).create().expect("admin client");
    let topics = [NewTopic::new(
        topic,
        1,
        TopicReplication::Fixed(replication),
    )];
    let results = admin
        .create_topics(&topics, &AdminOptions::new().operation_timeout(Some(WAIT)))
        .await
        .expect("create topics");
    results[0].as_ref().expect("topic created");
}

/// Every delivery report: the offset of an acknowledged record, or the error.
#[derive(Default)]
struct Acks(Mutex<Vec<Result<i64, String>>>);

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let ack = match result {
            Ok(m) => Ok(m.offset()),
            Err((e, _)) => Err(e.to_string()),
        };
        self.0.lock().expect("acks").push(ack);
    }
}

type Rd = BaseProducer<Acks>;

/// An idempotent producer with acks=all (librdkafka's defaults made explicit).
fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> Rd {
    let mut settings = vec![("enable.idempotence", "true"), ("acks", "all")];
    settings.extend_from_slice(extra);
    config(bootstrap, &settings)
        .create_with_context(Acks::default())
        .expect("producer")
}

/// Sends `values` and flushes: every one must be acknowledged.
fn produce(p: &Rd, topic: &str, values: std::ops::Range<u32>) {
    let n = values.len();
    for i in values {
        let value = i.to_string();
        let mut record = BaseRecord::<(), _>::to(topic).payload(&value);
        loop {
            match p.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    p.poll(Duration::from_millis(10));
                }
                Err((e, _)) => panic!("record {i}: {e}"),
            }
        }
    }
    p.flush(WAIT).expect("flush");
    let acks = std::mem::take(&mut *p.context().0.lock().expect("acks"));
    assert_eq!(acks.len(), n, "{acks:?}");
    assert!(
        acks.iter().all(Result::is_ok),
        "every record acknowledged: {acks:?}"
    );
}

/// Polls `consumer` until it has `n` values (bounded by WAIT).
fn read(consumer: &BaseConsumer, n: usize) -> Vec<u32> {
    let deadline = Instant::now() + WAIT;
    let mut values = Vec::new();
    while values.len() < n {
        assert!(Instant::now() < deadline, "only {values:?} within {WAIT:?}");
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            let m = m.expect("a record");
            let text = std::str::from_utf8(m.payload().unwrap_or_default()).expect("utf-8");
            values.push(text.parse().expect("a number"));
        }
    }
    values
}

/// A read_committed consumer of `topic` in group `group`, from the start.
fn consumer(bootstrap: &str, group: &str, topic: &str) -> BaseConsumer {
    let c: BaseConsumer = config(
        bootstrap,
        &[
            ("group.id", group),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
            ("isolation.level", "read_committed"),
        ],
    )
    .create()
    .expect("consumer");
    c.subscribe(&[topic]).expect("subscribe");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn produce_and_consume_in_a_group() {
    let broker = EmbeddedBroker::start().await.expect("broker");
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, "orders", 1).await;
    produce(&producer(&bootstrap, &[]), "orders", 0..100);
    broker
        .await_high_watermark("orders", 0, 100, WAIT)
        .await
        .expect("all 100 committed");
    let c = consumer(&bootstrap, "order-readers", "orders");
    assert_eq!(read(&c, 100), (0..100).collect::<Vec<_>>());
    c.commit_consumer_state(CommitMode::Sync).expect("commit");
    broker.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_commits_and_an_abort_stays_invisible() {
    let broker = EmbeddedBroker::start().await.expect("broker");
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, "payments", 1).await;
    let tx = producer(&bootstrap, &[("transactional.id", "payments-tx")]);
    tx.init_transactions(WAIT).expect("init");
    tx.begin_transaction().expect("begin");
    produce(&tx, "payments", 0..10);
    tx.abort_transaction(WAIT).expect("abort");
    tx.begin_transaction().expect("begin");
    produce(&tx, "payments", 10..20);
    tx.commit_transaction(WAIT).expect("commit");
    let c = consumer(&bootstrap, "payment-readers", "payments");
    assert_eq!(read(&c, 10), (10..20).collect::<Vec<_>>());
}

/// The leader appends a batch and closes the connection instead of answering; the
/// idempotent producer sends it again and gets the original offset: one copy in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_ack_is_retried_without_a_duplicate() {
    let broker = EmbeddedBroker::start().await.expect("broker");
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, "lost-acks", 1).await;
    let rule = broker
        .faults()
        .add(FaultSpec {
            action: "close".into(),
            when: Some(brook_testkit::When::After),
            api: Some("produce".into()),
            topic: Some("lost-acks".into()),
            times: Some(1),
            ..Default::default()
        })
        .expect("rule");
    produce(&producer(&bootstrap, &[]), "lost-acks", 0..2);
    let c = consumer(&bootstrap, "lost-ack-readers", "lost-acks");
    assert_eq!(read(&c, 2), vec![0, 1]);
    let fired = broker
        .faults()
        .list()
        .iter()
        .find(|r| r.id == rule)
        .map(|r| r.fired.load(std::sync::atomic::Ordering::Relaxed));
    assert_eq!(fired, Some(1), "the rule fired once");
    assert_eq!(
        broker
            .await_high_watermark("lost-acks", 0, 2, WAIT)
            .await
            .expect("hw"),
        2,
        "two records, no duplicate"
    );
}

/// acks=all idempotent records before and after the partition leader is killed with
/// SIGKILL: all acknowledged, all there, once each, in order; the node rejoins the ISR.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_kill_loses_no_acknowledged_record() {
    let cluster = Cluster::builder()
        .nodes(3)
        .config("min.insync.replicas", "2")
        .start()
        .expect("cluster");
    let bootstrap = cluster.bootstrap_servers();
    create_topic(&bootstrap, "ledger", 3).await;
    cluster
        .await_isr_size("ledger", 0, 3, WAIT)
        .expect("ISR of 3");
    let p = producer(&bootstrap, &[]);
    produce(&p, "ledger", 0..50);
    let leader = cluster.leader("ledger", 0, WAIT).expect("a leader");
    cluster.kill_node(leader).expect("kill the leader");
    produce(&p, "ledger", 50..100);
    cluster.start_node(leader).expect("start it again");
    cluster
        .await_isr_size("ledger", 0, 3, WAIT)
        .expect("back in the ISR");
    let c = consumer(&bootstrap, "ledger-readers", "ledger");
    assert_eq!(read(&c, 100), (0..100).collect::<Vec<_>>());
}
