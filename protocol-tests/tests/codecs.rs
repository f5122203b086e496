//! Round trip through librdkafka with every compression codec, for both the idempotent and the
//! default producer: keys (and null keys), null values, headers with duplicate keys, explicit
//! timestamps. Also checks, with raw Fetches, that the broker stored each batch with the codec
//! the client used (never recompressed) and kept the producer fields.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::rd::{self, Got};
use brook_protocol_tests::{unique_topic, Broker, WireClient};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::Producer;

const N: usize = 300;
const BASE_TS: i64 = 1_700_000_000_000;
/// The first records are sent one batch each (see `round_trip`).
const SINGLE_RECORD_BATCHES: usize = 12;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp: i64,
}

fn expected(i: usize) -> Expected {
    // Every record carries a repetitive field, so that any batch librdkafka happens to cut
    // (linger.ms decides where, so a batch may hold a single record) compresses smaller than
    // it is: librdkafka sends a batch uncompressed when the codec does not shrink it
    // (rdkafka_msgset_writer.c), and the stored-codec check below would then fail by timing.
    let value = if i.is_multiple_of(5) {
        None
    } else {
        Some(format!("value-{i}-").repeat(20 + i % 30).into_bytes())
    };
    let key = if i % 7 == 3 {
        None
    } else if value.is_none() {
        Some(format!("key-{i}-").repeat(30).into_bytes())
    } else {
        Some(format!("key-{i}").into_bytes())
    };
    let mut headers = match i % 3 {
        0 => vec![
            ("dup".to_string(), Some(format!("first-{i}").into_bytes())),
            ("other".to_string(), None),
            ("dup".to_string(), Some(format!("second-{i}").into_bytes())),
        ],
        1 => vec![],
        _ => vec![("single".to_string(), Some(vec![0u8, 1, 2, 255]))],
    };
    if key.is_none() && value.is_none() {
        headers.push((
            "pad".to_string(),
            Some(format!("pad-{i}-").repeat(30).into_bytes()),
        ));
    }
    // Timestamps are explicit and deliberately not monotonic.
    let timestamp = BASE_TS + (i as i64 * 1000) - if i % 10 == 4 { 500_000 } else { 0 };
    Expected {
        key,
        value,
        headers,
        timestamp,
    }
}

fn codec_id(codec: &str) -> i16 {
    match codec {
        "none" => 0,
        "gzip" => 1,
        "snappy" => 2,
        "lz4" => 3,
        "zstd" => 4,
        _ => unreachable!(),
    }
}

fn round_trip(broker: &Broker, codec: &str, idempotent: bool) {
    let label = format!("codec={codec} idempotent={idempotent}");
    let topic = unique_topic(&format!(
        "rt-{codec}-{}",
        if idempotent { "idem" } else { "plain" }
    ));
    let mut extra = vec![("compression.codec", codec), ("linger.ms", "50")];
    if idempotent {
        extra.push(("enable.idempotence", "true"));
    }
    let producer = rd::producer(&broker.bootstrap(), &extra);
    let exp: Vec<Expected> = (0..N).map(expected).collect();
    for (i, e) in exp.iter().enumerate() {
        let mut rec = rd::record(&topic, i, None, e.key.as_deref(), e.value.as_deref());
        rec.timestamp = Some(e.timestamp);
        if !e.headers.is_empty() {
            let mut h = OwnedHeaders::new();
            for (k, v) in &e.headers {
                h = h.insert(Header {
                    key: k,
                    value: v.as_deref(),
                });
            }
            rec.headers = Some(h);
        }
        rd::send(&producer, rec);
        if i < SINGLE_RECORD_BATCHES {
            // Waiting for each delivery makes these records batches of one record each: the
            // smallest batch a client sends must keep its codec too.
            producer
                .flush(Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("{label}: flush after record {i}: {e}"));
        }
    }
    let deliveries = rd::flush(&producer, N, Duration::from_secs(60));
    rd::assert_all_delivered(&deliveries);
    drop(producer);

    let got = rd::read_to_end(&broker.bootstrap(), &topic, &[0], Duration::from_secs(60));
    let got: &Vec<Got> = &got[&0];
    assert_eq!(got.len(), N, "{label}: records read back");
    for (i, (g, e)) in got.iter().zip(&exp).enumerate() {
        assert_eq!(g.offset, i as i64, "{label}: offset of record {i}");
        assert_eq!(
            deliveries[i].offset, g.offset,
            "{label}: delivery report offset of record {i}"
        );
        assert_eq!(g.key, e.key, "{label}: key of record {i}");
        assert_eq!(g.value, e.value, "{label}: value of record {i}");
        assert_eq!(
            g.timestamp,
            Some(e.timestamp),
            "{label}: timestamp of record {i}"
        );
        assert_eq!(
            g.headers, e.headers,
            "{label}: headers of record {i} (duplicates in order)"
        );
    }

    // The stored batches: codec as sent, producer fields kept, sequences contiguous.
    let mut wire = WireClient::connect(&broker.bootstrap());
    let batches = wire.fetch_all(&topic, 0);
    assert!(!batches.is_empty(), "{label}: no batches fetched");
    let mut next_offset = 0i64;
    for b in &batches {
        assert_eq!(
            b.base_offset, next_offset,
            "{label}: batch base offsets must be contiguous"
        );
        assert_eq!(
            b.compression(),
            codec_id(codec),
            "{label}: batch at {} stored with codec {} (attributes {:#x}){}",
            b.base_offset,
            b.compression(),
            b.attributes,
            if codec == "lz4" && b.compression() == 0 {
                ". NOTE: librdkafka compresses with lz4 only if the broker advertises \
                 FindCoordinator (rdkafka_feature.c: RD_KAFKA_FEATURE_LZ4 depends on \
                 FindCoordinator), otherwise it silently sends lz4-configured batches uncompressed"
            } else {
                ""
            }
        );
        if idempotent {
            assert!(
                b.producer_id >= 0,
                "{label}: idempotent batch without producer id: {b:?}"
            );
            assert_eq!(
                b.base_sequence as i64, b.base_offset,
                "{label}: base sequence of batch at {} (one producer, one partition)",
                b.base_offset
            );
        } else {
            assert_eq!(
                b.producer_id, -1,
                "{label}: plain batch with a producer id: {b:?}"
            );
        }
        next_offset = b.last_offset() + 1;
    }
    assert_eq!(next_offset, N as i64, "{label}: last fetched offset");
}

fn codec_test(codec: &str) {
    let broker = Broker::start();
    round_trip(&broker, codec, false);
    round_trip(&broker, codec, true);
}

#[test]
fn round_trip_none() {
    codec_test("none");
}

#[test]
fn round_trip_gzip() {
    codec_test("gzip");
}

#[test]
fn round_trip_snappy() {
    codec_test("snappy");
}

#[test]
fn round_trip_lz4() {
    codec_test("lz4");
}

#[test]
fn round_trip_zstd() {
    codec_test("zstd");
}

/// Compressed batches built by the test itself (so lz4 is covered whatever librdkafka decides)
/// are stored byte for byte as sent, and librdkafka reads them back.
#[test]
fn raw_compressed_batches_are_stored_as_sent() {
    use brook_protocol_tests::batch::{
        encode_compressed_batch, parse_batches, Producer, Rec, ATTRIBUTES_OFFSET,
    };
    use kafka_protocol::records::Compression;

    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    for (codec, compression) in [
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        let topic = unique_topic(&format!("raw-{codec}"));
        c.ensure_topic(&topic);
        let recs: Vec<Rec> = (0..50)
            .map(|i| Rec {
                key: if i % 4 == 1 {
                    None
                } else {
                    Some(format!("key-{i}").into_bytes())
                },
                value: if i % 5 == 0 {
                    None
                } else {
                    Some(format!("value-{i}-").repeat(30).into_bytes())
                },
                headers: if i % 2 == 0 {
                    vec![
                        ("h".into(), Some(format!("{i}").into_bytes())),
                        ("n".into(), None),
                    ]
                } else {
                    vec![]
                },
                timestamp: BASE_TS + i as i64,
            })
            .collect();
        let sent = encode_compressed_batch(Producer::NONE, &recs, compression);
        let r = c.produce(&topic, 0, sent.clone());
        assert_eq!(
            (r.error_code, r.base_offset),
            (0, 0),
            "{codec}: produce of a compressed batch: {r:?}"
        );
        // A second batch, to see the offsets assigned to a compressed batch after the first.
        let r = c.produce(&topic, 0, sent.clone());
        assert_eq!(
            (r.error_code, r.base_offset),
            (0, 50),
            "{codec}: second compressed batch: {r:?}"
        );

        let batches = c.fetch_all(&topic, 0);
        assert_eq!(batches.len(), 2, "{codec}: fetched batches");
        for (i, b) in batches.iter().enumerate() {
            assert_eq!(
                b.base_offset,
                50 * i as i64,
                "{codec}: base offset of batch {i}"
            );
            assert_eq!(
                b.compression(),
                compression as i16,
                "{codec}: stored codec of batch {i}"
            );
            assert_eq!(
                &b.raw[ATTRIBUTES_OFFSET..],
                &sent[ATTRIBUTES_OFFSET..],
                "{codec}: batch {i} was not stored as sent (recompressed or rewritten)"
            );
            assert_eq!(
                b.crc,
                parse_batches(&sent).unwrap()[0].crc,
                "{codec}: CRC of batch {i}"
            );
        }

        let got = rd::read_to_end(&broker.bootstrap(), &topic, &[0], Duration::from_secs(60));
        let got = &got[&0];
        assert_eq!(got.len(), 100, "{codec}: records read by librdkafka");
        for (off, g) in got.iter().enumerate() {
            let e = &recs[off % 50];
            assert_eq!(g.offset, off as i64, "{codec}");
            assert_eq!(
                (&g.key, &g.value),
                (&e.key, &e.value),
                "{codec}: record at offset {off}"
            );
            assert_eq!(
                g.timestamp,
                Some(e.timestamp),
                "{codec}: timestamp at offset {off}"
            );
            assert_eq!(g.headers, e.headers, "{codec}: headers at offset {off}");
        }
    }
}
