//! Coordinator tests over a real ReplicaManager in a temporary directory: offsets and group
//! records go through `__consumer_offsets` and come back after a reopen.

use kafka_protocol::ResponseError;
use std::sync::Arc;

use super::*;
use crate::config::BrokerConfig;

async fn open(dir: &std::path::Path) -> (Arc<ReplicaManager>, GroupCoordinator) {
    let config = BrokerConfig::load(
        None,
        &[
            format!("log.dirs={}", dir.display()),
            "offsets.topic.num.partitions=3".to_string(),
            "group.initial.rebalance.delay.ms=0".to_string(),
        ],
    )
    .unwrap();
    let endpoint = vec![crate::controller::image::BrokerEndpoint {
        name: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: 9092,
        security_protocol: "PLAINTEXT".into(),
    }];
    let replicas = Arc::new(
        ReplicaManager::start(Arc::new(config.clone()), endpoint, None)
            .await
            .unwrap(),
    );
    let faults = Arc::new(crate::fault::FaultEngine::new(config.node_id));
    replicas.follow_metadata(faults, watch::channel(false).1, |_, _| {});
    let groups = GroupCoordinator::open(&config, replicas.clone()).unwrap();
    // The API handlers do this before a group's first write (`prepare_write`).
    groups.ensure_offsets_topic().await.unwrap();
    (replicas, groups)
}

/// Stops the node's quorum and closes its logs, so the directory can be opened again.
async fn close(replicas: &ReplicaManager) {
    replicas.controller().shutdown().await;
    replicas.shutdown().unwrap();
}

fn admin() -> Committer {
    Committer {
        member_id: String::new(),
        group_instance_id: None,
        generation_or_epoch: -1,
        api_version: 9,
        transactional: false,
    }
}

fn commit(topic: &str, partition: i32, offset: i64) -> CommitPartition {
    CommitPartition {
        topic: topic.into(),
        partition,
        offset,
        leader_epoch: -1,
        metadata: Some("m".into()),
    }
}

#[tokio::test]
async fn offsets_survive_reopen_and_deletes_stick() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (replicas, groups) = open(dir.path()).await;
        replicas
            .create_topic("t", 2, 1, Default::default(), false)
            .await
            .unwrap();
        let codes = groups
            .commit_offsets("g1", &admin(), vec![commit("t", 0, 5), commit("t", 1, 7)])
            .await;
        assert_eq!(codes, vec![0, 0]);
        assert_eq!(
            groups
                .commit_offsets("g1", &admin(), vec![commit("nope", 0, 1)])
                .await,
            vec![3]
        );
        groups
            .commit_offsets("g2", &admin(), vec![commit("t", 0, 9)])
            .await;
        groups
            .commit_offsets("g1", &admin(), vec![commit("t", 0, 6)])
            .await;
        groups.delete_group("g2").await.unwrap();
        assert_eq!(
            groups.delete_group("g2").await,
            Err(GroupError::GroupIdNotFound)
        );
        close(&replicas).await;
    }
    let (_replicas, groups) = open(dir.path()).await;
    let got = groups.fetch_offsets("g1", None, None, false).unwrap();
    assert_eq!(got.len(), 1);
    let (topic, parts) = &got[0];
    assert_eq!(topic, "t");
    let offsets: Vec<(i32, i64)> = parts
        .iter()
        .map(|(p, v)| (*p, v.as_ref().unwrap().as_ref().unwrap().offset))
        .collect();
    assert_eq!(offsets, vec![(0, 6), (1, 7)]);
    assert_eq!(parts[0].1.as_ref().unwrap().as_ref().unwrap().metadata, "m");
    assert!(groups
        .fetch_offsets("g2", None, None, false)
        .unwrap()
        .is_empty());
    let listed: Vec<String> = groups
        .list(&[], &[])
        .into_iter()
        .map(|g| g.group_id)
        .collect();
    assert_eq!(listed, vec!["g1".to_string()]);
}

#[tokio::test]
async fn commits_are_checked_against_the_generation() {
    let dir = tempfile::tempdir().unwrap();
    let (replicas, groups) = open(dir.path()).await;
    replicas
        .create_topic("t", 1, 1, Default::default(), false)
        .await
        .unwrap();
    let who = Committer {
        member_id: "m".into(),
        group_instance_id: None,
        generation_or_epoch: 3,
        api_version: 9,
        transactional: false,
    };
    assert_eq!(
        groups
            .commit_offsets("nogroup", &who, vec![commit("t", 0, 1)])
            .await,
        vec![69]
    );
    let who8 = Committer {
        api_version: 8,
        ..who
    };
    assert_eq!(
        groups
            .commit_offsets("nogroup", &who8, vec![commit("t", 0, 1)])
            .await,
        vec![22]
    );
    let mut big = commit("t", 0, 1);
    big.metadata = Some("x".repeat(5000));
    assert_eq!(
        groups.commit_offsets("g", &admin(), vec![big]).await,
        vec![12]
    );
    assert_eq!(
        groups
            .commit_offsets("", &admin(), vec![commit("t", 0, 1)])
            .await,
        vec![24]
    );
}

#[tokio::test]
async fn classic_group_members_are_restored_from_the_group_record() {
    let dir = tempfile::tempdir().unwrap();
    let member;
    {
        let (replicas, groups) = open(dir.path()).await;
        let params = JoinParams {
            member_id: String::new(),
            group_instance_id: None,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"x"))],
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            client_id: "c".into(),
            client_host: String::new(),
            require_known_member_id: true,
        };
        let Pending::Now(r) = groups.join_group("cg", params.clone()).unwrap() else {
            panic!("expected MEMBER_ID_REQUIRED");
        };
        assert_eq!(r.error_code, 79);
        let p2 = JoinParams {
            member_id: r.member_id.clone(),
            ..params
        };
        let Pending::Wait(rx) = groups.join_group("cg", p2).unwrap() else {
            panic!("expected a delayed join");
        };
        let j = rx.await.unwrap();
        assert_eq!(j.generation_id, 1);
        let Pending::Wait(rx) = groups
            .sync_group(
                "cg",
                &j.member_id,
                None,
                1,
                None,
                None,
                vec![(j.member_id.clone(), Bytes::from_static(b"a"))],
            )
            .await
            .unwrap()
        else {
            panic!("leader sync waits on its own channel");
        };
        assert_eq!(rx.await.unwrap().assignment, Bytes::from_static(b"a"));
        member = j.member_id;
        close(&replicas).await;
    }
    // The member comes back in its generation, as in Kafka: it keeps heartbeating and
    // committing without a rebalance.
    let (replicas, groups) = open(dir.path()).await;
    let d = groups.describe("cg").unwrap().unwrap();
    assert_eq!(d.state, "Stable");
    assert_eq!(d.protocol_type, "consumer");
    assert_eq!(d.protocol_data, "range");
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_id, member);
    assert_eq!(d.members[0].assignment, Bytes::from_static(b"a"));
    assert_eq!(groups.heartbeat("cg", &member, None, 1), Ok(()));
    assert_eq!(
        groups.heartbeat("cg", &member, None, 2),
        Err(GroupError::IllegalGeneration)
    );
    replicas
        .create_topic("t", 1, 1, Default::default(), false)
        .await
        .unwrap();
    let who = Committer {
        member_id: member.clone(),
        group_instance_id: None,
        generation_or_epoch: 1,
        api_version: 9,
        transactional: false,
    };
    assert_eq!(
        groups
            .commit_offsets("cg", &who, vec![commit("t", 0, 3)])
            .await,
        vec![0]
    );
}

#[test]
fn group_config_keys_are_kafkas_and_checked() {
    let c = BrokerConfig::load(None, &[]).unwrap();
    let g = GroupConfig::from_broker(&c).unwrap();
    assert_eq!(g.classic.min_session_timeout_ms, 6000);
    assert_eq!(g.classic.max_session_timeout_ms, 1_800_000);
    assert_eq!(g.classic.initial_rebalance_delay_ms, 3000);
    assert_eq!(g.consumer.heartbeat_interval_ms, 5000);
    assert_eq!(g.consumer.session_timeout_ms, 45_000);
    assert_eq!(g.offsets_partitions, 50);
    assert_eq!(g.offsets_retention_ms, 10080 * 60_000);
    assert_eq!(g.offsets_replication_factor, 3);
    assert_eq!(g.offsets_commit_timeout_ms, 5000);
    // Lowered together with its bound, as Kafka requires.
    let c = BrokerConfig::load(
        None,
        &[
            "group.consumer.heartbeat.interval.ms=500".to_string(),
            "group.consumer.min.heartbeat.interval.ms=500".to_string(),
            "group.consumer.session.timeout.ms=6000".to_string(),
            "group.consumer.min.session.timeout.ms=6000".to_string(),
        ],
    )
    .unwrap();
    let g = GroupConfig::from_broker(&c).unwrap();
    assert_eq!(g.consumer.heartbeat_interval_ms, 500);
    assert_eq!(g.consumer.session_timeout_ms, 6000);
    for bad in [
        "group.max.size=0",
        "offsets.topic.num.partitions=-1",
        "group.initial.rebalance.delay.ms=x",
        "offsets.topic.replication.factor=0",
        "offsets.topic.replication.factor=40000",
        "offsets.commit.timeout.ms=0",
        // KIP-848 bounds, as Kafka checks them at start-up.
        "group.consumer.heartbeat.interval.ms=500",
        "group.consumer.heartbeat.interval.ms=20000",
        "group.consumer.session.timeout.ms=10000",
        "group.consumer.max.session.timeout.ms=40000",
        "group.consumer.max.heartbeat.interval.ms=4000",
    ] {
        // A value outside the key's ConfigDef range fails at load (Kafka's message); the
        // cross-key bounds fail when the group coordinator reads them.
        let refused = match BrokerConfig::load(None, &[bad.to_string()]) {
            Err(_) => true,
            Ok(c) => GroupConfig::from_broker(&c).is_err(),
        };
        assert!(refused, "{bad}");
    }
}

#[tokio::test]
async fn offsets_of_empty_groups_expire_with_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (replicas, groups) = open(dir.path()).await;
        replicas
            .create_topic("t", 1, 1, Default::default(), false)
            .await
            .unwrap();
        groups
            .commit_offsets("old", &admin(), vec![commit("t", 0, 3)])
            .await;
        groups
            .commit_offsets("new", &admin(), vec![commit("t", 0, 4)])
            .await;
        {
            let mut st = groups.state.lock();
            let retention = groups.config.offsets_retention_ms;
            for v in st.groups.get_mut("old").unwrap().offsets.values_mut() {
                v.value.commit_timestamp_ms -= retention + 1;
            }
            groups.cleanup_group_metadata(&mut st);
        }
        assert!(groups
            .fetch_offsets("old", None, None, false)
            .unwrap()
            .is_empty());
        assert_eq!(
            groups
                .fetch_offsets("new", None, None, false)
                .unwrap()
                .len(),
            1
        );
        close(&replicas).await;
    }
    // The expiry was written as tombstones: it holds after a restart.
    let (_r, groups) = open(dir.path()).await;
    assert!(groups
        .fetch_offsets("old", None, None, false)
        .unwrap()
        .is_empty());
    assert_eq!(
        groups
            .fetch_offsets("new", None, None, false)
            .unwrap()
            .len(),
        1
    );
}

/// Gives `group` an offset for each of `partitions` committed `age_ms` ago, in memory only
/// (what a commit then a long wait leaves).
fn aged_offsets(groups: &GroupCoordinator, group: &str, partitions: &[(&str, i32)], age_ms: i64) {
    let mut st = groups.state.lock();
    let e = st.groups.get_mut(group).expect("the group exists");
    for (t, p) in partitions {
        let value = OffsetValue {
            offset: 1,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: now_ms() - age_ms,
        };
        let stored = StoredOffset {
            value,
            record_offset: 0,
        };
        e.offsets.insert((t.to_string(), *p), stored);
    }
}

fn cleanup(groups: &GroupCoordinator) {
    let mut st = groups.state.lock();
    groups.cleanup_group_metadata(&mut st);
}

fn offset_topics(groups: &GroupCoordinator, group: &str) -> Vec<String> {
    let st = groups.state.lock();
    st.groups
        .get(group)
        .map(|e| e.offsets.keys().map(|(t, _)| t.clone()).collect())
        .unwrap_or_default()
}

/// Kafka's `ClassicGroup.offsetExpirationCondition`: an Empty classic group's offsets count
/// from when the group became Empty, not from their commit. A consumer that stopped after a
/// week of committing rarely keeps its offsets for another week on Kafka; Brook used to drop
/// them at the first check.
#[tokio::test]
async fn an_empty_classic_groups_offsets_expire_counting_from_when_it_became_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (replicas, groups) = open(dir.path()).await;
    let retention = groups.config.offsets_retention_ms;
    groups
        .commit_offsets("cg", &admin(), vec![commit("t", 0, 3)])
        .await;
    aged_offsets(&groups, "cg", &[("t", 0)], retention + 60_000);
    let set_empty_since = |ago_ms: Option<i64>| {
        let mut st = groups.state.lock();
        let GroupKind::Classic(g) = &mut st.groups.get_mut("cg").unwrap().kind else {
            panic!("classic");
        };
        g.protocol_type = Some("consumer".into());
        g.current_state_timestamp_ms = ago_ms.map(|a| now_ms() - a);
    };
    set_empty_since(Some(60_000));
    cleanup(&groups);
    assert_eq!(
        offset_topics(&groups, "cg"),
        ["t"],
        "empty for a minute only"
    );
    // A record from before the state time was written: the commit time counts.
    set_empty_since(None);
    cleanup(&groups);
    assert!(offset_topics(&groups, "cg").is_empty());
    assert!(
        groups.describe("cg").unwrap().is_none(),
        "an empty group left with no offsets is deleted (maybeDeleteGroup)"
    );
    close(&replicas).await;
}

/// A KIP-848 group with members keeps the offsets of topics it subscribes to, however old,
/// and loses those of other topics past retention (`OffsetMetadataManager.cleanupExpiredOffsets`
/// with `ConsumerGroup.offsetExpirationCondition`); Brook used to expire nothing while a
/// group had members.
#[tokio::test]
async fn a_consumer_group_with_members_expires_only_unsubscribed_topics_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (replicas, groups) = open(dir.path()).await;
    for t in ["t", "u"] {
        replicas
            .create_topic(t, 1, 1, Default::default(), false)
            .await
            .unwrap();
    }
    groups
        .consumer_heartbeat("g", join_848("", 0, Some(vec!["t".into()])))
        .await
        .unwrap();
    let retention = groups.config.offsets_retention_ms;
    aged_offsets(&groups, "g", &[("t", 0), ("u", 0)], retention + 1);
    cleanup(&groups);
    assert_eq!(offset_topics(&groups, "g"), ["t"]);
    assert!(
        groups.describe("g").unwrap().is_some(),
        "members keep the group"
    );
    close(&replicas).await;
}

/// A classic group that emptied without committing anything is deleted at the next check
/// (`GroupCoordinatorShard.cleanupGroupMetadata`: no offsets means all expired).
#[tokio::test]
async fn an_empty_group_without_offsets_is_deleted_at_the_next_check() {
    let dir = tempfile::tempdir().unwrap();
    let (replicas, groups) = open(dir.path()).await;
    groups
        .commit_offsets("cg", &admin(), vec![commit("t", 0, 3)])
        .await;
    groups
        .state
        .lock()
        .groups
        .get_mut("cg")
        .unwrap()
        .offsets
        .clear();
    cleanup(&groups);
    assert!(groups.describe("cg").unwrap().is_none());
    close(&replicas).await;
}

fn join_848(member_id: &str, epoch: i32, topics: Option<Vec<String>>) -> HeartbeatParams {
    HeartbeatParams {
        member_id: member_id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: topics,
        server_assignor: Some("uniform".into()),
        owned: Some(Vec::new()),
        client_id: "c".into(),
        ..HeartbeatParams::default()
    }
}

/// A KIP-848 group is written as Kafka's records (subscription, target and current
/// assignment per member): after a reopen its members are still there, at their epochs with
/// their partitions, and heartbeat on without rejoining. A member that left stays gone.
#[tokio::test]
async fn consumer_group_members_are_restored_from_their_records() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, epoch, assigned_a, timestamp_ms);
    {
        let (replicas, groups) = open(dir.path()).await;
        replicas
            .create_topic("t", 4, 1, Default::default(), false)
            .await
            .unwrap();
        let mut epochs: HashMap<String, i32> = HashMap::new();
        let r = groups
            .consumer_heartbeat("g", join_848("", 0, Some(vec!["t".into()])))
            .await
            .unwrap();
        a = r.member_id;
        epochs.insert(a.clone(), r.member_epoch);
        let r = groups
            .consumer_heartbeat("g", join_848("", 0, Some(vec!["t".into()])))
            .await
            .unwrap();
        b = r.member_id;
        epochs.insert(b.clone(), r.member_epoch);
        // Both heartbeat until the group is stable: each owns two partitions. b's join waits
        // for `group.consumer.assignment.interval.ms` (1 s) after a's target (KIP-1263).
        let mut owned: HashMap<String, Vec<(Uuid, Vec<i32>)>> = HashMap::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let settled = |owned: &HashMap<String, Vec<(Uuid, Vec<i32>)>>| {
            [&a, &b].iter().all(|m| {
                owned
                    .get(*m)
                    .is_some_and(|tps| tps.iter().map(|(_, ps)| ps.len()).sum::<usize>() == 2)
            })
        };
        while groups.describe_consumer_group("g").unwrap().state != "Stable" || !settled(&owned) {
            assert!(
                std::time::Instant::now() < deadline,
                "the group never settled"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            for m in [&a, &b] {
                let mut p = join_848(m, epochs[m], None);
                p.owned = Some(owned.get(m).cloned().unwrap_or_default());
                let r = groups.consumer_heartbeat("g", p).await.unwrap();
                epochs.insert(m.clone(), r.member_epoch);
                if let Some(tps) = r.assignment {
                    owned.insert(
                        m.clone(),
                        tps.into_iter()
                            .map(|(t, ps)| (t, ps.into_iter().collect()))
                            .collect(),
                    );
                }
            }
        }
        let d = groups.describe_consumer_group("g").unwrap();
        assert_eq!(d.state, "Stable", "{d:?}");
        epoch = d.group_epoch;
        assigned_a = d
            .members
            .iter()
            .find(|(m, _)| m.member_id == a)
            .map(|(m, _)| m.assigned.clone())
            .unwrap();
        assert_eq!(assigned_a.values().map(|s| s.len()).sum::<usize>(), 2);
        // b leaves for good.
        let r = groups
            .consumer_heartbeat("g", join_848(&b, -1, None))
            .await
            .unwrap();
        assert_eq!(r.member_epoch, -1);
        timestamp_ms = assignment_timestamp_ms(&groups, "g");
        close(&replicas).await;
    }
    let (_replicas, groups) = open(dir.path()).await;
    let d = groups.describe_consumer_group("g").unwrap();
    assert_eq!(
        assignment_timestamp_ms(&groups, "g"),
        timestamp_ms,
        "the target's AssignmentTimestamp is read back"
    );
    assert_ne!(timestamp_ms, 0);
    let ids: Vec<&str> = d
        .members
        .iter()
        .map(|(m, _)| m.member_id.as_str())
        .collect();
    assert_eq!(ids, vec![a.as_str()], "the member that left stays gone");
    let (m, _) = &d.members[0];
    assert_eq!(
        m.assigned, assigned_a,
        "partitions come back with the member"
    );
    assert!(
        d.group_epoch > epoch,
        "b's leave bumped the epoch: {}",
        d.group_epoch
    );
    // a heartbeats at its stored epoch: no UNKNOWN_MEMBER_ID, no FENCED_MEMBER_EPOCH.
    let mut p = join_848(&a, m.member_epoch, None);
    p.owned = Some(
        assigned_a
            .iter()
            .map(|(t, ps)| (*t, ps.iter().copied().collect()))
            .collect(),
    );
    let r = groups.consumer_heartbeat("g", p.clone()).await.unwrap();
    assert_eq!(r.member_id, a);
    // The target for the epoch b's leave started is computed by a heartbeat once the interval
    // passed since the replayed timestamp; nothing else bumps it.
    let mut r = r;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while r.member_epoch != d.group_epoch {
        assert!(std::time::Instant::now() < deadline, "no new target: {r:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        r = groups.consumer_heartbeat("g", p.clone()).await.unwrap();
    }
    assert!(
        crate::cluster::replica_manager::now_ms() >= timestamp_ms + 1000,
        "the new target waited for the interval after the replayed timestamp"
    );
    let all: usize = r.assignment.unwrap().values().map(|s| s.len()).sum();
    assert_eq!(all, 4, "a takes b's partitions");
}

/// The group's `assignment_timestamp_ms` (the last target's `AssignmentTimestamp`).
fn assignment_timestamp_ms(groups: &GroupCoordinator, group: &str) -> i64 {
    match groups.state.lock().groups.get(group).map(|e| &e.kind) {
        Some(GroupKind::Consumer(g)) => g.assignment_timestamp_ms,
        other => panic!("{group} is not a consumer group: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Offsets inside transactions (TxnOffsetCommit, markers, replay)
// ---------------------------------------------------------------------------------------------

use super::store::TxnProducer;
use brook_storage::batch::testutil::build_control_batch;

fn txn_committer() -> Committer {
    Committer {
        transactional: true,
        api_version: 5,
        ..admin()
    }
}

fn producer(producer_id: i64, producer_epoch: i16) -> TxnProducer {
    TxnProducer {
        producer_id,
        producer_epoch,
    }
}

/// Writes a COMMIT or ABORT marker of `producer_id` to `group`'s offsets partition, as the
/// WriteTxnMarkers handler does, then tells the coordinator.
fn marker(
    replicas: &ReplicaManager,
    groups: &GroupCoordinator,
    group: &str,
    p: TxnProducer,
    commit: bool,
) {
    let index = groups.offsets_partition_for(group);
    let part = replicas.partition(OFFSETS_TOPIC, index).unwrap();
    let batch = build_control_batch(p.producer_id, p.producer_epoch, commit, 0, now_ms());
    part.append_marker_to_leader(batch, 0, now_ms()).unwrap();
    groups.complete_txn_offsets(index, p.producer_id, commit);
}

/// Topic "t" partitions 0..3 as OffsetFetch shows them: the committed offset, or the error.
fn fetched(
    groups: &GroupCoordinator,
    group: &str,
    require_stable: bool,
) -> Vec<Result<Option<i64>, i16>> {
    fetched_partitions(groups, group, vec![0, 1, 2], require_stable)
}

fn fetched_partitions(
    groups: &GroupCoordinator,
    group: &str,
    partitions: Vec<i32>,
    require_stable: bool,
) -> Vec<Result<Option<i64>, i16>> {
    let asked = Some(vec![("t".to_string(), partitions)]);
    let got = groups
        .fetch_offsets(group, None, asked, require_stable)
        .unwrap();
    got[0]
        .1
        .iter()
        .map(|(_, r)| {
            r.as_ref()
                .map(|v| v.as_ref().map(|v| v.offset))
                .map_err(|e| e.error_code())
        })
        .collect()
}

#[tokio::test]
async fn txn_offsets_are_pending_until_their_marker() {
    let dir = tempfile::tempdir().unwrap();
    let (replicas, groups) = open(dir.path()).await;
    replicas
        .create_topic("t", 3, 1, Default::default(), false)
        .await
        .unwrap();
    let who = txn_committer();
    let p7 = producer(7, 0);
    let codes = groups
        .commit_txn_offsets("g", &who, p7, vec![commit("t", 0, 10), commit("t", 1, 11)])
        .await;
    assert_eq!(codes, vec![0, 0]);
    assert_eq!(
        fetched(&groups, "g", false),
        vec![Ok(None), Ok(None), Ok(None)]
    );
    assert_eq!(
        fetched(&groups, "g", true),
        vec![
            Err(ResponseError::UnstableOffsetCommit.code()),
            Err(ResponseError::UnstableOffsetCommit.code()),
            Ok(None)
        ],
        "require_stable: UNSTABLE_OFFSET_COMMIT while the transaction is open"
    );
    marker(&replicas, &groups, "g", p7, true);
    assert_eq!(
        fetched(&groups, "g", true),
        vec![Ok(Some(10)), Ok(Some(11)), Ok(None)]
    );

    // An aborted transaction leaves the committed offsets as they were.
    let p8 = producer(8, 0);
    groups
        .commit_txn_offsets("g", &who, p8, vec![commit("t", 0, 20)])
        .await;
    marker(&replicas, &groups, "g", p8, false);
    assert_eq!(
        fetched(&groups, "g", true),
        vec![Ok(Some(10)), Ok(Some(11)), Ok(None)]
    );

    // Log order decides between a transaction's offset and a plain commit: the plain commit
    // written after the transactional record stays; the one written before is replaced.
    let p9 = producer(9, 0);
    groups
        .commit_txn_offsets("g", &who, p9, vec![commit("t", 0, 30)])
        .await;
    groups
        .commit_offsets("g", &admin(), vec![commit("t", 0, 31), commit("t", 1, 40)])
        .await;
    groups
        .commit_txn_offsets("g", &who, p9, vec![commit("t", 1, 41)])
        .await;
    marker(&replicas, &groups, "g", p9, true);
    assert_eq!(
        fetched(&groups, "g", true),
        vec![Ok(Some(31)), Ok(Some(41)), Ok(None)]
    );

    // A marker on another offsets partition does not complete this group's transaction.
    let p10 = producer(10, 0);
    groups
        .commit_txn_offsets("g", &who, p10, vec![commit("t", 2, 50)])
        .await;
    let index = groups.offsets_partition_for("g");
    groups.complete_txn_offsets((index + 1) % 3, p10.producer_id, true);
    assert_eq!(
        fetched(&groups, "g", true)[2],
        Err(ResponseError::UnstableOffsetCommit.code())
    );
    marker(&replicas, &groups, "g", p10, true);
    assert_eq!(fetched(&groups, "g", true)[2], Ok(Some(50)));
}

#[tokio::test]
async fn txn_offset_commit_checks_the_group_and_the_producer_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let (replicas, groups) = open(dir.path()).await;
    replicas
        .create_topic("t", 3, 1, Default::default(), false)
        .await
        .unwrap();
    // A missing group with a generation: ILLEGAL_GENERATION at every version (OffsetCommit
    // v9 would say GROUP_ID_NOT_FOUND).
    let member = Committer {
        member_id: "m".into(),
        generation_or_epoch: 3,
        ..txn_committer()
    };
    let p = producer(3, 1);
    assert_eq!(
        groups
            .commit_txn_offsets("nogroup", &member, p, vec![commit("t", 0, 1)])
            .await,
        vec![22]
    );
    assert_eq!(
        groups
            .commit_txn_offsets(
                "g",
                &txn_committer(),
                p,
                vec![commit("t", 0, 1), commit("nope", 0, 1)]
            )
            .await,
        vec![0, 3]
    );
    // The offsets partition has seen epoch 1 of producer 3: epoch 0 is a zombie.
    assert_eq!(
        groups
            .commit_txn_offsets(
                "g",
                &txn_committer(),
                producer(3, 0),
                vec![commit("t", 0, 2)]
            )
            .await,
        vec![47],
        "INVALID_PRODUCER_EPOCH"
    );
}

#[tokio::test]
async fn txn_offsets_are_replayed_with_their_markers() {
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2, p3, p4) = (
        producer(1, 0),
        producer(2, 0),
        producer(3, 0),
        producer(4, 0),
    );
    {
        let (replicas, groups) = open(dir.path()).await;
        replicas
            .create_topic("t", 3, 1, Default::default(), false)
            .await
            .unwrap();
        let who = txn_committer();
        groups
            .commit_txn_offsets("g", &who, p1, vec![commit("t", 0, 5)])
            .await;
        groups
            .commit_txn_offsets("g", &who, p2, vec![commit("t", 1, 6)])
            .await;
        groups
            .commit_txn_offsets("g", &who, p3, vec![commit("t", 2, 7)])
            .await;
        groups
            .commit_txn_offsets("g", &who, p4, vec![commit("t", 0, 8)])
            .await;
        groups
            .commit_offsets("g", &admin(), vec![commit("t", 0, 9)])
            .await;
        marker(&replicas, &groups, "g", p1, true);
        marker(&replicas, &groups, "g", p2, false);
        marker(&replicas, &groups, "g", p4, true);
        assert_eq!(
            fetched(&groups, "g", true),
            vec![
                Ok(Some(9)),
                Ok(None),
                Err(ResponseError::UnstableOffsetCommit.code())
            ]
        );
        close(&replicas).await;
    }
    // Committed applies, aborted is gone, the open transaction is pending again, and the
    // plain commit written after producer 4's record still wins over it.
    let (replicas, groups) = open(dir.path()).await;
    assert_eq!(
        fetched(&groups, "g", false),
        vec![Ok(Some(9)), Ok(None), Ok(None)]
    );
    assert_eq!(
        fetched(&groups, "g", true),
        vec![
            Ok(Some(9)),
            Ok(None),
            Err(ResponseError::UnstableOffsetCommit.code())
        ]
    );
    marker(&replicas, &groups, "g", p3, true);
    assert_eq!(
        fetched(&groups, "g", true),
        vec![Ok(Some(9)), Ok(None), Ok(Some(7))]
    );
}

#[tokio::test]
async fn deletes_drop_pending_txn_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (p5, p6) = (producer(5, 0), producer(6, 0));
    {
        let (replicas, groups) = open(dir.path()).await;
        replicas
            .create_topic("t", 3, 1, Default::default(), false)
            .await
            .unwrap();
        let who = txn_committer();
        // OffsetDelete of a partition with only a pending offset writes its tombstone: the
        // later COMMIT brings nothing back.
        groups
            .commit_txn_offsets("g", &who, p5, vec![commit("t", 0, 1)])
            .await;
        assert_eq!(
            groups.delete_offsets("g", &[("t".into(), 0)]).await,
            Ok(vec![0])
        );
        assert_eq!(fetched(&groups, "g", true)[0], Ok(None));
        marker(&replicas, &groups, "g", p5, true);
        assert_eq!(fetched(&groups, "g", true)[0], Ok(None));

        // DeleteGroups of an empty group with a pending offset deletes it with the rest.
        groups
            .commit_offsets("h", &admin(), vec![commit("t", 0, 1)])
            .await;
        groups
            .commit_txn_offsets("h", &who, p6, vec![commit("t", 1, 2)])
            .await;
        groups.delete_group("h").await.unwrap();
        marker(&replicas, &groups, "h", p6, true);
        assert_eq!(
            fetched(&groups, "h", true),
            vec![Ok(None), Ok(None), Ok(None)]
        );
        close(&replicas).await;
    }
    let (_r, groups) = open(dir.path()).await;
    assert_eq!(
        fetched(&groups, "g", true),
        vec![Ok(None), Ok(None), Ok(None)]
    );
    assert_eq!(
        fetched(&groups, "h", true),
        vec![Ok(None), Ok(None), Ok(None)]
    );
    assert!(groups
        .fetch_offsets("h", None, None, true)
        .unwrap()
        .is_empty());
}

/// A KIP-848 member's TxnOffsetCommit is checked against its epoch, and a stale epoch is
/// ILLEGAL_GENERATION there (OffsetCommit says STALE_MEMBER_EPOCH).
#[tokio::test]
async fn txn_offset_commit_of_a_consumer_group_member_checks_its_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let (replicas, groups) = open(dir.path()).await;
    replicas
        .create_topic("t", 1, 1, Default::default(), false)
        .await
        .unwrap();
    let r = groups
        .consumer_heartbeat("g", join_848("", 0, Some(vec!["t".into()])))
        .await
        .unwrap();
    assert!(r.member_epoch > 0);
    let member = |epoch: i32, transactional: bool| Committer {
        member_id: r.member_id.clone(),
        generation_or_epoch: epoch,
        transactional,
        ..txn_committer()
    };
    let p = producer(21, 0);
    let current = r.member_epoch;
    assert_eq!(
        groups
            .commit_offsets("g", &member(current - 1, false), vec![commit("t", 0, 1)])
            .await,
        vec![113],
        "STALE_MEMBER_EPOCH"
    );
    assert_eq!(
        groups
            .commit_txn_offsets("g", &member(current - 1, true), p, vec![commit("t", 0, 1)])
            .await,
        vec![22],
        "ILLEGAL_GENERATION"
    );
    assert_eq!(
        groups
            .commit_txn_offsets("g", &member(current + 1, true), p, vec![commit("t", 0, 1)])
            .await,
        vec![110],
        "FENCED_MEMBER_EPOCH"
    );
    assert_eq!(
        groups
            .commit_txn_offsets("g", &member(current, true), p, vec![commit("t", 0, 1)])
            .await,
        vec![0]
    );
    assert_eq!(
        fetched_partitions(&groups, "g", vec![0], true),
        vec![Err(ResponseError::UnstableOffsetCommit.code())]
    );
}
