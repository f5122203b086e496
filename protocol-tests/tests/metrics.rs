//! `GET /metrics` on the admin listener: exact counts against real `brook` processes, and
//! a strict parse of the Prometheus text format (version 0.0.4) on every scrape, which one
//! test checks against the official Python client's parser.
//!
//! Single node: N Produce requests raise the Produce request counter by exactly N and the
//! topic's bytes-in by exactly the batch bytes sent; an error answer raises the error
//! counter under the error's Kafka name; a consumer Fetch raises bytes-out by the bytes
//! answered; the connection gauge and the Fetch purgatory follow real connections and parked
//! fetches. Cluster: a dead follower makes the leader report one under-replicated partition
//! and one ISR shrink; back, the partition is fully replicated and the ISR expanded.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::process::run_brook;
use brook_protocol_tests::wire::FETCH_V;
use brook_protocol_tests::{errors, poll_until_ok, rd, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::FetchRequest;
use rdkafka::consumer::Consumer;

/// Bound on one scrape's HTTP exchange.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on waiting for a metric to reach a value.
const METRIC_TIMEOUT: Duration = Duration::from_secs(30);

// ------------------------------------------------------------------------- the text format

/// A sample's labels, sorted by name.
type Labels = Vec<(String, String)>;
/// One sample's identity: metric name and its labels.
type SeriesKey = (String, Labels);

/// A parsed scrape: every sample by series, and each family's declared type.
#[derive(Debug)]
struct Scrape {
    samples: BTreeMap<SeriesKey, f64>,
    types: BTreeMap<String, String>,
    text: String,
}

impl Scrape {
    /// The sample's value; a labelled series not yet created reads 0, as a counter that has
    /// not counted (its family must still be declared).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        assert!(
            self.family_of(name).is_some(),
            "metric {name} is not declared in the scrape:\n{}",
            self.text
        );
        let mut l: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.sort();
        self.samples
            .get(&(name.to_string(), l))
            .copied()
            .unwrap_or(0.0)
    }

    fn family_of(&self, name: &str) -> Option<&str> {
        if let Some(t) = self.types.get(name) {
            return Some(t);
        }
        ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
            let base = name.strip_suffix(suffix)?;
            self.types
                .get(base)
                .filter(|t| *t == "histogram")
                .map(|t| t.as_str())
        })
    }
}

fn is_metric_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => s.parse().map_err(|_| format!("bad value {s:?}")),
    }
}

/// Parses `{k="v",...}` from the start of `s`; returns the labels and the rest.
fn parse_labels(s: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    let mut rest = s.strip_prefix('{').ok_or("labels must start with {")?;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest.find('=').ok_or("label without =")?;
        let name = &rest[..eq];
        if !is_label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value must be quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().ok_or("unterminated label value")? {
                (i, '"') => break i,
                (_, '\\') => match chars.next().ok_or("dangling escape")?.1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    other => return Err(format!("bad escape \\{other}")),
                },
                (_, '\n') => return Err("newline in label value".into()),
                (_, ch) => value.push(ch),
            }
        };
        if labels.iter().any(|(n, _)| n == name) {
            return Err(format!("label {name} given twice"));
        }
        labels.push((name.to_string(), value));
        rest = &rest[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if !rest.starts_with('}') {
            return Err("labels must be separated by ,".into());
        }
    }
}

/// A strict parser of the Prometheus text format 0.0.4: every line a HELP, a TYPE or a
/// sample; every sample's family typed before it; no series twice; counters named `_total`;
/// histogram buckets cumulative with a `+Inf` bucket equal to `_count`.
fn parse(text: &str) -> Result<Scrape, String> {
    if !text.ends_with('\n') {
        return Err("the text must end with a newline".into());
    }
    let mut scrape = Scrape {
        samples: BTreeMap::new(),
        types: BTreeMap::new(),
        text: text.to_string(),
    };
    let mut helped = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let err = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name, arg) = (parts.next(), parts.next(), parts.next());
            let name = name
                .filter(|n| is_metric_name(n))
                .ok_or_else(|| err("bad name".into()))?;
            match (kind, arg) {
                (Some("HELP"), _) => {
                    if !helped.insert(name.to_string()) {
                        return Err(err("HELP given twice".into()));
                    }
                }
                (Some("TYPE"), Some(t)) => {
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&t) {
                        return Err(err(format!("unknown type {t}")));
                    }
                    if t == "counter" && !name.ends_with("_total") {
                        return Err(err("a counter's name must end with _total".into()));
                    }
                    if scrape
                        .types
                        .insert(name.to_string(), t.to_string())
                        .is_some()
                    {
                        return Err(err("TYPE given twice".into()));
                    }
                }
                _ => return Err(err("a comment line must be HELP or TYPE".into())),
            }
            continue;
        }
        let name_end = line
            .find(['{', ' '])
            .ok_or_else(|| err("no value".into()))?;
        let name = &line[..name_end];
        if !is_metric_name(name) {
            return Err(err("bad metric name".into()));
        }
        let (mut labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end..]).map_err(err)?
        } else {
            (Vec::new(), &line[name_end..])
        };
        let fields: Vec<&str> = rest
            .strip_prefix(' ')
            .ok_or_else(|| err("no space before the value".into()))?
            .split(' ')
            .collect();
        let value = match fields[..] {
            [v] => parse_value(v),
            [v, ts] if ts.parse::<i64>().is_ok() => parse_value(v),
            _ => Err("expected a value and an optional timestamp".into()),
        }
        .map_err(err)?;
        if scrape.family_of(name).is_none() {
            return Err(err("sample of an undeclared family".into()));
        }
        labels.sort();
        if scrape
            .samples
            .insert((name.to_string(), labels), value)
            .is_some()
        {
            return Err(err("series given twice".into()));
        }
    }
    check_histograms(&scrape)?;
    Ok(scrape)
}

/// Each histogram series: buckets non-decreasing by `le`, ending at `+Inf` == `_count`.
fn check_histograms(s: &Scrape) -> Result<(), String> {
    let mut series: BTreeMap<SeriesKey, Vec<(f64, f64)>> = BTreeMap::new();
    for ((name, labels), v) in &s.samples {
        let Some(base) = name.strip_suffix("_bucket") else {
            continue;
        };
        let le = labels
            .iter()
            .find(|(k, _)| k == "le")
            .ok_or_else(|| format!("{name} sample without le"))?;
        let rest: Vec<(String, String)> =
            labels.iter().filter(|(k, _)| k != "le").cloned().collect();
        series
            .entry((base.to_string(), rest))
            .or_default()
            .push((parse_value(&le.1)?, *v));
    }
    for ((base, labels), mut buckets) in series {
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        if buckets.windows(2).any(|w| w[1].1 < w[0].1) {
            return Err(format!("{base}{labels:?}: buckets are not cumulative"));
        }
        let count = s.samples.get(&(format!("{base}_count"), labels.clone()));
        match buckets.last() {
            Some((le, n)) if le.is_infinite() && Some(n) == count => {}
            _ => return Err(format!("{base}{labels:?}: no +Inf bucket equal to _count")),
        }
    }
    Ok(())
}

#[test]
fn the_parser_refuses_malformed_text() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 3\n";
    assert_eq!(parse(good).unwrap().value("a_total", &[("x", "1")]), 3.0);
    for bad in [
        "a_total 1\n",                                                       // undeclared
        "# TYPE a counter\na 1\n",                // counter without _total
        "# TYPE a gauge\na{x=1} 1\n",             // unquoted label value
        "# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n", // label twice
        "# TYPE a gauge\na 1\na 2\n",             // series twice
        "# TYPE a gauge\na one\n",                // bad value
        "# TYPE a gauge\na 1",                    // no final newline
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 3\nh_sum 1\n", // +Inf != count
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n", // not cumulative
    ] {
        assert!(parse(bad).is_err(), "accepted malformed text {bad:?}");
    }
}

// ------------------------------------------------------------------------------- scraping

/// `GET /metrics` with a raw HTTP/1.1 request; the body, parsed strictly.
fn scrape(admin: &str) -> Scrape {
    let mut s = TcpStream::connect(admin).unwrap_or_else(|e| panic!("connect {admin}: {e}"));
    s.set_read_timeout(Some(SCRAPE_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(SCRAPE_TIMEOUT)).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read /metrics answer");
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .expect("HTTP answer without a body");
    assert!(head.starts_with("HTTP/1.1 200"), "GET /metrics: {head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "GET /metrics content type: {head}"
    );
    parse(body).unwrap_or_else(|e| panic!("/metrics is not Prometheus text: {e}\n{body}"))
}

fn admin_of(broker: &Broker) -> String {
    broker
        .ready_line()
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("admin="))
        .unwrap_or_else(|| panic!("READY line without admin=: {}", broker.ready_line()))
        .to_string()
}

fn start_broker() -> (Broker, String) {
    let broker = Broker::start_with(&[("admin.listener", "127.0.0.1:0")]);
    let admin = admin_of(&broker);
    (broker, admin)
}

/// Polls the scrape until `f` accepts it.
fn await_scrape(admin: &str, what: &str, f: impl Fn(&Scrape) -> bool) -> Scrape {
    poll_until_ok(what, METRIC_TIMEOUT, || {
        let s = scrape(admin);
        if f(&s) {
            Ok(s)
        } else {
            Err(s.text)
        }
    })
}

/// Requests are counted once their answer is written (Kafka's `RequestsPerSec` and
/// `TotalTimeMs` too), a moment after the client may read it: polls until `name` rose by at
/// least `want` from `before`, then requires exactly `want`.
fn await_rise(
    admin: &str,
    before: &Scrape,
    name: &str,
    labels: &[(&str, &str)],
    want: f64,
) -> Scrape {
    let base = before.value(name, labels);
    let after = await_scrape(admin, &format!("{name}{labels:?} up by {want}"), |s| {
        s.value(name, labels) - base >= want
    });
    assert_eq!(
        after.value(name, labels) - base,
        want,
        "{name}{labels:?}:\n{}",
        after.text
    );
    after
}

// ---------------------------------------------------------------------------- single node

const PRODUCE: [(&str, &str); 2] = [("request", "Produce"), ("version", "9")];

/// A broker with an admin listener, its admin address, a client and a new topic.
fn broker_with_topic(prefix: &str) -> (Broker, String, WireClient, String) {
    let (broker, admin) = start_broker();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic(prefix);
    c.ensure_topic(&topic);
    (broker, admin, c, topic)
}

#[test]
fn produce_requests_and_topic_bytes_in_are_counted_exactly() {
    let (_broker, admin, mut c, topic) = broker_with_topic("metrics-in");
    let before = scrape(&admin);

    const N: usize = 7;
    let (mut bytes, mut records) = (0usize, 0usize);
    for i in 0..N {
        // Batches of 1..=N records, so a count of requests and a count of records differ.
        let recs: Vec<Rec> = (0..=i)
            .map(|j| {
                Rec::kv(
                    &format!("k{j}"),
                    &format!("value {i}/{j}"),
                    1_700_000_000_000,
                )
            })
            .collect();
        let batch = encode_batch(Producer::NONE, &recs);
        bytes += batch.len();
        records += recs.len();
        let p = c.produce(&topic, 0, batch);
        assert_eq!(p.error_code, errors::NONE, "produce {i}: {p:?}");
    }
    await_rise(&admin, &before, "brook_requests_total", &PRODUCE, N as f64);
    let after = await_rise(
        &admin,
        &before,
        "brook_request_duration_seconds_count",
        &PRODUCE,
        N as f64,
    );

    let delta = |name: &str, labels: &[(&str, &str)]| {
        after.value(name, labels) - before.value(name, labels)
    };
    let t = [("topic", topic.as_str())];
    assert_eq!(delta("brook_requests_total", &PRODUCE), N as f64);
    assert_eq!(delta("brook_topic_bytes_in_total", &t), bytes as f64);
    assert_eq!(delta("brook_topic_records_in_total", &t), records as f64);
    assert_eq!(
        after.value(
            "brook_request_errors_total",
            &[
                PRODUCE[0],
                PRODUCE[1],
                ("error", "UNKNOWN_TOPIC_OR_PARTITION")
            ]
        ),
        0.0
    );
    assert_eq!(after.value("brook_under_replicated_partitions", &[]), 0.0);
    assert_eq!(after.value("brook_offline_partitions", &[]), 0.0);
}

#[test]
fn an_error_answer_is_counted_under_its_kafka_name() {
    let (broker, admin) = start_broker();
    let mut c = WireClient::connect(&broker.bootstrap());
    let missing = unique_topic("metrics-missing");
    let error = [
        PRODUCE[0],
        PRODUCE[1],
        ("error", "UNKNOWN_TOPIC_OR_PARTITION"),
    ];
    let before = scrape(&admin);

    // Produce does not create topics: the partition answers UNKNOWN_TOPIC_OR_PARTITION.
    let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_700_000_000_000)]);
    let p = c.produce(&missing, 0, batch);
    assert_eq!(p.error_code, errors::UNKNOWN_TOPIC_OR_PARTITION, "{p:?}");
    // The error codes are counted before the answer is sent.
    let counted = scrape(&admin);
    assert_eq!(
        counted.value("brook_request_errors_total", &error),
        1.0,
        "{}",
        counted.text
    );
    let after = await_rise(&admin, &before, "brook_requests_total", &PRODUCE, 1.0);
    assert_eq!(after.value("brook_request_errors_total", &error), 1.0);
    // Nothing was appended, and a topic that does not exist is no label.
    assert!(
        !after.text.contains(&missing),
        "the missing topic became a label:\n{}",
        after.text
    );
}

#[test]
fn consumer_fetch_bytes_out_connections_and_parked_fetches() {
    let (broker, admin, mut c, topic) = broker_with_topic("metrics-out");
    let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_700_000_000_000)]);
    assert_eq!(c.produce(&topic, 0, batch).error_code, errors::NONE);
    let t = [("topic", topic.as_str())];

    let before = scrape(&admin);
    assert_eq!(
        before.value("brook_connections", &[]),
        1.0,
        "one client connected"
    );
    let data = c.fetch(&topic, 0, 0);
    let answered = data.records.as_ref().map_or(0, |r| r.len());
    assert!(answered > 0, "the fetch read the batch: {data:?}");
    let after = scrape(&admin);
    assert_eq!(
        after.value("brook_topic_bytes_out_total", &t)
            - before.value("brook_topic_bytes_out_total", &t),
        answered as f64
    );

    // A fetch at the log end parks until max_wait_ms: the Fetch purgatory shows it.
    let mut waiting = WireClient::connect(&broker.bootstrap());
    let fetch = [("operation", "Fetch")];
    let req: FetchRequest = WireClient::fetch_request(&topic, 0, 1, 3_000);
    let id = waiting.send(FETCH_V, &req);
    await_scrape(&admin, "the parked fetch in the purgatory", |s| {
        s.value("brook_purgatory_size", &fetch) == 1.0 && s.value("brook_connections", &[]) == 2.0
    });
    let resp = waiting.receive::<FetchRequest>(FETCH_V, id);
    assert_eq!(resp.responses[0].partitions[0].error_code, errors::NONE);
    await_scrape(&admin, "the answered fetch out of the purgatory", |s| {
        s.value("brook_purgatory_size", &fetch) == 0.0
    });

    drop(waiting);
    drop(c);
    await_scrape(&admin, "no client connection left", |s| {
        s.value("brook_connections", &[]) == 0.0
    });
}

#[test]
fn producer_ids_are_read_from_the_partitions_producer_state() {
    let (_broker, admin, mut c, topic) = broker_with_topic("metrics-pid");
    let plain = encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_700_000_000_000)]);
    assert_eq!(c.produce(&topic, 0, plain).error_code, errors::NONE);
    assert_eq!(scrape(&admin).value("brook_producer_ids", &[]), 0.0);
    for _ in 0..2 {
        let (id, epoch) = c.init_producer_id();
        let producer = Producer {
            id,
            epoch,
            base_sequence: 0,
        };
        let batch = encode_batch(producer, &[Rec::kv("k", "v", 1_700_000_000_000)]);
        assert_eq!(c.produce(&topic, 0, batch).error_code, errors::NONE);
    }
    assert_eq!(scrape(&admin).value("brook_producer_ids", &[]), 2.0);
}

#[test]
fn groups_are_reported_by_type_and_state() {
    let broker = Broker::start_with(&[
        ("admin.listener", "127.0.0.1:0"),
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "3"),
    ]);
    let admin = admin_of(&broker);
    let topic = unique_topic("metrics-group");
    WireClient::connect(&broker.bootstrap()).ensure_topic(&topic);
    let stable = [("type", "classic"), ("state", "Stable")];
    let empty = [("type", "classic"), ("state", "Empty")];
    assert_eq!(scrape(&admin).value("brook_groups", &stable), 0.0);
    {
        let c = rd::group_consumer(&broker.bootstrap(), &format!("{topic}-g"), &[]);
        c.subscribe(&[&topic]).expect("subscribe");
        let s = poll_until_ok("a stable classic group", METRIC_TIMEOUT, || {
            let _ = c.poll(Duration::from_millis(50));
            let s = scrape(&admin);
            if s.value("brook_groups", &stable) == 1.0 {
                Ok(s)
            } else {
                Err(s.text)
            }
        });
        // One member joined: one rebalance, generation 1.
        let classic = [("type", "classic")];
        assert_eq!(s.value("brook_group_rebalances_total", &classic), 1.0);
        // Dropping the consumer leaves the group.
    }
    await_scrape(&admin, "the group empty once its member left", |s| {
        s.value("brook_groups", &empty) == 1.0 && s.value("brook_groups", &stable) == 0.0
    });
}

// -------------------------------------------------------------------------------- cluster

/// What the official Python client's parser (`prometheus_client.parser`, run by
/// `scripts/prometheus_parse.py`) reads from `text`: each family's type, and every sample.
fn parse_with_prometheus_client(
    text: &str,
) -> (BTreeMap<String, String>, BTreeMap<SeriesKey, f64>) {
    use std::process::{Command, Stdio};
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/prometheus_parse.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (scripts/test installs prometheus_client)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write the scrape to the parser");
    let out = child.wait_with_output().expect("parser output");
    assert!(
        out.status.success(),
        "prometheus_client refused the scrape: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let families: serde_json::Value = serde_json::from_slice(&out.stdout).expect("parser JSON");
    let (mut types, mut samples) = (BTreeMap::new(), BTreeMap::new());
    for f in families.as_array().expect("a list of families") {
        // The client names a counter family without `_total`; its samples keep it.
        let name = f["name"].as_str().expect("family name").to_string();
        let kind = f["type"].as_str().expect("family type").to_string();
        let declared = if kind == "counter" {
            format!("{name}_total")
        } else {
            name
        };
        types.insert(declared, kind);
        for s in f["samples"].as_array().expect("samples") {
            let mut labels: Labels = s[1]
                .as_object()
                .expect("labels")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("label value").to_string()))
                .collect();
            labels.sort();
            let value = s[2].as_f64().expect("sample value");
            samples.insert(
                (s[0].as_str().expect("sample name").to_string(), labels),
                value,
            );
        }
    }
    (types, samples)
}

/// Every family kind on the page (counters, gauges, labelled families, histograms) has a
/// sample, and the official Python client's parser reads the same families, types and
/// samples as this file's strict parser.
#[test]
fn a_real_prometheus_parser_reads_the_scrape_as_we_do() {
    let (broker, admin, mut c, topic) = broker_with_topic("metrics-promparse");
    let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_000)]);
    assert_eq!(c.produce(&topic, 0, batch.clone()).error_code, errors::NONE);
    assert_eq!(
        c.produce(&unique_topic("metrics-promparse-missing"), 0, batch)
            .error_code,
        errors::UNKNOWN_TOPIC_OR_PARTITION
    );
    let ours = await_scrape(&admin, "the produce counted", |s| {
        s.value("brook_requests_total", &PRODUCE) >= 2.0
    });
    let (types, samples) = parse_with_prometheus_client(&ours.text);
    assert_eq!(types, ours.types, "family types");
    assert_eq!(samples, ours.samples, "samples");
    for kind in ["counter", "gauge", "histogram"] {
        assert!(
            types.values().any(|t| t == kind),
            "no {kind} family:\n{}",
            ours.text
        );
    }
    assert!(samples
        .keys()
        .any(|(n, _)| n == "brook_request_duration_seconds_bucket"));
    drop(broker);
}

#[test]
fn fault_rules_and_their_firings_are_counted_by_kind() {
    let (broker, admin, mut c, topic) = broker_with_topic("metrics-faults");
    let before = scrape(&admin);
    // A single node is its own controller and has no metadata quorum.
    assert_eq!(before.value("brook_active_controller", &[]), 1.0);
    assert!(before.family_of("brook_metadata_quorum_leader").is_none());
    assert_eq!(
        before.value("brook_fault_rules", &[("kind", "request")]),
        0.0
    );

    let cli = |args: &[&str]| {
        let out = run_brook(args, SCRAPE_TIMEOUT);
        assert!(out.status.success(), "brook {args:?}: {out:?}");
    };
    cli(&[
        "fault",
        "add",
        "--admin",
        &admin,
        "--api",
        "produce",
        "--action",
        "error",
        "--error",
        "NOT_ENOUGH_REPLICAS",
        "--times",
        "2",
    ]);
    let installed = scrape(&admin);
    assert_eq!(
        installed.value("brook_fault_rules", &[("kind", "request")]),
        1.0
    );
    assert_eq!(
        installed.value("brook_fault_rules", &[("kind", "link")]),
        0.0
    );
    let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_000)]);
    let not_enough = kafka_protocol::ResponseError::NotEnoughReplicas.code();
    let codes: Vec<i16> = (0..3)
        .map(|_| c.produce(&topic, 0, batch.clone()).error_code)
        .collect();
    assert_eq!(codes, [not_enough, not_enough, errors::NONE]);
    let fired = scrape(&admin);
    assert_eq!(
        fired.value("brook_fault_fires_total", &[("kind", "request")]),
        2.0
    );
    assert_eq!(
        fired.value("brook_fault_fires_total", &[("kind", "crash")]),
        0.0
    );

    // Clearing the rule takes it off the gauge; its firings stay counted.
    cli(&["fault", "clear", "--admin", &admin]);
    let cleared = scrape(&admin);
    assert_eq!(
        cleared.value("brook_fault_rules", &[("kind", "request")]),
        0.0
    );
    assert_eq!(
        cleared.value("brook_fault_fires_total", &[("kind", "request")]),
        2.0
    );
    drop(broker);
}

#[test]
fn a_dead_follower_shrinks_the_isr_and_its_return_expands_it() {
    // The leader's lag check (replica.lag.time.max.ms=3000) must remove the dead follower,
    // not the controller fencing it: a session far longer than the lag, and no controlled
    // shutdown to wait out at the end.
    let mut cluster = Cluster::start(
        3,
        &[
            ("broker.session.timeout.ms", "20000"),
            ("controlled.shutdown.enable", "false"),
        ],
    );
    let topic = unique_topic("metrics-isr");
    // min.insync.replicas=3: one replica out of the ISR puts the partition under min ISR.
    cluster.create_topic(&topic, 1, 3, &[("min.insync.replicas", "3")]);
    let state = cluster.await_isr(&topic, 0, &[1, 2, 3], METRIC_TIMEOUT);
    let leader = state.leader;
    let controller = cluster.await_controller(None, METRIC_TIMEOUT);
    let follower = cluster
        .ids()
        .into_iter()
        .filter(|&id| id != leader)
        .max_by_key(|&id| id != controller)
        .expect("a follower");
    let admin = cluster.admin_address(leader);
    let before = await_scrape(&admin, "a fully replicated partition", |s| {
        s.value("brook_under_replicated_partitions", &[]) == 0.0
    });
    assert_eq!(before.value("brook_under_min_isr_partitions", &[]), 0.0);
    let shrinks = before.value("brook_isr_shrinks_total", &[]);
    let expands = before.value("brook_isr_expands_total", &[]);

    cluster.kill(follower);
    let shrunk = await_scrape(&admin, "one under-replicated partition", |s| {
        s.value("brook_under_replicated_partitions", &[]) == 1.0
            && s.value("brook_isr_shrinks_total", &[]) > shrinks
    });
    assert_eq!(shrunk.value("brook_isr_shrinks_total", &[]), shrinks + 1.0);
    assert_eq!(shrunk.value("brook_isr_expands_total", &[]), expands);
    assert_eq!(shrunk.value("brook_under_min_isr_partitions", &[]), 1.0);

    cluster.start_node(follower);
    let healed = await_scrape(&admin, "the partition fully replicated again", |s| {
        s.value("brook_under_replicated_partitions", &[]) == 0.0
            && s.value("brook_isr_expands_total", &[]) > expands
    });
    assert_eq!(healed.value("brook_isr_expands_total", &[]), expands + 1.0);
    assert_eq!(healed.value("brook_isr_shrinks_total", &[]), shrinks + 1.0);
    assert_eq!(healed.value("brook_under_min_isr_partitions", &[]), 0.0);
}

#[test]
fn followers_fetch_in_one_session_per_leader_and_replicate_through_it() {
    let cluster = Cluster::start(3, &[]);
    let topic = unique_topic("metrics-fetch-sessions");
    const PARTITIONS: i32 = 6;
    cluster.create_topic(&topic, PARTITIONS, 3, &[("min.insync.replicas", "2")]);
    let mut led: BTreeMap<i32, f64> = cluster.ids().into_iter().map(|id| (id, 0.0)).collect();
    for p in 0..PARTITIONS {
        let state = cluster.await_isr(&topic, p, &[1, 2, 3], METRIC_TIMEOUT);
        *led.entry(state.leader).or_default() += 1.0;
    }
    // Each leader holds one session per follower node, each with every partition it leads
    // there (all replicated to all three nodes); a node leading nothing holds none.
    for (&id, &n) in &led {
        let sessions = if n > 0.0 { 2.0 } else { 0.0 };
        await_scrape(
            &cluster.admin_address(id),
            "the followers' fetch sessions",
            |s| {
                s.value("brook_fetch_sessions", &[]) == sessions
                    && s.value("brook_fetch_session_partitions", &[]) == 2.0 * n
            },
        );
    }
    // Records into every partition reach every replica through the sessions' incremental
    // fetches, byte for byte.
    let producer = rd::producer(&cluster.bootstrap(), &[("acks", "all"), ("linger.ms", "5")]);
    const RECORDS: usize = 600;
    for i in 0..RECORDS {
        let value = format!("v{i}");
        let partition = Some((i % PARTITIONS as usize) as i32);
        rd::send(
            &producer,
            rd::record(&topic, i, partition, None, Some(value.as_bytes())),
        );
    }
    rd::assert_all_delivered(&rd::flush(&producer, RECORDS, METRIC_TIMEOUT));
    for p in 0..PARTITIONS {
        let log = cluster.await_identical_replicas(&topic, p, &[1, 2, 3], METRIC_TIMEOUT);
        assert_eq!(
            log.last().map(|b| b.last_offset() + 1),
            Some((RECORDS / PARTITIONS as usize) as i64),
            "partition {p}"
        );
    }
    for (&id, &n) in &led {
        let s = scrape(&cluster.admin_address(id));
        assert_eq!(s.value("brook_fetch_session_evictions_total", &[]), 0.0);
        assert_eq!(
            s.value("brook_fetch_sessions", &[]),
            if n > 0.0 { 2.0 } else { 0.0 },
            "node {id}: no session was replaced"
        );
    }
}

/// The sum of `name` over the scrapes of every live node.
fn sum_over(cluster: &Cluster, name: &str) -> f64 {
    cluster
        .live_ids()
        .into_iter()
        .map(|id| scrape(&cluster.admin_address(id)).value(name, &[]))
        .sum()
}

#[test]
fn fencing_a_leader_is_one_election_and_its_lone_replicas_go_offline() {
    let mut cluster = Cluster::start(3, &[("controlled.shutdown.enable", "false")]);
    let replicated = unique_topic("metrics-elect");
    cluster.create_topic(&replicated, 1, 3, &[]);
    let victim = cluster
        .await_isr(&replicated, 0, &[1, 2, 3], METRIC_TIMEOUT)
        .leader;
    // One replica per partition, spread over the nodes: the victim's go offline with it.
    let lone = unique_topic("metrics-offline");
    cluster.create_topic(&lone, 3, 1, &[("min.insync.replicas", "1")]);
    let offline = (0..3)
        .filter(|&p| cluster.leader_of(&lone, p) == victim)
        .count() as f64;
    assert!(offline > 0.0, "no partition of {lone} on node {victim}");
    let elections: BTreeMap<i32, f64> = cluster
        .live_ids()
        .into_iter()
        .map(|id| {
            let s = scrape(&cluster.admin_address(id));
            assert_eq!(s.value("brook_offline_partitions", &[]), 0.0, "node {id}");
            (id, s.value("brook_leader_elections_total", &[]))
        })
        .collect();

    cluster.kill(victim);
    // The controller fences the victim after broker.session.timeout.ms: the replicated
    // partition elects a new leader from its ISR; the lone ones have nobody to elect.
    cluster.await_leader_other_than(&replicated, 0, victim, METRIC_TIMEOUT);
    poll_until_ok(
        "the offline partitions on the active controller",
        METRIC_TIMEOUT,
        || {
            let n = sum_over(&cluster, "brook_offline_partitions");
            (n == offline)
                .then_some(())
                .ok_or(format!("offline partitions: {n}"))
        },
    );
    // Counted by whichever node is active controller now (a new one if the victim was).
    let risen = || -> f64 {
        cluster
            .live_ids()
            .into_iter()
            .map(|id| {
                let s = scrape(&cluster.admin_address(id));
                s.value("brook_leader_elections_total", &[]) - elections[&id]
            })
            .sum()
    };
    let n = poll_until_ok("the election counted", METRIC_TIMEOUT, || {
        let n = risen();
        (n >= 1.0).then_some(n).ok_or(format!("elections: {n}"))
    });
    assert_eq!(n, 1.0, "leader elections after fencing node {victim}");
}

#[test]
fn a_returning_leader_counts_its_truncation_to_the_new_leaders_log() {
    let mut cluster = Cluster::start(3, &[("controlled.shutdown.enable", "false")]);
    let topic = unique_topic("metrics-truncate");
    cluster.create_topic(&topic, 1, 3, &[("min.insync.replicas", "1")]);
    let (old, new) = cluster.diverge_partition_leader(&topic, METRIC_TIMEOUT);

    // Back as a follower, the old leader's log diverges at the new epoch: it truncates.
    cluster.start_node(old);
    await_scrape(&cluster.admin_address(old), "a follower truncation", |s| {
        s.value("brook_follower_truncations_total", &[]) >= 1.0
    });
    assert_eq!(
        scrape(&cluster.admin_address(new)).value("brook_follower_truncations_total", &[]),
        0.0,
        "the new leader truncated nothing"
    );
}

/// Node `id`'s view of the metadata quorum: (state, leader, epoch, log end offset, high
/// watermark, active controller).
fn quorum_view(cluster: &Cluster, id: i32) -> (String, f64, f64, f64, f64, f64) {
    let s = scrape(&cluster.admin_address(id));
    let states = ["leader", "candidate", "follower", "observer", "shutdown"];
    let current: Vec<&str> = states
        .into_iter()
        .filter(|st| s.value("brook_metadata_quorum_state", &[("state", st)]) == 1.0)
        .collect();
    assert_eq!(
        current.len(),
        1,
        "node {id}: one current state:\n{}",
        s.text
    );
    (
        current[0].to_string(),
        s.value("brook_metadata_quorum_leader", &[]),
        s.value("brook_metadata_quorum_epoch", &[]),
        s.value("brook_metadata_quorum_log_end_offset", &[]),
        s.value("brook_metadata_quorum_high_watermark", &[]),
        s.value("brook_active_controller", &[]),
    )
}

/// Waits until the live nodes agree on a quorum leader other than `not`; returns it and the
/// epoch.
fn await_quorum_agreement(cluster: &Cluster, not: Option<i32>) -> (i32, f64) {
    poll_until_ok("the nodes agree on a quorum leader", METRIC_TIMEOUT, || {
        let views: Vec<(i32, _)> = cluster
            .live_ids()
            .into_iter()
            .map(|id| (id, quorum_view(cluster, id)))
            .collect();
        let (_, first) = &views[0];
        let leader = first.1 as i32;
        let agreed = leader >= 1
            && Some(leader) != not
            && views.iter().all(|(id, v)| {
                let role = if *id == leader { "leader" } else { "follower" };
                v.0 == role
                    && v.1 == first.1
                    && v.2 == first.2
                    && v.4 <= v.3
                    && v.4 >= 1.0
                    && v.5 == f64::from(*id == leader)
            });
        agreed
            .then_some((leader, first.2))
            .ok_or(format!("{views:?}"))
    })
}

#[test]
fn the_metadata_quorum_is_seen_alike_by_every_node_and_moves_on_a_leader_kill() {
    let mut cluster = Cluster::start(3, &[]);
    let (leader, epoch) = await_quorum_agreement(&cluster, None);
    // Metadata's controller id is the same node: the active controller is the quorum leader.
    assert_eq!(cluster.await_controller(None, METRIC_TIMEOUT), leader);

    cluster.kill(leader);
    let (next, next_epoch) = await_quorum_agreement(&cluster, Some(leader));
    assert_ne!(next, leader);
    assert!(next_epoch > epoch, "epoch {epoch} -> {next_epoch}");
}
