//! [`Cluster`]: `brook cluster` as a child process, driven through its supervisor's HTTP API.

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use brook_tools::wait::{Views, WaitError};
use serde_json::Value;

/// How long [`ClusterBuilder::start`] waits for every node by default.
pub const READY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);
/// How long a clean stop may take when the cluster is dropped; then it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on one call to the supervisor (a restart answers once the node is ready).
const CALL_TIMEOUT: Duration = Duration::from_secs(90);
/// How much of each log an error repeats, in bytes.
const LOG_TAIL_BYTES: usize = 4 << 10;

#[derive(Debug, thiserror::Error)]
pub enum KitError {
    #[error("no brook binary: set BROOK_BIN or put brook on PATH (`cargo install --path tools` in a Brook checkout builds it)")]
    NoBinary,
    #[error("{path}: {reason}")]
    BadBinary { path: PathBuf, reason: String },
    #[error("brook cluster: {0}")]
    Io(#[from] std::io::Error),
    #[error("brook cluster exited before it was ready ({status}):\n{logs}")]
    Exited { status: String, logs: String },
    #[error("the cluster was not ready within {timeout:?}:\n{logs}")]
    NotReady { timeout: Duration, logs: String },
    #[error("{0}")]
    Call(String),
    #[error(transparent)]
    Wait(#[from] WaitError),
}

/// The brook binary: `$BROOK_BIN`, else `brook` on PATH; checked to be an executable for
/// this machine.
pub fn find_brook_bin() -> Result<PathBuf, KitError> {
    let path = match std::env::var_os("BROOK_BIN").filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|d| d.join("brook"))
            .find(|p| p.is_file())
            .ok_or(KitError::NoBinary)?,
    };
    check_binary(&path).map_err(|reason| KitError::BadBinary {
        path: path.clone(),
        reason,
    })?;
    Ok(path)
}

/// ELF's `e_machine` for this machine's architecture.
fn elf_machine() -> Option<u16> {
    match std::env::consts::ARCH {
        "x86_64" => Some(62),
        "aarch64" => Some(183),
        "x86" => Some(3),
        "arm" => Some(40),
        "riscv64" => Some(243),
        _ => None,
    }
}

/// Refuses what is not a Linux executable for this machine, so a wrong download is one clear
/// error instead of "exec format error" deep in a test.
fn check_binary(path: &Path) -> Result<(), String> {
    let mut header = [0u8; 20];
    let mut file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    std::io::Read::read_exact(&mut file, &mut header)
        .map_err(|_| "not a Linux executable (too short)".to_string())?;
    if &header[..4] != b"\x7fELF" {
        return Err("not a Linux executable (no ELF header)".into());
    }
    // e_machine at offset 18, in the byte order of EI_DATA (1: little endian).
    let machine = match header[5] {
        1 => u16::from_le_bytes([header[18], header[19]]),
        _ => u16::from_be_bytes([header[18], header[19]]),
    };
    match elf_machine() {
        Some(want) if want != machine => Err(format!(
            "built for ELF machine {machine}, but this machine is {}",
            std::env::consts::ARCH
        )),
        _ => Ok(()),
    }
}

/// Settings of a [`Cluster`] before it starts.
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    nodes: usize,
    config: Vec<(String, String)>,
    ready_timeout: Duration,
    bin: Option<PathBuf>,
}

impl ClusterBuilder {
    /// How many nodes (default 1); each is a broker and a metadata quorum voter.
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }

    /// A broker property by its Kafka name, on every node; a key Kafka does not declare
    /// makes [`ClusterBuilder::start`] fail naming it.
    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.config.push((key.into(), value.into()));
        self
    }

    /// Bounds the wait for every node to be ready (default [`READY_TIMEOUT_DEFAULT`]).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// Runs this brook binary instead of [`find_brook_bin`]'s.
    pub fn bin(mut self, path: impl Into<PathBuf>) -> Self {
        self.bin = Some(path.into());
        self
    }

    /// Starts the cluster; returns once every node is ready.
    pub fn start(self) -> Result<Cluster, KitError> {
        let bin = match self.bin {
            Some(b) => {
                check_binary(&b).map_err(|reason| KitError::BadBinary {
                    path: b.clone(),
                    reason,
                })?;
                b
            }
            None => find_brook_bin()?,
        };
        let dir = TempDir::new()?;
        let mut command = Command::new(bin);
        command
            .arg("cluster")
            .arg(format!("--nodes={}", self.nodes))
            .args(["--base-port=0", "--supervisor-listener=127.0.0.1:0"])
            .arg("--exit-on-stdin-eof")
            // The timings every kit sets (the supervisor's one list); `config` wins.
            .arg("--test-timings")
            .arg(format!("--data-dir={}", dir.0.display()))
            .arg(format!(
                "--ready-timeout-secs={}",
                self.ready_timeout.as_secs() + 1
            ));
        for (k, v) in self.config {
            command.arg(format!("--override={k}={v}"));
        }
        let stderr = std::fs::File::create(dir.0.join("supervisor.log"))?;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()?;
        let stdin = child.stdin.take();
        let lines = read_lines(&mut child);
        let mut cluster = Cluster {
            child,
            stdin,
            dir,
            bootstrap: String::new(),
            supervisor: String::new(),
            admins: Vec::new(),
        };
        cluster.await_ready(&lines, self.ready_timeout)?;
        Ok(cluster)
    }
}

/// The child's stdout lines, read on a thread of their own.
fn read_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

/// A running `brook cluster`. Dropping it stops every node (SIGTERM, then SIGKILL after
/// 30 s); should the test process die first, the nodes see their stdin close and stop.
pub struct Cluster {
    child: Child,
    stdin: Option<ChildStdin>,
    dir: TempDir,
    bootstrap: String,
    supervisor: String,
    admins: Vec<(i32, String)>,
}

impl Cluster {
    /// Settings: [`ClusterBuilder::nodes`], [`ClusterBuilder::config`], then start.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder {
            nodes: 1,
            config: Vec::new(),
            ready_timeout: READY_TIMEOUT_DEFAULT,
            bin: None,
        }
    }

    /// Reads the supervisor's stdout up to its line
    /// `CLUSTER READY bootstrap=H:P,... supervisor=H:P admins=1@H:P,...`.
    fn await_ready(
        &mut self,
        lines: &mpsc::Receiver<String>,
        timeout: Duration,
    ) -> Result<(), KitError> {
        let deadline = Instant::now() + timeout;
        let line = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(l) if l.starts_with("CLUSTER READY ") => break l,
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(KitError::NotReady {
                        timeout,
                        logs: self.log_tails(),
                    })
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait()?;
                    return Err(KitError::Exited {
                        status: status.to_string(),
                        logs: self.log_tails(),
                    });
                }
            }
        };
        for field in line.split_whitespace() {
            match field.split_once('=') {
                Some(("bootstrap", v)) => self.bootstrap = v.into(),
                Some(("supervisor", v)) => self.supervisor = v.into(),
                Some(("admins", v)) => {
                    self.admins = v
                        .split(',')
                        .filter_map(|a| a.split_once('@'))
                        .filter_map(|(id, addr)| Some((id.parse().ok()?, addr.to_string())))
                        .collect()
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The end of the supervisor's stderr and of every node's log.
    fn log_tails(&self) -> String {
        let mut out = String::new();
        let mut logs: Vec<PathBuf> = std::fs::read_dir(&self.dir.0)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        for path in logs {
            let text = std::fs::read(&path).unwrap_or_default();
            let tail = &text[text.len().saturating_sub(LOG_TAIL_BYTES)..];
            out.push_str(&format!(
                "--- {}\n{}\n",
                path.display(),
                String::from_utf8_lossy(tail)
            ));
        }
        out
    }

    /// The nodes' client listeners, comma-separated: `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        self.bootstrap.clone()
    }

    /// The supervisor's HTTP API (`host:port`): `/nodes`, the merged `/v1/*` views, the
    /// live page.
    pub fn supervisor_address(&self) -> &str {
        &self.supervisor
    }

    /// Node `id`'s admin listener (`host:port`): its own state views and fault API.
    pub fn admin_address(&self, id: i32) -> Option<&str> {
        self.admins
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, a)| a.as_str())
    }

    /// The node ids, 1..=N.
    pub fn node_ids(&self) -> Vec<i32> {
        self.admins.iter().map(|(id, _)| *id).collect()
    }

    /// The data directory: `node-N/` (log.dirs) and `node-N.log` per node.
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// One call to the supervisor: its JSON answer, or the error it gave.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, KitError> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(CALL_TIMEOUT))
            .build()
            .into();
        let url = format!("http://{}{path}", self.supervisor);
        let resp = match (method, body) {
            ("POST", Some(b)) => agent.post(&url).send_json(b),
            ("POST", None) => agent.post(&url).send_empty(),
            ("DELETE", _) => agent.delete(&url).call(),
            _ => agent.get(&url).call(),
        }
        .map_err(|e| KitError::Call(format!("{method} {url}: {e}")))?;
        let status = resp.status();
        let text = resp
            .into_body()
            .read_to_string()
            .map_err(|e| KitError::Call(format!("{method} {url}: {e}")))?;
        if !status.is_success() {
            return Err(KitError::Call(format!("{method} {url}: {status}: {text}")));
        }
        serde_json::from_str(&text)
            .map_err(|e| KitError::Call(format!("{method} {url}: not JSON ({e}): {text}")))
    }

    fn node_op(&self, id: i32, op: &str) -> Result<Value, KitError> {
        self.call("POST", &format!("/nodes/{id}/{op}"), None)
    }

    /// SIGKILL (as `kill -9`); returns once the node has exited. It stays down until
    /// [`Cluster::start_node`] or [`Cluster::restart_node`].
    pub fn kill_node(&self, id: i32) -> Result<Value, KitError> {
        self.node_op(id, "kill")
    }

    /// SIGTERM (a clean shutdown); returns once the node has exited.
    pub fn stop_node(&self, id: i32) -> Result<Value, KitError> {
        self.node_op(id, "kill?signal=term")
    }

    /// Starts a stopped node with its configuration and data; returns once it is ready.
    pub fn start_node(&self, id: i32) -> Result<Value, KitError> {
        self.node_op(id, "start")
    }

    /// Stops the node if it runs and starts it again; returns once it is ready.
    pub fn restart_node(&self, id: i32) -> Result<Value, KitError> {
        self.node_op(id, "restart")
    }

    /// SIGSTOP: the node keeps its connections and answers nothing.
    pub fn pause_node(&self, id: i32) -> Result<Value, KitError> {
        self.node_op(id, "pause")
    }

    /// SIGCONT.
    pub fn resume_node(&self, id: i32) -> Result<Value, KitError> {
        self.node_op(id, "resume")
    }

    /// Installs a fault rule on node `id` (docs/FAULTS.md); returns its id.
    pub fn add_fault(&self, id: i32, rule: &crate::FaultSpec) -> Result<u64, KitError> {
        let body = serde_json::to_value(rule).map_err(|e| KitError::Call(e.to_string()))?;
        let answer = self.call("POST", &format!("/nodes/{id}/faults"), Some(body))?;
        answer["id"]
            .as_u64()
            .ok_or_else(|| KitError::Call(format!("no rule id in {answer}")))
    }

    /// Node `id`'s rules, each with how often it fired: `{"rules": [...]}`.
    pub fn faults(&self, id: i32) -> Result<Value, KitError> {
        self.call("GET", &format!("/nodes/{id}/faults"), None)
    }

    /// Removes every rule of node `id`.
    pub fn clear_faults(&self, id: i32) -> Result<Value, KitError> {
        self.call("DELETE", &format!("/nodes/{id}/faults"), None)
    }

    /// A merged JSON view (`cluster`, `partitions?topic=T`, `producers`, `groups`;
    /// docs/STATE-VIEWS.md): `{"nodes": {"1": node 1's view, ...}}`.
    pub fn view(&self, name: &str) -> Result<Value, KitError> {
        Ok(self.views().get(&format!("/v1/{name}"))?)
    }

    /// The supervisor's merged views, read as [`brook_tools::wait`] reads a node's.
    fn views(&self) -> Views {
        Views::new(self.supervisor.clone())
    }

    /// Waits until some node leads `topic`-`partition` and `accept` takes its entry.
    fn await_leader_entry<T>(
        &self,
        what: &str,
        topic: &str,
        partition: i32,
        timeout: Duration,
        mut accept: impl FnMut(i32, &Value) -> Option<T>,
    ) -> Result<T, KitError> {
        let path = format!("/v1/partitions?topic={topic}");
        Ok(self.views().wait_until(
            what,
            timeout,
            |v| v.get(&path),
            |merged| {
                let nodes = merged["nodes"].as_object()?;
                nodes.iter().find_map(|(id, view)| {
                    let entry = view["partitions"]
                        .as_array()?
                        .iter()
                        .find(|p| p["partition"] == partition && p["role"] == "leader")?;
                    accept(id.parse().ok()?, entry)
                })
            },
        )?)
    }

    /// The node leading `topic`-`partition`, once there is one.
    pub fn leader(&self, topic: &str, partition: i32, timeout: Duration) -> Result<i32, KitError> {
        let what = format!("{topic}-{partition}: a leader");
        self.await_leader_entry(&what, topic, partition, timeout, |id, _| Some(id))
    }

    /// Waits until the leader of `topic`-`partition` has an ISR of `size`.
    pub fn await_isr_size(
        &self,
        topic: &str,
        partition: i32,
        size: usize,
        timeout: Duration,
    ) -> Result<Value, KitError> {
        let what = format!("{topic}-{partition}: an ISR of {size}");
        self.await_leader_entry(&what, topic, partition, timeout, |_, p| {
            (p["isr"].as_array().map(Vec::len) == Some(size)).then(|| p.clone())
        })
    }

    /// Waits until the leader's high watermark of `topic`-`partition` is at least `offset`.
    pub fn await_high_watermark(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        timeout: Duration,
    ) -> Result<i64, KitError> {
        let what = format!("{topic}-{partition}: a high watermark of at least {offset}");
        self.await_leader_entry(&what, topic, partition, timeout, |_, p| {
            p["high_watermark"].as_i64().filter(|hw| *hw >= offset)
        })
    }

    /// Waits until the group's coordinator has it `Stable` at a generation (classic) or
    /// group epoch (consumer) of at least `generation`.
    pub fn await_stable_group(
        &self,
        group_id: &str,
        generation: i64,
        timeout: Duration,
    ) -> Result<Value, KitError> {
        let what = format!("group {group_id}: Stable at generation {generation} or later");
        Ok(self.views().wait_until(
            &what,
            timeout,
            |v| v.get("/v1/groups"),
            |merged| {
                merged["nodes"].as_object()?.values().find_map(|view| {
                    view["groups"].as_array()?.iter().find_map(|g| {
                        let stable = g["group_id"] == group_id
                            && g["state"] == "Stable"
                            && g["generation"].as_i64().is_some_and(|n| n >= generation);
                        stable.then(|| g.clone())
                    })
                })
            },
        )?)
    }
}

impl Cluster {
    /// SIGKILLs every running node through the supervisor, which answers once it has reaped
    /// it. Errors are left to `drop`'s bound: a node that exited meanwhile answers 409, and a
    /// supervisor that does not answer is killed there.
    fn kill_nodes(&self) {
        let Ok(answer) = self.call("GET", "/nodes", None) else {
            return;
        };
        let nodes = answer["nodes"].as_array().cloned().unwrap_or_default();
        for node in nodes.iter().filter(|n| n["alive"] == true) {
            if let Some(id) = node["id"].as_i64() {
                let _ = self.node_op(id as i32, "kill");
            }
        }
    }
}

impl Drop for Cluster {
    /// Kills every node (SIGKILL), then closes the supervisor's stdin: it exits. The cluster
    /// is thrown away, as the Java kit's `close()` and Testcontainers do: a clean stop of
    /// every node at once would wait, since each node's controlled shutdown (Kafka's
    /// `BrokerServer.shutdown`) needs the metadata quorum to commit it, and once most voters
    /// have gone the last ones give up only after `broker.session.timeout.ms`. What a node
    /// acknowledged is on disk either way; [`Cluster::stop_node`] is the clean shutdown of
    /// one node.
    fn drop(&mut self) {
        self.kill_nodes();
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh directory under the system's temporary directory, removed on drop: a field of
/// [`Cluster`], so after `Cluster::drop` has waited for the supervisor to exit.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path =
            std::env::temp_dir().join(format!("brook-testkit-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path)?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_file(name: &str, bytes: &[u8]) -> (TempDir, PathBuf) {
        let dir = TempDir::new().expect("temp dir");
        let path = dir.0.join(name);
        std::fs::write(&path, bytes).expect("write");
        (dir, path)
    }

    #[test]
    fn a_file_that_is_not_an_executable_for_this_machine_is_refused_with_the_reason() {
        let (_d, script) = write_file("brook", b"#!/bin/sh\necho READY\n");
        let err = check_binary(&script).unwrap_err();
        assert!(err.contains("no ELF header"), "{err}");

        // An ELF header for another machine: e_machine 2 (SPARC), little endian.
        let mut header = [0u8; 64];
        header[..4].copy_from_slice(b"\x7fELF");
        header[5] = 1;
        header[18] = 2;
        let (_d, foreign) = write_file("brook", &header);
        let err = check_binary(&foreign).unwrap_err();
        assert!(err.contains("built for ELF machine 2"), "{err}");
    }

    /// The project's own build: `$BROOK_BIN`, else the workspace's debug binary.
    fn brook_bin() -> PathBuf {
        std::env::var_os("BROOK_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/brook")
            })
    }

    /// Dropping a 3-node cluster kills its nodes: a clean stop of all three at once waited
    /// out `broker.session.timeout.ms` (3 s with the kit's timings) before the last exited.
    const DROP_MAX: Duration = Duration::from_secs(2);

    #[test]
    fn dropping_three_nodes_is_quick_and_leaves_no_process() {
        let cluster = Cluster::builder()
            .bin(brook_bin())
            .nodes(3)
            .start()
            .unwrap();
        let mut pids = vec![cluster.child.id()];
        let nodes = cluster.call("GET", "/nodes", None).unwrap();
        for n in nodes["nodes"].as_array().unwrap() {
            pids.push(n["pid"].as_u64().unwrap() as u32);
        }
        let t0 = Instant::now();
        drop(cluster);
        let took = t0.elapsed();
        // Reaped by the supervisor (nodes) or by the drop (supervisor): no /proc entry left.
        let left: Vec<u32> = pids
            .into_iter()
            .filter(|p| Path::new(&format!("/proc/{p}")).exists())
            .collect();
        assert!(left.is_empty(), "processes {left:?} outlived the drop");
        assert!(took < DROP_MAX, "dropping 3 nodes took {took:?}");
    }

    #[test]
    fn a_key_kafka_does_not_declare_is_one_error_naming_it() {
        let err = Cluster::builder()
            .bin(brook_bin())
            .config("no.such.key", "1")
            .start()
            .err()
            .expect("refused");
        let text = err.to_string();
        assert!(
            text.contains(r#"unknown config key "no.such.key""#),
            "{text}"
        );
    }
}
