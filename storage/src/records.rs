//! The records inside a v2 batch (Kafka's `DefaultRecord`): a bounds-checked walk over an
//! uncompressed records section, and decompression of a compressed one, bounded by
//! [`MAX_DECOMPRESSED_BATCH_BYTES`].

use super::batch::Codec;
use super::LogError;

/// Longest varint encoding of an i32 (Kafka rejects longer ones).
pub(super) const VARINT_MAX_BYTES: usize = 5;
/// Longest varint encoding of an i64.
pub(super) const VARLONG_MAX_BYTES: usize = 10;

/// A cursor over a records section. Every read is bounds-checked and returns `None` on
/// malformed input instead of panicking.
pub(super) struct Cursor<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    pub(super) fn unsigned_varint(&mut self, max_bytes: usize) -> Option<u64> {
        // Fast path: most lengths and deltas in a batch fit in one byte.
        let first = *self.buf.get(self.pos)?;
        if first < 0x80 {
            self.pos += 1;
            return Some(first as u64);
        }
        // Two bytes cover values up to 16383: record sizes and value lengths of small records.
        let second = *self.buf.get(self.pos + 1)?;
        if second < 0x80 {
            self.pos += 2;
            return Some((first & 0x7f) as u64 | ((second as u64) << 7));
        }
        self.unsigned_varint_slow(max_bytes)
    }
    #[inline(never)]
    pub(super) fn unsigned_varint_slow(&mut self, max_bytes: usize) -> Option<u64> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let byte = *self.buf.get(self.pos)?;
            self.pos += 1;
            value |= ((byte & 0x7f) as u64) << (7 * i);
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    #[inline(always)]
    pub(super) fn varint(&mut self) -> Option<i32> {
        let raw = self.unsigned_varint(VARINT_MAX_BYTES)? as u32;
        Some(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }
    #[inline(always)]
    pub(super) fn varlong(&mut self) -> Option<i64> {
        let raw = self.unsigned_varint(VARLONG_MAX_BYTES)?;
        Some(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }
    #[inline(always)]
    pub(super) fn skip(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    /// A varint length followed by that many bytes; -1 means null.
    #[inline(always)]
    pub(super) fn nullable_bytes(&mut self) -> Option<Option<&'a [u8]>> {
        let len = self.varint()?;
        if len < 0 {
            return if len == -1 { Some(None) } else { None };
        }
        Some(Some(self.skip(len as usize)?))
    }
}

/// One record of an uncompressed records section, borrowed from the batch.
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    /// The record's attributes byte (unused by Kafka today).
    pub attributes: i8,
    /// Added to the batch's baseTimestamp.
    pub timestamp_delta: i64,
    /// Added to the batch's baseOffset.
    pub offset_delta: i32,
    /// The key, `None` when null.
    pub key: Option<&'a [u8]>,
    /// The value, `None` when null.
    pub value: Option<&'a [u8]>,
}

/// Iterates over records of an uncompressed records section, checking each record's framing:
/// the varint length must match the bytes the fields use, header counts must be >= 0 and header
/// keys non-null. Yields `Err` once and then stops at the first malformed record.
pub struct RecordIter<'a> {
    cursor: Cursor<'a>,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    /// Iterates over `records` (the bytes after the 61-byte header, decompressed if needed).
    pub fn new(records: &'a [u8]) -> Self {
        RecordIter {
            cursor: Cursor {
                buf: records,
                pos: 0,
            },
            failed: false,
        }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.cursor.buf.len() - self.cursor.pos
    }

    #[inline(always)]
    fn read_one(&mut self) -> Option<RecordView<'a>> {
        let length = self.cursor.varint()?;
        if length < 0 {
            return None;
        }
        let body = self.cursor.skip(length as usize)?;
        let mut c = Cursor { buf: body, pos: 0 };
        let attributes = *c.skip(1)?.first()? as i8;
        let timestamp_delta = c.varlong()?;
        let offset_delta = c.varint()?;
        let key = c.nullable_bytes()?;
        let value = c.nullable_bytes()?;
        let header_count = c.varint()?;
        if header_count < 0 {
            return None;
        }
        // Each header uses at least two bytes, so the loop is bounded by the body size.
        for _ in 0..header_count {
            let _header_key: &[u8] = c.nullable_bytes()??; // must not be null
            c.nullable_bytes()?;
        }
        if c.pos != body.len() {
            return None;
        }
        Some(RecordView {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
        })
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordView<'a>, LogError>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.remaining() == 0 {
            return None;
        }
        match self.read_one() {
            Some(r) => Some(Ok(r)),
            None => {
                self.failed = true;
                Some(Err(LogError::InvalidRecord(
                    "malformed record framing".into(),
                )))
            }
        }
    }
}

/// Bound on a batch's records section once decompressed. A compressed batch is at most
/// `max.message.bytes` on the wire, but a decompression bomb of that size could expand to
/// gigabytes; past this bound the batch is refused (INVALID_RECORD) instead of allocated.
pub const MAX_DECOMPRESSED_BATCH_BYTES: usize = 128 * 1024 * 1024;

/// The 16-byte header of snappy-java's framed ("xerial") format, which Kafka's Java client
/// writes; without it a snappy section is one raw block.
pub(super) const XERIAL_SNAPPY_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// Decompresses a records section for reading (produce validation, timestamp lookups,
/// recovery). Never used to write: batches are stored as received. At most
/// [`MAX_DECOMPRESSED_BATCH_BYTES`] are produced.
pub fn decompress_records(codec: Codec, records: &[u8]) -> Result<bytes::Bytes, LogError> {
    decompress_records_bounded(codec, records, MAX_DECOMPRESSED_BATCH_BYTES)
}

/// [`decompress_records`] with an explicit bound.
pub fn decompress_records_bounded(
    codec: Codec,
    records: &[u8],
    limit: usize,
) -> Result<bytes::Bytes, LogError> {
    use std::io::Read;
    let corrupt = |e: &dyn std::fmt::Display| {
        LogError::CorruptMessage(format!("cannot decompress {codec:?} batch: {e}"))
    };
    let too_big = || {
        LogError::InvalidRecord(format!(
            "{codec:?} batch decompresses to more than {limit} bytes"
        ))
    };
    // Streaming decoders read through `take(limit + 1)`: one byte past the bound is enough
    // to know the batch is too big, without allocating the rest.
    let read_bounded = |mut r: Box<dyn Read + '_>| -> Result<bytes::Bytes, LogError> {
        let mut out = Vec::with_capacity(records.len().saturating_mul(4).min(limit));
        r.by_ref()
            .take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| corrupt(&e))?;
        if out.len() > limit {
            return Err(too_big());
        }
        Ok(out.into())
    };
    match codec {
        Codec::None => Ok(bytes::Bytes::copy_from_slice(records)),
        Codec::Gzip => read_bounded(Box::new(flate2::read::GzDecoder::new(records))),
        Codec::Lz4 => read_bounded(Box::new(
            lz4::Decoder::new(records).map_err(|e| corrupt(&e))?,
        )),
        Codec::Zstd => read_bounded(Box::new(
            zstd::stream::read::Decoder::new(records).map_err(|e| corrupt(&e))?,
        )),
        Codec::Snappy => decompress_snappy(records, limit).map_err(|e| match e {
            SnappyError::TooBig => too_big(),
            SnappyError::Corrupt(m) => corrupt(&m),
        }),
    }
}

enum SnappyError {
    TooBig,
    Corrupt(String),
}

/// Snappy as Kafka clients write it: xerial framing (magic header, then blocks each prefixed
/// by its compressed length), or a single raw block. Each block declares its decompressed
/// length, which is checked against what is left of the bound before allocating.
fn decompress_snappy(records: &[u8], limit: usize) -> Result<bytes::Bytes, SnappyError> {
    let block = |b: &[u8], out: &mut Vec<u8>| -> Result<(), SnappyError> {
        let len = snap::raw::decompress_len(b).map_err(|e| SnappyError::Corrupt(e.to_string()))?;
        if len > limit - out.len() {
            return Err(SnappyError::TooBig);
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new()
            .decompress(b, &mut out[start..])
            .map_err(|e| SnappyError::Corrupt(e.to_string()))?;
        Ok(())
    };
    let mut out = Vec::new();
    let Some(mut rest) = records.strip_prefix(&XERIAL_SNAPPY_MAGIC[..]) else {
        block(records, &mut out)?;
        return Ok(out.into());
    };
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(SnappyError::Corrupt("truncated block length".into()));
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > tail.len() {
            return Err(SnappyError::Corrupt("truncated block".into()));
        }
        let (b, next) = tail.split_at(len);
        block(b, &mut out)?;
        rest = next;
    }
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::testutil::*;
    use crate::batch::RecordBatch;

    const NOW: i64 = 1_700_000_000_000;

    #[test]
    fn decompression_is_bounded() {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            // 200 records of 1000 equal bytes: about 200 KB raw, a few KB compressed.
            let b = BatchBuilder::new(NOW)
                .codec(codec)
                .records(200, 1000)
                .build();
            let (batch, _) = RecordBatch::parse(&b).unwrap();
            let full = decompress_records(codec, batch.records_bytes()).unwrap();
            assert!(full.len() > 200_000);
            assert_eq!(
                decompress_records_bounded(codec, batch.records_bytes(), full.len())
                    .unwrap()
                    .len(),
                full.len(),
                "{codec:?}: exactly at the bound"
            );
            let err =
                decompress_records_bounded(codec, batch.records_bytes(), 64 * 1024).unwrap_err();
            assert_eq!(err.error_code(), 87, "{codec:?}: {err}");
        }
        // A raw snappy block declaring a huge length is refused before allocating.
        let mut bomb = Vec::new();
        let mut n: u64 = 1 << 31;
        while n >= 0x80 {
            bomb.push((n as u8) | 0x80);
            n >>= 7;
        }
        bomb.push(n as u8);
        bomb.extend_from_slice(&[0u8; 8]);
        assert_eq!(
            decompress_records(Codec::Snappy, &bomb)
                .unwrap_err()
                .error_code(),
            87
        );
    }

    #[test]
    fn decompress_round_trip() {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let b = BatchBuilder::new(NOW).codec(codec).records(3, 7).build();
            let (batch, _) = RecordBatch::parse(&b).unwrap();
            let raw = decompress_records(codec, batch.records_bytes()).unwrap();
            let recs: Vec<_> = RecordIter::new(&raw).collect::<Result<_, _>>().unwrap();
            assert_eq!(recs.len(), 3);
            assert_eq!(recs[2].offset_delta, 2);
            assert_eq!(recs[2].value.unwrap().len(), 7);
        }
    }
}
