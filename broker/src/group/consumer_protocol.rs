//! The "consumer" embedded protocol of classic groups (Kafka's `ConsumerProtocol`): the
//! subscription and assignment blobs that clients put in JoinGroup metadata and SyncGroup
//! assignments. The coordinator reads subscriptions (OffsetDelete must know whether a group
//! still reads a topic) and writes both for KIP-848 groups described through DescribeGroups.

use bytes::{BufMut, Bytes, BytesMut};

/// Bound on topics read from one subscription blob.
pub const MAX_SUBSCRIPTION_TOPICS: usize = 100_000;

/// The topic names of a `ConsumerProtocolSubscription` (any version: the topic list comes
/// right after the version), or `None` if the blob is malformed.
pub fn subscription_topics(blob: &[u8]) -> Option<Vec<String>> {
    let mut pos = 2usize;
    let read_i16 =
        |p: usize| -> Option<i16> { Some(i16::from_be_bytes([*blob.get(p)?, *blob.get(p + 1)?])) };
    read_i16(0)?;
    let count = i32::from_be_bytes(blob.get(pos..pos + 4)?.try_into().ok()?);
    pos += 4;
    if count < 0 || count as usize > MAX_SUBSCRIPTION_TOPICS {
        return None;
    }
    let mut topics = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let len = read_i16(pos)?;
        pos += 2;
        if len < 0 {
            return None;
        }
        let name = blob.get(pos..pos + len as usize)?;
        pos += len as usize;
        topics.push(String::from_utf8(name.to_vec()).ok()?);
    }
    Some(topics)
}

fn put_str(out: &mut BytesMut, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

/// Encodes a version-0 `ConsumerProtocolSubscription` naming `topics`.
pub fn encode_subscription(topics: &[String]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(topics.len() as i32);
    for t in topics {
        put_str(&mut out, t);
    }
    out.put_i32(-1); // null user data
    out.freeze()
}

/// Encodes a version-0 `ConsumerProtocolAssignment` of (topic, partitions).
pub fn encode_assignment(assignment: &[(String, Vec<i32>)]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(assignment.len() as i32);
    for (t, parts) in assignment {
        put_str(&mut out, t);
        out.put_i32(parts.len() as i32);
        for p in parts {
            out.put_i32(*p);
        }
    }
    out.put_i32(-1); // null user data
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_round_trip_and_garbage() {
        let b = encode_subscription(&["a".into(), "bb".into()]);
        assert_eq!(subscription_topics(&b), Some(vec!["a".into(), "bb".into()]));
        for n in 0..b.len() - 4 {
            assert_eq!(subscription_topics(&b[..n]), None, "prefix {n}");
        }
        assert_eq!(subscription_topics(&[0, 0, 0x7f, 0xff, 0xff, 0xff]), None);
    }
}
