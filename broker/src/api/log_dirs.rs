//! DescribeLogDirs (API 35): each log directory with the partition replicas it holds, as
//! `kafka-log-dirs --describe` shows them (Kafka's `KafkaApis.handleDescribeLogDirsRequest` and
//! `ReplicaManager.describeLogDirs`).
//!
//! Brook has one log directory (`log.dirs` takes a single path). Every replica this node hosts
//! (leader or follower) is listed with the size of its segment files, read from its log, and
//! Kafka's offset lag for a current (not future) replica: `max(HW - LEO, 0)`, which is 0.
//! Brook has no AlterReplicaLogDirs, so no replica is ever a future one. Total and usable
//! bytes (v4) are the directory's filesystem's, from `statvfs`. `IsCordoned` (v5, KIP-1066)
//! stays false: Brook has no `cordoned.log.dirs`, so its one directory always takes new
//! replicas.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};
use kafka_protocol::ResponseError;

use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::cluster::partition::Partition;

/// Handles one DescribeLogDirs request.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    // DESCRIBE on the cluster, else no directory (Kafka's `handleDescribeLogDirsRequest`).
    if !super::auth_helper::authorize_cluster(
        broker,
        ctx,
        crate::security::acl::AclOperation::Describe,
    ) {
        return DescribeLogDirsResponse::default()
            .with_error_code(kafka_protocol::ResponseError::ClusterAuthorizationFailed.code());
    }
    let wanted = |p: &Partition| match &req.topics {
        None => true,
        Some(topics) => topics
            .iter()
            .any(|t| t.topic.as_str() == p.topic && t.partitions.contains(&p.index)),
    };
    let mut by_topic: BTreeMap<String, Vec<Arc<Partition>>> = BTreeMap::new();
    for p in broker.replicas.all_partitions() {
        if wanted(&p) {
            by_topic.entry(p.topic.clone()).or_default().push(p);
        }
    }
    let topics = by_topic
        .into_iter()
        .map(|(name, mut parts)| {
            parts.sort_by_key(|p| p.index);
            DescribeLogDirsTopic::default()
                .with_name(sb(name).into())
                .with_partitions(parts.iter().map(|p| describe_partition(p)).collect())
        })
        .collect();
    DescribeLogDirsResponse::default()
        .with_results(vec![describe_dir(&broker.config.log_dir, topics)])
}

fn describe_partition(p: &Partition) -> DescribeLogDirsPartition {
    let (_, log_end_offset) = p.offsets();
    DescribeLogDirsPartition::default()
        .with_partition_index(p.index)
        .with_partition_size(i64::try_from(p.size_in_bytes()).unwrap_or(i64::MAX))
        .with_offset_lag((p.high_watermark() - log_end_offset).max(0))
        .with_is_future_key(false)
}

/// One directory's result; KAFKA_STORAGE_ERROR when its filesystem cannot be read, as Kafka
/// answers for an offline directory.
fn describe_dir(dir: &Path, topics: Vec<DescribeLogDirsTopic>) -> DescribeLogDirsResult {
    let path = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let base = DescribeLogDirsResult::default().with_log_dir(sb(path.display().to_string()));
    match nix::sys::statvfs::statvfs(&path) {
        Ok(fs) => {
            let block_bytes = u128::from(fs.fragment_size());
            base.with_topics(topics)
                .with_total_bytes(clamp_i64(u128::from(fs.blocks()) * block_bytes))
                .with_usable_bytes(clamp_i64(u128::from(fs.blocks_available()) * block_bytes))
        }
        Err(e) => {
            tracing::warn!(dir = %path.display(), error = %e, "statvfs of the log directory failed");
            base.with_error_code(ResponseError::KafkaStorageError.code())
        }
    }
}

/// Kafka reports `Long.MAX_VALUE` for filesystems too large for a long (JDK-8162520).
fn clamp_i64(v: u128) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
