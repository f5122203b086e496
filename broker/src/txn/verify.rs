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

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, TopicName, TransactionalId};
use kafka_protocol::ResponseError;

use super::log::TRANSACTION_STATE_TOPIC;
use crate::broker::Broker;
use crate::cluster::partition::Partition;
use crate::net::client::BrokerConnection;
use brook_storage::batch::BatchHeader;

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

/// Kafka's mapping of a verification failure to what a producer understands
/// (`AddPartitionsToTxnManager` then `ReplicaManager.postVerificationCallback`).
fn produce_error(code: i16, produce_version: i16) -> (i16, String) {
    use ResponseError as E;
    let e = match E::try_from_code(code) {
        Some(E::ProducerFenced) => E::InvalidProducerEpoch,
        Some(E::TransactionAbortable) if produce_version < PRODUCE_ABORTABLE_FROM => {
            E::InvalidTxnState
        }
        Some(
            E::ConcurrentTransactions
            | E::NetworkException
            | E::CoordinatorLoadInProgress
            | E::CoordinatorNotAvailable
            | E::NotCoordinator,
        ) => E::NotEnoughReplicas,
        Some(e) => e,
        None => E::UnknownServerError,
    };
    let message = if e == E::InvalidTxnState || e == E::TransactionAbortable {
        "Partition was not added to the transaction".to_string()
    } else {
        format!("Unable to verify the partition has been added to the transaction (error {code})")
    };
    (e.code(), message)
}

/// [`verify_produce`] for one partition of a Produce request (no-op where the partition or
/// its records are missing: the append answers those).
pub async fn verify_partition_data(
    broker: &Broker,
    produce_version: i16,
    transactional_id: Option<&str>,
    topic: &str,
    pd: &kafka_protocol::messages::produce_request::PartitionProduceData,
) -> Result<(), (i16, String)> {
    if transactional_id.is_none() {
        return Ok(());
    }
    let (Some(part), Some(records)) = (broker.replicas.partition(topic, pd.index), &pd.records)
    else {
        return Ok(());
    };
    if !part.is_leader() {
        return Ok(());
    }
    verify_produce(broker, produce_version, transactional_id, &part, records).await
}

/// Checks a produce batch before it is appended. `Err((code, message))` refuses it.
pub async fn verify_produce(
    broker: &Broker,
    produce_version: i16,
    transactional_id: Option<&str>,
    part: &Partition,
    records: &[u8],
) -> Result<(), (i16, String)> {
    let Some(id) = transactional_id.filter(|t| !t.is_empty()) else {
        return Ok(());
    };
    // Transaction version 2 depends on the add; version 1 only on the verification's switch.
    let add = produce_version >= PRODUCE_ADDS_PARTITION_FROM;
    if !add && !broker.txn.config().partition_verification {
        return Ok(());
    }
    let Some(h) = BatchHeader::new(records) else {
        return Ok(()); // the append reports the malformed batch
    };
    if !h.is_transactional() || h.is_control() {
        return Ok(());
    }
    let (pid, epoch) = (h.producer_id(), h.producer_epoch());
    let ongoing = part.active_producers().iter().any(|p| {
        p.producer_id == pid && p.producer_epoch == epoch && p.current_txn_first_offset.is_some()
    });
    if ongoing {
        return Ok(());
    }
    let tp = (part.topic.clone(), part.index);
    let code = match ask_coordinator(broker, id, pid, epoch, &tp, add).await {
        Ok(code) => code,
        Err(code) => code,
    };
    if code == 0 {
        Ok(())
    } else {
        Err(produce_error(code, produce_version))
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
    let (mapped, _) = produce_error(code, PRODUCE_ADDS_PARTITION_FROM);
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
        return broker
            .txn
            .verify_partitions(transactional_id, pid, epoch, &partitions)
            .map(|codes| codes.first().map(|(_, c)| *c).unwrap_or(0))
            .map_err(|e| e.error_code());
    }
    let not_available = ResponseError::CoordinatorNotAvailable.code();
    let (node, addr) = {
        let image = broker.replicas.controller().image().borrow().clone();
        let leader = image
            .topic_by_name(TRANSACTION_STATE_TOPIC)
            .and_then(|t| t.partitions.iter().find(|p| p.index == index))
            .map(|p| p.leader)
            .ok_or(not_available)?;
        let b = image
            .brokers
            .get(&leader)
            .filter(|b| !b.fenced)
            .ok_or(not_available)?;
        (b.node_id, format!("{}:{}", b.host, b.port))
    };
    let conn = {
        let mut conns = broker.txn.verifier.conns.lock();
        conns
            .entry(node)
            .or_insert_with(|| {
                Arc::new(tokio::sync::Mutex::new(
                    BrokerConnection::new(
                        addr.clone(),
                        format!("brook-txn-verifier-{}", broker.node_id()),
                        VERIFY_TIMEOUT,
                    )
                    .with_sasl(broker.config.inter_broker_sasl.clone()),
                ))
            })
            .clone()
    };
    let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(crate::api::sb(transactional_id)))
            .with_producer_id(pid.into())
            .with_producer_epoch(epoch)
            .with_verify_only(!add)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(crate::api::sb(tp.0.clone())))
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
    }
}
