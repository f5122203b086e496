//! Kafka's error names (`Errors.name()`): the table between an error code and the name Kafka
//! prints, used by the metrics' labels, the fault engine's rules and the transaction
//! coordinator's messages. It imports nothing of the crate, so every module can use it.

use kafka_protocol::ResponseError;

/// The `error` label of codes `ResponseError` does not know (bounded: one label value).
pub const UNKNOWN_ERROR_CODE: i16 = i16::MIN;

/// Kafka's name of an error (`Errors.name()`, e.g. `UNKNOWN_TOPIC_OR_PARTITION`), derived
/// from the typed `ResponseError` variant.
pub fn error_name(code: i16) -> String {
    let Some(e) = ResponseError::try_from_code(code)
        .filter(|e| code != UNKNOWN_ERROR_CODE && !matches!(e, ResponseError::Unknown(_)))
    else {
        return if code == 0 {
            "NONE".into()
        } else {
            "UNKNOWN".into()
        };
    };
    let camel = e.to_string();
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Above every code Kafka 4.4 defines (its last is in the 130s): the search bound of
/// [`error_code_by_name`].
const ERROR_CODE_MAX: i16 = 256;

/// The code of Kafka's error `name`, any case (`NOT_ENOUGH_REPLICAS`, `not_leader_or_follower`):
/// the inverse of [`error_name`] over the codes `ResponseError` knows.
pub fn error_code_by_name(name: &str) -> Option<i16> {
    (-1..=ERROR_CODE_MAX).find(|&code| {
        let n = error_name(code);
        n != "UNKNOWN" && n.eq_ignore_ascii_case(name)
    })
}
