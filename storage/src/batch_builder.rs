//! Builds v2 record batches (Kafka's `MemoryRecordsBuilder`): the broker writes its own
//! batches with it (the transaction log, the group store's `__consumer_offsets` records),
//! and tests and benchmarks build client-like batches with it. Batches a client sends are
//! never rebuilt: they are stored exactly as received.

use bytes::{BufMut, Bytes, BytesMut};

use super::records::XERIAL_SNAPPY_MAGIC;

use super::batch::{
    Codec, CONTROL_BIT, CRC_AT, CRC_COVERED_FROM, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2,
    NO_PRODUCER_ID, NO_SEQUENCE, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT,
};

/// Appends `v` as a zig-zag varint (Kafka's `ByteUtils.writeVarlong`).
pub(crate) fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

fn put_nullable(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// One record to encode.
#[derive(Debug, Clone, Default)]
pub struct SimpleRecord {
    /// Added to the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Key; `None` encodes null.
    pub key: Option<Vec<u8>>,
    /// Value; `None` encodes null.
    pub value: Option<Vec<u8>>,
    /// Headers (key, value).
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// Encodes a records section; the offset delta of record i is i.
pub fn encode_records(records: &[SimpleRecord]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = Vec::new();
    for (i, r) in records.iter().enumerate() {
        body.clear();
        body.push(0);
        put_varint(&mut body, r.timestamp_delta);
        put_varint(&mut body, i as i64);
        put_nullable(&mut body, r.key.as_deref());
        put_nullable(&mut body, r.value.as_deref());
        put_varint(&mut body, r.headers.len() as i64);
        for (k, v) in &r.headers {
            put_nullable(&mut body, Some(k));
            put_nullable(&mut body, v.as_deref());
        }
        put_varint(&mut out, body.len() as i64);
        out.extend_from_slice(&body);
    }
    out
}

/// A v2 batch under construction. Defaults: offset 0, no producer, CreateTime, no compression.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub base_timestamp: i64,
    pub codec: Codec,
    pub transactional: bool,
    pub control: bool,
    pub log_append_time: bool,
    pub records: Vec<SimpleRecord>,
}

impl BatchBuilder {
    /// An empty non-idempotent batch with the given base timestamp.
    pub fn new(base_timestamp: i64) -> Self {
        BatchBuilder {
            base_offset: 0,
            partition_leader_epoch: -1,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: -1,
            base_sequence: NO_SEQUENCE,
            base_timestamp,
            codec: Codec::None,
            transactional: false,
            control: false,
            log_append_time: false,
            records: Vec::new(),
        }
    }
    /// Sets producer id, epoch and base sequence.
    pub fn idempotent(mut self, producer_id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }
    /// Sets the compression codec.
    pub fn codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }
    /// Adds a record with a value and a timestamp delta.
    pub fn record(mut self, timestamp_delta: i64, key: Option<&[u8]>, value: &[u8]) -> Self {
        self.records.push(SimpleRecord {
            timestamp_delta,
            key: key.map(|k| k.to_vec()),
            value: Some(value.to_vec()),
            headers: Vec::new(),
        });
        self
    }
    /// Adds `n` records with `value_len`-byte values, timestamps base+i.
    pub fn records(mut self, n: usize, value_len: usize) -> Self {
        for i in 0..n {
            let value = vec![(i % 251) as u8; value_len];
            self = self.record(i as i64, None, &value);
        }
        self
    }
    /// Encodes the batch with a valid CRC.
    pub fn build(&self) -> Bytes {
        let raw = encode_records(&self.records);
        let body: Vec<u8> = match self.codec {
            Codec::None => raw,
            codec => compress(codec, &raw),
        };
        let count = self.records.len() as i32;
        let max_ts = self
            .records
            .iter()
            .map(|r| self.base_timestamp + r.timestamp_delta)
            .max()
            .unwrap_or(self.base_timestamp);
        let mut attributes: i16 = self.codec.id() as i16;
        if self.log_append_time {
            attributes |= TIMESTAMP_TYPE_BIT;
        }
        if self.transactional {
            attributes |= TRANSACTIONAL_BIT;
        }
        if self.control {
            attributes |= CONTROL_BIT;
        }
        let mut b = BytesMut::with_capacity(HEADER_LEN + body.len());
        b.put_i64(self.base_offset);
        b.put_i32((HEADER_LEN - LOG_OVERHEAD + body.len()) as i32);
        b.put_i32(self.partition_leader_epoch);
        b.put_i8(MAGIC_V2);
        b.put_u32(0);
        b.put_i16(attributes);
        b.put_i32(count - 1);
        b.put_i64(self.base_timestamp);
        b.put_i64(max_ts);
        b.put_i64(self.producer_id);
        b.put_i16(self.producer_epoch);
        b.put_i32(self.base_sequence);
        b.put_i32(count);
        b.put_slice(&body);
        let crc = crc32c::crc32c(&b[CRC_COVERED_FROM..]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        b.freeze()
    }
}

/// `raw` compressed with `codec` in memory.
pub(crate) fn compress(codec: Codec, raw: &[u8]) -> Vec<u8> {
    let mut w = CompressWriter::new(codec);
    // Writing into an in-memory buffer: the codecs fail only on allocation.
    std::io::Write::write_all(&mut w, raw).expect("compressing into memory");
    w.finish().expect("compressing into memory")
}

/// zstd's level for the batches Brook compresses (kafka-protocol's, and zstd's default).
const ZSTD_LEVEL: i32 = 3;
/// lz4's level (kafka-protocol's).
const LZ4_LEVEL: u32 = 4;
/// Uncompressed bytes per block of snappy-java's framed format (its `SnappyOutputStream`
/// default block size).
const SNAPPY_BLOCK_BYTES: usize = 32 * 1024;

/// A records section compressed as it is written, into memory (the compressing side of
/// Kafka's `MemoryRecordsBuilder`): the cleaner writes a rebuilt batch's retained records
/// through it one at a time, so only the compressed output is held. Gzip at the default
/// level, lz4 frames of independent blocks, zstd level 3, snappy in snappy-java's framing.
pub(crate) enum CompressWriter {
    None(Vec<u8>),
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Lz4(lz4::Encoder<Vec<u8>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
    Snappy { out: Vec<u8>, pending: Vec<u8> },
}

impl CompressWriter {
    pub(crate) fn new(codec: Codec) -> CompressWriter {
        let encoders = || -> std::io::Result<CompressWriter> {
            Ok(match codec {
                Codec::None => CompressWriter::None(Vec::new()),
                Codec::Gzip => CompressWriter::Gzip(flate2::write::GzEncoder::new(
                    Vec::new(),
                    flate2::Compression::default(),
                )),
                Codec::Lz4 => CompressWriter::Lz4(
                    lz4::EncoderBuilder::new()
                        .level(LZ4_LEVEL)
                        .block_mode(lz4::BlockMode::Independent)
                        .build(Vec::new())?,
                ),
                Codec::Zstd => {
                    CompressWriter::Zstd(zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL)?)
                }
                Codec::Snappy => CompressWriter::Snappy {
                    out: XERIAL_SNAPPY_MAGIC.to_vec(),
                    pending: Vec::with_capacity(SNAPPY_BLOCK_BYTES),
                },
            })
        };
        // Encoders over memory fail only when they cannot allocate their state.
        encoders().expect("allocating a compressor")
    }

    /// The compressed section.
    pub(crate) fn finish(self) -> std::io::Result<Vec<u8>> {
        match self {
            CompressWriter::None(v) => Ok(v),
            CompressWriter::Gzip(e) => e.finish(),
            CompressWriter::Lz4(e) => {
                let (out, res) = e.finish();
                res.map(|_| out)
            }
            CompressWriter::Zstd(e) => e.finish(),
            CompressWriter::Snappy { mut out, pending } => {
                snappy_block(&mut out, &pending)?;
                Ok(out)
            }
        }
    }
}

/// Appends one framed snappy block: its compressed length (big-endian u32), then the block.
fn snappy_block(out: &mut Vec<u8>, raw: &[u8]) -> std::io::Result<()> {
    if raw.is_empty() {
        return Ok(());
    }
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    let start = out.len();
    out.resize(start + snap::raw::max_compress_len(raw.len()), 0);
    let n = snap::raw::Encoder::new()
        .compress(raw, &mut out[start..])
        .map_err(std::io::Error::other)?;
    out.truncate(start + n);
    out[at..start].copy_from_slice(&(n as u32).to_be_bytes());
    Ok(())
}

impl std::io::Write for CompressWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            CompressWriter::None(v) => v.write(buf),
            CompressWriter::Gzip(e) => e.write(buf),
            CompressWriter::Lz4(e) => e.write(buf),
            CompressWriter::Zstd(e) => e.write(buf),
            CompressWriter::Snappy { out, pending } => {
                let n = buf.len().min(SNAPPY_BLOCK_BYTES - pending.len());
                pending.extend_from_slice(&buf[..n]);
                if pending.len() == SNAPPY_BLOCK_BYTES {
                    snappy_block(out, pending)?;
                    pending.clear();
                }
                Ok(n)
            }
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
