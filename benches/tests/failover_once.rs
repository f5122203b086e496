//! CI's bounded run of the failover benchmark (`src/bin/failover.rs`): one case (a partition
//! leader's SIGKILL) once on a Brook cluster, so the binary keeps working. No timed assertion:
//! speed is judged by the side-by-side table in `benches/RESULTS.md`, from full runs.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::process::Command;

#[test]
fn the_failover_benchmark_measures_one_leader_kill_on_brook() {
    let brook = std::env::var("BROOK_BIN").unwrap_or_else(|_| {
        // The workspace's debug build, where `scripts/test` builds it.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        root.join("target/debug/brook").display().to_string()
    });
    let out = Command::new(env!("CARGO_BIN_EXE_failover"))
        .args(["--system", "brook", "--cases", "kill-leader", "--reps", "1"])
        .args(["--brook-bin", &brook])
        .output()
        .expect("run the failover benchmark");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    // One row: the case, the system, and at least one victim partition measured.
    let row = stdout
        .lines()
        .find(|l| l.starts_with("| kill-leader | brook |"))
        .unwrap_or_else(|| panic!("no kill-leader row in\n{stdout}"));
    let samples: usize = row
        .split('|')
        .nth(3)
        .unwrap_or("")
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(samples >= 1, "no partition measured: {row}");
}
