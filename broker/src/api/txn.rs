//! Transaction APIs served by the transaction coordinator: AddPartitionsToTxn (v0-3 from
//! clients, v4+ batched and verify-only from brokers), AddOffsetsToTxn, EndTxn,
//! DescribeTransactions, ListTransactions. The state machine lives in [`crate::txn`]; this
//! file only translates the wire (Kafka's `KafkaApis` handlers).

use std::collections::BTreeSet;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedState;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

use super::auth_helper::{authorize, authorize_cluster};
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::group::store::OFFSETS_TOPIC;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::metadata::{TransactionState as TxnState, TRANSACTION_VERSION_2};
use crate::txn::{ListFilter, TxnError};

/// AddPartitionsToTxn and AddOffsetsToTxn know PRODUCER_FENCED from v2, EndTxn too.
const PRODUCER_FENCED_FROM_V2: i16 = 2;
/// EndTxn v5: KIP-890 part 2's epoch bump at every transaction.
const END_TXN_EPOCH_BUMP_FROM: i16 = 5;

type Partitions = BTreeSet<(String, i32)>;

fn partitions_of(topics: &[AddPartitionsToTxnTopic]) -> Partitions {
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.to_string(), *p)))
        .collect()
}

/// A transaction's result: each partition with its code, grouped by topic.
fn result_topics(codes: Vec<((String, i32), i16)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut out: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    let mut codes = codes;
    codes.sort();
    for ((topic, p), code) in codes {
        let r = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(p)
            .with_partition_error_code(code);
        match out.last_mut() {
            Some(last) if last.name.as_str() == topic => last.results_by_partition.push(r),
            _ => out.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(TopicName(sb(topic)))
                    .with_results_by_partition(vec![r]),
            ),
        }
    }
    out
}

fn every(partitions: &Partitions, code: i16) -> Vec<((String, i32), i16)> {
    partitions.iter().map(|tp| (tp.clone(), code)).collect()
}

/// One transaction of an AddPartitionsToTxn request: partitions that do not exist fail the
/// whole transaction (UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED).
async fn add_partitions_for(
    broker: &Broker,
    version: i16,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    verify_only: bool,
    partitions: Partitions,
) -> Vec<((String, i32), i16)> {
    let exists = |(t, p): &(String, i32)| {
        broker
            .replicas
            .topic(t)
            .is_some_and(|m| (0..m.partition_count()).contains(p))
    };
    if partitions.iter().any(|tp| !exists(tp)) {
        return partitions
            .iter()
            .map(|tp| {
                let e = if exists(tp) {
                    ResponseError::OperationNotAttempted
                } else {
                    ResponseError::UnknownTopicOrPartition
                };
                (tp.clone(), e.code())
            })
            .collect();
    }
    let txn = &broker.txn;
    if verify_only {
        return txn
            .verify_partitions(transactional_id, producer_id, producer_epoch, &partitions)
            .unwrap_or_else(|e| every(&partitions, e.error_code()));
    }
    // A broker adding partitions for a client (v4+ without verify-only) does so for a
    // transaction version 2 client (Kafka's `transactionVersionForAddPartitionsToTxn`).
    let client_tv = if version >= 4 {
        TRANSACTION_VERSION_2
    } else {
        0
    };
    let code = match txn
        .add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            &partitions,
            client_tv,
        )
        .await
    {
        Ok(()) => 0,
        Err(e) => e.code_for_version(version, PRODUCER_FENCED_FROM_V2),
    };
    every(&partitions, code)
}

/// WRITE on the transactional id.
fn may_write_txn(broker: &Broker, ctx: &RequestContext, transactional_id: &str) -> bool {
    authorize(
        broker,
        ctx,
        AclOperation::Write,
        ResourceType::TransactionalId,
        transactional_id,
    )
}

const TXN_DENIED: i16 = ResponseError::TransactionalIdAuthorizationFailed.code();

/// Kafka's `handleAddPartitionsToTxnRequest` checks for a client (v0-3): WRITE on the
/// transactional id, then WRITE on each topic; any refusal fails the whole transaction (the
/// allowed partitions OPERATION_NOT_ATTEMPTED).
fn client_add_denied(
    broker: &Broker,
    ctx: &RequestContext,
    transactional_id: &str,
    partitions: &Partitions,
) -> Option<Vec<((String, i32), i16)>> {
    if !may_write_txn(broker, ctx, transactional_id) {
        return Some(every(partitions, TXN_DENIED));
    }
    let allowed = |t: &str| authorize(broker, ctx, AclOperation::Write, ResourceType::Topic, t);
    if partitions.iter().all(|(t, _)| allowed(t)) {
        return None;
    }
    let code = |t: &str| match allowed(t) {
        true => ResponseError::OperationNotAttempted.code(),
        false => ResponseError::TopicAuthorizationFailed.code(),
    };
    Some(
        partitions
            .iter()
            .map(|tp| (tp.clone(), code(&tp.0)))
            .collect(),
    )
}

/// AddPartitionsToTxn.
pub async fn handle_add_partitions_to_txn(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let v = ctx.api_version;
    if v < 4 {
        let partitions = partitions_of(&req.v3_and_below_topics);
        if let Some(codes) =
            client_add_denied(broker, ctx, &req.v3_and_below_transactional_id, &partitions)
        {
            return AddPartitionsToTxnResponse::default()
                .with_results_by_topic_v3_and_below(result_topics(codes));
        }
        let codes = add_partitions_for(
            broker,
            v,
            &req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            false,
            partitions,
        )
        .await;
        return AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(result_topics(codes));
    }
    // From v4 only brokers send it (verification, or adding for a version 2 client).
    if !authorize_cluster(broker, ctx, AclOperation::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let mut results = Vec::with_capacity(req.transactions.len());
    for t in req.transactions {
        let codes = add_partitions_for(
            broker,
            v,
            &t.transactional_id,
            t.producer_id.0,
            t.producer_epoch,
            t.verify_only,
            partitions_of(&t.topics),
        )
        .await;
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(t.transactional_id)
                .with_topic_results(result_topics(codes)),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

/// AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction, so
/// that the markers reach the offsets committed with TxnOffsetCommit.
pub async fn handle_add_offsets_to_txn(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    if !may_write_txn(broker, ctx, &req.transactional_id) {
        return AddOffsetsToTxnResponse::default().with_error_code(TXN_DENIED);
    }
    if !authorize(
        broker,
        ctx,
        AclOperation::Read,
        ResourceType::Group,
        &req.group_id,
    ) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let partition = broker.groups.offsets_partition_for(&req.group_id);
    let partitions: Partitions = [(OFFSETS_TOPIC.to_string(), partition)]
        .into_iter()
        .collect();
    let code = match broker
        .txn
        .add_partitions(
            &req.transactional_id,
            req.producer_id.0,
            req.producer_epoch,
            &partitions,
            0,
        )
        .await
    {
        Ok(()) => 0,
        Err(e) => e.code_for_version(ctx.api_version, PRODUCER_FENCED_FROM_V2),
    };
    AddOffsetsToTxnResponse::default().with_error_code(code)
}

/// EndTxn. From v5 the client is of transaction version 2 (Kafka's
/// `transactionVersionForEndTxn`): the epoch is bumped and the response carries the
/// producer id and epoch the next transaction uses.
pub async fn handle_end_txn(
    broker: &Broker,
    ctx: &RequestContext,
    req: EndTxnRequest,
) -> EndTxnResponse {
    if !may_write_txn(broker, ctx, &req.transactional_id) {
        return EndTxnResponse::default()
            .with_error_code(TXN_DENIED)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1);
    }
    let client_tv = if ctx.api_version >= END_TXN_EPOCH_BUMP_FROM {
        TRANSACTION_VERSION_2
    } else {
        0
    };
    let r = broker
        .txn
        .end_transaction(
            &req.transactional_id,
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
            Some(client_tv),
        )
        .await;
    match r {
        Ok((pid, epoch)) => EndTxnResponse::default()
            .with_producer_id(pid.into())
            .with_producer_epoch(epoch),
        Err(e) => EndTxnResponse::default()
            .with_error_code(e.code_for_version(ctx.api_version, PRODUCER_FENCED_FROM_V2))
            .with_producer_id((-1).into())
            .with_producer_epoch(-1),
    }
}

/// DescribeTransactions.
pub async fn handle_describe_transactions(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            let s = TransactionState::default().with_transactional_id(id.clone());
            // Kafka's `handleDescribeTransactionsRequest`: DESCRIBE on the transactional id;
            // partitions of topics the session may not describe are left out.
            if !authorize(
                broker,
                ctx,
                AclOperation::Describe,
                ResourceType::TransactionalId,
                &id,
            ) {
                return s.with_error_code(TXN_DENIED);
            }
            match broker.txn.describe(&id) {
                Ok(d) => {
                    let mut topics: Vec<TopicData> = Vec::new();
                    let described = d.partitions.into_iter().filter(|(t, _)| {
                        authorize(broker, ctx, AclOperation::Describe, ResourceType::Topic, t)
                    });
                    for (t, p) in described {
                        match topics.last_mut() {
                            Some(last) if last.topic.as_str() == t => last.partitions.push(p),
                            _ => topics.push(
                                TopicData::default()
                                    .with_topic(TopicName(sb(t)))
                                    .with_partitions(vec![p]),
                            ),
                        }
                    }
                    s.with_producer_id(d.producer_id.into())
                        .with_producer_epoch(d.producer_epoch)
                        .with_transaction_state(sb(d.state.name()))
                        .with_transaction_timeout_ms(d.txn_timeout_ms)
                        .with_transaction_start_time_ms(d.txn_start_timestamp)
                        .with_topics(topics)
                }
                Err(e) => s.with_error_code(e.error_code()),
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

/// ListTransactions, with the state and producer-id filters, the duration filter (v1+)
/// and the transactional-id pattern (v2+).
pub async fn handle_list_transactions(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let pattern = match req.transactional_id_pattern.as_deref() {
        Some(p) if ctx.api_version >= 2 && !p.is_empty() => match regex::Regex::new(p) {
            Ok(r) => Some(r),
            Err(_) => {
                return ListTransactionsResponse::default()
                    .with_error_code(TxnError::InvalidRequest(String::new()).error_code())
            }
        },
        _ => None,
    };
    let unknown: Vec<_> = req
        .state_filters
        .iter()
        .filter(|s| TxnState::from_name(s).is_none())
        .cloned()
        .collect();
    let filter = ListFilter {
        states: req.state_filters.iter().map(|s| s.to_string()).collect(),
        producer_ids: req.producer_id_filters.iter().map(|p| p.0).collect(),
        duration_ms: if ctx.api_version >= 1 {
            req.duration_filter
        } else {
            -1
        },
        pattern,
    };
    let states = broker
        .txn
        .list(&filter)
        .into_iter()
        .filter(|l| {
            authorize(
                broker,
                ctx,
                AclOperation::Describe,
                ResourceType::TransactionalId,
                &l.transactional_id,
            )
        })
        .map(|l| {
            ListedState::default()
                .with_transactional_id(TransactionalId(sb(l.transactional_id)))
                .with_producer_id(l.producer_id.into())
                .with_transaction_state(sb(l.state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(states)
}
