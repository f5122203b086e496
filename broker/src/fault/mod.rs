//! Fault injection at the protocol level.
//!
//! A [`FaultRule`] matches requests by API, client id, topic and partition, and fires a set
//! number of times or with a probability drawn from a seeded generator (so a run can be
//! replayed). Its action happens before the request is processed (drop the request, answer an
//! error, close, delay) or after (drop the response — the "lost ack" —, close, delay).
//! Rules are added and removed while the broker runs, through the admin HTTP API, the
//! `brook fault` CLI, or [`FaultEngine`] directly in tests that embed a broker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kafka_protocol::messages::ApiKey;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

/// Bound on the number of rules installed at once.
pub const MAX_FAULT_RULES: usize = 256;
/// Bound on a delay action, so a typo cannot park a connection for a day.
pub const MAX_FAULT_DELAY_MS: u64 = 600_000;

/// Errors in a rule specification; the admin API answers them with 400.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("unknown api {0:?}; use a name like \"produce\" or \"Fetch\", or a numeric key")]
    UnknownApi(String),
    #[error("unknown action {0:?}; expected drop-request, drop-response, delay, error or close")]
    UnknownAction(String),
    #[error("{0}")]
    Invalid(String),
    #[error("at most {MAX_FAULT_RULES} rules can be installed")]
    TooManyRules,
}

/// When a delay or close happens relative to processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum When {
    #[default]
    Before,
    After,
}

/// What a rule does when it fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum FaultAction {
    /// Never processed, never answered.
    DropRequest,
    /// Processed and applied, but the answer never leaves.
    DropResponse,
    /// Wait, then go on.
    Delay { delay_ms: u64, when: When },
    /// Answer this Kafka error code without processing, after `delay_ms` if set (so that
    /// requests pipelined behind this one are already in flight when the error arrives).
    Error {
        error_code: i16,
        delay_ms: Option<u64>,
    },
    /// Close the connection.
    Close { when: When },
}

/// A rule as the admin API and the CLI write it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub action: String,
    /// API name ("produce", "Fetch", "init_producer_id") or numeric key.
    pub api: Option<String>,
    pub node: Option<i32>,
    pub client_id: Option<String>,
    pub topic: Option<String>,
    pub partition: Option<i32>,
    /// Fire at most this many times (default: unlimited when a probability is set, else 1).
    pub times: Option<u64>,
    /// Fire with this probability, drawn from a generator seeded with `seed`.
    pub probability: Option<f64>,
    pub seed: Option<u64>,
    pub delay_ms: Option<u64>,
    pub error_code: Option<i16>,
    pub when: Option<When>,
}

/// An installed rule.
#[derive(Debug, Serialize)]
pub struct FaultRule {
    pub id: u64,
    #[serde(flatten)]
    pub action: FaultAction,
    pub api: Option<String>,
    #[serde(skip)]
    pub api_key: Option<i16>,
    pub node: Option<i32>,
    pub client_id: Option<String>,
    pub topic: Option<String>,
    pub partition: Option<i32>,
    pub times: Option<u64>,
    pub probability: Option<f64>,
    pub seed: Option<u64>,
    /// How often the rule fired.
    #[serde(serialize_with = "ser_atomic")]
    pub fired: AtomicU64,
    #[serde(skip)]
    rng: Mutex<SplitMix64>,
}

fn ser_atomic<S: serde::Serializer>(v: &AtomicU64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(v.load(Ordering::Relaxed))
}

/// A small seeded generator (SplitMix64): enough for fault probabilities, and replayable.
#[derive(Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Parses an API name the way people write it: "produce", "Produce", "init-producer-id",
/// "InitProducerId" or "22".
pub fn parse_api(name: &str) -> Result<i16, FaultError> {
    if let Ok(n) = name.parse::<i16>() {
        return ApiKey::try_from(n)
            .map(|_| n)
            .map_err(|_| FaultError::UnknownApi(name.into()));
    }
    let norm: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    (0..=i16::MAX)
        .take(200)
        .filter_map(|k| ApiKey::try_from(k).ok().map(|a| (k, a)))
        .find(|(_, a)| format!("{a:?}").to_ascii_lowercase() == norm)
        .map(|(k, _)| k)
        .ok_or_else(|| FaultError::UnknownApi(name.into()))
}

impl FaultRule {
    fn from_spec(id: u64, spec: FaultSpec) -> Result<FaultRule, FaultError> {
        let when = spec.when.unwrap_or_default();
        let action = match spec.action.as_str() {
            "drop-request" | "drop_request" => FaultAction::DropRequest,
            "drop-response" | "drop_response" => FaultAction::DropResponse,
            "delay" => {
                let delay_ms = spec
                    .delay_ms
                    .ok_or_else(|| FaultError::Invalid("delay needs delay_ms".into()))?;
                if delay_ms > MAX_FAULT_DELAY_MS {
                    return Err(FaultError::Invalid(format!(
                        "delay_ms is capped at {MAX_FAULT_DELAY_MS}"
                    )));
                }
                FaultAction::Delay { delay_ms, when }
            }
            "error" => FaultAction::Error {
                error_code: spec
                    .error_code
                    .ok_or_else(|| FaultError::Invalid("error needs error_code".into()))?,
                delay_ms: spec.delay_ms,
            },
            "close" => FaultAction::Close { when },
            other => return Err(FaultError::UnknownAction(other.into())),
        };
        if spec.delay_ms.is_some_and(|d| d > MAX_FAULT_DELAY_MS) {
            return Err(FaultError::Invalid(format!(
                "delay_ms is capped at {MAX_FAULT_DELAY_MS}"
            )));
        }
        if let Some(p) = spec.probability {
            if !(0.0..=1.0).contains(&p) {
                return Err(FaultError::Invalid(format!(
                    "probability {p} is outside 0..=1"
                )));
            }
        }
        let api_key = spec.api.as_deref().map(parse_api).transpose()?;
        let times = match (spec.times, spec.probability) {
            (Some(t), _) => Some(t),
            (None, Some(_)) => None,
            (None, None) => Some(1),
        };
        Ok(FaultRule {
            id,
            action,
            api: spec.api,
            api_key,
            node: spec.node,
            client_id: spec.client_id,
            topic: spec.topic,
            partition: spec.partition,
            times,
            probability: spec.probability,
            seed: spec.seed,
            fired: AtomicU64::new(0),
            rng: Mutex::new(SplitMix64(spec.seed.unwrap_or(id))),
        })
    }

    fn matches(&self, node: i32, req: &RequestFacts) -> bool {
        self.node.is_none_or(|n| n == node)
            && self.api_key.is_none_or(|k| k == req.api_key)
            && self
                .client_id
                .as_ref()
                .is_none_or(|c| req.client_id.as_deref() == Some(c.as_str()))
            && self
                .topic
                .as_ref()
                .is_none_or(|t| req.partitions.iter().any(|(rt, _)| rt == t))
            && self.partition.is_none_or(|p| {
                req.partitions
                    .iter()
                    .any(|(rt, rp)| *rp == p && self.topic.as_ref().is_none_or(|t| t == rt))
            })
    }

    /// Decides whether this rule fires for one matching request, and counts it.
    fn try_fire(&self) -> bool {
        if let Some(p) = self.probability {
            if self.rng.lock().next_f64() >= p {
                return false;
            }
        }
        let limit = self.times.unwrap_or(u64::MAX);
        self.fired
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                if n < limit {
                    Some(n + 1)
                } else {
                    None
                }
            })
            .is_ok()
    }
}

/// What the connection knows about a request when it asks the engine.
#[derive(Debug, Default)]
pub struct RequestFacts {
    pub api_key: i16,
    pub client_id: Option<String>,
    /// (topic, partition) pairs the request touches, where the API names any.
    pub partitions: Vec<(String, i32)>,
}

/// The installed rules of one node.
#[derive(Debug)]
pub struct FaultEngine {
    node_id: i32,
    rules: RwLock<Vec<Arc<FaultRule>>>,
    next_id: AtomicU64,
}

impl FaultEngine {
    /// An engine with no rules.
    pub fn new(node_id: i32) -> Self {
        FaultEngine {
            node_id,
            rules: RwLock::new(Vec::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// Installs a rule; returns its id.
    pub fn add(&self, spec: FaultSpec) -> Result<u64, FaultError> {
        // Validate before taking an id, so refused rules leave no gaps in the numbering.
        let mut rule = FaultRule::from_spec(0, spec)?;
        let mut rules = self.rules.write();
        if rules.len() >= MAX_FAULT_RULES {
            return Err(FaultError::TooManyRules);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        rule.id = id;
        if rule.seed.is_none() {
            rule.rng = Mutex::new(SplitMix64(id));
        }
        rules.push(Arc::new(rule));
        Ok(id)
    }

    /// The installed rules.
    pub fn list(&self) -> Vec<Arc<FaultRule>> {
        self.rules.read().clone()
    }

    /// Removes one rule (`Some(id)`) or all; returns how many were removed.
    pub fn clear(&self, id: Option<u64>) -> usize {
        let mut rules = self.rules.write();
        let before = rules.len();
        match id {
            Some(id) => rules.retain(|r| r.id != id),
            None => rules.clear(),
        }
        before - rules.len()
    }

    /// True when no rule is installed: the hot path checks this and skips everything else.
    pub fn is_empty(&self) -> bool {
        self.rules.read().is_empty()
    }

    /// The first rule that matches and fires for this request, if any.
    pub fn decide(&self, req: &RequestFacts) -> Option<FaultAction> {
        let rules = self.rules.read();
        for r in rules.iter() {
            if r.matches(self.node_id, req) && r.try_fire() {
                tracing::info!(rule = r.id, action = ?r.action, api = req.api_key, "fault fired");
                return Some(r.action.clone());
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(action: &str) -> FaultSpec {
        FaultSpec {
            action: action.into(),
            api: Some("produce".into()),
            ..Default::default()
        }
    }

    fn produce(topic: &str, p: i32) -> RequestFacts {
        RequestFacts {
            api_key: 0,
            client_id: Some("c".into()),
            partitions: vec![(topic.into(), p)],
        }
    }

    #[test]
    fn api_names() {
        assert_eq!(parse_api("produce").unwrap(), 0);
        assert_eq!(parse_api("InitProducerId").unwrap(), 22);
        assert_eq!(parse_api("init-producer-id").unwrap(), 22);
        assert_eq!(parse_api("1").unwrap(), 1);
        assert!(parse_api("nope").is_err());
    }

    #[test]
    fn fires_the_set_number_of_times() {
        let e = FaultEngine::new(1);
        e.add(FaultSpec {
            times: Some(2),
            ..spec("drop-response")
        })
        .unwrap();
        assert_eq!(e.decide(&produce("t", 0)), Some(FaultAction::DropResponse));
        assert_eq!(e.decide(&produce("t", 0)), Some(FaultAction::DropResponse));
        assert_eq!(e.decide(&produce("t", 0)), None);
        assert_eq!(e.list()[0].fired.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn matches_topic_partition_and_api() {
        let e = FaultEngine::new(1);
        e.add(FaultSpec {
            topic: Some("a".into()),
            partition: Some(1),
            ..spec("drop-request")
        })
        .unwrap();
        assert_eq!(e.decide(&produce("b", 1)), None);
        assert_eq!(e.decide(&produce("a", 0)), None);
        assert_eq!(
            e.decide(&RequestFacts {
                api_key: 1,
                partitions: vec![("a".into(), 1)],
                ..Default::default()
            }),
            None
        );
        assert_eq!(e.decide(&produce("a", 1)), Some(FaultAction::DropRequest));
    }

    #[test]
    fn seeded_probability_replays() {
        let run = || {
            let e = FaultEngine::new(1);
            e.add(FaultSpec {
                probability: Some(0.5),
                seed: Some(42),
                ..spec("close")
            })
            .unwrap();
            (0..64)
                .map(|_| e.decide(&produce("t", 0)).is_some())
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        assert!(a.iter().any(|f| *f) && a.iter().any(|f| !*f));
    }

    #[test]
    fn bad_specs_are_refused() {
        let e = FaultEngine::new(1);
        assert!(matches!(
            e.add(spec("explode")),
            Err(FaultError::UnknownAction(_))
        ));
        assert!(matches!(
            e.add(FaultSpec {
                api: Some("nope".into()),
                ..spec("close")
            }),
            Err(FaultError::UnknownApi(_))
        ));
        assert!(e.add(spec("delay")).is_err());
        assert!(e.add(spec("error")).is_err());
        assert!(e
            .add(FaultSpec {
                probability: Some(2.0),
                ..spec("close")
            })
            .is_err());
        assert!(e.is_empty());
        let id = e.add(spec("close")).unwrap();
        assert_eq!(id, 1, "refused rules take no id");
        assert_eq!(e.clear(Some(id)), 1);
    }
}
