//! Streaming decompression of a batch's records section, with bounded memory: the analogue of
//! Kafka's `Compression.wrapForInput` read through `DefaultRecordBatch.compressedIterator`
//! (`streamingIterator` / `skipKeyValueIterator`), whose decoders hand records out one at a
//! time from small buffers a `BufferSupplier` recycles, so that no one holds a whole
//! decompressed batch.
//!
//! A [`RecordStream`] decodes into one [`DECOMPRESSION_BUFFER_BYTES`] buffer that the record
//! walk ([`super::records::read_record`]) consumes and refills. Its decoder's own state (the
//! zstd window, the lz4 block buffers, one snappy block) is sized from the section's frame
//! headers before decoding starts, and reserved from a process-wide budget of
//! [`DECOMPRESSION_MEMORY_BYTES_MAX`]: a stream that does not fit waits for others to end, and
//! one larger than the whole budget runs alone. So the memory all decompression holds at once
//! is at most `max(DECOMPRESSION_MEMORY_BYTES_MAX, the largest single need)`, and the largest
//! single need is a zstd window of 2^[`ZSTD_WINDOW_LOG_MAX`] (Kafka's zstd-jni default limit)
//! plus [`ZSTD_DECODER_OVERHEAD_BYTES`], whatever the number of connections or threads.
//!
//! A section decompresses to at most [`MAX_DECOMPRESSED_BATCH_BYTES`] bytes; past it the
//! stream fails with INVALID_RECORD. That bound is now on work (CPU time under the partition
//! lock), not memory: a decompression bomb is walked, never held.

use std::io::Read;
use std::sync::{Condvar, Mutex};

use super::batch::{Codec, RecordBatch};
use super::records::{Cursor, RecordBytes, MAX_DECOMPRESSED_BATCH_BYTES, XERIAL_SNAPPY_MAGIC};
use super::LogError;

/// The buffer a stream decodes into and the record walk reads from (Kafka's
/// `ChunkedBytesStream` uses 16 KiB for zstd; a larger one means fewer decoder calls).
pub const DECOMPRESSION_BUFFER_BYTES: usize = 64 * 1024;
/// The process-wide budget of decoder memory (window, block buffers, the stream's buffer).
pub const DECOMPRESSION_MEMORY_BYTES_MAX: usize = 64 * 1024 * 1024;
/// The largest zstd window a frame may ask for, as log2: zstd's default
/// `ZSTD_d_windowLogMax`, which Kafka's zstd-jni decoder keeps. A frame above it fails to
/// decode (CORRUPT_MESSAGE).
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;
/// What a zstd decoder holds besides its window: the context with its entropy tables and the
/// input and output block buffers (128 KiB blocks), rounded up.
pub const ZSTD_DECODER_OVERHEAD_BYTES: usize = 640 * 1024;
/// What an lz4 frame decoder holds besides its two block buffers: the 64 KiB history of
/// linked blocks, the crate's 32 KiB input buffer and the context, rounded up.
pub const LZ4_DECODER_OVERHEAD_BYTES: usize = 256 * 1024;
/// The largest lz4 block (block maximum size id 7).
pub const LZ4_BLOCK_BYTES_MAX: usize = 4 * 1024 * 1024;
/// A gzip decoder: the 32 KiB deflate window and inflate state, rounded up.
pub const GZIP_DECODER_BYTES: usize = 64 * 1024;
/// A snappy block cannot decompress to more than this many times its compressed size (a
/// 3-byte copy element yields at most 64 bytes); a block declaring more is corrupt, and is
/// refused before its buffer is allocated.
pub const SNAPPY_EXPANSION_MAX: usize = 22;

thread_local! {
    /// The thread's stream buffer between streams (Kafka's `BufferSupplier`, which each
    /// request handler thread keeps): a batch does not pay for allocating and zeroing it.
    /// At most one [`DECOMPRESSION_BUFFER_BYTES`] buffer per thread that has decompressed.
    static IDLE_BUFFER: std::cell::Cell<Option<Box<[u8]>>> = const { std::cell::Cell::new(None) };
}

/// A stream buffer: the thread's idle one, or a new one.
fn take_buffer() -> Box<[u8]> {
    IDLE_BUFFER
        .with(|b| b.take())
        .unwrap_or_else(|| vec![0u8; DECOMPRESSION_BUFFER_BYTES].into_boxed_slice())
}

/// Decoder memory in use, against [`DECOMPRESSION_MEMORY_BYTES_MAX`].
static BUDGET_USED_BYTES: Mutex<usize> = Mutex::new(0);
static BUDGET_FREED: Condvar = Condvar::new();

/// A reservation of decoder memory from the process-wide budget, returned on drop. Never
/// nested: a thread holds at most one, so waiting for one cannot deadlock.
struct Reservation {
    bytes: usize,
}

impl Reservation {
    /// Waits until `bytes` fit in the budget, or until nothing else holds any when `bytes`
    /// alone exceed it.
    fn acquire(bytes: usize) -> Reservation {
        let mut used = BUDGET_USED_BYTES.lock().unwrap_or_else(|e| e.into_inner());
        while *used > 0 && used.saturating_add(bytes) > DECOMPRESSION_MEMORY_BYTES_MAX {
            used = BUDGET_FREED.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        *used += bytes;
        Reservation { bytes }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut used = BUDGET_USED_BYTES.lock().unwrap_or_else(|e| e.into_inner());
        *used -= self.bytes;
        BUDGET_FREED.notify_all();
    }
}

/// Decoder memory reserved right now (for tests and metrics).
pub fn decompression_memory_used_bytes() -> usize {
    *BUDGET_USED_BYTES.lock().unwrap_or_else(|e| e.into_inner())
}

/// A codec's decoder over a borrowed compressed section.
enum Decoder<'a> {
    Gzip(Box<flate2::bufread::GzDecoder<&'a [u8]>>),
    Lz4(Box<lz4::Decoder<&'a [u8]>>),
    Zstd(Box<zstd::stream::read::Decoder<'static, &'a [u8]>>),
    Snappy(SnappyBlocks<'a>),
}

impl Read for Decoder<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Decoder::Gzip(d) => d.read(buf),
            Decoder::Lz4(d) => d.read(buf),
            Decoder::Zstd(d) => d.read(buf),
            Decoder::Snappy(d) => d.read(buf),
        }
    }
}

/// The records of one compressed batch, decoded a buffer at a time (see the module
/// documentation). Implements [`RecordBytes`], so the record walks run over it as over an
/// uncompressed section. A decoder failure or the [`MAX_DECOMPRESSED_BATCH_BYTES`] bound ends
/// the stream; [`RecordBytes::settle`] reports it in place of the walk's own error.
pub struct RecordStream<'a> {
    decoder: Decoder<'a>,
    codec: Codec,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// Decompressed bytes before `buf[0]`.
    consumed_before: u64,
    /// Decompressed bytes the decoder produced, and the most it may produce.
    produced: u64,
    limit: u64,
    finished: bool,
    failed: Option<LogError>,
    _reservation: Reservation,
}

impl<'a> RecordStream<'a> {
    /// A stream over `section` (the bytes after the batch header) compressed with `codec`,
    /// which must not be `Codec::None`. Waits for its share of the decoder budget; fails with
    /// CORRUPT_MESSAGE when the decoder cannot start.
    pub fn open(codec: Codec, section: &'a [u8]) -> Result<RecordStream<'a>, LogError> {
        Self::open_bounded(codec, section, MAX_DECOMPRESSED_BATCH_BYTES)
    }

    /// [`Self::open`] with another bound than [`MAX_DECOMPRESSED_BATCH_BYTES`].
    pub fn open_bounded(
        codec: Codec,
        section: &'a [u8],
        limit: usize,
    ) -> Result<RecordStream<'a>, LogError> {
        let corrupt = |e: &dyn std::fmt::Display| {
            LogError::CorruptMessage(format!("cannot decompress {codec:?} batch: {e}"))
        };
        let (state_bytes, zstd_window_log) = decoder_memory_bytes(codec, section)?;
        let reservation = Reservation::acquire(state_bytes + DECOMPRESSION_BUFFER_BYTES);
        let decoder = match codec {
            Codec::Gzip => Decoder::Gzip(Box::new(flate2::bufread::GzDecoder::new(section))),
            Codec::Lz4 => Decoder::Lz4(Box::new(
                lz4::Decoder::new(section).map_err(|e| corrupt(&e))?,
            )),
            Codec::Zstd => {
                let mut d =
                    zstd::stream::read::Decoder::with_buffer(section).map_err(|e| corrupt(&e))?;
                // The reservation covers this window and no larger one.
                d.window_log_max(zstd_window_log).map_err(|e| corrupt(&e))?;
                Decoder::Zstd(Box::new(d))
            }
            Codec::Snappy => Decoder::Snappy(SnappyBlocks::new(section)),
            Codec::None => {
                return Err(LogError::CorruptMessage(
                    "an uncompressed section has no decoder".into(),
                ))
            }
        };
        Ok(RecordStream {
            decoder,
            codec,
            buf: take_buffer(),
            pos: 0,
            end: 0,
            consumed_before: 0,
            produced: 0,
            limit: limit as u64,
            finished: false,
            failed: None,
            _reservation: reservation,
        })
    }

    /// Refills the buffer once its bytes are consumed; false at the end of the stream or on
    /// failure (kept in `failed`).
    #[inline(never)]
    fn fill(&mut self) -> bool {
        if self.finished || self.failed.is_some() {
            return false;
        }
        self.consumed_before += self.end as u64;
        self.pos = 0;
        self.end = 0;
        loop {
            match self.decoder.read(&mut self.buf) {
                Ok(0) => {
                    self.finished = true;
                    return false;
                }
                Ok(n) => {
                    self.produced += n as u64;
                    if self.produced > self.limit {
                        self.failed = Some(LogError::InvalidRecord(format!(
                            "{:?} batch decompresses to more than {} bytes",
                            self.codec, self.limit
                        )));
                        return false;
                    }
                    self.end = n;
                    return true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.failed = Some(LogError::CorruptMessage(format!(
                        "cannot decompress {:?} batch: {e}",
                        self.codec
                    )));
                    return false;
                }
            }
        }
    }

    /// Moves up to `n` bytes through `sink`, refilling as needed; false when the stream ends
    /// first.
    #[inline]
    fn consume(&mut self, mut n: u64, mut sink: impl FnMut(&[u8])) -> bool {
        while n > 0 {
            if self.pos == self.end && !self.fill() {
                return false;
            }
            let k = (self.end - self.pos).min(usize::try_from(n).unwrap_or(usize::MAX));
            sink(&self.buf[self.pos..self.pos + k]);
            self.pos += k;
            n -= k as u64;
        }
        true
    }

    #[inline(never)]
    fn unsigned_varint_slow(&mut self, max_bytes: usize) -> Option<u64> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let byte = self.byte()?;
            value |= ((byte & 0x7f) as u64) << (7 * i);
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    #[inline(always)]
    fn unsigned_varint(&mut self, max_bytes: usize) -> Option<u64> {
        // Fast path: the longest varint fits in what the buffer holds, so the in-memory
        // reader gives the same answer without refills.
        if self.end - self.pos >= max_bytes {
            let mut c = Cursor {
                buf: &self.buf[..self.end],
                pos: self.pos,
            };
            let v = c.unsigned_varint(max_bytes);
            self.pos = c.pos;
            return v;
        }
        self.unsigned_varint_slow(max_bytes)
    }
}

impl Drop for RecordStream<'_> {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        // Not kept when the thread is ending (its local is gone).
        let _ = IDLE_BUFFER.try_with(|b| b.set(Some(buf)));
    }
}

impl RecordBytes for RecordStream<'_> {
    #[inline(always)]
    fn position(&self) -> u64 {
        self.consumed_before + self.pos as u64
    }

    fn has_more(&mut self) -> Result<bool, LogError> {
        if self.pos < self.end || self.fill() {
            return Ok(true);
        }
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(false),
        }
    }

    #[inline(always)]
    fn byte(&mut self) -> Option<u8> {
        if self.pos == self.end && !self.fill() {
            return None;
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Some(b)
    }

    #[inline(always)]
    fn varint(&mut self) -> Option<i32> {
        let raw = self.unsigned_varint(super::records::VARINT_MAX_BYTES)? as u32;
        Some(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    #[inline(always)]
    fn varlong(&mut self) -> Option<i64> {
        let raw = self.unsigned_varint(super::records::VARLONG_MAX_BYTES)?;
        Some(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    #[inline(always)]
    fn peek(&self, n: usize) -> Option<&[u8]> {
        self.buf[self.pos..self.end].get(..n)
    }

    #[inline(always)]
    fn advance_peeked(&mut self, n: usize) {
        self.pos += n;
    }

    #[inline(always)]
    fn skip(&mut self, n: usize) -> Option<()> {
        if n <= self.end - self.pos {
            self.pos += n;
            return Some(());
        }
        self.consume(n as u64, |_| {}).then_some(())
    }

    fn take(&mut self, n: usize, out: &mut Vec<u8>) -> Option<()> {
        // Grows with the bytes that arrive, never by the length a record claims.
        self.consume(n as u64, |s| out.extend_from_slice(s))
            .then_some(())
    }

    fn copy_to(&mut self, n: usize, out: &mut dyn std::io::Write) -> Option<()> {
        let mut ok = true;
        let done = self.consume(n as u64, |s| ok &= out.write_all(s).is_ok());
        (done && ok).then_some(())
    }

    /// The stream's own failure (a decoder error, or the decompressed bound) is what the batch
    /// fails with, whatever the walk found before it, as when the whole section was
    /// decompressed before the walk: the rest is drained to find out.
    fn settle(&mut self, e: LogError) -> LogError {
        while self.fill() {}
        self.failed.take().unwrap_or(e)
    }
}

/// The records section of any batch, read front to back: in place when uncompressed,
/// streamed when compressed. For the readers off the produce path (compaction, control
/// records, timestamp lookups, the group store); validation picks the reader itself so that
/// each walk is compiled for one of them.
pub struct BatchRecords<'a>(Section<'a>);

enum Section<'a> {
    Plain(Cursor<'a>),
    Stream(Box<RecordStream<'a>>),
}

impl<'a> BatchRecords<'a> {
    /// The records of `batch`; CORRUPT_MESSAGE for an unknown codec or a decoder that cannot
    /// start.
    pub fn open(batch: &RecordBatch<'a>) -> Result<BatchRecords<'a>, LogError> {
        let h = batch.header();
        let section = batch.records_bytes();
        Ok(BatchRecords(match h.codec() {
            Some(Codec::None) => Section::Plain(Cursor {
                buf: section,
                pos: 0,
            }),
            Some(codec) => Section::Stream(Box::new(RecordStream::open(codec, section)?)),
            None => {
                return Err(LogError::CorruptMessage(format!(
                    "unknown compression codec id {}",
                    h.codec_id()
                )))
            }
        }))
    }
}

impl RecordBytes for BatchRecords<'_> {
    fn position(&self) -> u64 {
        match &self.0 {
            Section::Plain(c) => c.position(),
            Section::Stream(s) => s.position(),
        }
    }
    fn has_more(&mut self) -> Result<bool, LogError> {
        match &mut self.0 {
            Section::Plain(c) => c.has_more(),
            Section::Stream(s) => s.has_more(),
        }
    }
    fn byte(&mut self) -> Option<u8> {
        match &mut self.0 {
            Section::Plain(c) => c.byte(),
            Section::Stream(s) => s.byte(),
        }
    }
    fn varint(&mut self) -> Option<i32> {
        match &mut self.0 {
            Section::Plain(c) => RecordBytes::varint(c),
            Section::Stream(s) => s.varint(),
        }
    }
    fn varlong(&mut self) -> Option<i64> {
        match &mut self.0 {
            Section::Plain(c) => RecordBytes::varlong(c),
            Section::Stream(s) => s.varlong(),
        }
    }
    fn peek(&self, n: usize) -> Option<&[u8]> {
        match &self.0 {
            Section::Plain(c) => c.peek(n),
            Section::Stream(s) => s.peek(n),
        }
    }
    fn advance_peeked(&mut self, n: usize) {
        match &mut self.0 {
            Section::Plain(c) => c.advance_peeked(n),
            Section::Stream(s) => s.advance_peeked(n),
        }
    }
    fn skip(&mut self, n: usize) -> Option<()> {
        match &mut self.0 {
            Section::Plain(c) => RecordBytes::skip(c, n),
            Section::Stream(s) => s.skip(n),
        }
    }
    fn take(&mut self, n: usize, out: &mut Vec<u8>) -> Option<()> {
        match &mut self.0 {
            Section::Plain(c) => c.take(n, out),
            Section::Stream(s) => s.take(n, out),
        }
    }
    fn copy_to(&mut self, n: usize, out: &mut dyn std::io::Write) -> Option<()> {
        match &mut self.0 {
            Section::Plain(c) => c.copy_to(n, out),
            Section::Stream(s) => s.copy_to(n, out),
        }
    }
    fn settle(&mut self, e: LogError) -> LogError {
        match &mut self.0 {
            Section::Plain(c) => c.settle(e),
            Section::Stream(s) => s.settle(e),
        }
    }
}

/// The decoder state a section needs, from its frame headers, and for zstd the window limit
/// to set. Malformed headers get the smallest figure: the decoder then fails on them, and the
/// limit it is given keeps it within what was reserved.
fn decoder_memory_bytes(codec: Codec, section: &[u8]) -> Result<(usize, u32), LogError> {
    Ok(match codec {
        Codec::None => (0, 0),
        Codec::Gzip => (GZIP_DECODER_BYTES, 0),
        Codec::Lz4 => (2 * lz4_block_bytes(section) + LZ4_DECODER_OVERHEAD_BYTES, 0),
        Codec::Zstd => {
            let log = zstd_window_log(section);
            ((1usize << log) + ZSTD_DECODER_OVERHEAD_BYTES, log)
        }
        Codec::Snappy => (snappy_block_bytes_max(section)?, 0),
    })
}

/// The block maximum size an lz4 frame declares (its BD byte); the largest when unreadable.
fn lz4_block_bytes(section: &[u8]) -> usize {
    const LZ4_FRAME_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
    match (section.get(..4), section.get(5)) {
        (Some(m), Some(bd)) if m == LZ4_FRAME_MAGIC => match (bd >> 4) & 7 {
            4 => 64 * 1024,
            5 => 256 * 1024,
            6 => 1024 * 1024,
            _ => LZ4_BLOCK_BYTES_MAX,
        },
        _ => LZ4_BLOCK_BYTES_MAX,
    }
}

/// log2 of the largest window over the section's zstd frames (RFC 8878, 3.1.1.1: the Window
/// Descriptor, or the Frame Content Size of a single-segment frame), rounded up, at least
/// zstd's minimum of 10 and at most [`ZSTD_WINDOW_LOG_MAX`]. The frames are walked by their
/// block headers (`ZSTD_findFrameCompressedSize`), without decompressing.
fn zstd_window_log(section: &[u8]) -> u32 {
    const WINDOW_LOG_MIN: u32 = 10;
    let mut largest: u64 = 1 << WINDOW_LOG_MIN;
    let mut rest = section;
    while !rest.is_empty() {
        let Ok(frame_len) = zstd::zstd_safe::find_frame_compressed_size(rest) else {
            break;
        };
        largest = largest.max(zstd_frame_window(rest).unwrap_or(0));
        let Some(next) = rest.get(frame_len..) else {
            break;
        };
        rest = next;
    }
    let log = 64 - (largest - 1).leading_zeros();
    log.clamp(WINDOW_LOG_MIN, ZSTD_WINDOW_LOG_MAX)
}

/// The window one zstd frame needs; `None` for a skippable frame or an unreadable header.
fn zstd_frame_window(frame: &[u8]) -> Option<u64> {
    const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    if frame.get(..4)? != ZSTD_MAGIC {
        return None;
    }
    let descriptor = *frame.get(4)?;
    let single_segment = descriptor & 0x20 != 0;
    if single_segment {
        // The window is the content size (zstd_safe reads the field's variable width).
        return zstd::zstd_safe::get_frame_content_size(frame)
            .ok()
            .flatten();
    }
    let window_descriptor = *frame.get(5)?;
    let exponent = (window_descriptor >> 3) as u32;
    let mantissa = (window_descriptor & 7) as u64;
    let base = 1u64.checked_shl(10 + exponent)?;
    Some(base + base / 8 * mantissa)
}

/// The largest block a snappy section decompresses at once: its one raw block, or the
/// largest of its xerial blocks. A block declaring more than [`SNAPPY_EXPANSION_MAX`] times
/// its compressed size is corrupt; framing errors are left to the decoder.
fn snappy_block_bytes_max(section: &[u8]) -> Result<usize, LogError> {
    let declared = |block: &[u8]| -> Result<usize, LogError> {
        let Ok(len) = snap::raw::decompress_len(block) else {
            return Ok(0);
        };
        if len > MAX_DECOMPRESSED_BATCH_BYTES {
            return Err(LogError::InvalidRecord(format!(
                "Snappy batch decompresses to more than {MAX_DECOMPRESSED_BATCH_BYTES} bytes"
            )));
        }
        if len > block.len().saturating_mul(SNAPPY_EXPANSION_MAX) {
            return Err(LogError::CorruptMessage(format!(
                "cannot decompress Snappy batch: a block of {} bytes declares {len}",
                block.len()
            )));
        }
        Ok(len)
    };
    let mut largest = 0;
    let mut blocks = SnappyFraming::new(section);
    while let Some(Ok(block)) = blocks.next() {
        largest = largest.max(declared(block)?);
    }
    Ok(largest)
}

/// The blocks of a snappy section: xerial framing (the magic header, then blocks each
/// prefixed by its big-endian compressed length), as Kafka's Java client writes it, or one
/// raw block (librdkafka).
struct SnappyFraming<'a> {
    rest: &'a [u8],
    raw: bool,
}

impl<'a> SnappyFraming<'a> {
    fn new(section: &'a [u8]) -> Self {
        match section.strip_prefix(&XERIAL_SNAPPY_MAGIC[..]) {
            Some(rest) => SnappyFraming { rest, raw: false },
            None => SnappyFraming {
                rest: section,
                raw: true,
            },
        }
    }
}

impl<'a> Iterator for SnappyFraming<'a> {
    type Item = Result<&'a [u8], String>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.raw {
            self.raw = false;
            let block = std::mem::take(&mut self.rest);
            return Some(Ok(block));
        }
        if self.rest.is_empty() {
            return None;
        }
        let Some((len, tail)) = self.rest.split_first_chunk::<4>() else {
            self.rest = &[];
            return Some(Err("truncated block length".into()));
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > tail.len() {
            self.rest = &[];
            return Some(Err("truncated block".into()));
        }
        let (block, next) = tail.split_at(len);
        self.rest = next;
        Some(Ok(block))
    }
}

/// Snappy decoded one block at a time into a buffer reused across blocks (each block's size
/// was checked by [`snappy_block_bytes_max`] and reserved).
struct SnappyBlocks<'a> {
    framing: SnappyFraming<'a>,
    block: Vec<u8>,
    pos: usize,
}

impl<'a> SnappyBlocks<'a> {
    fn new(section: &'a [u8]) -> Self {
        SnappyBlocks {
            framing: SnappyFraming::new(section),
            block: Vec::new(),
            pos: 0,
        }
    }
}

impl Read for SnappyBlocks<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        while self.pos == self.block.len() {
            let Some(block) = self.framing.next() else {
                return Ok(0);
            };
            let block = block.map_err(invalid)?;
            let len = snap::raw::decompress_len(block).map_err(|e| invalid(e.to_string()))?;
            if len == 0 {
                continue;
            }
            if len <= out.len() {
                // The block fits the caller's buffer: decoded there, without a copy.
                snap::raw::Decoder::new()
                    .decompress(block, &mut out[..len])
                    .map_err(|e| invalid(e.to_string()))?;
                return Ok(len);
            }
            self.block.clear();
            self.block.resize(len, 0);
            snap::raw::Decoder::new()
                .decompress(block, &mut self.block)
                .map_err(|e| invalid(e.to_string()))?;
            self.pos = 0;
        }
        let n = out.len().min(self.block.len() - self.pos);
        out[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The whole decompressed section, for tests that compare bytes.
#[cfg(test)]
pub(crate) fn decompress_all(codec: Codec, section: &[u8]) -> Result<Vec<u8>, LogError> {
    let mut s = RecordStream::open(codec, section)?;
    let mut out = Vec::new();
    while s.has_more()? {
        let n = s.end - s.pos;
        s.take(n, &mut out);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::testutil::*;
    use crate::batch::RecordBatch;

    const NOW: i64 = 1_700_000_000_000;
    const CODECS: [Codec; 4] = [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];

    /// Reads a stream to its end; the error it ends with, if any.
    fn drain(mut s: RecordStream<'_>) -> Result<u64, LogError> {
        while s.has_more()? {
            let n = s.end - s.pos;
            s.skip(n);
        }
        Ok(s.position())
    }

    #[test]
    fn decompression_is_bounded() {
        for codec in CODECS {
            // 200 records of 1000 equal bytes: about 200 KB raw, a few KB compressed.
            let b = BatchBuilder::new(NOW)
                .codec(codec)
                .records(200, 1000)
                .build();
            let (batch, _) = RecordBatch::parse(&b).unwrap();
            let full = decompress_all(codec, batch.records_bytes()).unwrap().len();
            assert!(full > 200_000);
            let s = RecordStream::open_bounded(codec, batch.records_bytes(), full).unwrap();
            assert_eq!(
                drain(s).unwrap(),
                full as u64,
                "{codec:?}: exactly at the bound"
            );
            let s = RecordStream::open_bounded(codec, batch.records_bytes(), 64 * 1024).unwrap();
            assert_eq!(drain(s).unwrap_err().error_code(), 87, "{codec:?}");
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
            RecordStream::open(Codec::Snappy, &bomb)
                .err()
                .unwrap()
                .error_code(),
            87
        );
        // One declaring more than its bytes can expand to is corrupt.
        let mut liar = vec![0x80, 0x80, 0x04]; // 65536
        liar.extend_from_slice(&[0u8; 16]);
        assert_eq!(
            RecordStream::open(Codec::Snappy, &liar)
                .err()
                .unwrap()
                .error_code(),
            2
        );
    }

    /// A bomb (hundreds of MiB of zeros in a few hundred KiB) is walked to its bound with the
    /// decoder's reservation and the stream's buffer only: the budget in use stays at the
    /// figure the frame headers give, far below the bytes decompressed.
    #[test]
    fn a_bomb_is_walked_in_bounded_memory() {
        let zeros = vec![0u8; 64 * 1024 * 1024];
        let section = zstd::bulk::compress(&zeros, 1).unwrap();
        let s = RecordStream::open_bounded(Codec::Zstd, &section, usize::MAX).unwrap();
        let held = decompression_memory_used_bytes();
        assert!(held >= DECOMPRESSION_BUFFER_BYTES, "{held}");
        // Single segment: the window is the content size, 64 MiB, and no more.
        assert!(held <= (64 << 20) + ZSTD_DECODER_OVERHEAD_BYTES + DECOMPRESSION_BUFFER_BYTES);
        assert_eq!(drain(s).unwrap(), zeros.len() as u64);
    }

    #[test]
    fn zstd_windows_are_read_from_frame_headers() {
        let data = vec![1u8; 10_000];
        let small = zstd::bulk::compress(&data, 3).unwrap();
        // Single segment, content size 10 000: a 16 KiB window.
        assert_eq!(zstd_window_log(&small), 14);
        // Two frames: the larger window counts.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.set_parameter(zstd::zstd_safe::CParameter::WindowLog(22))
            .unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let big = enc.finish().unwrap();
        let mut two = small.clone();
        two.extend_from_slice(&big);
        assert_eq!(zstd_window_log(&two), 22);
        assert_eq!(zstd_window_log(b"garbage"), 10);
        // The decoder is held to the reserved window: a later frame asking for more than the
        // headers the scan could read fails instead of growing.
        let mut d = zstd::stream::read::Decoder::with_buffer(&big[..]).unwrap();
        d.window_log_max(14).unwrap();
        assert!(std::io::copy(&mut d, &mut std::io::sink()).is_err());
    }

    #[test]
    fn corrupt_sections_fail_as_corrupt_message() {
        for codec in CODECS {
            let b = BatchBuilder::new(NOW).codec(codec).records(30, 500).build();
            let (batch, _) = RecordBatch::parse(&b).unwrap();
            let mut section = batch.records_bytes().to_vec();
            let mid = section.len() / 2;
            for x in &mut section[mid..] {
                *x = 0xA5;
            }
            let err = RecordStream::open(codec, &section).and_then(drain);
            assert_eq!(err.unwrap_err().error_code(), 2, "{codec:?}");
        }
    }
}
