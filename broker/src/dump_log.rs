//! `brook dump-log PATH`: prints a segment's batches, like Kafka's kafka-dump-log, so people
//! and tests can see what is on disk: offsets, producer id, epoch, sequences, codec,
//! transactional and control flags, timestamps, and whether the CRC holds.
//!
//! It reads a segment batch by batch with positional reads, so a torn or corrupt tail is
//! reported where it starts instead of failing the whole dump.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::log::batch::{BatchHeader, Codec, RecordBatch, HEADER_LEN, LOG_OVERHEAD};
use crate::log::TimestampType;

/// Largest batch the dump will read (a length field above it is reported as corrupt).
pub const DUMP_MAX_BATCH_BYTES: usize = 256 * 1024 * 1024;

/// The `.log` files to dump for a path: the file itself, or every segment of a directory.
pub fn segment_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
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

/// Prints one segment file's batches to `out`. Returns the number of valid batches.
pub fn dump_segment(path: &Path, out: &mut impl Write) -> std::io::Result<usize> {
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
        )?;
        count += 1;
        position += size as u64;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::testutil::BatchBuilder;

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
        crate::log::batch::set_base_offset(&mut b, 3);
        let mut data = a.to_vec();
        data.extend_from_slice(&b);
        data.extend_from_slice(&b[..20]);
        std::fs::write(&path, &data).unwrap();
        let mut out = Vec::new();
        assert_eq!(dump_segment(&path, &mut out).unwrap(), 2);
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
}
