//! The case table, and the cases of partition, topic, config and cluster APIs.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::ResponseError;

use super::env::{s, tn, Env, NodeId, DATA_PARTITIONS};
use super::{acls, features, groups, share, share_state, sorted, streams, txns, Case, Meaning};
use crate::batch::{encode_batch, parse_batches, Producer, Rec};
use crate::wire::WireClient;

type R = Result<Meaning, String>;

/// The case of `key`; `None` fails the matrix for an advertised key.
pub fn case(key: ApiKey) -> Option<Case> {
    let (run, served_from) = partition_and_cluster_case(key)
        .or_else(|| group_case(key))
        .or_else(|| share_case(key))
        .or_else(|| transaction_and_security_case(key))?;
    Some(Case {
        key,
        run,
        served_from,
    })
}

/// A case's check, run at each version of its API.
type Run = fn(&mut Env, i16) -> R;

/// The cases of the partition, topic, config and cluster APIs.
fn partition_and_cluster_case(key: ApiKey) -> Option<(Run, i16)> {
    use ApiKey::*;
    let case: (Run, i16) = match key {
        // Produce v0-2 are advertised for old clients (KAFKA-18659) but closed, as in Kafka.
        Produce => (produce, 3),
        Fetch => (fetch, 0),
        ListOffsets => (list_offsets, 0),
        Metadata => (metadata, 0),
        DescribeTopicPartitions => (describe_topic_partitions, 0),
        ApiVersions => (api_versions, 0),
        CreateTopics => (create_topics, 0),
        DeleteTopics => (delete_topics, 0),
        DeleteRecords => (delete_records, 0),
        OffsetForLeaderEpoch => (offset_for_leader_epoch, 0),
        DescribeConfigs => (describe_configs, 0),
        CreatePartitions => (create_partitions, 0),
        AlterConfigs => (alter_configs, 0),
        IncrementalAlterConfigs => (incremental_alter_configs, 0),
        DescribeCluster => (describe_cluster, 0),
        ElectLeaders => (elect_leaders, 0),
        AlterPartitionReassignments => (alter_reassignments, 0),
        ListPartitionReassignments => (list_reassignments, 0),
        DescribeLogDirs => (describe_log_dirs, 0),
        DescribeQuorum => (describe_quorum, 0),
        AddRaftVoter => (add_raft_voter, 0),
        RemoveRaftVoter => (remove_raft_voter, 0),
        UnregisterBroker => (unregister_broker, 0),
        _ => return None,
    };
    Some(case)
}

/// The cases of the classic, consumer and streams group APIs.
fn group_case(key: ApiKey) -> Option<(Run, i16)> {
    use ApiKey::*;
    let case: (Run, i16) = match key {
        FindCoordinator => (groups::find_coordinator, 0),
        JoinGroup => (groups::join_group, 0),
        SyncGroup => (groups::sync_group, 0),
        Heartbeat => (groups::heartbeat, 0),
        LeaveGroup => (groups::leave_group, 0),
        OffsetCommit => (groups::offset_commit, 0),
        OffsetFetch => (groups::offset_fetch, 0),
        OffsetDelete => (groups::offset_delete, 0),
        DescribeGroups => (groups::describe_groups, 0),
        ListGroups => (groups::list_groups, 0),
        DeleteGroups => (groups::delete_groups, 0),
        ConsumerGroupHeartbeat => (groups::consumer_group_heartbeat, 0),
        ConsumerGroupDescribe => (groups::consumer_group_describe, 0),
        StreamsGroupHeartbeat => (streams::streams_group_heartbeat, 0),
        StreamsGroupDescribe => (streams::streams_group_describe, 0),
        _ => return None,
    };
    Some(case)
}

/// The cases of the share group and share group state APIs.
fn share_case(key: ApiKey) -> Option<(Run, i16)> {
    use ApiKey::*;
    let case: (Run, i16) = match key {
        ShareGroupHeartbeat => (share::share_group_heartbeat, 0),
        ShareGroupDescribe => (share::share_group_describe, 0),
        ShareFetch => (share::share_fetch, 0),
        ShareAcknowledge => (share::share_acknowledge, 0),
        InitializeShareGroupState => (share_state::initialize_share_group_state, 0),
        ReadShareGroupState => (share_state::read_share_group_state, 0),
        WriteShareGroupState => (share_state::write_share_group_state, 0),
        DeleteShareGroupState => (share_state::delete_share_group_state, 0),
        ReadShareGroupStateSummary => (share_state::read_share_group_state_summary, 0),
        DescribeShareGroupOffsets => (share::describe_share_group_offsets, 0),
        AlterShareGroupOffsets => (share::alter_share_group_offsets, 0),
        DeleteShareGroupOffsets => (share::delete_share_group_offsets, 0),
        _ => return None,
    };
    Some(case)
}

/// The cases of the transaction, ACL, SASL, SCRAM, quota, feature and telemetry APIs.
fn transaction_and_security_case(key: ApiKey) -> Option<(Run, i16)> {
    use ApiKey::*;
    let case: (Run, i16) = match key {
        InitProducerId => (txns::init_producer_id, 0),
        AddPartitionsToTxn => (txns::add_partitions_to_txn, 0),
        AddOffsetsToTxn => (txns::add_offsets_to_txn, 0),
        EndTxn => (txns::end_txn, 0),
        TxnOffsetCommit => (txns::txn_offset_commit, 0),
        DescribeTransactions => (txns::describe_transactions, 0),
        ListTransactions => (txns::list_transactions, 0),
        WriteTxnMarkers => (txns::write_txn_markers, 0),
        DescribeProducers => (txns::describe_producers, 0),
        DescribeAcls => (acls::describe_acls, 0),
        CreateAcls => (acls::create_acls, 0),
        DeleteAcls => (acls::delete_acls, 0),
        SaslHandshake => (sasl_handshake, 0),
        SaslAuthenticate => (sasl_authenticate, 0),
        AlterUserScramCredentials => (alter_user_scram_credentials, 0),
        DescribeUserScramCredentials => (describe_user_scram_credentials, 0),
        DescribeClientQuotas => (describe_client_quotas, 0),
        AlterClientQuotas => (alter_client_quotas, 0),
        UpdateFeatures => (features::update_features, 0),
        GetTelemetrySubscriptions => (features::get_telemetry_subscriptions, 0),
        PushTelemetry => (features::push_telemetry, 0),
        ListConfigResources => (features::list_config_resources, 0),
        _ => return None,
    };
    Some(case)
}

/// The log end offset of `topic`-`partition` (ListOffsets v7, latest).
pub fn end_offset(env: &mut Env, topic: &str, partition: i32) -> Result<i64, String> {
    let leader = env.leader_of(topic, partition);
    let r = env.call(
        leader,
        7,
        &WireClient::list_offsets_request(topic, partition, -1),
    )?;
    let p = &r.topics[0].partitions[0];
    if p.error_code != 0 {
        return Err(format!("ListOffsets {topic}-{partition}: {r:?}"));
    }
    Ok(p.offset)
}

/// Two records appended to the side topic: the base offset must be the end offset before.
fn produce(env: &mut Env, v: i16) -> R {
    let side = env.fix.side.clone();
    let recs = [
        Rec::kv("k", "v", 1_700_000_000_000),
        Rec::kv("k", "w", 1_700_000_000_001),
    ];
    let mut req = WireClient::produce_request(&side, 0, encode_batch(Producer::NONE, &recs), -1);
    if v >= 13 {
        req.topic_data[0].name = TopicName::default();
        req.topic_data[0].topic_id = env.fix.side_id;
    }
    let leader = env.leader_of(&side, 0);
    if v < 3 {
        // kafka-protocol encodes Produce from v3 only: v0-2's body is v3's without its
        // leading transactional id (a null string, two bytes).
        let mut body = Vec::new();
        req.encode(&mut body, 3).map_err(|e| e.to_string())?;
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Produce as i16)
            .with_request_api_version(v)
            .with_correlation_id(1)
            .with_client_id(Some(s("brook-version-matrix")));
        let mut frame = Vec::new();
        header.encode(&mut frame, 1).map_err(|e| e.to_string())?;
        frame.extend_from_slice(&body[2..]);
        env.send_expect_close(leader, &frame)?;
        return Ok("closed".into());
    }
    let before = end_offset(env, &side, 0)?;
    let r = env.call(leader, v, &req)?;
    let p = &r.responses[0].partition_responses[0];
    Ok(format!(
        "error {} base at the end offset before: {}",
        p.error_code,
        p.base_offset == before
    ))
}

/// Every data partition from offset 0, from each leader: records and watermarks.
/// Every data partition from offset 0, from each leader, and the side partition read
/// committed (the fixture transaction holds its last stable offset back): records,
/// watermarks and aborted transactions.
fn fetch(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let mut out = Vec::new();
    for (node, ps) in env.leaders(&f.data)? {
        out.extend(fetch_from(env, v, node, (&f.data, f.data_id), &ps, 0)?);
    }
    let side_leader = env.leader_of(&f.side, 0);
    out.extend(fetch_from(
        env,
        v,
        side_leader,
        (&f.side, f.side_id),
        &[0],
        1,
    )?);
    Ok(out.join("; "))
}

/// One Fetch of `partitions` of `topic` (by name, or by id from v13) from offset 0.
fn fetch_from(
    env: &mut Env,
    v: i16,
    node: NodeId,
    (topic, id): (&str, uuid::Uuid),
    partitions: &[i32],
    isolation_level: i8,
) -> Result<Vec<String>, String> {
    let mut req = WireClient::fetch_request(topic, partitions[0], 0, 100);
    req.isolation_level = isolation_level;
    let template = req.topics[0].partitions[0].clone();
    req.topics[0].partitions = partitions
        .iter()
        .map(|&p| template.clone().with_partition(p))
        .collect();
    if v >= 13 {
        req.topics[0].topic = TopicName::default();
        req.topics[0].topic_id = id;
    }
    let r = env.call(node, v, &req)?;
    let mut out = vec![format!("error {}", r.error_code)];
    for p in r.responses.iter().flat_map(|t| t.partitions.iter()) {
        let records = p.records.clone().unwrap_or_default();
        let offsets: Vec<i64> = parse_batches(&records)?
            .iter()
            .flat_map(|b| b.records.iter().map(|r| r.offset))
            .collect();
        out.push(format!(
            "p{} error {} hw {} lso {} aborted {:?} offsets {offsets:?}",
            p.partition_index,
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.aborted_transactions.as_ref().map(Vec::len)
        ));
    }
    Ok(out)
}

/// Earliest and latest offsets of every data partition.
fn list_offsets(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let mut out = Vec::new();
    for (node, ps) in env.leaders(&f.data)? {
        for ts in [-2i64, -1] {
            let mut req = WireClient::list_offsets_request(&f.data, ps[0], ts);
            let template = req.topics[0].partitions[0].clone();
            req.topics[0].partitions = ps
                .iter()
                .map(|&p| template.clone().with_partition_index(p))
                .collect();
            let r = env.call(node, v, &req)?;
            for p in &r.topics[0].partitions {
                out.push(format!(
                    "p{} at {ts}: error {} offset {}",
                    p.partition_index, p.error_code, p.offset
                ));
            }
        }
        out.push(pending_upload(env, node, &f.data, ps[0], v)?);
    }
    out.sort();
    Ok(out.join("; "))
}

/// EARLIEST_PENDING_UPLOAD (-6, KIP-1023): from v11, -1/-1 (Brook has no tiered storage, as
/// a Kafka log without remote storage answers); below v11, UNSUPPORTED_VERSION.
fn pending_upload(env: &mut Env, node: NodeId, topic: &str, partition: i32, v: i16) -> R {
    const EARLIEST_PENDING_UPLOAD: i64 = -6;
    let req = WireClient::list_offsets_request(topic, partition, EARLIEST_PENDING_UPLOAD);
    let r = env.call(node, v, &req)?;
    let p = &r.topics[0].partitions[0];
    let expected = match v >= 11 {
        true => (0, -1, -1),
        false => (ResponseError::UnsupportedVersion.code(), -1, -1),
    };
    match (p.error_code, p.offset, p.timestamp) == expected {
        true => Ok(format!("p{partition} pending upload as the version allows")),
        false => Err(format!("ListOffsets v{v} at -6: {p:?}")),
    }
}

/// The data topic by name, and all topics (a null list; at v0, which has no null, an empty
/// one: `MetadataRequest.isAllTopics`) listing it too.
fn metadata(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let mut req = WireClient::metadata_request(&[&f.data], false);
    if v < 4 {
        req.allow_auto_topic_creation = true; // the field's default: v0-3 lack it
    }
    let any = env.any();
    let r = env.call(any, v, &req)?;
    let mut brokers: Vec<String> = r
        .brokers
        .iter()
        .map(|b| format!("{}@{}:{}", b.node_id.0, b.host.as_str(), b.port))
        .collect();
    brokers.sort();
    let topics: Vec<String> = r.topics.iter().map(topic_meaning).collect();
    req.topics = if v == 0 { Some(vec![]) } else { None };
    let all = env.call(any, v, &req)?;
    let listed = all
        .topics
        .iter()
        .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == f.data));
    Ok(format!(
        "brokers {brokers:?} topics {topics:?} all topics list it {listed}"
    ))
}

fn topic_meaning(t: &metadata_response::MetadataResponseTopic) -> String {
    let mut ps: Vec<String> = t
        .partitions
        .iter()
        .map(|p| {
            let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
            isr.sort();
            let mut replicas: Vec<i32> = p.replica_nodes.iter().map(|b| b.0).collect();
            replicas.sort();
            format!(
                "p{} error {} leader {} replicas {replicas:?} isr {isr:?}",
                p.partition_index, p.error_code, p.leader_id.0
            )
        })
        .collect();
    ps.sort();
    format!(
        "{:?} error {} [{}]",
        t.name.as_ref().map(|n| n.0.to_string()),
        t.error_code,
        ps.join(", ")
    )
}

fn describe_topic_partitions(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![
            describe_topic_partitions_request::TopicRequest::default().with_name(tn(&f.data)),
        ])
        .with_response_partition_limit(2000);
    let any = env.any();
    let r = env.call(any, v, &req)?;
    let t = r.topics.first().ok_or("no topic")?;
    let leaders: Vec<(i32, i32)> = t
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    Ok(format!("error {} partitions {leaders:?}", t.error_code))
}

fn api_versions(env: &mut Env, v: i16) -> R {
    let mut req = ApiVersionsRequest::default();
    if v >= 3 {
        req.client_software_name = StrBytes::from_static_str("brook-version-matrix");
        req.client_software_version = StrBytes::from_static_str("1.0");
    }
    let any = env.any();
    let r = env.call(any, v, &req)?;
    let keys: Vec<(i16, i16, i16)> = r
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    Ok(format!("error {} keys {keys:?}", r.error_code))
}

/// A fresh topic, and the data topic again (TOPIC_ALREADY_EXISTS).
fn create_topics(env: &mut Env, v: i16) -> R {
    let fresh = env.fresh("created");
    let rf = env.fix.replication;
    let mut req = WireClient::create_topics_request(&fresh, 1, rf, &[], super::env::CALL_TIMEOUT);
    let again =
        WireClient::create_topics_request(&env.fix.data, 1, rf, &[], super::env::CALL_TIMEOUT);
    req.topics.extend(again.topics);
    let any = env.any();
    let r = env.call(any, v, &req)?;
    Ok(sorted(
        "(fresh, error)",
        r.topics
            .iter()
            .map(|t| (t.name.0.as_str() == fresh, t.error_code)),
    ))
}

/// A fresh topic deleted, and one that does not exist.
fn delete_topics(env: &mut Env, v: i16) -> R {
    let fresh = env.fresh("deleted");
    let missing = env.fresh("missing");
    let rf = env.fix.replication;
    let any = env.any();
    let created = env.call(
        any,
        5,
        &WireClient::create_topics_request(&fresh, 1, rf, &[], super::env::CALL_TIMEOUT),
    )?;
    if created.topics[0].error_code != 0 {
        return Err(format!("CreateTopics {fresh}: {created:?}"));
    }
    let mut req = DeleteTopicsRequest::default().with_timeout_ms(30_000);
    if v >= 6 {
        req.topics = [&fresh, &missing]
            .iter()
            .map(|n| delete_topics_request::DeleteTopicState::default().with_name(Some(tn(n))))
            .collect();
    } else {
        req.topic_names = vec![tn(&fresh), tn(&missing)];
    }
    let r = env.call(any, v, &req)?;
    Ok(sorted(
        "(fresh, error)",
        r.responses.iter().map(|t| {
            (
                t.name.as_ref().map(|n| n.0.as_str()) == Some(fresh.as_str()),
                t.error_code,
            )
        }),
    ))
}

/// Records deleted up to the end offset after two more were written; and a partition the
/// topic does not have.
fn delete_records(env: &mut Env, _v: i16) -> R {
    let side = env.fix.side.clone();
    let base = env.produce_plain(&side, 0, 1);
    let end = base + 2;
    let partition = |i: i32| {
        delete_records_request::DeleteRecordsPartition::default()
            .with_partition_index(i)
            .with_offset(end)
    };
    let req = DeleteRecordsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(tn(&side))
            .with_partitions(vec![partition(0), partition(7)])]);
    let leader = env.leader_of(&side, 0);
    let r = env.call(leader, _v, &req)?;
    let mut out: Vec<String> = r.topics[0]
        .partitions
        .iter()
        .map(|p| {
            format!(
                "p{} error {} low watermark at the end: {}",
                p.partition_index,
                p.error_code,
                p.low_watermark == end
            )
        })
        .collect();
    out.sort();
    Ok(out.join("; "))
}

fn offset_for_leader_epoch(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let any = env.any();
    let md = env.topic_metadata(any, &f.data)?;
    let mut out = Vec::new();
    for (node, ps) in env.leaders(&f.data)? {
        let partitions = ps
            .iter()
            .map(|&p| {
                let epoch = md
                    .partitions
                    .iter()
                    .find(|m| m.partition_index == p)
                    .map_or(0, |m| m.leader_epoch);
                offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                    .with_partition(p)
                    .with_current_leader_epoch(-1)
                    .with_leader_epoch(epoch)
            })
            .collect();
        let mut req = OffsetForLeaderEpochRequest::default().with_topics(vec![
            offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                .with_topic(tn(&f.data))
                .with_partitions(partitions),
        ]);
        if v >= 3 {
            req.replica_id = BrokerId(-1); // a consumer
        }
        let r = env.call(node, v, &req)?;
        for p in &r.topics[0].partitions {
            out.push(format!(
                "p{} error {} epoch {} end {}",
                p.partition, p.error_code, p.leader_epoch, p.end_offset
            ));
        }
    }
    out.sort();
    Ok(out.join("; "))
}

fn describe_configs(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let any = env.any();
    let resource = |ty: i8, name: String, keys: &[&str]| {
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(ty)
            .with_resource_name(s(&name))
            .with_configuration_keys(Some(keys.iter().map(|k| s(k)).collect()))
    };
    let req = DescribeConfigsRequest::default().with_resources(vec![
        resource(
            2,
            f.data.clone(),
            &["cleanup.policy", "retention.ms", "min.insync.replicas"],
        ),
        resource(
            4,
            any.to_string(),
            &["num.partitions", "log.retention.hours"],
        ),
    ]);
    let r = env.call(any, v, &req)?;
    let out: Vec<String> = r
        .results
        .iter()
        .map(|res| {
            let mut cs: Vec<String> = res
                .configs
                .iter()
                .map(|c| {
                    format!(
                        "{}={:?} ro {} sensitive {} source {}",
                        c.name.as_str(),
                        c.value.as_ref().map(|v| v.to_string()),
                        c.read_only,
                        c.is_sensitive,
                        c.config_source
                    )
                })
                .collect();
            cs.sort();
            format!("type {} error {} {cs:?}", res.resource_type, res.error_code)
        })
        .collect();
    Ok(out.join("; "))
}

/// The grow topic one partition larger; the data topic at its own count (INVALID_PARTITIONS).
fn create_partitions(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let any = env.any();
    let count = env.topic_metadata(any, &f.grow)?.partitions.len() as i32;
    let topic = |name: &str, count: i32| {
        create_partitions_request::CreatePartitionsTopic::default()
            .with_name(tn(name))
            .with_count(count)
            .with_assignments(None)
    };
    let req = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![
            topic(&f.grow, count + 1),
            topic(&f.data, DATA_PARTITIONS),
        ]);
    let r = env.call(any, v, &req)?;
    let mut codes: Vec<(bool, i16)> = r
        .results
        .iter()
        .map(|t| (t.name.0.as_str() == f.grow, t.error_code))
        .collect();
    codes.sort();
    if codes.contains(&(true, 0)) {
        // The next version reads the count again: wait until every node has the new one
        // (an answer does not promise that other nodes' metadata caught up).
        env.await_served(&f.grow, count + 1);
    }
    Ok(format!("(grown, error) {codes:?}"))
}

fn alter_configs(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let missing = env.fresh("missing");
    let resource = |name: &str| {
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(name))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(s("retention.ms"))
                .with_value(Some(s("3600000")))])
    };
    let req =
        AlterConfigsRequest::default().with_resources(vec![resource(&f.cfg), resource(&missing)]);
    let any = env.any();
    let r = env.call(any, v, &req)?;
    Ok(sorted(
        "(existing, error)",
        r.responses
            .iter()
            .map(|c| (c.resource_name.as_str() == f.cfg, c.error_code)),
    ))
}

fn incremental_alter_configs(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let missing = env.fresh("missing");
    let resource = |name: &str| {
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(name))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(s("7200000"))),
            ])
    };
    let req = IncrementalAlterConfigsRequest::default()
        .with_resources(vec![resource(&f.cfg), resource(&missing)]);
    let any = env.any();
    let r = env.call(any, v, &req)?;
    Ok(sorted(
        "(existing, error)",
        r.responses
            .iter()
            .map(|c| (c.resource_name.as_str() == f.cfg, c.error_code)),
    ))
}

fn describe_cluster(env: &mut Env, v: i16) -> R {
    let any = env.any();
    let r = env.call(any, v, &DescribeClusterRequest::default())?;
    let mut brokers: Vec<String> = r
        .brokers
        .iter()
        .map(|b| format!("{}@{}:{}", b.broker_id.0, b.host.as_str(), b.port))
        .collect();
    brokers.sort();
    Ok(format!(
        "error {} cluster {} controller {} brokers {brokers:?}",
        r.error_code,
        r.cluster_id.as_str(),
        r.controller_id.0
    ))
}

/// A preferred election for every data partition (each already leads: ELECTION_NOT_NEEDED),
/// and for a topic that does not exist.
fn elect_leaders(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let missing = env.fresh("missing");
    let topic = |name: &str, partitions: Vec<i32>| {
        elect_leaders_request::TopicPartitions::default()
            .with_topic(tn(name))
            .with_partitions(partitions)
    };
    let req = ElectLeadersRequest::default()
        .with_timeout_ms(30_000)
        .with_topic_partitions(Some(vec![
            topic(&f.data, (0..DATA_PARTITIONS).collect()),
            topic(&missing, vec![0]),
        ]));
    let any = env.any();
    let r = env.call(any, v, &req)?;
    Ok(sorted(
        "(existing, partition, error)",
        r.replica_election_results.iter().flat_map(|t| {
            t.partition_result
                .iter()
                .map(|p| (t.topic.0.as_str() == f.data, p.partition_id, p.error_code))
        }),
    ))
}

/// Cancelling a reassignment that is not in progress, and one of a topic that does not exist.
fn alter_reassignments(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let missing = env.fresh("missing");
    let topic = |name: &str| {
        alter_partition_reassignments_request::ReassignableTopic::default()
            .with_name(tn(name))
            .with_partitions(vec![
                alter_partition_reassignments_request::ReassignablePartition::default()
                    .with_partition_index(0),
            ])
    };
    let req = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![topic(&f.data), topic(&missing)]);
    let any = env.any();
    let r = env.call(any, v, &req)?;
    let mut out: Vec<(bool, i32, i16)> = r
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.as_str() == f.data, p.partition_index, p.error_code))
        })
        .collect();
    out.sort();
    Ok(format!(
        "error {} (existing, partition, error) {out:?}",
        r.error_code
    ))
}

fn list_reassignments(env: &mut Env, v: i16) -> R {
    let any = env.any();
    let r = env.call(
        any,
        v,
        &ListPartitionReassignmentsRequest::default().with_timeout_ms(30_000),
    )?;
    let ours = r
        .topics
        .iter()
        .filter(|t| t.name.0.starts_with(&env.fix.run))
        .count();
    Ok(format!(
        "error {} reassigning topics of this run {ours}",
        r.error_code
    ))
}

fn describe_log_dirs(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let node = env.leader_of(&f.data, 0);
    let req = DescribeLogDirsRequest::default().with_topics(Some(vec![
        describe_log_dirs_request::DescribableLogDirTopic::default()
            .with_topic(tn(&f.data))
            .with_partitions((0..DATA_PARTITIONS).collect()),
    ]));
    let r = env.call(node, v, &req)?;
    // v5's IsCordoned: Brook has no `cordoned.log.dirs`, so never.
    if r.results.iter().any(|d| d.is_cordoned) {
        return Err(format!("DescribeLogDirs v{v}: a cordoned log dir: {r:?}"));
    }
    let mut out: Vec<String> = r
        .results
        .iter()
        .flat_map(|d| {
            d.topics.iter().flat_map(move |t| {
                t.partitions.iter().map(move |p| {
                    format!(
                        "{} error {} p{} size {}",
                        d.log_dir.as_str(),
                        d.error_code,
                        p.partition_index,
                        p.partition_size
                    )
                })
            })
        })
        .collect();
    out.sort();
    Ok(out.join("; "))
}

fn describe_quorum(env: &mut Env, v: i16) -> R {
    let req = DescribeQuorumRequest::default().with_topics(vec![
        describe_quorum_request::TopicData::default()
            .with_topic_name(tn("__cluster_metadata"))
            .with_partitions(vec![describe_quorum_request::PartitionData::default()]),
    ]);
    let any = env.any();
    let r = env.call(any, v, &req)?;
    let out: Vec<String> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let mut voters: Vec<i32> =
                    p.current_voters.iter().map(|r| r.replica_id.0).collect();
                voters.sort();
                format!(
                    "error {} leader {} voters {voters:?}",
                    p.error_code, p.leader_id.0
                )
            })
        })
        .collect();
    Ok(format!("error {} {out:?}", r.error_code))
}

/// A voter that already votes: refused without a change (UNSUPPORTED_VERSION at
/// `kraft.version` 0, DUPLICATE_VOTER at 1).
fn add_raft_voter(env: &mut Env, v: i16) -> R {
    let req = AddRaftVoterRequest::default()
        .with_cluster_id(None)
        .with_timeout_ms(5_000)
        .with_voter_id(1)
        .with_voter_directory_id(uuid::Uuid::from_u128(1))
        .with_listeners(vec![add_raft_voter_request::Listener::default()
            .with_name(s("CONTROLLER"))
            .with_host(s("127.0.0.1"))
            .with_port(1)]);
    let any = env.any();
    let r = env.call(any, v, &req)?;
    Ok(format!("error {}", r.error_code))
}

/// A node that does not vote: refused without a change.
fn remove_raft_voter(env: &mut Env, v: i16) -> R {
    let req = RemoveRaftVoterRequest::default()
        .with_cluster_id(None)
        .with_voter_id(999)
        .with_voter_directory_id(uuid::Uuid::from_u128(1));
    let any = env.any();
    let r = env.call(any, v, &req)?;
    Ok(format!("error {}", r.error_code))
}

/// A broker id never registered: BROKER_ID_NOT_REGISTERED, nothing removed.
fn unregister_broker(env: &mut Env, v: i16) -> R {
    let req = UnregisterBrokerRequest::default().with_broker_id(BrokerId(999));
    let any = env.any();
    let r = env.call(any, v, &req)?;
    Ok(format!("error {}", r.error_code))
}

/// On a listener without SASL (or once authenticated), Kafka answers the handshake with
/// ILLEGAL_SASL_STATE.
fn sasl_handshake(env: &mut Env, v: i16) -> R {
    let any = env.any();
    let r = env.call(
        any,
        v,
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
    )?;
    Ok(format!("error {}", r.error_code))
}

fn sasl_authenticate(env: &mut Env, v: i16) -> R {
    let any = env.any();
    let req = SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::from_static(b"x"));
    let r = env.call(any, v, &req)?;
    Ok(format!("error {} {:?}", r.error_code, r.error_message))
}

/// Deleting a credential nobody has: RESOURCE_NOT_FOUND, nothing changes.
fn alter_user_scram_credentials(env: &mut Env, v: i16) -> R {
    let any = env.any();
    let req = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        alter_user_scram_credentials_request::ScramCredentialDeletion::default()
            .with_name(s("version-matrix-ghost"))
            .with_mechanism(1),
    ]);
    let r = env.call(any, v, &req)?;
    let out: Vec<String> = r
        .results
        .iter()
        .map(|u| {
            format!(
                "{} error {} {:?}",
                u.user.as_str(),
                u.error_code,
                u.error_message
            )
        })
        .collect();
    Ok(out.join("; "))
}

fn describe_user_scram_credentials(env: &mut Env, v: i16) -> R {
    let any = env.any();
    let req = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
        describe_user_scram_credentials_request::UserName::default()
            .with_name(s("version-matrix-ghost")),
    ]));
    let r = env.call(any, v, &req)?;
    let out: Vec<String> = r
        .results
        .iter()
        .map(|u| {
            format!(
                "{} error {} {:?}",
                u.user.as_str(),
                u.error_code,
                u.error_message
            )
        })
        .collect();
    Ok(format!("error {} {}", r.error_code, out.join("; ")))
}

/// A validate-only quota for a client and an unknown key: the first accepted, the second
/// INVALID_REQUEST with Kafka's message; nothing changes.
fn alter_client_quotas(env: &mut Env, v: i16) -> R {
    let any = env.any();
    let quota = |client: &str, key: &str| {
        alter_client_quotas_request::EntryData::default()
            .with_entity(vec![alter_client_quotas_request::EntityData::default()
                .with_entity_type(s("client-id"))
                .with_entity_name(Some(s(client)))])
            .with_ops(vec![alter_client_quotas_request::OpData::default()
                .with_key(s(key))
                .with_value(1024.0)])
    };
    let req = AlterClientQuotasRequest::default()
        .with_entries(vec![
            quota("version-matrix-a", "producer_byte_rate"),
            quota("version-matrix-b", "version_matrix_rate"),
        ])
        .with_validate_only(true);
    let r = env.call(any, v, &req)?;
    let mut out: Vec<String> = r
        .entries
        .iter()
        .map(|e| {
            let names: Vec<String> = e
                .entity
                .iter()
                .map(|d| format!("{}={:?}", d.entity_type.as_str(), d.entity_name))
                .collect();
            format!(
                "{} error {} {:?}",
                names.join(","),
                e.error_code,
                e.error_message
            )
        })
        .collect();
    out.sort();
    Ok(out.join("; "))
}

/// Quotas of a client nobody set: none; an unknown entity type: UNSUPPORTED_VERSION.
fn describe_client_quotas(env: &mut Env, v: i16) -> R {
    let any = env.any();
    let filter = |entity_type: &str| {
        DescribeClientQuotasRequest::default().with_components(vec![
            describe_client_quotas_request::ComponentData::default()
                .with_entity_type(s(entity_type))
                .with_match_type(0)
                .with_match(Some(s("version-matrix-ghost"))),
        ])
    };
    let known = env.call(any, v, &filter("client-id"))?;
    let unknown = env.call(any, v, &filter("version-matrix-type"))?;
    Ok(format!(
        "error {} entries {:?}; unknown type error {} {:?}",
        known.error_code,
        known.entries.map(|e| e.len()),
        unknown.error_code,
        unknown.error_message
    ))
}
