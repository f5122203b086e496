//! The SASL exchange of a SASL_PLAINTEXT connection, as Kafka's `SaslServerAuthenticator`
//! runs it: before authentication only ApiVersions (once), SaslHandshake (v0, v1) and then
//! SaslAuthenticate (v0-v2; v0 handshakes carry raw tokens) are served; anything else fails
//! the authentication. A failed authentication is answered (when Kafka answers) after
//! `connection.failed.authentication.delay.ms`, and the connection closed. KIP-368: with
//! `connections.max.reauth.ms`, SaslAuthenticate v1+ tells the session lifetime, a request
//! after it closes the connection, and a SaslHandshake after authentication re-authenticates
//! (the principal and mechanism must not change).
//!
//! Mechanisms: PLAIN (Kafka's `PlainSaslServer` with `PlainServerCallbackHandler`'s
//! `user_<name>` JAAS options), SCRAM-SHA-256/512 ([`super::scram`], credentials from the
//! metadata image) and OAUTHBEARER ([`super::oauthbearer`], unsecured JWS tokens, whose expiry
//! also bounds the session).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;

use super::jaas::{self, JaasEntry};
use super::jwks::{self, JwtValidator, JwtValidatorConfig};
use super::oauthbearer::{
    self, OAuthBearerServer, TokenValidator, UnsecuredLogin, UnsecuredValidator, OAUTHBEARER,
};
use super::scram::{ScramCredential, ScramMechanism, ScramServer};
use super::KafkaPrincipal;
use crate::config::{BrokerConfig, ConfigError};
use crate::listeners::Listener;
use crate::net::codec::{decode_header, encode_response, peek_prefix, CodecError};

/// `PLAIN`.
pub const PLAIN: &str = "PLAIN";
/// The mechanisms Brook serves.
pub const SUPPORTED_MECHANISMS: &[&str] = &[PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER];
/// Kafka's `SaslAuthenticate` versions (0-2) and `SaslHandshake` versions (0-1).
pub const SASL_AUTHENTICATE_VERSION_MAX: i16 = 2;
pub const SASL_HANDSHAKE_VERSION_MAX: i16 = 1;
/// Kafka's `KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS`.
pub const REAUTH_INTERVAL_MIN: Duration = Duration::from_secs(1);

/// A listener's SASL settings, read once at start-up.
#[derive(Debug, Clone)]
pub struct SaslServerConfig {
    /// `sasl.enabled.mechanisms` for the listener, in order (the handshake answers them).
    pub enabled_mechanisms: Vec<String>,
    /// PLAIN's `user_<name>` passwords.
    pub plain_users: BTreeMap<String, String>,
    /// OAUTHBEARER's token validator, when the mechanism is enabled.
    pub oauthbearer: Option<Arc<TokenValidator>>,
    /// `connection.failed.authentication.delay.ms`.
    pub failed_authentication_delay: Duration,
    /// `connections.max.reauth.ms` by mechanism, when positive: the listener's
    /// `<mechanism>.connections.max.reauth.ms`, else its `connections.max.reauth.ms` (Kafka's
    /// `SaslChannelBuilder.createConnectionsMaxReauthMsMap`).
    pub max_reauth: BTreeMap<String, Duration>,
}

impl SaslServerConfig {
    /// The settings of SASL listener `l`; Kafka's start-up errors for what is missing
    /// (a mechanism without a JAAS login module, an unknown mechanism).
    pub fn for_listener(cfg: &BrokerConfig, l: &Listener) -> Result<SaslServerConfig, ConfigError> {
        let get = |k: &str| cfg.listener_value(&l.name, k).unwrap_or_default();
        let enabled_mechanisms: Vec<String> = get("sasl.enabled.mechanisms")
            .split(',')
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect();
        if enabled_mechanisms.is_empty() {
            return Err(ConfigError::Invalid(format!(
                "No SASL mechanisms are enabled on listener {}",
                l.name
            )));
        }
        let mut plain_users = BTreeMap::new();
        let mut oauthbearer = None;
        for m in &enabled_mechanisms {
            if !SUPPORTED_MECHANISMS.contains(&m.as_str()) {
                return Err(ConfigError::Invalid(format!(
                    "SASL mechanism {m} enabled on listener {} is not served by Brook (it serves {})",
                    l.name,
                    SUPPORTED_MECHANISMS.join(", ")
                )));
            }
            let entry = listener_jaas_entry(cfg, &l.name, m)?;
            if m == PLAIN {
                plain_users = entry.plain_users();
            }
            if m == OAUTHBEARER {
                oauthbearer = Some(Arc::new(oauthbearer_validator(cfg, &l.name, &entry)?));
            }
        }
        let delay_ms: i64 = get("connection.failed.authentication.delay.ms")
            .parse()
            .map_err(|_| invalid_number("connection.failed.authentication.delay.ms"))?;
        let mut max_reauth = BTreeMap::new();
        for m in &enabled_mechanisms {
            let key = format!("{}.connections.max.reauth.ms", m.to_ascii_lowercase());
            let prefixed = format!("{}{key}", l.config_prefix());
            let (key, value) = match cfg.values.get(&prefixed) {
                Some(v) => (prefixed, v.clone()),
                None => (
                    "connections.max.reauth.ms".into(),
                    get("connections.max.reauth.ms"),
                ),
            };
            let ms: i64 = value.trim().parse().map_err(|_| invalid_number(&key))?;
            if ms > 0 {
                max_reauth.insert(m.clone(), Duration::from_millis(ms as u64));
            }
        }
        Ok(SaslServerConfig {
            enabled_mechanisms,
            plain_users,
            oauthbearer,
            failed_authentication_delay: Duration::from_millis(delay_ms.max(0) as u64),
            max_reauth,
        })
    }
}

/// The listener's OAUTHBEARER validator, by its server callback handler class: Kafka's default
/// unsecured one, or `OAuthBearerValidatorCallbackHandler` (signed tokens, a JWKS). Another
/// class is refused: Brook would otherwise accept tokens that the configured handler refuses.
fn oauthbearer_validator(
    cfg: &BrokerConfig,
    listener: &str,
    entry: &JaasEntry,
) -> Result<TokenValidator, ConfigError> {
    broker_login_token(cfg, listener, entry)?;
    let key = format!(
        "{}oauthbearer.{}",
        crate::listeners::config_prefix(listener),
        oauthbearer::SERVER_CALLBACK_HANDLER_CLASS
    );
    match cfg.values.get(&key).map(|v| v.trim()) {
        None | Some("") | Some(oauthbearer::UNSECURED_VALIDATOR_CALLBACK_HANDLER) => {}
        Some(jwks::VALIDATOR_CALLBACK_HANDLER) => {
            let kafka_opts = std::env::var("KAFKA_OPTS").unwrap_or_default();
            let mut c = jwt_validator_config(cfg, listener, &kafka_opts)?;
            c.jaas_options = entry.options.clone();
            return JwtValidator::new(&c)
                .map(TokenValidator::Jwks)
                .map_err(ConfigError::Invalid);
        }
        Some(other) => {
            return Err(ConfigError::Invalid(format!(
                "{key}={other} is not served by Brook: OAUTHBEARER tokens are checked by {} or {}",
                oauthbearer::UNSECURED_VALIDATOR_CALLBACK_HANDLER,
                jwks::VALIDATOR_CALLBACK_HANDLER
            )))
        }
    }
    UnsecuredValidator::from_jaas(entry)
        .map(TokenValidator::Unsecured)
        .map_err(|e| {
            ConfigError::Invalid(format!(
                "listener.name.{}.oauthbearer.sasl.jaas.config: {e}",
                listener.to_ascii_lowercase()
            ))
        })
}

/// Kafka logs the broker in on every OAUTHBEARER listener at start-up (`LoginManager`). Its
/// default login callback handler, `OAuthBearerUnsecuredLoginCallbackHandler`, makes no token
/// when the login module has no options, and otherwise makes one, which fails start-up
/// without a principal claim ("No principal name in JWT claim: sub"): so does Brook's.
fn broker_login_token(
    cfg: &BrokerConfig,
    listener: &str,
    entry: &JaasEntry,
) -> Result<(), ConfigError> {
    let handler = format!(
        "{}oauthbearer.sasl.login.callback.handler.class",
        crate::listeners::config_prefix(listener)
    );
    let custom = [handler.as_str(), "sasl.login.callback.handler.class"]
        .iter()
        .any(|k| cfg.values.get(*k).is_some_and(|v| !v.trim().is_empty()));
    if entry.options.is_empty() || custom {
        return Ok(());
    }
    UnsecuredLogin::from_jaas(entry).map(|_| ()).map_err(|e| {
        ConfigError::Invalid(format!(
            "listener.name.{}.oauthbearer.sasl.jaas.config: {e}",
            listener.to_ascii_lowercase()
        ))
    })
}

/// The `sasl.oauthbearer.*` settings of `listener`: the listener's value
/// (`listener.name.<l>.<key>`), else the broker's, else Kafka's default, as Kafka's
/// `ChannelBuilders.channelBuilderConfigs` hands them to the handler. `kafka_opts` carries the
/// URL allow-list system property.
fn jwt_validator_config(
    cfg: &BrokerConfig,
    listener: &str,
    kafka_opts: &str,
) -> Result<JwtValidatorConfig, ConfigError> {
    let get = |k: &str| {
        cfg.listener_value(listener, k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let boolean = |k: &str| get(k).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    // A LONG key, else Kafka's default for it (kafka_broker_keys.tsv).
    let long = |k: &str| {
        let kafka_default = || crate::config_def::kafka_broker_key(k).and_then(|d| d.default);
        let value = get(k).or_else(|| kafka_default().map(str::to_string));
        value
            .unwrap_or_default()
            .parse::<i64>()
            .map_err(|_| invalid_number(k))
    };
    let skew_key = "sasl.oauthbearer.clock.skew.seconds";
    let clock_skew_seconds = match get(skew_key) {
        None => 30,
        Some(v) => v
            .parse::<i32>()
            .map_err(|_| invalid_number(skew_key))?
            .into(),
    };
    Ok(JwtValidatorConfig {
        jwks_endpoint_url: get(jwks::JWKS_ENDPOINT_URL),
        // Kafka's LIST type: comma-separated, items trimmed, empty items dropped.
        expected_audience: get("sasl.oauthbearer.expected.audience")
            .map(|v| {
                v.split(',')
                    .map(|a| a.trim().to_string())
                    .filter(|a| !a.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        allow_unverified_audience: boolean("sasl.oauthbearer.allow.unverified.audience"),
        expected_issuer: get("sasl.oauthbearer.expected.issuer"),
        allow_unverified_issuer: boolean("sasl.oauthbearer.allow.unverified.issuer"),
        clock_skew_seconds,
        scope_claim_name: get("sasl.oauthbearer.scope.claim.name").unwrap_or("scope".into()),
        sub_claim_name: get("sasl.oauthbearer.sub.claim.name").unwrap_or("sub".into()),
        allowed_urls: jwks::system_property(kafka_opts, jwks::ALLOWED_URLS_PROPERTY),
        jwks_refresh_ms: long("sasl.oauthbearer.jwks.endpoint.refresh.ms")?,
        jwks_retry_backoff_ms: long("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")?,
        jwks_retry_backoff_max_ms: long("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")?,
        jaas_options: BTreeMap::new(),
    })
}

fn invalid_number(key: &str) -> ConfigError {
    ConfigError::Invalid(format!(
        "Invalid value for configuration {key}: not a number"
    ))
}

/// The one login module of `listener.name.<l>.<mechanism>.sasl.jaas.config`, which Kafka
/// requires for every enabled mechanism (without a JAAS file, which Brook does not read).
pub fn listener_jaas_entry(
    cfg: &BrokerConfig,
    listener: &str,
    mechanism: &str,
) -> Result<JaasEntry, ConfigError> {
    let Some(text) = cfg.listener_jaas_config(listener, mechanism) else {
        return Err(ConfigError::Invalid(format!(
            "Could not find a 'KafkaServer' or '{}.KafkaServer' entry in the JAAS configuration. \
             System property 'java.security.auth.login.config' is not set \
             (Brook reads listener.name.{}.{}.sasl.jaas.config)",
            listener.to_ascii_lowercase(),
            listener.to_ascii_lowercase(),
            mechanism.to_ascii_lowercase()
        )));
    };
    jaas::parse(text).map_err(|e| {
        ConfigError::Invalid(format!(
            "listener.name.{}.{}.sasl.jaas.config: {e}",
            listener.to_ascii_lowercase(),
            mechanism.to_ascii_lowercase()
        ))
    })
}

/// The broker's own credentials on the inter-broker listener when it speaks SASL:
/// `sasl.mechanism.inter.broker.protocol` and the `username`/`password` of that mechanism's
/// JAAS login module on the listener (what Kafka's inter-broker clients log in with), or for
/// OAUTHBEARER the unsecured token its `unsecuredLogin*` options describe.
#[derive(Debug, Clone)]
pub struct InterBrokerSasl {
    pub mechanism: String,
    pub username: String,
    pub password: String,
    /// OAUTHBEARER's token maker (then `username` and `password` are empty).
    pub oauthbearer: Option<UnsecuredLogin>,
}

impl InterBrokerSasl {
    /// `None` unless the inter-broker listener uses SASL.
    pub fn from_config(cfg: &BrokerConfig) -> Result<Option<InterBrokerSasl>, ConfigError> {
        let l = cfg.listeners.inter_broker_listener();
        if !l.security_protocol.uses_sasl() {
            return Ok(None);
        }
        let enabled = cfg
            .sasl
            .get(&l.name)
            .map(|c| c.enabled_mechanisms.clone())
            .unwrap_or_default();
        let mechanism = cfg
            .values
            .get("sasl.mechanism.inter.broker.protocol")
            .cloned()
            .unwrap_or_default();
        if !enabled.contains(&mechanism) {
            return Err(ConfigError::Invalid(format!(
                "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms \
                 when SASL is used for inter-broker communication (it is {mechanism}; listener {} enables {})",
                l.name,
                enabled.join(",")
            )));
        }
        Self::for_listener(cfg, &l.name, mechanism).map(Some)
    }

    /// The credentials of `mechanism`'s JAAS login module on listener `listener`.
    pub fn for_listener(
        cfg: &BrokerConfig,
        listener: &str,
        mechanism: String,
    ) -> Result<InterBrokerSasl, ConfigError> {
        let entry = listener_jaas_entry(cfg, listener, &mechanism)?;
        if mechanism == OAUTHBEARER {
            let login = UnsecuredLogin::from_jaas(&entry).map_err(|e| {
                ConfigError::Invalid(format!(
                    "listener.name.{}.oauthbearer.sasl.jaas.config: {e}",
                    listener.to_ascii_lowercase()
                ))
            })?;
            return Ok(InterBrokerSasl {
                mechanism,
                username: String::new(),
                password: String::new(),
                oauthbearer: Some(login),
            });
        }
        let option = |k: &str| {
            entry.option(k).map(str::to_string).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "listener.name.{}.{}.sasl.jaas.config has no {k}, which the node's own \
                     connections to the listener authenticate with",
                    listener.to_ascii_lowercase(),
                    mechanism.to_ascii_lowercase()
                ))
            })
        };
        Ok(InterBrokerSasl {
            username: option("username")?,
            password: option("password")?,
            mechanism,
            oauthbearer: None,
        })
    }
}

/// What a mechanism's server made of one client token.
#[derive(Debug)]
pub enum Evaluated {
    /// Send this challenge; more tokens are expected.
    Challenge(Vec<u8>),
    /// Authenticated as this authorization id; send the last token.
    Complete(Vec<u8>, String),
}

/// Why a token was refused.
#[derive(Debug)]
pub enum SaslError {
    /// Kafka's `SaslAuthenticationException`: the client is told this message.
    Authentication(String),
    /// Kafka's `SaslException`: the client is told only that the credentials were invalid.
    Invalid(String),
    /// Kafka's `IllegalSaslStateException` raised by a mechanism.
    IllegalState(String),
    /// An unexpected exception in Kafka's mechanism: the connection closes without an answer.
    Unexpected(String),
}

/// Kafka's `PlainSaslServer.evaluateResponse`: `[authzid] NUL authcid NUL passwd`.
fn evaluate_plain(token: &[u8], users: &BTreeMap<String, String>) -> Result<Evaluated, SaslError> {
    let text = String::from_utf8_lossy(token);
    let tokens: Vec<&str> = text.splitn(4, '\0').collect();
    if tokens.len() != 3 {
        return Err(SaslError::Authentication(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            tokens.len()
        )));
    }
    let (authz, username, password) = (tokens[0], tokens[1], tokens[2]);
    if username.is_empty() {
        return Err(SaslError::Authentication(
            "Authentication failed: username not specified".into(),
        ));
    }
    if password.is_empty() {
        return Err(SaslError::Authentication(
            "Authentication failed: password not specified".into(),
        ));
    }
    let ok = users.get(username).is_some_and(|expected| {
        use subtle::ConstantTimeEq;
        bool::from(expected.as_bytes().ct_eq(password.as_bytes()))
    });
    if !ok {
        return Err(SaslError::Authentication(
            "Authentication failed: Invalid username or password".into(),
        ));
    }
    if !authz.is_empty() && authz != username {
        return Err(SaslError::Authentication(
            "Authentication failed: Client requested an authorization id that is different from username".into(),
        ));
    }
    Ok(Evaluated::Complete(Vec::new(), username.to_string()))
}

/// The server of the mechanism chosen in the handshake.
enum MechanismServer {
    Plain,
    Scram(ScramServer),
    OAuthBearer(OAuthBearerServer),
}

/// Kafka's `SaslServerAuthenticator.SaslState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    InitialRequest,
    HandshakeOrVersionsRequest,
    HandshakeRequest,
    Authenticate,
    /// Re-authentication asked for a different mechanism: the next token fails.
    ReauthBadMechanism,
    Complete,
}

/// What the connection does with one frame.
pub enum SaslStep {
    /// Write this frame and read the next.
    Respond(Bytes),
    /// Pass the frame to the request handlers (ApiVersions before the handshake).
    Serve,
    /// Authenticated: write this frame; the connection now speaks for `principal`.
    Complete {
        response: Bytes,
        principal: KafkaPrincipal,
    },
    /// The authentication failed: after the delay, write the response if any, and close.
    Fail {
        response: Option<Bytes>,
        reason: String,
    },
    /// The authentication failed on a request other than the exchange's: as `Fail`, answered
    /// with that request's own error response carrying ILLEGAL_SASL_STATE (Kafka's
    /// `AbstractRequest.getErrorResponse`), which the request handlers build.
    FailUnexpectedRequest { frame: Bytes, reason: String },
    /// Close at once (Kafka's unexpected exceptions: malformed frames, a second ApiVersions).
    Close(String),
}

/// One connection's SASL state (Kafka's `SaslServerAuthenticator` and the re-authentication
/// part of `KafkaChannel`).
pub struct SaslAuthenticator {
    config: Arc<SaslServerConfig>,
    state: State,
    mechanism: Option<String>,
    server: Option<MechanismServer>,
    /// SaslHandshake v1: tokens come in SaslAuthenticate requests.
    kafka_headers: bool,
    /// A SaslAuthenticate above v0 was seen (Kafka's `connectedClientSupportsReauthentication`).
    client_supports_reauth: bool,
    /// When the authenticated session ends (KIP-368); `None` without `connections.max.reauth.ms`.
    session_expiry: Option<Instant>,
    last_reauth_start: Option<Instant>,
    /// The principal and mechanism being re-authenticated, which must not change.
    reauth: Option<(KafkaPrincipal, String)>,
}

/// Looks a SCRAM credential up (the metadata image's).
pub type CredentialLookup<'a> = &'a dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>;

impl SaslAuthenticator {
    pub fn new(config: Arc<SaslServerConfig>) -> SaslAuthenticator {
        SaslAuthenticator {
            config,
            state: State::InitialRequest,
            mechanism: None,
            server: None,
            kafka_headers: false,
            client_supports_reauth: false,
            session_expiry: None,
            last_reauth_start: None,
            reauth: None,
        }
    }

    /// Whether the client has authenticated (and is not re-authenticating).
    pub fn complete(&self) -> bool {
        self.state == State::Complete
    }

    /// Whether the exchange under way re-authenticates an authenticated connection.
    pub fn reauthenticating(&self) -> bool {
        self.reauth.is_some()
    }

    /// How long to wait before answering a failed authentication.
    pub fn failed_authentication_delay(&self) -> Duration {
        self.config.failed_authentication_delay
    }

    /// Whether the authenticated session has expired (Kafka's
    /// `KafkaChannel.serverAuthenticationSessionExpired`).
    pub fn session_expired(&self, now: Instant) -> bool {
        self.session_expiry.is_some_and(|e| now >= e)
    }

    /// Whether `frame`, arriving after authentication, starts a re-authentication (Kafka's
    /// `KafkaChannel.maybeBeginServerReauthentication`): a SaslHandshake, with a session
    /// lifetime set, at most once a second. Otherwise the request handlers answer it.
    pub fn begins_reauthentication(&mut self, frame: &Bytes, principal: &KafkaPrincipal) -> bool {
        if self.state != State::Complete || self.session_expiry.is_none() {
            return false;
        }
        if peek_prefix(frame).api_key != ApiKey::SaslHandshake as i16 {
            return false;
        }
        let now = Instant::now();
        if self
            .last_reauth_start
            .is_some_and(|t| now.duration_since(t) < REAUTH_INTERVAL_MIN)
        {
            return false;
        }
        self.last_reauth_start = Some(now);
        self.reauth = Some((
            principal.clone(),
            self.mechanism.clone().unwrap_or_default(),
        ));
        self.state = State::HandshakeRequest;
        true
    }

    /// Handles one frame before authentication completes.
    pub fn handle(&mut self, frame: Bytes, lookup: CredentialLookup<'_>) -> SaslStep {
        match self.state {
            State::InitialRequest | State::HandshakeOrVersionsRequest | State::HandshakeRequest => {
                self.handle_kafka_request(frame)
            }
            State::ReauthBadMechanism => SaslStep::Fail {
                response: None,
                reason: "re-authentication changed the SASL mechanism".into(),
            },
            State::Authenticate if self.kafka_headers => self.handle_authenticate(frame, lookup),
            State::Authenticate => self.handle_raw_token(&frame, lookup),
            State::Complete => SaslStep::Serve,
        }
    }

    /// Kafka's `handleKafkaRequest`: ApiVersions or SaslHandshake.
    fn handle_kafka_request(&mut self, frame: Bytes) -> SaslStep {
        let prefix = peek_prefix(&frame);
        let key = match ApiKey::try_from(prefix.api_key) {
            Ok(k) => k,
            // Not a Kafka request: Kafka would take it for a GSSAPI token, which Brook
            // does not serve (nor does a listener without GSSAPI in Kafka).
            Err(_) if self.state == State::InitialRequest => {
                return SaslStep::Fail {
                    response: None,
                    reason: "Exception handling first SASL packet from client, GSSAPI is not supported by server".into(),
                }
            }
            Err(_) => return SaslStep::Close(format!("unknown API key {}", prefix.api_key)),
        };
        if self.state == State::InitialRequest {
            self.state = State::HandshakeOrVersionsRequest;
        }
        match key {
            ApiKey::ApiVersions if self.state == State::HandshakeOrVersionsRequest => {
                self.state = State::HandshakeRequest;
                SaslStep::Serve
            }
            ApiKey::ApiVersions => SaslStep::Close(
                "Unexpected ApiVersions request received during SASL authentication".into(),
            ),
            ApiKey::SaslHandshake => self.handle_handshake(frame),
            other => SaslStep::Fail {
                response: None,
                reason: format!(
                    "Unexpected Kafka request of type {} during SASL handshake.",
                    kafka_api_name(other)
                ),
            },
        }
    }

    /// Kafka's `handleHandshakeRequest`.
    fn handle_handshake(&mut self, frame: Bytes) -> SaslStep {
        let (version, correlation_id, req) =
            match decode_request::<SaslHandshakeRequest>(frame, SASL_HANDSHAKE_VERSION_MAX) {
                Ok(r) => r,
                Err(e) => return SaslStep::Close(e.to_string()),
            };
        let mechanism = req.mechanism.to_string();
        let enabled = &self.config.enabled_mechanisms;
        let answer = |code: i16| {
            let resp = SaslHandshakeResponse::default()
                .with_error_code(code)
                .with_mechanisms(
                    enabled
                        .iter()
                        .map(|m| StrBytes::from_string(m.clone()))
                        .collect(),
                );
            encode_response(ApiKey::SaslHandshake, version, correlation_id, &resp)
        };
        if !enabled.contains(&mechanism) {
            let code = ResponseError::UnsupportedSaslMechanism.code();
            return match answer(code) {
                Ok(r) => SaslStep::Fail {
                    response: Some(r),
                    reason: format!("Unsupported SASL mechanism {mechanism}"),
                },
                Err(e) => SaslStep::Close(e.to_string()),
            };
        }
        let response = match answer(0) {
            Ok(r) => r,
            Err(e) => return SaslStep::Close(e.to_string()),
        };
        self.kafka_headers = version >= 1;
        if let Some((_, previous)) = &self.reauth {
            if *previous != mechanism {
                self.state = State::ReauthBadMechanism;
                return SaslStep::Respond(response);
            }
        }
        self.server = Some(
            match (
                ScramMechanism::from_name(&mechanism),
                &self.config.oauthbearer,
            ) {
                (Some(m), _) => MechanismServer::Scram(ScramServer::new(m)),
                (None, Some(v)) if mechanism == OAUTHBEARER => {
                    MechanismServer::OAuthBearer(OAuthBearerServer::new(v.clone()))
                }
                (None, _) => MechanismServer::Plain,
            },
        );
        self.mechanism = Some(mechanism);
        self.state = State::Authenticate;
        SaslStep::Respond(response)
    }

    /// One token through the chosen mechanism.
    fn evaluate(
        &mut self,
        token: &[u8],
        lookup: CredentialLookup<'_>,
    ) -> Result<Evaluated, SaslError> {
        match &mut self.server {
            Some(MechanismServer::Plain) => evaluate_plain(token, &self.config.plain_users),
            Some(MechanismServer::Scram(s)) => s.evaluate(token, lookup),
            Some(MechanismServer::OAuthBearer(s)) => s.evaluate(token),
            None => Err(SaslError::IllegalState("no SASL mechanism chosen".into())),
        }
    }

    /// Kafka's `handleSaslToken` with SaslAuthenticate headers (handshake v1).
    fn handle_authenticate(&mut self, frame: Bytes, lookup: CredentialLookup<'_>) -> SaslStep {
        let prefix = peek_prefix(&frame);
        if prefix.api_key != ApiKey::SaslAuthenticate as i16 {
            let name = ApiKey::try_from(prefix.api_key)
                .map(kafka_api_name)
                .unwrap_or_else(|_| format!("{}", prefix.api_key));
            let reason =
                format!("Unexpected Kafka request of type {name} during SASL authentication.");
            return match illegal_state_response(&frame) {
                Some(r) => SaslStep::Fail {
                    response: Some(r),
                    reason,
                },
                None => SaslStep::FailUnexpectedRequest { frame, reason },
            };
        }
        let (version, correlation_id, req) =
            match decode_request::<SaslAuthenticateRequest>(frame, SASL_AUTHENTICATE_VERSION_MAX) {
                Ok(r) => r,
                Err(e) => return SaslStep::Close(e.to_string()),
            };
        self.client_supports_reauth |= version > 0;
        let answer = |code: i16, message: Option<String>, bytes: Vec<u8>, lifetime_ms: i64| {
            let resp = SaslAuthenticateResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
                .with_auth_bytes(Bytes::from(bytes))
                .with_session_lifetime_ms(lifetime_ms);
            encode_response(ApiKey::SaslAuthenticate, version, correlation_id, &resp)
        };
        let result = self.evaluate(&req.auth_bytes, lookup);
        let step = match result {
            Ok(Evaluated::Challenge(bytes)) => answer(0, None, bytes, 0).map(SaslStep::Respond),
            Ok(Evaluated::Complete(bytes, user)) => match self.finish(user) {
                Ok((principal, lifetime_ms)) => {
                    answer(0, None, bytes, lifetime_ms).map(|response| SaslStep::Complete {
                        response,
                        principal,
                    })
                }
                Err(message) => self.fail_with(answer, message),
            },
            Err(SaslError::Authentication(message)) => self.fail_with(answer, message),
            Err(SaslError::Invalid(why)) => {
                tracing::debug!(%why, "SASL authentication failed");
                let message = format!(
                    "Authentication failed during {} due to invalid credentials with SASL mechanism {}",
                    self.authentication_text(),
                    self.mechanism.as_deref().unwrap_or_default()
                );
                self.fail_with(answer, message)
            }
            Err(SaslError::IllegalState(why)) => Ok(SaslStep::Fail {
                response: None,
                reason: why,
            }),
            Err(SaslError::Unexpected(why)) => Ok(SaslStep::Close(why)),
        };
        step.unwrap_or_else(|e| SaslStep::Close(e.to_string()))
    }

    fn fail_with(
        &self,
        answer: impl Fn(i16, Option<String>, Vec<u8>, i64) -> Result<Bytes, CodecError>,
        message: String,
    ) -> Result<SaslStep, CodecError> {
        let code = ResponseError::SaslAuthenticationFailed.code();
        Ok(SaslStep::Fail {
            response: Some(answer(code, Some(message.clone()), Vec::new(), 0)?),
            reason: message,
        })
    }

    /// Kafka's `handleSaslToken` without headers (handshake v0): raw size-prefixed tokens;
    /// a failure cannot be told, only closed.
    fn handle_raw_token(&mut self, frame: &Bytes, lookup: CredentialLookup<'_>) -> SaslStep {
        let framed = |bytes: Vec<u8>| {
            let mut b = BytesMut::with_capacity(bytes.len() + 4);
            b.put_i32(bytes.len() as i32);
            b.extend_from_slice(&bytes);
            b.freeze()
        };
        match self.evaluate(frame, lookup) {
            Ok(Evaluated::Challenge(bytes)) => SaslStep::Respond(framed(bytes)),
            Ok(Evaluated::Complete(bytes, user)) => match self.finish(user) {
                Ok((principal, _)) => SaslStep::Complete {
                    response: if bytes.is_empty() {
                        Bytes::new()
                    } else {
                        framed(bytes)
                    },
                    principal,
                },
                Err(reason) => SaslStep::Fail {
                    response: None,
                    reason,
                },
            },
            Err(SaslError::Unexpected(m)) => SaslStep::Close(m),
            Err(
                SaslError::Authentication(m) | SaslError::Invalid(m) | SaslError::IllegalState(m),
            ) => SaslStep::Fail {
                response: None,
                reason: m,
            },
        }
    }

    /// The end of a successful exchange: the principal, the session's lifetime, and on
    /// re-authentication the check that the principal did not change.
    fn finish(&mut self, user: String) -> Result<(KafkaPrincipal, i64), String> {
        let principal = KafkaPrincipal::user(user);
        if let Some((previous, _)) = self.reauth.take() {
            if previous != principal {
                return Err(format!(
                    "Cannot change principals during re-authentication from {previous}: {principal}"
                ));
            }
        }
        let credential_expiry_ms = match &self.server {
            Some(MechanismServer::OAuthBearer(s)) => s.credential_expiry_ms(),
            _ => None,
        };
        self.server = None;
        self.state = State::Complete;
        let lifetime = session_lifetime(
            credential_expiry_ms,
            self.mechanism
                .as_ref()
                .and_then(|m| self.config.max_reauth.get(m))
                .copied(),
            oauthbearer::now_ms(),
        );
        self.session_expiry = lifetime.map(|l| Instant::now() + l);
        Ok((principal, lifetime.map_or(0, |l| l.as_millis() as i64)))
    }

    fn authentication_text(&self) -> &'static str {
        if self.reauth.is_some() {
            "re-authentication"
        } else {
            "authentication"
        }
    }
}

/// Kafka's `ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs`: the session lasts until
/// the credential expires (an OAUTHBEARER token's `exp`) or `connections.max.reauth.ms`,
/// whichever comes first; without either it does not expire.
fn session_lifetime(
    credential_expiry_ms: Option<i64>,
    max_reauth: Option<Duration>,
    now_ms: i64,
) -> Option<Duration> {
    let until_expiry =
        credential_expiry_ms.map(|e| Duration::from_millis(e.saturating_sub(now_ms).max(0) as u64));
    match (until_expiry, max_reauth) {
        (Some(e), Some(m)) => Some(e.min(m)),
        (e, m) => e.or(m),
    }
}

/// Decodes a request of the SASL exchange; versions above `max` are refused (Kafka cannot
/// answer them either: `UnsupportedVersionException` closes the connection).
fn decode_request<T: Decodable>(frame: Bytes, max: i16) -> Result<(i16, i32, T), CodecError> {
    let prefix = peek_prefix(&frame);
    let key =
        ApiKey::try_from(prefix.api_key).map_err(|_| CodecError::UnknownApiKey(prefix.api_key))?;
    let version = prefix.api_version;
    if !(0..=max).contains(&version) {
        return Err(CodecError::Malformed(format!(
            "{key:?} v{version} is not supported"
        )));
    }
    let mut body = frame;
    decode_header(key, version, &mut body)?;
    let req = T::decode(&mut body, version)
        .map_err(|e| CodecError::Malformed(format!("{key:?} v{version} body: {e}")))?;
    Ok((version, prefix.correlation_id, req))
}

/// The ILLEGAL_SASL_STATE answer Kafka gives a request other than SaslAuthenticate during
/// the exchange (`AbstractRequest.getErrorResponse`), for the requests of the exchange
/// itself; other requests get the close without an answer.
fn illegal_state_response(frame: &Bytes) -> Option<Bytes> {
    let prefix = peek_prefix(frame);
    let code = ResponseError::IllegalSaslState.code();
    match ApiKey::try_from(prefix.api_key).ok()? {
        ApiKey::SaslHandshake => {
            let (v, c, _) =
                decode_request::<SaslHandshakeRequest>(frame.clone(), SASL_HANDSHAKE_VERSION_MAX)
                    .ok()?;
            let resp = SaslHandshakeResponse::default().with_error_code(code);
            encode_response(ApiKey::SaslHandshake, v, c, &resp).ok()
        }
        _ => None,
    }
}

/// Kafka's `ApiKeys` enum name (`SASL_HANDSHAKE`) of an API, as its messages print it.
fn kafka_api_name(key: ApiKey) -> String {
    let mut out = String::new();
    for (i, c) in format!("{key:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tokens_as_kafka_reads_them() {
        let users = BTreeMap::from([("alice".to_string(), "secret".to_string())]);
        assert!(matches!(
            evaluate_plain(b"\0alice\0secret", &users),
            Ok(Evaluated::Complete(_, u)) if u == "alice"
        ));
        let msg = |t: &[u8]| match evaluate_plain(t, &users) {
            Err(SaslError::Authentication(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            msg(b"\0alice\0nope"),
            "Authentication failed: Invalid username or password"
        );
        assert_eq!(
            msg(b"alice"),
            "Invalid SASL/PLAIN response: expected 3 tokens, got 1"
        );
        assert_eq!(
            msg(b"\0\0x"),
            "Authentication failed: username not specified"
        );
        assert_eq!(
            msg(b"\0alice\0"),
            "Authentication failed: password not specified"
        );
        assert_eq!(
            msg(b"a\0b\0c\0d"),
            "Invalid SASL/PLAIN response: expected 3 tokens, got 4"
        );
        assert!(msg(b"bob\0alice\0secret").contains("authorization id"));
    }

    fn config() -> Arc<SaslServerConfig> {
        Arc::new(SaslServerConfig {
            enabled_mechanisms: SUPPORTED_MECHANISMS.iter().map(|m| m.to_string()).collect(),
            plain_users: BTreeMap::from([("alice".to_string(), "secret".to_string())]),
            oauthbearer: Some(Arc::new(TokenValidator::Unsecured(
                UnsecuredValidator::from_jaas(&jaas::parse("M required;").unwrap()).unwrap(),
            ))),
            failed_authentication_delay: Duration::ZERO,
            max_reauth: BTreeMap::new(),
        })
    }

    /// A valid SaslHandshake v1 frame for `mechanism`.
    fn handshake_frame(mechanism: &str) -> Bytes {
        use kafka_protocol::messages::RequestHeader;
        use kafka_protocol::protocol::Encodable;
        let mut b = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(ApiKey::SaslHandshake as i16)
            .with_request_api_version(1)
            .with_correlation_id(1)
            .encode(&mut b, 1)
            .unwrap();
        SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_string(mechanism.into()))
            .encode(&mut b, 1)
            .unwrap();
        b.freeze()
    }

    proptest::proptest! {
        /// Whatever frames follow a handshake (any mechanism), the authenticator answers,
        /// fails or closes: it never panics and never lets a request through unauthenticated.
        #[test]
        fn arbitrary_frames_never_panic_nor_pass(
            mechanism in 0usize..4,
            frames in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 8..64), 1..6),
        ) {
            let mut a = SaslAuthenticator::new(config());
            let lookup = |_: &str, _: ScramMechanism| None;
            let first = a.handle(handshake_frame(SUPPORTED_MECHANISMS[mechanism]), &lookup);
            proptest::prop_assert!(matches!(first, SaslStep::Respond(_)));
            for f in frames {
                match a.handle(Bytes::from(f), &lookup) {
                    SaslStep::Respond(_) => {}
                    SaslStep::Serve | SaslStep::Complete { .. } => {
                        proptest::prop_assert!(false, "random bytes authenticated");
                    }
                    _ => break,
                }
            }
        }
    }

    #[test]
    fn the_session_ends_at_the_credentials_expiry_or_max_reauth() {
        let s = Duration::from_secs;
        assert_eq!(session_lifetime(None, None, 0), None);
        assert_eq!(session_lifetime(None, Some(s(2)), 0), Some(s(2)));
        assert_eq!(session_lifetime(Some(5000), None, 1000), Some(s(4)));
        assert_eq!(session_lifetime(Some(5000), Some(s(2)), 1000), Some(s(2)));
        assert_eq!(session_lifetime(Some(2000), Some(s(9)), 1000), Some(s(1)));
        assert_eq!(session_lifetime(Some(0), Some(s(9)), 1000), Some(s(0)));
    }

    /// A SASL_PLAINTEXT listener with OAUTHBEARER and `extra` settings.
    fn oauth_listener(extra: &[&str]) -> Result<BrokerConfig, ConfigError> {
        let mut o: Vec<String> = [
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,OAUTHBEARER",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required;",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "connections.max.reauth.ms=60000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        o.extend(extra.iter().map(|s| s.to_string()));
        BrokerConfig::load(None, &o)
    }

    #[test]
    fn oauthbearer_listener_settings() {
        let c = oauth_listener(&[
            "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms=3000",
        ])
        .unwrap();
        let sasl = &c.sasl["SASL_PLAINTEXT"];
        assert_eq!(sasl.max_reauth["OAUTHBEARER"], Duration::from_millis(3000));
        assert_eq!(sasl.max_reauth["PLAIN"], Duration::from_millis(60000));
        let custom = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=com.example.Handler";
        let e = oauth_listener(&[custom]).unwrap_err().to_string();
        assert!(e.contains("is not served by Brook"), "{e}");
        let jwks = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";
        let e = oauth_listener(&[jwks]).unwrap_err().to_string();
        assert!(e.contains("sasl.oauthbearer.expected.audience"), "{e}");
        let unsecured = format!(
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class={}",
            oauthbearer::UNSECURED_VALIDATOR_CALLBACK_HANDLER
        );
        assert!(oauth_listener(&[&unsecured]).is_ok());
        // Options make Kafka's default login handler make the broker's own token at start-up.
        let module = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required";
        let e = oauth_listener(&[&format!("{module} ssl.truststore.type=\"PEM\";")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("No principal name in JWT claim: sub"), "{e}");
        let with_sub = format!(
            "{module} unsecuredLoginStringClaim_sub=\"broker\" ssl.truststore.type=\"PEM\";"
        );
        assert!(oauth_listener(&[&with_sub]).is_ok());
    }

    #[test]
    fn api_names_are_kafkas() {
        assert_eq!(kafka_api_name(ApiKey::SaslHandshake), "SASL_HANDSHAKE");
        assert_eq!(kafka_api_name(ApiKey::Metadata), "METADATA");
    }
}
