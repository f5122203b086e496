//! The history of a run: every operation the clients and the nemesis performed, in the order
//! they completed, as Jepsen records it.
//!
//! A producer's send is one [`Op::Send`] with its outcome (ok with the offset the broker
//! acknowledged, failed, or unknown); a consumer's poll is one [`Op::Poll`] with every record it
//! returned, in the order the client delivered them; [`Op::Assign`] marks a consumer that
//! (re)starts reading a partition from the beginning; [`Op::ClientError`] is an error a client
//! reported; [`Op::Nemesis`] is one fault applied or healed. In the transactional workload a
//! producer's transaction is one [`Op::Txn`] with its records and its [`TxnOutcome`] instead of
//! a send per record. The share workload adds each share consumer's deliveries
//! ([`Op::ShareDelivery`]) and acknowledgements ([`Op::ShareAck`]), and the share-partitions'
//! start offsets once drained ([`Op::ShareStartOffset`]). The checker reads sends,
//! transactions, polls, assigns and the share ops only.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Most operations one run may record; a run that would exceed it stops its workload (see
/// [`History::push`]) rather than grow without bound.
pub const HISTORY_OPS_MAX: usize = 50_000_000;

/// The process that reads every partition from its first offset to its end once the cluster
/// is healed: what its polls hold is the log as it stands at the end of the run.
pub const FINAL_READER: &str = "final";

/// What a send's client was told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// Acknowledged at this offset.
    Ok { offset: i64 },
    /// Refused before it could reach a broker (it was never written).
    Failed { error: String },
    /// The client gave up (a timeout, a lost connection, an error after retries): the record
    /// may or may not be in the log.
    Unknown { error: String },
}

/// How a transaction ended, as far as its producer can tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum TxnOutcome {
    /// `commit_transaction` returned Ok.
    Committed,
    /// Commit was never called: `abort_transaction` returned Ok, or the transaction failed (a
    /// refused send, a failed delivery, a fatal producer) before the producer asked to commit.
    /// No EndTxn(commit) was ever sent for it, so none of its records may become visible.
    Aborted { reason: String },
    /// `commit_transaction` returned an error: the coordinator may have committed it or not.
    Unknown { error: String },
}

/// One record of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRecord {
    pub partition: i32,
    /// Counts the producer thread's records (as a send's `seq`).
    pub seq: u64,
    pub value: String,
    /// The offset its delivery report gave, when it had one.
    pub offset: Option<i64>,
}

/// One record a poll returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Read {
    pub partition: i32,
    pub offset: i64,
    pub value: String,
}

/// One operation of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Op {
    /// One record sent by `process` to `partition`; `seq` counts the process's sends (the
    /// order it sent them in).
    Send {
        process: String,
        seq: u64,
        partition: i32,
        value: String,
        invoked_ms: u64,
        completed_ms: u64,
        #[serde(flatten)]
        outcome: Outcome,
    },
    /// One transaction of `process` (a transactional producer): `txn` counts the process's
    /// transactions. `commit_invoked_ms` is when `commit_transaction` was called, `None` when it
    /// never was.
    Txn {
        process: String,
        txn: u64,
        records: Vec<TxnRecord>,
        begun_ms: u64,
        commit_invoked_ms: Option<u64>,
        completed_ms: u64,
        #[serde(flatten)]
        outcome: TxnOutcome,
    },
    /// The records one poll of `process` returned, in delivery order.
    Poll {
        process: String,
        at_ms: u64,
        records: Vec<Read>,
    },
    /// `process` starts reading `partition` from its first offset.
    Assign {
        process: String,
        at_ms: u64,
        partition: i32,
    },
    /// An error a client reported (a consumer's poll error, say): context for the anomalies.
    ClientError {
        process: String,
        at_ms: u64,
        error: String,
    },
    /// A fault applied or healed.
    Nemesis { at_ms: u64, event: String },
    /// A group consumer (`gN`, see [`crate::group`]) got `partitions` from a rebalance.
    GroupAssign {
        process: String,
        at_ms: u64,
        partitions: Vec<i32>,
    },
    /// The first record a group consumer read of `partition` after its latest
    /// [`Op::GroupAssign`]: where it started, which is the group's committed offset.
    GroupStart {
        process: String,
        at_ms: u64,
        partition: i32,
        offset: i64,
    },
    /// One offset commit of a group consumer for `partition`: `offset` is the next to read;
    /// `error` is `None` when the commit was acknowledged.
    OffsetCommit {
        process: String,
        partition: i32,
        offset: i64,
        invoked_ms: u64,
        completed_ms: u64,
        error: Option<String>,
    },
    /// The offsets of `partition` one poll of share consumer `process` (a Java
    /// `KafkaShareConsumer`, see [`crate::share`]) returned: one delivery of each. `at_ms` is
    /// the consumer's own event time, on the run's clock.
    ShareDelivery {
        process: String,
        at_ms: u64,
        partition: i32,
        offsets: Vec<i64>,
    },
    /// One acknowledgement of a share consumer for `partition`, as its
    /// `AcknowledgementCommitCallback` reported it; each offset's type is
    /// [`crate::share::ack_type`] of the offset. `success` is false with the callback's error.
    ShareAck {
        process: String,
        at_ms: u64,
        partition: i32,
        offsets: Vec<i64>,
        success: bool,
        error: Option<String>,
    },
    /// After the drain: the share-partition start offset of `partition` and its lag
    /// (DescribeShareGroupOffsets v1: the records from the start offset to the high watermark
    /// whose delivery is not complete), and the end of its log. Kafka persists the state of
    /// the last acknowledgements with the start offset they found, so the start offset may
    /// stay below the end while the lag is 0.
    ShareStartOffset {
        at_ms: u64,
        partition: i32,
        start_offset: i64,
        lag: i64,
        end_offset: i64,
    },
    /// Offsets `first_offset..=last_offset` of the final log were written by one producer id
    /// under one epoch (control batches left out): read from the batch headers after the
    /// final read (see [`crate::producer_runs`]).
    ProducerRun {
        partition: i32,
        first_offset: i64,
        last_offset: i64,
        producer_id: i64,
        producer_epoch: i16,
    },
}

/// The history being recorded, shared by every client thread and the nemesis.
#[derive(Clone)]
pub struct History {
    started: Instant,
    ops: Arc<Mutex<Vec<Op>>>,
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

impl History {
    pub fn new() -> History {
        History {
            started: Instant::now(),
            ops: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Milliseconds since the run started: the clock of every op.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Appends `op`; `false` (and nothing recorded) once [`HISTORY_OPS_MAX`] is reached, which
    /// tells the caller to stop.
    pub fn push(&self, op: Op) -> bool {
        let mut ops = self.ops.lock().unwrap();
        if ops.len() >= HISTORY_OPS_MAX {
            return false;
        }
        ops.push(op);
        true
    }

    /// Records a nemesis event and prints it, so a person watching sees the schedule unfold.
    pub fn nemesis(&self, event: String) {
        let at_ms = self.now_ms();
        eprintln!("[{:>7.1}s] nemesis: {event}", at_ms as f64 / 1000.0);
        self.push(Op::Nemesis { at_ms, event });
    }

    /// Whether the history is full (see [`History::push`]).
    pub fn is_full(&self) -> bool {
        self.ops.lock().unwrap().len() >= HISTORY_OPS_MAX
    }

    /// A copy of every op so far.
    pub fn snapshot(&self) -> Vec<Op> {
        self.ops.lock().unwrap().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_survives_json() {
        for outcome in [
            TxnOutcome::Committed,
            TxnOutcome::Aborted {
                reason: "chosen".into(),
            },
            TxnOutcome::Unknown {
                error: "timed out".into(),
            },
        ] {
            let op = Op::Txn {
                process: "p0".into(),
                txn: 3,
                records: vec![TxnRecord {
                    partition: 1,
                    seq: 7,
                    value: "p0-7".into(),
                    offset: Some(12),
                }],
                begun_ms: 1,
                commit_invoked_ms: Some(2),
                completed_ms: 3,
                outcome,
            };
            let json = serde_json::to_string(&op).unwrap();
            assert_eq!(serde_json::from_str::<Op>(&json).unwrap(), op, "{json}");
        }
    }
}
