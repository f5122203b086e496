//! Test fixtures shared by the control managers' unit tests: a cluster's image, the two
//! election policies the tests compare, and short-hands for the requests they replay.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::cluster_control::{heartbeat, register_broker, Registration};
use crate::configuration_control::ElectionPolicy;
use crate::error::ControllerError;
use crate::image::{MetadataImage, MetadataRecord};
use crate::replication_control::{alter_partition, create_topic, fence_broker, TopicSpec};
use crate::request::{AlterPartitionRequest, ControllerReply, ControllerResult};

/// Brokers 1..=n registered and unfenced.
pub(super) fn cluster(n: i32) -> MetadataImage {
    let mut img = MetadataImage::default();
    for id in 1..=n {
        img.apply(&MetadataRecord::RegisterBroker {
            node_id: id,
            host: "127.0.0.1".into(),
            port: 9000 + id as u16,
            epoch: 1,
            incarnation: Uuid::nil(),
            endpoints: Vec::new(),
        })
        .unwrap();
        img.apply(&MetadataRecord::UnfenceBroker {
            node_id: id,
            epoch: 1,
        })
        .unwrap();
    }
    img
}

pub(super) fn apply(img: &mut MetadataImage, d: &[MetadataRecord]) {
    for r in d {
        img.apply(r).unwrap();
    }
}

/// The rules without ELR (Kafka with `eligible.leader.replicas.version` 0), min ISR 1.
pub(super) fn no_elr(unclean: bool) -> ElectionPolicy {
    ElectionPolicy {
        default_unclean: unclean,
        default_min_isr: 1,
        elr_enabled: false,
        node_id: 1,
    }
}

/// Kafka 4.4's rules for a new cluster (ELR on), with `min.insync.replicas=2`.
pub(super) const ELR: ElectionPolicy = ElectionPolicy {
    default_unclean: false,
    default_min_isr: 2,
    elr_enabled: true,
    node_id: 1,
};

pub(super) fn fence(img: &mut MetadataImage, node_id: i32, unclean: bool) {
    fence_with(img, node_id, &no_elr(unclean));
}

pub(super) fn fence_with(img: &mut MetadataImage, node_id: i32, policy: &ElectionPolicy) {
    let records = fence_broker(img, node_id, policy);
    apply(img, &records);
}

/// A registration of broker `node_id` from a new process.
pub(super) fn restart(node_id: i32, previous_epoch: Option<i64>) -> Registration<'static> {
    Registration {
        node_id,
        host: "127.0.0.1",
        port: 9000 + node_id as u16,
        incarnation: Uuid::new_v4(),
        previous_epoch,
        endpoints: &[],
    }
}

/// CreateTopics with the placer's assignment.
pub(super) fn create(
    img: &MetadataImage,
    name: &str,
    partitions: i32,
    rf: i16,
    id: Uuid,
) -> Result<ControllerResult, ControllerError> {
    let spec = TopicSpec {
        name,
        partitions,
        replication_factor: rf,
        assignments: &[],
        configs: &BTreeMap::new(),
    };
    create_topic(img, &spec, id)
}

pub(super) fn with_topic(img: &mut MetadataImage, partitions: i32, rf: i16) -> Uuid {
    let id = Uuid::new_v4();
    let (records, _) = create(img, "t", partitions, rf, id).unwrap();
    apply(img, &records);
    id
}

pub(super) fn shrink_or_expand(
    img: &mut MetadataImage,
    id: Uuid,
    new_isr: &[i32],
    policy: &ElectionPolicy,
) {
    let r = isr_proposal(img, id, new_isr.to_vec());
    let (records, _) = alter_partition(img, &r, policy).unwrap();
    apply(img, &records);
}

/// The AlterPartition partition 0's leader sends for `new_isr`, at the current epochs.
pub(super) fn isr_proposal(
    img: &MetadataImage,
    id: Uuid,
    new_isr: Vec<i32>,
) -> AlterPartitionRequest {
    let p = img.partition(id, 0).unwrap();
    AlterPartitionRequest {
        topic_id: id,
        partition: 0,
        leader_id: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr,
    }
}

pub(super) fn state(img: &MetadataImage, id: Uuid) -> (i32, Vec<i32>, Vec<i32>, Vec<i32>) {
    let p = img.partition(id, 0).unwrap();
    (
        p.leader,
        p.isr.clone(),
        p.elr.clone(),
        p.last_known_elr.clone(),
    )
}

/// Registers `node_id` from a new process, then unfences it.
pub(super) fn come_back(img: &mut MetadataImage, node_id: i32, clean: bool) {
    let previous = clean.then(|| img.brokers[&node_id].epoch);
    img.metadata_offset += 1;
    let (records, reply) = register_broker(img, &restart(node_id, previous), &ELR);
    apply(img, &records);
    let ControllerReply::BrokerRegistered { epoch } = reply else {
        panic!("{reply:?}");
    };
    let (records, _) = heartbeat(img, node_id, epoch, img.metadata_offset, &ELR).unwrap();
    apply(img, &records);
    assert!(img.is_live(node_id));
}
