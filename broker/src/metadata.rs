//! The metadata image of a single node: which topics exist, their ids, partition counts and
//! config overrides.
//!
//! It is persisted as one JSON file in the log directory, rewritten atomically (write a temp
//! file, fsync, rename, fsync the directory) on every change, so that topic ids are stable
//! across restarts, as Kafka clients require (Produce v13 and Fetch v13+ name topics by id).
//! The replicated metadata quorum will replace this file; the shape of [`TopicMeta`] is what
//! its records will carry.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// File name of the persisted image inside the log directory.
pub const METADATA_FILE: &str = "brook-metadata.json";

/// Errors of the metadata store.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("metadata file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("metadata file {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

/// One topic.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TopicMeta {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    pub replication_factor: i16,
    /// Topic config overrides (keys as in Kafka's topic configs).
    pub configs: BTreeMap<String, String>,
}

/// The whole persisted image.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MetadataImage {
    pub cluster_id: String,
    pub topics: BTreeMap<String, TopicMeta>,
    /// The first producer id not yet handed out in a block; ids below it may exist in logs.
    #[serde(default)]
    pub next_producer_id_block: i64,
    /// Dynamic broker configs by resource name (a node id, or "" for the cluster default).
    /// On a single node this file owns them; in a cluster they are a copy of the quorum
    /// image's, refreshed with every applied image.
    #[serde(default)]
    pub broker_configs: crate::config::DynamicBrokerConfigs,
}

impl MetadataImage {
    /// Loads the image from `dir`, or starts an empty one with a fresh cluster id.
    pub fn load_or_create(dir: &Path, cluster_id: Option<&str>) -> Result<Self, MetadataError> {
        let path = dir.join(METADATA_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| MetadataError::Corrupt {
                path,
                reason: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let id = cluster_id
                    .map(str::to_string)
                    .unwrap_or_else(new_cluster_id);
                let image = MetadataImage {
                    cluster_id: id,
                    topics: BTreeMap::new(),
                    next_producer_id_block: 0,
                    broker_configs: Default::default(),
                };
                image.persist(dir)?;
                Ok(image)
            }
            Err(source) => Err(MetadataError::Io { path, source }),
        }
    }

    /// Writes the image atomically.
    pub fn persist(&self, dir: &Path) -> Result<(), MetadataError> {
        let path = dir.join(METADATA_FILE);
        let tmp = dir.join(format!("{METADATA_FILE}.tmp"));
        let io = |source| MetadataError::Io {
            path: path.clone(),
            source,
        };
        let body = serde_json::to_vec_pretty(self).map_err(|e| io(std::io::Error::other(e)))?;
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&body).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
        Ok(())
    }

    /// Finds a topic by id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&TopicMeta> {
        self.topics.values().find(|t| t.id == id)
    }
}

/// Kafka cluster ids are 16 random bytes in URL-safe base64 without padding (22 characters).
pub fn new_cluster_id() -> String {
    encode_cluster_id(Uuid::new_v4().into_bytes())
}

fn encode_cluster_id(bytes: [u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for b in bytes {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
    }
    out
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

/// Kafka's topic name rule: 1-249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name {name:?} is not allowed"));
    }
    if name.len() > 249 {
        return Err(format!(
            "topic name is {} characters long, the limit is 249",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name {name:?} contains {c:?}; only [a-zA-Z0-9._-] are allowed"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_id_shape() {
        let id = new_cluster_id();
        assert_eq!(id.len(), 22);
    }

    #[test]
    fn topic_names() {
        assert!(validate_topic_name("orders.v1_x-y").is_ok());
        assert!(validate_topic_name("bad/name").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
    }

    #[test]
    fn persist_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut img = MetadataImage::load_or_create(dir.path(), None).unwrap();
        img.topics.insert(
            "t".into(),
            TopicMeta {
                name: "t".into(),
                id: Uuid::new_v4(),
                partitions: 3,
                replication_factor: 1,
                configs: BTreeMap::new(),
            },
        );
        img.persist(dir.path()).unwrap();
        let again = MetadataImage::load_or_create(dir.path(), None).unwrap();
        assert_eq!(again.cluster_id, img.cluster_id);
        assert_eq!(again.topics, img.topics);
    }
}
