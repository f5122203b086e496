//! Produces records with librdkafka so that a watcher sees offsets move; used by the live
//! page's browser test (`protocol-tests/browser/`).
//!
//! `live_produce --bootstrap HOST:PORT --topic T [--records N] [--interval-ms MS]
//!               [--transactional-id ID] [--hold-ms MS] [--metrics-subscription NAME]`
//!
//! Without `--transactional-id`: a steady idempotent acks=all stream; prints `DELIVERED n`
//! after every 10 delivered records and exits once N records were sent and flushed (bounded
//! in count and, through the flush timeout, in time).
//!
//! With `--transactional-id`: the N records go in one transaction that is left open, so
//! that the partition has an open transaction and a last stable offset below its high
//! watermark; prints `OPEN n` once they are delivered, then aborts after `--hold-ms`
//! (default 120 s) and exits.
//!
//! With `--metrics-subscription NAME`: first creates the client-metrics subscription NAME
//! (KIP-714, as `kafka-client-metrics --alter --name NAME --metrics org.apache.kafka.producer.
//! --interval 1000` does), so that librdkafka pushes its producer metrics every second.

use std::time::Duration;

use brook_protocol_tests::rd;
use rdkafka::producer::Producer;

fn usage() -> ! {
    eprintln!(
        "usage: live_produce --bootstrap HOST:PORT --topic T [--records N] [--interval-ms MS] \
         [--transactional-id ID] [--hold-ms MS] [--metrics-subscription NAME]"
    );
    std::process::exit(2)
}

struct Args {
    bootstrap: String,
    topic: String,
    records: usize,
    interval_ms: u64,
    transactional_id: Option<String>,
    hold_ms: u64,
    metrics_subscription: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        bootstrap: String::new(),
        topic: String::new(),
        records: 2_000,
        interval_ms: 50,
        transactional_id: None,
        hold_ms: 120_000,
        metrics_subscription: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let [flag, value] = pair else { usage() };
        match flag.as_str() {
            "--bootstrap" => a.bootstrap = value.clone(),
            "--topic" => a.topic = value.clone(),
            "--records" => a.records = value.parse().unwrap_or_else(|_| usage()),
            "--interval-ms" => a.interval_ms = value.parse().unwrap_or_else(|_| usage()),
            "--transactional-id" => a.transactional_id = Some(value.clone()),
            "--hold-ms" => a.hold_ms = value.parse().unwrap_or_else(|_| usage()),
            "--metrics-subscription" => a.metrics_subscription = Some(value.clone()),
            _ => usage(),
        }
    }
    if a.bootstrap.is_empty() || a.topic.is_empty() {
        usage();
    }
    a
}

fn main() {
    let a = args();
    if let Some(name) = &a.metrics_subscription {
        subscribe_metrics(&a.bootstrap, name);
    }
    match &a.transactional_id {
        Some(id) => open_transaction(&a, id),
        None => steady(&a),
    }
}

/// IncrementalAlterConfigs on the CLIENT_METRICS resource `name` (resource type 16):
/// every producer metric, pushed every second.
fn subscribe_metrics(bootstrap: &str, name: &str) {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };
    use kafka_protocol::protocol::StrBytes;
    const CLIENT_METRICS: i8 = 16;
    let s = |v: &str| StrBytes::from_string(v.to_string());
    let first = bootstrap.split(',').next().unwrap_or(bootstrap);
    let mut c = brook_protocol_tests::WireClient::connect(first);
    let configs = [
        ("metrics", "org.apache.kafka.producer."),
        ("interval.ms", "1000"),
    ]
    .iter()
    .map(|(k, v)| {
        AlterableConfig::default()
            .with_name(s(k))
            .with_value(Some(s(v)))
    })
    .collect();
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(CLIENT_METRICS)
            .with_resource_name(s(name))
            .with_configs(configs),
    ]);
    let r: IncrementalAlterConfigsResponse = c.request(1, &req);
    let code = r.responses.first().map_or(-1, |x| x.error_code);
    assert_eq!(
        code, 0,
        "the client-metrics subscription was refused: {r:?}"
    );
    println!("SUBSCRIBED {name}");
}

fn steady(a: &Args) {
    let p = rd::producer(
        &a.bootstrap,
        &[
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("linger.ms", "5"),
            ("message.timeout.ms", "120000"),
        ],
    );
    let mut reported = 0;
    for i in 0..a.records {
        rd::send(&p, rd::record(&a.topic, i, None, None, Some(b"live")));
        p.poll(Duration::ZERO);
        let delivered = rd::delivered_count(&p);
        if delivered >= reported + 10 {
            reported = delivered - delivered % 10;
            println!("DELIVERED {reported}");
        }
        // Pacing, so offsets move visibly rather than all at once.
        std::thread::sleep(Duration::from_millis(a.interval_ms));
    }
    let d = rd::flush(&p, a.records, Duration::from_secs(120));
    println!("DONE {}", d.len());
}

fn open_transaction(a: &Args, id: &str) {
    const CALL: Duration = Duration::from_secs(30);
    let p = rd::producer(&a.bootstrap, &[("transactional.id", id)]);
    p.init_transactions(CALL).expect("init_transactions");
    p.begin_transaction().expect("begin_transaction");
    for i in 0..a.records {
        rd::send(&p, rd::record(&a.topic, i, Some(0), None, Some(b"txn")));
    }
    let d = rd::flush(&p, a.records, CALL);
    rd::assert_all_delivered(&d);
    println!("OPEN {}", d.len());
    // The watcher's window: the transaction stays open this long, then ends.
    std::thread::sleep(Duration::from_millis(a.hold_ms));
    p.abort_transaction(CALL).expect("abort_transaction");
    println!("ABORTED");
}
