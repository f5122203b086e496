//! The transaction coordinator (Kafka's `TransactionCoordinator` and
//! `TransactionStateManager`).
//!
//! The coordinator of a transactional id is the leader of its `__transaction_state`
//! partition ([`log`]). It keeps each id's [`TransactionMetadata`] in memory for the
//! partitions it leads, loaded from the log when it comes to lead one (at a new leader
//! epoch, which is also the coordinator epoch carried by its markers) and dropped when it
//! loses it. Every change is written to the log and replicated before it is applied or
//! answered. A transaction ends in two records: PrepareCommit/PrepareAbort, then — once a
//! marker is in every partition of the transaction ([`markers`]) — CompleteCommit/
//! CompleteAbort. A new coordinator that loads a Prepare* record sends its markers again.
//!
//! One task ([`TransactionCoordinator::run`]) follows leadership after each metadata image,
//! aborts transactions open longer than their timeout (bumping the epoch, so the old
//! producer is fenced) and expires idle transactional ids.
//!
//! ## Order of checks (Kafka 4.4's `TransactionCoordinator`)
//!
//! A transition is in flight from its `prepare_*` until its record is replicated, and after
//! a Prepare* record until the Complete* record is (the markers are written meanwhile). What
//! a request meets first decides its answer, and a client treats CONCURRENT_TRANSACTIONS as
//! "retry" but PRODUCER_FENCED as fatal, so the order is Kafka's:
//!
//! | request | checks, in order |
//! |---|---|
//! | InitProducerId (`handleInitProducerId`) | transition in flight: CONCURRENT_TRANSACTIONS; KIP-360 producer id not this id's: PRODUCER_FENCED; Prepare*: CONCURRENT_TRANSACTIONS; Ongoing: fence, abort, CONCURRENT_TRANSACTIONS |
//! | AddPartitionsToTxn, AddOffsetsToTxn, implicit adds (`handleAddPartitionsToTransaction`) | transition in flight: CONCURRENT_TRANSACTIONS; producer id: INVALID_PRODUCER_ID_MAPPING; epoch: PRODUCER_FENCED; Prepare*: CONCURRENT_TRANSACTIONS |
//! | AddPartitionsToTxn verify-only (`handleVerifyPartitionsInTransaction`) | producer id; epoch; Prepare*: CONCURRENT_TRANSACTIONS (no transition check: the append re-validates) |
//! | EndTxn, version 2 (`endTransaction`) | transition in flight (other than a fence): CONCURRENT_TRANSACTIONS; producer id; epoch (per state, retries included): PRODUCER_FENCED; then the state table |
//! | EndTxn, version 1 (`endTransactionWithTV1`) | producer id; epoch (strict for a client): PRODUCER_FENCED; transition in flight: CONCURRENT_TRANSACTIONS; then the state |
//!
//! So under version 2 an abort sent at the epoch a commit has just bumped, while that
//! commit's markers are being written, gets CONCURRENT_TRANSACTIONS and succeeds at the next
//! epoch once the commit completes; under version 1 the epoch does not move, the request
//! passes the epoch check and meets the transition. A real fence (an older epoch, another
//! producer id) is still refused with PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for old
//! versions, see [`TxnError::code_for_version`]) once no transition is in flight.
//! One difference is kept: a client's EndTxn that meets an epoch fence pending between
//! InitProducerId's fence and its abort gets CONCURRENT_TRANSACTIONS here, where Kafka lets
//! an abort take the fence's place and fails a commit with an internal error.

pub mod log;
pub mod markers;
pub mod metadata;
pub mod records;
pub mod verify;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tokio::sync::watch;

use self::log::{CoordinatorLog, TRANSACTION_STATE_TOPIC};
use self::markers::{
    MarkerOutcome, MarkerRequest, TransactionMarkerChannelManager, MARKER_RETRY_BACKOFF,
};
use self::metadata::{TransactionMetadata, TransactionState, TxnTransit};
use self::records::{decode_txn_key, decode_txn_value, txn_key, txn_value, TxnLogValue};
use crate::cluster::replica_manager::{now_ms, ReplicaManager};
use crate::config::{BrokerConfig, ConfigError};
use crate::fault::{CrashPoint, FaultEngine};

/// Longest transactional id accepted (the record key's i16 string bounds it).
pub const MAX_TRANSACTIONAL_ID_BYTES: usize = 4096;
/// How long a coordinator write waits for replication (Kafka uses `request.timeout.ms`,
/// default 30000).
pub const TXN_LOG_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on partitions in one transaction.
pub const MAX_PARTITIONS_PER_TRANSACTION: usize = 100_000;

/// Errors of the coordinator, each one Kafka error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("not the coordinator")]
    NotCoordinator,
    #[error("coordinator not available")]
    CoordinatorNotAvailable,
    #[error("concurrent transactions")]
    ConcurrentTransactions,
    #[error("invalid transaction state")]
    InvalidTxnState,
    #[error("producer fenced")]
    ProducerFenced,
    #[error("invalid producer id mapping")]
    InvalidProducerIdMapping,
    #[error("invalid transaction timeout")]
    InvalidTransactionTimeout,
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("transactional id not found")]
    TransactionalIdNotFound,
    #[error("producer id allocation failed: {0:?}")]
    ProducerIdAllocation(ResponseError),
    #[error("transaction state log: {0}")]
    Storage(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl TxnError {
    /// The Kafka error a client sees for this error.
    pub fn response_error(&self) -> ResponseError {
        match self {
            TxnError::NotCoordinator => ResponseError::NotCoordinator,
            TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
            TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
            TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
            TxnError::ProducerFenced => ResponseError::ProducerFenced,
            TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
            TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
            TxnError::InvalidRequest(_) => ResponseError::InvalidRequest,
            TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
            TxnError::ProducerIdAllocation(e) => *e,
            TxnError::Storage(_) | TxnError::Internal(_) => ResponseError::UnknownServerError,
        }
    }

    /// Its code on the wire.
    pub fn error_code(&self) -> i16 {
        self.response_error().code()
    }

    /// PRODUCER_FENCED as clients older than `fenced_from` know it: INVALID_PRODUCER_EPOCH
    /// (KafkaApis does this per API and version).
    pub fn code_for_version(&self, version: i16, fenced_from: i16) -> i16 {
        if *self == TxnError::ProducerFenced && version < fenced_from {
            ResponseError::InvalidProducerEpoch.code()
        } else {
            self.error_code()
        }
    }
}

impl From<metadata::IllegalTransition> for TxnError {
    fn from(e: metadata::IllegalTransition) -> Self {
        TxnError::Internal(e.to_string())
    }
}

/// The coordinator's settings, with Kafka's key names.
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// `transaction.state.log.num.partitions`.
    pub num_partitions: i32,
    /// `transaction.state.log.replication.factor` (a cluster; alone the topic has 1).
    pub replication_factor: i16,
    /// `transaction.state.log.min.isr`.
    pub min_isr: i32,
    /// `transaction.state.log.segment.bytes`.
    pub segment_bytes: i64,
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_timed_out_interval_ms: u64,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub remove_expired_interval_ms: u64,
    /// `transaction.partition.verification.enable`.
    pub partition_verification: bool,
    /// How a leader retries adding a partition for a transaction version 2 produce.
    pub add_partitions_retry: AddPartitionsRetry,
}

/// A leader's retries of an implicit add answered CONCURRENT_TRANSACTIONS (Kafka's
/// `AddPartitionsToTxnConfig`, used by `ReplicaManager.handleProduceAppend`).
#[derive(Debug, Clone, Copy)]
pub struct AddPartitionsRetry {
    /// `add.partitions.to.txn.retry.backoff.ms`: the wait between attempts.
    pub backoff: Duration,
    /// `add.partitions.to.txn.retry.backoff.max.ms`: no attempt starts after this long.
    pub backoff_max: Duration,
    /// `request.timeout.ms`, which caps `backoff_max`.
    pub request_timeout: Duration,
}

impl AddPartitionsRetry {
    /// How long attempts may start for (Kafka's `retryTimeoutMs`).
    pub fn timeout(&self) -> Duration {
        self.backoff_max.min(self.request_timeout)
    }

    fn from_broker(c: &BrokerConfig) -> Result<Self, ConfigError> {
        let ms = |k: &str, min: u64| -> Result<Duration, ConfigError> {
            // Kafka's default where the key is not among Brook's own (request.timeout.ms).
            let kafka_default = crate::config_def::kafka_broker_key(k).and_then(|d| d.default);
            let v = c
                .values
                .get(k)
                .map(String::as_str)
                .or(kafka_default)
                .unwrap_or("");
            match v.trim().parse::<u64>() {
                Ok(n) if n >= min && n <= i32::MAX as u64 => Ok(Duration::from_millis(n)),
                _ => Err(ConfigError::InvalidValue {
                    key: k.into(),
                    value: v.into(),
                    reason: format!("must be a number of milliseconds, at least {min}"),
                }),
            }
        };
        Ok(AddPartitionsRetry {
            backoff: ms("add.partitions.to.txn.retry.backoff.ms", 1)?,
            backoff_max: ms("add.partitions.to.txn.retry.backoff.max.ms", 0)?,
            request_timeout: ms("request.timeout.ms", 0)?,
        })
    }
}

impl TxnConfig {
    pub fn from_broker(c: &BrokerConfig) -> Result<Self, ConfigError> {
        let get = |k: &str| -> Result<i64, ConfigError> {
            let v = c.values.get(k).cloned().unwrap_or_default();
            match v.trim().parse::<i64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(ConfigError::InvalidValue {
                    key: k.into(),
                    value: v,
                    reason: "must be a positive number".into(),
                }),
            }
        };
        let small = |k: &str, max: i64| -> Result<i64, ConfigError> {
            let v = get(k)?;
            if v > max {
                return Err(ConfigError::InvalidValue {
                    key: k.into(),
                    value: v.to_string(),
                    reason: format!("must be at most {max}"),
                });
            }
            Ok(v)
        };
        Ok(TxnConfig {
            num_partitions: small("transaction.state.log.num.partitions", i32::MAX as i64)? as i32,
            replication_factor: small("transaction.state.log.replication.factor", i16::MAX as i64)?
                as i16,
            min_isr: small("transaction.state.log.min.isr", i32::MAX as i64)? as i32,
            segment_bytes: get("transaction.state.log.segment.bytes")?,
            max_timeout_ms: small("transaction.max.timeout.ms", i32::MAX as i64)? as i32,
            abort_timed_out_interval_ms: get(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            )? as u64,
            id_expiration_ms: small("transactional.id.expiration.ms", i32::MAX as i64)?,
            remove_expired_interval_ms: get(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
            )? as u64,
            partition_verification: c
                .values
                .get("transaction.partition.verification.enable")
                .is_none_or(|v| v.trim() != "false"),
            add_partitions_retry: AddPartitionsRetry::from_broker(c)?,
        })
    }
}

/// DescribeTransactions' view of one id.
#[derive(Debug, Clone)]
pub struct TransactionDescription {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: TransactionState,
    pub txn_timeout_ms: i32,
    pub txn_start_timestamp: i64,
    pub partitions: BTreeSet<(String, i32)>,
}

/// ListTransactions' view of one id.
#[derive(Debug, Clone)]
pub struct TransactionListing {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TransactionState,
}

/// ListTransactions' filters; empty sets match everything.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub states: BTreeSet<String>,
    pub producer_ids: BTreeSet<i64>,
    /// Only transactions running longer than this (ms); -1 for any.
    pub duration_ms: i64,
    pub pattern: Option<regex::Regex>,
}

/// A partition and its error code.
pub type PartitionCode = ((String, i32), i16);

/// Where a partition's marker goes.
enum Destination {
    /// The topic or partition no longer exists: nothing to mark.
    Gone,
    /// No leader right now.
    NoLeader,
    At(i32, String),
}

/// The id's metadata, if the request's producer id and epoch are its current ones.
fn producer_of<'a>(
    st: &'a mut State,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
) -> Result<&'a mut TransactionMetadata, TxnError> {
    let m = st
        .txns
        .get_mut(transactional_id)
        .ok_or(TxnError::InvalidProducerIdMapping)?;
    if m.producer_id != producer_id {
        return Err(TxnError::InvalidProducerIdMapping);
    }
    if m.producer_epoch != producer_epoch {
        return Err(TxnError::ProducerFenced);
    }
    Ok(m)
}

#[derive(Default)]
struct State {
    txns: HashMap<String, TransactionMetadata>,
    /// `__transaction_state` partitions loaded, with their coordinator (leader) epoch.
    loaded: HashMap<i32, i32>,
    shut_down: bool,
}

/// An EndTxn as the coordinator checks it (`from_client`: not one of its own aborts).
#[derive(Clone, Copy)]
struct EndTxnAsk {
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    from_client: bool,
}

/// InitProducerId's next step, decided under the state lock.
enum InitStep {
    /// The id's metadata was just created: look again.
    Retry,
    /// Allocate a producer id, then look again.
    Allocate,
    /// Write this transition at this coordinator epoch, and answer with its identity.
    Write(i32, TxnTransit),
    /// Abort the open transaction at its fenced epoch; the client retries.
    Fence(TxnTransit),
}

/// What an EndTxn leads to.
enum EndStep {
    /// Write this Prepare* transition.
    Write(TxnTransit),
    /// A retry of what is already done: answer success, write nothing.
    AlreadyDone,
    /// The epoch is exhausted (version 2): allocate the next producer id, then ask again.
    NeedProducerId,
}

/// What [`TransactionCoordinator::end_step`] found, under the state lock.
enum EndDecision {
    /// Write this Prepare* transition, at this coordinator epoch; `fence` when it is the
    /// abort of a fenced transaction.
    Write {
        coordinator_epoch: i32,
        transit: TxnTransit,
        fence: bool,
    },
    /// A retry of what is already done: answer this (producer id, epoch).
    AlreadyDone((i64, i16)),
    /// The epoch is exhausted (version 2): allocate the next producer id, then ask again.
    NeedProducerId,
}

/// How a version 2 EndTxn's producer id and epoch relate to its transaction's (Kafka's
/// `endTransaction` for transaction version 2).
struct EndV2Identity {
    /// It retries the last end: it names the epoch before the bump, or the last epoch of the
    /// previous producer id after a rotation.
    is_retry: bool,
    /// The retry names the previous producer id, at the epoch before the rotation.
    retry_on_overflow: bool,
    /// Its epoch is one the transaction's state accepts.
    valid_epoch: bool,
}

impl EndV2Identity {
    fn of(m: &TransactionMetadata, req: &EndTxnAsk, fence: bool) -> EndV2Identity {
        use TransactionState::*;
        let (producer_id, producer_epoch) = (req.producer_id, req.producer_epoch);
        let retry_on_overflow = !fence
            && m.previous_producer_id == producer_id
            && producer_epoch == i16::MAX - 1
            && m.producer_epoch == 0;
        let retry_on_epoch_bump = !fence && m.producer_epoch as i32 == producer_epoch as i32 + 1;
        let is_retry = retry_on_epoch_bump || retry_on_overflow;
        let valid_epoch = if fence {
            (!req.from_client || producer_epoch == m.producer_epoch)
                && producer_epoch >= m.producer_epoch
        } else {
            match m.state {
                Ongoing | Empty | Dead | PrepareEpochFence => producer_epoch == m.producer_epoch,
                PrepareCommit | PrepareAbort => retry_on_epoch_bump,
                CompleteCommit | CompleteAbort => is_retry || producer_epoch == m.producer_epoch,
            }
        };
        EndV2Identity {
            is_retry,
            retry_on_overflow,
            valid_epoch,
        }
    }
}

/// A transaction whose markers must be (re)sent.
struct MarkerJob {
    transactional_id: String,
    coordinator_epoch: i32,
    commit: bool,
    producer_id: i64,
    producer_epoch: i16,
    /// The transaction's client transaction version, which its markers name.
    transaction_version: i8,
    complete: TxnTransit,
}

/// A transaction's client version as its markers carry it (an int8 on the wire; versions are
/// 0-2).
fn marker_transaction_version(client_transaction_version: i16) -> i8 {
    i8::try_from(client_transaction_version).unwrap_or(i8::MAX)
}

/// The transaction coordinator of this node.
pub struct TransactionCoordinator {
    config: TxnConfig,
    replicas: Arc<ReplicaManager>,
    log: CoordinatorLog,
    markers: TransactionMarkerChannelManager,
    state: Mutex<State>,
    /// Connections for produce verification with other nodes' coordinators.
    pub verifier: verify::TxnVerifier,
    /// The node's fault engine, for the coordinator's crash points.
    faults: Arc<FaultEngine>,
}

impl TransactionCoordinator {
    pub fn new(
        broker: &BrokerConfig,
        replicas: Arc<ReplicaManager>,
        faults: Arc<FaultEngine>,
    ) -> Result<Self, ConfigError> {
        let config = TxnConfig::from_broker(broker)?;
        let log = CoordinatorLog::new(
            TRANSACTION_STATE_TOPIC,
            replicas.clone(),
            config.num_partitions,
            config.replication_factor,
            config.min_isr,
            config.segment_bytes,
        );
        Ok(TransactionCoordinator {
            markers: TransactionMarkerChannelManager::new(
                broker.node_id,
                broker.tls.inter_broker.clone(),
            )
            .with_sasl(broker.inter_broker_sasl.clone()),
            config,
            replicas,
            log,
            state: Mutex::new(State::default()),
            verifier: verify::TxnVerifier::default(),
            faults,
        })
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// Creates `__transaction_state` if needed (FindCoordinator key type 1 does).
    pub async fn ensure_topic(&self) -> Result<(), TxnError> {
        self.log.ensure_topic().await
    }

    /// The `__transaction_state` partition of an id.
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        self.log.partition_for(transactional_id)
    }

    fn check_id(transactional_id: &str) -> Result<(), TxnError> {
        if transactional_id.is_empty() || transactional_id.len() > MAX_TRANSACTIONAL_ID_BYTES {
            return Err(TxnError::InvalidRequest(
                "the transactional id must be 1 to 4096 bytes".into(),
            ));
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Loading and unloading (Kafka's onElection / onResignation)
    // -----------------------------------------------------------------------------------------

    /// The coordinator epoch of the partition holding `transactional_id`, loading it if this
    /// node has come to lead it. NOT_COORDINATOR when it does not.
    fn acquire(self: &Arc<Self>, st: &mut State, transactional_id: &str) -> Result<i32, TxnError> {
        if st.shut_down || self.replicas.topic(TRANSACTION_STATE_TOPIC).is_none() {
            return Err(TxnError::NotCoordinator);
        }
        self.acquire_partition(st, self.log.partition_for(transactional_id))
    }

    fn acquire_partition(self: &Arc<Self>, st: &mut State, index: i32) -> Result<i32, TxnError> {
        match self.log.led_epoch(index) {
            None => {
                self.unload(st, index);
                Err(TxnError::NotCoordinator)
            }
            Some(e) if st.loaded.get(&index) == Some(&e) => Ok(e),
            Some(e) => {
                self.unload(st, index);
                self.load(st, index, e)?;
                Ok(e)
            }
        }
    }

    /// Reads partition `index` back and resumes the transactions it left half-way: each
    /// PrepareCommit/PrepareAbort sends its markers again (Kafka's
    /// `loadTransactionsForTxnTopicPartition`).
    fn load(
        self: &Arc<Self>,
        st: &mut State,
        index: i32,
        coordinator_epoch: i32,
    ) -> Result<(), TxnError> {
        let mut txns: HashMap<String, TransactionMetadata> = HashMap::new();
        let n = self.log.load_partition(index, &mut |key, value| {
            let id = match decode_txn_key(key) {
                Ok(Some(id)) => id,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "skipping {TRANSACTION_STATE_TOPIC} record");
                    return;
                }
            };
            match value.map(decode_txn_value) {
                None => {
                    txns.remove(&id);
                }
                Some(Ok(v)) => {
                    txns.insert(id.clone(), TransactionMetadata::from_log(&id, &v));
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "skipping {TRANSACTION_STATE_TOPIC} record")
                }
            }
        })?;
        let mut jobs = Vec::new();
        for m in txns.values_mut() {
            if matches!(
                m.state,
                TransactionState::PrepareCommit | TransactionState::PrepareAbort
            ) {
                let complete = m.prepare_complete(now_ms())?;
                jobs.push(MarkerJob {
                    transactional_id: m.transactional_id.clone(),
                    coordinator_epoch,
                    commit: m.state == TransactionState::PrepareCommit,
                    producer_id: m.producer_id,
                    producer_epoch: m.producer_epoch,
                    transaction_version: marker_transaction_version(m.client_transaction_version),
                    complete,
                });
            }
        }
        tracing::info!(
            partition = index,
            coordinator_epoch,
            records = n,
            transactional_ids = txns.len(),
            resumed = jobs.len(),
            "loaded {TRANSACTION_STATE_TOPIC}-{index}"
        );
        st.txns.extend(txns);
        st.loaded.insert(index, coordinator_epoch);
        for job in jobs {
            tokio::spawn(self.clone().complete_transaction(job));
        }
        Ok(())
    }

    fn unload(&self, st: &mut State, index: i32) {
        if st.loaded.remove(&index).is_none() {
            return;
        }
        let partitions = self.log.partitions();
        st.txns
            .retain(|id, _| crate::group::records::partition_for(id, partitions) != index);
        tracing::info!(
            partition = index,
            "unloaded {TRANSACTION_STATE_TOPIC}-{index}"
        );
    }

    /// Brings every partition in line with this node's leadership.
    fn acquire_all(self: &Arc<Self>, st: &mut State) {
        let Some(topic) = self.replicas.topic(TRANSACTION_STATE_TOPIC) else {
            return;
        };
        for index in 0..topic.partition_count() {
            if let Err(e) = self.acquire_partition(st, index) {
                if e != TxnError::NotCoordinator {
                    tracing::warn!(partition = index, error = %e, "could not load transactions");
                }
            }
        }
    }

    fn owns(&self, transactional_id: &str, coordinator_epoch: i32) -> bool {
        let index = self.log.partition_for(transactional_id);
        self.state.lock().loaded.get(&index) == Some(&coordinator_epoch)
    }

    // -----------------------------------------------------------------------------------------
    // Writing transitions (Kafka's appendTransactionToLog)
    // -----------------------------------------------------------------------------------------

    /// Writes `t` for `transactional_id` and, once replicated, applies it. On failure the
    /// pending state is cleared so the client can retry.
    async fn write_transition(
        &self,
        transactional_id: &str,
        coordinator_epoch: i32,
        t: &TxnTransit,
    ) -> Result<(), TxnError> {
        let index = self.log.partition_for(transactional_id);
        let value = {
            let st = self.state.lock();
            let m = st
                .txns
                .get(transactional_id)
                .ok_or(TxnError::NotCoordinator)?;
            (t.state != TransactionState::Dead)
                .then(|| txn_value(&TxnLogValue::of(&m.with_transit(t))))
        };
        let result = match self.log.append(index, txn_key(transactional_id), value) {
            Ok(w) => self.log.wait_committed(&w, TXN_LOG_WRITE_TIMEOUT).await,
            Err(e) => Err(e),
        };
        let mut st = self.state.lock();
        if st.loaded.get(&index) != Some(&coordinator_epoch) {
            // Leadership moved meanwhile: the new coordinator reads the log.
            return Err(TxnError::NotCoordinator);
        }
        let Some(m) = st.txns.get_mut(transactional_id) else {
            return Err(TxnError::NotCoordinator);
        };
        if let Err(e) = result {
            m.pending_state = None;
            return Err(e);
        }
        if t.state == TransactionState::Dead {
            st.txns.remove(transactional_id);
            return Ok(());
        }
        m.complete_transition(t).map_err(TxnError::from)
    }

    // -----------------------------------------------------------------------------------------
    // InitProducerId
    // -----------------------------------------------------------------------------------------

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId`): the id's
    /// producer id with a bumped epoch (fencing any older producer of the id). An open
    /// transaction is aborted first and CONCURRENT_TRANSACTIONS returned, so the client
    /// retries once the abort is complete. `expected` is the KIP-360 (producer id, epoch).
    pub async fn init_producer_id(
        self: &Arc<Self>,
        transactional_id: &str,
        txn_timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        Self::check_id(transactional_id)?;
        if txn_timeout_ms <= 0 || txn_timeout_ms > self.config.max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        let mut new_producer_id: Option<i64> = None;
        loop {
            let next = self.init_step(
                transactional_id,
                txn_timeout_ms,
                expected,
                &mut new_producer_id,
            )?;
            match next {
                InitStep::Retry => {}
                InitStep::Allocate => {
                    let pid = self
                        .replicas
                        .next_producer_id()
                        .await
                        .map_err(TxnError::ProducerIdAllocation)?;
                    new_producer_id = Some(pid);
                }
                InitStep::Fence(t) => {
                    self.end_transaction(
                        transactional_id,
                        t.producer_id,
                        t.producer_epoch,
                        false,
                        None,
                    )
                    .await?;
                    return Err(TxnError::ConcurrentTransactions);
                }
                InitStep::Write(coordinator_epoch, t) => {
                    self.write_transition(transactional_id, coordinator_epoch, &t)
                        .await?;
                    tracing::info!(
                        transactional_id,
                        producer_id = t.producer_id,
                        producer_epoch = t.producer_epoch,
                        "initialized transactional producer"
                    );
                    return Ok((t.producer_id, t.producer_epoch));
                }
            }
        }
    }

    /// Under the state lock, InitProducerId's next step: a new id's metadata is created with
    /// the producer id allocated for it (then the id is looked at again), else Kafka's
    /// `prepareInitProducerIdTransit` decides.
    fn init_step(
        self: &Arc<Self>,
        transactional_id: &str,
        txn_timeout_ms: i32,
        expected: Option<(i64, i16)>,
        new_producer_id: &mut Option<i64>,
    ) -> Result<InitStep, TxnError> {
        let mut st = self.state.lock();
        let coordinator_epoch = self.acquire(&mut st, transactional_id)?;
        Ok(match st.txns.get_mut(transactional_id) {
            None => match new_producer_id.take() {
                None => InitStep::Allocate,
                Some(pid) => {
                    st.txns.insert(
                        transactional_id.to_string(),
                        TransactionMetadata::new(transactional_id, pid, txn_timeout_ms, now_ms()),
                    );
                    InitStep::Retry
                }
            },
            Some(m) => match self.prepare_init(m, txn_timeout_ms, expected, new_producer_id)? {
                None => InitStep::Allocate,
                Some(t) if t.state == TransactionState::PrepareEpochFence => InitStep::Fence(t),
                Some(t) => InitStep::Write(coordinator_epoch, t),
            },
        })
    }

    /// Kafka's `prepareInitProducerIdTransit`. `Ok(None)`: a new producer id is needed
    /// (the epoch is exhausted) and `new_producer_id` is empty.
    fn prepare_init(
        &self,
        m: &mut TransactionMetadata,
        txn_timeout_ms: i32,
        expected: Option<(i64, i16)>,
        new_producer_id: &mut Option<i64>,
    ) -> Result<Option<TxnTransit>, TxnError> {
        use TransactionState::*;
        let valid_pid = |(pid, epoch): (i64, i16)| {
            m.producer_epoch == metadata::NO_PRODUCER_EPOCH
                || pid == m.producer_id
                || (pid == m.previous_producer_id && metadata::is_epoch_exhausted(epoch))
        };
        if m.pending_transition_in_progress() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if expected.is_some_and(|e| !valid_pid(e)) {
            return Err(TxnError::ProducerFenced);
        }
        match m.state {
            PrepareAbort | PrepareCommit => Err(TxnError::ConcurrentTransactions),
            CompleteAbort | CompleteCommit | Empty => {
                if m.is_producer_epoch_exhausted()
                    && expected.is_none_or(|(_, e)| e == m.producer_epoch)
                {
                    let Some(pid) = new_producer_id.take() else {
                        return Ok(None);
                    };
                    return Ok(Some(m.prepare_producer_id_rotation(
                        pid,
                        txn_timeout_ms,
                        now_ms(),
                        expected.is_some(),
                    )?));
                }
                match m.prepare_increment_producer_epoch(
                    txn_timeout_ms,
                    expected.map(|(_, e)| e),
                    now_ms(),
                ) {
                    Ok(t) => Ok(Some(t)),
                    Err(None) => Err(TxnError::ProducerFenced),
                    Err(Some(e)) => Err(e.into()),
                }
            }
            Ongoing => Ok(Some(m.prepare_fence_producer_epoch()?)),
            Dead | PrepareEpochFence => Err(TxnError::Internal(format!(
                "transactional id {} found in state {:?}",
                m.transactional_id, m.state
            ))),
        }
    }

    // -----------------------------------------------------------------------------------------
    // AddPartitionsToTxn, AddOffsetsToTxn, verification
    // -----------------------------------------------------------------------------------------

    /// Adds partitions to the id's transaction, starting it if none is open (Kafka's
    /// `handleAddPartitionsToTransaction`). `client_transaction_version` is 2 where a broker
    /// adds them for a Produce v12+ or TxnOffsetCommit v5+ (AddPartitionsToTxn v4+ without
    /// verify-only), 0 for a client's own AddPartitionsToTxn or AddOffsetsToTxn.
    pub async fn add_partitions(
        self: &Arc<Self>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<(String, i32)>,
        client_transaction_version: i16,
    ) -> Result<(), TxnError> {
        Self::check_id(transactional_id)?;
        let (coordinator_epoch, t) = {
            let mut st = self.state.lock();
            let coordinator_epoch = self.acquire(&mut st, transactional_id)?;
            // Kafka 4.4's `handleAddPartitionsToTransaction`: a transition in flight first
            // (a version 2 producer adds to its next transaction at the epoch the commit just
            // bumped, while that commit's markers are still being written), then the
            // identity, then a transaction being ended.
            if st
                .txns
                .get(transactional_id)
                .is_some_and(|m| m.pending_transition_in_progress())
            {
                return Err(TxnError::ConcurrentTransactions);
            }
            let m = producer_of(&mut st, transactional_id, producer_id, producer_epoch)?;
            if matches!(
                m.state,
                TransactionState::PrepareCommit | TransactionState::PrepareAbort
            ) {
                return Err(TxnError::ConcurrentTransactions);
            }
            if m.state == TransactionState::Ongoing && partitions.is_subset(&m.partitions) {
                return Ok(());
            }
            if m.partitions.len() + partitions.len() > MAX_PARTITIONS_PER_TRANSACTION {
                return Err(TxnError::InvalidRequest(format!(
                    "a transaction may hold at most {MAX_PARTITIONS_PER_TRANSACTION} partitions"
                )));
            }
            (
                coordinator_epoch,
                m.prepare_add_partitions(partitions, now_ms(), client_transaction_version)?,
            )
        };
        self.write_transition(transactional_id, coordinator_epoch, &t)
            .await
    }

    /// AddPartitionsToTxn with verify_only (KIP-890 part 1, from partition leaders): is each
    /// partition in the producer's open transaction? NONE or TRANSACTION_ABORTABLE each
    /// (Kafka's `handleVerifyPartitionsInTransaction`).
    pub fn verify_partitions(
        self: &Arc<Self>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<(String, i32)>,
    ) -> Result<Vec<PartitionCode>, TxnError> {
        Self::check_id(transactional_id)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, transactional_id)?;
        let m = producer_of(&mut st, transactional_id, producer_id, producer_epoch)?;
        if matches!(
            m.state,
            TransactionState::PrepareCommit | TransactionState::PrepareAbort
        ) {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|tp| {
                let code = if m.partitions.contains(tp) {
                    0
                } else {
                    ResponseError::TransactionAbortable.code()
                };
                (tp.clone(), code)
            })
            .collect())
    }

    // -----------------------------------------------------------------------------------------
    // EndTxn and markers
    // -----------------------------------------------------------------------------------------

    /// EndTxn (Kafka's `endTransaction`): writes PrepareCommit/PrepareAbort, answers, and
    /// leaves the markers and the Complete* record to a task. Also used, with
    /// `from_client == false`, to abort a fenced transaction at its bumped epoch.
    pub async fn end_transaction(
        self: &Arc<Self>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        from_client: Option<i16>,
    ) -> Result<(i64, i16), TxnError> {
        Self::check_id(transactional_id)?;
        let req = EndTxnAsk {
            producer_id,
            producer_epoch,
            commit,
            from_client: from_client.is_some(),
        };
        let mut next_producer_id: Option<i64> = None;
        let (coordinator_epoch, t, fence) = loop {
            match self.end_step(transactional_id, &req, from_client, next_producer_id)? {
                EndDecision::Write {
                    coordinator_epoch,
                    transit,
                    fence,
                } => break (coordinator_epoch, transit, fence),
                EndDecision::AlreadyDone(answer) => return Ok(answer),
                // Transaction version 2 with an exhausted epoch: the transaction ends on
                // the old id and the next one starts on a new id at epoch 0.
                EndDecision::NeedProducerId => {
                    let pid = self
                        .replicas
                        .next_producer_id()
                        .await
                        .map_err(TxnError::ProducerIdAllocation)?;
                    next_producer_id = Some(pid);
                }
            }
        };
        if let Err(e) = self
            .write_transition(transactional_id, coordinator_epoch, &t)
            .await
        {
            if fence {
                if let Some(m) = self.state.lock().txns.get_mut(transactional_id) {
                    m.has_failed_epoch_fence = true;
                }
            }
            return Err(e);
        }
        self.faults.crash_point(
            CrashPoint::TxnAfterPrepareBeforeMarkers,
            TRANSACTION_STATE_TOPIC,
            self.log.partition_for(transactional_id),
        );
        let job = self.marker_job(transactional_id, coordinator_epoch, &t, commit)?;
        // The identity the producer continues with: after a version 2 rotation, the new id.
        let answer = if job.complete.producer_id != job.producer_id {
            (job.complete.producer_id, job.complete.producer_epoch)
        } else {
            (job.producer_id, job.producer_epoch)
        };
        tokio::spawn(self.clone().complete_transaction(job));
        Ok(answer)
    }

    /// Under the state lock, what an EndTxn leads to (the checks before Kafka's
    /// `endTransaction` appends its Prepare* record): the transition to write, a retry of what
    /// is done (with the identity to answer), or the need for a new producer id. A client's
    /// transaction version is its EndTxn version's (`from_client`); the coordinator's own
    /// aborts (fences, timeouts) keep the transaction's.
    fn end_step(
        self: &Arc<Self>,
        transactional_id: &str,
        req: &EndTxnAsk,
        from_client: Option<i16>,
        next_producer_id: Option<i64>,
    ) -> Result<EndDecision, TxnError> {
        let mut st = self.state.lock();
        let coordinator_epoch = self.acquire(&mut st, transactional_id)?;
        let m = st
            .txns
            .get_mut(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        let fence = m.pending_state == Some(TransactionState::PrepareEpochFence);
        let tv = from_client.unwrap_or(m.client_transaction_version);
        let r = if metadata::supports_epoch_bump(tv) {
            Self::prepare_end_v2(m, req, tv, next_producer_id)
        } else {
            Self::prepare_end(m, req, tv)
        };
        match r {
            Ok(EndStep::Write(transit)) => Ok(EndDecision::Write {
                coordinator_epoch,
                transit,
                fence,
            }),
            Ok(EndStep::AlreadyDone) => {
                Ok(EndDecision::AlreadyDone((m.producer_id, m.producer_epoch)))
            }
            Ok(EndStep::NeedProducerId) => Ok(EndDecision::NeedProducerId),
            Err(e) => {
                if fence && from_client.is_none() {
                    // The fence will not happen: let the next attempt start afresh.
                    m.pending_state = None;
                }
                Err(e)
            }
        }
    }

    /// Once the Prepare* record `t` is written: the markers to send, if this node still
    /// coordinates the transaction at `coordinator_epoch` and the transaction is still the
    /// one prepared (Kafka's `endTransaction`, in the append callback of the Prepare*
    /// record).
    fn marker_job(
        &self,
        transactional_id: &str,
        coordinator_epoch: i32,
        t: &TxnTransit,
        commit: bool,
    ) -> Result<MarkerJob, TxnError> {
        let mut st = self.state.lock();
        if st.loaded.get(&self.log.partition_for(transactional_id)) != Some(&coordinator_epoch) {
            return Err(TxnError::NotCoordinator);
        }
        let m = st
            .txns
            .get_mut(transactional_id)
            .ok_or(TxnError::NotCoordinator)?;
        if m.producer_id != t.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if m.producer_epoch != t.producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        if m.pending_transition_in_progress() || m.state != t.state {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(MarkerJob {
            transactional_id: transactional_id.to_string(),
            coordinator_epoch,
            commit,
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            transaction_version: marker_transaction_version(m.client_transaction_version),
            complete: m.prepare_complete(now_ms())?,
        })
    }

    /// The checks of Kafka's `endTransactionWithTV1` before the Prepare* record: the epoch
    /// is the producer's own, and a retried EndTxn of a completed transaction succeeds.
    fn prepare_end(
        m: &mut TransactionMetadata,
        req: &EndTxnAsk,
        tv: i16,
    ) -> Result<EndStep, TxnError> {
        use TransactionState::*;
        let EndTxnAsk {
            producer_id,
            producer_epoch,
            commit,
            from_client,
        } = *req;
        if m.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        let valid_epoch = (!from_client || producer_epoch == m.producer_epoch)
            && producer_epoch >= m.producer_epoch;
        if !valid_epoch {
            return Err(TxnError::ProducerFenced);
        }
        let fence_pending = m.pending_state == Some(PrepareEpochFence);
        if m.pending_transition_in_progress() && (from_client || !fence_pending) {
            return Err(TxnError::ConcurrentTransactions);
        }
        let prepare = |m: &mut TransactionMetadata, s| {
            m.prepare_abort_or_commit(s, tv, metadata::NO_PRODUCER_ID, now_ms(), false)
        };
        match (m.state, commit) {
            (Ongoing, _) if fence_pending => {
                if commit {
                    return Err(TxnError::ConcurrentTransactions);
                }
                Ok(EndStep::Write(
                    m.prepare_fenced_abort(producer_epoch, now_ms())?,
                ))
            }
            (Ongoing, true) => Ok(EndStep::Write(prepare(m, PrepareCommit)?)),
            (Ongoing, false) => Ok(EndStep::Write(prepare(m, PrepareAbort)?)),
            (CompleteCommit, true) | (CompleteAbort, false) => Ok(EndStep::AlreadyDone),
            (PrepareCommit, true) | (PrepareAbort, false) => Err(TxnError::ConcurrentTransactions),
            (Dead, _) | (PrepareEpochFence, _) => Err(TxnError::Internal(format!(
                "transactional id {} found in state {:?}",
                m.transactional_id, m.state
            ))),
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// The checks of Kafka's `endTransaction` for transaction version 2 (EndTxn v5+), where
    /// every end bumps the epoch. A retry names the epoch before the bump (or the last epoch
    /// of the previous producer id after a rotation); an abort is accepted from Empty and
    /// Complete* too, writing an abort over no partition. The table above Kafka's
    /// `endTransaction`, with PF = PRODUCER_FENCED and ITS = INVALID_TXN_STATE:
    ///
    /// | state          | abort retry | abort current | commit retry | commit current |
    /// |----------------|-------------|---------------|--------------|----------------|
    /// | Empty          | PF          | bump          | PF           | ITS            |
    /// | CompleteAbort  | done        | bump          | ITS          | ITS            |
    /// | CompleteCommit | ITS         | bump          | done         | ITS            |
    fn prepare_end_v2(
        m: &mut TransactionMetadata,
        req: &EndTxnAsk,
        tv: i16,
        next_producer_id: Option<i64>,
    ) -> Result<EndStep, TxnError> {
        use TransactionState::*;
        let EndTxnAsk {
            producer_id,
            producer_epoch,
            commit,
            from_client,
        } = *req;
        let fence = m.pending_state == Some(PrepareEpochFence);
        let EndV2Identity {
            is_retry,
            retry_on_overflow,
            valid_epoch,
        } = EndV2Identity::of(m, req, fence);
        // A transition in flight is reported before the identity is judged (Kafka 4.4's
        // `endTransaction` for version 2): the abort that follows a commit names the bumped
        // epoch while the commit's markers are still being written, and must be told to retry
        // (CONCURRENT_TRANSACTIONS), not be fenced.
        if m.pending_transition_in_progress() && (from_client || !fence) {
            return Err(TxnError::ConcurrentTransactions);
        }
        if m.producer_id != producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if !valid_epoch {
            return Err(TxnError::ProducerFenced);
        }
        // The id the next transaction takes when this one ends at the last epoch.
        let next_id = if m.is_producer_epoch_exhausted() {
            match next_producer_id {
                Some(pid) => pid,
                None => return Ok(EndStep::NeedProducerId),
            }
        } else {
            metadata::NO_PRODUCER_ID
        };
        let prepare = |m: &mut TransactionMetadata, state, no_partition_added| {
            m.prepare_abort_or_commit(state, tv, next_id, now_ms(), no_partition_added)
                .map(EndStep::Write)
                .map_err(TxnError::from)
        };
        match (m.state, commit) {
            (Ongoing, _) if fence => {
                if commit {
                    return Err(TxnError::ConcurrentTransactions);
                }
                Ok(EndStep::Write(
                    m.prepare_fenced_abort(producer_epoch, now_ms())?,
                ))
            }
            (Ongoing, true) => prepare(m, PrepareCommit, false),
            (Ongoing, false) => prepare(m, PrepareAbort, false),
            (CompleteCommit, true) if is_retry => Ok(EndStep::AlreadyDone),
            (CompleteCommit, false) if !is_retry => prepare(m, PrepareAbort, true),
            (CompleteAbort, false) if is_retry => Ok(EndStep::AlreadyDone),
            (CompleteAbort, false) => prepare(m, PrepareAbort, true),
            (Empty, false) => prepare(m, PrepareAbort, true),
            (PrepareCommit, true) | (PrepareAbort, false) => Err(TxnError::ConcurrentTransactions),
            (Dead, _) | (PrepareEpochFence, _) => Err(TxnError::Internal(format!(
                "transactional id {} found in state {:?}",
                m.transactional_id, m.state
            ))),
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// Where the marker of `topic`-`partition` goes: its leader's advertised listener.
    fn destination(&self, topic: &str, partition: i32) -> Destination {
        let image = self.replicas.controller().image().borrow().clone();
        let Some(p) = image
            .topic_by_name(topic)
            .and_then(|t| t.partitions.iter().find(|p| p.index == partition))
        else {
            return Destination::Gone;
        };
        match image.brokers.get(&p.leader).filter(|b| !b.fenced) {
            Some(b) => Destination::At(b.node_id, format!("{}:{}", b.host, b.port)),
            None => Destination::NoLeader,
        }
    }

    /// Sends the markers of a prepared transaction until every partition has one, then
    /// writes CompleteCommit/CompleteAbort. Stops when this node is no longer the
    /// coordinator (the next one resumes from the log).
    async fn complete_transaction(self: Arc<Self>, job: MarkerJob) {
        let id = job.transactional_id.clone();
        loop {
            if !self.owns(&id, job.coordinator_epoch) {
                return;
            }
            let remaining: Vec<(String, i32)> = match self.state.lock().txns.get(&id) {
                Some(m) => m.partitions.iter().cloned().collect(),
                None => return,
            };
            if remaining.is_empty() {
                break;
            }
            let Some(written) = self.send_markers(&job, remaining).await else {
                tracing::warn!(
                    transactional_id = %id,
                    "a partition refused the marker's epoch; a newer coordinator owns it"
                );
                return;
            };
            let left = {
                let mut st = self.state.lock();
                let Some(m) = st.txns.get_mut(&id) else {
                    return;
                };
                for tp in &written {
                    m.partitions.remove(tp);
                }
                m.partitions.len()
            };
            if left > 0 {
                tokio::time::sleep(MARKER_RETRY_BACKOFF).await;
            }
        }
        // Every marker is written: the Complete* record, retried while the log is unavailable.
        loop {
            match self
                .write_transition_keeping_pending(&id, job.coordinator_epoch, &job.complete)
                .await
            {
                Ok(()) => return,
                Err(TxnError::NotCoordinator) => return,
                Err(e) => {
                    tracing::info!(transactional_id = %id, error = %e, "retrying the completion record");
                    tokio::time::sleep(MARKER_RETRY_BACKOFF).await;
                }
            }
        }
    }

    /// Sends `job`'s marker to each remaining partition's leader, one request per leader
    /// (Kafka's `TransactionMarkerChannelManager`). Returns the partitions done: written, or
    /// gone with their topic; `None` when a partition refused the coordinator epoch.
    async fn send_markers(
        &self,
        job: &MarkerJob,
        remaining: Vec<(String, i32)>,
    ) -> Option<Vec<(String, i32)>> {
        let mut by_node: HashMap<i32, (String, Vec<(String, i32)>)> = HashMap::new();
        let mut written = Vec::new();
        for (t, p) in remaining {
            match self.destination(&t, p) {
                Destination::Gone => written.push((t, p)),
                Destination::NoLeader => {}
                Destination::At(node, addr) => by_node
                    .entry(node)
                    .or_insert_with(|| (addr, Vec::new()))
                    .1
                    .push((t, p)),
            }
        }
        let mut fenced = false;
        for (node, (addr, partitions)) in by_node {
            let req = MarkerRequest {
                producer_id: job.producer_id,
                producer_epoch: job.producer_epoch,
                commit: job.commit,
                coordinator_epoch: job.coordinator_epoch,
                transaction_version: job.transaction_version,
                partitions,
            };
            for (tp, outcome) in self.markers.send(node, &addr, &req).await {
                match outcome {
                    MarkerOutcome::Written => {
                        self.faults
                            .crash_point(CrashPoint::TxnAfterMarker, &tp.0, tp.1);
                        written.push(tp)
                    }
                    MarkerOutcome::Retry => {}
                    MarkerOutcome::Fenced => fenced = true,
                }
            }
        }
        (!fenced).then_some(written)
    }

    /// [`Self::write_transition`] for the Complete* record: a failed write keeps the
    /// transition pending, because the markers are already written and the record must be
    /// retried, not replaced.
    async fn write_transition_keeping_pending(
        &self,
        transactional_id: &str,
        coordinator_epoch: i32,
        t: &TxnTransit,
    ) -> Result<(), TxnError> {
        let r = self
            .write_transition(transactional_id, coordinator_epoch, t)
            .await;
        if r.is_err() {
            if let Some(m) = self.state.lock().txns.get_mut(transactional_id) {
                if m.state != t.state {
                    m.pending_state = Some(t.state);
                }
            }
        }
        r
    }

    // -----------------------------------------------------------------------------------------
    // DescribeTransactions, ListTransactions
    // -----------------------------------------------------------------------------------------

    pub fn describe(
        self: &Arc<Self>,
        transactional_id: &str,
    ) -> Result<TransactionDescription, TxnError> {
        Self::check_id(transactional_id)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, transactional_id)?;
        match st.txns.get(transactional_id) {
            Some(m) if m.state != TransactionState::Dead => Ok(TransactionDescription {
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                state: m.state,
                txn_timeout_ms: m.txn_timeout_ms,
                txn_start_timestamp: m.txn_start_timestamp,
                partitions: m.partitions.clone(),
            }),
            _ => Err(TxnError::TransactionalIdNotFound),
        }
    }

    /// Every id this node coordinates that passes `filter` (Kafka's `listTransactionStates`).
    pub fn list(self: &Arc<Self>, filter: &ListFilter) -> Vec<TransactionListing> {
        let mut st = self.state.lock();
        self.acquire_all(&mut st);
        let now = now_ms();
        let mut out: Vec<TransactionListing> = st
            .txns
            .values()
            .filter(|m| m.state != TransactionState::Dead)
            .filter(|m| filter.states.is_empty() || filter.states.contains(m.state.name()))
            .filter(|m| {
                filter.producer_ids.is_empty() || filter.producer_ids.contains(&m.producer_id)
            })
            .filter(|m| filter.duration_ms < 0 || now - m.txn_start_timestamp > filter.duration_ms)
            .filter(|m| {
                filter
                    .pattern
                    .as_ref()
                    .is_none_or(|p| p.is_match(&m.transactional_id))
            })
            .map(|m| TransactionListing {
                transactional_id: m.transactional_id.clone(),
                producer_id: m.producer_id,
                state: m.state,
            })
            .collect();
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        out
    }

    // -----------------------------------------------------------------------------------------
    // Timers
    // -----------------------------------------------------------------------------------------

    /// Aborts every transaction open longer than its timeout, at a bumped epoch (Kafka's
    /// `abortTimedOutTransactions`).
    pub fn abort_timed_out_transactions(self: &Arc<Self>) {
        let now = now_ms();
        let fenced: Vec<(String, TxnTransit)> = {
            let mut st = self.state.lock();
            st.txns
                .values_mut()
                .filter(|m| {
                    m.state == TransactionState::Ongoing
                        && !m.pending_transition_in_progress()
                        && m.txn_start_timestamp + m.txn_timeout_ms as i64 <= now
                })
                .filter_map(|m| {
                    m.prepare_fence_producer_epoch()
                        .ok()
                        .map(|t| (m.transactional_id.clone(), t))
                })
                .collect()
        };
        for (id, t) in fenced {
            let me = self.clone();
            tokio::spawn(async move {
                match me
                    .end_transaction(&id, t.producer_id, t.producer_epoch, false, None)
                    .await
                {
                    Ok(_) => {
                        tracing::info!(transactional_id = %id, "aborted a timed-out transaction")
                    }
                    Err(e) => {
                        tracing::info!(transactional_id = %id, error = %e, "timed-out transaction not aborted")
                    }
                }
            });
        }
    }

    /// Removes ids idle longer than `transactional.id.expiration.ms`: a tombstone, then the
    /// metadata (Kafka's `removeExpiredTransactionalIds`).
    pub fn remove_expired_transactional_ids(self: &Arc<Self>) {
        let now = now_ms();
        let expired: Vec<(String, i32, TxnTransit)> = {
            let mut st = self.state.lock();
            let State { txns, loaded, .. } = &mut *st;
            let partitions = self.log.partitions();
            txns.values_mut()
                .filter(|m| {
                    m.state.is_expiration_allowed()
                        && !m.pending_transition_in_progress()
                        && m.txn_last_update_timestamp + self.config.id_expiration_ms <= now
                })
                .filter_map(|m| {
                    let index =
                        crate::group::records::partition_for(&m.transactional_id, partitions);
                    let epoch = *loaded.get(&index)?;
                    m.prepare_dead()
                        .ok()
                        .map(|t| (m.transactional_id.clone(), epoch, t))
                })
                .collect()
        };
        for (id, epoch, t) in expired {
            let me = self.clone();
            tokio::spawn(async move {
                if let Err(e) = me.write_transition(&id, epoch, &t).await {
                    tracing::info!(transactional_id = %id, error = %e, "could not expire transactional id");
                } else {
                    tracing::info!(transactional_id = %id, "expired transactional id");
                }
            });
        }
    }

    /// The coordinator's timer task: leadership after each metadata image, timeouts, expiry.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut images = self.replicas.metadata_applied();
        let mut abort_tick = tokio::time::interval(Duration::from_millis(
            self.config.abort_timed_out_interval_ms,
        ));
        let mut expire_tick = tokio::time::interval(Duration::from_millis(
            self.config.remove_expired_interval_ms,
        ));
        expire_tick.tick().await;
        loop {
            {
                let mut st = self.state.lock();
                self.acquire_all(&mut st);
            }
            tokio::select! {
                _ = abort_tick.tick() => self.abort_timed_out_transactions(),
                _ = expire_tick.tick() => self.remove_expired_transactional_ids(),
                r = images.changed() => if r.is_err() { break },
                _ = shutdown.changed() => break,
            }
        }
        let mut st = self.state.lock();
        st.shut_down = true;
        st.loaded.clear();
        st.txns.clear();
    }
}
