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
const ASSIGNMENT_DELAYED: i8 = 5;
const CREATE_TOPICS_V: i16 = 5;
const FIND_COORDINATOR_V: i16 = 3;
/// `group.streams.initial.rebalance.delay.ms` in the test of the initial rebalance delay.
const INITIAL_REBALANCE_DELAY: Duration = Duration::from_millis(3000);
/// The brokers of the other tests assign at once (Kafka's default delay is 3 s).
const NO_INITIAL_DELAY: (&str, &str) = ("group.streams.initial.rebalance.delay.ms", "0");

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
    let req = StreamsGroupHeartbeatRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 })
        .with_process_id(Some(s(member)))
        .with_topology(topology)
        .with_active_tasks(owned.map(task_ids))
        .with_standby_tasks(owned.map(|_| vec![]))
        .with_warmup_tasks(owned.map(|_| vec![]));
    c.request(V, &req)
}

/// Owned tasks as a heartbeat reports them.
fn task_ids(o: &Owned) -> Vec<TaskIds> {
    o.iter()
        .map(|(s_id, ps)| {
            TaskIds::default()
                .with_subtopology_id(s(s_id))
                .with_partitions(ps.clone())
        })
        .collect()
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

/// One subtopology reading `input`, no internal topics.
fn source_only(input: &str) -> Topology {
    Topology::default()
        .with_epoch(0)
        .with_subtopologies(vec![Subtopology::default()
            .with_subtopology_id(s("0"))
            .with_source_topics(vec![s(input).into()])])
}

/// A heartbeat as the Kafka Streams 4.4 client builds it
/// (`StreamsGroupHeartbeatRequestManager.HeartbeatState.buildRequestData`): while the member
/// is JOINING (`joining` holds the topology), the topology, RebalanceTimeoutMs, process id
/// and empty task lists; afterwards only the epoch, and the owned tasks when they changed
/// since the last heartbeat (RebalanceTimeoutMs stays at its default, -1).
fn client_heartbeat(
    c: &mut WireClient,
    group: &str,
    member: &str,
    epoch: i32,
    joining: Option<&Topology>,
    owned: Option<&Owned>,
) -> StreamsGroupHeartbeatResponse {
    let Some(topology) = joining else {
        let req = StreamsGroupHeartbeatRequest::default()
            .with_group_id(s(group).into())
            .with_member_id(s(member))
            .with_member_epoch(epoch)
            .with_active_tasks(owned.map(task_ids))
            .with_standby_tasks(owned.map(|_| vec![]))
            .with_warmup_tasks(owned.map(|_| vec![]));
        return c.request(V, &req);
    };
    heartbeat(c, group, member, 0, Some(topology.clone()), Some(&vec![]))
}

/// The group's coordinator, found and loaded: Kafka creates `__consumer_offsets` at the
/// first FindCoordinator and loads it, and a heartbeat before is refused.
fn wait_for_coordinator(c: &mut WireClient, addr: &str, group: &str) {
    poll_until_ok("FindCoordinator", Duration::from_secs(30), || {
        let find = FindCoordinatorRequest::default()
            .with_key(s(group))
            .with_key_type(0);
        let r: FindCoordinatorResponse = c.request(FIND_COORDINATOR_V, &find);
        match r.error_code {
            0 => Ok(()),
            e => Err(format!("error {e}")),
        }
    });
    let g = describe(addr, group);
    assert_eq!(g.error_code, GROUP_ID_NOT_FOUND, "{g:?}");
}

/// The initial rebalance delay of streams groups (Kafka 4.4's
/// `group.streams.initial.rebalance.delay.ms`, 3 s), followed as the Streams client lives
/// it: the first member of a new group is answered at member epoch 1 with no tasks and the
/// status ASSIGNMENT_DELAYED, and so is a second one joining within the delay; their next
/// heartbeats, at that epoch without RebalanceTimeoutMs, are served (not INVALID_REQUEST);
/// the tasks come only after the delay, shared between them (Kafka's
/// `GroupMetadataManager.streamsGroupHeartbeat` and `computeDelayedTargetAssignment`).
/// When both left, a member joining the empty group is given its assignment epoch. Without
/// the delay the first member was given both tasks at once; with the delay but member epoch
/// 0 the next heartbeat was refused and Kafka Streams instances went to ERROR.
#[test]
fn a_streams_client_joining_a_new_group_waits_out_the_initial_rebalance_delay() {
    let delay_ms = INITIAL_REBALANCE_DELAY.as_millis().to_string();
    let broker = Broker::start_with(&[
        ("offsets.topic.num.partitions", "1"),
        ("group.streams.initial.rebalance.delay.ms", &delay_ms),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let app = unique_topic("stwdelay");
    let input = format!("{app}-in");
    let create = Wire::create_topics_request(&input, 2, 1, &[], Duration::from_secs(10));
    let r: CreateTopicsResponse = c.request(CREATE_TOPICS_V, &create);
    assert_eq!(r.topics[0].error_code, 0, "{r:?}");
    c.ensure_topic(&input);
    wait_for_coordinator(&mut c, &broker.bootstrap(), &app);

    let topology = source_only(&input);
    let joined_at = std::time::Instant::now();
    // (member, epoch, owned tasks, owned tasks last reported)
    let mut members: Vec<(&str, i32, Owned, Owned)> = Vec::new();
    for id in ["member-a", "member-b"] {
        let r = client_heartbeat(&mut c, &app, id, 0, Some(&topology), None);
        assert_eq!(r.error_code, 0, "{r:?}");
        assert_eq!(statuses(&r), vec![ASSIGNMENT_DELAYED], "{r:?}");
        assert_eq!(active(&r), Some(vec![]), "{r:?}");
        members.push((id, r.member_epoch, Owned::new(), Owned::new()));
    }
    // Kafka 4.4: both at epoch 1, the empty target's; the group at epoch 3 (two joins).
    let g = describe(&broker.bootstrap(), &app);
    let epochs: Vec<i32> = members.iter().map(|m| m.1).collect();
    assert_eq!(epochs, vec![1, 1], "{g:?}");
    assert_eq!((g.group_epoch, g.assignment_epoch), (3, 1), "{g:?}");

    poll_until("a task for each member", Duration::from_secs(30), || {
        for (id, epoch, owned, reported) in members.iter_mut() {
            let report = (owned != reported).then(|| owned.clone());
            let r = client_heartbeat(&mut c, &app, id, *epoch, None, report.as_ref());
            assert_eq!(r.error_code, 0, "{r:?}");
            if let Some(o) = report {
                *reported = o;
            }
            *epoch = r.member_epoch;
            if let Some(tasks) = active(&r) {
                let delayed = statuses(&r).contains(&ASSIGNMENT_DELAYED);
                assert!(!delayed || tasks.is_empty(), "tasks while delayed: {r:?}");
                assert!(count(&tasks) < 2, "one member got every task: {r:?}");
                *owned = tasks;
            }
        }
        members.iter().all(|m| count(&m.2) == 1).then_some(())
    });
    assert!(
        joined_at.elapsed() >= INITIAL_REBALANCE_DELAY,
        "assigned {:?} after the first join",
        joined_at.elapsed()
    );

    // Both leave; the empty group's assignment epoch is its group epoch, and a member
    // joining it is given that epoch while a new delay runs.
    for (id, epoch, _, _) in &members {
        let r = client_heartbeat(&mut c, &app, id, -1, None, None);
        assert_eq!(r.error_code, 0, "{id} at {epoch}: {r:?}");
    }
    let r = client_heartbeat(&mut c, &app, "member-c", 0, Some(&topology), None);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(statuses(&r), vec![ASSIGNMENT_DELAYED], "{r:?}");
    let g = describe(&broker.bootstrap(), &app);
    assert_eq!(r.member_epoch, g.assignment_epoch, "{r:?} {g:?}");
    assert_eq!(g.group_epoch, g.assignment_epoch + 1, "{g:?}");
    let r = client_heartbeat(&mut c, &app, "member-c", r.member_epoch, None, None);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(statuses(&r), vec![ASSIGNMENT_DELAYED], "{r:?}");
}

#[test]
fn streams_group_lifecycle_over_the_wire() {
    let mut broker = Broker::start_with(&[("offsets.topic.num.partitions", "1"), NO_INITIAL_DELAY]);
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
    // A new group starts at epoch 1 and the new member moves it to 2 (Kafka 4.4's
    // `StreamsGroup` and `streamsGroupHeartbeat`).
    assert_eq!((r.error_code, r.member_epoch), (0, 2), "{r:?}");
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
    let c = &mut Cluster::start(
        3,
        &[("offsets.topic.num.partitions", "1"), NO_INITIAL_DELAY],
    );
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

/// Kafka 4.4's `StreamsGroup` starts a new streams group at group epoch 1 and
/// `TargetAssignmentMetadata.INITIAL` (assignment epoch 1); the first member
/// (`streamsGroupHeartbeat`: its metadata is new) moves it to 2 once, and without an initial
/// rebalance delay the target follows: member epoch 2, StreamsGroupDescribe (2, 2). Brook
/// started streams groups at 0 and answered 1.
#[test]
fn a_new_streams_group_starts_at_epoch_1_and_its_first_member_moves_it_to_2() {
    let broker = Broker::start_with(&[("offsets.topic.num.partitions", "1"), NO_INITIAL_DELAY]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let app = unique_topic("stwepoch1");
    let input = format!("{app}-in");
    c.ensure_topic(&input);
    wait_for_coordinator(&mut c, &broker.bootstrap(), &app);
    let r = client_heartbeat(
        &mut c,
        &app,
        "member-a",
        0,
        Some(&source_only(&input)),
        None,
    );
    assert_eq!((r.error_code, r.member_epoch), (0, 2), "{r:?}");
    let g = describe(&broker.bootstrap(), &app);
    assert_eq!((g.group_epoch, g.assignment_epoch), (2, 2), "{g:?}");
}
