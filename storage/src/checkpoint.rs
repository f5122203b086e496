//! Per-log-directory offset checkpoints in Kafka's text format (`OffsetCheckpointFile` over
//! `CheckpointFile`), so Kafka's tools and Brook read each other's files:
//!
//! ```text
//! 0                 <- version
//! 2                 <- number of entries
//! orders 0 1234     <- topic, partition, offset (one line each)
//! orders 1 998
//! ```
//!
//! Three of them live in each log directory: [`RECOVERY_POINT_CHECKPOINT`],
//! [`LOG_START_OFFSET_CHECKPOINT`] and [`HIGH_WATERMARK_CHECKPOINT`]. A write goes to
//! `<name>.tmp`, is fsynced, renamed over the old file, and the directory is fsynced, so a
//! crash leaves the old file or the new one, never a mix. The framing (version, count, one
//! entry per line) and the write are Kafka's `CheckpointFile`, shared with the partition's
//! `leader-epoch-checkpoint` ([`super::leader_epoch`]): [`parse_entries`], [`format_entries`],
//! [`write_atomically`] (over [`replace_file`], the one atomic file replace of the project).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Per partition: everything below this offset was fsynced (Kafka's `LogManager`).
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// Per partition: the log start offset (Kafka's `LogManager`).
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// Per partition: the high watermark (Kafka's `ReplicaManager`).
pub const HIGH_WATERMARK_CHECKPOINT: &str = "replication-offset-checkpoint";
/// The only version of the format.
pub const CHECKPOINT_VERSION: i32 = 0;
/// A checkpoint larger than this is damaged (a line per partition is far below it).
pub const CHECKPOINT_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// Offsets by (topic, partition).
pub type OffsetMap = BTreeMap<(String, i32), i64>;

/// Why a checkpoint could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint {file}: {source}")]
    Io { file: String, source: io::Error },
    #[error("checkpoint {file} is malformed: {reason}")]
    Malformed { file: String, reason: String },
}

/// Reads `dir/name`; a missing file is an empty map.
pub fn read_offsets(dir: &Path, name: &str) -> Result<OffsetMap, CheckpointError> {
    let path = dir.join(name);
    let io = |source| CheckpointError::Io {
        file: path.display().to_string(),
        source,
    };
    match fs::metadata(&path) {
        Ok(m) if m.len() > CHECKPOINT_MAX_BYTES => {
            return Err(CheckpointError::Malformed {
                file: path.display().to_string(),
                reason: format!("{} bytes", m.len()),
            })
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(OffsetMap::new()),
        Err(e) => return Err(io(e)),
    }
    let text = fs::read_to_string(&path).map_err(io)?;
    parse_offsets(&text).map_err(|reason| CheckpointError::Malformed {
        file: path.display().to_string(),
        reason,
    })
}

/// Parses the framing of a checkpoint (Kafka's `CheckpointReadBuffer`): an empty text, or a
/// version line alone, holds no entries; otherwise every line after the count is an entry,
/// split on whitespace and given to `entry` (`None`: malformed), and the count must match.
pub fn parse_entries<T>(
    text: &str,
    entry: impl Fn(&[&str]) -> Option<T>,
) -> Result<Vec<T>, String> {
    let mut lines = text.lines();
    let Some(version) = lines.next() else {
        return Ok(Vec::new());
    };
    let version: i32 = version
        .trim()
        .parse()
        .map_err(|_| format!("bad version line {version:?}"))?;
    if version != CHECKPOINT_VERSION {
        return Err(format!("version {version}, expected {CHECKPOINT_VERSION}"));
    }
    let Some(count) = lines.next() else {
        return Ok(Vec::new());
    };
    let count: usize = count
        .trim()
        .parse()
        .map_err(|_| format!("bad count line {count:?}"))?;
    let mut out = Vec::new();
    for line in lines {
        let parts: Vec<&str> = line.split_whitespace().collect();
        out.push(entry(&parts).ok_or_else(|| format!("malformed line {line:?}"))?);
    }
    if out.len() != count {
        return Err(format!("{count} entries announced, {} found", out.len()));
    }
    Ok(out)
}

/// The text of a checkpoint with `entries`, one line each (Kafka's `CheckpointWriteBuffer`).
pub fn format_entries(entries: impl ExactSizeIterator<Item = String>) -> String {
    let mut s = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
    for e in entries {
        s.push_str(&e);
        s.push('\n');
    }
    s
}

/// Replaces the file at `path` with `text`, durably (see [`replace_file`]).
pub fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    replace_file(path, true, |f| f.write_all(text.as_bytes()))
}

/// Replaces the file at `path` with what `write` writes: into `<path>.tmp`, renamed over
/// `path`, so a reader or a restart sees the old file or the new one, never a mix. With
/// `durable` the new file is fsynced before the rename and the directory after it, so the
/// replace also survives a machine crash (Kafka's `Utils.atomicMoveWithFallback` after a
/// flush); without, only a process crash. The one way Brook replaces a file: checkpoints,
/// `meta.properties` and the metadata quorum's files all go through it.
pub fn replace_file(
    path: &Path,
    durable: bool,
    write: impl FnOnce(&mut io::BufWriter<fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let mut writer = io::BufWriter::new(fs::File::create(&tmp)?);
    write(&mut writer)?;
    let file = writer.into_inner().map_err(|e| e.into_error())?;
    if durable {
        file.sync_all()?;
    }
    drop(file);
    fs::rename(&tmp, path)?;
    match path.parent() {
        Some(dir) if durable => fs::File::open(dir)?.sync_all(),
        _ => Ok(()),
    }
}

/// Parses an offset checkpoint's text.
pub fn parse_offsets(text: &str) -> Result<OffsetMap, String> {
    let entries = parse_entries(text, |parts| match parts {
        [topic, partition, offset] => Some((
            (topic.to_string(), partition.parse().ok()?),
            offset.parse().ok()?,
        )),
        _ => None,
    })?;
    Ok(entries.into_iter().collect())
}

/// The text of an offset checkpoint holding `offsets`.
pub fn format_offsets(offsets: &OffsetMap) -> String {
    format_entries(
        offsets
            .iter()
            .map(|((topic, partition), offset)| format!("{topic} {partition} {offset}")),
    )
}

/// Replaces `dir/name` with `offsets`.
pub fn write_offsets(dir: &Path, name: &str, offsets: &OffsetMap) -> io::Result<()> {
    write_atomically(&dir.join(name), &format_offsets(offsets))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, i32, i64)]) -> OffsetMap {
        entries
            .iter()
            .map(|(t, p, o)| ((t.to_string(), *p), *o))
            .collect()
    }

    #[test]
    fn kafka_text_format() {
        let m = map(&[("orders", 1, 998), ("orders", 0, 1234), ("a.b-c_d", 7, 0)]);
        assert_eq!(
            format_offsets(&m),
            "0\n3\na.b-c_d 7 0\norders 0 1234\norders 1 998\n"
        );
        assert_eq!(format_offsets(&OffsetMap::new()), "0\n0\n");
    }

    #[test]
    fn round_trip_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_offsets(dir.path(), HIGH_WATERMARK_CHECKPOINT)
            .unwrap()
            .is_empty());
        let m = map(&[("t", 0, 5), ("t", 1, 9), ("u", 0, 0)]);
        write_offsets(dir.path(), HIGH_WATERMARK_CHECKPOINT, &m).unwrap();
        assert_eq!(
            read_offsets(dir.path(), HIGH_WATERMARK_CHECKPOINT).unwrap(),
            m
        );
        assert!(!dir
            .path()
            .join(format!("{HIGH_WATERMARK_CHECKPOINT}.tmp"))
            .exists());
        let m2 = map(&[("t", 0, 6)]);
        write_offsets(dir.path(), HIGH_WATERMARK_CHECKPOINT, &m2).unwrap();
        assert_eq!(
            read_offsets(dir.path(), HIGH_WATERMARK_CHECKPOINT).unwrap(),
            m2
        );
    }

    #[test]
    fn reads_what_kafka_accepts_and_refuses_the_rest() {
        assert!(parse_offsets("").unwrap().is_empty());
        assert!(parse_offsets("0\n").unwrap().is_empty());
        assert_eq!(
            parse_offsets("0\n1\nt  3   17\n").unwrap(),
            map(&[("t", 3, 17)])
        );
        for bad in [
            "1\n0\n",
            "x\n",
            "0\ny\n",
            "0\n2\nt 0 1\n",
            "0\n1\nt 0\n",
            "0\n1\nt 0 1 2\n",
            "0\n1\nt zero 1\n",
            "0\n1\nt 0 99999999999999999999\n",
        ] {
            assert!(parse_offsets(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
