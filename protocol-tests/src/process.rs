//! One `brook` child process: spawned with stdout and stderr copied to a log file, its READY
//! line awaited (bounded), stopped with SIGTERM or killed with SIGKILL, and reaped on drop.
//! [`crate::broker::Broker`] (a single node) and [`crate::cluster::Cluster`] (several nodes)
//! are built on it; [`run_brook`] runs the binary's other commands (`fault`, `dump-log`).

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::watchdog::Watchdog;

/// How long a broker may take to print its READY line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a broker may take to exit after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// A `/proc/<pid>/status` field in bytes (VmRSS now, VmHWM the peak).
pub fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    kb * 1024
}

/// The broker binary: `$BROOK_BIN`, else `<workspace>/target/debug/brook`.
pub fn brook_bin() -> PathBuf {
    match std::env::var_os("BROOK_BIN") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/brook"),
    }
}

/// A `READY key=value ...` line.
#[derive(Debug, Clone)]
pub struct Ready {
    pub line: String,
}

impl Ready {
    /// The value of `key=` in the line, if present.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.line
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
    }
}

/// A `brook serve` process (running or not) and its log file, which keeps the harness's own
/// lines and the stdout and stderr of every run.
pub struct BrookProcess {
    name: String,
    bin: PathBuf,
    child: Option<Child>,
    ready_rx: Option<mpsc::Receiver<String>>,
    log: Arc<Mutex<File>>,
    log_path: PathBuf,
    starts: u32,
    /// Environment variables set for every run, besides the test's own.
    env: Vec<(String, String)>,
    /// Ends the test binary when the test holds this process past its lifetime bound.
    _watchdog: Watchdog,
}

impl BrookProcess {
    /// A process called `name` in messages, logging to `log_path` (appended to).
    pub fn new(name: &str, log_path: PathBuf) -> BrookProcess {
        let bin = brook_bin();
        assert!(
            bin.exists(),
            "broker binary {} does not exist: build it (cargo build --bin brook) or set BROOK_BIN",
            bin.display()
        );
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap_or_else(|e| panic!("open {}: {e}", log_path.display()));
        BrookProcess {
            name: name.to_string(),
            bin,
            child: None,
            ready_rx: None,
            log: Arc::new(Mutex::new(log)),
            log_path: log_path.clone(),
            starts: 0,
            env: Vec::new(),
            _watchdog: Watchdog::arm(name, log_path.clone()),
        }
    }

    pub fn bin(&self) -> &Path {
        &self.bin
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Sets `key=value` in the environment of the next runs.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
    }

    /// Writes a line of the harness's own into the log.
    pub fn log_line(&self, line: &str) {
        let mut f = self.log.lock().unwrap();
        let _ = writeln!(f, "{line}");
    }

    /// Spawns `brook` with `args` (the process must not be running). `note` goes into the log
    /// line announcing the start. Returns without waiting: see [`BrookProcess::await_ready`].
    pub fn spawn<S: AsRef<OsStr>>(&mut self, args: &[S], note: &str) {
        assert!(self.child.is_none(), "{} is already running", self.name);
        self.starts += 1;
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.log_line(&format!(
            "=== test harness: start #{} {note} cmd={cmd:?}",
            self.starts
        ));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.display()));

        let (tx, rx) = mpsc::channel::<String>();
        let stdout = child.stdout.take().unwrap();
        let log = self.log.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for_each_line(stdout, |line| {
                let line = line.trim_end_matches(['\n', '\r']);
                {
                    let mut f = log.lock().unwrap();
                    let _ = writeln!(f, "[stdout] {line}");
                }
                if line.starts_with("READY ") || line == "READY" {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(line.to_string());
                    }
                }
            });
        });
        let stderr = child.stderr.take().unwrap();
        let log = self.log.clone();
        std::thread::spawn(move || {
            for_each_line(stderr, |line| {
                let mut f = log.lock().unwrap();
                let _ = write!(f, "{}", strip_ansi(line));
            });
        });
        self.child = Some(child);
        self.ready_rx = Some(rx);
    }

    /// Waits (bounded by `timeout`) for the READY line of the run started by the last
    /// [`BrookProcess::spawn`]. Kills the process and panics with the log tail when none comes.
    pub fn await_ready(&mut self, timeout: Duration) -> Ready {
        let rx = self
            .ready_rx
            .take()
            .unwrap_or_else(|| panic!("await_ready(): {} was not spawned", self.name));
        match rx.recv_timeout(timeout) {
            Ok(line) => {
                self.log_line(&format!("=== test harness: ready: {line}"));
                Ready { line }
            }
            Err(e) => {
                let status = self.child.as_mut().map(|c| c.try_wait());
                if let Some(mut c) = self.child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                panic!(
                    "{} did not print READY within {timeout:?} ({e:?}; exit status {status:?})\n{}",
                    self.name,
                    self.log_tail(60)
                );
            }
        }
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            None => false,
            Some(c) => matches!(c.try_wait(), Ok(None)),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Sends `sig` to the process, if it runs. SIGKILL goes to its descendants first: a
    /// broker behind a wrapper script (`kafka-as-brook.sh` runs Kafka's JVM as its child)
    /// dies with it, instead of serving on as an orphan that a restart then finds on its port.
    pub fn signal(&self, sig: libc::c_int) {
        if let Some(c) = &self.child {
            if sig == libc::SIGKILL {
                kill_descendants(c.id());
            }
            // SAFETY: plain kill(2) on our own child's pid.
            unsafe {
                libc::kill(c.id() as libc::pid_t, sig);
            }
        }
    }

    fn wait_bounded(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            match child.try_wait() {
                Ok(Some(st)) => return Some(st),
                Ok(None) => {}
                Err(e) => panic!("wait for {}: {e}", self.name),
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, then waits (bounded) for the process to exit. Panics if it does not exit in time.
    pub fn stop(&mut self) -> ExitStatus {
        assert!(self.child.is_some(), "stop(): {} is not running", self.name);
        self.log_line("=== test harness: SIGTERM");
        self.signal(libc::SIGTERM);
        match self.wait_bounded(STOP_TIMEOUT) {
            Some(st) => {
                self.log_line(&format!("=== test harness: exited with {st}"));
                self.child = None;
                st
            }
            None => {
                self.signal(libc::SIGKILL);
                let _ = self.child.as_mut().unwrap().wait();
                self.child = None;
                panic!(
                    "{} did not exit within {STOP_TIMEOUT:?} of SIGTERM\n{}",
                    self.name,
                    self.log_tail(60)
                );
            }
        }
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        assert!(
            self.child.is_some(),
            "kill9(): {} is not running",
            self.name
        );
        self.log_line("=== test harness: SIGKILL");
        self.signal(libc::SIGKILL);
        let st = self
            .wait_bounded(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{} survived SIGKILL for 10 s", self.name));
        self.log_line(&format!("=== test harness: killed: {st}"));
        self.child = None;
    }

    /// Waits (bounded) for the process to exit on its own (a crash rule, say) and reaps it.
    /// `None` when it still runs at the deadline.
    pub fn await_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let st = self.wait_bounded(timeout)?;
        self.log_line(&format!("=== test harness: exited on its own: {st}"));
        self.child = None;
        Some(st)
    }

    /// The whole log (every run).
    pub fn log_text(&self) -> String {
        let _ = self.log.lock().map(|mut f| f.flush());
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The last `n` lines of the log, after a list of every broker panic in it.
    pub fn log_tail(&self, n: usize) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(n);
        // Broker panics anywhere in the log, with the line after each (the message).
        let mut panics = String::new();
        for (i, l) in lines.iter().enumerate() {
            if l.contains("panicked at") {
                panics.push_str(&format!(
                    "BROKER PANIC: {l} | {}\n",
                    lines.get(i + 1).unwrap_or(&"")
                ));
            }
        }
        format!(
            "----- {} log {} (last {} lines) -----\n{}\n----- end of {} log -----\n{panics}",
            self.name,
            self.log_path.display(),
            lines.len() - start,
            lines[start..].join("\n"),
            self.name
        )
    }
}

/// What a node logs, at error level, when it closes a connection because a response could not
/// be encoded at the request's version (`connection` in the broker, which also counts it
/// in `brook_response_encode_failures_total`). The log outlives restarts; the count does not.
pub const ENCODE_FAILURE_LOG: &str = "a response could not be encoded";

impl BrookProcess {
    /// The log lines, over every run, of responses this node could not encode.
    pub fn encode_failures(&self) -> Vec<String> {
        self.log_text()
            .lines()
            .filter(|l| l.contains(ENCODE_FAILURE_LOG))
            .map(str::to_string)
            .collect()
    }
}

/// Bound on the processes one [`kill_descendants`] walks: a test's broker has a handful.
const DESCENDANTS_MAX: usize = 64;

/// SIGKILLs every descendant of `pid`, deepest first, found through `/proc/*/stat`'s parent
/// pids (a snapshot: a process forked meanwhile is not seen).
pub(crate) fn kill_descendants(pid: u32) {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    let parents: Vec<(u32, u32)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // `pid (comm) state ppid ...`: the command may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() && found.len() < DESCENDANTS_MAX {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    for p in found.into_iter().skip(1).rev() {
        // SAFETY: kill(2) on a descendant of our own child.
        unsafe {
            libc::kill(p as libc::pid_t, libc::SIGKILL);
        }
    }
}

impl Drop for BrookProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_descendants(c.id());
            let _ = c.kill();
            let _ = c.wait();
        }
        // Any test whose node failed to encode an answer fails, whatever it asserted: a client
        // saw a closed connection where Kafka answers.
        if !std::thread::panicking() {
            let failures = self.encode_failures();
            assert!(
                failures.is_empty(),
                "{} could not encode {} response(s); see {}:\n{}",
                self.name,
                failures.len(),
                self.log_path.display(),
                failures.join("\n")
            );
        }
    }
}

/// When the thread is panicking (a failed test), prints `logs()` and keeps `dir`, which `what`
/// names, for inspection instead of letting it be deleted.
pub fn keep_on_panic(dir: &mut Option<TempDir>, what: &str, logs: impl FnOnce() -> String) {
    if std::thread::panicking() {
        eprintln!("{}", logs());
        if let Some(dir) = dir.take() {
            let kept = dir.keep();
            eprintln!("{what} temp dir kept for inspection: {}", kept.display());
        }
    }
}

/// Calls `f` with each line (newline included) read from `r` until EOF or an error.
fn for_each_line(r: impl Read, mut f: impl FnMut(&str)) {
    let mut reader = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => f(&String::from_utf8_lossy(&buf)),
        }
    }
}

/// What a finished `brook` command printed.
#[derive(Debug)]
pub struct CommandOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Writes the test PKI (CA, broker and client stores, protected by `password`) into `dir`
/// with `brook certs`; panics if it fails.
pub fn write_test_pki(dir: &Path, password: &str) {
    let d = dir.display().to_string();
    let out = run_brook(
        &["certs", "--dir", &d, "--password", password],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "brook certs: {out:?}");
}

/// Runs `brook ARGS...` to completion, bounded by `timeout` (killed and a panic after it).
pub fn run_brook<S: AsRef<OsStr>>(args: &[S], timeout: Duration) -> CommandOutput {
    run_brook_with_env(args, &[], timeout)
}

/// [`run_brook`] with `env` added to the command's environment (`BROOK_HTTP_CREDENTIALS`).
pub fn run_brook_with_env<S: AsRef<OsStr>>(
    args: &[S],
    env: &[(&str, &str)],
    timeout: Duration,
) -> CommandOutput {
    let bin = brook_bin();
    let mut child = Command::new(&bin)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
    let read_all = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read_all(Box::new(child.stdout.take().unwrap()));
    let err = read_all(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for brook command") {
            break st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let argv: Vec<&OsStr> = args.iter().map(|a| a.as_ref()).collect();
            panic!("brook {argv:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    CommandOutput {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Removes ANSI colour sequences (ESC '[' ... letter) from a log line.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
