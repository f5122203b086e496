//! Every (API, version) a node advertises, answered and meaning the same as at the newest
//! version (see `brook_protocol_tests::version_matrix`), on one node and on three; then the
//! same under fault rules that answer each API with an error (`error_response` in
//! broker/src/api/mod.rs); then no response failed to encode anywhere
//! (`brook_response_encode_failures_total` is 0).
//!
//! With `VERSION_MATRIX_BOOTSTRAP=host:port` the single-node test runs the matrix against
//! that broker instead (`scripts/differential` points it at the reference Kafka 4.4),
//! comparing only the versions both it and Brook advertise: Brook-only versions are skipped
//! there by that intersection.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use brook_protocol_tests::process::run_brook;
use brook_protocol_tests::version_matrix::{self, Advertised, Faults, Report};
use brook_protocol_tests::{Broker, Cluster};
use kafka_protocol::messages::ApiKey;

/// Bound on one scrape's HTTP exchange.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);
const ENCODE_FAILURES: &str = "brook_response_encode_failures_total";
/// The matrix starts groups and transactions at once: no initial rebalance delay.
const OVERRIDES: &[(&str, &str)] = &[("group.initial.rebalance.delay.ms", "0")];
/// The single node also needs its admin listener (a cluster's nodes have one already).
const SINGLE_NODE_OVERRIDES: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("admin.listener", "127.0.0.1:0"),
];

/// One matrix at a time: the machine is small, and a run sets the process's panic hook.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn check(report: &Report, nodes: &str) {
    eprintln!(
        "version matrix on {nodes}: {} (API, version) pairs in {:.1} s, {} failures",
        report.pairs,
        report.seconds,
        report.failures.len()
    );
    assert!(report.pairs > 0, "the matrix ran no pair");
    assert!(
        report.failures.is_empty(),
        "version matrix on {nodes}: {} failures:\n{}",
        report.failures.len(),
        report.failures.join("\n")
    );
}

/// The non-zero encode failure samples of one node's `/metrics`, as failures; the family
/// must be declared (so that a renamed metric cannot pass unseen).
fn encode_failures(admin: &str) -> Vec<String> {
    let mut s = TcpStream::connect(admin).unwrap_or_else(|e| panic!("connect {admin}: {e}"));
    s.set_read_timeout(Some(SCRAPE_TIMEOUT)).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read /metrics");
    assert!(
        text.contains(&format!("# TYPE {ENCODE_FAILURES} counter")),
        "{admin}: /metrics does not declare {ENCODE_FAILURES}"
    );
    text.lines()
        .filter(|l| l.starts_with(ENCODE_FAILURES))
        .filter(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) != Some(0.0))
        .map(|l| format!("node at {admin}: {l}"))
        .collect()
}

/// Bound on one `brook fault` command.
const CLI_TIMEOUT: Duration = Duration::from_secs(30);
/// "Every time" for a rule's `--times`: more than the matrix sends.
const FAULT_TIMES: &str = "1000000";

/// Fault rules through `brook fault` on each node's admin listener.
struct AdminFaults(Vec<String>);

impl AdminFaults {
    fn brook(&self, args: &[&str]) {
        for admin in &self.0 {
            let mut argv = vec!["fault", args[0], "--admin", admin];
            argv.extend_from_slice(&args[1..]);
            let out = run_brook(&argv, CLI_TIMEOUT);
            assert!(out.status.success(), "brook {argv:?}: {out:?}");
        }
    }
}

impl Faults for AdminFaults {
    fn error_for(&self, key: ApiKey, client_id: &str, error_code: i16) {
        let (key, code) = ((key as i16).to_string(), error_code.to_string());
        self.brook(&[
            "add",
            "--api",
            &key,
            "--action",
            "error",
            "--error",
            &code,
            "--client-id",
            client_id,
            "--times",
            FAULT_TIMES,
        ]);
    }

    fn clear(&self) {
        self.brook(&["clear"]);
    }
}

#[test]
fn version_matrix_single_node() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Ok(bootstrap) = std::env::var("VERSION_MATRIX_BOOTSTRAP") {
        return external(&bootstrap);
    }
    let broker = Broker::start_with(SINGLE_NODE_OVERRIDES);
    let advertised = version_matrix::advertised(&broker.bootstrap());
    let faults = AdminFaults(vec![broker.admin_address()]);
    let mut report = version_matrix::run(&broker.bootstrap(), &advertised, Some(&faults));
    report
        .failures
        .extend(encode_failures(&broker.admin_address()));
    check(&report, "1 node");
}

#[test]
fn version_matrix_three_nodes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start(3, OVERRIDES);
    let advertised = version_matrix::advertised(&cluster.bootstrap());
    let faults = AdminFaults(
        cluster
            .ids()
            .iter()
            .map(|&id| cluster.admin_address(id))
            .collect(),
    );
    let mut report = version_matrix::run(&cluster.bootstrap(), &advertised, Some(&faults));
    for id in cluster.ids() {
        report
            .failures
            .extend(encode_failures(&cluster.admin_address(id)));
    }
    check(&report, "3 nodes");
}

/// The matrix against another broker, over the versions both it and Brook advertise (Brook's
/// list read from a Brook node started for that). Kafka 4.4 serves every API Brook serves,
/// so no case is left out there; versions only Brook serves are left out by the
/// intersection. No `/metrics` there: the counter is Brook's.
fn external(bootstrap: &str) {
    let brook: Advertised = {
        let broker = Broker::start();
        version_matrix::advertised(&broker.bootstrap())
    };
    let theirs = version_matrix::advertised(bootstrap);
    let both = version_matrix::intersect(&brook, &theirs);
    let report = version_matrix::run(bootstrap, &both, None);
    check(&report, bootstrap);
}
