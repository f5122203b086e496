//! Produce verification and implicit adds (KIP-890; Kafka's `AddPartitionsToTxnManager`
//! and `ReplicaManager.appendRecords` with `transaction.partition.verification.enable`).
//!
//! A transactional batch for a partition where its producer has no open transaction is the
//! first write of a transaction there — or a late write of a transaction that already
//! ended. Before appending it the leader asks the coordinator (in-process when the
//! coordinator is this node, over TCP otherwise). Below Produce v12 (transaction version 1,
//! where the client added the partition itself) it only verifies (AddPartitionsToTxn v4,
//! verify only) and refuses the batch if the partition is not in the producer's
//! transaction, so a delayed write cannot slip into the next transaction or hang the last
//! stable offset. From Produce v12 (transaction version 2) it adds the partition
//! (AddPartitionsToTxn v5), and the coordinator refuses a stale epoch; TxnOffsetCommit v5
//! adds its `__consumer_offsets` partition the same way ([`add_offsets_partition`]).
//!
//! The answer only holds until the coordinator ends the transaction, which it may do before
//! the append. So, as Kafka's `ReplicaManager.maybeStartTransactionVerificationForPartition`
//! with `Partition.maybeStartTransactionVerification`, the partition's producer state records a
//! verification entry before the coordinator is asked, and the append carries its guard
//! ([`brook_storage::VerificationGuard`]): a marker written meanwhile clears the entry, and
//! the log refuses the late batch with INVALID_TXN_STATE under the lock that orders it
//! against the marker (`UnifiedLog.analyzeAndValidateProducerState`).
//!
//! Transaction version 2 (Produce v12+, Kafka's `TransactionSupportedOperation.ADD_PARTITION`)
//! differs in three ways, as in Kafka 4.4's `ReplicaManager.handleProduceAppend`. A client
//! pipelines its next transaction's produces behind EndTxn, so the coordinator often answers
//! CONCURRENT_TRANSACTIONS (the previous transaction's markers are being written): the leader
//! retries then, every `add.partitions.to.txn.retry.backoff.ms` for up to
//! `add.partitions.to.txn.retry.backoff.max.ms` (`maybeRetryOnConcurrentTransactions`),
//! starting or joining the verification entry again before each attempt, and answers
//! CONCURRENT_TRANSACTIONS as it is if the time runs out (version 1 clients get
//! NOT_ENOUGH_REPLICAS instead, which they retry). The entry records that it is of version 2,
//! so the previous transaction's marker, written at the bumped epoch the verified batch
//! carries, leaves it in place (`brook_storage::VerificationStateEntry::survives_marker`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, ApiKey, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::log::TRANSACTION_STATE_TOPIC;
use crate::broker::Broker;
use crate::cluster::partition::Partition;
use crate::cluster::replica_manager::now_ms;
use crate::fault::{FaultAction, RequestFacts, When};
use crate::net::client::BrokerConnection;
use brook_storage::batch::BatchHeader;
use brook_storage::VerificationGuard;

/// The AddPartitionsToTxn version brokers verify with.
pub const VERIFY_VERSION: i16 = 4;
/// The AddPartitionsToTxn version brokers add partitions with for transaction version 2.
pub const ADD_VERSION: i16 = 5;
/// Produce v12+: the partition is added implicitly (Kafka's
/// `produceRequestVersionToTransactionSupportedOperation`).
pub const PRODUCE_ADDS_PARTITION_FROM: i16 = 12;
/// TxnOffsetCommit v5+: the offsets partition is added implicitly.
pub const TXN_OFFSET_COMMIT_ADDS_PARTITION_FROM: i16 = 5;
/// Bound on one verification round trip.
pub const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);
/// Produce v11+ knows TRANSACTION_ABORTABLE (Kafka's `genericErrorSupported`).
const PRODUCE_ABORTABLE_FROM: i16 = 11;

/// Connections to other nodes' coordinators, one per node (requests to a node queue on it).
#[derive(Default)]
pub struct TxnVerifier {
    conns: parking_lot::Mutex<HashMap<i32, Arc<tokio::sync::Mutex<BrokerConnection>>>>,
}

/// A refused produce partition: the error code, and the message Kafka sets (`None` where
/// it sets none).
pub type Refusal = (i16, Option<String>);

/// Kafka's mapping of a verification failure to what a producer understands
/// (`AddPartitionsToTxnManager` then `ReplicaManager.handleProduceAppend`'s
/// `postVerificationCallback`, with their messages).
fn produce_error(code: i16, produce_version: i16) -> Refusal {
    use ResponseError as E;
    let version_2 = produce_version >= PRODUCE_ADDS_PARTITION_FROM;
    let e = match E::try_from_code(code) {
        Some(E::ProducerFenced) => E::InvalidProducerEpoch,
        Some(E::TransactionAbortable) if produce_version < PRODUCE_ABORTABLE_FROM => {
            E::InvalidTxnState
        }
        // Version 2 clients see it as it is: it is common while a commit completes.
        Some(E::ConcurrentTransactions) if version_2 => E::ConcurrentTransactions,
        Some(
            E::ConcurrentTransactions
            | E::NetworkException
            | E::CoordinatorLoadInProgress
            | E::CoordinatorNotAvailable
            | E::NotCoordinator,
        ) => {
            let message = format!(
                "Unable to verify the partition has been added to the transaction. \
                 Underlying error: {}",
                crate::errors::error_name(code)
            );
            return (E::NotEnoughReplicas.code(), Some(message));
        }
        Some(e) => e,
        None => E::UnknownServerError,
    };
    let message =
        (e == E::InvalidTxnState).then(|| "Partition was not added to the transaction".to_string());
    (e.code(), message)
}

/// [`verify_produce`] for one partition of a Produce request (nothing to verify where the
/// partition or its records are missing: the append answers those).
pub async fn verify_partition_data(
    broker: &Broker,
    produce_version: i16,
    transactional_id: Option<&str>,
    topic: &str,
    pd: &kafka_protocol::messages::produce_request::PartitionProduceData,
) -> Result<Option<VerificationGuard>, Refusal> {
    if transactional_id.is_none() {
        return Ok(None);
    }
    let (Some(part), Some(records)) = (broker.replicas.partition(topic, pd.index), &pd.records)
    else {
        return Ok(None);
    };
    if !part.is_leader() {
        return Ok(None);
    }
    verify_produce(broker, produce_version, transactional_id, &part, records).await
}

/// Checks a produce batch before it is appended. `Err((code, message))` refuses it;
/// `Ok(Some(guard))` is the guard the append must carry (the log checks it), `Ok(None)` an
/// append the log does not check.
pub async fn verify_produce(
    broker: &Broker,
    produce_version: i16,
    transactional_id: Option<&str>,
    part: &Partition,
    records: &[u8],
) -> Result<Option<VerificationGuard>, Refusal> {
    let Some(id) = transactional_id.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    // Transaction version 2 depends on the add; version 1 only on the verification's switch
    // (`maybeSendPartitionsToTransactionCoordinator`). The append checks the guard only with
    // the switch on, for both versions (`UnifiedLog.batchMissingRequiredVerification`).
    let add = produce_version >= PRODUCE_ADDS_PARTITION_FROM;
    let checked = broker.txn.config().partition_verification;
    if !add && !checked {
        return Ok(None);
    }
    let carried = |guard: VerificationGuard| checked.then_some(guard);
    let Some(h) = BatchHeader::new(records) else {
        return Ok(None); // the append reports the malformed batch
    };
    if !h.is_transactional() || h.is_control() {
        return Ok(carried(VerificationGuard::SENTINEL));
    }
    let (guard, code) = start_and_ask(broker, id, part, &h, add).await?;
    if code == 0 {
        Ok(carried(guard))
    } else {
        Err(produce_error(code, produce_version))
    }
}

/// Starts (or joins) the producer's verification entry on the partition, then asks the
/// coordinator; for transaction version 2 (`add`) again after CONCURRENT_TRANSACTIONS, each
/// time with the entry started anew, until the retry time is spent (Kafka's
/// `maybeSendPartitionsToTransactionCoordinator` under `maybeRetryOnConcurrentTransactions`).
/// Returns the guard of the last attempt and the coordinator's code (0 where there was
/// nothing to ask: the sentinel, inside an ongoing transaction, which the append re-checks).
/// `Err` is a refusal before the coordinator was asked (an old epoch, not the leader).
async fn start_and_ask(
    broker: &Broker,
    transactional_id: &str,
    part: &Partition,
    h: &BatchHeader<'_>,
    add: bool,
) -> Result<(VerificationGuard, i16), Refusal> {
    let (pid, epoch, seq) = (h.producer_id(), h.producer_epoch(), h.base_sequence());
    let tp = (part.topic.clone(), part.index);
    let retry = broker.txn.config().add_partitions_retry;
    let started = std::time::Instant::now();
    loop {
        let guard = part
            .maybe_start_transaction_verification(pid, seq, epoch, add, now_ms())
            .map_err(|e| (e.error_code(), None))?;
        if guard.is_sentinel() {
            return Ok((guard, 0));
        }
        let (Ok(code) | Err(code)) =
            ask_coordinator(broker, transactional_id, pid, epoch, &tp, add).await;
        tracing::debug!(
            topic = %tp.0, partition = tp.1, producer_id = pid, epoch, seq, ?guard, code, add,
            "produce verification answered"
        );
        let concurrent = code == ResponseError::ConcurrentTransactions.code();
        if !add || !concurrent || started.elapsed() >= retry.timeout() {
            return Ok((guard, code));
        }
        tokio::time::sleep(retry.backoff).await;
    }
}

/// TxnOffsetCommit v5+ (transaction version 2): adds the group's `__consumer_offsets`
/// partition to the producer's transaction before the offsets are written, so the markers
/// reach them (Kafka's `CoordinatorPartitionWriter.maybeStartTransactionVerification` with
/// `txnOffsetCommitRequestVersionToTransactionSupportedOperation`). `Err` is the code to
/// answer, mapped as for a Produce (then as the group coordinator maps write errors).
pub async fn add_offsets_partition(
    broker: &Broker,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    offsets_partition: i32,
) -> Result<(), i16> {
    let tp = (
        crate::group::store::OFFSETS_TOPIC.to_string(),
        offsets_partition,
    );
    let code = match ask_coordinator(
        broker,
        transactional_id,
        producer_id,
        producer_epoch,
        &tp,
        true,
    )
    .await
    {
        Ok(code) | Err(code) => code,
    };
    if code == 0 {
        return Ok(());
    }
    use ResponseError as E;
    // Mapped as a Produce that knows TRANSACTION_ABORTABLE but keeps the version 1 mapping of
    // the retriable codes, which the group coordinator's mapping below turns into codes a
    // TxnOffsetCommit client retries.
    let (mapped, _) = produce_error(code, PRODUCE_ABORTABLE_FROM);
    // The group coordinator's mapping of a failed write (`handleOperationException`).
    Err(match E::try_from_code(mapped) {
        Some(E::NotEnoughReplicas | E::RequestTimedOut | E::UnknownTopicOrPartition) => {
            E::CoordinatorNotAvailable.code()
        }
        _ => mapped,
    })
}

/// The coordinator's code for one partition: is it in the transaction (`add == false`), or
/// add it (`add == true`, transaction version 2).
async fn ask_coordinator(
    broker: &Broker,
    transactional_id: &str,
    pid: i64,
    epoch: i16,
    tp: &(String, i32),
    add: bool,
) -> Result<i16, i16> {
    let index = broker.txn.partition_for(transactional_id);
    let local = broker
        .replicas
        .partition(TRANSACTION_STATE_TOPIC, index)
        .is_some_and(|p| p.is_leader());
    if local {
        let fault = local_request_fault(broker, tp).await?;
        let code = ask_local_coordinator(broker, transactional_id, pid, epoch, tp, add).await;
        if let Some(FaultAction::Delay {
            delay_ms,
            when: When::After,
        }) = fault
        {
            broker.fault_sleep(Duration::from_millis(delay_ms)).await;
        }
        return code;
    }
    ask_remote_coordinator(broker, transactional_id, pid, epoch, tp, add, index).await
}

/// The client id a leader's verification requests carry (fault rules match on it).
fn verifier_client_id(broker: &Broker) -> String {
    format!("brook-txn-verifier-{}", broker.node_id())
}

/// The fault rules applied to an in-process verification as to the AddPartitionsToTxn
/// request it stands for (api AddPartitionsToTxn, the verifier's client id, the partition),
/// so that one rule on the coordinator's node acts whether or not the leader is that node
/// (docs/FAULTS.md): `delay` before or after the answer, `error` answers its code, the
/// others lose the request (NETWORK_EXCEPTION, as a lost connection would).
async fn local_request_fault(
    broker: &Broker,
    tp: &(String, i32),
) -> Result<Option<FaultAction>, i16> {
    if broker.faults.is_empty() {
        return Ok(None);
    }
    let facts = RequestFacts {
        api_key: ApiKey::AddPartitionsToTxn as i16,
        client_id: Some(verifier_client_id(broker)),
        partitions: vec![tp.clone()],
    };
    let fault = broker.faults.decide(&facts);
    match fault {
        Some(FaultAction::Delay {
            delay_ms,
            when: When::Before,
        }) => {
            broker.fault_sleep(Duration::from_millis(delay_ms)).await;
            Ok(fault)
        }
        Some(FaultAction::Error {
            error_code,
            delay_ms,
            ..
        }) => {
            broker
                .fault_sleep(Duration::from_millis(delay_ms.unwrap_or(0)))
                .await;
            Err(error_code)
        }
        Some(FaultAction::Delay { .. }) | None => Ok(fault),
        Some(_) => Err(ResponseError::NetworkException.code()),
    }
}

/// The in-process coordinator's code for one partition (see [`ask_coordinator`]).
async fn ask_local_coordinator(
    broker: &Broker,
    transactional_id: &str,
    pid: i64,
    epoch: i16,
    tp: &(String, i32),
    add: bool,
) -> Result<i16, i16> {
    let partitions: BTreeSet<(String, i32)> = [tp.clone()].into_iter().collect();
    if add {
        return broker
            .txn
            .add_partitions(
                transactional_id,
                pid,
                epoch,
                &partitions,
                super::metadata::TRANSACTION_VERSION_2,
            )
            .await
            .map(|()| 0)
            .map_err(|e| e.error_code());
    }
    broker
        .txn
        .verify_partitions(transactional_id, pid, epoch, &partitions)
        .map(|codes| codes.first().map(|(_, c)| *c).unwrap_or(0))
        .map_err(|e| e.error_code())
}

/// The code of the coordinator on another node, over this node's connection to it.
async fn ask_remote_coordinator(
    broker: &Broker,
    transactional_id: &str,
    pid: i64,
    epoch: i16,
    tp: &(String, i32),
    add: bool,
    index: i32,
) -> Result<i16, i16> {
    let (node, addr) =
        crate::share::persister::leader_address(broker, TRANSACTION_STATE_TOPIC, index)
            .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
    let conn = {
        let mut conns = broker.txn.verifier.conns.lock();
        conns
            .entry(node)
            .or_insert_with(|| {
                Arc::new(tokio::sync::Mutex::new(
                    BrokerConnection::new(addr.clone(), verifier_client_id(broker), VERIFY_TIMEOUT)
                        .with_tls(broker.config.tls.inter_broker.clone())
                        .with_sasl(broker.config.inter_broker_sasl.clone()),
                ))
            })
            .clone()
    };
    let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(pid.into())
            .with_producer_epoch(epoch)
            .with_verify_only(!add)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(tp.0.clone())))
                .with_partitions(vec![tp.1])]),
    ]);
    let version = if add { ADD_VERSION } else { VERIFY_VERSION };
    let resp = conn.lock().await.send(version, &req).await;
    let Ok(resp) = resp else {
        // The coordinator moved or is unreachable: the next one has a new connection.
        broker.txn.verifier.conns.lock().remove(&node);
        return Err(ResponseError::NetworkException.code());
    };
    let code = resp
        .results_by_transaction
        .iter()
        .flat_map(|t| t.topic_results.iter())
        .filter(|t| t.name.as_str() == tp.0)
        .flat_map(|t| t.results_by_partition.iter())
        .find(|p| p.partition_index == tp.1)
        .map(|p| p.partition_error_code)
        .unwrap_or(ResponseError::UnknownServerError.code());
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_as_kafka_maps_them() {
        use ResponseError as E;
        assert_eq!(
            produce_error(E::ProducerFenced.code(), 9).0,
            E::InvalidProducerEpoch.code()
        );
        assert_eq!(
            produce_error(E::TransactionAbortable.code(), 10).0,
            E::InvalidTxnState.code()
        );
        assert_eq!(
            produce_error(E::TransactionAbortable.code(), 11).0,
            E::TransactionAbortable.code()
        );
        assert_eq!(
            produce_error(E::NotCoordinator.code(), 9).0,
            E::NotEnoughReplicas.code()
        );
        assert_eq!(
            produce_error(E::InvalidProducerIdMapping.code(), 9).0,
            E::InvalidProducerIdMapping.code()
        );
        // CONCURRENT_TRANSACTIONS: NOT_ENOUGH_REPLICAS before transaction version 2, with
        // Kafka's message; as it is, with none, from Produce v12.
        let concurrent = E::ConcurrentTransactions.code();
        let (code, message) = produce_error(concurrent, 11);
        assert_eq!(code, E::NotEnoughReplicas.code());
        assert_eq!(
            message.as_deref(),
            Some(
                "Unable to verify the partition has been added to the transaction. \
                 Underlying error: CONCURRENT_TRANSACTIONS"
            )
        );
        assert_eq!(produce_error(concurrent, 12), (concurrent, None));
        assert_eq!(
            produce_error(E::TransactionAbortable.code(), 10),
            (
                E::InvalidTxnState.code(),
                Some("Partition was not added to the transaction".to_string())
            )
        );
        assert_eq!(produce_error(E::ProducerFenced.code(), 12).1, None);
    }

    #[test]
    fn the_retry_time_is_capped_by_the_request_timeout() {
        let retry = |max_ms: u64| crate::txn::AddPartitionsRetry {
            backoff: Duration::from_millis(20),
            backoff_max: Duration::from_millis(max_ms),
            request_timeout: Duration::from_millis(30_000),
        };
        assert_eq!(retry(100).timeout(), Duration::from_millis(100));
        assert_eq!(retry(60_000).timeout(), Duration::from_millis(30_000));
    }
}
