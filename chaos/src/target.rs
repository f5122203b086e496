//! The clusters a run can target: a `brook cluster` (through its supervisor's HTTP API and the
//! nodes' fault admin API) or the reference Apache Kafka 4.4 cluster of
//! `scripts/kafka-reference` (by pid: SIGKILL, SIGSTOP; restarted by running the node's own
//! command line again).

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::Value;

use crate::security::ClientSecurity;

/// How long a cluster may take to start (a JVM cluster on a loaded machine is slow).
pub const CLUSTER_START_TIMEOUT: Duration = Duration::from_secs(240);
/// How long a restarted node may take to be ready again.
pub const NODE_START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a SIGKILLed process may take to be gone.
pub const KILL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a node may take to exit after SIGTERM (a Kafka broker's controlled shutdown
/// moves its leaderships first).
pub const TERM_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on one HTTP call to a supervisor or an admin listener (a start waits for READY).
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(130);

/// A cluster the nemesis can break.
pub trait Target {
    /// `brook` or `kafka`.
    fn name(&self) -> &'static str;
    fn bootstrap(&self) -> String;
    fn node_ids(&self) -> Vec<i32>;
    /// The node's pid while it runs.
    fn pid(&mut self, id: i32) -> Result<Option<u32>, String>;
    /// SIGKILL; returns once the process is gone.
    fn kill(&mut self, id: i32) -> Result<(), String>;
    /// SIGTERM (the node shuts down in order); returns once the process is gone.
    fn terminate(&mut self, id: i32) -> Result<(), String>;
    /// Starts a stopped node with its configuration and data; returns once it serves.
    fn start(&mut self, id: i32) -> Result<(), String>;
    /// Installs a fault rule (the JSON of `docs/FAULTS.md`) on node `id`; `Ok(None)` when the
    /// target has no fault API (Kafka).
    fn add_rule(&mut self, id: i32, rule: Value) -> Result<Option<u64>, String>;
    /// Removes rule `rule` of node `id`, if it runs.
    fn remove_rule(&mut self, id: i32, rule: u64) -> Result<(), String>;
    /// Removes every fault rule of node `id`, if it runs and has a fault API.
    fn clear_rules(&mut self, id: i32) -> Result<(), String>;
    /// Keeps the nodes' data directory after the run, when the run made one (it is deleted
    /// otherwise), and says where it is: a failed run's logs are its evidence. `brook dump-log`
    /// on a partition directory there shows each batch's producer id, epoch and sequences, which
    /// tell a broker that failed to deduplicate from a client that re-sent under a new epoch.
    fn keep_data(&mut self) -> Option<PathBuf> {
        None
    }
    /// Responses the nodes could not encode so far (`brook_response_encode_failures_total`):
    /// Brook's own bug, which a client sees as a closed connection. Kafka has no such count.
    fn encode_failures(&mut self) -> Result<u64, String> {
        Ok(0)
    }
    /// How clients reach the nodes: TLS and SASL settings, none for PLAINTEXT.
    fn client_security(&self) -> ClientSecurity {
        ClientSecurity::plaintext()
    }
}

/// The sum of `brook_response_encode_failures_total` over every series of a `/metrics` text.
pub fn encode_failures_in(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("brook_response_encode_failures_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// Sends `sig` to `pid`.
pub fn signal(pid: u32, sig: Signal) -> Result<(), String> {
    let target = i32::try_from(pid).map_err(|_| format!("pid {pid} out of range"))?;
    nix::sys::signal::kill(Pid::from_raw(target), sig)
        .map_err(|e| format!("kill({pid}, {sig}): {e}"))
}

/// Whether `pid` names a live (not zombie) process.
fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

fn http_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(HTTP_TIMEOUT))
        .build()
        .into()
}

/// `request` with an `Authorization` value, when there is one.
fn with_auth<B>(
    request: ureq::RequestBuilder<B>,
    auth: &Option<String>,
) -> ureq::RequestBuilder<B> {
    match auth {
        Some(v) => request.header("Authorization", v),
        None => request,
    }
}

/// One JSON call; `Err` with the body's `error` on a non-2xx answer.
fn http_json(method: &str, url: &str, body: Option<&Value>) -> Result<Value, String> {
    let agent = http_agent();
    // `BROOK_HTTP_CREDENTIALS=user:password` for a cluster started with `--http-auth`.
    let a = brook_protocol_tests::cluster::http_client_authorization()?;
    let resp = match (method, body) {
        ("POST", Some(b)) => with_auth(agent.post(url), &a).send_json(b),
        ("POST", None) => with_auth(agent.post(url), &a).send_empty(),
        ("DELETE", _) => with_auth(agent.delete(url), &a).call(),
        _ => with_auth(agent.get(url), &a).call(),
    }
    .map_err(|e| format!("{method} {url}: {e}"))?;
    let status = resp.status();
    let value: Value = resp
        .into_body()
        .read_json()
        .map_err(|e| format!("{method} {url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("{method} {url}: {status}: {}", value["error"]));
    }
    Ok(value)
}

/// Reads `child`'s stdout lines on a thread; returns the first line starting with `prefix`
/// within `timeout`, or `Err` with the lines seen. Later lines are echoed to stderr with
/// `echo` in front, so a node that dies on its own shows up in the run's output.
fn await_line(
    child: &mut Child,
    prefix: &'static str,
    timeout: Duration,
    echo: &'static str,
) -> Result<String, String> {
    let stdout = child.stdout.take().ok_or("child without stdout")?;
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut found = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if found {
                eprintln!("{echo}{line}");
            } else if line.starts_with(prefix) {
                found = true;
                let _ = tx.send(line);
            }
        }
    });
    rx.recv_timeout(timeout)
        .map_err(|_| format!("no `{prefix}` line within {timeout:?}"))
}

/// The `key=value` field of a line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Stops a child we started: SIGTERM, then SIGKILL after `grace`.
fn stop_child(child: &mut Child, grace: Duration) {
    let _ = signal(child.id(), Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Spawns `cmd` with `--override K=V` for each of `overrides` (the flag of `brook cluster` and
/// of `scripts/kafka-reference` alike), stdout piped.
fn spawn_with_overrides(mut cmd: Command, overrides: &[(String, String)]) -> Result<Child, String> {
    for (k, v) in overrides {
        cmd.arg("--override").arg(format!("{k}={v}"));
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped());
    cmd.spawn()
        .map_err(|e| format!("spawn {:?}: {e}", cmd.get_program()))
}

fn temp_dir(prefix: &str) -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes; the pause only paces the loop.
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ------------------------------------------------------------------------------------ Brook

/// A `brook cluster`, started by this run or already running (`--supervisor`).
pub struct BrookCluster {
    supervisor: String,
    bootstrap: String,
    ids: Vec<i32>,
    /// The `brook cluster` process, when this run started it.
    child: Option<Child>,
    _dir: Option<tempfile::TempDir>,
    /// Encode failures counted by node incarnations this run killed: read just before each
    /// kill, since a restarted node counts from zero.
    encode_failures_of_killed: u64,
    /// The client settings of a secured cluster (PLAINTEXT otherwise).
    security: ClientSecurity,
}

impl BrookCluster {
    /// Starts `brook cluster --nodes N --base-port 0` (free ports) from `bin` with `overrides`,
    /// its data in `data_dir` (a temp dir when `None`), and waits for `CLUSTER READY`.
    pub fn start(
        bin: &Path,
        nodes: usize,
        data_dir: Option<PathBuf>,
        overrides: &[(String, String)],
    ) -> Result<BrookCluster, String> {
        Self::launch(bin, nodes, data_dir, overrides, false)
    }

    /// [`BrookCluster::start`] with `brook cluster --secure --sasl`: SASL_SSL with
    /// SCRAM-SHA-512 on the client listener, which is also the inter-broker one, and mutual
    /// TLS on the controller listener. The run's clients use the librdkafka settings the
    /// supervisor writes and names on its `CLUSTER READY` line (`librdkafka=`).
    pub fn start_secure(
        bin: &Path,
        nodes: usize,
        data_dir: Option<PathBuf>,
        overrides: &[(String, String)],
    ) -> Result<BrookCluster, String> {
        Self::launch(bin, nodes, data_dir, overrides, true)
    }

    fn launch(
        bin: &Path,
        nodes: usize,
        data_dir: Option<PathBuf>,
        overrides: &[(String, String)],
        secure: bool,
    ) -> Result<BrookCluster, String> {
        let (dir, tmp) = match data_dir {
            Some(d) => (d, None),
            None => {
                let t = temp_dir("brook-chaos-")?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let mut cmd = Command::new(bin);
        cmd.args(["cluster", "--base-port", "0", "--supervisor-listener"])
            .arg("127.0.0.1:0")
            .arg("--nodes")
            .arg(nodes.to_string())
            .arg("--data-dir")
            .arg(&dir);
        if secure {
            cmd.args(["--secure", "--sasl"]);
        }
        let mut child = spawn_with_overrides(cmd, overrides)?;
        let line = match await_line(
            &mut child,
            "CLUSTER READY",
            CLUSTER_START_TIMEOUT,
            "brook cluster: ",
        ) {
            Ok(l) => l,
            Err(e) => {
                stop_child(&mut child, Duration::from_secs(30));
                return Err(format!("brook cluster (data in {}): {e}", dir.display()));
            }
        };
        eprintln!("{line} data={}", dir.display());
        let supervisor = field(&line, "supervisor").ok_or("CLUSTER READY without supervisor=")?;
        let mut c = BrookCluster::attach(supervisor)?;
        c.child = Some(child);
        c._dir = tmp;
        if secure {
            let file = field(&line, "librdkafka").ok_or("CLUSTER READY without librdkafka=")?;
            c.security = ClientSecurity::from_librdkafka_file(Path::new(file))?;
        }
        Ok(c)
    }

    /// A cluster already run by the supervisor at `supervisor` (HOST:PORT).
    pub fn attach(supervisor: &str) -> Result<BrookCluster, String> {
        let mut c = BrookCluster {
            supervisor: supervisor.to_string(),
            bootstrap: String::new(),
            ids: Vec::new(),
            child: None,
            _dir: None,
            encode_failures_of_killed: 0,
            security: ClientSecurity::plaintext(),
        };
        let nodes = c.nodes()?;
        c.ids = nodes
            .iter()
            .filter_map(|n| n["id"].as_i64())
            .map(|i| i as i32)
            .collect();
        c.bootstrap = nodes
            .iter()
            .filter_map(|n| n["client"].as_str())
            .collect::<Vec<_>>()
            .join(",");
        if c.ids.is_empty() || c.bootstrap.is_empty() {
            return Err(format!(
                "supervisor {supervisor} lists no nodes with a client address"
            ));
        }
        Ok(c)
    }

    /// The supervisor's HTTP address (HOST:PORT).
    pub fn supervisor(&self) -> &str {
        &self.supervisor
    }

    fn nodes(&self) -> Result<Vec<Value>, String> {
        let v = http_json("GET", &format!("http://{}/nodes", self.supervisor), None)?;
        v["nodes"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("GET /nodes: no nodes in {v}"))
    }

    fn node(&self, id: i32) -> Result<Value, String> {
        self.nodes()?
            .into_iter()
            .find(|n| n["id"].as_i64() == Some(id as i64))
            .ok_or_else(|| format!("the supervisor has no node {id}"))
    }

    /// Node `id`'s encode failures while it runs (0 when it does not).
    fn node_encode_failures(&self, id: i32) -> Result<u64, String> {
        let Some(admin) = self.admin(id)? else {
            return Ok(0);
        };
        let url = format!("http://{admin}/metrics");
        let text = http_agent()
            .get(&url)
            .call()
            .map_err(|e| format!("GET {url}: {e}"))?
            .into_body()
            .read_to_string()
            .map_err(|e| format!("GET {url}: {e}"))?;
        Ok(encode_failures_in(&text))
    }

    /// The admin listener of node `id` while it runs.
    fn admin(&self, id: i32) -> Result<Option<String>, String> {
        let n = self.node(id)?;
        if n["alive"].as_bool() != Some(true) {
            return Ok(None);
        }
        Ok(n["admin"].as_str().map(str::to_string))
    }
}

impl Target for BrookCluster {
    fn keep_data(&mut self) -> Option<PathBuf> {
        self._dir.take().map(|t| t.keep())
    }

    fn name(&self) -> &'static str {
        "brook"
    }

    fn client_security(&self) -> ClientSecurity {
        self.security.clone()
    }

    fn bootstrap(&self) -> String {
        self.bootstrap.clone()
    }

    fn node_ids(&self) -> Vec<i32> {
        self.ids.clone()
    }

    fn pid(&mut self, id: i32) -> Result<Option<u32>, String> {
        let n = self.node(id)?;
        if n["alive"].as_bool() != Some(true) {
            return Ok(None);
        }
        Ok(n["pid"].as_u64().map(|p| p as u32))
    }

    fn kill(&mut self, id: i32) -> Result<(), String> {
        // A node that does not answer its metrics is counted as 0: the kill matters more.
        self.encode_failures_of_killed += self.node_encode_failures(id).unwrap_or(0);
        let url = format!("http://{}/nodes/{id}/kill", self.supervisor);
        http_json("POST", &url, None).map(|_| ())
    }

    fn terminate(&mut self, id: i32) -> Result<(), String> {
        self.encode_failures_of_killed += self.node_encode_failures(id).unwrap_or(0);
        // The supervisor answers once the node exited (or says it did not in time).
        let url = format!("http://{}/nodes/{id}/kill?signal=term", self.supervisor);
        http_json("POST", &url, None).map(|_| ())
    }

    fn encode_failures(&mut self) -> Result<u64, String> {
        let mut n = self.encode_failures_of_killed;
        for id in self.ids.clone() {
            n += self.node_encode_failures(id)?;
        }
        Ok(n)
    }

    fn start(&mut self, id: i32) -> Result<(), String> {
        let url = format!("http://{}/nodes/{id}/start", self.supervisor);
        http_json("POST", &url, None).map(|_| ())
    }

    fn add_rule(&mut self, id: i32, rule: Value) -> Result<Option<u64>, String> {
        let admin = self
            .admin(id)?
            .ok_or_else(|| format!("node {id} does not run: no admin listener"))?;
        let v = http_json("POST", &format!("http://{admin}/faults"), Some(&rule))?;
        Ok(v["id"].as_u64())
    }

    fn remove_rule(&mut self, id: i32, rule: u64) -> Result<(), String> {
        match self.admin(id)? {
            Some(admin) => {
                http_json("DELETE", &format!("http://{admin}/faults/{rule}"), None).map(|_| ())
            }
            None => Ok(()),
        }
    }

    fn clear_rules(&mut self, id: i32) -> Result<(), String> {
        match self.admin(id)? {
            Some(admin) => http_json("DELETE", &format!("http://{admin}/faults"), None).map(|_| ()),
            None => Ok(()),
        }
    }
}

impl Drop for BrookCluster {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // The supervisor stops its nodes (SIGTERM, then SIGKILL after 30 s) on SIGTERM.
            stop_child(&mut c, Duration::from_secs(45));
        }
    }
}

// ------------------------------------------------------------------------------------ Kafka

/// One node of the reference cluster.
struct KafkaNode {
    pid: Option<u32>,
    /// The process, when this run (re)started it and must reap it.
    child: Option<Child>,
    /// Its command line as `scripts/kafka-reference start` ran it, read from /proc.
    argv: Vec<String>,
    client_port: u16,
}

/// An Apache Kafka 4.4 cluster of `scripts/kafka-reference` (3 nodes, or 1), started by this run.
pub struct KafkaCluster {
    script: PathBuf,
    data: PathBuf,
    nodes: Vec<KafkaNode>,
    _dir: tempfile::TempDir,
}

/// The ports a base-port pick may use: clear of the kernel's ephemeral range, from which
/// outgoing connections take their local ports. A port picked free inside it can be taken by
/// such a connection before the JVM binds it (both times the quota benchmark's reference
/// cluster failed to start), so picks come from below it.
const BASE_PORT_RANGE: std::ops::Range<u16> = 20000..32000;
/// The attempts of one pick.
const BASE_PORT_PROBES_MAX: u32 = 200;

/// The kernel's ephemeral port range (`/proc/sys/net/ipv4/ip_local_port_range`), if readable.
fn ephemeral_ports() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<u16>().ok());
    Some((it.next()??, it.next()??))
}

/// The ports of a Kafka cluster at base `base`: each node's client port and controller port.
fn cluster_ports(base: u16, n: u16) -> impl Iterator<Item = u16> {
    (0..n).flat_map(move |i| [base + i, base + 100 + i])
}

/// A base port P with P..P+n and P+100..P+100+n all free now and outside the ephemeral
/// range (`ephemeral`, low and high inclusive). This is the one place the reference cluster's
/// ports are chosen (the chaos tool and the benchmarks start it through [`KafkaCluster::start`]).
fn free_base_port_in(n: u16, ephemeral: Option<(u16, u16)>) -> Result<u16, String> {
    let span = BASE_PORT_RANGE.end - BASE_PORT_RANGE.start - 100 - n;
    // Parallel runs (several helpers, a chaos run next to a benchmark) start from different
    // places, so they rarely probe the same ports.
    let seed = std::process::id()
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
    for k in 0..BASE_PORT_PROBES_MAX {
        let offset = (seed.wrapping_add(k.wrapping_mul(7919)) % u32::from(span)) as u16;
        let base = BASE_PORT_RANGE.start + offset;
        let ephemeral_clash = |p: u16| ephemeral.is_some_and(|(lo, hi)| (lo..=hi).contains(&p));
        if cluster_ports(base, n).any(ephemeral_clash) {
            continue;
        }
        if cluster_ports(base, n).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return Ok(base);
        }
    }
    Err(format!(
        "no free base port for the Kafka cluster in {BASE_PORT_RANGE:?} \
         (ephemeral range {ephemeral:?})"
    ))
}

fn free_base_port(n: u16) -> Result<u16, String> {
    free_base_port_in(n, ephemeral_ports())
}

/// The port a node of the reference cluster failed to bind, from its log in `data`: the JVM
/// logs `java.net.BindException: Address already in use` and the listener it was binding.
fn bind_failure(data: &Path, base: u16, n: u16) -> Option<String> {
    for id in 1..=n {
        let log = std::fs::read_to_string(data.join(format!("node-{id}.log"))).unwrap_or_default();
        if !log.contains("Address already in use") {
            continue;
        }
        let ports = [base + id - 1, base + 100 + id - 1];
        let named: Vec<String> = ports
            .iter()
            .filter(|p| log.contains(&format!(":{p}")))
            .map(|p| p.to_string())
            .collect();
        let which = if named.is_empty() {
            format!("one of {ports:?}")
        } else {
            named.join(", ")
        };
        return Some(format!(
            "Kafka node {id} could not bind port {which}: Address already in use \
             (its log: {})",
            data.join(format!("node-{id}.log")).display()
        ));
    }
    None
}

impl KafkaCluster {
    /// Runs `scripts/kafka-reference start --nodes 3` in a temp dir on free ports with
    /// `overrides`, and reads each node's pid and command line.
    pub fn start(script: &Path, overrides: &[(String, String)]) -> Result<KafkaCluster, String> {
        Self::start_nodes(script, 3, overrides)
    }

    /// [`KafkaCluster::start`] with `nodes` nodes (the script takes 1 or 3): the share-group
    /// benchmark compares one node with one Brook node.
    pub fn start_nodes(
        script: &Path,
        nodes: u16,
        overrides: &[(String, String)],
    ) -> Result<KafkaCluster, String> {
        let dir = temp_dir("kafka-chaos-")?;
        let data = dir.path().to_path_buf();
        let base = free_base_port(nodes)?;
        let mut cmd = Command::new(script);
        cmd.args(["start", "--nodes", &nodes.to_string()])
            .args(["--base-port", &base.to_string()])
            .arg("--data-dir")
            .arg(&data);
        let mut child = spawn_with_overrides(cmd, overrides)?;
        let line = await_line(
            &mut child,
            "READY",
            CLUSTER_START_TIMEOUT,
            "kafka-reference: ",
        );
        let _ = child.wait();
        // The script stops at a node's bind failure; say which port rather than no READY.
        let line = line.map_err(|e| bind_failure(&data, base, nodes).unwrap_or(e))?;
        eprintln!("kafka-reference: {line}");
        let pids: Vec<u32> = field(&line, "pids")
            .ok_or("kafka-reference READY line without pids=")?
            .split(',')
            .map(|p| p.parse().map_err(|_| format!("bad pid in {line}")))
            .collect::<Result<_, _>>()?;
        let mut nodes = Vec::new();
        for (i, pid) in pids.iter().enumerate() {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map_err(|e| format!("/proc/{pid}/cmdline: {e}"))?;
            let argv = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            nodes.push(KafkaNode {
                pid: Some(*pid),
                child: None,
                argv,
                client_port: base + i as u16,
            });
        }
        Ok(KafkaCluster {
            script: script.to_path_buf(),
            data,
            nodes,
            _dir: dir,
        })
    }

    fn node_mut(&mut self, id: i32) -> Result<&mut KafkaNode, String> {
        usize::try_from(id - 1)
            .ok()
            .and_then(|i| self.nodes.get_mut(i))
            .ok_or_else(|| format!("no Kafka node {id}"))
    }

    fn log_path(&self, id: i32) -> PathBuf {
        self.data.join(format!("node-{id}.log"))
    }

    fn started_lines(&self, id: i32) -> usize {
        std::fs::read_to_string(self.log_path(id))
            .unwrap_or_default()
            .matches("Kafka Server started")
            .count()
    }
}

impl Target for KafkaCluster {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn node_ids(&self) -> Vec<i32> {
        (1..=self.nodes.len() as i32).collect()
    }

    fn pid(&mut self, id: i32) -> Result<Option<u32>, String> {
        let n = self.node_mut(id)?;
        if let Some(c) = n.child.as_mut() {
            if matches!(c.try_wait(), Ok(Some(_))) {
                n.child = None;
                n.pid = None;
            }
        }
        Ok(n.pid.filter(|p| pid_alive(*p)))
    }

    fn kill(&mut self, id: i32) -> Result<(), String> {
        let n = self.node_mut(id)?;
        let pid = n
            .pid
            .ok_or_else(|| format!("Kafka node {id} does not run"))?;
        signal(pid, Signal::SIGKILL)?;
        if let Some(mut c) = n.child.take() {
            c.wait()
                .map_err(|e| format!("wait for Kafka node {id}: {e}"))?;
        } else if !wait_for(KILL_TIMEOUT, || !pid_alive(pid)) {
            return Err(format!("Kafka node {id} (pid {pid}) survived SIGKILL"));
        }
        n.pid = None;
        Ok(())
    }

    fn terminate(&mut self, id: i32) -> Result<(), String> {
        let n = self.node_mut(id)?;
        let pid = n
            .pid
            .ok_or_else(|| format!("Kafka node {id} does not run"))?;
        signal(pid, Signal::SIGTERM)?;
        let exited = match n.child.as_mut() {
            Some(c) => wait_for(TERM_TIMEOUT, || matches!(c.try_wait(), Ok(Some(_)))),
            None => wait_for(TERM_TIMEOUT, || !pid_alive(pid)),
        };
        if !exited {
            return Err(format!(
                "Kafka node {id} (pid {pid}) did not exit within {TERM_TIMEOUT:?} of SIGTERM"
            ));
        }
        n.child = None;
        n.pid = None;
        Ok(())
    }

    fn start(&mut self, id: i32) -> Result<(), String> {
        let before = self.started_lines(id);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(id))
            .map_err(|e| format!("open the log of Kafka node {id}: {e}"))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let pid_file = self.data.join(format!("node-{id}.pid"));
        let n = self.node_mut(id)?;
        let (prog, args) = n.argv.split_first().ok_or("empty Kafka command line")?;
        let mut cmd = Command::new(prog);
        cmd.args(args).stdin(Stdio::null()).stdout(log).stderr(err);
        let child = cmd
            .spawn()
            .map_err(|e| format!("start Kafka node {id}: {e}"))?;
        n.pid = Some(child.id());
        let _ = std::fs::write(&pid_file, child.id().to_string());
        n.child = Some(child);
        let port = n.client_port;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let ready = wait_for(NODE_START_TIMEOUT, || {
            self.started_lines(id) > before
                && TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
        });
        if ready {
            Ok(())
        } else {
            Err(format!(
                "Kafka node {id} not started within {NODE_START_TIMEOUT:?}"
            ))
        }
    }

    fn add_rule(&mut self, _id: i32, _rule: Value) -> Result<Option<u64>, String> {
        Ok(None)
    }

    fn remove_rule(&mut self, _id: i32, _rule: u64) -> Result<(), String> {
        Ok(())
    }

    fn clear_rules(&mut self, _id: i32) -> Result<(), String> {
        Ok(())
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        for n in &self.nodes {
            if let Some(pid) = n.pid {
                // A paused node would not act on SIGTERM.
                let _ = signal(pid, Signal::SIGCONT);
            }
        }
        let _ = Command::new(&self.script)
            .args(["stop", "--timeout", "30", "--data-dir"])
            .arg(&self.data)
            .stdout(Stdio::null())
            .status();
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{encode_failures_in, free_base_port_in, BASE_PORT_RANGE};

    #[test]
    fn base_port_picks_stay_below_the_ephemeral_range() {
        for _ in 0..20 {
            let base = free_base_port_in(3, Some((32768, 60999))).expect("a free base port");
            assert!(
                BASE_PORT_RANGE.contains(&base) && base + 102 < 32768,
                "{base}"
            );
        }
        // An ephemeral range that covers the whole pick range leaves nothing to pick.
        assert!(free_base_port_in(3, Some((1024, 65535))).is_err());
    }

    #[test]
    fn encode_failures_sum_every_series_and_ignore_other_metrics() {
        let text = "# HELP brook_response_encode_failures Responses that could not be encoded.\n\
                    # TYPE brook_response_encode_failures counter\n\
                    brook_response_encode_failures_total{request=\"ListOffsets\",version=\"1\"} 0\n\
                    brook_response_encode_failures_total{request=\"ListOffsets\",version=\"3\"} 2\n\
                    brook_response_encode_failures_total{request=\"Fetch\",version=\"4\"} 1\n\
                    brook_requests_total{request=\"Fetch\",version=\"4\"} 9\n";
        assert_eq!(encode_failures_in(text), 3);
        assert_eq!(encode_failures_in("brook_requests_total 5\n"), 0);
    }
}
