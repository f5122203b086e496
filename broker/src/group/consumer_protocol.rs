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
    encode_assignment_version(0, assignment)
}

/// Encodes a `ConsumerProtocolAssignment` at `version` (0-3 share one layout): Kafka answers a
/// classic member of a KIP-848 group at the version of the subscription it joined with
/// (`GroupMetadataManager.prepareAssignment`).
pub fn encode_assignment_version(version: i16, assignment: &[(String, Vec<i32>)]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(version.clamp(0, 3));
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

/// Bound on topics and on partitions per topic read from one assignment blob.
pub const MAX_ASSIGNMENT_ENTRIES: usize = 100_000;

/// The (topic, partitions) of a `ConsumerProtocolAssignment` (versions 0-3 share this
/// prefix: version, then the topic list), or `None` if the blob is malformed or empty.
pub fn assignment_partitions(blob: &[u8]) -> Option<Vec<(String, Vec<i32>)>> {
    let mut r = BlobReader { blob, pos: 2 };
    r.i16_at(0)?;
    let topics = r.count()?;
    let mut out = Vec::new();
    for _ in 0..topics {
        let name = r.string()?;
        let parts = r.count()?;
        let mut partitions = Vec::new();
        for _ in 0..parts {
            partitions.push(r.i32()?);
        }
        out.push((name, partitions));
    }
    Some(out)
}

/// The version of a subscription or assignment blob (its first two bytes; 0 if absent).
pub fn blob_version(blob: &[u8]) -> i16 {
    blob.get(..2)
        .map_or(0, |b| i16::from_be_bytes([b[0], b[1]]))
}

/// A `ConsumerProtocolSubscription` as a classic member of a KIP-848 group sends it
/// (Kafka's `ConsumerProtocol.deserializeConsumerProtocolSubscription`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    pub topics: Vec<String>,
    /// v1+: the partitions the member owns (cooperative rebalancing); empty before.
    pub owned: Vec<(String, Vec<i32>)>,
    /// v3+: the member's rack.
    pub rack_id: Option<String>,
}

/// Decodes a subscription blob of any version, or `None` if it is malformed.
pub fn decode_subscription(blob: &[u8]) -> Option<Subscription> {
    let mut r = BlobReader { blob, pos: 2 };
    let version = r.i16_at(0)?;
    let mut sub = Subscription::default();
    for _ in 0..r.count()? {
        sub.topics.push(r.string()?);
    }
    // User data: nullable bytes.
    let len = r.i32()?;
    if len > 0 {
        r.pos = r
            .pos
            .checked_add(len as usize)
            .filter(|&p| p <= blob.len())?;
    }
    if version >= 1 {
        for _ in 0..r.count()? {
            let name = r.string()?;
            let mut parts = Vec::new();
            for _ in 0..r.count()? {
                parts.push(r.i32()?);
            }
            sub.owned.push((name, parts));
        }
    }
    if version >= 2 {
        r.i32()?; // generation id
    }
    if version >= 3 {
        let len = r.i16_at(r.pos)?;
        r.pos += 2;
        if len >= 0 {
            let bytes = blob.get(r.pos..r.pos + len as usize)?;
            sub.rack_id = Some(String::from_utf8(bytes.to_vec()).ok()?);
        }
    }
    Some(sub)
}

/// A cursor over a blob in the classic (non-flexible) encoding; every read is checked.
struct BlobReader<'a> {
    blob: &'a [u8],
    pos: usize,
}

impl BlobReader<'_> {
    fn i16_at(&self, p: usize) -> Option<i16> {
        Some(i16::from_be_bytes(
            self.blob.get(p..p + 2)?.try_into().ok()?,
        ))
    }

    fn i32(&mut self) -> Option<i32> {
        let v = i32::from_be_bytes(self.blob.get(self.pos..self.pos + 4)?.try_into().ok()?);
        self.pos += 4;
        Some(v)
    }

    /// An array length: refused when negative or above [`MAX_ASSIGNMENT_ENTRIES`].
    fn count(&mut self) -> Option<usize> {
        let n = self.i32()?;
        (0..=MAX_ASSIGNMENT_ENTRIES as i32)
            .contains(&n)
            .then_some(n as usize)
    }

    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.i16_at(self.pos)?).ok()?;
        self.pos += 2;
        let bytes = self.blob.get(self.pos..self.pos + len)?;
        self.pos += len;
        String::from_utf8(bytes.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignment_round_trip_and_garbage() {
        let a = vec![("t".to_string(), vec![0, 2]), ("u".to_string(), vec![])];
        let b = encode_assignment(&a);
        assert_eq!(assignment_partitions(&b), Some(a));
        // Every cut inside the topic list is refused (the trailing user data is not read).
        for n in 0..b.len() - 4 {
            assert_eq!(assignment_partitions(&b[..n]), None, "prefix {n}");
        }
        assert_eq!(assignment_partitions(&[0, 0, 0x7f, 0xff, 0xff, 0xff]), None);
    }

    #[test]
    fn full_subscription_with_owned_partitions() {
        // v1: topics, user data, owned partitions.
        let mut b = BytesMut::new();
        b.put_i16(1);
        b.put_i32(1);
        put_str(&mut b, "t");
        b.put_i32(2);
        b.put_slice(&[7, 7]);
        b.put_i32(1);
        put_str(&mut b, "t");
        b.put_i32(1);
        b.put_i32(3);
        let sub = decode_subscription(&b).unwrap();
        assert_eq!(sub.topics, vec!["t".to_string()]);
        assert_eq!(sub.owned, vec![("t".to_string(), vec![3])]);
        assert_eq!(decode_subscription(&b[..b.len() - 1]), None);
        assert_eq!(blob_version(&b), 1);
    }

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
