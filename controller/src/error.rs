//! The controller's error enum and its Kafka error codes.

use kafka_protocol::ResponseError;
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
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    #[error("no partition reassignment is in progress for {0}")]
    NoReassignmentInProgress(String),
    /// An AlterPartition was applied, but it completed a reassignment that moved the
    /// leadership away from the node that sent it (Kafka answers the leader this error while
    /// writing the change).
    #[error("the ISR change completed a reassignment and elected a new leader")]
    NewLeaderElected,
    /// An UpdateFeatures refused, with Kafka's whole message.
    #[error("{0}")]
    InvalidFeatureUpdate(String),
    /// AddRaftVoter of a node that already votes (Kafka's DUPLICATE_VOTER).
    #[error("{0}")]
    DuplicateVoter(String),
    /// RemoveRaftVoter of a node that does not vote, or of the last voter (VOTER_NOT_FOUND).
    #[error("{0}")]
    VoterNotFound(String),
    /// A request the cluster's finalized features do not allow (UNSUPPORTED_VERSION), such
    /// as a voter change at `kraft.version` 0.
    #[error("{0}")]
    UnsupportedVersion(String),
    /// Storage, network set-up or an internal Raft failure.
    #[error("controller failure: {0}")]
    Internal(String),
}

impl ControllerError {
    /// The Kafka error (`org.apache.kafka.common.protocol.Errors`) this answers as.
    pub fn response_error(&self) -> ResponseError {
        match self {
            ControllerError::NotController { .. } => ResponseError::NotController,
            ControllerError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
            ControllerError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
            ControllerError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
            ControllerError::InvalidTopic(_) => ResponseError::InvalidTopicException,
            ControllerError::UnknownTopicOrPartition(_) => ResponseError::UnknownTopicOrPartition,
            ControllerError::UnknownTopicId(_) => ResponseError::UnknownTopicId,
            ControllerError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
            ControllerError::InvalidUpdateVersion { .. } => ResponseError::InvalidUpdateVersion,
            ControllerError::InvalidRequest(_) => ResponseError::InvalidRequest,
            ControllerError::IneligibleReplica(_) => ResponseError::IneligibleReplica,
            ControllerError::StaleBrokerEpoch { .. } => ResponseError::StaleBrokerEpoch,
            ControllerError::BrokerIdNotRegistered(_) => ResponseError::BrokerIdNotRegistered,
            ControllerError::RequestTimedOut(_) => ResponseError::RequestTimedOut,
            ControllerError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
            ControllerError::NoReassignmentInProgress(_) => ResponseError::NoReassignmentInProgress,
            ControllerError::NewLeaderElected => ResponseError::NewLeaderElected,
            ControllerError::InvalidFeatureUpdate(_) => ResponseError::InvalidUpdateVersion,
            ControllerError::DuplicateVoter(_) => ResponseError::DuplicateVoter,
            ControllerError::VoterNotFound(_) => ResponseError::VoterNotFound,
            ControllerError::UnsupportedVersion(_) => ResponseError::UnsupportedVersion,
            ControllerError::Internal(_) => ResponseError::UnknownServerError,
        }
    }

    /// The Kafka error code of [`Self::response_error`].
    pub fn code(&self) -> i16 {
        self.response_error().code()
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
            95,
            "INVALID_UPDATE_VERSION (108 is NEW_LEADER_ELECTED)"
        );
    }
}
