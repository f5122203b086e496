//! `brook cluster` end to end: the built binary starts three `brook serve` children on free
//! ports in a temporary directory; the test lists them through the supervisor's HTTP API and
//! the `brook node` CLI, kills node 2 (it stays dead), restarts it, checks a node's admin API
//! takes link and crash rules (and refuses bad ones with 400), then SIGTERMs the supervisor
//! and checks every child is gone. Its `--topic` is known to every node, with a leader for
//! each partition, when `CLUSTER READY` is printed; a `--topic` the cluster refuses fails the
//! start with the broker's reason and leaves no node behind.
//!
//! Waits are bounded: lines are read on a thread and received with a timeout, and every HTTP
//! call that changes a node answers only once the change has happened.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

/// Bound on the cluster's start (three processes, each printing READY).
const START_WAIT: Duration = Duration::from_secs(60);
/// Bound on the supervisor's exit after SIGTERM (children get SIGTERM and are waited for).
const STOP_WAIT: Duration = Duration::from_secs(45);

const BIN: &str = env!("CARGO_BIN_EXE_brook");

/// The supervisor process; killed if the test fails half-way.
struct Supervisor {
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM);
            let _ = c.wait();
        }
    }
}

impl Supervisor {
    /// Takes a spawned `brook cluster` whose stdout is piped, and reads its lines on a thread.
    fn watch(mut child: Child) -> Supervisor {
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Supervisor {
            child: Some(child),
            lines: rx,
        }
    }

    fn next_line_with(&self, prefix: &str, wait: Duration) -> String {
        let deadline = std::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(e) => panic!("no {prefix:?} line within {wait:?}: {e}"),
            }
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

fn call(method: &str, url: &str, body: Option<&str>) -> (u16, Value) {
    let a = agent();
    let resp = match (method, body) {
        ("POST", Some(b)) => a
            .post(url)
            .header("Content-Type", "application/json")
            .send(b),
        ("POST", None) => a.post(url).send_empty(),
        _ => a.get(url).call(),
    }
    .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    let v = resp.into_body().read_json().unwrap_or(Value::Null);
    (status, v)
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

fn process_exists(pid: i64) -> bool {
    // Signal 0: existence check. A reaped child is gone (ESRCH).
    kill(Pid::from_raw(pid as i32), None).is_ok()
}

/// `(topic, partition, leader)` for every partition of `topics` in `addr`'s Metadata answer;
/// a topic the node does not know (an error code) is left out.
fn leaders(addr: &str, topics: &[&str]) -> Vec<(String, i32, i32)> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let request = MetadataRequest::default().with_topics(Some(
        topics
            .iter()
            .map(|t| {
                let name = TopicName(StrBytes::from_string(t.to_string()));
                MetadataRequestTopic::default().with_name(Some(name))
            })
            .collect(),
    ));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut conn =
        brook::net::client::BrokerConnection::new(addr.into(), "test".into(), START_WAIT);
    let response = runtime
        .block_on(conn.send(12, &request))
        .unwrap_or_else(|e| panic!("Metadata from {addr}: {e}"));
    let mut led = Vec::new();
    for t in response.topics.iter().filter(|t| t.error_code == 0) {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        for p in &t.partitions {
            led.push((name.clone(), p.partition_index, p.leader_id.0));
        }
    }
    led
}

#[test]
fn a_topic_the_cluster_refuses_fails_the_start() {
    let dir = tempfile::tempdir().unwrap();
    // One node cannot hold two replicas: CreateTopics answers INVALID_REPLICATION_FACTOR.
    let out = Command::new(BIN)
        .args(["cluster", "--nodes", "1", "--base-port", "0"])
        .args([
            "--supervisor-listener",
            "127.0.0.1:0",
            "--topic",
            "orders:1:2",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("brook: creating topic orders: InvalidReplicationFactor"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("CLUSTER READY"));
    // The node was stopped before the supervisor exited.
    let log = std::fs::read_to_string(dir.path().join("node-1.log")).unwrap();
    assert!(log.contains("shutdown complete"), "{log}");
    // A bad --topic is refused before anything starts.
    let out = Command::new(BIN)
        .args(["cluster", "--topic", "orders:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("partitions must be a number of at least 1"),
        "{stderr}"
    );
}

#[test]
fn cluster_start_kill_restart_stop() {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(BIN)
        .args([
            "cluster",
            "--base-port",
            "0",
            "--supervisor-listener",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--override", "num.partitions=1"])
        .args(["--override", "auto.create.topics.enable=false"])
        .args(["--topic", "placed:2:3", "--topic", "defaults"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut sup = Supervisor::watch(child);

    let ready = sup.next_line_with("CLUSTER READY", START_WAIT);
    let bootstrap: Vec<&str> = field(&ready, "bootstrap").split(',').collect();
    assert_eq!(bootstrap.len(), 3, "{ready}");
    let supervisor = field(&ready, "supervisor").to_string();
    let admins: Vec<&str> = field(&ready, "admins").split(',').collect();
    assert_eq!(admins.len(), 3, "{ready}");
    assert!(admins[0].starts_with("1@"), "{ready}");
    let base = format!("http://{supervisor}");

    // The --topic topics: every node's first Metadata answer names a leader for each
    // partition (what a client's first request sees), with the partitions asked for or the
    // broker's default (num.partitions=1).
    for addr in &bootstrap {
        let led = leaders(addr, &["placed", "defaults"]);
        assert_eq!(led.len(), 3, "{addr}: {led:?}");
        assert!(
            led.iter().all(|(_, _, leader)| *leader >= 1),
            "{addr}: {led:?}"
        );
    }

    // Three live nodes, with distinct pids and ports.
    let (status, v) = call("GET", &format!("{base}/nodes"), None);
    assert_eq!(status, 200);
    let nodes = v["nodes"].as_array().unwrap().clone();
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(|n| n["alive"] == true));
    let pid2 = nodes[1]["pid"].as_i64().unwrap();
    assert!(process_exists(pid2));
    let client2 = nodes[1]["client"].clone();
    for log in nodes.iter().map(|n| n["log"].as_str().unwrap()) {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(text.contains("READY node.id="), "{log}: {text}");
    }

    // The CLI agrees.
    let out = Command::new(BIN)
        .args(["node", "list", "--supervisor", &supervisor])
        .output()
        .unwrap();
    assert!(out.status.success());
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(listed.lines().count(), 3, "{listed}");
    assert!(listed.lines().all(|l| l.contains("alive=true")), "{listed}");

    // A node's admin API takes link and crash rules and refuses bad ones.
    let admin1 = admins[0].trim_start_matches("1@");
    let faults = format!("http://{admin1}/faults");
    let (s, _) = call(
        "POST",
        &faults,
        Some(r#"{"action":"partition","to":2,"direction":"both","traffic":"replication"}"#),
    );
    assert_eq!(s, 201);
    let (s, _) = call(
        "POST",
        &faults,
        Some(r#"{"action":"crash","point":"after-leader-append","topic":"nowhere"}"#),
    );
    assert_eq!(s, 201);
    let (s, v) = call(
        "POST",
        &faults,
        Some(r#"{"action":"crash","point":"later"}"#),
    );
    assert_eq!(s, 400, "{v}");
    let (s, v) = call("POST", &faults, Some(r#"{"action":"partition","to":"x"}"#));
    assert_eq!(s, 400, "{v}");
    let (_, v) = call("GET", &faults, None);
    assert_eq!(v["rules"].as_array().unwrap().len(), 2, "{v}");

    // Kill -9 node 2: the answer comes once it is dead, and it stays dead.
    let (s, v) = call("POST", &format!("{base}/nodes/2/kill"), None);
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["alive"], false);
    assert_eq!(v["last_exit"], "signal 9");
    assert!(!process_exists(pid2), "pid {pid2} still exists");
    let (_, v) = call("GET", &format!("{base}/nodes"), None);
    let n2 = &v["nodes"][1];
    assert_eq!(
        (n2["id"].as_i64(), n2["alive"].as_bool()),
        (Some(2), Some(false))
    );
    assert!(v["nodes"][0]["alive"] == true && v["nodes"][2]["alive"] == true);
    // Killing a dead node is a conflict, not a crash of the supervisor.
    let (s, _) = call("POST", &format!("{base}/nodes/2/kill"), None);
    assert_eq!(s, 409);
    let (s, _) = call("POST", &format!("{base}/nodes/9/kill"), None);
    assert_eq!(s, 404);
    let (s, _) = call("POST", &format!("{base}/nodes/two/kill"), None);
    assert_eq!(s, 400);

    // Restart: answered once READY again, on the same client port.
    let (s, v) = call("POST", &format!("{base}/nodes/2/restart"), None);
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["alive"], true);
    assert_eq!(v["client"], client2);
    assert_eq!(v["starts"], 2);
    let new_pid2 = v["pid"].as_i64().unwrap();
    assert_ne!(new_pid2, pid2);
    assert!(process_exists(new_pid2));
    let log2 = std::fs::read_to_string(v["log"].as_str().unwrap()).unwrap();
    assert_eq!(log2.matches("READY node.id=2").count(), 2, "{log2}");
    // Starting a running node is a conflict.
    let (s, _) = call("POST", &format!("{base}/nodes/2/start"), None);
    assert_eq!(s, 409);

    // SIGTERM the supervisor: it stops every child, then exits 0.
    let (_, v) = call("GET", &format!("{base}/nodes"), None);
    let pids: Vec<i64> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["pid"].as_i64().unwrap())
        .collect();
    let child = sup.child.take().unwrap();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    sup.next_line_with("CLUSTER STOPPED", STOP_WAIT);
    let status = wait_exit(child);
    assert!(status.success(), "{status}");
    for pid in pids {
        assert!(!process_exists(pid), "child {pid} survived the supervisor");
    }
}

/// Bound on a 3-node cluster's stop after SIGTERM: every node's controlled shutdown is
/// granted while the quorum has all its voters (Kafka's `KafkaClusterTestKit.close` order).
/// Stopping every process at once, the last node waited out `broker.session.timeout.ms` (9 s).
const STOP_THREE_MAX: Duration = Duration::from_secs(3);

#[test]
fn sigterm_stops_three_nodes_with_every_controlled_shutdown_granted() {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(BIN)
        .args(["cluster", "--base-port", "0"])
        .args(["--supervisor-listener", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.path())
        // Leaderships to hand over, on every node.
        .args(["--topic", "moved:3:3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut sup = Supervisor::watch(child);
    let ready = sup.next_line_with("CLUSTER READY", START_WAIT);
    let base = format!("http://{}", field(&ready, "supervisor"));
    let (_, v) = call("GET", &format!("{base}/nodes"), None);
    let nodes = v["nodes"].as_array().unwrap().clone();

    let child = sup.child.take().unwrap();
    let t0 = std::time::Instant::now();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_exit(child);
    let took = t0.elapsed();
    assert!(status.success(), "{status}");
    for n in &nodes {
        let pid = n["pid"].as_i64().unwrap();
        assert!(
            !process_exists(pid),
            "node {} survived the supervisor",
            n["id"]
        );
        let log = std::fs::read_to_string(n["log"].as_str().unwrap()).unwrap();
        assert!(
            log.contains("the controller moved this node's leaderships"),
            "node {}'s controlled shutdown was not granted:\n{log}",
            n["id"]
        );
    }
    assert!(took < STOP_THREE_MAX, "3 nodes stopped in {took:?}");
}

/// The supervisor's exit status, waited for on a thread for at most `STOP_WAIT`.
fn wait_exit(mut child: Child) -> std::process::ExitStatus {
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(child.wait());
    });
    done_rx
        .recv_timeout(STOP_WAIT)
        .expect("supervisor did not exit")
        .unwrap()
}
