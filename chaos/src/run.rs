//! One run: create the topic, start the clients, apply the schedule, heal, read everything
//! back, check the history and judge it against what the configuration promises.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use brook_protocol_tests::errors;
use brook_protocol_tests::wire::{WireClient, CREATE_TOPICS_V};
use serde::Serialize;

use crate::checker::{check, PartitionReport};
use crate::history::{History, Op};
use crate::nemesis::{Nemesis, NemesisStats, SETTLE_TIMEOUT};
use crate::producer_runs;
use crate::schedule::{generate, Shape, Step, Weights};
use crate::security::ClientSecurity;
use crate::target::Target;
use crate::verdict::{judge, Guarantees, Verdict};
use crate::workload::{
    await_stable, final_read, ClientSettings, Clients, Progress, Workload, WorkloadKind,
};
use crate::{share, txn};

/// How long the final read may take to reach the end of every partition.
pub const FINAL_READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound on CreateTopics.
const CREATE_TOPIC_TIMEOUT: Duration = Duration::from_secs(30);

/// What a run does.
#[derive(Debug, Clone, Serialize)]
pub struct RunConfig {
    pub seed: u64,
    /// Steps drawn from the seed (ignored when `schedule` is given).
    pub steps: usize,
    /// How often each kind of step is drawn.
    pub weights: Weights,
    /// An explicit schedule instead of the seed's.
    #[serde(skip)]
    pub schedule: Option<Vec<Step>>,
    #[serde(flatten)]
    pub clients: ClientSettings,
    pub min_insync_replicas: u32,
    pub replication_factor: u32,
    /// The brokers' `replica.lag.time.max.ms`.
    pub replica_lag_ms: u64,
    /// How long, after each step, the cluster may take to have every node up and every ISR
    /// full before the next step starts anyway.
    pub settle_secs: u64,
    /// Stop applying steps once the run is this old (then heal, read and check as usual).
    pub time_limit_secs: Option<u64>,
}

impl RunConfig {
    /// The settings a run needs on every broker, Brook or Kafka (the same property names): a
    /// dead broker fenced after 3 s, a silent follower out of the ISR after `replica_lag_ms`.
    /// In the transactional workload the coordinator also looks for timed-out transactions
    /// every [`txn::TXN_ABORT_CHECK_INTERVAL_MS`]; in the share workload records are locked
    /// for [`share::RECORD_LOCK_DURATION_MS`] and archived after
    /// [`share::DELIVERY_COUNT_LIMIT`] deliveries.
    pub fn broker_overrides(&self) -> Vec<(String, String)> {
        let txn_check = (self.clients.workload == WorkloadKind::Txn).then(|| {
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                txn::TXN_ABORT_CHECK_INTERVAL_MS.to_string(),
            )
        });
        [
            (
                "default.replication.factor",
                self.replication_factor.to_string(),
            ),
            ("min.insync.replicas", self.min_insync_replicas.to_string()),
            ("replica.lag.time.max.ms", self.replica_lag_ms.to_string()),
            ("broker.session.timeout.ms", "3000".to_string()),
            ("broker.heartbeat.interval.ms", "500".to_string()),
            ("auto.create.topics.enable", "false".to_string()),
            ("unclean.leader.election.enable", "false".to_string()),
        ]
        .into_iter()
        .chain(txn_check)
        .map(|(k, v)| (k.to_string(), v))
        .chain(
            (self.clients.workload == WorkloadKind::Share)
                .then(share::broker_overrides)
                .unwrap_or_default(),
        )
        .collect()
    }

    pub fn guarantees(&self) -> Guarantees {
        Guarantees {
            acks: self.clients.acks.clone(),
            idempotence: self.clients.idempotence,
            min_insync_replicas: self.min_insync_replicas,
            replication_factor: self.replication_factor,
            transactional: self.clients.workload == WorkloadKind::Txn,
            share: self.clients.workload == WorkloadKind::Share,
        }
    }

    /// Refuses settings no client accepts (librdkafka and the Java client alike require
    /// `acks=all` for idempotence).
    pub fn validate(&self) -> Result<(), String> {
        let c = &self.clients;
        if !["all", "1", "0"].contains(&c.acks.as_str()) {
            return Err(format!("acks must be all, 1 or 0, not {:?}", c.acks));
        }
        if c.idempotence && c.acks != "all" {
            return Err(format!(
                "an idempotent producer needs acks=all (acks={}: use --idempotence false)",
                c.acks
            ));
        }
        if c.workload == WorkloadKind::Txn && !(c.idempotence && c.acks == "all") {
            return Err(format!(
                "a transactional producer is idempotent with acks=all (acks={}, idempotence {})",
                c.acks, c.idempotence
            ));
        }
        if c.partitions < 1 || c.producers < 1 || c.consumers < 1 || c.rate < 1 {
            return Err("partitions, producers, consumers and rate must be at least 1".into());
        }
        let schedule = self.schedule();
        let has = |f: fn(&Step) -> bool| schedule.iter().any(f);
        if has(|s| matches!(s, Step::KillTxnCoordinator { .. })) && c.workload != WorkloadKind::Txn
        {
            return Err("a transaction coordinator kill needs --workload txn".into());
        }
        if has(|s| matches!(s, Step::KillGroupCoordinator { .. })) && c.group_consumers < 1 {
            return Err("a group coordinator kill needs --group-consumers 1 or more".into());
        }
        self.validate_share()
    }

    /// The share workload needs members, `java` and Kafka's jars; a share coordinator kill
    /// needs the share workload.
    fn validate_share(&self) -> Result<(), String> {
        let c = &self.clients;
        let kills = self
            .schedule()
            .iter()
            .any(|s| matches!(s, Step::KillShareCoordinator { .. }));
        if c.workload != WorkloadKind::Share {
            return match kills {
                true => Err("a share coordinator kill needs --workload share".into()),
                false => Ok(()),
            };
        }
        if c.share_consumers < 1 {
            return Err("the share workload needs --share-consumers 1 or more".into());
        }
        share::check_java(&c.kafka_lib)
    }

    /// The schedule this run applies.
    pub fn schedule(&self) -> Vec<Step> {
        self.schedule.clone().unwrap_or_else(|| {
            generate(
                self.seed,
                self.steps,
                Shape {
                    partitions: self.clients.partitions,
                    replica_lag_ms: self.replica_lag_ms,
                },
                self.weights,
            )
        })
    }
}

/// Everything a run produced.
#[derive(Debug, Serialize)]
pub struct RunOutput {
    pub target: String,
    /// The clients' `security.protocol` (librdkafka's spelling): `plaintext` or `sasl_ssl`.
    pub security_protocol: String,
    pub topic: String,
    pub config: RunConfig,
    pub schedule: Vec<Step>,
    pub nemesis: NemesisStats,
    pub acknowledged: u64,
    pub not_acknowledged: u64,
    pub producers_replaced: u64,
    /// Transactions by outcome (the transactional workload).
    pub txns_committed: u64,
    pub txns_aborted: u64,
    pub txns_unknown: u64,
    pub wall_ms: u64,
    pub partitions: BTreeMap<i32, PartitionReport>,
    pub verdict: Verdict,
    pub history: Vec<Op>,
}

/// Creates the topic with a raw CreateTopics (any broker forwards it to the controller), on
/// the first node that answers; a retry may find what a lost first answer created.
fn create_topic(
    bootstrap: &str,
    security: &ClientSecurity,
    topic: &str,
    cfg: &RunConfig,
) -> Result<(), String> {
    let min_isr = cfg.min_insync_replicas.to_string();
    let req = WireClient::create_topics_request(
        topic,
        cfg.clients.partitions,
        cfg.replication_factor as i16,
        &[("min.insync.replicas", &min_isr)],
        CREATE_TOPIC_TIMEOUT,
    );
    let mut failures = Vec::new();
    for (attempt, addr) in bootstrap.split(',').enumerate() {
        let answer = security
            .connect(addr, CREATE_TOPIC_TIMEOUT)
            .and_then(|mut c| c.try_request(CREATE_TOPICS_V, &req));
        match answer {
            Ok(r) => {
                let code = r.topics.first().map_or(-1, |t| t.error_code);
                let created =
                    code == errors::NONE || (attempt > 0 && code == errors::TOPIC_ALREADY_EXISTS);
                if created {
                    return Ok(());
                }
                return Err(format!("CreateTopics {topic} on {addr}: {r:?}"));
            }
            Err(e) => failures.push(format!("{addr}: {e}")),
        }
    }
    Err(format!("CreateTopics {topic}: {}", failures.join("; ")))
}

/// Applies the nemesis schedule step by step, each followed by `cfg.settle_secs`, until
/// it ends or the run's time limit is reached.
fn apply_schedule(
    nemesis: &mut Nemesis<'_>,
    history: &History,
    cfg: &RunConfig,
    schedule: &[Step],
    started: Instant,
) {
    let settle = Duration::from_secs(cfg.settle_secs);
    for (n, step) in schedule.iter().enumerate() {
        if let Some(limit) = cfg.time_limit_secs {
            if started.elapsed() >= Duration::from_secs(limit) {
                history.nemesis(format!(
                    "time limit of {limit} s reached: {n} of {} steps applied",
                    schedule.len()
                ));
                break;
            }
        }
        nemesis.run_step(n + 1, step, settle);
    }
}

/// Stops the producers, waits for open transactions to end (transactional workload), reads
/// every partition to its end and the producers' batch headers into the history, then
/// stops the consumers. Returns what went wrong.
fn stop_clients(
    workload: &mut Workload,
    clients: &Clients,
    history: &History,
    cfg: &RunConfig,
) -> Vec<String> {
    let mut run_errors = workload.stop_producers();
    if cfg.clients.workload == WorkloadKind::Txn {
        if let Err(e) = await_stable(clients, txn::STABLE_TIMEOUT) {
            run_errors.push(e);
        }
    }
    if let Err(e) = final_read(clients, history, FINAL_READ_TIMEOUT) {
        run_errors.push(e);
    }
    if cfg.clients.workload == WorkloadKind::Share {
        if let Err(e) = share::drain(clients, history) {
            run_errors.push(e);
        }
    }
    // Without the runs a duplicate stays unclassified (a failure): noted, not a run error.
    match producer_runs::read(
        &clients.bootstrap,
        &clients.security,
        &clients.topic,
        cfg.clients.partitions,
    ) {
        Ok(runs) => {
            for op in runs {
                history.push(op);
            }
        }
        Err(e) => history.nemesis(format!("batch headers not read: {e}")),
    }
    run_errors.extend(workload.stop_consumers());
    run_errors
}

/// Starts the clients; in the share workload, waits until the share consumers acknowledge
/// (their JVMs take seconds to start), so that the nemesis finds them at work.
fn start_workload(
    clients: &Clients,
    history: &History,
    progress: &Arc<Progress>,
) -> Result<Workload, String> {
    let share = clients.settings.workload == WorkloadKind::Share;
    if share && clients.security.protocol() != "plaintext" {
        return Err("the share consumers (Kafka's tool) run over PLAINTEXT only".into());
    }
    let workload = Workload::start(clients, history, progress.clone())?;
    if share {
        share::await_started(progress)?;
    }
    Ok(workload)
}

/// Runs `cfg` against `target`. `Err` when the run cannot start (no topic, no settled
/// cluster); problems after that are run errors in the verdict.
pub fn run(target: &mut dyn Target, cfg: &RunConfig) -> Result<RunOutput, String> {
    cfg.validate()?;
    let started = Instant::now();
    // A new topic per run: a rerun on the same cluster never reads an earlier run's records.
    let unique = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let topic = format!("chaos-{}-{unique}", cfg.seed);
    let bootstrap = target.bootstrap();
    let security = target.client_security();
    let schedule = cfg.schedule();
    let history = History::new();
    let progress = Arc::new(Progress::default());
    let target_name = target.name().to_string();
    let mut nemesis = Nemesis::new(
        target,
        &topic,
        cfg.clients.partitions,
        history.clone(),
        &progress,
    );
    nemesis.await_brokers(SETTLE_TIMEOUT)?;
    create_topic(&bootstrap, &security, &topic, cfg)?;
    if !nemesis.settle(SETTLE_TIMEOUT) {
        return Err(format!("topic {topic} has no full ISR on every partition"));
    }
    let clients = Clients {
        bootstrap,
        security,
        topic: topic.clone(),
        seed: cfg.seed,
        settings: cfg.clients.clone(),
    };
    let mut workload = start_workload(&clients, &history, &progress)?;
    history.nemesis(format!(
        "target {target_name} ({}), topic {topic}, seed {}, {} steps",
        clients.security.protocol(),
        cfg.seed,
        schedule.len()
    ));
    apply_schedule(&mut nemesis, &history, cfg, &schedule, started);
    nemesis.heal();
    nemesis.settle(SETTLE_TIMEOUT);
    history.nemesis("healed; stopping the producers".into());
    let mut run_errors = nemesis.errors.clone();
    run_errors.extend(stop_clients(&mut workload, &clients, &history, cfg));
    let stats = nemesis.stats.clone();
    drop(nemesis);
    run_errors.extend(run_end_errors(target, &progress, &history));
    let ops = history.snapshot();
    let partitions = check(&ops);
    let verdict = judge(&cfg.guarantees(), &partitions, run_errors);
    let p = &progress;
    Ok(RunOutput {
        target: target_name,
        security_protocol: clients.security.protocol().to_string(),
        topic,
        config: cfg.clone(),
        schedule,
        nemesis: stats,
        acknowledged: p.acknowledged.load(Relaxed),
        not_acknowledged: p.not_acknowledged.load(Relaxed),
        producers_replaced: p.producers_replaced.load(Relaxed),
        txns_committed: p.txns_committed.load(Relaxed),
        txns_aborted: p.txns_aborted.load(Relaxed),
        txns_unknown: p.txns_unknown.load(Relaxed),
        wall_ms: started.elapsed().as_millis() as u64,
        partitions,
        verdict,
        history: ops,
    })
}

/// The run errors found once the clients stopped and the nemesis let go of the target: a run
/// that checked nothing, a history cut short by its bound, and answers the nodes failed to
/// encode (each closed a connection, which the clients saw as a network error).
fn run_end_errors(target: &mut dyn Target, progress: &Progress, history: &History) -> Vec<String> {
    let mut run_errors = Vec::new();
    if progress.acknowledged.load(Relaxed) == 0 {
        run_errors.push("no send was acknowledged: the run checked nothing".into());
    }
    if history.is_full() {
        run_errors.push(
            "the history reached its bound (HISTORY_OPS_MAX) and the clients stopped early".into(),
        );
    }
    match target.encode_failures() {
        Ok(0) => {}
        Ok(n) => run_errors.push(format!(
            "{n} response(s) could not be encoded (brook_response_encode_failures_total): \
             their connections were closed; the nodes' logs name the API and version"
        )),
        Err(e) => run_errors.push(format!("encode failures not read: {e}")),
    }
    run_errors
}
