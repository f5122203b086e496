//! SASL/OAUTHBEARER (RFC 7628) as Kafka serves it with its default server callback handler:
//! - the client's first message, `n,[a=authzid],\x01auth=Bearer <token>\x01[key=value\x01]*\x01`
//!   (Kafka's `OAuthBearerClientInitialResponse`);
//! - the exchange (Kafka's `OAuthBearerSaslServer`): a valid token completes it at once; an
//!   invalid one is answered with a JSON error challenge (`{"status":"invalid_token"}`), the
//!   client answers a single `\x01`, and the server then fails the authentication with that
//!   JSON as the message;
//! - the token check (Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler`,
//!   `OAuthBearerUnsecuredJws` and `OAuthBearerValidationUtils`): an unsecured JWS (`alg: none`,
//!   no signature) whose principal claim, `exp`, `iat` and scope are checked with the
//!   `unsecuredValidator*` options of the listener's JAAS login module.
//!
//! The token's expiry is the credential's lifetime, which bounds the session (KIP-368: Kafka's
//! `CREDENTIAL_LIFETIME_MS_SASL_NEGOTIATED_PROPERTY_KEY`). A listener whose server callback
//! handler is Kafka's `OAuthBearerValidatorCallbackHandler` checks signed tokens against a JWKS
//! instead ([`super::jwks`]); the exchange around the check is the same.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;

use super::jaas::JaasEntry;
use super::jwks::JwtValidator;
use super::sasl::{Evaluated, SaslError};

/// The mechanism's name.
pub const OAUTHBEARER: &str = "OAUTHBEARER";
/// Kafka's default server callback handler for OAUTHBEARER, the one Brook implements.
pub const UNSECURED_VALIDATOR_CALLBACK_HANDLER: &str = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";
/// `listener.name.<l>.oauthbearer.` + this names a server callback handler class.
pub const SERVER_CALLBACK_HANDLER_CLASS: &str = "sasl.server.callback.handler.class";
/// The client's answer to an error challenge (`OAuthBearerSaslClient.BYTE_CONTROL_A`).
const BYTE_CONTROL_A: u8 = 0x01;
/// The separator of the client's first message (`OAuthBearerClientInitialResponse.SEPARATOR`).
const SEPARATOR: char = '\u{1}';

/// Java's `Base64.getDecoder()`, which Kafka's `OAuthBearerUnsecuredJws.toMap` decodes the
/// header and claims with: the standard alphabet (not the URL-safe one, so `-` and `_` are
/// refused), padding optional.
const JAVA_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// The `unsecuredValidator*` options of the listener's OAUTHBEARER JAAS login module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsecuredValidator {
    /// `unsecuredValidatorPrincipalClaimName` (default `sub`).
    principal_claim_name: String,
    /// `unsecuredValidatorScopeClaimName` (default `scope`).
    scope_claim_name: String,
    /// `unsecuredValidatorRequiredScope`, space-delimited.
    required_scope: Vec<String>,
    /// `unsecuredValidatorAllowableClockSkewMs` (default 0).
    allowable_clock_skew_ms: i64,
}

impl UnsecuredValidator {
    /// Reads the options as `OAuthBearerUnsecuredValidatorCallbackHandler` does. Kafka finds a
    /// bad clock skew or scope item on each authentication (and closes the connection); Brook
    /// refuses it at start-up, with Kafka's message.
    pub fn from_jaas(entry: &JaasEntry) -> Result<UnsecuredValidator, String> {
        let option = |k: &str| {
            entry
                .option(k)
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let skew = option("unsecuredValidatorAllowableClockSkewMs");
        let allowable_clock_skew_ms = match &skew {
            None => 0,
            Some(v) => v
                .parse::<i32>()
                .map_err(|_| format!("For input string: \"{v}\""))?,
        };
        if allowable_clock_skew_ms < 0 {
            return Err(format!(
                "Allowable clock skew millis must not be negative: {}",
                skew.unwrap_or_default()
            ));
        }
        let required_scope = match option("unsecuredValidatorRequiredScope") {
            None => Vec::new(),
            Some(s) => parse_scope(&s)?,
        };
        Ok(UnsecuredValidator {
            principal_claim_name: option("unsecuredValidatorPrincipalClaimName")
                .unwrap_or_else(|| "sub".into()),
            scope_claim_name: option("unsecuredValidatorScopeClaimName")
                .unwrap_or_else(|| "scope".into()),
            required_scope,
            allowable_clock_skew_ms: allowable_clock_skew_ms.into(),
        })
    }

    /// Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler.handleCallback` at `now_ms`.
    fn validate(&self, token: &str, now_ms: i64) -> Result<Jws, Refusal> {
        let jws = Jws::parse(token, &self.principal_claim_name, &self.scope_claim_name)?;
        let skew = self.allowable_clock_skew_ms as f64;
        let now = now_ms as f64;
        if let Some(iat) = jws.issued_at {
            if 1000.0 * iat > now + skew {
                return Err(Refusal::token(format!(
                    "The Issued At value ({iat:.6} seconds) was after the indicated time ({now_ms} ms) plus allowable clock skew ({skew} ms)"
                )));
            }
        }
        if now - skew >= 1000.0 * jws.expiration_time {
            return Err(Refusal::token(format!(
                "The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or after the Expiration Time value ({:.6} seconds)",
                jws.expiration_time
            )));
        }
        if let Some(iat) = jws.issued_at {
            if jws.expiration_time <= iat {
                return Err(Refusal::token(format!(
                    "The Expiration Time time ({:.6} seconds) was not after the Issued At time ({iat:.6} seconds)",
                    jws.expiration_time
                )));
            }
        }
        // `OAuthBearerValidationUtils.validateScope`; the scope is told as Java prints a list.
        if let Some(missing) = self.required_scope.iter().find(|s| !jws.scope.contains(*s)) {
            return Err(Refusal::Scope {
                description: format!("The provided scope was missing a required scope ({missing})"),
                scope: format!("[{}]", self.required_scope.join(", ")),
            });
        }
        Ok(jws)
    }
}

/// Kafka's `OAuthBearerScopeUtils.parseScope`.
fn parse_scope(space_delimited: &str) -> Result<Vec<String>, String> {
    let valid = |c: char| matches!(c, '\x21' | '\x23'..='\x5B' | '\x5D'..='\x7E');
    space_delimited
        .split(' ')
        .filter(|s| !s.is_empty())
        .map(|s| match s.chars().all(valid) {
            true => Ok(s.to_string()),
            false => Err(format!("Invalid scope value: {s}")),
        })
        .collect()
}

/// Why a token was refused.
#[derive(Debug, PartialEq)]
enum Refusal {
    /// Kafka's `OAuthBearerIllegalTokenException` without a scope: `invalid_token`.
    Token(String),
    /// A required scope is missing: `insufficient_scope`, with the required scope.
    Scope { description: String, scope: String },
    /// What Kafka fails with an unexpected exception (a JWS header without `alg`): the
    /// connection is closed without an answer.
    Unexpected(String),
}

impl Refusal {
    fn token(description: impl Into<String>) -> Refusal {
        Refusal::Token(description.into())
    }

    /// Kafka's `OAuthBearerSaslServer.jsonErrorResponse`.
    fn json(&self) -> String {
        match self {
            Refusal::Scope { scope, .. } => {
                format!(r#"{{"status":"insufficient_scope", "scope":"{scope}"}}"#)
            }
            _ => r#"{"status":"invalid_token"}"#.to_string(),
        }
    }
}

/// A claim's value as `OAuthBearerUnsecuredJws.convert` keeps it: a number, a list of texts,
/// or the text of anything else (Jackson's `asText`: `true`, `null`, "" for an object).
#[derive(Debug, Clone, PartialEq)]
enum Claim {
    Number(f64),
    Text(String),
    List(Vec<String>),
}

impl Claim {
    fn type_name(&self) -> &'static str {
        match self {
            Claim::Number(_) => "Number",
            Claim::Text(_) => "String",
            Claim::List(_) => "List",
        }
    }
}

/// Jackson's `JsonNode.asText`.
fn as_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Null => "null".into(),
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => String::new(),
    }
}

/// Kafka's `OAuthBearerUnsecuredJws.toMap`: base64 (Java's basic decoder), then the first
/// JSON value (Jackson ignores what follows it); a value that is not an object has no members.
fn to_map(split: &str) -> Result<BTreeMap<String, Claim>, Refusal> {
    let bytes = JAVA_BASE64
        .decode(split)
        .map_err(|_| Refusal::token("malformed Base64 URL encoded value"))?;
    let value = serde_json::Deserializer::from_slice(&bytes)
        .into_iter::<serde_json::Value>()
        .next()
        .transpose()
        .map_err(|_| Refusal::token("malformed JSON"))?;
    let Some(serde_json::Value::Object(members)) = value else {
        return Ok(BTreeMap::new());
    };
    Ok(members
        .into_iter()
        .map(|(k, v)| {
            let claim = match &v {
                serde_json::Value::Array(items) => Claim::List(items.iter().map(as_text).collect()),
                serde_json::Value::Number(n) => Claim::Number(n.as_f64().unwrap_or(f64::NAN)),
                other => Claim::Text(as_text(other)),
            };
            (k, claim)
        })
        .collect())
}

/// The parts of an unsecured JWS the validator reads (Kafka's `OAuthBearerUnsecuredJws`).
#[derive(Debug)]
struct Jws {
    principal_name: String,
    scope: Vec<String>,
    /// `exp`, in seconds.
    expiration_time: f64,
    /// `iat`, in seconds, if present.
    issued_at: Option<f64>,
}

impl Jws {
    /// Kafka's `OAuthBearerUnsecuredJws` constructor, with its checks in its order.
    fn parse(token: &str, principal_claim: &str, scope_claim: &str) -> Result<Jws, Refusal> {
        if token.contains("..") {
            return Err(Refusal::token(
                "Malformed compact serialization contains '..'",
            ));
        }
        // Without "..", Java's split (trailing empties dropped, one re-added) equals this one.
        let splits: Vec<&str> = token.split('.').collect();
        if splits.len() != 3 {
            return Err(Refusal::token("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"));
        }
        let header = to_map(splits[0])?;
        let claims = to_map(splits[1])?;
        match header.get("alg") {
            None => {
                return Err(Refusal::Unexpected(
                    "JWS header must have an Algorithm value".into(),
                ))
            }
            Some(Claim::Text(alg)) if alg == "none" => {}
            Some(_) => {
                return Err(Refusal::token(
                    "Unsecured JWS must have 'none' for an algorithm",
                ))
            }
        }
        if !splits[2].is_empty() {
            return Err(Refusal::token(
                "Unsecured JWS must not contain a digital signature",
            ));
        }
        let scope = scope_of(claims.get(scope_claim), scope_claim)?;
        let Some(expiration_time) = number_claim(&claims, "exp")? else {
            return Err(Refusal::token("No expiration time in JWT"));
        };
        let principal_name = match claims.get(principal_claim) {
            Some(Claim::Text(s)) if !s.trim().is_empty() => s.clone(),
            Some(c @ (Claim::Number(_) | Claim::List(_))) => {
                return Err(wrong_type(principal_claim, "String", c))
            }
            _ => {
                return Err(Refusal::token(format!(
                    "No principal name in JWT claim: {principal_claim}"
                )))
            }
        };
        Ok(Jws {
            principal_name,
            scope,
            expiration_time,
            issued_at: number_claim(&claims, "iat")?,
        })
    }

    /// The token's expiry in ms since the epoch (`convertClaimTimeInSecondsToMs`).
    fn lifetime_ms(&self) -> i64 {
        (self.expiration_time * 1000.0).round() as i64
    }
}

fn wrong_type(name: &str, wanted: &str, got: &Claim) -> Refusal {
    Refusal::token(format!(
        "The '{name}' claim was not of type {wanted}: {}",
        got.type_name()
    ))
}

fn number_claim(claims: &BTreeMap<String, Claim>, name: &str) -> Result<Option<f64>, Refusal> {
    match claims.get(name) {
        None => Ok(None),
        Some(Claim::Number(n)) => Ok(Some(*n)),
        Some(other) => Err(wrong_type(name, "Number", other)),
    }
}

/// The listener's server callback handler for OAUTHBEARER tokens.
#[derive(Debug)]
pub enum TokenValidator {
    /// Kafka's default, `OAuthBearerUnsecuredValidatorCallbackHandler`.
    Unsecured(UnsecuredValidator),
    /// `OAuthBearerValidatorCallbackHandler`: signed tokens checked against a JWKS.
    Jwks(JwtValidator),
}

impl TokenValidator {
    /// The token's principal and expiry (ms since the epoch), or why it is refused.
    fn validate(&self, token: &str, now_ms: i64) -> Result<(String, i64), Refusal> {
        match self {
            TokenValidator::Unsecured(v) => v
                .validate(token, now_ms)
                .map(|jws| (jws.principal_name.clone(), jws.lifetime_ms())),
            // `OAuthBearerValidatorCallbackHandler.handleValidatorCallback`: every
            // `JwtValidatorException` is `invalid_token`, its message only logged.
            TokenValidator::Jwks(v) => v
                .validate(token, now_ms)
                .map(|t| (t.principal_name, t.lifetime_ms))
                .map_err(Refusal::Token),
        }
    }
}

/// Kafka's `OAuthBearerUnsecuredJws.calculateScope`: a text claim is one scope item; a list
/// is many, trimmed, blanks dropped.
fn scope_of(claim: Option<&Claim>, name: &str) -> Result<Vec<String>, Refusal> {
    Ok(match claim {
        None => Vec::new(),
        Some(Claim::Text(s)) if s.trim().is_empty() => Vec::new(),
        Some(Claim::Text(s)) => vec![s.trim().to_string()],
        Some(Claim::List(items)) => items
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        Some(c @ Claim::Number(_)) => return Err(wrong_type(name, "List", c)),
    })
}

/// The client's first message (Kafka's `OAuthBearerClientInitialResponse`).
#[derive(Debug, PartialEq)]
struct ClientInitialResponse {
    token: String,
    authorization_id: String,
    extensions: BTreeMap<String, String>,
}

const INVALID_FIRST_MESSAGE: &str = "Invalid OAUTHBEARER client first message";

impl ClientInitialResponse {
    /// Parses what `CLIENT_INITIAL_RESPONSE_PATTERN` and `AUTH_PATTERN` match. `Err(Ok(_))` is
    /// a `SaslException` (invalid credentials); `Err(Err(_))` what Kafka fails unexpectedly
    /// on (a scheme other than Bearer: its message reads a group the matcher lacks).
    fn parse(response: &[u8]) -> Result<ClientInitialResponse, Result<String, String>> {
        let invalid = |why: &str| Err(Ok(why.to_string()));
        let text = String::from_utf8_lossy(response);
        let Some(rest) = text.strip_prefix("n,") else {
            return invalid(INVALID_FIRST_MESSAGE);
        };
        let Some((authz, rest)) = rest.split_once(',') else {
            return invalid(INVALID_FIRST_MESSAGE);
        };
        let authorization_id = match authz {
            "" => String::new(),
            a => match a.strip_prefix("a=").filter(|n| is_saslname(n)) {
                Some(n) => n.to_string(),
                None => return invalid(INVALID_FIRST_MESSAGE),
            },
        };
        let Some(kvpairs) = rest
            .strip_prefix(SEPARATOR)
            .and_then(|r| r.strip_suffix(SEPARATOR))
        else {
            return invalid(INVALID_FIRST_MESSAGE);
        };
        let mut properties = BTreeMap::new();
        if !kvpairs.is_empty() {
            let Some(pairs) = kvpairs.strip_suffix(SEPARATOR) else {
                return invalid(INVALID_FIRST_MESSAGE);
            };
            for pair in pairs.split(SEPARATOR) {
                match pair.split_once('=') {
                    Some((k, v)) if is_key(k) && is_value(v) => {
                        properties.insert(k.to_string(), v.to_string());
                    }
                    _ => return invalid(INVALID_FIRST_MESSAGE),
                }
            }
        }
        let Some(auth) = properties.remove("auth") else {
            return invalid("Invalid OAUTHBEARER client first message: 'auth' not specified");
        };
        let Some((scheme, token)) = split_auth(&auth) else {
            return invalid("Invalid OAUTHBEARER client first message: invalid 'auth' format");
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Err(format!("OAUTHBEARER scheme {scheme} is not Bearer")));
        }
        Ok(ClientInitialResponse {
            token: token.to_string(),
            authorization_id,
            extensions: properties,
        })
    }
}

/// RFC 7628's saslname: `[\x01-\x7F]` but `=` and `,`, or `=2C`, `=3D`.
fn is_saslname(s: &str) -> bool {
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest
            .strip_prefix("=2C")
            .or_else(|| rest.strip_prefix("=3D"))
        {
            rest = r;
        } else if matches!(c, '\x01'..='\x7F') && c != '=' && c != ',' {
            rest = &rest[1..];
        } else {
            return false;
        }
    }
    !s.is_empty()
}

/// An extension key: `[A-Za-z]+`.
fn is_key(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphabetic())
}

/// An extension value: `[\x21-\x7E \t\r\n]+`.
fn is_value(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| matches!(c, '\x21'..='\x7E' | ' ' | '\t' | '\r' | '\n'))
}

/// `AUTH_PATTERN`: `(\w+)[ ]+([-_~+/.a-zA-Z0-9]+=*)`, as scheme and token.
fn split_auth(auth: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = auth.split_once(' ')?;
    let token = rest.trim_start_matches(' ');
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let body = token.trim_end_matches('=');
    let token_char = |c: char| c.is_ascii_alphanumeric() || "-_~+/.".contains(c);
    let ok = !scheme.is_empty()
        && scheme.chars().all(word)
        && !body.is_empty()
        && body.chars().all(token_char);
    ok.then_some((scheme, token))
}

/// One connection's OAUTHBEARER exchange (Kafka's `OAuthBearerSaslServer`).
pub struct OAuthBearerServer {
    validator: Arc<TokenValidator>,
    /// The JSON error challenge sent, which the client's `\x01` turns into the failure.
    error_message: Option<String>,
    /// The validated token's expiry, ms since the epoch, once complete.
    lifetime_ms: Option<i64>,
}

impl OAuthBearerServer {
    pub fn new(validator: Arc<TokenValidator>) -> OAuthBearerServer {
        OAuthBearerServer {
            validator,
            error_message: None,
            lifetime_ms: None,
        }
    }

    /// Kafka's `OAuthBearerSaslServer.evaluateResponse`.
    pub fn evaluate(&mut self, response: &[u8]) -> Result<Evaluated, SaslError> {
        if let (&[BYTE_CONTROL_A], Some(message)) = (response, &self.error_message) {
            return Err(SaslError::Authentication(message.clone()));
        }
        self.error_message = None;
        let first = ClientInitialResponse::parse(response).map_err(|e| match e {
            Ok(why) => SaslError::Invalid(why),
            Err(why) => SaslError::Unexpected(why),
        })?;
        let (principal_name, lifetime_ms) = match self.validator.validate(&first.token, now_ms()) {
            Ok(valid) => valid,
            Err(Refusal::Unexpected(why)) => return Err(SaslError::Unexpected(why)),
            Err(refusal) => {
                tracing::warn!(?refusal, "OAUTHBEARER token refused");
                let json = refusal.json();
                self.error_message = Some(json.clone());
                return Ok(Evaluated::Challenge(json.into_bytes()));
            }
        };
        if !first.authorization_id.is_empty() && first.authorization_id != principal_name {
            return Err(SaslError::Authentication(format!(
                "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({})",
                first.authorization_id, principal_name
            )));
        }
        // Both validators accept every extension (their
        // `OAuthBearerExtensionsValidatorCallback` handling); none reaches the principal.
        let _ = first.extensions;
        self.lifetime_ms = Some(lifetime_ms);
        Ok(Evaluated::Complete(Vec::new(), principal_name))
    }

    /// The credential's expiry once complete, ms since the epoch (Kafka's negotiated
    /// property `CREDENTIAL.LIFETIME.MS`).
    pub fn credential_expiry_ms(&self) -> Option<i64> {
        self.lifetime_ms
    }
}

/// The broker's own token for inter-broker connections, as Kafka's
/// `OAuthBearerUnsecuredLoginCallbackHandler` makes one from the `unsecuredLogin*` options of
/// the listener's JAAS login module: string, number and list claims, `iat` now and `exp`
/// `unsecuredLoginLifetimeSeconds` (3600) later; `unsecuredLoginExtension_<k>` extensions.
#[derive(Debug, Clone, PartialEq)]
pub struct UnsecuredLogin {
    claims: serde_json::Map<String, serde_json::Value>,
    lifetime_seconds: i64,
    extensions: BTreeMap<String, String>,
}

const STRING_CLAIM_PREFIX: &str = "unsecuredLoginStringClaim_";
const NUMBER_CLAIM_PREFIX: &str = "unsecuredLoginNumberClaim_";
const LIST_CLAIM_PREFIX: &str = "unsecuredLoginListClaim_";
const EXTENSION_PREFIX: &str = "unsecuredLoginExtension_";

impl UnsecuredLogin {
    /// Kafka's `handleTokenCallback` checks, at start-up: claims other than `iat`/`exp`, and
    /// a non-blank principal claim.
    pub fn from_jaas(entry: &JaasEntry) -> Result<UnsecuredLogin, String> {
        let mut claims = serde_json::Map::new();
        let mut extensions = BTreeMap::new();
        for (key, value) in &entry.options {
            let (name, claim) = if let Some(n) = key.strip_prefix(STRING_CLAIM_PREFIX) {
                (n, serde_json::Value::String(value.clone()))
            } else if let Some(n) = key.strip_prefix(NUMBER_CLAIM_PREFIX) {
                let number = value
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .ok_or_else(|| format!("For input string: \"{value}\""))?;
                (n, serde_json::Value::Number(number))
            } else if let Some(n) = key.strip_prefix(LIST_CLAIM_PREFIX) {
                (n, serde_json::Value::from(list_claim(value)))
            } else {
                if let Some(k) = key.strip_prefix(EXTENSION_PREFIX) {
                    if !is_key(k) || k == "auth" || !is_value(value) {
                        return Err(format!("Extension name {k} is invalid"));
                    }
                    extensions.insert(k.to_string(), value.clone());
                }
                continue;
            };
            if name.is_empty() {
                continue;
            }
            if name == "iat" || name == "exp" {
                return Err(format!("Cannot explicitly set the '{name}' claim"));
            }
            claims.insert(name.to_string(), claim);
        }
        let principal = entry
            .option("unsecuredLoginPrincipalClaimName")
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .unwrap_or("sub");
        match claims.get(principal) {
            Some(serde_json::Value::String(p)) if !p.trim().is_empty() => {}
            _ => return Err(format!("No principal name in JWT claim: {principal}")),
        }
        let lifetime = entry
            .option("unsecuredLoginLifetimeSeconds")
            .unwrap_or("3600");
        let lifetime_seconds = lifetime
            .parse()
            .map_err(|_| format!("For input string: \"{lifetime}\""))?;
        Ok(UnsecuredLogin {
            claims,
            lifetime_seconds,
            extensions,
        })
    }

    /// The client first message carrying a token issued at `now_ms`
    /// (`OAuthBearerClientInitialResponse.toBytes`), base64 URL-safe as Kafka's login encodes.
    pub fn first_message(&self, now_ms: i64) -> Vec<u8> {
        let now = now_ms as f64 / 1000.0;
        let mut claims = self.claims.clone();
        let number = |v: f64| serde_json::Number::from_f64(v).map(serde_json::Value::Number);
        claims.extend(number(now + self.lifetime_seconds as f64).map(|v| ("exp".to_string(), v)));
        claims.extend(number(now).map(|v| ("iat".to_string(), v)));
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let token = format!(
            "{}.{}.",
            b64.encode(r#"{"alg":"none"}"#),
            b64.encode(serde_json::Value::Object(claims).to_string())
        );
        let mut message = format!("n,,{SEPARATOR}auth=Bearer {token}");
        for (k, v) in &self.extensions {
            message.push(SEPARATOR);
            message.push_str(&format!("{k}={v}"));
        }
        message.push(SEPARATOR);
        message.push(SEPARATOR);
        message.into_bytes()
    }
}

/// Kafka's `listJsonText`: the first character is the delimiter of the rest; an empty item
/// at either end or between two delimiters adds one empty string.
fn list_claim(value: &str) -> Vec<String> {
    let mut chars = value.chars();
    let Some(delimiter) = chars.next() else {
        return Vec::new();
    };
    let rest = chars.as_str();
    if rest.is_empty() {
        return Vec::new();
    }
    // Java's `split` drops trailing empty items.
    let mut items: Vec<String> = rest.split(delimiter).map(str::to_string).collect();
    while items.len() > 1 && items.last().is_some_and(String::is_empty) {
        items.pop();
    }
    let doubled = format!("{delimiter}{delimiter}");
    if rest.starts_with(delimiter) || rest.ends_with(delimiter) || rest.contains(&doubled) {
        items.push(String::new());
    }
    items
}

/// Wall-clock ms since the epoch: token times are wall-clock times.
pub use crate::clock::now_ms;

#[cfg(test)]
mod tests {
    use super::*;

    fn b64url(s: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
    }

    fn jws(header: &str, claims: &str, sig: &str) -> String {
        format!("{}.{}.{sig}", b64url(header), b64url(claims))
    }

    fn validator(options: &str) -> UnsecuredValidator {
        let e = super::super::jaas::parse(&format!("M required {options};")).unwrap();
        UnsecuredValidator::from_jaas(&e).unwrap()
    }

    const NOW: i64 = 1_700_000_000_000;

    #[test]
    fn unsecured_tokens_as_kafka_checks_them() {
        let v = validator("");
        let ok = jws(
            r#"{"alg":"none"}"#,
            r#"{"sub":"alice","exp":1700000100.5,"iat":1699999999}"#,
            "",
        );
        let t = v.validate(&ok, NOW).unwrap();
        assert_eq!(
            (t.principal_name.as_str(), t.lifetime_ms()),
            ("alice", 1_700_000_100_500)
        );
        let refused = |token: &str| match v.validate(token, NOW) {
            Err(Refusal::Token(d)) => d,
            other => panic!("{other:?}"),
        };
        let expired = jws(
            r#"{"alg":"none"}"#,
            r#"{"sub":"alice","exp":1700000000}"#,
            "",
        );
        assert!(refused(&expired).contains("on or after the Expiration Time"));
        let signed = jws(
            r#"{"alg":"RS256"}"#,
            r#"{"sub":"alice","exp":1800000000}"#,
            "c2ln",
        );
        assert_eq!(
            refused(&signed),
            "Unsecured JWS must have 'none' for an algorithm"
        );
        let sig = jws(
            r#"{"alg":"none"}"#,
            r#"{"sub":"alice","exp":1800000000}"#,
            "c2ln",
        );
        assert_eq!(
            refused(&sig),
            "Unsecured JWS must not contain a digital signature"
        );
        assert!(refused("a.b").contains("3 dot-separated"));
        assert!(refused("a..b").contains("'..'"));
        assert_eq!(refused("%%.e30."), "malformed Base64 URL encoded value");
        assert_eq!(refused(&format!("{}.e30.", b64url("{"))), "malformed JSON");
        let no_exp = jws(r#"{"alg":"none"}"#, r#"{"sub":"alice"}"#, "");
        assert_eq!(refused(&no_exp), "No expiration time in JWT");
        let no_sub = jws(r#"{"alg":"none"}"#, r#"{"exp":1800000000}"#, "");
        assert_eq!(refused(&no_sub), "No principal name in JWT claim: sub");
        let future = jws(
            r#"{"alg":"none"}"#,
            r#"{"sub":"a","exp":1800000000,"iat":1750000000}"#,
            "",
        );
        assert!(refused(&future).contains("Issued At"));
        assert!(matches!(
            v.validate(&jws("{}", r#"{"sub":"a","exp":1800000000}"#, ""), NOW),
            Err(Refusal::Unexpected(_))
        ));
    }

    #[test]
    fn options_scope_and_skew() {
        let v = validator(
            r#"unsecuredValidatorPrincipalClaimName="user" unsecuredValidatorRequiredScope="read write" unsecuredValidatorAllowableClockSkewMs="5000""#,
        );
        let t = jws(
            r#"{"alg":"none"}"#,
            r#"{"user":"bob","exp":1699999998,"scope":["read"]}"#,
            "",
        );
        let r = v.validate(&t, NOW).unwrap_err();
        assert_eq!(
            r.json(),
            r#"{"status":"insufficient_scope", "scope":"[read, write]"}"#
        );
        let t = jws(
            r#"{"alg":"none"}"#,
            r#"{"user":"bob","exp":1699999998,"scope":["read"," write "]}"#,
            "",
        );
        assert_eq!(v.validate(&t, NOW).unwrap().principal_name, "bob");
        let bad = |o: &str| {
            let e = super::super::jaas::parse(&format!("M required {o};")).unwrap();
            UnsecuredValidator::from_jaas(&e).unwrap_err()
        };
        assert!(
            bad(r#"unsecuredValidatorAllowableClockSkewMs="-1""#).contains("must not be negative")
        );
        assert!(bad(r#"unsecuredValidatorRequiredScope="a\"b""#).contains("Invalid scope value"));
    }

    #[test]
    fn client_first_messages() {
        let r = ClientInitialResponse::parse(b"n,,\x01auth=Bearer abc.def.\x01ext=v 1\x01\x01")
            .unwrap();
        assert_eq!(r.token, "abc.def.");
        assert_eq!(r.extensions["ext"], "v 1");
        let r = ClientInitialResponse::parse(b"n,a=alice,\x01auth=bearer   t==\x01\x01").unwrap();
        assert_eq!(
            (r.authorization_id.as_str(), r.token.as_str()),
            ("alice", "t==")
        );
        for bad in [
            &b"n,,\x01\x01"[..],
            b"n,,auth=Bearer t\x01\x01",
            b"y,,\x01auth=Bearer t\x01\x01",
            b"n,,\x01auth=Bearer t\x01",
            b"n,,\x01auth=Bearer t=x\x01\x01",
            b"n,,\x01au1th=x\x01auth=Bearer t\x01\x01",
        ] {
            assert!(
                matches!(ClientInitialResponse::parse(bad), Err(Ok(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            ClientInitialResponse::parse(b"n,,\x01auth=Basic t\x01\x01"),
            Err(Err(_))
        ));
    }

    #[test]
    fn the_brokers_own_token_passes_the_validator() {
        let e = super::super::jaas::parse(
            r#"M required unsecuredLoginStringClaim_sub="broker" unsecuredLoginListClaim_scope=",kafka,x" unsecuredLoginExtension_traceId="abc";"#,
        )
        .unwrap();
        let login = UnsecuredLogin::from_jaas(&e).unwrap();
        let v = validator(r#"unsecuredValidatorRequiredScope="kafka x""#);
        let mut s = OAuthBearerServer::new(Arc::new(TokenValidator::Unsecured(v)));
        let first = login.first_message(now_ms());
        assert!(String::from_utf8_lossy(&first).ends_with("\x01traceId=abc\x01\x01"));
        assert!(matches!(s.evaluate(&first), Ok(Evaluated::Complete(_, u)) if u == "broker"));
        let bad = |o: &str| {
            let e = super::super::jaas::parse(&format!("M required {o};")).unwrap();
            UnsecuredLogin::from_jaas(&e).unwrap_err()
        };
        assert!(bad(r#"unsecuredLoginStringClaim_exp="1""#).contains("'exp'"));
        assert!(bad(r#"unsecuredLoginStringClaim_user="x""#).contains("claim: sub"));
        assert_eq!(list_claim("|a||b|"), ["a", "", "b", ""]);
        assert_eq!(list_claim(",a,b"), ["a", "b"]);
    }

    #[test]
    fn the_error_challenge_and_the_clients_answer() {
        let mut s = OAuthBearerServer::new(Arc::new(TokenValidator::Unsecured(validator(""))));
        let expired = jws(r#"{"alg":"none"}"#, r#"{"sub":"alice","exp":1000}"#, "");
        let first = format!("n,,\x01auth=Bearer {expired}\x01\x01");
        match s.evaluate(first.as_bytes()) {
            Ok(Evaluated::Challenge(c)) => assert_eq!(c, br#"{"status":"invalid_token"}"#),
            other => panic!("{other:?}"),
        }
        match s.evaluate(&[BYTE_CONTROL_A]) {
            Err(SaslError::Authentication(m)) => assert_eq!(m, r#"{"status":"invalid_token"}"#),
            other => panic!("{other:?}"),
        }
        let good = jws(
            r#"{"alg":"none"}"#,
            r#"{"sub":"alice","exp":4000000000}"#,
            "",
        );
        let first = format!("n,a=bob,\x01auth=Bearer {good}\x01\x01");
        assert!(
            matches!(s.evaluate(first.as_bytes()), Err(SaslError::Authentication(m)) if m.contains("(bob)"))
        );
        let first = format!("n,,\x01auth=Bearer {good}\x01\x01");
        assert!(
            matches!(s.evaluate(first.as_bytes()), Ok(Evaluated::Complete(_, u)) if u == "alice")
        );
        assert_eq!(s.credential_expiry_ms(), Some(4_000_000_000_000));
    }
}
