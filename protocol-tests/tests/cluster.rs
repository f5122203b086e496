//! Replication and failover with librdkafka against a 3-node cluster of `brook serve` processes
//! (each a broker and a metadata-quorum voter), RF=3: min.insync.replicas under link faults, the
//! acks=1 loss window, an idempotent stream across repeated leader kills, a crash between
//! replication and the ack, the loss of the active controller, and group offsets across the
//! coordinator's death. The same scenarios as the Java `ReplicationScenariosTest` and
//! `CoordinatorFailoverTest`.
//!
//! The tests run one at a time (one 3-node cluster on the machine at once). Every wait is a
//! condition polled against a deadline. Lines starting `[rdkafka-cluster]` say what a scenario
//! observed.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use brook_protocol_tests::cluster::{PartitionState, CALL};
use brook_protocol_tests::rd::{self, Delivery, Got, RecProducer};
use brook_protocol_tests::{
    offsets_partition_of, poll_until, poll_until_ok, unique_topic, Cluster,
};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};

const ISR_WAIT: Duration = Duration::from_secs(45);
const FAILOVER_WAIT: Duration = Duration::from_secs(45);
const DELIVERY_WAIT: Duration = Duration::from_secs(90);
const READ_WAIT: Duration = Duration::from_secs(60);
const REGISTER_WAIT: Duration = Duration::from_secs(30);

/// One 3-node cluster at a time: the tests of this file take turns.
fn serial() -> MutexGuard<'static, ()> {
    static CLUSTER: Mutex<()> = Mutex::new(());
    CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes this test's turn, starts a 3-node cluster with `overrides` and creates an RF=3 topic
/// of `partitions` partitions with min.insync.replicas=2. The guard comes first so that the
/// cluster (dropped before it) is gone when the next test starts.
fn setup(
    prefix: &str,
    overrides: &[(&str, &str)],
    partitions: i32,
) -> (MutexGuard<'static, ()>, Cluster, String) {
    let turn = serial();
    let c = Cluster::start(3, overrides);
    let topic = unique_topic(prefix);
    c.create_topic(&topic, partitions, 3, &[("min.insync.replicas", "2")]);
    (turn, c, topic)
}

fn say(msg: &str) {
    println!("[rdkafka-cluster] {msg}");
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// Sends one record (optionally with a CreateTime) and waits (bounded) for its delivery report.
fn produce_one(
    p: &RecProducer,
    topic: &str,
    partition: i32,
    value: &str,
    timestamp: Option<i64>,
) -> Delivery {
    let idx = send_one(p, topic, partition, value, timestamp);
    await_delivery(p, idx, value)
}

/// Sends one record; returns its index for [`await_delivery`].
fn send_one(
    p: &RecProducer,
    topic: &str,
    partition: i32,
    value: &str,
    timestamp: Option<i64>,
) -> usize {
    let idx = rd::delivered_count(p);
    let mut rec = rd::record(topic, idx, Some(partition), None, Some(value.as_bytes()));
    rec.timestamp = timestamp;
    rd::send(p, rec);
    idx
}

/// Polls the producer until the delivery report of record `idx` (`what`) arrives (bounded).
fn await_delivery(p: &RecProducer, idx: usize, what: &str) -> Delivery {
    poll_until(
        &format!("the delivery report of {what:?}"),
        DELIVERY_WAIT,
        || {
            p.poll(Duration::from_millis(50));
            let d = p.context().deliveries.lock().unwrap();
            d.iter().find(|d| d.idx == idx).cloned()
        },
    )
}

/// Every record of a partition, from offset 0 to the high watermark.
fn read_all(c: &Cluster, topic: &str, partition: i32) -> Vec<Got> {
    rd::read_to_end(&c.bootstrap(), topic, &[partition], READ_WAIT)
        .remove(&partition)
        .unwrap()
}

fn values(got: &[Got]) -> Vec<String> {
    got.iter()
        .map(|g| String::from_utf8_lossy(g.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

/// Cuts replication between `leader` and each follower with link rules on every side
/// (partition, both directions, replication traffic), and waits until each follower's rule has
/// refused a fetch: from then on no fetch of that follower is in flight to the leader.
fn cut_replication(c: &Cluster, leader: i32, followers: &[i32]) {
    c.isolate_replication(leader);
    for f in followers {
        c.cut_link(*f, &leader.to_string(), "replication");
    }
    poll_until_ok(
        "each follower's replication link rule refuses a fetch",
        Duration::from_secs(10),
        || {
            let fired: Vec<(i32, u64)> =
                followers.iter().map(|f| (*f, c.fault_fired(*f))).collect();
            if fired.iter().all(|(_, n)| *n > 0) {
                Ok(())
            } else {
                Err(format!("fired per follower {fired:?}"))
            }
        },
    );
}

fn heal(c: &Cluster, nodes: &[i32]) {
    for n in nodes {
        c.fault_clear(*n);
    }
}

/// The ISR librdkafka's own Metadata request reports for a partition.
fn rd_isr(p: &RecProducer, topic: &str, partition: i32) -> Result<BTreeSet<i32>, String> {
    let md = p
        .client()
        .fetch_metadata(Some(topic), CALL)
        .map_err(|e| e.to_string())?;
    let t = md.topics().iter().find(|t| t.name() == topic);
    let part = t.and_then(|t| t.partitions().iter().find(|q| q.id() == partition));
    part.map(|q| q.isr().iter().copied().collect())
        .ok_or_else(|| format!("librdkafka metadata lists no {topic}-{partition}"))
}

fn await_rd_isr(p: &RecProducer, topic: &str, partition: i32, want: &BTreeSet<i32>) {
    poll_until_ok(
        &format!("librdkafka's metadata shows ISR {want:?} for {topic}-{partition}"),
        ISR_WAIT,
        || match rd_isr(p, topic, partition) {
            Ok(isr) if isr == *want => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
}

// ----------------------------------------------------------------------------------------------
// 1. min.insync.replicas=2, acks=all: the ISR shrinks to the leader, produce is refused, heal
// ----------------------------------------------------------------------------------------------

#[test]
fn min_insync_replicas_refuses_acks_all_while_followers_are_cut_off() {
    let (_turn, c, topic) = setup("minisr", &[], 1);
    let s = c.partition_state(&topic, 0);
    let leader = s.leader;
    let followers = s.followers();
    let all: BTreeSet<i32> = s.replicas.iter().copied().collect();

    let p = rd::producer(
        &c.bootstrap(),
        &[
            ("acks", "all"),
            ("enable.idempotence", "false"),
            ("message.send.max.retries", "0"),
            ("linger.ms", "0"),
            ("message.timeout.ms", "20000"),
        ],
    );
    let t0 = Instant::now();
    cut_replication(&c, leader, &followers);
    c.await_isr(&topic, 0, &[leader], ISR_WAIT);
    let shrink = t0.elapsed();
    await_rd_isr(&p, &topic, 0, &BTreeSet::from([leader]));
    say(&format!(
        "scenario 1: link faults (partition, replication) between leader {leader} and {followers:?}; \
         ISR shrank to [{leader}] {} ms after the cut (raw Metadata on every node and librdkafka metadata)",
        ms(shrink)
    ));

    let refused = produce_one(&p, &topic, 0, "during-cutoff", None);
    let code = refused.code;
    assert!(
        matches!(
            code,
            Some(RDKafkaErrorCode::NotEnoughReplicas)
                | Some(RDKafkaErrorCode::NotEnoughReplicasAfterAppend)
        ),
        "acks=all with ISR [{leader}] below min.insync.replicas=2 must fail with \
         NOT_ENOUGH_REPLICAS(_AFTER_APPEND), got {refused:?}"
    );
    say(&format!(
        "scenario 1: acks=all refused with {code:?}: {}",
        refused.error.as_deref().unwrap_or("")
    ));

    let t0 = Instant::now();
    heal(&c, &s.replicas);
    c.await_isr(&topic, 0, &s.replicas, ISR_WAIT);
    await_rd_isr(&p, &topic, 0, &all);
    say(&format!(
        "scenario 1: healed; ISR back to {all:?} {} ms later",
        ms(t0.elapsed())
    ));

    let ok = produce_one(&p, &topic, 0, "after-heal", None);
    assert!(ok.error.is_none(), "acks=all after healing: {ok:?}");
    assert_eq!(c.leader_of(&topic, 0), leader, "the leader stayed in place");
    let v = values(&read_all(&c, &topic, 0));
    if code == Some(RDKafkaErrorCode::NotEnoughReplicas) {
        assert_eq!(
            v,
            ["after-heal"],
            "NOT_ENOUGH_REPLICAS is decided before the append: the refused record is not in the log"
        );
    } else {
        assert!(v.contains(&"after-heal".to_string()), "{v:?}");
    }
    let at = v.iter().position(|x| x == "after-heal").unwrap() as i64;
    assert_eq!(ok.offset, at, "after-heal acknowledged at its offset");
    say(&format!(
        "scenario 1: after healing acks=all succeeded at offset {}; log {v:?}",
        ok.offset
    ));
}

// ----------------------------------------------------------------------------------------------
// 2. acks=1: acknowledged by the leader before any follower copied it, then the leader dies
// ----------------------------------------------------------------------------------------------

#[test]
fn acks_one_record_acknowledged_before_replication_is_lost_on_failover() {
    // Followers must stay in the ISR while they copy nothing: a long replica lag.
    let (_turn, mut c, topic) = setup("acks1", &[("replica.lag.time.max.ms", "20000")], 1);
    let s = c.partition_state(&topic, 0);
    let leader = s.leader;
    let followers = s.followers();

    let p = rd::producer(
        &c.bootstrap(),
        &[
            ("acks", "1"),
            ("enable.idempotence", "false"),
            ("message.send.max.retries", "0"),
            ("linger.ms", "0"),
            ("message.timeout.ms", "20000"),
        ],
    );
    let r1 = produce_one(&p, &topic, 0, "r1-replicated", Some(1111));
    assert!(r1.error.is_none(), "r1: {r1:?}");
    let hw = |p: &RecProducer| {
        p.client()
            .fetch_watermarks(&topic, 0, CALL)
            .map(|(_, high)| high)
            .map_err(|e| e.to_string())
    };
    poll_until_ok(
        "r1 committed (high watermark past it)",
        ISR_WAIT,
        || match hw(&p) {
            Ok(h) if h > r1.offset => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );

    // Stop the followers copying, without taking them out of the ISR.
    cut_replication(&c, leader, &followers);
    let r2 = produce_one(&p, &topic, 0, "r2-acked-then-lost", Some(2222));
    let hw_at_ack = hw(&p);
    let isr_at_ack = c.partition_state(&topic, 0).isr;
    c.kill(leader);
    assert!(
        r2.error.is_none(),
        "acks=1 produce while followers are cut off: {r2:?}"
    );
    let hw_at_ack = hw_at_ack.unwrap_or_else(|e| panic!("high watermark at r2's ack: {e}"));
    assert!(
        hw_at_ack <= r2.offset,
        "r2 must not have been replicated when acknowledged (HW {hw_at_ack}, r2 at {})",
        r2.offset
    );
    assert_eq!(
        isr_at_ack.len(),
        3,
        "the followers were still in the ISR when r2 was acknowledged"
    );
    let old_leader_log = c.dump_log(leader, &topic, 0);
    assert!(
        old_leader_log.iter().any(|b| b.max_timestamp() == 2222),
        "the killed leader's files hold r2: {old_leader_log:?}"
    );
    let old_leo = c.log_end_offset(leader, &topic, 0);
    say(&format!(
        "scenario 2: link faults between leader {leader} and {followers:?}; r2 acknowledged (acks=1) at \
         offset {} while the high watermark was {hw_at_ack} and the ISR {isr_at_ack:?}; leader SIGKILLed \
         with log end offset {old_leo}",
        r2.offset
    ));
    heal(&c, &followers);

    let after = c.await_leader_other_than(&topic, 0, leader, FAILOVER_WAIT);
    assert!(
        followers.contains(&after.leader),
        "the new leader is a former ISR follower: {after:?}"
    );
    assert!(
        after.leader_epoch > s.leader_epoch,
        "leader epoch grew: {s:?} -> {after:?}"
    );
    let v = values(&read_all(&c, &topic, 0));
    assert!(
        !v.contains(&"r2-acked-then-lost".to_string()),
        "ACKS=1 LOSS expected: the record acknowledged at offset {} by leader {leader} before any \
         follower copied it must be GONE after failover to node {} (a clean election picks an ISR \
         member without it); log: {v:?}",
        r2.offset,
        after.leader
    );
    assert!(
        v.contains(&"r1-replicated".to_string()),
        "the committed record survives: {v:?}"
    );
    say(&format!(
        "scenario 2: ACKS=1 LOSS: r2, acknowledged at offset {} by node {leader}, is gone after failover \
         to node {} (epoch {} -> {}); the log holds {v:?}",
        r2.offset, after.leader, s.leader_epoch, after.leader_epoch
    ));

    let r3 = produce_one(&p, &topic, 0, "r3-after-failover", Some(3333));
    assert!(r3.error.is_none(), "r3: {r3:?}");
    assert!(
        r3.offset <= r2.offset,
        "r3 reuses r2's offset {}: {}",
        r2.offset,
        r3.offset
    );

    // The old leader returns as a follower and truncates r2 away.
    c.start_node(leader);
    c.await_isr(&topic, 0, &s.replicas, ISR_WAIT);
    let log = c.await_identical_replicas(&topic, 0, &s.replicas, Duration::from_secs(30));
    let new_leo = c.log_end_offset(after.leader, &topic, 0);
    let back_leo = c.log_end_offset(leader, &topic, 0);
    assert_eq!(
        back_leo, new_leo,
        "the old leader's log end offset came back to the new leader's"
    );
    assert!(
        log.iter().all(|b| b.max_timestamp() != 2222),
        "no replica holds r2 any more: {log:?}"
    );
    say(&format!(
        "scenario 2: r3 acknowledged at offset {} (r2's offset); old leader {leader} rejoined the ISR and \
         truncated: log end offset {old_leo} with r2 -> {back_leo} = the new leader's {new_leo}, all \
         three replicas identical; log lines mentioning truncation on node {leader}: {}",
        r3.offset,
        c.log_lines(leader, "truncat").len()
    ));
}

// ----------------------------------------------------------------------------------------------
// 3. acks=all, idempotent stream; the partition leader is SIGKILLed 20 times
// ----------------------------------------------------------------------------------------------

/// What the stream thread and the test share.
#[derive(Default)]
struct StreamShared {
    stop: AtomicBool,
    acks: AtomicUsize,
    failed: AtomicUsize,
    watch: Mutex<Watch>,
}

/// The partition watched for failover, when its leader was killed, and when the first record
/// sent after that was acknowledged.
#[derive(Default)]
struct Watch {
    partition: i32,
    killed_at: Option<Instant>,
    first_ack: Option<Instant>,
}

/// What the stream sent (partition and per-partition sequence of each record index) and the
/// delivery reports.
struct StreamResult {
    sent: Vec<(i32, u64)>,
    deliveries: Vec<Delivery>,
}

/// An idempotent acks=all producer sending `part:seq` records round-robin to every partition
/// (at most `RATE` records a second, at most `MAX_OUTSTANDING` unacknowledged) until stopped.
fn start_stream(
    bootstrap: String,
    topic: String,
    partitions: i32,
    shared: Arc<StreamShared>,
) -> JoinHandle<StreamResult> {
    const RATE: f64 = 2000.0;
    const MAX_OUTSTANDING: usize = 400;
    std::thread::spawn(move || {
        let p = rd::producer(
            &bootstrap,
            &[
                ("acks", "all"),
                ("enable.idempotence", "true"),
                ("max.in.flight.requests.per.connection", "5"),
                ("linger.ms", "5"),
                ("retry.backoff.ms", "50"),
                ("reconnect.backoff.max.ms", "1000"),
                ("message.timeout.ms", "120000"),
            ],
        );
        let mut sent: Vec<(i32, u64)> = Vec::new();
        let mut sent_at: Vec<Instant> = Vec::new();
        let mut next_seq = vec![0u64; partitions as usize];
        let mut seen = 0;
        let started = Instant::now();
        let mut account = |p: &RecProducer, sent_at: &[Instant]| {
            let d = p.context().deliveries.lock().unwrap();
            for x in &d[seen..] {
                if x.error.is_some() {
                    shared.failed.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                shared.acks.fetch_add(1, Ordering::Relaxed);
                let mut w = shared.watch.lock().unwrap();
                // Only a record sent after the kill counts: the dead leader cannot have acked it.
                if let Some(killed) = w.killed_at {
                    if w.first_ack.is_none()
                        && x.partition == w.partition
                        && sent_at[x.idx] > killed
                    {
                        w.first_ack = Some(x.at);
                    }
                }
            }
            seen = d.len();
        };
        while !shared.stop.load(Ordering::Relaxed) {
            let outstanding = sent.len() - rd::delivered_count(&p);
            let allowed = (started.elapsed().as_secs_f64() * RATE) as usize;
            if outstanding < MAX_OUTSTANDING && sent.len() < allowed {
                let idx = sent.len();
                let part = idx as i32 % partitions;
                let seq = next_seq[part as usize];
                next_seq[part as usize] += 1;
                let value = format!("{part}:{seq}");
                rd::send(
                    &p,
                    rd::record(&topic, idx, Some(part), None, Some(value.as_bytes())),
                );
                sent.push((part, seq));
                sent_at.push(Instant::now());
                p.poll(Duration::ZERO);
            } else {
                p.poll(Duration::from_millis(2));
            }
            account(&p, &sent_at);
        }
        if let Err(e) = p.flush(Duration::from_secs(120)) {
            panic!(
                "stream: flush failed: {e} ({} of {} delivery reports)",
                rd::delivered_count(&p),
                sent.len()
            );
        }
        account(&p, &sent_at);
        let mut deliveries = p.context().deliveries.lock().unwrap().clone();
        deliveries.sort_by_key(|d| d.idx);
        assert_eq!(deliveries.len(), sent.len(), "one report per record");
        StreamResult { sent, deliveries }
    })
}

#[test]
fn idempotent_acks_all_stream_survives_repeated_leader_kills() {
    // Eight kills, each an election and a restarted node rejoining under a live stream; CI
    // also runs the same stream with kafka-clients (`ReplicationScenariosTest`) and the chaos
    // checker's bounded run. BROOK_LEADER_KILLS sets a longer run (the loop bound grows with it).
    let kills: usize = std::env::var("BROOK_LEADER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    const PARTITIONS: i32 = 3;
    // A safety bound, not a speed assertion: one kill takes about 9 s on a loaded 2-core CI
    // machine (3 s session timeout, election, ISR back to three); 21 s a kill is the bound.
    let loop_bound = Duration::from_secs(60 + 21 * kills as u64);
    let (_turn, mut c, topic) = setup("leaderkill", &[], PARTITIONS);
    let all = c.ids();

    let shared = Arc::new(StreamShared::default());
    let stream = start_stream(c.bootstrap(), topic.clone(), PARTITIONS, shared.clone());
    let progress = |shared: &StreamShared, stream: &JoinHandle<StreamResult>| {
        format!(
            "acks {}, failed {}, stream thread finished: {}",
            shared.acks.load(Ordering::Relaxed),
            shared.failed.load(Ordering::Relaxed),
            stream.is_finished()
        )
    };

    let started = Instant::now();
    let loop_deadline = started + loop_bound;
    // Every wait of the loop ends by the loop's deadline at the latest.
    let within = |d: Duration| d.min(loop_deadline.saturating_duration_since(Instant::now()));
    let mut failover: Vec<Duration> = Vec::new();
    let mut trail: Vec<String> = Vec::new();
    let mut max_epoch: Vec<i32> = (0..PARTITIONS)
        .map(|p| c.partition_state(&topic, p).leader_epoch)
        .collect();
    let first_epoch = max_epoch[0];
    for k in 1..=kills {
        for part in 0..PARTITIONS {
            c.await_isr(&topic, part, &all, within(ISR_WAIT));
        }
        let before = shared.acks.load(Ordering::Relaxed);
        poll_until_ok(
            &format!("the stream makes progress (200 acks) before kill #{k}"),
            within(Duration::from_secs(30)),
            || {
                if shared.acks.load(Ordering::Relaxed) >= before + 200 {
                    Ok(())
                } else {
                    Err(progress(&shared, &stream))
                }
            },
        );
        let mut states: Vec<PartitionState> = Vec::new();
        for part in 0..PARTITIONS {
            let ps = c.partition_state(&topic, part);
            assert!(
                ps.leader_epoch >= max_epoch[part as usize],
                "leader epoch went backwards on {topic}-{part}: {} -> {ps:?}",
                max_epoch[part as usize]
            );
            max_epoch[part as usize] = ps.leader_epoch;
            states.push(ps);
        }
        let s = &states[0];
        let victim = s.leader;
        *shared.watch.lock().unwrap() = Watch {
            partition: 0,
            killed_at: None,
            first_ack: None,
        };
        c.kill(victim);
        let killed = Instant::now();
        shared.watch.lock().unwrap().killed_at = Some(killed);
        let after = c.await_leader_other_than(&topic, 0, victim, within(FAILOVER_WAIT));
        let elected = killed.elapsed();
        let first_ack = poll_until_ok(
            &format!("an acks=all record sent after kill #{k} is acknowledged on {topic}-0"),
            within(FAILOVER_WAIT),
            || {
                shared
                    .watch
                    .lock()
                    .unwrap()
                    .first_ack
                    .ok_or_else(|| format!("{}; {after:?}", progress(&shared, &stream)))
            },
        );
        failover.push(first_ack - killed);
        assert!(
            after.leader_epoch > s.leader_epoch,
            "kill #{k}: the new leader's epoch must be higher: {s:?} -> {after:?}"
        );
        max_epoch[0] = max_epoch[0].max(after.leader_epoch);
        trail.push(format!(
            "{victim}@{}->{}@{} ({} ms to elect, {} ms to ack)",
            s.leader_epoch,
            after.leader,
            after.leader_epoch,
            ms(elected),
            ms(first_ack - killed)
        ));
        c.start_node(victim);
        assert!(
            Instant::now() < loop_deadline,
            "the kill loop exceeded {loop_bound:?} after {k} kills"
        );
    }
    for part in 0..PARTITIONS {
        c.await_isr(&topic, part, &all, ISR_WAIT);
    }
    let loop_time = started.elapsed();
    shared.stop.store(true, Ordering::Relaxed);
    let result = stream.join().expect("stream thread");
    let acked: Vec<&Delivery> = result
        .deliveries
        .iter()
        .filter(|d| d.error.is_none())
        .collect();
    let failed: Vec<&Delivery> = result
        .deliveries
        .iter()
        .filter(|d| d.error.is_some())
        .collect();
    say(&format!(
        "scenario 3: {kills} leader kills in {} ms; {} records sent, {} acknowledged, {} failed; leader \
         moves of {topic}-0 (node@epoch): {trail:?}",
        ms(loop_time),
        result.sent.len(),
        acked.len(),
        failed.len()
    ));
    assert!(
        failed.is_empty(),
        "an idempotent acks=all producer with message.timeout.ms=120000 lost no send; first failures: {:?}",
        &failed[..failed.len().min(5)]
    );

    // Every acknowledged record exactly once, at its acknowledged offset, in per-partition order.
    let got = rd::read_to_end(
        &c.bootstrap(),
        &topic,
        &(0..PARTITIONS).collect::<Vec<_>>(),
        Duration::from_secs(120),
    );
    let mut total = 0;
    for part in 0..PARTITIONS {
        let recs = &got[&part];
        total += recs.len();
        let mut seen: HashMap<String, i64> = HashMap::new();
        let mut last_seq: Option<u64> = None;
        for r in recs {
            let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            let (vp, seq) = v
                .split_once(':')
                .and_then(|(a, b)| Some((a.parse::<i32>().ok()?, b.parse::<u64>().ok()?)))
                .unwrap_or_else(|| panic!("unexpected value {v:?} at offset {}", r.offset));
            assert_eq!(vp, part, "record {v:?} in partition {part}");
            if let Some(prev) = seen.insert(v.clone(), r.offset) {
                panic!("DUPLICATE: {v} at offsets {prev} and {}", r.offset);
            }
            assert!(
                last_seq.is_none_or(|l| seq > l),
                "ORDER: {v} at offset {} after sequence {last_seq:?}",
                r.offset
            );
            last_seq = Some(seq);
        }
        for d in acked.iter().filter(|d| d.partition == part) {
            let (_, seq) = result.sent[d.idx];
            let v = format!("{part}:{seq}");
            match seen.get(&v) {
                None => panic!(
                    "LOSS: {v} acknowledged at offset {} is not in {topic}-{part}",
                    d.offset
                ),
                Some(at) => {
                    assert_eq!(*at, d.offset, "{v} is at the offset it was acknowledged at")
                }
            }
        }
    }
    assert_eq!(
        total,
        acked.len(),
        "the log holds exactly the acknowledged records"
    );
    for part in 0..PARTITIONS {
        c.await_identical_replicas(&topic, part, &all, Duration::from_secs(60));
    }
    let final_epoch = c.partition_state(&topic, 0).leader_epoch;
    assert!(
        final_epoch >= first_epoch + kills as i32,
        "{topic}-0's leader epoch rose by at least one per kill: {first_epoch} -> {final_epoch}"
    );
    let mut sorted = failover.clone();
    sorted.sort();
    say(&format!(
        "scenario 3: every acknowledged record read back exactly once, in order, at its offset; \
         replicas identical on disk; leader epoch of {topic}-0 {first_epoch} -> {final_epoch}"
    ));
    say(&format!(
        "scenario 3: failover (SIGKILL of the leader -> first acks=all ack of a record sent after the \
         kill; broker.session.timeout.ms=3000, heartbeat 500 ms): median {} ms, min {} ms, max {} ms \
         over {kills} kills: {:?}",
        ms(sorted[sorted.len() / 2]),
        ms(sorted[0]),
        ms(sorted[sorted.len() - 1]),
        failover.iter().map(|d| ms(*d)).collect::<Vec<_>>()
    ));
}

// ----------------------------------------------------------------------------------------------
// 4. Crash after replication, before the ack: the retry gets the original offset
// ----------------------------------------------------------------------------------------------

#[test]
fn crash_after_replication_before_ack_retry_gets_the_original_offset() {
    let (_turn, mut c, topic) = setup("crashack", &[], 1);
    let s = c.partition_state(&topic, 0);
    let leader = s.leader;
    let p = rd::producer(
        &c.bootstrap(),
        &[
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("linger.ms", "0"),
            ("message.timeout.ms", "90000"),
        ],
    );
    let base = produce_one(&p, &topic, 0, "base", None);
    assert_eq!((base.error.as_deref(), base.offset), (None, 0), "{base:?}");
    c.fault_add(
        leader,
        &[
            "--action",
            "crash",
            "--point",
            "after-replication-before-ack",
            "--topic",
            &topic,
            "--partition",
            "0",
        ],
    );
    let idx = send_one(&p, &topic, 0, "the-one", Some(4444));
    let exit = poll_until_ok(
        &format!("leader {leader} exits at the crash point"),
        Duration::from_secs(15),
        || {
            p.poll(Duration::from_millis(10));
            c.await_exit(leader, Duration::from_millis(10))
                .ok_or_else(|| "still running".to_string())
        },
    );
    assert_eq!(exit.code(), Some(137), "a crash point exits 137: {exit}");
    let crash_lines = c.log_lines(leader, "brook: CRASH");
    assert!(!crash_lines.is_empty(), "the crash is logged");
    let after = c.await_leader_other_than(&topic, 0, leader, FAILOVER_WAIT);
    let d = await_delivery(&p, idx, "the-one");
    let v = values(&read_all(&c, &topic, 0));
    say(&format!(
        "scenario 4: leader {leader} exited {exit} at after-replication-before-ack ({}); librdkafka's retry \
         went to node {} (epoch {}) and was told offset {} ({:?}); log {v:?}",
        crash_lines[0].trim(),
        after.leader,
        after.leader_epoch,
        d.offset,
        d.error
    ));
    assert!(d.error.is_none(), "the-one is delivered: {d:?}");
    assert_eq!(
        d.offset, 1,
        "the retry against the new leader gets the original offset (1) back"
    );
    assert_eq!(
        v,
        ["base", "the-one"],
        "no duplicate of the record the crashed leader had replicated"
    );
    c.start_node(leader);
    c.await_isr(&topic, 0, &s.replicas, ISR_WAIT);
    c.await_identical_replicas(&topic, 0, &s.replicas, Duration::from_secs(30));
}

// ----------------------------------------------------------------------------------------------
// 5. Kill the active controller
// ----------------------------------------------------------------------------------------------

#[test]
fn killing_the_active_controller_keeps_produce_and_consume_going() {
    let (_turn, mut c, topic) = setup("ctl", &[], 1);
    let controller = c.await_controller(None, Duration::from_secs(20));

    let p = rd::producer(
        &c.bootstrap(),
        &[
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("linger.ms", "0"),
            ("message.timeout.ms", "60000"),
        ],
    );
    let mut n = 0;
    let mut send_batch = |prefix: &str| {
        for i in 0..50 {
            let v = format!("{prefix}-{i}");
            rd::send(&p, rd::record(&topic, n, Some(0), None, Some(v.as_bytes())));
            n += 1;
        }
        let d = rd::flush(&p, n, Duration::from_secs(60));
        rd::assert_all_delivered(&d);
    };
    send_batch("before");

    c.kill(controller);
    let killed = Instant::now();
    let next = c.await_controller(Some(controller), Duration::from_secs(30));
    let takeover = killed.elapsed();
    send_batch("after");
    let produced = killed.elapsed();

    // A metadata write through the new controller: a new topic (RF 2: one node is down).
    let topic2 = unique_topic("ctl-new");
    c.create_topic(&topic2, 1, 2, &[("min.insync.replicas", "1")]);
    let d = produce_one(&p, &topic2, 0, "on-new-topic", None);
    assert!(d.error.is_none(), "{d:?}");

    let v = values(&read_all(&c, &topic, 0));
    let expected: Vec<String> = ["before", "after"]
        .iter()
        .flat_map(|p| (0..50).map(move |i| format!("{p}-{i}")))
        .collect();
    assert_eq!(
        v, expected,
        "produce and consume continue across the controller's death"
    );
    assert_eq!(values(&read_all(&c, &topic2, 0)), ["on-new-topic"]);
    let s2 = c.partition_state(&topic2, 0);
    say(&format!(
        "scenario 5: node {controller} (active controller) SIGKILLed; node {next} took over after {} ms; 50 \
         acks=all records produced by {} ms; a topic created through the new controller (replicas {:?}, \
         leader {} at epoch {}); all 100 records read back",
        ms(takeover),
        ms(produced),
        s2.replicas,
        s2.leader,
        s2.leader_epoch
    ));
    c.start_node(controller);
    c.await_isr(&topic, 0, &c.ids(), ISR_WAIT);
}

// ----------------------------------------------------------------------------------------------
// 6. Group offsets across the coordinator's death
// ----------------------------------------------------------------------------------------------

const OFFSETS_TOPIC: &str = "__consumer_offsets";
const OFFSETS_PARTITIONS: i32 = 5;

/// Polls a subscribed consumer until every one of `partitions` reported its end; returns the
/// messages as (partition, offset).
fn poll_to_end(c: &BaseConsumer, partitions: &[i32]) -> Vec<(i32, i64)> {
    let mut out = Vec::new();
    let mut at_end: BTreeSet<i32> = BTreeSet::new();
    let mut errors: Vec<String> = Vec::new();
    poll_until_ok("the group consumer reads to the end", READ_WAIT, || {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                out.push((m.partition(), m.offset()));
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => errors.push(e.to_string()),
            None => {}
        }
        if partitions.iter().all(|p| at_end.contains(p)) {
            Ok(())
        } else {
            Err(format!(
                "{} messages, at end {at_end:?}, errors {errors:?}",
                out.len()
            ))
        }
    });
    out
}

fn offsets_list(topic: &str, offsets: &[(i32, i64)]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*o))
            .unwrap();
    }
    tpl
}

fn committed_of(c: &BaseConsumer, topic: &str) -> Result<BTreeMap<i32, Offset>, String> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    tpl.add_partition(topic, 1);
    let got = c.committed_offsets(tpl, CALL).map_err(|e| e.to_string())?;
    Ok(got
        .elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect())
}

/// Waits until FindCoordinator on every live node names `leader` (the leader of the group's
/// offsets partition) as the coordinator of `group`; returns it.
fn await_coordinator(c: &Cluster, group: &str, leader: i32) -> i32 {
    poll_until_ok(
        &format!("every live node names node {leader} coordinator of {group}"),
        CALL,
        || {
            let answers: Vec<(i32, Result<i32, String>)> = c
                .live_ids()
                .into_iter()
                .map(|n| (n, c.find_coordinator(n, group)))
                .collect();
            if answers.iter().all(|(_, a)| *a == Ok(leader)) {
                Ok(leader)
            } else {
                Err(format!("{answers:?}"))
            }
        },
    )
}

#[test]
fn group_offsets_survive_the_coordinators_death() {
    let (_turn, mut c, topic) = setup(
        "coord",
        &[
            ("offsets.topic.num.partitions", "5"),
            ("group.initial.rebalance.delay.ms", "0"),
        ],
        2,
    );
    let group = format!("{topic}-g");
    let p = rd::producer(&c.bootstrap(), &[("acks", "all")]);
    let vals: Vec<String> = (0..40).map(|i| format!("v{i}")).collect();
    for (i, v) in vals.iter().enumerate() {
        rd::send(
            &p,
            rd::record(&topic, i, Some(i as i32 % 2), None, Some(v.as_bytes())),
        );
    }
    rd::assert_all_delivered(&rd::flush(&p, 40, Duration::from_secs(60)));

    let consumer = rd::group_consumer(&c.bootstrap(), &group, &[("enable.partition.eof", "true")]);
    consumer.subscribe(&[&topic]).expect("subscribe");
    assert_eq!(poll_to_end(&consumer, &[0, 1]).len(), 40);
    consumer
        .commit(&offsets_list(&topic, &[(0, 10), (1, 15)]), CommitMode::Sync)
        .expect("synchronous commit");

    let offsets_partition = offsets_partition_of(&group, OFFSETS_PARTITIONS);
    let offsets_state = c.partition_state(OFFSETS_TOPIC, offsets_partition);
    let coordinator = await_coordinator(&c, &group, offsets_state.leader);
    assert_eq!(
        offsets_state.isr,
        c.ids().into_iter().collect(),
        "the offsets partition is replicated to every node"
    );

    c.kill(coordinator);
    let killed = Instant::now();
    // The same member commits again; librdkafka looks the coordinator up again by itself. A
    // commit that fails on the way (the dead coordinator's connection) is retried.
    let mut attempts: Vec<String> = Vec::new();
    poll_until_ok(
        "a synchronous commit through the new coordinator",
        Duration::from_secs(60),
        || {
            let r = consumer.commit(&offsets_list(&topic, &[(0, 12), (1, 16)]), CommitMode::Sync);
            attempts.push(format!("{r:?}"));
            r.map_err(|e| e.to_string())
        },
    );
    let commit_after_kill = killed.elapsed();
    let new_leader = c.leader_of(OFFSETS_TOPIC, offsets_partition);
    assert_ne!(
        new_leader, coordinator,
        "a live node leads {OFFSETS_TOPIC}-{offsets_partition}"
    );
    let new_coordinator = await_coordinator(&c, &group, new_leader);
    let committed = committed_of(&consumer, &topic).expect("committed offsets");
    assert_eq!(
        committed,
        BTreeMap::from([(0, Offset::Offset(12)), (1, Offset::Offset(16))]),
        "the committed offsets read through the new coordinator"
    );
    drop(consumer);

    // A new member of the group resumes exactly at the committed offsets.
    let fresh = rd::group_consumer(&c.bootstrap(), &group, &[("enable.partition.eof", "true")]);
    fresh.subscribe(&[&topic]).expect("subscribe");
    let rest = poll_to_end(&fresh, &[0, 1]);
    let mut first: BTreeMap<i32, i64> = BTreeMap::new();
    for (p, o) in &rest {
        first
            .entry(*p)
            .and_modify(|f| *f = (*f).min(*o))
            .or_insert(*o);
    }
    assert_eq!(
        first,
        BTreeMap::from([(0, 12), (1, 16)]),
        "a new member resumes at the committed offsets"
    );
    assert_eq!(
        rest.len(),
        (20 - 12) + (20 - 16),
        "records after the committed offsets, none before: {rest:?}"
    );
    say(&format!(
        "scenario 6: group {group} on {OFFSETS_TOPIC}-{offsets_partition}; coordinator {coordinator} \
         SIGKILLed after a commit of (10, 15); the member's next synchronous commit (12, 16) went through \
         node {new_coordinator} {} ms after the kill ({} attempt(s): {attempts:?}); a new member resumed \
         at {first:?}",
        ms(commit_after_kill),
        attempts.len()
    ));
}

// ----------------------------------------------------------------------------------------------
// 7. Maximal ISR (KIP-497): a follower whose ISR expansion is pending at the controller counts
// for the high watermark and acks=all
// ----------------------------------------------------------------------------------------------

/// Waits until rule `rule` on `node` has fired (refused something).
fn await_rule_fired(c: &Cluster, node: i32, rule: u64, what: &str) {
    poll_until_ok(what, Duration::from_secs(15), || {
        let fired = c.fault_fired_rule(node, rule);
        if fired > 0 {
            Ok(())
        } else {
            Err(format!("rule {rule} on node {node} fired {fired} times"))
        }
    });
}

#[test]
fn acks_all_counts_a_follower_whose_isr_expansion_is_pending() {
    // Follower F leaves the ISR by being killed (fenced), not by lag: the long lag keeps the
    // leader from shrinking the ISR again while F is cut off later. The session timeout outlasts
    // the leader's time cut off from the controller (a few seconds), so it is not fenced then.
    let (_turn, mut c, topic) = setup(
        "maximal-isr",
        &[
            ("replica.lag.time.max.ms", "60000"),
            ("broker.session.timeout.ms", "15000"),
        ],
        3,
    );
    // The partition whose third replica G is the active controller: killing F and cutting
    // the leader off leave the controller in place, so the leader's AlterPartition stays
    // pending (retried) rather than refused by the leader itself as the controller.
    let controller = c.await_controller(None, REGISTER_WAIT);
    let (part, s) = (0..3)
        .map(|i| (i, c.partition_state(&topic, i)))
        .find(|(_, s)| s.replicas[2] == controller && s.leader == s.replicas[0])
        .expect("round-robin placement puts the controller third in one partition");
    let leader = s.leader;
    // F comes first in replica order: once the leader is gone, a clean election picks it.
    let f = s.followers()[0];
    let g = s.followers()[1];
    let p = rd::producer(
        &c.bootstrap(),
        &[
            ("acks", "all"),
            ("enable.idempotence", "false"),
            ("message.send.max.retries", "0"),
            ("linger.ms", "0"),
            ("request.timeout.ms", "3000"),
            ("message.timeout.ms", "4000"),
        ],
    );
    let before = produce_one(&p, &topic, part, "before", None);
    assert!(before.error.is_none(), "{before:?}");

    // F out of the ISR, then back with its replication link to the leader cut.
    c.kill(f);
    c.await_isr(&topic, part, &[leader, g], ISR_WAIT);
    let repl = c.cut_link(leader, &f.to_string(), "replication");
    c.start_node(f);
    await_rule_fired(
        &c,
        leader,
        repl,
        "the returned follower's fetches are refused",
    );

    // The leader cut off from the controller: an AlterPartition it sends cannot commit.
    let ctl = c.cut_link(leader, "*", "controller");
    let expansions = c.log_lines(leader, "expanding ISR").len();
    c.fault_remove(leader, repl);
    poll_until_ok("the leader proposes F back into the ISR", ISR_WAIT, || {
        let n = c.log_lines(leader, "expanding ISR").len();
        if n > expansions {
            Ok(())
        } else {
            Err(format!("{n} expansion lines"))
        }
    });
    // F stops copying again, with no fetch of it in flight (its next one was refused).
    let repl = c.cut_link(leader, &f.to_string(), "replication");
    await_rule_fired(&c, leader, repl, "F's fetch is refused again");

    // acks=all while F's expansion is pending: F, in the maximal ISR, lacks these records, so
    // they must not be acknowledged.
    let first = rd::delivered_count(&p);
    for i in 0..10 {
        let value = format!("pending-{i}");
        rd::send(
            &p,
            rd::record(&topic, first + i, Some(part), None, Some(value.as_bytes())),
        );
    }
    let deliveries = rd::flush(&p, first + 10, DELIVERY_WAIT);
    let acked: Vec<&Delivery> = deliveries[first..]
        .iter()
        .filter(|d| d.error.is_none())
        .collect();
    say(&format!(
        "scenario 7: partition {part}, leader {leader}, F={f} pending expansion and cut off, G={g} (the controller): {} of 10 \
         acks=all records acknowledged",
        acked.len()
    ));

    // The expansion commits: F is in the ISR without those records. The leader dies at once.
    c.fault_remove(leader, ctl);
    poll_until_ok("the controller commits F into the ISR", ISR_WAIT, || {
        let st = c.partition_state_from(g, &topic, part)?;
        if st.isr.contains(&f) {
            Ok(())
        } else {
            Err(format!("{st:?}"))
        }
    });
    c.kill(leader);
    let after = c.await_leader_other_than(&topic, part, leader, FAILOVER_WAIT);
    let v = values(&read_all(&c, &topic, part));
    say(&format!(
        "scenario 7: new leader {} (epoch {}); log {v:?}",
        after.leader, after.leader_epoch
    ));
    assert!(v.contains(&"before".to_string()), "{v:?}");
    let lost: Vec<String> = acked
        .iter()
        .map(|d| format!("pending-{}", d.idx - first))
        .filter(|name| !v.contains(name))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged acks=all records lost after the leader's death (new leader {}): {lost:?}; \
         log {v:?}",
        after.leader
    );
}

// ----------------------------------------------------------------------------------------------
// 8. Caught up (Replica.updateFetchState): under continuous produce over a slow replication link
// the followers stay in the ISR
// ----------------------------------------------------------------------------------------------

/// Issue 31: a restarted node catches up on many partitions at once, and each leader asks the
/// active controller to re-admit it, one AlterPartition per partition, all queued for the
/// controller's write lock. The controller's commits are slowed by a delay on every quorum
/// message it sends, so the queue takes several broker sessions to drain. The brokers that
/// stayed up keep heartbeating all along: they must not be fenced (Kafka counts a heartbeat
/// when it arrives, outside the controller's queue: `BrokerHeartbeatTracker`), and every ISR
/// is full again once the queue drains. Before, their heartbeats waited in the queue, their
/// sessions expired, and each fencing shrank ISRs and moved leaders, which queued more writes:
/// the transactional chaos workload then never settled.
#[test]
fn a_busy_controller_does_not_fence_brokers_that_heartbeat() {
    // 64 re-admissions at two delayed round trips each (the linearizable read, the commit):
    // about 19 s of queue, two sessions.
    const PARTITIONS: i32 = 64;
    // Under the quorum's AppendEntries timeout, so the quorum keeps its leader.
    const QUORUM_DELAY_MS: &str = "150";
    const FENCING: &str = "broker session expired; fencing";
    // Kafka's default session and heartbeat interval, not the 3 s session of the other
    // scenarios: on a loaded machine a process can be starved of CPU for 3 s, which fences
    // it whatever the controller does; this scenario is about the controller's queue.
    let sessions = [
        ("broker.session.timeout.ms", "9000"),
        ("broker.heartbeat.interval.ms", "2000"),
    ];
    let (_turn, mut c, topic) = setup("busy-controller", &sessions, PARTITIONS);
    let controller = c.await_controller(None, FAILOVER_WAIT);
    let victim = c.other_than(controller);
    c.kill(victim);
    poll_until(
        &format!("node {controller} fences the killed node {victim}"),
        FAILOVER_WAIT,
        || {
            let fenced = c.log_lines(controller, &format!("{FENCING} node_id={victim}"));
            (!fenced.is_empty()).then_some(())
        },
    );
    c.fault_add(
        controller,
        &[
            "--action",
            "delay",
            "--delay-ms",
            QUORUM_DELAY_MS,
            "--to",
            "*",
            "--direction",
            "out",
            "--traffic",
            "controller",
        ],
    );
    let fenced_before: Vec<usize> = c
        .ids()
        .iter()
        .map(|id| c.log_lines(*id, FENCING).len())
        .collect();
    let began = Instant::now();
    c.start_node(victim);
    for p in 0..PARTITIONS {
        c.await_isr(&topic, p, &c.ids(), ISR_WAIT);
    }
    say(&format!(
        "every ISR full again {} ms after node {victim} restarted",
        ms(began.elapsed())
    ));
    let fenced_since: Vec<String> = c
        .ids()
        .iter()
        .zip(&fenced_before)
        .flat_map(|(id, before)| c.log_lines(*id, FENCING).into_iter().skip(*before))
        .collect();
    assert!(
        fenced_since.is_empty(),
        "live brokers were fenced while the controller was busy: {fenced_since:#?}"
    );
}

#[test]
fn followers_behind_a_slow_link_stay_in_the_isr_under_continuous_produce() {
    const LINK_DELAY_MS: &str = "20";
    const PRODUCE_FOR: Duration = Duration::from_secs(6);
    let (_turn, c, topic) = setup("caught-up", &[("replica.lag.time.max.ms", "1500")], 1);
    let s = c.partition_state(&topic, 0);
    let leader = s.leader;
    for f in s.followers() {
        c.fault_add(
            f,
            &[
                "--action",
                "delay",
                "--delay-ms",
                LINK_DELAY_MS,
                "--to",
                &leader.to_string(),
                "--direction",
                "out",
                "--traffic",
                "replication",
            ],
        );
    }
    let shrinks_before = c.log_lines(leader, "shrinking ISR").len();
    // acks=1 so that the producer's pace does not depend on replication: the leader's log end
    // offset moves every millisecond or two, always ahead of a follower's fetch offset.
    let p = rd::producer(
        &c.bootstrap(),
        &[
            ("acks", "1"),
            ("linger.ms", "0"),
            ("enable.idempotence", "false"),
        ],
    );
    let started = Instant::now();
    let mut sent = 0;
    while started.elapsed() < PRODUCE_FOR {
        let value = format!("v{sent}");
        rd::send(
            &p,
            rd::record(&topic, sent, Some(0), None, Some(value.as_bytes())),
        );
        sent += 1;
        p.poll(Duration::from_millis(1));
    }
    let deliveries = rd::flush(&p, sent, DELIVERY_WAIT);
    rd::assert_all_delivered(&deliveries);
    let shrinks: Vec<String> = c
        .log_lines(leader, "shrinking ISR")
        .into_iter()
        .skip(shrinks_before)
        .collect();
    let rate = sent as f64 / PRODUCE_FOR.as_secs_f64();
    say(&format!(
        "scenario 8: {sent} records in {PRODUCE_FOR:?} ({rate:.0}/s) over a {LINK_DELAY_MS} ms \
         replication delay, replica.lag.time.max.ms=1500: {} ISR shrink(s)",
        shrinks.len()
    ));
    assert!(
        shrinks.is_empty(),
        "healthy followers behind a {LINK_DELAY_MS} ms link left the ISR: {shrinks:?}"
    );
    assert_eq!(c.partition_state(&topic, 0).isr.len(), 3);
}

// ----------------------------------------------------------------------------------------------
// 9. acks=all waits once for every partition of a Produce request (DelayedProduce)
// ----------------------------------------------------------------------------------------------

#[test]
fn a_slow_partition_does_not_time_out_healthy_ones_in_the_same_produce() {
    use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
    use brook_protocol_tests::wire::{WireClient, PRODUCE_V};
    use kafka_protocol::ResponseError;

    // The long lag keeps a cut-off follower in the ISR: its partition cannot commit.
    let (_turn, c, slow_topic) = setup("wait-once", &[("replica.lag.time.max.ms", "60000")], 3);
    let fast_topic = unique_topic("wait-once-fast");
    c.create_topic(&fast_topic, 3, 2, &[("min.insync.replicas", "2")]);
    // A fast partition (RF=2, leader L, follower G) and the RF=3 partition L leads, whose
    // third replica F is cut off from L.
    let fast = c.partition_state(&fast_topic, 0);
    let (leader, g) = (fast.leader, fast.followers()[0]);
    let f = *c
        .ids()
        .iter()
        .find(|n| !fast.replicas.contains(n))
        .expect("a node outside the fast partition");
    let slow_index = (0..3)
        .find(|i| c.leader_of(&slow_topic, *i) == leader)
        .expect("the RF=3 topic has a partition led by every node");
    // Only the link between L and F: G keeps copying from L.
    c.cut_link(leader, &f.to_string(), "replication");
    let rule = c.cut_link(f, &leader.to_string(), "replication");
    await_rule_fired(&c, f, rule, "F's fetch from the leader is refused");

    let batch = |tag: &str| encode_batch(Producer::NONE, &[Rec::kv(tag, tag, 1_000)]);
    let mut req = WireClient::produce_request(&slow_topic, slow_index, batch("slow"), -1);
    let fast_req = WireClient::produce_request(&fast_topic, 0, batch("fast"), -1);
    req.topic_data.extend(fast_req.topic_data);
    req.timeout_ms = 3_000;
    let mut wire = WireClient::connect(&c.address(leader));
    let started = Instant::now();
    let resp = wire.request(PRODUCE_V, &req);
    let took = started.elapsed();
    let code = |topic: &str| {
        resp.responses
            .iter()
            .find(|t| t.name.0.as_str() == topic)
            .map(|t| t.partition_responses[0].error_code)
    };
    say(&format!(
        "scenario 9: one Produce to leader {leader} with {slow_topic}-{slow_index} (F={f} cut off) and \
         {fast_topic}-0 (follower {g} healthy) answered in {} ms: slow {:?}, fast {:?}",
        ms(took),
        code(&slow_topic),
        code(&fast_topic)
    ));
    assert_eq!(
        code(&slow_topic),
        Some(ResponseError::RequestTimedOut.code()),
        "{resp:?}"
    );
    assert_eq!(
        code(&fast_topic),
        Some(0),
        "the healthy partition was written and committed within the request's timeout: {resp:?}"
    );
    heal(&c, &[leader, f]);
}
