//! Kafka's textual forms of the names the metadata records carry: topic names (Kafka's
//! `Topic.validate`) and uuids as Kafka prints them (`Uuid.toString`, `Uuid.fromString`), as
//! directory ids appear in Kafka's messages and `meta.properties`.

use uuid::Uuid;

/// A uuid as Kafka's `Uuid.toString` writes it (URL-safe base64 without padding), as
/// directory ids appear in Kafka's messages and `meta.properties`.
pub fn kafka_uuid_string(id: Uuid) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.into_bytes())
}

/// A uuid in Kafka's `Uuid.toString` form, as `Uuid.fromString` reads it (URL-safe base64
/// of 16 bytes); `None` if it is not one.
pub fn parse_kafka_uuid(s: &str) -> Option<Uuid> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim().trim_end_matches('='))
        .ok()?;
    <[u8; 16]>::try_from(bytes.as_slice())
        .ok()
        .map(Uuid::from_bytes)
}

/// Kafka's topic name rule: 1-249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name {name:?} is not allowed"));
    }
    if name.len() > 249 {
        return Err(format!(
            "topic name is {} characters long, the limit is 249",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name {name:?} contains {c:?}; only [a-zA-Z0-9._-] are allowed"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names() {
        assert!(validate_topic_name("orders.v1_x-y").is_ok());
        assert!(validate_topic_name("bad/name").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
    }

    #[test]
    fn uuids_read_back_as_kafka_writes_them() {
        let id = Uuid::from_bytes([7; 16]);
        assert_eq!(parse_kafka_uuid(&kafka_uuid_string(id)), Some(id));
        assert_eq!(kafka_uuid_string(Uuid::nil()), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(parse_kafka_uuid("not-a-uuid"), None);
    }
}
