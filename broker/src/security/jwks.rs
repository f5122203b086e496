//! OAUTHBEARER tokens signed by an identity provider, checked against its JSON Web Key Set,
//! as Kafka's `OAuthBearerValidatorCallbackHandler` does with `BrokerJwtValidator` (jose4j's
//! `JwtConsumer` underneath) and the JWKS its `VerificationKeyResolverFactory` picks by URL: a
//! `file:` one (`JwksFileVerificationKeyResolver`, which re-reads the file when it changes:
//! `CachedFile.RefreshPolicy.lastModifiedPolicy`) or an `http(s):` one
//! (`RefreshingHttpsJwksVerificationKeyResolver`: [`super::jwks_https`]).
//!
//! The checks, in jose4j's order: the compact serialization (`SerializedJwt`), the header's
//! algorithm (never `none`: `AlgorithmConstraints.DISALLOW_NONE`), the verification key chosen
//! by `kid`, key type and curve (`VerificationJwkSelector`), the signature, then the claims:
//! `exp` and `iat` required, `exp` and `nbf` against the clock with
//! `sasl.oauthbearer.clock.skew.seconds` of leeway, `aud` and `iss` against the expected ones,
//! then Kafka's own claim checks (`ClaimValidationUtils`: scope, subject, times). A refused
//! token is told to the client only as `{"status":"invalid_token"}`; the reason is logged.
//!
//! Signatures are verified with aws-lc-rs, the crypto provider rustls already uses here:
//! RS256/384/512 and PS256/384/512 (RSA keys of 2048 to 8192 bits, as jose4j requires at
//! least 2048), ES256/384/512.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use aws_lc_rs::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use base64::Engine;
use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::jwks_https::{RefreshSettings, RefreshingHttpsJwks};
use crate::net::http_client::HttpClient;

/// The handler class that selects this validator
/// (`listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`).
pub const VALIDATOR_CALLBACK_HANDLER: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";
/// Kafka's JVM system property (`BrokerSecurityConfigs.ALLOWED_SASL_OAUTHBEARER_URLS_CONFIG`):
/// the comma-separated URLs an OAuth configuration may name; empty by default, so none.
/// Brook reads it where Kafka's start scripts pass system properties: `KAFKA_OPTS`.
pub const ALLOWED_URLS_PROPERTY: &str = "org.apache.kafka.sasl.oauthbearer.allowed.urls";
pub const JWKS_ENDPOINT_URL: &str = "sasl.oauthbearer.jwks.endpoint.url";
/// The largest JWKS file read; a key set is a few kilobytes.
const JWKS_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// The settings `BrokerJwtValidator.configure` reads, each looked up as Kafka's
/// `ConfigurationUtils.get` does (the caller resolves listener and mechanism prefixes).
#[derive(Debug, Clone, Default)]
pub struct JwtValidatorConfig {
    pub jwks_endpoint_url: Option<String>,
    pub expected_audience: Vec<String>,
    pub allow_unverified_audience: bool,
    pub expected_issuer: Option<String>,
    pub allow_unverified_issuer: bool,
    pub clock_skew_seconds: i64,
    pub scope_claim_name: String,
    pub sub_claim_name: String,
    /// The value of [`ALLOWED_URLS_PROPERTY`] ("" when unset).
    pub allowed_urls: String,
    /// `sasl.oauthbearer.jwks.endpoint.refresh.ms`, `.retry.backoff.ms` and
    /// `.retry.backoff.max.ms` (an `http(s):` JWKS only).
    pub jwks_refresh_ms: i64,
    pub jwks_retry_backoff_ms: i64,
    pub jwks_retry_backoff_max_ms: i64,
    /// The options of the listener's OAUTHBEARER login module: their `ssl.*` keys are the TLS
    /// of an `https:` JWKS fetch (Kafka's `JaasOptionsUtils.createSSLSocketFactory`).
    pub jaas_options: BTreeMap<String, String>,
}

/// A token that passed: what `BasicOAuthBearerToken` keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidToken {
    pub principal_name: String,
    pub scope: Vec<String>,
    pub lifetime_ms: i64,
}

/// Where the verification keys come from.
#[derive(Debug)]
enum KeySource {
    File(JwksFile),
    Https(RefreshingHttpsJwks),
}

/// Kafka's `BrokerJwtValidator` over a JWKS.
#[derive(Debug)]
pub struct JwtValidator {
    keys: KeySource,
    expected_audience: Vec<String>,
    expected_issuer: Option<String>,
    clock_skew_seconds: i64,
    scope_claim_name: String,
    sub_claim_name: String,
}

impl JwtValidator {
    /// `BrokerJwtValidator.configure` and `VerificationKeyResolverFactory`: Kafka's start-up
    /// errors (`ConfigException` messages) for a missing, disallowed or unreadable JWKS, and
    /// for an unset expected audience or issuer not explicitly allowed to go unverified.
    pub fn new(cfg: &JwtValidatorConfig) -> Result<JwtValidator, String> {
        if cfg.expected_audience.is_empty() && !cfg.allow_unverified_audience {
            return Err("The OAuth validator for the broker requires \"sasl.oauthbearer.expected.audience\" to be configured so that the token's audience (\"aud\") claim can be verified, but it was not set. Set \"sasl.oauthbearer.expected.audience\" to the audience(s) that identify this cluster, or set \"sasl.oauthbearer.allow.unverified.audience\" to true to accept tokens regardless of their audience.".into());
        }
        if cfg.expected_issuer.is_none() && !cfg.allow_unverified_issuer {
            return Err("The OAuth validator for the broker requires \"sasl.oauthbearer.expected.issuer\" to be configured so that the token's issuer (\"iss\") claim can be verified, but it was not set. Set \"sasl.oauthbearer.expected.issuer\" to the issuer URL of the OAuth/OIDC provider that signs the tokens, or set \"sasl.oauthbearer.allow.unverified.issuer\" to true to accept tokens regardless of their issuer.".into());
        }
        let keys = match jwks_location(cfg)? {
            JwksLocation::File(path) => KeySource::File(JwksFile::open(path)?),
            JwksLocation::Http(url) => KeySource::Https(refreshing_jwks(cfg, &url)?),
        };
        Ok(JwtValidator {
            keys,
            expected_audience: cfg.expected_audience.clone(),
            expected_issuer: cfg.expected_issuer.clone(),
            clock_skew_seconds: cfg.clock_skew_seconds,
            scope_claim_name: cfg.scope_claim_name.clone(),
            sub_claim_name: cfg.sub_claim_name.clone(),
        })
    }

    /// `BrokerJwtValidator.validate` at `now_ms`; `Err` is the `JwtValidatorException` message.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, String> {
        let jwt = SerializedJwt::parse(token)?;
        let claims = self
            .process(&jwt, now_ms)
            .map_err(|e| format!("Could not validate the access token: {e}"))?;
        self.kafka_claims(&claims)
    }

    /// jose4j's `JwtConsumer.process`: header, key, signature, then the claim validators.
    fn process(&self, jwt: &SerializedJwt, now_ms: i64) -> Result<Map<String, Value>, String> {
        let header = json_object(&jwt.header)
            .ok_or_else(|| "Unable to process JOSE object (cause: the header is not a Base64url-encoded JSON object)".to_string())?;
        let alg = match header.get("alg") {
            Some(Value::String(a)) => a.as_str(),
            _ => return Err("A JWS must have an algorithm (alg) header".into()),
        };
        let Some(algorithm) = Algorithm::from_name(alg) else {
            return Err(format!(
                "'{alg}' is not a permitted algorithm for this JWS (none and unsupported algorithms are refused)"
            ));
        };
        let kid = header.get("kid").and_then(Value::as_str);
        let key = self.resolve_key(&header, algorithm, kid)?;
        let signature = base64url(&jwt.signature).ok_or("Invalid JWS Signature")?;
        let signed = format!("{}.{}", jwt.header, jwt.payload);
        if !key.verifies(algorithm, signed.as_bytes(), &signature) {
            return Err("Invalid JWS Signature".into());
        }
        let claims = json_object(&jwt.payload)
            .ok_or("Unable to parse the JWT claims: not a Base64url-encoded JSON object")?;
        self.check_claims(&claims, now_ms / 1000)?;
        Ok(claims)
    }

    /// The verification key (the resolver's `resolveKey`); an `http(s):` JWKS without it asks
    /// for an early refresh (`RefreshingHttpsJwksVerificationKeyResolver`).
    fn resolve_key(
        &self,
        header: &Map<String, Value>,
        algorithm: Algorithm,
        kid: Option<&str>,
    ) -> Result<Jwk, String> {
        let keys = match &self.keys {
            KeySource::File(file) => file.current()?,
            KeySource::Https(https) => https.keys(),
        };
        if let Some(key) = keys.iter().find(|k| k.suits(algorithm, kid)) {
            return Ok(key.clone());
        }
        let mut why = format!(
            "Unable to find a suitable verification key for JWS w/ header {} from JWKs {}",
            Value::Object(header.clone()),
            keys.len()
        );
        if let KeySource::Https(https) = &self.keys {
            if kid.is_some_and(|k| https.maybe_expedite_refresh(k)) {
                tracing::debug!(
                    location = https.location(),
                    "refreshing the JWKS: no key for {kid:?}"
                );
            }
            why.push_str(&format!(" obtained from {}", https.location()));
        }
        Err(why)
    }

    /// jose4j's `NumericDateValidator`, `AudValidator` and `IssValidator`, all reported.
    fn check_claims(&self, claims: &Map<String, Value>, now_s: i64) -> Result<(), String> {
        let mut errors = Vec::new();
        let skew = self.clock_skew_seconds;
        match numeric_date(claims, "exp")? {
            None => errors.push("No Expiration Time (exp) claim present.".to_string()),
            Some(exp) if now_s - skew >= exp => errors.push(format!(
                "The JWT is no longer valid - the evaluation time NumericDate{{{now_s}}} is on or after the Expiration Time (exp={exp}) claim value (even when providing {skew} seconds of leeway to account for clock skew)."
            )),
            Some(_) => {}
        }
        if numeric_date(claims, "iat")?.is_none() {
            errors.push("No Issued At (iat) claim present.".into());
        }
        if let Some(nbf) = numeric_date(claims, "nbf")? {
            if now_s + skew < nbf {
                errors.push(format!(
                    "The JWT is not yet valid as the evaluation time NumericDate{{{now_s}}} is before the NotBefore (nbf=NumericDate{{{nbf}}}) claim time (even when providing {skew} seconds of leeway to account for clock skew)."
                ));
            }
        }
        errors.extend(self.audience_error(claims)?);
        if let Some(expected) = &self.expected_issuer {
            match claims.get("iss") {
                None => errors.push("No Issuer (iss) claim present.".into()),
                Some(Value::String(iss)) if iss == expected => {}
                Some(Value::String(iss)) => errors.push(format!(
                    "Issuer (iss) claim value ({iss}) doesn't match expected value of {expected}"
                )),
                Some(_) => {
                    return Err("The value of the 'iss' claim is not the expected type".into())
                }
            }
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(errors.join(" ")),
        }
    }

    /// jose4j's `AudValidator` (skipped when no audience is expected: Kafka then sets
    /// `setSkipDefaultAudienceValidation`).
    fn audience_error(&self, claims: &Map<String, Value>) -> Result<Option<String>, String> {
        if self.expected_audience.is_empty() {
            return Ok(None);
        }
        let audience: Vec<&str> = match claims.get("aud") {
            None => return Ok(Some("No Audience (aud) claim present.".into())),
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err("The value of the 'aud' claim is not the expected type".into()),
        };
        if audience
            .iter()
            .any(|a| self.expected_audience.iter().any(|e| e == a))
        {
            return Ok(None);
        }
        // As jose4j words it, lists printed as Java prints them.
        let expected = match self.expected_audience.as_slice() {
            [one] => one.clone(),
            many => format!("one of [{}]", many.join(", ")),
        };
        Ok(Some(format!(
            "Audience (aud) claim [{}] doesn't contain an acceptable identifier. Expected {expected} as an aud value.",
            audience.join(", ")
        )))
    }

    /// The rest of `BrokerJwtValidator.validate`: scope, `exp`, subject and `iat` as
    /// `ClaimValidationUtils` checks them.
    fn kafka_claims(&self, claims: &Map<String, Value>) -> Result<ValidToken, String> {
        let scope_name = &self.scope_claim_name;
        let raw_scope: Vec<&Value> = match claims.get(scope_name) {
            Some(s @ Value::String(_)) => vec![s],
            Some(Value::Array(items)) => items.iter().collect(),
            _ => Vec::new(),
        };
        let mut scope: Vec<String> = Vec::new();
        for s in raw_scope {
            let s = validate_string(scope_name, s.as_str())?;
            if scope.contains(&s) {
                return Err(format!(
                    "{scope_name} value must not contain duplicates - {s} already present"
                ));
            }
            scope.push(s);
        }
        let exp_ms = numeric_date(claims, "exp")?.map(|s| s * 1000);
        let sub = match claims.get(&self.sub_claim_name) {
            None => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => {
                return Err(format!(
                    "Could not extract the '{}' claim from the access token",
                    self.sub_claim_name
                ))
            }
        };
        let lifetime_ms = match exp_ms {
            None => return Err("exp value must be non-null".into()),
            Some(ms) if ms < 0 => {
                return Err(format!(
                    "exp value must be non-negative; value given was \"{ms}\""
                ))
            }
            Some(ms) => ms,
        };
        let principal_name = validate_string(&self.sub_claim_name, sub)?;
        if let Some(iat) = numeric_date(claims, "iat")?.map(|s| s * 1000) {
            if iat < 0 {
                return Err(format!(
                    "iat value must be null or non-negative; value given was \"{iat}\""
                ));
            }
        }
        Ok(ValidToken {
            principal_name,
            scope,
            lifetime_ms,
        })
    }
}

/// `ClaimValidationUtils.validateString`.
fn validate_string(name: &str, value: Option<&str>) -> Result<String, String> {
    match value {
        None => Err(format!("{name} value must be non-null")),
        Some("") => Err(format!("{name} value must be non-empty")),
        Some(v) if v.trim().is_empty() => {
            Err(format!("{name} value must not contain only whitespace"))
        }
        Some(v) => Ok(v.trim().to_string()),
    }
}

/// A NumericDate claim in whole seconds (jose4j's `getNumericDateClaimValue`: a JSON number,
/// its fraction dropped); another type is a malformed claim.
fn numeric_date(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, String> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_i64().or_else(|| n.as_f64().map(|f| f as i64))),
        Some(_) => Err(format!(
            "Could not extract the '{name}' claim from the access token"
        )),
    }
}

/// A JWKS URL's kind: a file or an `http(s):` URL.
enum JwksLocation {
    File(PathBuf),
    Http(String),
}

/// The `http(s):` JWKS's keys (Kafka's `VerificationKeyResolverFactory.create`): TLS from the
/// login module's options for `https:`, refreshed as configured.
fn refreshing_jwks(cfg: &JwtValidatorConfig, url: &str) -> Result<RefreshingHttpsJwks, String> {
    let at_least = |name: &str, value: i64, min: i64| match value >= min {
        true => Ok(value as u64),
        false => Err(format!(
            "The OAuth configuration option {name} value must be at least {min}"
        )),
    };
    let settings = RefreshSettings {
        refresh_ms: at_least(
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
            cfg.jwks_refresh_ms,
            0,
        )?,
        // Kafka reads the two back-offs without a minimum; a negative one waits not at all.
        retry_backoff_ms: cfg.jwks_retry_backoff_ms.max(0) as u64,
        retry_backoff_max_ms: cfg.jwks_retry_backoff_max_ms.max(0) as u64,
    };
    let tls = match url
        .get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("https:"))
    {
        true => Some(
            crate::security::ssl::jaas_client_tls(&cfg.jaas_options)
                .map_err(|e| format!("{JWKS_ENDPOINT_URL}={url}: {e}"))?,
        ),
        false => None,
    };
    RefreshingHttpsJwks::start(url, HttpClient::new(tls), settings)
}

/// The JWKS of a URL, checked as `ConfigurationUtils.validateUrl` and `validateFileUrl` check
/// it (the allow-list first, then the file).
fn jwks_location(cfg: &JwtValidatorConfig) -> Result<JwksLocation, String> {
    let name = JWKS_ENDPOINT_URL;
    let url = match cfg.jwks_endpoint_url.as_deref().map(str::trim) {
        None | Some("") => {
            return Err(format!(
                "The OAuth configuration option {name} value is required"
            ))
        }
        Some(u) => u,
    };
    let Some((protocol, rest)) = url.split_once(':') else {
        return Err(format!("The OAuth configuration option {name} contains a URL ({url}) that is malformed: no protocol: {url}"));
    };
    let protocol = protocol.to_ascii_lowercase();
    if !matches!(protocol.as_str(), "http" | "https" | "file") {
        return Err(format!("The OAuth configuration option {name} contains a URL ({url}) that contains an invalid protocol ({protocol}); only \"http\", \"https\", and \"file\" protocol are supported"));
    }
    if !cfg.allowed_urls.split(',').any(|a| a.trim() == url) {
        return Err(format!("Invalid value {url} for configuration {name}: The URL cannot be accessed due to restrictions. Update the system property '{ALLOWED_URLS_PROPERTY}' to allow the URL to be accessed."));
    }
    if protocol != "file" {
        return Ok(JwksLocation::Http(url.to_string()));
    }
    // `new File(url.toURI().getRawPath())`: file:/p, file:///p and file://host/p.
    let raw = rest.strip_prefix("//").map_or(rest, |r| match r.find('/') {
        Some(i) => &r[i..],
        None => "",
    });
    let path = PathBuf::from(raw);
    let shown = path.display();
    let meta = std::fs::metadata(&path).map_err(|_| {
        format!(
            "The OAuth configuration option {name} contains a file ({shown}) that doesn't exist"
        )
    })?;
    if meta.is_dir() {
        return Err(format!(
            "The OAuth configuration option {name} references a directory ({shown}), not a file"
        ));
    }
    Ok(JwksLocation::File(path))
}

/// A file's modification time and length, when it can be read.
type Stamp = Option<(SystemTime, u64)>;

/// The JWKS file and the keys last read from it, re-read when its modification time or
/// length changes (Kafka's `CachedFile` with `lastModifiedPolicy`).
#[derive(Debug)]
struct JwksFile {
    path: PathBuf,
    cached: Mutex<(Stamp, Arc<Vec<Jwk>>)>,
}

impl JwksFile {
    fn open(path: PathBuf) -> Result<JwksFile, String> {
        let stamp = stamp(&path);
        let keys = read_jwks(&path)?;
        Ok(JwksFile {
            path,
            cached: Mutex::new((stamp, Arc::new(keys))),
        })
    }

    /// The keys, re-read first if the file changed. A file that became unreadable or invalid
    /// refuses the token (Kafka's `CachedFile` fails the same way).
    fn current(&self) -> Result<Arc<Vec<Jwk>>, String> {
        let now = stamp(&self.path);
        let mut cached = self.cached.lock();
        if now != cached.0 {
            let keys = read_jwks(&self.path)?;
            *cached = (now, Arc::new(keys));
        }
        Ok(cached.1.clone())
    }
}

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// The keys of a JWKS file, read no further than [`JWKS_FILE_BYTES_MAX`].
fn read_jwks(path: &Path) -> Result<Vec<Jwk>, String> {
    let shown = path.display();
    let len = std::fs::metadata(path)
        .map_err(|e| format!("Could not read the JWKS file {shown}: {e}"))?
        .len();
    if len > JWKS_FILE_BYTES_MAX {
        return Err(format!(
            "The JWKS file {shown} is {len} bytes, more than the {JWKS_FILE_BYTES_MAX} Brook reads"
        ));
    }
    let text =
        std::fs::read(path).map_err(|e| format!("Could not read the JWKS file {shown}: {e}"))?;
    parse_jwks(&text, &shown.to_string())
}

/// jose4j's `JsonWebKeySet(String)`: an object whose `keys` are JWKs; a key that cannot be
/// used (unknown `kty`, bad members) is skipped with a log line, as jose4j skips it. `shown`
/// names the file or URL in errors.
pub(crate) fn parse_jwks(text: &[u8], shown: &str) -> Result<Vec<Jwk>, String> {
    let json: Value = serde_json::from_slice(text)
        .map_err(|e| format!("The JWKS at {shown} is not JSON: {e}"))?;
    let Some(Value::Array(keys)) = json.get("keys") else {
        return Err(format!(
            "The JWKS at {shown} has no \"keys\" member (a JSON Web Key Set)"
        ));
    };
    let mut jwks = Vec::new();
    for k in keys {
        match Jwk::parse(k) {
            Ok(jwk) => jwks.push(jwk),
            Err(why) => tracing::warn!(jwks = %shown, "ignoring a JWK of the JWKS: {why}"),
        }
    }
    Ok(jwks)
}

/// A JWS algorithm Brook verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Rsa(&'static signature::RsaParameters),
    Ec {
        curve: &'static str,
        alg: &'static signature::EcdsaVerificationAlgorithm,
    },
}

impl Algorithm {
    fn from_name(alg: &str) -> Option<Algorithm> {
        let ec = |curve, alg| Some(Algorithm::Ec { curve, alg });
        match alg {
            "RS256" => Some(Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA256)),
            "RS384" => Some(Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA384)),
            "RS512" => Some(Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA512)),
            "PS256" => Some(Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA256)),
            "PS384" => Some(Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA384)),
            "PS512" => Some(Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA512)),
            "ES256" => ec("P-256", &signature::ECDSA_P256_SHA256_FIXED),
            "ES384" => ec("P-384", &signature::ECDSA_P384_SHA384_FIXED),
            "ES512" => ec("P-521", &signature::ECDSA_P521_SHA512_FIXED),
            _ => None,
        }
    }
}

/// One verification key of the set.
#[derive(Debug, Clone)]
pub(crate) struct Jwk {
    kid: Option<String>,
    /// `alg`, when the key names the one algorithm it is for.
    alg: Option<String>,
    /// `use`, when present (only `sig` keys verify).
    key_use: Option<String>,
    material: KeyMaterial,
}

#[derive(Debug, Clone)]
enum KeyMaterial {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// The uncompressed point `04 || x || y` on `curve`.
    Ec {
        curve: String,
        point: Vec<u8>,
    },
}

impl Jwk {
    pub(crate) fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    fn parse(v: &Value) -> Result<Jwk, String> {
        let text = |name: &str| v.get(name).and_then(Value::as_str).map(str::to_string);
        let bytes = |name: &str| {
            text(name)
                .and_then(|s| base64url(&s))
                .ok_or_else(|| format!("missing or malformed \"{name}\""))
        };
        let material = match text("kty").as_deref() {
            Some("RSA") => KeyMaterial::Rsa {
                n: bytes("n")?,
                e: bytes("e")?,
            },
            Some("EC") => {
                let curve = text("crv").ok_or("missing \"crv\"")?;
                let mut point = vec![4u8];
                point.extend(bytes("x")?);
                point.extend(bytes("y")?);
                KeyMaterial::Ec { curve, point }
            }
            other => return Err(format!("unsupported key type {other:?}")),
        };
        Ok(Jwk {
            kid: text("kid"),
            alg: text("alg"),
            key_use: text("use"),
            material,
        })
    }

    /// jose4j's `VerificationJwkSelector`: the header's `kid` if it has one, a key type (and
    /// curve) of the algorithm, a `use` of `sig` if any, the same `alg` if any.
    fn suits(&self, algorithm: Algorithm, kid: Option<&str>) -> bool {
        let kid_ok = kid.is_none_or(|k| self.kid.as_deref() == Some(k));
        let use_ok = self.key_use.as_deref().is_none_or(|u| u == "sig");
        let type_ok = match (&self.material, algorithm) {
            (KeyMaterial::Rsa { .. }, Algorithm::Rsa(_)) => true,
            (KeyMaterial::Ec { curve, .. }, Algorithm::Ec { curve: c, .. }) => curve == c,
            _ => false,
        };
        let alg_ok = self
            .alg
            .as_deref()
            .is_none_or(|a| Algorithm::from_name(a) == Some(algorithm));
        kid_ok && use_ok && type_ok && alg_ok
    }

    fn verifies(&self, algorithm: Algorithm, message: &[u8], sig: &[u8]) -> bool {
        match (&self.material, algorithm) {
            (KeyMaterial::Rsa { n, e }, Algorithm::Rsa(params)) => RsaPublicKeyComponents { n, e }
                .verify(params, message, sig)
                .is_ok(),
            (KeyMaterial::Ec { point, .. }, Algorithm::Ec { alg, .. }) => {
                UnparsedPublicKey::new(alg, point)
                    .verify(message, sig)
                    .is_ok()
            }
            _ => false,
        }
    }
}

/// Base64url without padding (RFC 7515); padding is tolerated.
fn base64url(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .ok()
}

fn json_object(section: &str) -> Option<Map<String, Value>> {
    match serde_json::from_slice(&base64url(section)?).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// Kafka's `SerializedJwt`: the trimmed token's three dot-separated sections.
#[derive(Debug)]
struct SerializedJwt {
    header: String,
    payload: String,
    signature: String,
}

impl SerializedJwt {
    fn parse(token: &str) -> Result<SerializedJwt, String> {
        let token = token.trim();
        if token.is_empty() {
            return Err(
                "Empty JWT provided; expected three sections (header, payload, and signature)"
                    .into(),
            );
        }
        // Java's `split("\\.")` drops trailing empty sections.
        let mut splits: Vec<&str> = token.split('.').collect();
        while splits.len() > 1 && splits.last() == Some(&"") {
            splits.pop();
        }
        if splits.len() != 3 {
            return Err(format!("Malformed JWT provided ({token}); expected three sections (header, payload, and signature), but {} sections provided", splits.len()));
        }
        let section = |s: &str, name: &str| {
            match s.trim() {
            "" => Err(format!("Malformed JWT provided; expected at least three sections (header, payload, and signature), but {name} section missing")),
            t => Ok(t.to_string()),
        }
        };
        Ok(SerializedJwt {
            header: section(splits[0], "header")?,
            payload: section(splits[1], "payload")?,
            signature: section(splits[2], "signature")?,
        })
    }
}

/// The `-D<name>=<value>` system property of Kafka's `KAFKA_OPTS` ("" when absent): how a
/// Kafka deployment passes JVM system properties to `kafka-server-start.sh`.
pub fn system_property(kafka_opts: &str, name: &str) -> String {
    let prefix = format!("-D{name}=");
    kafka_opts
        .split_whitespace()
        .rev()
        .find_map(|o| o.strip_prefix(&prefix))
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
    }

    struct Signer(EcdsaKeyPair);

    impl Signer {
        fn new() -> Signer {
            let rng = SystemRandom::new();
            let pkcs8 =
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
            Signer(
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap(),
            )
        }

        fn jwk(&self, kid: &str) -> Value {
            let point = self.0.public_key().as_ref();
            serde_json::json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                "x": b64(&point[1..33]), "y": b64(&point[33..65])})
        }

        fn token(&self, kid: &str, claims: &Value) -> String {
            let header = b64(format!(r#"{{"alg":"ES256","kid":"{kid}"}}"#).as_bytes());
            let payload = b64(claims.to_string().as_bytes());
            let signed = format!("{header}.{payload}");
            let sig = self
                .0
                .sign(&SystemRandom::new(), signed.as_bytes())
                .unwrap();
            format!("{signed}.{}", b64(sig.as_ref()))
        }
    }

    const NOW_MS: i64 = 1_700_000_000_000;

    fn setup(dir: &Path, signer: &Signer) -> JwtValidatorConfig {
        let file = dir.join("jwks.json");
        let jwks = serde_json::json!({"keys": [
            {"kty": "oct", "k": "AAAA"},
            signer.jwk("k1"),
        ]});
        std::fs::write(&file, jwks.to_string()).unwrap();
        let url = format!("file://{}", file.display());
        JwtValidatorConfig {
            jwks_endpoint_url: Some(url.clone()),
            expected_audience: vec!["brook".into()],
            expected_issuer: Some("https://idp".into()),
            clock_skew_seconds: 30,
            scope_claim_name: "scope".into(),
            sub_claim_name: "sub".into(),
            allowed_urls: format!("x, {url}"),
            ..Default::default()
        }
    }

    fn claims(overrides: Value) -> Value {
        let mut c = serde_json::json!({"sub": "alice", "aud": ["brook"], "iss": "https://idp",
            "iat": 1_699_999_990, "exp": 1_700_000_100, "scope": "a b"});
        for (k, v) in overrides.as_object().unwrap() {
            match v {
                Value::Null => c.as_object_mut().unwrap().remove(k),
                v => c.as_object_mut().unwrap().insert(k.clone(), v.clone()),
            };
        }
        c
    }

    #[test]
    fn signed_tokens_as_broker_jwt_validator_checks_them() {
        let dir = tempfile::tempdir().unwrap();
        let signer = Signer::new();
        let v = JwtValidator::new(&setup(dir.path(), &signer)).unwrap();
        let ok = v
            .validate(&signer.token("k1", &claims(serde_json::json!({}))), NOW_MS)
            .unwrap();
        assert_eq!(
            (ok.principal_name.as_str(), ok.lifetime_ms),
            ("alice", 1_700_000_100_000)
        );
        let refused = |token: String| v.validate(&token, NOW_MS).unwrap_err();
        let t = |o: Value| signer.token("k1", &claims(o));
        assert!(refused(t(serde_json::json!({"aud": "other"}))).contains("Audience (aud)"));
        assert!(refused(t(serde_json::json!({"iss": "evil"}))).contains("Issuer (iss)"));
        assert!(refused(t(serde_json::json!({"exp": 1_699_999_960}))).contains("no longer valid"));
        // Within the 30 s of clock skew.
        assert!(v
            .validate(&t(serde_json::json!({"exp": 1_699_999_980})), NOW_MS)
            .is_ok());
        assert!(refused(t(serde_json::json!({"iat": null}))).contains("No Issued At"));
        assert!(refused(t(serde_json::json!({"sub": 5}))).contains("'sub'"));
        assert!(refused(t(serde_json::json!({"sub": " "}))).contains("only whitespace"));
        assert!(refused(signer.token("k2", &claims(serde_json::json!({}))))
            .contains("suitable verification key"));
        let other = Signer::new();
        assert!(refused(other.token("k1", &claims(serde_json::json!({}))))
            .contains("Invalid JWS Signature"));
        let none = format!("{}.{}.", b64(br#"{"alg":"none"}"#), b64(b"{}"));
        assert!(refused(none).contains("Malformed JWT"));
        let none = format!("{}.{}.c2ln", b64(br#"{"alg":"none"}"#), b64(b"{}"));
        assert!(refused(none).contains("not a permitted algorithm"));
    }

    #[test]
    fn the_jwks_is_reread_when_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (Signer::new(), Signer::new());
        let cfg = setup(dir.path(), &a);
        let v = JwtValidator::new(&cfg).unwrap();
        let token = b.token("k9", &claims(serde_json::json!({})));
        assert!(v.validate(&token, NOW_MS).is_err());
        let jwks = serde_json::json!({"keys": [b.jwk("k9"), a.jwk("k1"), {"kty": "EC"}]});
        std::fs::write(dir.path().join("jwks.json"), jwks.to_string()).unwrap();
        assert!(v.validate(&token, NOW_MS).is_ok());
    }

    /// A loopback HTTP server answering every GET with `body` (200) or `status`; counts them.
    struct JwksServer {
        url: String,
        body: Arc<Mutex<(u16, String)>>,
        gets: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl JwksServer {
        fn start(status: u16, body: String) -> JwksServer {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
            let body = Arc::new(Mutex::new((status, body)));
            let gets = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let (b, g) = (body.clone(), gets.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    while let Ok((mut s, _)) = listener.accept().await {
                        let mut buf = [0u8; 4096];
                        let _ = s.read(&mut buf).await;
                        g.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let (status, text) = b.lock().clone();
                        let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}", text.len());
                        let _ = s.write_all(answer.as_bytes()).await;
                        let _ = s.shutdown().await;
                    }
                })
            });
            JwksServer { url, body, gets }
        }
    }

    fn http_config(server: &JwksServer, refresh_ms: i64) -> JwtValidatorConfig {
        JwtValidatorConfig {
            jwks_endpoint_url: Some(server.url.clone()),
            allowed_urls: server.url.clone(),
            jwks_refresh_ms: refresh_ms,
            jwks_retry_backoff_ms: 10,
            jwks_retry_backoff_max_ms: 100,
            ..setup(tempfile::tempdir().unwrap().path(), &Signer::new())
        }
    }

    /// Polls `check` every 10 ms for at most 5 s.
    fn poll_until(mut check: impl FnMut() -> bool) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if check() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn an_http_jwks_is_fetched_and_an_unknown_kid_refreshes_it_early() {
        let (a, b) = (Signer::new(), Signer::new());
        let set = |s: &Signer, kid: &str| serde_json::json!({"keys": [s.jwk(kid)]}).to_string();
        let server = JwksServer::start(200, set(&a, "k1"));
        // An hour between scheduled refreshes: only the unknown kid can refresh the set.
        let v = JwtValidator::new(&http_config(&server, 3_600_000)).unwrap();
        let now_ms = 1_700_000_000_000;
        assert!(v
            .validate(&a.token("k1", &claims(serde_json::json!({}))), now_ms)
            .is_ok());
        *server.body.lock() = (200, set(&b, "k2"));
        let rotated = b.token("k2", &claims(serde_json::json!({})));
        let refused = v.validate(&rotated, now_ms).unwrap_err();
        assert!(
            refused.contains(&format!("obtained from {}", server.url)),
            "{refused}"
        );
        assert!(poll_until(|| v.validate(&rotated, now_ms).is_ok()));
        assert!(v
            .validate(&a.token("k1", &claims(serde_json::json!({}))), now_ms)
            .is_err());
        let KeySource::Https(https) = &v.keys else {
            panic!("not an http JWKS")
        };
        // Once a minute per kid (Kafka's MISSING_KEY_ID_CACHE_IN_FLIGHT_MS).
        assert!(https.maybe_expedite_refresh("k3"));
        assert!(!https.maybe_expedite_refresh("k3"));
        assert!(https.maybe_expedite_refresh("k4"));
        assert!(!https.maybe_expedite_refresh(&"k".repeat(1001)));
    }

    #[test]
    fn an_http_jwks_refreshes_on_schedule_and_must_load_at_start_up() {
        let (a, b) = (Signer::new(), Signer::new());
        let set = |s: &Signer, kid: &str| serde_json::json!({"keys": [s.jwk(kid)]}).to_string();
        let server = JwksServer::start(200, set(&a, "k1"));
        let v = JwtValidator::new(&http_config(&server, 50)).unwrap();
        let fetched = server.gets.load(std::sync::atomic::Ordering::SeqCst);
        assert!(poll_until(|| server
            .gets
            .load(std::sync::atomic::Ordering::SeqCst)
            >= fetched + 2));
        // The same kid, a new key: only a scheduled refresh finds it.
        *server.body.lock() = (200, set(&b, "k1"));
        let token = b.token("k1", &claims(serde_json::json!({})));
        assert!(poll_until(|| v.validate(&token, 1_700_000_000_000).is_ok()));
        drop(v);
        let missing = JwksServer::start(404, String::new());
        let err = JwtValidator::new(&http_config(&missing, 50)).unwrap_err();
        assert!(
            err.starts_with("Could not refresh JWKS: Non 200 status code (404)"),
            "{err}"
        );
        assert_eq!(missing.gets.load(std::sync::atomic::Ordering::SeqCst), 1);
        let not_json = JwksServer::start(200, "<html>".into());
        let err = JwtValidator::new(&http_config(&not_json, 50)).unwrap_err();
        assert!(err.contains("is not JSON"), "{err}");
        let err = JwtValidator::new(&JwtValidatorConfig {
            jwks_refresh_ms: -1,
            ..http_config(&server, 50)
        })
        .unwrap_err();
        assert!(err.contains("refresh.ms value must be at least 0"), "{err}");
    }

    #[test]
    fn start_up_errors_are_kafkas() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = setup(dir.path(), &Signer::new());
        let err = |c: JwtValidatorConfig| JwtValidator::new(&c).unwrap_err();
        assert!(err(JwtValidatorConfig {
            allowed_urls: String::new(),
            ..cfg.clone()
        })
        .contains("cannot be accessed due to restrictions"));
        assert!(err(JwtValidatorConfig {
            expected_audience: vec![],
            ..cfg.clone()
        })
        .contains("sasl.oauthbearer.allow.unverified.audience"));
        assert!(err(JwtValidatorConfig {
            expected_issuer: None,
            ..cfg.clone()
        })
        .contains("sasl.oauthbearer.allow.unverified.issuer"));
        let missing = "file:/nonexistent/jwks.json".to_string();
        assert!(err(JwtValidatorConfig {
            jwks_endpoint_url: Some(missing.clone()),
            allowed_urls: missing,
            ..cfg.clone()
        })
        .contains("doesn't exist"));
        let ftp = "ftp://x/jwks".to_string();
        assert!(err(JwtValidatorConfig {
            jwks_endpoint_url: Some(ftp.clone()),
            allowed_urls: ftp,
            ..cfg.clone()
        })
        .contains("invalid protocol (ftp)"));
        assert_eq!(
            system_property(
                "-Xmx1g -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file:/a,file:/b",
                ALLOWED_URLS_PROPERTY
            ),
            "file:/a,file:/b"
        );
    }
}
