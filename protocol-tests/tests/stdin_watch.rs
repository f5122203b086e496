//! `--exit-on-stdin-eof` (tools/src/stdin_watch.rs), the way the test kits (kits/) tie a
//! broker's life to the test process that started it: the kit holds a pipe on `brook`'s stdin
//! and the kernel closes it when the test process dies, however it dies.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use brook_protocol_tests::poll_until;
use brook_protocol_tests::process::brook_bin;

const START_WAIT: Duration = Duration::from_secs(60);
const EXIT_WAIT: Duration = Duration::from_secs(30);

/// Spawns `brook ARGS` with a pipe on stdin; returns it and its stdout lines.
fn spawn(args: &[String]) -> (Child, Receiver<String>) {
    let mut child = Command::new(brook_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn brook");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// The next stdout line starting with `prefix` (skipping others).
fn next_line(lines: &Receiver<String>, prefix: &str) -> String {
    loop {
        match lines.recv_timeout(START_WAIT) {
            Ok(l) if l.trim_start().starts_with(prefix) => return l,
            Ok(_) => {}
            Err(e) => panic!("no {prefix:?} line within {START_WAIT:?}: {e}"),
        }
    }
}

/// Whether `pid` is a live process: it exists and is not a zombie waiting for a reaper.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the field after the command name's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

#[test]
fn a_node_stops_cleanly_when_its_stdin_closes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut node, lines) = spawn(&[
        "serve".into(),
        "--exit-on-stdin-eof".into(),
        "--override".into(),
        "listeners=PLAINTEXT://127.0.0.1:0".into(),
        "--override".into(),
        format!("log.dirs={}", dir.path().display()),
    ]);
    next_line(&lines, "READY");
    drop(node.stdin.take());
    let status = poll_until("the node exits after its stdin closed", EXIT_WAIT, || {
        node.try_wait().ok().flatten()
    });
    assert!(status.success(), "a clean stop, as on SIGTERM: {status}");
}

/// The test process dying is the supervisor's stdin closing, and a supervisor killed with
/// SIGKILL (no chance to stop anything) is its nodes' stdin closing: nothing outlives it.
#[test]
fn a_killed_supervisor_takes_its_nodes_with_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut sup, lines) = spawn(&[
        "cluster".into(),
        "--nodes=2".into(),
        "--base-port=0".into(),
        "--supervisor-listener=127.0.0.1:0".into(),
        "--exit-on-stdin-eof".into(),
        format!("--data-dir={}", dir.path().display()),
    ]);
    next_line(&lines, "CLUSTER READY");
    // "  node 1: pid 123, client ...": the nodes' pids.
    let pids: Vec<u32> = (0..2)
        .map(|_| {
            let line = next_line(&lines, "node ");
            let pid = line.split("pid ").nth(1).and_then(|r| r.split(',').next());
            pid.and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("{line}"))
        })
        .collect();
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");
    sup.kill().expect("SIGKILL the supervisor");
    sup.wait().expect("reap the supervisor");
    poll_until(
        "both nodes exit after the supervisor died",
        EXIT_WAIT,
        || pids.iter().all(|p| !alive(*p)).then_some(()),
    );
}
