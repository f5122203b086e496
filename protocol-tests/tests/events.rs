//! The event stream (`GET /v1/events`, docs/EVENTS.md) of real `brook serve` processes and of
//! a real `brook cluster` supervisor: a killed follower turns into an `isr_shrink` event from
//! the partition's leader; a bounded ring drops its oldest events and tells a late reader how
//! many it lost; the supervisor serves every node's views under its id and merges every
//! node's stream with its own node events. Each other kind is emitted by the part that owns
//! the fact: `duplicate_batch` and `produce_error` by the partition and the produce
//! handler, `group_rebalance` by the group coordinator, `txn_marker` by the marker writer;
//! in a cluster `broker_fenced` and `broker_unfenced` by the active controller,
//! `isr_expand` by the leader, `leader_elected` by the new leader and `follower_truncation` by
//! a returning leader whose log diverged.
//!
//! Streams are read over plain HTTP/1.0 on a std `TcpStream` (the server then ends the body
//! by closing, no chunking), on a thread that hands each event to the test through a channel;
//! every wait is a receive or a poll with a deadline.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::rd;
use brook_protocol_tests::supervised::{self, field, Supervised};
use brook_protocol_tests::wire::WireClient;
use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, Cluster};
use serde_json::{json, Value};

/// How long an ISR may take to shrink after a follower dies (the controller fences it after
/// `broker.session.timeout.ms`, the harness's 3 s).
const SETTLE: Duration = Duration::from_secs(40);
/// Bound on one HTTP call.
const CALL: Duration = Duration::from_secs(15);
/// Bound on one answer's size.
const ANSWER_BYTES_MAX: u64 = 16 << 20;

/// One server-sent event: its `event:` name (`message` by default) and its JSON data.
#[derive(Debug, Clone)]
struct Sse {
    event: String,
    data: Value,
}

/// An open event stream; the reader thread ends when the connection does.
struct EventStream {
    rx: mpsc::Receiver<Sse>,
    conn: TcpStream,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let _ = self.conn.shutdown(std::net::Shutdown::Both);
    }
}

/// Subscribes to `GET /v1/events{query}` on `addr`; returns once the answer's head (200) has
/// arrived, so the server counts the reader from then on.
fn subscribe(addr: &str, query: &str) -> EventStream {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    let req = format!("GET /v1/events{query} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes()).expect("send request");
    s.set_read_timeout(Some(CALL)).expect("read timeout");
    let mut reader = BufReader::new(s.try_clone().expect("clone stream"));
    let mut status = String::new();
    reader.read_line(&mut status).expect("status line");
    assert!(status.contains(" 200 "), "GET /v1/events{query}: {status}");
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).expect("header");
        if h.trim().is_empty() {
            break;
        }
    }
    // Events may be minutes apart; keep-alive comments come every 15 s.
    s.set_read_timeout(None).expect("no read timeout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut event, mut data) = (String::from("message"), String::new());
        for line in reader.lines().map_while(Result::ok) {
            if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            } else if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if line.is_empty() && !data.is_empty() {
                let parsed = serde_json::from_str(&data).unwrap_or(Value::Null);
                let sent = tx.send(Sse {
                    event: std::mem::replace(&mut event, "message".into()),
                    data: parsed,
                });
                if sent.is_err() {
                    return;
                }
                data.clear();
            }
        }
    });
    EventStream { rx, conn: s }
}

impl EventStream {
    /// The next event, within `within`.
    fn next(&self, within: Duration) -> Sse {
        self.rx
            .recv_timeout(within)
            .unwrap_or_else(|e| panic!("no event within {within:?}: {e}"))
    }

    /// The first event `matches` accepts, within `within`; the others are passed over.
    fn await_event(&self, what: &str, within: Duration, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(e) if matches(&e.data) => return e.data,
                Ok(e) => seen.push(e.data.to_string()),
                Err(e) => panic!("no {what} within {within:?} ({e}); saw {seen:#?}"),
            }
        }
    }
}

/// One HTTP/1.1 call: status and JSON answer.
fn http(method: &str, addr: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    supervised::http(method, addr, path, body, CALL)
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .filter_map(Value::as_i64)
        .collect()
}

/// A follower is killed: the leader's stream says `isr_shrink` for that partition, removing
/// exactly that follower, with the ISR the controller committed.
#[test]
fn a_killed_follower_shows_as_an_isr_shrink_of_its_partition() {
    let mut cluster = Cluster::start(3, &[]);
    let topic = unique_topic("ev-isr");
    cluster.create_topic(&topic, 2, 3, &[]);
    let leader = cluster.leader_of(&topic, 1);
    let events = subscribe(&cluster.admin_address(leader), "");
    let victim = cluster.other_than(leader);
    cluster.kill(victim);
    let e = events.await_event("isr_shrink of partition 1", SETTLE, |e| {
        e["type"] == "isr_shrink" && e["topic"] == topic.as_str() && e["partition"] == 1
    });
    assert_eq!(ints(&e["removed"]), [victim as i64], "{e}");
    assert!(!ints(&e["isr"]).contains(&(victim as i64)), "{e}");
    assert_eq!(e["node"], leader, "{e}");
    assert!(e["seq"].as_u64().is_some_and(|s| s >= 1), "{e}");
    assert!(e["time_ms"].as_i64().is_some_and(|t| t > 0), "{e}");
    // What the state view shows agrees.
    let (_, v) = http(
        "GET",
        &cluster.admin_address(leader),
        &format!("/v1/partitions?topic={topic}"),
        None,
    );
    let p1 = v["partitions"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["partition"] == 1))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(ints(&p1["isr"]), ints(&e["isr"]), "{v}");
}

/// With `admin.event.buffer.len.max=5`, twelve fault firings: a reader that was there sees
/// all twelve in order; a reader asking from 0 afterwards is told 7 were dropped, then gets
/// the last five; one asking from 10 gets 11 and 12 only. Bad `since` is 400.
#[test]
fn a_bounded_buffer_drops_the_oldest_and_tells_a_late_reader() {
    let broker = Broker::start_with(&[
        ("admin.listener", "127.0.0.1:0"),
        ("admin.event.buffer.len.max", "5"),
    ]);
    let admin = broker.admin_address();
    let live = subscribe(&admin, "");
    let rule = json!({"action": "delay", "api": "metadata", "delay_ms": 1, "times": 12});
    let (status, v) = http("POST", &admin, "/faults", Some(&rule));
    assert_eq!(status, 201, "{v}");
    let mut client = WireClient::connect(&broker.bootstrap());
    for _ in 0..12 {
        client.metadata(&[], false);
    }
    let seqs: Vec<u64> = (0..12)
        .map(|_| {
            let e = live.next(CALL);
            assert_eq!(e.data["type"], "fault_fired", "{:?}", e);
            assert_eq!(e.data["kind"], "request", "{:?}", e);
            e.data["seq"].as_u64().expect("seq")
        })
        .collect();
    assert_eq!(seqs, (1..=12).collect::<Vec<u64>>());

    let late = subscribe(&admin, "?since=0");
    let first = late.next(CALL);
    assert_eq!(first.event, "dropped", "{first:?}");
    assert_eq!(first.data["dropped"], 7, "{first:?}");
    assert_eq!(first.data["next_seq"], 8, "{first:?}");
    let rest: Vec<u64> = (0..5)
        .map(|_| late.next(CALL).data["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(rest, [8, 9, 10, 11, 12]);

    let recent = subscribe(&admin, "?since=10");
    let e = recent.next(CALL);
    assert_eq!(
        (e.event.as_str(), e.data["seq"].as_u64()),
        ("message", Some(11))
    );
    assert_eq!(recent.next(CALL).data["seq"], 12);

    let (status, v) = http("GET", &admin, "/v1/events?since=soon", None);
    assert_eq!(status, 400, "{v}");
}

/// Starts `brook cluster` (3 nodes, free ports); returns it with its `CLUSTER READY` line.
fn start_supervised() -> (Supervised, String) {
    supervised::start(
        "brook-events-",
        &[
            "broker.session.timeout.ms=3000",
            "broker.heartbeat.interval.ms=500",
            "replica.lag.time.max.ms=3000",
            "default.replication.factor=3",
        ],
        &[],
    )
}

/// The leader of `topic`-0 and its ISR, from the supervisor's merged partitions view.
fn merged_leader(sup: &str, topic: &str) -> Result<(i64, Vec<i64>), String> {
    let (_, v) = http("GET", sup, &format!("/v1/partitions?topic={topic}"), None);
    let nodes = v["nodes"].as_object().ok_or_else(|| format!("{v}"))?;
    for (id, view) in nodes {
        for p in view["partitions"].as_array().into_iter().flatten() {
            if p["role"] == "leader" && p["partition"] == 0 {
                let isr = ints(&p["isr"]);
                if isr.len() == 3 {
                    return Ok((id.parse().map_err(|_| id.clone())?, isr));
                }
            }
        }
    }
    Err(format!("no leader with a full ISR yet: {v}"))
}

/// The supervisor answers `/v1/cluster` with each node's view under its id, and its
/// `/v1/events` carries its own node events and the nodes' events: killing a follower through
/// the supervisor shows `node_killed` and the leader's `isr_shrink`; pause and resume show up
/// in `/nodes` and on the stream.
#[test]
fn the_supervisor_merges_node_views_and_event_streams() {
    let (sup, ready) = start_supervised();
    let addr = field(&ready, "supervisor").to_string();
    let bootstrap = field(&ready, "bootstrap")
        .split(',')
        .next()
        .expect("a node")
        .to_string();
    let events = subscribe(&addr, "");

    let (status, v) = http("GET", &addr, "/v1/cluster", None);
    assert_eq!(status, 200, "{v}");
    for id in 1..=3 {
        assert_eq!(v["nodes"][id.to_string()]["node_id"], id, "{v}");
        assert_eq!(v["nodes"][id.to_string()]["mode"], "cluster", "{v}");
    }

    let topic = unique_topic("ev-sup");
    let mut client = WireClient::connect(&bootstrap);
    client.ensure_topic(&topic);
    let (leader, _) = poll_until_ok("a leader with a full ISR", SETTLE, || {
        merged_leader(&addr, &topic)
    });
    let victim = (1..=3).find(|id| *id != leader).expect("a follower");
    let (status, v) = http("POST", &addr, &format!("/nodes/{victim}/kill"), None);
    assert_eq!(status, 200, "{v}");
    events.await_event("the supervisor's node_killed", SETTLE, |e| {
        e["type"] == "node_killed" && e["node"] == victim && e["source"] == "supervisor"
    });
    let shrink = events.await_event("the leader's isr_shrink", SETTLE, |e| {
        e["type"] == "isr_shrink" && e["topic"] == topic.as_str() && e["source"] == "node"
    });
    assert_eq!(shrink["node"], leader, "{shrink}");
    assert_eq!(ints(&shrink["removed"]), [victim], "{shrink}");
    assert!(shrink["node_seq"].as_u64().is_some(), "{shrink}");

    let other = (1..=3)
        .find(|id| *id != victim && *id != leader)
        .expect("a third node");
    let (status, v) = http("POST", &addr, &format!("/nodes/{other}/pause"), None);
    assert_eq!((status, &v["paused"]), (200, &json!(true)), "{v}");
    events.await_event("node_paused", CALL, |e| {
        e["type"] == "node_paused" && e["node"] == other
    });
    let (status, v) = http("POST", &addr, &format!("/nodes/{other}/resume"), None);
    assert_eq!((status, &v["paused"]), (200, &json!(false)), "{v}");
    events.await_event("node_resumed", CALL, |e| {
        e["type"] == "node_resumed" && e["node"] == other
    });

    // A dead node's view is an error under its id, the others still answer.
    let (_, v) = http("GET", &addr, "/v1/cluster", None);
    assert!(v["nodes"][victim.to_string()]["error"].is_string(), "{v}");
    assert_eq!(v["nodes"][leader.to_string()]["node_id"], leader, "{v}");
    // The page is served from the binary.
    let mut s = TcpStream::connect(&addr).expect("connect");
    s.write_all(format!("GET / HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .expect("send");
    let mut page = String::new();
    s.take(ANSWER_BYTES_MAX)
        .read_to_string(&mut page)
        .expect("page");
    assert!(page.contains("<title>Brook live</title>"), "{page}");

    // Ctrl-C with a reader still on the merged stream (the live page left open): the stream
    // ends, the nodes stop and the supervisor exits. Its graceful shutdown used to wait for
    // the stream forever.
    let pids = node_pids(&sup);
    let mut sup = sup;
    // SAFETY: kill(2) with our own child's pid; no memory is involved.
    unsafe {
        libc::kill(sup.child.id() as i32, libc::SIGTERM);
    }
    loop {
        match events.rx.recv_timeout(STOP_WAIT) {
            Ok(_) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("the event stream still open {STOP_WAIT:?} after SIGTERM")
            }
        }
    }
    let stopped = poll_until_ok("brook cluster exits after SIGTERM", STOP_WAIT, || {
        sup.child
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "still running".to_string())
    });
    assert!(stopped.success(), "brook cluster exit: {stopped:?}");
    for pid in pids {
        // SAFETY: signal 0 only checks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "node pid {pid} outlived its supervisor");
    }
}

/// How long `brook cluster` may take to stop its nodes and exit after SIGTERM.
const STOP_WAIT: Duration = Duration::from_secs(45);

/// The node pids `brook cluster` printed after its READY line (`  node N: pid P, ...`).
fn node_pids(sup: &Supervised) -> Vec<i32> {
    let mut pids = Vec::new();
    while pids.len() < 3 {
        let line = sup
            .lines
            .recv_timeout(CALL)
            .unwrap_or_else(|e| panic!("node lines after CLUSTER READY: {e}"));
        if let Some(rest) = line.trim_start().strip_prefix("node ") {
            let pid = rest
                .split_once("pid ")
                .and_then(|(_, p)| p.split(',').next())
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("no pid in {line:?}"));
            pids.push(pid);
        }
    }
    pids
}

/// Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER.
const OUT_OF_ORDER_SEQUENCE_NUMBER: i64 = 45;

/// On one node: a produce retry of an idempotent batch is `duplicate_batch` (with the offsets
/// it was answered with), a sequence gap is `produce_error` OUT_OF_ORDER_SEQUENCE_NUMBER, a
/// classic group's join walks `group_rebalance` to Stable, and a librdkafka transaction's
/// commit is a `txn_marker` on the partition it wrote.
#[test]
fn producer_group_and_transaction_events_come_from_their_owners() {
    let broker = Broker::start_with(&[
        ("admin.listener", "127.0.0.1:0"),
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "1"),
        ("transaction.state.log.num.partitions", "1"),
    ]);
    let events = subscribe(&broker.admin_address(), "");
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("ev-kinds");
    c.ensure_topic(&topic);

    let (id, epoch) = c.init_producer_id();
    let first = Producer {
        id,
        epoch,
        base_sequence: 0,
    };
    let records = [Rec::kv("a", "1", 1_000), Rec::kv("b", "2", 1_000)];
    let batch = encode_batch(first, &records);
    assert_eq!(c.produce(&topic, 0, batch.clone()).error_code, NONE);
    let retry = c.produce(&topic, 0, batch);
    assert_eq!(
        (retry.error_code, retry.base_offset),
        (NONE, 0),
        "{retry:?}"
    );
    let e = events.await_event("duplicate_batch", CALL, |e| e["type"] == "duplicate_batch");
    assert_eq!(
        (
            &e["topic"],
            &e["partition"],
            &e["producer_id"],
            &e["producer_epoch"]
        ),
        (&json!(topic), &json!(0), &json!(id), &json!(epoch)),
        "{e}"
    );
    assert_eq!(
        (
            &e["first_sequence"],
            &e["last_sequence"],
            &e["first_offset"]
        ),
        (&json!(0), &json!(1), &json!(0)),
        "{e}"
    );

    let gap = Producer {
        base_sequence: 10,
        ..first
    };
    let refused = c.produce(&topic, 0, encode_batch(gap, &records));
    assert_eq!(
        refused.error_code as i64, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "{refused:?}"
    );
    let e = events.await_event("produce_error", CALL, |e| e["type"] == "produce_error");
    assert_eq!(
        (&e["error"], &e["error_code"], &e["topic"]),
        (
            &json!("OUT_OF_ORDER_SEQUENCE_NUMBER"),
            &json!(OUT_OF_ORDER_SEQUENCE_NUMBER),
            &json!(topic)
        ),
        "{e}"
    );

    let group = unique_topic("ev-group");
    let consumer = rd::group_consumer(&broker.bootstrap(), &group, &[]);
    rdkafka::consumer::Consumer::subscribe(&consumer, &[topic.as_str()]).expect("subscribe");
    let mut phases = Vec::new();
    let deadline = Instant::now() + SETTLE;
    let stable = loop {
        // Polling drives librdkafka's join; the events say where the group is.
        let _ = consumer.poll(Duration::from_millis(100));
        match events.rx.try_recv() {
            Ok(ev)
                if ev.data["type"] == "group_rebalance"
                    && ev.data["group_id"] == group.as_str() =>
            {
                phases.push(ev.data["phase"].as_str().unwrap_or_default().to_string());
                if ev.data["phase"] == "Stable" {
                    break ev.data;
                }
            }
            Ok(_) | Err(mpsc::TryRecvError::Empty) => {}
            Err(e) => panic!("event stream ended: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "no Stable within {SETTLE:?}: {phases:?}"
        );
    };
    assert_eq!(
        phases.first().map(String::as_str),
        Some("PreparingRebalance"),
        "{phases:?}"
    );
    assert!(
        phases.iter().any(|p| p == "CompletingRebalance"),
        "{phases:?}"
    );
    assert_eq!(
        (
            &stable["protocol"],
            &stable["generation"],
            &stable["members"]
        ),
        (&json!("classic"), &json!(1), &json!(1)),
        "{stable}"
    );
    drop(consumer);

    let txn = rd::producer(
        &broker.bootstrap(),
        &[("transactional.id", &unique_topic("ev-txn"))],
    );
    use rdkafka::producer::Producer as _;
    txn.init_transactions(CALL).expect("init_transactions");
    txn.begin_transaction().expect("begin_transaction");
    rd::send(
        &txn,
        rd::record(&topic, 0, Some(0), None, Some(b"in a transaction")),
    );
    txn.commit_transaction(CALL).expect("commit_transaction");
    let e = events.await_event("txn_marker", CALL, |e| {
        e["type"] == "txn_marker" && e["topic"] == topic.as_str()
    });
    assert_eq!(
        (&e["partition"], &e["committed"]),
        (&json!(0), &json!(true)),
        "{e}"
    );
    // The marker follows the idempotent batch's two records and the transaction's one.
    assert_eq!(e["offset"], json!(3), "{e}");
}

/// In a 3-node cluster: a killed follower (not the controller) is `broker_fenced` on the
/// active controller's stream and `broker_unfenced` once back; the leader reports the
/// `isr_expand` that re-admits it; and when the leader is killed, the new leader reports
/// `leader_elected` at a higher leader epoch, naming the leader it followed.
#[test]
fn fencing_isr_expansion_and_election_come_from_their_owners() {
    let mut cluster = Cluster::start(3, &[]);
    let topic = unique_topic("ev-owners");
    cluster.create_topic(&topic, 1, 3, &[]);
    let mut streams: std::collections::BTreeMap<i32, EventStream> = cluster
        .ids()
        .into_iter()
        .map(|id| (id, subscribe(&cluster.admin_address(id), "")))
        .collect();
    let before = cluster.partition_state(&topic, 0);
    let leader = before.leader;
    let controller = cluster.await_controller(None, SETTLE);
    let victim = cluster
        .ids()
        .into_iter()
        .find(|id| *id != leader && *id != controller)
        .expect("a follower that is not the controller");

    cluster.kill(victim);
    let fenced = streams[&controller].await_event("broker_fenced", SETTLE, |e| {
        e["type"] == "broker_fenced" && e["broker"] == victim
    });
    assert_eq!(fenced["node"], controller, "{fenced}");
    cluster.start_node(victim);
    // The killed process's stream ended with it; the new run has its own.
    streams.insert(victim, subscribe(&cluster.admin_address(victim), ""));
    let unfenced = streams[&controller].await_event("broker_unfenced", SETTLE, |e| {
        e["type"] == "broker_unfenced" && e["broker"] == victim
    });
    assert!(
        unfenced["broker_epoch"].as_u64() > fenced["broker_epoch"].as_u64(),
        "a new registration: {fenced} then {unfenced}"
    );
    let expand =
        streams[&leader].await_event("isr_expand re-admitting the follower", SETTLE, |e| {
            e["type"] == "isr_expand"
                && e["topic"] == topic.as_str()
                && ints(&e["added"]) == [victim as i64]
        });
    assert_eq!(expand["node"], leader, "{expand}");
    assert_eq!(ints(&expand["isr"]).len(), 3, "{expand}");

    cluster.kill(leader);
    let after = cluster.await_leader_other_than(&topic, 0, leader, SETTLE);
    let elected = streams[&after.leader].await_event("leader_elected", SETTLE, |e| {
        e["type"] == "leader_elected" && e["topic"] == topic.as_str() && e["partition"] == 0
    });
    assert_eq!(
        (&elected["leader"], &elected["previous_leader"]),
        (&json!(after.leader), &json!(leader)),
        "{elected}"
    );
    assert!(
        elected["leader_epoch"].as_i64() > Some(before.leader_epoch as i64),
        "epoch {} before: {elected}",
        before.leader_epoch
    );
    assert_eq!(
        elected["leader_epoch"],
        json!(after.leader_epoch),
        "{elected}"
    );
}

/// A returning leader whose last record no one else has: its stream says
/// `follower_truncation`, from its log end offset back to where the new leader's epoch
/// starts. The new leader keeps it from fetching until someone listens, since nothing is
/// recorded while nobody does.
#[test]
fn a_returning_leader_reports_its_truncation_as_a_follower() {
    let mut cluster = Cluster::start(3, &[("controlled.shutdown.enable", "false")]);
    let topic = unique_topic("ev-truncate");
    cluster.create_topic(&topic, 1, 3, &[("min.insync.replicas", "1")]);
    let (old, new) = cluster.diverge_partition_leader(&topic, SETTLE);
    let cut = cluster.cut_link(new, &old.to_string(), "replication");

    cluster.start_node(old);
    let stream = subscribe(&cluster.admin_address(old), "");
    cluster.fault_clear(new);
    let truncated = stream.await_event("follower_truncation", SETTLE, |e| {
        e["type"] == "follower_truncation" && e["topic"] == topic.as_str()
    });
    // The old leader had one record at offset 0, the new leader's epoch starts at 0.
    assert_eq!(
        (
            &truncated["node"],
            &truncated["partition"],
            &truncated["leader"],
            &truncated["from_log_end_offset"],
            &truncated["to_offset"],
            &truncated["full"],
        ),
        (
            &json!(old),
            &json!(0),
            &json!(new),
            &json!(1),
            &json!(0),
            &json!(false)
        ),
        "{truncated} (cut rule {cut})"
    );
}
