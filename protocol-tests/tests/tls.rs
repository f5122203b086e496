//! SSL listeners as Kafka 4.4 serves them (Kafka's `SslTransportLayer`, `SslFactory`): the TLS
//! handshake with the listener's key store, `ssl.client.auth=required` with
//! `listener.name.<l>.`-prefixed keys, a clean close for plaintext clients and garbage, and a
//! cluster whose inter-broker listener is SSL replicating acks=all writes. The certificates
//! come from `brook certs`; the client contexts from the broker's own `ssl.*` key handling.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use brook::security::ssl::client_tls;
use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::process::write_test_pki;
use brook_protocol_tests::{Broker, Cluster, WireClient};

const PASSWORD: &str = "brook-secret";
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Writes the test PKI into `dir` with `brook certs`.
fn certs(dir: &Path) {
    write_test_pki(dir, PASSWORD);
}

fn p(dir: &Path, file: &str) -> String {
    dir.join(file).display().to_string()
}

/// A TLS client context from Kafka client keys.
fn client(pairs: &[(&str, String)]) -> Arc<rustls::ClientConfig> {
    let values: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    client_tls(&values, "client").expect("client keys")
}

/// ApiVersions v0 over TLS to `addr`: Ok(error code) once answered, Err when the handshake
/// or the exchange fails.
fn api_versions_over_tls(addr: &str, config: Arc<rustls::ClientConfig>) -> Result<i16, String> {
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    tcp.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    // size, api key 18, version 0, correlation id 7, null client id.
    let request = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff];
    tls.write_all(&request).map_err(|e| e.to_string())?;
    let mut size = [0u8; 4];
    tls.read_exact(&mut size).map_err(|e| e.to_string())?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    tls.read_exact(&mut body).map_err(|e| e.to_string())?;
    assert_eq!(&body[..4], &[0, 0, 0, 7], "correlation id");
    Ok(i16::from_be_bytes([body[4], body[5]]))
}

/// Sends `bytes` to `addr` and expects the connection closed within [`IO_TIMEOUT`], with
/// nothing received but TLS alert records (content type 21).
fn closed_after_at_most_an_alert(addr: &str, bytes: &[u8]) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(bytes).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut received = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("{bytes:02x?}: not closed ({e}); received {received:02x?}"),
        }
    }
    let mut rest = received.as_slice();
    while rest.len() >= 5 {
        assert_eq!(rest[0], 21, "{bytes:02x?}: answered {received:02x?}");
        let len = u16::from_be_bytes([rest[3], rest[4]]) as usize;
        rest = &rest[(5 + len).min(rest.len())..];
    }
    assert!(rest.is_empty(), "{bytes:02x?}: answered {received:02x?}");
}

fn trust_pem(dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("ssl.truststore.type", "PEM".into()),
        ("ssl.truststore.location", p(dir, "ca.pem")),
    ]
}

/// One broker with a PLAINTEXT listener, an SSL listener (PKCS12 key store, no client auth)
/// and an MTLS listener (SSL with an encrypted PEM key and `ssl.client.auth=required`), each
/// set with its `listener.name.<l>.` keys over the unprefixed ones. Every case shares it.
#[test]
fn ssl_listeners_handshake_verify_clients_and_close_on_plaintext_or_garbage() {
    let pki = tempfile::tempdir().unwrap();
    let dir = pki.path();
    certs(dir);
    let broker = Broker::start_with(&[
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        ),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        ),
        ("listener.name.ssl.ssl.keystore.type", "PKCS12"),
        (
            "listener.name.ssl.ssl.keystore.location",
            &p(dir, "broker.keystore.p12"),
        ),
        ("listener.name.ssl.ssl.keystore.password", PASSWORD),
        ("ssl.keystore.type", "PEM"),
        (
            "listener.name.mtls.ssl.keystore.location",
            &p(dir, "broker.keystore.encrypted.pem"),
        ),
        ("listener.name.mtls.ssl.key.password", PASSWORD),
        ("listener.name.mtls.ssl.truststore.type", "PKCS12"),
        (
            "listener.name.mtls.ssl.truststore.location",
            &p(dir, "truststore.p12"),
        ),
        ("listener.name.mtls.ssl.truststore.password", PASSWORD),
        ("listener.name.mtls.ssl.client.auth", "required"),
        (
            "ssl.principal.mapping.rules",
            "RULE:^CN=([^,]*),.*$/$1/L,DEFAULT",
        ),
    ]);
    let (ssl, mtls) = (
        broker.listener_address("SSL"),
        broker.listener_address("MTLS"),
    );
    let anonymous = client(&trust_pem(dir));
    assert_eq!(api_versions_over_tls(&ssl, anonymous.clone()), Ok(NONE));

    // ssl.client.auth=required: no certificate, no connection.
    let refused = api_versions_over_tls(&mtls, anonymous.clone());
    assert!(
        refused.is_err(),
        "a client without a certificate was served: {refused:?}"
    );
    let mut with_cert = trust_pem(dir);
    with_cert.extend([
        ("ssl.keystore.type", "PKCS12".to_string()),
        ("ssl.keystore.location", p(dir, "client.keystore.p12")),
        ("ssl.keystore.password", PASSWORD.to_string()),
    ]);
    assert_eq!(api_versions_over_tls(&mtls, client(&with_cert)), Ok(NONE));

    // A plaintext Kafka request and TLS garbage on the SSL port: closed, promptly.
    // At most a TLS alert is sent back, never a Kafka answer.
    closed_after_at_most_an_alert(&ssl, &[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff]);
    closed_after_at_most_an_alert(
        &ssl,
        &[0x16, 0x03, 0x01, 0x00, 0x05, 0xde, 0xad, 0xbe, 0xef, 0x00],
    );
    closed_after_at_most_an_alert(&ssl, &[0xde; 64]);
    // A TLS record header announcing more than it sends, then silence: the connection
    // waits for it, but the broker keeps serving everyone else.
    let mut truncated = TcpStream::connect(&ssl).unwrap();
    truncated
        .write_all(&[0x16, 0x03, 0x01, 0x40, 0x00, 1, 2, 3])
        .unwrap();

    // The broker is alive and serves TLS and plaintext alike.
    assert_eq!(api_versions_over_tls(&ssl, anonymous), Ok(NONE));
    WireClient::connect(&broker.bootstrap()).api_versions();
    drop(truncated);
}

/// A 3-node cluster whose inter-broker listener is SSL (host names verified, the node
/// certificates name 127.0.0.1): followers fetch over TLS, so acks=all writes commit with
/// every replica in sync.
#[test]
fn a_cluster_replicates_acks_all_writes_over_an_ssl_inter_broker_listener() {
    let pki = tempfile::tempdir().unwrap();
    let dir = pki.path();
    certs(dir);
    let (keystore, truststore) = (p(dir, "broker.keystore.pem"), p(dir, "truststore.p12"));
    let c = Cluster::start_with_listener(
        3,
        &[
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL",
            ),
            ("inter.broker.listener.name", "SSL"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", &keystore),
            ("ssl.truststore.type", "PKCS12"),
            ("ssl.truststore.location", &truststore),
            ("ssl.truststore.password", PASSWORD),
            ("ssl.client.auth", "required"),
        ],
        "SSL",
    );
    three_acks_all_writes_replicate(&c, "tls-replicated");
}

/// Kills `brook cluster` (and so its nodes' process group) when the test ends.
struct Supervisor(std::process::Child);

impl Drop for Supervisor {
    fn drop(&mut self) {
        // SIGTERM: the supervisor stops its nodes before it exits.
        let _ = std::process::Command::new("kill")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}

/// `brook cluster --secure`: the client listener is SSL with required client certificates,
/// and the kafka-clients settings it prints reach it (the client key store passes, no
/// certificate does not); the controller listener speaks TLS too (a plaintext request there
/// is closed unanswered).
#[test]
fn brook_cluster_secure_serves_tls_with_the_client_settings_it_prints() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let controller_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let mut child = std::process::Command::new(brook_protocol_tests::broker::brook_bin())
        .args(["cluster", "--secure", "--nodes", "1", "--base-port", "0"])
        .args(["--controller-base-port", &controller_port.to_string()])
        .args(["--supervisor-listener", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("spawn brook cluster --secure");
    let stdout = child.stdout.take().unwrap();
    let sup = Supervisor(child);
    let mut lines = std::io::BufReader::new(stdout).lines();
    // Bounded: the supervisor prints its lines and exits on a failed start.
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with("CLUSTER READY"))
        .expect("CLUSTER READY");
    let bootstrap = ready
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("bootstrap="))
        .unwrap()
        .to_string();
    let props = std::fs::read_to_string(dir.path().join("tls/client.properties")).unwrap();
    let settings: Vec<(&str, String)> = props
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.starts_with("ssl."))
        .map(|(k, v)| (k, v.to_string()))
        .collect();
    assert!(props.contains("security.protocol=SSL"), "{props}");
    assert_eq!(
        api_versions_over_tls(&bootstrap, client(&settings)),
        Ok(NONE)
    );
    let trust_only: Vec<(&str, String)> = settings
        .iter()
        .filter(|(k, _)| k.starts_with("ssl.truststore"))
        .cloned()
        .collect();
    assert!(api_versions_over_tls(&bootstrap, client(&trust_only)).is_err());
    let plaintext = b"POST /raft/vote HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
    closed_after_at_most_an_alert(&format!("127.0.0.1:{controller_port}"), plaintext);
    drop(sup);
}

/// SASL_SSL: the SASL exchange over the TLS stream. A 3-node cluster whose inter-broker
/// listener is SASL_SSL (PLAIN, the nodes' own credentials from the listener's JAAS config,
/// host names verified) replicates acks=all writes: replica fetchers and the leader's
/// connections complete the TLS handshake, then authenticate, on every link.
#[test]
fn a_cluster_replicates_over_a_sasl_ssl_inter_broker_listener() {
    let pki = tempfile::tempdir().unwrap();
    let dir = pki.path();
    certs(dir);
    let (keystore, truststore) = (p(dir, "broker.keystore.pem"), p(dir, "truststore.p12"));
    let c = Cluster::start_with_listener(
        3,
        &[
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SECURE:SASL_SSL",
            ),
            ("inter.broker.listener.name", "SECURE"),
            ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
            ("listener.name.secure.sasl.enabled.mechanisms", "PLAIN"),
            (
                "listener.name.secure.plain.sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";"#,
            ),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", &keystore),
            ("ssl.truststore.type", "PKCS12"),
            ("ssl.truststore.location", &truststore),
            ("ssl.truststore.password", PASSWORD),
        ],
        "SECURE",
    );
    three_acks_all_writes_replicate(&c, "sasl-ssl-replicated");
}

/// Three acks=all writes with `min.insync.replicas=3` on a new topic commit, and every replica
/// stays in the ISR: each follower fetched them over the inter-broker listener.
fn three_acks_all_writes_replicate(c: &Cluster, topic: &str) {
    c.create_topic(topic, 1, 3, &[("min.insync.replicas", "3")]);
    let state = c.await_partition(topic, 0, "a leader", Duration::from_secs(30), |s| {
        s.leader >= 0
    });
    let mut w = WireClient::connect(&c.address(state.leader));
    for i in 0..3i64 {
        let recs = [Rec::kv("k", &format!("v{i}"), 10 + i)];
        let r = w.produce(topic, 0, encode_batch(Producer::NONE, &recs));
        assert_eq!(
            (r.error_code, r.base_offset),
            (NONE, i),
            "acks=all write {i} to {topic}: {r:?}"
        );
    }
    c.await_isr(topic, 0, &[1, 2, 3], Duration::from_secs(30));
}
