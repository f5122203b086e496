//! Mutations of a valid frame, aimed at its fields: lengths and counts that lie, varints
//! that never end, tagged fields that claim more than is there, cuts at field boundaries,
//! swapped api keys and versions, and flipped bits.

use proptest::prelude::*;
use proptest::sample::Index;

use crate::trace::{Field, FieldKind};

/// A value a hostile frame puts in a length or count field.
#[derive(Debug, Clone, Copy)]
pub enum Evil {
    /// The type's largest value (i16::MAX, i32::MAX, 0xFFFFFFFF for a varint).
    Max,
    /// One below it: 0xFFFFFFFE claimed entries in a compact array.
    Huge,
    /// The type's smallest value.
    Min,
    /// -1 (null, for nullable strings and arrays; 0 for a compact varint).
    MinusOne,
    /// -2, below null.
    MinusTwo,
    Zero,
    /// The true value plus or minus one.
    OffByOne(bool),
    Random(u32),
}

/// A varint written in a form the encoder never produces.
#[derive(Debug, Clone, Copy)]
pub enum VarintForm {
    /// The same value padded with continuation bytes to five bytes.
    Overlong,
    /// Continuation bytes with no end.
    Unterminated(u8),
    /// Five bytes whose last one carries bits beyond 32.
    TooWide,
}

/// One change to a frame. Field and position selectors resolve against the frame's traced
/// fields when the mutation is applied.
#[derive(Debug, Clone)]
pub enum Mutation {
    Length {
        field: Index,
        value: Evil,
    },
    Varint {
        field: Index,
        form: VarintForm,
    },
    /// Cuts the frame at a field's start plus `delta` bytes.
    Truncate {
        field: Index,
        delta: i8,
    },
    /// Another served API's key on this body, or an unknown key.
    ApiKey {
        key: Index,
        unknown: Option<i16>,
    },
    /// A version around the served range, or any i16.
    Version {
        near: i8,
        raw: Option<i16>,
    },
    Flip {
        pos: Index,
        bit: u8,
    },
    /// Replaces the body's last tagged-field count with `count` fields, the first with `tag`
    /// and a size of `size` (followed by at most a few real bytes).
    Tagged {
        count: u32,
        tag: u32,
        size: u32,
    },
    /// Trailing bytes after the body.
    Append(Vec<u8>),
}

fn evil() -> impl Strategy<Value = Evil> {
    prop_oneof![
        3 => Just(Evil::Max),
        3 => Just(Evil::Huge),
        1 => Just(Evil::Min),
        2 => Just(Evil::MinusOne),
        1 => Just(Evil::MinusTwo),
        1 => Just(Evil::Zero),
        2 => any::<bool>().prop_map(Evil::OffByOne),
        2 => any::<u32>().prop_map(Evil::Random),
    ]
}

/// Any one mutation.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        6 => (any::<Index>(), evil()).prop_map(|(field, value)| Mutation::Length { field, value }),
        2 => (any::<Index>(), prop_oneof![
                Just(VarintForm::Overlong),
                (6u8..16).prop_map(VarintForm::Unterminated),
                Just(VarintForm::TooWide),
            ]).prop_map(|(field, form)| Mutation::Varint { field, form }),
        3 => (any::<Index>(), -2i8..=2).prop_map(|(field, delta)| Mutation::Truncate { field, delta }),
        1 => (any::<Index>(), proptest::option::weighted(0.2, any::<i16>()))
            .prop_map(|(key, unknown)| Mutation::ApiKey { key, unknown }),
        1 => (-3i8..=3, proptest::option::weighted(0.2, any::<i16>()))
            .prop_map(|(near, raw)| Mutation::Version { near, raw }),
        2 => (any::<Index>(), 0u8..8).prop_map(|(pos, bit)| Mutation::Flip { pos, bit }),
        1 => (
            prop_oneof![Just(1u32), Just(2), Just(u32::MAX), any::<u32>()],
            prop_oneof![0u32..4, any::<u32>()],
            prop_oneof![Just(u32::MAX), Just(u32::MAX - 1), 0u32..64, any::<u32>()],
        )
            .prop_map(|(count, tag, size)| Mutation::Tagged { count, tag, size }),
        1 => proptest::collection::vec(any::<u8>(), 1..16).prop_map(Mutation::Append),
    ]
}

/// Unsigned varint encoding, as Kafka writes it.
pub fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_uvarint(b: &[u8]) -> u32 {
    let mut v = 0u32;
    for (i, byte) in b.iter().take(5).enumerate() {
        v |= ((byte & 0x7f) as u32) << (7 * i);
        if byte & 0x80 == 0 {
            break;
        }
    }
    v
}

/// `value` for a signed field of `min..=max` whose true value is `cur`.
fn signed(value: Evil, cur: i64, min: i64, max: i64) -> i64 {
    match value {
        Evil::Max => max,
        Evil::Huge => max - 1,
        Evil::Min => min,
        Evil::MinusOne => -1,
        Evil::MinusTwo => -2,
        Evil::Zero => 0,
        Evil::OffByOne(true) => cur + 1,
        Evil::OffByOne(false) => cur - 1,
        Evil::Random(r) => r as i64,
    }
}

/// The bytes a length-like field gets for `value`.
pub fn evil_bytes(frame: &[u8], f: &Field, value: Evil) -> Vec<u8> {
    let old = &frame[f.pos..f.pos + f.len];
    match f.kind {
        FieldKind::I16 => {
            let cur = i16::from_be_bytes([old[0], old[1]]) as i64;
            (signed(value, cur, i16::MIN as i64, i16::MAX as i64) as i16)
                .to_be_bytes()
                .to_vec()
        }
        FieldKind::I32 => {
            let cur = i32::from_be_bytes(old.try_into().unwrap()) as i64;
            (signed(value, cur, i32::MIN as i64, i32::MAX as i64) as i32)
                .to_be_bytes()
                .to_vec()
        }
        _ => {
            let cur = read_uvarint(old);
            let v = match value {
                Evil::Max => u32::MAX,
                Evil::Huge => u32::MAX - 1,
                Evil::Min => 1 << 31,
                Evil::MinusOne | Evil::Zero => 0,
                Evil::MinusTwo => u32::MAX - 2,
                Evil::OffByOne(up) => {
                    if up {
                        cur.wrapping_add(1)
                    } else {
                        cur.wrapping_sub(1)
                    }
                }
                Evil::Random(r) => r,
            };
            let mut out = Vec::new();
            put_uvarint(&mut out, v);
            out
        }
    }
}

fn varint_form_bytes(frame: &[u8], f: &Field, form: VarintForm) -> Vec<u8> {
    match form {
        VarintForm::Overlong => {
            let v = read_uvarint(&frame[f.pos..f.pos + f.len]);
            let mut out: Vec<u8> = (0..4)
                .map(|i| ((v >> (7 * i)) as u8 & 0x7f) | 0x80)
                .collect();
            out.push((v >> 28) as u8 & 0x0f);
            out
        }
        VarintForm::Unterminated(n) => vec![0xff; n as usize],
        VarintForm::TooWide => vec![0xff, 0xff, 0xff, 0xff, 0x7f],
    }
}

/// A mutation resolved to a byte range of the frame and what replaces it.
struct Edit {
    pos: usize,
    len: usize,
    with: Vec<u8>,
    truncate: bool,
}

/// Context a mutation needs besides the frame.
pub struct Target<'a> {
    pub fields: &'a [Field],
    pub flexible: bool,
    pub keys: &'a [i16],
    pub versions: (i16, i16),
}

/// Applies `mutations` to `frame` (header and body, no size prefix).
pub fn apply(frame: &mut Vec<u8>, t: &Target, mutations: &[Mutation]) {
    let lengths: Vec<&Field> = t.fields.iter().filter(|f| f.is_length_like()).collect();
    let varints: Vec<&Field> = t
        .fields
        .iter()
        .filter(|f| f.kind == FieldKind::Varint)
        .collect();
    let mut edits = Vec::new();
    let mut prefix: Vec<(usize, [u8; 2])> = Vec::new();
    for m in mutations {
        match m {
            Mutation::ApiKey { .. } | Mutation::Version { .. } => prefix.extend(header_patch(t, m)),
            _ => edits.extend(body_edit(frame, t, m, &lengths, &varints)),
        }
    }
    splice_edits(frame, edits);
    for (at, bytes) in prefix {
        if frame.len() >= at + 2 {
            frame[at..at + 2].copy_from_slice(&bytes);
        }
    }
}

/// A header mutation as the bytes written over the request header at an offset: the API
/// key (offset 0) or the API version (offset 2).
fn header_patch(t: &Target, m: &Mutation) -> Option<(usize, [u8; 2])> {
    match m {
        Mutation::ApiKey { key, unknown } => {
            let k = unknown.unwrap_or_else(|| *key.get(t.keys));
            Some((0, k.to_be_bytes()))
        }
        Mutation::Version { near, raw } => {
            let v = raw.unwrap_or_else(|| {
                let base = if *near < 0 {
                    t.versions.0
                } else {
                    t.versions.1
                };
                base.saturating_add(*near as i16)
            });
            Some((2, v.to_be_bytes()))
        }
        _ => None,
    }
}

/// A mutation of the frame's bytes resolved to its edit on the traced fields; `None` when
/// the frame has no field of the kind it needs.
fn body_edit(
    frame: &[u8],
    t: &Target,
    m: &Mutation,
    lengths: &[&Field],
    varints: &[&Field],
) -> Option<Edit> {
    let replace = |pos: usize, len: usize, with: Vec<u8>| Edit {
        pos,
        len,
        with,
        truncate: false,
    };
    match m {
        Mutation::Length { field, value } if !lengths.is_empty() => {
            let f = field.get(lengths);
            Some(replace(f.pos, f.len, evil_bytes(frame, f, *value)))
        }
        Mutation::Varint { field, form } if !varints.is_empty() => {
            let f = field.get(varints);
            Some(replace(f.pos, f.len, varint_form_bytes(frame, f, *form)))
        }
        Mutation::Truncate { field, delta } if !t.fields.is_empty() => {
            let f = field.get(t.fields);
            let at = (f.pos as i64 + *delta as i64).clamp(0, frame.len() as i64) as usize;
            Some(Edit {
                pos: at,
                len: 0,
                with: vec![],
                truncate: true,
            })
        }
        Mutation::Flip { pos, bit } if !frame.is_empty() => {
            let p = pos.index(frame.len());
            Some(replace(p, 1, vec![frame[p] ^ (1 << bit)]))
        }
        Mutation::Tagged { count, tag, size } if t.flexible && !frame.is_empty() => {
            let mut with = Vec::new();
            put_uvarint(&mut with, *count);
            put_uvarint(&mut with, *tag);
            put_uvarint(&mut with, *size);
            with.extend(std::iter::repeat_n(0x41, (*size).min(8) as usize));
            Some(replace(frame.len() - 1, 1, with))
        }
        Mutation::Append(bytes) => Some(replace(frame.len(), 0, bytes.clone())),
        _ => None,
    }
}

/// Applies the edits to the frame.
fn splice_edits(frame: &mut Vec<u8>, mut edits: Vec<Edit>) {
    // Back to front, so that each edit's position is still the traced one.
    edits.sort_by(|a, b| b.pos.cmp(&a.pos).then(b.truncate.cmp(&a.truncate)));
    let mut end = frame.len();
    for e in edits {
        if e.pos + e.len > end {
            continue;
        }
        if e.truncate {
            frame.truncate(e.pos);
            end = e.pos;
        } else {
            frame.splice(e.pos..e.pos + e.len, e.with);
            end = e.pos;
        }
    }
}
