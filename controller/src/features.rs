//! Feature flags: the levels this node supports and a new cluster starts with (Kafka's
//! `Feature`, `BrokerFeatures.defaultSupportedFeatures` and `QuorumFeatures`). The finalized
//! levels live in the metadata image ([`MetadataImage::feature_level`]); UpdateFeatures
//! changes them through the controller ([`crate::feature_control`]), ApiVersions answers
//! them, and what depends on a level reads it from the image.

use crate::image::MetadataImage;

/// Kafka 4.4's `MetadataVersion.latestProduction()`, 4.4-IV2.
pub const METADATA_VERSION_LEVEL: i16 = 33;

/// Kafka's `MetadataVersion.FEATURE_NAME`.
pub const METADATA_VERSION: &str = "metadata.version";
/// Kafka's `KRaftVersion.FEATURE_NAME`.
pub const KRAFT_VERSION: &str = "kraft.version";
/// The feature clients read to choose their transaction protocol (Kafka's
/// `TransactionVersion.FEATURE_NAME`).
pub const TRANSACTION_VERSION: &str = "transaction.version";
/// Kafka's `TransactionVersion` 2 (KIP-890 part 2): the `transaction.version` feature
/// level from which a client's transactions bump the epoch at every EndTxn and add
/// partitions implicitly with Produce v12+ and TxnOffsetCommit v5+.
pub const TRANSACTION_VERSION_2: i16 = 2;
/// Kafka's `GroupVersion.FEATURE_NAME`: level 1 enables the consumer group protocol.
pub const GROUP_VERSION: &str = "group.version";
/// Kafka's `EligibleLeaderReplicasVersion.FEATURE_NAME`: level 1 makes the controller keep
/// eligible leader replicas (KIP-966).
pub const ELR_VERSION: &str = "eligible.leader.replicas.version";
/// Kafka's `ShareVersion.FEATURE_NAME`: level 1 enables share groups.
pub const SHARE_VERSION: &str = "share.version";
/// Kafka's `StreamsVersion.FEATURE_NAME`: level 1 enables streams groups (KIP-1071).
pub const STREAMS_VERSION: &str = "streams.version";

/// One feature: its name, the range of levels this node supports, and the level a new
/// cluster finalizes (Kafka's `Features.defaultValue` at the latest production
/// `metadata.version`; 0 is "not finalized", left out of ApiVersions' finalized list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    pub name: &'static str,
    pub supported: (i16, i16),
    pub bootstrap: i16,
}

/// The features of Kafka 4.4 for what Brook implements:
/// - `metadata.version` 4.4-IV2: the only level Brook's records correspond to;
/// - `kraft.version` 0-1: a quorum starts at 0 with its static voters
///   (`controller.quorum.voters`); `kafka-features upgrade --feature kraft.version=1` turns
///   on KIP-853's voter changes (AddRaftVoter, RemoveRaftVoter: `controller::voter_control`);
///   a quorum formatted with a voter set starts at 1 (`controller::dynamic_voters`);
/// - `transaction.version` 0-2 (KIP-890 part 2 at 2): kafka-clients 4.4 then sends no
///   AddPartitionsToTxn or AddOffsetsToTxn and uses EndTxn v5; clients that do not read it
///   keep version 1, also served;
/// - `group.version` 0-1: the KIP-848 consumer group protocol;
/// - `eligible.leader.replicas.version` 0-1: the controller keeps ELRs (KIP-966);
/// - `share.version` 0-1: KIP-932 share groups. Kafka 4.4 supports and finalizes 2
///   (`ShareVersion.SV_2`, the share-group dead-letter queue of KIP-1191), which Brook does
///   not implement, so it supports and finalizes 1;
/// - `streams.version` 0-1: KIP-1071 streams groups (StreamsGroupHeartbeat and
///   StreamsGroupDescribe answer UNSUPPORTED_VERSION below 1, as Kafka's
///   `isStreamsGroupProtocolEnabled`); a new 4.4 cluster finalizes 1.
pub const FEATURES: &[Feature] = &[
    Feature {
        name: METADATA_VERSION,
        supported: (METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL),
        bootstrap: METADATA_VERSION_LEVEL,
    },
    Feature {
        name: KRAFT_VERSION,
        supported: (0, 1),
        bootstrap: 0,
    },
    Feature {
        name: TRANSACTION_VERSION,
        supported: (0, TRANSACTION_VERSION_2),
        bootstrap: TRANSACTION_VERSION_2,
    },
    Feature {
        name: GROUP_VERSION,
        supported: (0, 1),
        bootstrap: 1,
    },
    Feature {
        name: ELR_VERSION,
        supported: (0, 1),
        bootstrap: 1,
    },
    Feature {
        name: SHARE_VERSION,
        supported: (0, 1),
        bootstrap: 1,
    },
    Feature {
        name: STREAMS_VERSION,
        supported: (0, 1),
        bootstrap: 1,
    },
];

/// A feature of [`FEATURES`] by name.
pub fn feature(name: &str) -> Option<&'static Feature> {
    FEATURES.iter().find(|f| f.name == name)
}

/// The levels this node supports for `name`: Kafka's `QuorumFeatures.localSupportedFeature`,
/// (0, 0) (`QuorumFeatures.DISABLED`) for a feature it does not know.
pub fn supported_range(name: &str) -> (i16, i16) {
    feature(name).map_or((0, 0), |f| f.supported)
}

/// Every feature's finalized level in `image`, in [`FEATURES`] order, 0 included.
pub fn finalized_levels(image: &MetadataImage) -> Vec<(&'static str, i16)> {
    FEATURES
        .iter()
        .map(|f| (f.name, image.feature_level(f.name)))
        .collect()
}
