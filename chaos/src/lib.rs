//! `brook chaos`: a checker in the spirit of Jepsen's Kafka workload, for Brook and for the
//! reference Apache Kafka 4.4 cluster alike.
//!
//! A run drives a 3-node cluster with real clients (librdkafka: several producers and
//! consumers at once) and records a [`history`] of every send with its outcome and every poll
//! with what it returned. Meanwhile a [`nemesis`] applies a [`schedule`] drawn from a seed
//! (replayable): SIGKILL and restart of a partition's leader under load, SIGSTOP/SIGCONT
//! pauses, link partitions and delays on replication and controller traffic (so that ISR
//! changes are pending when kills land), and the crash points of `docs/FAULTS.md`. After
//! healing, every partition is read back to its end, and the [`checker`] reports Jepsen's
//! anomalies per partition: lost-write, unseen, duplicate, inconsistent-offsets,
//! nonmonotonic-poll, poll-skip, reorder; the final log's batch headers
//! ([`producer_runs`]) tell a client's re-send under a bumped producer epoch
//! (`duplicate-after-epoch-bump`) from a broker duplicate. The [`verdict`] states what the configuration
//! promises: with `acks=all`, idempotence and `min.insync.replicas=2` on RF=3 any anomaly is a
//! failure (non-zero exit); with `acks=1` or idempotence off, the anomalies Kafka allows there
//! are reported as expected, by name. The transactional workload ([`txn`], `--workload txn`)
//! adds `aborted-read` (G1a), `uncommitted-read`, `lost-commit` and `partial-transaction`,
//! all failures. The [`coordinator`] steps kill the transaction coordinator during an EndTxn
//! and the group coordinator during a rebalance; the [`group`] consumers commit offsets and
//! are checked for `lost-offset-commit`. With `--secure` the run starts the cluster as
//! `brook cluster --secure --sasl` does (SASL_SSL with SCRAM-SHA-512 for clients and between
//! brokers, mutual TLS on the controller listener) and every client, the checker's own wire
//! connections included, uses the client settings that cluster writes ([`security`]).
//! The share workload ([`share`], `--workload share`) adds Java share consumers (Kafka 4.4's
//! `VerifiableShareConsumer`) and kills the share coordinator while they acknowledge; it
//! checks `redelivered-after-accept`, `delivered-after-limit`, `undelivered` and
//! `unsettled`.
//!
//! ```sh
//! cargo build --release -p brook-tools -p brook-chaos
//! # a bounded run against a fresh `brook cluster` (temp dir, free ports)
//! cargo run --release -p brook-chaos -- --seed 42 --steps 20
//! # the long run: 1,000 leader kills among ISR churn, crash points and pauses, about 2 hours
//! cargo run --release -p brook-chaos -- --seed 12 --steps 1100 --rate 50 --out chaos-long.json \
//!     --weights kill-leader=65,isr-churn=20,crash-point=10,pause=5
//! # the same schedule against Apache Kafka 4.4 (scripts/kafka-reference fetch first)
//! cargo run --release -p brook-chaos -- --target kafka --seed 12 --steps 1100 --rate 50 \
//!     --weights kill-leader=65,isr-churn=20,crash-point=10,pause=5
//! # what acks=1 allows: lost writes, named as expected
//! cargo run --release -p brook-chaos -- --seed 7 --steps 20 --acks 1
//! # transactional producers, read_committed consumers
//! cargo run --release -p brook-chaos -- --workload txn --seed 42 --steps 20
//! # the same over SASL_SSL (SCRAM-SHA-512), TLS between the nodes
//! cargo run --release -p brook-chaos -- --secure --workload txn --seed 42 --steps 20
//! # coordinators killed during EndTxn and rebalances
//! cargo run --release -p brook-chaos -- --workload txn --group-consumers 2 --seed 77 --steps 12 \
//!     --weights kill-txn-coordinator=1,kill-group-coordinator=1,kill-leader=1
//! # share consumers (Java, scripts/kafka-reference fetch first) under leader and share
//! # coordinator kills
//! cargo run --release -p brook-chaos -- --workload share --seed 5 --steps 6 \
//!     --weights kill-leader=1,kill-share-coordinator=1
//! ```
//!
//! Output: a table on stdout, the JSON history and verdict in `--out`, the command that
//! replays the run. Exit status: 0 when the verdict holds, 1 when it does not, 2 when the run
//! could not be set up.
#![forbid(unsafe_code)]
// Test functions may be long (a scenario reads top to bottom); the rest is held to clippy.toml's 70 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod checker;
pub mod coordinator;
pub mod group;
pub mod history;
pub mod nemesis;
pub mod producer_runs;
pub mod report;
pub mod run;
pub mod schedule;
pub mod security;
pub mod share;
pub mod target;
pub mod txn;
pub mod verdict;
pub mod workload;
