//! Durability across restarts: a clean SIGTERM restart between produce and consume, and a
//! SIGKILL in the middle of an idempotent produce run followed by a restart on the same port,
//! and a log directory of another node or cluster refused at start-up.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use brook_protocol_tests::process::run_brook;
use brook_protocol_tests::rd::{self, Delivery};
use brook_protocol_tests::{unique_topic, Broker, WireClient};

#[test]
fn sigterm_restart_keeps_every_acknowledged_record() {
    const N: usize = 5_000;
    let mut broker = Broker::start_with(&[("num.partitions", "2")]);
    let topic = unique_topic("term");
    let producer = rd::producer(&broker.bootstrap(), &[("linger.ms", "5")]);
    let values: Vec<String> = (0..N).map(|i| format!("value-{i}")).collect();
    for (i, v) in values.iter().enumerate() {
        rd::send(
            &producer,
            rd::record(&topic, i, Some((i % 2) as i32), None, Some(v.as_bytes())),
        );
    }
    let deliveries = rd::flush(&producer, N, Duration::from_secs(60));
    rd::assert_all_delivered(&deliveries);
    drop(producer);

    let port = broker.port();
    let status = broker.stop();
    assert!(
        status.success(),
        "broker exited with {status} after SIGTERM (a clean shutdown should exit 0)\n{}",
        broker.log_tail(40)
    );
    broker.start_again();
    assert_eq!(broker.port(), port);

    let got = rd::read_to_end(
        &broker.bootstrap(),
        &topic,
        &[0, 1],
        Duration::from_secs(60),
    );
    for p in 0..2i32 {
        let want: Vec<&Delivery> = deliveries.iter().filter(|d| d.partition == p).collect();
        let msgs = &got[&p];
        assert_eq!(
            msgs.len(),
            want.len(),
            "partition {p}: records after restart"
        );
        for (m, d) in msgs.iter().zip(&want) {
            assert_eq!(
                m.offset, d.offset,
                "partition {p}: offset of record {}",
                d.idx
            );
            assert_eq!(
                m.value.as_deref(),
                Some(values[d.idx].as_bytes()),
                "partition {p} offset {}",
                m.offset
            );
        }
    }

    // The log end survived too: new records continue right after the old ones.
    let mut wire = WireClient::connect(&broker.bootstrap());
    let end0 = got[&0].len() as i64;
    let batch = brook_protocol_tests::batch::encode_batch(
        brook_protocol_tests::batch::Producer::NONE,
        &[brook_protocol_tests::batch::Rec::kv("after", "restart", 1)],
    );
    let r = wire.produce(&topic, 0, batch);
    assert_eq!(r.error_code, 0, "produce after restart: {r:?}");
    assert_eq!(r.base_offset, end0, "first offset after restart");
}

#[test]
fn sigkill_during_idempotent_produce_keeps_acknowledged_records_exactly_once() {
    const N: usize = 20_000;
    // SIGKILL + restart each time this many records have been acknowledged.
    const KILL_AT_ACKS: [usize; 3] = [4_000, 9_000, 14_000];
    // ... once at least this many records are sent but not acknowledged.
    const MIN_OUTSTANDING_AT_KILL: usize = 500;
    let mut broker = Broker::start();
    let topic = unique_topic("kill");
    let producer = rd::producer(
        &broker.bootstrap(),
        &[
            ("enable.idempotence", "true"),
            ("linger.ms", "2"),
            ("batch.num.messages", "200"),
            ("message.timeout.ms", "90000"),
            ("reconnect.backoff.max.ms", "500"),
        ],
    );
    let values: Vec<String> = (0..N).map(|i| format!("{i:08}")).collect();
    let delivered = rd::delivered_count;
    let mut kills: Vec<(usize, usize)> = Vec::new(); // (records sent, acks seen) at each kill
    for (i, v) in values.iter().enumerate() {
        rd::send(
            &producer,
            rd::record(&topic, i, Some(0), None, Some(v.as_bytes())),
        );
        let due =
            kills.len() < KILL_AT_ACKS.len() && delivered(&producer) >= KILL_AT_ACKS[kills.len()];
        if due && i + 1 - delivered(&producer) >= MIN_OUTSTANDING_AT_KILL {
            kills.push((i + 1, delivered(&producer)));
            broker.kill9();
            broker.start_again();
        }
        // While a kill is due, delivery reports are not served (they are counted only in
        // poll), so the records sent meanwhile pile up unacknowledged until the kill.
        if !due {
            producer.poll(Duration::ZERO);
        }
        // Keep at most ~3000 records outstanding so each kill lands while many are in flight.
        if i % 250 == 0 {
            let deadline = Instant::now() + Duration::from_secs(60);
            while i.saturating_sub(delivered(&producer)) > 3_000 {
                assert!(
                    Instant::now() < deadline,
                    "producer made no progress (sent {i}, acked {})",
                    delivered(&producer)
                );
                producer.poll(Duration::from_millis(5));
            }
        }
    }
    assert_eq!(
        kills.len(),
        KILL_AT_ACKS.len(),
        "kills done {kills:?}: the producer got too few acks"
    );
    eprintln!("SIGKILL at (sent, acked): {kills:?}");
    let deliveries = rd::flush(&producer, N, Duration::from_secs(120));
    drop(producer);

    let acked: Vec<&Delivery> = deliveries.iter().filter(|d| d.error.is_none()).collect();
    let failed: Vec<&Delivery> = deliveries.iter().filter(|d| d.error.is_some()).collect();

    let got = rd::read_to_end(&broker.bootstrap(), &topic, &[0], Duration::from_secs(60));
    let msgs = &got[&0];
    // Every record read back is one of ours, no record twice, in production order.
    let mut seen: HashMap<usize, i64> = HashMap::new();
    let mut last_idx: Option<usize> = None;
    for m in msgs {
        let v = std::str::from_utf8(m.value.as_deref().expect("null value")).unwrap();
        let idx: usize = v
            .parse()
            .unwrap_or_else(|_| panic!("unexpected value {v:?} at offset {}", m.offset));
        if let Some(prev) = seen.insert(idx, m.offset) {
            panic!("record {idx} stored twice: offsets {prev} and {}", m.offset);
        }
        if let Some(l) = last_idx {
            assert!(
                idx > l,
                "order broken: record {idx} at offset {} after record {l}",
                m.offset
            );
        }
        last_idx = Some(idx);
    }
    // Every acknowledged record is there, at the acknowledged offset.
    for d in &acked {
        match seen.get(&d.idx) {
            None => panic!(
                "acknowledged record {} (offset {}) missing after SIGKILL + restart; {} records read, {} acked, {} failed",
                d.idx,
                d.offset,
                msgs.len(),
                acked.len(),
                failed.len()
            ),
            Some(off) => assert_eq!(*off, d.offset, "record {} read at another offset than acknowledged", d.idx),
        }
    }
    // With the broker back within a second and a 90 s message timeout, nothing should fail.
    assert!(
        failed.is_empty(),
        "{} of {N} records failed delivery across the restart; first: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    assert_eq!(msgs.len(), N, "records read back");
}

/// `brook serve` on the stopped `broker`'s config and data with `overrides`: its exit status
/// and what it printed.
fn serve_once(broker: &Broker, overrides: &[&str]) -> (bool, String) {
    let config = broker.dir().join("server.properties");
    let mut args = vec!["serve".to_string(), "--config".to_string()];
    args.push(config.display().to_string());
    for o in overrides {
        args.extend(["--override".to_string(), o.to_string()]);
    }
    let out = run_brook(&args, Duration::from_secs(60));
    (
        out.status.success(),
        format!("{}{}", out.stdout, out.stderr),
    )
}

/// Kafka's `MetaPropertiesEnsemble.verify` at start-up (`KafkaRaftServer.initializeLogDirs`,
/// the configured node id expected): a log directory another node id wrote is refused with
/// Kafka's message, and so is one of another cluster id than the configured `cluster.id`;
/// nothing is changed, and the node it belongs to starts on it again.
#[test]
fn a_log_directory_of_another_node_or_cluster_is_refused_at_start() {
    let mut broker = Broker::start();
    let cluster_id = WireClient::connect(&broker.bootstrap())
        .metadata(&[], false)
        .cluster_id
        .map(|s| s.to_string())
        .expect("a cluster id");
    assert!(broker.stop().success());
    let meta = broker.data_dir().join("meta.properties");
    let (ok, out) = serve_once(&broker, &["node.id=2"]);
    let want = format!(
        "Stored node id 1 doesn't match previous node id 2 in {}. If you moved your data, \
         make sure your configured node id matches. If you intend to create a new node, you \
         should remove all data in your data directories.",
        meta.display()
    );
    assert!(!ok && out.contains(&want), "{out}");
    let (ok, out) = serve_once(&broker, &["cluster.id=AAAAAAAAAAAAAAAAAAAAAA"]);
    let want = format!(
        "Invalid cluster.id in: {}. Expected AAAAAAAAAAAAAAAAAAAAAA, but read {cluster_id}",
        meta.display()
    );
    assert!(!ok && out.contains(&want), "{out}");
    broker.start_again();
    let md = WireClient::connect(&broker.bootstrap()).metadata(&[], false);
    assert_eq!(md.cluster_id.map(|s| s.to_string()), Some(cluster_id));
}
