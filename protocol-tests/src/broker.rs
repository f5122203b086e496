//! Starts and controls a `brook serve` child process.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long a broker may take to print its READY line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a broker may take to exit after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The broker binary: `$BROOK_BIN`, else `<workspace>/target/debug/brook`.
pub fn brook_bin() -> PathBuf {
    match std::env::var_os("BROOK_BIN") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/brook"),
    }
}

/// A running (or stopped) brook process with its own temp dir holding config, data and log.
pub struct Broker {
    dir: Option<TempDir>,
    bin: PathBuf,
    overrides: Vec<String>,
    child: Option<Child>,
    port: u16,
    listener: String,
    ready_line: String,
    log: Arc<Mutex<File>>,
    log_path: PathBuf,
    starts: u32,
}

impl Broker {
    /// Starts a broker with the default test config.
    pub fn start() -> Broker {
        Self::start_with(&[])
    }

    /// Starts a broker with `--override key=value` for each pair.
    pub fn start_with(overrides: &[(&str, &str)]) -> Broker {
        let dir = tempfile::Builder::new()
            .prefix("brook-test-")
            .tempdir()
            .expect("create temp dir");
        let log_path = dir.path().join("broker.log");
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("open broker log");
        let mut b = Broker {
            dir: Some(dir),
            bin: brook_bin(),
            overrides: overrides.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            child: None,
            port: 0,
            listener: String::new(),
            ready_line: String::new(),
            log: Arc::new(Mutex::new(log)),
            log_path,
            starts: 0,
        };
        assert!(
            b.bin.exists(),
            "broker binary {} does not exist: build it (cargo build -p brook) or set BROOK_BIN",
            b.bin.display()
        );
        b.spawn();
        b
    }

    pub fn dir(&self) -> &Path {
        self.dir.as_ref().unwrap().path()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir().join("data")
    }

    /// `host:port` of the listener, as printed in the READY line.
    pub fn bootstrap(&self) -> String {
        assert!(self.child.is_some(), "broker is not running");
        self.listener.clone()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The whole READY line of the current run.
    pub fn ready_line(&self) -> &str {
        &self.ready_line
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

    fn write_config(&self) -> PathBuf {
        let path = self.dir().join("server.properties");
        let text = format!(
            "node.id=1\nlisteners=PLAINTEXT://127.0.0.1:{}\nlog.dirs={}\nnum.partitions=1\nauto.create.topics.enable=true\n",
            self.port,
            self.data_dir().display()
        );
        std::fs::write(&path, text).expect("write server.properties");
        path
    }

    fn log_line(&self, line: &str) {
        let mut f = self.log.lock().unwrap();
        let _ = writeln!(f, "{line}");
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "broker already running");
        self.starts += 1;
        let config = self.write_config();
        let mut cmd = Command::new(&self.bin);
        cmd.arg("serve").arg("--config").arg(&config);
        for o in &self.overrides {
            cmd.arg("--override").arg(o);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.log_line(&format!(
            "=== test harness: start #{} port={} cmd={:?}",
            self.starts, self.port, cmd
        ));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.display()));

        let (tx, rx) = mpsc::channel::<String>();
        let stdout = child.stdout.take().unwrap();
        let log = self.log.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let line = String::from_utf8_lossy(&buf);
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
            }
        });
        let stderr = child.stderr.take().unwrap();
        let log = self.log.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let line = strip_ansi(&String::from_utf8_lossy(&buf));
                let mut f = log.lock().unwrap();
                let _ = write!(f, "{line}");
            }
        });
        self.child = Some(child);

        let line = match rx.recv_timeout(READY_TIMEOUT) {
            Ok(line) => line,
            Err(e) => {
                let status = self.child.as_mut().unwrap().try_wait();
                let _ = self.child.as_mut().unwrap().kill();
                let _ = self.child.as_mut().unwrap().wait();
                self.child = None;
                panic!(
                    "broker did not print READY within {READY_TIMEOUT:?} ({e:?}; exit status {status:?})\n{}",
                    self.log_tail(60)
                );
            }
        };
        let listener = line
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("listener="))
            .unwrap_or_else(|| panic!("READY line without listener=: {line:?}"))
            .to_string();
        let port: u16 = listener
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("cannot parse port of listener in READY line {line:?}"));
        if self.port != 0 {
            assert_eq!(
                port, self.port,
                "restarted broker bound another port: {line:?}"
            );
        }
        assert_ne!(port, 0, "READY line names port 0: {line:?}");
        self.port = port;
        self.listener = listener;
        self.ready_line = line;
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(c) = &self.child {
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
                Err(e) => panic!("wait for broker: {e}"),
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, then waits (bounded) for the process to exit. Panics if it does not exit in time.
    pub fn stop(&mut self) -> ExitStatus {
        assert!(self.child.is_some(), "stop(): broker is not running");
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
                    "broker did not exit within {STOP_TIMEOUT:?} of SIGTERM\n{}",
                    self.log_tail(60)
                );
            }
        }
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        assert!(self.child.is_some(), "kill9(): broker is not running");
        self.log_line("=== test harness: SIGKILL");
        self.signal(libc::SIGKILL);
        let st = self
            .wait_bounded(Duration::from_secs(10))
            .expect("broker survived SIGKILL for 10 s");
        self.log_line(&format!("=== test harness: killed: {st}"));
        self.child = None;
    }

    /// Starts the broker again on the same port and data dir. Stops it (SIGTERM) first if running.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
        self.spawn();
    }

    /// Starts a stopped broker again (same port, same data).
    pub fn start_again(&mut self) {
        self.spawn();
    }

    /// The last `n` lines of the broker log (stdout + stderr of every run).
    pub fn log_tail(&self, n: usize) -> String {
        let _ = self.log.lock().map(|mut f| f.flush());
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
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
            "----- broker log {} (last {} lines) -----\n{}\n----- end of broker log -----\n{panics}",
            self.log_path.display(),
            lines.len() - start,
            lines[start..].join("\n")
        )
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("{}", self.log_tail(80));
            if let Some(dir) = self.dir.take() {
                let kept = dir.keep();
                eprintln!("broker temp dir kept for inspection: {}", kept.display());
            }
        }
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
