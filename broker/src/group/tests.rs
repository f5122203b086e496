//! Coordinator tests over a real ReplicaManager in a temporary directory: offsets and group
//! records go through `__consumer_offsets` and come back after a reopen.

use std::sync::Arc;

use super::*;
use crate::config::BrokerConfig;

fn open(dir: &std::path::Path) -> (Arc<ReplicaManager>, GroupCoordinator) {
    let config = BrokerConfig::load(
        None,
        &[
            format!("log.dirs={}", dir.display()),
            "offsets.topic.num.partitions=3".to_string(),
            "group.initial.rebalance.delay.ms=0".to_string(),
        ],
    )
    .unwrap();
    let replicas = Arc::new(ReplicaManager::open(Arc::new(config.clone())).unwrap());
    let groups = GroupCoordinator::open(&config, replicas.clone()).unwrap();
    (replicas, groups)
}

fn admin() -> Committer {
    Committer {
        member_id: String::new(),
        group_instance_id: None,
        generation_or_epoch: -1,
        api_version: 9,
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
        let (replicas, groups) = open(dir.path());
        replicas
            .create_topic("t", 2, 1, Default::default(), false)
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
        replicas.shutdown().unwrap();
    }
    let (_replicas, groups) = open(dir.path());
    let got = groups.fetch_offsets("g1", None, None).unwrap();
    assert_eq!(got.len(), 1);
    let (topic, parts) = &got[0];
    assert_eq!(topic, "t");
    let offsets: Vec<(i32, i64)> = parts
        .iter()
        .map(|(p, v)| (*p, v.as_ref().unwrap().offset))
        .collect();
    assert_eq!(offsets, vec![(0, 6), (1, 7)]);
    assert_eq!(parts[0].1.as_ref().unwrap().metadata, "m");
    assert!(groups.fetch_offsets("g2", None, None).unwrap().is_empty());
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
    let (replicas, groups) = open(dir.path());
    replicas
        .create_topic("t", 1, 1, Default::default(), false)
        .unwrap();
    let who = Committer {
        member_id: "m".into(),
        group_instance_id: None,
        generation_or_epoch: 3,
        api_version: 9,
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
        let (replicas, groups) = open(dir.path());
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
            .unwrap()
        else {
            panic!("leader sync waits on its own channel");
        };
        assert_eq!(rx.await.unwrap().assignment, Bytes::from_static(b"a"));
        member = j.member_id;
        replicas.shutdown().unwrap();
    }
    // The member comes back in its generation, as in Kafka: it keeps heartbeating and
    // committing without a rebalance.
    let (replicas, groups) = open(dir.path());
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
        .unwrap();
    let who = Committer {
        member_id: member.clone(),
        group_instance_id: None,
        generation_or_epoch: 1,
        api_version: 9,
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
        let c = BrokerConfig::load(None, &[bad.to_string()]).unwrap();
        assert!(GroupConfig::from_broker(&c).is_err(), "{bad}");
    }
}

#[tokio::test]
async fn offsets_of_empty_groups_expire_with_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (replicas, groups) = open(dir.path());
        replicas
            .create_topic("t", 1, 1, Default::default(), false)
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
                v.commit_timestamp_ms -= retention + 1;
            }
            groups.expire_offsets(&mut st);
        }
        assert!(groups.fetch_offsets("old", None, None).unwrap().is_empty());
        assert_eq!(groups.fetch_offsets("new", None, None).unwrap().len(), 1);
        replicas.shutdown().unwrap();
    }
    // The expiry was written as tombstones: it holds after a restart.
    let (_r, groups) = open(dir.path());
    assert!(groups.fetch_offsets("old", None, None).unwrap().is_empty());
    assert_eq!(groups.fetch_offsets("new", None, None).unwrap().len(), 1);
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
    let (a, b, epoch, assigned_a);
    {
        let (replicas, groups) = open(dir.path());
        replicas
            .create_topic("t", 4, 1, Default::default(), false)
            .unwrap();
        let mut epochs: HashMap<String, i32> = HashMap::new();
        let r = groups
            .consumer_heartbeat("g", join_848("", 0, Some(vec!["t".into()])))
            .unwrap();
        a = r.member_id;
        epochs.insert(a.clone(), r.member_epoch);
        let r = groups
            .consumer_heartbeat("g", join_848("", 0, Some(vec!["t".into()])))
            .unwrap();
        b = r.member_id;
        epochs.insert(b.clone(), r.member_epoch);
        // Both heartbeat until the group is stable: each owns two partitions.
        let mut owned: HashMap<String, Vec<(Uuid, Vec<i32>)>> = HashMap::new();
        for _ in 0..6 {
            for m in [&a, &b] {
                let mut p = join_848(m, epochs[m], None);
                p.owned = Some(owned.get(m).cloned().unwrap_or_default());
                let r = groups.consumer_heartbeat("g", p).unwrap();
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
            .unwrap();
        assert_eq!(r.member_epoch, -1);
        replicas.shutdown().unwrap();
    }
    let (_replicas, groups) = open(dir.path());
    let d = groups.describe_consumer_group("g").unwrap();
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
    let r = groups.consumer_heartbeat("g", p).unwrap();
    assert_eq!(r.member_id, a);
    // The target for the epoch b's leave started is computed now; nothing else bumps it.
    assert_eq!(r.member_epoch, d.group_epoch);
    let all: usize = r.assignment.unwrap().values().map(|s| s.len()).sum();
    assert_eq!(all, 4, "a takes b's partitions");
}
