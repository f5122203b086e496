//! Output: a short table for people, a JSON file (configuration, schedule, history, per
//! partition reports, verdict) for machines, and the command that replays the run.

use std::fmt::Write as _;
use std::path::Path;

use crate::checker::Anomaly;
use crate::run::RunOutput;

/// The table printed at the end of a run.
pub fn table(out: &RunOutput) -> String {
    let mut s = String::new();
    let n = &out.nemesis;
    let _ = writeln!(
        s,
        "brook chaos on {}: seed {}, {} steps ({} leader kills, {} ISR cuts, {} crash points, {} pauses, {} link delays, {} mapped), {:.1} s",
        out.target,
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
    let _ = writeln!(s, "promise: {}", out.verdict.promise);
    let _ = write!(
        s,
        "{:>9} {:>8} {:>8} {:>8}",
        "partition", "acked", "unknown", "read"
    );
    for a in Anomaly::ALL {
        let _ = write!(s, " {:>w$}", a.name(), w = a.name().len());
    }
    s.push('\n');
    for (p, r) in &out.partitions {
        let _ = write!(
            s,
            "{p:>9} {:>8} {:>8} {:>8}",
            r.acknowledged,
            r.unknown + r.failed,
            r.offsets_read
        );
        for a in Anomaly::ALL {
            let _ = write!(s, " {:>w$}", r.count(a), w = a.name().len());
        }
        s.push('\n');
    }
    for (p, r) in &out.partitions {
        for (kind, found) in &r.anomalies {
            for e in &found.examples {
                let _ = writeln!(s, "  partition {p} {}: {e}", kind.name());
            }
        }
    }
    let v = &out.verdict;
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
    s
}

/// The command line that replays this run's schedule.
pub fn replay(out: &RunOutput) -> String {
    let c = &out.config;
    if c.schedule.is_some() {
        return "the schedule was given explicitly (a test's); it is the JSON's `schedule`".into();
    }
    format!(
        "cargo run --release -p brook-chaos -- --target {} --seed {} --steps {} --partitions {} --producers {} --consumers {} --rate {} --acks {} --idempotence {} --min-insync-replicas {} --replica-lag-ms {} --settle-secs {}",
        out.target,
        c.seed,
        c.steps,
        c.clients.partitions,
        c.clients.producers,
        c.clients.consumers,
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
