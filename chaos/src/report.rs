//! Output: a short table for people, a JSON file (configuration, schedule, history, per
//! partition reports, verdict) for machines, and the command that replays the run.

use std::fmt::Write as _;
use std::path::Path;

use std::collections::BTreeMap;

use crate::checker::{check, Anomaly, PartitionReport};
use crate::history::Op;
use crate::run::RunOutput;
use crate::verdict::{judge, Guarantees, Verdict};
use crate::workload::WorkloadKind;

/// The table printed at the end of a run.
pub fn table(out: &RunOutput) -> String {
    let mut s = String::new();
    let n = &out.nemesis;
    let _ = writeln!(
        s,
        "brook chaos on {} ({}): seed {}, {} steps ({} leader kills, {} ISR cuts, {} crash points, {} pauses, {} link delays, {} mapped), {:.1} s",
        out.target,
        out.security_protocol,
        out.config.seed,
        n.steps,
        n.leader_kills,
        n.isr_cuts,
        n.crash_points,
        n.pauses,
        n.link_delays,
        n.mapped,
        out.wall_ms as f64 / 1000.0
    );
    let _ = writeln!(
        s,
        "sends: {} acknowledged, {} failed or unknown; producers replaced after a fatal error: {}; steps not settled: {}, skipped: {}",
        out.acknowledged, out.not_acknowledged, out.producers_replaced, n.unsettled, n.skipped
    );
    if n.txn_coordinator_kills + n.group_coordinator_kills + n.share_coordinator_kills > 0 {
        let _ = writeln!(
            s,
            "coordinators killed: {} transaction coordinators during an EndTxn, {} group coordinators during a rebalance, {} share coordinators during acknowledgements",
            n.txn_coordinator_kills, n.group_coordinator_kills, n.share_coordinator_kills
        );
    }
    if out.config.clients.workload == WorkloadKind::Share {
        s.push_str(&share_line(out));
    }
    if out.config.clients.group_consumers > 0 {
        let (mut acked, mut failed, mut starts) = (0, 0, 0);
        for op in &out.history {
            match op {
                Op::OffsetCommit { error: None, .. } => acked += 1,
                Op::OffsetCommit { .. } => failed += 1,
                Op::GroupStart { .. } => starts += 1,
                _ => {}
            }
        }
        let _ = writeln!(
            s,
            "group consumers: {acked} offset commits acknowledged, {failed} failed; {starts} starts after an assignment checked for lost-offset-commit"
        );
    }
    if out.config.clients.workload == WorkloadKind::Txn {
        let _ = writeln!(
            s,
            "transactions: {} committed, {} aborted, {} unknown (their records are the sends above)",
            out.txns_committed, out.txns_aborted, out.txns_unknown
        );
    }
    s.push_str(&anomalies_table(&out.partitions, &out.verdict));
    s
}

/// The share consumers' deliveries and acknowledgements, and the drain.
fn share_line(out: &RunOutput) -> String {
    let t = crate::share::totals(&out.history);
    format!(
        "share consumers ({} members, ack pattern {:?}): {} deliveries, {} acknowledgements succeeded, {} failed; {} of {} partitions drained (lag 0)\n",
        out.config.clients.share_consumers,
        crate::share::ACK_PATTERN,
        t.deliveries,
        t.acked,
        t.ack_failed,
        t.drained,
        out.config.clients.partitions
    )
}

/// The per-partition rows, the examples, the expected anomalies and the verdict.
/// The transactional anomalies get columns when the history has transactions, and
/// `duplicate-after-epoch-bump` when there are some.
pub fn anomalies_table(partitions: &BTreeMap<i32, PartitionReport>, v: &Verdict) -> String {
    let columns = anomaly_columns(partitions);
    let mut s = String::new();
    let _ = writeln!(s, "promise: {}", v.promise);
    let _ = write!(
        s,
        "{:>9} {:>8} {:>8} {:>8}",
        "partition", "acked", "unknown", "read"
    );
    for a in &columns {
        let _ = write!(s, " {:>w$}", a.name(), w = a.name().len());
    }
    s.push('\n');
    for (p, r) in partitions {
        let _ = write!(
            s,
            "{p:>9} {:>8} {:>8} {:>8}",
            r.acknowledged,
            r.unknown + r.failed,
            r.offsets_read
        );
        for a in &columns {
            let _ = write!(s, " {:>w$}", r.count(*a), w = a.name().len());
        }
        s.push('\n');
    }
    for (p, r) in partitions {
        for (kind, found) in &r.anomalies {
            for e in &found.examples {
                let _ = writeln!(s, "  partition {p} {}: {e}", kind.name());
            }
        }
    }
    for (p, r) in partitions {
        for e in &r.client_restarts.examples {
            let _ = writeln!(
                s,
                "  partition {p} client restart (not an anomaly; checked again from there): {e}"
            );
        }
    }
    write_verdict(&mut s, v);
    s
}

/// The anomalies that get a column: the transactional ones when the history has
/// transactions, the share ones when it has share deliveries; the client behaviours (not broker anomalies) only when they happened.
fn anomaly_columns(partitions: &BTreeMap<i32, PartitionReport>) -> Vec<Anomaly> {
    let transactional = partitions
        .values()
        .any(|r| r.txn_records > 0 || r.anomalies.keys().any(|a| a.transactional()));
    let share = partitions
        .values()
        .any(|r| r.share_deliveries > 0 || r.anomalies.keys().any(|a| a.share()));
    Anomaly::ALL
        .into_iter()
        .filter(|a| transactional || !a.transactional())
        .filter(|a| share || !a.share())
        .filter(|a| {
            !matches!(
                a,
                Anomaly::DuplicateAfterEpochBump | Anomaly::LostOffsetCommit
            ) || partitions.values().any(|r| r.count(*a) > 0)
        })
        .collect()
}

/// The expected anomalies, the run errors and the verdict, a line each.
fn write_verdict(s: &mut String, v: &Verdict) {
    for (name, count) in &v.expected {
        let _ = writeln!(s, "expected with these settings: {count} {name}");
    }
    for e in &v.run_errors {
        let _ = writeln!(s, "run error: {e}");
    }
    if v.ok {
        let _ = writeln!(s, "verdict: OK");
    } else {
        let failures: Vec<String> = v.failures.iter().map(|(k, c)| format!("{c} {k}")).collect();
        let _ = writeln!(
            s,
            "verdict: FAIL ({})",
            if failures.is_empty() {
                "run errors".to_string()
            } else {
                failures.join(", ")
            }
        );
    }
}

/// The command line that replays this run's schedule.
pub fn replay(out: &RunOutput) -> String {
    let c = &out.config;
    if c.schedule.is_some() {
        return "the schedule was given explicitly (a test's); it is the JSON's `schedule`".into();
    }
    let workload = match c.clients.workload {
        WorkloadKind::Send => "send",
        WorkloadKind::Txn => "txn",
        WorkloadKind::Share => "share",
    };
    format!(
        "cargo run --release -p brook-chaos -- --target {}{} --workload {workload} --seed {} --steps {} --weights {} --partitions {} --producers {} --consumers {} --group-consumers {} --share-consumers {} --rate {} --acks {} --idempotence {} --min-insync-replicas {} --replica-lag-ms {} --settle-secs {}",
        out.target,
        if out.security_protocol == "plaintext" { "" } else { " --secure" },
        c.seed,
        c.steps,
        c.weights,
        c.clients.partitions,
        c.clients.producers,
        c.clients.consumers,
        c.clients.group_consumers,
        c.clients.share_consumers,
        c.clients.rate,
        c.clients.acks,
        c.clients.idempotence,
        c.min_insync_replicas,
        c.replica_lag_ms,
        c.settle_secs
    )
}

/// Writes the whole output as JSON.
pub fn write_json(out: &RunOutput, path: &Path) -> Result<(), String> {
    let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::to_writer(std::io::BufWriter::new(f), out)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Checks the history of a JSON file written by a run again (with this checker), against the
/// settings the run recorded; the run's own run errors carry over.
pub fn recheck(path: &Path) -> Result<(BTreeMap<i32, PartitionReport>, Verdict), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let field = |k: &str| v["config"][k].clone();
    let g = Guarantees {
        acks: serde_json::from_value(field("acks")).map_err(|e| format!("config.acks: {e}"))?,
        idempotence: serde_json::from_value(field("idempotence"))
            .map_err(|e| format!("config.idempotence: {e}"))?,
        min_insync_replicas: serde_json::from_value(field("min_insync_replicas"))
            .map_err(|e| format!("config.min_insync_replicas: {e}"))?,
        replication_factor: serde_json::from_value(field("replication_factor"))
            .map_err(|e| format!("config.replication_factor: {e}"))?,
        // Histories written before the transactional workload have no `workload`.
        transactional: serde_json::from_value::<WorkloadKind>(field("workload"))
            .is_ok_and(|w| w == WorkloadKind::Txn),
        share: serde_json::from_value::<WorkloadKind>(field("workload"))
            .is_ok_and(|w| w == WorkloadKind::Share),
    };
    let ops: Vec<Op> =
        serde_json::from_value(v["history"].clone()).map_err(|e| format!("history: {e}"))?;
    let run_errors: Vec<String> =
        serde_json::from_value(v["verdict"]["run_errors"].clone()).unwrap_or_default();
    let reports = check(&ops);
    let verdict = judge(&g, &reports, run_errors);
    Ok((reports, verdict))
}
