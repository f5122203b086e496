//! Streams groups (KIP-1071) over the raw wire: a topology whose source topic is missing is
//! reported, its internal topics are created by the broker, tasks go to the first member and
//! move to a second one only after the first gave them up, offsets are committed with the
//! member epoch, StreamsGroupDescribe shows the group, and bad heartbeats get Kafka's errors.
//! The group lives in `__consumer_offsets`: it survives a broker restart and a move of its
//! coordinator, members, epochs, topology and assignments.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::wire::WireClient as Wire;
use brook_protocol_tests::{poll_until, poll_until_ok, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::streams_group_heartbeat_request::{
    Subtopology, TaskIds, TopicInfo, Topology,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const V: i16 = 1;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;
const FENCED_MEMBER_EPOCH: i16 = 110;
const STALE_MEMBER_EPOCH: i16 = 113;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const MISSING_SOURCE_TOPICS: i8 = 1;
const MISSING_INTERNAL_TOPICS: i8 = 3;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A word count: subtopology 0 reads `input` and writes `<app>-repartition`; subtopology 1
/// reads it back and keeps `<app>-changelog`.
fn topology(app: &str, input: &str) -> Topology {
    let info = |name: String| TopicInfo::default().with_name(s(&name).into());
    Topology::default().with_epoch(0).with_subtopologies(vec![
        Subtopology::default()
            .with_subtopology_id(s("0"))
            .with_source_topics(vec![s(input).into()])
            .with_repartition_sink_topics(vec![s(&format!("{app}-repartition")).into()]),
        Subtopology::default()
            .with_subtopology_id(s("1"))
            .with_repartition_source_topics(vec![info(format!("{app}-repartition"))])
            .with_state_changelog_topics(vec![info(format!("{app}-changelog"))]),
    ])
}

type Owned = Vec<(String, Vec<i32>)>;

fn heartbeat(
    c: &mut WireClient,
    group: &str,
    member: &str,
    epoch: i32,
    topology: Option<Topology>,
    owned: Option<&Owned>,
) -> StreamsGroupHeartbeatResponse {
    let tasks = |o: &Owned| {
        o.iter()
            .map(|(s_id, ps)| {
                TaskIds::default()
                    .with_subtopology_id(s(s_id))
                    .with_partitions(ps.clone())
            })
            .collect::<Vec<_>>()
    };
    let req = StreamsGroupHeartbeatRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 })
        .with_process_id(Some(s(member)))
        .with_topology(topology)
        .with_active_tasks(owned.map(tasks))
        .with_standby_tasks(owned.map(|_| vec![]))
        .with_warmup_tasks(owned.map(|_| vec![]));
    c.request(V, &req)
}

/// The active tasks of an answer, sorted; `None` when the answer carries none.
fn active(r: &StreamsGroupHeartbeatResponse) -> Option<Owned> {
    r.active_tasks.as_ref().map(|ts| {
        let mut out: Owned = ts
            .iter()
            .map(|t| (t.subtopology_id.to_string(), t.partitions.clone()))
            .collect();
        out.sort();
        out
    })
}

fn count(o: &Owned) -> usize {
    o.iter().map(|(_, ps)| ps.len()).sum()
}

fn statuses(r: &StreamsGroupHeartbeatResponse) -> Vec<i8> {
    r.status.iter().flatten().map(|st| st.status_code).collect()
}

fn commit(c: &mut WireClient, group: &str, member: &str, epoch: i32, topic: &str) -> i16 {
    use kafka_protocol::messages::offset_commit_request::*;
    let req = OffsetCommitRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_generation_id_or_member_epoch(epoch)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(s(topic).into())
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)])]);
    let r: OffsetCommitResponse = c.request(9, &req);
    r.topics[0].partitions[0].error_code
}

/// StreamsGroupDescribe of one group, retried (bounded) while the coordinator is still
/// loading or moving; any other answer is returned as it is.
fn describe(addr: &str, group: &str) -> streams_group_describe_response::DescribedGroup {
    poll_until_ok("a settled coordinator", Duration::from_secs(30), || {
        let mut c =
            WireClient::try_connect(addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
        let d: StreamsGroupDescribeResponse = c.request(
            1,
            &StreamsGroupDescribeRequest::default().with_group_ids(vec![s(group).into()]),
        );
        let g = d
            .groups
            .into_iter()
            .next()
            .ok_or("no group in the answer")?;
        match g.error_code {
            COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR => {
                Err(format!("error {}", g.error_code))
            }
            _ => Ok(g),
        }
    })
}

/// What a coordinator must read back: the group as described, but for its state (a group
/// read back is NotReady until a heartbeat configures its topology against the topics, as in
/// Kafka).
fn durable_view(
    mut g: streams_group_describe_response::DescribedGroup,
) -> streams_group_describe_response::DescribedGroup {
    assert_eq!(g.error_code, 0, "{g:?}");
    g.group_state = s("");
    g
}

#[test]
fn streams_group_lifecycle_over_the_wire() {
    let mut broker = Broker::start_with(&[("offsets.topic.num.partitions", "1")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let app = unique_topic("stw");
    let input = format!("{app}-in");
    let (a, b) = ("member-a", "member-b");

    // Bad heartbeats: no topology when joining; a member of a group that does not exist.
    let r = heartbeat(&mut c, &app, a, 0, None, None);
    assert_eq!(r.error_code, INVALID_REQUEST, "{r:?}");
    let r = heartbeat(&mut c, &app, a, 3, None, None);
    assert_eq!(r.error_code, GROUP_ID_NOT_FOUND, "{r:?}");

    // The source topic is missing: the member joins, gets no tasks, and is told why.
    let r = heartbeat(
        &mut c,
        &app,
        a,
        0,
        Some(topology(&app, &input)),
        Some(&vec![]),
    );
    assert_eq!((r.error_code, r.member_epoch), (0, 1), "{r:?}");
    assert_eq!(statuses(&r), vec![MISSING_SOURCE_TOPICS], "{r:?}");
    assert_eq!(active(&r), Some(vec![]));

    // With the source topic there, the broker creates the internal topics with its partition
    // count; then every task goes to the only member.
    Wire::ensure_topic(&mut c, &input);
    let mut epoch = r.member_epoch;
    let tasks_a = poll_until(
        "tasks for the first member",
        Duration::from_secs(30),
        || {
            let r = heartbeat(&mut c, &app, a, epoch, None, Some(&vec![]));
            assert_eq!(r.error_code, 0, "{r:?}");
            epoch = r.member_epoch;
            let missing = statuses(&r).contains(&MISSING_INTERNAL_TOPICS);
            active(&r).filter(|t| !missing && count(t) == 2)
        },
    );
    assert_eq!(tasks_a, vec![("0".into(), vec![0]), ("1".into(), vec![0])]);
    let md = c.metadata(
        &[&format!("{app}-repartition"), &format!("{app}-changelog")],
        false,
    );
    assert!(
        md.topics
            .iter()
            .all(|t| t.error_code == 0 && t.partitions.len() == 1),
        "{md:?}"
    );

    // Offsets commit at the member epoch; an older epoch is stale, a newer one fenced.
    assert_eq!(commit(&mut c, &app, a, epoch, &input), 0);
    assert_eq!(
        commit(&mut c, &app, a, epoch - 1, &input),
        STALE_MEMBER_EPOCH
    );
    assert_eq!(
        commit(&mut c, &app, a, epoch + 1, &input),
        FENCED_MEMBER_EPOCH
    );
    assert_eq!(
        commit(&mut c, &app, "stranger", epoch, &input),
        UNKNOWN_MEMBER_ID
    );

    // A second member joins: the first must give up a task before the second gets it.
    let r = heartbeat(
        &mut c,
        &app,
        b,
        0,
        Some(topology(&app, &input)),
        Some(&vec![]),
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        active(&r),
        Some(vec![]),
        "b gets nothing while a holds it all: {r:?}"
    );
    let epoch_b = r.member_epoch;
    let r = heartbeat(&mut c, &app, a, epoch, None, Some(&tasks_a));
    let kept = active(&r).expect("a is told what it keeps");
    assert_eq!(count(&kept), 1, "{r:?}");
    assert_eq!(
        r.member_epoch, epoch,
        "a stays at its epoch while it revokes: {r:?}"
    );
    let r = heartbeat(&mut c, &app, b, epoch_b, None, Some(&vec![]));
    assert_eq!(active(&r), None, "nothing released yet: {r:?}");
    // a reports it gave the task up: it moves to the new epoch, and b gets the task.
    let r = heartbeat(&mut c, &app, a, epoch, None, Some(&kept));
    assert!(r.member_epoch > epoch, "{r:?}");
    let r = heartbeat(&mut c, &app, b, epoch_b, None, Some(&vec![]));
    let epoch_b = r.member_epoch;
    let moved = active(&r).expect("b gets the released task");
    assert_eq!(count(&moved), 1, "{r:?}");
    assert!(
        kept.iter().all(|k| !moved.contains(k)),
        "{kept:?} {moved:?}"
    );

    // StreamsGroupDescribe: two members, each with one task, and the topology.
    let d: StreamsGroupDescribeResponse = c.request(
        1,
        &StreamsGroupDescribeRequest::default().with_group_ids(vec![s(&app).into()]),
    );
    let g = &d.groups[0];
    assert_eq!(g.error_code, 0, "{g:?}");
    assert_eq!(g.members.len(), 2, "{g:?}");
    assert_eq!(
        g.topology
            .as_ref()
            .map(|t| t.subtopologies.iter().flatten().count()),
        Some(2)
    );

    // a leaves; b takes over every task at a new epoch.
    let r = heartbeat(&mut c, &app, a, -1, None, None);
    assert_eq!((r.error_code, r.member_epoch), (0, -1), "{r:?}");
    let r = heartbeat(&mut c, &app, b, epoch_b, None, Some(&moved));
    assert_eq!(r.error_code, 0, "{r:?}");
    assert!(r.member_epoch > epoch_b, "{r:?}");
    assert_eq!(active(&r), Some(tasks_a.clone()), "{r:?}");
    let epoch_b = r.member_epoch;

    // A SIGKILL and a restart: the group is read back from `__consumer_offsets` as it was,
    // without the member that left, and b carries on at its epoch.
    let before = durable_view(describe(&broker.bootstrap(), &app));
    assert_eq!(before.members.len(), 1, "{before:?}");
    broker.kill9();
    broker.start_again();
    let after = durable_view(describe(&broker.bootstrap(), &app));
    assert_eq!(after, before);
    let mut c = WireClient::connect(&broker.bootstrap());
    let r = heartbeat(&mut c, &app, b, epoch_b, None, Some(&tasks_a));
    assert_eq!((r.error_code, r.member_epoch), (0, epoch_b), "{r:?}");
    let settled = describe(&broker.bootstrap(), &app);
    assert_eq!(settled.group_state.as_str(), "Stable", "{settled:?}");
    assert_eq!(settled.group_epoch, before.group_epoch, "no new rebalance");

    // The last member leaves and the empty group is deleted: its tombstones keep it deleted
    // across a restart.
    let r = heartbeat(&mut c, &app, b, -1, None, None);
    assert_eq!(r.error_code, 0, "{r:?}");
    let d: DeleteGroupsResponse = c.request(
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![s(&app).into()]),
    );
    assert_eq!(d.results[0].error_code, 0, "{d:?}");
    broker.kill9();
    broker.start_again();
    let gone = describe(&broker.bootstrap(), &app);
    assert_eq!(gone.error_code, GROUP_ID_NOT_FOUND, "{gone:?}");
}

/// The coordinator's node dies: the new leader of the group's offsets partition reads the
/// streams group back, and its member heartbeats there at the epoch it had.
#[test]
fn streams_group_moves_with_its_coordinator() {
    let c = &mut Cluster::start(3, &[("offsets.topic.num.partitions", "1")]);
    let app = unique_topic("stwm");
    let input = format!("{app}-in");
    c.create_topic(&input, 2, 3, &[]);
    let coordinator = poll_until_ok("a coordinator", Duration::from_secs(60), || {
        c.find_coordinator(1, &app)
    });
    let mut w = WireClient::connect(&c.address(coordinator));
    let mut epoch = 0;
    let tasks = poll_until("the member's tasks", Duration::from_secs(30), || {
        let topology = (epoch == 0).then(|| topology(&app, &input));
        let r = heartbeat(&mut w, &app, "m", epoch, topology, Some(&vec![]));
        match r.error_code {
            0 => epoch = r.member_epoch,
            // The new offsets partition may still be electing or loading.
            COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE => return None,
            _ => panic!("{r:?}"),
        }
        let missing = statuses(&r).contains(&MISSING_INTERNAL_TOPICS);
        active(&r).filter(|t| !missing && count(t) == 4)
    });
    let before = durable_view(describe(&c.address(coordinator), &app));
    drop(w);

    c.kill(coordinator);
    let survivor = c.live_ids()[0];
    let moved = poll_until_ok("a new coordinator", Duration::from_secs(60), || {
        match c.find_coordinator(survivor, &app) {
            Ok(n) if n != coordinator => Ok(n),
            other => Err(format!("{other:?}")),
        }
    });
    let after = durable_view(describe(&c.address(moved), &app));
    assert_eq!(after, before);
    let mut w = WireClient::connect(&c.address(moved));
    let r = heartbeat(&mut w, &app, "m", epoch, None, Some(&tasks));
    assert_eq!((r.error_code, r.member_epoch), (0, epoch), "{r:?}");
}
