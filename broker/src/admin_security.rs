//! Who may use Brook's HTTP APIs (a node's admin listener, `brook cluster`'s supervisor),
//! and over what.
//!
//! Modelled on Kafka Connect's REST server, the HTTP API Kafka itself ships:
//! - TLS: `admin.listener=https://HOST:PORT` serves TLS; its keys are the `ssl.*` keys under
//!   the `admin.listeners.https.` prefix, all or nothing: when any prefixed key is set only
//!   prefixed keys are read, else the broker's unprefixed `ssl.*` keys (Connect's
//!   `RestServerConfig.ADMIN_LISTENERS_HTTPS_CONFIGS_PREFIX` with
//!   `SSLUtils.createServerSideSslContextFactory`'s `valuesWithPrefixAllOrNothing`). The
//!   context is built by [`crate::security::ssl::server_tls_from`], the broker listeners' own.
//! - HTTP Basic authentication (RFC 7617) against a credentials file of `user=password`
//!   lines, Connect's `BasicAuthSecurityRestExtension` with its `PropertyFileLoginModule`
//!   (`admin.basic.auth.credentials.file`). Unlike Connect, an empty file is refused at
//!   start-up rather than letting everyone in.
//! - `admin.metrics.authentication.required` (default true): whether `GET /metrics` needs
//!   credentials too; false leaves it open for a Prometheus scraper without any.
//!
//! A refused request is answered 401 with `WWW-Authenticate: Basic realm="brook"` before
//! any handler runs, so it changes nothing. Passwords are compared as SHA-256 digests in
//! constant time ([`subtle`]), against every user so the time taken does not say whether a
//! user exists; neither the header nor the password is ever logged.
//!
//! Clients in this repository (`brook fault`, `brook node`, the chaos checker, the test
//! harnesses) read their credentials from [`CREDENTIALS_ENV`], `user:password`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use subtle::ConstantTimeEq;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// The environment variable Brook's HTTP clients take credentials from: `user:password`.
pub const CREDENTIALS_ENV: &str = "BROOK_HTTP_CREDENTIALS";
/// The prefix of the admin listener's TLS keys (Kafka Connect's name for its admin listener's).
pub const HTTPS_CONFIGS_PREFIX: &str = "admin.listeners.https.";
/// The key naming the credentials file.
pub const CREDENTIALS_FILE_KEY: &str = "admin.basic.auth.credentials.file";
/// The key saying whether `/metrics` needs credentials.
pub const METRICS_AUTHENTICATION_KEY: &str = "admin.metrics.authentication.required";
/// The realm named in `WWW-Authenticate`.
pub const REALM: &str = "brook";
/// Largest credentials file read.
pub const CREDENTIALS_FILE_BYTES_MAX: u64 = 1 << 20;
/// How long a client has to finish its TLS handshake with the admin listener.
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// TLS handshakes under way at once; connections beyond are closed at once.
pub const TLS_HANDSHAKES_IN_FLIGHT_MAX: usize = 64;

type Digest32 = [u8; 32];

fn digest(bytes: &[u8]) -> Digest32 {
    Sha256::digest(bytes).into()
}

/// The users allowed in, with their passwords' digests.
pub struct BasicCredentials {
    users: Vec<(Digest32, Digest32)>,
}

impl std::fmt::Debug for BasicCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BasicCredentials({} users)", self.users.len())
    }
}

impl BasicCredentials {
    /// One user.
    pub fn single(user: &str, password: &str) -> BasicCredentials {
        BasicCredentials {
            users: vec![(digest(user.as_bytes()), digest(password.as_bytes()))],
        }
    }

    /// A file of `user=password` (or `user: password`) lines; `#` and `!` start comments,
    /// as in a Java properties file (without its escapes and continuation lines).
    pub fn parse(text: &str) -> Result<BasicCredentials, String> {
        let mut users = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let Some(at) = line.find(['=', ':']) else {
                return Err(format!("line {}: expected user=password", n + 1));
            };
            let (user, password) = (line[..at].trim(), line[at + 1..].trim());
            if user.is_empty() || password.is_empty() {
                return Err(format!("line {}: empty user or password", n + 1));
            }
            users.push((digest(user.as_bytes()), digest(password.as_bytes())));
        }
        if users.is_empty() {
            return Err("no user=password line: nobody could log in".into());
        }
        Ok(BasicCredentials { users })
    }

    /// [`BasicCredentials::parse`] of the file at `path`.
    pub fn load(path: &Path) -> Result<BasicCredentials, String> {
        use std::io::Read as _;
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(CREDENTIALS_FILE_BYTES_MAX).read_to_string(&mut text))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Whether `header` (an `Authorization` value) carries a known user's password.
    pub fn accepts(&self, header: Option<&HeaderValue>) -> bool {
        let Some((user, password)) = header.and_then(decode_basic) else {
            return false;
        };
        let (user, password) = (digest(user.as_bytes()), digest(password.as_bytes()));
        let mut ok = subtle::Choice::from(0);
        for (u, p) in &self.users {
            ok |= u.ct_eq(&user) & p.ct_eq(&password);
        }
        ok.into()
    }
}

/// `Basic base64(user:password)` apart (RFC 7617: the user id holds no colon).
fn decode_basic(header: &HeaderValue) -> Option<(String, String)> {
    let text = header.to_str().ok()?;
    let (scheme, encoded) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let raw = String::from_utf8(raw).ok()?;
    let (user, password) = raw.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// The `Authorization` value for `user` and `password`.
pub fn basic_header(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// The `Authorization` value from [`CREDENTIALS_ENV`], when set; an error when it is set
/// but is not `user:password`.
pub fn client_authorization() -> Result<Option<String>, String> {
    match std::env::var(CREDENTIALS_ENV) {
        Err(_) => Ok(None),
        Ok(v) if v.is_empty() => Ok(None),
        Ok(v) => match v.split_once(':') {
            Some((user, password)) if !user.is_empty() => Ok(Some(basic_header(user, password))),
            _ => Err(format!("{CREDENTIALS_ENV} must be user:password")),
        },
    }
}

/// How the admin listener is secured (all off by default: today's open loopback API).
#[derive(Clone, Default)]
pub struct AdminHttp {
    /// `admin.listener=https://...`: the TLS context.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// `admin.basic.auth.credentials.file`, loaded.
    pub credentials: Option<Arc<BasicCredentials>>,
    /// `admin.metrics.authentication.required`.
    pub metrics_authentication_required: bool,
}

impl std::fmt::Debug for AdminHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminHttp")
            .field("tls", &self.tls.is_some())
            .field("credentials", &self.credentials)
            .field(
                "metrics_authentication_required",
                &self.metrics_authentication_required,
            )
            .finish()
    }
}

/// Whether `key` is one of the admin listener's TLS keys: `admin.listeners.https.ssl.*`.
pub fn is_https_key(key: &str) -> bool {
    key.strip_prefix(HTTPS_CONFIGS_PREFIX)
        .is_some_and(|k| k.starts_with("ssl.") && crate::config_def::kafka_broker_key(k).is_some())
}

/// `admin.listener`: `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT`; true for https.
pub fn parse_listener(v: &str) -> Result<(SocketAddr, bool), String> {
    let (https, addr) = match v.split_once("://") {
        None => (false, v),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => (false, rest),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (true, rest),
        Some((scheme, _)) => return Err(format!("unknown scheme {scheme}: http or https")),
    };
    let addr = addr
        .parse()
        .map_err(|_| "expected HOST:PORT, http://HOST:PORT or https://HOST:PORT".to_string())?;
    Ok((addr, https))
}

/// The admin listener's security from the broker's values; `https` from `admin.listener`.
/// An unusable store or credentials file is an error naming its key.
pub fn from_values(values: &BTreeMap<String, String>, https: bool) -> Result<AdminHttp, String> {
    let tls = if https {
        let prefixed: BTreeMap<String, String> = values
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(HTTPS_CONFIGS_PREFIX)?.into(), v.clone())))
            .collect();
        let (source, prefix) = if prefixed.is_empty() {
            (values, "")
        } else {
            (&prefixed, HTTPS_CONFIGS_PREFIX)
        };
        let v = crate::security::ssl::SslView::new(source, None);
        let tls = crate::security::ssl::server_tls_from(&v, "the admin listener")
            .map_err(|e| format!("admin listener: invalid {prefix}{}: {}", e.key, e.why))?;
        Some(tls.config)
    } else {
        None
    };
    let credentials = match values.get(CREDENTIALS_FILE_KEY).map(|s| s.trim()) {
        None | Some("") => None,
        Some(path) => Some(Arc::new(
            BasicCredentials::load(Path::new(path))
                .map_err(|e| format!("invalid {CREDENTIALS_FILE_KEY}: {e}"))?,
        )),
    };
    let required = match values.get(METRICS_AUTHENTICATION_KEY).map(|s| s.trim()) {
        None | Some("") => true,
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) => {
            return Err(format!(
                "invalid {METRICS_AUTHENTICATION_KEY}: {v}: true or false"
            ))
        }
    };
    Ok(AdminHttp {
        tls,
        credentials,
        metrics_authentication_required: required,
    })
}

/// What the authentication layer checks.
struct Gate {
    credentials: Arc<BasicCredentials>,
    /// Paths served without credentials.
    open_paths: Vec<&'static str>,
}

/// `router` behind Basic authentication with `credentials`, except `open_paths`; `router`
/// unchanged without credentials.
pub fn protect(
    router: Router,
    credentials: Option<Arc<BasicCredentials>>,
    open_paths: Vec<&'static str>,
) -> Router {
    let Some(credentials) = credentials else {
        return router;
    };
    let gate = Arc::new(Gate {
        credentials,
        open_paths,
    });
    router.layer(axum::middleware::from_fn_with_state(gate, check))
}

async fn check(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if gate.open_paths.contains(&path)
        || gate
            .credentials
            .accepts(request.headers().get(AUTHORIZATION))
    {
        return next.run(request).await;
    }
    // The path only: never the header, which holds the password.
    tracing::debug!(path, method = %request.method(), "HTTP request without valid credentials refused");
    unauthorized()
}

/// 401 with the challenge a browser answers with its login prompt.
pub fn unauthorized() -> Response {
    let challenge = format!("Basic realm=\"{REALM}\", charset=\"UTF-8\"");
    let mut response = (
        StatusCode::UNAUTHORIZED,
        Json(serde_json::json!({ "error": "authentication required" })),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(WWW_AUTHENTICATE, v);
    }
    response
}

/// The admin listener serving TLS: handshakes run concurrently (at most
/// [`TLS_HANDSHAKES_IN_FLIGHT_MAX`], each within [`TLS_HANDSHAKE_TIMEOUT_MS`]) and finished
/// ones are handed to the HTTP server.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    done_tx: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
    done_rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    in_flight: Arc<Semaphore>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> TlsListener {
        let (done_tx, done_rx) = mpsc::channel(TLS_HANDSHAKES_IN_FLIGHT_MAX);
        TlsListener {
            tcp,
            acceptor: TlsAcceptor::from(config),
            done_tx,
            done_rx,
            in_flight: Arc::new(Semaphore::new(TLS_HANDSHAKES_IN_FLIGHT_MAX)),
        }
    }

    fn handshake(&self, stream: TcpStream, peer: SocketAddr) {
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            return; // Too many handshakes under way: this connection is closed.
        };
        let (acceptor, done) = (self.acceptor.clone(), self.done_tx.clone());
        tokio::spawn(async move {
            let timeout = Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS);
            match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = done.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "admin TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "admin TLS handshake timed out"),
            }
            drop(permit);
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                Some(done) = self.done_rx.recv() => return done,
                accepted = self.tcp.accept() => match accepted {
                    Ok((stream, peer)) => self.handshake(stream, peer),
                    Err(e) => {
                        // Out of file descriptors and the like: axum's own listener waits too.
                        tracing::warn!(error = %e, "admin listener accept failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                },
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, password: &str) -> HeaderValue {
        HeaderValue::from_str(&basic_header(user, password)).unwrap()
    }

    #[test]
    fn only_a_listed_user_with_its_password_is_accepted() {
        let c = BasicCredentials::parse("# admins\nalice=s3cret\nbob: other:pw\n").unwrap();
        assert!(c.accepts(Some(&header("alice", "s3cret"))));
        assert!(c.accepts(Some(&header("bob", "other:pw"))));
        assert!(!c.accepts(Some(&header("alice", "other:pw"))));
        assert!(!c.accepts(Some(&header("carol", "s3cret"))));
        assert!(!c.accepts(Some(&header("alice", "s3cre"))));
        assert!(!c.accepts(None));
        let bearer = HeaderValue::from_static("Bearer s3cret");
        assert!(!c.accepts(Some(&bearer)));
        let garbage = HeaderValue::from_static("Basic !!!");
        assert!(!c.accepts(Some(&garbage)));
    }

    #[test]
    fn an_empty_or_malformed_file_is_refused() {
        assert!(BasicCredentials::parse("# nobody\n").is_err());
        assert!(BasicCredentials::parse("alice\n").is_err());
        assert!(BasicCredentials::parse("=pw\n").is_err());
    }

    #[test]
    fn listener_schemes() {
        assert_eq!(
            parse_listener("127.0.0.1:0").unwrap(),
            ("127.0.0.1:0".parse().unwrap(), false)
        );
        assert!(parse_listener("https://127.0.0.1:9").unwrap().1);
        assert!(!parse_listener("HTTP://127.0.0.1:9").unwrap().1);
        assert!(parse_listener("ftp://127.0.0.1:9").is_err());
    }
}
