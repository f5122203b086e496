//! The little of the protobuf wire format that OTLP metrics need: fields of a message, and
//! a `Metric`'s gauge or sum points (opentelemetry-proto `metrics.proto` and `common.proto`).
//! Every read is bounds-checked; malformed input is `None`.

use super::MetricPoint;

/// One field's value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    Fixed32,
}

fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Every field of a message, in order.
fn fields(mut b: &[u8]) -> Option<Vec<(u64, Value<'_>)>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b)?;
        let value = match key & 7 {
            0 => Value::Varint(varint(&mut b)?),
            1 => {
                let (v, rest) = b.split_at_checked(8)?;
                b = rest;
                Value::Fixed64(u64::from_le_bytes(v.try_into().ok()?))
            }
            2 => {
                let n = usize::try_from(varint(&mut b)?).ok()?;
                let (v, rest) = b.split_at_checked(n)?;
                b = rest;
                Value::Len(v)
            }
            5 => {
                b = b.get(4..)?;
                Value::Fixed32
            }
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    Some(out)
}

/// The embedded messages of field `field`.
pub(super) fn messages(b: &[u8], field: u64) -> Option<Vec<&[u8]>> {
    Some(
        fields(b)?
            .into_iter()
            .filter_map(|(f, v)| match v {
                Value::Len(m) if f == field => Some(m),
                _ => None,
            })
            .collect(),
    )
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A `KeyValue`'s `key=value` (string, bool, int and double values).
fn attribute(b: &[u8]) -> Option<String> {
    let mut key = String::new();
    let mut value = String::new();
    for (f, v) in fields(b)? {
        match (f, v) {
            (1, Value::Len(k)) => key = text(k),
            (2, Value::Len(any)) => {
                for (af, av) in fields(any)? {
                    value = match (af, av) {
                        (1, Value::Len(s)) => text(s),
                        (2, Value::Varint(x)) => (x != 0).to_string(),
                        (3, Value::Varint(x)) => (x as i64).to_string(),
                        (4, Value::Fixed64(x)) => f64::from_bits(x).to_string(),
                        _ => continue,
                    };
                }
            }
            _ => {}
        }
    }
    Some(format!("{key}={value}"))
}

/// A `NumberDataPoint`'s value (`as_double` 4, `as_int` 6) and attributes (7).
fn number_point(name: &str, b: &[u8]) -> Option<MetricPoint> {
    let mut value = 0.0;
    let mut attributes = Vec::new();
    for (f, v) in fields(b)? {
        match (f, v) {
            (4, Value::Fixed64(x)) => value = f64::from_bits(x),
            (6, Value::Fixed64(x)) => value = x as i64 as f64,
            (7, Value::Len(kv)) => attributes.push(attribute(kv)?),
            _ => {}
        }
    }
    Some(MetricPoint {
        name: name.to_string(),
        attributes: attributes.join(","),
        value,
    })
}

/// A `Metric`'s points: its name (1) and the data points (1) of its gauge (5) or sum (7);
/// histograms and summaries are skipped (Kafka's clients send none).
pub(super) fn metric(b: &[u8], out: &mut Vec<MetricPoint>) -> Option<()> {
    let all = fields(b)?;
    let name = all.iter().find_map(|(f, v)| match (f, v) {
        (1, Value::Len(n)) => Some(text(n)),
        _ => None,
    })?;
    for (f, v) in &all {
        if let (5 | 7, Value::Len(data)) = (f, v) {
            for p in messages(data, 1)? {
                out.push(number_point(&name, p)?);
            }
        }
    }
    Some(())
}
