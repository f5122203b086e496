//! Record batches for Produce seeds: valid ones in every compression codec, and the same
//! batches broken the ways a hostile or buggy producer breaks them (bad CRCs, record counts,
//! lengths, magic and codec bits), some with the CRC recomputed so that the broker's checks
//! get past it to the records.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Offsets in a v2 batch header (Kafka's `DefaultRecordBatch` layout).
const LENGTH_OFFSET: usize = 8;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
/// Start of the CRC-covered part.
const ATTRIBUTES_OFFSET: usize = 21;
const RECORDS_COUNT_OFFSET: usize = 57;
const HEADER_BYTES: usize = 61;

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn record(i: i64) -> Record {
    let mut headers = IndexMap::new();
    headers.insert(
        StrBytes::from_static_str("h"),
        Some(Bytes::from_static(b"v")),
    );
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: i,
        sequence: -1,
        timestamp: 1_700_000_000_000 + i,
        key: Some(Bytes::from(format!("key-{i}"))),
        value: Some(Bytes::from(format!("value-{i}-").repeat(8))),
        headers,
    }
}

/// One valid v2 batch of three records.
pub fn valid(compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = (0..3).map(record).collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode a fuzz seed batch");
    buf.to_vec()
}

fn fix_crc(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[ATTRIBUTES_OFFSET..]);
    b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

fn put_i32(b: &mut [u8], at: usize, v: i32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// What is wrong with a [`bomb`], if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// A valid batch.
    None,
    /// The last record's offset delta is one too high (INVALID_RECORD on Kafka and Brook).
    LastOffsetDelta,
    /// The compressed section's last quarter is overwritten (CORRUPT_MESSAGE).
    CorruptTail,
}

/// A decompression bomb: a v2 batch of `records` records, each a null key and a value of
/// `value_bytes` zeros, compressed with `codec` (Kafka's codec id: 1 gzip, 2 snappy in
/// snappy-java's framing, 3 lz4, 4 zstd, whose frame declares a window of 2^`zstd_window_log`
/// and no content size). A few KiB on the wire for hundreds of MiB decompressed; the records
/// are streamed into the compressor, so building one holds no more than its output.
pub fn bomb(
    codec: u8,
    records: usize,
    value_bytes: usize,
    zstd_window_log: u32,
    flaw: Flaw,
) -> Vec<u8> {
    let mut w = bomb_writer(codec, zstd_window_log);
    let zeros = vec![0u8; value_bytes.min(1 << 20)];
    for i in 0..records {
        let offset_delta = if flaw == Flaw::LastOffsetDelta && i + 1 == records {
            i + 1
        } else {
            i
        };
        let mut head = vec![0u8]; // attributes
        put_varint(&mut head, 0); // timestamp delta
        put_varint(&mut head, offset_delta as i64);
        put_varint(&mut head, -1); // null key
        put_varint(&mut head, value_bytes as i64);
        let mut len = Vec::new();
        put_varint(&mut len, (head.len() + value_bytes + 1) as i64);
        w.write(&len);
        w.write(&head);
        let mut left = value_bytes;
        while left > 0 {
            let n = left.min(zeros.len());
            w.write(&zeros[..n]);
            left -= n;
        }
        w.write(&[0]); // no headers
    }
    let mut section = w.finish();
    if flaw == Flaw::CorruptTail {
        let from = section.len() - section.len() / 4;
        for x in &mut section[from..] {
            *x = 0xA5;
        }
    }
    let now = 1_700_000_000_000i64;
    let mut b = Vec::with_capacity(HEADER_BYTES + section.len());
    b.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
    b.extend_from_slice(&((HEADER_BYTES - 12 + section.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
    b.push(2); // magic
    b.extend_from_slice(&0u32.to_be_bytes()); // crc, set below
    b.extend_from_slice(&(codec as i16).to_be_bytes()); // attributes: codec, CreateTime
    b.extend_from_slice(&(records as i32 - 1).to_be_bytes()); // lastOffsetDelta
    b.extend_from_slice(&now.to_be_bytes()); // baseTimestamp
    b.extend_from_slice(&now.to_be_bytes()); // maxTimestamp
    b.extend_from_slice(&(-1i64).to_be_bytes()); // producerId
    b.extend_from_slice(&(-1i16).to_be_bytes()); // producerEpoch
    b.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
    b.extend_from_slice(&(records as i32).to_be_bytes());
    b.extend_from_slice(&section);
    fix_crc(&mut b);
    b
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// The compressing side of [`bomb`].
enum BombWriter {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    /// snappy-java's framing: the output so far and the block being filled.
    Snappy(Vec<u8>, Vec<u8>),
    Lz4(lz4::Encoder<Vec<u8>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

fn bomb_writer(codec: u8, zstd_window_log: u32) -> BombWriter {
    match codec {
        1 => BombWriter::Gzip(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::best(),
        )),
        // snappy-java's framing, built by hand (snap's own frame format is another one).
        2 => BombWriter::Snappy(XERIAL_SNAPPY_MAGIC.to_vec(), Vec::new()),
        3 => BombWriter::Lz4(
            lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max4MB)
                .build(Vec::new())
                .expect("lz4 encoder"),
        ),
        4 => {
            let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).expect("zstd encoder");
            e.include_contentsize(false).expect("zstd parameter");
            e.set_parameter(zstd::zstd_safe::CParameter::WindowLog(zstd_window_log))
                .expect("zstd window");
            BombWriter::Zstd(e)
        }
        other => panic!("no bomb for codec id {other}"),
    }
}

/// Uncompressed bytes per block of snappy-java's framing.
const SNAPPY_BLOCK_BYTES: usize = 32 * 1024;
const XERIAL_SNAPPY_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

impl BombWriter {
    fn write(&mut self, mut bytes: &[u8]) {
        use std::io::Write;
        match self {
            BombWriter::Gzip(e) => e.write_all(bytes).expect("gzip"),
            BombWriter::Lz4(e) => e.write_all(bytes).expect("lz4"),
            BombWriter::Zstd(e) => e.write_all(bytes).expect("zstd"),
            BombWriter::Snappy(out, pending) => {
                while !bytes.is_empty() {
                    let n = bytes.len().min(SNAPPY_BLOCK_BYTES - pending.len());
                    pending.extend_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                    if pending.len() == SNAPPY_BLOCK_BYTES {
                        snappy_block(out, pending);
                        pending.clear();
                    }
                }
            }
        }
    }

    fn finish(self) -> Vec<u8> {
        match self {
            BombWriter::Gzip(e) => e.finish().expect("gzip"),
            BombWriter::Lz4(e) => {
                let (out, res) = e.finish();
                res.expect("lz4");
                out
            }
            BombWriter::Zstd(e) => e.finish().expect("zstd"),
            BombWriter::Snappy(mut out, pending) => {
                if !pending.is_empty() {
                    snappy_block(&mut out, &pending);
                }
                out
            }
        }
    }
}

/// One block of snappy-java's framing: its compressed length (big-endian), then the block.
fn snappy_block(out: &mut Vec<u8>, raw: &[u8]) {
    let c = snap::raw::Encoder::new().compress_vec(raw).expect("snappy");
    out.extend_from_slice(&(c.len() as u32).to_be_bytes());
    out.extend_from_slice(&c);
}

/// Small bombs for the seed corpus: every codec, valid and flawed, 1 MiB decompressed each.
fn bomb_cases() -> Vec<Bytes> {
    let mut out = Vec::new();
    for codec in 1u8..=4 {
        for flaw in [Flaw::None, Flaw::LastOffsetDelta, Flaw::CorruptTail] {
            out.push(Bytes::from(bomb(codec, 4, 256 * 1024, 20, flaw)));
        }
    }
    out
}

/// Every seed batch: valid ones, then broken ones, for every codec.
pub fn cases() -> Vec<Bytes> {
    let mut out = Vec::new();
    for codec in CODECS {
        let good = valid(codec);
        let count =
            i32::from_be_bytes(good[RECORDS_COUNT_OFFSET..HEADER_BYTES].try_into().unwrap());
        let len = good.len() as i32 - 12;
        let mut broken: Vec<Vec<u8>> = Vec::new();
        let mut with = |f: &dyn Fn(&mut Vec<u8>), recompute_crc: bool| {
            let mut b = good.clone();
            f(&mut b);
            if recompute_crc {
                fix_crc(&mut b);
            }
            broken.push(b);
        };
        with(&|b| b[CRC_OFFSET + 1] ^= 0x20, false);
        with(&|b| *b.last_mut().unwrap() ^= 0x01, false);
        for n in [i32::MAX, -1, 0, count + 1, count - 1, 0x00ff_ffff] {
            with(&move |b| put_i32(b, RECORDS_COUNT_OFFSET, n), true);
        }
        for n in [i32::MAX, -1, 0, len + 1, len - 1, 49] {
            with(&move |b| put_i32(b, LENGTH_OFFSET, n), false);
        }
        for magic in [0u8, 1, 3] {
            with(&move |b| b[MAGIC_OFFSET] = magic, true);
        }
        // Every codec id, including the unassigned 5..7, over this codec's bytes.
        for id in 0u8..8 {
            with(
                &move |b| b[ATTRIBUTES_OFFSET + 1] = (b[ATTRIBUTES_OFFSET + 1] & !7) | id,
                true,
            );
        }
        // The first record's length varint (uncompressed) or the compressed stream's first
        // bytes, claiming far more than is there.
        with(
            &|b| b[HEADER_BYTES..HEADER_BYTES + 5].copy_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            true,
        );
        with(&|b| b.truncate(b.len() / 2), false);
        with(&|b| b.truncate(HEADER_BYTES), true);
        out.push(Bytes::from(good.clone()));
        out.extend(broken.into_iter().map(Bytes::from));
        // Two batches in one record set: a good one, then a bad one.
        let mut two = good.clone();
        let mut bad = good.clone();
        put_i32(&mut bad, RECORDS_COUNT_OFFSET, i32::MAX);
        fix_crc(&mut bad);
        two.extend_from_slice(&bad);
        out.push(Bytes::from(two));
    }
    out.extend(bomb_cases());
    out
}
