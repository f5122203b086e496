//! The live page's labs, run as CI runs them: through the supervisor's `/v1/labs` API of a
//! 3-node `brook cluster`, from the same definitions the page's picker runs
//! (`tools/src/supervisor/labs.json`), every step's expected and observed outcome compared.
//! The lab client is this package's `lab_client` binary (librdkafka).
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::supervised::{self, field};
use serde_json::Value;

/// One step: the supervisor bounds its own wait (45 s) and the client's run (90 s).
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

/// Both labs of the page: the acks=1 write acknowledged by the leader alone and lost with it
/// (docs/LABS.md lab 6), and aborted transaction records invisible at read_committed but
/// read at read_uncommitted (lab 15), each step checked against the nodes' views. Failover
/// within seconds (a 3 s broker session); the default `replica.lag.time.max.ms`, 30 s, so
/// cut-off followers stay in the ISR as the first lab needs.
#[test]
fn the_page_labs_observe_what_they_expect() {
    let (_sup, ready) = supervised::start(
        "brook-page-labs-",
        &[
            "broker.session.timeout.ms=3000",
            "broker.heartbeat.interval.ms=500",
            "transaction.state.log.num.partitions=3",
            "offsets.topic.num.partitions=3",
        ],
        &[("BROOK_LAB_CLIENT", env!("CARGO_BIN_EXE_lab_client"))],
    );
    let addr = field(&ready, "supervisor");
    let (status, v) = call("GET", addr, "/v1/labs");
    assert_eq!(status, 200, "{v}");
    let labs = v["labs"].as_array().expect("labs").clone();
    let names: Vec<&str> = labs
        .iter()
        .filter_map(|l| l["lab"]["name"].as_str())
        .collect();
    assert_eq!(names, ["acks1-lost-write", "aborted-invisible"], "{v}");
    for lab in &labs {
        let steps = lab["lab"]["steps"].as_array().map_or(0, Vec::len);
        run_lab(addr, lab["lab"]["name"].as_str().unwrap_or_default(), steps);
    }
}
