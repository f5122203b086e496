//! A cluster of Brook nodes, each a `brook serve` child process with
//! `process.roles=broker,controller`: a voter of the metadata quorum and a broker.
//!
//! Every node gets fixed ports, chosen once (free ports found by binding port 0), because
//! `controller.quorum.voters` names them and a restarted node must come back on the same ones.
//! Each node has its own data dir and log file (`node-N.log`: the harness's own lines, stdout and
//! stderr of every run) in the cluster's temp dir, which is kept when a test panics. Nodes can be
//! stopped (SIGTERM), killed (SIGKILL) and started again with the same command line.
//!
//! The harness sees the cluster through raw Metadata requests to each node (leader, leader
//! epoch, replicas, ISR, controller id, registered brokers), installs fault rules with the
//! `brook fault` CLI on a node's admin listener (`admin.listener=127.0.0.1:0`; the bound address
//! comes from the node's READY line) and reads replicas on disk with `brook dump-log`. Every wait
//! is a condition polled against a deadline.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::protocol::StrBytes;
use tempfile::TempDir;

use crate::batch::{encode_batch, Producer, Rec};
use crate::errors;
use crate::poll_until_ok;
use crate::process::{keep_on_panic, run_brook, BrookProcess, READY_TIMEOUT};
use crate::wire::{WireClient, CREATE_TOPICS_V, LIST_OFFSETS_V, METADATA_V, PRODUCE_V};

/// Bound on one raw request to a node, or one `brook` CLI call.
pub const CALL: Duration = Duration::from_secs(10);
/// How long every node may take to list a (re)started broker as registered.
pub const REGISTER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a new topic may take to have a leader and a full ISR on every node.
pub const TOPIC_TIMEOUT: Duration = Duration::from_secs(30);

const FIND_COORDINATOR_V: i16 = 3;

/// The properties every node gets, before a test's own overrides.
pub fn defaults() -> Vec<(&'static str, &'static str)> {
    vec![
        ("default.replication.factor", "3"),
        ("min.insync.replicas", "2"),
        ("replica.lag.time.max.ms", "3000"),
        ("broker.session.timeout.ms", "3000"),
        ("broker.heartbeat.interval.ms", "500"),
        ("num.partitions", "1"),
        ("auto.create.topics.enable", "false"),
    ]
}

/// One partition as a node's Metadata answer describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The node that answered.
    pub answered_by: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: BTreeSet<i32>,
    /// The controller id of the same answer.
    pub controller: i32,
    pub error_code: i16,
}

impl PartitionState {
    /// The replicas other than the leader, in replica order.
    pub fn followers(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| *r != self.leader)
            .collect()
    }
}

/// One batch line of `brook dump-log`, as `key: value` fields.
#[derive(Debug, Clone)]
pub struct DumpedBatch {
    pub line: String,
    pub fields: BTreeMap<String, String>,
}

impl DumpedBatch {
    /// Parses one `baseOffset: ...` line of `brook dump-log`.
    pub fn parse(line: &str) -> DumpedBatch {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let mut fields = BTreeMap::new();
        for w in parts.windows(2) {
            if let Some(k) = w[0].strip_suffix(':') {
                fields.insert(k.to_string(), w[1].to_string());
            }
        }
        DumpedBatch {
            line: line.to_string(),
            fields,
        }
    }

    fn num(&self, key: &str) -> i64 {
        self.fields
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("dump-log line without a numeric {key}: {}", self.line))
    }

    pub fn base_offset(&self) -> i64 {
        self.num("baseOffset")
    }

    pub fn last_offset(&self) -> i64 {
        self.num("lastOffset")
    }

    /// The batch's max timestamp (CreateTime or LogAppendTime).
    pub fn max_timestamp(&self) -> i64 {
        if self.fields.contains_key("CreateTime") {
            self.num("CreateTime")
        } else {
            self.num("LogAppendTime")
        }
    }

    /// What identifies the batch's content and place: offsets, producer, sequence, leader
    /// epoch, CRC.
    pub fn identity(&self) -> String {
        let f = |k: &str| self.fields.get(k).map(String::as_str).unwrap_or("?");
        format!(
            "{}..{} pid={} seq={} ple={} crc={}",
            f("baseOffset"),
            f("lastOffset"),
            f("producerId"),
            f("baseSequence"),
            f("partitionLeaderEpoch"),
            f("crc")
        )
    }
}

/// One `brook serve` process of the cluster.
struct Node {
    client_port: u16,
    controller_port: u16,
    /// A third port, for a second broker listener: `{extra_port}` in property values, or the
    /// listener [`Cluster::start_with_listener`] adds.
    extra_port: u16,
    data_dir: PathBuf,
    process: BrookProcess,
    /// The admin listener of the current run (from its READY line).
    admin: Option<String>,
    /// This node's own properties, after the cluster's ([`Cluster::set_node_override`]).
    overrides: Vec<(String, String)>,
}

/// How a cluster's metadata quorum is formed (KIP-853).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuorumFormat {
    /// `controller.quorum.voters` lists every node (`kraft.version` 0).
    Static,
    /// Node 1 is formatted `brook format --standalone`, the others
    /// `--no-initial-controllers`: they join as observers through node 1.
    Standalone,
    /// Every node is formatted with the same `--initial-controllers` naming every node.
    InitialControllers,
}

/// The cluster id of a dynamic quorum's nodes, which have no voters to derive one from.
pub const DYNAMIC_QUORUM_CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qk";

/// A cluster of `brook serve` processes; dropping it kills every node.
pub struct Cluster {
    nodes: BTreeMap<i32, Node>,
    /// Every property but the per-node ones, in order: defaults, then the test's overrides.
    props: Vec<(String, String)>,
    voters: String,
    quorum: QuorumFormat,
    /// The name of an extra broker listener each node has, besides PLAINTEXT (which the
    /// harness's own checks use).
    extra_listener: Option<String>,
    dir: Option<TempDir>,
}

/// Where cluster nodes' fixed ports are chosen: below the kernel's ephemeral range (32768 and
/// up on Linux), so an outgoing connection of any process cannot take one between the probe
/// and the node's bind (it did: "Address already in use" on a controller listener), and clear
/// of the ports Brook, the benchmarks and the reference Kafka use (9092-9646, 19092-19294,
/// 29092-29294).
const CLUSTER_PORTS: std::ops::Range<u16> = 21_000..28_000;

/// `n` ports of [`CLUSTER_PORTS`] free right now, from a start that differs per process and
/// call (tests run in parallel), released again (a restarted node binds them anew).
fn free_ports(n: usize) -> Vec<u16> {
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let span = (CLUSTER_PORTS.end - CLUSTER_PORTS.start) as u32;
    let seed = std::process::id()
        .wrapping_mul(7919)
        .wrapping_add(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) * 97)
        .wrapping_add(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0),
        );
    let mut held: Vec<TcpListener> = Vec::with_capacity(n);
    // Bounded: one pass over the range at most.
    for i in 0..span {
        if held.len() == n {
            break;
        }
        let port = CLUSTER_PORTS.start + ((seed.wrapping_add(i)) % span) as u16;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
            held.push(l);
        }
    }
    assert_eq!(held.len(), n, "no {n} free ports in {CLUSTER_PORTS:?}");
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

impl Cluster {
    /// Starts `size` nodes (ids 1..=size, all voters) with [`defaults`] and then `overrides`,
    /// waits for every READY line and until every node lists every broker as registered.
    pub fn start(size: usize, overrides: &[(&str, &str)]) -> Cluster {
        Self::start_inner(size, overrides, None, &[])
    }

    /// [`Cluster::start`] with a dynamic quorum: every node is formatted for `quorum` with its
    /// own configuration and started with `controller.quorum.bootstrap.servers` (node 1's
    /// controller listener for [`QuorumFormat::Standalone`], every node's otherwise) and
    /// [`DYNAMIC_QUORUM_CLUSTER_ID`]. [`QuorumFormat::InitialControllers`] gives node N the
    /// directory id [`Cluster::directory_id`] reads back.
    pub fn start_dynamic(size: usize, overrides: &[(&str, &str)], quorum: QuorumFormat) -> Cluster {
        let mut props = vec![("cluster.id", DYNAMIC_QUORUM_CLUSTER_ID)];
        props.extend_from_slice(overrides);
        let mut c = Self::prepare(size, &props, None);
        c.quorum = quorum;
        let initial = c.initial_controllers();
        for id in c.ids() {
            let flag = match quorum {
                QuorumFormat::Static => Vec::new(),
                QuorumFormat::Standalone if id == 1 => vec!["--standalone".to_string()],
                QuorumFormat::Standalone => vec!["--no-initial-controllers".to_string()],
                QuorumFormat::InitialControllers => {
                    vec!["--initial-controllers".to_string(), initial.clone()]
                }
            };
            let mut args = vec!["format".to_string()];
            for (k, v) in c.node_props(id) {
                args.push("--override".into());
                args.push(format!("{k}={v}"));
            }
            args.extend(flag);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = crate::process::run_brook(&args, Duration::from_secs(30));
            assert!(out.status.success(), "brook format: {out:?}");
        }
        c.start_all();
        c
    }

    /// `--initial-controllers` naming every node: `id@127.0.0.1:port:directoryId`.
    fn initial_controllers(&self) -> String {
        self.nodes
            .iter()
            .map(|(id, n)| {
                let dir = self.formatted_directory_id(*id);
                format!("{id}@127.0.0.1:{}:{dir}", n.controller_port)
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The directory id [`QuorumFormat::InitialControllers`] formats node `id` with, in
    /// Kafka's uuid form: unique per node and run (from its controller port).
    fn formatted_directory_id(&self, id: i32) -> String {
        use base64::Engine as _;
        let port = u128::from(self.node(id).controller_port);
        let raw = (0x4272_6f6f_6b00_u128 << 64) | (port << 16) | id as u128;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw.to_be_bytes())
    }

    /// Node `id`'s `directory.id`, from its `meta.properties`.
    pub fn directory_id(&self, id: i32) -> String {
        let path = self.data_dir(id).join("meta.properties");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        text.lines()
            .find_map(|l| l.strip_prefix("directory.id="))
            .unwrap_or_else(|| panic!("no directory.id in {}: {text}", path.display()))
            .trim()
            .to_string()
    }

    /// [`Cluster::start`] with every node first formatted by `brook format FORMAT_ARGS` (e.g.
    /// `--add-scram ...`) on its own log directory.
    pub fn start_formatted(
        size: usize,
        overrides: &[(&str, &str)],
        format_args: &[&str],
    ) -> Cluster {
        Self::start_inner(size, overrides, None, format_args)
    }

    /// [`Cluster::start`] with one more broker listener per node, `name://127.0.0.1:PORT`:
    /// the overrides say what it speaks (`listener.security.protocol.map`) and whether it is
    /// the inter-broker listener; the harness keeps checking the cluster over PLAINTEXT.
    pub fn start_with_listener(size: usize, overrides: &[(&str, &str)], name: &str) -> Cluster {
        Self::start_inner(size, overrides, Some(name.to_string()), &[])
    }

    fn start_inner(
        size: usize,
        overrides: &[(&str, &str)],
        extra: Option<String>,
        format_args: &[&str],
    ) -> Cluster {
        let mut c = Self::prepare(size, overrides, extra);
        let ids = c.ids();
        if !format_args.is_empty() {
            for id in &ids {
                let log_dirs = format!("log.dirs={}", c.data_dir(*id).display());
                let mut args = vec!["format", "--override", &log_dirs];
                args.extend_from_slice(format_args);
                let out = crate::process::run_brook(&args, Duration::from_secs(30));
                assert!(out.status.success(), "brook format: {out:?}");
            }
        }
        c.start_all();
        c
    }

    /// The cluster's nodes, ports and directories, before any is formatted or started.
    fn prepare(size: usize, overrides: &[(&str, &str)], extra: Option<String>) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("brook-cluster-")
            .tempdir()
            .expect("create temp dir");
        let mut props: Vec<(String, String)> = Vec::new();
        for (k, v) in defaults().into_iter().chain(overrides.iter().copied()) {
            props.retain(|(pk, _)| pk != k);
            props.push((k.to_string(), v.to_string()));
        }
        let ports = free_ports(3 * size);
        let mut nodes = BTreeMap::new();
        for i in 0..size {
            let id = i as i32 + 1;
            nodes.insert(
                id,
                Node {
                    client_port: ports[3 * i],
                    controller_port: ports[3 * i + 1],
                    extra_port: ports[3 * i + 2],
                    data_dir: dir.path().join(format!("node-{id}")),
                    process: BrookProcess::new(
                        &format!("node {id}"),
                        dir.path().join(format!("node-{id}.log")),
                    ),
                    admin: None,
                    overrides: Vec::new(),
                },
            );
        }
        let voters = nodes
            .iter()
            .map(|(id, n)| format!("{id}@127.0.0.1:{}", n.controller_port))
            .collect::<Vec<_>>()
            .join(",");
        Cluster {
            nodes,
            props,
            voters,
            quorum: QuorumFormat::Static,
            extra_listener: extra,
            dir: Some(dir),
        }
    }

    /// Starts every node, then waits: a node is only ready once the quorum has a leader.
    /// [`Cluster::start`] of `size` nodes of which only `ids` are started (the others are
    /// voters that have not come up yet; [`Cluster::start_node`] starts them).
    pub fn start_only(size: usize, overrides: &[(&str, &str)], ids: &[i32]) -> Cluster {
        let mut c = Self::prepare(size, overrides, None);
        c.start_ids(ids);
        c
    }

    fn start_all(&mut self) {
        let ids = self.ids();
        self.start_ids(&ids);
    }

    fn start_ids(&mut self, ids: &[i32]) {
        for id in ids {
            self.spawn(*id);
        }
        for id in ids {
            self.await_ready(*id);
        }
        // READY means this node is registered; the others may not have applied that yet.
        self.await_brokers_listed(ids, REGISTER_TIMEOUT);
    }

    fn node(&self, id: i32) -> &Node {
        self.nodes
            .get(&id)
            .unwrap_or_else(|| panic!("no node {id} in the cluster"))
    }

    fn node_mut(&mut self, id: i32) -> &mut Node {
        self.nodes
            .get_mut(&id)
            .unwrap_or_else(|| panic!("no node {id} in the cluster"))
    }

    /// `127.0.0.1:PORT` of node `id`'s extra listener ([`Cluster::start_with_listener`]).
    pub fn extra_address(&self, id: i32) -> String {
        assert!(
            self.extra_listener.is_some(),
            "the cluster has no extra listener"
        );
        format!("127.0.0.1:{}", self.node(id).extra_port)
    }

    /// The quorum's place in node `id`'s configuration: its static voters, or the bootstrap
    /// servers of a dynamic quorum.
    fn quorum_prop(&self) -> (String, String) {
        let all = || {
            self.nodes
                .values()
                .map(|n| format!("127.0.0.1:{}", n.controller_port))
                .collect::<Vec<_>>()
                .join(",")
        };
        let servers = match self.quorum {
            QuorumFormat::Static => {
                return ("controller.quorum.voters".into(), self.voters.clone())
            }
            QuorumFormat::Standalone => self.controller_address(1),
            QuorumFormat::InitialControllers => all(),
        };
        ("controller.quorum.bootstrap.servers".into(), servers)
    }

    /// Node `id`'s whole configuration, as `brook serve` and `brook format` take it.
    fn node_props(&self, id: i32) -> Vec<(String, String)> {
        let n = self.node(id);
        let extra = match &self.extra_listener {
            Some(name) => format!(",{name}://127.0.0.1:{}", n.extra_port),
            None => String::new(),
        };
        let mut props: Vec<(String, String)> = vec![
            ("node.id".into(), id.to_string()),
            ("process.roles".into(), "broker,controller".into()),
            (
                "listeners".into(),
                format!(
                    "PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}{extra}",
                    n.client_port, n.controller_port
                ),
            ),
            ("controller.listener.names".into(), "CONTROLLER".into()),
            self.quorum_prop(),
            ("log.dirs".into(), n.data_dir.display().to_string()),
            ("admin.listener".into(), "127.0.0.1:0".into()),
        ];
        // Per-node ports in property values: `{client_port}`, `{controller_port}`,
        // `{extra_port}` (a second broker listener, as a secured cluster has).
        props.extend(self.props.iter().map(|(k, v)| {
            let v = v
                .replace("{client_port}", &n.client_port.to_string())
                .replace("{controller_port}", &n.controller_port.to_string())
                .replace("{extra_port}", &n.extra_port.to_string());
            (k.clone(), v)
        }));
        props.extend(n.overrides.iter().cloned());
        props
    }

    fn spawn(&mut self, id: i32) {
        let mut args = vec!["serve".to_string()];
        for (k, v) in self.node_props(id) {
            args.push("--override".into());
            args.push(format!("{k}={v}"));
        }
        self.node_mut(id)
            .process
            .spawn(&args, &format!("node {id}"));
    }

    fn await_ready(&mut self, id: i32) {
        let n = self.node_mut(id);
        let ready = n.process.await_ready(READY_TIMEOUT);
        let want = format!("127.0.0.1:{}", n.client_port);
        assert_eq!(
            ready.field("listener"),
            Some(want.as_str()),
            "node {id} READY line: {}",
            ready.line
        );
        n.admin = Some(
            ready
                .field("admin")
                .unwrap_or_else(|| panic!("node {id} READY line has no admin=: {}", ready.line))
                .to_string(),
        );
    }

    // ------------------------------------------------------------------------------ nodes

    /// Every node id, ascending.
    pub fn ids(&self) -> Vec<i32> {
        self.nodes.keys().copied().collect()
    }

    /// The first node that is not `id` (the cluster has more than one).
    pub fn other_than(&self, id: i32) -> i32 {
        self.ids()
            .into_iter()
            .find(|n| *n != id)
            .expect("a cluster of more than one node")
    }

    /// Whether the harness started node `id` and has not seen it stop, die or crash.
    pub fn is_up(&self, id: i32) -> bool {
        self.node(id).process.pid().is_some()
    }

    /// The nodes that are up, ascending.
    pub fn live_ids(&self) -> Vec<i32> {
        self.ids()
            .into_iter()
            .filter(|id| self.is_up(*id))
            .collect()
    }

    /// Every node's client address, comma-separated (clients skip the dead ones).
    pub fn bootstrap(&self) -> String {
        self.ids()
            .iter()
            .map(|id| self.address(*id))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `id`'s client address.
    pub fn address(&self, id: i32) -> String {
        format!("127.0.0.1:{}", self.node(id).client_port)
    }

    /// Node `id`'s admin listener (HOST:PORT) of its current run.
    pub fn admin_address(&self, id: i32) -> String {
        assert!(self.is_up(id), "node {id} is not running");
        self.node(id).admin.clone().expect("admin address")
    }

    pub fn dir(&self) -> &Path {
        self.dir.as_ref().unwrap().path()
    }

    pub fn data_dir(&self, id: i32) -> PathBuf {
        self.node(id).data_dir.clone()
    }

    /// Node `id`'s directory of `topic`-`partition`.
    pub fn partition_dir(&self, id: i32, topic: &str, partition: i32) -> PathBuf {
        self.node(id).data_dir.join(format!("{topic}-{partition}"))
    }

    /// SIGKILL node `id` and reap it.
    pub fn kill(&mut self, id: i32) {
        self.node_mut(id).process.kill9();
    }

    /// SIGTERM node `id` and wait (bounded) for it to exit.
    pub fn stop(&mut self, id: i32) -> ExitStatus {
        self.node_mut(id).process.stop()
    }

    /// Waits (bounded) for node `id` to exit on its own (a crash rule); `None` if it still runs.
    pub fn await_exit(&mut self, id: i32, timeout: Duration) -> Option<ExitStatus> {
        self.node_mut(id).process.await_exit(timeout)
    }

    /// Starts node `id` again (same ports, same data dir) after a stop, kill or crash, and
    /// waits until every live node lists it as a registered broker.
    pub fn start_node(&mut self, id: i32) {
        self.spawn(id);
        self.await_ready(id);
        self.await_brokers_listed(&[id], REGISTER_TIMEOUT);
    }

    /// Gives node `id` property `key`=`value` from its next start on, over the cluster's.
    pub fn set_node_override(&mut self, id: i32, key: &str, value: &str) {
        let n = self.node_mut(id);
        n.overrides.retain(|(k, _)| k != key);
        n.overrides.push((key.to_string(), value.to_string()));
    }

    /// `127.0.0.1:PORT` of node `id`'s controller listener.
    pub fn controller_address(&self, id: i32) -> String {
        format!("127.0.0.1:{}", self.node(id).controller_port)
    }

    /// Starts node `id`'s process again without waiting for anything; see
    /// [`Cluster::await_node_ready`].
    pub fn spawn_node(&mut self, id: i32) {
        self.spawn(id);
    }

    /// Waits for the READY line of node `id` (started with [`Cluster::spawn_node`]): the
    /// node serves clients from then on.
    pub fn await_node_ready(&mut self, id: i32) {
        self.await_ready(id);
    }

    /// Writes a line of the harness's own into node `id`'s log.
    pub fn log_line(&self, id: i32, line: &str) {
        self.node(id).process.log_line(line);
    }

    /// The tail of every node's log.
    pub fn log_tails(&self, lines: usize) -> String {
        log_tails(&self.nodes, lines)
    }

    /// The size of node `id`'s log file (every run), in bytes.
    pub fn log_bytes(&self, id: i32) -> u64 {
        let path = self.node(id).process.log_path();
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    /// The lines of node `id`'s log containing `needle` (case-insensitive).
    pub fn log_lines(&self, id: i32, needle: &str) -> Vec<String> {
        let needle = needle.to_lowercase();
        self.node(id)
            .process
            .log_text()
            .lines()
            .filter(|l| l.to_lowercase().contains(&needle))
            .map(str::to_string)
            .collect()
    }

    // ---------------------------------------------------------------------- raw requests

    fn client(&self, id: i32) -> Result<WireClient, String> {
        let addr = self.address(id);
        WireClient::try_connect(&addr, CALL).map_err(|e| format!("connect node {id} ({addr}): {e}"))
    }

    /// A Metadata answer of node `id` for `topics` (none: only brokers and controller).
    pub fn metadata(&self, id: i32, topics: &[&str]) -> Result<MetadataResponse, String> {
        self.client(id)?
            .try_request(METADATA_V, &WireClient::metadata_request(topics, false))
    }

    /// The brokers node `id` lists (registered and unfenced).
    pub fn brokers_seen_by(&self, id: i32) -> Result<BTreeSet<i32>, String> {
        Ok(self
            .metadata(id, &[])?
            .brokers
            .iter()
            .map(|b| b.node_id.0)
            .collect())
    }

    /// Waits until every live node lists each of `ids` as a broker.
    pub fn await_brokers_listed(&self, ids: &[i32], timeout: Duration) {
        poll_until_ok(
            &format!("every live node lists brokers {ids:?}"),
            timeout,
            || {
                let mut seen = Vec::new();
                let mut all = true;
                for n in self.live_ids() {
                    let s = self.brokers_seen_by(n);
                    all &= s.as_ref().is_ok_and(|s| ids.iter().all(|i| s.contains(i)));
                    seen.push(format!("node {n} sees {s:?}"));
                }
                if all {
                    Ok(())
                } else {
                    Err(seen.join("; "))
                }
            },
        )
    }

    /// The controller id in node `id`'s Metadata answer (the active controller, when it is live).
    pub fn controller_seen_by(&self, id: i32) -> Result<i32, String> {
        Ok(self.metadata(id, &[])?.controller_id.0)
    }

    /// Waits until every live node names the same live active controller, other than `not`,
    /// and returns it.
    pub fn await_controller(&self, not: Option<i32>, timeout: Duration) -> i32 {
        poll_until_ok(
            &format!("every live node names the same live controller (not {not:?})"),
            timeout,
            || {
                let seen: Vec<(i32, Result<i32, String>)> = self
                    .live_ids()
                    .into_iter()
                    .map(|n| (n, self.controller_seen_by(n)))
                    .collect();
                let ids: BTreeSet<Option<i32>> =
                    seen.iter().map(|(_, c)| c.as_ref().ok().copied()).collect();
                match ids.into_iter().collect::<Vec<_>>()[..] {
                    [Some(c)] if c > 0 && Some(c) != not && self.is_up(c) => Ok(c),
                    _ => Err(format!("{seen:?}")),
                }
            },
        )
    }

    /// The partition as node `id` describes it; `Err` when it does not answer or does not list
    /// the partition.
    pub fn partition_state_from(
        &self,
        id: i32,
        topic: &str,
        partition: i32,
    ) -> Result<PartitionState, String> {
        let md = self.metadata(id, &[topic])?;
        let t = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(topic))
            .ok_or_else(|| format!("node {id} does not list topic {topic}"))?;
        let p = t
            .partitions
            .iter()
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| {
                format!(
                    "node {id} lists no partition {partition} of {topic} (topic error {})",
                    t.error_code
                )
            })?;
        Ok(PartitionState {
            answered_by: id,
            leader: p.leader_id.0,
            leader_epoch: p.leader_epoch,
            replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
            isr: p.isr_nodes.iter().map(|b| b.0).collect(),
            controller: md.controller_id.0,
            error_code: p.error_code,
        })
    }

    /// The partition as every live node describes it, when they all answer with the same
    /// leader, leader epoch, replicas and ISR; else `Err` with what each node said.
    pub fn agreed_state(&self, topic: &str, partition: i32) -> Result<PartitionState, String> {
        let states: Vec<Result<PartitionState, String>> = self
            .live_ids()
            .into_iter()
            .map(|n| self.partition_state_from(n, topic, partition))
            .collect();
        let same = |a: &PartitionState, b: &PartitionState| {
            (a.leader, a.leader_epoch, &a.replicas, &a.isr)
                == (b.leader, b.leader_epoch, &b.replicas, &b.isr)
        };
        match states.first() {
            Some(Ok(first))
                if states
                    .iter()
                    .all(|s| s.as_ref().is_ok_and(|s| same(s, first))) =>
            {
                Ok(first.clone())
            }
            _ => Err(format!("{states:#?}")),
        }
    }

    /// Waits until every live node agrees on the partition ([`Cluster::agreed_state`]) and
    /// `cond` holds for that state; returns it.
    pub fn await_partition(
        &self,
        topic: &str,
        partition: i32,
        what: &str,
        timeout: Duration,
        cond: impl Fn(&PartitionState) -> bool,
    ) -> PartitionState {
        poll_until_ok(
            &format!("{topic}-{partition}: {what} (every live node agreeing)"),
            timeout,
            || match self.agreed_state(topic, partition) {
                Ok(s) if cond(&s) => Ok(s),
                Ok(s) => Err(format!("{s:?}")),
                Err(e) => Err(e),
            },
        )
    }

    /// The partition's settled state: a live leader, every live node agreeing.
    pub fn partition_state(&self, topic: &str, partition: i32) -> PartitionState {
        self.await_partition(topic, partition, "a live leader", TOPIC_TIMEOUT, |s| {
            s.leader > 0 && self.is_up(s.leader)
        })
    }

    /// The leader of the partition (settled).
    pub fn leader_of(&self, topic: &str, partition: i32) -> i32 {
        self.partition_state(topic, partition).leader
    }

    /// Waits until the ISR is exactly `isr` (and the leader is live).
    pub fn await_isr(
        &self,
        topic: &str,
        partition: i32,
        isr: &[i32],
        timeout: Duration,
    ) -> PartitionState {
        let want: BTreeSet<i32> = isr.iter().copied().collect();
        self.await_partition(
            topic,
            partition,
            &format!("ISR == {want:?}"),
            timeout,
            |s| s.isr == want && s.leader > 0 && self.is_up(s.leader),
        )
    }

    /// Waits until a live node other than `not` leads the partition; returns the state.
    pub fn await_leader_other_than(
        &self,
        topic: &str,
        partition: i32,
        not: i32,
        timeout: Duration,
    ) -> PartitionState {
        self.await_partition(
            topic,
            partition,
            &format!("a live leader other than node {not}"),
            timeout,
            |s| s.leader > 0 && s.leader != not && self.is_up(s.leader),
        )
    }

    /// Creates a topic (CreateTopics to the first live node that answers; Brook forwards it to
    /// the controller) and waits until every partition has a live leader that serves it
    /// (ListOffsets answers without error) and every live replica in its ISR.
    pub fn create_topic(&self, topic: &str, partitions: i32, rf: i16, configs: &[(&str, &str)]) {
        let req = WireClient::create_topics_request(topic, partitions, rf, configs, CALL);
        let mut attempts = 0;
        poll_until_ok(&format!("CreateTopics {topic}"), CALL, || {
            attempts += 1;
            let mut errors = Vec::new();
            for n in self.live_ids() {
                match self
                    .client(n)
                    .and_then(|mut c| c.try_request(CREATE_TOPICS_V, &req))
                {
                    Ok(r) => {
                        let code = r.topics[0].error_code;
                        // A retry may find the topic the lost first answer created.
                        let ok = code == errors::NONE
                            || (attempts > 1 && code == errors::TOPIC_ALREADY_EXISTS);
                        assert!(ok, "CreateTopics {topic} on node {n}: {r:?}");
                        return Ok(());
                    }
                    Err(e) => errors.push(e),
                }
            }
            Err(errors.join("; "))
        });
        for p in 0..partitions {
            // Metadata comes from the quorum's image; the leader may apply it a moment later
            // and answer UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER until then. A replica placed
            // on a node that is down (not yet fenced) leads until the controller fences it.
            let req = WireClient::list_offsets_request(topic, p, -1);
            poll_until_ok(
                &format!(
                    "{topic}-{p} has a live leader that serves it and every live replica in sync"
                ),
                TOPIC_TIMEOUT,
                || {
                    let s = self.agreed_state(topic, p)?;
                    let live_in_sync = s
                        .replicas
                        .iter()
                        .all(|r| s.isr.contains(r) || !self.is_up(*r));
                    let placed = s.replicas.len() == rf as usize;
                    if !placed || s.leader <= 0 || !self.is_up(s.leader) || !live_in_sync {
                        return Err(format!("{s:?}"));
                    }
                    let r = self.client(s.leader)?.try_request(LIST_OFFSETS_V, &req)?;
                    match r.topics.first().and_then(|t| t.partitions.first()) {
                        Some(pr) if pr.error_code == errors::NONE => Ok(()),
                        _ => Err(format!("{s:?}: {r:?}")),
                    }
                },
            );
        }
    }

    /// The coordinator node id of `group` that node `id` names (FindCoordinator v3).
    pub fn find_coordinator(&self, id: i32, group: &str) -> Result<i32, String> {
        let mut req = FindCoordinatorRequest::default();
        req.key = StrBytes::from_string(group.to_string());
        req.key_type = 0;
        let r = self.client(id)?.try_request(FIND_COORDINATOR_V, &req)?;
        if r.error_code != errors::NONE {
            return Err(format!("node {id}: FindCoordinator({group}): {r:?}"));
        }
        Ok(r.node_id.0)
    }

    // ---------------------------------------------------------------- faults and dump-log

    fn brook_cli(&self, id: i32, args: &[&str]) -> String {
        let out = run_brook(args, CALL);
        self.log_line(
            id,
            &format!(
                "=== test harness: brook {args:?} -> {} {}{}",
                out.status,
                out.stdout.trim(),
                out.stderr.trim()
            ),
        );
        assert!(
            out.status.success(),
            "brook {args:?} (node {id}) failed with {}: {}{}",
            out.status,
            out.stdout,
            out.stderr
        );
        out.stdout
    }

    /// Installs a fault rule on node `id` with `brook fault add --admin ADDR ARGS...`; returns
    /// the rule id.
    pub fn fault_add(&self, id: i32, args: &[&str]) -> u64 {
        let admin = self.admin_address(id);
        let mut argv = vec!["fault", "add", "--admin", &admin];
        argv.extend_from_slice(args);
        let out = self.brook_cli(id, &argv);
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("brook fault add printed {out:?}, not a rule id"))
    }

    /// Cuts every replication link of node `id`: its fetches to any leader, and any
    /// follower's fetches to it (a link rule; rules do not survive a restart).
    pub fn isolate_replication(&self, id: i32) -> u64 {
        self.cut_link(id, "*", "replication")
    }

    /// Installs a link rule on node `id` partitioning `traffic` (`replication`, `controller`)
    /// with `peer` (a node id, or `*` for every peer) in both directions; returns the rule id.
    pub fn cut_link(&self, id: i32, peer: &str, traffic: &str) -> u64 {
        self.fault_add(
            id,
            &[
                "--action",
                "partition",
                "--to",
                peer,
                "--direction",
                "both",
                "--traffic",
                traffic,
            ],
        )
    }

    /// The rules on node `id` (`brook fault list`), as JSON.
    pub fn fault_list(&self, id: i32) -> String {
        let admin = self.admin_address(id);
        self.brook_cli(id, &["fault", "list", "--admin", &admin])
    }

    /// The sum of the `fired` counts of every rule on node `id`.
    pub fn fault_fired(&self, id: i32) -> u64 {
        let list = self.fault_list(id);
        list.split("\"fired\":")
            .skip(1)
            .map(|rest| {
                let digits: String = rest
                    .trim_start()
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse::<u64>().unwrap_or(0)
            })
            .sum()
    }

    /// How often rule `rule` on node `id` fired (0 when there is no such rule).
    pub fn fault_fired_rule(&self, id: i32, rule: u64) -> u64 {
        let list = self.fault_list(id);
        let leading_number = |s: &str| -> Option<u64> {
            let digits: String = s
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        };
        // One JSON object per rule (the list holds no nested objects); fields in any order.
        let field = |chunk: &str, name: &str| {
            chunk
                .split(&format!("\"{name}\":"))
                .nth(1)
                .and_then(leading_number)
        };
        list.split('{')
            .skip(1)
            .find(|chunk| field(chunk, "id") == Some(rule))
            .and_then(|chunk| field(chunk, "fired"))
            .unwrap_or(0)
    }

    /// Removes rule `rule` on node `id` (`brook fault clear --id`).
    pub fn fault_remove(&self, id: i32, rule: u64) {
        let admin = self.admin_address(id);
        let rule = rule.to_string();
        self.brook_cli(id, &["fault", "clear", "--admin", &admin, "--id", &rule]);
    }

    /// Removes every rule on node `id` (`brook fault clear`), if it runs.
    pub fn fault_clear(&self, id: i32) {
        if self.is_up(id) {
            let admin = self.admin_address(id);
            self.brook_cli(id, &["fault", "clear", "--admin", &admin]);
        }
    }

    /// One record with acks=1 to partition `partition` of `topic` on node `id`: the error code.
    pub fn produce_acks1(&self, id: i32, topic: &str, partition: i32) -> i16 {
        let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_700_000_000_000)]);
        let req = WireClient::produce_request(topic, partition, batch, 1);
        let mut c = WireClient::connect(&self.address(id));
        c.request(PRODUCE_V, &req).responses[0].partition_responses[0].error_code
    }

    /// Makes partition 0 of `topic` (replicated to every node, `min.insync.replicas=1`, all in
    /// the ISR) diverge: its leader takes an acks=1 record no follower fetched, dies, and a
    /// new leader takes a record of its own at the next leader epoch. The old leader is left
    /// down; started again, it must truncate that record as a follower. Returns (old leader,
    /// new leader).
    pub fn diverge_partition_leader(&mut self, topic: &str, timeout: Duration) -> (i32, i32) {
        let all = self.ids();
        let old = self.await_isr(topic, 0, &all, timeout).leader;
        self.isolate_replication(old);
        // A follower fetch parked before the cut would still carry the record: wait until
        // the old leader's Fetch purgatory is empty (new follower fetches are refused at once).
        poll_until_ok("no parked follower fetch", timeout, || {
            let text = admin_get(&self.admin_address(old), "/metrics")?;
            text.lines()
                .any(|l| l == "brook_purgatory_size{operation=\"Fetch\"} 0")
                .then_some(())
                .ok_or(text)
        });
        let code = self.produce_acks1(old, topic, 0);
        assert_eq!(code, errors::NONE, "acks=1 produce to node {old}");
        self.kill(old);
        let new = self.await_leader_other_than(topic, 0, old, timeout).leader;
        poll_until_ok("a record on the new leader", timeout, || {
            let code = self.produce_acks1(new, topic, 0);
            (code == errors::NONE)
                .then_some(())
                .ok_or(format!("error {code}"))
        });
        (old, new)
    }

    /// `brook dump-log` of node `id`'s copy of a partition (empty when it has none).
    pub fn dump_log(&self, id: i32, topic: &str, partition: i32) -> Vec<DumpedBatch> {
        let dir = self.partition_dir(id, topic, partition);
        if !dir.is_dir() {
            return Vec::new();
        }
        let dir = dir.display().to_string();
        let out = run_brook(&["dump-log", &dir], CALL * 6);
        assert!(
            out.status.success(),
            "brook dump-log {dir} failed with {}: {}",
            out.status,
            out.stderr
        );
        out.stdout
            .lines()
            .filter(|l| l.starts_with("baseOffset:"))
            .map(DumpedBatch::parse)
            .collect()
    }

    /// Node `id`'s log end offset of a partition, from its files (`brook dump-log`).
    pub fn log_end_offset(&self, id: i32, topic: &str, partition: i32) -> i64 {
        self.dump_log(id, topic, partition)
            .last()
            .map_or(0, |b| b.last_offset() + 1)
    }

    /// Waits until every replica in `replicas` holds the same batches on disk (offsets,
    /// producer, sequence, leader epoch, CRC); returns that log.
    pub fn await_identical_replicas(
        &self,
        topic: &str,
        partition: i32,
        replicas: &[i32],
        timeout: Duration,
    ) -> Vec<DumpedBatch> {
        poll_until_ok(
            &format!("identical replicas {replicas:?} of {topic}-{partition}"),
            timeout,
            || {
                let logs: Vec<(i32, Vec<DumpedBatch>)> = replicas
                    .iter()
                    .map(|r| (*r, self.dump_log(*r, topic, partition)))
                    .collect();
                let ids: Vec<Vec<String>> = logs
                    .iter()
                    .map(|(_, l)| l.iter().map(DumpedBatch::identity).collect())
                    .collect();
                if ids.iter().all(|l| *l == ids[0]) {
                    return Ok(logs.into_iter().next().unwrap().1);
                }
                Err(describe_difference(&logs))
            },
        )
    }
}

fn log_tails(nodes: &BTreeMap<i32, Node>, lines: usize) -> String {
    nodes
        .values()
        .map(|n| n.process.log_tail(lines))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each replica's batch count and last batch, and the first batch where they differ.
fn describe_difference(logs: &[(i32, Vec<DumpedBatch>)]) -> String {
    let mut s = String::new();
    for (id, l) in logs {
        s.push_str(&format!(
            "\n  node {id}: {} batches, last {:?}",
            l.len(),
            l.last().map(DumpedBatch::identity)
        ));
    }
    let longest = logs.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    for i in 0..longest {
        let at: Vec<Option<String>> = logs
            .iter()
            .map(|(_, l)| l.get(i).map(DumpedBatch::identity))
            .collect();
        if at.iter().any(|b| *b != at[0]) {
            s.push_str(&format!("\n  first difference at batch #{i}: {at:?}"));
            break;
        }
    }
    s
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let nodes = &self.nodes;
        keep_on_panic(&mut self.dir, "cluster", || log_tails(nodes, 80));
        // `nodes` (declared first) is dropped next: every running child is killed and reaped
        // before the temp dir goes.
    }
}

/// `GET path` on an admin listener over HTTP/1.1 with `Connection: close`: the body of a 200
/// answer, or what went wrong.
pub fn admin_get(admin: &str, path: &str) -> Result<String, String> {
    admin_get_as(admin, path, None)
}

/// The `Authorization` value of HTTP Basic credentials (`admin.basic.auth.credentials.file`).
pub fn basic_authorization(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// The `Authorization` value from `BROOK_HTTP_CREDENTIALS` (`user:password`), as the `brook`
/// CLI reads it, for harnesses driving a cluster started with `--http-auth`.
pub fn http_client_authorization() -> Result<Option<String>, String> {
    match std::env::var("BROOK_HTTP_CREDENTIALS") {
        Err(_) => Ok(None),
        Ok(v) if v.is_empty() => Ok(None),
        Ok(v) => match v.split_once(':') {
            Some((user, password)) => Ok(Some(basic_authorization(user, password))),
            None => Err("BROOK_HTTP_CREDENTIALS must be user:password".into()),
        },
    }
}

/// [`admin_get`] with an `Authorization` header.
pub fn admin_get_as(
    admin: &str,
    path: &str,
    authorization: Option<&str>,
) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).map_err(|e| format!("connect {admin}: {e}"))?;
    s.set_read_timeout(Some(CALL)).map_err(|e| e.to_string())?;
    let auth = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {admin}\r\n{auth}Connection: close\r\n\r\n"
    )
    .map_err(|e| format!("send to {admin}: {e}"))?;
    let mut raw = String::new();
    s.take(ADMIN_ANSWER_BYTES_MAX)
        .read_to_string(&mut raw)
        .map_err(|e| format!("read from {admin}: {e}"))?;
    match raw.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
        _ => Err(format!("GET {path} on {admin}: {raw}")),
    }
}

/// Bound on an admin answer [`admin_get`] reads.
const ADMIN_ANSWER_BYTES_MAX: u64 = 16 << 20;
