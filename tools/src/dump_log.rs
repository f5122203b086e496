//! `brook dump-log PATH`: prints a segment's batches, like Kafka's kafka-dump-log, so people
//! and tests can see what is on disk: offsets, producer id, epoch, sequences, codec,
//! transactional and control flags, timestamps, and whether the CRC holds.
//!
//! It reads a segment batch by batch with positional reads, so a torn or corrupt tail is
//! reported where it starts instead of failing the whole dump. A transaction marker (control
//! batch) is followed by a `| offset: ... endTxnMarker: COMMIT|ABORT coordinatorEpoch: ...`
//! line, and a `.txnindex` file prints one line per aborted transaction, as Kafka's tool does.
//! A segment of `__transaction_state` (or any, with `--transaction-log-decoder`) also prints
//! each record's key and value decoded, as Kafka's `--transaction-log-decoder` does.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use brook_storage::batch::{BatchHeader, Codec, RecordBatch, HEADER_LEN, LOG_OVERHEAD};
use brook_storage::control::parse_end_txn_marker;
use brook_storage::records::RecordIter;
use brook_storage::txn_index::{read_entries, TXN_INDEX_SUFFIX};
use brook_storage::TimestampType;

/// Largest batch the dump will read (a length field above it is reported as corrupt).
pub const DUMP_MAX_BATCH_BYTES: usize = 256 * 1024 * 1024;

/// The files to dump for a path: the file itself, or every segment of a directory with its
/// `.txnindex` after it.
pub fn segment_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log" || x == "txnindex"))
            .collect();
        files.sort();
        Ok(files)
    } else {
        Ok(vec![path.to_path_buf()])
    }
}

fn codec_name(id: u8) -> &'static str {
    match Codec::from_id(id) {
        Some(Codec::None) => "none",
        Some(Codec::Gzip) => "gzip",
        Some(Codec::Snappy) => "snappy",
        Some(Codec::Lz4) => "lz4",
        Some(Codec::Zstd) => "zstd",
        None => "unknown",
    }
}

/// Whether a file lies in a `__transaction_state` partition directory.
fn is_transaction_log(path: &Path) -> bool {
    path.parent()
        .and_then(|d| d.file_name())
        .is_some_and(|n| n.to_string_lossy().starts_with("__transaction_state-"))
}

/// Prints one file: a `.txnindex` entry by entry, anything else as a segment, its records
/// decoded as transaction log records when `transaction_log_decoder` is set or the file is
/// in a `__transaction_state` partition.
pub fn dump_file(
    path: &Path,
    transaction_log_decoder: bool,
    out: &mut impl Write,
) -> std::io::Result<usize> {
    if path.to_string_lossy().ends_with(TXN_INDEX_SUFFIX) {
        dump_txn_index(path, out)
    } else {
        let decode = transaction_log_decoder || is_transaction_log(path);
        dump_segment(path, decode, out)
    }
}

/// The records of an uncompressed data batch as Kafka's `--transaction-log-decoder` prints
/// them (`TransactionLog.formatRecordKeyAndValue`).
fn dump_txn_records(batch: &RecordBatch, out: &mut impl Write) -> std::io::Result<()> {
    let h = batch.header();
    if h.is_compressed() {
        return writeln!(out, "| compressed batch: records not decoded");
    }
    for r in RecordIter::new(batch.records_bytes()) {
        match r {
            Ok(r) => {
                let (key, payload) =
                    brook::txn::records::format_record(r.key.unwrap_or_default(), r.value);
                writeln!(
                    out,
                    "| offset: {} key: {key} payload: {payload}",
                    h.base_offset() + r.offset_delta as i64
                )?;
            }
            Err(e) => return writeln!(out, "| {e}"),
        }
    }
    Ok(())
}

/// Prints the aborted transactions of a `.txnindex` file. Returns how many.
pub fn dump_txn_index(path: &Path, out: &mut impl Write) -> std::io::Result<usize> {
    writeln!(out, "Dumping {}", path.display())?;
    // The base offset only serves the order check; a dump accepts any.
    let entries = read_entries(path, i64::MIN + 1)?;
    for t in &entries {
        writeln!(
            out,
            "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
            t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
        )?;
    }
    Ok(entries.len())
}

/// Prints one segment file's batches to `out`, with each record decoded as a transaction
/// log record if `decode_txn_log`. Returns the number of valid batches.
pub fn dump_segment(
    path: &Path,
    decode_txn_log: bool,
    out: &mut impl Write,
) -> std::io::Result<usize> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    writeln!(out, "Dumping {}", path.display())?;
    let mut position: u64 = 0;
    let mut count = 0;
    let mut header = [0u8; HEADER_LEN];
    while position < len {
        if len - position < HEADER_LEN as u64 {
            writeln!(
                out,
                "position: {position} torn tail: {} bytes cannot hold a batch header",
                len - position
            )?;
            break;
        }
        file.read_exact_at(&mut header, position)?;
        let size = i32::from_be_bytes([header[8], header[9], header[10], header[11]]) as i64
            + LOG_OVERHEAD as i64;
        if size < HEADER_LEN as i64
            || size as u64 > len - position
            || size as usize > DUMP_MAX_BATCH_BYTES
        {
            writeln!(
                out,
                "position: {position} corrupt or torn batch: size {size}, {} bytes left",
                len - position
            )?;
            break;
        }
        let mut buf = vec![0u8; size as usize];
        file.read_exact_at(&mut buf, position)?;
        let (batch, _) = match RecordBatch::parse(&buf) {
            Ok(b) => b,
            Err(e) => {
                writeln!(out, "position: {position} {e}")?;
                break;
            }
        };
        print_batch(out, &batch, position, size)?;
        print_batch_records(out, &batch, decode_txn_log)?;
        count += 1;
        position += size as u64;
    }
    Ok(count)
}

/// One batch's line, in the form of Kafka's `DumpLogSegments` batch level.
fn print_batch(
    out: &mut impl Write,
    batch: &RecordBatch<'_>,
    position: u64,
    size: i64,
) -> std::io::Result<()> {
    let h: BatchHeader = batch.header();
    let ts_kind = match h.timestamp_type() {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    };
    writeln!(
        out,
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} producerEpoch: {} \
         partitionLeaderEpoch: {} isTransactional: {} isControl: {} position: {} {}: {} baseTimestamp: {} size: {} \
         magic: {} compresscodec: {} crc: {} isvalid: {}",
        h.base_offset(),
        h.last_offset(),
        h.record_count(),
        h.base_sequence(),
        h.last_sequence(),
        h.producer_id(),
        h.producer_epoch(),
        h.partition_leader_epoch(),
        h.is_transactional(),
        h.is_control(),
        position,
        ts_kind,
        h.max_timestamp(),
        h.base_timestamp(),
        size,
        h.magic(),
        codec_name(h.codec_id()),
        h.crc(),
        batch.is_crc_valid(),
    )
}

/// A batch's records under its line: a control batch's marker, or (`decode_txn_log`) each
/// record decoded as a transaction log record.
fn print_batch_records(
    out: &mut impl Write,
    batch: &RecordBatch<'_>,
    decode_txn_log: bool,
) -> std::io::Result<()> {
    let h = batch.header();
    if h.is_control() {
        match parse_end_txn_marker(batch) {
            Ok(Some(m)) => writeln!(
                out,
                "| offset: {} endTxnMarker: {} coordinatorEpoch: {}",
                h.base_offset(),
                if m.commit { "COMMIT" } else { "ABORT" },
                m.coordinator_epoch
            )?,
            Ok(None) => writeln!(out, "| offset: {} control record", h.base_offset())?,
            Err(e) => writeln!(out, "| offset: {} bad control record: {e}", h.base_offset())?,
        }
    } else if decode_txn_log {
        dump_txn_records(batch, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use brook_storage::batch::testutil::BatchBuilder;

    #[test]
    fn dumps_batches_and_reports_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let a = BatchBuilder::new(1000)
            .idempotent(7, 0, 0)
            .records(3, 10)
            .build();
        let mut b = BatchBuilder::new(2000)
            .codec(Codec::Gzip)
            .records(2, 10)
            .build()
            .to_vec();
        brook_storage::batch::set_base_offset(&mut b, 3);
        let mut data = a.to_vec();
        data.extend_from_slice(&b);
        data.extend_from_slice(&b[..20]);
        std::fs::write(&path, &data).unwrap();
        let mut out = Vec::new();
        assert_eq!(dump_segment(&path, false, &mut out).unwrap(), 2);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: 7"), "{text}");
        assert!(
            text.contains("baseOffset: 3 lastOffset: 4 count: 2"),
            "{text}"
        );
        assert!(text.contains("compresscodec: gzip"), "{text}");
        assert!(text.contains("isvalid: true"), "{text}");
        assert!(text.contains("torn tail"), "{text}");
    }

    #[test]
    fn dumps_markers_and_the_txnindex() {
        use brook_storage::batch::testutil::build_control_batch;
        use brook_storage::txn_index::{AbortedTxn, TransactionIndex};
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("00000000000000000000.log");
        let mut m = build_control_batch(9, 1, false, 3, 1000).to_vec();
        brook_storage::batch::set_base_offset(&mut m, 2);
        std::fs::write(&log, &m).unwrap();
        let idx = dir.path().join("00000000000000000000.txnindex");
        let mut index = TransactionIndex::create(idx.clone()).unwrap();
        let txn = AbortedTxn {
            producer_id: 9,
            first_offset: 0,
            last_offset: 2,
            last_stable_offset: 3,
        };
        index.append(txn).unwrap();
        let files = segment_files(dir.path()).unwrap();
        assert_eq!(files, vec![log, idx]);
        let mut out = Vec::new();
        for f in &files {
            dump_file(f, false, &mut out).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("isControl: true"), "{text}");
        assert!(
            text.contains("| offset: 2 endTxnMarker: ABORT coordinatorEpoch: 3"),
            "{text}"
        );
        assert!(
            text.contains(
                "version: 0 producerId: 9 firstOffset: 0 lastOffset: 2 lastStableOffset: 3"
            ),
            "{text}"
        );
    }

    #[test]
    fn decodes_transaction_state_records() {
        use brook::txn::metadata::TransactionMetadata;
        use brook::txn::records::{txn_key, txn_value, TxnLogValue};
        use brook_storage::batch::testutil::SimpleRecord;
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("__transaction_state-3");
        std::fs::create_dir(&part).unwrap();
        let m = TransactionMetadata::new("tx-dump", 42, 60_000, 7);
        let mut b = BatchBuilder::new(1000);
        b.records = vec![SimpleRecord {
            timestamp_delta: 0,
            key: Some(txn_key("tx-dump").to_vec()),
            value: Some(txn_value(&TxnLogValue::of(&m)).to_vec()),
            headers: Vec::new(),
        }];
        let log = part.join("00000000000000000000.log");
        std::fs::write(&log, b.build()).unwrap();
        let mut out = Vec::new();
        dump_file(&log, false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("| offset: 0 key: transaction_metadata::transactionalId=tx-dump payload: producerId:42,producerEpoch:-1,state=Empty,partitions=[],txnLastUpdateTimestamp=7,txnTimeoutMs=60000"),
            "{text}"
        );
        // Elsewhere only with the flag.
        let other = dir.path().join("plain-0.log");
        std::fs::write(&other, b.build()).unwrap();
        let mut out = Vec::new();
        dump_file(&other, false, &mut out).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("transactionalId"));
        let mut out = Vec::new();
        dump_file(&other, true, &mut out).unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("transactionalId=tx-dump"));
    }
}
