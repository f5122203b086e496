//! A dynamic quorum's formatted voter set (KIP-853): `brook format --standalone`,
//! `--initial-controllers` and `--no-initial-controllers`, with Kafka 4.4's meaning
//! (`kafka.tools.StorageTool.runFormatCommand`, `org.apache.kafka.metadata.storage.Formatter`,
//! `org.apache.kafka.raft.DynamicVoter` and `DynamicVoters`).
//!
//! Kafka writes the voter set and `kraft.version` 1 into the bootstrap snapshot of the
//! metadata log (`Formatter.writeDynamicQuorumSnapshot`: a `VotersRecord` and a
//! `KRaftVersionRecord`), and each voter's `meta.properties` gets its directory id from the
//! voter set. Brook writes the same facts to `<log.dirs>/__cluster_metadata/`
//! [`BOOTSTRAP_VOTERS_FILE`]: a node whose configuration has no `controller.quorum.voters`
//! starts its quorum with these voters (`ControllerConfig::from_broker_config`), and the active
//! controller records `kraft.version` and the directory ids once per cluster
//! (`voter_control::bootstrap`), as Kafka's bootstrap records are written once.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::BrokerConfig;

/// The formatted voter set's file in the metadata directory.
pub const BOOTSTRAP_VOTERS_FILE: &str = "bootstrap-voters.json";

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
        let directory_id = crate::metadata::parse_kafka_uuid(directory)
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
        let dir = crate::metadata::kafka_uuid_string(self.directory_id);
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

/// The formatted voter set's path in metadata directory `metadata_dir`.
pub fn path(metadata_dir: &Path) -> PathBuf {
    metadata_dir.join(BOOTSTRAP_VOTERS_FILE)
}

/// Writes the formatted voter set.
pub fn write(metadata_dir: &Path, bootstrap: &BootstrapVoters) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(metadata_dir)?;
    let p = path(metadata_dir);
    let json = serde_json::to_string_pretty(bootstrap).map_err(std::io::Error::other)?;
    brook_storage::checkpoint::write_atomically(&p, &json)?;
    Ok(p)
}

/// The formatted voter set of `metadata_dir`; `None` if it was not formatted with one.
pub fn read(metadata_dir: &Path) -> std::io::Result<Option<BootstrapVoters>> {
    match std::fs::read(path(metadata_dir)) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(std::io::Error::other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The quorum flags of `brook format` (mutually exclusive, as `kafka-storage format`'s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuorumFlag {
    /// `--standalone`: this controller alone is the first voter.
    Standalone,
    /// `--initial-controllers id@host:port:directoryId,...`.
    InitialControllers(String),
    /// `--no-initial-controllers`: a dynamic quorum's node that joins a running one.
    NoInitialControllers,
}

/// What formatting one node's log directory decided: its `meta.properties` directory id and,
/// for a dynamic quorum's controller, the bootstrap voter set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatPlan {
    pub cluster_id: String,
    pub directory_id: Uuid,
    pub bootstrap: Option<BootstrapVoters>,
}

fn roles(cfg: &BrokerConfig) -> Vec<String> {
    let roles = cfg.values.get("process.roles").cloned().unwrap_or_default();
    roles
        .split(',')
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty())
        .collect()
}

/// Kafka's `StorageTool.runFormatCommand` and `Formatter` rules for the quorum flags: `None`
/// when the node is not formatted for a dynamic quorum (static voters, or a single node with
/// no flag), else what to write.
pub fn plan(cfg: &BrokerConfig, flag: Option<&QuorumFlag>) -> Result<Option<FormatPlan>, String> {
    let roles = roles(cfg);
    let controller = roles.iter().any(|r| r == "controller");
    let static_voters = cfg
        .values
        .get("controller.quorum.voters")
        .is_some_and(|v| !v.trim().is_empty());
    let Some(flag) = flag else {
        if controller && !static_voters {
            return Err(
                "Because controller.quorum.voters is not set on this controller, you \
                        must specify one of the following: --standalone, --initial-controllers, \
                        or --no-initial-controllers."
                    .into(),
            );
        }
        return Ok(None);
    };
    if roles.is_empty() {
        return Err(
            "The kafka configuration file appears to be for a legacy cluster. \
                    Formatting is only supported for clusters in KRaft mode."
                .into(),
        );
    }
    if static_voters && *flag != QuorumFlag::NoInitialControllers {
        return Err(
            "You cannot specify controller.quorum.voters and format the node with \
                    --initial-controllers or --standalone. If you want to use dynamic quorum, \
                    please remove controller.quorum.voters and specify \
                    controller.quorum.bootstrap.servers instead."
                .into(),
        );
    }
    let voters = match flag {
        QuorumFlag::Standalone if !controller => {
            return Err("You can only use --standalone on a controller.".into())
        }
        QuorumFlag::Standalone => Some(vec![standalone_voter(cfg)?]),
        QuorumFlag::InitialControllers(v) => Some(parse_dynamic_voters(v)?),
        QuorumFlag::NoInitialControllers => None,
    };
    let cluster_id = cfg
        .cluster_id
        .clone()
        .ok_or("You must specify the cluster id (cluster.id).".to_string())?;
    let own = voters
        .as_ref()
        .and_then(|vs| vs.iter().find(|v| v.node_id == cfg.node_id));
    // A voter's directory is the one the voter set names (`DYNAMIC_METADATA_VOTER_DIRECTORY`).
    let directory_id = own.map_or_else(Uuid::new_v4, |v| v.directory_id);
    // Only a controller keeps the metadata log's bootstrap (`setWriteBootstrapSnapshot`);
    // `kraft.version` is 1 without static voters (`Formatter.effectiveKRaftFeatureLevel`).
    let bootstrap = (controller && !static_voters).then(|| BootstrapVoters {
        kraft_version: DYNAMIC_KRAFT_VERSION,
        voters: voters.unwrap_or_default(),
    });
    Ok(Some(FormatPlan {
        cluster_id,
        directory_id,
        bootstrap,
    }))
}

/// Writes `plan` into log directory `log_dir`: `meta.properties` with the directory id
/// (`Formatter.doFormat`; a directory that has one is already formatted) and the bootstrap
/// voter set. Returns what a formatted node prints.
pub fn format(log_dir: &Path, node_id: i32, plan: &FormatPlan) -> Result<String, String> {
    let meta = log_dir.join(crate::metadata::META_PROPERTIES_FILE);
    if meta.exists() {
        return Err(format!(
            "Log directory {} is already formatted. Use --ignore-formatted to ignore this \
             directory and format the others.",
            log_dir.display()
        ));
    }
    let io = |e: std::io::Error| format!("Error while writing {}: {e}", log_dir.display());
    std::fs::create_dir_all(log_dir).map_err(io)?;
    let directory_id = crate::metadata::kafka_uuid_string(plan.directory_id);
    let body = format!(
        "version=1\nnode.id={node_id}\ncluster.id={}\ndirectory.id={directory_id}\n",
        plan.cluster_id
    );
    brook_storage::checkpoint::write_atomically(&meta, &body).map_err(io)?;
    let kind = match &plan.bootstrap {
        Some(b) => {
            let metadata_dir = log_dir.join(super::METADATA_DIR);
            write(&metadata_dir, b).map_err(io)?;
            match b.voters.iter().any(|v| v.node_id == node_id) {
                true => "dynamic metadata voter directory",
                false => "dynamic metadata directory",
            }
        }
        None => "data directory",
    };
    Ok(format!(
        "Formatting {kind} {} with directory.id {directory_id}.",
        log_dir.display()
    ))
}

/// `StorageTool.createStandaloneDynamicVoters`: this node at its controller listener (an
/// unspecified address as `localhost`), with a new directory id.
fn standalone_voter(cfg: &BrokerConfig) -> Result<DynamicVoter, String> {
    let listen = cfg
        .controller_listener()
        .ok_or("No controller listeners found.".to_string())?;
    let host = match listen.ip().is_unspecified() {
        true => "localhost".to_string(),
        false => listen.ip().to_string(),
    };
    Ok(DynamicVoter {
        node_id: cfg.node_id,
        host,
        port: listen.port(),
        directory_id: Uuid::new_v4(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
