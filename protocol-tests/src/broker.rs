//! Starts and controls a `brook serve` child process.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use tempfile::TempDir;

pub use crate::process::{brook_bin, READY_TIMEOUT, STOP_TIMEOUT};
use crate::process::{keep_on_panic, BrookProcess};

/// A running (or stopped) brook process with its own temp dir holding config, data and log.
pub struct Broker {
    process: BrookProcess,
    dir: Option<TempDir>,
    overrides: Vec<String>,
    port: u16,
    listener: String,
    ready_line: String,
}

impl Broker {
    /// Starts a broker with the default test config.
    pub fn start() -> Broker {
        Self::start_with(&[])
    }

    /// Starts a broker with `--override key=value` for each pair.
    pub fn start_with(overrides: &[(&str, &str)]) -> Broker {
        Self::start_with_env(overrides, &[])
    }

    /// Starts a broker with `--override key=value` for each pair of `overrides` and the
    /// environment variables `env` (e.g. `TOKIO_WORKER_THREADS`, to run as many request
    /// threads as a larger machine would).
    pub fn start_with_env(overrides: &[(&str, &str)], env: &[(&str, &str)]) -> Broker {
        let dir = tempfile::Builder::new()
            .prefix("brook-test-")
            .tempdir()
            .expect("create temp dir");
        let mut process = BrookProcess::new("broker", dir.path().join("broker.log"));
        for (k, v) in env {
            process.set_env(k, v);
        }
        let mut b = Broker {
            process,
            dir: Some(dir),
            overrides: overrides.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            port: 0,
            listener: String::new(),
            ready_line: String::new(),
        };
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
        assert!(self.process.pid().is_some(), "broker is not running");
        self.listener.clone()
    }

    /// `host:port` of the broker listener named `name` (from the READY line's `listeners=`,
    /// which a broker with more than one listener prints).
    pub fn listener_address(&self, name: &str) -> String {
        let all = self
            .ready_line
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("listeners="))
            .unwrap_or_else(|| panic!("READY line without listeners=: {}", self.ready_line));
        all.split(',')
            .find_map(|e| e.strip_prefix(&format!("{name}://")))
            .unwrap_or_else(|| panic!("no listener {name} in {}", self.ready_line))
            .to_string()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The whole READY line of the current run.
    pub fn ready_line(&self) -> &str {
        &self.ready_line
    }

    /// The admin listener (HOST:PORT) of the current run, from its READY line; the broker
    /// must have been started with `admin.listener`.
    pub fn admin_address(&self) -> String {
        self.ready_line
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("admin="))
            .unwrap_or_else(|| panic!("READY line without admin=: {}", self.ready_line))
            .to_string()
    }

    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
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

    fn spawn(&mut self) {
        let config = self.write_config();
        let mut args = vec!["serve".to_string(), "--config".to_string()];
        args.push(config.display().to_string());
        for o in &self.overrides {
            args.push("--override".to_string());
            args.push(o.clone());
        }
        self.process.spawn(&args, &format!("port={}", self.port));
        let ready = self.process.await_ready(READY_TIMEOUT);
        let line = ready.line.clone();
        let listener = ready
            .field("listener")
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

    /// Sets `key=value` for the next start (`start_again`, `restart`), replacing an earlier
    /// override of the key.
    pub fn set_override(&mut self, key: &str, value: &str) {
        let prefix = format!("{key}=");
        self.overrides.retain(|o| !o.starts_with(&prefix));
        self.overrides.push(format!("{key}={value}"));
    }

    /// Installs a crash rule at `point` (`brook fault add --action crash`), for one topic's
    /// partitions when `topic` is given; the broker must have an `admin.listener`.
    pub fn add_crash_rule(&self, point: &str, topic: Option<&str>) {
        let admin = self.admin_address();
        let mut args = vec![
            "fault", "add", "--admin", &admin, "--action", "crash", "--point", point,
        ];
        if let Some(t) = topic {
            args.extend(["--topic", t]);
        }
        let out = crate::process::run_brook(&args, std::time::Duration::from_secs(20));
        assert!(out.status.success(), "brook fault add: {out:?}");
    }

    /// SIGTERM, then waits (bounded) for the process to exit. Panics if it does not exit in time.
    pub fn stop(&mut self) -> ExitStatus {
        self.process.stop()
    }

    /// Waits up to `timeout` for the process to exit by itself (a crash point); its status.
    pub fn await_exit(&mut self, timeout: std::time::Duration) -> Option<ExitStatus> {
        self.process.await_exit(timeout)
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        self.process.kill9()
    }

    /// Starts the broker again on the same port and data dir. Stops it (SIGTERM) first if running.
    pub fn restart(&mut self) {
        if self.process.pid().is_some() {
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
        self.process.log_tail(n)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        keep_on_panic(&mut self.dir, "broker", || self.process.log_tail(80));
        // `process` (declared first) is dropped next: it kills and reaps a running child before
        // the temp dir goes.
    }
}
