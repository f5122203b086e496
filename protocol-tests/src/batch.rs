//! A minimal v2 record batch encoder and parser (uncompressed), written here so that the tests
//! control every byte (duplicate header keys, producer id/epoch/sequence) and never rely on a
//! re-encoding library for what the broker returns.

/// One record to encode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rec {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// Headers in order; duplicate keys allowed.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Absolute timestamp of the record.
    pub timestamp: i64,
}

impl Rec {
    pub fn kv(key: &str, value: &str, timestamp: i64) -> Rec {
        Rec {
            key: Some(key.as_bytes().to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: vec![],
            timestamp,
        }
    }
}

/// Batch-level fields of an idempotent (or plain) batch.
#[derive(Debug, Clone, Copy)]
pub struct Producer {
    pub id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
}

impl Producer {
    /// No producer id: a plain, non-idempotent batch.
    pub const NONE: Producer = Producer {
        id: -1,
        epoch: -1,
        base_sequence: -1,
    };
}

fn put_varint(buf: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            buf.push(z as u8);
            return;
        }
        buf.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

fn put_bytes(buf: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, b.len() as i64);
            buf.extend_from_slice(b);
        }
    }
}

/// Byte offset of the CRC field in a v2 batch.
pub const CRC_OFFSET: usize = 17;
/// Byte offset of the attributes field (start of the CRC-covered part).
pub const ATTRIBUTES_OFFSET: usize = 21;

/// Encodes one uncompressed v2 batch with base offset 0 and a correct CRC-32C.
pub fn encode_batch(producer: Producer, records: &[Rec]) -> Vec<u8> {
    assert!(!records.is_empty());
    let base_ts = records.iter().map(|r| r.timestamp).min().unwrap();
    let max_ts = records.iter().map(|r| r.timestamp).max().unwrap();
    let mut body = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut rec = Vec::new();
        rec.push(0u8); // attributes
        put_varint(&mut rec, r.timestamp - base_ts);
        put_varint(&mut rec, i as i64);
        put_bytes(&mut rec, r.key.as_deref());
        put_bytes(&mut rec, r.value.as_deref());
        put_varint(&mut rec, r.headers.len() as i64);
        for (k, v) in &r.headers {
            put_bytes(&mut rec, Some(k.as_bytes()));
            put_bytes(&mut rec, v.as_deref());
        }
        put_varint(&mut body, rec.len() as i64);
        body.extend_from_slice(&rec);
    }
    let mut b = Vec::with_capacity(61 + body.len());
    b.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
    b.extend_from_slice(&0i32.to_be_bytes()); // length, patched below
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
    b.push(2); // magic
    b.extend_from_slice(&0u32.to_be_bytes()); // crc, patched below
    b.extend_from_slice(&0i16.to_be_bytes()); // attributes: no compression, create time
    b.extend_from_slice(&((records.len() - 1) as i32).to_be_bytes()); // lastOffsetDelta
    b.extend_from_slice(&base_ts.to_be_bytes());
    b.extend_from_slice(&max_ts.to_be_bytes());
    b.extend_from_slice(&producer.id.to_be_bytes());
    b.extend_from_slice(&producer.epoch.to_be_bytes());
    b.extend_from_slice(&producer.base_sequence.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32).to_be_bytes());
    b.extend_from_slice(&body);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&b[ATTRIBUTES_OFFSET..]);
    b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Encodes one compressed v2 batch with kafka-protocol's encoder (client side only). Its
/// record type keeps headers in a map, so header keys must be unique here.
pub fn encode_compressed_batch(
    producer: Producer,
    records: &[Rec],
    compression: kafka_protocol::records::Compression,
) -> Vec<u8> {
    use kafka_protocol::records::{Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let recs: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut headers = kafka_protocol::indexmap::IndexMap::new();
            for (k, v) in &r.headers {
                let old = headers.insert(
                    kafka_protocol::protocol::StrBytes::from_string(k.clone()),
                    v.clone().map(bytes::Bytes::from),
                );
                assert!(
                    old.is_none(),
                    "encode_compressed_batch: duplicate header key {k}"
                );
            }
            Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: producer.id,
                producer_epoch: producer.epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // kafka-protocol groups records into one batch while offset - sequence is constant;
                // the batch's baseSequence is the first record's (so -1 for a plain batch).
                sequence: producer.base_sequence.wrapping_add(i as i32),
                timestamp: r.timestamp,
                key: r.key.clone().map(bytes::Bytes::from),
                value: r.value.clone().map(bytes::Bytes::from),
                headers,
            }
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &recs,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode compressed batch");
    let out = buf.to_vec();
    let parsed = parse_batches(&out).expect("parse own compressed batch");
    assert_eq!(
        parsed.len(),
        1,
        "kafka-protocol split the records into several batches"
    );
    assert_eq!(parsed[0].compression(), compression as i16);
    out
}

/// A record as read back from the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// A batch as read back from the broker.
#[derive(Debug, Clone)]
pub struct ParsedBatch {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub crc_valid: bool,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
    /// Empty for compressed batches (the tests that read raw only produce uncompressed ones).
    pub records: Vec<ParsedRecord>,
    /// The batch's bytes as fetched.
    pub raw: Vec<u8>,
}

impl ParsedBatch {
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    pub fn compression(&self) -> i16 {
        self.attributes & 7
    }
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
}

struct Cur<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.p + n > self.b.len() {
            return Err(format!("truncated at byte {} (need {n})", self.p));
        }
        let s = &self.b[self.p..self.p + n];
        self.p += n;
        Ok(s)
    }
    fn varint(&mut self) -> Result<i64, String> {
        let mut z: u64 = 0;
        let mut shift = 0;
        loop {
            let byte = self.take(1)?[0];
            z |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return Err("varint too long".into());
            }
        }
        Ok(((z >> 1) as i64) ^ -((z & 1) as i64))
    }
    fn bytes(&mut self) -> Result<Option<Vec<u8>>, String> {
        let n = self.varint()?;
        if n < 0 {
            return Ok(None);
        }
        Ok(Some(self.take(n as usize)?.to_vec()))
    }
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b.try_into().unwrap())
}
fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes(b.try_into().unwrap())
}
fn be_i16(b: &[u8]) -> i16 {
    i16::from_be_bytes(b.try_into().unwrap())
}

/// The records of the uncompressed batch at byte `pos`, `body` being what follows its
/// header; every byte of it must belong to the `record_count` records.
fn parse_records(
    body: &[u8],
    batch: &ParsedBatch,
    pos: usize,
) -> Result<Vec<ParsedRecord>, String> {
    let mut c = Cur { b: body, p: 0 };
    let mut records = Vec::new();
    for _ in 0..batch.record_count {
        let rec_len = c.varint()?;
        let start = c.p;
        let _attrs = c.take(1)?;
        let ts_delta = c.varint()?;
        let off_delta = c.varint()?;
        let key = c.bytes()?;
        let value = c.bytes()?;
        let nh = c.varint()?;
        let mut headers = Vec::new();
        for _ in 0..nh {
            let k = c.bytes()?.ok_or("null header key")?;
            let v = c.bytes()?;
            headers.push((String::from_utf8_lossy(&k).into_owned(), v));
        }
        if (c.p - start) as i64 != rec_len {
            return Err(format!(
                "record length {rec_len} but parsed {} bytes",
                c.p - start
            ));
        }
        records.push(ParsedRecord {
            offset: batch.base_offset + off_delta,
            timestamp: batch.base_timestamp + ts_delta,
            key,
            value,
            headers,
        });
    }
    if c.p != body.len() {
        return Err(format!(
            "batch at byte {pos}: {} trailing bytes after {} records",
            body.len() - c.p,
            batch.record_count
        ));
    }
    Ok(records)
}

/// Parses the batches in a Fetch `records` field. A trailing partial batch (allowed by the
/// protocol) is ignored.
pub fn parse_batches(data: &[u8]) -> Result<Vec<ParsedBatch>, String> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while data.len() - pos >= 12 {
        let len = be_i32(&data[pos + 8..pos + 12]);
        if len < 49 {
            return Err(format!("batch at byte {pos} has length {len}"));
        }
        let end = pos + 12 + len as usize;
        if end > data.len() {
            break; // partial trailing batch
        }
        let b = &data[pos..end];
        let crc = u32::from_be_bytes(b[17..21].try_into().unwrap());
        let mut batch = ParsedBatch {
            base_offset: be_i64(&b[0..8]),
            partition_leader_epoch: be_i32(&b[12..16]),
            magic: b[16] as i8,
            crc,
            crc_valid: crc32c::crc32c(&b[ATTRIBUTES_OFFSET..]) == crc,
            attributes: be_i16(&b[21..23]),
            last_offset_delta: be_i32(&b[23..27]),
            base_timestamp: be_i64(&b[27..35]),
            max_timestamp: be_i64(&b[35..43]),
            producer_id: be_i64(&b[43..51]),
            producer_epoch: be_i16(&b[51..53]),
            base_sequence: be_i32(&b[53..57]),
            record_count: be_i32(&b[57..61]),
            records: vec![],
            raw: b.to_vec(),
        };
        if batch.magic != 2 {
            return Err(format!("batch at byte {pos} has magic {}", batch.magic));
        }
        if batch.compression() == 0 {
            batch.records = parse_records(&b[61..], &batch, pos)?;
        }
        out.push(batch);
        pos = end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_parse_round_trip() {
        let recs = vec![
            Rec {
                key: Some(b"k".to_vec()),
                value: None,
                headers: vec![("h".into(), Some(b"1".to_vec())), ("h".into(), None)],
                timestamp: 1000,
            },
            Rec::kv("a", "b", 900),
        ];
        let b = encode_batch(
            Producer {
                id: 7,
                epoch: 2,
                base_sequence: 5,
            },
            &recs,
        );
        let p = parse_batches(&b).unwrap();
        assert_eq!(p.len(), 1);
        let p = &p[0];
        assert!(p.crc_valid);
        assert_eq!(
            (p.producer_id, p.producer_epoch, p.base_sequence),
            (7, 2, 5)
        );
        assert_eq!(p.record_count, 2);
        assert_eq!(p.last_offset_delta, 1);
        assert_eq!(p.max_timestamp, 1000);
        assert_eq!(p.records[0].headers, recs[0].headers);
        assert_eq!(p.records[0].timestamp, 1000);
        assert_eq!(p.records[1].timestamp, 900);
        assert_eq!(p.records[1].value.as_deref(), Some(&b"b"[..]));

        // Cross-check with kafka-protocol's decoder (it merges duplicate headers, so compare
        // only what it keeps).
        let mut bytes = bytes::Bytes::from(b.clone());
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).unwrap();
        assert_eq!(set.records.len(), 2);
        assert_eq!(set.records[0].producer_id, 7);
        assert_eq!(set.records[1].sequence, 6);
        assert_eq!(set.records[1].key.as_deref(), Some(&b"a"[..]));
    }

    #[test]
    fn partial_trailing_batch_is_ignored() {
        let b = encode_batch(Producer::NONE, &[Rec::kv("a", "b", 1)]);
        let mut two = b.clone();
        two.extend_from_slice(&b[..b.len() - 3]);
        assert_eq!(parse_batches(&two).unwrap().len(), 1);
    }
}
