//! `brook cluster`: a local cluster of `brook serve` child processes under one supervisor.
//!
//! The supervisor re-executes the current binary once per node (`brook serve` with Kafka's
//! KRaft keys: `process.roles=broker,controller`, a PLAINTEXT and a CONTROLLER listener,
//! `controller.quorum.voters`, an admin listener and a data directory per node), waits for
//! each child's `READY` line and until every node lists every node as an unfenced broker
//! (Kafka's `TestUtils.waitUntilBrokerMetadataIsPropagated`), then prints one line scripts
//! can wait for:
//!
//! ```text
//! CLUSTER READY bootstrap=127.0.0.1:9092,... supervisor=127.0.0.1:9600 admins=1@127.0.0.1:9644,...
//! ```
//!
//! (with `--secure`, also ` librdkafka=<data-dir>/tls/librdkafka.properties`, the client
//! settings file).
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
//! - `GET /v1/labs`, `POST /v1/labs/{name}/step`, `POST /v1/labs/{name}/reset`: the live
//!   page's labs, run step by step against this cluster ([`labs`]);
//! - `GET /v1/cluster`, `/v1/partitions`, `/v1/producers`, `/v1/groups`: every node's view
//!   under its id; `GET /v1/events`: every node's event stream merged with the supervisor's
//!   own events (node started, killed, paused, resumed, exited); `GET /`: the live page
//!   ([`crate::supervisor_views`], docs/EVENTS.md).
//!
//! With `--topic NAME[:PARTITIONS[:RF]]` (repeatable) the supervisor creates the topics once
//! every node is READY and prints `CLUSTER READY` only when every node names each partition's
//! leader ([`topics`]); a topic the cluster refuses fails the start.
//!
//! With `--http-auth` every request to this API and to the nodes' admin listeners needs HTTP
//! Basic credentials, made fresh at start and printed with the cluster's settings
//! ([`credentials`]); without it, both are open as before.
//!
//! SIGTERM or Ctrl-C stops the cluster: first every node's controlled shutdown at once,
//! through its admin listener, while every quorum voter still runs (Kafka's
//! `KafkaClusterTestKit.close` shuts every broker down before any controller); then every
//! child gets SIGTERM, the supervisor waits for them ([`STOP_GRACE`], then SIGKILL), then
//! exits. Children run in their own process group,
//! so a terminal's Ctrl-C reaches only the supervisor, which then stops them in order. If the
//! supervisor itself is killed with SIGKILL, its children keep running, unless it runs with
//! `--exit-on-stdin-eof` ([`crate::stdin_watch`]): then each child watches a pipe from the
//! supervisor and stops when the supervisor is gone.
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
use tokio::time::Instant;

use crate::supervisor_views::NodeTarget;
use brook::config::BrokerConfig;
use brook::events::EventLog;

mod credentials;
mod http;
mod labs;
mod plan;
mod secure;
mod topics;

use self::http::router;
use self::plan::{check_ports_free, plan, NodePlan};
pub use self::plan::{
    parse_ready, ClusterArgs, ReadyLine, ADMIN_PORT_OFFSET, CONTROLLER_PORT_OFFSET,
    DEFAULT_BASE_PORT, DEFAULT_NODES, DEFAULT_SUPERVISOR_LISTENER, MAX_NODES,
};

/// How long a SIGTERMed child has to exit before it gets SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(30);
/// How long a SIGKILLed child may take to be reaped before the supervisor gives up on it.
pub const KILL_WAIT: Duration = Duration::from_secs(10);
/// Longest line read from a child's stdout; longer lines are split.
pub const MAX_STDOUT_LINE: u64 = 64 << 10;

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
    /// The write end of the child's stdin pipe with `--exit-on-stdin-eof`: never written,
    /// closed when the supervisor exits, however it exits.
    _stdin: Option<tokio::process::ChildStdin>,
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
    /// `--exit-on-stdin-eof`: every child gets a stdin pipe and the same flag.
    children_watch_stdin: bool,
    /// The live page's labs and their runs ([`labs`]).
    labs: labs::Labs,
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

/// A spawned node's READY line to come and its exit watch.
type Spawned = (
    oneshot::Receiver<ReadyLine>,
    watch::Receiver<Option<String>>,
);

impl Supervisor {
    /// Starts node `id`'s process (it must not be running) and waits for its READY line.
    async fn start(self: &Arc<Self>, id: i32) -> Result<NodeView, OpError> {
        let (ready_rx, mut exited) = self.spawn_registered(id)?;
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
            Ok(Some(ready)) => self.note_ready(id, ready),
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

    /// Spawns node `id`'s process and registers it as running, under the nodes' lock: the
    /// receivers of its READY line and of its exit. Refused while the cluster stops, for an
    /// unknown node, and for a running one.
    fn spawn_registered(self: &Arc<Self>, id: i32) -> Result<Spawned, OpError> {
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
        Ok((ready_rx, exited))
    }

    /// Node `id` printed READY: its plan keeps the addresses it bound (port 0 picks, for
    /// its restarts), and the start is noted.
    fn note_ready(&self, id: i32, ready: ReadyLine) -> Result<NodeView, OpError> {
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
        let mut args = plan.serve_args();
        if self.children_watch_stdin {
            args.insert(1, "--exit-on-stdin-eof".into());
        }
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
            .stdin(if self.children_watch_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            // Its own process group: a terminal's Ctrl-C reaches only the supervisor, which
            // then stops the children in order.
            .process_group(0)
            .kill_on_drop(false)
            .spawn()?;
        let pid = child.id().unwrap_or(0);
        let stdin = child.stdin.take();
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
                _stdin: stdin,
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

    /// Stops every node, in the order of Kafka's `KafkaClusterTestKit.close`: first every
    /// node's broker side in parallel while every controller still runs
    /// ([`Supervisor::shut_down_brokers`]), then every process (SIGTERM in parallel), bounded
    /// by [`STOP_GRACE`] + [`KILL_WAIT`]. Stopping the processes alone at once, each node's
    /// controlled shutdown needed the quorum while the first ones to finish took their votes
    /// with them, so the last node had no majority to grant it and waited out
    /// `broker.session.timeout.ms`.
    async fn stop_all(self: &Arc<Self>) {
        self.shutting_down.send_replace(true);
        self.shut_down_brokers().await;
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

impl Supervisor {
    /// Every running node's controlled shutdown at once, each through its admin listener
    /// (`POST /controlled-shutdown`), which answers once the active controller granted it and
    /// the node applied the hand-over; the nodes keep running, so the quorum keeps every voter
    /// meanwhile, as Kafka's `KafkaClusterTestKit.close` shuts every `BrokerServer` down (in
    /// parallel) before any `ControllerServer`. A node that cannot do it (no admin listener,
    /// an error) is left to its SIGTERM, which runs the same hand-over; a granted one makes
    /// that SIGTERM's hand-over return at once.
    async fn shut_down_brokers(&self) {
        // A paused node would answer only after STOP_GRACE; its SIGTERM resumes it.
        let running: Vec<(i32, SocketAddr)> = self
            .nodes
            .lock()
            .values()
            .filter(|n| n.running.as_ref().is_some_and(|r| !r.paused))
            .filter_map(|n| Some((n.plan.id, n.plan.admin?)))
            .collect();
        let calls: Vec<_> = running
            .into_iter()
            .map(|(id, admin)| {
                tokio::task::spawn_blocking(move || {
                    let answer = crate::supervisor_views::forward_within(
                        "POST",
                        admin,
                        "/controlled-shutdown",
                        None,
                        STOP_GRACE,
                    );
                    (id, answer)
                })
            })
            .collect();
        for call in calls {
            match call.await {
                Ok((_, Ok((status, _)))) if status.is_success() => {}
                Ok((id, Ok((status, answer)))) => {
                    tracing::warn!(node = id, %status, %answer, "controlled shutdown refused")
                }
                Ok((id, Err(e))) => tracing::warn!(node = id, error = %e, "controlled shutdown"),
                Err(e) => tracing::warn!(error = %e, "controlled shutdown task failed"),
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

/// The `--topic` topics, created through the first node, known to every node; bounded by
/// the ready timeout.
/// Pause between two readings of the nodes' cluster views while one does not yet list every
/// node; it only paces the loop, the views decide.
const BROKERS_POLL_INTERVAL_MS: u64 = 5;

/// Waits until every running node lists every node as a registered, unfenced broker (its
/// `/v1/cluster` view's `controller.brokers`), before `CLUSTER READY`: Kafka's
/// `TestUtils.waitUntilBrokerMetadataIsPropagated` (every broker's metadata cache has every
/// broker alive). A node is READY once it is unfenced itself; another node may apply that a
/// moment later. Checked here, a kit needs no call of its own after `CLUSTER READY` (a JVM's
/// first HTTP client costs it half a second). Nodes without an admin listener are not read.
async fn await_brokers_propagated(sup: &Arc<Supervisor>, deadline: Instant) -> Result<(), String> {
    let targets: Vec<NodeTarget> = sup
        .targets()
        .into_iter()
        .filter(|t| t.admin.is_some())
        .collect();
    let ids: Vec<i32> = sup.nodes.lock().keys().copied().collect();
    loop {
        let read = targets.clone();
        let merged = tokio::task::spawn_blocking(move || {
            crate::supervisor_views::merged_get(&read, "/v1/cluster")
        })
        .await
        .map_err(|e| format!("reading the nodes' cluster views: {e}"))?;
        let missing: Vec<String> = targets
            .iter()
            .filter(|t| !lists_unfenced(&merged["nodes"][t.id.to_string()], &ids))
            .map(|t| format!("node {}", t.id))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{} did not list every node as an unfenced broker in time",
                missing.join(", ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(BROKERS_POLL_INTERVAL_MS)).await;
    }
}

/// Whether a node's `/v1/cluster` view lists each of `ids` as an unfenced broker.
fn lists_unfenced(view: &Value, ids: &[i32]) -> bool {
    let Some(brokers) = view["controller"]["brokers"].as_array() else {
        return false;
    };
    ids.iter().all(|id| {
        brokers
            .iter()
            .any(|b| b["id"].as_i64() == Some(i64::from(*id)) && b["fenced"] == json!(false))
    })
}

async fn create_topics(args: &ClusterArgs, views: &[NodeView]) -> Result<(), String> {
    let clients: Vec<String> = views.iter().filter_map(|v| v.client.clone()).collect();
    let Some(creator) = clients.first() else {
        return Ok(());
    };
    let deadline = Instant::now() + Duration::from_secs(args.ready_timeout_secs.max(1));
    topics::create(&args.topics, creator, &clients, deadline).await
}

/// `brook cluster`.
pub fn run(args: ClusterArgs) -> ExitCode {
    crate::block_on_command(Some(2), supervise(args))
}

async fn supervise(mut args: ClusterArgs) -> ExitCode {
    let Some(setup) = prepare(&mut args) else {
        return ExitCode::FAILURE;
    };
    let plans = match plan(&args).and_then(|p| check_ports_free(&p).map(|()| p)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("brook: {e}");
            return ExitCode::from(2);
        }
    };
    // `--secure --sasl`: the SCRAM user is in every log directory before any node starts.
    let formatted = setup.secure.as_ref().map_or(Ok(()), |s| {
        plans.iter().try_for_each(|p| s.format(&p.log_dirs))
    });
    if let Err(e) = formatted {
        eprintln!("brook: --secure --sasl: {e}");
        return ExitCode::FAILURE;
    }
    let Some((exe, listener, sup_addr)) = bind_supervisor(&args).await else {
        return ExitCode::FAILURE;
    };
    let sup = Supervisor::new(exe, plans, &args);
    follow_events(&sup);
    let (stop_tx, stop_rx) = watch::channel(false);
    let watch_stdin = args.exit_on_stdin_eof;
    tokio::spawn(async move {
        crate::stdin_watch::shutdown_trigger(watch_stdin).await;
        tracing::info!("stopping the cluster");
        let _ = stop_tx.send(true);
    });
    let views = match start_cluster(&sup, &args, stop_rx.clone()).await {
        Ok(views) => views,
        Err(failed) => {
            for f in &failed {
                eprintln!("brook: {f}");
            }
            sup.stop_all().await;
            return ExitCode::FAILURE;
        }
    };
    print_cluster_ready(&setup, &views, sup_addr);
    serve_until_stopped(&sup, listener, setup.http_auth.as_ref(), stop_rx).await;
    sup.stop_all().await;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "CLUSTER STOPPED");
    let _ = out.flush();
    ExitCode::SUCCESS
}

/// `--secure` and `--http-auth`'s material, made before the plans, whose overrides it extends.
struct Setup {
    secure: Option<secure::Secure>,
    http_auth: Option<credentials::HttpAuth>,
}

/// Writes `--secure`'s certificates and `--http-auth`'s credentials into the data directory
/// and puts their overrides first in `args.overrides`; `None` (reported) when one fails.
fn prepare(args: &mut ClusterArgs) -> Option<Setup> {
    if args.test_timings {
        let timings = plan::TEST_TIMINGS.iter().map(|(k, v)| format!("{k}={v}"));
        args.overrides.splice(0..0, timings);
    }
    let secure = match args
        .secure
        .then(|| secure::Secure::prepare(&args.data_dir, args.sasl))
    {
        Some(Ok(s)) => {
            args.overrides.splice(0..0, s.overrides());
            Some(s)
        }
        Some(Err(e)) => {
            eprintln!("brook: --secure: {e}");
            return None;
        }
        None => None,
    };
    let http_auth = match args
        .http_auth
        .then(|| credentials::HttpAuth::prepare(&args.data_dir))
    {
        Some(Ok(a)) => {
            args.overrides.splice(0..0, a.overrides());
            crate::supervisor_views::set_node_authorization(a.authorization());
            Some(a)
        }
        Some(Err(e)) => {
            eprintln!("brook: --http-auth: {e}");
            return None;
        }
        None => None,
    };
    Some(Setup { secure, http_auth })
}

/// The `brook` binary the nodes run (this one) and the supervisor's bound listener with its
/// address; `None` (reported) when either is missing.
async fn bind_supervisor(
    args: &ClusterArgs,
) -> Option<(PathBuf, tokio::net::TcpListener, SocketAddr)> {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("brook: cannot find the brook binary: {e}");
            return None;
        }
    };
    let listener = match tokio::net::TcpListener::bind(args.supervisor_listener).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "brook: cannot bind the supervisor listener {}: {e}",
                args.supervisor_listener
            );
            return None;
        }
    };
    match listener.local_addr() {
        Ok(a) => Some((exe, listener, a)),
        Err(e) => {
            eprintln!("brook: {e}");
            None
        }
    }
}

impl Supervisor {
    /// The supervisor of `plans`' nodes, none of them started yet.
    fn new(exe: PathBuf, plans: Vec<NodePlan>, args: &ClusterArgs) -> Arc<Supervisor> {
        let slot = |plan| NodeSlot {
            plan,
            running: None,
            last_exit: None,
            starts: 0,
        };
        Arc::new(Supervisor {
            exe,
            nodes: Mutex::new(plans.into_iter().map(|p| (p.id, slot(p))).collect()),
            ready_timeout: Duration::from_secs(args.ready_timeout_secs.max(1)),
            shutting_down: watch::channel(false).0,
            events: Arc::new(EventLog::new(0, args.event_buffer_len_max)),
            children_watch_stdin: args.exit_on_stdin_eof,
            labs: labs::Labs::load(),
        })
    }
}

/// Starts every node at once (a quorum needs its voters up together), waits for all to be
/// READY and every broker unfenced in every node's metadata, then creates `--topic`s: the
/// nodes' views, or what failed.
async fn start_cluster(
    sup: &Arc<Supervisor>,
    args: &ClusterArgs,
    mut stop_rx: watch::Receiver<bool>,
) -> Result<Vec<NodeView>, Vec<String>> {
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
        return Err(failed);
    }
    let deadline = Instant::now() + sup.ready_timeout;
    await_brokers_propagated(sup, deadline)
        .await
        .map_err(|e| vec![e])?;
    let views = sup.views();
    create_topics(args, &views).await.map_err(|e| vec![e])?;
    Ok(views)
}

/// The CLUSTER READY line and the nodes' addresses, files and client settings on stdout
/// (the client settings files exist before the line is printed).
fn print_cluster_ready(setup: &Setup, views: &[NodeView], sup_addr: SocketAddr) {
    let join = |f: &dyn Fn(&NodeView) -> Option<String>| {
        views.iter().filter_map(f).collect::<Vec<_>>().join(",")
    };
    let bootstrap = join(&|v| v.client.clone());
    let admins = join(&|v| v.admin.as_ref().map(|a| format!("{}@{a}", v.id)));
    let secure = &setup.secure;
    let tls_clients = match secure.as_ref().map(|s| s.client_settings(&bootstrap)) {
        Some(Ok(text)) => Some(text),
        Some(Err(e)) => {
            eprintln!("brook: --secure: {e}");
            None
        }
        None => None,
    };
    // `--secure`: where the librdkafka settings are, for programs that drive the cluster
    // (the chaos checker).
    let librdkafka = secure
        .as_ref()
        .map(|s| format!(" librdkafka={}", s.librdkafka_path().display()))
        .unwrap_or_default();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "CLUSTER READY bootstrap={bootstrap} supervisor={sup_addr} admins={admins}{librdkafka}"
    );
    let _ = writeln!(out, "  {} nodes; each is `brook serve`:", views.len());
    for v in views {
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
    if let (Some(text), Some(s)) = (tls_clients, secure) {
        let _ = write!(out, "  {}:\n{text}", s.heading());
    }
    if let Some(a) = &setup.http_auth {
        let _ = write!(out, "{}", a.client_settings());
    }
    let _ = out.flush();
}

/// Serves the supervisor's HTTP API and the live page until the stop signal.
async fn serve_until_stopped(
    sup: &Arc<Supervisor>,
    listener: tokio::net::TcpListener,
    http_auth: Option<&credentials::HttpAuth>,
    mut stop: watch::Receiver<bool>,
) {
    let app = brook::admin_security::protect(
        router(sup.clone()),
        http_auth.map(|a| a.credentials()),
        vec![],
    );
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
}
