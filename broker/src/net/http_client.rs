//! Brook's one HTTP/1.1 client, over hyper: `http:` and `https:` URLs, TLS by rustls (the
//! aws-lc-rs provider every TLS context of the broker uses), a bounded response body and
//! bounded waits. Its bounds default to those of jose4j's `org.jose4j.http.Get`, the client
//! Kafka fetches a JWKS with (`RefreshingHttpsJwks` through `HttpsJwks`): 20 s to connect,
//! 20 s to read, 512 KiB of body. Kafka's read timeout bounds each socket read; Brook's bounds
//! the whole answer (head and body), which is stricter and never longer.
//!
//! One connection per request: the callers (a JWKS refresh every few minutes) gain nothing
//! from pooling, and a fresh connection never carries a half-read answer of an earlier call.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, HOST, USER_AGENT};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// jose4j `Get`'s `connectTimeout`.
pub const CONNECT_TIMEOUT_MS_DEFAULT: u64 = 20_000;
/// jose4j `Get`'s `readTimeout`.
pub const READ_TIMEOUT_MS_DEFAULT: u64 = 20_000;
/// jose4j `Get`'s `responseBodySizeLimit` (524288 characters).
pub const BODY_BYTES_MAX_DEFAULT: usize = 512 * 1024;

/// Why a request got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("{url} is not an http or https URL: {why}")]
    Url { url: String, why: String },
    #[error("https URL {url} but no TLS context was given")]
    NoTls { url: String },
    #[error("could not connect to {url}: {why}")]
    Connect { url: String, why: String },
    /// The handshake or the server's certificate failed (Java's `SSLHandshakeException`).
    #[error("TLS handshake with {url} failed: {why}")]
    Tls { url: String, why: String },
    #[error("{url} did not {what} within {timeout_ms} ms")]
    Timeout {
        url: String,
        what: &'static str,
        timeout_ms: u64,
    },
    #[error("the HTTP exchange with {url} failed: {why}")]
    Io { url: String, why: String },
    /// jose4j's wording for a status other than 200 OK.
    #[error("Non 200 status code ({status}) returned from {url}")]
    Status { url: String, status: u16 },
    #[error("More than {body_bytes_max} bytes have been read from the response body of {url}")]
    BodyTooLarge { url: String, body_bytes_max: usize },
}

impl HttpError {
    /// Whether trying again may help, as jose4j's `Get` decides: a TLS failure, a 404 (Java's
    /// `FileNotFoundException`) and an oversized body are final; other I/O errors, timeouts
    /// and other statuses are not.
    pub fn is_retriable(&self) -> bool {
        match self {
            HttpError::Url { .. } | HttpError::NoTls { .. } | HttpError::Tls { .. } => false,
            HttpError::BodyTooLarge { .. } => false,
            HttpError::Status { status, .. } => *status != 404,
            HttpError::Connect { .. } | HttpError::Timeout { .. } | HttpError::Io { .. } => true,
        }
    }
}

/// An answer: its status, headers and whole body.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: StatusCode,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

/// Requests to `http:` URLs, and to `https:` ones when built with a TLS context.
#[derive(Clone)]
pub struct HttpClient {
    tls: Option<Arc<ClientConfig>>,
    connect_timeout_ms: u64,
    read_timeout_ms: u64,
    body_bytes_max: usize,
}

impl HttpClient {
    /// A client with jose4j's bounds; `tls` verifies `https:` servers.
    pub fn new(tls: Option<Arc<ClientConfig>>) -> HttpClient {
        HttpClient {
            tls,
            connect_timeout_ms: CONNECT_TIMEOUT_MS_DEFAULT,
            read_timeout_ms: READ_TIMEOUT_MS_DEFAULT,
            body_bytes_max: BODY_BYTES_MAX_DEFAULT,
        }
    }

    pub fn with_timeouts(self, connect_timeout_ms: u64, read_timeout_ms: u64) -> HttpClient {
        HttpClient {
            connect_timeout_ms,
            read_timeout_ms,
            ..self
        }
    }

    pub fn with_body_bytes_max(self, body_bytes_max: usize) -> HttpClient {
        HttpClient {
            body_bytes_max,
            ..self
        }
    }

    /// GET `url`: the body of a 200 answer, else the status as an error.
    pub async fn get(&self, url: &str) -> Result<Bytes, HttpError> {
        let answer = self.send(Method::GET, url, &[], Bytes::new()).await?;
        match answer.status {
            StatusCode::OK => Ok(answer.body),
            status => Err(HttpError::Status {
                url: url.to_string(),
                status: status.as_u16(),
            }),
        }
    }

    /// One request on a new connection; any status is an answer.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<HttpResponse, HttpError> {
        let target = Target::parse(url)?;
        let request = target.request(method, headers, body)?;
        let tls = match (&self.tls, target.https) {
            (_, false) => None,
            (Some(tls), true) => Some(tls.clone()),
            (None, true) => {
                return Err(HttpError::NoTls {
                    url: url.to_string(),
                })
            }
        };
        let connect = tokio::time::timeout(
            Duration::from_millis(self.connect_timeout_ms),
            TcpStream::connect((target.host.as_str(), target.port)),
        );
        let tcp = connect
            .await
            .map_err(|_| target.timeout("connect", self.connect_timeout_ms))?
            .map_err(|e| HttpError::Connect {
                url: url.to_string(),
                why: e.to_string(),
            })?;
        let _ = tcp.set_nodelay(true);
        let Some(tls) = tls else {
            return self.exchange(&target, tcp, request).await;
        };
        let name = ServerName::try_from(target.host.clone()).map_err(|e| target.url_error(e))?;
        let handshake = tokio::time::timeout(
            Duration::from_millis(self.connect_timeout_ms),
            tokio_rustls::TlsConnector::from(tls).connect(name, tcp),
        );
        let stream = handshake
            .await
            .map_err(|_| target.timeout("complete the TLS handshake", self.connect_timeout_ms))?
            .map_err(|e| HttpError::Tls {
                url: url.to_string(),
                why: e.to_string(),
            })?;
        self.exchange(&target, stream, request).await
    }

    /// One request over `io`, a connection the caller opened and secured itself (the
    /// controller's channel: TLS, then SASL, before any HTTP); `url` names the host and path.
    pub async fn send_on<S>(
        &self,
        io: S,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<HttpResponse, HttpError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let target = Target::parse(url)?;
        let request = target.request(method, headers, body)?;
        self.exchange(&target, io, request).await
    }

    /// The request and its whole answer over `io`, within the read timeout, the body read no
    /// further than `body_bytes_max`. hyper's connection task is driven here, alongside the
    /// exchange, so nothing outlives the call.
    async fn exchange<S>(
        &self,
        target: &Target,
        io: S,
        request: Request<Full<Bytes>>,
    ) -> Result<HttpResponse, HttpError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io_error = |e: &dyn std::fmt::Display| HttpError::Io {
            url: target.url.clone(),
            why: e.to_string(),
        };
        let limit = self.body_bytes_max;
        let work = async {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
                .await
                .map_err(|e| io_error(&e))?;
            let answer = async {
                let response = sender
                    .send_request(request)
                    .await
                    .map_err(|e| io_error(&e))?;
                let (parts, body) = response.into_parts();
                let collected = Limited::new(body, limit).collect().await;
                let body = match collected {
                    Ok(b) => b.to_bytes(),
                    Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                        return Err(HttpError::BodyTooLarge {
                            url: target.url.clone(),
                            body_bytes_max: limit,
                        })
                    }
                    Err(e) => return Err(io_error(&e)),
                };
                Ok(HttpResponse {
                    status: parts.status,
                    headers: parts.headers,
                    body,
                })
            };
            drive(conn, answer, io_error).await
        };
        tokio::time::timeout(Duration::from_millis(self.read_timeout_ms), work)
            .await
            .map_err(|_| target.timeout("answer", self.read_timeout_ms))?
    }
}

/// Polls `answer` with the connection `conn` that carries it until the answer is complete. A
/// connection that ends cleanly first (the server closed after its answer) leaves the answer to
/// finish from what hyper already read; one that fails is the error.
async fn drive<C, A, T>(
    conn: C,
    answer: A,
    io_error: impl Fn(&dyn std::fmt::Display) -> HttpError,
) -> Result<T, HttpError>
where
    C: std::future::Future<Output = Result<(), hyper::Error>>,
    A: std::future::Future<Output = Result<T, HttpError>>,
{
    tokio::pin!(conn);
    tokio::pin!(answer);
    let mut conn_done = false;
    loop {
        tokio::select! {
            biased;
            result = &mut answer => return result,
            ended = &mut conn, if !conn_done => match ended {
                Ok(()) => conn_done = true,
                Err(e) => return Err(io_error(&e)),
            },
        }
    }
}

/// A URL's parts that the connection and the request need.
struct Target {
    url: String,
    https: bool,
    /// The host without IPv6 brackets: what is connected to and verified.
    host: String,
    port: u16,
    /// `Host:` as the URL names it.
    authority: String,
    path_and_query: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, HttpError> {
        let bad = |why: &str| HttpError::Url {
            url: url.to_string(),
            why: why.to_string(),
        };
        let uri: Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        let https = match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(bad("the scheme must be http or https")),
        };
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Target {
            url: url.to_string(),
            https,
            host: host.to_string(),
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
            authority: authority.as_str().to_string(),
            path_and_query: uri
                .path_and_query()
                .map_or("/".to_string(), |p| p.as_str().to_string()),
        })
    }

    fn request(
        &self,
        method: Method,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, HttpError> {
        let mut builder = Request::builder()
            .method(method)
            .uri(self.path_and_query.as_str())
            .header(HOST, self.authority.as_str())
            .header(USER_AGENT, HeaderValue::from_static("brook"));
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(Full::new(body)).map_err(|e| self.url_error(e))
    }

    fn url_error(&self, e: impl std::fmt::Display) -> HttpError {
        HttpError::Url {
            url: self.url.clone(),
            why: e.to_string(),
        }
    }

    fn timeout(&self, what: &'static str, timeout_ms: u64) -> HttpError {
        HttpError::Timeout {
            url: self.url.clone(),
            what,
            timeout_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A loopback server answering each connection with `answer` (after reading the request
    /// head), or never answering when `answer` is `None`.
    async fn server(answer: Option<Vec<u8>>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf).await;
                    match answer {
                        Some(a) => {
                            let _ = s.write_all(&a).await;
                            let _ = s.shutdown().await;
                        }
                        // Hold the connection open, silent, until the client leaves.
                        None => while s.read(&mut buf).await.is_ok_and(|n| n > 0) {},
                    }
                });
            }
        });
        format!("http://{addr}/jwks.json")
    }

    fn ok(body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    #[tokio::test]
    async fn a_body_within_the_bound_is_read_a_larger_one_refused() {
        let url = server(Some(ok(&"k".repeat(100)))).await;
        let client = HttpClient::new(None).with_body_bytes_max(100);
        assert_eq!(client.get(&url).await.unwrap().len(), 100);
        let small = client.with_body_bytes_max(99);
        let err = small.get(&url).await.unwrap_err();
        assert!(matches!(err, HttpError::BodyTooLarge { .. }), "{err}");
        assert!(!err.is_retriable());
        // A body without a length (read until close) is bounded the same way.
        let unsized_body = format!("HTTP/1.1 200 OK\r\n\r\n{}", "k".repeat(5000)).into_bytes();
        let url = server(Some(unsized_body)).await;
        let err = small.get(&url).await.unwrap_err();
        assert!(matches!(err, HttpError::BodyTooLarge { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_silent_server_times_out_and_a_status_is_an_error() {
        let url = server(None).await;
        let client = HttpClient::new(None).with_timeouts(1_000, 200);
        let started = std::time::Instant::now();
        let err = client.get(&url).await.unwrap_err();
        assert!(matches!(err, HttpError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(err.is_retriable());
        let url = server(Some(
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_vec(),
        ))
        .await;
        let err = client.get(&url).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("Non 200 status code (404) returned from {url}")
        );
        assert!(!err.is_retriable());
        let err = client.get("https://127.0.0.1:1/x").await.unwrap_err();
        assert!(matches!(err, HttpError::NoTls { .. }), "{err}");
        let err = client.get("http://127.0.0.1:1/x").await.unwrap_err();
        assert!(matches!(err, HttpError::Connect { .. }), "{err}");
        assert!(matches!(
            client.get("ftp://h/x").await,
            Err(HttpError::Url { .. })
        ));
    }
}
