//! The records inside a v2 batch (Kafka's `DefaultRecord`): a bounds-checked walk over an
//! uncompressed records section ([`RecordIter`]), and [`read_record`], one record at a time
//! from any [`RecordBytes`]: an uncompressed section or a compressed one streamed through
//! [`super::decompress::RecordStream`].

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
        parse_body(body).map(|(view, _)| view)
    }
}

/// Parses one record's body (the bytes after its length), checking its framing: header
/// counts >= 0, header keys non-null, every byte used. The record and the length of its
/// prefix (attributes and both deltas).
#[inline(always)]
fn parse_body(body: &[u8]) -> Option<(RecordView<'_>, usize)> {
    let mut c = Cursor { buf: body, pos: 0 };
    let attributes = *c.skip(1)?.first()? as i8;
    let timestamp_delta = c.varlong()?;
    let offset_delta = c.varint()?;
    let prefix_len = c.pos;
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
    let view = RecordView {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
    };
    Some((view, prefix_len))
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
/// gigabytes; past this bound the batch is refused (INVALID_RECORD). Streams never hold the
/// section ([`super::decompress`]), so this bounds the work of walking one batch, not memory.
pub const MAX_DECOMPRESSED_BATCH_BYTES: usize = 128 * 1024 * 1024;

/// The 16-byte header of snappy-java's framed ("xerial") format, which Kafka's Java client
/// writes; without it a snappy section is one raw block.
pub(super) const XERIAL_SNAPPY_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// A records section read front to back: an uncompressed one in memory ([`Cursor`]) or a
/// compressed one decoded a buffer at a time ([`super::decompress::RecordStream`]). The
/// record walks are generic over it, so an uncompressed section is walked in place and a
/// compressed one without holding it. Reads return `None` at the end of the bytes (or when a
/// stream fails: [`RecordBytes::settle`] then names the failure).
pub trait RecordBytes {
    /// Bytes consumed since the start of the section.
    fn position(&self) -> u64;
    /// Whether bytes remain; a stream's failure is returned here.
    fn has_more(&mut self) -> Result<bool, LogError>;
    fn byte(&mut self) -> Option<u8>;
    fn varint(&mut self) -> Option<i32>;
    fn varlong(&mut self) -> Option<i64>;
    /// The next `n` bytes without consuming them, when they are in memory at once (always
    /// for an uncompressed section; for a stream, when its buffer holds them).
    fn peek(&self, n: usize) -> Option<&[u8]>;
    /// Passes over `n` bytes that [`RecordBytes::peek`] just returned.
    fn advance_peeked(&mut self, n: usize);
    /// Passes over `n` bytes.
    fn skip(&mut self, n: usize) -> Option<()>;
    /// Appends the next `n` bytes to `out`.
    fn take(&mut self, n: usize, out: &mut Vec<u8>) -> Option<()>;
    /// Writes the next `n` bytes to `out`.
    fn copy_to(&mut self, n: usize, out: &mut dyn std::io::Write) -> Option<()>;
    /// The error a walk that failed with `e` reports: `e`, unless the bytes themselves failed
    /// (a compressed stream's decoder error or size bound), which takes precedence.
    fn settle(&mut self, e: LogError) -> LogError {
        e
    }
}

impl RecordBytes for Cursor<'_> {
    #[inline(always)]
    fn position(&self) -> u64 {
        self.pos as u64
    }
    #[inline(always)]
    fn has_more(&mut self) -> Result<bool, LogError> {
        Ok(self.pos < self.buf.len())
    }
    #[inline(always)]
    fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
    #[inline(always)]
    fn varint(&mut self) -> Option<i32> {
        Cursor::varint(self)
    }
    #[inline(always)]
    fn varlong(&mut self) -> Option<i64> {
        Cursor::varlong(self)
    }
    #[inline(always)]
    fn peek(&self, n: usize) -> Option<&[u8]> {
        self.buf.get(self.pos..self.pos.checked_add(n)?)
    }
    #[inline(always)]
    fn advance_peeked(&mut self, n: usize) {
        self.pos += n;
    }
    #[inline(always)]
    fn skip(&mut self, n: usize) -> Option<()> {
        Cursor::skip(self, n).map(|_| ())
    }
    fn take(&mut self, n: usize, out: &mut Vec<u8>) -> Option<()> {
        out.extend_from_slice(Cursor::skip(self, n)?);
        Some(())
    }
    fn copy_to(&mut self, n: usize, out: &mut dyn std::io::Write) -> Option<()> {
        out.write_all(Cursor::skip(self, n)?).ok()
    }
}

/// What [`read_record`] learned of one record; the key and value bytes go to the caller's
/// buffers when asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMeta {
    /// The record's length field: the bytes after it.
    pub body_len: usize,
    /// The attributes byte.
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    /// Bytes of the body up to and including the offset delta (attributes, both deltas).
    pub prefix_len: usize,
    pub has_key: bool,
    pub has_value: bool,
}

/// Where [`read_record`] puts a record's key and value, when the caller wants them; `None`
/// passes over them (Kafka's `DefaultRecord.readPartiallyFrom`, which skips key, value and
/// headers).
#[derive(Default)]
pub struct RecordSink<'b> {
    pub key: Option<&'b mut Vec<u8>>,
    pub value: Option<&'b mut Vec<u8>>,
}

/// Reads one record (Kafka's `DefaultRecord.readFrom`), checking its framing as
/// [`RecordIter`] does: the length must match the bytes the fields use, header counts must
/// not be negative and header keys must not be null. `None` on malformed framing; no field is
/// read past the record's length. With `stop_after_prefix`, returns once the offset delta is
/// read (the caller consumes the rest of the body: `body_len - prefix_len` bytes).
#[inline(always)]
pub fn read_record<R: RecordBytes>(
    r: &mut R,
    sink: RecordSink<'_>,
    stop_after_prefix: bool,
) -> Option<RecordMeta> {
    let len = r.varint()?;
    let body_len = usize::try_from(len).ok()?;
    if !stop_after_prefix {
        // Fast path: the whole record in memory, parsed in place (always for an uncompressed
        // section; for a stream, unless the record straddles a refill or outgrows the buffer).
        if let Some(body) = r.peek(body_len) {
            let (view, prefix_len) = parse_body(body)?;
            let meta = RecordMeta {
                body_len,
                attributes: view.attributes,
                timestamp_delta: view.timestamp_delta,
                offset_delta: view.offset_delta,
                prefix_len,
                has_key: view.key.is_some(),
                has_value: view.value.is_some(),
            };
            for (field, out) in [(view.key, sink.key), (view.value, sink.value)] {
                if let (Some(field), Some(out)) = (field, out) {
                    out.clear();
                    out.extend_from_slice(field);
                }
            }
            r.advance_peeked(body_len);
            return Some(meta);
        }
    }
    let start = r.position();
    let end = start + body_len as u64;
    let attributes = r.byte()? as i8;
    let timestamp_delta = r.varlong()?;
    let offset_delta = r.varint()?;
    let prefix_len = usize::try_from(r.position() - start).ok()?;
    if prefix_len > body_len {
        return None;
    }
    let mut meta = RecordMeta {
        body_len,
        attributes,
        timestamp_delta,
        offset_delta,
        prefix_len,
        has_key: false,
        has_value: false,
    };
    if stop_after_prefix {
        return Some(meta);
    }
    meta.has_key = nullable_field(r, end, sink.key)?;
    meta.has_value = nullable_field(r, end, sink.value)?;
    let headers = r.varint()?;
    if headers < 0 {
        return None;
    }
    // Each header takes at least two bytes, and every field is checked against the end: the
    // loop ends within the record's length.
    for _ in 0..headers {
        if !nullable_field(r, end, None)? {
            return None; // a header key is never null
        }
        nullable_field(r, end, None)?;
    }
    (r.position() == end).then_some(meta)
}

/// A varint length then that many bytes (-1: null), within the record ending at `end`; the
/// bytes go to `out` when given, else are passed over. Whether the field is non-null.
#[inline(always)]
fn nullable_field<R: RecordBytes>(r: &mut R, end: u64, out: Option<&mut Vec<u8>>) -> Option<bool> {
    let len = r.varint()?;
    if len < 0 {
        return (len == -1 && r.position() <= end).then_some(false);
    }
    let left = end.checked_sub(r.position())?;
    if len as u64 > left {
        return None;
    }
    match out {
        Some(out) => {
            out.clear();
            r.take(len as usize, out)?;
        }
        None => r.skip(len as usize)?,
    }
    Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::testutil::*;
    use crate::batch::{Codec, RecordBatch};
    use crate::decompress::RecordStream;

    const NOW: i64 = 1_700_000_000_000;

    /// Every record of `section` through [`read_record`], with keys and values.
    fn read_all<R: RecordBytes>(r: &mut R) -> Vec<(RecordMeta, Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        while r.has_more().unwrap() {
            let (mut k, mut v) = (Vec::new(), Vec::new());
            let sink = RecordSink {
                key: Some(&mut k),
                value: Some(&mut v),
            };
            out.push((read_record(r, sink, false).unwrap(), k, v));
        }
        out
    }

    #[test]
    fn read_record_agrees_with_record_iter() {
        let b = BatchBuilder::new(NOW)
            .record(0, Some(b"k"), b"a")
            .record(3, None, b"")
            .record(0, Some(b""), &[7u8; 300])
            .build();
        let (batch, _) = RecordBatch::parse(&b).unwrap();
        let plain: Vec<_> = RecordIter::new(batch.records_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        for codec in [
            Codec::None,
            Codec::Gzip,
            Codec::Snappy,
            Codec::Lz4,
            Codec::Zstd,
        ] {
            let b = BatchBuilder::new(NOW)
                .codec(codec)
                .record(0, Some(b"k"), b"a")
                .record(3, None, b"")
                .record(0, Some(b""), &[7u8; 300])
                .build();
            let (batch, _) = RecordBatch::parse(&b).unwrap();
            let read = match codec {
                Codec::None => read_all(&mut Cursor {
                    buf: batch.records_bytes(),
                    pos: 0,
                }),
                c => read_all(&mut RecordStream::open(c, batch.records_bytes()).unwrap()),
            };
            assert_eq!(read.len(), plain.len(), "{codec:?}");
            for ((meta, k, v), want) in read.iter().zip(&plain) {
                assert_eq!(meta.offset_delta, want.offset_delta, "{codec:?}");
                assert_eq!(meta.timestamp_delta, want.timestamp_delta, "{codec:?}");
                assert_eq!(meta.has_key, want.key.is_some(), "{codec:?}");
                assert_eq!(&k[..], want.key.unwrap_or_default(), "{codec:?}");
                assert_eq!(&v[..], want.value.unwrap_or_default(), "{codec:?}");
            }
        }
    }

    #[test]
    fn read_record_refuses_what_record_iter_refuses() {
        let b = build_batch(2, 5, NOW);
        let section = &b[crate::batch::HEADER_LEN..];
        // Every truncation and every single-byte change of the first record: both readers agree
        // on whether it is well framed.
        for cut in 0..section.len() {
            let bytes = &section[..cut];
            let iter_ok = RecordIter::new(bytes).next().is_some_and(|r| r.is_ok());
            let mut c = Cursor { buf: bytes, pos: 0 };
            let read_ok = read_record(&mut c, RecordSink::default(), false).is_some();
            assert_eq!(iter_ok, read_ok, "cut at {cut}");
        }
        for at in 0..10 {
            for val in [0x00u8, 0x01, 0x7f, 0x80, 0xff] {
                let mut x = section.to_vec();
                x[at] = val;
                let iter_ok = RecordIter::new(&x).next().is_some_and(|r| r.is_ok());
                let mut c = Cursor { buf: &x, pos: 0 };
                let read_ok = read_record(&mut c, RecordSink::default(), false).is_some();
                assert_eq!(iter_ok, read_ok, "byte {at} = {val:#x}");
            }
        }
    }
}
