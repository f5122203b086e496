//! A three-node metadata quorum on loopback with real TCP: election, replication, failover,
//! restart from disk, broker fencing and AlterPartition.
//!
//! Every wait is on a watch channel (the committed image) with a timeout; nothing sleeps.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use brook::controller::{
    AlterPartitionRequest, Controller, ControllerConfig, MetadataImage, NO_LEADER,
};
use tokio::net::TcpListener;

/// Small, so that the tests take snapshots, purge the log, and catch a restarted node up
/// with InstallSnapshot.
const SNAPSHOT_INTERVAL_ENTRIES: u64 = 20;

/// Upper bound on any single wait; generous because CI machines are shared.
const WAIT: Duration = Duration::from_secs(20);

struct Cluster {
    dirs: BTreeMap<i32, tempfile::TempDir>,
    voters: BTreeMap<i32, String>,
    nodes: BTreeMap<i32, Controller>,
    /// `leader.imbalance.check.interval.seconds`; `None`: automatic balancing off.
    balance: Option<Duration>,
}

fn config(
    id: i32,
    voters: &BTreeMap<i32, String>,
    dir: &std::path::Path,
    balance: Option<Duration>,
) -> ControllerConfig {
    ControllerConfig {
        node_id: id,
        voters: voters.clone(),
        bootstrap_servers: Vec::new(),
        listener_name: "CONTROLLER".into(),
        listen: voters[&id].parse().unwrap(),
        metadata_dir: dir.join("__cluster_metadata"),
        broker_endpoint: Some(("127.0.0.1".into(), 19_000 + id as u16)),
        broker_listeners: Vec::new(),
        heartbeat_interval_ms: 50,
        session_timeout_ms: 1000,
        // Kafka's defaults: unclean election off, min.insync.replicas 1.
        broker_config: Arc::new(
            brook::config::BrokerConfig::from_map(BTreeMap::new()).expect("default config"),
        ),
        previous_broker_epoch: None,
        leader_imbalance_check_interval: balance,
        election_timeout_ms: 300,
        fetch_timeout_ms: 300,
        request_timeout_ms: 10_000,
        snapshot_interval_entries: SNAPSHOT_INTERVAL_ENTRIES,
        channel: Arc::new(brook::controller::channel::ControllerChannel::plaintext()),
    }
}

impl Cluster {
    async fn start() -> Cluster {
        Self::start_with(None).await
    }

    async fn start_with(balance: Option<Duration>) -> Cluster {
        // RUST_LOG=brook=debug shows the controller's decisions when a wait times out.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let mut listeners = BTreeMap::new();
        for id in 1..=3 {
            listeners.insert(id, TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let voters: BTreeMap<i32, String> = listeners
            .iter()
            .map(|(id, l)| (*id, l.local_addr().unwrap().to_string()))
            .collect();
        let mut c = Cluster {
            dirs: BTreeMap::new(),
            voters,
            nodes: BTreeMap::new(),
            balance,
        };
        for (id, l) in listeners {
            let dir = tempfile::tempdir().unwrap();
            let node =
                Controller::start_with_listener(config(id, &c.voters, dir.path(), balance), l)
                    .await
                    .unwrap();
            c.dirs.insert(id, dir);
            c.nodes.insert(id, node);
        }
        c
    }

    async fn restart(&mut self, id: i32) {
        let cfg = config(id, &self.voters, self.dirs[&id].path(), self.balance);
        let node = Controller::start(cfg).await.unwrap();
        self.nodes.insert(id, node);
    }

    async fn stop(&mut self, id: i32) {
        let node = self.nodes.remove(&id).unwrap();
        node.shutdown().await;
    }

    async fn active(&self) -> i32 {
        let any = self.nodes.values().next().unwrap();
        any.wait_for_active(WAIT).await.unwrap()
    }

    /// Waits until `cond` holds on `id`'s committed image.
    async fn wait(
        &self,
        id: i32,
        what: &str,
        cond: impl Fn(&MetadataImage) -> bool,
    ) -> Arc<MetadataImage> {
        let mut rx = self.nodes[&id].image();
        let r = tokio::time::timeout(WAIT, rx.wait_for(|i| cond(i))).await;
        match r {
            Ok(Ok(img)) => img.clone(),
            _ => panic!(
                "node {id}: timed out waiting for {what}; image: {:#?}",
                self.nodes[&id].image().borrow()
            ),
        }
    }

    async fn wait_all(&self, what: &str, cond: impl Fn(&MetadataImage) -> bool + Copy) {
        for &id in self.nodes.keys() {
            self.wait(id, what, cond).await;
        }
    }

    async fn shutdown(mut self) {
        for id in self.nodes.keys().copied().collect::<Vec<_>>() {
            self.stop(id).await;
        }
    }
}

fn all_live(img: &MetadataImage, ids: &[i32]) -> bool {
    ids.iter().all(|&id| img.is_live(id))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quorum_elects_replicates_fails_over_and_catches_up() {
    let t0 = std::time::Instant::now();
    let step = |what: &str| eprintln!("[{:>6} ms] {what}", t0.elapsed().as_millis());
    let mut c = Cluster::start().await;
    let first_active = c.active().await;
    step("elected");
    c.wait_all("three live brokers", |i| all_live(i, &[1, 2, 3]))
        .await;

    // Create through a node that is not active: the write is forwarded.
    let via = *c.nodes.keys().find(|&&id| id != first_active).unwrap();
    let (id, parts) = c.nodes[&via]
        .create_topic("orders", 3, 3, BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(parts.len(), 3);
    c.wait_all("orders everywhere", |i| {
        i.topic_by_name("orders")
            .is_some_and(|t| t.id == id && t.partitions.len() == 3)
    })
    .await;
    let err = c.nodes[&via]
        .create_topic("orders", 1, 1, BTreeMap::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), 36);

    step("orders replicated");
    // Stop the active controller: another is elected and writes commit.
    c.stop(first_active).await;
    let survivor = *c.nodes.keys().next().unwrap();
    c.nodes[&survivor]
        .create_topic("after-failover", 1, 2, BTreeMap::new())
        .await
        .unwrap();
    step("write after failover");
    let new_active = c.active().await;
    assert_ne!(new_active, first_active);
    c.wait_all("after-failover on survivors", |i| {
        i.topic_by_name("after-failover").is_some()
    })
    .await;
    // The stopped node's broker stops heartbeating and is fenced by the new controller.
    c.wait_all("old active fenced", |i| !i.is_live(first_active))
        .await;

    step("old active fenced");
    // Restart it from its data dir: it catches up and is unfenced again.
    c.restart(first_active).await;
    let reference = c.wait(new_active, "reference", |_| true).await;
    c.wait(first_active, "restarted node caught up", |i| {
        i.topic_by_name("after-failover").is_some() && i.topics == reference.topics
    })
    .await;
    c.wait_all("restarted broker live", |i| all_live(i, &[1, 2, 3]))
        .await;
    step("restarted node caught up and live");
    // And the quorum still takes writes from it.
    c.nodes[&first_active]
        .create_topic("after-restart", 1, 3, BTreeMap::new())
        .await
        .unwrap();
    c.wait_all("after-restart everywhere", |i| {
        i.topic_by_name("after-restart").is_some()
    })
    .await;
    step("write through restarted node");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_broker_is_fenced_and_leadership_moves() {
    let t0 = std::time::Instant::now();
    let step = |what: &str| eprintln!("[{:>6} ms] {what}", t0.elapsed().as_millis());
    let c = Cluster::start().await;
    let active = c.active().await;
    c.wait_all("three live brokers", |i| all_live(i, &[1, 2, 3]))
        .await;
    let ctl = &c.nodes[&active];
    let (t, _) = ctl.create_topic("t", 3, 3, BTreeMap::new()).await.unwrap();
    let (solo, _) = ctl
        .create_topic("solo", 3, 1, BTreeMap::new())
        .await
        .unwrap();
    let before = c.wait(active, "topics", |i| i.topics.len() == 2).await;

    step("topics created");
    // A broker that is not the active controller goes silent.
    let victim = *c.nodes.keys().find(|&&id| id != active).unwrap();
    c.nodes[&victim].set_broker_heartbeats(false);
    let after = c
        .wait(active, "victim fenced", |i| !i.is_live(victim))
        .await;
    for (old, new) in before.topics[&t]
        .partitions
        .iter()
        .zip(&after.topics[&t].partitions)
    {
        assert!(!new.isr.contains(&victim), "{new:?}");
        if old.leader == victim {
            assert_ne!(new.leader, victim);
            assert!(old.isr.contains(&new.leader));
            assert_eq!(new.leader_epoch, old.leader_epoch + 1);
        } else {
            assert_eq!(new.leader, old.leader);
            assert_eq!(new.leader_epoch, old.leader_epoch);
        }
        assert_eq!(new.partition_epoch, old.partition_epoch + 1);
    }
    step("victim fenced");
    // The rf=1 partition on the victim has no other ISR member: leaderless, its ISR emptied
    // into the ELR (KIP-966), the victim remembered as the last known leader.
    let stranded = before.topics[&solo]
        .partitions
        .iter()
        .find(|p| p.leader == victim)
        .unwrap()
        .index;
    let p = after.partition(solo, stranded).unwrap();
    assert_eq!(p.leader, NO_LEADER);
    assert!(p.isr.is_empty(), "{p:?}");
    assert_eq!(
        (p.elr.clone(), p.last_known_elr.clone()),
        (vec![victim], vec![victim])
    );

    // Heartbeats resume: unfenced, and it leads its stranded partition again.
    c.nodes[&victim].set_broker_heartbeats(true);
    let back = c
        .wait(active, "victim back", |i| {
            i.is_live(victim) && i.partition(solo, stranded).unwrap().leader == victim
        })
        .await;
    assert_eq!(back.partition(solo, stranded).unwrap().leader_epoch, 2);

    step("victim unfenced");
    // AlterPartition, sent through a node that is not active.
    let p0 = back.partition(t, 0).unwrap().clone();
    let shrink = |leader_epoch, partition_epoch| AlterPartitionRequest {
        topic_id: t,
        partition: 0,
        leader_id: p0.leader,
        leader_epoch,
        partition_epoch,
        new_isr: vec![p0.leader],
    };
    let via = &c.nodes[&victim];
    if p0.leader_epoch > 0 {
        let e = via
            .alter_partition(shrink(p0.leader_epoch - 1, p0.partition_epoch))
            .await
            .unwrap_err();
        assert_eq!(e.code(), 74, "{e}");
    }
    let e = via
        .alter_partition(shrink(p0.leader_epoch, p0.partition_epoch - 1))
        .await
        .unwrap_err();
    assert_eq!(e.code(), 95, "INVALID_UPDATE_VERSION: {e}");
    // Epochs newer than the controller's: NOT_CONTROLLER, after a bounded number of retries.
    let e = via
        .alter_partition(shrink(p0.leader_epoch + 1, p0.partition_epoch))
        .await
        .unwrap_err();
    assert_eq!(e.code(), 41, "{e}");
    let done = via
        .alter_partition(shrink(p0.leader_epoch, p0.partition_epoch))
        .await
        .unwrap();
    assert_eq!(done.isr, vec![p0.leader]);
    // An ISR already equal to the proposal is no change (Kafka's PartitionChangeBuilder builds
    // no record): the partition epoch moves only when the ISR does. Whether the victim was in
    // this partition's ISR depends on which node the test picked.
    let changed = p0.isr != vec![p0.leader];
    assert_eq!(
        done.partition_epoch,
        p0.partition_epoch + i32::from(changed),
        "{p0:?}"
    );
    assert_eq!(done.leader_epoch, p0.leader_epoch);
    c.wait_all("ISR shrink everywhere", |i| {
        i.partition(t, 0).is_some_and(|p| p.isr.len() == 1)
    })
    .await;
    step("alter partition");
    let (first, size) = via.allocate_producer_id_block(victim).await.unwrap();
    let (second, _) = ctl.allocate_producer_id_block(active).await.unwrap();
    assert_eq!(second, first + size);
    c.shutdown().await;
}

/// `auto.leader.rebalance.enable`: once a partition's preferred replica is back and in sync,
/// the active controller's next imbalance check gives it the leadership back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn preferred_leader_is_elected_again_after_the_imbalance_check() {
    let c = Cluster::start_with(Some(Duration::from_secs(1))).await;
    let active = c.active().await;
    c.wait_all("three live brokers", |i| all_live(i, &[1, 2, 3]))
        .await;
    let ctl = &c.nodes[&active];
    let (t, _) = ctl.create_topic("t", 3, 3, BTreeMap::new()).await.unwrap();
    let img = c.wait(active, "topic", |i| i.topics.contains_key(&t)).await;
    let victim = *c.nodes.keys().find(|&&id| id != active).unwrap();
    let index = img.topics[&t]
        .partitions
        .iter()
        .find(|p| p.replicas[0] == victim)
        .unwrap()
        .index;
    assert_eq!(img.partition(t, index).unwrap().leader, victim);

    c.nodes[&victim].set_broker_heartbeats(false);
    let moved = c
        .wait(active, "victim fenced, leadership moved", |i| {
            !i.is_live(victim) && i.partition(t, index).unwrap().leader != victim
        })
        .await;
    c.nodes[&victim].set_broker_heartbeats(true);
    c.wait(active, "victim unfenced", |i| i.is_live(victim))
        .await;
    // Not in sync yet: the check leaves the partition where it is.
    let p = moved.partition(t, index).unwrap().clone();
    assert!(!p.isr.contains(&victim));
    // Its leader reports it caught up (as its fetches would), and the next check, within a
    // second, gives the victim its leadership back.
    let mut isr = p.isr.clone();
    isr.push(victim);
    ctl.alter_partition(AlterPartitionRequest {
        topic_id: t,
        partition: index,
        leader_id: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: isr,
    })
    .await
    .unwrap();
    let back = c
        .wait(active, "preferred leader back", |i| {
            i.partition(t, index).unwrap().leader == victim
        })
        .await;
    assert_eq!(
        back.partition(t, index).unwrap().leader_epoch,
        p.leader_epoch + 1
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lagging_node_catches_up_from_a_snapshot() {
    let mut c = Cluster::start().await;
    let active = c.active().await;
    c.wait_all("three live brokers", |i| all_live(i, &[1, 2, 3]))
        .await;
    let lagging = *c.nodes.keys().find(|&&id| id != active).unwrap();
    c.stop(lagging).await;
    // Far more entries than a snapshot interval: the leader purges the log the stopped node
    // needs, so it must be sent the snapshot.
    let writer = c.nodes[&active].clone();
    let mut last = (0, 0);
    for _ in 0..(SNAPSHOT_INTERVAL_ENTRIES * 4) {
        last = writer.allocate_producer_id_block(active).await.unwrap();
    }
    writer
        .create_topic("late", 2, 2, BTreeMap::new())
        .await
        .unwrap();
    let expected = last.0 + last.1;
    c.restart(lagging).await;
    let img = c
        .wait(lagging, "snapshot installed and log replayed", |i| {
            i.next_producer_id_block == expected && i.topic_by_name("late").is_some()
        })
        .await;
    let leader_img = c.wait(active, "leader image", |_| true).await;
    assert_eq!(img.topics, leader_img.topics);
    let snapshot = c.dirs[&lagging]
        .path()
        .join("__cluster_metadata/snapshot.json");
    assert!(snapshot.exists(), "the lagging node persisted the snapshot");

    // Restarting it again loads the snapshot and its own log from disk.
    c.stop(lagging).await;
    c.restart(lagging).await;
    c.wait(lagging, "reloaded from disk", |i| {
        i.next_producer_id_block == expected && i.topic_by_name("late").is_some()
    })
    .await;
    c.shutdown().await;
}
