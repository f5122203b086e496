//! Log compaction against real `brook serve` processes (Kafka's `LogCleaner`).
//!
//! - A `cleanup.policy=compact` topic with 1 MiB segments takes many updates of few keys; once
//!   the cleaner's checkpoint (`cleaner-offset-checkpoint` in the log directory) passes the
//!   last update, a Fetch from offset 0 returns one record per key, its latest value, at the
//!   offset its produce answer gave.
//! - A crash mid-clean (crash points `cleaner-after-cleaned` and `cleaner-after-swap`) leaves a
//!   whole log after the restart: every key's latest value at its offset, offsets increasing,
//!   no `.cleaned` or `.swap` file left.
//! - `__consumer_offsets` stays bounded under many commits of one group and partition, and a
//!   restarted coordinator still reads the last commit back from the compacted partition.
//!
//! Every wait is bounded and waits for an event (a checkpoint entry, an exit, a size), not a
//! sleep. Lines starting `[compaction]` say what a scenario observed.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use brook_protocol_tests::batch::{encode_batch, ParsedBatch, Producer, Rec};
use brook_protocol_tests::wire::*;
use brook_protocol_tests::{unique_topic, Broker, WireClient};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse,
};
use kafka_protocol::protocol::StrBytes;

/// Brook's (and Kafka's) smallest `segment.bytes`.
const SEGMENT_BYTES: usize = 1024 * 1024;
const KEYS: usize = 8;
const VALUE_BYTES: usize = 1000;
const WAIT: Duration = Duration::from_secs(90);
const COMMIT_V: i16 = 8;
const INCREMENTAL_ALTER_CONFIGS_V: i16 = 1;
const OFFSET_FETCH_V: i16 = 7;
/// Commits sent before their answers are read.
const COMMIT_PIPELINE_DEPTH: usize = 64;

fn say(msg: &str) {
    println!("[compaction] {msg}");
}

fn start(extra: &[(&str, &str)]) -> Broker {
    let mut overrides = vec![("log.cleaner.backoff.ms", "100")];
    overrides.extend_from_slice(extra);
    Broker::start_with(&overrides)
}

/// Creates `topic` compacted, with 1 MiB segments and `extra` configs.
fn create_compacted(c: &mut WireClient, topic: &str, extra: &[(&str, &str)]) {
    let seg = SEGMENT_BYTES.to_string();
    let mut configs = vec![
        ("cleanup.policy", "compact"),
        ("segment.bytes", seg.as_str()),
    ];
    configs.extend_from_slice(extra);
    let req = WireClient::create_topics_request(topic, 1, 1, &configs, Duration::from_secs(10));
    let resp = c.request(CREATE_TOPICS_V, &req);
    assert_eq!(
        resp.topics[0].error_code, 0,
        "CreateTopics {topic}: {resp:?}"
    );
}

/// Produces `rounds` updates of every key (one batch per round), then filler records of
/// another key until the last round is out of the active segment. Returns each key's last
/// (offset, value) and the log end offset.
fn produce_updates(
    c: &mut WireClient,
    topic: &str,
    rounds: usize,
) -> (BTreeMap<String, (i64, String)>, i64) {
    let mut latest = BTreeMap::new();
    let mut end = 0;
    for round in 0..rounds {
        let recs: Vec<Rec> = (0..KEYS)
            .map(|k| {
                let value = format!("{round}-{k}-{}", "v".repeat(VALUE_BYTES));
                Rec::kv(&format!("key-{k}"), &value, 1_000 + round as i64)
            })
            .collect();
        let p = c.produce(topic, 0, encode_batch(Producer::NONE, &recs));
        assert_eq!(p.error_code, 0, "produce round {round}: {p:?}");
        for (i, r) in recs.iter().enumerate() {
            let key = String::from_utf8(r.key.clone().unwrap()).unwrap();
            let value = String::from_utf8(r.value.clone().unwrap()).unwrap();
            latest.insert(key, (p.base_offset + i as i64, value));
        }
        end = p.base_offset + KEYS as i64;
    }
    let filler_rounds = SEGMENT_BYTES / (KEYS * VALUE_BYTES) + 2;
    for round in 0..filler_rounds {
        let recs: Vec<Rec> = (0..KEYS)
            .map(|_| Rec::kv("filler", &"f".repeat(VALUE_BYTES), 5_000 + round as i64))
            .collect();
        let p = c.produce(topic, 0, encode_batch(Producer::NONE, &recs));
        assert_eq!(p.error_code, 0, "filler: {p:?}");
    }
    (latest, end)
}

/// The cleaner's checkpointed first dirty offset of `topic`-0, if any.
fn cleaner_checkpoint(data_dir: &Path, topic: &str) -> Option<i64> {
    let text = std::fs::read_to_string(data_dir.join("cleaner-offset-checkpoint")).ok()?;
    text.lines().skip(2).find_map(|line| {
        let mut f = line.split_whitespace();
        (f.next() == Some(topic) && f.next() == Some("0")).then(|| f.next()?.parse().ok())?
    })
}

fn wait_for_checkpoint(b: &Broker, topic: &str, at_least: i64) {
    let deadline = Instant::now() + WAIT;
    while cleaner_checkpoint(&b.data_dir(), topic).is_none_or(|o| o < at_least) {
        assert!(
            Instant::now() < deadline,
            "the cleaner never checkpointed {topic} past {at_least}: {:?}\n{}",
            cleaner_checkpoint(&b.data_dir(), topic),
            b.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every record of the partition: (offset, key, value).
fn all_records(batches: &[ParsedBatch]) -> Vec<(i64, String, String)> {
    batches
        .iter()
        .flat_map(|b| b.records.iter())
        .map(|r| {
            let text = |x: &Option<Vec<u8>>| {
                String::from_utf8_lossy(x.as_deref().unwrap_or_default()).into_owned()
            };
            (r.offset, text(&r.key), text(&r.value))
        })
        .collect()
}

/// Each key's latest value is readable at its original offset, once; offsets increase.
fn assert_latest_per_key(recs: &[(i64, String, String)], latest: &BTreeMap<String, (i64, String)>) {
    let offsets: Vec<i64> = recs.iter().map(|r| r.0).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "offsets must increase"
    );
    for (key, (offset, value)) in latest {
        let found: Vec<_> = recs.iter().filter(|r| &r.1 == key).collect();
        let last = found.last().unwrap_or_else(|| panic!("{key} is gone"));
        assert_eq!(
            (last.0, &last.2),
            (*offset, value),
            "{key}'s latest value at its offset"
        );
    }
}

#[test]
fn a_compacted_topic_keeps_the_latest_value_per_key_at_its_offset() {
    let b = start(&[]);
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("compact");
    create_compacted(&mut c, &topic, &[]);
    let rounds = 3 * SEGMENT_BYTES / (KEYS * VALUE_BYTES);
    let (latest, end) = produce_updates(&mut c, &topic, rounds);
    let started = Instant::now();
    wait_for_checkpoint(&b, &topic, end);
    let recs = all_records(&c.fetch_all(&topic, 0));
    let below: Vec<_> = recs.iter().filter(|r| r.0 < end).collect();
    say(&format!(
        "{} updates of {KEYS} keys: {} records below offset {end} after the clean ({:?} after the last produce), {} in all",
        rounds * KEYS,
        below.len(),
        started.elapsed(),
        recs.len()
    ));
    assert_eq!(below.len(), KEYS, "one record per key below {end}");
    assert_latest_per_key(&recs, &latest);
}

#[test]
fn a_crash_mid_clean_leaves_a_whole_log_after_restart() {
    for point in ["cleaner-after-cleaned", "cleaner-after-swap"] {
        let mut b = start(&[("admin.listener", "127.0.0.1:0")]);
        let mut c = WireClient::connect(&b.bootstrap());
        let topic = unique_topic("compact-crash");
        // No clean until every update is written and the crash rule is in: a dirty ratio
        // is never above 1.
        create_compacted(&mut c, &topic, &[("min.cleanable.dirty.ratio", "1")]);
        let (latest, _) = produce_updates(&mut c, &topic, 2 * SEGMENT_BYTES / (KEYS * VALUE_BYTES));
        b.add_crash_rule(point, Some(&topic));
        alter_topic_config(&mut c, &topic, "min.cleanable.dirty.ratio", "0.5");
        let status = b.await_exit(WAIT);
        assert!(status.is_some(), "no crash at {point}:\n{}", b.log_tail(30));
        // Restarted without the cleaner, the log is what recovery made of the crash.
        b.set_override("log.cleaner.enable", "false");
        b.start_again();
        let dir = b.data_dir().join(format!("{topic}-0"));
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
            .collect();
        assert!(left.is_empty(), "after {point}: {left:?}");
        let mut c = WireClient::connect(&b.bootstrap());
        let recs = all_records(&c.fetch_all(&topic, 0));
        say(&format!(
            "crash at {point}: {} records after the restart",
            recs.len()
        ));
        assert_latest_per_key(&recs, &latest);
        let dense = recs.last().map_or(0, |r| r.0 + 1) == recs.len() as i64;
        match point {
            "cleaner-after-cleaned" => assert!(dense, "the old segments stay whole"),
            _ => assert!(
                !dense,
                "the .swap took the place of the segments it cleaned"
            ),
        }
    }
}

fn alter_topic_config(c: &mut WireClient, topic: &str, key: &str, value: &str) {
    let s = |v: &str| StrBytes::from_string(v.to_string());
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(vec![AlterableConfig::default()
                .with_name(s(key))
                .with_config_operation(0)
                .with_value(Some(s(value)))]),
    ]);
    let resp = c.request(INCREMENTAL_ALTER_CONFIGS_V, &req);
    assert_eq!(resp.responses[0].error_code, 0, "{resp:?}");
}

fn commit(c: &mut WireClient, group: &str, topic: &str, offset: i64, metadata: &str) -> i32 {
    let s = |v: &str| StrBytes::from_string(v.to_string());
    let req = OffsetCommitRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(""))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(s(topic).into())
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_metadata(Some(s(metadata)))])]);
    c.send(COMMIT_V, &req)
}

/// Bytes of the `.log` files of a partition directory.
fn log_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn consumer_offsets_stays_bounded_under_repeated_commits() {
    let mut b = start(&[
        ("offsets.topic.num.partitions", "1"),
        ("offsets.topic.segment.bytes", "1048576"),
    ]);
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("committed");
    c.ensure_topic(&topic);
    let metadata = "m".repeat(200);
    const COMMITS: usize = 30_000;
    let dir = b.data_dir().join("__consumer_offsets-0");
    let id = commit(&mut c, "bounded-group", &topic, 0, &metadata);
    let r: OffsetCommitResponse = c.receive::<OffsetCommitRequest>(COMMIT_V, id);
    assert_eq!(r.topics[0].partitions[0].error_code, 0, "{r:?}");
    // One commit is one batch: this is what each of them adds before any clean.
    let commit_bytes = log_bytes(&dir);
    let mut in_flight = Vec::new();
    for i in 1..COMMITS {
        in_flight.push(commit(&mut c, "bounded-group", &topic, i as i64, &metadata));
        if in_flight.len() == COMMIT_PIPELINE_DEPTH || i + 1 == COMMITS {
            for id in in_flight.drain(..) {
                let r: OffsetCommitResponse = c.receive::<OffsetCommitRequest>(COMMIT_V, id);
                assert_eq!(r.topics[0].partitions[0].error_code, 0, "commit {i}: {r:?}");
            }
        }
    }
    let written = commit_bytes * COMMITS as u64;
    // Every commit is one record of about 300 bytes; what stays is the active segment and a
    // cleaned tail.
    let bound = 3 * SEGMENT_BYTES as u64;
    let deadline = Instant::now() + WAIT;
    let mut size = log_bytes(&dir);
    while size > bound {
        assert!(
            Instant::now() < deadline,
            "__consumer_offsets-0 stays at {size} bytes\n{}",
            b.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(100));
        size = log_bytes(&dir);
    }
    // The compacted partition still holds the last commit: a restarted coordinator reads it
    // back.
    b.restart();
    let mut c = WireClient::connect(&b.bootstrap());
    let s = |v: &str| StrBytes::from_string(v.to_string());
    let fetch = OffsetFetchRequest::default()
        .with_group_id(s("bounded-group").into())
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(s(&topic).into())
            .with_partition_indexes(vec![0])]));
    let r: OffsetFetchResponse = c.request(OFFSET_FETCH_V, &fetch);
    assert_eq!(
        r.topics[0].partitions[0].committed_offset,
        COMMITS as i64 - 1,
        "{r:?}"
    );
    say(&format!(
        "{COMMITS} commits of one group and partition: {written} bytes of batches ({commit_bytes} each); __consumer_offsets-0 holds {size} bytes of .log"
    ));
}
