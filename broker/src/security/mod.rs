//! Who a connection speaks for, and over what: the principal, listener and security protocol
//! every request is handled under.
//!
//! Mirrors Kafka's `KafkaPrincipal` (type and name, printed `User:alice`) and
//! `SecurityProtocol`. A PLAINTEXT or SSL connection without a client certificate is
//! `User:ANONYMOUS`, as Kafka's `DefaultKafkaPrincipalBuilder` makes it; SASL and mutual TLS
//! replace it once the client has authenticated. Handlers read it from
//! [`crate::api::RequestContext::session`], so authorization has one source.

// The ACL vocabulary is the metadata's (its records carry ACLs): brook-controller owns it.
pub use brook_controller::acl;
pub mod authorizer;
pub mod bootstrap;
pub mod jaas;
pub mod jwks;
pub mod jwks_https;
pub mod oauthbearer;
pub mod sasl;
pub mod scram;
pub mod ssl;

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

/// Kafka's `KafkaPrincipal.USER_TYPE`.
pub const USER_TYPE: &str = "User";

/// A principal as Kafka names one: a type (`User`, or `Group`/... from custom builders) and a
/// name. Printed `Type:name`, the form ACLs and `super.users` use.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KafkaPrincipal {
    pub principal_type: String,
    pub name: String,
}

impl KafkaPrincipal {
    /// A `User` principal.
    pub fn user(name: impl Into<String>) -> KafkaPrincipal {
        KafkaPrincipal {
            principal_type: USER_TYPE.to_string(),
            name: name.into(),
        }
    }

    /// Kafka's `KafkaPrincipal.ANONYMOUS`: the principal of an unauthenticated connection.
    pub fn anonymous() -> KafkaPrincipal {
        KafkaPrincipal::user("ANONYMOUS")
    }

    /// Parses `Type:name` (Kafka's `SecurityUtils.parseKafkaPrincipal`): the type is what
    /// comes before the first colon; both parts must be non-empty.
    pub fn parse(s: &str) -> Option<KafkaPrincipal> {
        let (principal_type, name) = s.split_once(':')?;
        if principal_type.is_empty() || name.is_empty() {
            return None;
        }
        Some(KafkaPrincipal {
            principal_type: principal_type.to_string(),
            name: name.to_string(),
        })
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// Kafka's `SecurityProtocol`: what a listener speaks, named in `listener.security.protocol.map`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Parses Kafka's name for a protocol (case-insensitive, as Kafka's `forName`).
    pub fn parse(s: &str) -> Option<SecurityProtocol> {
        match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    /// Kafka's name for the protocol.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether the listener wraps connections in TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients must authenticate with SASL before any request but ApiVersions and
    /// the SASL handshake is served.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// What one connection's requests are handled under (Kafka's `Session` plus the listener
/// fields of its `RequestContext`).
#[derive(Debug, Clone)]
pub struct Session {
    pub principal: KafkaPrincipal,
    /// The peer's address (`RequestContext.clientAddress`), used by host-matching ACLs and
    /// recorded for group members.
    pub client_address: Option<IpAddr>,
    /// The listener's name (`PLAINTEXT`, `CLIENT`, ...), as in `listeners`.
    pub listener_name: Arc<str>,
    pub security_protocol: SecurityProtocol,
}

impl Session {
    /// An unauthenticated connection on a PLAINTEXT listener named `PLAINTEXT`.
    pub fn plaintext(client_address: Option<IpAddr>) -> Session {
        Session::anonymous(
            Arc::from("PLAINTEXT"),
            SecurityProtocol::Plaintext,
            client_address,
        )
    }

    /// A connection not (yet) authenticated, on listener `listener_name`.
    pub fn anonymous(
        listener_name: Arc<str>,
        security_protocol: SecurityProtocol,
        client_address: Option<IpAddr>,
    ) -> Session {
        Session {
            principal: KafkaPrincipal::anonymous(),
            client_address,
            listener_name,
            security_protocol,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_print_and_parse_as_kafka_does() {
        let p = KafkaPrincipal::parse("User:alice:with:colons").unwrap();
        assert_eq!(p.principal_type, "User");
        assert_eq!(p.name, "alice:with:colons");
        assert_eq!(p.to_string(), "User:alice:with:colons");
        assert_eq!(KafkaPrincipal::anonymous().to_string(), "User:ANONYMOUS");
        assert!(KafkaPrincipal::parse("alice").is_none());
        assert!(KafkaPrincipal::parse(":alice").is_none());
        assert!(KafkaPrincipal::parse("User:").is_none());
    }

    #[test]
    fn security_protocols_parse_case_insensitively() {
        assert_eq!(
            SecurityProtocol::parse("sasl_ssl"),
            Some(SecurityProtocol::SaslSsl)
        );
        assert!(SecurityProtocol::parse("TLS").is_none());
        for p in [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ] {
            assert_eq!(SecurityProtocol::parse(p.name()), Some(p));
        }
    }
}
