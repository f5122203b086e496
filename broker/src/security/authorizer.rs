//! The authorizer: Kafka's `StandardAuthorizer` and `StandardAuthorizerData`, turned on by
//! `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`.
//!
//! The ACLs themselves live in the metadata image (`MetadataImage::acls`, written by
//! `AccessControlEntryRecord`s through the controller), so every node of a cluster decides
//! alike and they survive restarts. Each node keeps an [`AclIndex`] built from the image's
//! ACLs, swapped whole when an applied image carries different ACLs: a request reads one
//! `Arc` and looks its resource up by name (its literal entry, the `*` entry, and one entry
//! per distinct prefix length of the type's PREFIXED ACLs), never scanning every ACL.
//!
//! The decision is `StandardAuthorizerData.authorize`: super users are allowed everything;
//! otherwise any matching DENY denies, else any matching ALLOW allows, else the resource has
//! ACLs (for anyone) and is denied, else `allow.everyone.if.no.acl.found` decides. ALLOW ACLs
//! imply DESCRIBE (from READ, WRITE, DELETE, ALTER) and DESCRIBE_CONFIGS (from ALTER_CONFIGS);
//! ALL matches every operation.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::RwLock;
use uuid::Uuid;

use super::acl::{
    java_host_address, supported_operations, AclBindingFilter, AclOperation, AclPermissionType,
    PatternType, ResourceType, StandardAcl, WILDCARD, WILDCARD_PRINCIPAL,
};
use super::{KafkaPrincipal, Session};

/// The one `authorizer.class.name` Brook serves (Kafka's KRaft authorizer).
pub const STANDARD_AUTHORIZER_CLASS: &str =
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// The authorizer's own keys (Kafka's `StandardAuthorizer.SUPER_USERS_CONFIG` and
/// `ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG`): not `KafkaConfig` keys, read from the same
/// `server.properties`, as Kafka hands the authorizer every broker property.
pub const AUTHORIZER_KEYS: &[&str] = &["super.users", "allow.everyone.if.no.acl.found"];

/// The authorizer's settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthorizerConfig {
    /// `super.users`: principals allowed everything, ACLs or not.
    pub super_users: HashSet<KafkaPrincipal>,
    /// `allow.everyone.if.no.acl.found`: what a resource with no ACL at all answers.
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// Reads the authorizer's settings from the broker's properties: `None` when
    /// `authorizer.class.name` is unset or empty (no authorization, as Kafka), an error for a
    /// class Brook does not implement or a malformed `super.users` entry.
    pub fn from_values(values: &BTreeMap<String, String>) -> Result<Option<Self>, String> {
        let class = values
            .get("authorizer.class.name")
            .map(|v| v.trim())
            .unwrap_or("");
        if class.is_empty() {
            return Ok(None);
        }
        if class != STANDARD_AUTHORIZER_CLASS {
            return Err(format!(
                "authorizer.class.name={class} is not supported: Brook implements only \
                 {STANDARD_AUTHORIZER_CLASS}"
            ));
        }
        // Kafka's `StandardAuthorizer.getConfiguredSuperUsers`: `;`-separated, trimmed, each
        // a valid principal.
        let mut super_users = HashSet::new();
        for v in values.get("super.users").map_or("", |v| v).split(';') {
            let v = v.trim();
            if v.is_empty() {
                continue;
            }
            let p = KafkaPrincipal::parse(v).ok_or_else(|| {
                format!("super.users: invalid principal {v:?}: expected Type:name (User:alice)")
            })?;
            super_users.insert(p);
        }
        // Kafka's `getDefaultResult`: `Boolean.parseBoolean` of the trimmed value.
        let allow_everyone_if_no_acl_found = values
            .get("allow.everyone.if.no.acl.found")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        Ok(Some(AuthorizerConfig {
            super_users,
            allow_everyone_if_no_acl_found,
        }))
    }
}

/// One ACL's entry as the index matches it: the principal and host pre-parsed, so that a
/// check compares without allocating.
#[derive(Debug, Clone)]
struct Entry {
    /// `None` for `User:*`.
    principal: Option<KafkaPrincipal>,
    /// `None` for `*`; an ACL host that is not an address in Java's printed form can match no
    /// client, as in Kafka (which compares the strings).
    host: HostMatch,
    operation: AclOperation,
    allow: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostMatch {
    Any,
    Exactly(IpAddr),
    Never,
}

impl Entry {
    fn new(acl: &StandardAcl) -> Entry {
        let principal = if acl.principal == WILDCARD_PRINCIPAL {
            None
        } else {
            // A principal without a type never equals a session's; keep it unmatchable.
            Some(
                KafkaPrincipal::parse(&acl.principal).unwrap_or(KafkaPrincipal {
                    principal_type: String::new(),
                    name: acl.principal.clone(),
                }),
            )
        };
        let host = if acl.host == WILDCARD {
            HostMatch::Any
        } else {
            match acl.host.parse::<IpAddr>() {
                Ok(ip) if java_host_address(ip) == acl.host => HostMatch::Exactly(canonical(ip)),
                _ => HostMatch::Never,
            }
        };
        Entry {
            principal,
            host,
            operation: acl.operation,
            allow: acl.permission_type == AclPermissionType::Allow,
        }
    }

    /// Kafka's `StandardAuthorizerData.findResult`: `None` when the ACL does not apply to
    /// this principal, host and operation, else whether it allows.
    fn result(
        &self,
        principal: &KafkaPrincipal,
        host: Option<IpAddr>,
        op: AclOperation,
    ) -> Option<bool> {
        if self.principal.as_ref().is_some_and(|p| p != principal) {
            return None;
        }
        match self.host {
            HostMatch::Any => {}
            HostMatch::Exactly(ip) if host == Some(ip) => {}
            _ => return None,
        }
        if self.operation != AclOperation::All {
            let applies = if self.allow {
                match op {
                    AclOperation::Describe => matches!(
                        self.operation,
                        AclOperation::Describe
                            | AclOperation::Read
                            | AclOperation::Write
                            | AclOperation::Delete
                            | AclOperation::Alter
                    ),
                    AclOperation::DescribeConfigs => matches!(
                        self.operation,
                        AclOperation::DescribeConfigs | AclOperation::AlterConfigs
                    ),
                    _ => self.operation == op,
                }
            } else {
                self.operation == op
            };
            if !applies {
                return None;
            }
        }
        Some(self.allow)
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 address, as Java reads it.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// One resource type's ACLs by pattern.
#[derive(Debug, Default)]
struct TypeIndex {
    literal: HashMap<String, Vec<Entry>>,
    prefixed: HashMap<String, Vec<Entry>>,
    /// The byte lengths of the PREFIXED names: the only prefixes of a resource name worth
    /// looking up.
    prefix_lens: BTreeSet<usize>,
}

/// The ACLs of one image, indexed for matching (Kafka's `AclCache`).
#[derive(Debug, Default)]
pub struct AclIndex {
    /// The image's ACLs by id, kept to answer DescribeAcls and to tell when an image's ACLs
    /// changed (the image replaces its map only when an ACL record is applied).
    acls: Arc<BTreeMap<Uuid, StandardAcl>>,
    by_type: HashMap<ResourceType, TypeIndex>,
    /// The image's metadata offset, so that an older image never replaces a newer index.
    offset: u64,
}

impl AclIndex {
    /// Indexes `acls`.
    pub fn build(acls: Arc<BTreeMap<Uuid, StandardAcl>>, offset: u64) -> AclIndex {
        let mut by_type: HashMap<ResourceType, TypeIndex> = HashMap::new();
        for acl in acls.values() {
            let t = by_type.entry(acl.resource_type).or_default();
            let entry = Entry::new(acl);
            match acl.pattern_type {
                PatternType::Literal => t
                    .literal
                    .entry(acl.resource_name.clone())
                    .or_default()
                    .push(entry),
                PatternType::Prefixed => {
                    t.prefix_lens.insert(acl.resource_name.len());
                    t.prefixed
                        .entry(acl.resource_name.clone())
                        .or_default()
                        .push(entry);
                }
                _ => {}
            }
        }
        AclIndex {
            acls,
            by_type,
            offset,
        }
    }

    /// The ACL entries that apply to resource `name`: its literal ACLs, the PREFIXED ACLs
    /// whose name starts it, and the literal `*` ACLs.
    fn sections<'a>(
        &'a self,
        rt: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a Entry> + 'a {
        let t = self.by_type.get(&rt);
        let literal = t.and_then(|t| t.literal.get(name));
        let wildcard = t
            .filter(|_| name != WILDCARD)
            .and_then(|t| t.literal.get(WILDCARD));
        let prefixed = t.into_iter().flat_map(move |t| {
            t.prefix_lens
                .range(..=name.len())
                .filter(|&&len| name.is_char_boundary(len))
                .filter_map(move |&len| t.prefixed.get(&name[..len]))
        });
        literal
            .into_iter()
            .chain(prefixed)
            .chain(wildcard)
            .flatten()
    }
}

/// Kafka's `StandardAuthorizer` for one node.
#[derive(Debug)]
pub struct Authorizer {
    config: AuthorizerConfig,
    index: RwLock<Arc<AclIndex>>,
}

impl Authorizer {
    pub fn new(config: AuthorizerConfig) -> Authorizer {
        Authorizer {
            config,
            index: RwLock::new(Arc::new(AclIndex::default())),
        }
    }

    /// Takes the ACLs of an applied image, re-indexing only when they changed.
    pub fn follow(&self, acls: &Arc<BTreeMap<Uuid, StandardAcl>>, offset: u64) {
        {
            let current = self.index.read();
            if Arc::ptr_eq(&current.acls, acls) || current.offset > offset {
                return;
            }
        }
        let index = Arc::new(AclIndex::build(acls.clone(), offset));
        let mut current = self.index.write();
        if current.offset <= offset {
            tracing::info!(
                acls = acls.len(),
                offset,
                "authorizer took the image's ACLs"
            );
            *current = index;
        }
    }

    /// Whether `principal` is in `super.users` (allowed everything, even before the ACLs
    /// are loaded).
    pub fn is_super_user(&self, principal: &KafkaPrincipal) -> bool {
        self.config.super_users.contains(principal)
    }

    fn snapshot(&self) -> Arc<AclIndex> {
        self.index.read().clone()
    }

    /// Kafka's `StandardAuthorizerData.authorize` for one LITERAL resource.
    pub fn authorize(
        &self,
        session: &Session,
        op: AclOperation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        if self.config.super_users.contains(&session.principal) {
            return true;
        }
        self.authorize_in(&self.snapshot(), session, op, rt, name)
    }

    fn authorize_in(
        &self,
        index: &AclIndex,
        session: &Session,
        op: AclOperation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        let host = session.client_address.map(canonical);
        let (mut has_acls, mut allowed) = (false, false);
        for e in index.sections(rt, name) {
            has_acls = true;
            match e.result(&session.principal, host, op) {
                Some(false) => return false,
                Some(true) => allowed = true,
                None => {}
            }
        }
        allowed || (!has_acls && self.config.allow_everyone_if_no_acl_found)
    }

    /// Kafka's `AuthHelper.authorizedOperations`: the bit field (`1 << code`) of the
    /// resource type's supported operations this session may perform on `name`.
    pub fn authorized_operations(&self, session: &Session, rt: ResourceType, name: &str) -> i32 {
        let index = self.snapshot();
        let superuser = self.config.super_users.contains(&session.principal);
        supported_operations(rt)
            .iter()
            .filter(|&&op| superuser || self.authorize_in(&index, session, op, rt, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }

    /// Kafka's `Authorizer.authorizeByResourceType` (the interface's default, which
    /// `StandardAuthorizer` keeps): whether some resource of type `rt` may be acted on with
    /// `op`, e.g. WRITE on any topic for an idempotent producer (KIP-679).
    pub fn authorize_by_resource_type(
        &self,
        session: &Session,
        op: AclOperation,
        rt: ResourceType,
    ) -> bool {
        // A hard-coded name first, so super users (and the no-ACL default) pass whatever the
        // DENY ACLs say.
        if self.authorize(session, op, rt, "hardcode") {
            return true;
        }
        let host = session.client_address.map(canonical);
        let index = self.snapshot();
        let mut deny: HashMap<PatternType, HashSet<&str>> = HashMap::new();
        let mut allow: HashMap<PatternType, HashSet<&str>> = HashMap::new();
        let mut wildcard_allow = false;
        for acl in index.acls.values().filter(|a| a.resource_type == rt) {
            let e = Entry::new(acl);
            let principal_ok = e.principal.as_ref().is_none_or(|p| *p == session.principal);
            let host_ok = match e.host {
                HostMatch::Any => true,
                HostMatch::Exactly(ip) => host == Some(ip),
                HostMatch::Never => false,
            };
            if !principal_ok
                || !host_ok
                || (acl.operation != op && acl.operation != AclOperation::All)
            {
                continue;
            }
            if acl.permission_type == AclPermissionType::Deny {
                if acl.pattern_type == PatternType::Literal && acl.resource_name == WILDCARD {
                    return false;
                }
                deny.entry(acl.pattern_type)
                    .or_default()
                    .insert(&acl.resource_name);
            } else if acl.permission_type == AclPermissionType::Allow {
                if acl.pattern_type == PatternType::Literal && acl.resource_name == WILDCARD {
                    // Decides only once no wildcard DENY has turned up.
                    wildcard_allow = true;
                    continue;
                }
                allow
                    .entry(acl.pattern_type)
                    .or_default()
                    .insert(&acl.resource_name);
            }
        }
        if wildcard_allow {
            return true;
        }
        let denied = |pt: PatternType, name: &str| deny.get(&pt).is_some_and(|s| s.contains(name));
        // An ALLOW not dominated by a DENY (the same literal, or a PREFIXED DENY starting it).
        allow.iter().any(|(pt, names)| {
            names.iter().any(|name| {
                let literal_denied =
                    *pt == PatternType::Literal && denied(PatternType::Literal, name);
                let prefix_denied = name
                    .char_indices()
                    .map(|(i, c)| &name[..i + c.len_utf8()])
                    .any(|prefix| denied(PatternType::Prefixed, prefix));
                !literal_denied && !prefix_denied
            })
        })
    }

    /// The ACLs `filter` selects (Kafka's `StandardAuthorizer.acls`), in the image's id order.
    pub fn acls(&self, filter: &AclBindingFilter) -> Vec<StandardAcl> {
        self.snapshot()
            .acls
            .values()
            .filter(|a| filter.matches(a))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::{AclOperation as Op, ResourceType as Rt};

    fn acl(
        rt: Rt,
        name: &str,
        pt: PatternType,
        principal: &str,
        host: &str,
        op: Op,
        allow: bool,
    ) -> StandardAcl {
        StandardAcl {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: principal.into(),
            host: host.into(),
            operation: op,
            permission_type: if allow {
                AclPermissionType::Allow
            } else {
                AclPermissionType::Deny
            },
        }
    }

    fn authorizer(acls: Vec<StandardAcl>, config: AuthorizerConfig) -> Authorizer {
        let a = Authorizer::new(config);
        let map: BTreeMap<Uuid, StandardAcl> =
            acls.into_iter().map(|x| (Uuid::new_v4(), x)).collect();
        a.follow(&Arc::new(map), 1);
        a
    }

    fn session(user: &str, host: &str) -> Session {
        let mut s = Session::plaintext(Some(host.parse().unwrap()));
        s.principal = KafkaPrincipal::user(user);
        s
    }

    const LIT: PatternType = PatternType::Literal;
    const PRE: PatternType = PatternType::Prefixed;

    #[test]
    fn literal_prefixed_and_wildcard_resources_match_as_kafka() {
        let a = authorizer(
            vec![
                acl(Rt::Topic, "foo", LIT, "User:alice", "*", Op::Read, true),
                acl(Rt::Topic, "bar", PRE, "User:alice", "*", Op::Write, true),
                acl(Rt::Topic, "*", LIT, "User:bob", "*", Op::Read, true),
                acl(Rt::Topic, "fo", LIT, "User:carol", "*", Op::Read, true),
            ],
            AuthorizerConfig::default(),
        );
        let alice = session("alice", "127.0.0.1");
        assert!(a.authorize(&alice, Op::Read, Rt::Topic, "foo"));
        assert!(
            !a.authorize(&alice, Op::Read, Rt::Topic, "foo2"),
            "a literal ACL is not a prefix"
        );
        assert!(
            a.authorize(&alice, Op::Write, Rt::Topic, "bar"),
            "a prefix matches its own name"
        );
        assert!(a.authorize(&alice, Op::Write, Rt::Topic, "barn"));
        assert!(!a.authorize(&alice, Op::Write, Rt::Topic, "ba"));
        assert!(
            !a.authorize(&alice, Op::Read, Rt::Group, "foo"),
            "types are apart"
        );
        let bob = session("bob", "127.0.0.1");
        assert!(a.authorize(&bob, Op::Read, Rt::Topic, "anything"));
        let carol = session("carol", "127.0.0.1");
        assert!(
            !a.authorize(&carol, Op::Read, Rt::Topic, "foo"),
            "fo LITERAL does not cover foo"
        );
    }

    #[test]
    fn deny_wins_over_allow_and_only_denies_its_operation() {
        let a = authorizer(
            vec![
                acl(Rt::Topic, "t", PRE, "User:*", "*", Op::All, true),
                acl(Rt::Topic, "t1", LIT, "User:alice", "*", Op::Read, false),
                acl(Rt::Topic, "*", LIT, "User:alice", "*", Op::Write, false),
            ],
            AuthorizerConfig::default(),
        );
        let alice = session("alice", "127.0.0.1");
        assert!(!a.authorize(&alice, Op::Read, Rt::Topic, "t1"));
        assert!(
            a.authorize(&alice, Op::Describe, Rt::Topic, "t1"),
            "DENY READ does not deny DESCRIBE"
        );
        assert!(
            !a.authorize(&alice, Op::Write, Rt::Topic, "t2"),
            "a wildcard DENY"
        );
        assert!(a.authorize(&session("bob", "127.0.0.1"), Op::Write, Rt::Topic, "t2"));
    }

    #[test]
    fn allow_acls_imply_describe_and_describe_configs() {
        let a = authorizer(
            vec![
                acl(Rt::Topic, "w", LIT, "User:alice", "*", Op::Write, true),
                acl(
                    Rt::Topic,
                    "c",
                    LIT,
                    "User:alice",
                    "*",
                    Op::AlterConfigs,
                    true,
                ),
                acl(Rt::Topic, "r", LIT, "User:alice", "*", Op::Read, true),
            ],
            AuthorizerConfig::default(),
        );
        let alice = session("alice", "127.0.0.1");
        assert!(a.authorize(&alice, Op::Describe, Rt::Topic, "w"));
        assert!(!a.authorize(&alice, Op::Read, Rt::Topic, "w"));
        assert!(a.authorize(&alice, Op::DescribeConfigs, Rt::Topic, "c"));
        assert!(!a.authorize(&alice, Op::Describe, Rt::Topic, "c"));
        assert!(!a.authorize(&alice, Op::DescribeConfigs, Rt::Topic, "r"));
        // READ, WRITE? no: READ implies DESCRIBE only.
        assert_eq!(
            a.authorized_operations(&alice, Rt::Topic, "r"),
            (1 << Op::Read.code()) | (1 << Op::Describe.code())
        );
    }

    #[test]
    fn hosts_principals_super_users_and_the_no_acl_default() {
        let acls = vec![
            acl(
                Rt::Group,
                "g",
                LIT,
                "User:alice",
                "127.0.0.1",
                Op::Read,
                true,
            ),
            acl(Rt::Group, "g6", LIT, "User:alice", "::1", Op::Read, true),
        ];
        let a = authorizer(acls.clone(), AuthorizerConfig::default());
        assert!(a.authorize(&session("alice", "127.0.0.1"), Op::Read, Rt::Group, "g"));
        assert!(!a.authorize(&session("alice", "10.0.0.1"), Op::Read, Rt::Group, "g"));
        assert!(
            !a.authorize(&session("alice", "::1"), Op::Read, Rt::Group, "g6"),
            "Java prints ::1 in full"
        );
        assert!(!a.authorize(&session("alice", "127.0.0.1"), Op::Read, Rt::Group, "other"));
        let open = authorizer(
            acls,
            AuthorizerConfig {
                super_users: [KafkaPrincipal::user("admin")].into_iter().collect(),
                allow_everyone_if_no_acl_found: true,
            },
        );
        let bob = session("bob", "127.0.0.1");
        assert!(
            open.authorize(&bob, Op::Read, Rt::Group, "other"),
            "no ACL: the default allows"
        );
        assert!(
            !open.authorize(&bob, Op::Read, Rt::Group, "g"),
            "ACLs exist, none for bob"
        );
        assert!(open.authorize(
            &session("admin", "10.9.9.9"),
            Op::Alter,
            Rt::Cluster,
            "kafka-cluster"
        ));
        assert_eq!(
            open.authorized_operations(&session("admin", "1.1.1.1"), Rt::Cluster, "kafka-cluster"),
            8096
        );
    }

    #[test]
    fn by_resource_type_follows_kafkas_default_method() {
        let alice = session("alice", "127.0.0.1");
        let a = |acls| authorizer(acls, AuthorizerConfig::default());
        assert!(!a(vec![]).authorize_by_resource_type(&alice, Op::Write, Rt::Topic));
        assert!(a(vec![acl(
            Rt::Topic,
            "x",
            LIT,
            "User:alice",
            "*",
            Op::Write,
            true
        )])
        .authorize_by_resource_type(&alice, Op::Write, Rt::Topic));
        assert!(
            !a(vec![
                acl(Rt::Topic, "xy", LIT, "User:alice", "*", Op::Write, true),
                acl(Rt::Topic, "x", PRE, "User:alice", "*", Op::Write, false),
            ])
            .authorize_by_resource_type(&alice, Op::Write, Rt::Topic),
            "a dominating prefix DENY"
        );
        assert!(!a(vec![
            acl(Rt::Topic, "*", LIT, "User:alice", "*", Op::Write, true),
            acl(Rt::Topic, "*", LIT, "User:*", "*", Op::Write, false),
        ])
        .authorize_by_resource_type(&alice, Op::Write, Rt::Topic));
    }

    #[test]
    fn config_reads_kafkas_keys() {
        let v = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(AuthorizerConfig::from_values(&v(&[])).unwrap(), None);
        assert!(AuthorizerConfig::from_values(&v(&[(
            "authorizer.class.name",
            "kafka.security.authorizer.AclAuthorizer"
        )]))
        .is_err());
        let c = AuthorizerConfig::from_values(&v(&[
            ("authorizer.class.name", STANDARD_AUTHORIZER_CLASS),
            ("super.users", "User:a; User:b;"),
            ("allow.everyone.if.no.acl.found", " TRUE "),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.super_users.len(), 2);
        assert!(c.allow_everyone_if_no_acl_found);
        assert!(AuthorizerConfig::from_values(&v(&[
            ("authorizer.class.name", STANDARD_AUTHORIZER_CLASS),
            ("super.users", "alice"),
        ]))
        .is_err());
    }
}
