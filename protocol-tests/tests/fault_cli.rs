//! `brook fault` from the command line against a real `brook serve`: `--error` takes Kafka's
//! error names in any case as well as codes, the client gets that error, and `brook fault
//! list` shows the name; a name Kafka does not have is refused before anything is installed.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::process::run_brook;
use brook_protocol_tests::{unique_topic, Broker, WireClient};
use kafka_protocol::ResponseError;

const CLI: Duration = Duration::from_secs(20);

#[test]
fn fault_errors_are_named_as_kafka_names_them() {
    let broker = Broker::start_with(&[("admin.listener", "127.0.0.1:0")]);
    let admin = broker.admin_address();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("fault-names");
    c.ensure_topic(&topic);

    let add = |error: &str| {
        run_brook(
            &[
                "fault", "add", "--admin", &admin, "--api", "produce", "--action", "error",
                "--error", error, "--times", "1",
            ],
            CLI,
        )
    };
    let out = add("not_enough_replicas");
    assert!(out.status.success(), "brook fault add: {out:?}");
    let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_000)]);
    let refused = c.produce(&topic, 0, batch.clone());
    assert_eq!(
        refused.error_code,
        ResponseError::NotEnoughReplicas.code(),
        "{refused:?}"
    );
    assert_eq!(
        c.produce(&topic, 0, batch).error_code,
        NONE,
        "the rule fired once"
    );

    let list = run_brook(&["fault", "list", "--admin", &admin], CLI);
    assert!(list.status.success(), "brook fault list: {list:?}");
    let rules: serde_json::Value = serde_json::from_str(&list.stdout).expect("rules as JSON");
    assert_eq!(rules[0]["error"], "NOT_ENOUGH_REPLICAS", "{rules}");
    assert_eq!(rules[0]["error_code"], 19, "{rules}");

    // A code works as before; a name Kafka does not have is refused with exit status 2.
    assert!(add("6").status.success());
    let bad = add("NOT_A_KAFKA_ERROR");
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(bad.stderr.contains("NOT_A_KAFKA_ERROR"), "{bad:?}");
    let list = run_brook(&["fault", "list", "--admin", &admin], CLI);
    let rules: serde_json::Value = serde_json::from_str(&list.stdout).expect("rules as JSON");
    assert_eq!(rules.as_array().map(Vec::len), Some(2), "{rules}");
    assert_eq!(rules[1]["error"], "NOT_LEADER_OR_FOLLOWER", "{rules}");
}
