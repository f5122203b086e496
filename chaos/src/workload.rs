//! The clients: several producers and consumers at once, librdkafka through the `rdkafka`
//! crate (the helpers of `brook-protocol-tests`), each on its own thread, recording every send
//! and every poll into the [`History`].
//!
//! Producer `pN` sends `pN-<seq>` round-robin to every partition, at most `rate` records a
//! second and [`OUTSTANDING_MAX`] unacknowledged. A producer that librdkafka declares fatally
//! failed (an idempotent producer that lost its sequence) is replaced by a new one, `pN.G`:
//! a new producer, as far as ordering goes. Consumer `cN` is assigned every partition from the
//! first offset and polls until the run ends. After the nemesis has healed the cluster,
//! [`final_read`] reads every partition from the first offset to its end.
//!
//! With [`WorkloadKind::Txn`] the producers are transactional instead (see [`crate::txn`]).
//! Consumers and the final read use `isolation.level=read_committed` in both workloads
//! (librdkafka's default).

use std::collections::{BTreeSet, HashMap};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use brook_protocol_tests::rd::{self, RecProducer};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

use serde::{Deserialize, Serialize};

use crate::history::{History, Op, Outcome, Read, FINAL_READER};
use crate::security::ClientSecurity;
use crate::share::ShareConsumers;
use crate::{group, txn};

/// Unacknowledged sends one producer may have.
pub const OUTSTANDING_MAX: usize = 500;
/// Records one poll op may hold (the consumer drains librdkafka's queue up to this many).
pub const POLL_RECORDS_MAX: usize = 500;
/// How long a producer may take to flush when the run ends.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(60);
/// librdkafka's `message.timeout.ms`: a send not acknowledged by then is reported unknown.
pub const MESSAGE_TIMEOUT_MS: u64 = 30_000;

/// What the producers do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// Each record is one send of an (idempotent) producer.
    #[default]
    Send,
    /// Transactional producers: a few records to several partitions per transaction, then a
    /// commit or (one in [`txn::TXN_ABORT_ONE_IN`]) an abort.
    Txn,
    /// The producers of `Send`, and share consumers ([`crate::share`]) besides the others.
    Share,
}

/// The consumers' isolation level: every workload reads committed data only.
pub const ISOLATION_LEVEL: (&str, &str) = ("isolation.level", "read_committed");

/// How many clients, how fast, with which producer settings.
#[derive(Debug, Clone, Serialize)]
pub struct ClientSettings {
    pub workload: WorkloadKind,
    pub partitions: i32,
    pub producers: usize,
    pub consumers: usize,
    /// Members of one consumer group that commit offsets ([`crate::group`]), besides the
    /// assign-only consumers; a joiner comes and goes when the nemesis asks.
    pub group_consumers: usize,
    /// Members of one share group (`--workload share`): Kafka's `VerifiableShareConsumer`.
    #[serde(default)]
    pub share_consumers: usize,
    /// The Kafka 4.4 jars the share consumers run from (`--kafka-lib`).
    #[serde(default)]
    pub kafka_lib: PathBuf,
    /// Records a second, per producer.
    pub rate: u32,
    pub acks: String,
    pub idempotence: bool,
}

/// What the clients are told to do: where, and how.
#[derive(Debug, Clone)]
pub struct Clients {
    pub bootstrap: String,
    /// TLS and SASL settings of every client (none for PLAINTEXT).
    pub security: ClientSecurity,
    pub topic: String,
    /// The run's seed: the transactional workload draws its transactions from it.
    pub seed: u64,
    pub settings: ClientSettings,
}

/// Counters the nemesis watches (progress before a kill) and the report prints.
#[derive(Debug, Default)]
pub struct Progress {
    pub acknowledged: AtomicU64,
    pub not_acknowledged: AtomicU64,
    pub producers_replaced: AtomicU64,
    /// Transactions by outcome (the transactional workload; its committed records count as
    /// acknowledged, the others as not acknowledged).
    pub txns_committed: AtomicU64,
    pub txns_aborted: AtomicU64,
    pub txns_unknown: AtomicU64,
    /// The `transactional.id`s whose `commit_transaction` call is in flight: the
    /// coordinator nemesis kills a coordinator during one.
    pub committing: Mutex<BTreeSet<String>>,
    /// Revocations the group members got: each is a member that learnt of a rebalance and
    /// is about to send JoinGroup.
    pub rebalances: AtomicU64,
    /// Assignments the group members got (rebalances completed, per member).
    pub assignments: AtomicU64,
    /// Group members `g0`.. started (their consumers created), the joiner not counted.
    pub members_started: AtomicU64,
    /// Of those, the members holding an assignment now (assigned, not revoked since): only
    /// these revoke when a rebalance begins (librdkafka's eager
    /// `rd_kafka_cgrp_revoke_all_rejoin` rejoins without the revoke callback when it holds
    /// no assignment, e.g. during the group's first generation or after a lost one).
    pub members_holding: AtomicU64,
    /// Whether the joining member ([`crate::group::joiner`]) should be in the group.
    pub joiner_wanted: AtomicBool,
    /// Deliveries and successful acknowledgements the share consumers reported.
    pub share_deliveries: AtomicU64,
    pub share_acks: AtomicU64,
}

/// The running clients.
pub struct Workload {
    stop_producers: Arc<AtomicBool>,
    stop_consumers: Arc<AtomicBool>,
    producers: Vec<JoinHandle<()>>,
    consumers: Vec<JoinHandle<()>>,
    share: Option<ShareConsumers>,
    pub progress: Arc<Progress>,
}

impl Workload {
    /// Starts every client; `Err` when the share consumers cannot start (no `java`).
    pub fn start(
        c: &Clients,
        history: &History,
        progress: Arc<Progress>,
    ) -> Result<Workload, String> {
        let share = match c.settings.workload {
            WorkloadKind::Share => Some(ShareConsumers::start(
                c.settings.share_consumers,
                &c.settings.kafka_lib,
                c,
                history,
                &progress,
            )?),
            _ => None,
        };
        let stop_producers = Arc::new(AtomicBool::new(false));
        let stop_consumers = Arc::new(AtomicBool::new(false));
        let producers = (0..c.settings.producers)
            .map(|i| {
                let (c, h, s, p) = (
                    c.clone(),
                    history.clone(),
                    stop_producers.clone(),
                    progress.clone(),
                );
                std::thread::spawn(move || match c.settings.workload {
                    WorkloadKind::Send | WorkloadKind::Share => produce(i, &c, &h, &s, &p),
                    WorkloadKind::Txn => txn::produce(i, &c, &h, &s, &p),
                })
            })
            .collect();
        let mut consumers: Vec<JoinHandle<()>> = (0..c.settings.consumers)
            .map(|i| {
                let (c, h, s) = (c.clone(), history.clone(), stop_consumers.clone());
                std::thread::spawn(move || consume(&format!("c{i}"), &c, &h, &s))
            })
            .collect();
        if c.settings.group_consumers > 0 {
            let members = (0..c.settings.group_consumers).map(Some).chain([None]);
            consumers.extend(members.map(|i| {
                let (c, h, s, p) = (
                    c.clone(),
                    history.clone(),
                    stop_consumers.clone(),
                    progress.clone(),
                );
                std::thread::spawn(move || match i {
                    Some(i) => group::consume(i, &c, &h, &s, &p),
                    None => group::joiner(&c, &h, &s, &p),
                })
            }));
        }
        Ok(Workload {
            stop_producers,
            stop_consumers,
            producers,
            consumers,
            share,
            progress,
        })
    }

    /// Stops the producers; each flushes (bounded) and records what is still unreported as
    /// unknown. Returns a line per client thread that panicked.
    pub fn stop_producers(&mut self) -> Vec<String> {
        self.stop_producers.store(true, Ordering::Relaxed);
        join_all(&mut self.producers, "producer")
    }

    pub fn stop_consumers(&mut self) -> Vec<String> {
        self.stop_consumers.store(true, Ordering::Relaxed);
        let mut errors = join_all(&mut self.consumers, "consumer");
        if let Some(mut share) = self.share.take() {
            errors.extend(share.stop());
        }
        errors
    }
}

fn join_all(handles: &mut Vec<JoinHandle<()>>, what: &str) -> Vec<String> {
    handles
        .drain(..)
        .enumerate()
        .filter_map(|(i, h)| h.join().err().map(|_| format!("{what} {i} panicked")))
        .collect()
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop_producers();
        self.stop_consumers();
    }
}

/// Which librdkafka `debug` contexts a chaos producer logs: the idempotent producer's own
/// (producer id, epoch bumps, drains), which explain a duplicate or a sequence error. They
/// come a few lines per state change, not per record.
pub const PRODUCER_DEBUG_CONTEXTS: &str = "eos";

/// librdkafka's warnings and errors of producer `process`, and its `eos` debug lines, into
/// the history as [`Op::ClientError`]s: an epoch bump (`DRAIN`) is why a record can be
/// written twice by an idempotent producer, so a `duplicate` needs these lines beside it.
fn producer_log(process: &str, history: &History) -> rd::LogSink {
    let process = process.to_string();
    let history = history.clone();
    Box::new(move |_level, fac, message| {
        history.push(Op::ClientError {
            process: process.clone(),
            at_ms: history.now_ms(),
            error: format!("librdkafka {fac}: {message}"),
        });
    })
}

/// The chaos producers' librdkafka settings (also the failover benchmark's, `benches/`):
/// `acks` and idempotence as given, short retry and reconnect backoffs, and a lost answer
/// retried after `socket.timeout.ms` rather than librdkafka's 60 s.
pub fn producer_config(acks: &str, idempotence: bool) -> Vec<(&'static str, String)> {
    [
        ("acks", acks),
        (
            "enable.idempotence",
            if idempotence { "true" } else { "false" },
        ),
        ("max.in.flight.requests.per.connection", "5"),
        ("linger.ms", "5"),
        ("retry.backoff.ms", "50"),
        ("reconnect.backoff.max.ms", "1000"),
        // A lost answer (a paused leader) is retried after this, not after librdkafka's 60 s.
        ("socket.timeout.ms", "10000"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .chain([("message.timeout.ms", MESSAGE_TIMEOUT_MS.to_string())])
    .collect()
}

fn new_producer(c: &Clients, process: &str, history: &History) -> RecProducer {
    let config = producer_config(&c.settings.acks, c.settings.idempotence);
    let mut settings: Vec<(&str, &str)> = config.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // Debug lines come only from these contexts; warnings and errors from all.
    settings.push(("debug", PRODUCER_DEBUG_CONTEXTS));
    settings.extend(c.security.rdkafka());
    rd::producer_with_log(
        &c.bootstrap,
        &settings,
        Some(producer_log(process, history)),
    )
}

/// A send on its way: what the history needs when its report comes.
struct InFlight {
    seq: u64,
    partition: i32,
    value: String,
    invoked_ms: u64,
}

/// One producer thread: sends until stopped, replacing its client after a fatal error.
fn produce(index: usize, c: &Clients, history: &History, stop: &AtomicBool, progress: &Progress) {
    let started = Instant::now();
    let mut seq: u64 = 0;
    for generation in 0.. {
        let process = if generation == 0 {
            format!("p{index}")
        } else {
            format!("p{index}.{generation}")
        };
        let fatal = produce_with(&process, c, history, stop, progress, &mut seq, started);
        if !fatal || stop.load(Ordering::Relaxed) {
            return;
        }
        progress.producers_replaced.fetch_add(1, Ordering::Relaxed);
    }
}

/// Sends with one client until `stop` (returns false) or a fatal client error (true).
fn produce_with(
    process: &str,
    c: &Clients,
    history: &History,
    stop: &AtomicBool,
    progress: &Progress,
    seq: &mut u64,
    started: Instant,
) -> bool {
    let p = new_producer(c, process, history);
    let mut in_flight: HashMap<usize, InFlight> = HashMap::new();
    let mut fatal = None;
    while !stop.load(Ordering::Relaxed) && fatal.is_none() && !history.is_full() {
        let allowed = (started.elapsed().as_secs_f64() * c.settings.rate as f64) as u64;
        if in_flight.len() < OUTSTANDING_MAX && *seq < allowed {
            let s = *seq;
            *seq += 1;
            let partition = (s % c.settings.partitions as u64) as i32;
            let sent = InFlight {
                seq: s,
                partition,
                value: format!("{process}-{s}"),
                invoked_ms: history.now_ms(),
            };
            if let Some(op) = send(&p, c, process, &mut in_flight, history, sent) {
                progress.not_acknowledged.fetch_add(1, Ordering::Relaxed);
                history.push(op);
            }
            p.poll(Duration::ZERO);
        } else {
            p.poll(Duration::from_millis(5));
        }
        record_reports(process, &p, &mut in_flight, history, progress);
        fatal = p.client().fatal_error();
    }
    let _ = p.flush(if fatal.is_some() {
        Duration::from_secs(1)
    } else {
        FLUSH_TIMEOUT
    });
    record_reports(process, &p, &mut in_flight, history, progress);
    record_unreported(process, in_flight, fatal.as_ref(), history, progress);
    fatal.is_some()
}

/// Hands one record to the producer, in flight until its delivery report; the failed send
/// when it never left (QueueFull cannot happen below OUTSTANDING_MAX).
fn send(
    p: &RecProducer,
    c: &Clients,
    process: &str,
    in_flight: &mut HashMap<usize, InFlight>,
    history: &History,
    sent: InFlight,
) -> Option<Op> {
    let rec = rd::record(
        &c.topic,
        sent.seq as usize,
        Some(sent.partition),
        None,
        Some(sent.value.as_bytes()),
    );
    // The record borrows the value: dropped with the error, before `sent` moves.
    let result = p.send(rec).map_err(|(e, _)| e);
    match result {
        Ok(()) => {
            in_flight.insert(sent.seq as usize, sent);
            None
        }
        Err(e) => Some(send_op(
            process,
            sent,
            history,
            Outcome::Failed {
                error: e.to_string(),
            },
        )),
    }
}

/// The sends still in flight when the producer stopped: their outcome is unknown.
fn record_unreported(
    process: &str,
    in_flight: HashMap<usize, InFlight>,
    fatal: Option<&(rdkafka::types::RDKafkaErrorCode, String)>,
    history: &History,
    progress: &Progress,
) {
    let mut left: Vec<InFlight> = in_flight.into_values().collect();
    left.sort_by_key(|f| f.seq);
    let why = match fatal {
        Some((code, msg)) => format!("producer failed fatally ({code:?}: {msg}) before reporting"),
        None => "not reported before the run ended".to_string(),
    };
    for f in left {
        progress.not_acknowledged.fetch_add(1, Ordering::Relaxed);
        history.push(send_op(
            process,
            f,
            history,
            Outcome::Unknown { error: why.clone() },
        ));
    }
}

fn send_op(process: &str, f: InFlight, history: &History, outcome: Outcome) -> Op {
    Op::Send {
        process: process.to_string(),
        seq: f.seq,
        partition: f.partition,
        value: f.value,
        invoked_ms: f.invoked_ms,
        completed_ms: history.now_ms(),
        outcome,
    }
}

/// Turns the delivery reports received since the last call into send ops.
fn record_reports(
    process: &str,
    p: &RecProducer,
    in_flight: &mut HashMap<usize, InFlight>,
    history: &History,
    progress: &Progress,
) {
    let reports = std::mem::take(&mut *p.context().deliveries.lock().unwrap());
    for d in reports {
        let Some(f) = in_flight.remove(&d.idx) else {
            continue;
        };
        let outcome = match d.error {
            None => {
                progress.acknowledged.fetch_add(1, Ordering::Relaxed);
                Outcome::Ok { offset: d.offset }
            }
            Some(error) => {
                progress.not_acknowledged.fetch_add(1, Ordering::Relaxed);
                Outcome::Unknown { error }
            }
        };
        history.push(send_op(process, f, history, outcome));
    }
}

fn assign_all(
    c: &BaseConsumer<ConsumerLog>,
    process: &str,
    clients: &Clients,
    history: &History,
) -> Result<(), KafkaError> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..clients.settings.partitions {
        tpl.add_partition_offset(&clients.topic, p, Offset::Beginning)?;
    }
    c.assign(&tpl)?;
    for partition in 0..clients.settings.partitions {
        history.push(Op::Assign {
            process: process.to_string(),
            at_ms: history.now_ms(),
            partition,
        });
    }
    Ok(())
}

/// librdkafka's warnings and errors of one consumer, into the history as
/// [`Op::ClientError`]s. An automatic position reset (`auto.offset.reset`) is reported only
/// there, under the `OFFSET` facility, with librdkafka's reason (a fetch answered
/// OFFSET_OUT_OF_RANGE, or an OffsetForLeaderEpoch answer with no epoch at or below the
/// position's): the evidence a `nonmonotonic-poll` needs, so those lines are printed too.
pub struct ConsumerLog {
    process: String,
    history: History,
    /// [`CLIENT_DEBUG_ENV`] is set: every line goes to stderr too.
    debug: bool,
}

/// Set to librdkafka `debug` contexts (`topic,fetch`, say), every consumer prints librdkafka's
/// debug lines to stderr: how its position moved (epoch validation, seeks, resets) when a poll
/// anomaly needs explaining. It changes the timing it observes, so a race may hide under it.
pub const CLIENT_DEBUG_ENV: &str = "BROOK_CHAOS_CLIENT_DEBUG";

impl ClientContext for ConsumerLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        let at_ms = self.history.now_ms();
        if self.debug {
            eprintln!(
                "[{:>8.3}s] client {}: {fac}: {log_message}",
                at_ms as f64 / 1000.0,
                self.process
            );
        }
        if (level as i32) > (RDKafkaLogLevel::Warning as i32) {
            return;
        }
        if fac == "OFFSET" && !self.debug {
            eprintln!(
                "[{:>7.1}s] client {}: {fac}: {log_message}",
                at_ms as f64 / 1000.0,
                self.process
            );
        }
        self.history.push(Op::ClientError {
            process: self.process.clone(),
            at_ms,
            error: format!("librdkafka {fac}: {log_message}"),
        });
    }
}

impl ConsumerContext for ConsumerLog {}

/// An assign-only consumer like [`rd::consumer`]'s, reading from the earliest offset when its
/// position is out of range, with its librdkafka log going to the history.
fn consumer_with_log(
    process: &str,
    clients: &Clients,
    history: &History,
) -> Result<BaseConsumer<ConsumerLog>, KafkaError> {
    let mut cfg = ClientConfig::new();
    clients.security.apply(&mut cfg);
    cfg.set("bootstrap.servers", &clients.bootstrap)
        .set("group.id", "brook-chaos-unused")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .set(ISOLATION_LEVEL.0, ISOLATION_LEVEL.1);
    let debug = std::env::var(CLIENT_DEBUG_ENV).ok();
    if let Some(contexts) = &debug {
        cfg.set("debug", contexts)
            .set_log_level(RDKafkaLogLevel::Debug);
    }
    cfg.create_with_context(ConsumerLog {
        process: process.to_string(),
        history: history.clone(),
        debug: debug.is_some(),
    })
}

/// One consumer thread: polls every partition from the first offset until stopped.
fn consume(process: &str, clients: &Clients, history: &History, stop: &AtomicBool) {
    let c = match consumer_with_log(process, clients, history) {
        Ok(c) => c,
        Err(e) => {
            history.nemesis(format!("{process}: create consumer failed: {e}"));
            return;
        }
    };
    if let Err(e) = assign_all(&c, process, clients, history) {
        history.nemesis(format!("{process}: assign failed: {e}"));
        return;
    }
    while !stop.load(Ordering::Relaxed) && !history.is_full() {
        let mut records = Vec::new();
        let mut wait = Duration::from_millis(100);
        while records.len() < POLL_RECORDS_MAX {
            match c.poll(wait) {
                Some(Ok(m)) => records.push(Read {
                    partition: m.partition(),
                    offset: m.offset(),
                    value: String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                }),
                Some(Err(KafkaError::PartitionEOF(_))) => {}
                // A broker going away, a position reset: librdkafka goes on by itself.
                Some(Err(e)) => {
                    history.push(Op::ClientError {
                        process: process.to_string(),
                        at_ms: history.now_ms(),
                        error: e.to_string(),
                    });
                }
                None => break,
            }
            wait = Duration::ZERO;
        }
        if !records.is_empty() {
            history.push(Op::Poll {
                process: process.to_string(),
                at_ms: history.now_ms(),
                records,
            });
        }
    }
}

/// Reads every partition from its first offset to its end (librdkafka's end-of-partition at
/// the high watermark) as process `final`; `Err` when it cannot get there within `timeout`.
pub fn final_read(clients: &Clients, history: &History, timeout: Duration) -> Result<(), String> {
    let partitions: Vec<i32> = (0..clients.settings.partitions).collect();
    let at_ms = history.now_ms();
    for &partition in &partitions {
        history.push(Op::Assign {
            process: FINAL_READER.into(),
            at_ms,
            partition,
        });
    }
    // The helper panics with what it read so far when the end does not come in time.
    let read = std::panic::catch_unwind(AssertUnwindSafe(|| {
        rd::read_to_end_with(
            &clients.bootstrap,
            &clients.topic,
            &partitions,
            &clients.security.with(&[ISOLATION_LEVEL]),
            timeout,
        )
    }))
    .map_err(|e| {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        format!("final read: {msg}")
    })?;
    for (_, got) in read {
        let records = got
            .into_iter()
            .map(|g| Read {
                partition: g.partition,
                offset: g.offset,
                value: String::from_utf8_lossy(g.value.as_deref().unwrap_or_default()).into_owned(),
            })
            .collect();
        history.push(Op::Poll {
            process: FINAL_READER.into(),
            at_ms: history.now_ms(),
            records,
        });
    }
    Ok(())
}

/// How often [`await_stable`] asks for the offsets again.
const STABLE_POLL: Duration = Duration::from_millis(500);
/// Bound on one ListOffsets of [`await_stable`].
const WATERMARKS_TIMEOUT: Duration = Duration::from_secs(5);

/// Waits until no transaction is open on any partition: the last stable offset (a
/// read_committed ListOffsets) equals the high watermark (read_uncommitted). Until then a
/// read_committed read to the end stops at the LSO and would miss committed records after it.
/// `Err` with the partitions still unstable after `timeout`.
pub fn await_stable(clients: &Clients, timeout: Duration) -> Result<(), String> {
    let committed = rd::consumer(
        &clients.bootstrap,
        &clients.security.with(&[ISOLATION_LEVEL]),
    );
    let uncommitted = rd::consumer(
        &clients.bootstrap,
        &clients
            .security
            .with(&[("isolation.level", "read_uncommitted")]),
    );
    let deadline = Instant::now() + timeout;
    loop {
        let mut unstable = Vec::new();
        for p in 0..clients.settings.partitions {
            let lso = committed.fetch_watermarks(&clients.topic, p, WATERMARKS_TIMEOUT);
            let hw = uncommitted.fetch_watermarks(&clients.topic, p, WATERMARKS_TIMEOUT);
            match (lso, hw) {
                (Ok((_, lso)), Ok((_, hw))) if lso == hw => {}
                (lso, hw) => unstable.push(format!(
                    "partition {p}: last stable offset {:?}, high watermark {:?}",
                    lso.map(|o| o.1),
                    hw.map(|o| o.1)
                )),
            }
        }
        if unstable.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "a transaction still open {timeout:?} after the producers stopped: {}",
                unstable.join("; ")
            ));
        }
        std::thread::sleep(STABLE_POLL);
    }
}
