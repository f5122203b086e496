//! What `brook cluster` starts: its flags, and for each node the `brook serve` command line,
//! ports, data directory and log file (generated, or read from `--config-dir`); and the
//! `READY` line a started node prints.

use super::*;

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

/// The timings of `--test-timings`, the one list every test kit uses: a killed or paused
/// node is fenced, and its partitions' leadership moves, in about 3 s instead of Kafka's 9 s
/// session (`broker.session.timeout.ms`, with a heartbeat every `broker.heartbeat.interval.ms`
/// so that a few can be missed, and `replica.lag.time.max.ms` for a follower's ISR), and a
/// group's first rebalance does not wait 3 s for more members
/// (`group.initial.rebalance.delay.ms`), as Kafka's own test harnesses set them.
pub const TEST_TIMINGS: [(&str, &str); 4] = [
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
    ("replica.lag.time.max.ms", "3000"),
    ("group.initial.rebalance.delay.ms", "0"),
];

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
    /// Serves TLS: makes a CA and key and trust stores in `<data-dir>/tls`, names the client
    /// listener SSL (also the inter-broker listener, `ssl.client.auth=required`) and prints
    /// the client settings. Not with `--config-dir`.
    #[arg(long, conflicts_with = "config_dir")]
    pub secure: bool,
    /// With `--secure`: the client (and inter-broker) listener is SASL_SSL with
    /// SCRAM-SHA-512 instead of mutual TLS; every node is formatted with the SCRAM user
    /// `admin` (as `brook format --add-scram` does), whom the nodes log in as too.
    #[arg(long, requires = "secure")]
    pub sasl: bool,
    /// Requires HTTP Basic credentials on the supervisor's API and every node's admin
    /// listener: user `admin` with a fresh random password, written to
    /// `<data-dir>/http-credentials.properties` and printed once the cluster is ready.
    #[arg(long)]
    pub http_auth: bool,
    /// Stops the cluster (as SIGTERM does) when stdin reaches end of file, and starts every
    /// node with the same watch on a pipe from the supervisor: a test kit keeps a pipe open
    /// to the supervisor, so the cluster dies with the test process.
    #[arg(long)]
    pub exit_on_stdin_eof: bool,
    /// Sets [`TEST_TIMINGS`] on every node before the `--override`s (which win): what the
    /// test kits start their clusters with (docs/TESTING-WITH-BROOK.md).
    #[arg(long)]
    pub test_timings: bool,
    /// Creates a topic once every node is READY, before `CLUSTER READY` (repeatable): NAME,
    /// NAME:PARTITIONS or NAME:PARTITIONS:REPLICATION_FACTOR (the broker's defaults
    /// otherwise). `CLUSTER READY` then means every node names a leader for each partition.
    /// Not with `--secure` (the supervisor speaks plaintext to the client listener).
    #[arg(
        long = "topic",
        value_name = "NAME[:PARTITIONS[:RF]]",
        conflicts_with = "secure"
    )]
    pub topics: Vec<super::topics::TopicSpec>,
}

/// How one node is started; fixed for the life of the supervisor, except that ports picked
/// by the child (port 0) are written back after its first READY.
#[derive(Debug, Clone)]
pub(super) struct NodePlan {
    pub(super) id: i32,
    /// `--config` of `brook serve` (with `--config-dir`).
    pub(super) config_file: Option<PathBuf>,
    /// Generated listeners (without `--config-dir`): client, controller, admin.
    pub(super) generated: Option<GeneratedPorts>,
    /// The generated client listener's name: PLAINTEXT, SSL with `--secure`, SASL_SSL with
    /// `--secure --sasl`.
    pub(super) client_listener: &'static str,
    /// `controller.quorum.voters`, shared by every node (generated mode).
    pub(super) voters: String,
    pub(super) log_dirs: PathBuf,
    /// The user's `--override`s.
    pub(super) overrides: Vec<String>,
    pub(super) log_file: PathBuf,
    pub(super) client: Option<SocketAddr>,
    pub(super) controller: Option<SocketAddr>,
    pub(super) admin: Option<SocketAddr>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct GeneratedPorts {
    pub(super) client: u16,
    pub(super) controller: u16,
    pub(super) admin: u16,
}

/// The properties every node gets in generated mode, in order, before `--override`s; equal
/// to `config/cluster/node-N.properties` (a test checks it).
fn generated_properties(
    id: i32,
    client_listener: &str,
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
                "{client_listener}://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
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
    pub(super) fn serve_args(&self) -> Vec<String> {
        let mut args = vec!["serve".to_string()];
        if let Some(f) = &self.config_file {
            args.push("--config".into());
            args.push(f.display().to_string());
        }
        if let Some(ports) = self.generated {
            for (k, v) in generated_properties(
                self.id,
                self.client_listener,
                ports,
                &self.voters,
                &self.log_dirs,
            ) {
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
pub(super) fn plan(args: &ClusterArgs) -> Result<Vec<NodePlan>, String> {
    if args.nodes == 0 || args.nodes > MAX_NODES {
        return Err(format!("--nodes must be 1..={MAX_NODES}"));
    }
    if let Some(dir) = &args.config_dir {
        return plans_from_config_dir(args, dir);
    }
    let n = args.nodes as u16;
    let [client_ports, controller_ports, admin_ports] = pick_ports(n, port_bases(args)?)?;
    let voters = controller_ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let mut plans = Vec::new();
    for i in 0..n {
        let id = i32::from(i) + 1;
        let i = i as usize;
        let ports = GeneratedPorts {
            client: client_ports[i],
            controller: controller_ports[i],
            admin: admin_ports[i],
        };
        plans.push(generated_plan(args, id, ports, &voters));
    }
    for p in &plans {
        p.check_config()?;
    }
    Ok(plans)
}

/// `--config-dir`: one `node-N.properties` per node, each read as `brook serve` reads it (with
/// the `--override`s), its `node.id` checked against its file name.
fn plans_from_config_dir(
    args: &ClusterArgs,
    dir: &std::path::Path,
) -> Result<Vec<NodePlan>, String> {
    let mut plans = Vec::new();
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
            client_listener: "PLAINTEXT",
            voters: String::new(),
            log_dirs: cfg.log_dir.clone(),
            overrides: args.overrides.clone(),
            log_file: args.data_dir.join(format!("node-{id}.log")),
            client: (cfg.listener().port() != 0).then_some(cfg.listener()),
            controller: cfg.controller_listener(),
            admin: cfg.admin_listener.filter(|a| a.port() != 0),
        });
    }
    Ok(plans)
}

/// The first client, controller and admin ports (0: pick free ones): the flags', else
/// `--base-port` plus each kind's offset; each range of `--nodes` ports must end by 65535.
fn port_bases(args: &ClusterArgs) -> Result<[u16; 3], String> {
    let n = args.nodes as u16;
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
    Ok([base, controller_base, admin_base])
}

/// `n` client, controller and admin ports from their bases. Port 0: the supervisor picks
/// free ports (binds port 0, notes the port, lets it go once all are picked, so no two
/// coincide). Every voter must know every controller address before any node starts, and a
/// broker registers and advertises the port its configuration names, so children never get
/// port 0.
fn pick_ports(n: u16, bases: [u16; 3]) -> Result<[Vec<u16>; 3], String> {
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
    let client_ports = ports(bases[0], "client")?;
    let controller_ports = ports(bases[1], "controller")?;
    let admin_ports = ports(bases[2], "admin")?;
    drop(held);
    Ok([client_ports, controller_ports, admin_ports])
}

/// Node `id`'s plan with a generated configuration on `ports`, in `--data-dir`.
fn generated_plan(args: &ClusterArgs, id: i32, ports: GeneratedPorts, voters: &str) -> NodePlan {
    let addr = |p: u16| (p != 0).then(|| SocketAddr::from(([127, 0, 0, 1], p)));
    NodePlan {
        id,
        config_file: None,
        generated: Some(ports),
        client_listener: match (args.secure, args.sasl) {
            (true, true) => "SASL_SSL",
            (true, false) => "SSL",
            _ => "PLAINTEXT",
        },
        voters: voters.to_string(),
        log_dirs: args.data_dir.join(format!("node-{id}")),
        overrides: args.overrides.clone(),
        log_file: args.data_dir.join(format!("node-{id}.log")),
        client: addr(ports.client),
        controller: addr(ports.controller),
        admin: addr(ports.admin),
    }
}

impl NodePlan {
    /// Loads what the child would load, so a bad `--override` (a key Kafka does not declare,
    /// a value of the wrong type) is reported once, by name, before any node starts.
    fn check_config(&self) -> Result<(), String> {
        let props: Vec<String> = self
            .serve_args()
            .into_iter()
            .skip(1)
            .filter(|a| a != "--override")
            .collect();
        BrokerConfig::load(None, &props)
            .map(|_| ())
            .map_err(|e| format!("node {}: {e}", self.id))
    }
}

/// Binds every generated listener's port once (and lets it go), so a port in use is
/// reported by name before any node starts, rather than as a node that exited.
pub(super) fn check_ports_free(plans: &[NodePlan]) -> Result<(), String> {
    for p in plans {
        let named = [
            ("client", p.client),
            ("controller", p.controller),
            ("admin", p.admin),
        ];
        for (what, addr) in named {
            let Some(addr) = addr.filter(|_| p.generated.is_some()) else {
                continue;
            };
            if let Err(e) = std::net::TcpListener::bind(addr) {
                return Err(format!(
                    "node {}'s {what} port {addr} is in use ({e}); pick other ports with \
                     --base-port (0 picks free ones)",
                    p.id
                ));
            }
        }
    }
    Ok(())
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

#[cfg(test)]
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
        assert_eq!(cfg.controller_listener(), p.controller);
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

    #[test]
    fn an_unknown_key_or_a_port_in_use_is_named_before_any_node_starts() {
        let err = plan(&args(&["--override", "no.such.key=1"])).unwrap_err();
        assert!(err.contains("unknown config key \"no.such.key\""), "{err}");
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port().to_string();
        let plans = plan(&args(&["--nodes", "1", "--base-port", &port])).unwrap();
        let err = check_ports_free(&plans).unwrap_err();
        assert!(
            err.contains(&format!("port 127.0.0.1:{port} is in use")),
            "{err}"
        );
    }

    /// `config/cluster/node-N.properties` say exactly what the generated defaults say.
    #[test]
    fn shipped_properties_equal_the_defaults() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/cluster");
        for p in plan(&args(&[])).unwrap() {
            let file = dir.join(format!("node-{}.properties", p.id));
            let text = std::fs::read_to_string(&file).unwrap();
            let mut from_file = brook::config::parse_properties(&text).unwrap();
            from_file.sort();
            let ports = p.generated.unwrap();
            let mut generated =
                generated_properties(p.id, p.client_listener, ports, &p.voters, &p.log_dirs);
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
