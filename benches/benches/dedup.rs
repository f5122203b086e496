//! The idempotence window alone: `ProducerStateManager::check` and `update` for an in-sequence
//! batch, a retry found in the 5-batch window, and lookups among many producers.

use std::hint::black_box;

use brook_storage::batch::increment_sequence;
use brook_storage::producer_state::SequenceCheck;
use brook_storage::validator::AppendOrigin;
use brook_storage::ProducerStateManager;
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};

const PRODUCERS: i64 = 10_000;
const RECORDS_PER_BATCH: i32 = 10;

fn filled(producers: i64) -> ProducerStateManager {
    let mut m = ProducerStateManager::new();
    let mut offset = 0i64;
    for pid in 0..producers {
        for b in 0..5 {
            let first = b * RECORDS_PER_BATCH;
            m.update(
                pid,
                0,
                first,
                first + RECORDS_PER_BATCH - 1,
                offset,
                offset + RECORDS_PER_BATCH as i64 - 1,
                0,
                false,
            );
            offset += RECORDS_PER_BATCH as i64;
        }
    }
    m
}

fn bench_dedup(c: &mut Criterion) {
    let mut group = c.benchmark_group("dedup");
    let next = 5 * RECORDS_PER_BATCH;
    bench_one_producer(&mut group, &filled(1), next);
    bench_many_producers(&mut group, &filled(PRODUCERS), next);
    bench_check_and_update(&mut group, next);
    group.finish();
}

/// `check` of one producer's next batch, and of a retry of the oldest batch of its window.
fn bench_one_producer(
    group: &mut BenchmarkGroup<'_, WallTime>,
    one: &ProducerStateManager,
    next: i32,
) {
    group.bench_function("check_in_sequence/1_producer", |b| {
        b.iter(|| {
            one.check(
                black_box(0),
                0,
                black_box(next),
                next + RECORDS_PER_BATCH - 1,
                false,
                AppendOrigin::Client,
                None,
            )
            .unwrap()
        })
    });
    group.bench_function("check_retry_oldest/1_producer", |b| {
        b.iter(|| {
            let r = one
                .check(
                    black_box(0),
                    0,
                    black_box(0),
                    RECORDS_PER_BATCH - 1,
                    false,
                    AppendOrigin::Client,
                    None,
                )
                .unwrap();
            assert!(matches!(r, SequenceCheck::Duplicate(_)));
            r
        })
    });
}

/// `check` of the next batch of one producer among [`PRODUCERS`].
fn bench_many_producers(
    group: &mut BenchmarkGroup<'_, WallTime>,
    many: &ProducerStateManager,
    next: i32,
) {
    group.bench_function("check_in_sequence/10k_producers", |b| {
        let mut pid = 0i64;
        b.iter(|| {
            pid = (pid + 7919) % PRODUCERS;
            many.check(
                black_box(pid),
                0,
                next,
                next + RECORDS_PER_BATCH - 1,
                false,
                AppendOrigin::Client,
                None,
            )
            .unwrap()
        })
    });
}

/// `check` then `update`, batch after batch, for one producer.
fn bench_check_and_update(group: &mut BenchmarkGroup<'_, WallTime>, next: i32) {
    group.bench_function("check_and_update/1_producer", |b| {
        let mut m = filled(1);
        let mut seq = next;
        let mut offset = 1_000_000i64;
        b.iter(|| {
            let last = seq + RECORDS_PER_BATCH - 1;
            let r = m
                .check(0, 0, seq, last, false, AppendOrigin::Client, None)
                .unwrap();
            m.update(
                0,
                0,
                seq,
                last,
                offset,
                offset + RECORDS_PER_BATCH as i64 - 1,
                0,
                false,
            );
            seq = increment_sequence(last, 1);
            offset += RECORDS_PER_BATCH as i64;
            r
        })
    });
}

criterion_group!(benches, bench_dedup);
criterion_main!(benches);
