//! Log cleaner throughput: one `Cleaner::clean` of a compacted log whose dirty section is
//! 8 segments of 1 MiB, in bytes of dirty log per second (building the offset map, reading
//! every batch, rebuilding them, writing and flushing the cleaned segments, the swaps).
//!
//! Shapes: 16 KiB batches of 16 records of 1000-byte values over 100 keys (all but the last
//! 100 records go: mostly reading), and over 100,000 keys, more than the 8,192 records, so that
//! nothing goes (a map of 8,192 keys, every batch copied whole, 8 MiB written and fsynced).
//! Each iteration cleans a fresh log, written outside the timed part.
//!
//! On the shared 2-vCPU VM of benches/RESULTS.md, with other builds running (2026-12-03):
//! 100 keys 58 ms per clean (138 MiB/s of dirty log, 87 to 297 over the samples), 100,000
//! keys 155 ms (52 MiB/s).

use std::hint::black_box;

use brook_storage::batch::testutil::{BatchBuilder, SimpleRecord};
use brook_storage::cleaner::{clean_in_place, Cleaner};
use brook_storage::{LogConfig, UnifiedLog};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

const NOW: i64 = 1_700_000_000_000;
const SEGMENT_BYTES: u64 = 1024 * 1024;
const SEGMENTS: usize = 8;
const RECORDS_PER_BATCH: usize = 16;
const VALUE_BYTES: usize = 1000;
/// Kafka's default `log.cleaner.dedupe.buffer.size` for one thread.
const DEDUPE_BYTES: usize = 128 * 1024 * 1024;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: SEGMENT_BYTES,
        cleanup_policy_compact: true,
        cleanup_policy_delete: false,
        ..LogConfig::default()
    }
}

/// A fresh log with `SEGMENTS` full segments of updates over `keys` keys, plus an active one.
fn dirty_log(dir: &std::path::Path, keys: usize) -> UnifiedLog {
    let mut log = UnifiedLog::open(dir.to_path_buf(), config(), true, NOW).unwrap();
    let mut n = 0usize;
    while log.segment_count() <= SEGMENTS {
        let mut b = BatchBuilder::new(NOW);
        for i in 0..RECORDS_PER_BATCH {
            b.records.push(SimpleRecord {
                timestamp_delta: i as i64,
                key: Some(format!("key-{}", n % keys).into_bytes()),
                value: Some(vec![(n % 251) as u8; VALUE_BYTES]),
                headers: Vec::new(),
            });
            n += 1;
        }
        log.append_as_leader(b.build(), 0, NOW).unwrap();
    }
    log
}

fn clean(log: &mut UnifiedLog) -> i64 {
    let mut cleaner = Cleaner::new(DEDUPE_BYTES);
    let outcome = clean_in_place(&mut cleaner, log, None, NOW, true)
        .unwrap()
        .unwrap();
    assert!(outcome.completed);
    outcome.next_dirty_offset
}

fn bench_cleaner(c: &mut Criterion) {
    let mut group = c.benchmark_group("cleaner");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(SEGMENT_BYTES * SEGMENTS as u64));
    for keys in [100, 100_000] {
        group.bench_function(format!("8MiB/16x1000B/{keys}keys"), |bench| {
            bench.iter_batched(
                || {
                    let dir = tempfile::tempdir().unwrap();
                    let log = dirty_log(dir.path(), keys);
                    (dir, log)
                },
                |(dir, mut log)| {
                    black_box(clean(&mut log));
                    (dir, log)
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench_cleaner);
criterion_main!(benches);
