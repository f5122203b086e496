//! Fault injection at the protocol level.
//!
//! A [`FaultRule`] matches requests by API, client id, topic and partition, and fires a set
//! number of times or with a probability drawn from a seeded generator (so a run can be
//! replayed). Its action happens before the request is processed (drop the request, answer an
//! error, close, delay) or after (drop the response — the "lost ack" —, close, delay).
//! Rules are added and removed while the broker runs, through the admin HTTP API, the
//! `brook fault` CLI, or [`FaultEngine`] directly in tests that embed a broker.
//!
//! Besides these request rules there are two other kinds ([`RuleKind`]):
//! - **crash** rules: the process exits at once, like `kill -9`, when the broker code reaches a
//!   named [`CrashPoint`] for a matching topic and partition ([`FaultEngine::crash_point`]);
//! - **link** rules: traffic between this node and a peer is partitioned or delayed, for
//!   replication, the controller quorum or both, outgoing, incoming or both
//!   ([`FaultEngine::link_fault`]).

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    #[error(
        "unknown action {0:?}; expected drop-request, drop-response, delay, error, close, \
         crash or partition"
    )]
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
        /// Kafka's name of the code (`NOT_ENOUGH_REPLICAS`), for `brook fault list` and logs.
        error: String,
        delay_ms: Option<u64>,
    },
    /// Close the connection.
    Close { when: When },
    /// A crash rule: exit the process at its [`CrashPoint`]. Never returned by
    /// [`FaultEngine::decide`].
    Crash,
    /// A link rule: refuse the traffic. Never returned by [`FaultEngine::decide`]; link
    /// rules with `delay` carry [`FaultAction::Delay`].
    Partition,
}

/// The three kinds of rules. A spec's `kind` may be omitted: `crash` makes a crash rule,
/// `partition` (or `delay` with any of `from`, `to`, `direction`, `traffic`) a link rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RuleKind {
    /// Matches Kafka requests on a connection ([`FaultEngine::decide`]).
    #[default]
    Request,
    /// Exits the process at a crash point ([`FaultEngine::crash_point`]).
    Crash,
    /// Partitions or delays traffic between two nodes ([`FaultEngine::link_fault`]).
    Link,
}

impl RuleKind {
    pub const ALL: [RuleKind; 3] = [RuleKind::Request, RuleKind::Crash, RuleKind::Link];

    /// The name a spec's `kind` takes, and the `kind` label of the fault metrics.
    pub fn name(self) -> &'static str {
        match self {
            RuleKind::Request => "request",
            RuleKind::Crash => "crash",
            RuleKind::Link => "link",
        }
    }
}

/// Named places in the produce and replication paths where a crash rule can stop the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrashPoint {
    /// The leader appended a produce batch to its log, before replication and the ack.
    AfterLeaderAppend,
    /// The high watermark passed the batch, before the produce answer is sent.
    AfterReplicationBeforeAck,
    /// A follower received records from the leader, before appending them.
    FollowerAfterFetchBeforeAppend,
    /// The transaction coordinator wrote PrepareCommit/PrepareAbort (replicated), before it
    /// answers EndTxn and before any marker; topic and partition are the
    /// `__transaction_state` partition of the transactional id.
    TxnAfterPrepareBeforeMarkers,
    /// The transaction coordinator learnt that a marker is written to a partition, before
    /// the Complete* record; topic and partition are that data partition. In a transaction
    /// over several nodes' partitions this stops the coordinator after some markers.
    TxnAfterMarker,
    /// The log cleaner wrote and flushed `<base>.log.cleaned`, before the swap: a restart
    /// deletes the cleaned files and keeps the old segments.
    CleanerAfterCleaned,
    /// The log cleaner renamed the cleaned files to `.swap` and deleted the segments they
    /// replace, before the `.swap` files take their final names: a restart completes the swap.
    CleanerAfterSwap,
}

impl CrashPoint {
    /// Every crash point.
    pub const ALL: [CrashPoint; 7] = [
        CrashPoint::AfterLeaderAppend,
        CrashPoint::AfterReplicationBeforeAck,
        CrashPoint::FollowerAfterFetchBeforeAppend,
        CrashPoint::TxnAfterPrepareBeforeMarkers,
        CrashPoint::TxnAfterMarker,
        CrashPoint::CleanerAfterCleaned,
        CrashPoint::CleanerAfterSwap,
    ];

    /// The name used in specs and logs.
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::AfterLeaderAppend => "after-leader-append",
            CrashPoint::AfterReplicationBeforeAck => "after-replication-before-ack",
            CrashPoint::FollowerAfterFetchBeforeAppend => "follower-after-fetch-before-append",
            CrashPoint::TxnAfterPrepareBeforeMarkers => "txn-after-prepare-before-markers",
            CrashPoint::TxnAfterMarker => "txn-after-marker",
            CrashPoint::CleanerAfterCleaned => "cleaner-after-cleaned",
            CrashPoint::CleanerAfterSwap => "cleaner-after-swap",
        }
    }

    /// Parses a name as written in specs; `_` is accepted for `-`.
    pub fn parse(name: &str) -> Result<CrashPoint, FaultError> {
        let norm = name.replace('_', "-");
        CrashPoint::ALL
            .into_iter()
            .find(|p| p.name() == norm)
            .ok_or_else(|| {
                let names: Vec<&str> = CrashPoint::ALL.iter().map(|p| p.name()).collect();
                FaultError::Invalid(format!(
                    "unknown crash point {name:?}; expected one of {}",
                    names.join(", ")
                ))
            })
    }
}

/// Which traffic between two nodes a link rule affects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Traffic {
    /// Partition data: follower Fetch requests to leaders.
    Replication,
    /// The metadata quorum: Raft RPCs and forwarded controller writes.
    Controller,
    /// Both.
    Both,
}

impl Traffic {
    fn parse(s: &str) -> Result<Traffic, FaultError> {
        match s {
            "replication" => Ok(Traffic::Replication),
            "controller" => Ok(Traffic::Controller),
            "both" => Ok(Traffic::Both),
            other => Err(FaultError::Invalid(format!(
                "unknown traffic {other:?}; expected replication, controller or both"
            ))),
        }
    }

    fn covers(self, other: Traffic) -> bool {
        self == Traffic::Both || other == Traffic::Both || self == other
    }
}

/// The direction of traffic, seen from this node: `Out` is what this node sends to the peer
/// (its requests), `In` what the peer sends to this node (the peer's requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Out,
    In,
    Both,
}

impl Direction {
    fn parse(s: &str) -> Result<Direction, FaultError> {
        match s {
            "out" => Ok(Direction::Out),
            "in" => Ok(Direction::In),
            "both" => Ok(Direction::Both),
            other => Err(FaultError::Invalid(format!(
                "unknown direction {other:?}; expected out, in or both"
            ))),
        }
    }

    fn covers(self, other: Direction) -> bool {
        self == Direction::Both || other == Direction::Both || self == other
    }
}

/// What a link rule does to one message between two nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkAction {
    /// Refuse it: an outgoing request fails like a refused connection; an incoming one is
    /// answered with an error (HTTP 503 on the controller listener).
    Partition,
    /// Hold it this long, then go on.
    Delay(Duration),
}

/// A link rule's peer as specs write it: a node id, or `"*"` for every peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PeerSpec {
    Id(i32),
    Text(String),
}

/// A link rule's peer: one node, or all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Any,
    Node(i32),
}

impl Serialize for Peer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Peer::Any => s.serialize_str("*"),
            Peer::Node(n) => s.serialize_i32(*n),
        }
    }
}

impl PeerSpec {
    fn parse(&self) -> Result<Peer, FaultError> {
        match self {
            PeerSpec::Id(n) => Ok(Peer::Node(*n)),
            PeerSpec::Text(t) if t == "*" => Ok(Peer::Any),
            PeerSpec::Text(t) => t.parse().map(Peer::Node).map_err(|_| {
                FaultError::Invalid(format!("\"to\" must be a node id or \"*\", not {t:?}"))
            }),
        }
    }
}

/// A rule as the admin API and the CLI write it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// `request` (default), `crash` or `link`; inferred from the action when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<RuleKind>,
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
    /// For crash rules: the [`CrashPoint`] name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<String>,
    /// For link rules: this node's id (default: any node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<i32>,
    /// For link rules: the peer node id, or `"*"` (default) for every peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<PeerSpec>,
    /// For link rules: `out`, `in` or `both` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// For link rules: `replication`, `controller` or `both` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<String>,
}

/// A spec as its kind takes it: each kind's fields and no others (serde refuses a field of
/// another kind by name), after the kind is read or inferred ([`infer_kind`]).
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum RuleSpec {
    Request(RequestRuleSpec),
    Crash(CrashRuleSpec),
    Link(LinkRuleSpec),
}

/// The fields every kind takes: which node, how often, with which probability and seed.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct Budget {
    node: Option<i32>,
    times: Option<u64>,
    probability: Option<f64>,
    seed: Option<u64>,
}

impl Budget {
    /// Request and crash rules fire once unless `times` or a probability says otherwise.
    fn once_by_default(mut self) -> Budget {
        if self.times.is_none() && self.probability.is_none() {
            self.times = Some(1);
        }
        self
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestRuleSpec {
    action: String,
    api: Option<String>,
    client_id: Option<String>,
    topic: Option<String>,
    partition: Option<i32>,
    delay_ms: Option<u64>,
    error_code: Option<i16>,
    when: Option<When>,
    #[serde(flatten)]
    budget: Budget,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CrashRuleSpec {
    action: String,
    point: String,
    topic: Option<String>,
    partition: Option<i32>,
    #[serde(flatten)]
    budget: Budget,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkRuleSpec {
    action: String,
    from: Option<i32>,
    to: Option<PeerSpec>,
    direction: Option<String>,
    traffic: Option<String>,
    delay_ms: Option<u64>,
    #[serde(flatten)]
    budget: Budget,
}

impl RuleSpec {
    /// The kind's spec from the flat one users write: fields left out are dropped, the kind
    /// is inferred when absent, and a field the kind does not take is refused by name.
    fn of(spec: FaultSpec) -> Result<RuleSpec, FaultError> {
        let kind = spec.kind.unwrap_or_else(|| infer_kind(&spec));
        let flat = serde_json::to_value(&spec).map_err(|e| FaultError::Invalid(e.to_string()))?;
        let mut fields: serde_json::Map<String, serde_json::Value> = match flat {
            serde_json::Value::Object(m) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
            _ => serde_json::Map::new(),
        };
        fields.insert("kind".into(), kind.name().into());
        serde_json::from_value(serde_json::Value::Object(fields))
            .map_err(|e| FaultError::Invalid(format!("{} rules: {e}", kind.name())))
    }
}

/// An installed rule: what it matches (one variant per [`RuleKind`], each with only its
/// kind's fields), what it does, and its budget.
#[derive(Debug, Serialize)]
pub struct FaultRule {
    pub id: u64,
    #[serde(flatten)]
    pub matcher: RuleMatch,
    #[serde(flatten)]
    pub action: FaultAction,
    /// Only on this node (None: any).
    pub node: Option<i32>,
    pub times: Option<u64>,
    pub probability: Option<f64>,
    pub seed: Option<u64>,
    /// How often the rule fired.
    #[serde(serialize_with = "ser_atomic")]
    pub fired: AtomicU64,
    #[serde(skip)]
    rng: Mutex<SplitMix64>,
}

/// What an installed rule matches, by kind; serialised under `kind` with its fields flat.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RuleMatch {
    /// Kafka requests on a connection ([`FaultEngine::decide`]); every field left out
    /// matches anything.
    Request {
        api: Option<String>,
        #[serde(skip)]
        api_key: Option<i16>,
        client_id: Option<String>,
        topic: Option<String>,
        partition: Option<i32>,
    },
    /// A crash point, optionally only for a topic and partition
    /// ([`FaultEngine::crash_point`]).
    Crash {
        point: CrashPoint,
        topic: Option<String>,
        partition: Option<i32>,
    },
    /// Traffic between this node (`from`, None: any) and a peer ([`FaultEngine::link_fault`]).
    Link {
        from: Option<i32>,
        to: Peer,
        direction: Direction,
        traffic: Traffic,
    },
}

impl RuleMatch {
    pub fn kind(&self) -> RuleKind {
        match self {
            RuleMatch::Request { .. } => RuleKind::Request,
            RuleMatch::Crash { .. } => RuleKind::Crash,
            RuleMatch::Link { .. } => RuleKind::Link,
        }
    }
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
    fn from_spec(spec: FaultSpec) -> Result<FaultRule, FaultError> {
        match RuleSpec::of(spec)? {
            RuleSpec::Request(r) => Self::request_rule(r),
            RuleSpec::Crash(c) => Self::crash_rule(c),
            RuleSpec::Link(l) => Self::link_rule(l),
        }
    }

    /// A request rule: drop-request, drop-response, delay, error or close.
    fn request_rule(spec: RequestRuleSpec) -> Result<FaultRule, FaultError> {
        let when = spec.when.unwrap_or_default();
        let action = match spec.action.as_str() {
            "drop-request" | "drop_request" => FaultAction::DropRequest,
            "drop-response" | "drop_response" => FaultAction::DropResponse,
            "delay" => FaultAction::Delay {
                delay_ms: required_delay(spec.delay_ms)?,
                when,
            },
            "error" => {
                let error_code = spec
                    .error_code
                    .ok_or_else(|| FaultError::Invalid("error needs error_code".into()))?;
                FaultAction::Error {
                    error_code,
                    error: crate::errors::error_name(error_code),
                    delay_ms: spec.delay_ms,
                }
            }
            "close" => FaultAction::Close { when },
            other => return Err(FaultError::UnknownAction(other.into())),
        };
        if spec.delay_ms.is_some() {
            required_delay(spec.delay_ms)?;
        }
        check_probability(spec.budget.probability)?;
        let api_key = spec.api.as_deref().map(parse_api).transpose()?;
        let matcher = RuleMatch::Request {
            api: spec.api,
            api_key,
            client_id: spec.client_id,
            topic: spec.topic,
            partition: spec.partition,
        };
        Ok(FaultRule::new(
            matcher,
            action,
            spec.budget.once_by_default(),
        ))
    }

    /// A crash rule: `action: crash` at a `point`, optionally only for a topic, partition
    /// and node.
    fn crash_rule(spec: CrashRuleSpec) -> Result<FaultRule, FaultError> {
        if spec.action != "crash" {
            return Err(FaultError::Invalid(format!(
                "crash rules have action \"crash\", not {:?}",
                spec.action
            )));
        }
        let point = CrashPoint::parse(&spec.point)?;
        check_probability(spec.budget.probability)?;
        let matcher = RuleMatch::Crash {
            point,
            topic: spec.topic,
            partition: spec.partition,
        };
        Ok(FaultRule::new(
            matcher,
            FaultAction::Crash,
            spec.budget.once_by_default(),
        ))
    }

    /// A link rule: `partition`, or `delay` with `delay_ms`, between this node (`from`) and
    /// a peer (`to`), by direction and traffic; unlimited unless `times` is set.
    fn link_rule(spec: LinkRuleSpec) -> Result<FaultRule, FaultError> {
        let action = match spec.action.as_str() {
            "partition" if spec.delay_ms.is_some() => {
                return Err(FaultError::Invalid("partition takes no delay_ms".into()))
            }
            "partition" => FaultAction::Partition,
            "delay" => FaultAction::Delay {
                delay_ms: required_delay(spec.delay_ms)?,
                when: When::Before,
            },
            other => {
                return Err(FaultError::Invalid(format!(
                    "link rules have action partition or delay, not {other:?}"
                )))
            }
        };
        check_probability(spec.budget.probability)?;
        let to = spec.to.as_ref().map(PeerSpec::parse).transpose()?;
        let direction = spec
            .direction
            .as_deref()
            .map(Direction::parse)
            .transpose()?;
        let traffic = spec.traffic.as_deref().map(Traffic::parse).transpose()?;
        let matcher = RuleMatch::Link {
            from: spec.from,
            to: to.unwrap_or(Peer::Any),
            direction: direction.unwrap_or(Direction::Both),
            traffic: traffic.unwrap_or(Traffic::Both),
        };
        // Until cleared, unless a budget is given.
        Ok(FaultRule::new(matcher, action, spec.budget))
    }

    /// A rule matching `matcher`, doing `action` within `budget`. Its id is set when it is
    /// installed.
    fn new(matcher: RuleMatch, action: FaultAction, budget: Budget) -> FaultRule {
        FaultRule {
            id: 0,
            matcher,
            action,
            node: budget.node,
            times: budget.times,
            probability: budget.probability,
            seed: budget.seed,
            fired: AtomicU64::new(0),
            rng: Mutex::new(SplitMix64(budget.seed.unwrap_or(0))),
        }
    }

    /// The rule's kind.
    pub fn kind(&self) -> RuleKind {
        self.matcher.kind()
    }

    fn on_this_node(&self, node: i32) -> bool {
        self.node.is_none_or(|n| n == node)
    }

    fn matches_crash(&self, node: i32, at: CrashPoint, at_topic: &str, at_partition: i32) -> bool {
        match &self.matcher {
            RuleMatch::Crash {
                point,
                topic,
                partition,
            } => {
                self.on_this_node(node)
                    && *point == at
                    && topic.as_ref().is_none_or(|t| t == at_topic)
                    && partition.is_none_or(|p| p == at_partition)
            }
            _ => false,
        }
    }

    fn matches_link(&self, node: i32, peer: i32, kind: Traffic, way: Direction) -> bool {
        match &self.matcher {
            RuleMatch::Link {
                from,
                to,
                direction,
                traffic,
            } => {
                self.on_this_node(node)
                    && from.is_none_or(|n| n == node)
                    && (*to == Peer::Any || *to == Peer::Node(peer))
                    && traffic.covers(kind)
                    && direction.covers(way)
            }
            _ => false,
        }
    }

    fn matches(&self, node: i32, req: &RequestFacts) -> bool {
        let RuleMatch::Request {
            api_key,
            client_id,
            topic,
            partition,
            ..
        } = &self.matcher
        else {
            return false;
        };
        self.on_this_node(node)
            && api_key.is_none_or(|k| k == req.api_key)
            && client_id
                .as_ref()
                .is_none_or(|c| req.client_id.as_deref() == Some(c.as_str()))
            && topic
                .as_ref()
                .is_none_or(|t| req.partitions.iter().any(|(rt, _)| rt == t))
            && partition.is_none_or(|p| {
                req.partitions
                    .iter()
                    .any(|(rt, rp)| *rp == p && topic.as_ref().is_none_or(|t| t == rt))
            })
    }

    /// Puts a `fault_fired` event on the stream (the fault engine owns the fact).
    fn report_fired(&self, api_key: Option<i16>) {
        crate::events::emit(|| crate::events::EventKind::FaultFired {
            rule: self.id,
            kind: self.kind().name(),
            action: format!("{:?}", self.action),
            api_key,
        });
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

/// The kind a spec without `kind` gets: `crash` → crash, `partition` → link, `delay` with
/// a link field → link, anything else → request.
fn infer_kind(spec: &FaultSpec) -> RuleKind {
    let link_fields = spec.from.is_some()
        || spec.to.is_some()
        || spec.direction.is_some()
        || spec.traffic.is_some();
    match spec.action.as_str() {
        "crash" => RuleKind::Crash,
        "partition" => RuleKind::Link,
        "delay" if link_fields => RuleKind::Link,
        _ => RuleKind::Request,
    }
}

/// A delay's `delay_ms`, present and within [`MAX_FAULT_DELAY_MS`].
fn required_delay(delay_ms: Option<u64>) -> Result<u64, FaultError> {
    match delay_ms {
        None => Err(FaultError::Invalid("delay needs delay_ms".into())),
        Some(d) if d > MAX_FAULT_DELAY_MS => Err(FaultError::Invalid(format!(
            "delay_ms is capped at {MAX_FAULT_DELAY_MS}"
        ))),
        Some(d) => Ok(d),
    }
}

fn check_probability(p: Option<f64>) -> Result<(), FaultError> {
    match p {
        Some(p) if !(0.0..=1.0).contains(&p) => Err(FaultError::Invalid(format!(
            "probability {p} is outside 0..=1"
        ))),
        _ => Ok(()),
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
    /// Firings since start, per [`RuleKind`]: they outlive the rules that fired (a cleared
    /// rule takes its own `fired` count along), so `/metrics` can show a counter.
    fires: [AtomicU64; RuleKind::ALL.len()],
}

impl FaultEngine {
    /// An engine with no rules.
    pub fn new(node_id: i32) -> Self {
        FaultEngine {
            node_id,
            rules: RwLock::new(Vec::new()),
            next_id: AtomicU64::new(1),
            fires: Default::default(),
        }
    }

    /// Rule firings since the process started, by kind (a crash firing is counted before the
    /// exit, so only tests calling [`FaultEngine::crash_decision`] see it).
    pub fn fires(&self) -> [(RuleKind, u64); RuleKind::ALL.len()] {
        RuleKind::ALL.map(|k| (k, self.fires[k as usize].load(Ordering::Relaxed)))
    }

    /// Installed rules, by kind.
    pub fn rule_counts(&self) -> [(RuleKind, usize); RuleKind::ALL.len()] {
        let rules = self.rules.read();
        RuleKind::ALL.map(|k| (k, rules.iter().filter(|r| r.kind() == k).count()))
    }

    fn count_fire(&self, kind: RuleKind) {
        self.fires[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Installs a rule; returns its id.
    pub fn add(&self, spec: FaultSpec) -> Result<u64, FaultError> {
        // Validate before taking an id, so refused rules leave no gaps in the numbering.
        let mut rule = FaultRule::from_spec(spec)?;
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
                self.count_fire(RuleKind::Request);
                tracing::info!(rule = r.id, action = ?r.action, api = req.api_key, "fault fired");
                r.report_fired(Some(req.api_key));
                return Some(r.action.clone());
            }
        }
        None
    }

    /// The id of the first crash rule that matches and fires at `point` for this partition,
    /// if any. [`FaultEngine::crash_point`] is this plus the exit; tests call this one.
    pub fn crash_decision(&self, point: CrashPoint, topic: &str, partition: i32) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        let rules = self.rules.read();
        rules
            .iter()
            .find(|r| r.matches_crash(self.node_id, point, topic, partition) && r.try_fire())
            .map(|r| {
                self.count_fire(RuleKind::Crash);
                r.report_fired(None);
                r.id
            })
    }

    /// A crash point in the broker code: if an armed crash rule matches `point`, `topic` and
    /// `partition` and fires, logs it and exits the process at once with status 137, as
    /// `kill -9` would leave it: nothing else runs, no clean-shutdown marker is written, and
    /// what was not yet written to the log files is lost. Cheap when no rule is installed.
    pub fn crash_point(&self, point: CrashPoint, topic: &str, partition: i32) {
        if let Some(rule) = self.crash_decision(point, topic, partition) {
            tracing::error!(
                rule,
                point = point.name(),
                topic,
                partition,
                "fault rule: crashing now"
            );
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "brook: CRASH node.id={} point={} topic={topic} partition={partition} rule={rule}",
                self.node_id,
                point.name()
            );
            let _ = err.flush();
            std::process::exit(137);
        }
    }

    /// What the first matching link rule does to traffic of kind `traffic` between this node
    /// and `peer`, in `direction` (`Out`: this node's requests to the peer; `In`: the peer's
    /// requests to this node). Link rules fire until cleared unless they have `times`; each
    /// firing is counted. Cheap when no rule is installed.
    pub fn link_fault(
        &self,
        peer: i32,
        traffic: Traffic,
        direction: Direction,
    ) -> Option<LinkAction> {
        if self.is_empty() {
            return None;
        }
        let rules = self.rules.read();
        let r = rules
            .iter()
            .find(|r| r.matches_link(self.node_id, peer, traffic, direction) && r.try_fire())?;
        self.count_fire(RuleKind::Link);
        tracing::debug!(rule = r.id, peer, ?traffic, ?direction, action = ?r.action, "link fault");
        // A link rule fires on every message it touches: the stream reports its first firing.
        if r.fired.load(Ordering::Relaxed) == 1 {
            r.report_fired(None);
        }
        match r.action {
            FaultAction::Delay { delay_ms, .. } => {
                Some(LinkAction::Delay(Duration::from_millis(delay_ms)))
            }
            _ => Some(LinkAction::Partition),
        }
    }

    /// This engine's node id.
    pub fn node_id(&self) -> i32 {
        self.node_id
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

    fn crash(point: &str) -> FaultSpec {
        FaultSpec {
            action: "crash".into(),
            point: Some(point.into()),
            ..Default::default()
        }
    }

    fn link(action: &str) -> FaultSpec {
        FaultSpec {
            action: action.into(),
            ..Default::default()
        }
    }

    #[test]
    fn crash_rules_match_point_topic_partition_and_count() {
        let e = FaultEngine::new(1);
        e.add(FaultSpec {
            topic: Some("orders".into()),
            partition: Some(2),
            times: Some(2),
            ..crash("after-leader-append")
        })
        .unwrap();
        let p = CrashPoint::AfterLeaderAppend;
        assert_eq!(
            e.crash_decision(CrashPoint::AfterReplicationBeforeAck, "orders", 2),
            None
        );
        assert_eq!(e.crash_decision(p, "other", 2), None);
        assert_eq!(e.crash_decision(p, "orders", 1), None);
        assert_eq!(e.crash_decision(p, "orders", 2), Some(1));
        assert_eq!(e.crash_decision(p, "orders", 2), Some(1));
        assert_eq!(e.crash_decision(p, "orders", 2), None, "budget used up");
        assert_eq!(e.list()[0].fired.load(Ordering::Relaxed), 2);
        assert_eq!(e.fires()[RuleKind::Crash as usize], (RuleKind::Crash, 2));
        assert_eq!(
            e.rule_counts()[RuleKind::Crash as usize],
            (RuleKind::Crash, 1)
        );
        // Crash rules never act on requests, request rules never crash.
        assert_eq!(e.decide(&produce("orders", 2)), None);
        e.add(spec("drop-request")).unwrap();
        assert_eq!(e.crash_decision(p, "orders", 2), None);
    }

    #[test]
    fn crash_rule_defaults_and_node_matcher() {
        let e = FaultEngine::new(3);
        e.add(FaultSpec {
            node: Some(2),
            ..crash("follower_after_fetch_before_append")
        })
        .unwrap();
        let p = CrashPoint::FollowerAfterFetchBeforeAppend;
        assert_eq!(e.crash_decision(p, "t", 0), None, "other node");
        e.clear(None);
        e.add(crash("after-replication-before-ack")).unwrap();
        let p = CrashPoint::AfterReplicationBeforeAck;
        assert!(e.crash_decision(p, "any", 7).is_some());
        assert_eq!(e.crash_decision(p, "any", 7), None, "times defaults to 1");
        let listed = serde_json::to_value(&*e.list()[0]).unwrap();
        assert_eq!(listed["kind"], "crash");
        assert_eq!(listed["action"], "crash");
        assert_eq!(listed["point"], "after-replication-before-ack");
    }

    #[test]
    fn link_rules_match_peer_traffic_direction_until_cleared() {
        let e = FaultEngine::new(1);
        e.add(FaultSpec {
            to: Some(PeerSpec::Id(2)),
            direction: Some("out".into()),
            traffic: Some("replication".into()),
            ..link("partition")
        })
        .unwrap();
        let out = Direction::Out;
        assert_eq!(
            e.link_fault(3, Traffic::Replication, out),
            None,
            "other peer"
        );
        assert_eq!(
            e.link_fault(2, Traffic::Controller, out),
            None,
            "other traffic"
        );
        assert_eq!(e.link_fault(2, Traffic::Replication, Direction::In), None);
        for _ in 0..5 {
            assert_eq!(
                e.link_fault(2, Traffic::Replication, out),
                Some(LinkAction::Partition)
            );
        }
        assert_eq!(e.list()[0].fired.load(Ordering::Relaxed), 5);
        // Link rules leave requests and crash points alone.
        assert_eq!(e.decide(&produce("t", 0)), None);
        assert_eq!(
            e.crash_decision(CrashPoint::AfterLeaderAppend, "t", 0),
            None
        );
        e.clear(None);
        assert_eq!(e.link_fault(2, Traffic::Replication, out), None);
        // The firings outlive the cleared rule; nothing else was counted.
        assert_eq!(
            e.fires(),
            [
                (RuleKind::Request, 0),
                (RuleKind::Crash, 0),
                (RuleKind::Link, 5)
            ]
        );
        assert_eq!(
            e.rule_counts()[RuleKind::Link as usize],
            (RuleKind::Link, 0)
        );
    }

    #[test]
    fn link_defaults_delay_from_and_star() {
        let e = FaultEngine::new(1);
        // No to/direction/traffic: every peer, both ways, all traffic.
        e.add(FaultSpec {
            delay_ms: Some(250),
            to: Some(PeerSpec::Text("*".into())),
            ..link("delay")
        })
        .unwrap();
        let d = Some(LinkAction::Delay(Duration::from_millis(250)));
        assert_eq!(e.link_fault(5, Traffic::Controller, Direction::In), d);
        assert_eq!(e.link_fault(2, Traffic::Replication, Direction::Out), d);
        let listed = serde_json::to_value(&*e.list()[0]).unwrap();
        assert_eq!(listed["kind"], "link");
        assert_eq!(listed["to"], "*");
        assert_eq!(listed["direction"], "both");
        assert_eq!(listed["traffic"], "both");
        e.clear(None);
        e.add(FaultSpec {
            from: Some(2),
            times: Some(1),
            ..link("partition")
        })
        .unwrap();
        assert_eq!(
            e.link_fault(3, Traffic::Both, Direction::Both),
            None,
            "from=2"
        );
        let e2 = FaultEngine::new(2);
        e2.add(FaultSpec {
            from: Some(2),
            to: Some(PeerSpec::Text("3".into())),
            times: Some(1),
            ..link("partition")
        })
        .unwrap();
        assert_eq!(
            e2.link_fault(3, Traffic::Controller, Direction::In),
            Some(LinkAction::Partition)
        );
        assert_eq!(e2.link_fault(3, Traffic::Controller, Direction::In), None);
    }

    #[test]
    fn specs_parse_from_json_with_and_without_kind() {
        let parse = |j: &str| serde_json::from_str::<FaultSpec>(j).unwrap();
        let e = FaultEngine::new(1);
        for j in [
            r#"{"action":"partition","to":2,"direction":"both","traffic":"replication"}"#,
            r#"{"kind":"link","action":"partition","to":"*"}"#,
            r#"{"action":"delay","delay_ms":10,"to":"3","traffic":"controller"}"#,
            r#"{"action":"crash","point":"after-leader-append","topic":"t","partition":0}"#,
            r#"{"kind":"crash","action":"crash","point":"after-replication-before-ack"}"#,
            r#"{"action":"delay","delay_ms":10,"api":"produce"}"#,
        ] {
            e.add(parse(j)).unwrap_or_else(|err| panic!("{j}: {err}"));
        }
        let kinds: Vec<RuleKind> = e.list().iter().map(|r| r.kind()).collect();
        use RuleKind::*;
        assert_eq!(kinds, [Link, Link, Link, Crash, Crash, Request]);
    }

    #[test]
    fn a_field_of_another_kind_is_refused_by_name() {
        let refused = |j: &str| {
            let spec: FaultSpec = serde_json::from_str(j).unwrap();
            FaultEngine::new(1).add(spec).unwrap_err().to_string()
        };
        let crash = r#"{"action":"crash","point":"after-leader-append","api":"produce"}"#;
        assert_eq!(refused(crash), "crash rules: unknown field `api`");
        let link = r#"{"action":"partition","topic":"t"}"#;
        assert_eq!(refused(link), "link rules: unknown field `topic`");
        let request = r#"{"action":"close","point":"after-leader-append"}"#;
        assert_eq!(refused(request), "request rules: unknown field `point`");
    }

    /// An installed rule lists its kind's fields only, flat, under `kind` and `action`, and
    /// reads back as the spec it was made from.
    #[test]
    fn a_listed_rule_carries_its_kinds_fields_only() {
        let e = FaultEngine::new(1);
        for j in [
            r#"{"action":"crash","point":"after-leader-append","topic":"t","partition":0}"#,
            r#"{"action":"delay","delay_ms":5,"to":2,"direction":"in","traffic":"replication"}"#,
            r#"{"action":"error","api":"produce","error_code":6,"client_id":"c"}"#,
        ] {
            e.add(serde_json::from_str(j).unwrap()).unwrap();
        }
        let listed: Vec<serde_json::Value> = e
            .list()
            .iter()
            .map(|r| serde_json::to_value(r.as_ref()).unwrap())
            .collect();
        let keys = |v: &serde_json::Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        let budget = ["fired", "id", "node", "probability", "seed", "times"];
        let with_budget = |own: &[&str]| -> Vec<String> {
            let mut k: Vec<String> = own.iter().chain(&budget).map(|s| s.to_string()).collect();
            k.sort();
            k
        };
        assert_eq!(listed[0]["kind"], "crash");
        assert_eq!(
            keys(&listed[0]),
            with_budget(&["action", "kind", "partition", "point", "topic"])
        );
        assert_eq!(listed[1]["kind"], "link");
        assert_eq!(listed[1]["to"], 2);
        assert_eq!(
            keys(&listed[1]),
            with_budget(&[
                "action",
                "delay_ms",
                "direction",
                "from",
                "kind",
                "to",
                "traffic",
                "when"
            ])
        );
        assert_eq!(listed[2]["kind"], "request");
        assert_eq!(listed[2]["error"], "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(
            keys(&listed[2]),
            with_budget(&[
                "action",
                "api",
                "client_id",
                "delay_ms",
                "error",
                "error_code",
                "kind",
                "partition",
                "topic"
            ])
        );
        // What was listed installs again as the same rule (the admin API's round trip).
        for v in &listed {
            let mut spec = v.as_object().unwrap().clone();
            for k in ["id", "fired", "error"] {
                spec.remove(k);
            }
            if v["kind"] == "link" {
                // A link delay is always before the traffic; its spec takes no `when`.
                spec.remove("when");
            }
            let again = FaultEngine::new(1);
            again
                .add(serde_json::from_value(serde_json::Value::Object(spec)).unwrap())
                .unwrap();
            let mut back = serde_json::to_value(again.list()[0].as_ref()).unwrap();
            back["id"] = v["id"].clone();
            assert_eq!(&back, v);
        }
    }

    #[test]
    fn bad_crash_and_link_specs_are_refused() {
        let parse = |j: &str| serde_json::from_str::<FaultSpec>(j);
        let e = FaultEngine::new(1);
        for j in [
            r#"{"action":"crash"}"#,
            r#"{"action":"crash","point":"whenever"}"#,
            r#"{"action":"crash","point":"after-leader-append","api":"produce"}"#,
            r#"{"action":"crash","point":"after-leader-append","to":2}"#,
            r#"{"kind":"crash","action":"close","point":"after-leader-append"}"#,
            r#"{"action":"partition","to":"two"}"#,
            r#"{"action":"partition","direction":"sideways"}"#,
            r#"{"action":"partition","traffic":"smoke"}"#,
            r#"{"action":"partition","topic":"t"}"#,
            r#"{"action":"partition","delay_ms":5}"#,
            r#"{"kind":"link","action":"close"}"#,
            r#"{"kind":"link","action":"delay"}"#,
            r#"{"kind":"link","action":"delay","delay_ms":700000}"#,
            r#"{"kind":"request","action":"partition"}"#,
            r#"{"action":"close","point":"after-leader-append"}"#,
            r#"{"action":"partition","probability":3.0}"#,
        ] {
            let spec = parse(j).unwrap();
            assert!(e.add(spec).is_err(), "{j} should be refused");
        }
        assert!(parse(r#"{"kind":"other","action":"close"}"#).is_err());
        assert!(e.is_empty());
    }

    /// `crash_point` really exits the process with 137 and says why on stderr: the test
    /// re-runs itself as a child process that arms a rule and reaches the point.
    #[test]
    fn crash_point_exits_the_process() {
        const CHILD_ENV: &str = "BROOK_TEST_CRASH_CHILD";
        if std::env::var_os(CHILD_ENV).is_some() {
            let e = FaultEngine::new(4);
            e.add(FaultSpec {
                topic: Some("t".into()),
                ..crash("after-leader-append")
            })
            .unwrap();
            e.crash_point(CrashPoint::AfterLeaderAppend, "other", 0);
            e.crash_point(CrashPoint::AfterLeaderAppend, "t", 0);
            panic!("crash_point returned");
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "fault::tests::crash_point_exits_the_process"])
            .arg("--nocapture")
            .env(CHILD_ENV, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(137), "{stderr}");
        assert!(
            stderr.contains("CRASH node.id=4 point=after-leader-append topic=t partition=0"),
            "{stderr}"
        );
    }
}
