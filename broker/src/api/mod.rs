//! Request dispatch: one handler module per API family.
//!
//! [`handle_frame`] turns one request frame into one response frame (or none, for acks=0
//! Produce). Version checks happen here, before any body is decoded, so every handler can
//! rely on its request being within the advertised range.

pub mod api_versions;
pub mod cluster;
pub mod configs;
pub mod fetch;
pub mod list_offsets;
pub mod metadata;
pub mod produce;
pub mod producer_id;
pub mod topics;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Message, StrBytes};

use crate::net::codec::{decode_body, decode_header, encode_response, peek_prefix, CodecError};
use crate::server::Broker;

/// One row of the ApiVersions table: what Brook advertises, and the lowest version it can
/// decode (Produce is advertised from 0 for old clients' sake but decoded from 3, as in Kafka).
#[derive(Debug, Clone, Copy)]
pub struct ApiSupport {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
    pub decode_min: i16,
}

const fn api(key: ApiKey, min: i16, max: i16, decode_min: i16) -> ApiSupport {
    ApiSupport {
        key,
        min,
        max,
        decode_min,
    }
}

/// Every API Brook serves, with the versions it really serves (KAFKA-FACTS §1).
pub const SUPPORTED_APIS: &[ApiSupport] = &[
    api(ApiKey::Produce, 0, 13, ProduceRequest::VERSIONS.min),
    api(ApiKey::Fetch, 4, 18, 4),
    api(ApiKey::ListOffsets, 1, 10, 1),
    api(ApiKey::Metadata, 0, 13, 0),
    api(ApiKey::ApiVersions, 0, 4, 0),
    api(ApiKey::CreateTopics, 2, 7, 2),
    api(ApiKey::DeleteTopics, 1, 6, 1),
    api(ApiKey::InitProducerId, 0, 5, 0),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4, 2),
    api(ApiKey::DescribeConfigs, 1, 4, 1),
    api(ApiKey::CreatePartitions, 0, 3, 0),
    api(ApiKey::IncrementalAlterConfigs, 0, 1, 0),
    api(ApiKey::DescribeCluster, 0, 2, 0),
];

/// Finds an API's row in the table.
pub fn support(key: ApiKey) -> Option<&'static ApiSupport> {
    SUPPORTED_APIS.iter().find(|a| a.key == key)
}

/// What a handler wants the connection to do.
pub enum Outcome {
    /// Send this response frame.
    Respond(Bytes),
    /// Send nothing (acks=0 Produce that succeeded).
    NoResponse,
    /// Close the connection (acks=0 Produce that failed: the client learns of it that way).
    Close(String),
}

/// The request header fields handlers need.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

/// Turns a `String` into the codec's string type.
pub fn sb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

macro_rules! dispatch {
    ($broker:expr, $ctx:expr, $body:expr, { $($key:ident => $req:ty => $handler:path),* $(,)? }) => {
        match $ctx.api_key {
            $(ApiKey::$key => {
                let req: $req = decode_body(&mut $body, $ctx.api_version)?;
                let resp = $handler($broker, &$ctx, req).await;
                Outcome::Respond(encode_response($ctx.api_key, $ctx.api_version, $ctx.correlation_id, &resp)?)
            })*
            other => return Err(CodecError::UnknownApiKey(other as i16)),
        }
    };
}

/// Handles one request frame.
pub async fn handle_frame(
    broker: &Broker,
    frame: Bytes,
) -> Result<(RequestContext, Outcome), CodecError> {
    let prefix = peek_prefix(&frame);
    let key =
        ApiKey::try_from(prefix.api_key).map_err(|_| CodecError::UnknownApiKey(prefix.api_key))?;
    let row = support(key).ok_or(CodecError::UnknownApiKey(prefix.api_key))?;
    let version = prefix.api_version;
    let mut ctx = RequestContext {
        api_key: key,
        api_version: version,
        correlation_id: prefix.correlation_id,
        client_id: None,
    };
    if version < row.decode_min || version > row.max {
        if key == ApiKey::ApiVersions {
            // Kafka answers an ApiVersions it cannot parse with a v0 body and error 35, so
            // that the client can retry with a version both sides know.
            return Ok((
                ctx,
                Outcome::Respond(api_versions::unsupported_version(prefix.correlation_id)?),
            ));
        }
        return Err(CodecError::Malformed(format!(
            "{key:?} v{version} is not supported"
        )));
    }
    let mut body = frame;
    let header = decode_header(key, version, &mut body)?;
    ctx.client_id = header.client_id.as_ref().map(|c| c.to_string());
    if key == ApiKey::Produce {
        let req: ProduceRequest = decode_body(&mut body, version)?;
        return Ok((ctx.clone(), produce::handle(broker, &ctx, req).await?));
    }
    if key == ApiKey::Fetch {
        let req: FetchRequest = decode_body(&mut body, version)?;
        return Ok((ctx.clone(), fetch::handle(broker, &ctx, req).await?));
    }
    let outcome = dispatch!(broker, ctx, body, {
        ApiVersions => ApiVersionsRequest => api_versions::handle,
        Metadata => MetadataRequest => metadata::handle,
        ListOffsets => ListOffsetsRequest => list_offsets::handle,
        OffsetForLeaderEpoch => OffsetForLeaderEpochRequest => list_offsets::handle_offset_for_leader_epoch,
        InitProducerId => InitProducerIdRequest => producer_id::handle,
        CreateTopics => CreateTopicsRequest => topics::handle_create_topics,
        DeleteTopics => DeleteTopicsRequest => topics::handle_delete_topics,
        CreatePartitions => CreatePartitionsRequest => topics::handle_create_partitions,
        DescribeConfigs => DescribeConfigsRequest => configs::handle_describe_configs,
        IncrementalAlterConfigs => IncrementalAlterConfigsRequest => configs::handle_incremental_alter_configs,
        DescribeCluster => DescribeClusterRequest => cluster::handle_describe_cluster,
    });
    Ok((ctx, outcome))
}
