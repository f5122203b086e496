//! KIP-951 leader hints: a partition answered NOT_LEADER_OR_FOLLOWER (Produce v10+; Fetch
//! v16+ also for FENCED_LEADER_EPOCH) names the leader this node knows, with its epoch, and
//! the response's `NodeEndpoints` carry that leader's address on the request's listener, so a
//! client moves to the new leader at once instead of refreshing its metadata first (with
//! librdkafka's and the Java client's backoffs that refresh is where a failover's time went).
//! Kafka's `KafkaApis.getCurrentLeader`: the local partition's leader and epoch, else the
//! metadata image's, and the node only when that broker is alive (unfenced) with an endpoint
//! on the listener (`MetadataCache.getAliveBrokerNode`).

use crate::broker::Broker;

/// The leader of a partition as this node knows it, and where a client reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderHint {
    /// -1 when no leader is known.
    pub leader_id: i32,
    /// -1 when the partition is unknown.
    pub leader_epoch: i32,
    /// (host, port) of the leader on the request's listener, when it is alive and has one.
    pub endpoint: Option<(String, i32)>,
}

/// The first Produce version whose responses carry `CurrentLeader` and `NodeEndpoints`.
pub const PRODUCE_HINT_VERSION_MIN: i16 = 10;
/// The first Fetch version whose responses carry them.
pub const FETCH_HINT_VERSION_MIN: i16 = 16;

/// The hint for `topic`/`index`, for a client that came in on `listener`.
pub fn current_leader(broker: &Broker, listener: &str, topic: &str, index: i32) -> LeaderHint {
    let image = broker.replicas.image();
    let (leader_id, leader_epoch) = match broker.replicas.partition(topic, index) {
        Some(p) => (p.leader_id(), p.leader_epoch()),
        None => image
            .topic_by_name(topic)
            .and_then(|t| t.partitions.iter().find(|p| p.index == index))
            .map_or((-1, -1), |p| (p.leader, p.leader_epoch)),
    };
    let endpoint = image
        .brokers
        .get(&leader_id)
        .filter(|b| !b.fenced)
        .and_then(|b| b.endpoint(listener))
        .map(|(host, port)| (host.to_string(), i32::from(port)));
    LeaderHint {
        leader_id,
        leader_epoch,
        endpoint,
    }
}
