//! The client side of the page's labs (`brook cluster`'s `/v1/labs`, docs/LABS.md "Labs on
//! the live page"): the supervisor runs this librdkafka client for a lab step's produce,
//! transaction or consume, and reads the one JSON line it prints at the end.
//!
//! ```text
//! lab_client produce     --bootstrap B --topic T --acks A --values v1,v2
//! lab_client transaction --bootstrap B --topic T --transactional-id ID --values v1,v2 --end commit|abort
//! lab_client consume     --bootstrap B --topic T --isolation read_committed|read_uncommitted
//! ```
//!
//! `produce`: idempotence off and no retries (what the acks labs need: a record is written
//! once, where the leader put it), each value sent and acknowledged before the next, to
//! partition 0; prints `{"offsets": [...], "errors": [...]}` (one entry per value, `null`
//! where there is none). `transaction`: the values in one transaction to partition 0, then
//! commitTransaction or abortTransaction; prints `{"offsets": [...], "end": "commit"}`.
//! `consume`: partition 0 from offset 0 to its end at that isolation level (librdkafka's end
//! of partition: the high watermark, or the last stable offset at read_committed); prints
//! `{"records": ["offset:value", ...]}`. Every call is bounded in time ([`CALL_TIMEOUT`]);
//! a failure exits non-zero with the reason on stderr.

use std::time::Duration;

use brook_protocol_tests::rd;
use rdkafka::producer::Producer;
use serde_json::json;

/// Bound on each client call (a delivery, a transaction call, reading to the end).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

struct Args {
    command: String,
    flags: Vec<(String, String)>,
}

impl Args {
    fn get(&self, name: &str) -> String {
        self.flags
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| fail(&format!("{} needs --{name}", self.command)))
    }

    fn values(&self) -> Vec<String> {
        self.get("values").split(',').map(str::to_string).collect()
    }
}

fn fail(why: &str) -> ! {
    eprintln!("lab_client: {why}");
    std::process::exit(2)
}

fn args() -> Args {
    let mut argv = std::env::args().skip(1);
    let command = argv.next().unwrap_or_else(|| fail("no command"));
    let rest: Vec<String> = argv.collect();
    let mut flags = Vec::new();
    for pair in rest.chunks(2) {
        let [flag, value] = pair else {
            fail("flags come in --name value pairs")
        };
        let Some(name) = flag.strip_prefix("--") else {
            fail(&format!("{flag:?} is not a flag"))
        };
        flags.push((name.to_string(), value.clone()));
    }
    Args { command, flags }
}

fn main() {
    let a = args();
    let out = match a.command.as_str() {
        "produce" => produce(&a),
        "transaction" => transaction(&a),
        "consume" => consume(&a),
        other => fail(&format!("unknown command {other:?}")),
    };
    println!("{out}");
}

fn produce(a: &Args) -> serde_json::Value {
    let acks = a.get("acks");
    let p = rd::producer(
        &a.get("bootstrap"),
        &[
            ("acks", acks.as_str()),
            ("enable.idempotence", "false"),
            ("retries", "0"),
            ("linger.ms", "0"),
            ("message.timeout.ms", "30000"),
        ],
    );
    let topic = a.get("topic");
    let values = a.values();
    for (i, v) in values.iter().enumerate() {
        rd::send(&p, rd::record(&topic, i, Some(0), None, Some(v.as_bytes())));
        // One at a time: each record is acknowledged (or failed) before the next is sent.
        rd::flush(&p, i + 1, CALL_TIMEOUT);
    }
    let d = rd::flush(&p, values.len(), CALL_TIMEOUT);
    let offsets: Vec<_> = d
        .iter()
        .map(|d| d.error.is_none().then_some(d.offset))
        .collect();
    let errors: Vec<_> = d.iter().map(|d| d.error.clone()).collect();
    json!({ "offsets": offsets, "errors": errors })
}

fn transaction(a: &Args) -> serde_json::Value {
    let end = a.get("end");
    let p = rd::producer(
        &a.get("bootstrap"),
        &[("transactional.id", a.get("transactional-id").as_str())],
    );
    let topic = a.get("topic");
    let values = a.values();
    let call = |what: &str, r: rdkafka::error::KafkaResult<()>| {
        if let Err(e) = r {
            fail(&format!("{what}: {e}"))
        }
    };
    call("init_transactions", p.init_transactions(CALL_TIMEOUT));
    call("begin_transaction", p.begin_transaction());
    for (i, v) in values.iter().enumerate() {
        rd::send(&p, rd::record(&topic, i, Some(0), None, Some(v.as_bytes())));
    }
    let d = rd::flush(&p, values.len(), CALL_TIMEOUT);
    rd::assert_all_delivered(&d);
    match end.as_str() {
        "commit" => call("commit_transaction", p.commit_transaction(CALL_TIMEOUT)),
        "abort" => call("abort_transaction", p.abort_transaction(CALL_TIMEOUT)),
        other => fail(&format!("--end {other:?}: commit or abort")),
    }
    let offsets: Vec<i64> = d.iter().map(|d| d.offset).collect();
    json!({ "offsets": offsets, "end": end })
}

fn consume(a: &Args) -> serde_json::Value {
    let isolation = a.get("isolation");
    let topic = a.get("topic");
    let read = rd::read_to_end_with(
        &a.get("bootstrap"),
        &topic,
        &[0],
        &[("isolation.level", isolation.as_str())],
        CALL_TIMEOUT,
    );
    let records: Vec<String> = read
        .get(&0)
        .into_iter()
        .flatten()
        .map(|g| {
            let v = g.value.as_deref().unwrap_or_default();
            format!("{}:{}", g.offset, String::from_utf8_lossy(v))
        })
        .collect();
    json!({ "records": records })
}
