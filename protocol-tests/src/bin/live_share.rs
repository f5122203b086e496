//! A share group member (KIP-932) that leaves records in flight for a watcher to see: used by
//! the live page's browser test (`protocol-tests/browser/`). librdkafka has no share consumer,
//! so it speaks the share protocol over the raw wire, as Kafka's `KafkaShareConsumer` does:
//! ShareGroupHeartbeat to the group coordinator, ShareFetch and ShareAcknowledge to the
//! partition's leader.
//!
//! `live_share --bootstrap HOST:PORT --topic T --group G --records N --hold-ms MS`
//!
//! Joins G (printing `JOINED` once partition 0 is assigned: a new share group starts at the
//! latest offset, so records produced after that are delivered), acquires at least N records
//! of partition 0, releases the first of them (it comes
//! back Available with delivery count 1), prints `HELD first last` (the acquired offsets) and
//! keeps heartbeating for MS without acknowledging the rest, so they stay Acquired until
//! their acquisition lock runs out. Every wait is bounded by [`JOIN_TIMEOUT`].

use std::time::{Duration, Instant};

use brook_protocol_tests::{share, WireClient};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// How long joining, being assigned partition 0 and acquiring N records may take.
const JOIN_TIMEOUT: Duration = Duration::from_secs(60);
/// The pause between polls while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Kafka's `AcknowledgeType.RELEASE`.
const RELEASE: i8 = 2;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn usage() -> ! {
    eprintln!(
        "usage: live_share --bootstrap HOST:PORT --topic T --group G --records N --hold-ms MS"
    );
    std::process::exit(2)
}

struct Args {
    bootstrap: String,
    topic: String,
    group: String,
    records: i64,
    hold: Duration,
}

fn args() -> Args {
    let mut a = Args {
        bootstrap: String::new(),
        topic: String::new(),
        group: String::new(),
        records: 0,
        hold: Duration::ZERO,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let [flag, value] = pair else { usage() };
        match flag.as_str() {
            "--bootstrap" => a.bootstrap = value.clone(),
            "--topic" => a.topic = value.clone(),
            "--group" => a.group = value.clone(),
            "--records" => a.records = value.parse().unwrap_or_else(|_| usage()),
            "--hold-ms" => {
                a.hold = Duration::from_millis(value.parse().unwrap_or_else(|_| usage()))
            }
            _ => usage(),
        }
    }
    if a.bootstrap.is_empty() || a.topic.is_empty() || a.group.is_empty() || a.records < 1 {
        usage();
    }
    a
}

/// The address of broker `id` in a Metadata answer.
fn address(md: &MetadataResponse, id: i32) -> String {
    let b = md
        .brokers
        .iter()
        .find(|b| b.node_id.0 == id)
        .unwrap_or_else(|| panic!("broker {id} not in {md:?}"));
    format!("{}:{}", b.host.as_str(), b.port)
}

/// The group coordinator's address (FindCoordinator v6, key type 0).
fn coordinator(c: &mut WireClient, md: &MetadataResponse, group: &str) -> String {
    let deadline = Instant::now() + JOIN_TIMEOUT;
    loop {
        let req = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![s(group)]);
        let r: FindCoordinatorResponse = c.request(6, &req);
        if let Some(found) = r.coordinators.first().filter(|f| f.error_code == 0) {
            return address(md, found.node_id.0);
        }
        assert!(
            Instant::now() < deadline,
            "no coordinator for {group}: {r:?}"
        );
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// One ShareGroupHeartbeat; the answer's member epoch and whether partition 0 of `topic_id`
/// is assigned (`None` while the coordinator is not ready).
fn heartbeat(
    c: &mut WireClient,
    a: &Args,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
) -> Option<(i32, bool)> {
    let topic = (epoch == 0).then_some(a.topic.as_str());
    let req = share::heartbeat_request(&a.group, member, epoch, topic);
    let r: ShareGroupHeartbeatResponse = c.request(1, &req);
    if r.error_code != 0 {
        eprintln!("live_share: heartbeat error {}", r.error_code);
        return None;
    }
    let assigned = r.assignment.is_some_and(|asg| {
        asg.topic_partitions
            .iter()
            .any(|tp| tp.topic_id == topic_id && tp.partitions.contains(&0))
    });
    Some((r.member_epoch, assigned))
}

/// One ShareFetch of partition 0 at session epoch `epoch`: the acquired (first, last) ranges.
fn share_fetch(
    c: &mut WireClient,
    a: &Args,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
) -> Vec<(i64, i64)> {
    let req = share::fetch_request(&a.group, member, epoch, topic_id, &[], 500);
    let r: ShareFetchResponse = c.request(1, &req);
    assert_eq!(r.error_code, 0, "ShareFetch: {r:?}");
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| {
            p.acquired_records
                .iter()
                .map(|x| (x.first_offset, x.last_offset))
        })
        .collect()
}

/// ShareAcknowledge of one offset with `ack_type` at session epoch `epoch`.
fn acknowledge(
    c: &mut WireClient,
    a: &Args,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    offset: i64,
    ack_type: i8,
) {
    let acks = [(offset, offset, ack_type)];
    let req = share::acknowledge_request(false, &a.group, member, epoch, topic_id, &acks);
    let r: ShareAcknowledgeResponse = c.request(1, &req);
    let code = r
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.error_code);
    assert_eq!(
        (r.error_code, code),
        (0, Some(0)),
        "ShareAcknowledge: {r:?}"
    );
}

fn main() {
    let a = args();
    // The first of a comma-separated bootstrap list, as a client starts with one.
    let mut boot = WireClient::connect(a.bootstrap.split(',').next().unwrap_or_default());
    let md = boot.metadata(&[&a.topic], false);
    let t = md.topics.first().expect("the topic in Metadata");
    let topic_id = t.topic_id;
    let leader = t
        .partitions
        .iter()
        .find(|p| p.partition_index == 0)
        .expect("partition 0")
        .leader_id
        .0;
    let mut coord = WireClient::connect(&coordinator(&mut boot, &md, &a.group));
    let mut lead = WireClient::connect(&address(&md, leader));
    let member = Uuid::new_v4().to_string();
    let deadline = Instant::now() + JOIN_TIMEOUT;
    // Join and wait for partition 0 (its share state is initialized first).
    let mut epoch = 0;
    loop {
        assert!(
            Instant::now() < deadline,
            "partition 0 not assigned within {JOIN_TIMEOUT:?}"
        );
        if let Some((e, assigned)) = heartbeat(&mut coord, &a, &member, epoch, topic_id) {
            epoch = e;
            if assigned {
                break;
            }
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    // A new share group starts at the latest offset (`share.auto.offset.reset`): records
    // produced from now on are delivered.
    println!("JOINED");
    // Acquire at least N records, in as many fetches of the session as it takes.
    let mut session = 0;
    let mut held: Vec<(i64, i64)> = Vec::new();
    while held.iter().map(|(f, l)| l - f + 1).sum::<i64>() < a.records {
        assert!(
            Instant::now() < deadline,
            "not {} records acquired: {held:?}",
            a.records
        );
        held.extend(share_fetch(&mut lead, &a, &member, session, topic_id));
        session += 1;
    }
    let (first, last) = (held[0].0, held.iter().map(|(_, l)| *l).max().unwrap_or(0));
    acknowledge(&mut lead, &a, &member, session, topic_id, first, RELEASE);
    println!("HELD {first} {last}");
    // Stay a member without acknowledging: the rest stays Acquired until its lock runs out.
    let until = Instant::now() + a.hold;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_secs(1));
        if let Some((e, _)) = heartbeat(&mut coord, &a, &member, epoch, topic_id) {
            epoch = e;
        }
    }
}
