//! Producer and transaction cases: the fixture transaction stays ongoing (records on the side
//! topic, offsets added for a group) for the whole matrix; each state-changing case makes a
//! fresh transactional id.

use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

use super::env::{s, tn, Env, NodeId};
use super::Meaning;
use crate::batch::{encode_batch, Producer, Rec};
use crate::wire::WireClient;

type R = Result<Meaning, String>;

/// Versions the fixture uses, served by Brook and Kafka 4.4 alike.
const INIT_V: i16 = 3;
const ADD_V: i16 = 3;
/// Long enough that the fixture transaction outlives the matrix.
const TXN_TIMEOUT_MS: i32 = 300_000;

/// A transactional id's producer id and epoch from its coordinator (InitProducerId v3).
fn init(env: &mut Env, txn: &str) -> Result<(NodeId, i64, i16), String> {
    let node = env.coordinator(txn, 1);
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(txn))))
        .with_transaction_timeout_ms(TXN_TIMEOUT_MS);
    let r = env.retry_coordinator(
        &format!("InitProducerId {txn}"),
        |env| env.call(node, INIT_V, &req),
        |r| r.error_code,
    )?;
    if r.error_code != 0 {
        return Err(format!("InitProducerId {txn}: {r:?}"));
    }
    Ok((node, r.producer_id.0, r.producer_epoch))
}

fn add_request(
    v: i16,
    txn: &str,
    pid: i64,
    epoch: i16,
    topics: &[(&str, i32)],
) -> AddPartitionsToTxnRequest {
    let topics: Vec<_> = topics
        .iter()
        .map(|(t, p)| {
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(tn(t))
                .with_partitions(vec![*p])
        })
        .collect();
    if v >= 4 {
        return AddPartitionsToTxnRequest::default().with_transactions(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(s(txn)))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_topics(topics),
        ]);
    }
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(txn)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(topics)
}

/// The partitions' error codes of an AddPartitionsToTxn answer, by (topic, partition).
fn add_codes(r: &AddPartitionsToTxnResponse) -> Vec<(String, i32, i16)> {
    let topics = r.results_by_topic_v3_and_below.iter().chain(
        r.results_by_transaction
            .iter()
            .flat_map(|t| t.topic_results.iter()),
    );
    let mut out: Vec<_> = topics
        .flat_map(|t| {
            t.results_by_partition.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.partition_error_code,
                )
            })
        })
        .collect();
    out.sort();
    out
}

/// A transactional batch of one record: `encode_batch` with attribute bit 4 and the CRC redone.
fn txn_batch(pid: i64, epoch: i16) -> Vec<u8> {
    let mut b = encode_batch(
        Producer {
            id: pid,
            epoch,
            base_sequence: 0,
        },
        &[Rec::kv("t", "x", 1_700_000_000_000)],
    );
    b[crate::batch::ATTRIBUTES_OFFSET + 1] |= 0x10;
    let crc = crc32c::crc32c(&b[crate::batch::ATTRIBUTES_OFFSET..]);
    b[crate::batch::CRC_OFFSET..crate::batch::CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Begins a transaction of `txn` with one record on the side topic; returns its producer.
fn begin_with_record(env: &mut Env, txn: &str) -> Result<(i64, i16), String> {
    let side = env.fix.side.clone();
    let (node, pid, epoch) = init(env, txn)?;
    let r = env.call(
        node,
        ADD_V,
        &add_request(ADD_V, txn, pid, epoch, &[(&side, 0)]),
    )?;
    if add_codes(&r).iter().any(|c| c.2 != 0) {
        return Err(format!("AddPartitionsToTxn {txn}: {r:?}"));
    }
    let mut req = WireClient::produce_request(&side, 0, txn_batch(pid, epoch), -1);
    req.transactional_id = Some(TransactionalId(s(txn)));
    let leader = env.leader_of(&side, 0);
    let pr = env.call(leader, 9, &req)?;
    if pr.responses[0].partition_responses[0].error_code != 0 {
        return Err(format!("transactional Produce {txn}: {pr:?}"));
    }
    Ok((pid, epoch))
}

/// The fixture transaction: a record on the side topic and offsets added for a group.
pub fn build_transaction(env: &mut Env) {
    let f = env.fix.clone();
    let (pid, epoch) = begin_with_record(env, &f.txn).unwrap_or_else(|e| panic!("{e}"));
    let node = env.coordinator(&f.txn, 1);
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s(&f.txn)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(s(&f.txn_group)));
    let r = env
        .call(node, ADD_V, &req)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.error_code, 0, "AddOffsetsToTxn: {r:?}");
    env.fix.txn_pid = pid;
    env.fix.txn_epoch = epoch;
}

/// An idempotent producer's id, and a fresh transactional id's.
pub fn init_producer_id(env: &mut Env, v: i16) -> R {
    let txn = env.fresh("init");
    let any = env.any();
    let plain = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(TXN_TIMEOUT_MS);
    let a = env.call(any, v, &plain)?;
    let node = env.coordinator(&txn, 1);
    let b = env.call(
        node,
        v,
        &plain.with_transactional_id(Some(TransactionalId(s(&txn)))),
    )?;
    let m = |r: &InitProducerIdResponse| {
        format!(
            "error {} id {} epoch {}",
            r.error_code,
            r.producer_id.0 >= 0,
            r.producer_epoch
        )
    };
    Ok(format!("idempotent {}; transactional {}", m(&a), m(&b)))
}

pub fn add_partitions_to_txn(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let txn = env.fresh("add");
    let (node, pid, epoch) = init(env, &txn)?;
    let r = env.call(
        node,
        v,
        &add_request(v, &txn, pid, epoch, &[(&f.side, 0), (&f.data, 1)]),
    )?;
    let codes: Vec<(bool, i32, i16)> = add_codes(&r)
        .into_iter()
        .map(|(t, p, c)| (t == f.side, p, c))
        .collect();
    Ok(format!(
        "error {} (side, partition, error) {codes:?}",
        r.error_code
    ))
}

pub fn add_offsets_to_txn(env: &mut Env, v: i16) -> R {
    let txn = env.fresh("offsets");
    let (node, pid, epoch) = init(env, &txn)?;
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s(&txn)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(s(&env.fix.txn_group)));
    Ok(format!("error {}", env.call(node, v, &req)?.error_code))
}

/// A fresh transaction with a record, committed.
pub fn end_txn(env: &mut Env, v: i16) -> R {
    let txn = env.fresh("end");
    let (pid, epoch) = begin_with_record(env, &txn)?;
    let node = env.coordinator(&txn, 1);
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(&txn)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(true);
    Ok(format!("error {}", env.call(node, v, &req)?.error_code))
}

/// The fixture transaction commits an offset for its group.
pub fn txn_offset_commit(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let node = env.coordinator(&f.txn_group, 0);
    let mut req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s(&f.txn)))
        .with_group_id(GroupId(s(&f.txn_group)))
        .with_producer_id(ProducerId(f.txn_pid))
        .with_producer_epoch(f.txn_epoch)
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(tn(&f.data))
                .with_topic_id(f.data_id)
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ]);
    if v >= 3 {
        req.generation_id = -1;
    }
    let r = env.call(node, v, &req)?;
    let codes = partition_codes!(r.topics);
    // The answer names the topic as the request did: by id from v6, by name before.
    let ours = r.topics.iter().all(|t| match v >= 6 {
        true => t.topic_id == f.data_id,
        false => t.name.as_str() == f.data,
    });
    Ok(format!("ours {ours} (partition, error) {codes:?}"))
}

/// The fixture transaction, and an id never used (TRANSACTIONAL_ID_NOT_FOUND).
pub fn describe_transactions(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let missing = env.fresh("notxn");
    let node = env.coordinator(&f.txn, 1);
    let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![
        TransactionalId(s(&f.txn)),
        TransactionalId(s(&missing)),
    ]);
    let r = env.call(node, v, &req)?;
    let out: Vec<String> = r
        .transaction_states
        .iter()
        .map(|t| {
            if t.transactional_id.0.as_str() == missing {
                return format!("missing error {}", t.error_code);
            }
            let topics: Vec<(bool, Vec<i32>)> = t
                .topics
                .iter()
                .map(|tp| (tp.topic.0.as_str() == f.side, tp.partitions.clone()))
                .collect();
            format!(
                "fixture error {} {} ours {} (side, partitions) {topics:?}",
                t.error_code,
                t.transaction_state.as_str(),
                t.producer_id.0 == f.txn_pid
            )
        })
        .collect();
    Ok(out.join("; "))
}

pub fn list_transactions(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let node = env.coordinator(&f.txn, 1);
    let r = env.call(node, v, &ListTransactionsRequest::default())?;
    let ours: Vec<String> = r
        .transaction_states
        .iter()
        .filter(|t| t.transactional_id.0.as_str() == f.txn)
        .map(|t| {
            format!(
                "{} {}",
                t.transaction_state.as_str(),
                t.producer_id.0 == f.txn_pid
            )
        })
        .collect();
    Ok(format!("error {} {ours:?}", r.error_code))
}

/// A commit marker for a fresh transaction's record, as its coordinator would write it: at v2
/// with transaction version 2, whose coordinator bumped the epoch at EndTxn. There a marker at
/// the producer's own epoch, with its transaction open, is INVALID_PRODUCER_EPOCH first
/// (Kafka's `ProducerAppendInfo.checkProducerEpoch`).
pub fn write_txn_markers(env: &mut Env, v: i16) -> R {
    const TRANSACTION_VERSION_2: i8 = 2;
    let side = env.fix.side.clone();
    let txn = env.fresh("marker");
    let (pid, epoch) = begin_with_record(env, &txn)?;
    let marker = |epoch: i16, tv: i8| {
        WriteTxnMarkersRequest::default().with_markers(vec![
            write_txn_markers_request::WritableTxnMarker::default()
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_transaction_result(true)
                .with_transaction_version(tv)
                .with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(tn(&side))
                        .with_partition_indexes(vec![0]),
                ]),
        ])
    };
    let leader = env.leader_of(&side, 0);
    let codes = |r: &WriteTxnMarkersResponse| {
        let topics: Vec<_> = r.markers.iter().flat_map(|m| m.topics.iter()).collect();
        partition_codes!(topics)
    };
    let req = match v >= 2 {
        true => {
            let stale = env.call(leader, v, &marker(epoch, TRANSACTION_VERSION_2))?;
            let expected = vec![(0, ResponseError::InvalidProducerEpoch.code())];
            if codes(&stale) != expected {
                return Err(format!(
                    "WriteTxnMarkers v{v} at the producer's epoch: {stale:?}"
                ));
            }
            marker(epoch + 1, TRANSACTION_VERSION_2)
        }
        false => marker(epoch, 0),
    };
    let r = env.call(leader, v, &req)?;
    Ok(format!("(partition, error) {:?}", codes(&r)))
}

/// The side partition's producers: the fixture transaction's is active with an open start.
pub fn describe_producers(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let req = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(tn(&f.side))
            .with_partition_indexes(vec![0]),
    ]);
    let leader = env.leader_of(&f.side, 0);
    let r = env.call(leader, v, &req)?;
    let out: Vec<String> = r
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            let ours = p
                .active_producers
                .iter()
                .find(|a| a.producer_id.0 == f.txn_pid);
            format!(
                "p{} error {} fixture open {}",
                p.partition_index,
                p.error_code,
                ours.is_some_and(|a| a.current_txn_start_offset >= 0)
            )
        })
        .collect();
    Ok(out.join("; "))
}
