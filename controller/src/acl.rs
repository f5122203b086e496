//! ACLs as Kafka names them: resource types, pattern types, operations and permissions with
//! their wire codes (Kafka's `ResourceType`, `PatternType`, `AclOperation`,
//! `AclPermissionType`), one stored ACL (`StandardAcl`), and the filters DescribeAcls and
//! DeleteAcls carry (`AclBindingFilter`, with `ResourcePatternFilter.matches` and
//! `AccessControlEntryFilter.matches`).

use serde::{Deserialize, Serialize};

/// Defines a Kafka enum with its wire codes; any other code reads as `Unknown`, as Kafka's
/// `fromCode` does.
macro_rules! kafka_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $code:expr, $kafka:expr;)+ }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name { $($variant,)+ }

        impl $name {
            /// Kafka's `fromCode`: an unknown code is `Unknown`.
            pub fn from_code(code: i8) -> $name {
                match code {
                    $($code => $name::$variant,)+
                    _ => $name::Unknown,
                }
            }

            /// The wire code.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code,)+ }
            }

            /// Kafka's name (`TOPIC`, `PREFIXED`, `DESCRIBE_CONFIGS`, ...).
            pub fn kafka_name(self) -> &'static str {
                match self { $($name::$variant => $kafka,)+ }
            }
        }
    };
}

kafka_enum!(
    /// Kafka's `ResourceType`.
    ResourceType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
);

kafka_enum!(
    /// Kafka's `PatternType`.
    PatternType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Match = 2, "MATCH";
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
);

kafka_enum!(
    /// Kafka's `AclOperation`.
    AclOperation {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
);

kafka_enum!(
    /// Kafka's `AclPermissionType`.
    AclPermissionType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
);

/// The one name of the CLUSTER resource (Kafka's `Resource.CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The resource name and host that match any (Kafka's `ResourcePattern.WILDCARD_RESOURCE` and
/// `StandardAuthorizerData.WILDCARD`).
pub const WILDCARD: &str = "*";

/// The principal that matches any (Kafka's `StandardAuthorizerData.WILDCARD_PRINCIPAL`).
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// The operations a resource type has, in Kafka's `AclEntry.supportedOperations` order: the
/// authorized-operations fields are computed over them.
pub fn supported_operations(resource_type: ResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
    match resource_type {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
        _ => &[],
    }
}

/// One ACL: a resource pattern and an access control entry (Kafka's `StandardAcl`, the
/// content of an `AccessControlEntryRecord`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StandardAcl {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `Type:name`, or `User:*` for any principal.
    pub principal: String,
    /// An address as Java prints it (`InetAddress.getHostAddress`), or `*` for any.
    pub host: String,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

/// What DescribeAcls and DeleteAcls select ACLs with (Kafka's `AclBindingFilter`): `None`
/// strings and the `Any` codes match anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclBindingFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

impl AclBindingFilter {
    /// Kafka's `ResourcePatternFilter.isUnknown`.
    pub fn pattern_is_unknown(&self) -> bool {
        self.resource_type == ResourceType::Unknown || self.pattern_type == PatternType::Unknown
    }

    /// Kafka's `AccessControlEntryFilter.isUnknown`.
    pub fn entry_is_unknown(&self) -> bool {
        self.operation == AclOperation::Unknown
            || self.permission_type == AclPermissionType::Unknown
    }

    /// Kafka's `AclBindingFilter.matches`: the pattern filter (where `MATCH` also selects
    /// the wildcard and prefixed ACLs that would apply to a named resource) and the entry
    /// filter.
    pub fn matches(&self, acl: &StandardAcl) -> bool {
        self.matches_pattern(acl) && self.matches_entry(acl)
    }

    fn matches_pattern(&self, acl: &StandardAcl) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != acl.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == acl.pattern_type {
            return *name == acl.resource_name;
        }
        match acl.pattern_type {
            PatternType::Literal => *name == acl.resource_name || acl.resource_name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&acl.resource_name),
            _ => false,
        }
    }

    fn matches_entry(&self, acl: &StandardAcl) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == AclOperation::Any || self.operation == acl.operation)
            && (self.permission_type == AclPermissionType::Any
                || self.permission_type == acl.permission_type)
    }
}

/// A client address as Java's `InetAddress.getHostAddress` prints it, the form ACL hosts are
/// compared with: dotted IPv4 (also for an IPv4-mapped IPv6 address, which Java reads as
/// IPv4), and IPv6 as eight uncompressed hex groups (`0:0:0:0:0:0:0:1`).
pub fn java_host_address(ip: core::net::IpAddr) -> String {
    match ip {
        core::net::IpAddr::V4(v4) => v4.to_string(),
        core::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6
                .segments()
                .iter()
                .map(|s| format!("{s:x}"))
                .collect::<Vec<_>>()
                .join(":"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(rt: ResourceType, name: &str, pt: PatternType) -> StandardAcl {
        StandardAcl {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission_type: AclPermissionType::Allow,
        }
    }

    fn filter(name: Option<&str>, pt: PatternType) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: ResourceType::Any,
            resource_name: name.map(str::to_string),
            pattern_type: pt,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission_type: AclPermissionType::Any,
        }
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_read_as_unknown() {
        for c in 0..=14 {
            assert_eq!(AclOperation::from_code(c).code(), c);
        }
        assert_eq!(AclOperation::from_code(15), AclOperation::Unknown);
        assert_eq!(ResourceType::from_code(-1), ResourceType::Unknown);
        assert_eq!(PatternType::from_code(4), PatternType::Prefixed);
        assert_eq!(AclPermissionType::from_code(3), AclPermissionType::Allow);
    }

    #[test]
    fn filters_match_as_kafkas_resource_pattern_filter() {
        let lit = acl(ResourceType::Topic, "foo", PatternType::Literal);
        let wild = acl(ResourceType::Topic, "*", PatternType::Literal);
        let pre = acl(ResourceType::Topic, "fo", PatternType::Prefixed);
        // MATCH selects every ACL that would apply to the named resource.
        let m = filter(Some("foo"), PatternType::Match);
        assert!(m.matches(&lit) && m.matches(&wild) && m.matches(&pre));
        // ANY and an exact pattern type compare names exactly.
        let any = filter(Some("foo"), PatternType::Any);
        assert!(any.matches(&lit) && !any.matches(&wild) && !any.matches(&pre));
        let p = filter(Some("fo"), PatternType::Prefixed);
        assert!(p.matches(&pre) && !p.matches(&lit));
        assert!(filter(None, PatternType::Any).matches(&pre));
        let mut f = filter(None, PatternType::Any);
        f.principal = Some("User:bob".into());
        assert!(!f.matches(&lit));
        f.principal = None;
        f.operation = AclOperation::Write;
        assert!(!f.matches(&lit));
    }

    #[test]
    fn hosts_print_as_java_does() {
        assert_eq!(java_host_address("127.0.0.1".parse().unwrap()), "127.0.0.1");
        assert_eq!(java_host_address("::1".parse().unwrap()), "0:0:0:0:0:0:0:1");
        assert_eq!(
            java_host_address("::ffff:10.0.0.1".parse().unwrap()),
            "10.0.0.1"
        );
    }
}
