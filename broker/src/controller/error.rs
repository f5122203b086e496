//! The controller's error enum and its Kafka error codes.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Errors of controller operations. Serializable, because a non-active node forwards writes to
/// the active controller and carries its answer back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ControllerError {
    /// No active controller is known, or the one asked lost leadership; retry.
    #[error("this node is not the active controller (active: {active:?})")]
    NotController { active: Option<i32> },
    #[error("invalid replication factor: {0}")]
    InvalidReplicationFactor(String),
    #[error("invalid partitions: {0}")]
    InvalidPartitions(String),
    #[error("topic {0:?} already exists")]
    TopicAlreadyExists(String),
    #[error("invalid topic: {0}")]
    InvalidTopic(String),
    #[error("unknown topic or partition: {0}")]
    UnknownTopicOrPartition(String),
    #[error("unknown topic id {0}")]
    UnknownTopicId(Uuid),
    #[error("fenced leader epoch: request has {request}, current is {current}")]
    FencedLeaderEpoch { request: i32, current: i32 },
    #[error("invalid update version: request has partition epoch {request}, current is {current}")]
    InvalidUpdateVersion { request: i32, current: i32 },
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("ineligible replica: {0}")]
    IneligibleReplica(String),
    #[error("stale broker epoch: request has {request}, current is {current}")]
    StaleBrokerEpoch { request: i64, current: i64 },
    #[error("broker {0} is not registered")]
    BrokerIdNotRegistered(i32),
    #[error("request timed out: {0}")]
    RequestTimedOut(String),
    /// Storage, network set-up or an internal Raft failure.
    #[error("controller failure: {0}")]
    Internal(String),
}

impl ControllerError {
    /// The Kafka error code (`org.apache.kafka.common.protocol.Errors`).
    pub fn code(&self) -> i16 {
        match self {
            ControllerError::NotController { .. } => 41,
            ControllerError::InvalidReplicationFactor(_) => 38,
            ControllerError::InvalidPartitions(_) => 37,
            ControllerError::TopicAlreadyExists(_) => 36,
            ControllerError::InvalidTopic(_) => 17,
            ControllerError::UnknownTopicOrPartition(_) => 3,
            ControllerError::UnknownTopicId(_) => 100,
            ControllerError::FencedLeaderEpoch { .. } => 74,
            ControllerError::InvalidUpdateVersion { .. } => 108,
            ControllerError::InvalidRequest(_) => 42,
            ControllerError::IneligibleReplica(_) => 107,
            ControllerError::StaleBrokerEpoch { .. } => 77,
            ControllerError::BrokerIdNotRegistered(_) => 102,
            ControllerError::RequestTimedOut(_) => 7,
            ControllerError::Internal(_) => -1,
        }
    }

    /// Whether the caller should retry, possibly against another node.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            ControllerError::NotController { .. } | ControllerError::RequestTimedOut(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_codes() {
        assert_eq!(ControllerError::NotController { active: None }.code(), 41);
        assert_eq!(
            ControllerError::InvalidReplicationFactor(String::new()).code(),
            38
        );
        assert_eq!(
            ControllerError::TopicAlreadyExists(String::new()).code(),
            36
        );
        assert_eq!(
            ControllerError::UnknownTopicOrPartition(String::new()).code(),
            3
        );
        assert_eq!(
            ControllerError::FencedLeaderEpoch {
                request: 0,
                current: 1
            }
            .code(),
            74
        );
        assert_eq!(
            ControllerError::InvalidUpdateVersion {
                request: 0,
                current: 1
            }
            .code(),
            108
        );
    }
}
