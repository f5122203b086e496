//! The `brook` command: `brook serve --config server.properties [--override k=v]...`,
//! `brook cluster` (a local multi-node cluster under one supervisor), `brook node` (kill and
//! restart its nodes), `brook fault` (fault rules on a node), `brook dump-log` and `brook chaos`
//! (execs the `brook-chaos` checker next to this binary).
// Test functions may be long (a scenario reads top to bottom); the rest is held to clippy.toml's 70 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio::sync::watch;

use brook::config::BrokerConfig;
use brook::fault::{FaultSpec, PeerSpec, RuleKind, When};
use brook::server::Server;

/// The process allocator: one that keeps freed memory for reuse. Under a replicated produce
/// load with glibc's malloc, the leader faulted in about 2.8 bytes of fresh memory per byte
/// produced (benches/RESULTS.md, "Memory churn").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "brook",
    version,
    about = "A small Kafka-wire-compatible broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per run: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Writes a CA and TLS key and trust stores (PEM and PKCS12) for brokers and a client
    /// into a directory, for test and development setups.
    Certs {
        /// Where the files go (created if missing).
        #[arg(long)]
        dir: PathBuf,
        /// The password of the PKCS12 stores and of the encrypted PEM key.
        #[arg(long, default_value = "brook-secret")]
        password: String,
    },
    /// Runs one broker node.
    Serve {
        /// A Kafka-style server.properties file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Overrides one property (repeatable), as kafka-server-start's --override.
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Stops the node (as SIGTERM does) when stdin reaches end of file: a test kit keeps
        /// a pipe open to it, so the node dies with the test process.
        #[arg(long)]
        exit_on_stdin_eof: bool,
    },
    /// Prepares a node's log directory before its first start, as `kafka-storage format`
    /// does: `--add-scram` creates SCRAM users that the cluster records when it starts.
    Format {
        /// A Kafka-style server.properties file (for `log.dirs`).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Overrides one property (repeatable).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// A SCRAM user, as kafka-storage takes it: 'SCRAM-SHA-256=[name=admin,password=secret]'
        /// (repeatable; `iterations=N` optional).
        #[arg(long = "add-scram", value_name = "MECHANISM=[name=..,password=..]")]
        add_scram: Vec<String>,
        /// Initializes a controller as a single-node dynamic quorum (KIP-853); the
        /// configuration has controller.quorum.bootstrap.servers, not controller.quorum.voters.
        #[arg(long, short = 's', group = "quorum")]
        standalone: bool,
        /// Initializes a dynamic quorum with these voters, the same on every node:
        /// id@host:port:directoryId,... (directory ids in Kafka's uuid form).
        #[arg(long, short = 'I', value_name = "VOTERS", group = "quorum")]
        initial_controllers: Option<String>,
        /// Initializes a node of a dynamic quorum that joins it later (AddRaftVoter).
        #[arg(long, short = 'N', group = "quorum")]
        no_initial_controllers: bool,
        /// Leaves an already formatted log directory as it is and succeeds, where `format`
        /// otherwise refuses it (kafka-storage's `--ignore-formatted`).
        #[arg(long, short = 'g')]
        ignore_formatted: bool,
    },
    /// Prints the batches of a segment file (or of every segment in a partition directory),
    /// transaction markers, and the aborted transactions of `.txnindex` files.
    DumpLog {
        /// A `.log` segment, a `.txnindex` file or a `<topic>-<partition>` directory.
        path: PathBuf,
        /// Decode records as `__transaction_state` records (automatic for files of that
        /// topic), as Kafka's kafka-dump-log `--transaction-log-decoder`.
        #[arg(long)]
        transaction_log_decoder: bool,
    },
    /// Adds, lists or clears fault rules on a running node, through its admin listener.
    Fault {
        #[command(subcommand)]
        command: FaultCommand,
    },
    /// Runs a local cluster: one `brook serve` child process per node, under a supervisor
    /// that can kill and restart them (see `brook node`).
    Cluster(brook_tools::supervisor::ClusterArgs),
    /// Lists, kills, restarts or starts the nodes of a `brook cluster`, through its
    /// supervisor's HTTP API.
    Node {
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Runs the chaos checker: the `brook-chaos` binary next to this one, with these
    /// arguments (`brook chaos --help` lists them).
    #[command(disable_help_flag = true)]
    Chaos {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand)]
enum NodeCommand {
    /// Prints every node: id, pid, alive, ports.
    List {
        /// The supervisor's listener, HOST:PORT (`--supervisor-listener` of `brook cluster`).
        #[arg(long)]
        supervisor: String,
    },
    /// Kills one node: SIGKILL (like `kill -9`), or SIGTERM with `--signal term`.
    Kill {
        #[arg(long)]
        supervisor: String,
        #[arg(long)]
        id: i32,
        /// `kill` (default) or `term`.
        #[arg(long)]
        signal: Option<String>,
    },
    /// Stops the node if it runs (SIGTERM), starts it again with the same configuration and
    /// data, and waits for it to be ready.
    Restart {
        #[arg(long)]
        supervisor: String,
        #[arg(long)]
        id: i32,
    },
    /// Starts a node that is not running and waits for it to be ready.
    Start {
        #[arg(long)]
        supervisor: String,
        #[arg(long)]
        id: i32,
    },
}

#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum FaultCommand {
    /// Installs a rule and prints its id.
    Add {
        /// The node's admin listener, HOST:PORT.
        #[arg(long)]
        admin: String,
        /// drop-request, drop-response, delay, error or close; crash (with --point); for
        /// link rules partition, or delay with any of --to/--from/--direction/--traffic.
        #[arg(long)]
        action: String,
        /// request, crash or link (inferred from the action when omitted).
        #[arg(long)]
        kind: Option<String>,
        /// For crash: after-leader-append, after-replication-before-ack,
        /// follower-after-fetch-before-append, txn-after-prepare-before-markers,
        /// txn-after-marker, cleaner-after-cleaned or cleaner-after-swap.
        #[arg(long)]
        point: Option<String>,
        /// For link rules: this node's id (default any).
        #[arg(long)]
        from: Option<i32>,
        /// For link rules: the peer node id, or '*' (default).
        #[arg(long)]
        to: Option<String>,
        /// For link rules: out, in or both (default).
        #[arg(long)]
        direction: Option<String>,
        /// For link rules: replication, controller or both (default).
        #[arg(long)]
        traffic: Option<String>,
        /// API name (produce, fetch, metadata, init-producer-id, ...) or key.
        #[arg(long)]
        api: Option<String>,
        #[arg(long)]
        topic: Option<String>,
        #[arg(long)]
        partition: Option<i32>,
        #[arg(long)]
        client_id: Option<String>,
        #[arg(long)]
        node: Option<i32>,
        /// How many times the rule fires (default 1, or unlimited with --probability).
        #[arg(long)]
        times: Option<u64>,
        #[arg(long)]
        probability: Option<f64>,
        #[arg(long)]
        seed: Option<u64>,
        /// For delay.
        #[arg(long)]
        delay_ms: Option<u64>,
        /// For error: the Kafka error to answer, by name (NOT_ENOUGH_REPLICAS, any case) or
        /// by code (19).
        #[arg(long)]
        error: Option<String>,
        /// For delay and close: before or after processing.
        #[arg(long)]
        when: Option<String>,
    },
    /// Lists the rules and how often each fired.
    List {
        #[arg(long)]
        admin: String,
    },
    /// Removes one rule (--id) or all.
    Clear {
        #[arg(long)]
        admin: String,
        #[arg(long)]
        id: Option<u64>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BROOK_LOG")
                // The Raft library logs every vote and append at INFO; the controller logs
                // quorum leader changes itself (controller::quorum_leader_log_task).
                .unwrap_or_else(|_| "info,openraft=warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // A fault can make a library warn on every call (openraft on each failed replication
        // call); those lines are rate-limited per call site.
        .event_format(brook::log_limit::LimitedFormat {
            inner: tracing_subscriber::fmt::format::Format::default(),
        })
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve {
            config,
            overrides,
            exit_on_stdin_eof,
        } => serve(config, overrides, exit_on_stdin_eof),
        Command::Certs { dir, password } => {
            match brook::security::ssl::certs::write_test_pki(&dir, &password) {
                Ok(pki) => {
                    println!("{pki:#?}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("brook certs: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Format {
            config,
            overrides,
            add_scram,
            standalone,
            initial_controllers,
            no_initial_controllers,
            ignore_formatted,
        } => {
            use brook::controller::dynamic_voters::QuorumFlag;
            let quorum = match (standalone, initial_controllers, no_initial_controllers) {
                (true, _, _) => Some(QuorumFlag::Standalone),
                (_, Some(v), _) => Some(QuorumFlag::InitialControllers(v)),
                (_, _, true) => Some(QuorumFlag::NoInitialControllers),
                _ => None,
            };
            format(config, overrides, add_scram, quorum, ignore_formatted)
        }
        Command::Fault { command } => fault(command),
        Command::DumpLog {
            path,
            transaction_log_decoder,
        } => dump_log(&path, transaction_log_decoder),
        Command::Cluster(args) => brook_tools::supervisor::run(args),
        Command::Node { command } => node(command),
        Command::Chaos { args } => chaos(args),
    }
}

/// Raises the soft limit on open files to the hard limit, as the JVM does for a Kafka broker
/// on Linux (HotSpot's `MaxFDLimit`, on by default): every connection, segment and index
/// holds a descriptor, and a soft limit of 1,024 would refuse connections long before
/// `max.connections`.
fn raise_open_file_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let raised = getrlimit(Resource::RLIMIT_NOFILE).and_then(|(soft, hard)| {
        if soft < hard {
            setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
        }
        Ok((soft, hard))
    });
    match raised {
        Ok((soft, hard)) => tracing::debug!(was = soft, now = hard, "open file soft limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open file limit"),
    }
}

fn format(
    config: Option<PathBuf>,
    overrides: Vec<String>,
    add_scram: Vec<String>,
    quorum: Option<brook::controller::dynamic_voters::QuorumFlag>,
    ignore_formatted: bool,
) -> ExitCode {
    use brook::controller::dynamic_voters;
    let config = match BrokerConfig::load(config.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("brook: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    // The quorum flags first, as `kafka-storage format` checks them before writing anything;
    // then a formatted directory is refused, or left as it is (`Formatter.doFormat`).
    let plan = dynamic_voters::plan(&config, quorum.as_ref());
    if plan.is_ok() && ignore_formatted && dynamic_voters::is_formatted(&config.log_dir) {
        println!("All of the log directories are already formatted.");
        return ExitCode::SUCCESS;
    }
    let formatted = plan
        .and_then(|plan| dynamic_voters::refuse_formatted(&config.log_dir).map(|()| plan))
        .and_then(|plan| match plan {
            Some(p) => dynamic_voters::format(&config.log_dir, config.node_id, &p).map(Some),
            None => Ok(None),
        });
    match formatted {
        Ok(Some(line)) => println!("{line}"),
        Ok(None) => {}
        Err(e) => {
            eprintln!("brook format: {e}");
            return ExitCode::FAILURE;
        }
    }
    let parsed: Result<Vec<_>, String> = add_scram
        .iter()
        .map(|a| brook::security::bootstrap::parse_add_scram(a))
        .collect();
    let credentials = match parsed {
        Ok(c) => c,
        Err(e) => {
            eprintln!("brook format: {e}");
            return ExitCode::from(2);
        }
    };
    match brook::security::bootstrap::write(&config.log_dir, &credentials) {
        Ok(path) => {
            println!(
                "Formatted {} ({} SCRAM users)",
                path.display(),
                credentials.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("brook format: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(config: Option<PathBuf>, overrides: Vec<String>, exit_on_stdin_eof: bool) -> ExitCode {
    let config = match BrokerConfig::load(config.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("brook: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    raise_open_file_limit();
    brook_tools::block_on_command(None, async move {
        let node_id = config.node_id;
        let server = match Server::start(config).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("brook: {e}");
                return ExitCode::FAILURE;
            }
        };
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            brook_tools::stdin_watch::shutdown_trigger(exit_on_stdin_eof).await;
            tracing::info!("stopping");
            let _ = tx.send(true);
        });
        // The one line tests and scripts wait for: an event, so nobody has to sleep. It comes
        // when the node serves clients (a cluster node: once registered and unfenced).
        let admin = server.admin_addr;
        // With more than one broker listener, all of them (`NAME://host:port`, bound ports).
        let others = match server.listener_addrs().as_slice() {
            [_] => String::new(),
            all => {
                let all: Vec<String> = all.iter().map(|(n, a)| format!("{n}://{a}")).collect();
                format!(" listeners={}", all.join(","))
            }
        };
        let ready = move |listener: std::net::SocketAddr| match admin {
            Some(admin) => print_line(&format!(
                "READY node.id={node_id} listener={listener} admin={admin}{others}"
            )),
            None => print_line(&format!(
                "READY node.id={node_id} listener={listener}{others}"
            )),
        };
        match server.run_with(rx, ready).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("brook: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

fn fault(command: FaultCommand) -> ExitCode {
    let result = match command {
        FaultCommand::Add {
            admin,
            action,
            kind,
            point,
            from,
            to,
            direction,
            traffic,
            api,
            topic,
            partition,
            client_id,
            node,
            times,
            probability,
            seed,
            delay_ms,
            error,
            when,
        } => {
            let parsed = (
                parse_when(when.as_deref()),
                parse_kind(kind.as_deref()),
                error.as_deref().map(parse_error).transpose(),
            );
            let (when, kind, error) = match parsed {
                (Ok(when), Ok(kind), Ok(error)) => (when, kind, error),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                    eprintln!("brook: {e}");
                    return ExitCode::from(2);
                }
            };
            let spec = FaultSpec {
                kind,
                action,
                point,
                from,
                to: to.map(PeerSpec::Text),
                direction,
                traffic,
                api,
                node,
                client_id,
                topic,
                partition,
                times,
                probability,
                seed,
                delay_ms,
                error_code: error,
                when,
            };
            admin_call("POST", &admin, Some(spec)).map(|v| v["id"].to_string())
        }
        FaultCommand::List { admin } => admin_call::<()>("GET", &admin, None)
            .map(|v| serde_json::to_string_pretty(&v["rules"]).unwrap_or_default()),
        FaultCommand::Clear { admin, id } => {
            let path = id.map(|i| format!("/{i}")).unwrap_or_default();
            admin_call::<()>("DELETE", &format!("{admin}|{path}"), None)
                .map(|v| format!("removed {}", v["removed"]))
        }
    };
    report(result)
}

/// One call to a node's admin API. `target` is `HOST:PORT`, optionally `|/suffix`.
fn admin_call<T: serde::Serialize>(
    method: &str,
    target: &str,
    body: Option<T>,
) -> Result<serde_json::Value, String> {
    let (admin, suffix) = target.split_once('|').unwrap_or((target, ""));
    http_call(method, &format!("http://{admin}/faults{suffix}"), body)
}

/// One call to one of Brook's HTTP APIs: its JSON answer, or, for a status that is not a
/// success, the error the answer carries.
fn http_call<T: serde::Serialize>(
    method: &str,
    url: &str,
    body: Option<T>,
) -> Result<serde_json::Value, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let a = brook::admin_security::client_authorization()?;
    let resp = match (method, body) {
        ("POST", Some(b)) => with_auth(agent.post(url), &a).send_json(b),
        ("POST", None) => with_auth(agent.post(url), &a).send_empty(),
        ("DELETE", _) => with_auth(agent.delete(url), &a).call(),
        _ => with_auth(agent.get(url), &a).call(),
    }
    .map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status();
    let value: serde_json::Value = resp
        .into_body()
        .read_json()
        .map_err(|e| format!("{url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("{url}: {status}: {}", value["error"]));
    }
    Ok(value)
}

/// `request` with the `Authorization` of `BROOK_HTTP_CREDENTIALS`, when set.
fn with_auth<B>(
    request: ureq::RequestBuilder<B>,
    auth: &Option<String>,
) -> ureq::RequestBuilder<B> {
    match auth {
        Some(v) => request.header("Authorization", v),
        None => request,
    }
}

fn node(command: NodeCommand) -> ExitCode {
    let result = match command {
        NodeCommand::List { supervisor } => {
            supervisor_call("GET", &supervisor, "/nodes").map(|v| {
                let mut out = String::new();
                for n in v["nodes"].as_array().into_iter().flatten() {
                    out.push_str(&format!(
                        "node {} pid={} alive={} client={} controller={} admin={} log={}\n",
                        n["id"],
                        n["pid"],
                        n["alive"],
                        n["client"].as_str().unwrap_or("-"),
                        n["controller"].as_str().unwrap_or("-"),
                        n["admin"].as_str().unwrap_or("-"),
                        n["log"].as_str().unwrap_or("-"),
                    ));
                }
                out.trim_end().to_string()
            })
        }
        NodeCommand::Kill {
            supervisor,
            id,
            signal,
        } => {
            let query = match signal.as_deref() {
                None | Some("kill") => "",
                Some("term") => "?signal=term",
                Some(other) => {
                    eprintln!("brook: --signal must be kill or term, not {other:?}");
                    return ExitCode::from(2);
                }
            };
            supervisor_call("POST", &supervisor, &format!("/nodes/{id}/kill{query}"))
                .map(|v| v.to_string())
        }
        NodeCommand::Restart { supervisor, id } => {
            supervisor_call("POST", &supervisor, &format!("/nodes/{id}/restart"))
                .map(|v| v.to_string())
        }
        NodeCommand::Start { supervisor, id } => {
            supervisor_call("POST", &supervisor, &format!("/nodes/{id}/start"))
                .map(|v| v.to_string())
        }
    };
    report(result)
}

/// One call to a `brook cluster` supervisor's HTTP API.
fn supervisor_call(
    method: &str,
    supervisor: &str,
    path: &str,
) -> Result<serde_json::Value, String> {
    http_call::<()>(method, &format!("http://{supervisor}{path}"), None)
}

/// Replaces this process with `brook-chaos ARGS...` from this binary's directory: the checker
/// links librdkafka, the broker does not.
fn chaos(args: Vec<String>) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let bin = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("brook-chaos")));
    let Some(bin) = bin.filter(|b| b.exists()) else {
        eprintln!(
            "brook: no brook-chaos next to this binary (cargo build --release -p brook-chaos)"
        );
        return ExitCode::from(2);
    };
    let err = std::process::Command::new(&bin).args(args).exec();
    eprintln!("brook: exec {}: {err}", bin.display());
    ExitCode::FAILURE
}

fn dump_log(path: &std::path::Path, transaction_log_decoder: bool) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let files = match brook_tools::dump_log::segment_files(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("brook: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    for f in files {
        if let Err(e) = brook_tools::dump_log::dump_file(&f, transaction_log_decoder, &mut out) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return ExitCode::SUCCESS;
            }
            eprintln!("brook: {}: {e}", f.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// `brook fault add --when`: before or after the request is processed.
fn parse_when(when: Option<&str>) -> Result<Option<When>, String> {
    match when {
        None => Ok(None),
        Some("before") => Ok(Some(When::Before)),
        Some("after") => Ok(Some(When::After)),
        Some(other) => Err(format!("--when must be before or after, not {other:?}")),
    }
}

/// `brook fault add --kind`: a request, crash or link rule.
fn parse_kind(kind: Option<&str>) -> Result<Option<RuleKind>, String> {
    match kind {
        None => Ok(None),
        Some("request") => Ok(Some(RuleKind::Request)),
        Some("crash") => Ok(Some(RuleKind::Crash)),
        Some("link") => Ok(Some(RuleKind::Link)),
        Some(other) => Err(format!(
            "--kind must be request, crash or link, not {other:?}"
        )),
    }
}

/// `--error`: a Kafka error name (any case) or a numeric code.
fn parse_error(v: &str) -> Result<i16, String> {
    v.parse::<i16>()
        .ok()
        .or_else(|| brook::metrics::error_code_by_name(v))
        .ok_or_else(|| {
            format!("--error {v:?} is neither a Kafka error name (NOT_ENOUGH_REPLICAS) nor a code")
        })
}

/// Writes one line to stdout. A closed pipe (`brook fault list | head`) is not an error
/// worth a panic: the reader has what it wanted.
/// A CLI command's end: its answer on stdout and success, or its error on stderr and failure.
fn report(result: Result<String, impl std::fmt::Display>) -> ExitCode {
    match result {
        Ok(out) => {
            print_line(&out);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("brook: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_line(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|_| out.flush());
}
