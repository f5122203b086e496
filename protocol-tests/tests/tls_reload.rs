//! A listener's key store replaced at run time (`broker/src/security/ssl/reload.rs`, Kafka's
//! `DynamicListenerConfig` and `SslFactory.reconfigure`): IncrementalAlterConfigs of
//! `listener.name.ssl.ssl.keystore.location` on the broker makes new TLS connections get the
//! new certificate while an open one keeps working; a store whose certificate names another
//! subject is refused with INVALID_CONFIG and changes nothing, and so is the key at the
//! cluster-default level; a restarted node serves the altered store again. The stores come
//! from two runs of `brook certs`.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::process::write_test_pki;
use brook_protocol_tests::{Broker, WireClient};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::IncrementalAlterConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

const BROKER: i8 = 4;
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const KEY: &str = "listener.name.ssl.ssl.keystore.location";

fn certs(dir: &Path) {
    write_test_pki(dir, "pw");
}

fn p(dir: &Path, file: &str) -> String {
    dir.join(file).display().to_string()
}

/// The leaf certificate of a PEM chain file.
fn leaf(path: &str) -> Vec<u8> {
    CertificateDer::pem_file_iter(path)
        .expect("PEM file")
        .next()
        .expect("a certificate")
        .expect("a readable certificate")
        .to_vec()
}

/// A TLS client trusting the CA in `dir`.
fn client(dir: &Path) -> Arc<rustls::ClientConfig> {
    let values: BTreeMap<String, String> = [
        ("ssl.truststore.type", "PEM".to_string()),
        ("ssl.truststore.location", p(dir, "ca.pem")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    brook::security::ssl::client_tls(&values, "client").expect("client keys")
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS connection to `addr` after its handshake: the stream and the certificate served.
fn connect(addr: &str, config: Arc<rustls::ClientConfig>) -> Result<(Tls, Vec<u8>), String> {
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| e.to_string())?;
    }
    let served = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .ok_or("no certificate")?;
    Ok((tls, served))
}

/// ApiVersions v0 on an open connection: its error code.
fn api_versions(tls: &mut Tls) -> i16 {
    // size, api key 18, version 0, correlation id 7, null client id.
    let request = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff];
    tls.write_all(&request).unwrap();
    let mut size = [0u8; 4];
    tls.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    tls.read_exact(&mut body).unwrap();
    i16::from_be_bytes([body[4], body[5]])
}

fn alter(c: &mut WireClient, name: &str, key: &str, value: &str) -> (i16, Option<String>) {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_string(key.to_string()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value.to_string())))]),
    ]);
    let r = c.request(1, &req).responses.remove(0);
    (r.error_code, r.error_message.map(|m| m.to_string()))
}

#[test]
fn a_listener_key_store_is_replaced_at_run_time_for_new_connections() {
    let (old_pki, new_pki) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (old, new) = (old_pki.path(), new_pki.path());
    certs(old);
    certs(new);
    // Fixed ports (two distinct free ones): a restarted node must come back on the same ones.
    let held: Vec<std::net::TcpListener> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let port = |i: usize| held[i].local_addr().unwrap().port();
    let listeners = format!(
        "PLAINTEXT://127.0.0.1:{},SSL://127.0.0.1:{}",
        port(0),
        port(1)
    );
    drop(held);
    let mut broker = Broker::start_with(&[
        ("listeners", listeners.as_str()),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,SSL:SSL",
        ),
        ("listener.name.ssl.ssl.keystore.type", "PEM"),
        (KEY, &p(old, "broker.keystore.pem")),
    ]);
    let ssl = broker.listener_address("SSL");
    let mut c = WireClient::connect(&broker.bootstrap());
    let (mut open, served) = connect(&ssl, client(old)).expect("TLS with the first store");
    assert_eq!(served, leaf(&p(old, "broker.cert.pem")));

    // At the cluster default: per broker only, as in Kafka.
    let (code, msg) = alter(&mut c, "", KEY, &p(new, "broker.keystore.pem"));
    assert_eq!(code, ResponseError::InvalidConfig.code(), "{msg:?}");
    // Another subject (CN=wrong, SAN wrong.example): refused, nothing changes.
    let (code, msg) = alter(&mut c, "1", KEY, &p(new, "wrong-host.keystore.pem"));
    assert_eq!(code, ResponseError::InvalidConfig.code(), "{msg:?}");
    assert!(
        msg.as_deref()
            .is_some_and(|m| m.contains("DistinguishedName does not match")),
        "{msg:?}"
    );
    let (_, served) = connect(&ssl, client(old)).expect("still the first store");
    assert_eq!(served, leaf(&p(old, "broker.cert.pem")));

    // The same subject and names from another CA: new connections get it.
    let (code, msg) = alter(&mut c, "1", KEY, &p(new, "broker.keystore.pem"));
    assert_eq!(code, NONE, "{msg:?}");
    let (mut fresh, served) = connect(&ssl, client(new)).expect("TLS with the new store");
    assert_eq!(served, leaf(&p(new, "broker.cert.pem")));
    assert_eq!(api_versions(&mut fresh), NONE);
    assert!(
        connect(&ssl, client(old)).is_err(),
        "a client trusting only the old CA still connected"
    );
    // The connection opened before the change is still served.
    assert_eq!(api_versions(&mut open), NONE);

    // The altered store is kept in the metadata log: a restarted node serves it again.
    drop((open, fresh, c));
    broker.restart();
    let ssl = broker.listener_address("SSL");
    let (_, served) = connect(&ssl, client(new)).expect("TLS after a restart");
    assert_eq!(served, leaf(&p(new, "broker.cert.pem")));
}
