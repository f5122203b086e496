//! The quorum's voters as the metadata records them (KIP-853): a formatted voter set (Kafka's
//! `org.apache.kafka.raft.DynamicVoter` and `DynamicVoters`, as `kafka-storage format
//! --initial-controllers` parses them), the records the active controller writes for it once
//! per cluster (Kafka's bootstrap `KRaftVersionRecord` and `VotersRecord`), and each voter's
//! directory id with Kafka's `ReplicaKey` form for messages (`VoterSet`).
//!
//! Brook's voter set itself is openraft's membership; the broker's `controller::voter_control`
//! changes it, and `controller::dynamic_voters` reads and writes the formatted file.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::features::KRAFT_VERSION;
use crate::image::{MetadataImage, MetadataRecord};
use crate::names::kafka_uuid_string;
use crate::request::{ControllerReply, ControllerResult};

/// `kraft.version` of a quorum formatted with a voter set (`KRaftVersion.KRAFT_VERSION_1`).
pub const DYNAMIC_KRAFT_VERSION: i16 = 1;

/// One voter of a formatted quorum: Kafka's `DynamicVoter`, `id@host:port:directoryId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicVoter {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
    pub directory_id: Uuid,
}

impl DynamicVoter {
    /// Parses `id@host:port:directoryId` (an IPv6 host in brackets) as `DynamicVoter.parse`.
    pub fn parse(input: &str) -> Result<Self, String> {
        let input = input.trim();
        let (id, rest) = match input.split_once('@') {
            None => return Err("No @ found in dynamic voter string.".into()),
            Some(("", _)) => return Err("Invalid @ at beginning of dynamic voter string.".into()),
            Some(parts) => parts,
        };
        let node_id: i32 = id
            .parse()
            .map_err(|_| "Failed to parse node id in dynamic voter string.".to_string())?;
        if node_id < 0 {
            return Err(format!(
                "Invalid negative node id {node_id} in dynamic voter string."
            ));
        }
        if rest.is_empty() {
            return Err("No hostname found after node id.".into());
        }
        let (host, rest) = match rest.strip_prefix('[') {
            Some(bracketed) => bracketed.split_once(']').ok_or(
                "Hostname began with left bracket, but no right bracket was found.".to_string(),
            )?,
            None => {
                let colon = rest
                    .find(':')
                    .ok_or("No colon following hostname could be found.".to_string())?;
                rest.split_at(colon)
            }
        };
        let rest = rest
            .strip_prefix(':')
            .ok_or("Port section must start with a colon.".to_string())?;
        let (port, directory) = rest
            .split_once(':')
            .ok_or("No colon following port could be found.".to_string())?;
        let port: u16 = match port.parse::<i64>() {
            Ok(p) => u16::try_from(p)
                .map_err(|_| format!("Invalid port {p} in dynamic voter string."))?,
            Err(_) => return Err("Failed to parse port in dynamic voter string.".into()),
        };
        let directory_id = crate::names::parse_kafka_uuid(directory)
            .ok_or("Failed to parse directory ID in dynamic voter string.".to_string())?;
        Ok(DynamicVoter {
            node_id,
            host: host.to_string(),
            port,
            directory_id,
        })
    }

    /// `host:port` of the voter's controller listener, as the quorum's membership holds it.
    pub fn address(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
}

impl std::fmt::Display for DynamicVoter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dir = crate::names::kafka_uuid_string(self.directory_id);
        write!(f, "{}@{}:{dir}", self.node_id, self.address())
    }
}

/// Parses `--initial-controllers`: comma-separated voters, each node id once
/// (`DynamicVoters.parse`).
pub fn parse_dynamic_voters(input: &str) -> Result<Vec<DynamicVoter>, String> {
    let mut voters: Vec<DynamicVoter> = Vec::new();
    for v in input.trim().split(',').filter(|v| !v.is_empty()) {
        let voter = DynamicVoter::parse(v)?;
        if voters.iter().any(|o| o.node_id == voter.node_id) {
            return Err(format!(
                "Node id {} was specified more than once.",
                voter.node_id
            ));
        }
        voters.push(voter);
    }
    if voters.is_empty() {
        return Err("No voters given.".into());
    }
    voters.sort_by_key(|v| v.node_id);
    Ok(voters)
}

/// What `brook format` writes for a dynamic quorum: the voter set (none for a node formatted
/// `--no-initial-controllers`, which joins a running quorum) and `kraft.version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapVoters {
    pub kraft_version: i16,
    pub voters: Vec<DynamicVoter>,
}

/// Kafka's `ReplicaKey.toString`, for messages (the zero uuid is no directory id).
pub fn replica_key(id: i32, directory_id: Uuid) -> String {
    match directory_id.is_nil() {
        true => format!("ReplicaKey(id={id}, directoryId=Optional.empty)"),
        false => {
            let dir = kafka_uuid_string(directory_id);
            format!("ReplicaKey(id={id}, directoryId=Optional[{dir}])")
        }
    }
}

/// The voters as Kafka's `VoterSet.voterKeys` prints them in messages.
pub fn voter_keys(image: &MetadataImage, voters: &BTreeSet<u64>) -> String {
    let keys: Vec<String> = voters
        .iter()
        .map(|v| replica_key(*v as i32, directory_id_of(image, *v as i32)))
        .collect();
    format!("[{}]", keys.join(", "))
}

/// The recorded directory id of voter `id`; the zero uuid if it has none (a static voter).
pub fn directory_id_of(image: &MetadataImage, id: i32) -> Uuid {
    image
        .voter_directory_ids
        .get(&id)
        .copied()
        .unwrap_or_default()
}

/// The formatted voter set's records (Kafka's bootstrap `KRaftVersionRecord` and
/// `VotersRecord`), unless the cluster recorded its `kraft.version` already: written once,
/// by whichever formatted node asks first.
pub fn bootstrap(image: &MetadataImage, bootstrap: &BootstrapVoters) -> ControllerResult {
    if image.feature_levels.contains_key(KRAFT_VERSION) {
        return (Vec::new(), ControllerReply::Done);
    }
    let mut records: Vec<MetadataRecord> = bootstrap
        .voters
        .iter()
        .map(|v| MetadataRecord::VoterDirectoryId {
            voter_id: v.node_id,
            directory_id: v.directory_id,
        })
        .collect();
    records.push(MetadataRecord::FeatureLevel {
        name: KRAFT_VERSION.to_string(),
        level: bootstrap.kraft_version,
    });
    (records, ControllerReply::Done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::MetadataBatch;

    #[test]
    fn voters_parse_as_kafkas_dynamic_voters() {
        let v = parse_dynamic_voters(
            "2@example.com:8083:MvDxzVmcRsaTz33bUuRU6A,0@[::1]:8082:JEXY6aqzQY-32P5TStzaFg",
        )
        .unwrap();
        assert_eq!(v[0].node_id, 0);
        assert_eq!(v[0].address(), "[::1]:8082");
        assert_eq!(v[1].address(), "example.com:8083");
        assert_eq!(
            v[1].to_string(),
            "2@example.com:8083:MvDxzVmcRsaTz33bUuRU6A"
        );
        for (bad, why) in [
            ("", "No voters given."),
            ("1example.com:1:MvDxzVmcRsaTz33bUuRU6A", "No @ found"),
            ("@h:1:MvDxzVmcRsaTz33bUuRU6A", "Invalid @"),
            ("-1@h:1:MvDxzVmcRsaTz33bUuRU6A", "negative node id"),
            ("1@h:70000:MvDxzVmcRsaTz33bUuRU6A", "Invalid port 70000"),
            ("1@h:1", "No colon following port"),
            ("1@h:1:nope", "directory ID"),
            (
                "1@h:1:MvDxzVmcRsaTz33bUuRU6A,1@g:2:MvDxzVmcRsaTz33bUuRU6A",
                "more than once",
            ),
        ] {
            let e = parse_dynamic_voters(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_formatted_voter_set_is_recorded_once() {
        let mut image = MetadataImage::default();
        let voter = DynamicVoter {
            node_id: 1,
            host: "127.0.0.1".into(),
            port: 9093,
            directory_id: Uuid::from_u128(5),
        };
        let formatted = BootstrapVoters {
            kraft_version: 1,
            voters: vec![voter],
        };
        let (records, _) = bootstrap(&image, &formatted);
        image.apply_batch(&MetadataBatch(records));
        assert_eq!(image.feature_level(KRAFT_VERSION), 1);
        assert_eq!(directory_id_of(&image, 1), Uuid::from_u128(5));
        assert_eq!(directory_id_of(&image, 2), Uuid::nil());
        assert!(bootstrap(&image, &formatted).0.is_empty());
    }
}
