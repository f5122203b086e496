//! A `brook cluster` supervisor process for tests that drive it over its HTTP API (the event
//! stream, the live page's labs), and the one blocking HTTP/1.1 call they make to it or to a
//! node's admin listener.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::process::brook_bin;

/// Bound on `brook cluster` printing `CLUSTER READY`.
pub const START_WAIT: Duration = Duration::from_secs(90);
/// Bound on one HTTP answer's size.
pub const ANSWER_BYTES_MAX: u64 = 16 << 20;

/// The `brook cluster` process; SIGTERMed (which stops its nodes) when dropped.
pub struct Supervised {
    pub child: Child,
    /// Its stdout, line by line, after `CLUSTER READY`.
    pub lines: mpsc::Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // SAFETY: kill(2) with our own child's pid; no memory is involved.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `brook cluster` (3 nodes, free ports, a temporary data directory named from
/// `prefix`) with `--override` `overrides` and the environment `env`; returns it with its
/// `CLUSTER READY` line.
pub fn start(prefix: &str, overrides: &[&str], env: &[(&str, &str)]) -> (Supervised, String) {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("temp dir");
    let mut cmd = Command::new(brook_bin());
    cmd.args([
        "cluster",
        "--base-port",
        "0",
        "--supervisor-listener",
        "127.0.0.1:0",
    ]);
    cmd.arg("--data-dir").arg(dir.path());
    for o in overrides {
        cmd.args(["--override", o]);
    }
    cmd.envs(env.iter().copied());
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn brook cluster");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let sup = Supervised {
        child,
        lines: rx,
        _dir: dir,
    };
    let deadline = Instant::now() + START_WAIT;
    let ready = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match sup.lines.recv_timeout(left) {
            Ok(l) if l.starts_with("CLUSTER READY") => break l,
            Ok(_) => {}
            Err(e) => panic!("no CLUSTER READY within {START_WAIT:?}: {e}"),
        }
    };
    (sup, ready)
}

/// The `key=value` field `key` of a READY line.
pub fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

/// One HTTP/1.1 call with `Connection: close`, answered within `timeout`: the status and the
/// JSON answer (`Null` when the body is not JSON).
pub fn http(
    method: &str,
    addr: &str,
    path: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(timeout)).expect("read timeout");
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send request");
    let mut raw = String::new();
    s.take(ANSWER_BYTES_MAX)
        .read_to_string(&mut raw)
        .expect("read answer");
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP header end in {raw:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}
