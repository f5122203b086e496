//! Share group APIs (KIP-932) over the raw wire, with bad input: unknown members, wrong
//! member epochs, bad share session epochs, and acknowledgements of offsets the member did not
//! acquire, each answered with Kafka's error code; and the acquisition itself (delivery
//! counts, a second member kept off locked records) seen directly in ShareFetch answers;
//! v2's RENEW (KIP-1222) and DescribeShareGroupOffsets v1's lag (KIP-1226).
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::{share, unique_topic, Broker, WireClient};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const V: i16 = 1;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;
const FENCED_MEMBER_EPOCH: i16 = 110;
const INVALID_RECORD_STATE: i16 = 121;
const SHARE_SESSION_NOT_FOUND: i16 = 122;
const INVALID_SHARE_SESSION_EPOCH: i16 = 123;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn heartbeat(
    c: &mut WireClient,
    group: &str,
    member: &str,
    epoch: i32,
    topic: Option<&str>,
) -> ShareGroupHeartbeatResponse {
    c.request(V, &share::heartbeat_request(group, member, epoch, topic))
}

/// A ShareFetch of partition 0 with `acks` (first, last, type) piggybacked.
fn share_fetch(
    c: &mut WireClient,
    group: &str,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &[(i64, i64, i8)],
) -> ShareFetchResponse {
    c.request(
        V,
        &share::fetch_request(group, member, epoch, topic_id, acks, 200),
    )
}

fn acknowledge(
    c: &mut WireClient,
    group: &str,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &[(i64, i64, i8)],
) -> ShareAcknowledgeResponse {
    acknowledge_at(c, V, false, group, member, epoch, topic_id, acks)
}

/// A ShareAcknowledge at `version`, with v2's `IsRenewAck`.
#[allow(clippy::too_many_arguments)]
fn acknowledge_at(
    c: &mut WireClient,
    version: i16,
    is_renew_ack: bool,
    group: &str,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &[(i64, i64, i8)],
) -> ShareAcknowledgeResponse {
    let req = share::acknowledge_request(is_renew_ack, group, member, epoch, topic_id, acks);
    c.request(version, &req)
}

/// (first, last, delivery count) of each acquired range, and the partition's error codes.
fn acquired(r: &ShareFetchResponse) -> (Vec<(i64, i64, i16)>, i16, i16) {
    let p = &r.responses[0].partitions[0];
    (
        p.acquired_records
            .iter()
            .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
            .collect(),
        p.error_code,
        p.acknowledge_error_code,
    )
}

#[test]
fn heartbeat_bad_input() {
    let broker = Broker::start_with(&[("offsets.topic.num.partitions", "1")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("sw-hb");
    c.ensure_topic(&topic);
    let group = format!("{topic}-g");
    let member = Uuid::new_v4().to_string();

    // A member of a group that does not exist, and an unknown member of one that does.
    let r = heartbeat(&mut c, &group, &member, 1, None);
    assert_eq!(r.error_code, GROUP_ID_NOT_FOUND, "{r:?}");
    // A new group starts at epoch 1 and the member's new subscription moves it to 2 (Kafka
    // 4.4's `ModernGroup` and `shareGroupHeartbeat`).
    let r = heartbeat(&mut c, &group, &member, 0, Some(&topic));
    assert_eq!((r.error_code, r.member_epoch), (0, 2), "{r:?}");
    let r = heartbeat(&mut c, &group, "stranger", 1, None);
    assert_eq!(r.error_code, UNKNOWN_MEMBER_ID, "{r:?}");
    let r = heartbeat(&mut c, &group, "stranger", -1, None);
    assert_eq!(r.error_code, UNKNOWN_MEMBER_ID, "{r:?}");

    // Epochs ahead of the member's, or behind it and not its previous one, are fenced.
    assert_eq!(
        heartbeat(&mut c, &group, &member, 7, None).error_code,
        FENCED_MEMBER_EPOCH
    );
    let other = Uuid::new_v4().to_string();
    assert_eq!(
        heartbeat(&mut c, &group, &other, 0, Some(&topic)).error_code,
        0
    );
    let r = heartbeat(&mut c, &group, &member, 2, None);
    assert_eq!(
        (r.error_code, r.member_epoch),
        (0, 3),
        "a new member bumps the epoch: {r:?}"
    );
    assert_eq!(
        heartbeat(&mut c, &group, &member, 0, Some(&topic)).error_code,
        FENCED_MEMBER_EPOCH
    );

    // Malformed requests.
    assert_eq!(
        heartbeat(&mut c, &group, "", 0, Some(&topic)).error_code,
        INVALID_REQUEST
    );
    assert_eq!(
        heartbeat(&mut c, &group, &member, 0, None).error_code,
        INVALID_REQUEST
    );
    assert_eq!(
        heartbeat(&mut c, &group, &member, -2, None).error_code,
        INVALID_REQUEST
    );

    // A consumer group's id is not a share group's.
    let cg = format!("{topic}-cg");
    let r: ConsumerGroupHeartbeatResponse = c.request(
        1,
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(s(&cg).into())
            .with_member_id(s(&Uuid::new_v4().to_string()))
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![s(&topic).into()]))
            .with_topic_partitions(Some(vec![])),
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        heartbeat(&mut c, &cg, &member, 0, Some(&topic)).error_code,
        GROUP_ID_NOT_FOUND
    );

    // Leaving answers epoch -1; the group is listed as a share group.
    let r = heartbeat(&mut c, &group, &member, -1, None);
    assert_eq!((r.error_code, r.member_epoch), (0, -1), "{r:?}");
    let l: ListGroupsResponse = c.request(5, &ListGroupsRequest::default());
    let g = l
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == group)
        .expect("listed");
    assert_eq!(
        (g.group_type.as_str(), g.group_state.as_str()),
        ("share", "Stable")
    );
}

#[test]
fn fetch_and_acknowledge_bad_input() {
    let broker = Broker::start_with(&[("offsets.topic.num.partitions", "1")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("sw-fetch");
    c.ensure_topic(&topic);
    let topic_id = c.metadata(&[&topic], false).topics[0].topic_id;
    let group = format!("{topic}-g");
    let (a, b) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
    assert_eq!(heartbeat(&mut c, &group, &a, 0, Some(&topic)).error_code, 0);
    assert_eq!(heartbeat(&mut c, &group, &b, 0, Some(&topic)).error_code, 0);

    // Session epochs: none yet, acknowledgements on an opening fetch, epoch 0 to acknowledge.
    assert_eq!(
        share_fetch(&mut c, &group, &a, 1, topic_id, &[]).error_code,
        SHARE_SESSION_NOT_FOUND
    );
    assert_eq!(
        share_fetch(&mut c, &group, &a, -1, topic_id, &[]).error_code,
        SHARE_SESSION_NOT_FOUND
    );
    assert_eq!(
        acknowledge(&mut c, &group, &a, 1, topic_id, &[]).error_code,
        SHARE_SESSION_NOT_FOUND
    );
    assert_eq!(
        share_fetch(&mut c, &group, &a, 0, topic_id, &[(0, 0, 1)]).error_code,
        INVALID_REQUEST
    );
    // The opening fetch starts the share-partition at the log end.
    let r = share_fetch(&mut c, &group, &a, 0, topic_id, &[]);
    assert_eq!((r.error_code, acquired(&r).0.len()), (0, 0), "{r:?}");
    assert_eq!(
        acknowledge(&mut c, &group, &a, 0, topic_id, &[]).error_code,
        INVALID_SHARE_SESSION_EPOCH
    );
    assert_eq!(
        share_fetch(&mut c, &group, &a, 5, topic_id, &[]).error_code,
        INVALID_SHARE_SESSION_EPOCH
    );

    let recs: Vec<Rec> = (0..3).map(|i| Rec::kv("k", &format!("v{i}"), 1)).collect();
    c.produce(&topic, 0, encode_batch(Producer::NONE, &recs));
    let r = share_fetch(&mut c, &group, &a, 1, topic_id, &[]);
    assert_eq!(acquired(&r), (vec![(0, 2, 1)], 0, 0), "{r:?}");

    // B opens its session: A's records are locked, so B gets none.
    let r = share_fetch(&mut c, &group, &b, 0, topic_id, &[]);
    assert!(
        acquired(&r).0.is_empty(),
        "locked records handed to B: {r:?}"
    );
    // B acknowledging A's records, or A acknowledging offsets never acquired: refused, and
    // nothing is applied.
    let r = acknowledge(&mut c, &group, &b, 1, topic_id, &[(0, 0, 1)]);
    assert_eq!(
        r.responses[0].partitions[0].error_code, INVALID_RECORD_STATE,
        "{r:?}"
    );
    let r = acknowledge(&mut c, &group, &a, 2, topic_id, &[(0, 0, 2), (2, 5, 1)]);
    assert_eq!(
        r.responses[0].partitions[0].error_code, INVALID_RECORD_STATE,
        "{r:?}"
    );
    let r = acknowledge(&mut c, &group, &a, 3, topic_id, &[(0, 0, 9)]);
    assert_eq!(
        r.responses[0].partitions[0].error_code, INVALID_REQUEST,
        "{r:?}"
    );

    // A accepts offsets 1-2 (piggybacked on a fetch) and releases offset 0; B then gets
    // offset 0 again, delivered for the second time.
    let r = share_fetch(&mut c, &group, &a, 4, topic_id, &[(1, 2, 1)]);
    assert_eq!(acquired(&r), (vec![], 0, 0), "{r:?}");
    let r = acknowledge(&mut c, &group, &a, 5, topic_id, &[(0, 0, 2)]);
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    let r = share_fetch(&mut c, &group, &b, 2, topic_id, &[]);
    assert_eq!(acquired(&r), (vec![(0, 0, 2)], 0, 0), "{r:?}");
    // B closes its session: what it held is released at once, and A gets it a third time.
    let r = acknowledge(&mut c, &group, &b, -1, topic_id, &[]);
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = share_fetch(&mut c, &group, &a, 6, topic_id, &[]);
    assert_eq!(acquired(&r), (vec![(0, 0, 3)], 0, 0), "{r:?}");
    assert_eq!(
        acknowledge(&mut c, &group, &b, 3, topic_id, &[]).error_code,
        SHARE_SESSION_NOT_FOUND
    );
}

/// v2's RENEW (KIP-1222, Kafka's `SharePartition.acknowledgeCompleteBatch`): a renewed record
/// stays acquired by its member at its delivery count under a new acquisition lock, so it is
/// not handed to another member when the first lock would have run out, and its member can
/// still accept it. A ShareFetch renews only with `IsRenewAck` and nothing asked for; RENEW
/// needs `IsRenewAck` and v2, else the partition's answer is INVALID_REQUEST. Then v2's
/// record-limit acquisition.
#[test]
fn renew_keeps_records_acquired_under_a_new_lock() {
    use std::time::{Duration, Instant};
    // The lock is the one clock here: the test renews halfway through it and looks after it
    // would have run out.
    const LOCK_MS: u64 = 3000;
    const RENEW: i8 = 4;
    let lock = LOCK_MS.to_string();
    let broker = Broker::start_with(&[
        ("offsets.topic.num.partitions", "1"),
        ("share.coordinator.state.topic.num.partitions", "1"),
        ("group.share.min.record.lock.duration.ms", "1000"),
        ("group.share.record.lock.duration.ms", &lock),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("sw-renew");
    c.ensure_topic(&topic);
    let topic_id = c.metadata(&[&topic], false).topics[0].topic_id;
    let group = format!("{topic}-g");
    let (a, b) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
    assert_eq!(heartbeat(&mut c, &group, &a, 0, Some(&topic)).error_code, 0);
    assert_eq!(heartbeat(&mut c, &group, &b, 0, Some(&topic)).error_code, 0);
    assert_eq!(
        share_fetch(&mut c, &group, &a, 0, topic_id, &[]).error_code,
        0
    );
    assert_eq!(
        share_fetch(&mut c, &group, &b, 0, topic_id, &[]).error_code,
        0
    );
    let recs: Vec<Rec> = (0..3).map(|i| Rec::kv("k", &format!("v{i}"), 1)).collect();
    c.produce(&topic, 0, encode_batch(Producer::NONE, &recs));
    let r = share_fetch(&mut c, &group, &a, 1, topic_id, &[]);
    let acquired_at = Instant::now();
    assert_eq!(acquired(&r), (vec![(0, 2, 1)], 0, 0), "{r:?}");

    // RENEW before v2, or without IsRenewAck: INVALID_REQUEST, nothing applied.
    let r = acknowledge_at(&mut c, 1, false, &group, &a, 2, topic_id, &[(0, 2, RENEW)]);
    assert_eq!(
        r.responses[0].partitions[0].error_code, INVALID_REQUEST,
        "{r:?}"
    );
    let r = acknowledge_at(&mut c, 2, false, &group, &a, 3, topic_id, &[(0, 2, RENEW)]);
    assert_eq!(
        r.responses[0].partitions[0].error_code, INVALID_REQUEST,
        "{r:?}"
    );
    // Another member cannot renew A's records.
    let r = acknowledge_at(&mut c, 2, true, &group, &b, 1, topic_id, &[(0, 2, RENEW)]);
    assert_eq!(
        r.responses[0].partitions[0].error_code, INVALID_RECORD_STATE,
        "{r:?}"
    );

    // Halfway through the lock, A renews with a renewal ShareFetch (it acquires nothing).
    std::thread::sleep(Duration::from_millis(LOCK_MS / 2).saturating_sub(acquired_at.elapsed()));
    let req = {
        use kafka_protocol::messages::share_fetch_request::*;
        ShareFetchRequest::default()
            .with_group_id(Some(s(&group).into()))
            .with_member_id(Some(s(&a)))
            .with_share_session_epoch(4)
            .with_max_bytes(0)
            .with_is_renew_ack(true)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(vec![
                        AcknowledgementBatch::default()
                            .with_first_offset(0)
                            .with_last_offset(2)
                            .with_acknowledge_types(vec![RENEW]),
                    ])])])
    };
    let r: ShareFetchResponse = c.request(2, &req);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        acquired(&r),
        (vec![], 0, 0),
        "a renewal acquires nothing: {r:?}"
    );
    assert_eq!(r.acquisition_lock_timeout_ms, LOCK_MS as i32);

    // Past the first lock's end (and before the renewed one's), B still gets nothing and A
    // accepts what it holds.
    let past_first_lock = Duration::from_millis(LOCK_MS + LOCK_MS / 6);
    std::thread::sleep(past_first_lock.saturating_sub(acquired_at.elapsed()));
    let r = share_fetch(&mut c, &group, &b, 2, topic_id, &[]);
    assert!(
        acquired(&r).0.is_empty(),
        "renewed records handed to B: {r:?}"
    );
    assert!(
        acquired_at.elapsed() < Duration::from_millis(2 * LOCK_MS),
        "too slow to tell the renewed lock from the first one"
    );
    let r = acknowledge_at(&mut c, 2, false, &group, &a, 5, topic_id, &[(0, 2, 1)]);
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    assert_eq!(r.acquisition_lock_timeout_ms, LOCK_MS as i32, "{r:?}");

    // v2's ShareAcquireMode (KIP-1206): record-limit takes MaxRecords exactly, splitting the
    // batch; an unknown mode is INVALID_REQUEST.
    c.produce(&topic, 0, encode_batch(Producer::NONE, &recs));
    let fetch = |mode: i8, epoch: i32| {
        use kafka_protocol::messages::share_fetch_request::*;
        ShareFetchRequest::default()
            .with_group_id(Some(s(&group).into()))
            .with_member_id(Some(s(&b)))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(200)
            .with_max_records(2)
            .with_batch_size(2)
            .with_share_acquire_mode(mode)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![
                    FetchPartition::default().with_partition_index(0)
                ])])
    };
    let r: ShareFetchResponse = c.request(2, &fetch(7, 3));
    assert_eq!(r.error_code, INVALID_REQUEST, "{r:?}");
    let r: ShareFetchResponse = c.request(2, &fetch(1, 3));
    assert_eq!(acquired(&r), (vec![(3, 4, 1)], 0, 0), "{r:?}");
}

/// A share group's own `share.heartbeat.interval.ms` and `share.session.timeout.ms` (Kafka's
/// `GroupConfig`, read at each heartbeat) are its members' interval and session: a member of
/// the tuned group that stops heartbeating is removed after its short session, while the
/// plain group keeps the broker's interval and its member.
#[test]
fn a_share_groups_heartbeat_and_session_overrides_reach_its_members() {
    use brook_protocol_tests::poll_until;
    use kafka_protocol::messages::incremental_alter_configs_request as iac;
    let broker = Broker::start_with(&[
        ("offsets.topic.num.partitions", "1"),
        ("group.share.min.heartbeat.interval.ms", "500"),
        ("group.share.min.session.timeout.ms", "1000"),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("sw-tuned");
    c.ensure_topic(&topic);
    let (tuned, plain) = (format!("{topic}-tuned"), format!("{topic}-plain"));
    let set = |name: &str, value: &str| {
        iac::AlterableConfig::default()
            .with_name(s(name))
            .with_config_operation(0)
            .with_value(Some(s(value)))
    };
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        iac::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s(&tuned))
            .with_configs(vec![
                set("share.heartbeat.interval.ms", "700"),
                set("share.session.timeout.ms", "1500"),
            ]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.request(1, &alter);
    assert_eq!(r.responses[0].error_code, 0, "{r:?}");
    for (group, want) in [(&tuned, 700), (&plain, 5000)] {
        let r = heartbeat(&mut c, group, &format!("{group}-m"), 0, Some(&topic));
        assert_eq!(
            (r.error_code, r.heartbeat_interval_ms),
            (0, want),
            "{group}: {r:?}"
        );
    }
    poll_until(
        "the tuned group's silent member removed",
        std::time::Duration::from_secs(10),
        || {
            let req = ShareGroupDescribeRequest::default().with_group_ids(vec![s(&tuned).into()]);
            let r: ShareGroupDescribeResponse = c.request(V, &req);
            r.groups[0].members.is_empty().then_some(())
        },
    );
    let r = heartbeat(&mut c, &tuned, &format!("{tuned}-m"), 2, None);
    assert_eq!(r.error_code, UNKNOWN_MEMBER_ID, "{r:?}");
    let r = heartbeat(&mut c, &plain, &format!("{plain}-m"), 2, None);
    assert_eq!(r.error_code, 0, "the plain group keeps its member: {r:?}");
}

/// `GET /v1/share-partitions` shows a share-partition's in-flight records as the share
/// fetches and acknowledgements leave them: acquired with delivery count 1, then the first
/// accepted (the start offset moves past it), the second released (Available, count 1) and
/// the third still acquired; a topic filter of another topic lists nothing.
#[test]
fn the_share_partitions_view_shows_each_in_flight_records_state_and_delivery_count() {
    use brook_protocol_tests::{cluster::CALL, supervised};
    let broker = Broker::start_with(&[
        ("offsets.topic.num.partitions", "1"),
        ("share.coordinator.state.topic.num.partitions", "1"),
        ("admin.listener", "127.0.0.1:0"),
    ]);
    let admin = broker.admin_address();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("sw-view");
    c.ensure_topic(&topic);
    let topic_id = c.metadata(&[&topic], false).topics[0].topic_id;
    let group = format!("{topic}-g");
    let member = Uuid::new_v4().to_string();
    assert_eq!(
        heartbeat(&mut c, &group, &member, 0, Some(&topic)).error_code,
        0
    );
    assert_eq!(
        share_fetch(&mut c, &group, &member, 0, topic_id, &[]).error_code,
        0
    );
    let recs: Vec<Rec> = (0..3).map(|i| Rec::kv("k", &format!("v{i}"), 1)).collect();
    c.produce(&topic, 0, encode_batch(Producer::NONE, &recs));
    let r = share_fetch(&mut c, &group, &member, 1, topic_id, &[]);
    assert_eq!(acquired(&r), (vec![(0, 2, 1)], 0, 0), "{r:?}");
    let view = |filter: &str| {
        let path = format!("/v1/share-partitions?topic={filter}");
        let (status, v) = supervised::http("GET", &admin, &path, None, CALL);
        assert_eq!(status, 200, "{v}");
        v["share_partitions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let runs = |v: &[serde_json::Value]| -> Vec<(i64, i64, String, i64)> {
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(
            (v[0]["group_id"].as_str(), v[0]["partition"].as_i64()),
            (Some(group.as_str()), Some(0))
        );
        v[0]["in_flight"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let n = |k: &str| r[k].as_i64().unwrap();
                (
                    n("first_offset"),
                    n("last_offset"),
                    r["state"].as_str().unwrap().into(),
                    n("delivery_count"),
                )
            })
            .collect()
    };
    let acquired_all = view(&topic);
    assert_eq!(runs(&acquired_all), vec![(0, 2, "Acquired".into(), 1)]);
    assert_eq!(
        (
            acquired_all[0]["start_offset"].as_i64(),
            acquired_all[0]["end_offset"].as_i64()
        ),
        (Some(0), Some(3))
    );
    let r = acknowledge(
        &mut c,
        &group,
        &member,
        2,
        topic_id,
        &[(0, 0, 1), (1, 1, 2)],
    );
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    let after = view(&topic);
    assert_eq!(
        runs(&after),
        vec![(1, 1, "Available".into(), 1), (2, 2, "Acquired".into(), 1)]
    );
    assert_eq!(after[0]["start_offset"].as_i64(), Some(1), "{after:?}");
    assert!(view("some-other-topic").is_empty());
}

/// A share group's members and assignments are written to `__consumer_offsets` (Kafka's
/// `ShareGroupMemberMetadata`, `ShareGroupTargetAssignment*` and
/// `ShareGroupCurrentMemberAssignment` records, replayed by `GroupMetadataManager.replay`,
/// whose `onLoaded` starts each loaded member's session): after the coordinator's node is
/// killed and started again, a member's heartbeat at its epoch is answered at that epoch, and
/// ShareGroupDescribe shows the member with its partitions and the group at its epochs.
#[test]
fn a_share_member_keeps_its_epoch_and_partitions_across_a_coordinator_kill() {
    use brook_protocol_tests::poll_until;
    use std::time::Duration;
    let mut broker = Broker::start_with(&[("offsets.topic.num.partitions", "1")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("sw-members");
    c.ensure_topic(&topic);
    let group = format!("{topic}-g");
    let member = "member-across-kill";
    let describe = |c: &mut WireClient| {
        let req = ShareGroupDescribeRequest::default().with_group_ids(vec![s(&group).into()]);
        let r: ShareGroupDescribeResponse = c.request(V, &req);
        r.groups[0].clone()
    };
    // FindCoordinator creates `__consumer_offsets`, as a client's first request does; until
    // the coordinator has loaded it, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
    // or NOT_COORDINATOR.
    let find = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s(&group)]);
    let _: FindCoordinatorResponse = c.request(6, &find);
    let loading = [14, 15, 16];
    // Heartbeat until the share-partition is initialized and assigned.
    let mut epoch = 0;
    let before = poll_until("the member assigned", Duration::from_secs(30), || {
        let r = heartbeat(&mut c, &group, member, epoch, Some(&topic));
        if loading.contains(&r.error_code) {
            return None;
        }
        assert_eq!(r.error_code, 0, "{r:?}");
        epoch = r.member_epoch;
        let g = describe(&mut c);
        let assigned = g
            .members
            .first()
            .map(|m| m.assignment.topic_partitions.clone());
        assigned.filter(|tps| !tps.is_empty()).map(|_| g)
    });
    broker.kill9();
    broker.start_again();
    let mut c = WireClient::connect(&broker.bootstrap());
    let r = poll_until("the coordinator loaded", Duration::from_secs(30), || {
        let r = heartbeat(&mut c, &group, member, epoch, None);
        (!loading.contains(&r.error_code)).then_some(r)
    });
    assert_eq!((r.error_code, r.member_epoch), (0, epoch), "{r:?}");
    let after = describe(&mut c);
    assert_eq!(
        (after.group_epoch, after.assignment_epoch),
        (before.group_epoch, before.assignment_epoch),
        "{after:?}"
    );
    let (m, was) = (&after.members[0], &before.members[0]);
    assert_eq!(
        (&m.member_id, m.member_epoch, &m.assignment),
        (&was.member_id, was.member_epoch, &was.assignment),
        "{after:?}"
    );
    assert_eq!(m.client_host, was.client_host);
}

/// Durable share state (KIP-932's share coordinator on `__share_group_state`), on 3 nodes:
/// what a share-partition leader acknowledged and released survives the SIGKILL of the
/// partition's leader (case 1) and of the share coordinator's node (case 2). After failover
/// the new leader reads the state back: acknowledged records never come again, released ones
/// come with their delivery count one higher, and records acquired but never acknowledged
/// come again (as in Kafka, which persists no acquisition, counted from their last release).
#[test]
fn share_state_survives_the_leader_and_the_share_coordinator() {
    use brook_protocol_tests::{poll_until, Cluster};
    use std::time::Duration;
    const ACCEPT: i8 = 1;
    const RELEASE: i8 = 2;
    let timeout = Duration::from_secs(30);
    let mut cluster = Cluster::start(
        3,
        &[
            ("offsets.topic.num.partitions", "1"),
            ("share.coordinator.state.topic.num.partitions", "1"),
        ],
    );
    // Case 1: the partition leader is killed.
    let topic = unique_topic("sw-durable");
    cluster.create_topic(&topic, 1, 3, &[]);
    let (group, member) = (format!("{topic}-g"), "m1");
    let leader = cluster.leader_of(&topic, 0);
    let mut c = WireClient::connect(&cluster.address(leader));
    let topic_id = c.metadata(&[&topic], false).topics[0].topic_id;
    // The opening fetch initializes the share-partition at the log end (offset 0).
    let r = share_fetch(&mut c, &group, member, 0, topic_id, &[]);
    assert_eq!(acquired(&r), (vec![], 0, 0), "{r:?}");
    for i in 0..10 {
        let rec = [Rec::kv("k", &format!("v{i}"), 1)];
        assert_eq!(
            c.produce(&topic, 0, encode_batch(Producer::NONE, &rec))
                .error_code,
            0
        );
    }
    let r = share_fetch(&mut c, &group, member, 1, topic_id, &[]);
    assert_eq!(acquired(&r), (vec![(0, 9, 1)], 0, 0), "{r:?}");
    let r = acknowledge(
        &mut c,
        &group,
        member,
        2,
        topic_id,
        &[(0, 4, ACCEPT), (5, 6, RELEASE)],
    );
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    let old = leader;
    cluster.kill(old);
    let leader = cluster
        .await_leader_other_than(&topic, 0, old, timeout)
        .leader;
    let got = fetch_after_failover(&cluster, leader, (&topic, topic_id), &group, timeout);
    assert_eq!(got, vec![(5, 6, 2), (7, 9, 1)]);
    cluster.start_node(old);

    // Case 2: the share coordinator's node is killed (a topic led elsewhere).
    let coordinator = cluster.leader_of("__share_group_state", 0);
    let topic = poll_until(
        "a topic whose leader is not the share coordinator",
        timeout,
        || {
            let t = unique_topic("sw-durable2");
            cluster.create_topic(&t, 1, 3, &[]);
            (cluster.leader_of(&t, 0) != coordinator).then_some(t)
        },
    );
    let leader = cluster.leader_of(&topic, 0);
    let mut c = WireClient::connect(&cluster.address(leader));
    let topic_id = c.metadata(&[&topic], false).topics[0].topic_id;
    let r = share_fetch(&mut c, &group, member, 0, topic_id, &[]);
    assert_eq!(acquired(&r), (vec![], 0, 0), "{r:?}");
    for i in 0..10 {
        let rec = [Rec::kv("k", &format!("v{i}"), 1)];
        assert_eq!(
            c.produce(&topic, 0, encode_batch(Producer::NONE, &rec))
                .error_code,
            0
        );
    }
    let r = share_fetch(&mut c, &group, member, 1, topic_id, &[]);
    assert_eq!(acquired(&r), (vec![(0, 9, 1)], 0, 0), "{r:?}");
    let r = acknowledge(&mut c, &group, member, 2, topic_id, &[(0, 3, ACCEPT)]);
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    cluster.kill(coordinator);
    // Written through the new coordinator once it is elected (the persister retries).
    let r = acknowledge(
        &mut c,
        &group,
        member,
        3,
        topic_id,
        &[(4, 5, ACCEPT), (6, 7, RELEASE)],
    );
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    cluster.start_node(coordinator);
    cluster.kill(leader);
    let leader = cluster
        .await_leader_other_than(&topic, 0, leader, timeout)
        .leader;
    let got = fetch_after_failover(&cluster, leader, (&topic, topic_id), &group, timeout);
    assert_eq!(got, vec![(6, 7, 2), (8, 9, 1)]);
}

/// The ranges a new member's opening ShareFetch acquires from `leader` once its high
/// watermark is back at 10 (a new leader moves it when the followers fetch again) and it
/// answers without error (it may still be loading, or the coordinator moving).
fn fetch_after_failover(
    cluster: &brook_protocol_tests::Cluster,
    leader: i32,
    (topic, topic_id): (&str, Uuid),
    group: &str,
    timeout: std::time::Duration,
) -> Vec<(i64, i64, i16)> {
    brook_protocol_tests::poll_until_ok("the high watermark at 10", timeout, || {
        let mut c = WireClient::connect(&cluster.address(leader));
        let p = c.list_offsets(topic, 0, -1);
        (p.error_code, p.offset)
            .eq(&(0, 10))
            .then_some(())
            .ok_or(format!("{p:?}"))
    });
    brook_protocol_tests::poll_until_ok("records again after failover", timeout, || {
        let mut c = WireClient::connect(&cluster.address(leader));
        let r = share_fetch(&mut c, group, "m2", 0, topic_id, &[]);
        match acquired(&r) {
            (got, 0, 0) if !got.is_empty() => Ok(got),
            other => Err(format!("{other:?}: {r:?}")),
        }
    })
}

/// The share coordinator's lookup and state APIs with bad input: a malformed share-partition
/// key (FindCoordinator key type 2), a write whose batch ends before it starts, and a read of a
/// topic that does not exist, each answered with Kafka's error code.
#[test]
fn share_state_apis_bad_input() {
    use kafka_protocol::messages::{
        read_share_group_state_request as read, write_share_group_state_request as write,
    };
    let broker = Broker::start_with(&[("share.coordinator.state.topic.num.partitions", "1")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("sw-state");
    c.ensure_topic(&topic);
    let topic_id = c.metadata(&[&topic], false).topics[0].topic_id;
    let find = |c: &mut WireClient, key: &str| -> i16 {
        let req = FindCoordinatorRequest::default()
            .with_key_type(2)
            .with_coordinator_keys(vec![s(key)]);
        let r: FindCoordinatorResponse = c.request(6, &req);
        r.coordinators[0].error_code
    };
    assert_eq!(find(&mut c, "no-colons"), INVALID_REQUEST);
    assert_eq!(find(&mut c, "g:id:not-a-number"), INVALID_REQUEST);
    assert_eq!(find(&mut c, &format!("g:{topic_id}:0")), 0);
    let req = WriteShareGroupStateRequest::default()
        .with_group_id(s("g"))
        .with_topics(vec![write::WriteStateData::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![write::PartitionData::default()
                .with_partition(0)
                .with_start_offset(0)
                .with_state_batches(vec![write::StateBatch::default()
                    .with_first_offset(5)
                    .with_last_offset(4)])])]);
    let r: WriteShareGroupStateResponse = c.request(0, &req);
    assert_eq!(
        r.results[0].partitions[0].error_code, INVALID_REQUEST,
        "{r:?}"
    );
    let req = ReadShareGroupStateRequest::default()
        .with_group_id(s("g"))
        .with_topics(vec![read::ReadStateData::default()
            .with_topic_id(Uuid::new_v4())
            .with_partitions(vec![
                read::PartitionData::default().with_partition(0)
            ])]);
    let r: ReadShareGroupStateResponse = c.request(0, &req);
    let unknown_topic_or_partition = 3;
    assert_eq!(
        r.results[0].partitions[0].error_code, unknown_topic_or_partition,
        "{r:?}"
    );
}

/// Kafka's `ShareCoordinatorShard.maybeGetWriteStateError`: a WriteShareGroupState to a
/// share-partition never initialized is refused (WRITE_UNINITIALIZED_SHARE_PARTITION,
/// INVALID_REQUEST) and writes nothing; after InitializeShareGroupState the same write is taken.
#[test]
fn write_to_an_uninitialized_share_partition_is_refused() {
    use kafka_protocol::messages::{
        initialize_share_group_state_request as init, read_share_group_state_request as read,
        write_share_group_state_request as write,
    };
    let broker = Broker::start_with(&[("share.coordinator.state.topic.num.partitions", "1")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("sw-uninit");
    c.ensure_topic(&topic);
    let topic_id = c.metadata(&[&topic], false).topics[0].topic_id;
    let group = "sw-uninit-group";
    // FindCoordinator (key type 2) creates `__share_group_state`, as the persister's lookup does.
    let req = FindCoordinatorRequest::default()
        .with_key_type(2)
        .with_coordinator_keys(vec![s(&format!("{group}:{topic_id}:0"))]);
    let r: FindCoordinatorResponse = c.request(6, &req);
    assert_eq!(r.coordinators[0].error_code, 0, "{r:?}");
    let write_once = |c: &mut WireClient| -> i16 {
        let req = WriteShareGroupStateRequest::default()
            .with_group_id(s(group))
            .with_topics(vec![write::WriteStateData::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![write::PartitionData::default()
                    .with_partition(0)
                    .with_state_epoch(0)
                    .with_leader_epoch(0)
                    .with_start_offset(0)
                    .with_state_batches(vec![write::StateBatch::default()
                        .with_first_offset(0)
                        .with_last_offset(4)
                        .with_delivery_state(2)
                        .with_delivery_count(1)])])]);
        let r: WriteShareGroupStateResponse = c.request(0, &req);
        r.results[0].partitions[0].error_code
    };
    // The share coordinator's partition is created and led on first use: a write waits for
    // it as the persister does (NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS are retried).
    let write = |c: &mut WireClient| -> i16 {
        for _ in 0..100 {
            let code = write_once(c);
            if code != 16 && code != 14 {
                return code;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        write_once(c)
    };
    let read_start = |c: &mut WireClient| -> (i16, i64) {
        let req = ReadShareGroupStateRequest::default()
            .with_group_id(s(group))
            .with_topics(vec![read::ReadStateData::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![read::PartitionData::default()
                    .with_partition(0)
                    .with_leader_epoch(0)])]);
        let r: ReadShareGroupStateResponse = c.request(0, &req);
        let p = &r.results[0].partitions[0];
        (p.error_code, p.start_offset)
    };
    assert_eq!(
        write(&mut c),
        INVALID_REQUEST,
        "a write before any initialize"
    );
    let (code, start) = read_start(&mut c);
    assert!(
        code != 0 || start == -1,
        "the refused write stored nothing: {code} {start}"
    );
    let req = InitializeShareGroupStateRequest::default()
        .with_group_id(s(group))
        .with_topics(vec![init::InitializeStateData::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![init::PartitionData::default()
                .with_partition(0)
                .with_state_epoch(0)
                .with_start_offset(-1)])]);
    let r: InitializeShareGroupStateResponse = c.request(0, &req);
    assert_eq!(r.results[0].partitions[0].error_code, 0, "{r:?}");
    assert_eq!(write(&mut c), 0, "a write after the initialize");
    assert_eq!(read_start(&mut c), (0, 0));
}

fn describe_offsets(
    c: &mut WireClient,
    group: &str,
    topics: Option<&[&str]>,
) -> describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup {
    use kafka_protocol::messages::describe_share_group_offsets_request::*;
    let topics = topics.map(|ts| {
        ts.iter()
            .map(|t| {
                DescribeShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(s(t).into())
                    .with_partitions(vec![0])
            })
            .collect()
    });
    let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(s(group).into())
            .with_topics(topics),
    ]);
    let mut r: DescribeShareGroupOffsetsResponse = c.request(1, &req);
    r.groups.remove(0)
}

/// (topic, partition 0's start offset) of each described topic.
fn start_offsets(
    g: &describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup,
) -> Vec<(String, i64)> {
    g.topics
        .iter()
        .map(|t| (t.topic_name.to_string(), t.partitions[0].start_offset))
        .collect()
}

/// Partition 0's lag (v1) of each described topic.
fn lags(
    g: &describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup,
) -> Vec<i64> {
    g.topics.iter().map(|t| t.partitions[0].lag).collect()
}

fn alter_offsets(
    c: &mut WireClient,
    group: &str,
    topic: &str,
    partition: i32,
    start: i64,
) -> AlterShareGroupOffsetsResponse {
    use kafka_protocol::messages::alter_share_group_offsets_request::*;
    let req = AlterShareGroupOffsetsRequest::default()
        .with_group_id(s(group).into())
        .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
            .with_topic_name(s(topic).into())
            .with_partitions(vec![
                AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(partition)
                    .with_start_offset(start),
            ])]);
    c.request(0, &req)
}

fn delete_offsets(c: &mut WireClient, group: &str, topic: &str) -> DeleteShareGroupOffsetsResponse {
    use kafka_protocol::messages::delete_share_group_offsets_request::*;
    let req = DeleteShareGroupOffsetsRequest::default()
        .with_group_id(s(group).into())
        .with_topics(vec![
            DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(s(topic).into())
        ]);
    c.request(0, &req)
}

/// The share group offsets admin APIs over the wire (Kafka's `GroupCoordinatorService`
/// paths): a start offset is described after acknowledgements, altered and deleted only while
/// the group is empty (NON_EMPTY_GROUP), an altered one is where the next member starts (the
/// partition leader dropped the group's share-partition when its last session closed), bad
/// topics and partitions are answered UNKNOWN_TOPIC_OR_PARTITION, an unknown group's delete
/// GROUP_ID_NOT_FOUND; and DeleteGroups deletes the group's share state.
#[test]
fn share_group_offsets_admin_apis() {
    const NON_EMPTY_GROUP: i16 = 68;
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    let broker = Broker::start_with(&[
        ("offsets.topic.num.partitions", "1"),
        ("share.coordinator.state.topic.num.partitions", "1"),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("sw-offsets");
    let other = unique_topic("sw-offsets-other");
    c.ensure_topic(&topic);
    c.ensure_topic(&other);
    let topic_id = c.metadata(&[&topic], false).topics[0].topic_id;
    let group = format!("{topic}-g");
    let a = Uuid::new_v4().to_string();
    assert_eq!(heartbeat(&mut c, &group, &a, 0, Some(&topic)).error_code, 0);
    assert_eq!(
        share_fetch(&mut c, &group, &a, 0, topic_id, &[]).error_code,
        0
    );
    let recs: Vec<Rec> = (0..3).map(|i| Rec::kv("k", &format!("v{i}"), 1)).collect();
    c.produce(&topic, 0, encode_batch(Producer::NONE, &recs));
    let r = share_fetch(&mut c, &group, &a, 1, topic_id, &[]);
    assert_eq!(acquired(&r).0, vec![(0, 2, 1)], "{r:?}");
    assert_eq!(
        acknowledge(&mut c, &group, &a, 2, topic_id, &[(0, 2, 1)]).error_code,
        0
    );
    // As Kafka 4.4 stores it: the acknowledged batch is written before the start offset
    // moves past it (Kafka's `SharePartition.rollbackOrProcessStateUpdates`), so the stored
    // start stays 0 with 3 offsets delivered: lag 3 - 0 - 3 = 0 (v1, KIP-1226).
    let d = describe_offsets(&mut c, &group, Some(&[&topic, "no-such-topic"]));
    assert_eq!(
        start_offsets(&d),
        [(topic.clone(), 0), ("no-such-topic".into(), -1)]
    );
    assert_eq!(lags(&d), [0, -1]);
    assert_eq!(
        start_offsets(&describe_offsets(&mut c, &group, None)),
        [(topic.clone(), 0)]
    );

    // A member holds the group: neither altered nor deleted.
    assert_eq!(
        alter_offsets(&mut c, &group, &topic, 0, 1).error_code,
        NON_EMPTY_GROUP
    );
    assert_eq!(
        delete_offsets(&mut c, &group, &topic).error_code,
        NON_EMPTY_GROUP
    );
    assert_eq!(
        acknowledge(&mut c, &group, &a, -1, topic_id, &[]).error_code,
        0
    );
    assert_eq!(heartbeat(&mut c, &group, &a, -1, None).error_code, 0);

    let r = alter_offsets(&mut c, &group, &topic, 0, 1);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    for (t, p) in [("no-such-topic", 0), (topic.as_str(), 5)] {
        let r = alter_offsets(&mut c, &group, t, p, 0);
        let code = r.responses[0].partitions[0].error_code;
        assert_eq!(
            (r.error_code, code),
            (0, UNKNOWN_TOPIC_OR_PARTITION),
            "{r:?}"
        );
    }
    // An altered start has delivered nothing past it: lag 3 - 1 - 0.
    let d = describe_offsets(&mut c, &group, None);
    assert_eq!(
        (start_offsets(&d), lags(&d)),
        (vec![(topic.clone(), 1)], vec![2])
    );
    let b = Uuid::new_v4().to_string();
    assert_eq!(heartbeat(&mut c, &group, &b, 0, Some(&topic)).error_code, 0);
    let r = share_fetch(&mut c, &group, &b, 0, topic_id, &[]);
    assert_eq!(
        acquired(&r).0,
        vec![(1, 2, 1)],
        "from the altered offset: {r:?}"
    );
    assert_eq!(
        acknowledge(&mut c, &group, &b, -1, topic_id, &[]).error_code,
        0
    );
    assert_eq!(heartbeat(&mut c, &group, &b, -1, None).error_code, 0);

    let r = delete_offsets(&mut c, "no-such-group", &topic);
    assert_eq!(r.error_code, GROUP_ID_NOT_FOUND, "{r:?}");
    let r = delete_offsets(&mut c, &group, &other);
    assert_eq!(
        r.responses[0].error_code, UNKNOWN_TOPIC_OR_PARTITION,
        "{r:?}"
    );
    let r = delete_offsets(&mut c, &group, &topic);
    assert_eq!((r.error_code, r.responses[0].error_code), (0, 0), "{r:?}");
    assert_eq!(start_offsets(&describe_offsets(&mut c, &group, None)), []);
    let d = describe_offsets(&mut c, &group, Some(&[&topic]));
    assert_eq!(start_offsets(&d), [(topic.clone(), -1)]);

    // A member's heartbeat initializes the share-partition again at start -1, which an empty
    // fetch does not write (Kafka's SharePartition holds the start until its first write), and
    // DeleteGroups takes the group's share state with it.
    assert_eq!(heartbeat(&mut c, &group, &b, 0, Some(&topic)).error_code, 0);
    assert_eq!(
        share_fetch(&mut c, &group, &b, 0, topic_id, &[]).error_code,
        0
    );
    assert_eq!(
        acknowledge(&mut c, &group, &b, -1, topic_id, &[]).error_code,
        0
    );
    assert_eq!(heartbeat(&mut c, &group, &b, -1, None).error_code, 0);
    assert_eq!(
        start_offsets(&describe_offsets(&mut c, &group, None)),
        [(topic.clone(), -1)]
    );
    let r: DeleteGroupsResponse = c.request(
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![s(&group).into()]),
    );
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    let d = describe_offsets(&mut c, &group, Some(&[&topic]));
    assert_eq!(
        start_offsets(&d),
        [(topic.clone(), -1)],
        "state left after DeleteGroups"
    );
}

/// Kafka 4.4's `ModernGroup` starts a new share group at group epoch 1 and assignment epoch 1
/// (`TargetAssignmentMetadata.INITIAL`); the first member's new subscription
/// (`shareGroupHeartbeat`, `hasMemberSubscriptionChanged`) moves it to 2 once, whether the
/// topic exists or not, and the target follows: member epoch 2, ShareGroupDescribe (2, 2).
/// Brook started share groups at 0 and answered 1.
#[test]
fn a_new_share_group_starts_at_epoch_1_and_its_first_member_moves_it_to_2() {
    let broker = Broker::start_with(&[("offsets.topic.num.partitions", "1")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("sw-epoch1");
    c.ensure_topic(&topic);
    let missing = unique_topic("sw-epoch1-missing");
    for subscribed in [&topic, &missing] {
        let group = format!("{subscribed}-g");
        let member = Uuid::new_v4().to_string();
        // FindCoordinator creates `__consumer_offsets`; Kafka answers a coordinator error
        // until it is created and loaded.
        let find = FindCoordinatorRequest::default()
            .with_key(s(&group))
            .with_key_type(0);
        let r = brook_protocol_tests::poll_until_ok(
            "the first share heartbeat",
            std::time::Duration::from_secs(30),
            || {
                let f: FindCoordinatorResponse = c.request(3, &find);
                if f.error_code != 0 {
                    return Err(format!("{f:?}"));
                }
                match heartbeat(&mut c, &group, &member, 0, Some(subscribed)) {
                    r if (14..=16).contains(&r.error_code) => Err(format!("{r:?}")),
                    r => Ok(r),
                }
            },
        );
        assert_eq!((r.error_code, r.member_epoch), (0, 2), "{group}: {r:?}");
        let req = ShareGroupDescribeRequest::default().with_group_ids(vec![s(&group).into()]);
        let d: ShareGroupDescribeResponse = c.request(V, &req);
        let g = &d.groups[0];
        assert_eq!(
            (g.error_code, g.group_epoch, g.assignment_epoch),
            (0, 2, 2),
            "{group}: {d:?}"
        );
    }
}
