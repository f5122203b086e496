//! Client quotas in the metadata log (Kafka's `ClientQuotaControlManager`): AlterClientQuotas
//! validated against the image and turned into `ClientQuota` records, one per changed key, and
//! the filter DescribeClientQuotas matches entities with (Kafka's `ClientQuotasImage.describe`).
//!
//! An entity maps entity types (`user`, `client-id`, `ip`) to a name, `None` for the type's
//! default. Quota values are doubles, as Kafka stores them (`ClientQuotaRecord.Value`).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};

use crate::image::{MetadataImage, MetadataRecord};
use crate::request::{ControllerReply, ControllerResult};

/// Kafka's `ClientQuotaEntity.USER`.
pub const ENTITY_USER: &str = "user";
/// Kafka's `ClientQuotaEntity.CLIENT_ID`.
pub const ENTITY_CLIENT_ID: &str = "client-id";
/// Kafka's `ClientQuotaEntity.IP`.
pub const ENTITY_IP: &str = "ip";

/// Kafka's `QuotaConfig` keys.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// A quota entity: entity type → name, `None` for the default (Kafka's `ClientQuotaEntity`).
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// A quota value, a double as Kafka's; stored by its bits so that the image (and its JSON)
/// holds exactly the value the request carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaValue {
    bits: u64,
}

impl QuotaValue {
    pub fn new(v: f64) -> QuotaValue {
        QuotaValue { bits: v.to_bits() }
    }

    pub fn get(self) -> f64 {
        f64::from_bits(self.bits)
    }
}

/// The config type of a quota key (Kafka's `ConfigDef.Type` of `QuotaConfig`'s definitions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyType {
    Long,
    Int,
    Double,
}

/// `QuotaConfig.userAndClientQuotaConfigs`.
const USER_AND_CLIENT_KEYS: &[(&str, KeyType)] = &[
    (PRODUCER_BYTE_RATE, KeyType::Long),
    (CONSUMER_BYTE_RATE, KeyType::Long),
    (REQUEST_PERCENTAGE, KeyType::Double),
    (CONTROLLER_MUTATION_RATE, KeyType::Double),
];

/// `QuotaConfig.ipConfigs`.
const IP_KEYS: &[(&str, KeyType)] = &[(CONNECTION_CREATION_RATE, KeyType::Int)];

/// One entry of AlterClientQuotas: the entity and its key changes (`None`: remove).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub ops: Vec<(String, Option<QuotaValue>)>,
}

// f64 bits compare exactly, so the alteration is Eq like every controller request.
impl Eq for QuotaAlteration {}

/// One entity's result: error code and message (`None` on success).
pub type QuotaResult = (QuotaEntity, i16, Option<String>);

type ApiError = (i16, String);

fn invalid(message: impl Into<String>) -> ApiError {
    (ResponseError::InvalidRequest.code(), message.into())
}

/// How Kafka prints a `ClientQuotaEntity` in its messages.
fn entity_string(entity: &QuotaEntity) -> String {
    let parts: Vec<String> = entity
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", parts.join(", "))
}

/// Kafka's `ClientQuotaControlManager.alterClientQuotas`: a duplicate key or a repeated
/// entity fails that entity; the others are validated one by one and their changed keys
/// recorded.
pub fn alter_client_quotas(
    image: &MetadataImage,
    alterations: &[QuotaAlteration],
) -> ControllerResult {
    let mut records = Vec::new();
    let mut results: BTreeMap<QuotaEntity, Option<ApiError>> = BTreeMap::new();
    for alteration in alterations {
        let mut changes: BTreeMap<&str, Option<f64>> = BTreeMap::new();
        let mut duplicate_key = false;
        for (key, value) in &alteration.ops {
            if changes.contains_key(key.as_str()) {
                duplicate_key = true;
            } else {
                changes.insert(key, value.map(QuotaValue::get));
            }
        }
        let entity = &alteration.entity;
        if duplicate_key || results.contains_key(entity) {
            let message = format!("Ignoring duplicate entity {}", entity_string(entity));
            results.insert(entity.clone(), Some(invalid(message)));
            continue;
        }
        let outcome = alter_entity(image, entity, &changes).map(|r| records.extend(r));
        results.insert(entity.clone(), outcome.err());
    }
    let results: Vec<QuotaResult> = results
        .into_iter()
        .map(|(entity, e)| match e {
            None => (entity, 0, None),
            Some((code, message)) => (entity, code, Some(message)),
        })
        .collect();
    (records, ControllerReply::ClientQuotaResults(results))
}

/// Kafka's `alterClientQuotaEntity`: the records of one entity's changes, or its error.
fn alter_entity(
    image: &MetadataImage,
    entity: &QuotaEntity,
    changes: &BTreeMap<&str, Option<f64>>,
) -> Result<Vec<MetadataRecord>, ApiError> {
    validate_entity(entity)?;
    let keys = keys_for_entity(entity)?;
    let current = image.client_quotas.get(entity);
    let mut records = Vec::new();
    for (key, value) in changes {
        let now = current.and_then(|q| q.get(*key)).copied();
        match value {
            // Removing a key that is not set records nothing.
            None if now.is_some() => records.push(MetadataRecord::ClientQuota {
                entity: entity.clone(),
                key: key.to_string(),
                value: None,
            }),
            None => {}
            Some(v) => {
                validate_value(keys, key, *v)?;
                let v = QuotaValue::new(*v);
                // Only a changed value is recorded.
                if now != Some(v) {
                    records.push(MetadataRecord::ClientQuota {
                        entity: entity.clone(),
                        key: key.to_string(),
                        value: Some(v),
                    });
                }
            }
        }
    }
    Ok(records)
}

/// Kafka's `validateEntity`: known entity types with non-empty names.
fn validate_entity(entity: &QuotaEntity) -> Result<(), ApiError> {
    if entity.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    for (entity_type, name) in entity {
        if ![ENTITY_USER, ENTITY_CLIENT_ID, ENTITY_IP].contains(&entity_type.as_str()) {
            return Err(invalid(format!(
                "Unhandled client quota entity type: {entity_type}"
            )));
        }
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {entity_type} not supported")));
        }
    }
    Ok(())
}

/// Kafka's `configKeysForEntityType`: which keys the entity's combination of types takes.
fn keys_for_entity(entity: &QuotaEntity) -> Result<&'static [(&'static str, KeyType)], ApiError> {
    let has_user_or_client =
        entity.contains_key(ENTITY_USER) || entity.contains_key(ENTITY_CLIENT_ID);
    match entity.get(ENTITY_IP) {
        Some(_) if has_user_or_client => Err(invalid(
            "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
        )),
        // Kafka also accepts a host name it can resolve; the controller decides without the
        // network, so only an IP literal (or the default) is valid here.
        Some(Some(ip)) if ip.parse::<core::net::IpAddr>().is_err() => Err(invalid(format!(
            "{ip} is not a valid IP or resolvable host."
        ))),
        Some(_) => Ok(IP_KEYS),
        None if has_user_or_client => Ok(USER_AND_CLIENT_KEYS),
        None => Err(invalid("Invalid empty client quota entity")),
    }
}

/// Kafka's `validateQuotaKeyValue`: a known key, a positive value, integral and in range for
/// an integral key.
fn validate_value(keys: &[(&str, KeyType)], key: &str, value: f64) -> Result<(), ApiError> {
    let Some((_, key_type)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    // NaN is not greater than 0 either.
    if value.is_nan() || value <= 0.0 {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    let fractional = || (value % 1.0).abs() > 1e-6;
    match key_type {
        KeyType::Double => Ok(()),
        KeyType::Int if value > i32::MAX as f64 => Err(invalid(format!(
            "Proposed value for {key} is too large for an INT."
        ))),
        KeyType::Long if value > i64::MAX as f64 => Err(invalid(format!(
            "Proposed value for {key} is too large for a LONG."
        ))),
        _ if fractional() => Err(invalid(format!("{key} cannot be a fractional value."))),
        _ => Ok(()),
    }
}

/// DescribeClientQuotas' filter (Kafka's `ClientQuotasImage.describe`): types matched
/// exactly (a name, or `None` for the default) and types that must merely be present.
#[derive(Debug, Default)]
pub struct QuotaFilter {
    exact: BTreeMap<String, Option<String>>,
    specified: BTreeSet<String>,
    strict: bool,
}

/// `DescribeClientQuotasRequest`'s match types.
pub const MATCH_TYPE_EXACT: i8 = 0;
pub const MATCH_TYPE_DEFAULT: i8 = 1;
pub const MATCH_TYPE_SPECIFIED: i8 = 2;

impl QuotaFilter {
    /// Builds the filter from the request's components (type, match type, match), refusing
    /// what Kafka refuses: INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown type.
    pub fn new(
        components: &[(String, i8, Option<String>)],
        strict: bool,
    ) -> Result<Self, ApiError> {
        let mut f = QuotaFilter {
            strict,
            ..QuotaFilter::default()
        };
        for (entity_type, match_type, name) in components {
            if entity_type.is_empty() {
                return Err(invalid("Invalid empty entity type."));
            }
            if f.exact.contains_key(entity_type) || f.specified.contains(entity_type) {
                return Err(invalid(format!(
                    "Entity type {entity_type} cannot appear more than once in the filter."
                )));
            }
            if ![ENTITY_IP, ENTITY_USER, ENTITY_CLIENT_ID].contains(&entity_type.as_str()) {
                return Err((
                    ResponseError::UnsupportedVersion.code(),
                    format!("Unsupported entity type {entity_type}"),
                ));
            }
            f.add(entity_type, *match_type, name)?;
        }
        let has = |t: &str| f.exact.contains_key(t) || f.specified.contains(t);
        if has(ENTITY_IP) && (has(ENTITY_USER) || has(ENTITY_CLIENT_ID)) {
            return Err(invalid(
                "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.",
            ));
        }
        Ok(f)
    }

    fn add(
        &mut self,
        entity_type: &str,
        match_type: i8,
        name: &Option<String>,
    ) -> Result<(), ApiError> {
        match (match_type, name) {
            (MATCH_TYPE_EXACT, None) => Err(invalid(
                "Request specified MATCH_TYPE_EXACT, but set match string to null.",
            )),
            (MATCH_TYPE_EXACT, Some(n)) => {
                self.exact.insert(entity_type.to_string(), Some(n.clone()));
                Ok(())
            }
            (MATCH_TYPE_DEFAULT, Some(_)) => Err(invalid(
                "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
            )),
            (MATCH_TYPE_DEFAULT, None) => {
                self.exact.insert(entity_type.to_string(), None);
                Ok(())
            }
            (MATCH_TYPE_SPECIFIED, Some(_)) => Err(invalid(
                "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
            )),
            (MATCH_TYPE_SPECIFIED, None) => {
                self.specified.insert(entity_type.to_string());
                Ok(())
            }
            (other, _) => Err(invalid(format!("Unknown match type {other}"))),
        }
    }

    /// Kafka's `ClientQuotasImage.matches`.
    pub fn matches(&self, entity: &QuotaEntity) -> bool {
        if self.strict && entity.len() != self.exact.len() + self.specified.len() {
            return false;
        }
        self.exact.iter().all(|(t, n)| entity.get(t) == Some(n))
            && self.specified.iter().all(|t| entity.contains_key(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(pairs: &[(&str, Option<&str>)]) -> QuotaEntity {
        pairs
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
            .collect()
    }

    fn alter(
        image: &MetadataImage,
        e: QuotaEntity,
        ops: &[(&str, Option<f64>)],
    ) -> ControllerResult {
        let ops = ops
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(QuotaValue::new)))
            .collect();
        alter_client_quotas(image, &[QuotaAlteration { entity: e, ops }])
    }

    fn error_of(r: &ControllerResult) -> Option<String> {
        match &r.1 {
            ControllerReply::ClientQuotaResults(v) => v[0].2.clone(),
            _ => panic!("unexpected reply"),
        }
    }

    #[test]
    fn values_are_validated_as_kafka_does() {
        let image = MetadataImage::default();
        let user = entity(&[("user", Some("alice"))]);
        let cases: &[(&str, f64, &str)] = &[
            ("bogus", 1.0, "Invalid configuration key bogus"),
            (
                PRODUCER_BYTE_RATE,
                0.0,
                "Quota producer_byte_rate must be greater than 0",
            ),
            (
                PRODUCER_BYTE_RATE,
                1.5,
                "producer_byte_rate cannot be a fractional value.",
            ),
        ];
        for (key, value, message) in cases {
            let r = alter(&image, user.clone(), &[(key, Some(*value))]);
            assert_eq!(error_of(&r).as_deref(), Some(*message));
            assert!(r.0.is_empty());
        }
        let ok = alter(&image, user, &[(REQUEST_PERCENTAGE, Some(12.5))]);
        assert_eq!(error_of(&ok), None);
        assert_eq!(ok.0.len(), 1);
    }

    #[test]
    fn entities_are_validated_as_kafka_does() {
        let image = MetadataImage::default();
        let mixed = entity(&[("user", None), ("ip", Some("1.2.3.4"))]);
        assert!(error_of(&alter(&image, mixed, &[])).is_some());
        let unknown = entity(&[("group", Some("g"))]);
        assert_eq!(
            error_of(&alter(&image, unknown, &[])).as_deref(),
            Some("Unhandled client quota entity type: group")
        );
        let ip = entity(&[("ip", Some("10.0.0.1"))]);
        assert_eq!(
            error_of(&alter(&image, ip, &[(CONNECTION_CREATION_RATE, Some(5.0))])),
            None
        );
    }

    #[test]
    fn the_filter_matches_as_kafka_does() {
        let f = QuotaFilter::new(&[("user".into(), MATCH_TYPE_DEFAULT, None)], false).unwrap();
        assert!(f.matches(&entity(&[("user", None)])));
        assert!(f.matches(&entity(&[("user", None), ("client-id", Some("c"))])));
        assert!(!f.matches(&entity(&[("user", Some("u"))])));
        let strict =
            QuotaFilter::new(&[("user".into(), MATCH_TYPE_SPECIFIED, None)], true).unwrap();
        assert!(!strict.matches(&entity(&[("user", None), ("client-id", Some("c"))])));
        assert!(strict.matches(&entity(&[("user", Some("u"))])));
        let bad = QuotaFilter::new(&[("group".into(), MATCH_TYPE_SPECIFIED, None)], false);
        assert_eq!(bad.unwrap_err().0, ResponseError::UnsupportedVersion.code());
    }
}
