//! Tests of log compaction ([`super::cleaner`]): what a clean keeps (the latest record per key
//! at its offset, tombstones until their delete horizon, each producer's last batch, no
//! aborted data), what it never touches (the active segment, anything past the last stable
//! offset), when a log is due (the dirty ratio), and recovery of `.cleaned` and `.swap` files.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;

use super::batch::testutil::{build_control_batch, BatchBuilder};
use super::batch::{Codec, RecordBatch};
use super::cleaner::{
    clean_in_place, cleanable_offsets, CleanContext, CleanOutcome, CleanedGroup, Cleaner,
};
use super::decompress::decompress_all;
use super::loader::{CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX};
use super::records::RecordIter;
use super::*;

const NOW: i64 = 1_700_000_000_000;
const DAY_MS: i64 = 86_400_000;
/// The offset map of the tests: far above what they write.
const DEDUPE_BYTES: usize = 1 << 20;

fn compact_config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        cleanup_policy_compact: true,
        cleanup_policy_delete: false,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, clean: bool) -> UnifiedLog {
    UnifiedLog::open(dir.to_path_buf(), compact_config(), clean, NOW).unwrap()
}

/// One record `key=value` (`None`: a tombstone), optionally compressed.
fn kv(key: &str, value: Option<&str>, codec: Codec) -> Bytes {
    let mut b = BatchBuilder::new(NOW).codec(codec);
    b.records.push(batch_builder::SimpleRecord {
        timestamp_delta: 0,
        key: Some(key.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
        headers: vec![(b"h".to_vec(), Some(b"1".to_vec()))],
    });
    b.build()
}

fn put(log: &mut UnifiedLog, key: &str, value: Option<&str>) -> i64 {
    log.append_as_leader(kv(key, value, Codec::None), 0, NOW)
        .unwrap()
        .first_offset
}

/// Every record of the log: (offset, key, value), and the batches' headers seen.
fn records(log: &UnifiedLog) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let bytes = log
            .read(offset, 1 << 20, i64::MAX, true)
            .unwrap()
            .read()
            .unwrap();
        assert!(!bytes.is_empty(), "no progress at {offset}");
        let mut pos = 0;
        while pos < bytes.len() {
            let (b, size) = RecordBatch::parse(&bytes[pos..]).unwrap();
            assert!(
                b.is_crc_valid(),
                "CRC of the batch at {}",
                b.header().base_offset()
            );
            let h = b.header();
            let raw = match h.codec().unwrap() {
                Codec::None => Bytes::copy_from_slice(b.records_bytes()),
                c => Bytes::from(decompress_all(c, b.records_bytes()).unwrap()),
            };
            for r in RecordIter::new(&raw) {
                let r = r.unwrap();
                let text = |x: Option<&[u8]>| x.map(|v| String::from_utf8_lossy(v).into_owned());
                out.push((
                    h.base_offset() + r.offset_delta as i64,
                    text(r.key).unwrap_or_default(),
                    text(r.value),
                ));
            }
            offset = h.next_offset();
            pos += size;
        }
    }
    out
}

/// Cleans `log` once at `now` if due (or whatever its ratio with `force`), swapping in place.
fn clean_at(
    log: &mut UnifiedLog,
    checkpoint: Option<i64>,
    now: i64,
    force: bool,
) -> Option<CleanOutcome> {
    clean_in_place(&mut Cleaner::new(DEDUPE_BYTES), log, checkpoint, now, force).unwrap()
}

/// Writes `rounds` updates of `keys` keys, then rolls so that all of them can be cleaned.
/// Returns the offset of each key's last update.
fn write_updates(
    log: &mut UnifiedLog,
    keys: usize,
    rounds: usize,
) -> BTreeMap<String, (i64, String)> {
    let mut latest = BTreeMap::new();
    for round in 0..rounds {
        for k in 0..keys {
            let (key, value) = (format!("k{k}"), format!("v{round}-{k}"));
            let offset = put(log, &key, Some(&value));
            latest.insert(key, (offset, value));
        }
    }
    log.roll(NOW).unwrap();
    latest
}

fn latest_per_key(
    recs: &[(i64, String, Option<String>)],
) -> BTreeMap<String, (i64, Option<String>)> {
    recs.iter()
        .map(|(o, k, v)| (k.clone(), (*o, v.clone())))
        .collect()
}

#[test]
fn a_clean_keeps_the_latest_record_per_key_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    let latest = write_updates(&mut log, 5, 40);
    let before = log.size_in_bytes();
    let end = log.log_end_offset();
    let outcome = clean_at(&mut log, None, NOW, false).expect("a fresh log is all dirty");
    assert!(outcome.completed);
    assert_eq!(
        outcome.next_dirty_offset, end,
        "everything below the active segment"
    );
    let recs = records(&log);
    assert_eq!(recs.len(), 5, "one record per key: {recs:?}");
    for (key, (offset, value)) in &latest {
        assert!(
            recs.contains(&(*offset, key.clone(), Some(value.clone()))),
            "{key} keeps {value} at {offset}"
        );
    }
    // Groups are sized by the segments' sizes before the clean (Kafka's
    // `groupSegmentsBySize`): full segments stay one per group the first time.
    assert!(
        log.size_in_bytes() < before / 4,
        "{before} bytes became {}",
        log.size_in_bytes()
    );
    assert_eq!(log.log_end_offset(), end, "the log end offset stays");
    assert_eq!(log.log_start_offset(), 0);
    // The cleaned log survives a restart as it is.
    drop(log);
    let log = open(dir.path(), false);
    assert_eq!(records(&log).len(), 5);
    assert_eq!(log.log_end_offset(), end);
}

#[test]
fn compressed_batches_are_rebuilt_with_their_codec_and_a_new_crc() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    let mut last = 0;
    for i in 0..60 {
        // Two records per batch: the older one of each key goes, so batches are rebuilt.
        let mut b = BatchBuilder::new(NOW).codec(Codec::Gzip);
        for key in [format!("a{}", i % 3), "same".to_string()] {
            b.records.push(batch_builder::SimpleRecord {
                timestamp_delta: i,
                key: Some(key.into_bytes()),
                value: Some(format!("value-{i}").into_bytes()),
                headers: Vec::new(),
            });
        }
        last = log.append_as_leader(b.build(), 0, NOW).unwrap().last_offset;
    }
    log.roll(NOW).unwrap();
    clean_at(&mut log, None, NOW, false).unwrap();
    let recs = records(&log);
    let keys: Vec<&str> = recs.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(recs.len(), 4, "a0 a1 a2 and same: {keys:?}");
    assert_eq!(
        recs.last().unwrap().0,
        last,
        "the last record keeps its offset"
    );
    let first = log
        .read(0, 1 << 20, i64::MAX, true)
        .unwrap()
        .read()
        .unwrap();
    let (b, _) = RecordBatch::parse(&first).unwrap();
    assert_eq!(b.header().codec(), Some(Codec::Gzip));
    assert!(b.is_crc_valid());
}

#[test]
fn the_active_segment_is_never_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    write_updates(&mut log, 3, 30);
    let active_base = log.log_end_offset();
    for i in 0..5 {
        put(&mut log, "k0", Some(&format!("active-{i}")));
    }
    let active_size = log.cleaner_view(0).segments.len();
    clean_at(&mut log, None, NOW, true).unwrap();
    let recs = records(&log);
    let active: Vec<_> = recs.iter().filter(|(o, _, _)| *o >= active_base).collect();
    assert_eq!(
        active.len(),
        5,
        "every record of the active segment stays: {active:?}"
    );
    assert_eq!(log.segment_base_offsets().last(), Some(&active_base));
    assert!(active_size > 0);
}

#[test]
fn nothing_at_or_past_the_last_stable_offset_is_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    write_updates(&mut log, 3, 30);
    let hw = log.log_end_offset();
    write_updates(&mut log, 3, 30);
    // The high watermark is where the first half ended: the second half stays dirty.
    let view = log.cleaner_view(hw);
    let ltc = cleanable_offsets(&view, None, NOW);
    assert!(ltc.first_uncleanable_offset <= hw);
}

#[test]
fn the_dirty_ratio_decides_when_a_log_is_due() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    write_updates(&mut log, 4, 40);
    let first = clean_at(&mut log, None, NOW, false).unwrap();
    // A little new dirt over a cleaned log is below min.cleanable.dirty.ratio (0.5).
    write_updates(&mut log, 4, 1);
    assert!(clean_at(&mut log, Some(first.next_dirty_offset), NOW, false).is_none());
    let view = log.cleaner_view(log.log_end_offset());
    let ltc = cleanable_offsets(&view, Some(first.next_dirty_offset), NOW);
    assert!(
        ltc.cleanable_ratio() > 0.0 && ltc.cleanable_ratio() <= 0.5,
        "{ltc:?}"
    );
    // Much more makes it due.
    write_updates(&mut log, 4, 40);
    let second = clean_at(&mut log, Some(first.next_dirty_offset), NOW, false);
    assert!(second.is_some_and(|o| o.completed));
    assert_eq!(records(&log).len(), 4);
}

#[test]
fn min_compaction_lag_keeps_young_segments_dirty() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    let mut config = compact_config();
    config.min_compaction_lag_ms = DAY_MS;
    log.set_config(config);
    write_updates(&mut log, 3, 30);
    let view = log.cleaner_view(log.log_end_offset());
    let ltc = cleanable_offsets(&view, None, NOW);
    assert_eq!(
        ltc.first_uncleanable_offset, 0,
        "every segment is younger than a day"
    );
    assert!(!ltc.is_due(0.5));
    let later = cleanable_offsets(&view, None, NOW + 2 * DAY_MS);
    assert!(later.is_due(0.5));
}

#[test]
fn tombstones_stay_until_delete_retention_ms_after_the_clean_that_saw_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    put(&mut log, "gone", Some("v"));
    let tombstone = put(&mut log, "gone", None);
    write_updates(&mut log, 3, 20);
    let first = clean_at(&mut log, None, NOW, true).unwrap();
    let recs = records(&log);
    assert!(
        recs.contains(&(tombstone, "gone".into(), None)),
        "kept: {recs:?}"
    );
    assert!(!recs.iter().any(|(_, k, v)| k == "gone" && v.is_some()));

    // New dirt, cleaned before the horizon: the tombstone stays.
    write_updates(&mut log, 3, 20);
    let second = clean_at(&mut log, Some(first.next_dirty_offset), NOW + 1000, true).unwrap();
    assert!(records(&log).contains(&(tombstone, "gone".into(), None)));

    // Past delete.retention.ms after the first clean, it goes.
    write_updates(&mut log, 3, 20);
    let late = NOW + DAY_MS + 1;
    clean_at(&mut log, Some(second.next_dirty_offset), late, true).unwrap();
    let recs = records(&log);
    assert!(!recs.iter().any(|(_, k, _)| k == "gone"), "{recs:?}");
}

#[test]
fn the_last_batch_of_an_active_producer_keeps_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    let mut b = BatchBuilder::new(NOW).idempotent(7, 0, 0);
    b.records.push(batch_builder::SimpleRecord {
        key: Some(b"p".to_vec()),
        value: Some(b"old".to_vec()),
        ..Default::default()
    });
    let idem = log
        .append_as_leader(b.build(), 0, NOW)
        .unwrap()
        .first_offset;
    write_updates(&mut log, 1, 1);
    put(&mut log, "p", Some("new"));
    write_updates(&mut log, 3, 30);
    let state_before = log.producer_state().get(7).cloned();
    clean_at(&mut log, None, NOW, true).unwrap();
    // Its record went (superseded), its header stayed: an empty batch at its offset.
    let bytes = log
        .read(idem, 1 << 20, i64::MAX, true)
        .unwrap()
        .read()
        .unwrap();
    let (batch, _) = RecordBatch::parse(&bytes).unwrap();
    let h = batch.header();
    assert_eq!((h.base_offset(), h.record_count()), (idem, 0));
    assert_eq!((h.producer_id(), h.base_sequence()), (7, 0));
    assert!(batch.is_crc_valid());
    assert!(!records(&log)
        .iter()
        .any(|(_, _, v)| v.as_deref() == Some("old")));
    assert_eq!(log.producer_state().get(7).cloned(), state_before);
    // A retry of that batch is still a duplicate after a restart replays the log.
    drop(log);
    let mut log = open(dir.path(), false);
    let mut retry = BatchBuilder::new(NOW).idempotent(7, 0, 0);
    retry.records.push(batch_builder::SimpleRecord {
        key: Some(b"p".to_vec()),
        value: Some(b"old".to_vec()),
        ..Default::default()
    });
    assert!(log
        .append_as_leader(retry.build(), 0, NOW)
        .unwrap()
        .duplicate
        .is_some());
}

/// A transactional batch of producer `pid`: one record `key=value`.
fn txn_kv(pid: i64, seq: i32, key: &str, value: &str) -> Bytes {
    let mut b = BatchBuilder::new(NOW).idempotent(pid, 0, seq);
    b.transactional = true;
    b.records.push(batch_builder::SimpleRecord {
        key: Some(key.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        ..Default::default()
    });
    b.build()
}

#[test]
fn aborted_transactions_lose_their_data_and_markers_stay_while_it_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    put(&mut log, "x", Some("committed-before"));
    log.append_as_leader(txn_kv(5, 0, "x", "aborted"), 0, NOW)
        .unwrap();
    let abort = log
        .append_as_coordinator(build_control_batch(5, 0, false, 0, NOW), 0, NOW, 0)
        .unwrap()
        .first_offset;
    log.append_as_leader(txn_kv(6, 0, "y", "committed"), 0, NOW)
        .unwrap();
    log.append_as_coordinator(build_control_batch(6, 0, true, 0, NOW), 0, NOW, 0)
        .unwrap();
    write_updates(&mut log, 2, 30);
    log.on_high_watermark_updated(log.log_end_offset());
    let first = clean_at(&mut log, None, NOW, true).unwrap();
    let recs = records(&log);
    let x: Vec<_> = recs.iter().filter(|(_, k, _)| k == "x").collect();
    // The aborted write never supersedes the committed one, and goes itself.
    assert_eq!(x.len(), 1, "{x:?}");
    assert_eq!(x[0].2.as_deref(), Some("committed-before"));
    assert!(recs
        .iter()
        .any(|(_, k, v)| k == "y" && v.as_deref() == Some("committed")));
    // The ABORT marker stays in this clean, and so does its `.txnindex` entry.
    let marker = log
        .read(abort, 1 << 20, i64::MAX, true)
        .unwrap()
        .read()
        .unwrap();
    let (b, _) = RecordBatch::parse(&marker).unwrap();
    assert!(b.header().is_control());
    assert_eq!(b.header().base_offset(), abort);
    assert_eq!(log.collect_aborted_transactions(0, i64::MAX).len(), 1);
    // A later clean sees no data left for it.
    write_updates(&mut log, 2, 30);
    log.on_high_watermark_updated(log.log_end_offset());
    clean_at(&mut log, Some(first.next_dirty_offset), NOW, true).unwrap();
    assert!(records(&log)
        .iter()
        .all(|(_, _, v)| v.as_deref() != Some("aborted")));
}

#[test]
fn an_open_transaction_is_never_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    write_updates(&mut log, 2, 10);
    let open_at = log
        .append_as_leader(txn_kv(9, 0, "t", "open"), 0, NOW)
        .unwrap()
        .first_offset;
    write_updates(&mut log, 2, 30);
    let view = log.cleaner_view(log.log_end_offset());
    let ltc = cleanable_offsets(&view, None, NOW);
    assert!(
        ltc.first_uncleanable_offset <= open_at,
        "{ltc:?} vs {open_at}"
    );
    clean_at(&mut log, None, NOW, true).unwrap();
    assert!(records(&log)
        .iter()
        .any(|(_, _, v)| v.as_deref() == Some("open")));
}

#[test]
fn a_full_offset_map_cleans_up_to_where_it_got() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    write_updates(&mut log, 50, 4);
    let view = log.cleaner_view(log.log_end_offset());
    let ltc = cleanable_offsets(&view, None, NOW);
    // Room for about ten keys.
    let mut cleaner = Cleaner::new(10 * (cleaner::OFFSET_MAP_ENTRY_OVERHEAD_BYTES + 3));
    let outcome = clean_in_place(&mut cleaner, &mut log, None, NOW, true)
        .unwrap()
        .unwrap();
    assert!(outcome.completed);
    assert!(
        outcome.next_dirty_offset > 0 && outcome.next_dirty_offset < ltc.first_uncleanable_offset,
        "{outcome:?} {ltc:?}"
    );
}

#[test]
fn leftover_cleaned_files_are_deleted_and_the_old_segments_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    let latest = write_updates(&mut log, 4, 30);
    let before = records(&log);
    let bases = log.segment_base_offsets();
    let view = log.cleaner_view(log.log_end_offset());
    let ltc = cleanable_offsets(&view, None, NOW);
    let stash = tempfile::tempdir().unwrap();
    // The clean writes its .cleaned files, then "crashes": they are copied aside before the
    // aborted swap deletes them, and put back as a crash would have left them.
    let mut swap = |g: &CleanedGroup| {
        copy_files_with(dir.path(), stash.path(), CLEANED_FILE_SUFFIX);
        assert!(!g.replaced.is_empty());
        Ok(false)
    };
    let stop = || false;
    let mut ctx = CleanContext {
        stop: &stop,
        swap: &mut swap,
    };
    let outcome = Cleaner::new(DEDUPE_BYTES)
        .clean(&view, &ltc, NOW, &mut ctx)
        .unwrap();
    assert!(!outcome.completed);
    drop(log);
    copy_files_with(stash.path(), dir.path(), CLEANED_FILE_SUFFIX);
    assert!(count_files_with(dir.path(), CLEANED_FILE_SUFFIX) > 0);
    let log = open(dir.path(), false);
    assert_eq!(count_files_with(dir.path(), CLEANED_FILE_SUFFIX), 0);
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(records(&log), before);
    let after = latest_per_key(&records(&log));
    for (k, (o, v)) in latest {
        assert_eq!(after[&k], (o, Some(v)));
    }
}

#[test]
fn an_interrupted_swap_is_completed_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    let latest = write_updates(&mut log, 4, 30);
    let end = log.log_end_offset();
    let crashed = tempfile::tempdir().unwrap();
    // The crash: a copy of the directory as it is once the old segments are deleted and only
    // the .swap files hold their data.
    let view = log.cleaner_view(log.log_end_offset());
    let ltc = cleanable_offsets(&view, None, NOW);
    let mut copied = false;
    let after_swap = || {
        if count_files_with(crashed.path(), SWAP_FILE_SUFFIX) == 0 {
            copy_files_with(dir.path(), crashed.path(), "");
        }
    };
    let mut swap = |g: &CleanedGroup| {
        copied = true;
        log.replace_segments(g, &after_swap)
    };
    let stop = || false;
    let mut ctx = CleanContext {
        stop: &stop,
        swap: &mut swap,
    };
    Cleaner::new(DEDUPE_BYTES)
        .clean(&view, &ltc, NOW, &mut ctx)
        .unwrap();
    assert!(copied);
    assert!(count_files_with(crashed.path(), SWAP_FILE_SUFFIX) > 0);
    let log = open(crashed.path(), false);
    assert_eq!(count_files_with(crashed.path(), SWAP_FILE_SUFFIX), 0);
    assert_eq!(log.log_end_offset(), end);
    let recs = records(&log);
    let offsets: Vec<i64> = recs.iter().map(|r| r.0).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "no duplicate offsets: {offsets:?}"
    );
    let after = latest_per_key(&recs);
    for (k, (o, v)) in latest {
        assert_eq!(after[&k], (o, Some(v)), "{k}");
    }
}

/// Copies the regular files of `from` whose name ends with `suffix` into `to`.
fn copy_files_with(from: &Path, to: &Path, suffix: &str) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_file() && name.ends_with(suffix) {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

fn count_files_with(dir: &Path, suffix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(suffix))
        })
        .count()
}

#[test]
fn a_second_clean_merges_the_small_cleaned_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    write_updates(&mut log, 5, 40);
    let first = clean_at(&mut log, None, NOW, true).unwrap();
    let after_first = log.segment_count();
    write_updates(&mut log, 5, 40);
    let new_segments = log.segment_count() - after_first;
    clean_at(&mut log, Some(first.next_dirty_offset), NOW, true).unwrap();
    // The cleaned segments are small now, so groupSegmentsBySize puts them in one group; the
    // full new ones are a group each, and the active segment stays.
    assert!(after_first > 3, "{after_first}");
    assert_eq!(log.segment_count(), new_segments + 2);
    assert_eq!(records(&log).len(), 5);
}

#[test]
fn a_follower_copies_a_cleaned_leaders_log_with_its_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = open(&dir.path().join("leader"), true);
    let latest = write_updates(&mut leader, 4, 30);
    clean_at(&mut leader, None, NOW, true).unwrap();
    let mut follower = open(&dir.path().join("follower"), true);
    let mut offset = 0;
    while offset < leader.log_end_offset() {
        let bytes = leader
            .read(offset, 1 << 20, i64::MAX, true)
            .unwrap()
            .read()
            .unwrap();
        let info = follower.append_as_follower(bytes).unwrap();
        offset = follower.log_end_offset();
        assert!(info.record_count > 0 || offset == leader.log_end_offset());
    }
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(records(&follower), records(&leader));
    let after = latest_per_key(&records(&follower));
    for (k, (o, v)) in latest {
        assert_eq!(after[&k], (o, Some(v)));
    }
    // And it recovers that log after a crash: the gaps are not a torn tail.
    drop(follower);
    let follower = open(&dir.path().join("follower"), false);
    assert_eq!(records(&follower), records(&leader));
}

#[test]
fn a_damaged_segment_is_not_cleaned() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    write_updates(&mut log, 4, 30);
    let bases = log.segment_base_offsets();
    // The second batch of the first segment gets a bad magic byte: not a batch any more.
    let first = std::fs::OpenOptions::new()
        .write(true)
        .open(segment::segment_file(dir.path(), 0, segment::LOG_SUFFIX))
        .unwrap();
    let batch_len = kv("k0", Some("v0-0"), Codec::None).len() as u64;
    let mut refused = || {
        let result = clean_in_place(&mut Cleaner::new(DEDUPE_BYTES), &mut log, None, NOW, true);
        assert!(
            matches!(result, Err(LogError::CorruptMessage(_))),
            "{:?}",
            result.map(|_| ())
        );
        assert_eq!(log.segment_base_offsets(), bases, "nothing swapped");
        assert_eq!(count_files_with(dir.path(), CLEANED_FILE_SUFFIX), 0);
    };
    first.write_all_at(&[9], batch_len + 16).unwrap();
    refused();
    // With the magic byte back, a changed byte of the first batch fails its CRC instead.
    first.write_all_at(&[2], batch_len + 16).unwrap();
    first.write_all_at(b"X", batch_len - 10).unwrap();
    refused();
}
