//! Hostile request frames for Brook's fuzzers (issue 16), shared by the in-process run
//! (`broker/tests/fuzz_in_process.rs`, frames straight into `api::handle_frame`) and the live
//! run (`protocol-tests`' `fuzz_live`, frames over TCP to a `brook serve` process).
//!
//! Structure-aware: every frame starts from a valid request ([`seeds`]) encoded at one of the
//! versions a broker serves with the header version that API and version use; decoding it
//! through [`trace::TraceBuf`] finds its fields; [`mutate`] then lies about them. Cases are
//! proptest values ([`Generator::strategy`]), so a run is reproducible from its seed.
// Test functions may be long (a scenario reads top to bottom); the rest is held to clippy.toml's 70 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod batch;
pub mod mutate;
pub mod seeds;
pub mod trace;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use mutate::{Evil, Mutation, Target};
use trace::{Field, TraceBuf};

/// The client id every generated frame carries before mutation.
pub const CLIENT_ID: &str = "brook-fuzz";

/// An API and the versions to generate for it (a row of the broker's ApiVersions table).
#[derive(Debug, Clone, Copy)]
pub struct ApiRange {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

/// One generated frame: header and body, without the 4-byte size prefix.
#[derive(Debug, Clone)]
pub struct FuzzFrame {
    pub payload: Vec<u8>,
    /// A size prefix that lies about the payload's length, if any.
    pub size_lie: Option<SizeLie>,
    /// The API, version and mutations it came from, for reports.
    pub what: String,
}

/// A size prefix other than the payload's length.
#[derive(Debug, Clone, Copy)]
pub enum SizeLie {
    /// One of: -1, 0, 7 (below a header), i32::MAX, socket.request.max.bytes + 1.
    Fixed(i32),
    /// The true length plus this (a frame that ends early, or runs into the next one).
    Off(i8),
}

impl FuzzFrame {
    /// The frame with its size prefix, as it goes on the wire.
    pub fn wire(&self) -> Vec<u8> {
        let len = self.payload.len() as i32;
        let size = match self.size_lie {
            None => len,
            Some(SizeLie::Fixed(n)) => n,
            Some(SizeLie::Off(d)) => len.saturating_add(d as i32),
        };
        let mut out = Vec::with_capacity(4 + self.payload.len());
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&self.payload);
        out
    }
}

/// A valid encoded request and its traced fields.
#[derive(Debug, Clone)]
struct Template {
    key: ApiKey,
    version: i16,
    payload: Vec<u8>,
    fields: Vec<Field>,
    flexible: bool,
}

/// A generated case: which template, and what to do to it.
#[derive(Debug, Clone)]
pub struct Case {
    api: Index,
    version: Index,
    seed: Index,
    mutations: Vec<Mutation>,
    size_lie: Option<SizeLie>,
}

/// Decodes `payload`'s body as `key`'s request through a [`TraceBuf`].
macro_rules! trace_body {
    ($key:expr, $buf:expr, $version:expr, $($k:ident => $t:ty),* $(,)?) => {
        match $key {
            $(ApiKey::$k => <$t>::decode($buf, $version).map(drop).map_err(|e| e.to_string()),)*
            other => Err(format!("the fuzz generator has no decoder for {other:?}")),
        }
    };
}

/// Decodes header and body; `Ok` holds the fields and how many bytes were left over.
fn trace_request(key: ApiKey, version: i16, payload: &[u8]) -> Result<(Vec<Field>, usize), String> {
    let hv = key.request_header_version(version);
    let mut buf = TraceBuf::new(Bytes::copy_from_slice(payload), 0);
    RequestHeader::decode(&mut buf, hv).map_err(|e| e.to_string())?;
    trace_body!(key, &mut buf, version,
        Produce => ProduceRequest, Fetch => FetchRequest, ListOffsets => ListOffsetsRequest,
        Metadata => MetadataRequest, ApiVersions => ApiVersionsRequest,
        CreateTopics => CreateTopicsRequest, DeleteTopics => DeleteTopicsRequest,
        DeleteRecords => DeleteRecordsRequest,
        InitProducerId => InitProducerIdRequest,
        OffsetForLeaderEpoch => OffsetForLeaderEpochRequest,
        DescribeConfigs => DescribeConfigsRequest, CreatePartitions => CreatePartitionsRequest,
        AlterConfigs => AlterConfigsRequest,
        IncrementalAlterConfigs => IncrementalAlterConfigsRequest,
        DescribeCluster => DescribeClusterRequest, FindCoordinator => FindCoordinatorRequest,
        JoinGroup => JoinGroupRequest, SyncGroup => SyncGroupRequest,
        Heartbeat => HeartbeatRequest, LeaveGroup => LeaveGroupRequest,
        OffsetCommit => OffsetCommitRequest, OffsetFetch => OffsetFetchRequest,
        OffsetDelete => OffsetDeleteRequest, TxnOffsetCommit => TxnOffsetCommitRequest,
        DescribeGroups => DescribeGroupsRequest,
        ListGroups => ListGroupsRequest, DeleteGroups => DeleteGroupsRequest,
        ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest,
        ConsumerGroupDescribe => ConsumerGroupDescribeRequest,
        AddPartitionsToTxn => AddPartitionsToTxnRequest,
        AddOffsetsToTxn => AddOffsetsToTxnRequest, EndTxn => EndTxnRequest,
        DescribeTransactions => DescribeTransactionsRequest,
        ListTransactions => ListTransactionsRequest,
        WriteTxnMarkers => WriteTxnMarkersRequest,
        DescribeProducers => DescribeProducersRequest,
        DescribeTopicPartitions => DescribeTopicPartitionsRequest,
        ElectLeaders => ElectLeadersRequest,
        AlterPartitionReassignments => AlterPartitionReassignmentsRequest,
        ListPartitionReassignments => ListPartitionReassignmentsRequest,
        DescribeLogDirs => DescribeLogDirsRequest, DescribeQuorum => DescribeQuorumRequest,
        SaslHandshake => SaslHandshakeRequest, SaslAuthenticate => SaslAuthenticateRequest,
        AlterUserScramCredentials => AlterUserScramCredentialsRequest,
        DescribeUserScramCredentials => DescribeUserScramCredentialsRequest,
        DescribeClientQuotas => DescribeClientQuotasRequest,
        AlterClientQuotas => AlterClientQuotasRequest,
        CreateAcls => CreateAclsRequest, DescribeAcls => DescribeAclsRequest,
        DeleteAcls => DeleteAclsRequest,
        ShareGroupHeartbeat => ShareGroupHeartbeatRequest,
        ShareGroupDescribe => ShareGroupDescribeRequest,
        ShareFetch => ShareFetchRequest, ShareAcknowledge => ShareAcknowledgeRequest,
        StreamsGroupHeartbeat => StreamsGroupHeartbeatRequest,
        StreamsGroupDescribe => StreamsGroupDescribeRequest,
        InitializeShareGroupState => InitializeShareGroupStateRequest,
        ReadShareGroupState => ReadShareGroupStateRequest,
        WriteShareGroupState => WriteShareGroupStateRequest,
        DeleteShareGroupState => DeleteShareGroupStateRequest,
        ReadShareGroupStateSummary => ReadShareGroupStateSummaryRequest,
        DescribeShareGroupOffsets => DescribeShareGroupOffsetsRequest,
        AlterShareGroupOffsets => AlterShareGroupOffsetsRequest,
        DeleteShareGroupOffsets => DeleteShareGroupOffsetsRequest,
        AddRaftVoter => AddRaftVoterRequest, RemoveRaftVoter => RemoveRaftVoterRequest,
        UnregisterBroker => UnregisterBrokerRequest,
        UpdateFeatures => UpdateFeaturesRequest,
        GetTelemetrySubscriptions => GetTelemetrySubscriptionsRequest,
        PushTelemetry => PushTelemetryRequest, ListConfigResources => ListConfigResourcesRequest,
    )?;
    Ok((buf.fields(payload), buf.remaining_bytes()))
}

/// Whether the codec decodes `payload` as `key` v`version` (trailing bytes are ignored, as
/// the broker ignores them).
fn decodes(key: ApiKey, version: i16, payload: &[u8]) -> bool {
    trace_request(key, version, payload).is_ok()
}

/// Header and body of `req` at `version`, or `None` if the request cannot be encoded there.
fn encode(key: ApiKey, version: i16, req: &RequestKind) -> Option<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .ok()?;
    req.encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

/// The templates of one API and version: each seed that encodes there. A version no seed
/// encodes (Produce v0..v2, which kafka-protocol cannot write) borrows the lowest encodable
/// version's bodies under its own version number: the broker must refuse those cleanly.
fn templates(key: ApiKey, version: i16, max: i16) -> Vec<Template> {
    let seeds = seeds::requests(key);
    assert!(!seeds.is_empty(), "no fuzz seeds for {key:?}");
    for body_version in version..=max {
        let out: Vec<Template> = seeds
            .iter()
            .filter_map(|r| encode(key, body_version, r))
            .filter_map(|mut payload| {
                let (fields, left) = trace_request(key, body_version, &payload).ok()?;
                assert_eq!(
                    left, 0,
                    "{key:?} v{body_version}: a seed decodes to its end"
                );
                payload[2..4].copy_from_slice(&version.to_be_bytes());
                Some(Template {
                    key,
                    version,
                    payload,
                    fields,
                    flexible: key.request_header_version(body_version) >= 2,
                })
            })
            .collect();
        if !out.is_empty() {
            return out;
        }
    }
    panic!("no fuzz seed for {key:?} encodes at v{version}..=v{max}");
}

/// Builds frames for a table of APIs and versions.
pub struct Generator {
    /// Per API of the table, per version: the templates.
    apis: Vec<Vec<Vec<Template>>>,
    table: Vec<ApiRange>,
    keys: Vec<i16>,
}

impl Generator {
    /// A generator for every API and version of `table`.
    pub fn new(table: &[ApiRange]) -> Generator {
        let apis = table
            .iter()
            .map(|a| {
                (a.min..=a.max)
                    .map(|v| templates(a.key, v, a.max))
                    .collect()
            })
            .collect();
        Generator {
            apis,
            table: table.to_vec(),
            keys: table.iter().map(|a| a.key as i16).collect(),
        }
    }

    /// Valid seed frames per API and version, summed.
    pub fn template_count(&self) -> usize {
        self.apis.iter().flatten().map(|t| t.len()).sum()
    }

    /// Cases: an API, a version, a seed, and up to three mutations (one case in ten is the
    /// valid request itself, so handlers past a successful decode are exercised too).
    pub fn strategy(&self) -> impl Strategy<Value = Case> {
        (
            any::<Index>(),
            any::<Index>(),
            any::<Index>(),
            prop_oneof![
                1 => Just(Vec::new()),
                9 => proptest::collection::vec(mutate::mutation(), 1..=3),
            ],
            proptest::option::weighted(
                0.03,
                prop_oneof![
                    prop_oneof![
                        Just(-1),
                        Just(0),
                        Just(7),
                        Just(i32::MAX),
                        Just(104_857_601)
                    ]
                    .prop_map(SizeLie::Fixed),
                    (-3i8..=3).prop_map(SizeLie::Off),
                ],
            ),
        )
            .prop_map(|(api, version, seed, mutations, size_lie)| Case {
                api,
                version,
                seed,
                mutations,
                size_lie,
            })
    }

    /// The frame a case describes.
    pub fn render(&self, case: &Case) -> FuzzFrame {
        let a = case.api.index(self.apis.len());
        let versions = &self.apis[a];
        let seeds = case.version.get(versions);
        let t = case.seed.get(seeds);
        let mut payload = t.payload.clone();
        let range = &self.table[a];
        mutate::apply(
            &mut payload,
            &Target {
                fields: &t.fields,
                flexible: t.flexible,
                keys: &self.keys,
                versions: (range.min, range.max),
            },
            &case.mutations,
        );
        FuzzFrame {
            payload,
            size_lie: case.size_lie,
            what: format!(
                "{:?} v{} {:?} {:?}",
                t.key, t.version, case.mutations, case.size_lie
            ),
        }
    }

    /// An endless, reproducible stream of frames from `seed`.
    pub fn stream(&self, seed: u64) -> impl Iterator<Item = FuzzFrame> + '_ {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::from_seed(RngAlgorithm::ChaCha, &key),
        );
        let strategy = self.strategy();
        std::iter::from_fn(move || {
            let case = strategy
                .new_tree(&mut runner)
                .expect("the case strategy never rejects")
                .current();
            Some(self.render(&case))
        })
    }

    /// Issue 16's family: for every API, version and the first two seeds, each field that the
    /// codec reads as a length or count, set to the largest value its type holds. Which fields
    /// those are is decided by the codec itself: the frame must no longer decode (an integer
    /// field set to its maximum still decodes and is left out). Every one of these frames must
    /// get a closed connection.
    pub fn huge_count_family(&self) -> Vec<FuzzFrame> {
        let mut out = Vec::new();
        for t in self
            .apis
            .iter()
            .flatten()
            .flat_map(|seeds| seeds.iter().take(2))
        {
            // The body decoder of a version no seed encodes is refused by version already.
            let body_version = i16::from_be_bytes([t.payload[2], t.payload[3]]);
            for f in t.fields.iter().filter(|f| f.is_length_like()) {
                let mut payload = t.payload.clone();
                payload.splice(
                    f.pos..f.pos + f.len,
                    mutate::evil_bytes(&t.payload, f, Evil::Max),
                );
                if decodes(t.key, body_version, &payload) {
                    continue;
                }
                out.push(FuzzFrame {
                    payload,
                    size_lie: None,
                    what: format!(
                        "{:?} v{} {:?} field at byte {} set to its maximum",
                        t.key, t.version, f.kind, f.pos
                    ),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list_offsets_v7() -> Generator {
        Generator::new(&[ApiRange {
            key: ApiKey::ListOffsets,
            min: 7,
            max: 7,
        }])
    }

    #[test]
    fn the_family_holds_issue_16s_frame() {
        // Header v2: key, version, correlation id, client id, no tagged fields.
        let header = 2 + 2 + 4 + 2 + CLIENT_ID.len() + 1;
        // After the replica id: isolation level, then the compact topics count claiming
        // 0xFFFFFFFE entries, then the (empty) tagged fields.
        let tail = [0x00, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        let family = list_offsets_v7().huge_count_family();
        assert!(
            family
                .iter()
                .any(|f| f.payload.len() == header + 4 + tail.len()
                    && f.payload[header + 4..] == tail),
            "{family:#?}"
        );
    }

    #[test]
    fn a_stream_is_reproducible_from_its_seed() {
        let g = list_offsets_v7();
        let a: Vec<Vec<u8>> = g.stream(7).take(200).map(|f| f.wire()).collect();
        let b: Vec<Vec<u8>> = g.stream(7).take(200).map(|f| f.wire()).collect();
        let c: Vec<Vec<u8>> = g.stream(8).take(200).map(|f| f.wire()).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
