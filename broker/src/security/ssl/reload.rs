//! Key and trust stores replaced at run time, as Kafka allows: IncrementalAlterConfigs or
//! AlterConfigs on one broker (`--entity-type brokers --entity-name N`) of
//! `listener.name.<l>.ssl.keystore.location` and the other store keys
//! (`SslConfigs.RECONFIGURABLE_CONFIGS`) re-reads the listener's stores; new connections get
//! the new context, open ones keep theirs.
//!
//! Mirrors Kafka's `DynamicListenerConfig` (per-broker only: `DynamicBrokerConfig`'s
//! `PerBrokerConfigs`) and `SslFactory.reconfigure`/`validateReconfiguration`: the new stores
//! are built and checked before anything is stored (`createNewSslEngineFactory`), and the new
//! certificate must name the same subject (unless `ssl.allow.dn.changes`) and at least the
//! same subject alternative names (unless `ssl.allow.san.changes`) as the one it replaces
//! (`CertificateEntries.ensureCompatible`). A refusal is INVALID_CONFIG, as Kafka's
//! `ConfigException`. Brook compares the leaf certificate (its key stores hold one chain);
//! Kafka's extra handshake between the old and new contexts (`SslEngineValidator`) is not
//! made.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::RwLock;
use x509_cert::der::{Decode, Encode};

use super::{server_tls_with, ServerTls, SslView};

/// Kafka's `SslConfigs.RECONFIGURABLE_CONFIGS`.
pub const RECONFIGURABLE_SSL_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.certificates",
];

/// `listener.name.<listener>.<store key>`: the (lower-case) listener and the key.
pub fn listener_store_key(name: &str) -> Option<(&str, &str)> {
    let (listener, key) = name.strip_prefix("listener.name.")?.split_once('.')?;
    RECONFIGURABLE_SSL_KEYS
        .contains(&key)
        .then_some((listener, key))
}

/// The server contexts new connections get, by listener name; replaced by [`LiveTls::install`].
pub struct LiveTls {
    servers: RwLock<BTreeMap<Arc<str>, ServerTls>>,
}

impl LiveTls {
    pub fn new(initial: &BTreeMap<Arc<str>, ServerTls>) -> LiveTls {
        LiveTls {
            servers: RwLock::new(initial.clone()),
        }
    }

    /// The context of `listener` now.
    pub fn get(&self, listener: &str) -> Option<ServerTls> {
        self.servers.read().get(listener).cloned()
    }

    /// The new contexts of the TLS listeners `changed` keys name, built from the static
    /// `values` with this broker's dynamic `per_broker` keys over them, each checked against
    /// the context it replaces. Nothing is installed.
    pub fn prepare<'a>(
        &self,
        values: &BTreeMap<String, String>,
        per_broker: &BTreeMap<String, String>,
        changed: impl Iterator<Item = &'a str>,
    ) -> Result<Vec<(Arc<str>, ServerTls)>, String> {
        let listeners: BTreeSet<String> = changed
            .filter_map(listener_store_key)
            .map(|(l, _)| l.to_string())
            .collect();
        let mut merged = values.clone();
        merged.extend(per_broker.iter().map(|(k, v)| (k.clone(), v.clone())));
        let servers = self.servers.read().clone();
        let mut out = Vec::new();
        for (name, old) in servers
            .iter()
            .filter(|(n, _)| listeners.contains(&n.to_lowercase()))
        {
            // ssl.client.auth is not reconfigurable (Kafka's `SslFactory`): the listener keeps
            // the one it started with, its SASL_SSL override included.
            let v = SslView::new(&merged, Some(name));
            let new =
                server_tls_with(&v, &format!("listener {name}"), old.client_auth).map_err(|e| {
                    format!("Validation of dynamic config update of SSLFactory failed: {e}")
                })?;
            let allow = |k: &str| v.get(k).is_some_and(|s| s.eq_ignore_ascii_case("true"));
            ensure_compatible(
                &old.certificate,
                &new.certificate,
                allow("ssl.allow.dn.changes"),
                allow("ssl.allow.san.changes"),
            )
            .map_err(|e| {
                format!("Validation of dynamic config update of SSLFactory failed: {e}")
            })?;
            out.push((name.clone(), new));
        }
        Ok(out)
    }

    /// New connections get these contexts from now on.
    pub fn install(&self, prepared: Vec<(Arc<str>, ServerTls)>) {
        let mut servers = self.servers.write();
        for (name, tls) in prepared {
            tracing::info!(listener = %name, "listener key store reloaded");
            servers.insert(name, tls);
        }
    }
}

/// Kafka's `CertificateEntries.ensureCompatible` on the leaf certificates: the same subject
/// (compared as Java's `X500Principal.getName()`, case-insensitively), and every subject
/// alternative name of the old one still in the new one.
fn ensure_compatible(
    old: &[u8],
    new: &[u8],
    allow_dn: bool,
    allow_san: bool,
) -> Result<(), String> {
    if !allow_dn {
        let (o, n) = (
            super::principal::distinguished_name(old)?,
            super::principal::distinguished_name(new)?,
        );
        if !o.eq_ignore_ascii_case(&n) {
            return Err(format!(
                "Keystore DistinguishedName does not match:  existing={{DN={o}}}, new={{DN={n}}}"
            ));
        }
    }
    if !allow_san {
        let (o, n) = (alt_names(old)?, alt_names(new)?);
        if !o.is_subset(&n) {
            return Err(format!(
                "Keystore SubjectAltNames do not match:  existing={{SAN count={}}}, new={{SAN count={}}}",
                o.len(),
                n.len()
            ));
        }
    }
    Ok(())
}

/// A certificate's subject alternative names, each as its DER encoding.
fn alt_names(cert_der: &[u8]) -> Result<BTreeSet<Vec<u8>>, String> {
    let cert = x509_cert::Certificate::from_der(cert_der).map_err(|e| e.to_string())?;
    let san = cert
        .tbs_certificate
        .get::<x509_cert::ext::pkix::SubjectAltName>()
        .map_err(|e| e.to_string())?;
    let mut out = BTreeSet::new();
    for name in san.map(|(_, s)| s.0).unwrap_or_default() {
        out.insert(name.to_der().map_err(|e| e.to_string())?);
    }
    Ok(out)
}
