//! Valid requests to start from: for every API, its default (empty arrays and strings) and
//! populated forms (one or two elements in each array, names of a real topic and group), so
//! that mutations reach nested counts and the handlers behind a successful decode.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::batch;

/// The topic the seeds name; fuzz drivers create it (one partition) before sending frames.
pub const TOPIC: &str = "fuzz-a";
/// The consumer group the seeds name.
pub const GROUP: &str = "fuzz-g";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}
fn topic() -> TopicName {
    TopicName(s(TOPIC))
}
fn group() -> GroupId {
    GroupId(s(GROUP))
}
/// A fixed topic id, so that id-addressed versions carry a non-nil UUID.
fn topic_id() -> Uuid {
    Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)
}

/// Seed requests for `key`, or an empty list for an API the generator does not know.
pub fn requests(key: ApiKey) -> Vec<RequestKind> {
    record_apis(key)
        .or_else(|| topic_and_config_apis(key))
        .or_else(|| election_and_reassignment_apis(key))
        .or_else(|| quorum_apis(key))
        .or_else(|| classic_group_apis(key))
        .or_else(|| offset_and_group_apis(key))
        .or_else(|| transaction_apis(key))
        .or_else(|| sasl_and_scram_apis(key))
        .or_else(|| quota_and_telemetry_apis(key))
        .or_else(|| acl_apis(key))
        .or_else(|| share_group_apis(key))
        .or_else(|| share_group_offset_apis(key))
        .or_else(|| share_state_write_apis(key))
        .or_else(|| share_state_read_apis(key))
        .unwrap_or_default()
}

/// The seeds of Produce, Fetch and the other APIs on a partition's records and offsets.
fn record_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::Produce => produce(),
        ApiKey::Fetch => vec![R::Fetch(FetchRequest::default()), R::Fetch(fetch())],
        ApiKey::ListOffsets => vec![
            R::ListOffsets(ListOffsetsRequest::default()),
            R::ListOffsets(list_offsets()),
        ],
        ApiKey::OffsetForLeaderEpoch => vec![
            R::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default()),
            R::OffsetForLeaderEpoch(offset_for_leader_epoch()),
        ],
        ApiKey::DeleteRecords => vec![
            R::DeleteRecords(DeleteRecordsRequest::default()),
            R::DeleteRecords(
                DeleteRecordsRequest::default()
                    .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            delete_records_request::DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(0),
                            delete_records_request::DeleteRecordsPartition::default()
                                .with_partition_index(1)
                                .with_offset(-1),
                        ])])
                    .with_timeout_ms(1000),
            ),
        ],
        ApiKey::DescribeProducers => vec![
            R::DescribeProducers(DescribeProducersRequest::default()),
            R::DescribeProducers(DescribeProducersRequest::default().with_topics(vec![
                describe_producers_request::TopicRequest::default()
                    .with_name(topic())
                    .with_partition_indexes(vec![0, 1]),
            ])),
        ],
        ApiKey::DescribeLogDirs => vec![
            R::DescribeLogDirs(DescribeLogDirsRequest::default()),
            R::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(Some(vec![
                describe_log_dirs_request::DescribableLogDirTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![0, 1]),
            ]))),
        ],
        _ => return None,
    })
}

/// The seeds of Metadata, ApiVersions, and the topic, cluster and config APIs.
fn topic_and_config_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::Metadata => metadata(),
        ApiKey::ApiVersions => vec![
            R::ApiVersions(ApiVersionsRequest::default()),
            R::ApiVersions(
                ApiVersionsRequest::default()
                    .with_client_software_name(s("brook-fuzz"))
                    .with_client_software_version(s("0.1")),
            ),
        ],
        ApiKey::CreateTopics => create_topics(),
        ApiKey::DeleteTopics => vec![
            R::DeleteTopics(DeleteTopicsRequest::default()),
            R::DeleteTopics(
                DeleteTopicsRequest::default()
                    .with_topic_names(vec![TopicName(s("fuzz-missing"))])
                    .with_topics(vec![delete_topics_request::DeleteTopicState::default()
                        .with_name(Some(TopicName(s("fuzz-missing"))))])
                    .with_timeout_ms(1000),
            ),
        ],
        ApiKey::CreatePartitions => vec![
            R::CreatePartitions(CreatePartitionsRequest::default()),
            R::CreatePartitions(create_partitions()),
        ],
        ApiKey::DescribeConfigs => vec![
            R::DescribeConfigs(DescribeConfigsRequest::default()),
            R::DescribeConfigs(describe_configs()),
        ],
        ApiKey::AlterConfigs => vec![
            R::AlterConfigs(AlterConfigsRequest::default()),
            R::AlterConfigs(alter_configs()),
        ],
        ApiKey::IncrementalAlterConfigs => vec![
            R::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default()),
            R::IncrementalAlterConfigs(incremental_alter_configs()),
        ],
        ApiKey::DescribeCluster => vec![R::DescribeCluster(DescribeClusterRequest::default())],
        ApiKey::DescribeTopicPartitions => vec![
            R::DescribeTopicPartitions(DescribeTopicPartitionsRequest::default()),
            R::DescribeTopicPartitions(
                DescribeTopicPartitionsRequest::default()
                    .with_topics(vec![
                        describe_topic_partitions_request::TopicRequest::default()
                            .with_name(topic()),
                    ])
                    .with_response_partition_limit(1)
                    .with_cursor(Some(
                        describe_topic_partitions_request::Cursor::default()
                            .with_topic_name(topic())
                            .with_partition_index(1),
                    )),
            ),
        ],
        ApiKey::ListConfigResources => vec![
            R::ListConfigResources(ListConfigResourcesRequest::default()),
            R::ListConfigResources(
                ListConfigResourcesRequest::default().with_resource_types(vec![2, 4, 16, 32]),
            ),
        ],
        _ => return None,
    })
}

/// The seeds of leader elections, reassignments and feature updates.
fn election_and_reassignment_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::ElectLeaders => vec![
            R::ElectLeaders(ElectLeadersRequest::default()),
            R::ElectLeaders(
                ElectLeadersRequest::default()
                    .with_election_type(1)
                    .with_topic_partitions(Some(vec![
                        elect_leaders_request::TopicPartitions::default()
                            .with_topic(topic())
                            .with_partitions(vec![0, 1, 7]),
                    ])),
            ),
        ],
        ApiKey::AlterPartitionReassignments => vec![
            R::AlterPartitionReassignments(AlterPartitionReassignmentsRequest::default()),
            R::AlterPartitionReassignments(
                AlterPartitionReassignmentsRequest::default()
                    .with_allow_replication_factor_change(false)
                    .with_topics(vec![alter_partition_reassignments_request::ReassignableTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            alter_partition_reassignments_request::ReassignablePartition::default()
                                .with_partition_index(0)
                                .with_replicas(Some(vec![BrokerId(1), BrokerId(2)])),
                            alter_partition_reassignments_request::ReassignablePartition::default()
                                .with_partition_index(7),
                        ])]),
            ),
        ],
        ApiKey::ListPartitionReassignments => vec![
            R::ListPartitionReassignments(ListPartitionReassignmentsRequest::default()),
            R::ListPartitionReassignments(
                ListPartitionReassignmentsRequest::default().with_topics(Some(vec![
                    list_partition_reassignments_request::ListPartitionReassignmentsTopics::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![0, 1]),
                ])),
            ),
        ],
        ApiKey::UpdateFeatures => vec![
            R::UpdateFeatures(UpdateFeaturesRequest::default()),
            R::UpdateFeatures(
                UpdateFeaturesRequest::default()
                    .with_validate_only(true)
                    .with_feature_updates(vec![
                        update_features_request::FeatureUpdateKey::default()
                            .with_feature(s("transaction.version"))
                            .with_max_version_level(1)
                            .with_upgrade_type(2),
                    ]),
            ),
        ],
        _ => return None,
    })
}

/// The seeds of the metadata quorum's APIs.
fn quorum_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::DescribeQuorum => vec![
            R::DescribeQuorum(DescribeQuorumRequest::default()),
            R::DescribeQuorum(DescribeQuorumRequest::default().with_topics(vec![
                describe_quorum_request::TopicData::default()
                    .with_topic_name(TopicName(s("__cluster_metadata")))
                    .with_partitions(vec![
                        describe_quorum_request::PartitionData::default().with_partition_index(0),
                    ]),
            ])),
        ],
        // Ids no node has: a seed must not unregister the fuzzed broker.
        ApiKey::AddRaftVoter => vec![
            R::AddRaftVoter(AddRaftVoterRequest::default()),
            R::AddRaftVoter(
                AddRaftVoterRequest::default()
                    .with_voter_id(999)
                    .with_voter_directory_id(topic_id())
                    .with_listeners(vec![add_raft_voter_request::Listener::default()
                        .with_name(s("CONTROLLER"))
                        .with_host(s("127.0.0.1"))
                        .with_port(1)]),
            ),
        ],
        ApiKey::RemoveRaftVoter => vec![R::RemoveRaftVoter(
            RemoveRaftVoterRequest::default().with_voter_id(999),
        )],
        ApiKey::UnregisterBroker => vec![R::UnregisterBroker(
            UnregisterBrokerRequest::default().with_broker_id(BrokerId(999)),
        )],
        _ => return None,
    })
}

/// The seeds of the classic group protocol and the group listing APIs.
fn classic_group_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::FindCoordinator => vec![
            R::FindCoordinator(FindCoordinatorRequest::default()),
            R::FindCoordinator(
                FindCoordinatorRequest::default()
                    .with_key(s(GROUP))
                    .with_coordinator_keys(vec![s(GROUP), s("fuzz-h")]),
            ),
        ],
        ApiKey::JoinGroup => vec![
            R::JoinGroup(JoinGroupRequest::default()),
            R::JoinGroup(join_group()),
        ],
        ApiKey::SyncGroup => vec![
            R::SyncGroup(SyncGroupRequest::default()),
            R::SyncGroup(sync_group()),
        ],
        ApiKey::Heartbeat => vec![
            R::Heartbeat(HeartbeatRequest::default()),
            R::Heartbeat(
                HeartbeatRequest::default()
                    .with_group_id(group())
                    .with_generation_id(1)
                    .with_member_id(s("m-1")),
            ),
        ],
        ApiKey::LeaveGroup => vec![
            R::LeaveGroup(LeaveGroupRequest::default()),
            R::LeaveGroup(
                LeaveGroupRequest::default()
                    .with_group_id(group())
                    .with_member_id(s("m-1"))
                    .with_members(vec![leave_group_request::MemberIdentity::default()
                        .with_member_id(s("m-1"))
                        .with_reason(Some(s("fuzz")))]),
            ),
        ],
        ApiKey::DescribeGroups => vec![
            R::DescribeGroups(DescribeGroupsRequest::default()),
            R::DescribeGroups(
                DescribeGroupsRequest::default().with_groups(vec![group(), GroupId(s("fuzz-h"))]),
            ),
        ],
        ApiKey::ListGroups => vec![
            R::ListGroups(ListGroupsRequest::default()),
            R::ListGroups(
                ListGroupsRequest::default()
                    .with_states_filter(vec![s("Stable"), s("Empty")])
                    .with_types_filter(vec![s("classic")]),
            ),
        ],
        ApiKey::DeleteGroups => vec![
            R::DeleteGroups(DeleteGroupsRequest::default()),
            R::DeleteGroups(
                DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("fuzz-gone"))]),
            ),
        ],
        _ => return None,
    })
}

/// The seeds of committed offsets and the consumer (KIP-848) and streams (KIP-1071) groups.
fn offset_and_group_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::OffsetCommit => vec![
            R::OffsetCommit(OffsetCommitRequest::default()),
            R::OffsetCommit(offset_commit()),
        ],
        ApiKey::OffsetFetch => vec![
            R::OffsetFetch(OffsetFetchRequest::default()),
            R::OffsetFetch(offset_fetch()),
        ],
        ApiKey::OffsetDelete => vec![
            R::OffsetDelete(OffsetDeleteRequest::default()),
            R::OffsetDelete(
                OffsetDeleteRequest::default()
                    .with_group_id(group())
                    .with_topics(vec![
                        offset_delete_request::OffsetDeleteRequestTopic::default()
                            .with_name(topic())
                            .with_partitions(vec![
                                offset_delete_request::OffsetDeleteRequestPartition::default(),
                            ]),
                    ]),
            ),
        ],
        ApiKey::ConsumerGroupHeartbeat => vec![
            R::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest::default()),
            R::ConsumerGroupHeartbeat(consumer_group_heartbeat()),
        ],
        ApiKey::ConsumerGroupDescribe => vec![
            R::ConsumerGroupDescribe(ConsumerGroupDescribeRequest::default()),
            R::ConsumerGroupDescribe(
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![group()]),
            ),
        ],
        ApiKey::StreamsGroupHeartbeat => vec![
            R::StreamsGroupHeartbeat(StreamsGroupHeartbeatRequest::default()),
            R::StreamsGroupHeartbeat(
                StreamsGroupHeartbeatRequest::default()
                    .with_group_id(s("fuzz-streams").into())
                    .with_member_id(s("fuzz-member"))
                    .with_member_epoch(0)
                    .with_rebalance_timeout_ms(1000)
                    .with_topology(Some(
                        streams_group_heartbeat_request::Topology::default().with_subtopologies(
                            vec![streams_group_heartbeat_request::Subtopology::default()
                                .with_subtopology_id(s("0"))
                                .with_source_topics(vec![s("fuzz-topic").into()])],
                        ),
                    )),
            ),
        ],
        ApiKey::StreamsGroupDescribe => vec![
            R::StreamsGroupDescribe(StreamsGroupDescribeRequest::default()),
            R::StreamsGroupDescribe(
                StreamsGroupDescribeRequest::default()
                    .with_group_ids(vec![s("fuzz-streams").into()]),
            ),
        ],
        _ => return None,
    })
}

/// The seeds of the transaction APIs.
fn transaction_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::InitProducerId => vec![
            R::InitProducerId(InitProducerIdRequest::default()),
            R::InitProducerId(
                InitProducerIdRequest::default()
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id((-1).into())
                    .with_producer_epoch(-1),
            ),
        ],
        ApiKey::TxnOffsetCommit => vec![
            R::TxnOffsetCommit(TxnOffsetCommitRequest::default()),
            R::TxnOffsetCommit(txn_offset_commit()),
        ],
        ApiKey::AddPartitionsToTxn => vec![
            R::AddPartitionsToTxn(AddPartitionsToTxnRequest::default()),
            R::AddPartitionsToTxn(add_partitions_to_txn()),
        ],
        ApiKey::AddOffsetsToTxn => vec![
            R::AddOffsetsToTxn(AddOffsetsToTxnRequest::default()),
            R::AddOffsetsToTxn(
                AddOffsetsToTxnRequest::default()
                    .with_transactional_id(TransactionalId(s("fuzz-txn")))
                    .with_producer_id(1.into())
                    .with_group_id(group()),
            ),
        ],
        ApiKey::EndTxn => vec![
            R::EndTxn(EndTxnRequest::default()),
            R::EndTxn(
                EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(s("fuzz-txn")))
                    .with_producer_id(1.into())
                    .with_committed(true),
            ),
        ],
        ApiKey::DescribeTransactions => vec![
            R::DescribeTransactions(DescribeTransactionsRequest::default()),
            R::DescribeTransactions(
                DescribeTransactionsRequest::default()
                    .with_transactional_ids(vec![TransactionalId(s("fuzz-txn"))]),
            ),
        ],
        ApiKey::ListTransactions => vec![
            R::ListTransactions(ListTransactionsRequest::default()),
            R::ListTransactions(
                ListTransactionsRequest::default()
                    .with_state_filters(vec![s("Ongoing"), s("NoSuchState")])
                    .with_producer_id_filters(vec![1.into()])
                    .with_duration_filter(1000)
                    .with_transactional_id_pattern(Some(s("fuzz.*"))),
            ),
        ],
        ApiKey::WriteTxnMarkers => vec![
            R::WriteTxnMarkers(WriteTxnMarkersRequest::default()),
            R::WriteTxnMarkers(write_txn_markers(true)),
            R::WriteTxnMarkers(write_txn_markers(false)),
        ],
        _ => return None,
    })
}

/// The seeds of SASL and the SCRAM credential APIs.
fn sasl_and_scram_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        // Once past (or without) a SASL exchange, the handshake answers ILLEGAL_SASL_STATE.
        ApiKey::SaslHandshake => vec![
            R::SaslHandshake(SaslHandshakeRequest::default()),
            R::SaslHandshake(SaslHandshakeRequest::default().with_mechanism(s("PLAIN"))),
        ],
        ApiKey::SaslAuthenticate => vec![
            R::SaslAuthenticate(SaslAuthenticateRequest::default()),
            R::SaslAuthenticate(
                SaslAuthenticateRequest::default()
                    .with_auth_bytes(Bytes::from_static(b"\0fuzz\0secret")),
            ),
        ],
        ApiKey::AlterUserScramCredentials => vec![
            R::AlterUserScramCredentials(AlterUserScramCredentialsRequest::default()),
            R::AlterUserScramCredentials(
                AlterUserScramCredentialsRequest::default()
                    .with_deletions(vec![
                        alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                            .with_name(s("fuzz-ghost"))
                            .with_mechanism(1),
                    ])
                    .with_upsertions(vec![
                        alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                            .with_name(s("fuzz-user"))
                            .with_mechanism(2)
                            .with_iterations(100)
                            .with_salt(Bytes::from_static(b"salt"))
                            .with_salted_password(Bytes::from_static(&[7; 64])),
                    ]),
            ),
        ],
        ApiKey::DescribeUserScramCredentials => vec![
            R::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest::default()),
            R::DescribeUserScramCredentials(
                DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                    describe_user_scram_credentials_request::UserName::default()
                        .with_name(s("fuzz-user")),
                ])),
            ),
        ],
        _ => return None,
    })
}

/// The seeds of client quotas and client telemetry.
fn quota_and_telemetry_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::DescribeClientQuotas => vec![
            R::DescribeClientQuotas(DescribeClientQuotasRequest::default()),
            R::DescribeClientQuotas(
                DescribeClientQuotasRequest::default()
                    .with_components(vec![
                        describe_client_quotas_request::ComponentData::default()
                            .with_entity_type(s("user"))
                            .with_match_type(0)
                            .with_match(Some(s("fuzz-user"))),
                        describe_client_quotas_request::ComponentData::default()
                            .with_entity_type(s("client-id"))
                            .with_match_type(1),
                    ])
                    .with_strict(true),
            ),
        ],
        ApiKey::AlterClientQuotas => vec![
            R::AlterClientQuotas(AlterClientQuotasRequest::default()),
            R::AlterClientQuotas(
                AlterClientQuotasRequest::default()
                    .with_entries(vec![alter_client_quotas_request::EntryData::default()
                        .with_entity(vec![alter_client_quotas_request::EntityData::default()
                            .with_entity_type(s("client-id"))
                            .with_entity_name(Some(s("fuzz-client")))])
                        .with_ops(vec![alter_client_quotas_request::OpData::default()
                            .with_key(s("producer_byte_rate"))
                            .with_value(1048576.0)])])
                    .with_validate_only(true),
            ),
        ],
        ApiKey::GetTelemetrySubscriptions => vec![
            R::GetTelemetrySubscriptions(GetTelemetrySubscriptionsRequest::default()),
            R::GetTelemetrySubscriptions(
                GetTelemetrySubscriptionsRequest::default().with_client_instance_id(topic_id()),
            ),
        ],
        ApiKey::PushTelemetry => vec![
            R::PushTelemetry(PushTelemetryRequest::default()),
            R::PushTelemetry(
                PushTelemetryRequest::default()
                    .with_client_instance_id(topic_id())
                    .with_compression_type(4)
                    .with_metrics(Bytes::from_static(&[0x0a, 0x02, 0x12, 0x00])),
            ),
        ],
        _ => return None,
    })
}

/// The seeds of the ACL APIs.
fn acl_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::CreateAcls => vec![
            R::CreateAcls(CreateAclsRequest::default()),
            R::CreateAcls(CreateAclsRequest::default().with_creations(vec![
                create_acls_request::AclCreation::default()
                    .with_resource_type(2)
                    .with_resource_name(s("fuzz-topic"))
                    .with_resource_pattern_type(3)
                    .with_principal(s("User:fuzz"))
                    .with_host(s("*"))
                    .with_operation(3)
                    .with_permission_type(3),
            ])),
        ],
        ApiKey::DescribeAcls => vec![
            R::DescribeAcls(DescribeAclsRequest::default()),
            R::DescribeAcls(
                DescribeAclsRequest::default()
                    .with_resource_type_filter(1)
                    .with_pattern_type_filter(1)
                    .with_operation(1)
                    .with_permission_type(1),
            ),
        ],
        ApiKey::DeleteAcls => vec![
            R::DeleteAcls(DeleteAclsRequest::default()),
            R::DeleteAcls(DeleteAclsRequest::default().with_filters(vec![
                delete_acls_request::DeleteAclsFilter::default()
                    .with_resource_type_filter(1)
                    .with_pattern_type_filter(1)
                    .with_operation(1)
                    .with_permission_type(1),
            ])),
        ],
        _ => return None,
    })
}

/// The seeds of the share group APIs (KIP-932).
fn share_group_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::ShareGroupHeartbeat => vec![
            R::ShareGroupHeartbeat(ShareGroupHeartbeatRequest::default()),
            R::ShareGroupHeartbeat(
                ShareGroupHeartbeatRequest::default()
                    .with_group_id(s("fuzz-share").into())
                    .with_member_id(s("fuzz-member"))
                    .with_member_epoch(0)
                    .with_subscribed_topic_names(Some(vec![s("fuzz-topic").into()])),
            ),
        ],
        ApiKey::ShareGroupDescribe => vec![
            R::ShareGroupDescribe(ShareGroupDescribeRequest::default()),
            R::ShareGroupDescribe(
                ShareGroupDescribeRequest::default().with_group_ids(vec![s("fuzz-share").into()]),
            ),
        ],
        ApiKey::ShareFetch => vec![
            R::ShareFetch(ShareFetchRequest::default()),
            R::ShareFetch(
                ShareFetchRequest::default()
                    .with_group_id(Some(s("fuzz-share").into()))
                    .with_member_id(Some(s("fuzz-member")))
                    .with_share_session_epoch(0)
                    .with_max_wait_ms(10),
            ),
        ],
        ApiKey::ShareAcknowledge => vec![
            R::ShareAcknowledge(ShareAcknowledgeRequest::default()),
            R::ShareAcknowledge(
                ShareAcknowledgeRequest::default()
                    .with_group_id(Some(s("fuzz-share").into()))
                    .with_member_id(Some(s("fuzz-member")))
                    .with_share_session_epoch(1),
            ),
        ],
        _ => return None,
    })
}

/// The seeds of the share group offset APIs.
fn share_group_offset_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::DescribeShareGroupOffsets => {
            use describe_share_group_offsets_request as r;
            let group = |topics| {
                r::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(s("fuzz-share")))
                    .with_topics(topics)
            };
            vec![
                R::DescribeShareGroupOffsets(DescribeShareGroupOffsetsRequest::default()),
                R::DescribeShareGroupOffsets(
                    DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                        group(None),
                        group(Some(vec![
                            r::DescribeShareGroupOffsetsRequestTopic::default()
                                .with_topic_name(TopicName(s(TOPIC)))
                                .with_partitions(vec![0, 1]),
                        ])),
                    ]),
                ),
            ]
        }
        ApiKey::AlterShareGroupOffsets => {
            use alter_share_group_offsets_request as r;
            vec![
                R::AlterShareGroupOffsets(AlterShareGroupOffsetsRequest::default()),
                R::AlterShareGroupOffsets(
                    AlterShareGroupOffsetsRequest::default()
                        .with_group_id(GroupId(s("fuzz-share")))
                        .with_topics(vec![r::AlterShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(TopicName(s(TOPIC)))
                            .with_partitions(vec![
                                r::AlterShareGroupOffsetsRequestPartition::default()
                                    .with_partition_index(0)
                                    .with_start_offset(0),
                            ])]),
                ),
            ]
        }
        ApiKey::DeleteShareGroupOffsets => {
            use delete_share_group_offsets_request as r;
            vec![
                R::DeleteShareGroupOffsets(DeleteShareGroupOffsetsRequest::default()),
                R::DeleteShareGroupOffsets(
                    DeleteShareGroupOffsetsRequest::default()
                        .with_group_id(GroupId(s("fuzz-share")))
                        .with_topics(vec![r::DeleteShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(TopicName(s(TOPIC)))]),
                ),
            ]
        }
        _ => return None,
    })
}

/// The seeds of the share coordinator's state APIs that write.
fn share_state_write_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::InitializeShareGroupState => {
            use initialize_share_group_state_request as r;
            vec![
                R::InitializeShareGroupState(InitializeShareGroupStateRequest::default()),
                R::InitializeShareGroupState(
                    InitializeShareGroupStateRequest::default()
                        .with_group_id(s("fuzz-share"))
                        .with_topics(vec![r::InitializeStateData::default()
                            .with_topic_id(topic_id())
                            .with_partitions(
                                vec![r::PartitionData::default().with_partition(0)],
                            )]),
                ),
            ]
        }
        ApiKey::WriteShareGroupState => {
            use write_share_group_state_request as r;
            vec![
                R::WriteShareGroupState(WriteShareGroupStateRequest::default()),
                R::WriteShareGroupState(
                    WriteShareGroupStateRequest::default()
                        .with_group_id(s("fuzz-share"))
                        .with_topics(vec![r::WriteStateData::default()
                            .with_topic_id(topic_id())
                            .with_partitions(vec![r::PartitionData::default()
                                .with_partition(0)
                                .with_state_batches(vec![r::StateBatch::default()
                                    .with_first_offset(0)
                                    .with_last_offset(1)])])]),
                ),
            ]
        }
        ApiKey::DeleteShareGroupState => {
            use delete_share_group_state_request as r;
            vec![
                R::DeleteShareGroupState(DeleteShareGroupStateRequest::default()),
                R::DeleteShareGroupState(
                    DeleteShareGroupStateRequest::default()
                        .with_group_id(s("fuzz-share"))
                        .with_topics(vec![r::DeleteStateData::default()
                            .with_topic_id(topic_id())
                            .with_partitions(
                                vec![r::PartitionData::default().with_partition(0)],
                            )]),
                ),
            ]
        }
        _ => return None,
    })
}

/// The seeds of the share coordinator's state APIs that read.
fn share_state_read_apis(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::ReadShareGroupState => {
            use read_share_group_state_request as r;
            vec![
                R::ReadShareGroupState(ReadShareGroupStateRequest::default()),
                R::ReadShareGroupState(
                    ReadShareGroupStateRequest::default()
                        .with_group_id(s("fuzz-share"))
                        .with_topics(vec![r::ReadStateData::default()
                            .with_topic_id(topic_id())
                            .with_partitions(
                                vec![r::PartitionData::default().with_partition(0)],
                            )]),
                ),
            ]
        }
        ApiKey::ReadShareGroupStateSummary => {
            use read_share_group_state_summary_request as r;
            vec![
                R::ReadShareGroupStateSummary(ReadShareGroupStateSummaryRequest::default()),
                R::ReadShareGroupStateSummary(
                    ReadShareGroupStateSummaryRequest::default()
                        .with_group_id(s("fuzz-share"))
                        .with_topics(vec![r::ReadStateSummaryData::default()
                            .with_topic_id(topic_id())
                            .with_partitions(
                                vec![r::PartitionData::default().with_partition(0)],
                            )]),
                ),
            ]
        }
        _ => return None,
    })
}

/// A COMMIT or ABORT marker for producer 1 on partitions 0 and 1 of the seeds' topic.
fn write_txn_markers(commit: bool) -> WriteTxnMarkersRequest {
    use write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
    WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(1))
        .with_producer_epoch(0)
        .with_transaction_result(commit)
        .with_coordinator_epoch(0)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(topic())
            .with_partition_indexes(vec![0, 1])])])
}

/// Produce requests carrying each of the record batches in [`batch::cases`].
fn produce() -> Vec<RequestKind> {
    let mut out = vec![RequestKind::Produce(ProduceRequest::default())];
    for (acks, records) in batch::cases()
        .into_iter()
        .enumerate()
        .map(|(i, b)| ([1i16, -1, 0][i % 3], b))
    {
        out.push(RequestKind::Produce(produce_with(acks, records)));
    }
    out
}

fn produce_with(acks: i16, records: Bytes) -> ProduceRequest {
    use produce_request::{PartitionProduceData, TopicProduceData};
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(1000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic())
            .with_topic_id(topic_id())
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

fn fetch() -> FetchRequest {
    use fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic())
            .with_topic_id(topic_id())
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(0)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])])
        .with_forgotten_topics_data(vec![ForgottenTopic::default()
            .with_topic(TopicName(s("fuzz-old")))
            .with_partitions(vec![0, 1])])
        .with_rack_id(s("rack"))
}

fn list_offsets() -> ListOffsetsRequest {
    use list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic())
            .with_partitions(vec![
                ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1),
                ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-2),
            ])])
        .with_timeout_ms(1000)
}

fn metadata() -> Vec<RequestKind> {
    use metadata_request::MetadataRequestTopic;
    let named = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic())),
            MetadataRequestTopic::default().with_name(Some(TopicName(s("fuzz-missing")))),
        ]))
        .with_allow_auto_topic_creation(false);
    vec![
        RequestKind::Metadata(MetadataRequest::default()),
        RequestKind::Metadata(MetadataRequest::default().with_topics(None)),
        RequestKind::Metadata(named),
    ]
}

fn create_topics() -> Vec<RequestKind> {
    use create_topics_request::{CreatableTopic, CreatableTopicConfig};
    let topic = |name: &str| {
        CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(s("retention.ms"))
                .with_value(Some(s("60000")))])
    };
    vec![
        RequestKind::CreateTopics(CreateTopicsRequest::default()),
        RequestKind::CreateTopics(
            CreateTopicsRequest::default()
                .with_topics(vec![topic("fuzz-new"), topic("fuzz-b")])
                .with_timeout_ms(1000)
                .with_validate_only(true),
        ),
        // Creates once, then answers TOPIC_ALREADY_EXISTS.
        RequestKind::CreateTopics(
            CreateTopicsRequest::default()
                .with_topics(vec![topic("fuzz-created")])
                .with_timeout_ms(1000),
        ),
    ]
}

fn offset_for_leader_epoch() -> OffsetForLeaderEpochRequest {
    use offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
    OffsetForLeaderEpochRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(topic())
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(0)])])
}

fn describe_configs() -> DescribeConfigsRequest {
    use describe_configs_request::DescribeConfigsResource;
    DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(TOPIC))
            .with_configuration_keys(Some(vec![s("retention.ms"), s("cleanup.policy")])),
        DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s("1"))
            .with_configuration_keys(None),
    ])
}

fn create_partitions() -> CreatePartitionsRequest {
    use create_partitions_request::CreatePartitionsTopic;
    CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic())
            .with_count(2)
            .with_assignments(None)])
        .with_timeout_ms(1000)
        .with_validate_only(true)
}

fn incremental_alter_configs() -> IncrementalAlterConfigsRequest {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    IncrementalAlterConfigsRequest::default()
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(TOPIC))
            .with_configs(vec![AlterableConfig::default()
                .with_name(s("retention.ms"))
                .with_config_operation(0)
                .with_value(Some(s("120000")))])])
        .with_validate_only(true)
}

fn alter_configs() -> AlterConfigsRequest {
    use alter_configs_request::{AlterConfigsResource, AlterableConfig};
    AlterConfigsRequest::default()
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(TOPIC))
            .with_configs(vec![AlterableConfig::default()
                .with_name(s("retention.ms"))
                .with_value(Some(s("120000")))])])
        .with_validate_only(true)
}

fn join_group() -> JoinGroupRequest {
    use join_group_request::JoinGroupRequestProtocol;
    JoinGroupRequest::default()
        .with_group_id(group())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(1000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(subscription())])
}

/// A version-0 ConsumerProtocolSubscription naming the seed topic.
fn subscription() -> Bytes {
    let mut b = vec![0, 0, 0, 0, 0, 1];
    b.extend_from_slice(&(TOPIC.len() as i16).to_be_bytes());
    b.extend_from_slice(TOPIC.as_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(b)
}

fn sync_group() -> SyncGroupRequest {
    use sync_group_request::SyncGroupRequestAssignment;
    SyncGroupRequest::default()
        .with_group_id(group())
        .with_generation_id(1)
        .with_member_id(s("m-1"))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s("m-1"))
            .with_assignment(subscription())])
}

fn offset_commit() -> OffsetCommitRequest {
    use offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    OffsetCommitRequest::default()
        .with_group_id(group())
        .with_generation_id_or_member_epoch(-1)
        .with_retention_time_ms(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic())
            .with_topic_id(topic_id())
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(0)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(s("m")))])])
}

fn txn_offset_commit() -> TxnOffsetCommitRequest {
    use txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic};
    TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s("fuzz-t")))
        .with_group_id(group())
        .with_producer_id(ProducerId(1))
        .with_producer_epoch(0)
        .with_generation_id(-1)
        .with_member_id(s(""))
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic())
            .with_topic_id(topic_id())
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(0)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(s("m")))])])
}

fn add_partitions_to_txn() -> AddPartitionsToTxnRequest {
    use add_partitions_to_txn_request::{AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction};
    let topics = vec![AddPartitionsToTxnTopic::default()
        .with_name(TopicName(s("fuzz-topic")))
        .with_partitions(vec![0, 1])];
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s("fuzz-txn")))
        .with_v3_and_below_producer_id(1.into())
        .with_v3_and_below_topics(topics.clone())
        .with_transactions(vec![AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(s("fuzz-txn")))
            .with_producer_id(1.into())
            .with_verify_only(true)
            .with_topics(topics)])
}

fn offset_fetch() -> OffsetFetchRequest {
    use offset_fetch_request::OffsetFetchRequestTopics;
    use offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopic};
    OffsetFetchRequest::default()
        .with_group_id(group())
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic())
            .with_partition_indexes(vec![0, 1])]))
        .with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(group())
            .with_member_epoch(-1)
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(topic())
                .with_topic_id(topic_id())
                .with_partition_indexes(vec![0])]))])
}

fn consumer_group_heartbeat() -> ConsumerGroupHeartbeatRequest {
    use consumer_group_heartbeat_request::TopicPartitions;
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("fuzz-kip848")))
        .with_member_id(s("fuzz-member-0000000000"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(1000)
        .with_subscribed_topic_names(Some(vec![topic()]))
        .with_server_assignor(Some(s("uniform")))
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic_id(topic_id())
            .with_partitions(vec![0])]))
}
