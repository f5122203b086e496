//! The transactional workload (`--workload txn`): each producer is a librdkafka transactional
//! producer that sends a few records to several partitions per transaction and then commits,
//! or aborts one transaction in [`TXN_ABORT_ONE_IN`] (which ones, and how many records each
//! holds, are drawn from the run's seed). Each transaction is one [`Op::Txn`] in the history
//! with its records and its outcome: committed when `commit_transaction` returned Ok; aborted
//! when the producer never asked to commit (it aborted, by choice or after a refused send or
//! failed delivery, or it failed first); unknown when `commit_transaction` returned an error.
//!
//! A producer whose client cannot go on (a fatal error, a transaction it cannot end) is
//! replaced by a new generation `pN.G` with a `transactional.id` of its own, so nothing fences
//! the old one: its open transaction, if any, is aborted by the coordinator after
//! [`TXN_TIMEOUT_MS`]. The run waits for that ([`crate::workload::await_stable`]) before the
//! final read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use brook_protocol_tests::rd::{self, RecProducer};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;

use crate::history::{History, Op, TxnOutcome, TxnRecord};
use crate::schedule::SplitMix64;
use crate::workload::{Clients, Progress};

/// Fewest records one transaction sends (to that many partitions, when there are enough).
pub const TXN_RECORDS_MIN: u64 = 2;
/// Most records one transaction sends.
pub const TXN_RECORDS_MAX: u64 = 5;
/// One transaction in this many (drawn from the seed) is aborted on purpose.
pub const TXN_ABORT_ONE_IN: u64 = 4;
/// The producers' `transaction.timeout.ms`: the coordinator aborts a transaction open longer.
pub const TXN_TIMEOUT_MS: u64 = 20_000;
/// The producers' `message.timeout.ms` (librdkafka wants it no longer than the transaction
/// timeout).
pub const TXN_MESSAGE_TIMEOUT_MS: u64 = 15_000;
/// Bound on one `init_transactions`, `commit_transaction` or `abort_transaction` call, and on
/// the flush before a commit.
pub const TXN_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Calls of one kind per transaction while librdkafka says the error is retriable.
pub const TXN_CALL_ATTEMPTS_MAX: u32 = 5;
/// Pause before a new producer generation replaces a failed one.
pub const GENERATION_BACKOFF: Duration = Duration::from_millis(500);
/// The brokers' `transaction.abort.timed.out.transaction.cleanup.interval.ms` in this
/// workload: how soon a failed generation's open transaction is aborted after its timeout.
pub const TXN_ABORT_CHECK_INTERVAL_MS: u64 = 2_000;
/// How long, once the producers stopped, every partition may take to have no open
/// transaction (last stable offset = high watermark) before the final read.
pub const STABLE_TIMEOUT: Duration =
    Duration::from_millis(TXN_TIMEOUT_MS + TXN_ABORT_CHECK_INTERVAL_MS + 60_000);
/// One poll of [`flush`].
const FLUSH_POLL: Duration = Duration::from_millis(2);
/// How long a producer waits between checks of its rate limit.
const RATE_WAIT: Duration = Duration::from_millis(5);

fn retriable(e: &KafkaError) -> bool {
    matches!(e, KafkaError::Transaction(r) if r.is_retriable())
}

fn requires_abort(e: &KafkaError) -> bool {
    matches!(e, KafkaError::Transaction(r) if r.txn_requires_abort())
}

/// The `transactional.id` of producer `process` (a generation has its own).
pub fn transactional_id(topic: &str, process: &str) -> String {
    format!("{topic}-{process}")
}

fn new_producer(c: &Clients, process: &str) -> RecProducer {
    let id = transactional_id(&c.topic, process);
    let txn_timeout = TXN_TIMEOUT_MS.to_string();
    let message_timeout = TXN_MESSAGE_TIMEOUT_MS.to_string();
    rd::producer(
        &c.bootstrap,
        &c.security.with(&[
            ("transactional.id", id.as_str()),
            ("transaction.timeout.ms", txn_timeout.as_str()),
            ("message.timeout.ms", message_timeout.as_str()),
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("max.in.flight.requests.per.connection", "5"),
            ("linger.ms", "5"),
            ("retry.backoff.ms", "50"),
            ("reconnect.backoff.max.ms", "1000"),
            ("socket.timeout.ms", "10000"),
        ]),
    )
}

/// What one producer thread carries from one generation to the next.
struct Thread<'a> {
    c: &'a Clients,
    history: &'a History,
    stop: &'a AtomicBool,
    progress: &'a Progress,
    rng: SplitMix64,
    started: Instant,
    /// Records sent so far (every value is `<process>-<seq>`).
    seq: u64,
    /// Transactions begun so far.
    txn: u64,
}

impl Thread<'_> {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.history.is_full()
    }

    /// Records the rate allows by now.
    fn allowed(&self) -> u64 {
        (self.started.elapsed().as_secs_f64() * self.c.settings.rate as f64) as u64
    }
}

/// One transactional producer thread: transactions until stopped, a new generation after a
/// client that cannot go on.
pub fn produce(
    index: usize,
    c: &Clients,
    history: &History,
    stop: &AtomicBool,
    progress: &Progress,
) {
    let mut t = Thread {
        c,
        history,
        stop,
        progress,
        rng: SplitMix64::new(c.seed ^ (index as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407)),
        started: Instant::now(),
        seq: 0,
        txn: 0,
    };
    for generation in 0.. {
        if t.stopping() {
            return;
        }
        let process = if generation == 0 {
            format!("p{index}")
        } else {
            format!("p{index}.{generation}")
        };
        let Some(why) = produce_with(&process, &mut t) else {
            return;
        };
        history.push(Op::ClientError {
            process: process.clone(),
            at_ms: history.now_ms(),
            error: format!("transactional producer replaced: {why}"),
        });
        progress.producers_replaced.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(GENERATION_BACKOFF);
    }
}

/// Transactions with one client until stopped (`None`) or until the client cannot go on
/// (`Some`, why).
fn produce_with(process: &str, t: &mut Thread<'_>) -> Option<String> {
    let p = new_producer(t.c, process);
    let mut attempt = 0;
    loop {
        match p.init_transactions(TXN_CALL_TIMEOUT) {
            Ok(()) => break,
            Err(_) if t.stopping() => return None,
            Err(e) if retriable(&e) && attempt + 1 < TXN_CALL_ATTEMPTS_MAX => attempt += 1,
            Err(e) => return Some(format!("init_transactions: {e}")),
        }
    }
    while !t.stopping() {
        let n = t.rng.range(TXN_RECORDS_MIN, TXN_RECORDS_MAX);
        let abort = t.rng.next_u64().is_multiple_of(TXN_ABORT_ONE_IN);
        let first = t.rng.range(0, t.c.settings.partitions as u64 - 1);
        while t.allowed() < t.seq + n {
            if t.stopping() {
                return None;
            }
            std::thread::sleep(RATE_WAIT);
        }
        if let Err(e) = p.begin_transaction() {
            return Some(format!("begin_transaction: {e}"));
        }
        let (op, why) = transact(process, &p, t, n, first, abort);
        count(t.progress, &op);
        t.history.push(op);
        if why.is_some() {
            return why;
        }
    }
    None
}

fn count(progress: &Progress, op: &Op) {
    let Op::Txn {
        records, outcome, ..
    } = op
    else {
        return;
    };
    let n = records.len() as u64;
    let (txns, records) = match outcome {
        TxnOutcome::Committed => (&progress.txns_committed, &progress.acknowledged),
        TxnOutcome::Aborted { .. } => (&progress.txns_aborted, &progress.not_acknowledged),
        TxnOutcome::Unknown { .. } => (&progress.txns_unknown, &progress.not_acknowledged),
    };
    txns.fetch_add(1, Ordering::Relaxed);
    records.fetch_add(n, Ordering::Relaxed);
}

/// One begun transaction of `n` records to partitions `first`, `first + 1`, ... (round the
/// partitions), committed unless `abort`. Returns its op and, when the client cannot go on,
/// why.
fn transact(
    process: &str,
    p: &RecProducer,
    t: &mut Thread<'_>,
    n: u64,
    first: u64,
    abort: bool,
) -> (Op, Option<String>) {
    let txn = t.txn;
    t.txn += 1;
    let begun_ms = t.history.now_ms();
    let mut records = Vec::new();
    let mut commit_invoked_ms = None;
    let mut reason = send_all(process, p, t, n, first, &mut records);
    if reason.is_none() {
        reason = flush(p);
    }
    if reason.is_none() {
        reason = take_reports(p, &mut records);
    }
    if reason.is_none() && abort {
        reason = Some("aborted by choice (seed)".into());
    }
    let (outcome, why) = match reason {
        Some(reason) => abort_txn(p, reason),
        None => {
            commit_invoked_ms = Some(t.history.now_ms());
            // The coordinator nemesis watches this set for an EndTxn in flight.
            let id = transactional_id(&t.c.topic, process);
            let committing = || {
                t.progress
                    .committing
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
            };
            committing().insert(id.clone());
            let ended = commit_txn(p);
            committing().remove(&id);
            ended
        }
    };
    let _ = take_reports(p, &mut records);
    let op = Op::Txn {
        process: process.to_string(),
        txn,
        records,
        begun_ms,
        commit_invoked_ms,
        completed_ms: t.history.now_ms(),
        outcome,
    };
    (op, why)
}

/// Sends the transaction's records; `Some` when the client refused one (it was never queued).
fn send_all(
    process: &str,
    p: &RecProducer,
    t: &mut Thread<'_>,
    n: u64,
    first: u64,
    records: &mut Vec<TxnRecord>,
) -> Option<String> {
    let partitions = t.c.settings.partitions as u64;
    for i in 0..n {
        let seq = t.seq;
        t.seq += 1;
        let partition = ((first + i) % partitions) as i32;
        let value = format!("{process}-{seq}");
        let rec = rd::record(
            &t.c.topic,
            seq as usize,
            Some(partition),
            None,
            Some(value.as_bytes()),
        );
        let sent = p.send(rec).map_err(|(e, _)| e);
        records.push(TxnRecord {
            partition,
            seq,
            value,
            offset: None,
        });
        if let Err(e) = sent {
            return Some(format!("send of record {seq} refused: {e}"));
        }
        p.poll(Duration::ZERO);
    }
    None
}

/// Waits (bounded by [`TXN_CALL_TIMEOUT`]) until every record sent has its delivery report;
/// `Some` when that did not happen. (rdkafka's `flush` polls in steps of 100 ms.)
fn flush(p: &RecProducer) -> Option<String> {
    let deadline = Instant::now() + TXN_CALL_TIMEOUT;
    while p.in_flight_count() > 0 {
        if Instant::now() >= deadline {
            return Some(format!(
                "{} records not delivered within {TXN_CALL_TIMEOUT:?} before commit",
                p.in_flight_count()
            ));
        }
        p.poll(FLUSH_POLL);
    }
    None
}

/// Takes the delivery reports served so far into `records`' offsets; `Some` with the first
/// failed delivery.
fn take_reports(p: &RecProducer, records: &mut [TxnRecord]) -> Option<String> {
    p.poll(Duration::ZERO);
    let reports = std::mem::take(&mut *p.context().deliveries.lock().unwrap());
    let mut failed = None;
    for d in reports {
        let Some(r) = records.iter_mut().find(|r| r.seq == d.idx as u64) else {
            continue;
        };
        match d.error {
            None => r.offset = Some(d.offset),
            Some(e) => {
                failed.get_or_insert_with(|| format!("delivery of record {} failed: {e}", r.seq));
            }
        }
    }
    failed
}

/// Aborts a transaction that never asked to commit: aborted whatever `abort_transaction` says
/// (it only decides whether the client can go on).
fn abort_txn(p: &RecProducer, reason: String) -> (TxnOutcome, Option<String>) {
    match abort_bounded(p) {
        Ok(()) => (TxnOutcome::Aborted { reason }, None),
        Err(e) => {
            let why = format!("abort_transaction: {e}");
            (
                TxnOutcome::Aborted {
                    reason: format!("{reason}; {why}"),
                },
                Some(why),
            )
        }
    }
}

fn abort_bounded(p: &RecProducer) -> Result<(), KafkaError> {
    let mut attempt = 0;
    loop {
        match p.abort_transaction(TXN_CALL_TIMEOUT) {
            Err(e) if retriable(&e) && attempt + 1 < TXN_CALL_ATTEMPTS_MAX => attempt += 1,
            r => return r,
        }
    }
}

/// Commits: committed when a `commit_transaction` returns Ok (a retry of a retriable error
/// included), unknown otherwise; an abortable error is aborted so the client can go on, but
/// the outcome stays unknown (the commit was sent).
fn commit_txn(p: &RecProducer) -> (TxnOutcome, Option<String>) {
    let mut errors = Vec::new();
    for _ in 0..TXN_CALL_ATTEMPTS_MAX {
        match p.commit_transaction(TXN_CALL_TIMEOUT) {
            Ok(()) => return (TxnOutcome::Committed, None),
            Err(e) if retriable(&e) => errors.push(e.to_string()),
            Err(e) if requires_abort(&e) => {
                errors.push(e.to_string());
                let why = abort_bounded(p)
                    .err()
                    .map(|a| format!("abort_transaction after a failed commit: {a}"));
                let error = errors.join("; ");
                return (TxnOutcome::Unknown { error }, why);
            }
            Err(e) => {
                let why = format!("commit_transaction: {e}");
                errors.push(e.to_string());
                let error = errors.join("; ");
                return (TxnOutcome::Unknown { error }, Some(why));
            }
        }
    }
    let error = errors.join("; ");
    let why = format!("commit_transaction still retriable after {TXN_CALL_ATTEMPTS_MAX} calls");
    (TxnOutcome::Unknown { error }, Some(why))
}
