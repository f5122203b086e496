//! The JSON state views on the admin listener (`/v1/cluster`, `/v1/partitions`,
//! `/v1/producers`, `/v1/groups`, `/v1/transactions`), read over plain HTTP/1.1 on a std
//! `TcpStream` from real `brook serve` processes while librdkafka clients produce and
//! consume. Each view is checked against an independent source: the log on disk (`brook
//! dump-log`), the delivery reports, the client's own settings, and what a killed node must
//! turn into.
//!
//! Every wait is a condition polled against a deadline.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeSet;
use std::time::Duration;

use brook_protocol_tests::cluster::{DumpedBatch, CALL};
use brook_protocol_tests::process::run_brook;
use brook_protocol_tests::rd::{self, record};
use brook_protocol_tests::supervised;
use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, Cluster};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::Producer;
use serde_json::Value;

/// How long a group may take to settle, an ISR to shrink or a broker to be fenced.
const SETTLE: Duration = Duration::from_secs(40);

/// `GET path` on the admin listener `admin`: the status and the JSON body.
fn get(admin: &str, path: &str) -> (u16, Value) {
    let (status, json) = supervised::http("GET", admin, path, None, CALL);
    assert!(!json.is_null(), "{path}: no JSON answer ({status})");
    (status, json)
}

/// `GET path`, which must answer 200.
fn get_ok(admin: &str, path: &str) -> Value {
    let (status, v) = get(admin, path);
    assert_eq!(status, 200, "GET {path}: {v}");
    v
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_i64().unwrap_or_else(|| panic!("not a number: {x}")))
        .collect()
}

/// The batches of a partition directory, as `brook dump-log` reads them from disk.
fn dump_log(dir: &std::path::Path) -> Vec<DumpedBatch> {
    let dir = dir.display().to_string();
    let out = run_brook(&["dump-log", &dir], CALL * 3);
    assert!(out.status.success(), "dump-log {dir}: {}", out.stderr);
    out.stdout
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .map(DumpedBatch::parse)
        .collect()
}

/// An idempotent producer sends 7 batches (1, 2, ... 7 records, one flush each) to partition
/// 0: `/v1/producers` shows its producer id with exactly the last five batches, whose
/// sequence ranges and offsets are those the log on disk holds. Bad parameters get 400/404.
#[test]
fn producers_view_shows_the_last_five_batches_of_the_log() {
    let broker = Broker::start_with(&[("admin.listener", "127.0.0.1:0")]);
    let admin = broker.admin_address();
    let topic = unique_topic("sv-producers");
    let p = rd::producer(
        &broker.bootstrap(),
        &[("enable.idempotence", "true"), ("linger.ms", "50")],
    );
    let mut sent = 0;
    for batch in 0..7 {
        for _ in 0..=batch {
            rd::send(&p, record(&topic, sent, Some(0), None, Some(b"v")));
            sent += 1;
        }
        rd::assert_all_delivered(&rd::flush(&p, sent, Duration::from_secs(30)));
    }
    let log = dump_log(&broker.data_dir().join(format!("{topic}-0")));
    assert!(log.len() >= 7, "expected 7 batches on disk: {log:?}");
    let view = get_ok(&admin, &format!("/v1/producers?topic={topic}&partition=0"));
    assert_eq!(view["role"], "leader", "{view}");
    assert_eq!(view["truncated"], false, "{view}");
    let producers = view["producers"].as_array().expect("producers");
    assert_eq!(producers.len(), 1, "{view}");
    let pid = producers[0]["producer_id"].as_i64().expect("producer_id");
    let field = |b: &DumpedBatch, k: &str| -> i64 { b.fields[k].parse().expect(k) };
    let expected: Vec<[i64; 4]> = log[log.len() - 5..]
        .iter()
        .map(|b| {
            assert_eq!(field(b, "producerId"), pid, "{}", b.line);
            let seqs = [field(b, "baseSequence"), field(b, "lastSequence")];
            [seqs[0], seqs[1], b.base_offset(), b.last_offset()]
        })
        .collect();
    let shown: Vec<[i64; 4]> = producers[0]["batches"]
        .as_array()
        .expect("batches")
        .iter()
        .map(|b| {
            let n = |k: &str| b[k].as_i64().unwrap_or_else(|| panic!("{k} in {b}"));
            [
                n("first_sequence"),
                n("last_sequence"),
                n("first_offset"),
                n("last_offset"),
            ]
        })
        .collect();
    assert_eq!(shown, expected, "view {view} against the log");
    assert_eq!(producers[0]["last_sequence"], sent as i64 - 1, "{view}");
    assert_eq!(producers[0]["current_txn_first_offset"], Value::Null);

    // The partition as the single node sees it: leader of its own log, everything committed.
    let parts = get_ok(&admin, &format!("/v1/partitions?topic={topic}"));
    let part = &parts["partitions"][0];
    assert_eq!(part["role"], "leader", "{parts}");
    assert_eq!(part["log_end_offset"], sent as i64, "{parts}");
    assert_eq!(part["high_watermark"], sent as i64, "{parts}");
    assert_eq!(part["last_stable_offset"], sent as i64, "{parts}");
    assert_eq!(part["elr"], Value::Null, "no image alone: {parts}");
    let cluster = get_ok(&admin, "/v1/cluster");
    assert_eq!(cluster["mode"], "single", "{cluster}");
    assert_eq!(cluster["node_id"], 1, "{cluster}");
    assert_eq!(cluster["controller"], Value::Null, "{cluster}");

    for (path, status) in [
        (
            "/v1/producers?topic=sv-no-such-topic&partition=0".to_string(),
            404,
        ),
        (format!("/v1/producers?topic={topic}&partition=x"), 400),
        (format!("/v1/producers?topic={topic}&partition=7"), 400),
        (format!("/v1/producers?topic={topic}"), 400),
        ("/v1/partitions?topic=sv-no-such-topic".to_string(), 404),
        ("/v1/partitions?colour=blue".to_string(), 400),
    ] {
        let (got, body) = get(&admin, &path);
        assert_eq!(got, status, "GET {path}: {body}");
        assert!(body["error"].is_string(), "GET {path}: {body}");
    }
}

/// A transactional librdkafka producer: while its transaction is open `/v1/producers` shows
/// the transaction's first offset (that of its first record), and once the COMMIT marker is
/// written, none.
#[test]
fn producers_view_shows_the_open_transaction() {
    let broker = Broker::start_with(&[
        ("admin.listener", "127.0.0.1:0"),
        ("transaction.state.log.num.partitions", "3"),
    ]);
    let admin = broker.admin_address();
    let topic = unique_topic("sv-txn");
    let p = rd::producer(&broker.bootstrap(), &[("transactional.id", &topic)]);
    p.init_transactions(CALL).expect("init_transactions");
    p.begin_transaction().expect("begin");
    for i in 0..3 {
        rd::send(&p, record(&topic, i, Some(0), None, Some(b"v")));
    }
    let d = rd::flush(&p, 3, Duration::from_secs(30));
    rd::assert_all_delivered(&d);
    let path = format!("/v1/producers?topic={topic}&partition=0");
    let open = get_ok(&admin, &path);
    let first = d.iter().map(|d| d.offset).min().expect("an offset");
    assert_eq!(
        open["producers"][0]["current_txn_first_offset"], first,
        "{open}"
    );
    // The partition view lists the same open transaction, which holds the last stable offset
    // at its first offset; the coordinator's view has the id Ongoing with the partition.
    let part = &get_ok(&admin, &format!("/v1/partitions?topic={topic}"))["partitions"][0];
    let txn = &part["open_transactions"][0];
    assert_eq!(txn["first_offset"], first, "{part}");
    assert_eq!(
        txn["producer_id"], open["producers"][0]["producer_id"],
        "{part}"
    );
    assert_eq!(
        txn["producer_epoch"], open["producers"][0]["producer_epoch"],
        "{part}"
    );
    assert!(txn["first_batch_timestamp"].as_i64().is_some(), "{part}");
    assert_eq!(part["last_stable_offset"], first, "{part}");
    let coordinator = coordinated(&admin, &topic);
    assert_eq!(coordinator["state"], "Ongoing", "{coordinator}");
    assert_eq!(
        coordinator["producer_id"], txn["producer_id"],
        "{coordinator}"
    );
    assert_eq!(
        coordinator["partitions"][0]["topic"],
        topic.as_str(),
        "{coordinator}"
    );
    assert_eq!(ints(&coordinator["partitions"][0]["partitions"]), vec![0]);
    p.commit_transaction(CALL).expect("commit");
    // EndTxn is answered once the commit is decided; the marker that closes the transaction
    // on the partition follows.
    poll_until_ok("the COMMIT marker closes the transaction", SETTLE, || {
        let done = get_ok(&admin, &path);
        let closed = done["producers"][0]["current_txn_first_offset"].is_null();
        closed.then_some(()).ok_or_else(|| format!("{done}"))
    });
    let part = &get_ok(&admin, &format!("/v1/partitions?topic={topic}"))["partitions"][0];
    assert_eq!(part["open_transactions"], serde_json::json!([]), "{part}");
    assert_eq!(part["last_stable_offset"], part["high_watermark"], "{part}");
    let coordinator = coordinated(&admin, &topic);
    assert_eq!(coordinator["state"], "CompleteCommit", "{coordinator}");
}

/// Transactional id `id` as `/v1/transactions` shows it.
fn coordinated(admin: &str, id: &str) -> Value {
    let v = get_ok(admin, "/v1/transactions");
    let all = v["transactions"].as_array().expect("transactions");
    let found = all.iter().find(|t| t["transactional_id"] == id);
    found.cloned().unwrap_or_else(|| panic!("no {id} in {v}"))
}

/// Group `group` as `/v1/groups` shows it, once it is Stable with `members` members.
fn stable_group(admin: &str, group: &str, members: usize) -> Result<Value, String> {
    let v = get_ok(admin, "/v1/groups");
    let g = v["groups"]
        .as_array()
        .and_then(|gs| gs.iter().find(|g| g["group_id"] == group).cloned())
        .ok_or_else(|| format!("{v}"))?;
    let n = g["members"].as_array().map_or(0, Vec::len);
    if g["state"] != "Stable" || n != members {
        return Err(format!("{g}"));
    }
    Ok(g)
}

fn poll_both(a: &BaseConsumer, b: Option<&BaseConsumer>) {
    for c in std::iter::once(a).chain(b) {
        if let Some(Err(e)) = c.poll(Duration::from_millis(50)) {
            eprintln!("consumer: {e}");
        }
    }
}

/// A classic consumer group of librdkafka members: `/v1/groups` shows its protocol, state,
/// generation and members with their assignments; a second member makes a new generation
/// and the two assignments split the topic's partitions.
#[test]
fn groups_view_shows_generation_and_members() {
    let broker = Broker::start_with(&[
        ("admin.listener", "127.0.0.1:0"),
        ("num.partitions", "2"),
        ("group.initial.rebalance.delay.ms", "0"),
    ]);
    let admin = broker.admin_address();
    let topic = unique_topic("sv-groups");
    let group = unique_topic("sv-group");
    let p = rd::producer(&broker.bootstrap(), &[]);
    rd::send(&p, record(&topic, 0, Some(0), None, Some(b"v")));
    rd::assert_all_delivered(&rd::flush(&p, 1, Duration::from_secs(30)));

    let first = rd::group_consumer(&broker.bootstrap(), &group, &[("client.id", "sv-first")]);
    first.subscribe(&[&topic]).expect("subscribe");
    let g1 = poll_until_ok("one Stable member", SETTLE, || {
        poll_both(&first, None);
        stable_group(&admin, &group, 1)
    });
    assert_eq!(g1["protocol"], "classic", "{g1}");
    assert_eq!(g1["protocol_type"], "consumer", "{g1}");
    let gen1 = g1["generation"].as_i64().expect("generation");
    assert!(gen1 >= 1, "{g1}");
    let m = &g1["members"][0];
    assert_eq!(m["client_id"], "sv-first", "{g1}");
    assert_eq!(g1["leader_id"], m["member_id"], "{g1}");
    assert_eq!(m["assignment"][0]["topic"], topic.as_str(), "{g1}");
    assert_eq!(ints(&m["assignment"][0]["partitions"]), vec![0, 1], "{g1}");
    assert_eq!(
        g1["offsets"],
        serde_json::json!([]),
        "nothing committed: {g1}"
    );
    // A commit shows as the group's committed offset of that partition.
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, rdkafka::Offset::Offset(1))
        .expect("offset");
    first
        .commit(&tpl, rdkafka::consumer::CommitMode::Sync)
        .expect("commit");
    let committed = &stable_group(&admin, &group, 1).expect("still Stable")["offsets"];
    assert_eq!(committed.as_array().map(Vec::len), Some(1), "{committed}");
    assert_eq!(committed[0]["topic"], topic.as_str(), "{committed}");
    assert_eq!(committed[0]["partition"], 0, "{committed}");
    assert_eq!(committed[0]["committed_offset"], 1, "{committed}");

    let second = rd::group_consumer(&broker.bootstrap(), &group, &[("client.id", "sv-second")]);
    second.subscribe(&[&topic]).expect("subscribe");
    let g2 = poll_until_ok("two Stable members", SETTLE, || {
        poll_both(&first, Some(&second));
        stable_group(&admin, &group, 2)
    });
    assert!(
        g2["generation"].as_i64().expect("generation") > gen1,
        "{g2}"
    );
    let mut clients = BTreeSet::new();
    let mut partitions = Vec::new();
    for m in g2["members"].as_array().expect("members") {
        clients.insert(m["client_id"].as_str().expect("client_id").to_string());
        let a = m["assignment"].as_array().expect("assignment");
        assert_eq!(a.len(), 1, "one partition each: {g2}");
        partitions.extend(ints(&a[0]["partitions"]));
    }
    partitions.sort();
    assert_eq!(partitions, vec![0, 1], "{g2}");
    let want: BTreeSet<String> = ["sv-first".into(), "sv-second".into()].into();
    assert_eq!(clients, want, "{g2}");
}

/// A KIP-848 consumer group (librdkafka with `group.protocol=consumer`): `/v1/groups` shows
/// it as a consumer group whose group epoch, target assignment epoch and member epoch agree
/// once Stable, with the member holding both partitions by topic name.
#[test]
fn groups_view_shows_a_consumer_protocol_group() {
    let broker = Broker::start_with(&[
        ("admin.listener", "127.0.0.1:0"),
        ("num.partitions", "2"),
        ("offsets.topic.num.partitions", "3"),
        ("group.consumer.heartbeat.interval.ms", "500"),
        ("group.consumer.min.heartbeat.interval.ms", "500"),
    ]);
    let admin = broker.admin_address();
    let topic = unique_topic("sv-848");
    let group = unique_topic("sv-848-group");
    let p = rd::producer(&broker.bootstrap(), &[]);
    rd::send(&p, record(&topic, 0, Some(0), None, Some(b"v")));
    rd::assert_all_delivered(&rd::flush(&p, 1, Duration::from_secs(30)));
    // Not `rd::group_consumer`: librdkafka refuses session and heartbeat settings with the
    // consumer protocol (the coordinator owns them).
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", &group)
        .set("group.protocol", "consumer")
        .set("client.id", "sv-848")
        .set("enable.auto.commit", "false")
        .create()
        .expect("create KIP-848 consumer");
    c.subscribe(&[&topic]).expect("subscribe");
    let g = poll_until_ok(
        "a Stable consumer group holding both partitions",
        SETTLE,
        || {
            poll_both(&c, None);
            let g = stable_group(&admin, &group, 1)?;
            let held = g["members"][0]["assignment"]
                .as_array()
                .and_then(|a| a.first())
                .map(|a| ints(&a["partitions"]));
            if held != Some(vec![0, 1]) {
                return Err(format!("{g}"));
            }
            Ok(g)
        },
    );
    assert_eq!(g["protocol"], "consumer", "{g}");
    let m = &g["members"][0];
    assert_eq!(m["client_id"], "sv-848", "{g}");
    assert_eq!(m["assignment"][0]["topic"], topic.as_str(), "{g}");
    assert_eq!(m["member_state"], "Stable", "{g}");
    let epoch = g["generation"].as_i64().expect("generation");
    assert!(epoch >= 1, "{g}");
    assert_eq!(g["assignment_epoch"], epoch, "{g}");
    assert_eq!(m["member_epoch"], epoch, "{g}");
}

/// The leader's `/v1/partitions` entry for `topic`-0.
fn leader_view(admin: &str, topic: &str) -> Value {
    get_ok(admin, &format!("/v1/partitions?topic={topic}"))["partitions"][0].clone()
}

/// An RF=3 topic on a 3-node cluster: after acks=all produce the leader shows hw == leo and
/// the three replicas caught up, a follower shows itself follower; after one follower is
/// killed the leader's view drops it from the ISR and `/v1/cluster` shows it fenced.
#[test]
fn cluster_views_follow_isr_shrink_and_fencing() {
    let mut cluster = Cluster::start(3, &[]);
    let topic = unique_topic("sv-rf3");
    cluster.create_topic(&topic, 1, 3, &[]);
    let leader = cluster.leader_of(&topic, 0);
    let p = rd::producer(&cluster.bootstrap(), &[("acks", "all")]);
    let n = 10;
    for i in 0..n {
        rd::send(&p, record(&topic, i, Some(0), None, Some(b"v")));
    }
    rd::assert_all_delivered(&rd::flush(&p, n, Duration::from_secs(30)));

    let admin = cluster.admin_address(leader);
    let part = leader_view(&admin, &topic);
    assert_eq!(part["role"], "leader", "{part}");
    assert_eq!(part["leader"], leader, "{part}");
    assert_eq!(part["log_end_offset"], n as i64, "{part}");
    assert_eq!(
        part["high_watermark"], n as i64,
        "acks=all was answered: {part}"
    );
    assert_eq!(ints(&part["isr"]).len(), 3, "{part}");
    assert!(part["elr"].is_array(), "the image's ELR: {part}");
    let states = part["replica_states"].as_array().expect("replica_states");
    let ids: BTreeSet<i64> = states
        .iter()
        .map(|r| r["id"].as_i64().expect("id"))
        .collect();
    let replicas: BTreeSet<i64> = ints(&part["replicas"]).into_iter().collect();
    assert_eq!(ids, replicas, "{part}");
    assert_eq!(ids.len(), 3, "{part}");
    for r in states {
        // The high watermark reached n only once every ISR member had fetched up to n.
        assert_eq!(r["log_end_offset"], n as i64, "{part}");
        assert_eq!(r["lag"], 0, "{part}");
    }
    let victim = cluster.other_than(leader);
    let fpart = leader_view(&cluster.admin_address(victim), &topic);
    assert_eq!(fpart["role"], "follower", "{fpart}");
    assert_eq!(fpart["leader"], leader, "{fpart}");
    assert_eq!(fpart["replica_states"], Value::Null, "{fpart}");
    let c = get_ok(&admin, "/v1/cluster");
    assert_eq!(c["mode"], "cluster", "{c}");
    assert_eq!(c["node_id"], leader, "{c}");
    let brokers = c["controller"]["brokers"].as_array().expect("brokers");
    assert_eq!(brokers.len(), 3, "{c}");
    assert!(brokers.iter().all(|b| b["fenced"] == false), "{c}");
    assert!(
        c["controller"]["raft_term"].as_i64().expect("term") >= 1,
        "{c}"
    );
    assert!(c["controller"]["active_controller_id"].is_i64(), "{c}");

    cluster.kill(victim);
    let shrunk = poll_until_ok(
        "the leader's view drops the killed follower",
        SETTLE,
        || {
            let part = leader_view(&admin, &topic);
            let isr = ints(&part["isr"]);
            if isr.contains(&(victim as i64)) || isr.len() != 2 {
                return Err(format!("{part}"));
            }
            Ok(part)
        },
    );
    let states = shrunk["replica_states"].as_array().expect("replica_states");
    assert_eq!(
        states.len(),
        3,
        "a killed replica is still a replica: {shrunk}"
    );
    poll_until_ok("the killed broker shows fenced", SETTLE, || {
        let c = get_ok(&admin, "/v1/cluster");
        let fenced = c["controller"]["brokers"]
            .as_array()
            .and_then(|bs| bs.iter().find(|b| b["id"] == victim).cloned())
            .is_some_and(|b| b["fenced"] == true);
        fenced.then_some(()).ok_or_else(|| format!("{c}"))
    });
}
