//! Named listeners, parsed as Kafka 4.4 parses them: `listeners`, `advertised.listeners`,
//! `listener.security.protocol.map`, `inter.broker.listener.name` /
//! `security.inter.broker.protocol` and `controller.listener.names` (Kafka's `KafkaConfig`
//! listener methods, `CoreUtils.listenerListToEndPoints` and `ListenerName`), and the
//! `listener.name.<listener>.`-prefixed settings (`ListenerName.configPrefix`).
//!
//! The parsed [`Listeners`] are the one owner of which sockets the broker binds, what each
//! speaks, and which endpoint other nodes use to reach it; everything else derives from them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::config_def::ConfigError;
use crate::security::SecurityProtocol;

/// Kafka's default `listener.security.protocol.map` (`SocketServerConfigs`).
pub const DEFAULT_SECURITY_PROTOCOL_MAP: &str =
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT";

/// Where a broker listener is advertised (Kafka's `effectiveAdvertisedBrokerListeners`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advertised {
    /// `advertised.listeners` is unset: the bound address is advertised.
    Bound,
    /// The `advertised.listeners` entry of this listener's name.
    At(String, u16),
    /// `advertised.listeners` is set without this name: Kafka registers no endpoint for it,
    /// so clients connected to it are given no brokers.
    No,
}

/// One `listeners` entry (Kafka's `EndPoint`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The listener's name, upper case as Kafka normalises it (`ListenerName.normalised`).
    pub name: Arc<str>,
    /// Where it binds.
    pub addr: SocketAddr,
    pub advertised: Advertised,
    pub security_protocol: SecurityProtocol,
}

impl Listener {
    /// Kafka's `ListenerName.configPrefix`: `listener.name.<lower case name>.`.
    pub fn config_prefix(&self) -> String {
        config_prefix(&self.name)
    }
}

/// `listener.name.<lower case name>.`.
pub fn config_prefix(listener_name: &str) -> String {
    format!("listener.name.{}.", listener_name.to_ascii_lowercase())
}

/// The broker's listeners, the controller listener and the inter-broker listener's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listeners {
    /// The broker listeners in `listeners` order; never empty. The first one is the one
    /// `brook serve` reports in its READY line.
    pub broker: Vec<Listener>,
    /// The first `listeners` entry named in `controller.listener.names` (KRaft), if any.
    pub controller: Option<Listener>,
    /// `inter.broker.listener.name` (or the name of `security.inter.broker.protocol`): one of
    /// `broker`, and advertised.
    pub inter_broker: Arc<str>,
}

impl Listeners {
    /// The broker listener named `name`.
    pub fn broker_listener(&self, name: &str) -> Option<&Listener> {
        self.broker.iter().find(|l| &*l.name == name)
    }

    /// The inter-broker listener (always one of the broker listeners).
    pub fn inter_broker_listener(&self) -> &Listener {
        self.broker_listener(&self.inter_broker)
            .unwrap_or(&self.broker[0])
    }
}

/// Parses the listener keys out of the merged config `values`; `explicit` tells which were
/// set (Kafka's `originals.containsKey`).
pub fn parse(
    values: &BTreeMap<String, String>,
    explicit: &BTreeSet<String>,
) -> Result<Listeners, ConfigError> {
    let get = |k: &str| values.get(k).cloned().unwrap_or_default();
    let controller_names: Vec<String> = csv(&get("controller.listener.names"))
        .map(|n| n.to_ascii_uppercase())
        .collect();
    let listeners_value = get("listeners");
    let map = security_protocol_map(
        &get("listener.security.protocol.map"),
        explicit.contains("listener.security.protocol.map"),
        &controller_names,
        &listeners_value,
    )?;
    let all = endpoints("listeners", &listeners_value, &map, true)?;
    let (controller, broker): (Vec<Listener>, Vec<Listener>) = all
        .into_iter()
        .partition(|l| controller_names.iter().any(|c| **c == *l.name));
    if broker.is_empty() {
        return Err(invalid(
            "listeners",
            &listeners_value,
            "There must be at least one broker advertised listener.",
        ));
    }
    let broker = advertise(broker, &get("advertised.listeners"), &map)?;
    let inter_broker = inter_broker_listener_name(values, explicit, &map)?;
    let advertised: Vec<&str> = broker
        .iter()
        .filter(|l| l.advertised != Advertised::No)
        .map(|l| &*l.name)
        .collect();
    if !advertised.contains(&&*inter_broker) {
        return Err(ConfigError::Invalid(format!(
            "inter.broker.listener.name must be a listener name defined in advertised.listeners. \
             The valid options based on currently configured listeners are {}",
            advertised.join(",")
        )));
    }
    Ok(Listeners {
        broker,
        controller: controller.into_iter().next(),
        inter_broker,
    })
}

/// Refuses what Brook cannot serve yet: the single place that lists unsupported listener
/// security protocols. Every protocol is served, on broker listeners (SASL_SSL is the SASL
/// exchange over the TLS stream) and on the controller listener
/// ([`crate::controller::channel`]).
pub fn refuse_unsupported(_listeners: &Listeners) -> Result<(), ConfigError> {
    Ok(())
}

fn csv(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn invalid(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

/// Kafka's `effectiveListenerSecurityProtocolMap`: the configured map; when it was not set,
/// controller listener names are added as PLAINTEXT unless SSL or SASL is in use.
fn security_protocol_map(
    value: &str,
    set: bool,
    controller_names: &[String],
    listeners: &str,
) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    const KEY: &str = "listener.security.protocol.map";
    let value = if value.is_empty() && !set {
        DEFAULT_SECURITY_PROTOCOL_MAP
    } else {
        value
    };
    let mut map = BTreeMap::new();
    for entry in csv(value) {
        let (name, protocol) = entry
            .split_once(':')
            .ok_or_else(|| invalid(KEY, value, "expected NAME:PROTOCOL entries"))?;
        let protocol = SecurityProtocol::parse(protocol.trim()).ok_or_else(|| {
            ConfigError::Invalid(format!(
                "Invalid security protocol `{}` defined in {KEY}",
                protocol.trim()
            ))
        })?;
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    if !set {
        let secured = |n: &str| matches!(n, "SSL" | "SASL_SSL" | "SASL_PLAINTEXT");
        let in_use = controller_names.iter().any(|n| secured(n))
            || csv(listeners).any(|l| secured(&listener_name_of(l).to_ascii_uppercase()));
        if !in_use {
            for n in controller_names {
                map.entry(n.clone()).or_insert(SecurityProtocol::Plaintext);
            }
        }
    }
    Ok(map)
}

/// The name part of `NAME://host:port`; an entry without a scheme is Brook's shorthand for a
/// PLAINTEXT listener.
fn listener_name_of(entry: &str) -> &str {
    entry.split_once("://").map_or("PLAINTEXT", |(n, _)| n)
}

/// Kafka's `CoreUtils.listenerListToEndPoints` for `listeners`: each entry's protocol comes
/// from the map; names are distinct and so are non-zero ports.
fn endpoints(
    key: &str,
    value: &str,
    map: &BTreeMap<String, SecurityProtocol>,
    distinct_ports: bool,
) -> Result<Vec<Listener>, ConfigError> {
    let mut out: Vec<Listener> = Vec::new();
    for entry in csv(value) {
        let name = listener_name_of(entry).to_ascii_uppercase();
        let host_port = entry.split_once("://").map_or(entry, |(_, a)| a);
        let security_protocol = *map.get(&name).ok_or_else(|| {
            ConfigError::Invalid(format!(
                "Error creating broker listeners from '{value}': No security protocol defined for listener {name}"
            ))
        })?;
        let addr = bind_address(host_port)
            .ok_or_else(|| invalid(key, value, "expected NAME://IP:PORT entries"))?;
        if out.iter().any(|l| *l.name == *name) {
            return Err(ConfigError::Invalid(format!(
                "Each listener must have a different name, listeners: {value}"
            )));
        }
        if distinct_ports
            && addr.port() != 0
            && out
                .iter()
                .any(|l| l.addr.port() == addr.port() && l.addr.is_ipv4() == addr.is_ipv4())
        {
            return Err(ConfigError::Invalid(format!(
                "Each listener must have a different port, listeners: {value}"
            )));
        }
        out.push(Listener {
            name: Arc::from(name),
            addr,
            advertised: Advertised::Bound,
            security_protocol,
        });
    }
    Ok(out)
}

/// `host:port` of a `listeners` entry as an address to bind: an empty host is every
/// interface, `localhost` the loopback address.
fn bind_address(host_port: &str) -> Option<SocketAddr> {
    let (host, port) = host_port.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = match host {
        "" => "0.0.0.0",
        "localhost" => "127.0.0.1",
        h => h,
    };
    let ip: std::net::IpAddr = host.parse().ok()?;
    Some(SocketAddr::new(ip, port.parse().ok()?))
}

/// Applies `advertised.listeners` (Kafka's `advertisedListeners`): when it is set, only the
/// names it lists are advertised, at the host and port it gives; its names must be broker
/// listeners (entries for controller listeners are the controller's).
fn advertise(
    mut broker: Vec<Listener>,
    value: &str,
    map: &BTreeMap<String, SecurityProtocol>,
) -> Result<Vec<Listener>, ConfigError> {
    const KEY: &str = "advertised.listeners";
    if value.is_empty() {
        return Ok(broker);
    }
    for l in &mut broker {
        l.advertised = Advertised::No;
    }
    for entry in csv(value) {
        let name = listener_name_of(entry).to_ascii_uppercase();
        if !map.contains_key(&name) {
            return Err(ConfigError::Invalid(format!(
                "Error creating broker listeners from '{value}': No security protocol defined for listener {name}"
            )));
        }
        let host_port = entry.split_once("://").map_or(entry, |(_, a)| a);
        let (host, port) = host_port
            .rsplit_once(':')
            .ok_or_else(|| invalid(KEY, value, "expected NAME://HOST:PORT entries"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host == "0.0.0.0" {
            return Err(invalid(
                KEY,
                value,
                "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.",
            ));
        }
        let port: u16 = port
            .trim()
            .parse()
            .map_err(|_| invalid(KEY, value, "not a port number"))?;
        match broker.iter_mut().find(|l| *l.name == *name) {
            Some(l) => l.advertised = Advertised::At(host.to_string(), port),
            None => {
                return Err(ConfigError::Invalid(format!(
                    "advertised.listeners listener names must be equal to or a subset of the ones \
                     defined in listeners. Found {name}"
                )))
            }
        }
    }
    Ok(broker)
}

/// Kafka's `getInterBrokerListenerNameAndSecurityProtocol`: `inter.broker.listener.name`, or
/// the listener named after `security.inter.broker.protocol` (PLAINTEXT by default); not both.
fn inter_broker_listener_name(
    values: &BTreeMap<String, String>,
    explicit: &BTreeSet<String>,
    map: &BTreeMap<String, SecurityProtocol>,
) -> Result<Arc<str>, ConfigError> {
    let name = values
        .get("inter.broker.listener.name")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty());
    match name {
        Some(_) if explicit.contains("security.inter.broker.protocol") => {
            Err(ConfigError::Invalid(
                "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."
                    .into(),
            ))
        }
        Some(n) => {
            let n = n.to_ascii_uppercase();
            if !map.contains_key(&n) {
                return Err(ConfigError::Invalid(format!(
                    "Listener with name {n} defined in inter.broker.listener.name not found in listener.security.protocol.map."
                )));
            }
            Ok(Arc::from(n))
        }
        None => {
            let p = values
                .get("security.inter.broker.protocol")
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .unwrap_or("PLAINTEXT");
            let protocol = SecurityProtocol::parse(p).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "Invalid security protocol `{p}` defined in security.inter.broker.protocol"
                ))
            })?;
            Ok(Arc::from(protocol.name()))
        }
    }
}

/// Whether `key` is a `listener.name.<listener>.<setting>` key Kafka accepts: the setting is
/// a broker key, or a SASL key scoped to a mechanism (`<mechanism>.sasl.jaas.config`,
/// `<mechanism>.connections.max.reauth.ms`).
pub fn is_listener_prefixed_key(key: &str, is_broker_key: impl Fn(&str) -> bool) -> bool {
    let Some(rest) = key.strip_prefix("listener.name.") else {
        return false;
    };
    let Some((listener, setting)) = rest.split_once('.') else {
        return false;
    };
    if listener.is_empty() {
        return false;
    }
    if is_broker_key(setting) {
        return true;
    }
    match setting.split_once('.') {
        Some((mechanism, sasl)) => {
            let scoped = sasl.starts_with("sasl.") || sasl == "connections.max.reauth.ms";
            !mechanism.is_empty() && scoped && is_broker_key(sasl)
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_kv(kv: &[(&str, &str)]) -> Result<Listeners, ConfigError> {
        let values: BTreeMap<String, String> = kv
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let explicit = values.keys().cloned().collect();
        parse(&values, &explicit)
    }

    #[test]
    fn named_listeners_take_protocols_from_the_map() {
        let l = parse_kv(&[
            (
                "listeners",
                "CLIENT://127.0.0.1:9092,REPLICATION://:9093,CONTROLLER://localhost:9094",
            ),
            (
                "listener.security.protocol.map",
                "CLIENT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT",
            ),
            ("inter.broker.listener.name", "replication"),
            ("controller.listener.names", "CONTROLLER"),
            (
                "advertised.listeners",
                "CLIENT://broker1:19092,REPLICATION://10.0.0.1:9093",
            ),
        ])
        .unwrap();
        assert_eq!(l.broker.len(), 2);
        assert_eq!(
            l.broker[0].security_protocol,
            SecurityProtocol::SaslPlaintext
        );
        assert_eq!(
            l.broker[0].advertised,
            Advertised::At("broker1".into(), 19092)
        );
        assert_eq!(l.broker[1].addr, "0.0.0.0:9093".parse().unwrap());
        assert_eq!(&*l.inter_broker, "REPLICATION");
        assert_eq!(l.controller.unwrap().addr.port(), 9094);
        assert_eq!(l.broker[0].config_prefix(), "listener.name.client.");
    }

    #[test]
    fn kafkas_validation_messages() {
        let e = parse_kv(&[("listeners", "FOO://127.0.0.1:1")]).unwrap_err();
        assert!(
            e.to_string()
                .contains("No security protocol defined for listener FOO"),
            "{e}"
        );
        let e = parse_kv(&[
            ("listeners", "PLAINTEXT://127.0.0.1:1"),
            ("inter.broker.listener.name", "PLAINTEXT"),
            ("security.inter.broker.protocol", "PLAINTEXT"),
        ])
        .unwrap_err();
        assert!(e.to_string().starts_with("Only one of"), "{e}");
        let e =
            parse_kv(&[("listeners", "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:1")]).unwrap_err();
        assert!(e.to_string().contains("different port"), "{e}");
        let e = parse_kv(&[("listeners", "SASL_PLAINTEXT://127.0.0.1:1")]).unwrap_err();
        assert!(
            e.to_string().contains("inter.broker.listener.name must be"),
            "{e}"
        );
        let l = parse_kv(&[
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:1"),
            ("security.inter.broker.protocol", "SASL_PLAINTEXT"),
        ])
        .unwrap();
        assert_eq!(&*l.inter_broker, "SASL_PLAINTEXT");
    }

    #[test]
    fn the_default_map_adds_plaintext_controllers_unless_security_is_in_use() {
        let kraft = [
            ("listeners", "PLAINTEXT://127.0.0.1:1,CTRL://127.0.0.1:2"),
            ("controller.listener.names", "CTRL"),
        ];
        let l = parse_kv(&kraft).unwrap();
        assert_eq!(
            l.controller.unwrap().security_protocol,
            SecurityProtocol::Plaintext
        );
        let e = parse_kv(&[
            (
                "listeners",
                "SASL_PLAINTEXT://127.0.0.1:1,CTRL://127.0.0.1:2",
            ),
            ("controller.listener.names", "CTRL"),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("listener CTRL"), "{e}");
    }

    #[test]
    fn an_unlisted_listener_is_not_advertised() {
        let l = parse_kv(&[
            ("listeners", "PLAINTEXT://127.0.0.1:1,OTHER://127.0.0.1:2"),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            ),
            ("advertised.listeners", "PLAINTEXT://h:1"),
        ])
        .unwrap();
        assert_eq!(l.broker[1].advertised, Advertised::No);
    }

    #[test]
    fn prefixed_keys() {
        let known = |k: &str| matches!(k, "sasl.jaas.config" | "sasl.enabled.mechanisms");
        assert!(is_listener_prefixed_key(
            "listener.name.client.sasl.enabled.mechanisms",
            known
        ));
        assert!(is_listener_prefixed_key(
            "listener.name.client.plain.sasl.jaas.config",
            known
        ));
        assert!(is_listener_prefixed_key(
            "listener.name.client.scram-sha-256.sasl.jaas.config",
            known
        ));
        assert!(!is_listener_prefixed_key(
            "listener.name.client.bogus",
            known
        ));
        assert!(!is_listener_prefixed_key(
            "listener.name..sasl.jaas.config",
            known
        ));
    }
}
