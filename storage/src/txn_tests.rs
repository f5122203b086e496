//! Tests of transactions in the log: markers, the last stable offset, the `.txnindex` files
//! (append, read across segments, truncation, retention, rebuild by recovery) and followers.

use std::path::Path;

use bytes::Bytes;

use super::batch::testutil::{build_batch, build_control_batch, BatchBuilder};
use super::segment::segment_file;
use super::txn_index::{AbortedTxn, TXN_INDEX_SUFFIX};
use super::*;

const NOW: i64 = 1_700_000_000_000;

fn open(dir: &Path, config: LogConfig, clean: bool) -> UnifiedLog {
    UnifiedLog::open(dir.to_path_buf(), config, clean, NOW).unwrap()
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// A transactional batch of `n` records of producer `pid` (epoch 0) from sequence `seq`.
fn txn_batch(pid: i64, seq: i32, n: usize) -> Bytes {
    let mut b = BatchBuilder::new(NOW).idempotent(pid, 0, seq).records(n, 8);
    b.transactional = true;
    b.build()
}

fn marker(log: &mut UnifiedLog, pid: i64, commit: bool) -> Result<LogAppendInfo, LogError> {
    log.append_as_coordinator(build_control_batch(pid, 0, commit, 0, NOW), 0, NOW, 0)
}

fn aborted(log: &UnifiedLog) -> Vec<AbortedTxn> {
    log.collect_aborted_transactions(0, i64::MAX)
}

#[test]
fn markers_end_transactions_and_the_lso_waits_for_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    log.append_as_leader(build_batch(1, 1, NOW), 0, NOW)
        .unwrap(); // 0
    let a = log.append_as_leader(txn_batch(1, 0, 2), 0, NOW).unwrap(); // 1-2
    let b = log.append_as_leader(txn_batch(2, 0, 1), 0, NOW).unwrap(); // 3
    assert_eq!((a.first_offset, b.first_offset), (1, 3));
    assert_eq!(log.first_unstable_offset(), Some(1));
    assert_eq!(log.last_stable_offset(4), 1, "min(first unstable, HW)");
    assert_eq!(log.last_stable_offset(0), 0, "never above the HW");

    let m = marker(&mut log, 1, false).unwrap(); // ABORT at 4
    assert_eq!(m.first_offset, 4);
    // The marker is not replicated yet: transaction 1 is still unstable.
    assert_eq!(log.last_stable_offset(4), 1);
    log.on_high_watermark_updated(5);
    assert_eq!(log.last_stable_offset(5), 3, "producer 2 still open");
    assert_eq!(
        aborted(&log),
        vec![AbortedTxn {
            producer_id: 1,
            first_offset: 1,
            last_offset: 4,
            last_stable_offset: 3
        }],
        "the entry's LSO is producer 2's first offset"
    );
    marker(&mut log, 2, true).unwrap(); // COMMIT at 5
    log.on_high_watermark_updated(6);
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(6), 6);
    assert_eq!(aborted(&log).len(), 1, "a commit adds no entry");
    let p = log.producer_state().get(2).unwrap();
    assert_eq!(p.current_txn_first_offset, None);
}

#[test]
fn marker_epochs_are_checked_and_clients_may_not_write_markers() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    let mut b = BatchBuilder::new(NOW).idempotent(7, 3, 0).records(1, 8);
    b.transactional = true;
    log.append_as_leader(b.build(), 0, NOW).unwrap();
    let client = log.append_as_leader(build_control_batch(7, 3, true, 0, NOW), 0, NOW);
    assert_eq!(client.unwrap_err().error_code(), 87, "INVALID_RECORD");
    let old_epoch = log.append_as_coordinator(build_control_batch(7, 2, false, 5, NOW), 0, NOW, 0);
    assert_eq!(
        old_epoch.unwrap_err().error_code(),
        47,
        "INVALID_PRODUCER_EPOCH"
    );
    // A newer epoch (a coordinator aborting after a timeout) is accepted and bumps it.
    log.append_as_coordinator(build_control_batch(7, 4, false, 5, NOW), 0, NOW, 0)
        .unwrap();
    let p = log.producer_state().get(7).unwrap();
    assert_eq!((p.producer_epoch, p.coordinator_epoch), (4, 5));
    assert_eq!(p.batches().count(), 0, "the old epoch's batches are gone");
    let zombie = log.append_as_coordinator(build_control_batch(7, 4, true, 4, NOW), 0, NOW, 0);
    assert_eq!(
        zombie.unwrap_err().error_code(),
        52,
        "TRANSACTION_COORDINATOR_FENCED"
    );
    // A marker needs a COMMIT or ABORT record.
    let mut bad = BatchBuilder::new(NOW).idempotent(7, 4, -1).records(1, 2);
    bad.transactional = true;
    bad.control = true;
    assert_eq!(
        log.append_as_coordinator(bad.build(), 0, NOW, 0)
            .unwrap_err()
            .error_code(),
        87
    );
    // Plain writes inside an open transaction are refused.
    let mut t = BatchBuilder::new(NOW).idempotent(8, 0, 0).records(1, 8);
    t.transactional = true;
    log.append_as_leader(t.build(), 0, NOW).unwrap();
    let plain = BatchBuilder::new(NOW)
        .idempotent(8, 0, 1)
        .records(1, 8)
        .build();
    assert_eq!(
        log.append_as_leader(plain, 0, NOW)
            .unwrap_err()
            .error_code(),
        48,
        "INVALID_TXN_STATE"
    );
}

#[test]
fn txnindex_file_holds_kafkas_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    log.append_as_leader(txn_batch(0x0102, 0, 3), 0, NOW)
        .unwrap(); // 0-2
    marker(&mut log, 0x0102, false).unwrap(); // 3
    let bytes = std::fs::read(segment_file(dir.path(), 0, TXN_INDEX_SUFFIX)).unwrap();
    #[rustfmt::skip]
    let expected: [u8; 34] = [
        0, 0,                          // version
        0, 0, 0, 0, 0, 0, 0x01, 0x02,  // producer id
        0, 0, 0, 0, 0, 0, 0, 0,        // first offset
        0, 0, 0, 0, 0, 0, 0, 3,        // last offset (the marker)
        0, 0, 0, 0, 0, 0, 0, 4,        // last stable offset: nothing else open
    ];
    assert_eq!(bytes, expected);
}

/// Producer 1 opens in the first segment, producer 2 aborts in between, and producer 1
/// aborts in a later segment, after rolls.
fn spanning_log(dir: &Path) -> UnifiedLog {
    let mut log = open(dir, small_config(), true);
    log.append_as_leader(txn_batch(1, 0, 2), 0, NOW).unwrap(); // 0-1
    log.append_as_leader(txn_batch(2, 0, 2), 0, NOW).unwrap(); // 2-3
    marker(&mut log, 2, false).unwrap(); // 4
    for i in 0..20 {
        log.append_as_leader(build_batch(2, 40, NOW + i), 0, NOW)
            .unwrap();
    }
    assert!(log.segment_count() > 2, "the appends rolled");
    marker(&mut log, 1, false).unwrap();
    log
}

#[test]
fn aborted_transactions_are_collected_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = spanning_log(dir.path());
    let end = log.log_end_offset();
    let all = aborted(&log);
    assert_eq!(all.len(), 2);
    assert_eq!(
        (all[0].producer_id, all[0].first_offset, all[0].last_offset),
        (2, 2, 4)
    );
    assert_eq!(all[0].last_stable_offset, 0, "producer 1 was still open");
    assert_eq!((all[1].producer_id, all[1].first_offset), (1, 0));
    // A fetch in the first segment, past producer 2's abort, still learns of producer 1's,
    // whose marker is in the last segment.
    let from_5 = log.collect_aborted_transactions(5, log.read_upper_bound(5, end));
    assert_eq!(
        from_5.iter().map(|t| t.producer_id).collect::<Vec<_>>(),
        vec![1]
    );
    // The entry sits in the segment holding its marker.
    let last_base = *log.segment_base_offsets().last().unwrap();
    let first_file = std::fs::read(segment_file(dir.path(), 0, TXN_INDEX_SUFFIX)).unwrap();
    let last_file = std::fs::read(segment_file(dir.path(), last_base, TXN_INDEX_SUFFIX)).unwrap();
    assert_eq!((first_file.len(), last_file.len()), (34, 34));
}

#[test]
fn recovery_rebuilds_the_txnindex_after_an_unclean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let log = spanning_log(dir.path());
    let expected = aborted(&log);
    let bases = log.segment_base_offsets();
    drop(log);
    // An unclean stop: the index files are lost or torn, and the recovery point is before
    // the last segment, whose transaction began in the first one.
    let last_base = *bases.last().unwrap();
    std::fs::remove_file(segment_file(dir.path(), last_base, TXN_INDEX_SUFFIX)).unwrap();
    std::fs::write(segment_file(dir.path(), 0, TXN_INDEX_SUFFIX), [1u8; 20]).unwrap();
    let checkpoints = loader::LogCheckpoints {
        recovery_point: Some(bases[1]),
        log_start_offset: None,
    };
    let log = UnifiedLog::open_at(
        dir.path().to_path_buf(),
        small_config(),
        false,
        checkpoints,
        NOW,
    )
    .unwrap();
    assert_eq!(aborted(&log), expected);
    assert_eq!(
        std::fs::read(segment_file(dir.path(), last_base, TXN_INDEX_SUFFIX))
            .unwrap()
            .len(),
        34
    );
    // The open transaction of a recovered log is found again too.
    drop(log);
    let mut log = open(dir.path(), small_config(), true);
    log.append_as_leader(txn_batch(3, 0, 1), 0, NOW).unwrap();
    let open_at = log.log_end_offset() - 1;
    drop(log);
    let mut log = open(dir.path(), small_config(), false);
    // Replayed markers count as unreplicated until the partition gives the high watermark.
    assert_eq!(log.first_unstable_offset(), Some(0));
    log.on_high_watermark_updated(log.log_end_offset());
    assert_eq!(log.first_unstable_offset(), Some(open_at));
}

#[test]
fn truncation_and_retention_remove_entries_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = spanning_log(dir.path());
    let marker_offset = log.log_end_offset() - 1;
    log.truncate_to(marker_offset).unwrap();
    assert_eq!(
        aborted(&log).len(),
        1,
        "the truncated marker's entry is gone"
    );
    assert_eq!(
        log.first_unstable_offset(),
        Some(0),
        "producer 1 is open again after the truncation"
    );
    marker(&mut log, 1, true).unwrap();
    let hw = log.log_end_offset();
    log.on_high_watermark_updated(hw);
    assert_eq!(log.last_stable_offset(hw), hw);
    // Retention deletes the first segment with its .txnindex.
    let config = LogConfig {
        retention_bytes: 0,
        ..small_config()
    };
    log.set_config(config);
    log.delete_old_segments(NOW, hw).unwrap();
    assert!(!segment_file(dir.path(), 0, TXN_INDEX_SUFFIX).exists());
    assert!(aborted(&log).is_empty());
}

#[test]
fn followers_build_the_same_txnindex_and_lso() {
    let leader_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let mut leader = spanning_log(leader_dir.path());
    leader.append_as_leader(txn_batch(9, 0, 1), 0, NOW).unwrap();
    let mut follower = open(follower_dir.path(), small_config(), true);
    let mut fetched = 0;
    while fetched < leader.log_end_offset() {
        let bytes = leader
            .read(fetched, 4000, i64::MAX, true)
            .unwrap()
            .read()
            .unwrap();
        fetched = follower.append_as_follower(bytes).unwrap().last_offset + 1;
    }
    assert_eq!(aborted(&follower), aborted(&leader));
    let hw = leader.log_end_offset();
    leader.on_high_watermark_updated(hw);
    follower.on_high_watermark_updated(hw);
    assert_eq!(
        follower.last_stable_offset(hw),
        leader.last_stable_offset(hw)
    );
    assert_eq!(
        follower.last_stable_offset(hw),
        hw - 1,
        "producer 9 is open"
    );
}

/// KIP-890 part 1 at the log: the coordinator aborts between the verification and the append.
/// The late batch is refused (it would open a transaction no marker will ever end, holding
/// the last stable offset back), and the producer's next verified transaction is appended.
#[test]
fn a_verified_append_after_the_abort_marker_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    log.append_as_leader(txn_batch(1, 0, 1), 0, NOW).unwrap(); // 0
    marker(&mut log, 1, true).unwrap(); // COMMIT at 1
    let guard = log
        .maybe_start_transaction_verification(1, 1, 0, false, NOW)
        .unwrap();
    marker(&mut log, 1, false).unwrap(); // ABORT at 2, before the append
    let late = log.append_as_leader_verified(txn_batch(1, 1, 1), 0, NOW, guard);
    assert_eq!(late.unwrap_err().error_code(), 48);
    log.on_high_watermark_updated(3);
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(log.last_stable_offset(3), 3, "nothing left open");
    // Retried with a new verification, it opens the next transaction.
    let guard = log
        .maybe_start_transaction_verification(1, 1, 0, false, NOW)
        .unwrap();
    let ok = log.append_as_leader_verified(txn_batch(1, 1, 1), 0, NOW, guard);
    assert_eq!(ok.unwrap().first_offset, 3);
    // Inside it, no verification: the sentinel, and the append needs none.
    let inside = log
        .maybe_start_transaction_verification(1, 2, 0, false, NOW)
        .unwrap();
    assert!(inside.is_sentinel());
    let next = log.append_as_leader_verified(txn_batch(1, 2, 1), 0, NOW, inside);
    assert_eq!(next.unwrap().first_offset, 4);
    let stale = log.maybe_start_transaction_verification(1, 0, -1, false, NOW);
    assert_eq!(stale.unwrap_err().error_code(), 47);
}
