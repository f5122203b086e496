//! The first SCRAM users of a cluster, created before it starts: Brook's counterpart of
//! `kafka-storage format --add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]'`
//! (Kafka's `StorageTool` / `ScramParser`). `brook format` writes the credentials (salted, never the
//! password) to `<log.dirs>/__cluster_metadata/bootstrap-scram.json`; at start-up the node
//! asks the active controller to record them, which it does once per cluster
//! (`controller::scram_control::bootstrap`), as Kafka writes bootstrap records once.

use std::path::{Path, PathBuf};

use super::scram::{ScramCredential, ScramMechanism, SCRAM_ITERATIONS_MIN};

/// The bootstrap file's name in the metadata directory.
pub const BOOTSTRAP_SCRAM_FILE: &str = "bootstrap-scram.json";

/// A bootstrap credential: user, Kafka's mechanism type id, credential.
pub type BootstrapCredential = (String, i8, ScramCredential);

/// The bootstrap file of log directory `log_dir`.
pub fn path(log_dir: &Path) -> PathBuf {
    log_dir
        .join(crate::metadata::METADATA_DIR)
        .join(BOOTSTRAP_SCRAM_FILE)
}

/// Parses one `--add-scram` argument as Kafka's `ScramParser` does:
/// `SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192]` (iterations default
/// to 4096; a password is required: Brook does not take `salt` and `saltedpassword`).
pub fn parse_add_scram(arg: &str) -> Result<BootstrapCredential, String> {
    let (mechanism, rest) = arg
        .split_once('=')
        .ok_or_else(|| format!("Failed to find equals sign in SCRAM argument '{arg}'"))?;
    let m = ScramMechanism::from_name(mechanism.trim())
        .ok_or_else(|| format!("The add-scram mechanism {mechanism} is not supported."))?;
    let body = rest
        .trim()
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .ok_or_else(|| {
            format!("Expected configuration string to be enclosed in brackets: {rest}")
        })?;
    let (mut name, mut password, mut iterations) = (None, None, SCRAM_ITERATIONS_MIN);
    for kv in body.split(',') {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("Unable to parse '{kv}' in the SCRAM argument"))?;
        let v = v.trim().trim_matches('"');
        match k.trim() {
            "name" => name = Some(v.to_string()),
            "password" => password = Some(v.to_string()),
            "iterations" => {
                iterations = v
                    .parse()
                    .map_err(|_| format!("Invalid iterations value {v}"))?;
            }
            other => return Err(format!("Unknown SCRAM configuration key {other}")),
        }
    }
    let name = name.ok_or("You must supply 'name' to add-scram")?;
    let password = password.ok_or("You must supply 'password' to add-scram")?;
    if !(SCRAM_ITERATIONS_MIN..=super::scram::SCRAM_ITERATIONS_MAX).contains(&iterations) {
        return Err(format!("Invalid number of iterations {iterations}"));
    }
    let credential = crate::security::scram::generate_credential(m, &password, iterations);
    Ok((name, m.type_id(), credential))
}

/// Writes the bootstrap credentials of log directory `log_dir`.
pub fn write(log_dir: &Path, credentials: &[BootstrapCredential]) -> std::io::Result<PathBuf> {
    let p = path(log_dir);
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::to_vec_pretty(credentials).map_err(std::io::Error::other)?;
    std::fs::write(&p, json)?;
    Ok(p)
}

/// The bootstrap credentials of log directory `log_dir`; none without a file.
pub fn read(log_dir: &Path) -> std::io::Result<Vec<BootstrapCredential>> {
    match std::fs::read(path(log_dir)) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(std::io::Error::other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_scram_arguments_as_kafka_writes_them() {
        let (name, m, c) =
            parse_add_scram("SCRAM-SHA-512=[name=admin,password=admin-secret,iterations=8192]")
                .unwrap();
        assert_eq!((name.as_str(), m, c.iterations), ("admin", 2, 8192));
        assert!(parse_add_scram("SCRAM-SHA-1=[name=a,password=b]").is_err());
        assert!(parse_add_scram("SCRAM-SHA-256=[name=a]").is_err());
        assert!(parse_add_scram("SCRAM-SHA-256=[name=a,password=b,iterations=100]").is_err());
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_empty());
        write(dir.path(), &[(name, m, c.clone())]).unwrap();
        assert_eq!(read(dir.path()).unwrap()[0].2, c);
    }
}
