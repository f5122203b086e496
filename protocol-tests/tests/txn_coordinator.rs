//! The transaction coordinator over the raw wire: FindCoordinator key type 1,
//! InitProducerId with a transactional id (epoch bumps, fencing, the timeout bound),
//! AddPartitionsToTxn / EndTxn error codes as Kafka 4.4 answers them, DescribeTransactions
//! and ListTransactions states, markers making a commit visible at read_committed, the
//! coordinator aborting a timed-out transaction, a restart that reloads an open
//! transaction and finishes a PrepareCommit whose markers were not written, and the order of
//! checks while a commit's markers are in flight (CONCURRENT_TRANSACTIONS before any fence),
//! on one node and on three.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, parse_batches, Producer, Rec};
use brook_protocol_tests::process::run_brook;
use brook_protocol_tests::wire::*;
use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;

const FIND_COORDINATOR_V3: i16 = 3;
const FIND_COORDINATOR_V4: i16 = 4;
const INIT_PRODUCER_ID_V3: i16 = 3;
const INIT_PRODUCER_ID_V4: i16 = 4;
const ADD_PARTITIONS_V1: i16 = 1;
const ADD_PARTITIONS_V3: i16 = 3;
const ADD_PARTITIONS_V4: i16 = 4;
const END_TXN_V1: i16 = 1;
const END_TXN_V3: i16 = 3;
const DESCRIBE_TRANSACTIONS_V: i16 = 0;
const LIST_TRANSACTIONS_V: i16 = 1;
const ADD_OFFSETS_V: i16 = 3;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tid(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

/// A broker with few `__transaction_state` partitions (fast to load) and an admin listener.
fn start() -> Broker {
    Broker::start_with(&[
        ("transaction.state.log.num.partitions", "5"),
        ("admin.listener", "127.0.0.1:0"),
    ])
}

/// Makes the broker drop every WriteTxnMarkers request: transactions stay prepared.
fn drop_markers(b: &Broker) {
    let out = run_brook(
        &[
            "fault",
            "add",
            "--admin",
            &b.admin_address(),
            "--api",
            "27",
            "--action",
            "drop-request",
            "--times",
            "1000000",
        ],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "brook fault add: {out:?}");
}

/// FindCoordinator for a transactional id, as clients send it first (it creates
/// `__transaction_state`); this node is the only one.
fn find(c: &mut WireClient, id: &str) {
    let req = FindCoordinatorRequest::default()
        .with_key(s(id))
        .with_key_type(1);
    let r = c.request(FIND_COORDINATOR_V3, &req);
    assert_eq!(r.error_code, 0, "FindCoordinator {id}: {r:?}");
}

fn init(c: &mut WireClient, id: &str, timeout_ms: i32, version: i16) -> InitProducerIdResponse {
    find(c, id);
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(tid(id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    c.request(version, &req)
}

fn init_ok(c: &mut WireClient, id: &str) -> (i64, i16) {
    let r = poll_until_ok("InitProducerId", Duration::from_secs(30), || {
        let r = init(c, id, 60_000, INIT_PRODUCER_ID_V4);
        if r.error_code == E::ConcurrentTransactions.code() {
            return Err(format!("{r:?}"));
        }
        Ok(r)
    });
    assert_eq!(r.error_code, 0, "InitProducerId {id}: {r:?}");
    (r.producer_id.0, r.producer_epoch)
}

fn add_partitions(
    c: &mut WireClient,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    partitions: &[(&str, i32)],
) -> Vec<i16> {
    let topics: Vec<AddPartitionsToTxnTopic> = partitions
        .iter()
        .map(|(t, p)| {
            AddPartitionsToTxnTopic::default()
                .with_name(topic_name(t))
                .with_partitions(vec![*p])
        })
        .collect();
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(tid(id))
        .with_v3_and_below_producer_id(pid.into())
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(topics);
    let resp = c.request(version, &req);
    resp.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
        .collect()
}

fn verify_only(
    c: &mut WireClient,
    id: &str,
    (pid, epoch): (i64, i16),
    partitions: &[(&str, i32)],
) -> Vec<i16> {
    let topics = partitions
        .iter()
        .map(|(t, p)| {
            AddPartitionsToTxnTopic::default()
                .with_name(topic_name(t))
                .with_partitions(vec![*p])
        })
        .collect();
    let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(tid(id))
            .with_producer_id(pid.into())
            .with_producer_epoch(epoch)
            .with_verify_only(true)
            .with_topics(topics),
    ]);
    let resp = c.request(ADD_PARTITIONS_V4, &req);
    // Answered in the order asked (one partition per topic here).
    partitions
        .iter()
        .map(|(t, _)| {
            resp.results_by_transaction[0]
                .topic_results
                .iter()
                .find(|r| r.name.as_str() == *t)
                .map(|r| r.results_by_partition[0].partition_error_code)
                .unwrap_or_else(|| panic!("no result for {t}: {resp:?}"))
        })
        .collect()
}

fn end_txn(
    c: &mut WireClient,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
) -> i16 {
    let req = EndTxnRequest::default()
        .with_transactional_id(tid(id))
        .with_producer_id(pid.into())
        .with_producer_epoch(epoch)
        .with_committed(commit);
    c.request::<EndTxnRequest>(version, &req).error_code
}

fn describe(c: &mut WireClient, id: &str) -> describe_transactions_response::TransactionState {
    let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![tid(id)]);
    let resp = c.request(DESCRIBE_TRANSACTIONS_V, &req);
    resp.transaction_states[0].clone()
}

fn state_of(c: &mut WireClient, id: &str) -> String {
    describe(c, id).transaction_state.to_string()
}

fn wait_state(c: &mut WireClient, id: &str, want: &str) {
    poll_until_ok(
        &format!("{id} to reach {want}"),
        Duration::from_secs(30),
        || {
            let st = state_of(c, id);
            if st == want {
                Ok(())
            } else {
                Err(st)
            }
        },
    );
}

#[test]
fn find_coordinator_key_type_1() {
    let b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let req = FindCoordinatorRequest::default()
        .with_key(s("tx-find"))
        .with_key_type(1);
    let r = c.request(FIND_COORDINATOR_V3, &req);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!((r.node_id.0, r.port), (1, b.port() as i32), "{r:?}");
    // Batched keys (v4+): every id answered.
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![s("tx-a"), s("tx-b")]);
    let r = c.request(FIND_COORDINATOR_V4, &req);
    assert_eq!(r.coordinators.len(), 2, "{r:?}");
    for k in &r.coordinators {
        assert_eq!((k.error_code, k.node_id.0), (0, 1), "{r:?}");
    }
    // The topic exists, compacted, with the configured partitions.
    let m = c.metadata(&["__transaction_state"], false);
    assert_eq!(m.topics[0].error_code, 0, "{m:?}");
    assert_eq!(m.topics[0].partitions.len(), 5, "{m:?}");
}

#[test]
fn init_producer_id_bumps_fences_and_bounds_the_timeout() {
    let b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let first = init_ok(&mut c, "tx-init");
    assert_eq!(first.1, 0, "a new id starts at epoch 0");
    let second = init_ok(&mut c, "tx-init");
    assert_eq!(second, (first.0, 1), "same producer id, epoch bumped");

    let r = init(&mut c, "tx-init", 900_001, INIT_PRODUCER_ID_V4);
    assert_eq!(r.error_code, E::InvalidTransactionTimeout.code(), "{r:?}");
    let r = init(&mut c, "", 60_000, INIT_PRODUCER_ID_V4);
    assert_eq!(r.error_code, E::InvalidRequest.code(), "{r:?}");

    // The first producer is fenced: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
    let topic = unique_topic("txn-init");
    c.ensure_topic(&topic);
    assert_eq!(
        add_partitions(&mut c, ADD_PARTITIONS_V3, "tx-init", first, &[(&topic, 0)]),
        vec![E::ProducerFenced.code()]
    );
    assert_eq!(
        add_partitions(&mut c, ADD_PARTITIONS_V1, "tx-init", first, &[(&topic, 0)]),
        vec![E::InvalidProducerEpoch.code()]
    );

    // KIP-360: a producer that sends its current id and epoch gets the next epoch; one with
    // a stale epoch is fenced (INVALID_PRODUCER_EPOCH before v4).
    let bump = |c: &mut WireClient, (pid, epoch): (i64, i16), v: i16| {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(tid("tx-init")))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(pid.into())
            .with_producer_epoch(epoch);
        c.request(v, &req)
    };
    let r = bump(&mut c, second, INIT_PRODUCER_ID_V4);
    assert_eq!((r.error_code, r.producer_epoch), (0, 2), "{r:?}");
    let r = bump(&mut c, (first.0, 0), INIT_PRODUCER_ID_V4);
    assert_eq!(r.error_code, E::ProducerFenced.code(), "{r:?}");
    let r = bump(&mut c, (first.0, 0), INIT_PRODUCER_ID_V3);
    assert_eq!(r.error_code, E::InvalidProducerEpoch.code(), "{r:?}");
}

#[test]
fn error_codes_and_states_while_markers_are_pending() {
    let b = start();
    drop_markers(&b);
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("txn-codes");
    c.ensure_topic(&topic);
    let id = "tx-codes";
    let p = init_ok(&mut c, id);

    assert_eq!(
        end_txn(&mut c, END_TXN_V3, id, p, true),
        E::InvalidTxnState.code(),
        "EndTxn with nothing open"
    );
    assert_eq!(
        add_partitions(
            &mut c,
            ADD_PARTITIONS_V3,
            id,
            (p.0 + 1000, p.1),
            &[(&topic, 0)]
        ),
        vec![E::InvalidProducerIdMapping.code()]
    );
    let mut codes = add_partitions(
        &mut c,
        ADD_PARTITIONS_V3,
        id,
        p,
        &[(&topic, 0), ("no-such-topic", 0)],
    );
    codes.sort();
    assert_eq!(
        codes,
        vec![
            E::UnknownTopicOrPartition.code(),
            E::OperationNotAttempted.code()
        ]
    );
    assert_eq!(state_of(&mut c, id), "Empty", "nothing was added");

    assert_eq!(
        add_partitions(&mut c, ADD_PARTITIONS_V3, id, p, &[(&topic, 0)]),
        vec![0]
    );
    let d = describe(&mut c, id);
    assert_eq!(
        (d.error_code, d.transaction_state.as_str()),
        (0, "Ongoing"),
        "{d:?}"
    );
    assert_eq!((d.producer_id.0, d.producer_epoch), p);
    assert_eq!(d.topics.len(), 1);
    assert_eq!(d.topics[0].partitions, vec![0]);
    assert!(d.transaction_start_time_ms > 0, "{d:?}");
    let r = c.request(
        ADD_OFFSETS_V,
        &AddOffsetsToTxnRequest::default()
            .with_transactional_id(tid(id))
            .with_producer_id(p.0.into())
            .with_producer_epoch(p.1)
            .with_group_id(GroupId(s("txn-group"))),
    );
    assert_eq!(r.error_code, 0, "AddOffsetsToTxn: {r:?}");
    assert_eq!(
        describe(&mut c, id).topics.len(),
        2,
        "__consumer_offsets joined"
    );

    // Verification, as a partition leader asks it (v4, verify only).
    let other = unique_topic("txn-codes-other");
    c.ensure_topic(&other);
    assert_eq!(
        verify_only(&mut c, id, p, &[(&topic, 0), (&other, 0)]),
        vec![0, E::TransactionAbortable.code()]
    );

    // ListTransactions filters.
    let list = |c: &mut WireClient, states: &[&str], pids: &[i64]| {
        let req = ListTransactionsRequest::default()
            .with_state_filters(states.iter().map(|x| s(x)).collect())
            .with_producer_id_filters(pids.iter().map(|x| (*x).into()).collect())
            .with_duration_filter(-1);
        c.request(LIST_TRANSACTIONS_V, &req)
    };
    let r = list(&mut c, &["Ongoing", "Bogus"], &[]);
    assert_eq!(r.unknown_state_filters, vec![s("Bogus")], "{r:?}");
    assert!(
        r.transaction_states
            .iter()
            .any(|t| t.transactional_id.as_str() == id),
        "{r:?}"
    );
    let r = list(&mut c, &["CompleteCommit"], &[]);
    assert!(r.transaction_states.is_empty(), "{r:?}");
    let r = list(&mut c, &[], &[p.0 + 1]);
    assert!(r.transaction_states.is_empty(), "{r:?}");

    // Commit: PrepareCommit is written, the answer is immediate; the markers are dropped,
    // so the transaction stays prepared.
    assert_eq!(end_txn(&mut c, END_TXN_V3, id, p, true), 0);
    assert_eq!(state_of(&mut c, id), "PrepareCommit");
    assert_eq!(
        end_txn(&mut c, END_TXN_V3, id, p, true),
        E::ConcurrentTransactions.code()
    );
    // The completion is already pending (Kafka's prepareComplete runs right after the
    // PrepareCommit write), so an abort is CONCURRENT_TRANSACTIONS too, as in Kafka.
    assert_eq!(
        end_txn(&mut c, END_TXN_V3, id, p, false),
        E::ConcurrentTransactions.code()
    );
    assert_eq!(
        add_partitions(&mut c, ADD_PARTITIONS_V3, id, p, &[(&topic, 0)]),
        vec![E::ConcurrentTransactions.code()]
    );
    assert_eq!(
        verify_only(&mut c, id, p, &[(&topic, 0)]),
        vec![E::ConcurrentTransactions.code()]
    );
    let r = init(&mut c, id, 60_000, INIT_PRODUCER_ID_V4);
    assert_eq!(r.error_code, E::ConcurrentTransactions.code(), "{r:?}");
    // An old producer's EndTxn: fenced, as INVALID_PRODUCER_EPOCH before v2.
    assert_eq!(
        end_txn(&mut c, END_TXN_V1, id, (p.0, p.1 - 1), true),
        E::InvalidProducerEpoch.code()
    );
}

/// A transactional batch: attribute bit 4 set, CRC redone.
fn txn_batch(pid: i64, epoch: i16, seq: i32, records: &[Rec]) -> Vec<u8> {
    let mut b = encode_batch(
        Producer {
            id: pid,
            epoch,
            base_sequence: seq,
        },
        records,
    );
    b[22] |= 0x10;
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

fn recs(tag: &str, n: usize) -> Vec<Rec> {
    (0..n)
        .map(|i| {
            Rec::kv(
                &format!("{tag}-{i}"),
                &format!("{tag}-v{i}"),
                now_ms() + i as i64,
            )
        })
        .collect()
}

fn produce_txn(
    c: &mut WireClient,
    id: &str,
    topic: &str,
    (pid, epoch): (i64, i16),
    seq: i32,
    n: usize,
) -> i16 {
    let mut req =
        WireClient::produce_request(topic, 0, txn_batch(pid, epoch, seq, &recs(id, n)), -1);
    req.transactional_id = Some(tid(id));
    let resp = c.request(PRODUCE_V, &req);
    resp.responses[0].partition_responses[0].error_code
}

/// Offsets visible at read_committed: the last stable offset, by ListOffsets.
fn lso(c: &mut WireClient, topic: &str) -> i64 {
    let mut req = WireClient::list_offsets_request(topic, 0, -1);
    req.isolation_level = 1;
    let resp = c.request(LIST_OFFSETS_V, &req);
    resp.topics[0].partitions[0].offset
}

fn control_types(c: &mut WireClient, topic: &str) -> Vec<i16> {
    let pd = c.fetch(topic, 0, 0);
    parse_batches(&pd.records.unwrap_or_default())
        .expect("batches parse")
        .iter()
        .filter(|b| b.is_control())
        .map(|b| {
            let key = b.records[0].key.as_ref().expect("marker key");
            i16::from_be_bytes([key[2], key[3]])
        })
        .collect()
}

#[test]
fn commit_markers_make_records_stable_and_a_restart_finishes_a_prepared_commit() {
    let mut b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("txn-e2e");
    c.ensure_topic(&topic);

    // A committed transaction: markers written, records below the LSO.
    let p = init_ok(&mut c, "tx-e2e");
    assert_eq!(
        add_partitions(&mut c, ADD_PARTITIONS_V3, "tx-e2e", p, &[(&topic, 0)]),
        vec![0]
    );
    assert_eq!(produce_txn(&mut c, "tx-e2e", &topic, p, 0, 3), 0);
    assert_eq!(lso(&mut c, &topic), 0, "open transaction holds the LSO");
    assert_eq!(end_txn(&mut c, END_TXN_V3, "tx-e2e", p, true), 0);
    wait_state(&mut c, "tx-e2e", "CompleteCommit");
    assert_eq!(lso(&mut c, &topic), 4, "3 records and the COMMIT marker");
    assert_eq!(control_types(&mut c, &topic), vec![1]);
    assert!(describe(&mut c, "tx-e2e").topics.is_empty());

    // A commit whose markers are dropped, and an open transaction, across a restart.
    drop_markers(&b);
    let q = init_ok(&mut c, "tx-prepared");
    assert_eq!(
        add_partitions(&mut c, ADD_PARTITIONS_V3, "tx-prepared", q, &[(&topic, 0)]),
        vec![0]
    );
    assert_eq!(produce_txn(&mut c, "tx-prepared", &topic, q, 0, 2), 0);
    assert_eq!(end_txn(&mut c, END_TXN_V3, "tx-prepared", q, true), 0);
    assert_eq!(state_of(&mut c, "tx-prepared"), "PrepareCommit");
    let o = init_ok(&mut c, "tx-open");
    assert_eq!(
        add_partitions(&mut c, ADD_PARTITIONS_V3, "tx-open", o, &[(&topic, 0)]),
        vec![0]
    );
    assert_eq!(
        lso(&mut c, &topic),
        4,
        "the prepared transaction holds the LSO"
    );

    b.restart(); // the fault rules are gone with the old process
    let mut c = WireClient::connect(&b.bootstrap());
    // The reloaded coordinator sends the PrepareCommit's markers and completes it.
    wait_state(&mut c, "tx-prepared", "CompleteCommit");
    assert_eq!(lso(&mut c, &topic), 7, "2 more records and their marker");
    assert_eq!(control_types(&mut c, &topic), vec![1, 1]);
    let d = describe(&mut c, "tx-open");
    assert_eq!(d.transaction_state.as_str(), "Ongoing", "{d:?}");
    assert_eq!((d.producer_id.0, d.producer_epoch), o);
    assert_eq!(d.topics[0].partitions, vec![0]);
    // The reloaded open transaction can still be aborted by its producer.
    assert_eq!(end_txn(&mut c, END_TXN_V3, "tx-open", o, false), 0);
    wait_state(&mut c, "tx-open", "CompleteAbort");
    assert_eq!(control_types(&mut c, &topic), vec![1, 1, 0]);
}

#[test]
fn a_timed_out_transaction_is_aborted_and_its_producer_fenced() {
    let b = Broker::start_with(&[
        ("transaction.state.log.num.partitions", "5"),
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "200",
        ),
    ]);
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("txn-timeout");
    c.ensure_topic(&topic);
    let r = init(&mut c, "tx-slow", 1000, INIT_PRODUCER_ID_V4);
    assert_eq!(r.error_code, 0, "{r:?}");
    let p = (r.producer_id.0, r.producer_epoch);
    assert_eq!(
        add_partitions(&mut c, ADD_PARTITIONS_V3, "tx-slow", p, &[(&topic, 0)]),
        vec![0]
    );
    assert_eq!(produce_txn(&mut c, "tx-slow", &topic, p, 0, 2), 0);
    wait_state(&mut c, "tx-slow", "CompleteAbort");
    let d = describe(&mut c, "tx-slow");
    assert_eq!(
        d.producer_epoch,
        p.1 + 1,
        "aborted at a bumped epoch: {d:?}"
    );
    assert_eq!(control_types(&mut c, &topic), vec![0]);
    // The zombie's commit is fenced (Kafka 4.4: the producer sees a fenced epoch).
    assert_eq!(
        end_txn(&mut c, END_TXN_V3, "tx-slow", p, true),
        E::ProducerFenced.code()
    );
    assert_eq!(
        produce_txn(&mut c, "tx-slow", &topic, p, 2, 1),
        E::InvalidProducerEpoch.code()
    );
}

#[test]
fn a_transactional_produce_outside_the_transaction_is_refused() {
    let b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let added = unique_topic("txn-verify-in");
    let not_added = unique_topic("txn-verify-out");
    c.ensure_topic(&added);
    c.ensure_topic(&not_added);
    let p = init_ok(&mut c, "tx-verify");
    assert_eq!(
        add_partitions(&mut c, ADD_PARTITIONS_V3, "tx-verify", p, &[(&added, 0)]),
        vec![0]
    );
    assert_eq!(produce_txn(&mut c, "tx-verify", &added, p, 0, 1), 0);
    // Never added: the coordinator says the partition is not in the transaction.
    // Produce v9 (PRODUCE_V) predates TRANSACTION_ABORTABLE: Kafka answers INVALID_TXN_STATE.
    const {
        assert!(
            PRODUCE_V < 11,
            "the expected code below is for Produce before v11"
        )
    };
    let refused = E::InvalidTxnState.code();
    assert_eq!(
        produce_txn(&mut c, "tx-verify", &not_added, p, 0, 1),
        refused
    );
    assert_eq!(
        c.list_offsets(&not_added, 0, -1).offset,
        0,
        "nothing appended"
    );
    // A late write after the commit cannot reopen the transaction on the partition.
    assert_eq!(end_txn(&mut c, END_TXN_V3, "tx-verify", p, true), 0);
    wait_state(&mut c, "tx-verify", "CompleteCommit");
    assert_eq!(produce_txn(&mut c, "tx-verify", &added, p, 1, 1), refused);
    assert_eq!(lso(&mut c, &added), 2, "one record and its marker");
}

/// Produce v12: transaction version 2, where the leader adds the partition to the
/// transaction itself.
const PRODUCE_V12: i16 = 12;
/// EndTxn v5: transaction version 2, the epoch bumped at every end.
const END_TXN_V5: i16 = 5;

fn produce_txn_v12(
    c: &mut WireClient,
    id: &str,
    topic: &str,
    (pid, epoch): (i64, i16),
    seq: i32,
    n: usize,
) -> i16 {
    let mut req =
        WireClient::produce_request(topic, 0, txn_batch(pid, epoch, seq, &recs(id, n)), -1);
    req.transactional_id = Some(tid(id));
    let resp = c.request(PRODUCE_V12, &req);
    resp.responses[0].partition_responses[0].error_code
}

/// EndTxn v5: the error and the producer id and epoch the next transaction uses.
fn end_txn_v5(
    c: &mut WireClient,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
) -> (i16, (i64, i16)) {
    let req = EndTxnRequest::default()
        .with_transactional_id(tid(id))
        .with_producer_id(pid.into())
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let r = c.request::<EndTxnRequest>(END_TXN_V5, &req);
    (r.error_code, (r.producer_id.0, r.producer_epoch))
}

#[test]
fn transaction_version_2_adds_partitions_implicitly_and_bumps_the_epoch_at_every_end() {
    let b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let features = c.api_versions();
    let tv = features
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .unwrap_or_else(|| panic!("transaction.version not finalized: {features:?}"));
    assert_eq!(tv.max_version_level, 2, "Kafka 4.4's default level");
    let topic = unique_topic("txn-v2");
    c.ensure_topic(&topic);
    let (pid, e) = init_ok(&mut c, "tx-v2");

    // No AddPartitionsToTxn: Produce v12 adds the partition.
    assert_eq!(produce_txn_v12(&mut c, "tx-v2", &topic, (pid, e), 0, 2), 0);
    let d = describe(&mut c, "tx-v2");
    assert_eq!(d.transaction_state.as_str(), "Ongoing", "{d:?}");
    assert_eq!(d.topics[0].partitions, vec![0], "{d:?}");
    assert_eq!(lso(&mut c, &topic), 0, "the open transaction holds the LSO");

    // The commit bumps the epoch and says so; the marker carries the new epoch.
    assert_eq!(
        end_txn_v5(&mut c, "tx-v2", (pid, e), true),
        (0, (pid, e + 1))
    );
    wait_state(&mut c, "tx-v2", "CompleteCommit");
    assert_eq!(describe(&mut c, "tx-v2").producer_epoch, e + 1);
    assert_eq!(lso(&mut c, &topic), 3, "2 records and the COMMIT marker");
    // A retry names the epoch before the bump and succeeds without a second commit.
    assert_eq!(
        end_txn_v5(&mut c, "tx-v2", (pid, e), true),
        (0, (pid, e + 1))
    );
    // A retried abort of the committed transaction is not a retry: INVALID_TXN_STATE.
    assert_eq!(
        end_txn_v5(&mut c, "tx-v2", (pid, e), false).0,
        E::InvalidTxnState.code()
    );

    // The next transaction runs at the new epoch from sequence 0; the old epoch is fenced.
    assert_eq!(
        produce_txn_v12(&mut c, "tx-v2", &topic, (pid, e + 1), 0, 1),
        0
    );
    assert_eq!(
        produce_txn_v12(&mut c, "tx-v2", &topic, (pid, e), 2, 1),
        E::InvalidProducerEpoch.code(),
        "a write at the epoch before the bump"
    );
    assert_eq!(
        end_txn_v5(&mut c, "tx-v2", (pid, e + 1), false),
        (0, (pid, e + 2))
    );
    wait_state(&mut c, "tx-v2", "CompleteAbort");
    assert_eq!(control_types(&mut c, &topic), vec![1, 0]);
    assert_eq!(lso(&mut c, &topic), 5);
    // An abort with nothing added is accepted in version 2, and bumps the epoch too.
    assert_eq!(
        end_txn_v5(&mut c, "tx-v2", (pid, e + 2), false),
        (0, (pid, e + 3))
    );
    wait_state(&mut c, "tx-v2", "CompleteAbort");
    assert_eq!(
        end_txn_v5(&mut c, "tx-v2", (pid, e + 3), true).0,
        E::InvalidTxnState.code(),
        "a commit with no transaction open"
    );
}

#[test]
fn transaction_version_2_late_commit_after_a_timeout_abort_is_an_invalid_state() {
    let b = Broker::start_with(&[
        ("transaction.state.log.num.partitions", "5"),
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "200",
        ),
    ]);
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("txn-v2-timeout");
    c.ensure_topic(&topic);
    let r = init(&mut c, "tx-v2-slow", 1000, INIT_PRODUCER_ID_V4);
    assert_eq!(r.error_code, 0, "{r:?}");
    let p = (r.producer_id.0, r.producer_epoch);
    assert_eq!(produce_txn_v12(&mut c, "tx-v2-slow", &topic, p, 0, 2), 0);
    wait_state(&mut c, "tx-v2-slow", "CompleteAbort");
    // One bump for the fence and the abort together.
    let d = describe(&mut c, "tx-v2-slow");
    assert_eq!(d.producer_epoch, p.1 + 1, "{d:?}");
    assert_eq!(control_types(&mut c, &topic), vec![0]);
    // Kafka 4.4 reads the producer's epoch as a retry of the abort: a commit is an
    // invalid state (kafka-clients: InvalidTxnStateException), an abort succeeds.
    assert_eq!(
        end_txn_v5(&mut c, "tx-v2-slow", p, true).0,
        E::InvalidTxnState.code()
    );
    assert_eq!(
        end_txn_v5(&mut c, "tx-v2-slow", p, false),
        (0, (p.0, p.1 + 1))
    );
    assert_eq!(
        produce_txn_v12(&mut c, "tx-v2-slow", &topic, p, 2, 1),
        E::InvalidProducerEpoch.code(),
        "the aborted producer's late write"
    );
}

/// A commit whose coordinator dies at a crash point, then restarts: the reloaded
/// coordinator finishes it, and the records become visible exactly once.
fn crash_and_recover(point: &str, topic_prefix: &str) {
    let mut b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic(topic_prefix);
    c.ensure_topic(&topic);
    let id = format!("tx-{topic_prefix}");
    let p = init_ok(&mut c, &id);
    assert_eq!(produce_txn_v12(&mut c, &id, &topic, p, 0, 3), 0);
    b.add_crash_rule(point, None);
    let req = EndTxnRequest::default()
        .with_transactional_id(tid(&id))
        .with_producer_id(p.0.into())
        .with_producer_epoch(p.1)
        .with_committed(true);
    // The process exits before it answers or after; either way the connection ends.
    let _ = c.try_request::<EndTxnRequest>(END_TXN_V5, &req);
    let exit = b
        .await_exit(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("no crash at {point}:\n{}", b.log_tail(40)));
    assert_eq!(exit.code(), Some(137), "a crash point exits 137");
    assert!(b.log_tail(40).contains(&format!("point={point}")));
    b.start_again();
    let mut c = WireClient::connect(&b.bootstrap());
    // The PrepareCommit is in the log: the new coordinator sends the markers and completes.
    wait_state(&mut c, &id, "CompleteCommit");
    // After txn-after-marker the successor writes the marker again, as Kafka's does after a
    // coordinator failover: the second one ends no transaction and changes nothing.
    let markers = control_types(&mut c, &topic);
    let want = if point == "txn-after-marker" { 2 } else { 1 };
    assert_eq!(markers, vec![1; want], "COMMIT markers");
    assert_eq!(
        lso(&mut c, &topic),
        3 + want as i64,
        "3 records and the markers, stable"
    );
    let d = describe(&mut c, &id);
    assert_eq!((d.producer_id.0, d.producer_epoch), (p.0, p.1 + 1), "{d:?}");
}

#[test]
fn a_coordinator_crash_after_the_prepare_record_is_finished_by_its_successor() {
    crash_and_recover("txn-after-prepare-before-markers", "txn-crash-prep");
}

#[test]
fn a_coordinator_crash_after_a_marker_is_finished_by_its_successor() {
    crash_and_recover("txn-after-marker", "txn-crash-mark");
}

#[test]
fn clients_cannot_produce_to_the_internal_topics() {
    let b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let _ = init_ok(&mut c, "tx-internal"); // creates __transaction_state
    let group = FindCoordinatorRequest::default()
        .with_key(s("g-internal"))
        .with_key_type(0);
    let r = c.request(FIND_COORDINATOR_V3, &group); // creates __consumer_offsets
    assert_eq!(r.error_code, 0, "{r:?}");
    for internal in ["__transaction_state", "__consumer_offsets"] {
        let before = c.list_offsets(internal, 0, -1).offset;
        let req = WireClient::produce_request(
            internal,
            0,
            encode_batch(Producer::NONE, &recs("x", 1)),
            -1,
        );
        let resp: ProduceResponse = c.request(PRODUCE_V, &req);
        assert_eq!(
            resp.responses[0].partition_responses[0].error_code,
            E::InvalidTopicException.code(),
            "{internal}: {resp:?}"
        );
        assert_eq!(
            c.list_offsets(internal, 0, -1).offset,
            before,
            "{internal}: nothing appended"
        );
    }
}

/// WriteTxnMarkers held back on a node: every one answered NOT_LEADER_OR_FOLLOWER, which the
/// coordinator retries after its short backoff (a dropped request would hold the sender for
/// its 30 s request timeout after the rule is gone).
const HOLD_MARKERS: [&str; 8] = [
    "--api",
    "27",
    "--action",
    "error",
    "--error",
    "NOT_LEADER_OR_FOLLOWER",
    "--times",
    "1000000",
];

/// franz-go's `GroupTransactSession`: a commit (EndTxn v5 at epoch e, answered with e+1),
/// then at once an empty abort at e+1 while the commit's markers are still being written.
/// Kafka 4.4 checks for a transition in flight before it judges the epoch, so the abort is
/// told to retry (CONCURRENT_TRANSACTIONS), not fenced (PRODUCER_FENCED is fatal for the
/// client), and succeeds at e+2 once the commit completes. `hold` keeps the markers from
/// being written and `release` lets them through; `c` is connected to the coordinator.
fn abort_at_the_bumped_epoch_during_the_commit(
    c: &mut WireClient,
    id: &str,
    topic: &str,
    hold: impl Fn(),
    release: impl Fn(),
) {
    let (pid, e) = init_ok(c, id);
    assert_eq!(
        add_partitions(c, ADD_PARTITIONS_V3, id, (pid, e), &[(topic, 0)]),
        vec![0]
    );
    hold();
    assert_eq!(end_txn_v5(c, id, (pid, e), true), (0, (pid, e + 1)));
    assert_eq!(
        state_of(c, id),
        "PrepareCommit",
        "the markers are held back"
    );

    let concurrent = E::ConcurrentTransactions.code();
    assert_eq!(
        end_txn_v5(c, id, (pid, e + 1), false).0,
        concurrent,
        "the empty abort at the bumped epoch, during the commit's markers"
    );
    assert_eq!(
        end_txn_v5(c, id, (pid, e), true).0,
        concurrent,
        "a retry of the commit"
    );
    assert_eq!(
        add_partitions(c, ADD_PARTITIONS_V3, id, (pid, e), &[(topic, 0)]),
        vec![concurrent],
        "any epoch: the transition in flight is reported first"
    );
    assert_eq!(
        add_partitions(c, ADD_PARTITIONS_V3, id, (pid, e + 1), &[(topic, 0)]),
        vec![concurrent]
    );
    let r = init(c, id, 60_000, INIT_PRODUCER_ID_V4);
    assert_eq!(r.error_code, concurrent, "{r:?}");

    release();
    wait_state(c, id, "CompleteCommit");
    // The client's retry of the abort now goes through, at the next epoch.
    assert_eq!(end_txn_v5(c, id, (pid, e + 1), false), (0, (pid, e + 2)));
    wait_state(c, id, "CompleteAbort");
    // With nothing in flight a real fence is still a fence.
    assert_eq!(
        end_txn_v5(c, id, (pid, e), false).0,
        E::ProducerFenced.code(),
        "an epoch two behind"
    );
    assert_eq!(
        add_partitions(c, ADD_PARTITIONS_V3, id, (pid, e + 1), &[(topic, 0)]),
        vec![E::ProducerFenced.code()]
    );
    assert_eq!(
        add_partitions(c, ADD_PARTITIONS_V3, id, (pid + 1000, e + 2), &[(topic, 0)]),
        vec![E::InvalidProducerIdMapping.code()]
    );
}

#[test]
fn an_abort_at_the_bumped_epoch_during_the_commits_markers_is_told_to_retry() {
    let b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("txn-abort-during-commit");
    c.ensure_topic(&topic);
    let admin = b.admin_address();
    let fault = |args: &[&str]| {
        let mut argv = vec!["fault", args[0], "--admin", &admin];
        argv.extend_from_slice(&args[1..]);
        let out = run_brook(&argv, Duration::from_secs(20));
        assert!(out.status.success(), "brook {argv:?}: {out:?}");
    };
    abort_at_the_bumped_epoch_during_the_commit(
        &mut c,
        "tx-abort-during-commit",
        &topic,
        || fault(&[&["add"], &HOLD_MARKERS[..]].concat()),
        || fault(&["clear"]),
    );
}

#[test]
fn an_abort_at_the_bumped_epoch_during_the_commits_markers_is_told_to_retry_on_3_nodes() {
    let cluster = Cluster::start(3, &[("transaction.state.log.num.partitions", "5")]);
    let topic = unique_topic("txn-abort-during-commit3");
    cluster.create_topic(&topic, 1, 3, &[]);
    let id = "tx-abort-during-commit3";
    // The coordinator is the leader of the id's `__transaction_state` partition.
    let coordinator = poll_until_ok("the coordinator", Duration::from_secs(60), || {
        let mut c = WireClient::try_connect(&cluster.address(1), Duration::from_secs(5))
            .map_err(|e| e.to_string())?;
        let req = FindCoordinatorRequest::default()
            .with_key(s(id))
            .with_key_type(1);
        let r = c.try_request(FIND_COORDINATOR_V3, &req)?;
        match r.error_code {
            0 => Ok(r.node_id.0),
            _ => Err(format!("{r:?}")),
        }
    });
    let mut c = WireClient::connect(&cluster.address(coordinator));
    let ids = cluster.ids();
    abort_at_the_bumped_epoch_during_the_commit(
        &mut c,
        id,
        &topic,
        || {
            for n in &ids {
                cluster.fault_add(*n, &HOLD_MARKERS);
            }
        },
        || {
            for n in &ids {
                cluster.fault_clear(*n);
            }
        },
    );
}
// ------------------------------------------------------------------------------------------
// KIP-890 part 1: the verification guard (Kafka's `VerificationGuard`, checked in
// `UnifiedLog.analyzeAndValidateProducerState`). A leader asks the coordinator whether the
// partition is in the producer's transaction, then appends; if the coordinator aborts the
// transaction in between, the late batch must be refused, or it opens a transaction no marker
// ends (the last stable offset stays behind it) and the producer's next commit on the
// partition makes the aborted record visible at read_committed.
// ------------------------------------------------------------------------------------------

/// How long the coordinator's answer to the verification is held: the abort is done well
/// within it (the test waits for the abort, never for this delay).
const HELD_ANSWER_MS: &str = "4000";

/// Holds the answer to the next verification leader `leader` asks of the coordinator on the
/// node with admin listener `admin` (the AddPartitionsToTxn request a leader sends, or its
/// in-process stand-in when the leader is the coordinator). Returns the rule id.
fn hold_next_verification(admin: &str, leader: i32) -> u64 {
    hold_next_verification_when(admin, leader, "after")
}

/// [`hold_next_verification`], holding it `when` ("before" the coordinator reads it, or
/// "after" it answered).
fn hold_next_verification_when(admin: &str, leader: i32, when: &str) -> u64 {
    let client_id = format!("brook-txn-verifier-{leader}");
    let args = [
        "fault",
        "add",
        "--admin",
        admin,
        "--api",
        "AddPartitionsToTxn",
        "--client-id",
        &client_id,
        "--action",
        "delay",
        "--delay-ms",
        HELD_ANSWER_MS,
        "--when",
        when,
        "--times",
        "1",
    ];
    let out = run_brook(&args, Duration::from_secs(20));
    assert!(out.status.success(), "brook fault add: {out:?}");
    out.stdout.trim().parse().expect("a rule id")
}

/// How often rule `rule` on the node with admin listener `admin` fired.
fn rule_fired(admin: &str, rule: u64) -> u64 {
    let body = brook_protocol_tests::cluster::admin_get(admin, "/faults").expect("GET /faults");
    let list: serde_json::Value = serde_json::from_str(&body).expect("fault list JSON");
    list["rules"]
        .as_array()
        .and_then(|rules| rules.iter().find(|r| r["id"] == rule))
        .and_then(|r| r["fired"].as_u64())
        .unwrap_or(0)
}

/// A transactional Produce (v9, transaction version 1) of one record keyed `{tag}-0`.
fn produce_tagged(
    c: &mut WireClient,
    id: &str,
    topic: &str,
    p: (i64, i16),
    seq: i32,
    tag: &str,
) -> i16 {
    let mut req =
        WireClient::produce_request(topic, 0, txn_batch(p.0, p.1, seq, &recs(tag, 1)), -1);
    req.transactional_id = Some(tid(id));
    c.request(PRODUCE_V, &req).responses[0].partition_responses[0].error_code
}

/// The record keys a read_committed consumer reads from partition 0: batches up to the last
/// stable offset, less those of aborted transactions (the consumer's rule: from an aborted
/// transaction's first offset to its producer's next control batch).
fn read_committed_keys(c: &mut WireClient, topic: &str) -> Vec<String> {
    let mut req = WireClient::fetch_request(topic, 0, 0, 0);
    req.isolation_level = 1;
    let resp = c.request(FETCH_V, &req);
    let pd = &resp.responses[0].partitions[0];
    assert_eq!(pd.error_code, 0, "read_committed Fetch: {pd:?}");
    let aborted: Vec<(i64, i64)> = pd
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let mut open_aborted = std::collections::HashSet::new();
    let mut keys = Vec::new();
    let batches = parse_batches(pd.records.as_deref().unwrap_or_default()).expect("batches");
    for b in batches {
        if aborted.contains(&(b.producer_id, b.base_offset)) {
            open_aborted.insert(b.producer_id);
        }
        if b.is_control() {
            open_aborted.remove(&b.producer_id);
        } else if !open_aborted.contains(&b.producer_id) {
            let key = |r: &brook_protocol_tests::batch::ParsedRecord| {
                String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned()
            };
            keys.extend(b.records.iter().map(key));
        }
    }
    keys
}

/// The race, with transaction requests to `tc` (the coordinator's node) and Produce, Fetch
/// and ListOffsets to the partition leader `leader` at `leader_addr`. Everything observed is
/// asserted at the end, so a broker without the guard shows all it gets wrong.
fn abort_between_verification_and_append(
    tc: &mut WireClient,
    (leader, leader_addr): (i32, &str),
    coordinator_admin: &str,
    id: &str,
    topic: &str,
) {
    let p = init_ok(tc, id);
    assert_eq!(
        add_partitions(tc, ADD_PARTITIONS_V3, id, p, &[(topic, 0)]),
        vec![0]
    );
    let rule = hold_next_verification(coordinator_admin, leader);
    let late = {
        let (addr, id, topic) = (leader_addr.to_string(), id.to_string(), topic.to_string());
        std::thread::spawn(move || {
            produce_tagged(&mut WireClient::connect(&addr), &id, &topic, p, 0, "late")
        })
    };
    poll_until_ok(
        "the verification to be held",
        Duration::from_secs(30),
        || match rule_fired(coordinator_admin, rule) {
            1 => Ok(()),
            n => Err(format!("fired {n}")),
        },
    );
    // The coordinator aborts: its ABORT marker reaches the partition before the append.
    assert_eq!(end_txn(tc, END_TXN_V3, id, p, false), 0);
    wait_state(tc, id, "CompleteAbort");
    let late = late.join().expect("producer thread");

    let mut lc = WireClient::connect(leader_addr);
    let high_watermark = lc.list_offsets(topic, 0, -1).offset;
    let stable = lso(&mut lc, topic);
    // The same producer's next transaction on the partition, committed (sequence 1 if the
    // late batch took sequence 0).
    let seq = if late == 0 { 1 } else { 0 };
    assert_eq!(
        add_partitions(tc, ADD_PARTITIONS_V3, id, p, &[(topic, 0)]),
        vec![0]
    );
    assert_eq!(produce_tagged(&mut lc, id, topic, p, seq, "next"), 0);
    assert_eq!(end_txn(tc, END_TXN_V3, id, p, true), 0);
    wait_state(tc, id, "CompleteCommit");
    let visible = poll_until_ok("the commit to be readable", Duration::from_secs(30), || {
        let keys = read_committed_keys(&mut lc, topic);
        if keys.iter().any(|k| k == "next-0") {
            Ok(keys)
        } else {
            Err(format!("{keys:?}"))
        }
    });
    const { assert!(PRODUCE_V < 11, "before v11 Kafka answers INVALID_TXN_STATE") };
    assert_eq!(
        (late, stable, visible),
        (
            E::InvalidTxnState.code(),
            high_watermark,
            vec!["next-0".to_string()]
        ),
        "(the late batch's answer, the LSO after the abort (HW {high_watermark}), what \
         read_committed reads after the next commit)"
    );
}

#[test]
fn an_abort_between_verification_and_append_refuses_the_late_batch() {
    let b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("txn-guard");
    c.ensure_topic(&topic);
    let bootstrap = b.bootstrap();
    abort_between_verification_and_append(
        &mut c,
        (1, &bootstrap),
        &b.admin_address(),
        "tx-guard",
        &topic,
    );
}

/// The same race on three nodes, where the leader asks a coordinator on another node over
/// the wire (AddPartitionsToTxn v4, verify only).
#[test]
fn an_abort_between_verification_and_append_refuses_the_late_batch_on_three_nodes() {
    let cluster =
        brook_protocol_tests::Cluster::start(3, &[("transaction.state.log.num.partitions", "3")]);
    let topic = unique_topic("txn-guard3");
    cluster.create_topic(&topic, 1, 3, &[]);
    let leader = cluster
        .await_isr(&topic, 0, &cluster.ids(), Duration::from_secs(30))
        .leader;
    let mut c = WireClient::connect(&cluster.address(leader));
    // A transactional id whose coordinator is another node.
    let (id, coordinator) = (0..100)
        .map(|i| format!("tx-guard3-{i}"))
        .find_map(|id| {
            let node = txn_coordinator_of(&mut c, &id);
            (node != leader).then_some((id, node))
        })
        .expect("a transactional id coordinated away from the leader");
    let mut tc = WireClient::connect(&cluster.address(coordinator));
    let leader_addr = cluster.address(leader);
    abort_between_verification_and_append(
        &mut tc,
        (leader, &leader_addr),
        &cluster.admin_address(coordinator),
        &id,
        &topic,
    );
}

/// The node FindCoordinator names for transactional id `id` (once `__transaction_state` is
/// ready).
fn txn_coordinator_of(c: &mut WireClient, id: &str) -> i32 {
    poll_until_ok(
        "the transaction coordinator",
        Duration::from_secs(30),
        || {
            let req = FindCoordinatorRequest::default()
                .with_key(s(id))
                .with_key_type(1);
            let r = c.request(FIND_COORDINATOR_V3, &req);
            if r.error_code == 0 {
                Ok(r.node_id.0)
            } else {
                Err(format!("{r:?}"))
            }
        },
    )
}

// ------------------------------------------------------------------------------------------
// The guard with transaction version 2 (Produce v12+). EndTxn v5 answers once the commit is
// prepared, with the bumped epoch; a client that pipelines (franz-go) produces its next
// transaction at that epoch at once, so the leader verifies it, and creates its verification
// entry, before the previous transaction's marker, written at that same bumped epoch, reaches
// the partition. That marker ends the previous transaction, not the verified one: Kafka 4.4
// leaves the entry in place (`UnifiedLog.updateProducers`), and the batch is appended.
// ------------------------------------------------------------------------------------------

/// Adds a fault rule on the node with admin listener `admin`; returns its id.
fn fault_rule(admin: &str, args: &[&str]) -> u64 {
    let mut argv = vec!["fault", "add", "--admin", admin];
    argv.extend_from_slice(args);
    let out = run_brook(&argv, Duration::from_secs(20));
    assert!(out.status.success(), "brook {argv:?}: {out:?}");
    out.stdout.trim().parse().expect("a rule id")
}

/// Removes rule `rule` from the node with admin listener `admin`.
fn fault_rule_clear(admin: &str, rule: u64) {
    let id = rule.to_string();
    let argv = ["fault", "clear", "--admin", admin, "--id", &id];
    let out = run_brook(&argv, Duration::from_secs(20));
    assert!(out.status.success(), "brook {argv:?}: {out:?}");
}

/// The race, with transaction requests to `tc` (the coordinator's node, admin listener
/// `coordinator_admin`) and Produce to the partition leader `leader` (admin listener
/// `leader_admin`), which receives the markers. The verification of the next transaction's
/// produce is held before the coordinator reads it, so its entry exists while the held
/// markers are let through; the coordinator then answers that the partition is added.
fn next_transaction_verified_before_the_commits_marker(
    tc: &mut WireClient,
    (leader, leader_addr, leader_admin): (i32, &str, &str),
    coordinator_admin: &str,
    id: &str,
    topic: &str,
) {
    let mut lc = WireClient::connect(leader_addr);
    let (pid, e) = init_ok(tc, id);
    assert_eq!(produce_txn_v12(&mut lc, id, topic, (pid, e), 0, 1), 0);
    let markers = fault_rule(leader_admin, &HOLD_MARKERS);
    assert_eq!(end_txn_v5(tc, id, (pid, e), true), (0, (pid, e + 1)));
    let rule = hold_next_verification_when(coordinator_admin, leader, "before");
    let next = {
        let (addr, id, topic) = (leader_addr.to_string(), id.to_string(), topic.to_string());
        std::thread::spawn(move || {
            let mut c = WireClient::connect(&addr);
            produce_txn_v12(&mut c, &id, &topic, (pid, e + 1), 0, 1)
        })
    };
    poll_until_ok(
        "the verification to be held",
        Duration::from_secs(30),
        || match rule_fired(coordinator_admin, rule) {
            1 => Ok(()),
            n => Err(format!("fired {n}")),
        },
    );
    // The commit's marker, at epoch e + 1, lands while the verification is held.
    fault_rule_clear(leader_admin, markers);
    wait_state(tc, id, "CompleteCommit");
    assert!(
        !next.is_finished(),
        "the verification was held for less time than the commit took to complete"
    );
    let next = next.join().expect("producer thread");
    assert_eq!(
        next,
        0,
        "the next transaction's first batch, verified before the commit's marker landed: {:?}",
        E::try_from_code(next)
    );
    assert_eq!(end_txn_v5(tc, id, (pid, e + 1), true), (0, (pid, e + 2)));
    wait_state(tc, id, "CompleteCommit");
    let stable = poll_until_ok(
        "both commits to be readable",
        Duration::from_secs(30),
        || {
            let keys = read_committed_keys(&mut lc, topic);
            if keys.len() == 2 {
                Ok(keys)
            } else {
                Err(format!("{keys:?}"))
            }
        },
    );
    assert_eq!(stable, vec![format!("{id}-0"), format!("{id}-0")]);
}

#[test]
fn a_version_2_produce_verified_before_the_previous_commits_marker_is_appended() {
    let b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("txn-guard-v2");
    c.ensure_topic(&topic);
    let (bootstrap, admin) = (b.bootstrap(), b.admin_address());
    next_transaction_verified_before_the_commits_marker(
        &mut c,
        (1, &bootstrap, &admin),
        &admin,
        "tx-guard-v2",
        &topic,
    );
}

/// The same on three nodes, the coordinator away from the leader (AddPartitionsToTxn v5 over
/// the wire, WriteTxnMarkers from the coordinator to the leader).
#[test]
fn a_version_2_produce_verified_before_the_previous_commits_marker_is_appended_on_three_nodes() {
    let cluster = Cluster::start(3, &[("transaction.state.log.num.partitions", "3")]);
    let topic = unique_topic("txn-guard-v2-3");
    cluster.create_topic(&topic, 1, 3, &[]);
    let leader = cluster
        .await_isr(&topic, 0, &cluster.ids(), Duration::from_secs(30))
        .leader;
    let mut c = WireClient::connect(&cluster.address(leader));
    let (id, coordinator) = (0..100)
        .map(|i| format!("tx-guard-v2-3-{i}"))
        .find_map(|id| {
            let node = txn_coordinator_of(&mut c, &id);
            (node != leader).then_some((id, node))
        })
        .expect("a transactional id coordinated away from the leader");
    let mut tc = WireClient::connect(&cluster.address(coordinator));
    let (leader_addr, leader_admin) = (cluster.address(leader), cluster.admin_address(leader));
    next_transaction_verified_before_the_commits_marker(
        &mut tc,
        (leader, &leader_addr, &leader_admin),
        &cluster.admin_address(coordinator),
        &id,
        &topic,
    );
}

// ------------------------------------------------------------------------------------------
// CONCURRENT_TRANSACTIONS from the coordinator while a leader verifies (Kafka 4.4's
// `ReplicaManager.handleProduceAppend`): for transaction version 2 the leader retries every
// add.partitions.to.txn.retry.backoff.ms for up to add.partitions.to.txn.retry.backoff.max.ms
// and then answers CONCURRENT_TRANSACTIONS as it is; for version 1 it asks once and answers
// NOT_ENOUGH_REPLICAS, which older clients retry without a metadata refresh.
// ------------------------------------------------------------------------------------------

/// Counts the verifications leader 1 asks of the coordinator on the same node (a delay of 0
/// after each answer, which changes nothing). Returns the rule id.
fn count_verifications(admin: &str) -> u64 {
    let args = [
        "--api",
        "AddPartitionsToTxn",
        "--client-id",
        "brook-txn-verifier-1",
        "--action",
        "delay",
        "--delay-ms",
        "0",
        "--when",
        "after",
        "--times",
        "1000000",
    ];
    fault_rule(admin, &args)
}

/// A transactional Produce of one record at `version`: the partition's answer.
fn produce_at(
    c: &mut WireClient,
    version: i16,
    (id, topic): (&str, &str),
    p: (i64, i16),
    seq: i32,
) -> produce_response::PartitionProduceResponse {
    let mut req = WireClient::produce_request(topic, 0, txn_batch(p.0, p.1, seq, &recs(id, 1)), -1);
    req.transactional_id = Some(tid(id));
    let resp: ProduceResponse = c.request(version, &req);
    resp.responses[0].partition_responses[0].clone()
}

#[test]
fn a_verification_answered_concurrent_transactions_is_retried_for_version_2_only() {
    let b = start();
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("txn-verify-concurrent");
    c.ensure_topic(&topic);
    let admin = b.admin_address();
    // Version 2: the commit's markers are held, so the coordinator stays in PrepareCommit.
    let (pid, e) = init_ok(&mut c, "tx-v2-concurrent");
    assert_eq!(
        produce_txn_v12(&mut c, "tx-v2-concurrent", &topic, (pid, e), 0, 1),
        0
    );
    let markers = fault_rule(&admin, &HOLD_MARKERS);
    assert_eq!(end_txn_v5(&mut c, "tx-v2-concurrent", (pid, e), true).0, 0);
    let asked = count_verifications(&admin);
    let v2 = produce_at(
        &mut c,
        PRODUCE_V12,
        ("tx-v2-concurrent", &topic),
        (pid, e + 1),
        0,
    );
    let v2_asked = rule_fired(&admin, asked);
    fault_rule_clear(&admin, markers);
    wait_state(&mut c, "tx-v2-concurrent", "CompleteCommit");

    // Version 1: the same, with EndTxn v3 (no epoch bump) and a Produce v9 to a partition
    // the transaction has no batch on (on `topic` it would still be ongoing, and the leader
    // would not ask).
    let other = unique_topic("txn-verify-concurrent-other");
    c.ensure_topic(&other);
    let id = "tx-v1-concurrent";
    let p = init_ok(&mut c, id);
    assert_eq!(
        add_partitions(&mut c, ADD_PARTITIONS_V3, id, p, &[(&topic, 0)]),
        vec![0]
    );
    assert_eq!(produce_txn(&mut c, id, &topic, p, 0, 1), 0);
    let markers = fault_rule(&admin, &HOLD_MARKERS);
    assert_eq!(end_txn(&mut c, END_TXN_V3, id, p, true), 0);
    let before = rule_fired(&admin, asked);
    let v1 = produce_at(&mut c, PRODUCE_V, (id, &other), p, 1);
    let v1_asked = rule_fired(&admin, asked) - before;
    fault_rule_clear(&admin, markers);

    assert_eq!(
        (
            v2.error_code,
            v2.error_message.as_deref().map(|m| m.to_string())
        ),
        (E::ConcurrentTransactions.code(), None),
        "version 2: CONCURRENT_TRANSACTIONS as it is, with no message"
    );
    // 100 ms of attempts 20 ms apart: several, however slow the machine.
    assert!(
        v2_asked >= 2,
        "version 2: asked {v2_asked} times, retried on CONCURRENT_TRANSACTIONS"
    );
    assert_eq!(
        (
            v1.error_code,
            v1.error_message.as_deref().map(|m| m.to_string())
        ),
        (
            E::NotEnoughReplicas.code(),
            Some(
                "Unable to verify the partition has been added to the transaction. \
                 Underlying error: CONCURRENT_TRANSACTIONS"
                    .to_string()
            )
        ),
        "version 1"
    );
    assert_eq!(v1_asked, 1, "version 1 is not retried by the leader");
}

/// With a long retry time, a version 2 produce behind a commit whose markers take a while
/// is appended once the commit completes, without the client retrying.
#[test]
fn a_version_2_verification_retries_until_the_previous_commit_completes() {
    let b = Broker::start_with(&[
        ("transaction.state.log.num.partitions", "5"),
        ("admin.listener", "127.0.0.1:0"),
        ("add.partitions.to.txn.retry.backoff.max.ms", "30000"),
    ]);
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("txn-verify-retry");
    c.ensure_topic(&topic);
    let admin = b.admin_address();
    let id = "tx-v2-retry";
    let (pid, e) = init_ok(&mut c, id);
    assert_eq!(produce_txn_v12(&mut c, id, &topic, (pid, e), 0, 1), 0);
    let markers = fault_rule(&admin, &HOLD_MARKERS);
    assert_eq!(end_txn_v5(&mut c, id, (pid, e), true).0, 0);
    let asked = count_verifications(&admin);
    let next = {
        let (addr, topic) = (b.bootstrap(), topic.clone());
        std::thread::spawn(move || {
            produce_at(
                &mut WireClient::connect(&addr),
                PRODUCE_V12,
                (id, &topic),
                (pid, e + 1),
                0,
            )
        })
    };
    poll_until_ok(
        "the leader to retry",
        Duration::from_secs(20),
        || match rule_fired(&admin, asked) {
            n if n >= 2 => Ok(()),
            n => Err(format!("asked {n} times")),
        },
    );
    fault_rule_clear(&admin, markers);
    let next = next.join().expect("producer thread");
    assert_eq!(next.error_code, 0, "{next:?}");
    assert_eq!(describe(&mut c, id).transaction_state.as_str(), "Ongoing");
    assert_eq!(
        end_txn_v5(&mut c, id, (pid, e + 1), true),
        (0, (pid, e + 2))
    );
}
