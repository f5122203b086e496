//! SASL_PLAINTEXT over the raw wire, as Kafka 4.4's `SaslServerAuthenticator` answers it:
//! only ApiVersions and the handshake before authentication, Kafka's errors and messages for
//! wrong passwords, unknown mechanisms and malformed tokens, PLAIN and SCRAM-SHA-256/512 with
//! credentials made by AlterUserScramCredentials or `brook format --add-scram`, OAUTHBEARER
//! with unsecured tokens (the error challenge, the token's expiry as the session's end), the
//! session lifetime of KIP-368, and the authentication counters on /metrics.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::process::run_brook;
use brook_protocol_tests::sasl::{
    authenticate, handshake, oauthbearer_first_message, plain_login, plain_token, unsecured_jws,
    Scram, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
};
use brook_protocol_tests::{poll_until_ok, Broker, Cluster, WireClient};
use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiKey, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;

/// Kafka closes a failed authentication after `connection.failed.authentication.delay.ms`
/// (100 ms by default); well within this.
const CLOSED_WITHIN: Duration = Duration::from_secs(5);

/// The SASL_PLAINTEXT listener's settings, as a Kafka server.properties carries them.
pub fn sasl_overrides() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        ),
        (
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        ),
        (
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#,
        ),
        (
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        ),
        (
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        ),
    ]
}

fn sasl_client(b: &Broker) -> WireClient {
    WireClient::connect(&b.listener_address("SASL_PLAINTEXT"))
}

fn closed(c: &mut WireClient, what: &str) {
    if let Err(e) = c.expect_closed(CLOSED_WITHIN) {
        panic!("{what}: {e}");
    }
}

/// Sends Metadata every 50 ms until the node closes the connection at the end of a session
/// of `lifetime` that began after `before_login`: each answer comes before the session's end,
/// the close after it, and within CLOSED_WITHIN of it (Kafka's `SaslServerAuthenticator`
/// checks the session at each request).
fn closed_when_session_ends(c: &mut WireClient, before_login: Instant, lifetime: Duration) {
    let end = before_login + lifetime;
    loop {
        let sent = Instant::now();
        match c.try_request(12, &WireClient::metadata_request(&[], false)) {
            Ok(_) => assert!(
                sent < end + CLOSED_WITHIN,
                "still open {:?} after the session",
                sent - end
            ),
            Err(_) => {
                assert!(
                    sent >= end,
                    "closed {:?} before the session ended",
                    end - sent
                );
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// AlterUserScramCredentials upserting `user` (on any listener).
fn upsert(b: &Broker, m: Scram, user: &str, password: &str, iterations: i32) -> (i16, String) {
    let mut c = WireClient::connect(&b.listener_address("PLAINTEXT"));
    let salt = b"some-salt".to_vec();
    let salted = m.salted_password(password, &salt, iterations.max(1) as u32);
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.into()))
            .with_mechanism(m.type_id())
            .with_iterations(iterations)
            .with_salt(Bytes::from(salt))
            .with_salted_password(Bytes::from(salted)),
    ]);
    let r = c.request(0, &req);
    let res = &r.results[0];
    (
        res.error_code,
        res.error_message.as_deref().unwrap_or("").to_string(),
    )
}

#[test]
fn only_api_versions_and_the_handshake_come_before_authentication() {
    let b = Broker::start_with(&sasl_overrides());
    // A Metadata first: the connection closes with no answer.
    let mut c = sasl_client(&b);
    let id = c.send(12, &WireClient::metadata_request(&[], false));
    assert!(id > 0);
    closed(&mut c, "Metadata before the handshake");
    // ApiVersions is answered (and advertises the SASL APIs); then Metadata closes.
    let mut c = sasl_client(&b);
    let v = c.api_versions();
    let range = |k: ApiKey| {
        v.api_keys
            .iter()
            .find(|a| a.api_key == k as i16)
            .map(|a| (a.min_version, a.max_version))
    };
    assert_eq!(range(ApiKey::SaslHandshake), Some((0, 1)));
    assert_eq!(range(ApiKey::SaslAuthenticate), Some((0, 2)));
    c.send(12, &WireClient::metadata_request(&[], false));
    closed(&mut c, "Metadata after ApiVersions");
    // After the handshake, a request other than SaslAuthenticate fails the exchange: it is
    // answered with its own error response (Metadata's has nowhere to put the code), then
    // the connection closes.
    let mut c = sasl_client(&b);
    assert_eq!(handshake(&mut c, 1, "PLAIN").error_code, 0);
    let md = c.request(12, &WireClient::metadata_request(&[], false));
    assert!(md.brokers.is_empty() && md.topics.is_empty(), "{md:?}");
    closed(&mut c, "Metadata after the handshake");
}

#[test]
fn plain_authenticates_and_refuses_as_kafka_does() {
    let b = Broker::start_with(&sasl_overrides());
    // A good login: requests are served as User:alice.
    let mut c = sasl_client(&b);
    let r = plain_login(&mut c, "alice", "alice-secret");
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, 0), "{r:?}");
    let md = c.metadata(&[], false);
    assert_eq!(md.brokers.len(), 1);
    // A second handshake once authenticated: ILLEGAL_SASL_STATE, and the connection stays.
    assert_eq!(handshake(&mut c, 1, "PLAIN").error_code, ILLEGAL_SASL_STATE);
    let r = authenticate(&mut c, 2, b"x");
    assert_eq!(r.error_code, ILLEGAL_SASL_STATE);
    assert_eq!(
        r.error_message.as_deref(),
        Some("SaslAuthenticate request received after successful authentication")
    );
    assert_eq!(c.metadata(&[], false).brokers.len(), 1);

    let failures: &[(&[u8], &str)] = &[
        (
            &plain_token("alice", "wrong"),
            "Authentication failed: Invalid username or password",
        ),
        (
            &plain_token("mallory", "x"),
            "Authentication failed: Invalid username or password",
        ),
        (
            b"alice",
            "Invalid SASL/PLAIN response: expected 3 tokens, got 1",
        ),
        (
            b"\0alice\0",
            "Authentication failed: password not specified",
        ),
    ];
    for (token, message) in failures {
        let mut c = sasl_client(&b);
        assert_eq!(handshake(&mut c, 1, "PLAIN").error_code, 0);
        let r = authenticate(&mut c, 2, token);
        assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED, "{token:?}");
        assert_eq!(r.error_message.as_deref(), Some(*message));
        closed(&mut c, "after a failed authentication");
    }
}

#[test]
fn bad_handshakes_and_malformed_frames() {
    let b = Broker::start_with(&sasl_overrides());
    // An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled ones, then closed.
    let mut c = sasl_client(&b);
    let h = handshake(&mut c, 1, "GSSAPI");
    assert_eq!(h.error_code, UNSUPPORTED_SASL_MECHANISM);
    // Kafka lists them in its set's order: compared as a set.
    let mut names: Vec<String> = h.mechanisms.iter().map(|m| m.to_string()).collect();
    names.sort();
    assert_eq!(names, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    closed(&mut c, "after an unknown mechanism");
    // A handshake twice: the second gets ILLEGAL_SASL_STATE, then the connection closes.
    let mut c = sasl_client(&b);
    assert_eq!(handshake(&mut c, 1, "PLAIN").error_code, 0);
    assert_eq!(handshake(&mut c, 1, "PLAIN").error_code, ILLEGAL_SASL_STATE);
    closed(&mut c, "after a second handshake");
    // A truncated SaslAuthenticate body closes the connection, no answer.
    let mut c = sasl_client(&b);
    assert_eq!(handshake(&mut c, 1, "PLAIN").error_code, 0);
    let req = kafka_protocol::messages::SaslAuthenticateRequest::default()
        .with_auth_bytes(Bytes::from_static(b"\0alice\0alice-secret"));
    let (_, full) = c.encode_request(ApiKey::SaslAuthenticate, 2, 2, &req, 2);
    c.write_frame(&full[..full.len() - 8]).unwrap();
    closed(&mut c, "after a truncated SaslAuthenticate");
    // A first frame that is no Kafka request (Kafka's GSSAPI fallback, not enabled).
    let mut c = sasl_client(&b);
    c.write_frame(&[0x60, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09])
        .unwrap();
    closed(&mut c, "after a non-Kafka first frame");
    // A second ApiVersions before the handshake.
    let mut c = sasl_client(&b);
    c.api_versions();
    let id = c.send(3, &kafka_protocol::messages::ApiVersionsRequest::default());
    assert!(id > 0);
    closed(&mut c, "after a second ApiVersions");
}

/// Bound on the wait for a new SCRAM credential to reach the broker's metadata.
const LOGIN_WAIT: Duration = Duration::from_secs(15);

#[test]
fn scram_users_from_alter_user_scram_credentials() {
    let b = Broker::start_with(&sasl_overrides());
    for m in [Scram { sha512: false }, Scram { sha512: true }] {
        assert_eq!(upsert(&b, m, "bob", "bob-secret", 8192), (0, String::new()));
        // AlterUserScramCredentials answers once the controller committed the credential; a
        // broker learns it when it applies that metadata record, so Kafka may refuse a login
        // made at once (its differential run did) and accepts it a moment later.
        let mut c = poll_until_ok(&format!("{m:?} login as bob"), LOGIN_WAIT, || {
            let mut c = sasl_client(&b);
            let r = m.login(&mut c, "bob", "bob-secret");
            (r.error_code == 0).then_some(c).ok_or(format!("{r:?}"))
        });
        assert_eq!(c.metadata(&[], false).brokers.len(), 1);
        // A wrong password: the final proof does not verify.
        let mut c = sasl_client(&b);
        let r = m.login(&mut c, "bob", "wrong");
        assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
        let want = format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
            m.name()
        );
        assert_eq!(r.error_message.as_deref(), Some(want.as_str()));
        closed(&mut c, "after a bad proof");
    }
    // A tampered proof with the right password, and a malformed client-final message.
    let m = Scram { sha512: false };
    for bad in ["tamper", "garbage"] {
        let mut c = sasl_client(&b);
        assert_eq!(handshake(&mut c, 1, m.name()).error_code, 0);
        let bare = "n=bob,r=abc";
        let first = authenticate(&mut c, 2, format!("n,,{bare}").as_bytes());
        assert_eq!(first.error_code, 0);
        let server_first = String::from_utf8(first.auth_bytes.to_vec()).unwrap();
        let fin = match bad {
            "tamper" => m.client_final(bare, &server_first, "bob-secret", 1).0,
            _ => "c=biws,p=notbase64!!".to_string(),
        };
        let r = authenticate(&mut c, 2, fin.as_bytes());
        assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED, "{bad}");
        closed(&mut c, bad);
    }
    // An unknown user fails at the first message.
    let mut c = sasl_client(&b);
    let r = m.login(&mut c, "nobody", "x");
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    // Kafka's validation and Describe answers.
    assert_eq!(
        upsert(&b, m, "few", "x", 4095),
        (93, "Too few iterations".into())
    );
    assert_eq!(
        upsert(&b, m, "many", "x", 16385),
        (93, "Too many iterations".into())
    );
    let mut c = WireClient::connect(&b.listener_address("PLAINTEXT"));
    let req = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
        UserName::default().with_name(StrBytes::from_static_str("bob")),
        UserName::default().with_name(StrBytes::from_static_str("ghost")),
    ]));
    let d = c.request(0, &req);
    let bob = d.results.iter().find(|r| r.user.as_str() == "bob").unwrap();
    let mut infos: Vec<(i8, i32)> = bob
        .credential_infos
        .iter()
        .map(|i| (i.mechanism, i.iterations))
        .collect();
    infos.sort();
    assert_eq!(infos, [(1, 8192), (2, 8192)]);
    let ghost = d
        .results
        .iter()
        .find(|r| r.user.as_str() == "ghost")
        .unwrap();
    assert_eq!(ghost.error_code, 91, "RESOURCE_NOT_FOUND: {ghost:?}");
}

/// `brook format --add-scram` creates a user before the first start; it survives restarts.
/// Session lifetime (KIP-368) and the /metrics counters ride on the same broker.
#[test]
fn bootstrap_users_session_lifetime_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log_dirs = format!("log.dirs={}", data.display());
    let out = run_brook(
        &[
            "format",
            "--override",
            &log_dirs,
            "--add-scram",
            "SCRAM-SHA-256=[name=admin,password=admin-secret,iterations=4096]",
        ],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{out:?}");
    let mut overrides = sasl_overrides();
    let data_s = data.display().to_string();
    overrides.push(("log.dirs", &data_s));
    overrides.push(("connections.max.reauth.ms", "1500"));
    overrides.push(("admin.listener", "127.0.0.1:0"));
    let mut b = Broker::start_with(&overrides);
    let m = Scram { sha512: false };
    let mut c = sasl_client(&b);
    let before_login = Instant::now();
    let r = m.login(&mut c, "admin", "admin-secret");
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, 1500), "{r:?}");
    assert_eq!(c.metadata(&[], false).brokers.len(), 1);
    // Past the session's lifetime, the next request closes the connection.
    closed_when_session_ends(&mut c, before_login, Duration::from_millis(1500));
    let mut c = sasl_client(&b);
    assert_eq!(
        m.login(&mut c, "admin", "nope").error_code,
        SASL_AUTHENTICATION_FAILED
    );
    let metrics = get_metrics(&b.admin_address());
    let value = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{listener=\"SASL_PLAINTEXT\"}}")))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap_or_else(|| panic!("{name} not in /metrics"))
            .to_string()
    };
    assert_eq!(value("brook_successful_authentication_total"), "1");
    assert_eq!(value("brook_failed_authentication_total"), "1");
    // The bootstrap user lives in the metadata log: it is there after a restart (on the
    // same ports).
    let same_ports = format!(
        "PLAINTEXT://{},SASL_PLAINTEXT://{}",
        b.listener_address("PLAINTEXT"),
        b.listener_address("SASL_PLAINTEXT")
    );
    b.set_override("listeners", &same_ports);
    b.restart();
    let mut c = sasl_client(&b);
    assert_eq!(m.login(&mut c, "admin", "admin-secret").error_code, 0);
}

/// OAUTHBEARER as Kafka's `OAuthBearerSaslServer` runs it with the unsecured validator: a
/// refused token gets the JSON error challenge, the client's `\x01` the failure carrying it;
/// a bad first message or authorization id fail at once; a good token's `exp` ends the
/// session, or the listener's `oauthbearer.connections.max.reauth.ms` if that comes first.
#[test]
fn oauthbearer_error_challenge_and_token_lifetime() {
    let b = Broker::start_with(&[
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        ),
        (
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
            "OAUTHBEARER",
        ),
        (
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";"#,
        ),
        (
            "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms",
            "3000",
        ),
    ]);
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let login = |token: &str, authzid: &str| {
        let mut c = sasl_client(&b);
        assert_eq!(handshake(&mut c, 1, "OAUTHBEARER").error_code, 0);
        let r = authenticate(&mut c, 2, &oauthbearer_first_message(authzid, token));
        (c, r)
    };
    let expired = unsecured_jws(&format!(r#"{{"sub":"alice","exp":{}}}"#, now_s - 60));
    let (mut c, r) = login(&expired, "");
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(&r.auth_bytes[..], br#"{"status":"invalid_token"}"#);
    let r = authenticate(&mut c, 2, b"");
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        r.error_message.as_deref(),
        Some(r#"{"status":"invalid_token"}"#)
    );
    closed(&mut c, "after the client's answer to the error challenge");

    let alice = unsecured_jws(&format!(r#"{{"sub":"alice","exp":{}}}"#, now_s + 600));
    let (mut c, r) = login(&alice, "bob");
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)")
    );
    closed(&mut c, "after another authorization id");
    let (_, r) = login(&alice, "alice");
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, 3000), "{r:?}");
    let mut c = sasl_client(&b);
    handshake(&mut c, 1, "OAUTHBEARER");
    let r = authenticate(&mut c, 2, b"n,,auth=Bearer x");
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER")
    );
    closed(&mut c, "after a malformed first message");

    // A token good for 2 s more at most: the session ends with it.
    let short = unsecured_jws(&format!(r#"{{"sub":"alice","exp":{}}}"#, now_s + 2));
    let before_login = Instant::now();
    let (mut c, r) = login(&short, "alice");
    assert_eq!(r.error_code, 0, "{r:?}");
    assert!(
        (1..=2000).contains(&r.session_lifetime_ms),
        "session lifetime {} ms",
        r.session_lifetime_ms
    );
    assert_eq!(c.metadata(&[], false).brokers.len(), 1);
    let lifetime = Duration::from_millis(r.session_lifetime_ms as u64);
    closed_when_session_ends(&mut c, before_login, lifetime);
}

/// `GET /metrics`'s body, with a raw HTTP/1.1 request.
fn get_metrics(admin: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    raw.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// A 3-node cluster whose inter-broker listener speaks SASL (OAUTHBEARER with the brokers'
/// unsecured token; PLAIN's inter-broker links are tests/tls.rs's): acks=all with min.insync.replicas=3 succeeds only if the
/// followers' fetchers authenticated, and every node counts successful authentications and
/// no failed one.
#[test]
fn a_cluster_replicates_over_a_sasl_inter_broker_listener() {
    let c = Cluster::start(
        3,
        &[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:{client_port},REPLICATION://127.0.0.1:{extra_port},CONTROLLER://127.0.0.1:{controller_port}",
            ),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,REPLICATION:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            ),
            ("inter.broker.listener.name", "REPLICATION"),
            ("sasl.mechanism.inter.broker.protocol", "OAUTHBEARER"),
            (
                "listener.name.replication.sasl.enabled.mechanisms",
                "OAUTHBEARER",
            ),
            (
                "listener.name.replication.oauthbearer.sasl.jaas.config",
                r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker" unsecuredLoginStringClaim_scope="replication" unsecuredValidatorRequiredScope="replication";"#,
            ),
        ],
    );
    let topic = "sasl-replicated";
    c.create_topic(topic, 1, 3, &[("min.insync.replicas", "3")]);
    let leader = c.leader_of(topic, 0);
    let mut w = WireClient::connect(&c.address(leader));
    let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_700_000_000_000)]);
    let p = w.produce(topic, 0, batch);
    assert_eq!(p.error_code, 0, "acks=all with 3 in-sync replicas: {p:?}");
    for id in c.ids() {
        let metrics = get_metrics(&c.admin_address(id));
        let count = |name: &str| -> u64 {
            metrics
                .lines()
                .find(|l| l.starts_with(&format!("{name}{{listener=\"REPLICATION\"}}")))
                .and_then(|l| l.rsplit(' ').next()?.parse().ok())
                .unwrap_or(0)
        };
        assert_eq!(count("brook_failed_authentication_total"), 0, "node {id}");
        if id == leader {
            assert!(
                count("brook_successful_authentication_total") >= 2,
                "node {id}: {metrics}"
            );
        }
    }
}
