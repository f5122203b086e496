//! Tests of the whole log: append/read round trips, rolls, fetch slices, retention, recovery,
//! truncation and producer state across restarts.

use std::path::Path;

use bytes::Bytes;

use super::batch::testutil::{build_batch, build_idempotent_batch, BatchBuilder};
use super::batch::{BatchHeader, Codec, RecordBatch};
use super::segment::{segment_file, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
use super::*;

const NOW: i64 = 1_700_000_000_000;

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig, clean: bool) -> UnifiedLog {
    UnifiedLog::open(dir.to_path_buf(), config, clean, NOW).unwrap()
}

/// Reads everything from `offset` up to the log end, batch by batch, returning (base, last).
fn read_all(log: &UnifiedLog, mut offset: i64) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    while offset < log.log_end_offset() {
        let slice = log.read(offset, 1 << 20, i64::MAX, true).unwrap();
        let bytes = slice.read().unwrap();
        assert!(!bytes.is_empty(), "no progress at {offset}");
        let mut pos = 0;
        while pos < bytes.len() {
            let (b, size) = RecordBatch::parse(&bytes[pos..]).unwrap();
            assert!(b.is_crc_valid());
            let h = b.header();
            out.push((h.base_offset(), h.last_offset()));
            offset = h.next_offset();
            pos += size;
        }
    }
    out
}

fn append_n(log: &mut UnifiedLog, batches: usize, records: usize, value_len: usize) {
    for i in 0..batches {
        log.append_as_leader(build_batch(records, value_len, NOW + i as i64), 3, NOW)
            .unwrap();
    }
}

#[test]
fn append_assigns_dense_offsets_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    let a = log
        .append_as_leader(build_batch(3, 10, NOW), 7, NOW)
        .unwrap();
    assert_eq!(
        (
            a.first_offset,
            a.last_offset,
            a.record_count,
            a.duplicate.is_some()
        ),
        (0, 2, 3, false)
    );
    assert_eq!(a.log_append_time_ms, -1);
    let b = log
        .append_as_leader(build_batch(2, 10, NOW), 7, NOW)
        .unwrap();
    assert_eq!((b.first_offset, b.last_offset), (3, 4));
    assert_eq!(log.log_end_offset(), 5);
    let bytes = log
        .read(0, 1 << 20, i64::MAX, false)
        .unwrap()
        .read()
        .unwrap();
    let (first, size) = RecordBatch::parse(&bytes).unwrap();
    assert_eq!(first.header().base_offset(), 0);
    assert_eq!(first.header().partition_leader_epoch(), 7);
    assert!(first.is_crc_valid());
    let (second, _) = RecordBatch::parse(&bytes[size..]).unwrap();
    assert_eq!(second.header().base_offset(), 3);
    // the stored batch differs from the client's only in baseOffset and leader epoch
    let client = build_batch(2, 10, NOW);
    assert_eq!(&second.bytes()[16..], &client[16..]);
}

#[test]
fn reads_at_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    append_n(&mut log, 3, 4, 10); // batches [0,3] [4,7] [8,11]
                                  // at the log end: empty
    assert!(log
        .read(12, 1000, i64::MAX, true)
        .unwrap()
        .read()
        .unwrap()
        .is_empty());
    // beyond: out of range
    assert_eq!(
        log.read(13, 1000, i64::MAX, true).unwrap_err().error_code(),
        1
    );
    assert_eq!(
        log.read(-1, 1000, i64::MAX, true).unwrap_err().error_code(),
        1
    );
    // mid-batch: from the batch holding it
    let bytes = log
        .read(6, 1 << 20, i64::MAX, false)
        .unwrap()
        .read()
        .unwrap();
    assert_eq!(BatchHeader::new(&bytes).unwrap().base_offset(), 4);
}

#[test]
fn fetch_slice_cuts_at_high_watermark_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    append_n(&mut log, 4, 2, 100); // [0,1] [2,3] [4,5] [6,7]
    let one = build_batch(2, 100, NOW).len();
    // HW = 4: only the first two batches
    let bytes = log.read(0, 1 << 20, 4, false).unwrap().read().unwrap();
    assert_eq!(bytes.len(), 2 * one);
    // fetch at or above HW: empty
    assert!(log
        .read(4, 1 << 20, 4, true)
        .unwrap()
        .read()
        .unwrap()
        .is_empty());
    // max_bytes cuts to whole batches
    let bytes = log
        .read(0, one * 2 + one / 2, i64::MAX, false)
        .unwrap()
        .read()
        .unwrap();
    assert_eq!(bytes.len(), 2 * one);
    // max_bytes below one batch: nothing without min_one_message, the whole batch with it
    assert!(log
        .read(0, 10, i64::MAX, false)
        .unwrap()
        .read()
        .unwrap()
        .is_empty());
    let bytes = log.read(0, 10, i64::MAX, true).unwrap().read().unwrap();
    assert_eq!(bytes.len(), one);
    // the slice is bounded by the segment size at read time: later appends are not read
    let slice = log.read(6, 1 << 20, i64::MAX, false).unwrap();
    append_n(&mut log, 1, 2, 100);
    assert_eq!(slice.read().unwrap().len(), one);
}

#[test]
fn rolls_segments_and_reads_across_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    append_n(&mut log, 60, 5, 40); // ~300 bytes each: several segments
    assert!(log.segment_count() > 3, "{}", log.segment_count());
    let bases = log.segment_base_offsets();
    for b in &bases {
        assert!(segment_file(dir.path(), *b, LOG_SUFFIX).exists());
        assert!(segment_file(dir.path(), *b, INDEX_SUFFIX).exists());
        assert!(segment_file(dir.path(), *b, TIME_INDEX_SUFFIX).exists());
    }
    let got = read_all(&log, 0);
    assert_eq!(got.len(), 60);
    for (i, (base, last)) in got.iter().enumerate() {
        assert_eq!((*base, *last), (i as i64 * 5, i as i64 * 5 + 4));
    }
    // a fetch at the end of a segment continues with the next one
    let second = bases[1];
    let bytes = log
        .read(second, 100, i64::MAX, true)
        .unwrap()
        .read()
        .unwrap();
    assert_eq!(BatchHeader::new(&bytes).unwrap().base_offset(), second);
    // every offset resolves to the batch holding it
    for off in 0..log.log_end_offset() {
        let bytes = log.read(off, 1, i64::MAX, true).unwrap().read().unwrap();
        let h = BatchHeader::new(&bytes).unwrap();
        assert!(h.base_offset() <= off && off <= h.last_offset());
    }
}

#[test]
fn segment_ms_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 1000,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config, true);
    log.append_as_leader(build_batch(1, 1, NOW), 0, NOW)
        .unwrap();
    log.append_as_leader(build_batch(1, 1, NOW + 500), 0, NOW + 500)
        .unwrap();
    assert_eq!(log.segment_count(), 1);
    log.append_as_leader(build_batch(1, 1, NOW + 1500), 0, NOW + 1500)
        .unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
}

#[test]
fn log_append_time_sets_timestamp_and_crc() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config, true);
    let info = log
        .append_as_leader(build_batch(3, 10, NOW - 5000), 0, NOW)
        .unwrap();
    assert_eq!(info.log_append_time_ms, NOW);
    // large batch takes the two-write path
    log.append_as_leader(build_batch(2, 40_000, NOW - 5000), 0, NOW + 1)
        .unwrap();
    let bytes = log
        .read(0, 1 << 20, i64::MAX, false)
        .unwrap()
        .read()
        .unwrap();
    let (b, size) = RecordBatch::parse(&bytes).unwrap();
    assert!(b.is_crc_valid());
    assert_eq!(b.header().timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(b.header().max_timestamp(), NOW);
    let (b2, _) = RecordBatch::parse(&bytes[size..]).unwrap();
    assert!(b2.is_crc_valid());
    assert_eq!(b2.header().max_timestamp(), NOW + 1);
    // every record of a LogAppendTime batch has the append time
    assert_eq!(log.fetch_offset_by_timestamp(NOW).unwrap(), Some((0, NOW)));
    assert_eq!(
        log.fetch_offset_by_timestamp(NOW + 1).unwrap(),
        Some((3, NOW + 1))
    );
    assert_eq!(log.max_timestamp_and_offset().unwrap(), Some((NOW + 1, 3)));
}

#[test]
fn offsets_by_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    // batch i has records at NOW + 10*i + {0..4}
    for i in 0..40i64 {
        let codec = if i % 3 == 0 { Codec::Lz4 } else { Codec::None };
        let b = BatchBuilder::new(NOW + 10 * i)
            .codec(codec)
            .records(5, 30)
            .build();
        log.append_as_leader(b, 0, NOW).unwrap();
    }
    assert!(log.segment_count() > 2);
    assert_eq!(log.fetch_offset_by_timestamp(0).unwrap(), Some((0, NOW)));
    for i in 0..40i64 {
        for d in 0..5 {
            let got = log.fetch_offset_by_timestamp(NOW + 10 * i + d).unwrap();
            assert_eq!(
                got,
                Some((5 * i + d, NOW + 10 * i + d)),
                "batch {i} record {d}"
            );
        }
        // between batches: the next batch's first record
        if i < 39 {
            assert_eq!(
                log.fetch_offset_by_timestamp(NOW + 10 * i + 7).unwrap(),
                Some((5 * (i + 1), NOW + 10 * (i + 1)))
            );
        }
    }
    assert_eq!(log.fetch_offset_by_timestamp(NOW + 1000).unwrap(), None);
    assert_eq!(
        log.max_timestamp_and_offset().unwrap(),
        Some((NOW + 394, 199))
    );
}

#[test]
fn max_timestamp_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    assert_eq!(log.max_timestamp_and_offset().unwrap(), None);
    let b = BatchBuilder::new(NOW)
        .record(0, None, b"a")
        .record(50, None, b"b")
        .record(10, None, b"c")
        .build();
    log.append_as_leader(b, 0, NOW).unwrap();
    let z = BatchBuilder::new(NOW)
        .codec(Codec::Zstd)
        .record(0, None, b"a")
        .record(20, None, b"b")
        .build();
    log.append_as_leader(z, 0, NOW).unwrap();
    assert_eq!(log.max_timestamp_and_offset().unwrap(), Some((NOW + 50, 1)));
    // a record with timestamp NOW+10 is offset 2, but NOW+50 at offset 1 comes first
    assert_eq!(
        log.fetch_offset_by_timestamp(NOW + 10).unwrap(),
        Some((1, NOW + 50))
    );
}

#[test]
fn retention_by_time_advances_log_start_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_ms: 10_000,
        ..small_config()
    };
    let mut log = open(dir.path(), config.clone(), true);
    // old data, then new data
    for i in 0..30 {
        log.append_as_leader(build_batch(5, 40, NOW - 60_000 + i), 0, NOW)
            .unwrap();
    }
    log.roll(NOW).unwrap();
    for i in 0..5 {
        log.append_as_leader(build_batch(5, 40, NOW + i), 0, NOW)
            .unwrap();
    }
    let segments_before = log.segment_count();
    let deleted = log.delete_old_segments(NOW, i64::MAX).unwrap();
    assert_eq!(deleted, segments_before - 1);
    assert_eq!(log.log_start_offset(), 150);
    assert_eq!(
        log.read(0, 100, i64::MAX, true).unwrap_err().error_code(),
        1
    );
    assert_eq!(read_all(&log, 150).len(), 5);
    log.close().unwrap();
    drop(log);
    let mut log = open(dir.path(), config, true);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (150, 175));
    // everything expires: the active segment is rolled and deleted too
    let deleted = log.delete_old_segments(NOW + 100_000, i64::MAX).unwrap();
    assert_eq!(deleted, 1);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (175, 175));
    let info = log
        .append_as_leader(build_batch(1, 1, NOW + 100_000), 0, NOW + 100_000)
        .unwrap();
    assert_eq!(info.first_offset, 175);
}

#[test]
fn retention_by_size() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_bytes: 8192,
        ..small_config()
    };
    let mut log = open(dir.path(), config, true);
    append_n(&mut log, 100, 5, 40);
    let total = log.size_in_bytes();
    let deleted = log.delete_old_segments(NOW, i64::MAX).unwrap();
    assert!(deleted > 0);
    assert!(
        log.size_in_bytes() <= 8192 + 4096,
        "{} of {total}",
        log.size_in_bytes()
    );
    assert!(log.size_in_bytes() > 8192 - 4096);
    assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
    assert_eq!(
        read_all(&log, log.log_start_offset()).last().unwrap().1,
        499
    );
}

#[test]
fn retention_respects_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_ms: 0,
        ..small_config()
    };
    let mut log = open(dir.path(), config, true);
    append_n(&mut log, 30, 5, 40);
    let bases = log.segment_base_offsets();
    log.delete_old_segments(NOW + 1_000_000, bases[2]).unwrap();
    assert_eq!(log.log_start_offset(), bases[2]);
}

#[test]
fn a_raised_log_start_deletes_the_segments_wholly_below_it_but_never_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    append_n(&mut log, 60, 5, 40);
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 4, "{bases:?}");
    let leo = log.log_end_offset();
    // Inside the third segment: the first two go, the third (holding the new start) stays.
    let start = bases[2] + 1;
    assert!(matches!(
        log.maybe_increment_log_start_offset(leo + 1, leo),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert!(log.maybe_increment_log_start_offset(start, leo).unwrap());
    assert!(!log
        .maybe_increment_log_start_offset(start - 1, leo)
        .unwrap());
    assert_eq!(
        log.delete_log_start_offset_breached_segments(NOW, leo)
            .unwrap(),
        2
    );
    assert_eq!(log.segment_base_offsets(), bases[2..].to_vec());
    assert_eq!(log.log_start_offset(), start);
    assert!(matches!(
        log.read(start - 1, 1 << 20, leo, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    // Up to the log end: every segment but the active one goes, and nothing rolls.
    assert!(log.maybe_increment_log_start_offset(leo, leo).unwrap());
    log.delete_log_start_offset_breached_segments(NOW, leo)
        .unwrap();
    assert_eq!(log.segment_base_offsets(), vec![*bases.last().unwrap()]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (leo, leo));
}

#[test]
fn recovery_of_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    append_n(&mut log, 40, 5, 40);
    let leo = log.log_end_offset();
    let bases = log.segment_base_offsets();
    let active = *bases.last().unwrap();
    drop(log); // no close: as after kill -9
               // cut the last batch in half
    let path = segment_file(dir.path(), active, LOG_SUFFIX);
    let len = std::fs::metadata(&path).unwrap().len();
    let one = build_batch(5, 40, NOW).len() as u64;
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - one / 2).unwrap();
    drop(f);
    let mut log = open(dir.path(), small_config(), false);
    assert_eq!(log.log_end_offset(), leo - 5);
    let got = read_all(&log, 0);
    assert_eq!(got.len(), 39);
    assert_eq!(got.last().unwrap().1, leo - 6);
    // appends continue densely
    let info = log
        .append_as_leader(build_batch(1, 1, NOW), 0, NOW)
        .unwrap();
    assert_eq!(info.first_offset, leo - 5);
}

#[test]
fn recovery_of_garbage_in_older_segment_drops_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    append_n(&mut log, 40, 5, 40);
    let bases = log.segment_base_offsets();
    drop(log);
    // flip a byte in the middle of segment 1: CRC fails there
    let path = segment_file(dir.path(), bases[1], LOG_SUFFIX);
    let mut data = std::fs::read(&path).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0xff;
    std::fs::write(&path, &data).unwrap();
    let log = open(dir.path(), small_config(), false);
    assert_eq!(log.segment_base_offsets(), bases[..2].to_vec());
    assert!(log.log_end_offset() > bases[1] && log.log_end_offset() < bases[2]);
    let got = read_all(&log, 0);
    assert_eq!(got.last().unwrap().1 + 1, log.log_end_offset());
}

#[test]
fn missing_or_corrupt_index_is_rebuilt_on_clean_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    append_n(&mut log, 40, 5, 40);
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    drop(log);
    let idx = segment_file(dir.path(), bases[0], INDEX_SUFFIX);
    let before = std::fs::read(&idx).unwrap();
    assert!(!before.is_empty());
    std::fs::remove_file(&idx).unwrap();
    std::fs::write(segment_file(dir.path(), bases[1], INDEX_SUFFIX), [1u8; 7]).unwrap();
    std::fs::remove_file(segment_file(dir.path(), bases[2], TIME_INDEX_SUFFIX)).unwrap();
    let log = open(dir.path(), small_config(), true);
    assert_eq!(
        std::fs::read(&idx).unwrap(),
        before,
        "rebuilt index equals the original"
    );
    assert_eq!(
        std::fs::metadata(segment_file(dir.path(), bases[1], INDEX_SUFFIX))
            .unwrap()
            .len()
            % 8,
        0
    );
    assert_eq!(read_all(&log, 0).len(), 40);
    assert_eq!(
        log.fetch_offset_by_timestamp(NOW + 20).unwrap(),
        Some((84, NOW + 20))
    );
}

#[test]
fn junk_files_are_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    append_n(&mut log, 2, 1, 1);
    log.close().unwrap();
    drop(log);
    for name in [
        "00000000000000000000.log.deleted",
        "00000000000000000005.log.swap",
        "x.cleaned",
        "00000000000000000099.index",
    ] {
        std::fs::write(dir.path().join(name), b"junk").unwrap();
    }
    let log = open(dir.path(), LogConfig::default(), true);
    assert_eq!(log.log_end_offset(), 2);
    for name in [
        "00000000000000000000.log.deleted",
        "00000000000000000005.log.swap",
        "x.cleaned",
        "00000000000000000099.index",
    ] {
        assert!(!dir.path().join(name).exists(), "{name}");
    }
}

#[test]
fn idempotent_retry_returns_original_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    let a = log
        .append_as_leader(build_idempotent_batch(1000, 0, 0, 3, NOW), 0, NOW)
        .unwrap();
    log.append_as_leader(build_batch(2, 1, NOW), 0, NOW)
        .unwrap();
    let b = log
        .append_as_leader(build_idempotent_batch(1000, 0, 3, 2, NOW), 0, NOW)
        .unwrap();
    assert_eq!((b.first_offset, b.last_offset), (5, 6));
    let leo = log.log_end_offset();
    let retry = log
        .append_as_leader(build_idempotent_batch(1000, 0, 0, 3, NOW), 0, NOW)
        .unwrap();
    assert_eq!(
        retry.duplicate,
        Some(DuplicateBatch {
            producer_id: 1000,
            producer_epoch: 0,
            first_sequence: 0,
            last_sequence: 2,
            first_offset: a.first_offset,
        }),
        "the append names what the retry repeated, for the caller to report"
    );
    assert_eq!(
        (retry.first_offset, retry.last_offset),
        (a.first_offset, a.last_offset)
    );
    assert_eq!(log.log_end_offset(), leo, "a duplicate writes nothing");
    // gap: 45; old epoch: 47; new epoch from 0: ok
    assert_eq!(
        log.append_as_leader(build_idempotent_batch(1000, 0, 9, 1, NOW), 0, NOW)
            .unwrap_err()
            .error_code(),
        45
    );
    let e1 = log
        .append_as_leader(build_idempotent_batch(1000, 1, 0, 1, NOW), 0, NOW)
        .unwrap();
    assert!(e1.duplicate.is_none());
    assert_eq!(
        log.append_as_leader(build_idempotent_batch(1000, 0, 5, 1, NOW), 0, NOW)
            .unwrap_err()
            .error_code(),
        47
    );
    assert_eq!(
        log.append_as_leader(build_idempotent_batch(1000, 2, 3, 1, NOW), 0, NOW)
            .unwrap_err()
            .error_code(),
        45
    );
    let entry = log.producer_state().get(1000).unwrap();
    assert_eq!(entry.producer_epoch, 1);
    assert_eq!(entry.batches().count(), 1);
}

fn producer_history(log: &mut UnifiedLog, pid: i64, batches: i32) -> Vec<LogAppendInfo> {
    (0..batches)
        .map(|i| {
            log.append_as_leader(build_idempotent_batch(pid, 0, i * 2, 2, NOW), 0, NOW)
                .unwrap()
        })
        .collect()
}

#[test]
fn producer_state_survives_clean_and_unclean_restart() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), small_config(), true);
        let infos = producer_history(&mut log, 77, 150); // spans several segments (snapshots on roll)
        assert!(log.segment_count() > 2);
        if clean {
            log.close().unwrap();
        }
        drop(log);
        let mut log = open(dir.path(), small_config(), clean);
        let snaps = super::producer_state::list_snapshots(dir.path()).unwrap();
        assert!(snaps.len() <= 2, "{snaps:?}");
        // the last five batches are still recognised
        for (i, info) in infos.iter().enumerate().skip(145) {
            let retry = log
                .append_as_leader(build_idempotent_batch(77, 0, i as i32 * 2, 2, NOW), 0, NOW)
                .unwrap();
            assert!(retry.duplicate.is_some(), "clean={clean} batch {i}");
            assert_eq!(retry.first_offset, info.first_offset);
        }
        // and the sequence continues
        let next = log
            .append_as_leader(build_idempotent_batch(77, 0, 300, 1, NOW), 0, NOW)
            .unwrap();
        assert!(next.duplicate.is_none());
        assert_eq!(
            log.append_as_leader(build_idempotent_batch(77, 0, 400, 1, NOW), 0, NOW)
                .unwrap_err()
                .error_code(),
            45
        );
    }
}

#[test]
fn producer_state_replays_without_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    let infos = producer_history(&mut log, 5, 30);
    drop(log);
    for (_, p) in super::producer_state::list_snapshots(dir.path()).unwrap() {
        std::fs::remove_file(p).unwrap();
    }
    let mut log = open(dir.path(), small_config(), false);
    let retry = log
        .append_as_leader(build_idempotent_batch(5, 0, 58, 2, NOW), 0, NOW)
        .unwrap();
    assert!(retry.duplicate.is_some());
    assert_eq!(retry.first_offset, infos[29].first_offset);
}

#[test]
fn truncate_to_rebuilds_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    let infos = producer_history(&mut log, 9, 40);
    let cut = infos[20].first_offset;
    assert!(log.truncate_to(cut).unwrap());
    assert_eq!(log.log_end_offset(), cut);
    assert_eq!(read_all(&log, 0).len(), 20);
    // batch 19 is now the last: a retry of it is a duplicate, batch 20 is the next in sequence
    let retry = log
        .append_as_leader(build_idempotent_batch(9, 0, 38, 2, NOW), 0, NOW)
        .unwrap();
    assert!(retry.duplicate.is_some());
    let next = log
        .append_as_leader(build_idempotent_batch(9, 0, 40, 2, NOW), 0, NOW)
        .unwrap();
    assert_eq!(next.first_offset, cut);
    // truncation below the log start restarts the log
    log.truncate_fully_and_start_at(500).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (500, 500));
    assert!(log.producer_state().is_empty());
}

#[test]
fn truncate_to_the_log_end_drops_an_epoch_started_there() {
    // This replica became leader at epoch 7 and wrote nothing before it lost the leadership:
    // the new leader never had epoch 7, so truncation drops it although no record goes.
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    append_n(&mut log, 2, 1, 10);
    log.maybe_assign_epoch_start_offset(7).unwrap();
    assert_eq!(log.latest_epoch(), Some(7));
    assert!(!log.truncate_to(log.log_end_offset()).unwrap());
    assert_eq!(log.latest_epoch(), Some(3), "epoch 7 held no record");
    drop(log);
    let log = open(dir.path(), small_config(), true);
    assert_eq!(
        log.latest_epoch(),
        Some(3),
        "the epoch cache file was rewritten"
    );
}

#[test]
fn follower_append_copies_batches_and_state() {
    let leader_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let mut leader = open(leader_dir.path(), small_config(), true);
    let mut follower = open(follower_dir.path(), small_config(), true);
    producer_history(&mut leader, 42, 20);
    append_n(&mut leader, 5, 3, 10);
    let mut fetched = 0;
    while fetched < leader.log_end_offset() {
        let bytes = leader
            .read(fetched, 2000, i64::MAX, true)
            .unwrap()
            .read()
            .unwrap();
        let info = follower.append_as_follower(bytes).unwrap();
        assert_eq!(info.first_offset, fetched);
        fetched = info.last_offset + 1;
    }
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(
        follower.producer_state().get(42),
        leader.producer_state().get(42)
    );
    // a retry against the new leader is still a duplicate
    let retry = follower
        .append_as_leader(build_idempotent_batch(42, 0, 38, 2, NOW), 1, NOW)
        .unwrap();
    assert!(retry.duplicate.is_some());
    // offsets below the log end and bad CRCs are refused; a gap is a compacted leader's log
    let mut b = build_batch(1, 1, NOW).to_vec();
    super::batch::set_base_offset(&mut b, follower.log_end_offset() - 1);
    assert!(matches!(
        follower.append_as_follower(Bytes::from(b)),
        Err(LogError::UnexpectedAppendOffset { .. })
    ));
    let mut b = build_batch(1, 1, NOW).to_vec();
    super::batch::set_base_offset(&mut b, follower.log_end_offset());
    let n = b.len();
    b[n - 1] ^= 1;
    assert_eq!(
        follower
            .append_as_follower(Bytes::from(b))
            .unwrap_err()
            .error_code(),
        2
    );
}

#[test]
fn flush_every_message_moves_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_interval_messages: 1,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config.clone(), true);
    append_n(&mut log, 3, 2, 5);
    assert_eq!(log.recovery_point(), 6);
    drop(log);
    let log = open_checkpointed(dir.path(), config, Some(6));
    assert_eq!(log.recovery_point(), 6);
    assert_eq!(log.log_end_offset(), 6);
}

/// Opens after an unclean shutdown with `recovery_point` from the log directory's checkpoint.
fn open_checkpointed(dir: &Path, config: LogConfig, recovery_point: Option<i64>) -> UnifiedLog {
    let checkpoints = loader::LogCheckpoints {
        recovery_point,
        log_start_offset: None,
    };
    UnifiedLog::open_at(dir.to_path_buf(), config, false, checkpoints, NOW).unwrap()
}

/// Runs the fsync a roll left pending, as the broker's partition does off its lock.
fn flush_rolls(log: &mut UnifiedLog) {
    while let Some(flush) = log.roll_flush().unwrap() {
        let synced = flush.sync();
        log.complete_roll_flush(&flush, synced).unwrap();
    }
}

#[test]
fn a_roll_leaves_its_fsync_to_the_caller_and_its_completion_moves_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    append_n(&mut log, 40, 5, 40);
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 2, "the appends rolled: {bases:?}");
    let active = *bases.last().unwrap();
    assert!(
        log.recovery_point() < active,
        "the roll itself fsyncs nothing"
    );
    assert!(log.roll_flush_pending());
    let flush = log.roll_flush().unwrap().expect("a pending flush");
    assert_eq!(flush.upto(), active);
    let synced = flush.sync();
    log.complete_roll_flush(&flush, synced).unwrap();
    assert_eq!(
        log.recovery_point(),
        active,
        "only the active segment may hold unflushed data"
    );
    assert!(!log.roll_flush_pending());
    assert!(log.roll_flush().unwrap().is_none());
}

#[test]
fn a_truncation_voids_a_roll_flush_taken_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    append_n(&mut log, 40, 5, 40);
    let bases = log.segment_base_offsets();
    let flush = log.roll_flush().unwrap().expect("a pending flush");
    // A follower truncates into the second segment while the fsync runs, then appends other
    // records at the same offsets: the fsync did not cover those.
    log.truncate_to(bases[1] + 2).unwrap();
    append_n(&mut log, 40, 5, 40);
    let synced = flush.sync();
    log.complete_roll_flush(&flush, synced).unwrap();
    assert!(
        log.recovery_point() <= bases[1] + 2,
        "recovery point {} moved past the truncation at {}",
        log.recovery_point(),
        bases[1] + 2
    );
    // A flush taken now covers the new segments.
    flush_rolls(&mut log);
    assert_eq!(
        log.recovery_point(),
        *log.segment_base_offsets().last().unwrap()
    );
}

#[test]
fn an_unclean_open_recovers_every_segment_a_roll_left_unflushed() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    append_n(&mut log, 40, 5, 40);
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 3, "the appends rolled: {bases:?}");
    let rp = log.recovery_point();
    assert!(rp < bases[1], "no roll's fsync ran");
    drop(log); // no close, no roll flush: as after kill -9 right after the rolls
               // Cut the last batch of the second-to-last segment in half: a write the crash tore in a
               // segment that is not the active one.
    let torn = bases[bases.len() - 2];
    let path = segment_file(dir.path(), torn, LOG_SUFFIX);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 10).unwrap();
    let log = open_checkpointed(dir.path(), small_config(), Some(rp));
    // The torn batch goes, and so does everything after it: the active segment's records
    // were written after the tear.
    assert_eq!(
        log.segment_base_offsets(),
        bases[..bases.len() - 1].to_vec()
    );
    assert!(log.log_end_offset() < bases[bases.len() - 1]);
    assert!(
        log.log_end_offset() > torn,
        "the batches before the torn one stay"
    );
    let batches = read_all(&log, 0);
    assert_eq!(batches.last().map(|b| b.1 + 1), Some(log.log_end_offset()));
}

#[test]
fn unclean_open_recovers_from_the_recovery_point_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    append_n(&mut log, 40, 5, 40);
    flush_rolls(&mut log);
    let leo = log.log_end_offset();
    let rp = log.recovery_point();
    let bases = log.segment_base_offsets();
    drop(log); // no close: as after kill -9
    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
    }
    // Flip a byte in segment 1, below the recovery point (on real disks it was fsynced: a
    // flip there is not what a crash does, so recovery does not look for it), and cut the
    // last batch of the active segment in half (a torn write after the recovery point).
    for d in [dir.path(), copy.path()] {
        let old = segment_file(d, bases[1], LOG_SUFFIX);
        let mut data = std::fs::read(&old).unwrap();
        let mid = data.len() / 2;
        data[mid] ^= 0xff;
        std::fs::write(&old, &data).unwrap();
        let active = segment_file(d, rp, LOG_SUFFIX);
        let len = std::fs::metadata(&active).unwrap().len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&active)
            .unwrap();
        f.set_len(len - 10).unwrap();
    }
    // With the checkpoint, only the active segment is recovered: the torn batch goes.
    let log = open_checkpointed(dir.path(), small_config(), Some(rp));
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(log.log_end_offset(), leo - 5);
    // Without it, recovery reads every segment and stops at the flipped byte.
    let log = open_checkpointed(copy.path(), small_config(), None);
    assert_eq!(log.segment_base_offsets(), bases[..2].to_vec());
    assert!(log.log_end_offset() < bases[2]);
}

#[test]
fn delete_removes_directory() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("topic-0");
    let mut log = open(&p, LogConfig::default(), true);
    append_n(&mut log, 2, 1, 1);
    log.delete().unwrap();
    assert!(!p.exists());
}

#[test]
fn rejected_appends_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    let mut b = build_batch(2, 5, NOW).to_vec();
    let n = b.len();
    b[n - 1] ^= 1;
    assert_eq!(
        log.append_as_leader(Bytes::from(b), 0, NOW)
            .unwrap_err()
            .error_code(),
        2
    );
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_in_bytes(), 0);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// Any sequence of appends, torn tails and reopen cycles keeps offsets dense and every
        /// surviving batch readable.
        #[test]
        fn appends_and_crashes_keep_the_log_consistent(ops in proptest::collection::vec((1usize..6, 1usize..200, 0u8..10), 1..60)) {
            let dir = tempfile::tempdir().unwrap();
            let mut log = open(dir.path(), small_config(), true);
            let mut expected_leo = 0i64;
            for (records, value_len, action) in ops {
                match action {
                    0 => {
                        drop(log);
                        log = open(dir.path(), small_config(), false);
                        prop_assert_eq!(log.log_end_offset(), expected_leo);
                    }
                    1 => {
                        // tear the tail of the active segment
                        let base = *log.segment_base_offsets().last().unwrap();
                        drop(log);
                        let path = segment_file(dir.path(), base, LOG_SUFFIX);
                        let len = std::fs::metadata(&path).unwrap().len();
                        if len > 0 {
                            std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 1).unwrap();
                        }
                        log = open(dir.path(), small_config(), false);
                        expected_leo = log.log_end_offset();
                    }
                    _ => {
                        let info = log.append_as_leader(build_batch(records, value_len, NOW), 0, NOW).unwrap();
                        prop_assert_eq!(info.first_offset, expected_leo);
                        expected_leo += records as i64;
                    }
                }
                let batches = read_all(&log, log.log_start_offset());
                let mut next = log.log_start_offset();
                for (base, last) in batches {
                    prop_assert_eq!(base, next);
                    next = last + 1;
                }
                prop_assert_eq!(next, log.log_end_offset());
            }
        }
    }
}

#[test]
fn leader_epochs_are_tracked_truncated_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    for epoch in [0, 0, 2, 2, 5] {
        log.append_as_leader(build_batch(2, 10, NOW), epoch, NOW)
            .unwrap();
    }
    // Epoch 0 at 0, epoch 2 at 4, epoch 5 at 8; log end 10.
    assert_eq!(log.latest_epoch(), Some(5));
    assert_eq!(log.end_offset_for_epoch(5), (5, 10));
    assert_eq!(log.end_offset_for_epoch(2), (2, 8));
    assert_eq!(log.end_offset_for_epoch(1), (0, 4));
    assert_eq!(log.end_offset_for_epoch(7), (-1, -1));

    // A follower truncating to the divergence point forgets the later epoch.
    log.truncate_to(8).unwrap();
    assert_eq!(log.latest_epoch(), Some(2));
    assert_eq!(log.end_offset_for_epoch(2), (2, 8));
    log.close().unwrap();

    // The checkpoint survives a restart; without it the cache is rebuilt from batch headers.
    let log = open(dir.path(), small_config(), true);
    assert_eq!(log.end_offset_for_epoch(0), (0, 4));
    drop(log);
    std::fs::remove_file(dir.path().join(leader_epoch::LEADER_EPOCH_CHECKPOINT_FILE)).unwrap();
    let log = open(dir.path(), small_config(), false);
    assert_eq!(log.latest_epoch(), Some(2));
    assert_eq!(log.end_offset_for_epoch(0), (0, 4));
}

#[test]
fn follower_appends_record_the_leaders_epochs() {
    let leader_dir = tempfile::tempdir().unwrap();
    let mut leader = open(leader_dir.path(), LogConfig::default(), true);
    leader
        .append_as_leader(build_batch(3, 10, NOW), 1, NOW)
        .unwrap();
    leader
        .append_as_leader(build_batch(3, 10, NOW), 4, NOW)
        .unwrap();
    let bytes = leader
        .read(0, 1 << 20, i64::MAX, true)
        .unwrap()
        .read()
        .unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let mut follower = open(follower_dir.path(), LogConfig::default(), true);
    follower.append_as_follower(bytes).unwrap();
    assert_eq!(
        follower.leader_epoch_entries(),
        leader.leader_epoch_entries()
    );
    assert_eq!(follower.end_offset_for_epoch(1), (1, 3));
}

/// A segment refuses, in release builds too, a batch that does not continue it: one that
/// starts below its next offset, even when it ends past it (offsets 2..=4 after 0..=2).
#[test]
#[should_panic(expected = "do not continue segment")]
fn a_segment_asserts_that_offsets_go_forward() {
    let dir = tempfile::tempdir().unwrap();
    let mut seg = segment::LogSegment::create(dir.path(), 0, 4096, 1 << 20, NOW).unwrap();
    let batch = build_batch(3, 10, NOW);
    let info = |last_offset| segment::AppendedBatch {
        last_offset,
        max_timestamp: NOW,
    };
    seg.append(&batch, info(2)).unwrap();
    let mut overlapping = batch.to_vec();
    batch::set_base_offset(&mut overlapping, 2);
    seg.append(&overlapping, info(4)).unwrap();
}
