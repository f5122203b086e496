//! Named listeners as Kafka 4.4 serves them: every `listeners` entry is bound, and Metadata,
//! DescribeCluster and FindCoordinator answer the endpoints of the listener the request came
//! in on (Kafka's `MetadataCache.getAliveBrokerNodes(listenerName)`), advertised as
//! `advertised.listeners` says. A listener Brook cannot serve yet is a start-up error.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::process::run_brook;
use brook_protocol_tests::{Broker, WireClient};
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;

/// COORDINATOR_NOT_AVAILABLE.
const COORDINATOR_NOT_AVAILABLE: i16 = 15;

/// (host, port) of every broker Metadata lists, asked on `addr`.
fn metadata_brokers(addr: &str) -> Vec<(String, i32)> {
    let mut c = WireClient::connect(addr);
    let md = c.metadata(&[], false);
    md.brokers
        .iter()
        .map(|b| (b.host.to_string(), b.port))
        .collect()
}

/// FindCoordinator for a group, asked on `addr`: (error, host, port).
fn find_coordinator(addr: &str) -> (i16, String, i32) {
    let mut c = WireClient::connect(addr);
    let mut req = FindCoordinatorRequest::default();
    req.key = StrBytes::from_static_str("listeners-group");
    let r = c.request(3, &req);
    (r.error_code, r.host.to_string(), r.port)
}

fn port_of(addr: &str) -> i32 {
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn each_listener_answers_its_own_endpoints() {
    let broker = Broker::start_with(&[
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        ),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        ),
        ("inter.broker.listener.name", "INTERNAL"),
    ]);
    let (outer, inner) = (
        broker.listener_address("PLAINTEXT"),
        broker.listener_address("INTERNAL"),
    );
    assert_ne!(outer, inner);
    for addr in [&outer, &inner] {
        let want = vec![("127.0.0.1".to_string(), port_of(addr))];
        assert_eq!(metadata_brokers(addr), want, "Metadata on {addr}");
        let mut c = WireClient::connect(addr);
        let dc = c.request(0, &DescribeClusterRequest::default());
        let got: Vec<i32> = dc.brokers.iter().map(|b| b.port).collect();
        assert_eq!(got, vec![port_of(addr)], "DescribeCluster on {addr}");
    }
    // The coordinator's port is the one of the listener asked (it may take a moment for
    // __consumer_offsets to get its leader).
    for addr in [&outer, &inner] {
        let found = brook_protocol_tests::poll_until(
            "a group coordinator",
            Duration::from_secs(20),
            || Some(find_coordinator(addr)).filter(|(e, _, _)| *e == NONE),
        );
        assert_eq!(found.2, port_of(addr), "FindCoordinator on {addr}");
    }
}

#[test]
fn advertised_listeners_name_what_clients_are_told() {
    // Kafka advertises only the names advertised.listeners lists: a client on PLAINTEXT is
    // given no broker and no coordinator.
    let broker = Broker::start_with(&[
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        ),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        ),
        ("inter.broker.listener.name", "INTERNAL"),
        ("advertised.listeners", "INTERNAL://internal.example:1234"),
    ]);
    let inner = broker.listener_address("INTERNAL");
    let outer = broker.listener_address("PLAINTEXT");
    assert_eq!(
        metadata_brokers(&inner),
        vec![("internal.example".to_string(), 1234)]
    );
    assert_eq!(metadata_brokers(&outer), vec![]);
    let found =
        brook_protocol_tests::poll_until("a group coordinator", Duration::from_secs(20), || {
            Some(find_coordinator(&inner)).filter(|(e, _, _)| *e == NONE)
        });
    assert_eq!((found.1.as_str(), found.2), ("internal.example", 1234));
    assert_eq!(find_coordinator(&outer).0, COORDINATOR_NOT_AVAILABLE);
}

/// Start-up refusals name the key and the reason, with Kafka's message where Kafka has one.
#[test]
fn listener_config_errors_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let log_dirs = format!("log.dirs={}", dir.path().display());
    let cases: &[(&[&str], &str)] = &[
        (
            &["listeners=FOO://127.0.0.1:0"],
            "No security protocol defined for listener FOO",
        ),
        (
            &[
                "listeners=PLAINTEXT://127.0.0.1:0",
                "inter.broker.listener.name=PLAINTEXT",
                "security.inter.broker.protocol=PLAINTEXT",
            ],
            "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.",
        ),
        (
            // An SSL listener without a key store: the key is named.
            &["listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"],
            "invalid ssl.keystore.location: listener SSL uses TLS but has no key store",
        ),
    ];
    for (overrides, want) in cases {
        let mut args = vec!["serve", "--override", &log_dirs];
        for o in *overrides {
            args.extend(["--override", o]);
        }
        let out = run_brook(&args, Duration::from_secs(20));
        assert_eq!(out.status.code(), Some(2), "{overrides:?}: {out:?}");
        assert!(out.stderr.contains(want), "{overrides:?}: {}", out.stderr);
    }
}
