//! The live page's labs, run as CI runs them: through the supervisor's `/v1/labs` API of a
//! 3-node `brook cluster`, from the same definitions the page's picker runs
//! (`tools/src/supervisor/labs.json`), every step's expected and observed outcome compared.
//! The lab client is this package's `lab_client` binary (librdkafka).
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::supervised::{self, field};
use serde_json::Value;

/// One step: the supervisor bounds its own wait (60 s) and the client's run (90 s).
const STEP_CALL: Duration = Duration::from_secs(150);

fn call(method: &str, addr: &str, path: &str) -> (u16, Value) {
    supervised::http(method, addr, path, None, STEP_CALL)
}

/// Runs every step of lab `name`; each must observe what the definition expects.
fn run_lab(addr: &str, name: &str, steps: usize) {
    let (status, v) = call("POST", addr, &format!("/v1/labs/{name}/reset"));
    assert_eq!(status, 200, "{v}");
    for i in 0..steps {
        let (status, answer) = call("POST", addr, &format!("/v1/labs/{name}/step"));
        assert_eq!(status, 200, "lab {name} step {i}: {answer}");
        println!(
            "[page-lab] {name} {i}: {} expected {} observed {}",
            answer["title"], answer["expected"], answer["observed"]
        );
        assert_eq!(answer["step"], i, "{answer}");
        assert_eq!(
            answer["observed"], answer["expected"],
            "lab {name} step {i} ({}): {answer}",
            answer["title"]
        );
        assert_eq!(answer["pass"], true, "{answer}");
        assert_eq!(answer["done"], i + 1 == steps, "{answer}");
    }
}

/// Every lab of docs/LABS.md the page runs, in the document's order.
const PAGE_LABS: &[&str] = &[
    "lost-ack-duplicate",
    "lost-ack-idempotent",
    "in-flight-reordered",
    "acks0-silent-loss",
    "acks1-lost-write",
    "min-insync-refuses",
    "min-insync-one-copy",
    "commit-sync-position",
    "auto-commit-worker-loss",
    "auto-commit-crash-redelivery",
    "crash-rereads-committed",
    "poison-pill-dlq",
    "dlq-transient-permanent",
    "aborted-invisible",
];

/// Every lab of the page, one after the other on one cluster, each step checked against the
/// nodes' views or what the client printed; a failure names the lab and the step. Failover
/// within seconds (a 3 s broker session); the default `replica.lag.time.max.ms`, 30 s, so
/// cut-off followers stay in the ISR as the acks=1 lab needs, and the ISR shrinks in the
/// min.insync.replicas labs within a step's 60 s. `BROOK_PAGE_LABS=name,name` runs only
/// those labs (to work on one).
#[test]
fn the_page_labs_observe_what_they_expect() {
    // `BROOK_LAB_CLIENT` names another build of the client, as `BROOK_BIN` does the broker.
    let lab_client = std::env::var("BROOK_LAB_CLIENT")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_lab_client").to_string());
    let (_sup, ready) = supervised::start(
        "brook-page-labs-",
        &[
            "broker.session.timeout.ms=3000",
            "broker.heartbeat.interval.ms=500",
            "transaction.state.log.num.partitions=3",
            "offsets.topic.num.partitions=3",
        ],
        &[("BROOK_LAB_CLIENT", lab_client.as_str())],
    );
    let addr = field(&ready, "supervisor");
    let (status, v) = call("GET", addr, "/v1/labs");
    assert_eq!(status, 200, "{v}");
    let labs = v["labs"].as_array().expect("labs").clone();
    let names: Vec<&str> = labs
        .iter()
        .filter_map(|l| l["lab"]["name"].as_str())
        .collect();
    assert_eq!(names, PAGE_LABS, "{v}");
    let only = std::env::var("BROOK_PAGE_LABS").unwrap_or_default();
    let chosen = |name: &str| only.is_empty() || only.split(',').any(|n| n == name);
    for lab in &labs {
        let name = lab["lab"]["name"].as_str().unwrap_or_default();
        if !chosen(name) {
            continue;
        }
        let steps = lab["lab"]["steps"].as_array().map_or(0, Vec::len);
        let started = std::time::Instant::now();
        run_lab(addr, name, steps);
        println!("[page-lab] {name}: passed in {:?}", started.elapsed());
    }
}
