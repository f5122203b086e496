//! The produce append path of one partition: validation (framing, CRC-32C, record walk), the
//! dedup check, offset assignment, index update and the write into the page cache.
//!
//! Variants per batch shape:
//! - `validate_crc_dedup`: everything before the write (no syscall), the number to compare with
//!   the 4 GiB/s aim for 16 KiB batches;
//! - `crc_only` and `pwrite_only`: the CRC and the write syscall alone, for reference;
//! - `append_plain`: `UnifiedLog::append_as_leader` with a non-idempotent batch;
//! - `append_idempotent`: the same with a producer id; each iteration gets the next sequence
//!   (prepared outside the timed part, since the CRC covers the sequence);
//! - `validate_compressed/<codec>`: validation of one 16 KiB batch per codec, decompression
//!   included, in uncompressed bytes per second.

use std::hint::black_box;

use brook_storage::batch::testutil::BatchBuilder;
use brook_storage::batch::{self};
use brook_storage::validator::{validate_produce, AppendOrigin};
use brook_storage::Codec;
use brook_storage::{LogConfig, ProducerStateManager, RecordBatch, UnifiedLog};
use bytes::Bytes;
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion, Throughput,
};

const NOW: i64 = 1_700_000_000_000;
const PRODUCER_ID: i64 = 4242;
/// Keep the benchmark's disk use bounded: segments of 64 MiB, at most 512 MiB retained.
const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;
const RETENTION_BYTES: i64 = 512 * 1024 * 1024;
/// Appends between retention runs.
const RETENTION_EVERY: u64 = 2048;

/// (name, records per batch, value bytes per record)
const SHAPES: [(&str, usize, usize); 3] = [
    ("1KiB/10x90B", 10, 90),
    ("16KiB/16x1000B", 16, 1000),
    ("16KiB/160x90B", 160, 90),
];

fn batch(records: usize, value_len: usize, producer: bool, sequence: i32) -> Bytes {
    let b = BatchBuilder::new(NOW).records(records, value_len);
    if producer {
        b.idempotent(PRODUCER_ID, 0, sequence).build()
    } else {
        b.build()
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: SEGMENT_BYTES,
        retention_bytes: RETENTION_BYTES,
        ..LogConfig::default()
    }
}

fn bench_append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    for (name, records, value_len) in SHAPES {
        let sample = batch(records, value_len, true, 0);
        group.throughput(Throughput::Bytes(sample.len() as u64));
        let next = batch(records, value_len, true, 0);
        bench_validation(&mut group, name, records, &next);
        let dir = tempfile::tempdir().unwrap();
        bench_pwrite(&mut group, name, dir.path(), &next);
        bench_append_plain(
            &mut group,
            name,
            dir.path(),
            batch(records, value_len, false, 0),
        );
        bench_append_idempotent(&mut group, name, dir.path(), records, value_len);
    }
    group.finish();
    bench_validate_compressed(c);
}

/// `validate_crc_dedup` and `crc_only` for one shape.
fn bench_validation(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    records: usize,
    next: &Bytes,
) {
    // Everything but the write: validation + CRC + record walk + dedup check.
    let cfg = LogConfig::default();
    let mut state = ProducerStateManager::new();
    state.update(
        PRODUCER_ID,
        0,
        -(records as i32),
        -1,
        0,
        records as i64 - 1,
        NOW,
        false,
    );
    group.bench_function(format!("validate_crc_dedup/{name}"), |b| {
        b.iter(|| {
            let v = validate_produce(black_box(next), &cfg, NOW, AppendOrigin::Client).unwrap();
            let check = state
                .check(
                    v.producer_id,
                    v.producer_epoch,
                    v.base_sequence,
                    v.last_sequence,
                    v.is_transactional,
                    AppendOrigin::Client,
                    None,
                )
                .unwrap();
            black_box((v, check))
        })
    });

    // CRC alone, for reference.
    group.bench_function(format!("crc_only/{name}"), |b| {
        b.iter(|| black_box(RecordBatch::parse(black_box(next)).unwrap().0.compute_crc()))
    });
}

/// `pwrite_only`: the write syscall alone, for one shape.
fn bench_pwrite(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    dir: &std::path::Path,
    next: &Bytes,
) {
    // The write syscall alone (same sizes, same page-cache path), to separate our CPU cost
    // from the kernel's in the full append figures.
    let file = std::fs::File::create(dir.join("raw.log")).unwrap();
    let mut position = 0u64;
    group.bench_function(format!("pwrite_only/{name}"), |b| {
        b.iter(|| {
            use std::os::unix::fs::FileExt;
            file.write_all_at(next, position).unwrap();
            position += next.len() as u64;
            if position > SEGMENT_BYTES {
                file.set_len(0).unwrap();
                position = 0;
            }
        })
    });
    drop(file);
}

/// `append_plain`: appends of a non-idempotent batch of one shape.
fn bench_append_plain(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    dir: &std::path::Path,
    plain: Bytes,
) {
    let mut log = UnifiedLog::open(dir.join("plain-0"), config(), true, NOW).unwrap();
    let mut n = 0u64;
    group.bench_function(format!("append_plain/{name}"), |b| {
        b.iter(|| {
            let info = log.append_as_leader(plain.clone(), 0, NOW).unwrap();
            n += 1;
            if n.is_multiple_of(RETENTION_EVERY) {
                log.delete_old_segments(NOW, i64::MAX).unwrap();
            }
            black_box(info)
        })
    });
    drop(log);
}

/// `append_idempotent`: appends of one shape with a producer id, each at the next sequence.
fn bench_append_idempotent(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    dir: &std::path::Path,
    records: usize,
    value_len: usize,
) {
    let mut log = UnifiedLog::open(dir.join("idem-0"), config(), true, NOW).unwrap();
    let template = batch(records, value_len, true, 0).to_vec();
    let mut sequence = 0i32;
    let mut n = 0u64;
    group.bench_function(format!("append_idempotent/{name}"), |b| {
        b.iter_batched(
            || {
                // Next sequence; the CRC covers baseSequence, so fix it outside the timing.
                let mut x = template.clone();
                x[53..57].copy_from_slice(&sequence.to_be_bytes());
                brook_storage::batch::testutil::fix_crc(&mut x);
                sequence = batch::increment_sequence(sequence, records as i32);
                Bytes::from(x)
            },
            |bytes| {
                let info = log.append_as_leader(bytes, 0, NOW).unwrap();
                assert!(info.duplicate.is_none());
                n += 1;
                if n.is_multiple_of(RETENTION_EVERY) {
                    log.delete_old_segments(NOW, i64::MAX).unwrap();
                }
                info
            },
            BatchSize::SmallInput,
        )
    });
}

fn bench_validate_compressed(c: &mut Criterion) {
    // Compressed batches are decompressed (bounded) to validate each record, as Kafka's
    // LogValidator does. Throughput is counted in uncompressed bytes, against the same batch
    // uncompressed.
    let mut group = c.benchmark_group("validate_compressed");
    let cfg = LogConfig::default();
    let (records, value_len) = (160, 90);
    let raw_len = batch(records, value_len, false, 0).len() as u64;
    group.throughput(Throughput::Bytes(raw_len));
    for codec in [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ] {
        let b = BatchBuilder::new(NOW)
            .codec(codec)
            .records(records, value_len)
            .build();
        group.bench_function(format!("{codec:?}/16KiB/160x90B"), |bench| {
            bench.iter(|| {
                black_box(validate_produce(black_box(&b), &cfg, NOW, AppendOrigin::Client).unwrap())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_append);
criterion_main!(benches);
