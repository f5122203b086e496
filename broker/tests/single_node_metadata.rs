//! A single node keeps its metadata in its own one-voter quorum: it starts without waiting
//! for an election, and a log directory written by an earlier version (topics in
//! `brook-metadata.json`) is imported into the quorum on its first start.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brook::broker::Broker;
use brook::config::BrokerConfig;
use brook::metadata::{LEGACY_METADATA_FILE, LEGACY_METADATA_FILE_IMPORTED};
use brook::server::Server;
use brook_storage::batch::testutil::build_batch;
use tokio::sync::watch;

/// Far above how long a one-voter quorum may take to lead: the test fails if start-up
/// waits for an election timer of this size.
const FETCH_TIMEOUT_MS: u64 = 60_000;

struct Running {
    broker: Arc<Broker>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), brook::server::ServerError>>,
}

impl Running {
    async fn stop(self) {
        self.stop.send_replace(true);
        self.task.await.unwrap().unwrap();
    }
}

async fn start(dir: &Path) -> (Running, Duration) {
    let config = BrokerConfig::load(
        None,
        &[
            "listeners=PLAINTEXT://127.0.0.1:0".to_string(),
            format!("log.dirs={}", dir.display()),
            format!("controller.quorum.fetch.timeout.ms={FETCH_TIMEOUT_MS}"),
        ],
    )
    .unwrap();
    let t0 = Instant::now();
    let server = Server::start(config).await.unwrap();
    let took = t0.elapsed();
    let broker = server.broker.clone();
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(server.run(rx));
    (Running { broker, stop, task }, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_leads_its_quorum_at_once_on_every_start() {
    let dir = tempfile::tempdir().unwrap();
    for start_number in 0..3 {
        let (node, took) = start(dir.path()).await;
        assert!(
            took < Duration::from_millis(FETCH_TIMEOUT_MS / 10),
            "start {start_number} took {took:?}"
        );
        let c = node.broker.replicas.controller();
        assert!(c.is_active() && c.is_single_voter());
        // Ready means usable: a topic is created and led here at once.
        let name = format!("t{start_number}");
        node.broker
            .replicas
            .create_topic(&name, 1, 1, BTreeMap::new(), false)
            .await
            .unwrap();
        let p = node.broker.replicas.partition(&name, 0).unwrap();
        assert!(p.is_leader());
        node.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_versions_metadata_file_is_imported_once() {
    let dir = tempfile::tempdir().unwrap();
    // Data as an earlier version left it: partition logs, and the topics in the JSON file.
    let (node, _) = start(dir.path()).await;
    let mut configs = BTreeMap::new();
    configs.insert("retention.ms".to_string(), "3600000".to_string());
    let topic = node
        .broker
        .replicas
        .create_topic("legacy", 2, 1, configs.clone(), false)
        .await
        .unwrap();
    let p = node.broker.replicas.partition("legacy", 0).unwrap();
    p.append_records_to_leader(build_batch(3, 10, 1_000), -1, 1_000, None)
        .unwrap();
    node.stop().await;
    std::fs::remove_dir_all(dir.path().join("__cluster_metadata")).unwrap();
    std::fs::remove_file(dir.path().join("meta.properties")).unwrap();
    let legacy = serde_json::json!({
        "cluster_id": "LegacyClusterId0000001",
        "topics": {"legacy": {
            "name": "legacy", "id": topic.id, "partitions": 2, "replication_factor": 1,
            "configs": configs,
        }},
        "next_producer_id_block": 7000,
        "broker_configs": {"": {"log.retention.ms": "7200000"}},
    });
    std::fs::write(
        dir.path().join(LEGACY_METADATA_FILE),
        serde_json::to_vec(&legacy).unwrap(),
    )
    .unwrap();

    for start_number in 0..2 {
        let (node, _) = start(dir.path()).await;
        let rm = &node.broker.replicas;
        let t = rm.topic("legacy").expect("imported");
        assert_eq!(
            (t.id, t.partition_count(), &t.configs),
            (topic.id, 2, &configs),
            "start {start_number}"
        );
        assert_eq!(rm.cluster_id(), "LegacyClusterId0000001");
        assert_eq!(
            rm.dynamic_broker_configs()[""]["log.retention.ms"],
            "7200000"
        );
        let p = rm.partition("legacy", 0).unwrap();
        assert!(p.is_leader());
        assert_eq!(p.offsets().1, 3, "the records are still there");
        assert!(rm.next_producer_id().await.unwrap() >= 7000);
        assert!(!dir.path().join(LEGACY_METADATA_FILE).exists());
        assert!(dir.path().join(LEGACY_METADATA_FILE_IMPORTED).exists());
        node.stop().await;
    }
}

/// Log lines written through `tracing`, kept for a test to read.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A restart does not ask the quorum to take its first membership again: openraft refuses
/// and logs that as an error on every start.
#[tokio::test]
async fn a_restart_logs_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let (node, _) = start(dir.path()).await;
    node.stop().await;
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // The runtime has one thread, so every task of the node logs through this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);
    let (node, _) = start(dir.path()).await;
    node.stop().await;
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(!text.contains("ERROR"), "{text}");
}
