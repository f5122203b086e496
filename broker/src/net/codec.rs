//! Frames on the wire: a 4-byte big-endian size, then a request header and body.
//!
//! This module only splits and joins frames and headers; the bodies are decoded by the API
//! handlers with kafka-protocol's generated codecs.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::net::memory_pool::{RequestMemory, RequestMemoryPool};

/// Turns a `String` into the codec's string type. Here, beside the frames it ends up in,
/// so that the handlers (`api`) and the share-group persister (`share`) share it without
/// `share` importing `api`.
pub fn sb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Smallest request header: api key, api version, correlation id.
pub const MIN_REQUEST_HEADER_BYTES: usize = 8;

/// Errors while reading or writing frames. Every one of them ends the connection.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("connection closed")]
    Closed,
    #[error("frame of {size} bytes is outside 8..={max} (socket.request.max.bytes)")]
    BadFrameSize { size: i64, max: usize },
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    #[error("malformed request: {0}")]
    Malformed(String),
    /// A response that cannot be encoded at the request's version: a handler set a field the
    /// version lacks. Brook's bug, never the client's; logged at error level and counted.
    #[error("encoding {api_key:?} v{version} response: {reason}")]
    Encode {
        api_key: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// Bytes asked of the socket per read while a frame arrives.
pub const FRAME_READ_CHUNK_BYTES: usize = 64 * 1024;

/// One request frame, with the pool bytes it holds until its response has been written.
#[derive(Debug)]
pub struct Frame {
    pub bytes: Bytes,
    pub memory: RequestMemory,
}

/// Reads one frame. A size outside `8..=max_bytes` is refused before anything is allocated;
/// then the frame's bytes are taken from `pool` (waiting, unread, while it is full), and its
/// buffer is allocated once at the frame's size. The pool bounds what all frames claim
/// together; the pages a buffer holds are only those the arrived bytes were written to (the
/// kernel maps a page at its first write). A buffer grown by doubling instead copied each
/// produce request about once more and, with an allocator that keeps freed blocks for reuse,
/// held the outgrown blocks too.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max_bytes: usize,
    pool: &RequestMemoryPool,
) -> Result<Frame, CodecError> {
    let size = match r.read_i32().await {
        Ok(s) => s as i64,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(CodecError::Closed),
        Err(e) => return Err(e.into()),
    };
    if size < MIN_REQUEST_HEADER_BYTES as i64 || size > max_bytes as i64 {
        return Err(CodecError::BadFrameSize {
            size,
            max: max_bytes,
        });
    }
    let size = size as usize;
    let memory = pool.acquire(size).await;
    let mut buf = BytesMut::with_capacity(size);
    while buf.len() < size {
        let chunk = (size - buf.len()).min(FRAME_READ_CHUNK_BYTES);
        if (&mut *r).take(chunk as u64).read_buf(&mut buf).await? == 0 {
            return Err(CodecError::Closed);
        }
    }
    assert_eq!(buf.len(), size, "a frame is read to its declared size");
    Ok(Frame {
        bytes: buf.freeze(),
        memory,
    })
}

/// The first fields of a request, readable before knowing whether the version is supported.
#[derive(Debug, Clone, Copy)]
pub struct RequestPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

/// Peeks at api key, version and correlation id. The frame is at least 8 bytes long.
pub fn peek_prefix(frame: &Bytes) -> RequestPrefix {
    let mut b = &frame[..MIN_REQUEST_HEADER_BYTES];
    RequestPrefix {
        api_key: b.get_i16(),
        api_version: b.get_i16(),
        correlation_id: b.get_i32(),
    }
}

/// Decodes the request header; `frame` is advanced past it to the body.
pub fn decode_header(
    api_key: ApiKey,
    version: i16,
    frame: &mut Bytes,
) -> Result<RequestHeader, CodecError> {
    let hv = api_key.request_header_version(version);
    RequestHeader::decode(frame, hv)
        .map_err(|e| CodecError::Malformed(format!("request header: {e}")))
}

/// Decodes a request body, mapping failures (truncation, bad lengths) to a connection close.
pub fn decode_body<T: Decodable>(frame: &mut Bytes, version: i16) -> Result<T, CodecError> {
    let body = T::decode(frame, version)
        .map_err(|e| CodecError::Malformed(format!("request body: {e}")))?;
    Ok(body)
}

/// Encodes a whole response frame: size, header, body.
pub fn encode_response<T: Encodable>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<Bytes, CodecError> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let hv = api_key.response_header_version(version);
    let enc = |e: anyhow::Error| CodecError::Encode {
        api_key,
        version,
        reason: e.to_string(),
    };
    let size = header.compute_size(hv).map_err(enc)? + body.compute_size(version).map_err(enc)?;
    let mut out = BytesMut::with_capacity(size + 4);
    out.put_i32(size as i32);
    header.encode(&mut out, hv).map_err(enc)?;
    body.encode(&mut out, version).map_err(enc)?;
    // The length prefix was computed before encoding; a frame whose body disagrees with it
    // would desynchronise the client's reader, so it is checked in release builds too.
    assert_eq!(out.len(), size + 4, "response size mismatch");
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::memory_pool::tests::poll_once;
    use kafka_protocol::messages::{ListOffsetsRequest, MetadataRequest};

    /// Issue 16's frame after its size prefix: ListOffsets v7, header v2 with client id "ab",
    /// replica id -1, isolation level 0, and a compact `topics` array claiming 0xFFFFFFFE
    /// entries (varint 0xFFFFFFFF) with no bytes behind it.
    pub const HUGE_LIST_OFFSETS_V7: [u8; 23] = [
        0x00, 0x02, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, b'a', b'b', 0x00, 0xff, 0xff,
        0xff, 0xff, 0x00, 0xff, 0xff, 0xff, 0xff, 0x0f,
    ];

    #[test]
    fn a_huge_array_count_is_a_decode_error_not_an_allocation() {
        let mut frame = Bytes::from_static(&HUGE_LIST_OFFSETS_V7);
        let prefix = peek_prefix(&frame);
        assert_eq!((prefix.api_key, prefix.api_version), (2, 7));
        decode_header(ApiKey::ListOffsets, 7, &mut frame).unwrap();
        assert!(decode_body::<ListOffsetsRequest>(&mut frame, 7).is_err());
    }

    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut out = (payload.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(payload);
        out
    }

    #[tokio::test]
    async fn a_frame_is_not_read_while_the_pool_cannot_hold_it() {
        let pool = RequestMemoryPool::new(Some(100));
        let wire = [framed(&[1; 60]), framed(&[2; 60])].concat();
        let mut r = &wire[..];
        let first = read_frame(&mut r, 100, &pool).await.unwrap();
        assert_eq!(first.bytes.len(), 60);
        assert_eq!(pool.available_bytes(), 40);
        {
            let second = read_frame(&mut r, 100, &pool);
            tokio::pin!(second);
            assert!(
                poll_once(&mut second).await.is_none(),
                "the second frame was read while the pool held only 40 free bytes"
            );
            drop(first);
            let second = second.await.unwrap();
            assert_eq!(&second.bytes[..], &[2; 60][..]);
        }
        assert_eq!(pool.available_bytes(), 100);
    }

    #[tokio::test]
    async fn a_frame_that_ends_early_is_closed_and_gives_its_bytes_back() {
        let pool = RequestMemoryPool::new(Some(1 << 20));
        let mut wire = (1i32 << 20).to_be_bytes().to_vec();
        wire.extend_from_slice(&[0; 100]);
        let r = read_frame(&mut &wire[..], 1 << 20, &pool).await;
        assert!(matches!(r, Err(CodecError::Closed)), "{r:?}");
        assert_eq!(pool.available_bytes(), 1 << 20);
    }

    #[test]
    fn a_huge_classic_array_count_is_a_decode_error() {
        // Metadata v1: a `topics` array count of i32::MAX with no elements behind it.
        let mut body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(decode_body::<MetadataRequest>(&mut body, 1).is_err());
    }
}
