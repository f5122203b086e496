//! `--topic NAME[:PARTITIONS[:REPLICATION_FACTOR]]`: topics the supervisor creates once every
//! node is READY and before it prints `CLUSTER READY`, so a test's first producer finds its
//! topic and its leader in its first Metadata answer. With auto-creation instead, that answer
//! is `LEADER_NOT_AVAILABLE` (as Kafka's) and the client waits its `retry.backoff.ms` before
//! it asks again, most of a kit's time to the first acknowledged produce.
//!
//! Mirrors Kafka's own test utilities (`kafka.utils.TestUtils.createTopicWithAdmin`): a
//! CreateTopics request (as `Admin.createTopics` sends it) to one node, an existing topic
//! accepted, then `waitForAllPartitionsMetadata`: every node's metadata names a leader for
//! every partition. That wait reads each node's Metadata answer until it does; the node that
//! created the topic answered CreateTopics only once it had applied it, so the others
//! usually have it at the first reading.

use std::str::FromStr;
use std::time::Duration;

use brook::net::client::BrokerConnection;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::time::Instant;

/// CreateTopics version sent (Kafka 4's clients send 7; Brook serves 2-7).
const CREATE_TOPICS_VERSION: i16 = 7;
/// Metadata version sent (topics by name, leader epochs; Kafka 4 serves 0-13).
const METADATA_VERSION: i16 = 12;
/// Pause between two Metadata readings of a node that does not yet name every leader; it only
/// paces the loop, the answer decides.
const METADATA_POLL_INTERVAL_MS: u64 = 5;
/// Bound on one request's round trip.
const REQUEST_TIMEOUT_MS: u64 = 10_000;
/// The `client.id` of the supervisor's requests (in the nodes' request logs and quotas).
const CLIENT_ID: &str = "brook-cluster";

/// One `--topic`: -1 partitions or replication factor means the broker's default
/// (`num.partitions`, `default.replication.factor`), as in a CreateTopics request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    /// Topic configs sent with the CreateTopics request (none from `--topic`; the page's
    /// labs set `min.insync.replicas`).
    pub configs: Vec<(String, String)>,
}

impl FromStr for TopicSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<TopicSpec, String> {
        let mut parts = s.split(':');
        let name = parts.next().unwrap_or_default().to_string();
        if name.is_empty() {
            return Err(format!(
                "topic {s:?}: no name (NAME[:PARTITIONS[:REPLICATION_FACTOR]])"
            ));
        }
        let number = |what: &str, v: Option<&str>| -> Result<i64, String> {
            match v {
                None => Ok(-1),
                Some(v) => match v.parse::<i64>() {
                    Ok(n) if n >= 1 => Ok(n),
                    _ => Err(format!(
                        "topic {s:?}: {what} must be a number of at least 1, not {v:?}"
                    )),
                },
            }
        };
        let partitions = number("partitions", parts.next())?;
        let replication_factor = number("replication factor", parts.next())?;
        if parts.next().is_some() {
            return Err(format!(
                "topic {s:?}: more than NAME:PARTITIONS:REPLICATION_FACTOR"
            ));
        }
        Ok(TopicSpec {
            name,
            partitions: i32::try_from(partitions)
                .map_err(|_| format!("topic {s:?}: too many partitions"))?,
            replication_factor: i16::try_from(replication_factor)
                .map_err(|_| format!("topic {s:?}: replication factor too large"))?,
            configs: Vec::new(),
        })
    }
}

/// Creates `topics` through the node at `creator`, then waits until every node in `clients`
/// names a leader for each of their partitions, all before `deadline`.
pub async fn create(
    topics: &[TopicSpec],
    creator: &str,
    clients: &[String],
    deadline: Instant,
) -> Result<(), String> {
    if topics.is_empty() {
        return Ok(());
    }
    let created = tokio::time::timeout_at(deadline, create_on(topics, creator)).await;
    match created {
        Ok(r) => r?,
        Err(_) => return Err("creating the --topic topics: timed out".into()),
    }
    for client in clients {
        let known = tokio::time::timeout_at(deadline, await_leaders(topics, client)).await;
        match known {
            Ok(r) => r?,
            Err(_) => {
                return Err(format!(
                    "node {client} did not learn every --topic leader in time"
                ))
            }
        }
    }
    Ok(())
}

fn connection(addr: &str) -> BrokerConnection {
    BrokerConnection::new(
        addr.to_string(),
        CLIENT_ID.to_string(),
        Duration::from_millis(REQUEST_TIMEOUT_MS),
    )
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

async fn create_on(topics: &[TopicSpec], creator: &str) -> Result<(), String> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(REQUEST_TIMEOUT_MS as i32)
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    CreatableTopic::default()
                        .with_name(topic_name(&t.name))
                        .with_num_partitions(t.partitions)
                        .with_replication_factor(t.replication_factor)
                        .with_configs(
                            t.configs
                                .iter()
                                .map(|(k, v)| {
                                    CreatableTopicConfig::default()
                                        .with_name(StrBytes::from_string(k.clone()))
                                        .with_value(Some(StrBytes::from_string(v.clone())))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let response = connection(creator)
        .send(CREATE_TOPICS_VERSION, &request)
        .await
        .map_err(|e| format!("CreateTopics to {creator}: {e}"))?;
    for t in &response.topics {
        match ResponseError::try_from_code(t.error_code) {
            None | Some(ResponseError::TopicAlreadyExists) => {}
            Some(e) => {
                let why = t.error_message.as_deref().unwrap_or("");
                return Err(format!("creating topic {}: {e:?}: {why}", t.name.0));
            }
        }
    }
    Ok(())
}

/// Reads `client`'s Metadata for `topics` until each names a leader for every partition.
async fn await_leaders(topics: &[TopicSpec], client: &str) -> Result<(), String> {
    let request = MetadataRequest::default().with_topics(Some(
        topics
            .iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(&t.name))))
            .collect(),
    ));
    let mut conn = connection(client);
    loop {
        let response = conn
            .send(METADATA_VERSION, &request)
            .await
            .map_err(|e| format!("Metadata from {client}: {e}"))?;
        let led = |spec: &TopicSpec| {
            response.topics.iter().any(|t| {
                t.name.as_ref().is_some_and(|n| n.0.as_str() == spec.name)
                    && t.error_code == 0
                    && !t.partitions.is_empty()
                    && t.partitions
                        .iter()
                        .all(|p| p.error_code == 0 && p.leader_id.0 >= 0)
            })
        };
        if topics.iter().all(led) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(METADATA_POLL_INTERVAL_MS)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_name_partitions_and_replication_factor() {
        let spec = |name: &str, partitions, replication_factor| TopicSpec {
            name: name.into(),
            partitions,
            replication_factor,
            configs: Vec::new(),
        };
        assert_eq!("orders".parse(), Ok(spec("orders", -1, -1)));
        assert_eq!("orders:3".parse(), Ok(spec("orders", 3, -1)));
        assert_eq!("orders:3:2".parse(), Ok(spec("orders", 3, 2)));
        for bad in [
            "",
            ":3",
            "orders:0",
            "orders:x",
            "orders:3:0",
            "orders:1:1:1",
            "o:1:40000",
        ] {
            assert!(bad.parse::<TopicSpec>().is_err(), "{bad:?} accepted");
        }
    }
}
