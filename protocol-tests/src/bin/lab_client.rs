//! The client side of the page's labs (`brook cluster`'s `/v1/labs`, docs/LABS.md "Labs on
//! the live page"): the supervisor runs this librdkafka client for a lab step's produce,
//! transaction or consume, and reads the one JSON line it prints at the end.
//!
//! ```text
//! lab_client produce     --bootstrap B --topic T --acks A --values v1,v2
//! lab_client transaction --bootstrap B --topic T --transactional-id ID --values v1,v2 --end commit|abort
//! lab_client consume     --bootstrap B --topic T --isolation read_committed|read_uncommitted
//! lab_client group-consume --bootstrap B --topic T --group G --take N|all --process N|all
//!                          --commit-after N --worker-dies true|false [--config k=v,k=v]
//! lab_client auto-commit-crash --bootstrap B --topic T --group G --values v5,v6
//! lab_client dead-letter --bootstrap B --topic T --group G --permanent v3 --transient v6
//! ```
//!
//! `produce` and `group-consume` take librdkafka settings over their defaults with
//! `--config`; `produce --pipelined true` sends every value before awaiting any answer.
//!
//! `produce`: idempotence off and no retries (what the acks labs need: a record is written
//! once, where the leader put it), each value sent and acknowledged before the next (all at
//! once with `--pipelined true`), to partition 0; prints `{"offsets": [...], "errors":
//! [...]}` (one entry per value, `null` where there is none). `transaction`: the values in
//! one transaction to partition 0, then commitTransaction or abortTransaction; prints
//! `{"offsets": [...], "end": "commit"}`. `consume`: partition 0 from offset 0 to its end at
//! that isolation level (librdkafka's end of partition: the high watermark, or the last
//! stable offset at read_committed); prints `{"records": ["offset:value", ...]}`.
//!
//! `group-consume`: a member of group G (assigned partition 0, starting at the group's
//! committed offset) takes N records from poll() or all to the end, processes the first N,
//! commits synchronously once `--commit-after` records were taken (0: never), or hands them
//! to a worker thread that dies before processing any, then closes (which commits, with
//! `enable.auto.commit=true`); prints `{"records": [...], "processed": [offsets],
//! "committed_offset": N}`, the offset read back from the group afterwards (-1: none).
//! `auto-commit-crash` and `dead-letter`: see their functions. Every call is bounded in time
//! ([`CALL_TIMEOUT`]); a failure exits non-zero with the reason on stderr.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use brook_protocol_tests::rd;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::json;

/// Bound on each client call (a delivery, a transaction call, reading to the end).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// `auto-commit-crash`'s `auto.commit.interval.ms` (the Java client's default).
const AUTO_COMMIT_INTERVAL_MS: u64 = 5_000;

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

    fn flag(&self, name: &str) -> Option<String> {
        self.flags
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    /// `--name N`, or `None` for `all` or an absent flag.
    fn count(&self, name: &str) -> Option<usize> {
        let v = self.flag(name).filter(|v| v != "all")?;
        Some(
            v.parse()
                .unwrap_or_else(|_| fail(&format!("--{name} {v:?}: a number or all"))),
        )
    }

    /// `--config k=v,k=v`: librdkafka settings.
    fn config(&self) -> Vec<(String, String)> {
        let text = self.flag("config").unwrap_or_default();
        text.split(',')
            .filter(|kv| !kv.is_empty())
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => fail(&format!("--config {kv:?}: k=v")),
            })
            .collect()
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
        "group-consume" => group_consume(&a),
        "auto-commit-crash" => auto_commit_crash(&a),
        "dead-letter" => dead_letter(&a),
        other => fail(&format!("unknown command {other:?}")),
    };
    println!("{out}");
}

/// `base` with `over` replacing or adding settings.
fn settings<'a>(
    base: &[(&'a str, &'a str)],
    over: &'a [(String, String)],
) -> Vec<(&'a str, &'a str)> {
    let mut out: Vec<(&str, &str)> = base
        .iter()
        .filter(|(k, _)| !over.iter().any(|(o, _)| o == k))
        .copied()
        .collect();
    out.extend(over.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    out
}

fn produce(a: &Args) -> serde_json::Value {
    let acks = a.get("acks");
    let over = a.config();
    let base = [
        ("acks", acks.as_str()),
        ("enable.idempotence", "false"),
        ("retries", "0"),
        ("linger.ms", "0"),
        ("message.timeout.ms", "30000"),
    ];
    let p = rd::producer(&a.get("bootstrap"), &settings(&base, &over));
    let topic = a.get("topic");
    let values = a.values();
    let pipelined = a.flag("pipelined").as_deref() == Some("true");
    for (i, v) in values.iter().enumerate() {
        rd::send(&p, rd::record(&topic, i, Some(0), None, Some(v.as_bytes())));
        if !pipelined {
            // One at a time: each record is acknowledged (or failed) before the next is sent.
            rd::flush(&p, i + 1, CALL_TIMEOUT);
        }
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
        .map(record_text)
        .collect();
    json!({ "records": records })
}

/// Polls `c` for the next record of partition 0; `None` at the partition's end.
fn next_record(c: &BaseConsumer, deadline: Instant) -> Option<rd::Got> {
    loop {
        if Instant::now() >= deadline {
            fail("no record nor the partition's end within the call's bound")
        }
        match c.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => return Some(rd::got(&m)),
            Some(Err(KafkaError::PartitionEOF(_))) => return None,
            Some(Err(e)) => eprintln!("lab_client: poll: {e}"),
        }
    }
}

fn group_consume(a: &Args) -> serde_json::Value {
    let (bootstrap, topic, group) = (a.get("bootstrap"), a.get("topic"), a.get("group"));
    let over = a.config();
    let base = [("enable.partition.eof", "true")];
    let c = rd::group_consumer(&bootstrap, &group, &settings(&base, &over));
    assign_stored(&c, &topic);
    let (take, process) = (a.count("take"), a.count("process"));
    let commit_after = a.count("commit-after").unwrap_or(0);
    let deadline = Instant::now() + CALL_TIMEOUT;
    let mut taken = Vec::new();
    while take.is_none_or(|n| taken.len() < n) {
        let Some(g) = next_record(&c, deadline) else {
            break;
        };
        taken.push(g);
        if taken.len() == commit_after {
            // librdkafka's position: each record's offset + 1 is stored as poll() returns it
            // (enable.auto.offset.store), as the Java client's position moves with poll().
            if let Err(e) = c.commit_consumer_state(CommitMode::Sync) {
                fail(&format!("commit: {e}"))
            }
        }
    }
    let mut processed: Vec<i64> = Vec::new();
    if a.flag("worker-dies").as_deref() == Some("true") {
        // The worker gets the records and dies before processing any.
        let (tx, rx) = std::sync::mpsc::channel::<rd::Got>();
        let worker = std::thread::spawn(move || drop(rx));
        for g in &taken {
            let _ = tx.send(g.clone());
        }
        let _ = worker.join();
    } else {
        let n = process.unwrap_or(taken.len()).min(taken.len());
        processed.extend(taken[..n].iter().map(|g| g.offset));
    }
    // Closing commits the stored position when enable.auto.commit is set.
    drop(c);
    let records: Vec<String> = taken.iter().map(record_text).collect();
    let committed = committed_offset(&bootstrap, &topic, &group);
    json!({ "records": records, "processed": processed, "committed_offset": committed })
}

fn record_text(g: &rd::Got) -> String {
    let v = g.value.as_deref().unwrap_or_default();
    format!("{}:{}", g.offset, String::from_utf8_lossy(v))
}

/// The group's committed offset of partition 0, read back with OffsetFetch (-1: none).
fn committed_offset(bootstrap: &str, topic: &str, group: &str) -> i64 {
    let c = rd::group_consumer(bootstrap, group, &[]);
    let mut tpl = TopicPartitionList::new();
    if let Err(e) = tpl.add_partition(topic, 0).set_offset(Offset::Invalid) {
        fail(&format!("committed: {e}"))
    }
    let got = c
        .committed_offsets(tpl, CALL_TIMEOUT)
        .unwrap_or_else(|e| fail(&format!("committed: {e}")));
    match got.find_partition(topic, 0).map(|e| e.offset()) {
        Some(Offset::Offset(o)) => o,
        _ => -1,
    }
}

/// Assigns partition 0 of `topic` from the group's committed offset (earliest without one).
fn assign_stored(c: &BaseConsumer, topic: &str) {
    let mut tpl = TopicPartitionList::new();
    let added = tpl.add_partition_offset(topic, 0, Offset::Stored);
    if let Err(e) = added.and_then(|_| c.assign(&tpl)) {
        fail(&format!("assign: {e}"))
    }
}

/// `CommitTimingTest#autoCommitCrashAfterProcessingRedeliversSinceTheLastAutoCommit` with
/// librdkafka: consumer 1 of group G (enable.auto.commit=true, auto.commit.interval.ms
/// [`AUTO_COMMIT_INTERVAL_MS`]) processes partition 0 to its end, waits for the auto-commit
/// of that position, has `--more` produced, processes those, and exits at once without
/// closing, as a crash would. librdkafka commits from a timer of its own, not from poll()
/// as the Java client does (`ConsumerCoordinator#maybeAutoCommitOffsetsAsync`), so the
/// crash must come before the next tick: the interval is long next to the few milliseconds
/// the second batch takes, and a second batch slower than half of it fails the run rather
/// than racing the tick.
fn auto_commit_crash(a: &Args) -> serde_json::Value {
    let (bootstrap, topic, group) = (a.get("bootstrap"), a.get("topic"), a.get("group"));
    let interval = AUTO_COMMIT_INTERVAL_MS.to_string();
    let settings = [
        ("enable.partition.eof", "true"),
        ("enable.auto.commit", "true"),
        ("auto.commit.interval.ms", interval.as_str()),
    ];
    let c = rd::group_consumer(&bootstrap, &group, &settings);
    assign_stored(&c, &topic);
    let deadline = Instant::now() + CALL_TIMEOUT;
    let mut processed = Vec::new();
    while let Some(g) = next_record(&c, deadline) {
        processed.push(g.offset);
    }
    let position = processed.last().map_or(0, |o| o + 1);
    let committed = wait_committed(&c, &topic, position, deadline);
    let since_commit = Instant::now();
    let p = rd::producer(&bootstrap, &[("acks", "all"), ("linger.ms", "0")]);
    let more = a.values();
    for (i, v) in more.iter().enumerate() {
        rd::send(&p, rd::record(&topic, i, Some(0), None, Some(v.as_bytes())));
    }
    rd::assert_all_delivered(&rd::flush(&p, more.len(), CALL_TIMEOUT));
    let mut taken = 0;
    while taken < more.len() {
        match next_record(&c, deadline) {
            Some(g) => processed.push(g.offset),
            None => continue,
        }
        taken += 1;
    }
    if since_commit.elapsed() > Duration::from_millis(AUTO_COMMIT_INTERVAL_MS / 2) {
        fail("the second batch took more than half the auto-commit interval; the crash would race the next auto-commit")
    }
    println!(
        "{}",
        json!({ "processed": processed, "committed_offset": committed })
    );
    // The crash: no close(), no final commit.
    std::process::exit(0)
}

/// Polls until the group's committed offset of partition 0 is `position` (the auto-commit
/// has happened); answers it. `committed()` asks the group coordinator (OffsetFetch).
fn wait_committed(c: &BaseConsumer, topic: &str, position: i64, deadline: Instant) -> i64 {
    loop {
        let got = c
            .committed(CALL_TIMEOUT)
            .unwrap_or_else(|e| fail(&format!("committed: {e}")));
        if let Some(Offset::Offset(o)) = got.find_partition(topic, 0).map(|e| e.offset()) {
            if o == position {
                return o;
            }
        }
        if Instant::now() >= deadline {
            fail(&format!(
                "no auto-commit of offset {position} within the call's bound"
            ))
        }
        // Polling serves the consumer's events while it waits (records: none are left).
        let _ = c.poll(Duration::from_millis(100));
    }
}

/// The dead-letter loop of the articles (`CommitTimingTest#deadLetterTopicPattern` and
/// `#poisonPillBlocksThePartitionUntilParkedInTheDeadLetterTopic`): a member of group G
/// reads partition 0 to its end; processing a `--permanent` value fails for good and the raw
/// record goes to `T.DLT` (acks=all, awaited) with headers naming its origin; processing a
/// `--transient` value fails on its first attempt and is tried again; then the offset after
/// the last record is committed, once every record's fate is decided.
fn dead_letter(a: &Args) -> serde_json::Value {
    let (bootstrap, topic, group) = (a.get("bootstrap"), a.get("topic"), a.get("group"));
    let list = |name: &str| -> Vec<String> {
        let v = a.flag(name).unwrap_or_default();
        v.split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (permanent, transient) = (list("permanent"), list("transient"));
    let c = rd::group_consumer(&bootstrap, &group, &[("enable.partition.eof", "true")]);
    assign_stored(&c, &topic);
    let dlt = format!("{topic}.DLT");
    let p = rd::producer(&bootstrap, &[("acks", "all"), ("linger.ms", "0")]);
    let deadline = Instant::now() + CALL_TIMEOUT;
    let (mut processed, mut attempts, mut parked) = (Vec::new(), BTreeMap::new(), 0);
    let mut next = None;
    while let Some(g) = next_record(&c, deadline) {
        let value = String::from_utf8_lossy(g.value.as_deref().unwrap_or_default()).to_string();
        loop {
            let n = attempts.entry(g.offset.to_string()).or_insert(0);
            *n += 1;
            if transient.contains(&value) && *n == 1 {
                continue; // a timeout, say: the same record again
            }
            break;
        }
        if permanent.contains(&value) {
            park(
                &p,
                &dlt,
                &topic,
                &g,
                &format!("cannot process {value}"),
                parked,
            );
            parked += 1;
        } else {
            processed.push(g.offset);
        }
        next = Some(g.offset + 1);
    }
    if let Some(offset) = next {
        let mut tpl = TopicPartitionList::new();
        let set = tpl
            .add_partition(&topic, 0)
            .set_offset(Offset::Offset(offset));
        if let Err(e) = set.and_then(|_| c.commit(&tpl, CommitMode::Sync)) {
            fail(&format!("commit: {e}"))
        }
    }
    drop(c);
    let dead: Vec<String> = rd::read_to_end(&bootstrap, &dlt, &[0], CALL_TIMEOUT)
        .remove(&0)
        .unwrap_or_default()
        .iter()
        .map(|g| dead_letter_text(g, &topic))
        .collect();
    let committed = committed_offset(&bootstrap, &topic, &group);
    json!({ "processed": processed, "attempts": attempts, "dead_letters": dead,
            "committed_offset": committed })
}

/// Sends the raw record to the dead-letter topic with headers naming its origin, and waits
/// for the acknowledgement (the record's fate is decided only then).
fn park(p: &rd::RecProducer, dlt: &str, topic: &str, g: &rd::Got, why: &str, idx: usize) {
    let partition = g.partition.to_string();
    let offset = g.offset.to_string();
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "dlt.original.topic",
            value: Some(topic),
        })
        .insert(Header {
            key: "dlt.original.partition",
            value: Some(&partition),
        })
        .insert(Header {
            key: "dlt.original.offset",
            value: Some(&offset),
        })
        .insert(Header {
            key: "dlt.exception",
            value: Some(why),
        });
    let mut rec = rd::record(dlt, idx, Some(0), g.key.as_deref(), g.value.as_deref());
    rec.headers = Some(headers);
    rd::send(p, rec);
    let d = rd::flush(p, idx + 1, CALL_TIMEOUT);
    rd::assert_all_delivered(&d);
}

/// `offset:value name=value ...`, the lab's topic written `$TOPIC` (a new name each run).
fn dead_letter_text(g: &rd::Got, topic: &str) -> String {
    let mut out = record_text(g);
    for (k, v) in &g.headers {
        let v = String::from_utf8_lossy(v.as_deref().unwrap_or_default()).replace(topic, "$TOPIC");
        out.push_str(&format!(" {k}={v}"));
    }
    out
}
