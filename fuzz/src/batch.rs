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
    out
}
