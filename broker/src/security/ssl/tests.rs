//! Keystores, truststores and handshakes built from Kafka's keys, in-process.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::certs::{write_bundle, Ca};
use super::*;
use crate::net::stream::{connect, BrokerStream};

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

struct Fixture {
    _dir: tempfile::TempDir,
    ca: Ca,
    server: super::certs::StorePaths,
    client: super::certs::StorePaths,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("test-ca").unwrap();
    let server = ca.issue("broker", &["localhost", "127.0.0.1"]).unwrap();
    let client = ca.issue("alice", &[]).unwrap();
    let server = write_bundle(dir.path(), "server", &ca, &server, "pw").unwrap();
    let client = write_bundle(dir.path(), "client", &ca, &client, "pw").unwrap();
    Fixture {
        _dir: dir,
        ca,
        server,
        client,
    }
}

fn s(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// One handshake plus a byte echoed; returns the principal the server named and the
/// client's result.
async fn handshake(
    server: ServerTls,
    client: Arc<rustls::ClientConfig>,
    host: &str,
) -> (Option<String>, std::io::Result<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = tokio_rustls::TlsAcceptor::from(server.config.clone())
            .accept(tcp)
            .await
            .ok()?;
        let leaf = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.to_vec());
        let principal = server.mapper.principal(leaf.as_deref()).ok()?;
        let mut b = [0u8; 1];
        tls.read_exact(&mut b).await.ok()?;
        tls.write_all(&b).await.ok()?;
        Some(principal.to_string())
    });
    let outcome = async {
        let mut stream = connect(&format!("{host}:{port}"), Some(&client)).await?;
        assert!(matches!(stream, BrokerStream::ClientTls(_)));
        stream.write_all(b"x").await?;
        let mut b = [0u8; 1];
        stream.read_exact(&mut b).await?;
        Ok(())
    }
    .await;
    let named = tokio::time::timeout(std::time::Duration::from_secs(10), accept).await;
    (named.expect("the server side finished").unwrap(), outcome)
}

#[tokio::test]
async fn pem_and_pkcs12_stores_serve_mutual_tls_with_mapped_principals() {
    let f = fixture();
    let server = props(&[
        ("ssl.keystore.type", "PKCS12"),
        ("ssl.keystore.location", &s(&f.server.keystore_p12)),
        ("ssl.keystore.password", "pw"),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", &s(&f.server.truststore_pem)),
        ("listener.name.ssl.ssl.client.auth", "required"),
        ("ssl.principal.mapping.rules", "RULE:^CN=([^,]*),.*$/$1/U"),
    ]);
    let client = props(&[
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", &s(&f.client.keystore_pem)),
        ("ssl.truststore.type", "PKCS12"),
        ("ssl.truststore.location", &s(&f.client.truststore_p12)),
        ("ssl.truststore.password", "pw"),
    ]);
    let tls = server_tls(&server, "SSL", SecurityProtocol::Ssl).unwrap();
    assert_eq!(tls.client_auth, SslClientAuth::Required);
    let (principal, ok) = handshake(
        tls.clone(),
        client_tls(&client, "SSL").unwrap(),
        "127.0.0.1",
    )
    .await;
    ok.unwrap();
    assert_eq!(principal.as_deref(), Some("User:ALICE"));
    // Without a client certificate, a required client auth fails the handshake.
    let anonymous = props(&[
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", &s(&f.client.truststore_pem)),
    ]);
    let (principal, _) = handshake(tls, client_tls(&anonymous, "SSL").unwrap(), "127.0.0.1").await;
    assert_eq!(principal, None);
}

#[tokio::test]
async fn endpoint_identification_checks_the_peer_name_unless_empty() {
    let ca = Ca::new("ca").unwrap();
    // The certificate names another host than the 127.0.0.1 connected to.
    let elsewhere = ca.issue("broker", &["broker.example"]).unwrap();
    let chain = format!("{}{}", elsewhere.cert_pem, ca.cert_pem());
    let server = props(&[
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.key", &elsewhere.key_pem),
        ("ssl.keystore.certificate.chain", &chain),
    ]);
    let tls = server_tls(&server, "SSL", SecurityProtocol::Ssl).unwrap();
    let trust = ca.cert_pem();
    let mut client = props(&[
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.certificates", &trust),
    ]);
    let (_, wrong) = handshake(
        tls.clone(),
        client_tls(&client, "SSL").unwrap(),
        "127.0.0.1",
    )
    .await;
    assert!(wrong.is_err());
    client.insert(
        "ssl.endpoint.identification.algorithm".into(),
        String::new(),
    );
    let (principal, ok) = handshake(tls, client_tls(&client, "SSL").unwrap(), "127.0.0.1").await;
    ok.unwrap();
    assert_eq!(principal.as_deref(), Some("User:ANONYMOUS"));
}

#[test]
fn inline_and_encrypted_pem_keys_load() {
    let ca = Ca::new("ca").unwrap();
    let issued = ca.issue("broker", &["localhost"]).unwrap();
    let chain = format!("{}{}", issued.cert_pem, ca.cert_pem());
    let encrypted = issued.encrypted_key_pem("keypw").unwrap();
    let ok = props(&[
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.key", &encrypted),
        ("ssl.keystore.certificate.chain", &chain),
        ("ssl.key.password", "keypw"),
    ]);
    server_tls(&ok, "SSL", SecurityProtocol::Ssl).unwrap();
    let mut wrong = ok.clone();
    wrong.insert("ssl.key.password".into(), "nope".into());
    assert_eq!(
        server_tls(&wrong, "SSL", SecurityProtocol::Ssl)
            .unwrap_err()
            .key,
        "ssl.key.password"
    );
    let mut missing = ok.clone();
    missing.remove("ssl.key.password");
    assert_eq!(
        server_tls(&missing, "SSL", SecurityProtocol::Ssl)
            .unwrap_err()
            .key,
        "ssl.key.password"
    );
    let plain = props(&[
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.key", &issued.key_pem),
        ("ssl.keystore.certificate.chain", &chain),
    ]);
    server_tls(&plain, "SSL", SecurityProtocol::Ssl).unwrap();
}

#[test]
fn bad_material_names_the_key_and_its_listener_prefix() {
    let f = fixture();
    let p12 = s(&f.server.keystore_p12);
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (vec![], "ssl.keystore.location"),
        (
            vec![
                ("ssl.keystore.type", "PKCS12"),
                ("ssl.keystore.location", &p12),
            ],
            "ssl.keystore.password",
        ),
        (
            vec![
                ("ssl.keystore.type", "PKCS12"),
                ("ssl.keystore.location", &p12),
                ("ssl.keystore.password", "bad"),
            ],
            "ssl.keystore.location",
        ),
        (
            vec![
                ("listener.name.ssl.ssl.keystore.location", "/nonexistent"),
                ("ssl.keystore.type", "PEM"),
            ],
            "listener.name.ssl.ssl.keystore.location",
        ),
        (
            vec![
                ("ssl.keystore.type", "PKCS12"),
                ("ssl.keystore.location", &p12),
                ("ssl.keystore.password", "pw"),
                ("ssl.enabled.protocols", "TLSv1.1"),
            ],
            "ssl.enabled.protocols",
        ),
        (
            vec![
                ("ssl.keystore.type", "PKCS12"),
                ("ssl.keystore.location", &p12),
                ("ssl.keystore.password", "pw"),
                ("ssl.client.auth", "required"),
            ],
            "ssl.truststore.location",
        ),
        (
            vec![
                ("ssl.keystore.type", "PKCS12"),
                ("ssl.keystore.location", &p12),
                ("ssl.keystore.password", "pw"),
                ("ssl.principal.mapping.rules", "DEFAULT/L"),
            ],
            "ssl.principal.mapping.rules",
        ),
    ];
    for (pairs, key) in cases {
        let err = server_tls(&props(&pairs), "SSL", SecurityProtocol::Ssl).unwrap_err();
        assert_eq!(err.key, key, "{pairs:?}: {err}");
    }
    let _ = &f.ca;
}

/// Kafka's `ChannelBuilders.create`: the unprefixed `ssl.client.auth` is for SSL listeners; a
/// SASL_SSL listener asks for client certificates only through its own prefixed key, so a
/// SASL client without a certificate completes the handshake (librdkafka's 0097-ssl_verify
/// with an untrusted client key on SASL_SSL, scripts/librdkafka-suite).
#[tokio::test]
async fn sasl_ssl_ignores_the_unprefixed_ssl_client_auth() {
    let f = fixture();
    let (keystore, truststore) = (s(&f.server.keystore_p12), s(&f.server.truststore_p12));
    let mut server = props(&[
        ("ssl.keystore.type", "PKCS12"),
        ("ssl.keystore.location", &keystore),
        ("ssl.keystore.password", "pw"),
        ("ssl.truststore.type", "PKCS12"),
        ("ssl.truststore.location", &truststore),
        ("ssl.truststore.password", "pw"),
        ("ssl.client.auth", "required"),
    ]);
    let ssl = server_tls(&server, "SSL", SecurityProtocol::Ssl).unwrap();
    assert_eq!(ssl.client_auth, SslClientAuth::Required);
    let sasl_ssl = server_tls(&server, "SASL_SSL", SecurityProtocol::SaslSsl).unwrap();
    assert_eq!(sasl_ssl.client_auth, SslClientAuth::None);
    let anonymous = props(&[
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", &s(&f.client.truststore_pem)),
    ]);
    let client = || client_tls(&anonymous, "SASL_SSL").unwrap();
    let (_, ok) = handshake(sasl_ssl, client(), "127.0.0.1").await;
    ok.unwrap();
    // The listener's own key asks for certificates on SASL_SSL too.
    server.insert(
        "listener.name.sasl_ssl.ssl.client.auth".into(),
        "required".into(),
    );
    let prefixed = server_tls(&server, "SASL_SSL", SecurityProtocol::SaslSsl).unwrap();
    assert_eq!(prefixed.client_auth, SslClientAuth::Required);
    let (principal, _) = handshake(prefixed, client(), "127.0.0.1").await;
    assert_eq!(principal, None);
}
