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

use uuid::Uuid;

pub use brook_controller::voter_set::{
    parse_dynamic_voters, BootstrapVoters, DynamicVoter, DYNAMIC_KRAFT_VERSION,
};

use crate::config::BrokerConfig;

/// The formatted voter set's file in the metadata directory.
pub const BOOTSTRAP_VOTERS_FILE: &str = "bootstrap-voters.json";

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

/// Whether log directory `log_dir` is formatted: it has `meta.properties` (a node started on
/// it, or `brook format` wrote it for a dynamic quorum) or the SCRAM users `brook format
/// --add-scram` wrote.
pub fn is_formatted(log_dir: &Path) -> bool {
    log_dir.join(crate::metadata::META_PROPERTIES_FILE).exists()
        || crate::security::bootstrap::path(log_dir).exists()
}

/// Kafka's `Formatter.doFormat` refusal of a formatted directory, with its message.
pub fn refuse_formatted(log_dir: &Path) -> Result<(), String> {
    match is_formatted(log_dir) {
        true => Err(format!(
            "Log directory {} is already formatted. Use --ignore-formatted to ignore this \
             directory and format the others.",
            log_dir.display()
        )),
        false => Ok(()),
    }
}

/// Writes `plan` into log directory `log_dir`: `meta.properties` with the directory id
/// (`Formatter.doFormat`; a directory that has one is already formatted) and the bootstrap
/// voter set. Returns what a formatted node prints.
pub fn format(log_dir: &Path, node_id: i32, plan: &FormatPlan) -> Result<String, String> {
    refuse_formatted(log_dir)?;
    let meta = log_dir.join(crate::metadata::META_PROPERTIES_FILE);
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
