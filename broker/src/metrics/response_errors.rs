//! The error codes a response carries, for `brook_request_errors_total`.
//!
//! Mirrors Kafka's `AbstractResponse.errorCounts()`, which `RequestChannel` feeds into the
//! `ErrorsPerSec` meter: every error code in the response counts once, at whatever level it
//! sits (top level, topic, partition, group, member). Unlike Kafka, `NONE` is not counted:
//! `brook_requests_total` already counts the requests.

use kafka_protocol::messages::*;

/// Visits every error code in a response, zero or not.
pub trait ResponseErrors {
    /// Calls `f` with each error code of the response.
    fn error_codes(&self, f: &mut dyn FnMut(i16));
}

/// Responses whose only error code is the top-level `error_code`.
macro_rules! top_level_only {
    ($($t:ty),* $(,)?) => {
        $(impl ResponseErrors for $t {
            fn error_codes(&self, f: &mut dyn FnMut(i16)) {
                f(self.error_code);
            }
        })*
    };
}

top_level_only!(
    ApiVersionsResponse,
    InitProducerIdResponse,
    DescribeClusterResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    ConsumerGroupHeartbeatResponse,
    ShareGroupHeartbeatResponse,
    StreamsGroupHeartbeatResponse,
    ListGroupsResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    ListTransactionsResponse,
    DescribeAclsResponse,
    SaslHandshakeResponse,
    SaslAuthenticateResponse,
    DescribeClientQuotasResponse,
    UpdateFeaturesResponse,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
    ListConfigResourcesResponse,
    AddRaftVoterResponse,
    RemoveRaftVoterResponse,
    UnregisterBrokerResponse,
);

/// Responses with one error code per element of a list (topics, groups, resources).
macro_rules! per_element {
    ($($t:ty => $list:ident),* $(,)?) => {
        $(impl ResponseErrors for $t {
            fn error_codes(&self, f: &mut dyn FnMut(i16)) {
                self.$list.iter().for_each(|e| f(e.error_code));
            }
        })*
    };
}

per_element!(
    CreateAclsResponse => results,
    DeleteAclsResponse => filter_results,
    CreateTopicsResponse => topics,
    DeleteTopicsResponse => responses,
    CreatePartitionsResponse => results,
    DescribeConfigsResponse => results,
    AlterConfigsResponse => responses,
    IncrementalAlterConfigsResponse => responses,
    ConsumerGroupDescribeResponse => groups,
    ShareGroupDescribeResponse => groups,
    StreamsGroupDescribeResponse => groups,
    DescribeGroupsResponse => groups,
    DeleteGroupsResponse => results,
    DescribeTransactionsResponse => transaction_states,
    AlterUserScramCredentialsResponse => results,
    DescribeUserScramCredentialsResponse => results,
    AlterClientQuotasResponse => entries,
);

/// Responses with one error code per partition of each topic, and with `top:` one at the
/// top level too.
macro_rules! per_partition {
    (top: $($t:ty => $topics:ident . $partitions:ident),* $(,)?) => {
        $(impl ResponseErrors for $t {
            fn error_codes(&self, f: &mut dyn FnMut(i16)) {
                f(self.error_code);
                for t in &self.$topics {
                    t.$partitions.iter().for_each(|p| f(p.error_code));
                }
            }
        })*
    };
    ($($t:ty => $topics:ident . $partitions:ident),* $(,)?) => {
        $(impl ResponseErrors for $t {
            fn error_codes(&self, f: &mut dyn FnMut(i16)) {
                for t in &self.$topics {
                    t.$partitions.iter().for_each(|p| f(p.error_code));
                }
            }
        })*
    };
}

per_partition!(
    ProduceResponse => responses.partition_responses,
    ListOffsetsResponse => topics.partitions,
    OffsetForLeaderEpochResponse => topics.partitions,
    OffsetCommitResponse => topics.partitions,
    TxnOffsetCommitResponse => topics.partitions,
    DescribeProducersResponse => topics.partitions,
    InitializeShareGroupStateResponse => results.partitions,
    ReadShareGroupStateResponse => results.partitions,
    WriteShareGroupStateResponse => results.partitions,
    DeleteShareGroupStateResponse => results.partitions,
    ReadShareGroupStateSummaryResponse => results.partitions,
);

per_partition!(top:
    FetchResponse => responses.partitions,
    AlterShareGroupOffsetsResponse => responses.partitions,
    ShareAcknowledgeResponse => responses.partitions,
    OffsetDeleteResponse => topics.partitions,
);

impl ResponseErrors for ShareFetchResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        f(self.error_code);
        for t in &self.responses {
            for p in &t.partitions {
                f(p.error_code);
                f(p.acknowledge_error_code);
            }
        }
    }
}

impl ResponseErrors for DescribeShareGroupOffsetsResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        for g in &self.groups {
            f(g.error_code);
            for t in &g.topics {
                t.partitions.iter().for_each(|p| f(p.error_code));
            }
        }
    }
}

impl ResponseErrors for DeleteShareGroupOffsetsResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        f(self.error_code);
        self.responses.iter().for_each(|t| f(t.error_code));
    }
}

impl ResponseErrors for MetadataResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        f(self.error_code);
        for t in &self.topics {
            f(t.error_code);
            t.partitions.iter().for_each(|p| f(p.error_code));
        }
    }
}

impl ResponseErrors for FindCoordinatorResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        // Up to v3 the answer is at the top level; from v4 one per key.
        f(self.error_code);
        self.coordinators.iter().for_each(|c| f(c.error_code));
    }
}

impl ResponseErrors for LeaveGroupResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        f(self.error_code);
        self.members.iter().for_each(|m| f(m.error_code));
    }
}

impl ResponseErrors for OffsetFetchResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        // Up to v7 one group at the top level; from v8 a list of groups.
        f(self.error_code);
        for t in &self.topics {
            t.partitions.iter().for_each(|p| f(p.error_code));
        }
        for g in &self.groups {
            f(g.error_code);
            for t in &g.topics {
                t.partitions.iter().for_each(|p| f(p.error_code));
            }
        }
    }
}

impl ResponseErrors for AddPartitionsToTxnResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        // Up to v3 one transaction's topics; from v4 (brokers' batched verification) a list.
        f(self.error_code);
        let v3 = self.results_by_topic_v3_and_below.iter();
        let v4 = self
            .results_by_transaction
            .iter()
            .flat_map(|t| &t.topic_results);
        for t in v3.chain(v4) {
            t.results_by_partition
                .iter()
                .for_each(|p| f(p.partition_error_code));
        }
    }
}

impl ResponseErrors for WriteTxnMarkersResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        for t in self.markers.iter().flat_map(|m| &m.topics) {
            t.partitions.iter().for_each(|p| f(p.error_code));
        }
    }
}

impl ResponseErrors for ElectLeadersResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        f(self.error_code);
        for t in &self.replica_election_results {
            t.partition_result.iter().for_each(|p| f(p.error_code));
        }
    }
}

impl ResponseErrors for AlterPartitionReassignmentsResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        f(self.error_code);
        for t in &self.responses {
            t.partitions.iter().for_each(|p| f(p.error_code));
        }
    }
}

impl ResponseErrors for ListPartitionReassignmentsResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        f(self.error_code);
    }
}

impl ResponseErrors for DescribeTopicPartitionsResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        for t in &self.topics {
            f(t.error_code);
            t.partitions.iter().for_each(|p| f(p.error_code));
        }
    }
}

impl ResponseErrors for DeleteRecordsResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        for t in &self.topics {
            t.partitions.iter().for_each(|p| f(p.error_code));
        }
    }
}

impl ResponseErrors for DescribeLogDirsResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        f(self.error_code);
        self.results.iter().for_each(|d| f(d.error_code));
    }
}

impl ResponseErrors for DescribeQuorumResponse {
    fn error_codes(&self, f: &mut dyn FnMut(i16)) {
        f(self.error_code);
        for t in &self.topics {
            t.partitions.iter().for_each(|p| f(p.error_code));
        }
    }
}
