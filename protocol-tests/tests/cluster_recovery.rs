//! Crash recovery and follower truncation in a 3-node cluster of `brook serve` processes,
//! checked with raw Fetches (every byte a client would get): a node SIGKILLed with a torn last
//! batch recovers its log before it serves it (Kafka's `LogLoader`), and a follower whose
//! epochs diverge from its leader's in epochs the leader never had truncates, converges and
//! rejoins the ISR (Kafka's `AbstractFetcherThread.getOffsetTruncationState`), and a replica
//! restarted after a SIGKILL starts from its checkpointed high watermark
//! (`replication-offset-checkpoint`). Last, the other end of a node's life: a SIGTERMed leader
//! hands its leaderships over before it exits (controlled shutdown).
//!
//! The tests run one at a time (one 3-node cluster on the machine at once). Every wait is a
//! condition polled against a deadline. Lines starting `[cluster-recovery]` say what a
//! scenario observed.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, parse_batches, Producer, Rec};
use brook_protocol_tests::wire::PRODUCE_V;
use brook_protocol_tests::{errors, poll_until_ok, unique_topic, Cluster, WireClient};

const ISR_WAIT: Duration = Duration::from_secs(45);
const FAILOVER_WAIT: Duration = Duration::from_secs(45);
/// Bytes of a v2 batch header before its records (base offset .. record count).
const BATCH_HEADER_LEN: usize = 61;

/// One 3-node cluster at a time: the tests of this file take turns.
fn serial() -> MutexGuard<'static, ()> {
    static CLUSTER: Mutex<()> = Mutex::new(());
    CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

fn say(msg: &str) {
    println!("[cluster-recovery] {msg}");
}

/// Produces `values` one batch each (acks=all) to the leader `leader`. A batch refused (the
/// node has not applied its leadership yet) is sent again until accepted (bounded): a refused
/// batch was not written.
fn produce_batches(c: &Cluster, leader: i32, topic: &str, values: &[String]) {
    let mut wire = WireClient::connect(&c.address(leader));
    for (i, v) in values.iter().enumerate() {
        let batch = encode_batch(Producer::NONE, &[Rec::kv("k", v, 1_000 + i as i64)]);
        let req = WireClient::produce_request(topic, 0, batch, -1);
        poll_until_ok(
            &format!("node {leader} accepts {v:?}"),
            FAILOVER_WAIT,
            || {
                let resp = wire.try_request(PRODUCE_V, &req)?;
                let code = resp.responses[0].partition_responses[0].error_code;
                if code == 0 {
                    Ok(())
                } else {
                    Err(format!("error {code}"))
                }
            },
        );
    }
}

fn batch_values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// What node `id` serves of partition 0 with raw Fetches from offset 0: the values up to the
/// high watermark, or `Err` naming corrupt records (unparseable, or a batch failing its CRC)
/// or a failed answer.
fn served_values(c: &Cluster, id: i32, topic: &str) -> Result<(Vec<String>, i64), String> {
    let mut wire = WireClient::try_connect(&c.address(id), Duration::from_secs(5))
        .map_err(|e| format!("connect to node {id}: {e}"))?;
    let mut values = Vec::new();
    let mut offset = 0i64;
    loop {
        let pd = wire.fetch(topic, 0, offset);
        if pd.error_code != 0 {
            return Err(format!(
                "node {id}: Fetch at {offset}: error {}",
                pd.error_code
            ));
        }
        let data = pd.records.clone().unwrap_or_default();
        let batches = parse_batches(&data)
            .map_err(|e| format!("node {id} served corrupt records at {offset}: {e}"))?;
        for b in batches {
            if !b.crc_valid {
                return Err(format!(
                    "node {id} served corrupt records: the batch at {} fails its CRC (high watermark {})",
                    b.base_offset, pd.high_watermark
                ));
            }
            for r in &b.records {
                if r.offset >= offset {
                    values.push(
                        String::from_utf8_lossy(r.value.as_deref().unwrap_or_default())
                            .into_owned(),
                    );
                }
            }
            offset = b.last_offset() + 1;
        }
        if offset >= pd.high_watermark {
            return Ok((values, pd.high_watermark));
        }
        if data.is_empty() {
            return Err(format!(
                "node {id}: nothing served at {offset} below high watermark {}",
                pd.high_watermark
            ));
        }
    }
}

/// Overwrites the records of the last batch of a segment file with zeros, keeping its length:
/// what a power loss leaves when the file's size reached the disk but its last page did not.
/// Returns the last batch's base offset.
fn tear_last_batch(segment: &Path) -> i64 {
    let bytes = std::fs::read(segment).expect("read the segment");
    let mut pos = 0usize;
    let mut last = None;
    while pos + 12 <= bytes.len() {
        let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
        last = Some(pos);
        pos += 12 + len;
    }
    let at = last.expect("the segment holds a batch");
    assert_eq!(pos, bytes.len(), "the segment ends with a whole batch");
    let base = i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
    let body = at + BATCH_HEADER_LEN;
    let f = OpenOptions::new()
        .write(true)
        .open(segment)
        .expect("open the segment");
    f.write_all_at(&vec![0u8; bytes.len() - body], body as u64)
        .expect("tear the last batch");
    base
}

/// Kafka runs log recovery whenever the clean-shutdown marker is missing, in a cluster as on a
/// single node. A leader SIGKILLed with a torn last batch restarts, truncates the torn batch,
/// copies it back from the new leader, and when it leads again (preferred-leader election)
/// serves only valid batches up to a high watermark that covers valid data only.
#[test]
fn sigkilled_node_with_a_torn_tail_recovers_before_it_serves() {
    let _turn = serial();
    let mut c = Cluster::start(3, &[("leader.imbalance.check.interval.seconds", "1")]);
    let topic = unique_topic("torn");
    c.create_topic(&topic, 1, 3, &[("min.insync.replicas", "2")]);
    let s = c.await_partition(&topic, 0, "the preferred replica leads", ISR_WAIT, |s| {
        s.leader == s.replicas[0] && s.isr.len() == 3
    });
    let victim = s.leader;
    let values: Vec<String> = (0..10).map(|i| format!("value-{i}")).collect();
    produce_batches(&c, victim, &topic, &values);
    c.await_identical_replicas(&topic, 0, &s.replicas, ISR_WAIT);

    c.kill(victim);
    let segment = c
        .partition_dir(victim, &topic, 0)
        .join("00000000000000000000.log");
    let torn = tear_last_batch(&segment);
    let after = c.await_leader_other_than(&topic, 0, victim, FAILOVER_WAIT);
    c.start_node(victim);
    // Back in the ISR, the preferred replica takes the leadership back.
    let back = c.await_partition(&topic, 0, "the restarted node leads again", ISR_WAIT, |s| {
        s.leader == victim && s.isr.len() == 3
    });
    // A new leader's high watermark rises once its followers have fetched; every answer on
    // the way must hold valid batches only.
    let served = poll_until_ok(
        &format!(
            "node {victim} serves the partition up to offset {}",
            values.len()
        ),
        FAILOVER_WAIT,
        || match served_values(&c, victim, &topic) {
            Err(e) if e.contains("corrupt") => panic!("{e}"),
            Ok((_, hw)) if hw < values.len() as i64 => Err(format!("high watermark {hw}")),
            other => other,
        },
    );
    let recovered = c.log_lines(victim, "truncated invalid bytes");
    say(&format!(
        "node {victim} killed with batch {torn} torn; node {} led meanwhile; back as leader at \
         epoch {}: serves {} records, high watermark {}; recovery log: {recovered:?}",
        after.leader,
        back.leader_epoch,
        served.0.len(),
        served.1
    ));
    assert_eq!(
        served.0, values,
        "node {victim} serves exactly the acknowledged records"
    );
    assert_eq!(
        served.1,
        values.len() as i64,
        "high watermark on node {victim}"
    );
    c.await_identical_replicas(&topic, 0, &s.replicas, ISR_WAIT);
}

/// Two replicas, replication cut between them, and three leaders in turn each taking writes
/// the other never sees (unclean election makes the cut-off replica leader when the last ISR
/// member dies). In the end the leader `y` has epochs [e1, e2, e4] and the follower `x` has
/// [e1, e3]: asked about e3, `y` answers e2, which `x` never had. `x` must truncate to its own
/// end of e1 (not to `min(leader end, own end)`, which is its log end and changes nothing),
/// ask again, converge on `y`'s log and rejoin the ISR after a bounded number of truncations.
#[test]
fn follower_with_epochs_the_leader_never_had_converges_and_rejoins_the_isr() {
    let _turn = serial();
    let mut c = Cluster::start(
        3,
        &[
            ("unclean.leader.election.enable", "true"),
            // Only fencing (the kills) changes the ISR, never lag.
            ("replica.lag.time.max.ms", "120000"),
            ("auto.leader.rebalance.enable", "false"),
        ],
    );
    let topic = unique_topic("diverge");
    c.create_topic(&topic, 1, 2, &[("min.insync.replicas", "1")]);
    let s = c.await_partition(&topic, 0, "both replicas in the ISR", ISR_WAIT, |s| {
        s.leader > 0 && s.isr.len() == 2
    });
    let x = s.leader;
    let y = s.followers()[0];
    let lead = |c: &Cluster, id: i32| {
        c.await_partition(&topic, 0, &format!("node {id} leads"), FAILOVER_WAIT, |s| {
            s.leader == id
        })
    };
    let base = batch_values("base", 3);
    produce_batches(&c, x, &topic, &base);
    c.await_identical_replicas(&topic, 0, &[x, y], ISR_WAIT);
    c.isolate_replication(x);
    c.isolate_replication(y);

    // e2: y leads and writes what x never gets.
    c.kill(x);
    let e2 = lead(&c, y).leader_epoch;
    let d2 = batch_values("y-e2", 3);
    produce_batches(&c, y, &topic, &d2);
    c.start_node(x);
    c.isolate_replication(x);
    // e3: y dies, the only ISR member; x is elected uncleanly and writes what y never gets.
    c.kill(y);
    let e3 = lead(&c, x).leader_epoch;
    produce_batches(&c, x, &topic, &batch_values("x-e3", 3));
    c.start_node(y);
    c.isolate_replication(y);
    // e4: x dies; y is elected uncleanly and writes on top of its e2 data.
    c.kill(x);
    let e4 = lead(&c, y).leader_epoch;
    let d4 = batch_values("y-e4", 2);
    produce_batches(&c, y, &topic, &d4);
    c.start_node(x);
    c.log_line(x, "harness: replication links heal now");
    c.fault_clear(y);

    let isr = c.await_partition(&topic, 0, "x back in the ISR", ISR_WAIT, |s| {
        s.leader == y && s.isr.len() == 2
    });
    let log = c.await_identical_replicas(&topic, 0, &[x, y], ISR_WAIT);
    let text = c.log_lines(x, "");
    let healed = text
        .iter()
        .rposition(|l| l.contains("replication links heal now"))
        .expect("the harness line is in node x's log");
    let truncations: Vec<&String> = text[healed..]
        .iter()
        .filter(|l| l.contains("truncating to the leader's log"))
        .collect();
    say(&format!(
        "epochs e2={e2} (y) e3={e3} (x) e4={e4} (y); node {x} rejoined the ISR {:?} at leader \
         epoch {} after {} truncations: {truncations:#?}; {} batches on both",
        isr.isr,
        isr.leader_epoch,
        truncations.len(),
        log.len()
    ));
    assert!(
        !truncations.is_empty() && truncations.len() <= 3,
        "node {x} truncates a bounded number of times, got {}",
        truncations.len()
    );
    let want: Vec<String> = base.iter().chain(&d2).chain(&d4).cloned().collect();
    let (served, hw) =
        poll_until_ok(
            "the leader serves every record",
            FAILOVER_WAIT,
            || match served_values(&c, y, &topic) {
                Ok((_, hw)) if hw < want.len() as i64 => Err(format!("high watermark {hw}")),
                other => other,
            },
        );
    assert_eq!((served, hw), (want.clone(), want.len() as i64));
}

/// The offset `replication-offset-checkpoint` in node `id`'s log directory holds for
/// `topic`-0, if the file exists and lists it (Kafka's text format: version, count, then
/// `topic partition offset` lines).
fn checkpointed_high_watermark(c: &Cluster, id: i32, topic: &str) -> Option<i64> {
    let text =
        std::fs::read_to_string(c.data_dir(id).join("replication-offset-checkpoint")).ok()?;
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("0"), "checkpoint version line: {text:?}");
    let count: usize = lines.next()?.parse().expect("checkpoint count line");
    let entries: Vec<&str> = lines.collect();
    assert_eq!(entries.len(), count, "checkpoint entries: {text:?}");
    entries
        .iter()
        .find_map(|l| match l.split(' ').collect::<Vec<_>>()[..] {
            [t, "0", hw] if t == topic => hw.parse().ok(),
            _ => None,
        })
}

/// A replica SIGKILLed and restarted takes its high watermark from the checkpoint, so when it
/// is elected before any follower has fetched from it, clients read the committed records at
/// once. Without the checkpoint it starts at the log start offset and, with no follower to
/// raise it (the other replica is down, the ISR below min.insync.replicas), serves nothing.
///
/// With ELR (KIP-966) the dead first leader stays eligible (it left the ISR below min ISR), so
/// the restarted replica, out of the ELR after its crash, can only lead before that one is back
/// through an unclean election: the topic enables it.
#[test]
fn restarted_replica_serves_up_to_its_checkpointed_high_watermark() {
    let _turn = serial();
    let mut c = Cluster::start(
        3,
        &[
            ("replica.high.watermark.checkpoint.interval.ms", "200"),
            ("auto.leader.rebalance.enable", "false"),
        ],
    );
    let topic = unique_topic("hwckpt");
    c.create_topic(
        &topic,
        1,
        2,
        &[
            ("min.insync.replicas", "2"),
            ("unclean.leader.election.enable", "true"),
        ],
    );
    let s = c.await_partition(&topic, 0, "both replicas in the ISR", ISR_WAIT, |s| {
        s.leader > 0 && s.isr.len() == 2
    });
    let (leader, x) = (s.leader, s.followers()[0]);
    let values = batch_values("committed", 5);
    produce_batches(&c, leader, &topic, &values);
    poll_until_ok(
        &format!("node {x} checkpoints high watermark {}", values.len()),
        ISR_WAIT,
        || match checkpointed_high_watermark(&c, x, &topic) {
            Some(hw) if hw == values.len() as i64 => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    c.kill(leader);
    let first = c.await_partition(&topic, 0, &format!("node {x} leads"), FAILOVER_WAIT, |s| {
        s.leader == x
    });
    c.kill(x);
    c.start_node(x);
    // A later epoch: the state from before its death also names it as leader.
    let after = c.await_partition(
        &topic,
        0,
        &format!("node {x} leads again"),
        FAILOVER_WAIT,
        |s| s.leader == x && s.leader_epoch > first.leader_epoch,
    );
    let (served, hw) = poll_until_ok(
        &format!("node {x} serves {} records after its restart", values.len()),
        FAILOVER_WAIT,
        || match served_values(&c, x, &topic) {
            Ok((_, hw)) if hw < values.len() as i64 => Err(format!("high watermark {hw}")),
            other => other,
        },
    );
    say(&format!(
        "node {x} restarted after SIGKILL, leader at epoch {} with ISR {:?}: high watermark {hw}, \
         {} records served",
        after.leader_epoch,
        after.isr,
        served.len()
    ));
    assert_eq!(served, values);
}

/// SIGTERM starts a controlled shutdown: the leader's heartbeat asks to shut down, the
/// controller moves its leaderships to other ISR members, and only then does it close its
/// logs and exit. With a 60 s session timeout, a new leader within 20 s of the exit can only
/// come from that hand-over (without it the partition waits for the dead leader's fencing).
#[test]
fn sigterm_hands_leadership_over_before_the_leader_exits() {
    const HANDOVER_WAIT: Duration = Duration::from_secs(20);
    let _turn = serial();
    let mut c = Cluster::start(
        3,
        &[
            ("broker.session.timeout.ms", "60000"),
            ("auto.leader.rebalance.enable", "false"),
        ],
    );
    let topic = unique_topic("ctlshut");
    c.create_topic(&topic, 1, 3, &[("min.insync.replicas", "2")]);
    let s = c.await_partition(&topic, 0, "every replica in the ISR", ISR_WAIT, |s| {
        s.leader > 0 && s.isr.len() == 3
    });
    let old = s.leader;
    let values = batch_values("before-term", 3);
    produce_batches(&c, old, &topic, &values);
    let status = c.stop(old);
    assert!(
        status.success(),
        "node {old} exits cleanly after SIGTERM: {status}"
    );
    let handed = c.log_lines(old, "controlled shutdown");
    let after = c.await_partition(
        &topic,
        0,
        &format!("a live leader other than node {old}"),
        HANDOVER_WAIT,
        |s| s.leader > 0 && s.leader != old && c.is_up(s.leader),
    );
    let (served, hw) = poll_until_ok(
        &format!("node {} serves the records", after.leader),
        FAILOVER_WAIT,
        || match served_values(&c, after.leader, &topic) {
            Ok((_, hw)) if hw < values.len() as i64 => Err(format!("high watermark {hw}")),
            other => other,
        },
    );
    say(&format!(
        "node {old} SIGTERMed: {handed:?}; node {} leads at epoch {} with ISR {:?}, high \
         watermark {hw}",
        after.leader, after.leader_epoch, after.isr
    ));
    assert_eq!(served, values);
}

/// The end of `epoch` as node `id` answers OffsetForLeaderEpoch v4 for partition 0, asked as a
/// consumer (replica id -1, current leader epoch unknown): (error, epoch, end offset).
fn epoch_end_at(c: &Cluster, id: i32, topic: &str, epoch: i32) -> (i16, i32, i64) {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{BrokerId, OffsetForLeaderEpochRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let req = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(epoch)])]);
    let mut wire = WireClient::connect(&c.address(id));
    let resp = wire.request(4, &req);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}

/// Consumers detect a truncated log with OffsetForLeaderEpoch (KIP-320): asked about an epoch
/// that is not the latest, the leader answers where that epoch ends, from its leader epoch
/// cache, and a follower answers NOT_LEADER_OR_FOLLOWER (Kafka's
/// `Partition.lastOffsetForLeaderEpoch`). Answering the current epoch and the log end for every
/// epoch, on any replica, sent librdkafka consumers back to offset 0 after leader changes (the
/// chaos checker's nonmonotonic-poll).
#[test]
fn offset_for_leader_epoch_answers_where_each_epoch_ends_at_the_leader_only() {
    let _turn = serial();
    let mut c = Cluster::start(3, &[("auto.leader.rebalance.enable", "false")]);
    let topic = unique_topic("epochs");
    c.create_topic(&topic, 1, 3, &[("min.insync.replicas", "2")]);
    let first = c.await_partition(&topic, 0, "all three in the ISR", ISR_WAIT, |s| {
        s.leader > 0 && s.isr.len() == 3
    });
    produce_batches(&c, first.leader, &topic, &batch_values("first", 3));
    c.await_identical_replicas(&topic, 0, &first.replicas, ISR_WAIT);
    c.kill(first.leader);
    let second = c.await_leader_other_than(&topic, 0, first.leader, FAILOVER_WAIT);
    produce_batches(&c, second.leader, &topic, &batch_values("second", 2));
    let follower = *first
        .replicas
        .iter()
        .find(|r| **r != first.leader && **r != second.leader)
        .expect("a third replica");

    let old = epoch_end_at(&c, second.leader, &topic, first.leader_epoch);
    let latest = epoch_end_at(&c, second.leader, &topic, second.leader_epoch);
    let at_follower = epoch_end_at(&c, follower, &topic, second.leader_epoch);
    say(&format!(
        "epochs {} then {}: leader answers {old:?} and {latest:?}; follower {at_follower:?}",
        first.leader_epoch, second.leader_epoch
    ));
    assert_eq!(
        old,
        (0, first.leader_epoch, 3),
        "the first epoch ends where the second starts"
    );
    assert_eq!(
        latest,
        (0, second.leader_epoch, 5),
        "the latest epoch ends at the log end"
    );
    assert_eq!(
        at_follower.0,
        kafka_protocol::ResponseError::NotLeaderOrFollower.code(),
        "a follower does not answer consumers"
    );
}

/// A cluster node serves clients only once the metadata quorum has registered and unfenced
/// it (Kafka's `BrokerServer.startup` opens the listeners last). Before, a restarted node
/// answered requests while it had not yet learnt its partitions: a Produce got
/// UNKNOWN_TOPIC_OR_PARTITION, which librdkafka takes as "not written" and, for the batches
/// after it, as skipped sequence numbers; it then bumps the epoch and re-sends batches of
/// other partitions that were written, under the new epoch, as duplicates. Here node 3 is
/// started alone, with no quorum to register with: its controller runs, its client port
/// stays closed. With a second voter back, it registers, and its first answers know the
/// topic.
#[test]
fn a_node_serves_clients_only_once_registered_and_unfenced() {
    let _turn = serial();
    let mut c = Cluster::start(3, &[]);
    let topic = unique_topic("serve-gate");
    c.create_topic(&topic, 1, 3, &[]);
    let s = c.await_partition(&topic, 0, "every replica in the ISR", ISR_WAIT, |s| {
        s.isr.len() == 3
    });
    let values = batch_values("gate", 3);
    produce_batches(&c, s.leader, &topic, &values);
    for id in c.ids() {
        c.kill(id);
    }

    let quorum_lines = c.log_lines(3, "metadata quorum").len();
    c.spawn_node(3);
    poll_until_ok("node 3's controller runs", FAILOVER_WAIT, || {
        match c.log_lines(3, "metadata quorum").len() > quorum_lines {
            true => Ok(()),
            false => Err("no quorum line yet".into()),
        }
    });
    // Alone it cannot be registered: its client port must refuse connections.
    let connect = std::net::TcpStream::connect(c.address(3));
    say(&format!(
        "node 3 started alone; its controller runs; connecting to its client port: {connect:?}"
    ));
    match connect {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
        other => panic!(
            "node 3 has not been registered (no quorum), yet its client port answered: {other:?}"
        ),
    }

    c.spawn_node(2);
    c.await_node_ready(3);
    c.await_node_ready(2);
    // The first answers of a node that serves know the topic and its leader.
    let md = c.metadata(3, &[&topic]).expect("Metadata from node 3");
    let t = &md.topics[0];
    let leader = t.partitions.first().map(|p| p.leader_id.0);
    say(&format!(
        "node 3 serves: Metadata error {}, leader {leader:?}",
        t.error_code
    ));
    assert_eq!(
        t.error_code,
        errors::NONE,
        "topic error on node 3's first Metadata"
    );
    // Node 1 may still be named: it stays unfenced for a session timeout after the new
    // controller starts, as in Kafka.
    assert!(
        matches!(leader, Some(1..=3)),
        "node 3's first Metadata names the partition's leader: {leader:?}"
    );
    let code = c.produce_acks1(3, &topic, 0);
    assert_ne!(
        code,
        errors::UNKNOWN_TOPIC_OR_PARTITION,
        "node 3's first Produce knows the partition"
    );
}
