//! The metadata quorum, the active controller and the fault engine as metrics: each read
//! from its owner when scraped (openraft's metrics and the Raft log, the `Controller`, the
//! `FaultEngine`), no copy kept here.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use super::{counter_sample, family, gauge, gauge_sample};
use crate::broker::Broker;
use crate::controller::quorum::QUORUM_STATES;

/// The quorum families (a node without a Raft controller, the single node, has none) and
/// the active-controller gauge.
pub(super) fn encode_controller(
    broker: &Broker,
    enc: &mut DescriptorEncoder,
) -> Result<(), fmt::Error> {
    let c = broker.replicas.controller();
    if c.is_single_voter() {
        // A single node is its own controller: Kafka's one-node combined mode shows 1. Its
        // one-voter quorum is not shown, as no quorum.
        return active_controller(enc, 1);
    }
    active_controller(enc, i64::from(c.is_active()))?;
    let q = c.local_quorum_state();
    family(
        enc,
        "brook_metadata_quorum_state",
        "This node's state in the metadata quorum: 1 for the current one (Kafka: raft-metrics current-state).",
        MetricType::Gauge,
        QUORUM_STATES
            .iter()
            .map(|s| (vec![("state", s.to_string())], i64::from(*s == q.state))),
        gauge_sample,
    )?;
    gauge(
        enc,
        "brook_metadata_quorum_leader",
        "The metadata quorum leader this node knows, -1 if none (Kafka: raft-metrics current-leader).",
        q.leader.map_or(-1, i64::from),
    )?;
    gauge(
        enc,
        "brook_metadata_quorum_epoch",
        "The metadata quorum's epoch (Raft term) on this node (Kafka: raft-metrics current-epoch).",
        q.epoch,
    )?;
    gauge(
        enc,
        "brook_metadata_quorum_log_end_offset",
        "This node's metadata log end offset (Kafka: raft-metrics log-end-offset).",
        q.log_end_offset,
    )?;
    gauge(
        enc,
        "brook_metadata_quorum_high_watermark",
        "The metadata log's high watermark (committed entries) on this node (Kafka: raft-metrics high-watermark).",
        q.high_watermark,
    )
}

fn active_controller(enc: &mut DescriptorEncoder, v: i64) -> Result<(), fmt::Error> {
    gauge(
        enc,
        "brook_active_controller",
        "1 on the active controller, 0 elsewhere (Kafka: KafkaController ActiveControllerCount).",
        v,
    )
}

/// Installed fault rules and their firings, by rule kind (a bounded label: three values).
pub(super) fn encode_faults(
    broker: &Broker,
    enc: &mut DescriptorEncoder,
) -> Result<(), fmt::Error> {
    let faults = &broker.faults;
    family(
        enc,
        "brook_fault_rules",
        "Fault rules installed on this node, by kind (no Kafka metric).",
        MetricType::Gauge,
        faults
            .rule_counts()
            .map(|(k, n)| (vec![("kind", k.name().to_string())], n as i64)),
        gauge_sample,
    )?;
    family(
        enc,
        "brook_fault_fires",
        "Fault rule firings on this node since it started, by kind; a link rule fires once per message it touches (no Kafka metric).",
        MetricType::Counter,
        faults
            .fires()
            .map(|(k, n)| (vec![("kind", k.name().to_string())], n)),
        counter_sample,
    )
}
