//! `brook cluster`: a local cluster of `brook serve` child processes under one supervisor.
//!
//! The supervisor re-executes the current binary once per node (`brook serve` with Kafka's
//! KRaft keys: `process.roles=broker,controller`, a PLAINTEXT and a CONTROLLER listener,
//! `controller.quorum.voters`, an admin listener and a data directory per node), waits for
//! each child's `READY` line, then prints one line scripts can wait for:
//!
//! ```text
//! CLUSTER READY bootstrap=127.0.0.1:9092,... supervisor=127.0.0.1:9600 admins=1@127.0.0.1:9644,...
//! ```
//!
//! Children's stdout and stderr go to `<data-dir>/node-N.log`. A child that exits without
//! being asked to is reported (`NODE EXITED ... unexpected` on stdout) and stays dead until
//! it is started again: chaos tests rely on a killed node staying down.
//!
//! The supervisor's HTTP API (`--supervisor-listener`, default `127.0.0.1:9600`):
//! - `GET /nodes`: every node's id, pid, liveness, ports, log file and last exit;
//! - `POST /nodes/{id}/kill`: SIGKILL (`?signal=term`: SIGTERM), answered once the process
//!   has exited;
//! - `POST /nodes/{id}/restart`: stops the node if it runs (SIGTERM, then SIGKILL after
//!   [`STOP_GRACE`]), starts it with the same configuration and data, answers once `READY`;
//! - `POST /nodes/{id}/start`: starts a stopped node, answers once `READY` (409 if it runs);
//! - `POST /nodes/{id}/pause`, `/resume`: SIGSTOP and SIGCONT (a paused node keeps its
//!   connections but answers nothing, as a stalled process would);
//! - `GET|POST|DELETE /nodes/{id}/faults[/{rule}]`: the node's fault API, forwarded;
//! - `GET /v1/cluster`, `/v1/partitions`, `/v1/producers`, `/v1/groups`: every node's view
//!   under its id; `GET /v1/events`: every node's event stream merged with the supervisor's
//!   own events (node started, killed, paused, resumed, exited); `GET /`: the live page
//!   ([`crate::supervisor_views`], docs/EVENTS.md).
//!
//! SIGTERM or Ctrl-C stops the cluster: every child gets SIGTERM, the supervisor waits for
//! them ([`STOP_GRACE`], then SIGKILL), then exits. Children run in their own process group,
//! so a terminal's Ctrl-C reaches only the supervisor, which then stops them in order. If the
//! supervisor itself is killed with SIGKILL, its children keep running.
//!
//! Ports: client ports are `--base-port` + i, controller ports `--controller-base-port`
//! (default base + [`CONTROLLER_PORT_OFFSET`]) + i, admin ports `--admin-base-port` (default
//! base + [`ADMIN_PORT_OFFSET`]) + i. With `--base-port 0` the supervisor picks free ports
//! for every listener before it starts the nodes (tests use this; read them from the
//! `CLUSTER READY` line or `GET /nodes`); they are kept across restarts. With
//! `--config-dir`, ports come from the files, and a port 0 there is read back from the
//! child's `READY` line.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::BrokerConfig;
use crate::events::EventLog;
use crate::supervisor_views::NodeTarget;

/// Nodes started when `--nodes` is not given.
pub const DEFAULT_NODES: usize = 3;
/// Largest `--nodes`.
pub const MAX_NODES: usize = 64;
/// First client port by default (node 1: 9092, node 2: 9093, ...).
pub const DEFAULT_BASE_PORT: u16 = 9092;
/// Controller ports are the client ports plus this (9192, 9193, ...).
pub const CONTROLLER_PORT_OFFSET: u16 = 100;
/// Admin ports are the client ports plus this (9644, 9645, ...).
pub const ADMIN_PORT_OFFSET: u16 = 552;
/// The supervisor's HTTP listener by default.
pub const DEFAULT_SUPERVISOR_LISTENER: &str = "127.0.0.1:9600";
/// How long a SIGTERMed child has to exit before it gets SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(30);
/// How long a SIGKILLed child may take to be reaped before the supervisor gives up on it.
pub const KILL_WAIT: Duration = Duration::from_secs(10);
/// Longest line read from a child's stdout; longer lines are split.
pub const MAX_STDOUT_LINE: u64 = 64 << 10;

/// `brook cluster` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArgs {
    /// How many nodes (node ids 1..=N; all of them are controller quorum voters).
    #[arg(long, default_value_t = DEFAULT_NODES)]
    pub nodes: usize,
    /// Client port of node 1; node i listens on base + i - 1. 0 picks free ports for every
    /// listener (controller and admin included) and keeps them across restarts.
    #[arg(long, default_value_t = DEFAULT_BASE_PORT)]
    pub base_port: u16,
    /// Controller port of node 1 (default: base port + 100).
    #[arg(long)]
    pub controller_base_port: Option<u16>,
    /// Admin port of node 1 (default: base port + 552, i.e. 9644 for 9092).
    #[arg(long)]
    pub admin_base_port: Option<u16>,
    /// Node N keeps its data in `<data-dir>/node-N` and logs to `<data-dir>/node-N.log`.
    #[arg(long, default_value = "./data")]
    pub data_dir: PathBuf,
    /// Reads `node-N.properties` from this directory instead of generating the settings
    /// (ports and data directories then come from the files).
    #[arg(long)]
    pub config_dir: Option<PathBuf>,
    /// Overrides one property on every node (repeatable), after the generated settings or
    /// the files.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Where the supervisor's HTTP API listens (port 0: a free port, printed on the
    /// `CLUSTER READY` line).
    #[arg(long, default_value = DEFAULT_SUPERVISOR_LISTENER)]
    pub supervisor_listener: SocketAddr,
    /// How long each node may take to print READY, at start and on restart.
    #[arg(long, default_value_t = 60)]
    pub ready_timeout_secs: u64,
    /// How many events the merged `/v1/events` stream keeps for replay.
    #[arg(long, default_value_t = 10_000)]
    pub event_buffer_len_max: usize,
}

/// How one node is started; fixed for the life of the supervisor, except that ports picked
/// by the child (port 0) are written back after its first READY.
#[derive(Debug, Clone)]
struct NodePlan {
    id: i32,
    /// `--config` of `brook serve` (with `--config-dir`).
    config_file: Option<PathBuf>,
    /// Generated listeners (without `--config-dir`): client, controller, admin.
    generated: Option<GeneratedPorts>,
    /// `controller.quorum.voters`, shared by every node (generated mode).
    voters: String,
    log_dirs: PathBuf,
    /// The user's `--override`s.
    overrides: Vec<String>,
    log_file: PathBuf,
    client: Option<SocketAddr>,
    controller: Option<SocketAddr>,
    admin: Option<SocketAddr>,
}

#[derive(Debug, Clone, Copy)]
struct GeneratedPorts {
    client: u16,
    controller: u16,
    admin: u16,
}

/// The properties every node gets in generated mode, in order, before `--override`s; equal
/// to `config/cluster/node-N.properties` (a test checks it).
fn generated_properties(
    id: i32,
    ports: GeneratedPorts,
    voters: &str,
    log_dirs: &Path,
) -> Vec<(String, String)> {
    let kv = |k: &str, v: String| (k.to_string(), v);
    vec![
        kv("node.id", id.to_string()),
        kv("process.roles", "broker,controller".into()),
        kv(
            "listeners",
            format!(
                "PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
                ports.client, ports.controller
            ),
        ),
        kv("controller.listener.names", "CONTROLLER".into()),
        kv("controller.quorum.voters", voters.to_string()),
        kv("admin.listener", format!("127.0.0.1:{}", ports.admin)),
        kv("log.dirs", log_dirs.display().to_string()),
    ]
}

impl NodePlan {
    /// The arguments of `brook serve` for this node.
    fn serve_args(&self) -> Vec<String> {
        let mut args = vec!["serve".to_string()];
        if let Some(f) = &self.config_file {
            args.push("--config".into());
            args.push(f.display().to_string());
        }
        if let Some(ports) = self.generated {
            for (k, v) in generated_properties(self.id, ports, &self.voters, &self.log_dirs) {
                args.push("--override".into());
                args.push(format!("{k}={v}"));
            }
        }
        for o in &self.overrides {
            args.push("--override".into());
            args.push(o.clone());
        }
        args
    }
}

/// Builds the node plans from the flags. Port 0 controller ports are picked here.
fn plan(args: &ClusterArgs) -> Result<Vec<NodePlan>, String> {
    if args.nodes == 0 || args.nodes > MAX_NODES {
        return Err(format!("--nodes must be 1..={MAX_NODES}"));
    }
    let n = args.nodes as u16;
    let mut plans = Vec::new();
    if let Some(dir) = &args.config_dir {
        for id in 1..=args.nodes as i32 {
            let file = dir.join(format!("node-{id}.properties"));
            let cfg = BrokerConfig::load(Some(&file), &args.overrides)
                .map_err(|e| format!("{}: {e}", file.display()))?;
            if cfg.node_id != id {
                return Err(format!(
                    "{}: node.id is {}, expected {id}",
                    file.display(),
                    cfg.node_id
                ));
            }
            plans.push(NodePlan {
                id,
                config_file: Some(file),
                generated: None,
                voters: String::new(),
                log_dirs: cfg.log_dir.clone(),
                overrides: args.overrides.clone(),
                log_file: args.data_dir.join(format!("node-{id}.log")),
                client: (cfg.listener.port() != 0).then_some(cfg.listener),
                controller: cfg.controller_listener,
                admin: cfg.admin_listener.filter(|a| a.port() != 0),
            });
        }
        return Ok(plans);
    }
    let range = |base: u16, what: &str| -> Result<u16, String> {
        if base != 0 && base.checked_add(n - 1).is_none() {
            return Err(format!("{what} {base} + {n} nodes runs past port 65535"));
        }
        Ok(base)
    };
    let offset = |off: u16, what: &str| -> Result<u16, String> {
        if args.base_port == 0 {
            return Ok(0);
        }
        args.base_port
            .checked_add(off)
            .ok_or_else(|| format!("--base-port {} + {off} for the {what}", args.base_port))
    };
    let base = range(args.base_port, "--base-port")?;
    let controller_base = range(
        match args.controller_base_port {
            Some(p) => p,
            None => offset(CONTROLLER_PORT_OFFSET, "controller ports")?,
        },
        "--controller-base-port",
    )?;
    let admin_base = range(
        match args.admin_base_port {
            Some(p) => p,
            None => offset(ADMIN_PORT_OFFSET, "admin ports")?,
        },
        "--admin-base-port",
    )?;
    // Port 0: the supervisor picks free ports (binds port 0, notes the port, lets it go
    // once all are picked, so no two coincide). Every voter must know every controller
    // address before any node starts, and a broker registers and advertises the port its
    // configuration names, so children never get port 0.
    let mut held = Vec::new();
    let mut ports = |base: u16, what: &str| -> Result<Vec<u16>, String> {
        (0..n)
            .map(|i| {
                if base != 0 {
                    return Ok(base + i);
                }
                let l = std::net::TcpListener::bind("127.0.0.1:0")
                    .map_err(|e| format!("picking a free {what} port: {e}"))?;
                let port = l.local_addr().map_err(|e| e.to_string())?.port();
                held.push(l);
                Ok(port)
            })
            .collect()
    };
    let client_ports = ports(base, "client")?;
    let controller_ports = ports(controller_base, "controller")?;
    let admin_ports = ports(admin_base, "admin")?;
    drop(held);
    let voters = controller_ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    for i in 0..n {
        let id = i32::from(i) + 1;
        let i = i as usize;
        let ports = GeneratedPorts {
            client: client_ports[i],
            controller: controller_ports[i],
            admin: admin_ports[i],
        };
        let addr = |p: u16| (p != 0).then(|| SocketAddr::from(([127, 0, 0, 1], p)));
        plans.push(NodePlan {
            id,
            config_file: None,
            generated: Some(ports),
            voters: voters.clone(),
            log_dirs: args.data_dir.join(format!("node-{id}")),
            overrides: args.overrides.clone(),
            log_file: args.data_dir.join(format!("node-{id}.log")),
            client: addr(ports.client),
            controller: addr(ports.controller),
            admin: addr(ports.admin),
        });
    }
    Ok(plans)
}

/// What a child's `READY node.id=N listener=HOST:PORT [admin=HOST:PORT]` line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyLine {
    pub node_id: i32,
    pub listener: SocketAddr,
    pub admin: Option<SocketAddr>,
}

/// Parses a `READY` line; `None` for any other line.
pub fn parse_ready(line: &str) -> Option<ReadyLine> {
    let rest = line.trim().strip_prefix("READY ")?;
    let mut node_id = None;
    let mut listener = None;
    let mut admin = None;
    for field in rest.split_whitespace() {
        match field.split_once('=') {
            Some(("node.id", v)) => node_id = v.parse().ok(),
            Some(("listener", v)) => listener = v.parse().ok(),
            Some(("admin", v)) => admin = v.parse().ok(),
            _ => {}
        }
    }
    Some(ReadyLine {
        node_id: node_id?,
        listener: listener?,
        admin,
    })
}

/// A signal the supervisor sends a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sig {
    Kill,
    Term,
    /// SIGSTOP: pause.
    Stop,
    /// SIGCONT: resume.
    Cont,
}

impl Sig {
    fn name(self) -> &'static str {
        match self {
            Sig::Kill => "kill",
            Sig::Term => "term",
            Sig::Stop => "stop",
            Sig::Cont => "cont",
        }
    }
}

/// A child process that has not been reaped yet.
struct Running {
    pid: u32,
    signals: mpsc::Sender<Sig>,
    /// `Some(how it ended)` once reaped.
    exited: watch::Receiver<Option<String>>,
    /// The supervisor asked it to stop: its exit is not reported as unexpected.
    stopping: bool,
    /// SIGSTOPped by the supervisor and not resumed since.
    paused: bool,
}

struct NodeSlot {
    plan: NodePlan,
    running: Option<Running>,
    last_exit: Option<String>,
    starts: u32,
}

/// One node as `GET /nodes` shows it.
#[derive(Debug, Serialize)]
struct NodeView {
    id: i32,
    pid: Option<u32>,
    alive: bool,
    paused: bool,
    client: Option<String>,
    controller: Option<String>,
    admin: Option<String>,
    log: String,
    data: String,
    last_exit: Option<String>,
    starts: u32,
}

impl NodeSlot {
    fn target(&self) -> NodeTarget {
        NodeTarget {
            id: self.plan.id,
            admin: self.plan.admin,
            alive: self.running.is_some(),
            starts: self.starts,
        }
    }

    fn view(&self) -> NodeView {
        let s = |a: Option<SocketAddr>| a.map(|a| a.to_string());
        NodeView {
            id: self.plan.id,
            pid: self.running.as_ref().map(|r| r.pid),
            alive: self.running.is_some(),
            paused: self.running.as_ref().is_some_and(|r| r.paused),
            client: s(self.plan.client),
            controller: s(self.plan.controller),
            admin: s(self.plan.admin),
            log: self.plan.log_file.display().to_string(),
            data: self.plan.log_dirs.display().to_string(),
            last_exit: self.last_exit.clone(),
            starts: self.starts,
        }
    }
}

struct Supervisor {
    exe: PathBuf,
    nodes: Mutex<BTreeMap<i32, NodeSlot>>,
    ready_timeout: Duration,
    /// Set once the cluster is stopping: exits are expected, and nothing may start.
    shutting_down: watch::Sender<bool>,
    /// The merged event stream: every node's events and the supervisor's own.
    events: Arc<EventLog>,
}

/// Why a node operation failed, with the HTTP status it is answered with.
#[derive(Debug)]
struct OpError(StatusCode, String);

impl IntoResponse for OpError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

fn exit_text(status: std::io::Result<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(sig)) => format!("signal {sig}"),
            _ => s.to_string(),
        },
        Err(e) => format!("wait failed: {e}"),
    }
}

fn send_signal(pid: u32, sig: Sig) {
    let signal = match sig {
        Sig::Kill => Signal::SIGKILL,
        Sig::Term => Signal::SIGTERM,
        Sig::Stop => Signal::SIGSTOP,
        Sig::Cont => Signal::SIGCONT,
    };
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    if let Err(e) = nix::sys::signal::kill(Pid::from_raw(raw), signal) {
        tracing::warn!(pid, ?signal, error = %e, "cannot signal child");
    }
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Supervisor {
    /// Starts node `id`'s process (it must not be running) and waits for its READY line.
    async fn start(self: &Arc<Self>, id: i32) -> Result<NodeView, OpError> {
        let (ready_rx, mut exited) = {
            let mut nodes = self.nodes.lock();
            // Checked under the lock: `stop_all` sets the flag before it looks at any node,
            // so a child is either refused here or registered in time to be stopped.
            if *self.shutting_down.borrow() {
                return Err(OpError(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the cluster is stopping".into(),
                ));
            }
            let slot = nodes
                .get_mut(&id)
                .ok_or_else(|| OpError(StatusCode::NOT_FOUND, format!("no node {id}")))?;
            if let Some(r) = &slot.running {
                return Err(OpError(
                    StatusCode::CONFLICT,
                    format!("node {id} is running (pid {})", r.pid),
                ));
            }
            let (ready_rx, running) = self.spawn(&slot.plan).map_err(|e| {
                OpError(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("starting node {id}: {e}"),
                )
            })?;
            let exited = running.exited.clone();
            slot.running = Some(running);
            slot.starts += 1;
            (ready_rx, exited)
        };
        self.note("node_starting", id, json!({}));
        let log = self.log_file(id);
        let outcome = tokio::time::timeout(self.ready_timeout, async {
            tokio::select! {
                r = ready_rx => r.ok(),
                _ = exited.wait_for(|e| e.is_some()) => None,
            }
        })
        .await;
        match outcome {
            Ok(Some(ready)) => {
                let mut nodes = self.nodes.lock();
                let slot = nodes
                    .get_mut(&id)
                    .ok_or_else(|| OpError(StatusCode::NOT_FOUND, format!("no node {id}")))?;
                slot.plan.client = Some(ready.listener);
                if ready.admin.is_some() {
                    slot.plan.admin = ready.admin;
                }
                // Keep ports the child picked (port 0) for its restarts.
                if let Some(ports) = &mut slot.plan.generated {
                    ports.client = ready.listener.port();
                    if let Some(a) = ready.admin {
                        ports.admin = a.port();
                    }
                }
                let view = slot.view();
                drop(nodes);
                self.note("node_started", id, json!({ "pid": view.pid }));
                Ok(view)
            }
            Ok(None) => Err(OpError(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "node {id} exited before READY ({}); see {log}",
                    exited.borrow().clone().unwrap_or_default()
                ),
            )),
            Err(_) => Err(OpError(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "node {id} not READY within {:?} (still running); see {log}",
                    self.ready_timeout
                ),
            )),
        }
    }

    fn log_file(&self, id: i32) -> String {
        self.nodes
            .lock()
            .get(&id)
            .map(|s| s.plan.log_file.display().to_string())
            .unwrap_or_default()
    }

    /// Spawns the child process and its two tasks: one copies stdout to the log file and
    /// spots READY; one reaps the child and sends it signals.
    fn spawn(
        self: &Arc<Self>,
        plan: &NodePlan,
    ) -> std::io::Result<(oneshot::Receiver<ReadyLine>, Running)> {
        if let Some(dir) = plan.log_file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::create_dir_all(&plan.log_dirs)?;
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&plan.log_file)?;
        let args = plan.serve_args();
        writeln!(
            log,
            "=== brook cluster: starting node {} at unix time {}: {} {}",
            plan.id,
            unix_secs(),
            self.exe.display(),
            args.join(" ")
        )?;
        let stderr = log.try_clone()?;
        let mut child = Command::new(&self.exe)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            // Its own process group: a terminal's Ctrl-C reaches only the supervisor, which
            // then stops the children in order.
            .process_group(0)
            .kill_on_drop(false)
            .spawn()?;
        let pid = child.id().unwrap_or(0);
        let (ready_tx, ready_rx) = oneshot::channel();
        if let Some(stdout) = child.stdout.take() {
            let log = tokio::fs::File::from_std(log);
            tokio::spawn(copy_stdout(plan.id, stdout, log, ready_tx));
        }
        let (sig_tx, sig_rx) = mpsc::channel(4);
        let (exit_tx, exit_rx) = watch::channel(None);
        tokio::spawn(self.clone().reap(plan.id, pid, child, sig_rx, exit_tx));
        Ok((
            ready_rx,
            Running {
                pid,
                signals: sig_tx,
                exited: exit_rx,
                stopping: false,
                paused: false,
            },
        ))
    }

    /// Waits for the child to exit, sending it the signals asked for meanwhile; then marks
    /// the node dead and reports an exit nobody asked for.
    async fn reap(
        self: Arc<Self>,
        id: i32,
        pid: u32,
        mut child: Child,
        mut signals: mpsc::Receiver<Sig>,
        exited: watch::Sender<Option<String>>,
    ) {
        let status = loop {
            tokio::select! {
                status = child.wait() => break exit_text(status),
                Some(sig) = signals.recv() => match sig {
                    // Through the handle: no risk of signalling a recycled pid.
                    Sig::Kill => {
                        if let Err(e) = child.start_kill() {
                            tracing::warn!(node = id, error = %e, "SIGKILL failed");
                        }
                    }
                    other => send_signal(pid, other),
                },
            }
        };
        let expected = {
            let mut nodes = self.nodes.lock();
            match nodes.get_mut(&id) {
                Some(slot) if slot.running.as_ref().is_some_and(|r| r.pid == pid) => {
                    let stopping = slot.running.as_ref().is_some_and(|r| r.stopping);
                    slot.running = None;
                    slot.last_exit = Some(status.clone());
                    stopping || *self.shutting_down.borrow()
                }
                _ => true,
            }
        };
        if expected {
            tracing::info!(node = id, pid, %status, "node stopped");
        } else {
            tracing::warn!(node = id, pid, %status, "node exited unexpectedly; it stays down");
            self.note(
                "node_exited",
                id,
                json!({ "status": status, "unexpected": true }),
            );
            // Not println!: a closed stdout must not bring the supervisor down.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "NODE EXITED node.id={id} pid={pid} status={status:?} unexpected"
            );
            let _ = out.flush();
        }
        let _ = exited.send(Some(status));
    }

    /// `f` on node `id`'s running process, under the nodes' lock. No such node: 404; not
    /// running: 409.
    fn with_running<T>(&self, id: i32, f: impl FnOnce(&mut Running) -> T) -> Result<T, OpError> {
        let mut nodes = self.nodes.lock();
        let slot = nodes
            .get_mut(&id)
            .ok_or_else(|| OpError(StatusCode::NOT_FOUND, format!("no node {id}")))?;
        let r = slot
            .running
            .as_mut()
            .ok_or_else(|| OpError(StatusCode::CONFLICT, format!("node {id} is not running")))?;
        Ok(f(r))
    }

    /// Sends `sig` to node `id` and waits (bounded) for it to exit. Not running: 409.
    async fn signal(&self, id: i32, sig: Sig) -> Result<NodeView, OpError> {
        let (signals, mut exited, resume) = self.with_running(id, |r| {
            r.stopping = true;
            // A stopped process acts on SIGTERM only once it runs again.
            let resume = std::mem::take(&mut r.paused) && sig == Sig::Term;
            (r.signals.clone(), r.exited.clone(), resume)
        })?;
        let wait = match sig {
            Sig::Kill => KILL_WAIT,
            _ => STOP_GRACE,
        };
        // The reaper may have just finished: then there is nobody to send to, and nothing to.
        let _ = signals.send(sig).await;
        if resume {
            let _ = signals.send(Sig::Cont).await;
        }
        let done = tokio::time::timeout(wait, exited.wait_for(|e| e.is_some())).await;
        if !matches!(done, Ok(Ok(_))) {
            return Err(OpError(
                StatusCode::GATEWAY_TIMEOUT,
                format!("node {id} did not exit within {wait:?} of {sig:?}"),
            ));
        }
        self.note("node_killed", id, json!({ "signal": sig.name() }));
        self.view(id)
    }

    /// SIGSTOP (`pause`) or SIGCONT; not running: 409.
    async fn pause(&self, id: i32, pause: bool) -> Result<NodeView, OpError> {
        let signals = self.with_running(id, |r| {
            r.paused = pause;
            r.signals.clone()
        })?;
        let sig = if pause { Sig::Stop } else { Sig::Cont };
        let _ = signals.send(sig).await;
        let kind = if pause { "node_paused" } else { "node_resumed" };
        self.note(kind, id, json!({}));
        self.view(id)
    }

    /// Puts one of the supervisor's own events on the merged stream.
    fn note(&self, kind: &str, node: i32, fields: Value) {
        let mut obj = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        obj.insert("type".into(), json!(kind));
        obj.insert("node".into(), json!(node));
        obj.insert("source".into(), json!("supervisor"));
        obj.insert("time_ms".into(), json!(unix_ms()));
        self.events.push_object(obj);
    }

    /// Where each node's admin listener is now.
    fn targets(&self) -> Vec<NodeTarget> {
        self.nodes.lock().values().map(NodeSlot::target).collect()
    }

    /// SIGTERM, then SIGKILL if the node has not exited after [`STOP_GRACE`].
    async fn stop(&self, id: i32) -> Result<(), OpError> {
        match self.signal(id, Sig::Term).await {
            Ok(_) => Ok(()),
            Err(OpError(StatusCode::CONFLICT, _)) => Ok(()),
            Err(OpError(StatusCode::GATEWAY_TIMEOUT, _)) => {
                self.signal(id, Sig::Kill).await.map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    fn view(&self, id: i32) -> Result<NodeView, OpError> {
        self.nodes
            .lock()
            .get(&id)
            .map(NodeSlot::view)
            .ok_or_else(|| OpError(StatusCode::NOT_FOUND, format!("no node {id}")))
    }

    fn views(&self) -> Vec<NodeView> {
        self.nodes.lock().values().map(NodeSlot::view).collect()
    }

    /// Stops every node (in parallel), bounded by [`STOP_GRACE`] + [`KILL_WAIT`].
    async fn stop_all(self: &Arc<Self>) {
        self.shutting_down.send_replace(true);
        let ids: Vec<i32> = self.nodes.lock().keys().copied().collect();
        let stops: Vec<_> = ids
            .iter()
            .map(|&id| {
                let sup = self.clone();
                tokio::spawn(async move { sup.stop(id).await })
            })
            .collect();
        for (id, h) in ids.iter().zip(stops) {
            match h.await {
                Ok(Ok(())) => {}
                Ok(Err(OpError(_, msg))) => tracing::error!(node = id, %msg, "could not stop"),
                Err(e) => tracing::error!(node = id, error = %e, "stop task failed"),
            }
        }
    }
}

/// Copies a child's stdout to its log file, line by line, and reports its READY line.
async fn copy_stdout(
    id: i32,
    stdout: tokio::process::ChildStdout,
    mut log: tokio::fs::File,
    ready: oneshot::Sender<ReadyLine>,
) {
    let mut ready = Some(ready);
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_STDOUT_LINE)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(node = id, error = %e, "reading child stdout");
                break;
            }
        }
        if let Err(e) = log.write_all(&line).await {
            tracing::warn!(node = id, error = %e, "writing node log");
        }
        let _ = log.flush().await;
        if let Some(r) = parse_ready(&String::from_utf8_lossy(&line)) {
            if let Some(tx) = ready.take() {
                let _ = tx.send(r);
            }
        }
    }
}

async fn list_nodes(State(sup): State<Arc<Supervisor>>) -> Response {
    Json(json!({ "nodes": sup.views() })).into_response()
}

fn node_id(raw: &str) -> Result<i32, OpError> {
    raw.parse().map_err(|_| {
        OpError(
            StatusCode::BAD_REQUEST,
            format!("node id {raw:?} is not a number"),
        )
    })
}

async fn kill_node(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
    uri: Uri,
) -> Result<Json<NodeView>, OpError> {
    let id = node_id(&id)?;
    let mut sig = Sig::Kill;
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        sig = match pair {
            "signal=kill" | "signal=KILL" | "signal=9" => Sig::Kill,
            "signal=term" | "signal=TERM" | "signal=15" => Sig::Term,
            other => {
                return Err(OpError(
                    StatusCode::BAD_REQUEST,
                    format!("unknown parameter {other:?}; use signal=kill or signal=term"),
                ))
            }
        };
    }
    sup.signal(id, sig).await.map(Json)
}

async fn restart_node(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<NodeView>, OpError> {
    let id = node_id(&id)?;
    sup.view(id)?;
    sup.stop(id).await?;
    sup.start(id).await.map(Json)
}

async fn start_node(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<NodeView>, OpError> {
    let id = node_id(&id)?;
    sup.start(id).await.map(Json)
}

async fn pause_node(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<NodeView>, OpError> {
    sup.pause(node_id(&id)?, true).await.map(Json)
}

async fn resume_node(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<NodeView>, OpError> {
    sup.pause(node_id(&id)?, false).await.map(Json)
}

/// `GET /v1/{view}`: the same view of every node, under its id.
async fn merged_view(State(sup): State<Arc<Supervisor>>, uri: Uri) -> Response {
    let targets = sup.targets();
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.to_string());
    match tokio::task::spawn_blocking(move || crate::supervisor_views::merged_get(&targets, &path))
        .await
    {
        Ok(v) => Json(v).into_response(),
        Err(e) => OpError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `GET /v1/events[?since=N]`: the merged stream.
async fn merged_events(
    State(sup): State<Arc<Supervisor>>,
    headers: axum::http::HeaderMap,
    uri: Uri,
) -> Response {
    match crate::admin::since_param(uri.query(), &headers) {
        Ok(since) => axum::response::sse::Sse::new(sup.events.stream(since))
            .keep_alive(axum::response::sse::KeepAlive::default())
            .into_response(),
        Err(msg) => OpError(StatusCode::BAD_REQUEST, msg).into_response(),
    }
}

/// `/nodes/{id}/faults[/{rule}]`: forwarded to the node's admin listener as it came.
async fn node_faults(
    State(sup): State<Arc<Supervisor>>,
    method: axum::http::Method,
    uri: Uri,
    body: Option<Json<Value>>,
) -> Result<Response, OpError> {
    let rest = uri.path().strip_prefix("/nodes/").unwrap_or("");
    let (raw_id, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let id = node_id(raw_id)?;
    let admin = sup
        .view(id)?
        .admin
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .ok_or_else(|| {
            OpError(
                StatusCode::CONFLICT,
                format!("node {id} has no admin listener"),
            )
        })?;
    let path = format!("/{tail}");
    let method = method.as_str().to_string();
    let body = body.map(|Json(b)| b);
    let answer = tokio::task::spawn_blocking(move || {
        crate::supervisor_views::forward(&method, admin, &path, body)
    })
    .await
    .map_err(|e| OpError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    match answer {
        Ok((status, v)) => Ok((status, Json(v)).into_response()),
        Err(e) => Err(OpError(StatusCode::BAD_GATEWAY, e)),
    }
}

fn router(sup: Arc<Supervisor>) -> Router {
    let faults = get(node_faults).post(node_faults).delete(node_faults);
    Router::new()
        .route("/", get(crate::admin::live_page))
        .route("/nodes", get(list_nodes))
        .route("/nodes/{id}/kill", post(kill_node))
        .route("/nodes/{id}/restart", post(restart_node))
        .route("/nodes/{id}/start", post(start_node))
        .route("/nodes/{id}/pause", post(pause_node))
        .route("/nodes/{id}/resume", post(resume_node))
        .route("/nodes/{id}/faults", faults.clone())
        .route("/nodes/{id}/faults/{rule}", faults)
        .route("/v1/events", get(merged_events))
        .route("/v1/cluster", get(merged_view))
        .route("/v1/partitions", get(merged_view))
        .route("/v1/producers", get(merged_view))
        .route("/v1/groups", get(merged_view))
        .with_state(sup)
}

/// One thread per node copies its event stream into the supervisor's, for the cluster's
/// life (blocking HTTP; at most [`MAX_NODES`] threads).
fn follow_events(sup: &Arc<Supervisor>) {
    let ids: Vec<i32> = sup.nodes.lock().keys().copied().collect();
    for id in ids {
        let sup = sup.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("events-node-{id}"))
            .spawn(move || {
                let log = sup.events.clone();
                crate::supervisor_views::follow_node_events(
                    id,
                    || sup.nodes.lock().get(&id).map(NodeSlot::target),
                    || *sup.shutting_down.borrow(),
                    log,
                )
            });
        if let Err(e) = spawned {
            tracing::warn!(node = id, error = %e, "cannot follow the node's events");
        }
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// `brook cluster`.
pub fn run(args: ClusterArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("brook: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(supervise(args))
}

async fn supervise(args: ClusterArgs) -> ExitCode {
    let plans = match plan(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("brook: {e}");
            return ExitCode::from(2);
        }
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("brook: cannot find the brook binary: {e}");
            return ExitCode::FAILURE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(args.supervisor_listener).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "brook: cannot bind the supervisor listener {}: {e}",
                args.supervisor_listener
            );
            return ExitCode::FAILURE;
        }
    };
    let sup_addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("brook: {e}");
            return ExitCode::FAILURE;
        }
    };
    let sup = Arc::new(Supervisor {
        exe,
        nodes: Mutex::new(
            plans
                .into_iter()
                .map(|plan| {
                    (
                        plan.id,
                        NodeSlot {
                            plan,
                            running: None,
                            last_exit: None,
                            starts: 0,
                        },
                    )
                })
                .collect(),
        ),
        ready_timeout: Duration::from_secs(args.ready_timeout_secs.max(1)),
        shutting_down: watch::channel(false).0,
        events: Arc::new(EventLog::new(0, args.event_buffer_len_max)),
    });
    follow_events(&sup);
    let (stop_tx, mut stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received; stopping the cluster");
        let _ = stop_tx.send(true);
    });

    // Start every node at once (a quorum needs its voters up together), then wait for all.
    let ids: Vec<i32> = sup.nodes.lock().keys().copied().collect();
    let starts: Vec<_> = ids
        .iter()
        .map(|id| {
            let sup = sup.clone();
            let id = *id;
            tokio::spawn(async move { sup.start(id).await })
        })
        .collect();
    let all_ready = async {
        let mut failed = Vec::new();
        for (id, h) in ids.iter().zip(starts) {
            match h.await {
                Ok(Ok(_)) => {}
                Ok(Err(OpError(_, msg))) => failed.push(msg),
                Err(e) => failed.push(format!("node {id}: {e}")),
            }
        }
        failed
    };
    let failed = tokio::select! {
        f = all_ready => f,
        _ = stop_rx.wait_for(|s| *s) => vec!["interrupted while starting".to_string()],
    };
    if !failed.is_empty() {
        for f in &failed {
            eprintln!("brook: {f}");
        }
        sup.stop_all().await;
        return ExitCode::FAILURE;
    }

    let views = sup.views();
    let join = |f: &dyn Fn(&NodeView) -> Option<String>| {
        views.iter().filter_map(f).collect::<Vec<_>>().join(",")
    };
    let bootstrap = join(&|v| v.client.clone());
    let admins = join(&|v| v.admin.as_ref().map(|a| format!("{}@{a}", v.id)));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "CLUSTER READY bootstrap={bootstrap} supervisor={sup_addr} admins={admins}"
    );
    let _ = writeln!(out, "  {} nodes; each is `brook serve`:", views.len());
    for v in &views {
        let _ = writeln!(
            out,
            "  node {}: pid {}, client {}, controller {}, admin {}, data {}, log {}",
            v.id,
            v.pid.unwrap_or(0),
            v.client.as_deref().unwrap_or("-"),
            v.controller.as_deref().unwrap_or("-"),
            v.admin.as_deref().unwrap_or("-"),
            v.data,
            v.log
        );
    }
    let _ = writeln!(
        out,
        "  brook node list|kill|restart|start --supervisor {sup_addr} [--id N]; Ctrl-C stops the cluster"
    );
    let _ = out.flush();
    drop(out);

    let app = router(sup.clone());
    let mut stop = stop_rx.clone();
    let events = sup.events.clone();
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = stop.wait_for(|s| *s).await;
        // An open event stream (the live page in a browser tab) would otherwise hold the
        // graceful shutdown, and so the nodes, forever; the nodes' admin listeners do the same.
        events.close();
    });
    if let Err(e) = server.await {
        tracing::error!(error = %e, "supervisor listener failed");
    }
    sup.stop_all().await;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "CLUSTER STOPPED");
    let _ = out.flush();
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> ClusterArgs {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: ClusterArgs,
        }
        let mut argv = vec!["brook"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).args
    }

    #[test]
    fn ready_lines() {
        assert_eq!(
            parse_ready("READY node.id=2 listener=127.0.0.1:9093 admin=127.0.0.1:9645\n"),
            Some(ReadyLine {
                node_id: 2,
                listener: "127.0.0.1:9093".parse().unwrap(),
                admin: Some("127.0.0.1:9645".parse().unwrap()),
            })
        );
        assert_eq!(
            parse_ready("READY node.id=1 listener=127.0.0.1:1")
                .unwrap()
                .admin,
            None
        );
        assert_eq!(parse_ready("2026 INFO READY"), None);
        assert_eq!(parse_ready("READY listener=127.0.0.1:1"), None);
    }

    #[test]
    fn default_ports_and_args() {
        let plans = plan(&args(&["--override", "num.partitions=3"])).unwrap();
        assert_eq!(plans.len(), 3);
        let p = &plans[1];
        assert_eq!(p.client, Some("127.0.0.1:9093".parse().unwrap()));
        assert_eq!(p.controller, Some("127.0.0.1:9193".parse().unwrap()));
        assert_eq!(p.admin, Some("127.0.0.1:9645".parse().unwrap()));
        let a = p.serve_args();
        assert!(a.contains(
            &"controller.quorum.voters=1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194"
                .to_string()
        ));
        assert_eq!(a.last().map(String::as_str), Some("num.partitions=3"));
        // What a child would load is a valid configuration.
        let overrides: Vec<String> = a
            .iter()
            .skip(1)
            .filter(|s| *s != "--override")
            .cloned()
            .collect();
        let cfg = BrokerConfig::load(None, &overrides).unwrap();
        assert_eq!(cfg.node_id, 2);
        assert_eq!(cfg.controller_listener, p.controller);
    }

    #[test]
    fn port_zero_picks_distinct_free_ports() {
        let plans = plan(&args(&["--base-port", "0", "--nodes", "4"])).unwrap();
        let mut ports: Vec<u16> = plans
            .iter()
            .flat_map(|p| [p.client, p.controller, p.admin])
            .map(|a| a.map(|a| a.port()).unwrap_or(0))
            .collect();
        assert!(ports.iter().all(|p| *p != 0));
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 12, "no port is picked twice");
        assert!(plan(&args(&["--nodes", "0"])).is_err());
        assert!(plan(&args(&["--base-port", "65534"])).is_err());
    }

    /// `config/cluster/node-N.properties` say exactly what the generated defaults say.
    #[test]
    fn shipped_properties_equal_the_defaults() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/cluster");
        for p in plan(&args(&[])).unwrap() {
            let file = dir.join(format!("node-{}.properties", p.id));
            let text = std::fs::read_to_string(&file).unwrap();
            let mut from_file = crate::config::parse_properties(&text).unwrap();
            from_file.sort();
            let ports = p.generated.unwrap();
            let mut generated = generated_properties(p.id, ports, &p.voters, &p.log_dirs);
            generated.sort();
            assert_eq!(from_file, generated, "{}", file.display());
        }
        // And --config-dir reads them to the same ports.
        let from_dir = plan(&args(&["--config-dir", dir.to_str().unwrap()])).unwrap();
        let defaults = plan(&args(&[])).unwrap();
        for (a, b) in from_dir.iter().zip(&defaults) {
            assert_eq!(
                (a.client, a.controller, a.admin, &a.log_dirs),
                (b.client, b.controller, b.admin, &b.log_dirs)
            );
        }
    }
}
