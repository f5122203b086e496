//! Finds a valid body's fields by decoding it through a buffer that records every read.
//!
//! kafka-protocol's decoders read each primitive with one `Buf` call (`try_get_i16` for a
//! string length, `try_get_i32` for a classic array count or bytes length, one `try_get_u8`
//! per varint byte, `try_get_bytes` for a string's or record set's bytes), so the reads of a
//! successful decode are the frame's field boundaries in the real schema of that version.

use bytes::{Buf, Bytes};
use kafka_protocol::protocol::buf::{ByteBuf, NotEnoughBytesError};

/// What a field is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An unsigned varint (compact lengths and counts, tagged-field counts, tags, sizes) or a
    /// boolean: one byte read at a time until a byte below 0x80.
    Varint,
    I8,
    /// String lengths, and 16-bit integers.
    I16,
    /// Classic array counts and bytes lengths, and 32-bit integers.
    I32,
    /// 64-bit integers and floats.
    I64,
    /// The bytes of a string, a bytes field, a record set or a UUID.
    Region,
}

/// One field of an encoded frame: `len` bytes at `pos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub pos: usize,
    pub len: usize,
    pub kind: FieldKind,
}

impl Field {
    /// Whether the field can be a length or a count (the values hostile frames lie about).
    pub fn is_length_like(&self) -> bool {
        matches!(
            self.kind,
            FieldKind::Varint | FieldKind::I16 | FieldKind::I32
        )
    }
}

/// A `Buf` over a frame's bytes that records the position and width of every read.
pub struct TraceBuf {
    inner: Bytes,
    total: usize,
    offset: usize,
    reads: Vec<Field>,
}

impl TraceBuf {
    /// Traces `bytes`, whose first byte is at position `offset` of the frame.
    pub fn new(bytes: Bytes, offset: usize) -> TraceBuf {
        TraceBuf {
            total: bytes.len(),
            inner: bytes,
            offset,
            reads: Vec::new(),
        }
    }

    fn pos(&self) -> usize {
        self.offset + self.total - self.inner.remaining()
    }

    fn record(&mut self, len: usize, kind: FieldKind) {
        let pos = self.pos();
        self.reads.push(Field { pos, len, kind });
    }

    /// The fields read so far, with each varint's bytes merged into one field.
    pub fn fields(&self, frame: &[u8]) -> Vec<Field> {
        let mut out: Vec<Field> = Vec::with_capacity(self.reads.len());
        for f in &self.reads {
            if let Some(last) = out.last_mut() {
                let continues = last.kind == FieldKind::Varint
                    && f.kind == FieldKind::Varint
                    && last.pos + last.len == f.pos
                    && frame[f.pos - 1] & 0x80 != 0;
                if continues {
                    last.len += 1;
                    continue;
                }
            }
            out.push(*f);
        }
        out
    }
}

/// Records a fixed-width read, then delegates to the inner buffer.
macro_rules! traced {
    ($($name:ident -> $t:ty, $kind:ident;)*) => {
        $(
            fn $name(&mut self) -> Result<$t, bytes::TryGetError> {
                self.record(std::mem::size_of::<$t>(), FieldKind::$kind);
                self.inner.$name()
            }
        )*
    };
}

impl Buf for TraceBuf {
    fn remaining(&self) -> usize {
        self.inner.remaining()
    }
    fn chunk(&self) -> &[u8] {
        self.inner.chunk()
    }
    fn advance(&mut self, cnt: usize) {
        self.inner.advance(cnt)
    }
    fn try_copy_to_slice(&mut self, dst: &mut [u8]) -> Result<(), bytes::TryGetError> {
        self.record(dst.len(), FieldKind::Region);
        self.inner.try_copy_to_slice(dst)
    }
    traced! {
        try_get_u8 -> u8, Varint;
        try_get_i8 -> i8, I8;
        try_get_i16 -> i16, I16;
        try_get_u16 -> u16, I16;
        try_get_i32 -> i32, I32;
        try_get_u32 -> u32, I32;
        try_get_i64 -> i64, I64;
        try_get_u64 -> u64, I64;
        try_get_f64 -> f64, I64;
    }
}

impl ByteBuf for TraceBuf {
    fn peek_bytes(&mut self, r: std::ops::Range<usize>) -> Bytes {
        self.inner.slice(r)
    }
    fn get_bytes(&mut self, size: usize) -> Bytes {
        self.record(size, FieldKind::Region);
        self.inner.split_to(size)
    }
    fn try_get_bytes(&mut self, size: usize) -> Result<Bytes, NotEnoughBytesError> {
        if self.inner.remaining() < size {
            return Err(NotEnoughBytesError);
        }
        Ok(self.get_bytes(size))
    }
}

impl TraceBuf {
    /// Bytes not read yet.
    pub fn remaining_bytes(&self) -> usize {
        self.inner.remaining()
    }
}
