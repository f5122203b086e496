//! New secured connections per second against one listener (issue 29), for Brook and Kafka
//! 4.4 alike: `--protocol ssl` opens `--connections` connections that each do the TLS
//! handshake and one ApiVersions; `--protocol sasl-ssl` adds, after the handshake, what
//! kafka-clients' `SaslClientAuthenticator` sends on a SASL_SSL connection: ApiVersions,
//! SaslHandshake v1 for SCRAM-SHA-512 and the two SaslAuthenticate v2 rounds (RFC 5802), the
//! server signature checked. `benches/compare/run.py --tls-only` runs it against both systems,
//! alternating, and reads the brokers' CPU around it.
//!
//!     target/release/handshakes --addr 127.0.0.1:29102 --protocol ssl --ca ca.pem
//!     target/release/handshakes --addr 127.0.0.1:29112 --protocol sasl-ssl --ca ca.pem \
//!         --user bench --password bench-secret
//!
//! Written in Rust on rustls rather than in Java on kafka-clients' authenticator: the client
//! shares the machine's two cores with the broker, so it should cost as little as it can.
//! Every handshake is a full one (no session resumption) with X25519, the key exchange
//! Java's TLS client offers first, so both brokers do the same work; the client computes
//! SCRAM's salted password once per salt and iteration count instead of per login (the broker
//! does no PBKDF2 per login either: it keeps StoredKey and ServerKey). Prints one JSON line.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use brook_protocol_tests::sasl::Scram;
use brook_protocol_tests::wire::decode_response;
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;

/// Socket timeout of one connection's reads and writes.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the warm-up waits for a first successful login: a SCRAM user created just
/// before reaches the broker's credential cache through the metadata log.
const FIRST_LOGIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response frame read (ApiVersions and SASL answers are a few KiB).
const FRAME_BYTES_MAX: usize = 1 << 20;
const SCRAM: Scram = Scram { sha512: true };

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Protocol {
    Ssl,
    SaslSsl,
}

#[derive(Parser, Debug)]
#[command(about = "TLS handshakes or SASL_SSL SCRAM-SHA-512 logins per second")]
struct Args {
    /// The listener, host:port (its certificate must name the host).
    #[arg(long)]
    addr: String,
    #[arg(long, value_enum)]
    protocol: Protocol,
    /// The CA certificate (PEM) that signed the listener's certificate.
    #[arg(long)]
    ca: PathBuf,
    #[arg(long, default_value = "bench")]
    user: String,
    #[arg(long, default_value = "bench-secret")]
    password: String,
    /// Connections timed.
    #[arg(long, default_value_t = 2000)]
    connections: usize,
    /// Connections before the timing starts (warm-up, not counted).
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// Connections open at a time (each thread opens its next once its last is closed).
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

/// A secured connection in progress.
type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// What every connection shares: the TLS client context and the salted password cache.
struct Client {
    args: Args,
    tls: Arc<rustls::ClientConfig>,
    salted: Mutex<Option<Salted>>,
}

/// SCRAM's salted password of the last login, with the salt and iteration count it is for.
struct Salted {
    salt: Vec<u8>,
    iterations: u32,
    /// Hi(password, salt, iterations).
    value: Vec<u8>,
}

fn tls_config(ca: &Path) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| format!("{}: {e}", ca.display()))? {
        let cert = cert.map_err(|e| format!("{}: {e}", ca.display()))?;
        roots.add(cert).map_err(|e| e.to_string())?;
    }
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = vec![rustls::crypto::aws_lc_rs::kx_group::X25519];
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

/// Sends `body` as request `cid` and decodes its answer.
fn call<R: Request>(s: &mut Tls, cid: i32, version: i16, body: &R) -> Result<R::Response, String>
where
    R::Response: std::fmt::Debug,
{
    let key = ApiKey::try_from(R::KEY).map_err(|_| "unknown api key".to_string())?;
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = cid;
    header.client_id = Some(StrBytes::from_static_str("handshakes"));
    let mut buf = vec![0u8; 4];
    header
        .encode(&mut buf, key.request_header_version(version))
        .map_err(|e| e.to_string())?;
    body.encode(&mut buf, version).map_err(|e| e.to_string())?;
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    s.write_all(&buf)
        .map_err(|e| format!("send {key:?}: {e}"))?;
    let mut size = [0u8; 4];
    s.read_exact(&mut size)
        .map_err(|e| format!("read {key:?}: {e}"))?;
    let size = i32::from_be_bytes(size);
    if size < 0 || size as usize > FRAME_BYTES_MAX {
        return Err(format!("{key:?} response length {size}"));
    }
    let mut frame = vec![0u8; size as usize];
    s.read_exact(&mut frame)
        .map_err(|e| format!("read {key:?}: {e}"))?;
    Ok(decode_response(key, version, cid, Bytes::from(frame)))
}

impl Client {
    /// One connection: handshake, ApiVersions, and for SASL_SSL the SCRAM login.
    fn connect_once(&self, nonce: &str) -> Result<(), String> {
        let tcp = TcpStream::connect(&self.args.addr).map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(IO_TIMEOUT))
            .map_err(|e| e.to_string())?;
        tcp.set_write_timeout(Some(IO_TIMEOUT))
            .map_err(|e| e.to_string())?;
        let host = self.args.addr.rsplit_once(':').map_or("", |(h, _)| h);
        let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
        let conn = rustls::ClientConnection::new(Arc::clone(&self.tls), name)
            .map_err(|e| e.to_string())?;
        let mut s = rustls::StreamOwned::new(conn, tcp);
        let versions = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("brook-handshakes"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        let v = call(&mut s, 1, 3, &versions)?;
        if v.error_code != 0 {
            return Err(format!("ApiVersions error {}", v.error_code));
        }
        if self.args.protocol == Protocol::SaslSsl {
            self.scram_login(&mut s, nonce)?;
        }
        s.conn.send_close_notify();
        let _ = s.flush();
        Ok(())
    }

    fn scram_login(&self, s: &mut Tls, nonce: &str) -> Result<(), String> {
        let hs =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(SCRAM.name()));
        let h = call(s, 2, 1, &hs)?;
        if h.error_code != 0 {
            return Err(format!("SaslHandshake error {}", h.error_code));
        }
        let bare = format!("n={},r={nonce}", self.args.user);
        let auth =
            |token: Vec<u8>| SaslAuthenticateRequest::default().with_auth_bytes(token.into());
        let first = call(s, 3, 2, &auth(format!("n,,{bare}").into_bytes()))?;
        if first.error_code != 0 {
            return Err(format!(
                "SaslAuthenticate error {} {:?}",
                first.error_code, first.error_message
            ));
        }
        let server_first =
            String::from_utf8(first.auth_bytes.to_vec()).map_err(|e| e.to_string())?;
        let salted = self.salted(&server_first);
        let (fin, server_sig) = SCRAM.client_final_salted(&bare, &server_first, &salted, 0);
        let last = call(s, 4, 2, &auth(fin.into_bytes()))?;
        if last.error_code != 0 {
            return Err(format!(
                "SaslAuthenticate error {} {:?}",
                last.error_code, last.error_message
            ));
        }
        let want = format!("v={}", base64_encode(&server_sig));
        if last.auth_bytes.as_ref() != want.as_bytes() {
            return Err("wrong server signature".into());
        }
        Ok(())
    }

    /// Hi(password, salt, i), computed once per salt and iteration count.
    fn salted(&self, server_first: &str) -> Vec<u8> {
        let (_, salt, iterations) = Scram::parse_server_first(server_first);
        let mut cache = self.salted.lock().unwrap_or_else(|e| e.into_inner());
        match &*cache {
            Some(s) if s.salt == salt && s.iterations == iterations => s.value.clone(),
            _ => {
                let value = SCRAM.salted_password(&self.args.password, &salt, iterations);
                *cache = Some(Salted {
                    salt,
                    iterations,
                    value: value.clone(),
                });
                value
            }
        }
    }
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// The first connection, retried until it succeeds or [`FIRST_LOGIN_TIMEOUT`] passes; then
/// the rest of the warm-up.
fn warm_up(c: &Client) -> Result<(), String> {
    let deadline = Instant::now() + FIRST_LOGIN_TIMEOUT;
    loop {
        match c.connect_once("warmup0") {
            Ok(()) => break,
            Err(e) if Instant::now() >= deadline => return Err(format!("first connection: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    (1..c.args.warmup).try_for_each(|i| c.connect_once(&format!("warmup{i}")))
}

/// Runs the timed connections on `threads` threads: (wall seconds, per-connection ms).
fn timed(c: &Arc<Client>) -> Result<(f64, Vec<f64>), String> {
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..c.args.threads.max(1))
        .map(|_| {
            let (c, next) = (Arc::clone(c), Arc::clone(&next));
            std::thread::spawn(move || -> Result<Vec<f64>, String> {
                let mut ms = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= c.args.connections {
                        return Ok(ms);
                    }
                    let t = Instant::now();
                    c.connect_once(&format!("bench{i}"))?;
                    ms.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            })
        })
        .collect();
    let mut all = Vec::with_capacity(c.args.connections);
    for w in workers {
        all.extend(w.join().map_err(|_| "worker panicked".to_string())??);
    }
    Ok((t0.elapsed().as_secs_f64(), all))
}

fn main() {
    let args = Args::parse();
    let tls = tls_config(&args.ca).unwrap_or_else(|e| {
        eprintln!("handshakes: {e}");
        std::process::exit(2)
    });
    let c = Arc::new(Client {
        args,
        tls,
        salted: Mutex::new(None),
    });
    let result = warm_up(&c).and_then(|()| timed(&c));
    let (secs, mut ms) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("handshakes: {e}");
            std::process::exit(1)
        }
    };
    ms.sort_by(f64::total_cmp);
    let out = json!({
        "protocol": format!("{:?}", c.args.protocol),
        "connections": ms.len(),
        "threads": c.args.threads,
        "seconds": secs,
        "per_s": ms.len() as f64 / secs,
        "p50_ms": percentile(&ms, 0.5),
        "p99_ms": percentile(&ms, 0.99),
    });
    println!("{out}");
}
