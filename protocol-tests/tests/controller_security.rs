//! A controller listener secured as Kafka 4.4 secures one: `listener.security.protocol.map`
//! maps CONTROLLER to SASL_SSL, `sasl.mechanism.controller.protocol=PLAIN` with the
//! listener's `listener.name.controller.plain.sasl.jaas.config`, TLS from the listener's
//! `ssl.*` keys, and `StandardAuthorizer` requiring CLUSTER_ACTION of controller requests
//! (Kafka's `ControllerApis`). The quorum elects, brokers register and heartbeat, and acks=all
//! writes survive a leader kill only if every call between the nodes passed TLS and SASL.
//! And SCRAM-SHA-512 on that listener, with the controllers' user created by
//! `brook format --add-scram` on every node (Kafka's `kafka-storage format --add-scram`).
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::process::write_test_pki;
use brook_protocol_tests::{poll_until, rd, Cluster, WireClient};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{CreateAclsRequest, DescribeUserScramCredentialsRequest};
use kafka_protocol::protocol::StrBytes;

const PASSWORD: &str = "brook-secret";
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(30);

/// The controllers' own login, a super user, and `intruder`, a user the listener
/// authenticates but who has no CLUSTER_ACTION.
fn jaas(password: &str) -> String {
    format!(
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" password="{password}" user_controller="controller-secret" user_intruder="intruder-secret";"#
    )
}

fn overrides(dir: &Path) -> Vec<(String, String)> {
    let p = |f: &str| dir.join(f).display().to_string();
    [
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL".to_string(),
        ),
        ("sasl.mechanism.controller.protocol", "PLAIN".into()),
        (
            "listener.name.controller.sasl.enabled.mechanisms",
            "PLAIN".into(),
        ),
        (
            "listener.name.controller.plain.sasl.jaas.config",
            jaas("controller-secret"),
        ),
        ("listener.name.controller.ssl.keystore.type", "PEM".into()),
        (
            "listener.name.controller.ssl.keystore.location",
            p("broker.keystore.pem"),
        ),
        (
            "listener.name.controller.ssl.truststore.type",
            "PKCS12".into(),
        ),
        (
            "listener.name.controller.ssl.truststore.location",
            p("truststore.p12"),
        ),
        (
            "listener.name.controller.ssl.truststore.password",
            PASSWORD.into(),
        ),
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer".into(),
        ),
        ("super.users", "User:controller".into()),
        // The harness's own PLAINTEXT clients (User:ANONYMOUS) may do anything.
        ("allow.everyone.if.no.acl.found", "true".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[test]
fn a_cluster_whose_controller_listener_speaks_sasl_ssl() {
    let pki = tempfile::tempdir().unwrap();
    let dir = pki.path();
    write_test_pki(dir, PASSWORD);
    let props = overrides(dir);
    let props: Vec<(&str, &str)> = props.iter().map(|(k, v)| (&**k, &**v)).collect();
    let mut c = Cluster::start(3, &props);

    acks_all_writes_survive_a_leader_kill(&mut c, "ctl-secured");
    let id = c.live_ids()[0];
    let addr = c.controller_address(id);
    a_plaintext_request_is_closed(&addr);
    // An ACL on the cluster: from now on only it (and super users) may act on it.
    let allow_anonymous = AclCreation::default()
        .with_resource_type(4) // CLUSTER
        .with_resource_name(StrBytes::from_static_str("kafka-cluster"))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(StrBytes::from_static_str("User:ANONYMOUS"))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(2) // ALL
        .with_permission_type(3); // ALLOW
    let mut w = WireClient::connect(&c.address(id));
    let r = w.request(
        3,
        &CreateAclsRequest::default().with_creations(vec![allow_anonymous]),
    );
    assert_eq!(r.results[0].error_code, NONE, "{r:?}");
    let answer = poll_until("a refusal of User:intruder", WAIT, || {
        let answer = vote_as_intruder(&addr, dir);
        answer.starts_with("HTTP/1.1 403").then_some(answer)
    });
    assert!(
        answer.contains("principal User:intruder does not have required CLUSTER_ACTION"),
        "{answer}"
    );
    a_wrong_controller_password_fails_with_a_clear_log_line(&mut c);
}

/// SASL_SSL with SCRAM-SHA-512 on the controller listener of three voters: the quorum elects
/// and the brokers register before any SCRAM record is in the metadata log, with the user
/// every node was formatted with; the first leader then records it, and a restarted node
/// rejoins with the recorded credential.
#[test]
fn a_controller_listener_speaking_scram_sha_512() {
    let pki = tempfile::tempdir().unwrap();
    let dir = pki.path();
    write_test_pki(dir, PASSWORD);
    let scram_jaas = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="controller" password="controller-secret";"#;
    let mut props = overrides(dir);
    props.retain(|(k, _)| !k.contains("plain") && !k.contains("mechanism"));
    props.extend([
        (
            "sasl.mechanism.controller.protocol".to_string(),
            "SCRAM-SHA-512".to_string(),
        ),
        (
            "listener.name.controller.sasl.enabled.mechanisms".into(),
            "SCRAM-SHA-512".into(),
        ),
        (
            "listener.name.controller.scram-sha-512.sasl.jaas.config".into(),
            scram_jaas.into(),
        ),
    ]);
    let props: Vec<(&str, &str)> = props.iter().map(|(k, v)| (&**k, &**v)).collect();
    let format = [
        "--add-scram",
        "SCRAM-SHA-512=[name=controller,password=controller-secret]",
    ];
    let mut c = Cluster::start_formatted(3, &props, &format);

    let id = c.live_ids()[0];
    let recorded = poll_until("the bootstrap user in the metadata", WAIT, || {
        let mut w = WireClient::connect(&c.address(id));
        let req = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
            UserName::default().with_name(StrBytes::from_static_str("controller")),
        ]));
        let d = w.request(0, &req);
        let r = d.results.into_iter().find(|r| r.error_code == NONE)?;
        Some(
            r.credential_infos
                .iter()
                .map(|i| (i.mechanism, i.iterations))
                .collect::<Vec<_>>(),
        )
    });
    assert_eq!(recorded, [(2, 4096)]);
    let last = *c.ids().last().unwrap();
    c.stop(last);
    c.start_node(last);
    c.await_brokers_listed(&c.ids(), WAIT);
    // Every voter counts the other voters' logins on its controller listener. The restarted
    // node counts one when a voter next connects to it, which can come after it is listed.
    for id in c.ids() {
        poll_until(
            &format!("node {id}: a successful authentication counted"),
            WAIT,
            || (controller_authentications(&c, id).0 >= 1).then_some(()),
        );
    }
}

/// `brook_successful_authentication` and `brook_failed_authentication` of node `id`'s
/// controller listener, from its /metrics (Kafka's socket-server-metrics
/// `successful-authentication-total` / `failed-authentication-total`, listener CONTROLLER).
fn controller_authentications(c: &Cluster, id: i32) -> (u64, u64) {
    let mut s = TcpStream::connect(c.admin_address(id)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    let value = |name: &str| {
        let prefix = format!("{name}_total{{listener=\"CONTROLLER\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        value("brook_successful_authentication"),
        value("brook_failed_authentication"),
    )
}

/// acks=all writes (min.insync.replicas=2) commit before and after the partition leader is
/// SIGKILLed, and a consumer reads them all: the new leader was elected over the secured
/// listener and the survivors' heartbeats kept them registered.
fn acks_all_writes_survive_a_leader_kill(c: &mut Cluster, topic: &str) {
    c.create_topic(topic, 1, 3, &[]);
    let state = c.await_partition(topic, 0, "a full ISR", WAIT, |s| s.isr.len() == 3);
    let produce = |c: &Cluster, leader: i32, value: &str, offset: i64| {
        let mut w = WireClient::connect(&c.address(leader));
        let recs = [Rec::kv("k", value, 10 + offset)];
        let r = w.produce(topic, 0, encode_batch(Producer::NONE, &recs));
        assert_eq!(
            (r.error_code, r.base_offset),
            (NONE, offset),
            "{value}: {r:?}"
        );
    };
    produce(c, state.leader, "before", 0);
    c.kill(state.leader);
    let after = c.await_leader_other_than(topic, 0, state.leader, WAIT);
    poll_until("an acks=all write on the new leader", WAIT, || {
        let mut w = WireClient::connect(&c.address(after.leader));
        let recs = [Rec::kv("k", "after", 11)];
        let r = w.produce(topic, 0, encode_batch(Producer::NONE, &recs));
        (r.error_code == NONE).then_some(r.base_offset)
    });
    let got = rd::read_to_end(&c.bootstrap(), topic, &[0], WAIT)
        .remove(&0)
        .unwrap();
    let values: Vec<String> = got
        .iter()
        .map(|g| String::from_utf8_lossy(g.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    assert_eq!(values, ["before", "after"], "consumed");
    c.start_node(state.leader);
}

/// An HTTP request without TLS gets no HTTP answer: the connection is closed (at most
/// after a TLS alert).
fn a_plaintext_request_is_closed(addr: &str) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(b"POST /raft/vote HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        .unwrap();
    let mut received = Vec::new();
    match s.read_to_end(&mut received) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the plaintext connection to {addr} was not closed: {e}"),
    }
    assert!(
        !String::from_utf8_lossy(&received).contains("HTTP/"),
        "a plaintext request was answered: {received:?}"
    );
}

/// TLS, then SASL PLAIN as `intruder` (Kafka framing: SaslHandshake v1, SaslAuthenticate
/// v0), then a Raft vote: the HTTP answer.
fn vote_as_intruder(addr: &str, dir: &Path) -> String {
    let values: BTreeMap<String, String> = [
        ("ssl.truststore.type", "PKCS12".to_string()),
        (
            "ssl.truststore.location",
            dir.join("truststore.p12").display().to_string(),
        ),
        ("ssl.truststore.password", PASSWORD.into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let config = brook::security::ssl::client_tls(&values, "client").expect("client keys");
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut handshake = vec![0, 17, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0, 5];
    handshake.extend_from_slice(b"PLAIN");
    assert_eq!(error_code(&mut tls, &handshake), 0, "SaslHandshake");
    let token = b"\0intruder\0intruder-secret";
    let mut authenticate = vec![0, 36, 0, 0, 0, 0, 0, 2, 0xff, 0xff];
    authenticate.extend_from_slice(&(token.len() as i32).to_be_bytes());
    authenticate.extend_from_slice(token);
    assert_eq!(error_code(&mut tls, &authenticate), 0, "SaslAuthenticate");
    tls.write_all(b"POST /raft/vote HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        .unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// Writes one size-prefixed request and returns the error code of its answer (the first
/// field after the correlation id, in both SASL responses).
fn error_code(s: &mut impl ReadWrite, body: &[u8]) -> i16 {
    s.write_all(&(body.len() as i32).to_be_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut answer).unwrap();
    i16::from_be_bytes([answer[4], answer[5]])
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// A node restarted with the wrong controller password cannot register: it logs why, at
/// error level, within seconds (no silent hang), and the others keep it out.
fn a_wrong_controller_password_fails_with_a_clear_log_line(c: &mut Cluster) {
    let id = *c.ids().last().unwrap();
    c.stop(id);
    c.set_node_override(
        id,
        "listener.name.controller.plain.sasl.jaas.config",
        &jaas("wrong-secret"),
    );
    c.spawn_node(id);
    let line = poll_until("the authentication failure in the node's log", WAIT, || {
        c.log_lines(id, "authentication to the controller listener at")
            .into_iter()
            .find(|l| l.contains("ERROR"))
    });
    assert!(
        line.contains("Authentication failed: Invalid username or password"),
        "{line}"
    );
    let others: Vec<i32> = c.ids().into_iter().filter(|o| *o != id).collect();
    poll_until("the other nodes' refusal", WAIT, || {
        others
            .iter()
            .flat_map(|o| c.log_lines(*o, "closing controller connection: authentication failed"))
            .any(|l| l.contains("Invalid username or password"))
            .then_some(())
    });
    // ... counted on their controller listener's /metrics.
    let failed: u64 = others
        .iter()
        .map(|o| controller_authentications(c, *o).1)
        .sum();
    assert!(failed >= 1, "no failed authentication counted");
}
