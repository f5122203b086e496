//! The checker: reads a [`History`](crate::history) and reports, per partition, the anomalies
//! of Jepsen's Kafka workload (`jepsen.tests.kafka`), by their names:
//!
//! - `lost-write`: a send was acknowledged, the record was never read, and some poll read the
//!   partition at or past the acknowledged offset (so it should have been there); or it was
//!   read, but the final read of the whole partition at the end of the run no longer has it;
//! - `unseen`: acknowledged, never read, and no poll got as far as its offset (with the final
//!   read-to-the-end that every run does, this too means the record is gone);
//! - `duplicate`: one value read at two or more offsets;
//! - `duplicate-after-epoch-bump` (not Jepsen's): a `duplicate` whose copies the batch headers
//!   of the final log ([`Op::ProducerRun`]) place under successive epochs of one producer id,
//!   where the producer logged that it bumped each earlier copy's epoch for a reason of its
//!   own: messages timed out, or "skipped sequence numbers" after a request failed with an
//!   error Kafka 4.4 answers during a failover (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER;
//!   [`FAILOVER_ERRORS`]) or that messages it timed out itself without a bump left (it bumps
//!   for a timeout only on a partition with a leader). The client sent the record again: librdkafka drains, bumps its epoch
//!   and renumbers what it still holds, on every partition, from sequence 0 (KIP-360),
//!   including batches a broker wrote whose answer it had not yet got, and no broker can
//!   match those to the first copies (Kafka's `ProducerStateManager` takes sequence 0 under a
//!   new epoch as a fresh start). A 60-step run against Kafka 4.4 shows the second kind three
//!   times. Reported as expected in every configuration. Copies under one epoch, or under
//!   epochs bumped for another reason (UNKNOWN_PRODUCER_ID; skipped sequence numbers after an
//!   answer Kafka does not give there, such as UNKNOWN_TOPIC_OR_PARTITION from a node that
//!   has not yet learnt its partitions), stay `duplicate`, with the epochs and the reason in
//!   the example;
//! - `inconsistent-offsets`: one offset read with two different values, or a value read at an
//!   offset other than the one its send was acknowledged at;
//! - `nonmonotonic-poll`: one consumer read an offset at or below the one it read before (on
//!   the same partition, without restarting from the beginning). A consumer that goes back
//!   to exactly the first offset it read after its assignment restarted from that assignment:
//!   counted as a client restart, not an anomaly, and checked for monotonicity again from
//!   there, as after an [`Op::Assign`]. What it re-reads is still checked against everything
//!   else (`inconsistent-offsets`, `duplicate`). librdkafka 2.12 consumers do this about once
//!   in ten seed-4 runs, after a second leader change, with no `OFFSET` log line (which it
//!   writes for every reset a broker's answer causes) and to the position its assignment
//!   started at, which is the fetch start it keeps from `assign()`;
//! - `poll-skip`: one consumer's consecutive reads jumped over an offset that some poll read;
//! - `reorder`: two records of one producer to one partition are in the log in the opposite of
//!   the order they were sent in.
//!
//! With the transactional workload ([`Op::Txn`]), also:
//!
//! - `aborted-read` (Adya's G1a): a read_committed poll, or the final read, returned a record
//!   of a transaction whose producer never asked to commit it (it was aborted);
//! - `uncommitted-read`: a poll returned a record before its transaction's commit was even
//!   sent (the poll was recorded before `commit_transaction` was called; polls are
//!   time-stamped after they return, so this errs only on the side of missing some);
//! - `lost-commit`: a record of a committed transaction missing from the final read;
//! - `partial-transaction`: the final read holds some but not all records of a transaction
//!   that committed or may have (atomicity).
//!
//! With group consumers ([`crate::group`]), also `lost-offset-commit`: a member started
//! reading a partition below an offset whose commit was acknowledged before it got the
//! partition.
//!
//! With share consumers ([`crate::share`]), also `redelivered-after-accept`,
//! `delivered-after-limit`, `undelivered` and `unsettled` (see there).
//!
//! A transaction's records count as sends for `duplicate` (of the reads) and `reorder`, not for
//! `lost-write` or `unseen` (acknowledged means committed there: `lost-commit`).
//!
//! Values are unique per send (the workload writes `<process>-<n>`), which is what lets a read
//! be matched to its send.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::history::{Op, Outcome, Read, TxnOutcome, TxnRecord, FINAL_READER};

/// Examples kept per anomaly kind and partition; the counts are always complete.
pub const EXAMPLES_MAX: usize = 8;

/// Jepsen's anomaly names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Anomaly {
    LostWrite,
    Unseen,
    Duplicate,
    DuplicateAfterEpochBump,
    InconsistentOffsets,
    NonmonotonicPoll,
    PollSkip,
    Reorder,
    AbortedRead,
    UncommittedRead,
    LostCommit,
    PartialTransaction,
    LostOffsetCommit,
    RedeliveredAfterAccept,
    DeliveredAfterLimit,
    Undelivered,
    Unsettled,
}

impl Anomaly {
    pub const ALL: [Anomaly; 17] = [
        Anomaly::LostWrite,
        Anomaly::Unseen,
        Anomaly::Duplicate,
        Anomaly::DuplicateAfterEpochBump,
        Anomaly::InconsistentOffsets,
        Anomaly::NonmonotonicPoll,
        Anomaly::PollSkip,
        Anomaly::Reorder,
        Anomaly::AbortedRead,
        Anomaly::UncommittedRead,
        Anomaly::LostCommit,
        Anomaly::PartialTransaction,
        Anomaly::LostOffsetCommit,
        Anomaly::RedeliveredAfterAccept,
        Anomaly::DeliveredAfterLimit,
        Anomaly::Undelivered,
        Anomaly::Unsettled,
    ];

    /// Whether only the share workload ([`crate::share`]) can show it.
    pub fn share(self) -> bool {
        matches!(
            self,
            Anomaly::RedeliveredAfterAccept
                | Anomaly::DeliveredAfterLimit
                | Anomaly::Undelivered
                | Anomaly::Unsettled
        )
    }

    /// Whether only the transactional workload can show it.
    pub fn transactional(self) -> bool {
        matches!(
            self,
            Anomaly::AbortedRead
                | Anomaly::UncommittedRead
                | Anomaly::LostCommit
                | Anomaly::PartialTransaction
        )
    }

    /// The name Jepsen uses.
    pub fn name(self) -> &'static str {
        match self {
            Anomaly::LostWrite => "lost-write",
            Anomaly::Unseen => "unseen",
            Anomaly::Duplicate => "duplicate",
            Anomaly::DuplicateAfterEpochBump => "duplicate-after-epoch-bump",
            Anomaly::InconsistentOffsets => "inconsistent-offsets",
            Anomaly::NonmonotonicPoll => "nonmonotonic-poll",
            Anomaly::PollSkip => "poll-skip",
            Anomaly::Reorder => "reorder",
            Anomaly::AbortedRead => "aborted-read",
            Anomaly::UncommittedRead => "uncommitted-read",
            Anomaly::LostCommit => "lost-commit",
            Anomaly::PartialTransaction => "partial-transaction",
            Anomaly::LostOffsetCommit => "lost-offset-commit",
            Anomaly::RedeliveredAfterAccept => "redelivered-after-accept",
            Anomaly::DeliveredAfterLimit => "delivered-after-limit",
            Anomaly::Undelivered => "undelivered",
            Anomaly::Unsettled => "unsettled",
        }
    }
}

/// One kind of anomaly on one partition: how many, and the first few described.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    pub count: u64,
    pub examples: Vec<String>,
}

/// What one partition's history shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionReport {
    /// Sends acknowledged with an offset (records of committed transactions).
    pub acknowledged: u64,
    /// Sends that failed or whose outcome is unknown (records of aborted transactions, of
    /// transactions whose outcome is unknown).
    pub failed: u64,
    pub unknown: u64,
    /// Records sent in transactions.
    #[serde(default)]
    pub txn_records: u64,
    /// Distinct offsets read by any poll.
    pub offsets_read: u64,
    /// Records the share consumers were delivered, each delivery counted (the share workload).
    #[serde(default)]
    pub share_deliveries: u64,
    pub anomalies: BTreeMap<Anomaly, Found>,
    /// Consumers that went back to the offset their assignment started at (see the module
    /// comment): a client behaviour, reported, not an anomaly.
    #[serde(default)]
    pub client_restarts: Found,
}

impl PartitionReport {
    pub(crate) fn note(&mut self, kind: Anomaly, example: impl FnOnce() -> String) {
        let f = self.anomalies.entry(kind).or_default();
        f.count += 1;
        if f.examples.len() < EXAMPLES_MAX {
            f.examples.push(example());
        }
    }

    /// How many anomalies of `kind`.
    pub fn count(&self, kind: Anomaly) -> u64 {
        self.anomalies.get(&kind).map_or(0, |f| f.count)
    }
}

/// A send as the checker needs it.
struct SendView<'a> {
    process: &'a str,
    seq: u64,
    value: &'a str,
    acked_at: Option<i64>,
}

/// A transaction as the checker needs it.
struct TxnView<'a> {
    process: &'a str,
    txn: u64,
    records: &'a [TxnRecord],
    commit_invoked_ms: Option<u64>,
    outcome: &'a TxnOutcome,
}

impl TxnView<'_> {
    fn name(&self) -> String {
        let outcome = match self.outcome {
            TxnOutcome::Committed => "committed".to_string(),
            TxnOutcome::Aborted { reason } => format!("aborted: {reason}"),
            TxnOutcome::Unknown { error } => format!("unknown: {error}"),
        };
        format!("transaction {}/{} ({outcome})", self.process, self.txn)
    }
}

/// The history's writes.
struct Writes<'a> {
    /// Each partition's sends, a transaction's records among them (for `reorder`).
    sends: BTreeMap<i32, Vec<SendView<'a>>>,
    /// Each written partition's report, with its sends' outcomes counted.
    reports: BTreeMap<i32, PartitionReport>,
    txns: Vec<TxnView<'a>>,
}

/// The history's writes, gathered op by op.
fn writes(ops: &[Op]) -> Writes<'_> {
    let mut writes = Writes {
        sends: BTreeMap::new(),
        reports: BTreeMap::new(),
        txns: Vec::new(),
    };
    for op in ops {
        writes.note_txn(op);
        writes.note_send(op);
    }
    writes
}

impl<'a> Writes<'a> {
    /// A transaction's records: counted by its outcome, kept for `reorder`, and the
    /// transaction itself.
    fn note_txn(&mut self, op: &'a Op) {
        let Op::Txn {
            process,
            txn,
            records,
            commit_invoked_ms,
            outcome,
            ..
        } = op
        else {
            return;
        };
        let (sends, reports) = (&mut self.sends, &mut self.reports);
        for rec in records {
            let r = reports.entry(rec.partition).or_default();
            r.txn_records += 1;
            match outcome {
                TxnOutcome::Committed => r.acknowledged += 1,
                TxnOutcome::Aborted { .. } => r.failed += 1,
                TxnOutcome::Unknown { .. } => r.unknown += 1,
            }
            // For `reorder` only: no acknowledged offset, so no lost-write or unseen.
            sends.entry(rec.partition).or_default().push(SendView {
                process,
                seq: rec.seq,
                value: &rec.value,
                acked_at: None,
            });
        }
        self.txns.push(TxnView {
            process,
            txn: *txn,
            records,
            commit_invoked_ms: *commit_invoked_ms,
            outcome,
        });
    }

    /// A send: counted by its outcome, with its acknowledged offset if it had one.
    fn note_send(&mut self, op: &'a Op) {
        let Op::Send {
            process,
            seq,
            partition,
            value,
            outcome,
            ..
        } = op
        else {
            return;
        };
        let (sends, reports) = (&mut self.sends, &mut self.reports);
        let r = reports.entry(*partition).or_default();
        let acked_at = match outcome {
            Outcome::Ok { offset } => {
                r.acknowledged += 1;
                Some(*offset)
            }
            Outcome::Failed { .. } => {
                r.failed += 1;
                None
            }
            Outcome::Unknown { .. } => {
                r.unknown += 1;
                None
            }
        };
        sends.entry(*partition).or_default().push(SendView {
            process,
            seq: *seq,
            value,
            acked_at,
        });
    }
}

/// Every partition's report, keyed by partition.
pub fn check(ops: &[Op]) -> BTreeMap<i32, PartitionReport> {
    let Writes {
        sends,
        mut reports,
        txns,
    } = writes(ops);
    let reads = Reads::of(ops);
    let writers = Writers::of(ops, &sends);
    for p in reads.partitions() {
        reports.entry(p).or_default();
    }
    for (p, report) in reports.iter_mut() {
        let log = reads.partition(*p);
        report.offsets_read = log.by_offset.len() as u64;
        let no_sends = Vec::new();
        let sends = sends.get(p).unwrap_or(&no_sends);
        check_reads(log, &writers.partition(*p), report);
        check_sends(log, sends, report);
        check_producer_order(log, sends, report);
    }
    check_polls(ops, &reads, &mut reports);
    check_txn_reads(ops, &txns, &mut reports);
    check_txn_final(&txns, &reads, &mut reports);
    crate::group::check_offsets(ops, &mut reports);
    crate::share::check(ops, &mut reports);
    reports
}

/// `aborted-read` and `uncommitted-read`: every poll (the final read's too) against the
/// transaction of each record it returned. Each record counts once per kind.
fn check_txn_reads(ops: &[Op], txns: &[TxnView<'_>], reports: &mut BTreeMap<i32, PartitionReport>) {
    let of: HashMap<&str, &TxnView<'_>> = txns
        .iter()
        .flat_map(|t| t.records.iter().map(move |r| (r.value.as_str(), t)))
        .collect();
    let mut noted: BTreeSet<(Anomaly, &str)> = BTreeSet::new();
    for op in ops {
        let Op::Poll {
            process,
            at_ms,
            records,
        } = op
        else {
            continue;
        };
        for r in records {
            let Some(t) = of.get(r.value.as_str()) else {
                continue;
            };
            let report = reports.entry(r.partition).or_default();
            if let TxnOutcome::Aborted { .. } = t.outcome {
                if noted.insert((Anomaly::AbortedRead, &r.value)) {
                    report.note(Anomaly::AbortedRead, || {
                        format!(
                            "{} of {} read by {process} at offset {}",
                            r.value,
                            t.name(),
                            r.offset
                        )
                    });
                }
            } else if let Some(commit) = t.commit_invoked_ms.filter(|c| at_ms < c) {
                if noted.insert((Anomaly::UncommittedRead, &r.value)) {
                    report.note(Anomaly::UncommittedRead, || {
                        format!(
                            "{} of {} read by {process} at offset {} by {at_ms} ms, before its commit was sent at {commit} ms",
                            r.value,
                            t.name(),
                            r.offset
                        )
                    });
                }
            }
        }
    }
}

/// `lost-commit` and `partial-transaction`: each transaction that committed, or may have,
/// against the final read of the partitions it wrote to.
fn check_txn_final(
    txns: &[TxnView<'_>],
    reads: &Reads<'_>,
    reports: &mut BTreeMap<i32, PartitionReport>,
) {
    for t in txns {
        if let TxnOutcome::Aborted { .. } = t.outcome {
            continue;
        }
        let covered: Vec<&TxnRecord> = t
            .records
            .iter()
            .filter(|r| reads.partition(r.partition).final_read)
            .collect();
        let (present, missing): (Vec<&TxnRecord>, Vec<&TxnRecord>) =
            covered.iter().partition(|r| {
                reads
                    .partition(r.partition)
                    .finally
                    .contains_key(r.value.as_str())
            });
        if let TxnOutcome::Committed = t.outcome {
            for r in &missing {
                reports
                    .entry(r.partition)
                    .or_default()
                    .note(Anomaly::LostCommit, || {
                        format!("{} of {} missing from the final read", r.value, t.name())
                    });
            }
        }
        if let (Some(_), Some(first_missing)) = (present.first(), missing.first()) {
            let names = |rs: &[&TxnRecord]| {
                rs.iter()
                    .map(|r| format!("{} (partition {})", r.value, r.partition))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            reports.entry(first_missing.partition).or_default().note(
                Anomaly::PartialTransaction,
                || {
                    format!(
                        "the final read holds {} of the {} records of {}: {}; not {}",
                        present.len(),
                        covered.len(),
                        t.name(),
                        names(&present),
                        names(&missing)
                    )
                },
            );
        }
    }
}

/// What every poll read, per partition: offset -> values, value -> offsets; and what the
/// final read ([`FINAL_READER`]) found, the log as it stands at the end.
#[derive(Default)]
struct PartitionReads<'a> {
    by_offset: BTreeMap<i64, BTreeSet<&'a str>>,
    by_value: HashMap<&'a str, BTreeSet<i64>>,
    finally: HashMap<&'a str, i64>,
    /// Whether the final read covered this partition.
    final_read: bool,
}

struct Reads<'a> {
    partitions: BTreeMap<i32, PartitionReads<'a>>,
    empty: PartitionReads<'a>,
}

impl<'a> Reads<'a> {
    fn of(ops: &'a [Op]) -> Reads<'a> {
        let mut partitions: BTreeMap<i32, PartitionReads<'a>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Poll {
                    process, records, ..
                } => {
                    for Read {
                        partition,
                        offset,
                        value,
                    } in records
                    {
                        let r = partitions.entry(*partition).or_default();
                        r.by_offset.entry(*offset).or_default().insert(value);
                        r.by_value.entry(value).or_default().insert(*offset);
                        if process == FINAL_READER {
                            r.finally.insert(value, *offset);
                        }
                    }
                }
                Op::Assign {
                    process, partition, ..
                } if process == FINAL_READER => {
                    partitions.entry(*partition).or_default().final_read = true;
                }
                _ => {}
            }
        }
        Reads {
            partitions,
            empty: PartitionReads::default(),
        }
    }

    fn partitions(&self) -> Vec<i32> {
        self.partitions.keys().copied().collect()
    }

    fn partition(&self, p: i32) -> &PartitionReads<'a> {
        self.partitions.get(&p).unwrap_or(&self.empty)
    }
}

/// Errors (librdkafka's names) after which a request's failure makes librdkafka bump the
/// epoch for "skipped sequence numbers" against Kafka 4.4 as well: answers of a failover,
/// and the OUT_OF_ORDER_SEQUENCE_NUMBER of the requests behind such a one.
pub const FAILOVER_ERRORS: [&str; 3] = [
    "NOT_ENOUGH_REPLICAS",
    "NOT_LEADER_FOR_PARTITION",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
];

/// (process, producer id, epoch) of an epoch bump.
type BumpKey<'a> = (&'a str, i64, i16);

/// One sequence gap librdkafka bumped an epoch for (its `ERRSEQ` line): a request for
/// `partition` came back OUT_OF_ORDER_SEQUENCE_NUMBER while `skipped` earlier sequence numbers
/// of the epoch had no answer, and the partition's last failed request was `cause`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SequenceGap<'a> {
    partition: i32,
    skipped: u64,
    cause: &'a str,
    at_ms: u64,
}

/// Who wrote what, for telling a client's re-send from a broker duplicate: the final log's
/// producer runs, each producer process's epoch bumps (from librdkafka's `DRAIN` lines), the
/// sequence gaps it bumped for (`ERRSEQ` lines), the messages it timed out, and which process
/// sent each value.
struct Writers<'a> {
    /// Per partition, (first offset, last offset, producer id, epoch), by first offset.
    runs: BTreeMap<i32, Vec<(i64, i64, i64, i16)>>,
    /// (process, producer id, epoch bumped from) -> the reason the producer logged.
    bumps: HashMap<BumpKey<'a>, &'a str>,
    /// (process, producer id, epoch) -> when the producer started using that epoch; an epoch
    /// without a logged start (the first) started with the run.
    epoch_starts: HashMap<BumpKey<'a>, u64>,
    /// (process, producer id, epoch) -> the sequence gaps librdkafka bumped that epoch for.
    gaps: HashMap<BumpKey<'a>, Vec<SequenceGap<'a>>>,
    /// (process, partition) -> when each of its sends was reported timed out, ascending.
    timeouts: HashMap<(&'a str, i32), Vec<u64>>,
    /// Value -> the process that sent it.
    sender: HashMap<&'a str, &'a str>,
}

/// One partition's view of [`Writers`].
struct PartitionWriters<'w, 'a> {
    runs: &'w [(i64, i64, i64, i16)],
    writers: &'w Writers<'a>,
}

impl<'a> Writers<'a> {
    fn of(ops: &'a [Op], sends: &BTreeMap<i32, Vec<SendView<'a>>>) -> Writers<'a> {
        let mut writers = Writers {
            runs: BTreeMap::new(),
            bumps: HashMap::new(),
            epoch_starts: HashMap::new(),
            gaps: HashMap::new(),
            timeouts: HashMap::new(),
            sender: sends
                .values()
                .flatten()
                .map(|s| (s.value, s.process))
                .collect(),
        };
        for op in ops {
            writers.add(op);
        }
        for r in writers.runs.values_mut() {
            r.sort_unstable();
        }
        for t in writers.timeouts.values_mut() {
            t.sort_unstable();
        }
        writers
    }

    fn add(&mut self, op: &'a Op) {
        match op {
            Op::ProducerRun {
                partition,
                first_offset,
                last_offset,
                producer_id,
                producer_epoch,
            } => self.runs.entry(*partition).or_default().push((
                *first_offset,
                *last_offset,
                *producer_id,
                *producer_epoch,
            )),
            Op::ClientError {
                process,
                error,
                at_ms,
            } => {
                let process = process.as_str();
                if let Some((id, epoch, reason)) = parse_epoch_bump(error) {
                    self.bumps.insert((process, id, epoch), reason);
                }
                if let Some((id, epoch)) = parse_epoch_start(error) {
                    self.epoch_starts.insert((process, id, epoch), *at_ms);
                }
                if let Some((id, epoch, gap)) = parse_sequence_gap(error, *at_ms) {
                    self.gaps.entry((process, id, epoch)).or_default().push(gap);
                }
            }
            Op::Send {
                process,
                partition,
                completed_ms,
                outcome: Outcome::Unknown { error },
                ..
            } if error.contains(MESSAGE_TIMED_OUT) => self
                .timeouts
                .entry((process.as_str(), *partition))
                .or_default()
                .push(*completed_ms),
            _ => {}
        }
    }

    fn partition<'w>(&'w self, p: i32) -> PartitionWriters<'w, 'a> {
        PartitionWriters {
            runs: self.runs.get(&p).map_or(&[], |r| r.as_slice()),
            writers: self,
        }
    }

    /// How many of `process`'s sends to `partition` were reported timed out between
    /// `from_ms` and `to_ms`.
    fn timed_out(&self, process: &str, partition: i32, from_ms: u64, to_ms: u64) -> usize {
        let Some(at) = self.timeouts.get(&(process, partition)) else {
            return 0;
        };
        at.partition_point(|t| *t <= to_ms) - at.partition_point(|t| *t < from_ms)
    }

    /// Why librdkafka skipped the sequence numbers of `gap` under the epoch of `key`, and
    /// whether that is its own doing (`Ok`) or an answer it got (`Err`):
    /// - the messages it timed out under that epoch on that partition cover the gap
    ///   (librdkafka bumps the epoch for a message timeout only when it scans a partition
    ///   that has a leader; one timed out while its partition had none leaves a gap that the
    ///   next request's OUT_OF_ORDER_SEQUENCE_NUMBER reveals, with a stale "previous failed
    ///   request" in the line);
    /// - or the failed request was a failover answer ([`FAILOVER_ERRORS`]).
    fn gap_cause(&self, key: &BumpKey<'_>, gap: &SequenceGap<'_>) -> Result<String, String> {
        let from_ms = self.epoch_starts.get(key).copied().unwrap_or(0);
        let timed_out = self.timed_out(key.0, gap.partition, from_ms, gap.at_ms);
        if timed_out as u64 >= gap.skipped {
            return Ok(format!(
                "{timed_out} message(s) of partition {} timed out without a bump",
                gap.partition
            ));
        }
        if FAILOVER_ERRORS.contains(&gap.cause) {
            Ok(gap.cause.to_string())
        } else {
            Err(gap.cause.to_string())
        }
    }
}

/// librdkafka's delivery error for a message it gave up on after `message.timeout.ms`.
const MESSAGE_TIMED_OUT: &str = "MessageTimedOut";

impl PartitionWriters<'_, '_> {
    /// The producer id and epoch of the batch holding `offset`.
    fn writer_of(&self, offset: i64) -> Option<(i64, i16)> {
        let i = self
            .runs
            .partition_point(|r| r.0 <= offset)
            .checked_sub(1)?;
        let (first, last, id, epoch) = self.runs[i];
        (first..=last).contains(&offset).then_some((id, epoch))
    }

    /// Whether `value`, read at `offsets`, was re-sent by its producer after an epoch bump of
    /// its own (`Ok`), or not (`Err`, with what the headers and the producer's log say).
    fn resent(&self, value: &str, offsets: &BTreeSet<i64>) -> Result<String, String> {
        let writers: Vec<Option<(i64, i16)>> = offsets.iter().map(|o| self.writer_of(*o)).collect();
        let Some(writers) = writers.into_iter().collect::<Option<Vec<(i64, i16)>>>() else {
            return Err("no batch headers for every copy".into());
        };
        let described = format!("producer (id, epoch) {writers:?}");
        let one_id = writers.iter().all(|w| w.0 == writers[0].0 && w.0 >= 0);
        let rising = writers.windows(2).all(|w| w[0].1 < w[1].1);
        if !one_id || !rising {
            return Err(described);
        }
        let process = self.writers.sender.get(value).copied().unwrap_or_default();
        let mut reasons = Vec::new();
        for (id, epoch) in &writers[..writers.len() - 1] {
            let key = (process, *id, *epoch);
            let Some(reason) = self.writers.bumps.get(&key) else {
                return Err(format!("{described}; no bump of epoch {epoch} logged"));
            };
            match self.clients_own_bump(&key, reason) {
                Ok(reason) => reasons.push(reason),
                Err(reason) => return Err(format!("{described}; epoch {epoch} bumped: {reason}")),
            }
        }
        Ok(format!("{described}; bumped: {}", reasons.join("; ")))
    }

    /// Whether the bump of `key` (logged for `reason`) is one librdkafka makes against Kafka
    /// 4.4 too (`Ok`, with the reason spelled out): for timed-out messages, or for sequence
    /// gaps that timed-out messages or failover answers left. A gap whose only logged cause is
    /// the OUT_OF_ORDER_SEQUENCE_NUMBER of another gap has no known root, and does not count.
    fn clients_own_bump(&self, key: &BumpKey<'_>, reason: &str) -> Result<String, String> {
        if reason.contains("timed out") {
            return Ok(reason.to_string());
        }
        if !reason.contains("skipped sequence numbers") {
            return Err(reason.to_string());
        }
        let gaps = self.writers.gaps.get(key).map_or(&[][..], |g| g.as_slice());
        let causes: Vec<Result<String, String>> = gaps
            .iter()
            .map(|gap| self.writers.gap_cause(key, gap))
            .collect();
        let named: Vec<&str> = causes
            .iter()
            .map(|c| match c {
                Ok(c) | Err(c) => c.as_str(),
            })
            .collect();
        let spelled = format!("{reason} after {}", named.join(", "));
        let rooted = named.iter().any(|c| *c != "OUT_OF_ORDER_SEQUENCE_NUMBER");
        if rooted && causes.iter().all(|c| c.is_ok()) {
            Ok(spelled)
        } else {
            Err(spelled)
        }
    }
}

/// (producer id, epoch, gap) of librdkafka's line for a request that failed on a sequence
/// gap: `... ProduceRequest for TOPIC [P] with N message(s) failed due to skipped sequence
/// numbers (PID{Id:7,Epoch:0}, base seq 5 > next seq 3) caused by previous failed request
/// (ERROR, actions ...`.
fn parse_sequence_gap(line: &str, at_ms: u64) -> Option<(i64, i16, SequenceGap<'_>)> {
    let (head, rest) =
        line.split_once(" message(s) failed due to skipped sequence numbers (PID{Id:")?;
    let (_, partition) = head.rsplit_once(" with ")?.0.rsplit_once('[')?;
    let partition = partition.strip_suffix(']')?.parse().ok()?;
    let (id, rest) = rest.split_once(",Epoch:")?;
    let (epoch, rest) = rest.split_once("}, base seq ")?;
    let (base, rest) = rest.split_once(" > next seq ")?;
    let (next, rest) = rest.split_once(')')?;
    let (_, rest) = rest.split_once("caused by previous failed request (")?;
    let (cause, _) = rest.split_once(',')?;
    let skipped = base.parse::<u64>().ok()?.checked_sub(next.parse().ok()?)?;
    let gap = SequenceGap {
        partition,
        skipped,
        cause: cause.trim(),
        at_ms,
    };
    Some((id.parse().ok()?, epoch.parse().ok()?, gap))
}

/// (producer id, epoch) of librdkafka's line for the end of an epoch bump: `... All
/// partitions drained, bumped epoch to PID{Id:7,Epoch:1}`.
fn parse_epoch_start(line: &str) -> Option<(i64, i16)> {
    let (_, rest) = line.split_once("bumped epoch to PID{Id:")?;
    let (id, rest) = rest.split_once(",Epoch:")?;
    let (epoch, _) = rest.split_once('}')?;
    Some((id.parse().ok()?, epoch.parse().ok()?))
}

/// (producer id, epoch, reason) of librdkafka's line for the start of an epoch bump:
/// `... drain in state S for PID{Id:7,Epoch:0} epoch bump for N partition(s) with in-flight
/// requests: REASON`.
fn parse_epoch_bump(line: &str) -> Option<(i64, i16, &str)> {
    let (_, rest) = line.split_once("for PID{Id:")?;
    let (id, rest) = rest.split_once(",Epoch:")?;
    let (epoch, rest) = rest.split_once('}')?;
    if !rest.starts_with(" epoch bump ") {
        return None;
    }
    let (_, reason) = rest.split_once("in-flight requests: ")?;
    Some((id.parse().ok()?, epoch.parse().ok()?, reason.trim()))
}

/// `inconsistent-offsets` between reads, `duplicate` and `duplicate-after-epoch-bump`.
fn check_reads(
    log: &PartitionReads<'_>,
    writers: &PartitionWriters<'_, '_>,
    report: &mut PartitionReport,
) {
    for (offset, values) in &log.by_offset {
        if values.len() > 1 {
            report.note(Anomaly::InconsistentOffsets, || {
                format!("offset {offset} read as {values:?}")
            });
        }
    }
    let mut dups: Vec<(&&str, &BTreeSet<i64>)> =
        log.by_value.iter().filter(|(_, o)| o.len() > 1).collect();
    dups.sort_by_key(|(_, offsets)| offsets.first().copied());
    for (value, offsets) in dups {
        match writers.resent(value, offsets) {
            Ok(why) => report.note(Anomaly::DuplicateAfterEpochBump, || {
                format!("{value} read at offsets {offsets:?}: {why}")
            }),
            Err(why) => report.note(Anomaly::Duplicate, || {
                format!("{value} read at offsets {offsets:?}: {why}")
            }),
        }
    }
}

/// `lost-write`, `unseen`, and acknowledgements that disagree with the reads.
fn check_sends(log: &PartitionReads<'_>, sends: &[SendView<'_>], report: &mut PartitionReport) {
    let highest_read = log.by_offset.keys().next_back().copied();
    for s in sends {
        let Some(acked) = s.acked_at else { continue };
        // An acknowledgement without an offset (librdkafka's -1001, when the broker answered a
        // retry DUPLICATE_SEQUENCE_NUMBER) only says the record is in the log.
        let known = acked >= 0;
        let read_past = highest_read.is_some_and(|h| h >= acked);
        match log.by_value.get(s.value) {
            None if read_past => {
                report.note(Anomaly::LostWrite, || {
                    let now = log.by_offset.get(&acked);
                    format!("{} acknowledged at offset {acked}, never read; that offset was read as {now:?}", s.value)
                })
            }
            None => report.note(Anomaly::Unseen, || {
                format!(
                    "{} acknowledged at offset {acked}, never read; reads reached offset {highest_read:?}",
                    s.value
                )
            }),
            // Read once, gone at the end: the log lost it after a consumer saw it.
            Some(offsets) if log.final_read && !log.finally.contains_key(s.value) && read_past => {
                report.note(Anomaly::LostWrite, || {
                    let now = log.by_offset.get(&acked);
                    format!(
                        "{} acknowledged at offset {acked}, read at {offsets:?}, missing from the final read; that offset was read as {now:?}",
                        s.value
                    )
                })
            }
            Some(offsets) if known && !offsets.contains(&acked) => {
                report.note(Anomaly::InconsistentOffsets, || {
                    format!(
                        "{} acknowledged at offset {acked}, read at {offsets:?}",
                        s.value
                    )
                })
            }
            Some(_) => {}
        }
    }
}

/// `reorder`: per producer, the records it sent to this partition, in the order it sent them,
/// must sit at increasing offsets (each value's first offset read).
fn check_producer_order(
    log: &PartitionReads<'_>,
    sends: &[SendView<'_>],
    report: &mut PartitionReport,
) {
    let mut by_process: BTreeMap<&str, Vec<(u64, &str, i64)>> = BTreeMap::new();
    for s in sends {
        if let Some(first) = log.by_value.get(s.value).and_then(|o| o.first()) {
            by_process
                .entry(s.process)
                .or_default()
                .push((s.seq, s.value, *first));
        }
    }
    for (_, mut sent) in by_process {
        sent.sort_by_key(|(seq, _, _)| *seq);
        let mut highest: Option<(&str, i64)> = None;
        for (_, value, offset) in sent {
            match highest {
                Some((before, at)) if offset < at => {
                    report.note(Anomaly::Reorder, || {
                        format!("{value} (sent after {before}) at offset {offset}, before {before} at {at}")
                    });
                }
                _ => highest = Some((value, offset)),
            }
        }
    }
}

/// `nonmonotonic-poll` and `poll-skip`: each consumer's reads of a partition, in history order,
/// from one [`Op::Assign`] to the next.
fn check_polls(ops: &[Op], reads: &Reads<'_>, reports: &mut BTreeMap<i32, PartitionReport>) {
    // Per consumer and partition: the first offset read since the assignment, and the last.
    let mut first: HashMap<(&str, i32), i64> = HashMap::new();
    let mut last: HashMap<(&str, i32), i64> = HashMap::new();
    for op in ops {
        match op {
            Op::Assign {
                process, partition, ..
            } => {
                first.remove(&(process.as_str(), *partition));
                last.remove(&(process.as_str(), *partition));
            }
            Op::Poll {
                process, records, ..
            } => {
                for r in records {
                    let key = (process.as_str(), r.partition);
                    let report = reports.entry(r.partition).or_default();
                    let start = *first.entry(key).or_insert(r.offset);
                    let Some(prev) = last.insert(key, r.offset) else {
                        continue;
                    };
                    if r.offset == start && r.offset <= prev {
                        let f = &mut report.client_restarts;
                        f.count += 1;
                        if f.examples.len() < EXAMPLES_MAX {
                            f.examples.push(format!(
                                "{process} read offset {} (where its assignment started) after offset {prev}",
                                r.offset
                            ));
                        }
                        continue;
                    }
                    note_poll_step(process, prev, r, reads, report);
                }
            }
            _ => {}
        }
    }
}

fn note_poll_step(
    process: &str,
    prev: i64,
    r: &Read,
    reads: &Reads<'_>,
    report: &mut PartitionReport,
) {
    if r.offset <= prev {
        report.note(Anomaly::NonmonotonicPoll, || {
            format!("{process} read offset {} after offset {prev}", r.offset)
        });
        return;
    }
    let known = &reads.partition(r.partition).by_offset;
    if let Some((skipped, _)) = known.range(prev + 1..r.offset).next() {
        report.note(Anomaly::PollSkip, || {
            format!(
                "{process} read offset {} right after {prev}, skipping offset {skipped}",
                r.offset
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(process: &str, seq: u64, partition: i32, offset: Option<i64>) -> Op {
        Op::Send {
            process: process.into(),
            seq,
            partition,
            value: format!("{process}-{seq}"),
            invoked_ms: seq,
            completed_ms: seq + 1,
            outcome: match offset {
                Some(offset) => Outcome::Ok { offset },
                None => Outcome::Unknown {
                    error: "timed out".into(),
                },
            },
        }
    }

    fn poll(process: &str, records: &[(i64, &str)]) -> Op {
        Op::Poll {
            process: process.into(),
            at_ms: 0,
            records: records
                .iter()
                .map(|(offset, value)| Read {
                    partition: 0,
                    offset: *offset,
                    value: value.to_string(),
                })
                .collect(),
        }
    }

    fn assign(process: &str) -> Op {
        Op::Assign {
            process: process.into(),
            at_ms: 0,
            partition: 0,
        }
    }

    /// Three acknowledged sends of p0 at offsets 0..3 on partition 0.
    fn three_sends() -> Vec<Op> {
        (0..3).map(|i| send("p0", i, 0, Some(i as i64))).collect()
    }

    /// The only anomalies of partition 0, as (kind, count).
    fn found(ops: &[Op]) -> Vec<(Anomaly, u64)> {
        let reports = check(ops);
        reports[&0]
            .anomalies
            .iter()
            .map(|(k, f)| (*k, f.count))
            .collect()
    }

    #[test]
    fn a_clean_history_has_no_anomaly() {
        let mut ops = three_sends();
        ops.push(send("p0", 3, 0, None)); // unknown and never read: allowed
        ops.push(assign("c0"));
        ops.push(poll("c0", &[(0, "p0-0"), (1, "p0-1")]));
        ops.push(poll("c0", &[(2, "p0-2")]));
        ops.push(assign("c1"));
        ops.push(poll("c1", &[(0, "p0-0"), (1, "p0-1"), (2, "p0-2")]));
        assert_eq!(found(&ops), vec![]);
        let r = &check(&ops)[&0];
        assert_eq!((r.acknowledged, r.unknown, r.offsets_read), (3, 1, 3));
    }

    #[test]
    fn an_acknowledged_record_missing_below_a_read_offset_is_a_lost_write() {
        let mut ops = three_sends();
        ops.push(poll("c0", &[(0, "p0-0"), (2, "p0-2")]));
        ops.push(poll("c1", &[(0, "p0-0")]));
        // c0 also skipped offset 1... but nobody read offset 1, so it is not a poll-skip.
        assert_eq!(found(&ops), vec![(Anomaly::LostWrite, 1)]);
    }

    #[test]
    fn an_acknowledgement_without_an_offset_only_needs_the_record_read() {
        let mut ops = three_sends();
        ops.push(send("p0", 3, 0, Some(-1001)));
        ops.push(send("p0", 4, 0, Some(-1001)));
        ops.push(poll(
            "c0",
            &[(0, "p0-0"), (1, "p0-1"), (2, "p0-2"), (3, "p0-3")],
        ));
        assert_eq!(
            found(&ops),
            vec![(Anomaly::LostWrite, 1)],
            "p0-4 was never read"
        );
    }

    #[test]
    fn a_record_read_once_but_missing_from_the_final_read_is_a_lost_write() {
        let mut ops = three_sends();
        ops.push(poll("c0", &[(0, "p0-0"), (1, "p0-1"), (2, "p0-2")]));
        ops.push(Op::Assign {
            process: FINAL_READER.into(),
            at_ms: 0,
            partition: 0,
        });
        // The log ends with another record at offset 2.
        ops.push(poll(FINAL_READER, &[(0, "p0-0"), (1, "p0-1"), (2, "x")]));
        let f = found(&ops);
        assert_eq!(
            f,
            vec![(Anomaly::LostWrite, 1), (Anomaly::InconsistentOffsets, 1)],
            "p0-2 gone; offset 2 read as p0-2 and x"
        );
    }

    #[test]
    fn an_acknowledged_record_past_every_read_is_unseen() {
        let mut ops = three_sends();
        ops.push(poll("c0", &[(0, "p0-0"), (1, "p0-1")]));
        assert_eq!(found(&ops), vec![(Anomaly::Unseen, 1)]);
    }

    #[test]
    fn one_value_at_two_offsets_is_a_duplicate() {
        assert_eq!(found(&one_duplicate()), vec![(Anomaly::Duplicate, 1)]);
    }

    /// p0-2 read at offsets 2 and 3.
    fn one_duplicate() -> Vec<Op> {
        let mut ops = three_sends();
        ops.push(send("p0", 3, 0, Some(4)));
        ops.push(poll(
            "c0",
            &[
                (0, "p0-0"),
                (1, "p0-1"),
                (2, "p0-2"),
                (3, "p0-2"),
                (4, "p0-3"),
            ],
        ));
        ops
    }

    /// The duplicate of the test above, with the final log's batch headers and `p0`'s
    /// librdkafka lines: offsets 0-2 under epoch 0, 3-4 under epoch 1.
    fn duplicate_with_writers(bump_reason: Option<&str>, second_epoch: i16) -> Vec<Op> {
        let mut ops = one_duplicate();
        if let Some(reason) = bump_reason {
            ops.push(Op::ClientError {
                process: "p0".into(),
                at_ms: 5,
                error: format!("librdkafka DRAIN: [thrd:main]: Beginning partition drain in state Assigned for PID{{Id:7,Epoch:0}} epoch bump for 1 partition(s) with in-flight requests: {reason}"),
            });
        }
        for (first, last, epoch) in [(0, 2, 0), (3, 4, second_epoch)] {
            ops.push(Op::ProducerRun {
                partition: 0,
                first_offset: first,
                last_offset: last,
                producer_id: 7,
                producer_epoch: epoch,
            });
        }
        ops
    }

    #[test]
    fn a_copy_under_an_epoch_bumped_for_timed_out_messages_is_a_client_resend() {
        let ops = duplicate_with_writers(Some("2 message(s) timed out on chaos [0]"), 1);
        assert_eq!(found(&ops), vec![(Anomaly::DuplicateAfterEpochBump, 1)]);
        let example = &check(&ops)[&0].anomalies[&Anomaly::DuplicateAfterEpochBump].examples[0];
        assert!(
            example.contains("[(7, 0), (7, 1)]") && example.contains("timed out"),
            "{example}"
        );
    }

    #[test]
    fn copies_under_one_epoch_or_a_broker_caused_bump_stay_duplicates() {
        // Same epoch twice: the broker failed to deduplicate.
        let same = duplicate_with_writers(Some("2 message(s) timed out on chaos [0]"), 0);
        assert_eq!(found(&same), vec![(Anomaly::Duplicate, 1)]);
        // A bump the broker's answer caused.
        let unknown = duplicate_with_writers(Some("unknown producer id"), 1);
        assert_eq!(found(&unknown), vec![(Anomaly::Duplicate, 1)]);
        let example = &check(&unknown)[&0].anomalies[&Anomaly::Duplicate].examples[0];
        assert!(example.contains("unknown producer id"), "{example}");
        // No bump in the producer's log.
        assert_eq!(
            found(&duplicate_with_writers(None, 1)),
            vec![(Anomaly::Duplicate, 1)]
        );
    }

    /// librdkafka's line for a request failed on a sequence gap, caused by `cause`.
    fn sequence_gap_line(cause: &str) -> Op {
        Op::ClientError {
            process: "p0".into(),
            at_ms: 4,
            error: format!("librdkafka ERRSEQ: [thrd:b/1]: b/1: ProduceRequest for chaos [1] with 9 message(s) failed due to skipped sequence numbers (PID{{Id:7,Epoch:0}}, base seq 394 > next seq 391) caused by previous failed request ({cause}, actions Retry,MsgNotPersisted, base seq 393..393, base msgid 394, 43ms ago): recovering and retrying"),
        }
    }

    #[test]
    fn a_bump_for_gaps_that_failover_answers_left_is_a_client_resend() {
        // What Kafka 4.4 answers while a leader moves: the re-send is the client's.
        for cause in ["NOT_ENOUGH_REPLICAS", "NOT_LEADER_FOR_PARTITION"] {
            let mut ops = duplicate_with_writers(Some("skipped sequence numbers"), 1);
            ops.push(sequence_gap_line(cause));
            ops.push(sequence_gap_line("OUT_OF_ORDER_SEQUENCE_NUMBER"));
            assert_eq!(
                found(&ops),
                vec![(Anomaly::DuplicateAfterEpochBump, 1)],
                "{cause}"
            );
            let example = &check(&ops)[&0].anomalies[&Anomaly::DuplicateAfterEpochBump].examples[0];
            assert!(example.contains(cause), "{example}");
        }
        // A gap after an answer Kafka does not give there, or with no cause logged, stays a
        // duplicate.
        let mut unknown_topic = duplicate_with_writers(Some("skipped sequence numbers"), 1);
        unknown_topic.push(sequence_gap_line("UNKNOWN_TOPIC_OR_PART"));
        assert_eq!(found(&unknown_topic), vec![(Anomaly::Duplicate, 1)]);
        let example = &check(&unknown_topic)[&0].anomalies[&Anomaly::Duplicate].examples[0];
        assert!(example.contains("UNKNOWN_TOPIC_OR_PART"), "{example}");
        let mut chained_only = duplicate_with_writers(Some("skipped sequence numbers"), 1);
        chained_only.push(sequence_gap_line("OUT_OF_ORDER_SEQUENCE_NUMBER"));
        assert_eq!(found(&chained_only), vec![(Anomaly::Duplicate, 1)]);
        let uncaused = duplicate_with_writers(Some("skipped sequence numbers"), 1);
        assert_eq!(found(&uncaused), vec![(Anomaly::Duplicate, 1)]);
    }

    /// A send of `p0` to partition 1 that librdkafka reported timed out at `at_ms`.
    fn timed_out_send(seq: u64, at_ms: u64) -> Op {
        Op::Send {
            process: "p0".into(),
            seq,
            partition: 1,
            value: format!("p0-{seq}"),
            invoked_ms: 0,
            completed_ms: at_ms,
            outcome: Outcome::Unknown {
                error: "Message production error: MessageTimedOut (Local: Message timed out)"
                    .into(),
            },
        }
    }

    #[test]
    fn a_bump_for_a_gap_that_the_clients_own_timeouts_left_is_a_client_resend() {
        // Three messages of partition 1 timed out under epoch 0 without a bump (their
        // partition had no leader), so the next request's base sequence is three past the
        // next expected one; the "previous failed request" in the line is stale.
        let gap = || sequence_gap_line("_TRANSPORT");
        let mut ops = duplicate_with_writers(Some("skipped sequence numbers"), 1);
        ops.extend([
            timed_out_send(10, 1),
            timed_out_send(11, 2),
            timed_out_send(12, 3),
        ]);
        ops.push(gap());
        assert_eq!(found(&ops), vec![(Anomaly::DuplicateAfterEpochBump, 1)]);
        let example = &check(&ops)[&0].anomalies[&Anomaly::DuplicateAfterEpochBump].examples[0];
        assert!(
            example.contains("3 message(s) of partition 1 timed out"),
            "{example}"
        );

        // Fewer timeouts than skipped numbers: the gap is unexplained, and stays a duplicate
        // naming the logged cause.
        let mut short = duplicate_with_writers(Some("skipped sequence numbers"), 1);
        short.extend([timed_out_send(10, 1), timed_out_send(11, 2)]);
        short.push(gap());
        assert_eq!(found(&short), vec![(Anomaly::Duplicate, 1)]);
        let example = &check(&short)[&0].anomalies[&Anomaly::Duplicate].examples[0];
        assert!(example.contains("_TRANSPORT"), "{example}");

        // Timeouts before the epoch started, or on another partition, do not count.
        let mut earlier = duplicate_with_writers(Some("skipped sequence numbers"), 1);
        earlier.extend([
            timed_out_send(10, 1),
            timed_out_send(11, 2),
            timed_out_send(12, 3),
        ]);
        earlier.push(Op::ClientError {
            process: "p0".into(),
            at_ms: 3,
            error: "librdkafka DRAIN: [thrd:b/1]: All partitions drained, bumped epoch to PID{Id:7,Epoch:0}".into(),
        });
        earlier.push(gap());
        assert_eq!(found(&earlier), vec![(Anomaly::Duplicate, 1)]);
    }

    #[test]
    fn librdkafkas_sequence_gap_and_epoch_start_lines_are_parsed() {
        let Op::ClientError { error, .. } = sequence_gap_line("NOT_ENOUGH_REPLICAS") else {
            unreachable!()
        };
        let gap = SequenceGap {
            partition: 1,
            skipped: 3,
            cause: "NOT_ENOUGH_REPLICAS",
            at_ms: 9,
        };
        assert_eq!(parse_sequence_gap(&error, 9), Some((7, 0, gap)));
        assert_eq!(
            parse_epoch_start("librdkafka DRAIN: [thrd:b/1]: All partitions drained, bumped epoch to PID{Id:0,Epoch:11}"),
            Some((0, 11))
        );
    }

    #[test]
    fn librdkafkas_epoch_bump_line_is_parsed() {
        let line = "librdkafka DRAIN: [thrd:main]: Beginning partition drain in state Assigned for PID{Id:1000,Epoch:3} epoch bump for 2 partition(s) with in-flight requests: 5 message(s) timed out on t [1]";
        assert_eq!(
            parse_epoch_bump(line),
            Some((1000, 3, "5 message(s) timed out on t [1]"))
        );
        assert_eq!(parse_epoch_bump("Beginning partition drain for PID{Id:1,Epoch:0} reset for 1 partition(s) with in-flight requests: x"), None);
    }

    #[test]
    fn two_values_at_one_offset_are_inconsistent_offsets() {
        let mut ops = three_sends();
        ops.push(send("p1", 0, 0, Some(3)));
        ops.push(poll("c0", &[(0, "p0-0"), (1, "p0-1"), (2, "p0-2")]));
        // c1 reads another value at offset 2, and p0-2 at 3 (where p1-0 was acknowledged).
        ops.push(poll(
            "c1",
            &[(0, "p0-0"), (1, "p0-1"), (2, "x"), (3, "p0-2")],
        ));
        let f = found(&ops);
        assert_eq!(
            f,
            vec![
                (Anomaly::LostWrite, 1),
                (Anomaly::Duplicate, 1),
                (Anomaly::InconsistentOffsets, 1)
            ],
            "offset 2 read as p0-2 and x; p0-2 at 2 and 3; p1-0, acknowledged at 3, never read"
        );
        let r = &check(&ops)[&0];
        assert!(
            r.anomalies[&Anomaly::InconsistentOffsets].examples[0].contains("offset 2 read as"),
            "{r:?}"
        );
    }

    #[test]
    fn a_value_read_away_from_its_acknowledged_offset_is_inconsistent() {
        let mut ops = three_sends();
        ops.push(poll("c0", &[(0, "p0-0"), (1, "p0-2"), (2, "p0-1")]));
        let f = found(&ops);
        assert!(f.contains(&(Anomaly::InconsistentOffsets, 2)), "{f:?}");
    }

    #[test]
    fn a_consumer_going_backwards_is_a_nonmonotonic_poll() {
        let mut ops = three_sends();
        ops.push(poll("c0", &[(0, "p0-0"), (1, "p0-1"), (2, "p0-2")]));
        ops.push(poll("c0", &[(1, "p0-1")]));
        // After an Assign the consumer starts over: not an anomaly.
        ops.push(assign("c0"));
        ops.push(poll("c0", &[(0, "p0-0")]));
        assert_eq!(found(&ops), vec![(Anomaly::NonmonotonicPoll, 1)]);
    }

    #[test]
    fn a_consumer_back_at_its_assignment_start_restarted_and_is_checked_again_from_there() {
        let mut ops = three_sends();
        let all = [(0, "p0-0"), (1, "p0-1"), (2, "p0-2")];
        ops.push(poll("c0", &all));
        // Back to offset 0, the first it read: its client restarted it. Not an anomaly...
        ops.push(poll("c0", &all));
        let reports = check(&ops);
        assert_eq!(reports[&0].client_restarts.count, 1);
        assert!(reports[&0].anomalies.is_empty(), "{reports:?}");
        // ...but going back anywhere else still is, and so is a restart that reads other values.
        ops.push(poll("c0", &[(1, "p0-1")]));
        ops.push(poll("c0", &[(0, "p0-1")]));
        let f = found(&ops);
        assert!(f.contains(&(Anomaly::NonmonotonicPoll, 1)), "{f:?}");
        assert!(f.contains(&(Anomaly::InconsistentOffsets, 1)), "{f:?}");
    }

    #[test]
    fn a_consumer_jumping_over_a_read_offset_is_a_poll_skip() {
        let mut ops = three_sends();
        ops.push(poll("c0", &[(0, "p0-0"), (2, "p0-2")]));
        ops.push(poll("c1", &[(0, "p0-0"), (1, "p0-1"), (2, "p0-2")]));
        assert_eq!(found(&ops), vec![(Anomaly::PollSkip, 1)]);
    }

    #[test]
    fn a_producers_records_out_of_send_order_are_a_reorder() {
        // p0 sent 0, 1, 2; the log holds 0, 2, 1 (as a non-idempotent retry can leave it).
        let ops = vec![
            send("p0", 0, 0, Some(0)),
            send("p0", 1, 0, Some(2)),
            send("p0", 2, 0, Some(1)),
            send("p1", 0, 0, Some(3)),
            poll("c0", &[(0, "p0-0"), (1, "p0-2"), (2, "p0-1"), (3, "p1-0")]),
        ];
        assert_eq!(found(&ops), vec![(Anomaly::Reorder, 1)]);
    }

    /// A transaction of p0 with records `(partition, seq)`, its commit sent at 10 ms.
    fn txn(n: u64, records: &[(i32, u64)], outcome: TxnOutcome) -> Op {
        let aborted = matches!(outcome, TxnOutcome::Aborted { .. });
        Op::Txn {
            process: "p0".into(),
            txn: n,
            records: records
                .iter()
                .map(|(partition, seq)| TxnRecord {
                    partition: *partition,
                    seq: *seq,
                    value: format!("p0-{seq}"),
                    offset: None,
                })
                .collect(),
            begun_ms: 0,
            commit_invoked_ms: (!aborted).then_some(10),
            completed_ms: 20,
            outcome,
        }
    }

    fn aborted() -> TxnOutcome {
        TxnOutcome::Aborted {
            reason: "aborted by choice (seed)".into(),
        }
    }

    fn unknown() -> TxnOutcome {
        TxnOutcome::Unknown {
            error: "timed out".into(),
        }
    }

    /// A poll by `process` at `at_ms` of `(partition, offset, value)`.
    fn poll_at(process: &str, at_ms: u64, records: &[(i32, i64, &str)]) -> Op {
        Op::Poll {
            process: process.into(),
            at_ms,
            records: records
                .iter()
                .map(|(partition, offset, value)| Read {
                    partition: *partition,
                    offset: *offset,
                    value: value.to_string(),
                })
                .collect(),
        }
    }

    /// Committed t0 (p0-0 on partition 0, p0-1 on 1), aborted t1 (p0-2 on 0, p0-3 on 1),
    /// unknown t2 (p0-4, p0-5) that did not commit, unknown t3 (p0-6, p0-7) that did; the
    /// final read assigned to partitions 0 and 1.
    fn txn_history() -> Vec<Op> {
        let mut ops = vec![
            txn(0, &[(0, 0), (1, 1)], TxnOutcome::Committed),
            txn(1, &[(0, 2), (1, 3)], aborted()),
            txn(2, &[(0, 4), (1, 5)], unknown()),
            txn(3, &[(0, 6), (1, 7)], unknown()),
        ];
        for partition in 0..2 {
            ops.push(Op::Assign {
                process: FINAL_READER.into(),
                at_ms: 30,
                partition,
            });
        }
        ops
    }

    /// What the final read of [`txn_history`] finds when all is well (offsets 1, 3 and 5
    /// hold the aborted records, 2 and 6 the markers).
    fn final_reads() -> [Op; 2] {
        [
            poll_at(FINAL_READER, 40, &[(0, 0, "p0-0"), (0, 7, "p0-6")]),
            poll_at(FINAL_READER, 40, &[(1, 0, "p0-1"), (1, 7, "p0-7")]),
        ]
    }

    /// Every partition's anomalies, as (partition, kind, count).
    fn found_all(ops: &[Op]) -> Vec<(i32, Anomaly, u64)> {
        check(ops)
            .iter()
            .flat_map(|(p, r)| r.anomalies.iter().map(|(k, f)| (*p, *k, f.count)))
            .collect()
    }

    #[test]
    fn a_clean_transactional_history_has_no_anomaly() {
        let mut ops = txn_history();
        ops.push(poll_at("c0", 15, &[(0, 0, "p0-0"), (1, 0, "p0-1")]));
        ops.extend(final_reads());
        assert_eq!(found_all(&ops), vec![]);
        let r = &check(&ops)[&0];
        assert_eq!(
            (r.acknowledged, r.failed, r.unknown, r.txn_records),
            (1, 1, 2, 4),
            "aborted records are neither lost writes nor unseen"
        );
    }

    #[test]
    fn a_record_of_an_aborted_transaction_read_is_an_aborted_read() {
        let mut ops = txn_history();
        ops.push(poll_at("c0", 15, &[(0, 0, "p0-0"), (0, 1, "p0-2")]));
        ops.push(poll_at("c1", 16, &[(0, 1, "p0-2")]));
        // The final read holds both aborted records, where the log has them.
        ops.push(poll_at(
            FINAL_READER,
            40,
            &[(0, 0, "p0-0"), (0, 1, "p0-2"), (0, 7, "p0-6")],
        ));
        ops.push(poll_at(
            FINAL_READER,
            40,
            &[(1, 0, "p0-1"), (1, 3, "p0-3"), (1, 7, "p0-7")],
        ));
        assert_eq!(
            found_all(&ops),
            vec![(0, Anomaly::AbortedRead, 1), (1, Anomaly::AbortedRead, 1)],
            "p0-2 read by two consumers and the final read counts once; p0-3 in the final read"
        );
    }

    #[test]
    fn a_record_read_before_its_commit_was_sent_is_an_uncommitted_read() {
        let mut ops = txn_history();
        // The commits were sent at 10 ms: reads by 9 ms are too early, by 10 ms they are not.
        ops.push(poll_at("c0", 9, &[(0, 0, "p0-0")]));
        ops.push(poll_at("c1", 9, &[(1, 7, "p0-7")]));
        ops.push(poll_at("c2", 10, &[(0, 7, "p0-6")]));
        ops.extend(final_reads());
        assert_eq!(
            found_all(&ops),
            vec![
                (0, Anomaly::UncommittedRead, 1),
                (1, Anomaly::UncommittedRead, 1)
            ]
        );
    }

    #[test]
    fn a_committed_record_missing_from_the_final_read_is_a_lost_commit() {
        let mut ops = txn_history();
        // t0's p0-0 gone from partition 0: a lost commit and a partial transaction.
        ops.push(poll_at(FINAL_READER, 40, &[(0, 7, "p0-6")]));
        ops.push(poll_at(FINAL_READER, 40, &[(1, 0, "p0-1"), (1, 7, "p0-7")]));
        // t4, committed to partition 1 only, gone whole: lost, not partial.
        ops.push(txn(4, &[(1, 8), (1, 9)], TxnOutcome::Committed));
        assert_eq!(
            found_all(&ops),
            vec![
                (0, Anomaly::LostCommit, 1),
                (0, Anomaly::PartialTransaction, 1),
                (1, Anomaly::LostCommit, 2)
            ]
        );
    }

    #[test]
    fn a_transaction_found_in_part_is_a_partial_transaction() {
        let mut ops = txn_history();
        // t3 (unknown) only on partition 1; t2 (unknown) nowhere, which is fine.
        ops.push(poll_at(FINAL_READER, 40, &[(0, 0, "p0-0")]));
        ops.push(poll_at(FINAL_READER, 40, &[(1, 0, "p0-1"), (1, 7, "p0-7")]));
        assert_eq!(found_all(&ops), vec![(0, Anomaly::PartialTransaction, 1)]);
        let r = &check(&ops)[&0];
        let e = &r.anomalies[&Anomaly::PartialTransaction].examples[0];
        assert!(e.contains("1 of the 2 records of transaction p0/3"), "{e}");
    }

    #[test]
    fn a_committed_record_read_twice_is_a_duplicate() {
        let mut ops = txn_history();
        ops.push(poll_at(
            FINAL_READER,
            40,
            &[(0, 0, "p0-0"), (0, 7, "p0-6"), (0, 9, "p0-0")],
        ));
        ops.push(poll_at(FINAL_READER, 40, &[(1, 0, "p0-1"), (1, 7, "p0-7")]));
        assert_eq!(found_all(&ops), vec![(0, Anomaly::Duplicate, 1)]);
    }

    #[test]
    fn a_producers_transactions_out_of_order_are_a_reorder() {
        let mut ops = txn_history();
        // p0-6 (t3) before p0-0 (t0) on partition 0.
        ops.push(poll_at(FINAL_READER, 40, &[(0, 0, "p0-6"), (0, 7, "p0-0")]));
        ops.push(poll_at(FINAL_READER, 40, &[(1, 0, "p0-1"), (1, 7, "p0-7")]));
        assert_eq!(found_all(&ops), vec![(0, Anomaly::Reorder, 1)]);
    }

    #[test]
    fn partitions_are_checked_apart() {
        let ops = vec![
            send("p0", 0, 0, Some(0)),
            send("p0", 1, 1, Some(0)),
            poll("c0", &[(0, "p0-0")]),
        ];
        let reports = check(&ops);
        assert!(reports[&0].anomalies.is_empty());
        assert_eq!(reports[&1].count(Anomaly::Unseen), 1);
    }
}
