//! TLS for SSL and SASL_SSL listeners and for the broker's own TLS connections, built with
//! rustls from Kafka's `ssl.*` keys. Mirrors Kafka's `SslFactory`/`DefaultSslEngineFactory`
//! (`SslEngineFactory`): one server context per listener, one client context for the
//! inter-broker links, with `listener.name.<l>.ssl.*` taking precedence over
//! the unprefixed key, key by key, as Kafka's `KafkaConfig.valuesWithPrefixOverride` does.
//!
//! - `ssl.client.auth` (`SslClientAuth`, `BrokerSecurityConfigs`): `none`, `requested` (a
//!   certificate is asked for and verified when sent) or `required`.
//! - `ssl.enabled.protocols` (TLSv1.2, TLSv1.3) bound the versions; `ssl.protocol` names the
//!   context's protocol and is only checked to be one of them.
//! - `ssl.endpoint.identification.algorithm`: `https` (the default) checks that the peer's
//!   certificate names the host connected to, on client connections only, as Java's
//!   `SSLParameters.setEndpointIdentificationAlgorithm`; empty turns that off (the chain is
//!   still verified).
//! - `ssl.principal.mapping.rules` ([`principal`]) names a mutual-TLS client.

pub mod certs;
pub mod principal;
pub mod reload;
pub mod stores;

use std::collections::BTreeMap;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, ServerConfig, SupportedProtocolVersion,
};

pub use principal::SslPrincipalMapper;

use crate::security::SecurityProtocol;

/// A `ssl.*` value Brook cannot use: names the key (with its listener prefix when the
/// prefixed key was the one read) and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid {key}: {why}")]
pub struct SslError {
    pub key: String,
    pub why: String,
}

/// The `ssl.*` keys as one listener sees them: `listener.name.<listener>.<key>` first, then
/// `<key>`. Empty values count as unset.
pub struct SslView<'a> {
    values: &'a BTreeMap<String, String>,
    /// `listener.name.<lower-case listener>.` (Kafka's `ListenerName.configPrefix`), or
    /// empty for the unprefixed keys alone.
    prefix: String,
}

impl<'a> SslView<'a> {
    /// The keys for `listener` (`None`: the unprefixed keys only).
    pub fn new(values: &'a BTreeMap<String, String>, listener: Option<&str>) -> SslView<'a> {
        let prefix = listener.map_or(String::new(), |l| {
            format!("listener.name.{}.", l.to_lowercase())
        });
        SslView { values, prefix }
    }

    /// The key actually set for `key`: the prefixed one when set.
    fn source(&self, key: &str) -> String {
        let prefixed = format!("{}{key}", self.prefix);
        match self.values.get(&prefixed) {
            Some(v) if !self.prefix.is_empty() && !v.trim().is_empty() => prefixed,
            _ => key.to_string(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&'a str> {
        let v = self.values.get(&self.source(key))?;
        Some(v.trim()).filter(|v| !v.is_empty())
    }

    /// The value as set, empty included (`ssl.endpoint.identification.algorithm`, where
    /// empty means "none" and unset means the default).
    fn raw(&self, key: &str) -> Option<&'a str> {
        let prefixed = format!("{}{key}", self.prefix);
        let v = match self.values.get(&prefixed) {
            Some(v) if !self.prefix.is_empty() => v,
            _ => self.values.get(key)?,
        };
        Some(v.trim())
    }

    fn store_type(&self, key: &str) -> String {
        self.get(key).unwrap_or("JKS").to_ascii_uppercase()
    }

    fn err(&self, key: &str, why: impl Into<String>) -> SslError {
        SslError {
            key: self.source(key),
            why: why.into(),
        }
    }
}

/// Kafka's `SslClientAuth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslClientAuth {
    None,
    Requested,
    Required,
}

impl SslClientAuth {
    /// `ssl.client.auth`. An unknown value is Kafka's NONE with a warning
    /// (`DefaultSslEngineFactory.createSslClientAuth`).
    fn of(v: &SslView<'_>) -> SslClientAuth {
        match v
            .get("ssl.client.auth")
            .map(|s| s.to_ascii_lowercase())
            .as_deref()
        {
            None | Some("none") => SslClientAuth::None,
            Some("requested") => SslClientAuth::Requested,
            Some("required") => SslClientAuth::Required,
            Some(other) => {
                tracing::warn!(value = other, "unrecognized ssl.client.auth; falling back to none (none, requested, required)");
                SslClientAuth::None
            }
        }
    }
}

/// What a TLS listener serves: the rustls context and how its clients are named.
#[derive(Clone)]
pub struct ServerTls {
    pub config: Arc<ServerConfig>,
    pub mapper: Arc<SslPrincipalMapper>,
    pub client_auth: SslClientAuth,
    /// The leaf certificate served, for [`reload`]'s compatibility check.
    pub certificate: CertificateDer<'static>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("client_auth", &self.client_auth)
            .finish()
    }
}

/// rustls' default provider, aws-lc-rs: it loads the EC keys Java's keytool writes (PKCS#8
/// without the public key), which *ring* refuses.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// `ssl.enabled.protocols`, checked against `ssl.protocol` (Kafka's defaults:
/// `TLSv1.2,TLSv1.3` and `TLSv1.3`). Versions rustls lacks (TLSv1, TLSv1.1) are refused.
fn protocol_versions(v: &SslView<'_>) -> Result<Vec<&'static SupportedProtocolVersion>, SslError> {
    let enabled = v.get("ssl.enabled.protocols").unwrap_or("TLSv1.2,TLSv1.3");
    let mut versions = Vec::new();
    for name in enabled.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match name {
            "TLSv1.2" => versions.push(&rustls::version::TLS12),
            "TLSv1.3" => versions.push(&rustls::version::TLS13),
            other => {
                return Err(v.err(
                    "ssl.enabled.protocols",
                    format!("{other} is not supported: TLSv1.2 and TLSv1.3 are"),
                ))
            }
        }
    }
    if versions.is_empty() {
        return Err(v.err("ssl.enabled.protocols", "no protocol enabled"));
    }
    match v.get("ssl.protocol").unwrap_or("TLSv1.3") {
        "TLS" | "TLSv1.2" | "TLSv1.3" => Ok(versions),
        other => Err(v.err(
            "ssl.protocol",
            format!("{other} is not supported: TLSv1.2, TLSv1.3 or TLS"),
        )),
    }
}

/// Every TLS context a node needs, built once at start-up from its config: a bad key or
/// store stops the node with the key named.
#[derive(Clone, Default)]
pub struct TlsContexts {
    /// The server context of each SSL or SASL_SSL broker listener, by name.
    pub servers: BTreeMap<Arc<str>, ServerTls>,
    /// The client context of this node's connections to other brokers' inter-broker
    /// listener (replica fetches, WriteTxnMarkers, AddPartitionsToTxn), when it uses TLS.
    pub inter_broker: Option<Arc<ClientConfig>>,
}

impl std::fmt::Debug for TlsContexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsContexts")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .field("inter_broker", &self.inter_broker.is_some())
            .finish()
    }
}

/// The contexts `listeners` call for.
pub fn contexts(
    values: &BTreeMap<String, String>,
    listeners: &crate::listeners::Listeners,
) -> Result<TlsContexts, SslError> {
    let mut out = TlsContexts::default();
    for l in listeners
        .broker
        .iter()
        .filter(|l| l.security_protocol.uses_tls())
    {
        out.servers.insert(
            l.name.clone(),
            server_tls(values, &l.name, l.security_protocol)?,
        );
    }
    let inter = listeners.inter_broker_listener();
    if inter.security_protocol.uses_tls() {
        out.inter_broker = Some(client_tls(values, &inter.name)?);
    }
    Ok(out)
}

/// The server context of an SSL or SASL_SSL listener named `listener`.
pub fn server_tls(
    values: &BTreeMap<String, String>,
    listener: &str,
    protocol: SecurityProtocol,
) -> Result<ServerTls, SslError> {
    let v = SslView::new(values, Some(listener));
    let client_auth = listener_client_auth(&v, listener, protocol);
    server_tls_with(&v, &format!("listener {listener}"), client_auth)
}

/// The `ssl.client.auth` a listener applies. A SASL_SSL listener asks for client certificates
/// only when its `listener.name.<l>.ssl.client.auth` says so: the unprefixed key is for SSL
/// listeners (Kafka's `ChannelBuilders.create`, which passes `sslClientAuthOverride=none` to
/// `SaslChannelBuilder` then, with the same warning).
fn listener_client_auth(
    v: &SslView<'_>,
    listener: &str,
    protocol: SecurityProtocol,
) -> SslClientAuth {
    let key = "ssl.client.auth";
    if protocol != SecurityProtocol::SaslSsl || v.source(key) != key {
        return SslClientAuth::of(v);
    }
    if SslClientAuth::of(v) != SslClientAuth::None {
        tracing::warn!(
            listener,
            "Broker configuration 'ssl.client.auth' is applied only to SSL listeners. Listener-prefixed configuration can be used to enable SSL client authentication for SASL_SSL listeners."
        );
    }
    SslClientAuth::None
}

/// The server context the `ssl.*` keys of `v` configure, for `what` (named in errors): a
/// broker listener, or the admin listener ([`crate::admin_security`]).
pub fn server_tls_from(v: &SslView<'_>, what: &str) -> Result<ServerTls, SslError> {
    server_tls_with(v, what, SslClientAuth::of(v))
}

/// [`server_tls_from`] with the client authentication decided by the caller.
pub(crate) fn server_tls_with(
    v: &SslView<'_>,
    what: &str,
    client_auth: SslClientAuth,
) -> Result<ServerTls, SslError> {
    let Some(keys) = stores::keystore(v)? else {
        return Err(v.err("ssl.keystore.location", format!("{what} uses TLS but has no key store (ssl.keystore.location, or ssl.keystore.key with ssl.keystore.certificate.chain)")));
    };
    let versions = protocol_versions(v)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&versions)
        .map_err(|e| v.err("ssl.enabled.protocols", e.to_string()))?;
    let builder = match client_auth {
        SslClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let Some(roots) = stores::truststore(v)? else {
                return Err(v.err(
                    "ssl.truststore.location",
                    format!(
                        "ssl.client.auth={} needs a trust store to verify client certificates",
                        if auth == SslClientAuth::Required {
                            "required"
                        } else {
                            "requested"
                        }
                    ),
                ));
            };
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            let verifier = match auth {
                SslClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier = verifier
                .build()
                .map_err(|e| v.err("ssl.truststore.location", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let certificate = keys.chain.first().cloned().ok_or_else(|| {
        v.err(
            "ssl.keystore.location",
            "the key store holds no certificate",
        )
    })?;
    let config = builder
        .with_single_cert(keys.chain, keys.key)
        .map_err(|e| {
            v.err(
                "ssl.keystore.location",
                format!("the key and certificate are not usable: {e}"),
            )
        })?;
    let rules = v
        .get("ssl.principal.mapping.rules")
        .unwrap_or(principal::DEFAULT_SSL_PRINCIPAL_MAPPING_RULES);
    let mapper = SslPrincipalMapper::from_rules(rules)
        .map_err(|e| v.err("ssl.principal.mapping.rules", e))?;
    Ok(ServerTls {
        config: Arc::new(config),
        mapper: Arc::new(mapper),
        client_auth,
        certificate,
    })
}

/// The client context for the broker's connections to a TLS listener named `listener`
/// (inter-broker): its truststore verifies the peer, its keystore (when set)
/// is the client certificate, and `ssl.endpoint.identification.algorithm` decides whether
/// the peer's name is checked.
pub fn client_tls(
    values: &BTreeMap<String, String>,
    listener: &str,
) -> Result<Arc<ClientConfig>, SslError> {
    let v = SslView::new(values, Some(listener));
    let Some(roots) = stores::truststore(&v)? else {
        return Err(v.err("ssl.truststore.location", format!("listener {listener} uses TLS between brokers but has no trust store to verify them (ssl.truststore.location or ssl.truststore.certificates)")));
    };
    client_tls_from(&v, roots)
}

/// The client context of an OAuth HTTPS call, from the `ssl.*` options of the login module's
/// JAAS configuration (Kafka's `JaasOptionsUtils.createSSLSocketFactory`: the client
/// `ssl.*` keys, their defaults otherwise). Without a truststore Java trusts its default
/// CAs; Brook trusts the platform's CA bundle ([`platform_roots`]).
pub fn jaas_client_tls(options: &BTreeMap<String, String>) -> Result<Arc<ClientConfig>, SslError> {
    let v = SslView::new(options, None);
    let roots = match stores::truststore(&v)? {
        Some(roots) => roots,
        None => platform_roots().map_err(|why| v.err("ssl.truststore.location", why))?,
    };
    client_tls_from(&v, roots)
}

/// The CA bundle at `SSL_CERT_FILE`, else at the usual Debian or Red Hat path.
fn platform_roots() -> Result<rustls::RootCertStore, String> {
    let candidates = std::env::var("SSL_CERT_FILE").into_iter().chain([
        "/etc/ssl/certs/ca-certificates.crt".to_string(),
        "/etc/pki/tls/certs/ca-bundle.crt".to_string(),
    ]);
    for path in candidates {
        let Ok(pem) = std::fs::read(&path) else {
            continue;
        };
        let mut roots = rustls::RootCertStore::empty();
        let certs = CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok);
        let (added, _) = roots.add_parsable_certificates(certs);
        if added > 0 {
            return Ok(roots);
        }
    }
    Err("no trust store is configured (ssl.truststore.location or ssl.truststore.certificates) and no platform CA bundle was found (SSL_CERT_FILE)".into())
}

/// A client context verifying peers against `roots`, with the view's protocols, endpoint
/// identification and client certificate.
fn client_tls_from(
    v: &SslView<'_>,
    roots: rustls::RootCertStore,
) -> Result<Arc<ClientConfig>, SslError> {
    let versions = protocol_versions(v)?;
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| v.err("ssl.truststore.location", e.to_string()))?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&versions)
        .map_err(|e| v.err("ssl.enabled.protocols", e.to_string()))?;
    let algorithm = v
        .raw("ssl.endpoint.identification.algorithm")
        .unwrap_or("https");
    let builder = match algorithm.to_ascii_lowercase().as_str() {
        "" => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoEndpointIdentification(inner))),
        "https" => builder.with_webpki_verifier(inner),
        other => {
            return Err(v.err(
                "ssl.endpoint.identification.algorithm",
                format!("{other} is not supported: https, or empty for none"),
            ))
        }
    };
    let config = match stores::keystore(v)? {
        Some(keys) => builder
            .with_client_auth_cert(keys.chain, keys.key)
            .map_err(|e| {
                v.err(
                    "ssl.keystore.location",
                    format!("the key and certificate are not usable: {e}"),
                )
            })?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// Verifies the peer's chain against the truststore but not its name: an empty
/// `ssl.endpoint.identification.algorithm`.
#[derive(Debug)]
struct NoEndpointIdentification(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for NoEndpointIdentification {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests;
