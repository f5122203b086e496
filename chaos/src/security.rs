//! How a run's clients reach the cluster: PLAINTEXT, or the client settings a secured
//! `brook cluster --secure [--sasl]` writes to its `librdkafka.properties` (read, never
//! rebuilt here: the supervisor owns them). Every librdkafka client of the run gets those
//! properties as they are; the checker's own raw wire connections (CreateTopics,
//! FindCoordinator, the batch-header read) derive theirs from the same ones: TLS trusting
//! `ssl.ca.location` (with `ssl.certificate.location`/`ssl.key.location` as the client
//! certificate when given), then the SASL exchange of `sasl.mechanisms` as `sasl.username`,
//! the order Kafka's `SaslChannelBuilder` runs them in on a SASL_SSL connection.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use brook_protocol_tests::sasl::{self, Scram};
use brook_protocol_tests::WireClient;
use rdkafka::config::ClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The SASL login of a wire connection.
#[derive(Clone, Debug)]
enum Login {
    Plain,
    Scram(Scram),
}

/// The librdkafka properties of the run's clients, and what the wire connections make of them.
#[derive(Clone, Default)]
pub struct ClientSecurity {
    /// librdkafka properties besides `bootstrap.servers` (empty: PLAINTEXT).
    rdkafka: Vec<(String, String)>,
    tls: Option<Arc<rustls::ClientConfig>>,
    sasl: Option<(Login, String, String)>,
}

impl std::fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecurity")
            .field("security.protocol", &self.protocol())
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl.as_ref().map(|s| (&s.0, &s.1)))
            .finish()
    }
}

impl ClientSecurity {
    /// PLAINTEXT.
    pub fn plaintext() -> ClientSecurity {
        ClientSecurity::default()
    }

    /// The settings of a librdkafka properties file (`key=value` lines, `#` comments).
    pub fn from_librdkafka_file(path: &Path) -> Result<ClientSecurity, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_librdkafka_properties(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The settings of a librdkafka properties text; `bootstrap.servers` is left out (the
    /// target says where its nodes are).
    pub fn from_librdkafka_properties(text: &str) -> Result<ClientSecurity, String> {
        let rdkafka: Vec<(String, String)> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .filter(|(k, _)| k != "bootstrap.servers")
            .collect();
        let props: BTreeMap<&str, &str> = rdkafka.iter().map(|(k, v)| (&**k, &**v)).collect();
        let protocol = props
            .get("security.protocol")
            .copied()
            .unwrap_or("plaintext")
            .to_ascii_lowercase();
        let (tls, sasl) = match protocol.as_str() {
            "plaintext" => (false, false),
            "ssl" => (true, false),
            "sasl_ssl" => (true, true),
            "sasl_plaintext" => (false, true),
            other => return Err(format!("security.protocol={other} is not known")),
        };
        let tls = tls.then(|| tls_config(&props)).transpose()?;
        let sasl = sasl.then(|| sasl_login(&props)).transpose()?;
        Ok(ClientSecurity { rdkafka, tls, sasl })
    }

    /// `security.protocol` as librdkafka has it.
    pub fn protocol(&self) -> &str {
        self.rdkafka
            .iter()
            .find(|(k, _)| k == "security.protocol")
            .map_or("plaintext", |(_, v)| v)
    }

    /// The librdkafka properties, to add to a client's.
    pub fn rdkafka(&self) -> Vec<(&str, &str)> {
        self.rdkafka
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// `extra` followed by the security properties.
    pub fn with<'a>(&'a self, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        extra.iter().copied().chain(self.rdkafka()).collect()
    }

    /// Sets the security properties on `cfg`.
    pub fn apply(&self, cfg: &mut ClientConfig) {
        for (k, v) in &self.rdkafka {
            cfg.set(k, v);
        }
    }

    /// A wire connection to `addr`, through TLS and SASL as the properties say; `timeout`
    /// bounds the connect and each read and write.
    pub fn connect(&self, addr: &str, timeout: Duration) -> Result<WireClient, String> {
        let mut c = match &self.tls {
            Some(config) => WireClient::try_connect_tls(addr, timeout, config.clone()),
            None => WireClient::try_connect(addr, timeout),
        }
        .map_err(|e| format!("connect {addr}: {e}"))?;
        if let Some((login, user, password)) = &self.sasl {
            let answer = match login {
                Login::Scram(s) => s.try_login(&mut c, user, password)?,
                Login::Plain => {
                    plain_login(&mut c, user, password).map_err(|e| format!("{addr}: {e}"))?
                }
            };
            if answer.error_code != 0 {
                return Err(format!(
                    "{addr}: SASL login as {user} refused: {} {:?}",
                    answer.error_code, answer.error_message
                ));
            }
        }
        Ok(c)
    }
}

/// PLAIN: handshake v1 and the one round, without panicking on a closed connection.
fn plain_login(
    c: &mut WireClient,
    user: &str,
    password: &str,
) -> Result<kafka_protocol::messages::SaslAuthenticateResponse, String> {
    use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
    use kafka_protocol::protocol::StrBytes;
    let h = c.try_request(
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
    )?;
    if h.error_code != 0 {
        return Err(format!("handshake: {h:?}"));
    }
    let token = sasl::plain_token(user, password);
    c.try_request(
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(token.into()),
    )
}

/// The TLS context of `ssl.ca.location` (and the client certificate, when given), as
/// librdkafka builds it from the same keys.
fn tls_config(props: &BTreeMap<&str, &str>) -> Result<Arc<rustls::ClientConfig>, String> {
    let ca = props
        .get("ssl.ca.location")
        .ok_or("TLS without ssl.ca.location (the CA that signed the brokers' certificates)")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| format!("{ca}: {e}"))? {
        roots
            .add(cert.map_err(|e| format!("{ca}: {e}"))?)
            .map_err(|e| format!("{ca}: {e}"))?;
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let config = match (
        props.get("ssl.certificate.location"),
        props.get("ssl.key.location"),
    ) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("{cert}: {e}"))?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("client certificate: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// `sasl.mechanisms` (one of them), `sasl.username` and `sasl.password`.
fn sasl_login(props: &BTreeMap<&str, &str>) -> Result<(Login, String, String), String> {
    let mechanism = props.get("sasl.mechanisms").copied().unwrap_or("GSSAPI");
    let login = match mechanism.to_ascii_uppercase().as_str() {
        "PLAIN" => Login::Plain,
        "SCRAM-SHA-256" => Login::Scram(Scram { sha512: false }),
        "SCRAM-SHA-512" => Login::Scram(Scram { sha512: true }),
        other => {
            return Err(format!(
                "sasl.mechanisms={other}: the checker logs in with PLAIN or SCRAM only"
            ))
        }
    };
    let get = |k: &str| {
        props
            .get(k)
            .map(|v| v.to_string())
            .ok_or_else(|| format!("SASL without {k}"))
    };
    Ok((login, get("sasl.username")?, get("sasl.password")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_and_sasl_settings_from_a_properties_text() {
        let p = ClientSecurity::from_librdkafka_properties("bootstrap.servers=x:1\n").unwrap();
        assert_eq!((p.protocol(), p.rdkafka().len()), ("plaintext", 0));
        let text = "# librdkafka\nbootstrap.servers=a:1,b:2\nsecurity.protocol=sasl_plaintext\n\
                    sasl.mechanisms=SCRAM-SHA-512\nsasl.username=admin\nsasl.password=s=cret\n";
        let s = ClientSecurity::from_librdkafka_properties(text).unwrap();
        assert_eq!(s.protocol(), "sasl_plaintext");
        assert!(s.tls.is_none());
        assert_eq!(
            s.rdkafka(),
            vec![
                ("security.protocol", "sasl_plaintext"),
                ("sasl.mechanisms", "SCRAM-SHA-512"),
                ("sasl.username", "admin"),
                ("sasl.password", "s=cret"),
            ]
        );
        let err = |t: &str| ClientSecurity::from_librdkafka_properties(t).unwrap_err();
        assert!(err("security.protocol=ssl\n").contains("ssl.ca.location"));
        assert!(
            err("security.protocol=sasl_plaintext\nsasl.mechanisms=GSSAPI\n")
                .contains("PLAIN or SCRAM")
        );
        assert!(
            err("security.protocol=sasl_plaintext\nsasl.mechanisms=PLAIN\n")
                .contains("sasl.username")
        );
    }
}
