//! Topic metadata as the broker reads it, cluster ids, topic names, and the metadata file of
//! earlier versions.
//!
//! Every node keeps its metadata in the quorum's Raft log (`controller`); [`TopicMeta`] is a
//! handle on one topic of the applied image, as the API handlers read it. Before that, a single node
//! kept its metadata in `brook-metadata.json`; [`LegacyMetadataFile`] reads such a file once,
//! so that its topics (with their ids), configs and producer id watermark are imported into
//! the node's new one-voter quorum on its first start, and then renames it.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use brook_controller::image::{MetadataImage, TopicImage};
// Topic names and uuid strings are the metadata records' (brook-controller validates them).
pub use brook_controller::names::{kafka_uuid_string, parse_kafka_uuid, validate_topic_name};

/// File name of the metadata that single nodes of earlier versions kept in the log directory.
pub const LEGACY_METADATA_FILE: &str = "brook-metadata.json";

/// What [`LEGACY_METADATA_FILE`] is renamed to once its content is in the quorum.
pub const LEGACY_METADATA_FILE_IMPORTED: &str = "brook-metadata.json.imported";

/// Kafka's per-directory properties file; a single node keeps its cluster id there.
pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// Errors of the metadata files.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("metadata file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A `meta.properties` that does not belong to this node: Kafka's own message.
    #[error("{0}")]
    Verify(String),
    #[error(
        "metadata file {path} of an earlier Brook version cannot be imported: {reason}. \
         Repair or move the file away (its topics' data stays in the log directory; without \
         the file they are not known), then start again"
    )]
    Corrupt { path: PathBuf, reason: String },
}

/// One topic of an applied metadata image, as the API handlers read it: a handle on the
/// image that dereferences to the topic's [`TopicImage`], so nothing is copied and every
/// read of one handle sees the same image.
#[derive(Debug, Clone)]
pub struct TopicMeta {
    image: Arc<MetadataImage>,
    id: Uuid,
}

impl TopicMeta {
    /// The topic `id` of `image`, if the image has it.
    pub fn new(image: Arc<MetadataImage>, id: Uuid) -> Option<Self> {
        image
            .topics
            .contains_key(&id)
            .then_some(TopicMeta { image, id })
    }
}

impl Deref for TopicMeta {
    type Target = TopicImage;

    fn deref(&self) -> &TopicImage {
        // Present: `new` checked, and an image never changes once published.
        &self.image.topics[&self.id]
    }
}

/// One topic in [`LEGACY_METADATA_FILE`], as earlier versions wrote it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LegacyTopic {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    pub replication_factor: i16,
    /// Topic config overrides (keys as in Kafka's topic configs).
    pub configs: BTreeMap<String, String>,
}

/// A single node's metadata as versions before the one-voter quorum kept it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LegacyMetadataFile {
    pub cluster_id: String,
    pub topics: BTreeMap<String, LegacyTopic>,
    /// The first producer id not yet handed out in a block.
    #[serde(default)]
    pub next_producer_id_block: i64,
    /// Dynamic broker configs by resource name (a node id, or "" for the cluster default).
    #[serde(default)]
    pub broker_configs: brook_controller::image::DynamicBrokerConfigs,
}

impl LegacyMetadataFile {
    /// Reads the file in `dir`, if there is one.
    pub fn read(dir: &Path) -> Result<Option<Self>, MetadataError> {
        let path = dir.join(LEGACY_METADATA_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| MetadataError::Corrupt {
                        path,
                        reason: e.to_string(),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(MetadataError::Io { path, source }),
        }
    }

    /// Renames the file once its content is committed to the quorum, so that it is not read
    /// again (a crash before the rename imports nothing twice: the quorum then has topics).
    pub fn retire(dir: &Path) -> Result<(), MetadataError> {
        let path = dir.join(LEGACY_METADATA_FILE);
        let io = |source| MetadataError::Io {
            path: path.clone(),
            source,
        };
        std::fs::rename(&path, dir.join(LEGACY_METADATA_FILE_IMPORTED)).map_err(io)?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
        tracing::info!(
            from = LEGACY_METADATA_FILE,
            to = LEGACY_METADATA_FILE_IMPORTED,
            "imported the metadata of an earlier version into the metadata quorum"
        );
        Ok(())
    }
}

/// Kafka's `MetaPropertiesEnsemble.verify` as `KafkaRaftServer.initializeLogDirs` runs it at
/// start-up, with the configured node id expected: a `meta.properties` that lacks what its
/// version always has, or that another node wrote, stops the start with Kafka's message
/// rather than letting this node serve another's data. Kafka has no cluster id key and
/// expects none; Brook's `cluster.id`, when set, is expected as Kafka expects the first
/// directory's in the others. A directory without the file passes: Brook writes it on the
/// first start (Kafka requires `kafka-storage format` first).
pub fn verify_meta_properties(
    dir: &Path,
    node_id: i32,
    cluster_id: Option<&str>,
) -> Result<(), MetadataError> {
    let path = dir.join(META_PROPERTIES_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(MetadataError::Io { path, source }),
    };
    let props = parse_properties(&text);
    let shown = path.display();
    let refuse = |m: String| Err(MetadataError::Verify(m));
    // Version 1 always has both ids; version 0 (no `version`) names the node `broker.id`.
    let v1 = props.get("version").is_some_and(|v| v == "1");
    match (props.get("cluster.id"), cluster_id) {
        (None, _) if v1 => {
            return refuse(format!(
                "cluster.id was not specified in the v1 file: {shown}"
            ))
        }
        (Some(read), Some(expected)) if read.as_str() != expected => {
            return refuse(format!(
                "Invalid cluster.id in: {shown}. Expected {expected}, but read {read}"
            ))
        }
        _ => {}
    }
    let stored = props.get(if v1 { "node.id" } else { "broker.id" });
    match stored.map(|v| v.parse::<i32>()) {
        None if v1 => refuse(format!("node.id was not specified in {shown}")),
        Some(Ok(stored)) if stored != node_id => refuse(format!(
            "Stored node id {stored} doesn't match previous node id {node_id} in {shown}. \
             If you moved your data, make sure your configured node id matches. If you \
             intend to create a new node, you should remove all data in your data \
             directories."
        )),
        Some(Err(_)) => refuse(format!("Invalid node.id in {shown}")),
        _ => verify_directory_id(dir, props.get("directory.id")),
    }
}

/// `MetaPropertiesEnsemble.verify`'s directory id check: none of the first 100 ids, which
/// Kafka reserves (`DirectoryId.reserved`: unassigned, lost, migrating), with Kafka's
/// message, typo included.
fn verify_directory_id(dir: &Path, value: Option<&String>) -> Result<(), MetadataError> {
    let Some(id) = value.and_then(|v| parse_kafka_uuid(v)) else {
        return Ok(());
    };
    let (most, least) = id.as_u64_pair();
    match most == 0 && least < 100 {
        true => Err(MetadataError::Verify(format!(
            "Invalid resrved directory ID {} found in {}",
            kafka_uuid_string(id),
            dir.display()
        ))),
        false => Ok(()),
    }
}

/// `key=value` lines of a properties file, later lines winning, blank values left out.
fn parse_properties(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

/// A single node's cluster id: the one its `meta.properties` records; on a first start
/// `configured` (`cluster.id`), an earlier version's (`legacy`) or a new one, then recorded.
pub fn single_node_cluster_id(
    dir: &Path,
    node_id: i32,
    configured: Option<&str>,
    legacy: Option<&str>,
) -> Result<String, MetadataError> {
    let path = dir.join(META_PROPERTIES_FILE);
    let io = |source| MetadataError::Io {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let recorded = text
                .lines()
                .filter_map(|l| l.split_once('='))
                .find(|(k, _)| k.trim() == "cluster.id")
                .map(|(_, v)| v.trim().to_string())
                .filter(|v| !v.is_empty());
            if let Some(id) = recorded {
                return Ok(id);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let id = configured
        .or(legacy)
        .map(str::to_string)
        .unwrap_or_else(new_cluster_id);
    let body = format!("version=1\nnode.id={node_id}\ncluster.id={id}\n");
    brook_storage::checkpoint::write_atomically(&path, &body).map_err(io)?;
    Ok(id)
}

/// A quorum node's `meta.properties` (Kafka's, as `kafka-storage format` writes it): its
/// `directory.id` (KIP-858), created on a first start, and the node and cluster ids. Tools
/// read it: `kafka-metadata-quorum add-controller` sends the directory id with AddRaftVoter.
/// Returns the directory id, in Kafka's `Uuid.toString` form.
pub fn ensure_directory_id(
    dir: &Path,
    node_id: i32,
    cluster_id: &str,
) -> Result<String, MetadataError> {
    let path = dir.join(META_PROPERTIES_FILE);
    let io = |source| MetadataError::Io {
        path: path.clone(),
        source,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io(e)),
    };
    let value = |key: &str| {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(id) = value("directory.id") {
        return Ok(id);
    }
    let id = new_cluster_id();
    let cluster_id = value("cluster.id").unwrap_or_else(|| cluster_id.to_string());
    let body =
        format!("version=1\nnode.id={node_id}\ncluster.id={cluster_id}\ndirectory.id={id}\n");
    std::fs::create_dir_all(dir).map_err(io)?;
    brook_storage::checkpoint::write_atomically(&path, &body).map_err(io)?;
    Ok(id)
}

/// The `directory.id` that log directory `dir`'s `meta.properties` records, if any.
pub fn read_directory_id(dir: &Path) -> Option<Uuid> {
    let text = std::fs::read_to_string(dir.join(META_PROPERTIES_FILE)).ok()?;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == "directory.id")
        .and_then(|(_, v)| parse_kafka_uuid(v))
}

/// Kafka cluster ids are 16 random bytes in URL-safe base64 without padding (22 characters).
pub fn new_cluster_id() -> String {
    encode_cluster_id(Uuid::new_v4().into_bytes())
}

fn encode_cluster_id(bytes: [u8; 16]) -> String {
    kafka_uuid_string(Uuid::from_bytes(bytes))
}

/// A cluster id every node derives alike from the same seed (the voter set), in Kafka's
/// shape: 16 bytes, URL-safe base64 without padding.
pub fn cluster_id_from_seed(seed: &str) -> String {
    let a = crc32c::crc32c(seed.as_bytes());
    let b = crc32c::crc32c_append(a, b"brook-cluster-id");
    let c = crc32c::crc32c_append(b, seed.as_bytes());
    let d = crc32c::crc32c_append(c, b"brook");
    let mut bytes = [0u8; 16];
    for (i, w) in [a, b, c, d].iter().enumerate() {
        bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
    }
    encode_cluster_id(bytes)
}

/// The group coordinator's internal topic (Kafka's `Topic.GROUP_METADATA_TOPIC_NAME`).
/// Defined here beside [`INTERNAL_TOPICS`], as Kafka's `Topic` holds both names, so that this
/// module need not import the coordinators (`group::store` and `txn::log` re-export them).
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The transaction coordinator's internal topic (Kafka's `Topic.TRANSACTION_STATE_TOPIC_NAME`).
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Name of the metadata directory inside `log.dirs`, as Kafka's `__cluster_metadata-0`
/// (`Topic.CLUSTER_METADATA_TOPIC_NAME`).
pub const METADATA_DIR: &str = "__cluster_metadata";

/// Kafka's internal topics (`Topic.INTERNAL_TOPICS`): written by their coordinators only.
pub const INTERNAL_TOPICS: [&str; 3] = [
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    "__share_group_state",
];

/// Kafka's `Topic.isInternal`.
pub fn is_internal_topic(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_id_shape() {
        let id = new_cluster_id();
        assert_eq!(id.len(), 22);
        // Kafka's Uuid.toString: URL-safe base64 without padding.
        assert_eq!(encode_cluster_id([0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(encode_cluster_id([0xff; 16]), "_____________________w");
    }

    #[test]
    fn a_single_nodes_cluster_id_is_recorded_once() {
        let dir = tempfile::tempdir().unwrap();
        let first = single_node_cluster_id(dir.path(), 1, None, Some("legacy-id")).unwrap();
        assert_eq!(first, "legacy-id");
        let again = single_node_cluster_id(dir.path(), 1, Some("other"), None).unwrap();
        assert_eq!(again, "legacy-id");
        let fresh = tempfile::tempdir().unwrap();
        assert_eq!(
            single_node_cluster_id(fresh.path(), 1, None, None)
                .unwrap()
                .len(),
            22
        );
    }

    #[test]
    fn meta_properties_of_another_node_or_cluster_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            verify_meta_properties(dir.path(), 1, Some("c")).is_ok(),
            "no file"
        );
        let write = |body: &str| std::fs::write(dir.path().join(META_PROPERTIES_FILE), body);
        let verify = |node, cluster| {
            verify_meta_properties(dir.path(), node, cluster).map_err(|e| e.to_string())
        };
        write("version=1\nnode.id=1\ncluster.id=c\n").unwrap();
        assert!(verify(1, Some("c")).is_ok() && verify(1, None).is_ok());
        assert!(verify(2, None)
            .unwrap_err()
            .starts_with("Stored node id 1 doesn't match previous node id 2 in "));
        assert!(verify(1, Some("d"))
            .unwrap_err()
            .ends_with(". Expected d, but read c"));
        write("version=1\nnode.id=1\n").unwrap();
        assert!(verify(1, None)
            .unwrap_err()
            .starts_with("cluster.id was not specified in the v1 file: "));
        write("version=1\ncluster.id=c\n").unwrap();
        assert!(verify(1, None)
            .unwrap_err()
            .starts_with("node.id was not specified in "));
        // Version 0 may lack both, and names the node broker.id.
        write("broker.id=3\n").unwrap();
        assert!(verify(3, Some("c")).is_ok() && verify(1, None).is_err());
        write("version=1\nnode.id=1\ncluster.id=c\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\n").unwrap();
        assert!(verify(1, None)
            .unwrap_err()
            .starts_with("Invalid resrved directory ID "));
    }

    #[test]
    fn a_corrupt_legacy_file_says_how_to_go_on() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LEGACY_METADATA_FILE), b"{not json").unwrap();
        let e = LegacyMetadataFile::read(dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("move the file away"), "{e}");
        assert!(
            LegacyMetadataFile::read(tempfile::tempdir().unwrap().path())
                .unwrap()
                .is_none()
        );
    }
}
