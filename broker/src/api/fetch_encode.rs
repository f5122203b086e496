//! A Fetch response as a list of byte chunks: the encoded fields, and each partition's records
//! as the very `Bytes` the log read returned, so that the records reach the socket in one
//! vectored write instead of being copied into a response buffer first (the copy was the
//! largest user-space cost of serving a follower: benches/RESULTS.md, issue 15's profile).
//!
//! Every field is still encoded by kafka-protocol: each structure is encoded once with its
//! records (or partitions, or topics) left out, and the chunks are cut where they would go.
//! Where a partition's records field starts is found by encoding the partition twice, with
//! empty and with null records: the two encodings differ first at the records' length. The
//! result is byte for byte what `FetchResponse::encode` writes (tested below for every version).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader};
use kafka_protocol::protocol::Encodable;

use crate::net::codec::CodecError;

/// Records shorter than this are copied into the fields' chunk: an extra iovec costs more
/// than copying a few KiB.
pub const FETCH_VECTORED_RECORDS_MIN_BYTES: usize = 16 * 1024;

/// Fetch v12 and later are flexible: compact lengths and tagged fields.
const FLEXIBLE_MIN_VERSION: i16 = 12;

/// The whole response frame (size prefix, header, body) for `resp` at `version`, as chunks
/// to write in order.
pub fn encode_chunks(
    resp: &FetchResponse,
    version: i16,
    correlation_id: i32,
) -> Result<Vec<Bytes>, CodecError> {
    let mut out = Chunks::default();
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    encode_into(
        &header,
        &mut out.fields,
        ApiKey::Fetch.response_header_version(version),
    )?;
    let plain_tail = resp.node_endpoints.is_empty() && resp.unknown_tagged_fields.is_empty();
    if !plain_tail
        || resp
            .responses
            .iter()
            .any(|t| !t.unknown_tagged_fields.is_empty())
    {
        // Fields Brook never sets in a Fetch answer: encoded the ordinary way.
        encode_into(resp, &mut out.fields, version)?;
        return Ok(out.finish());
    }
    // The response's own fields, then its topic array, then its (empty) tagged fields.
    let shell = FetchResponse::default()
        .with_throttle_time_ms(resp.throttle_time_ms)
        .with_error_code(resp.error_code)
        .with_session_id(resp.session_id);
    out.fields
        .extend_from_slice(&fields_before_last_array(&shell, version)?);
    put_array_len(&mut out.fields, resp.responses.len(), version);
    for topic in &resp.responses {
        encode_topic(&mut out, topic, version)?;
    }
    put_empty_tagged_fields(&mut out.fields, version);
    Ok(out.finish())
}

/// One topic: its name or id, its partition array, its (empty) tagged fields.
fn encode_topic(
    out: &mut Chunks,
    topic: &FetchableTopicResponse,
    version: i16,
) -> Result<(), CodecError> {
    let shell = FetchableTopicResponse::default()
        .with_topic(topic.topic.clone())
        .with_topic_id(topic.topic_id);
    out.fields
        .extend_from_slice(&fields_before_last_array(&shell, version)?);
    put_array_len(&mut out.fields, topic.partitions.len(), version);
    for p in &topic.partitions {
        encode_partition(out, p, version)?;
    }
    put_empty_tagged_fields(&mut out.fields, version);
    Ok(())
}

/// One partition: its fields, the records' length, the records, its tagged fields.
fn encode_partition(out: &mut Chunks, p: &PartitionData, version: i16) -> Result<(), CodecError> {
    let records = match &p.records {
        Some(r) if r.len() >= FETCH_VECTORED_RECORDS_MIN_BYTES => r,
        // Null or small records: encoded in place, as kafka-protocol does.
        _ => return encode_into(p, &mut out.fields, version),
    };
    let mut shell = p.clone();
    shell.records = Some(Bytes::new());
    let with_empty = encoded(&shell, version)?;
    shell.records = None;
    let with_null = encoded(&shell, version)?;
    // Empty and null records differ in the first byte of their length and nowhere else.
    let at = with_empty
        .iter()
        .zip(with_null.iter())
        .position(|(a, b)| a != b)
        .ok_or_else(|| CodecError::Malformed("fetch encoding: records field not found".into()))?;
    out.fields.extend_from_slice(&with_empty[..at]);
    put_array_len(&mut out.fields, records.len(), version);
    out.push_records(records.clone());
    out.fields
        .extend_from_slice(&with_empty[at + array_len_size(0, version)..]);
    Ok(())
}

/// The encoding of `shell`, a structure whose last field is an empty array followed by no
/// tagged fields, up to that array's length.
fn fields_before_last_array<T: Encodable>(shell: &T, version: i16) -> Result<Bytes, CodecError> {
    let plain = encoded(shell, version)?;
    let tail = array_len_size(0, version) + empty_tagged_fields_size(version);
    Ok(plain.slice(..plain.len() - tail))
}

fn put_empty_tagged_fields(buf: &mut BytesMut, version: i16) {
    if version >= FLEXIBLE_MIN_VERSION {
        buf.put_u8(0);
    }
}

fn empty_tagged_fields_size(version: i16) -> usize {
    usize::from(version >= FLEXIBLE_MIN_VERSION)
}

fn encoded<T: Encodable>(value: &T, version: i16) -> Result<Bytes, CodecError> {
    let mut buf = BytesMut::new();
    encode_into(value, &mut buf, version)?;
    Ok(buf.freeze())
}

fn encode_into<T: Encodable>(
    value: &T,
    buf: &mut BytesMut,
    version: i16,
) -> Result<(), CodecError> {
    value.encode(buf, version).map_err(|e| CodecError::Encode {
        api_key: ApiKey::Fetch,
        version,
        reason: e.to_string(),
    })
}

fn put_array_len(buf: &mut BytesMut, len: usize, version: i16) {
    if version >= FLEXIBLE_MIN_VERSION {
        put_uvarint(buf, len as u32 + 1);
    } else {
        buf.put_i32(len as i32);
    }
}

fn array_len_size(len: usize, version: i16) -> usize {
    if version >= FLEXIBLE_MIN_VERSION {
        uvarint_size(len as u32 + 1)
    } else {
        4
    }
}

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn uvarint_size(v: u32) -> usize {
    (32 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// The response being built: encoded fields accumulate in `fields` until a large records
/// value cuts them into a chunk.
#[derive(Default)]
struct Chunks {
    done: Vec<Bytes>,
    fields: BytesMut,
}

impl Chunks {
    fn push_records(&mut self, records: Bytes) {
        self.done.push(self.fields.split().freeze());
        self.done.push(records);
    }

    /// The chunks with the frame's size prefix in front.
    fn finish(mut self) -> Vec<Bytes> {
        if !self.fields.is_empty() {
            self.done.push(self.fields.split().freeze());
        }
        let size: usize = self.done.iter().map(Bytes::len).sum();
        let mut first = BytesMut::with_capacity(4);
        first.put_i32(size as i32);
        let mut chunks = Vec::with_capacity(self.done.len() + 1);
        chunks.push(first.freeze());
        chunks.extend(self.done);
        chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::codec::encode_response;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, LeaderIdAndEpoch,
    };
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;
    use proptest::prelude::*;

    fn joined(chunks: &[Bytes]) -> Vec<u8> {
        chunks.iter().flat_map(|c| c.iter().copied()).collect()
    }

    /// One partition: records of `len` bytes (None for null), and optionally a diverging
    /// epoch, a current leader and aborted transactions, so the tagged fields and the fields
    /// before the records vary.
    fn partition(index: i32, len: Option<usize>, tags: u8, aborted: usize) -> PartitionData {
        let mut p = PartitionData::default()
            .with_partition_index(index)
            .with_high_watermark(1_000 + i64::from(index))
            .with_last_stable_offset(900)
            .with_log_start_offset(7)
            .with_records(len.map(|n| Bytes::from((0..n).map(|i| i as u8).collect::<Vec<_>>())));
        if tags & 1 != 0 {
            p = p.with_diverging_epoch(EpochEndOffset::default().with_epoch(3).with_end_offset(42));
        }
        if tags & 2 != 0 {
            p = p.with_current_leader(
                LeaderIdAndEpoch::default()
                    .with_leader_id(2.into())
                    .with_leader_epoch(5),
            );
        }
        if aborted > 0 {
            p = p.with_aborted_transactions(Some(
                (0..aborted)
                    .map(|i| {
                        AbortedTransaction::default()
                            .with_producer_id((i as i64).into())
                            .with_first_offset(i as i64 * 10)
                    })
                    .collect(),
            ));
        }
        p
    }

    fn response(topics: &[Vec<PartitionData>]) -> FetchResponse {
        FetchResponse::default()
            .with_throttle_time_ms(3)
            .with_session_id(0)
            .with_responses(
                topics
                    .iter()
                    .enumerate()
                    .map(|(i, parts)| {
                        FetchableTopicResponse::default()
                            .with_topic(TopicName(StrBytes::from_string(format!("topic-{i}"))))
                            .with_topic_id(uuid::Uuid::from_u128(i as u128 + 1))
                            .with_partitions(parts.clone())
                    })
                    .collect(),
            )
    }

    fn check(resp: &FetchResponse) {
        for version in 4..=18 {
            let plain = encode_response(ApiKey::Fetch, version, 77, resp).expect("plain");
            let chunks = encode_chunks(resp, version, 77).expect("chunks");
            assert_eq!(joined(&chunks), plain.to_vec(), "Fetch v{version}");
        }
    }

    #[test]
    fn large_records_are_their_own_chunk() {
        let records = 64 * 1024;
        let resp = response(&[vec![partition(0, Some(records), 0, 0)]]);
        let chunks = encode_chunks(&resp, 12, 1).expect("chunks");
        // Size prefix, header and fields, the records themselves, the tagged fields after.
        assert_eq!(chunks.len(), 4);
        assert_eq!(chunks[2].len(), records);
        let read = resp.responses[0].partitions[0]
            .records
            .clone()
            .expect("records");
        assert_eq!(
            chunks[2].as_ptr(),
            read.as_ptr(),
            "the records are not copied"
        );
        check(&resp);
    }

    #[test]
    fn empty_response_matches() {
        check(&response(&[]));
        check(&response(&[vec![]]));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the partitions hold, the chunks are the ordinary encoding cut in pieces.
        #[test]
        fn chunks_join_to_the_ordinary_encoding(
            topics in prop::collection::vec(
                prop::collection::vec(
                    (
                        prop::option::of(prop_oneof![0usize..64, 16_000usize..40_000]),
                        0u8..4,
                        0usize..3,
                    ),
                    0..4,
                ),
                0..3,
            )
        ) {
            let topics: Vec<Vec<PartitionData>> = topics
                .into_iter()
                .map(|parts| {
                    parts
                        .into_iter()
                        .enumerate()
                        .map(|(i, (len, tags, aborted))| partition(i as i32, len, tags, aborted))
                        .collect()
                })
                .collect();
            check(&response(&topics));
        }
    }
}
