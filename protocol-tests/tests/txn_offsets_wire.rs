//! TxnOffsetCommit over the raw wire: offsets committed inside a transaction are not the
//! group's until the transaction commits; OffsetFetch with `require_stable` answers
//! UNSTABLE_OFFSET_COMMIT for them meanwhile; they survive a restart of the broker and the
//! death of the coordinator (a new leader of the offsets partition reads them back as
//! pending); the COMMIT marker written with WriteTxnMarkers makes them the group's, the
//! ABORT marker drops them; bad input gets Kafka's error codes.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::cluster::CALL;
use brook_protocol_tests::{
    offsets_partition_of, poll_until_ok, unique_topic, Broker, Cluster, WireClient,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_COORDINATOR: i16 = 16;
const ILLEGAL_GENERATION: i16 = 22;
const INVALID_GROUP_ID: i16 = 24;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
const UNSTABLE_OFFSET_COMMIT: i16 = 88;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Writes the COMMIT (or ABORT) marker of `producer` on `group`'s offsets partition with
/// WriteTxnMarkers v1, as a transaction coordinator does; the partition's error code.
fn marker(
    c: &mut WireClient,
    group: &str,
    offsets_partitions: i32,
    (producer_id, producer_epoch): (i64, i16),
    commit: bool,
) -> i16 {
    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(producer_id.into())
        .with_producer_epoch(producer_epoch)
        .with_transaction_result(commit)
        .with_coordinator_epoch(0)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(s("__consumer_offsets").into())
            .with_partition_indexes(vec![offsets_partition_of(
                group,
                offsets_partitions,
            )])])]);
    let r: WriteTxnMarkersResponse = c.request(1, &req);
    r.markers[0].topics[0].partitions[0].error_code
}

/// One TxnOffsetCommit of `offset` for partition 0 of `topic`; the partition's error code.
#[allow(clippy::too_many_arguments)]
fn txn_commit(
    c: &mut WireClient,
    version: i16,
    group: &str,
    (producer_id, producer_epoch): (i64, i16),
    member: (&str, i32),
    topic: &str,
    offset: i64,
) -> i16 {
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(s("txn-1").into())
        .with_group_id(s(group).into())
        .with_producer_id(producer_id.into())
        .with_producer_epoch(producer_epoch)
        .with_member_id(s(member.0))
        .with_generation_id(member.1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(s(topic).into())
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(s("txn")))])]);
    let r: TxnOffsetCommitResponse = c.request(version, &req);
    assert_eq!(r.topics.len(), 1, "{r:?}");
    assert_eq!(r.topics[0].name.as_str(), topic);
    assert_eq!(r.topics[0].partitions[0].partition_index, 0);
    r.topics[0].partitions[0].error_code
}

/// A plain OffsetCommit (v8, simple group) of partition 0.
fn plain_commit(c: &mut WireClient, group: &str, topic: &str, offset: i64) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(s(group).into())
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(s(topic).into())
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    c.request::<OffsetCommitRequest>(8, &req).topics[0].partitions[0].error_code
}

/// OffsetFetch of partition 0 at `version` (single-group form below v8, groups from v8):
/// (error code, committed offset); a group-level error comes back with offset -1.
fn fetch(
    c: &mut WireClient,
    version: i16,
    group: &str,
    topic: &str,
    require_stable: bool,
) -> (i16, i64) {
    let req = if version >= 8 {
        OffsetFetchRequest::default()
            .with_require_stable(require_stable)
            .with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(s(group).into())
                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                    .with_name(s(topic).into())
                    .with_partition_indexes(vec![0])]))])
    } else {
        OffsetFetchRequest::default()
            .with_require_stable(require_stable)
            .with_group_id(s(group).into())
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(s(topic).into())
                .with_partition_indexes(vec![0])]))
    };
    let r: OffsetFetchResponse = c.request(version, &req);
    if version >= 8 {
        let g = &r.groups[0];
        if g.error_code != NONE {
            return (g.error_code, -1);
        }
        let p = &g.topics[0].partitions[0];
        (p.error_code, p.committed_offset)
    } else {
        if r.error_code != NONE {
            return (r.error_code, -1);
        }
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.committed_offset)
    }
}

#[test]
fn txn_offsets_are_pending_and_survive_a_restart() {
    let mut broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "2"),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("txo");
    c.ensure_topic(&topic);
    let group = format!("{topic}-g");
    let pid = c.init_producer_id();
    let simple = ("", -1);

    assert_eq!(plain_commit(&mut c, &group, &topic, 5), NONE);
    // librdkafka sends v3, the Java client v4 at transaction version 1. (v5 is version 2,
    // where the offsets partition is first added through the transaction coordinator: the
    // Java suites' consume-transform-produce runs it.)
    assert_eq!(txn_commit(&mut c, 3, &group, pid, simple, &topic, 9), NONE);
    assert_eq!(txn_commit(&mut c, 4, &group, pid, simple, &topic, 10), NONE);
    assert_eq!(fetch(&mut c, 7, &group, &topic, false), (NONE, 5));
    assert_eq!(
        fetch(&mut c, 7, &group, &topic, true),
        (UNSTABLE_OFFSET_COMMIT, -1),
        "require_stable while the transaction is open"
    );
    assert_eq!(
        fetch(&mut c, 8, &group, &topic, true),
        (UNSTABLE_OFFSET_COMMIT, -1)
    );

    // Bad input.
    assert_eq!(
        txn_commit(&mut c, 3, "", pid, simple, &topic, 1),
        INVALID_GROUP_ID
    );
    assert_eq!(
        txn_commit(&mut c, 3, &group, (-1, -1), simple, &topic, 1),
        INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(
        txn_commit(&mut c, 3, &group, pid, simple, "no-such-topic", 1),
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(
        txn_commit(
            &mut c,
            3,
            &format!("{group}-none"),
            pid,
            ("m", 4),
            &topic,
            1
        ),
        ILLEGAL_GENERATION,
        "a generation for a group that does not exist"
    );
    // The offsets partition has seen the producer at its epoch: an older one is a zombie.
    assert_eq!(
        txn_commit(&mut c, 3, &group, (pid.0, pid.1 + 1), simple, &topic, 11),
        NONE
    );
    assert_eq!(
        txn_commit(&mut c, 3, &group, pid, simple, &topic, 1),
        INVALID_PRODUCER_EPOCH
    );
    let other_group = format!("{group}-other");
    assert_eq!(fetch(&mut c, 7, &other_group, &topic, true), (NONE, -1));

    // A SIGKILL and a restart: the open transaction's offsets come back pending.
    broker.kill9();
    broker.start_again();
    let mut c = WireClient::connect(&broker.bootstrap());
    assert_eq!(fetch(&mut c, 7, &group, &topic, false), (NONE, 5));
    assert_eq!(
        fetch(&mut c, 7, &group, &topic, true),
        (UNSTABLE_OFFSET_COMMIT, -1)
    );

    // The transaction commits: its last offset (11, written after the plain commit of 5)
    // becomes the group's.
    let bumped = (pid.0, pid.1 + 1);
    assert_eq!(marker(&mut c, &group, 2, bumped, true), NONE);
    assert_eq!(fetch(&mut c, 7, &group, &topic, true), (NONE, 11));
    // The next transaction aborts: nothing changes.
    assert_eq!(
        txn_commit(&mut c, 3, &group, bumped, simple, &topic, 12),
        NONE
    );
    assert_eq!(
        fetch(&mut c, 8, &group, &topic, true),
        (UNSTABLE_OFFSET_COMMIT, -1)
    );
    assert_eq!(marker(&mut c, &group, 2, bumped, false), NONE);
    assert_eq!(fetch(&mut c, 8, &group, &topic, true), (NONE, 11));
    // And both decisions hold after another restart.
    broker.kill9();
    broker.start_again();
    let mut c = WireClient::connect(&broker.bootstrap());
    assert_eq!(fetch(&mut c, 7, &group, &topic, true), (NONE, 11));
}

#[test]
fn pending_txn_offsets_survive_the_coordinators_death() {
    let c = &mut Cluster::start(3, &[("offsets.topic.num.partitions", "3")]);
    let topic = unique_topic("txoc");
    c.create_topic(&topic, 1, 3, &[("min.insync.replicas", "2")]);
    let group = format!("{topic}-g");
    // The first FindCoordinator creates the offsets topic (RF 3) through the controller.
    let coordinator = poll_until_ok(
        "a coordinator for the group",
        Duration::from_secs(60),
        || c.find_coordinator(1, &group),
    );
    let mut w = WireClient::connect(&c.address(coordinator));
    let pid = w.init_producer_id();
    // COORDINATOR_NOT_AVAILABLE is retriable, as clients treat it: the new offsets
    // partition may still be electing or loading on its coordinator.
    poll_until_ok(
        "the first plain commit",
        Duration::from_secs(30),
        || match plain_commit(&mut w, &group, &topic, 3) {
            NONE => Ok(()),
            code => Err(format!("error {code}")),
        },
    );
    assert_eq!(
        txn_commit(&mut w, 3, &group, pid, ("", -1), &topic, 7),
        NONE
    );
    assert_eq!(
        fetch(&mut w, 7, &group, &topic, true),
        (UNSTABLE_OFFSET_COMMIT, -1)
    );
    drop(w);

    c.kill(coordinator);
    // The new leader of the offsets partition reads it back: the committed offset, and the
    // transactional one pending again.
    let survivor = c.live_ids()[0];
    let new_coordinator = poll_until_ok("a new coordinator", Duration::from_secs(60), || {
        match c.find_coordinator(survivor, &group) {
            Ok(n) if n != coordinator => Ok(n),
            other => Err(format!("{other:?}")),
        }
    });
    let found = poll_until_ok(
        "OffsetFetch through the new coordinator",
        Duration::from_secs(30),
        || {
            let mut w = WireClient::try_connect(&c.address(new_coordinator), CALL)
                .map_err(|e| e.to_string())?;
            let plain = fetch(&mut w, 7, &group, &topic, false);
            let stable = fetch(&mut w, 7, &group, &topic, true);
            // NOT_COORDINATOR while leadership settles.
            if plain.0 == NOT_COORDINATOR || stable.0 == NOT_COORDINATOR {
                return Err(format!("{plain:?} {stable:?}"));
            }
            Ok((plain, stable))
        },
    );
    assert_eq!(found, ((NONE, 3), (UNSTABLE_OFFSET_COMMIT, -1)));

    // The transaction coordinator's COMMIT marker, written on the new leader, completes it.
    let mut w = WireClient::connect(&c.address(new_coordinator));
    assert_eq!(marker(&mut w, &group, 3, pid, true), NONE);
    assert_eq!(fetch(&mut w, 7, &group, &topic, true), (NONE, 7));
}
