//! The bounded chaos runs CI makes on every change, each against a fresh 3-node
//! `brook cluster` (`$BROOK_BIN`, else `target/debug/brook`), one at a time.
//!
//! - acks=all, idempotence, min.insync.replicas=2, RF=3: seed 4's ten steps (eight leader
//!   deaths: kills under load, kills while an ISR expansion is pending, crash points; a pause
//!   and a replication delay), then every anomaly is a failure. About two minutes.
//! - acks=1 (idempotence off: librdkafka refuses it without acks=all): three leader kills
//!   while the followers trail by 700 ms; the lost writes Kafka allows there must show up,
//!   named as expected, and no anomaly it does not allow. About 40 s.
//! - the transactional workload (`--workload txn`, read_committed consumers, two members of a
//!   consumer group committing offsets): two leader kills (one while followers trail by
//!   300 ms), a pause of a leader and a crash point, then the transaction coordinator killed
//!   with an EndTxn in flight and the group coordinator stopped (SIGTERM) during a rebalance,
//!   under transactions that commit or abort; no aborted or uncommitted read, no lost or
//!   partial commit, no lost offset commit, nothing else either. About a minute.
//! - the same transactional workload over SASL_SSL (`BrookCluster::start_secure`: SCRAM-SHA-512
//!   for the clients and between brokers, mutual TLS on the controller listener): a leader
//!   killed under load, then the transaction coordinator killed with an EndTxn in flight, so
//!   that replication, elections and marker delivery all go over the secured listeners.
//!   About 45 s.
//!
//! - the share workload (`--workload share`): three Java share consumers (Kafka 4.4's
//!   VerifiableShareConsumer, from `scripts/kafka-reference fetch`'s jars) accepting,
//!   releasing and rejecting records while a leader dies and then the share coordinator;
//!   no record accepted twice or released past the limit, none undelivered, the group
//!   drained. About 50 s.
//!
//! The JSON history and verdict of each run land in `target/tmp/`; the table is printed. A
//! failed run keeps the nodes' data and logs and says where (`Target::keep_data`, tested
//! last).
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use brook_chaos::history::{Op, Outcome, FINAL_READER};
use brook_chaos::report;
use brook_chaos::run::{run, RunConfig, RunOutput};
use brook_chaos::schedule::{KillSignal, Rebalance, Role, Step};
use brook_chaos::share;
use brook_chaos::target::{BrookCluster, Target};
use brook_chaos::workload::{ClientSettings, WorkloadKind};
use brook_protocol_tests::process::brook_bin;

/// One cluster at a time: the machine is small.
fn serial() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn config(seed: u64, steps: usize, acks: &str, idempotence: bool) -> RunConfig {
    config_of(WorkloadKind::Send, seed, steps, acks, idempotence)
}

fn config_of(
    workload: WorkloadKind,
    seed: u64,
    steps: usize,
    acks: &str,
    idempotence: bool,
) -> RunConfig {
    RunConfig {
        seed,
        steps,
        weights: Default::default(),
        schedule: None,
        clients: ClientSettings {
            workload,
            partitions: 3,
            producers: 2,
            consumers: 2,
            group_consumers: 0,
            share_consumers: 0,
            kafka_lib: Default::default(),
            rate: 100,
            acks: acks.into(),
            idempotence,
        },
        min_insync_replicas: 2,
        replication_factor: 3,
        replica_lag_ms: 3000,
        settle_secs: 60,
        time_limit_secs: None,
    }
}

fn run_on_brook(cfg: &RunConfig, name: &str) -> RunOutput {
    run_on(cfg, name, BrookCluster::start)
}

type Start = fn(&Path, usize, Option<PathBuf>, &[(String, String)]) -> Result<BrookCluster, String>;

fn run_on(cfg: &RunConfig, name: &str, start: Start) -> RunOutput {
    let _turn = serial();
    let mut cluster = start(&brook_bin(), 3, None, &cfg.broker_overrides())
        .unwrap_or_else(|e| panic!("start brook cluster: {e}"));
    let out = run(&mut cluster, cfg).unwrap_or_else(|e| panic!("chaos run: {e}"));
    if !out.verdict.ok {
        if let Some(dir) = cluster.keep_data() {
            eprintln!("the nodes' data and logs are kept in {}", dir.display());
        }
    }
    drop(cluster);
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.json"));
    report::write_json(&out, &path).expect("write the history");
    eprintln!(
        "{}history and verdict: {}\nreplay: {}",
        report::table(&out),
        path.display(),
        report::replay(&out)
    );
    out
}

/// Every acknowledged offset lies in a run of the final log's batch headers (what the checker
/// tells a client's re-send from a broker duplicate by), written by a producer id when the
/// producers are idempotent and by none (-1) when they are not.
fn assert_runs_cover_the_acknowledged_offsets(out: &RunOutput, idempotent: bool) {
    let runs: Vec<(i32, i64, i64, i64)> = out
        .history
        .iter()
        .filter_map(|op| match op {
            Op::ProducerRun {
                partition,
                first_offset,
                last_offset,
                producer_id,
                ..
            } => Some((*partition, *first_offset, *last_offset, *producer_id)),
            _ => None,
        })
        .collect();
    let mut checked = 0;
    for op in &out.history {
        let Op::Send {
            partition,
            outcome: Outcome::Ok { offset },
            value,
            ..
        } = op
        else {
            continue;
        };
        if *offset < 0 {
            continue;
        }
        let run = runs
            .iter()
            .find(|r| r.0 == *partition && (r.1..=r.2).contains(offset));
        let Some(run) = run else {
            panic!("{value} at {partition}/{offset}: in no producer run of {runs:?}");
        };
        assert_eq!(
            run.3 >= 0,
            idempotent,
            "{value} at {partition}/{offset} in {run:?}"
        );
        checked += 1;
    }
    assert!(checked > 0, "no acknowledged send to check");
}

#[test]
fn acks_all_with_idempotence_loses_duplicates_and_reorders_nothing_under_the_nemesis() {
    let cfg = config(4, 10, "all", true);
    let out = run_on_brook(&cfg, "brook-chaos-ci-acks-all");
    assert!(
        out.nemesis.leader_kills >= 5,
        "the schedule must kill leaders: {:?}",
        out.nemesis
    );
    assert!(
        out.acknowledged >= 1000,
        "{} acknowledged",
        out.acknowledged
    );
    assert!(
        out.verdict.ok,
        "acks=all, idempotence, min.insync.replicas=2, RF=3 promise no anomaly: {:?}\n{}",
        out.verdict,
        report::table(&out)
    );
    assert_runs_cover_the_acknowledged_offsets(&out, true);
}

#[test]
fn acks_one_loses_acknowledged_writes_when_the_leader_dies_and_says_kafka_allows_it() {
    let mut cfg = config(0, 3, "1", false);
    cfg.schedule = Some(
        (0..3)
            .map(|partition| Step::KillLeader {
                partition,
                lag_ms: Some(700),
                down_ms: 1000,
            })
            .collect(),
    );
    let out = run_on_brook(&cfg, "brook-chaos-ci-acks-1");
    assert_eq!(out.nemesis.leader_kills, 3, "{:?}", out.nemesis);
    assert!(
        out.verdict
            .expected
            .get("lost-write")
            .is_some_and(|n| *n > 0),
        "leaders killed while followers trail by 700 ms lose acks=1 writes: {:?}\n{}",
        out.verdict,
        report::table(&out)
    );
    assert!(
        out.verdict.ok,
        "acks=1 without idempotence allows lost writes, duplicates and reorders, nothing else: {:?}\n{}",
        out.verdict,
        report::table(&out)
    );
    assert_runs_cover_the_acknowledged_offsets(&out, false);
}

#[test]
fn transactions_show_no_aborted_uncommitted_lost_or_partial_data_under_the_nemesis() {
    let mut cfg = config_of(WorkloadKind::Txn, 11, 4, "all", true);
    cfg.clients.producers = 3;
    cfg.schedule = Some(vec![
        Step::KillLeader {
            partition: 0,
            lag_ms: None,
            down_ms: 1000,
        },
        Step::Pause {
            partition: 1,
            role: Role::Leader,
            pause_ms: 1500,
        },
        Step::KillLeader {
            partition: 1,
            lag_ms: Some(300),
            down_ms: 1000,
        },
        Step::CrashPoint {
            partition: 2,
            point: "after-leader-append".into(),
        },
        // The transaction coordinator dies at txn-after-prepare-before-markers: an EndTxn in
        // flight, PrepareCommit written, no marker yet.
        Step::KillTxnCoordinator {
            signal: KillSignal::Kill,
            down_ms: 0,
        },
        // The group coordinator shuts down between a JoinGroup and the SyncGroup.
        Step::KillGroupCoordinator {
            signal: KillSignal::Term,
            rebalance: Rebalance::Join,
            down_ms: 0,
        },
    ]);
    cfg.clients.group_consumers = 2;
    let out = run_on_brook(&cfg, "brook-chaos-ci-txn");
    assert!(
        out.nemesis.leader_kills >= 2,
        "the schedule must kill leaders: {:?}",
        out.nemesis
    );
    assert_eq!(
        (
            out.nemesis.txn_coordinator_kills,
            out.nemesis.group_coordinator_kills
        ),
        (1, 1),
        "one coordinator of each kind killed: {:?}",
        out.nemesis
    );
    let (commits, starts) = out.history.iter().fold((0, 0), |(c, s), op| match op {
        Op::OffsetCommit { error: None, .. } => (c + 1, s),
        Op::GroupStart { .. } => (c, s + 1),
        _ => (c, s),
    });
    assert!(
        commits >= 20 && starts >= 3,
        "the group consumers committed {commits} offsets and started {starts} times"
    );
    assert!(
        out.txns_committed >= 50 && out.txns_aborted >= 10,
        "{} committed, {} aborted transactions",
        out.txns_committed,
        out.txns_aborted
    );
    let finally_read = out
        .history
        .iter()
        .filter(|op| matches!(op, Op::Poll { process, .. } if process == FINAL_READER))
        .count();
    assert_eq!(finally_read, 3, "the final read covers every partition");
    assert!(
        out.verdict.ok,
        "transactions at acks=all with read_committed consumers promise no anomaly: {:?}\n{}",
        out.verdict,
        report::table(&out)
    );
}

/// Over SASL_SSL every node talks to the others through the secured listeners: the replica
/// fetchers and WriteTxnMarkers log in with SCRAM over TLS, the quorum uses mutual TLS, and the
/// checker's clients (librdkafka and its own wire connections) use the settings the cluster
/// writes. A leader kill and a transaction coordinator kill must lose, duplicate or tear
/// nothing, as in PLAINTEXT.
#[test]
fn transactions_over_sasl_ssl_survive_a_leader_and_a_coordinator_kill() {
    let mut cfg = config_of(WorkloadKind::Txn, 29, 2, "all", true);
    cfg.schedule = Some(vec![
        Step::KillLeader {
            partition: 0,
            lag_ms: None,
            down_ms: 1000,
        },
        Step::KillTxnCoordinator {
            signal: KillSignal::Kill,
            down_ms: 0,
        },
    ]);
    let out = run_on(&cfg, "brook-chaos-ci-sasl-ssl", BrookCluster::start_secure);
    assert_eq!(out.security_protocol, "sasl_ssl");
    assert_eq!(
        (out.nemesis.leader_kills, out.nemesis.txn_coordinator_kills),
        (1, 1),
        "a leader and a transaction coordinator killed: {:?}",
        out.nemesis
    );
    assert!(
        out.txns_committed >= 20 && out.txns_aborted >= 3,
        "{} committed, {} aborted transactions",
        out.txns_committed,
        out.txns_aborted
    );
    let finally_read = out
        .history
        .iter()
        .filter(|op| matches!(op, Op::Poll { process, .. } if process == FINAL_READER))
        .count();
    assert_eq!(finally_read, 3, "the final read covers every partition");
    assert!(
        out.verdict.ok,
        "transactions at acks=all over SASL_SSL promise no anomaly: {:?}\n{}",
        out.verdict,
        report::table(&out)
    );
}

/// The Kafka 4.4 jars the share consumers run from: `$KAFKA_REFERENCE_LIB`, else where
/// `scripts/kafka-reference fetch` puts them. Missing jars fail the run with that cause.
fn kafka_lib() -> PathBuf {
    std::env::var_os("KAFKA_REFERENCE_LIB").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/kafka-reference/lib"),
        PathBuf::from,
    )
}

/// Three Java share consumers (Kafka's VerifiableShareConsumer) in one share group accept,
/// release and reject records while a partition leader is killed and then the share
/// coordinator of another partition's share-partition: no accepted record may be
/// acknowledged again, none released past the delivery count limit, every acknowledged send
/// must be delivered and the group drained to lag 0 afterwards.
#[test]
fn share_consumers_lose_and_reaccept_nothing_when_leaders_and_the_share_coordinator_die() {
    let mut cfg = config_of(WorkloadKind::Share, 31, 2, "all", true);
    cfg.clients.consumers = 1;
    cfg.clients.rate = 50;
    cfg.clients.share_consumers = 3;
    cfg.clients.kafka_lib = kafka_lib();
    cfg.schedule = Some(vec![
        Step::KillLeader {
            partition: 0,
            lag_ms: None,
            down_ms: 500,
        },
        Step::KillShareCoordinator {
            signal: KillSignal::Kill,
            partition: 1,
            down_ms: 0,
        },
    ]);
    let out = run_on_brook(&cfg, "brook-chaos-ci-share");
    assert_eq!(
        (
            out.nemesis.leader_kills,
            out.nemesis.share_coordinator_kills
        ),
        (1, 1),
        "a leader and a share coordinator killed: {:?}",
        out.nemesis
    );
    let t = share::totals(&out.history);
    assert!(
        t.deliveries >= out.acknowledged && t.acked >= 500,
        "{t:?} for {} sends",
        out.acknowledged
    );
    assert_eq!(t.drained, 3, "every partition drained to lag 0: {t:?}");
    assert!(
        out.verdict.ok,
        "share consumers under leader and share coordinator kills promise no anomaly: {:?}\n{}",
        out.verdict,
        report::table(&out)
    );
}

/// A failed run keeps the nodes' data and logs (they are its evidence); otherwise the temp
/// directory goes with the cluster.
#[test]
fn a_kept_data_directory_outlives_the_cluster() {
    let _turn = serial();
    let mut cluster = BrookCluster::start(&brook_bin(), 3, None, &[])
        .unwrap_or_else(|e| panic!("start brook cluster: {e}"));
    let kept = cluster
        .keep_data()
        .expect("a started cluster has a temp data dir");
    assert!(cluster.keep_data().is_none(), "kept once");
    drop(cluster);
    let log = kept.join("node-1.log");
    let text = std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("{} after the cluster stopped: {e}", log.display()));
    assert!(!text.is_empty(), "node 1 logged nothing");
    std::fs::remove_dir_all(&kept).expect("remove the kept dir");
}
