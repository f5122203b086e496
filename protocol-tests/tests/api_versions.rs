//! ApiVersions v5 (KIP-1242): a client names the cluster and node it means to reach, and a
//! connection that reached another cluster or node is answered REBOOTSTRAP_REQUIRED, as Kafka
//! 4.4's `KafkaApis.handleApiVersionsRequest` answers it; a client that names nothing (its
//! bootstrap connection) gets the table.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use brook_protocol_tests::{Broker, WireClient};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// REBOOTSTRAP_REQUIRED.
const REBOOTSTRAP_REQUIRED: i16 = 129;

fn v5(c: &mut WireClient, cluster_id: Option<&str>, node_id: i32) -> ApiVersionsResponse {
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("brook-tests"))
        .with_client_software_version(StrBytes::from_static_str("1.0"))
        .with_cluster_id(cluster_id.map(|c| StrBytes::from_string(c.to_string())))
        .with_node_id(node_id);
    c.request(5, &req)
}

#[test]
fn api_versions_v5_refuses_a_connection_meant_for_another_cluster_or_node() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let cluster: DescribeClusterResponse = c.request(0, &DescribeClusterRequest::default());
    let (cluster_id, node_id) = (cluster.cluster_id.to_string(), cluster.controller_id.0);
    assert_eq!(cluster.brokers.len(), 1);

    let r = v5(&mut c, None, -1);
    assert_eq!(r.error_code, 0, "a bootstrap connection names nothing");
    let advertised = r
        .api_keys
        .iter()
        .find(|k| k.api_key == 18)
        .expect("ApiVersions");
    assert_eq!(advertised.max_version, 5);
    let r = v5(&mut c, Some(&cluster_id), node_id);
    assert_eq!(r.error_code, 0, "the right cluster and node");
    assert!(!r.api_keys.is_empty());

    for (cluster, node) in [
        ("another-cluster-id-00", node_id),
        (cluster_id.as_str(), node_id + 1),
    ] {
        let r = v5(&mut c, Some(cluster), node);
        assert_eq!(
            r.error_code, REBOOTSTRAP_REQUIRED,
            "cluster {cluster} node {node}"
        );
        assert!(r.api_keys.is_empty(), "nothing else is answered: {r:?}");
    }
    // The connection stays usable, as on Kafka.
    assert_eq!(v5(&mut c, Some(&cluster_id), node_id).error_code, 0);
}
