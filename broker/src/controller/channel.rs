//! The controller listener's security: TLS and SASL on the quorum's channel, as Kafka 4.4
//! secures a controller listener that `listener.security.protocol.map` maps to SSL,
//! SASL_PLAINTEXT or SASL_SSL.
//!
//! Brook's controller traffic (Raft votes and appends, snapshots, forwarded writes such as
//! broker registrations and heartbeats, DescribeQuorum) is HTTP/1.1 with one connection per
//! call ([`super::network`]). A secured listener wraps each connection before the HTTP
//! request: the TLS handshake (the listener's `listener.name.<l>.ssl.*` keys; the client
//! side uses the same listener's trust store and key store, as Kafka's controller clients do),
//! then the SASL exchange in Kafka's own framing, SaslHandshake v1 and SaslAuthenticate
//! (Kafka's `SaslServerAuthenticator` / `SaslClientAuthenticator`, the code the broker
//! listeners use), with `sasl.mechanism.controller.protocol` and that mechanism's
//! `listener.name.<l>.<mechanism>.sasl.jaas.config` `username`/`password`. A connection that
//! fails either is closed before any HTTP is read.
//!
//! SCRAM on the controller listener: the voters must authenticate one another before the
//! quorum has a leader, so before any SCRAM record is in the metadata log. Until the cluster
//! has recorded its bootstrap users (`MetadataImage::scram_bootstrapped`), the listener also
//! accepts the credentials this node was formatted with (`brook format --add-scram`, Kafka's
//! `kafka-storage format --add-scram` bootstrap records), the same ones the first leader then
//! records; from then on only the metadata image's, so later changes and deletions hold.
//! (Kafka 4.4's controllers read SCRAM credentials only from the replayed log, so a
//! multi-voter quorum whose controller listener speaks only SCRAM cannot elect: KAFKA-15513.)
//!
//! Authorization mirrors Kafka's `ControllerApis`: every request Brook sends to the
//! controller listener is one Kafka's controller answers only to a principal with
//! CLUSTER_ACTION on the cluster (Vote, BeginQuorumEpoch, Fetch and FetchSnapshot of the Raft
//! log, BrokerRegistration, BrokerHeartbeat, Envelope for forwarded requests). As in Kafka's
//! `StandardAuthorizerData`, a super user is always allowed and anyone else only once the
//! node has loaded its metadata (before: refused, Kafka's `AuthorizerNotReadyException`), so
//! the controllers' principal belongs in `super.users`. A PLAINTEXT controller listener
//! is not checked: every node there is `User:ANONYMOUS` and Brook's clusters have always
//! served it.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};

use super::image::MetadataImage;
use super::Inner;
use crate::config::{BrokerConfig, ConfigError};
use crate::net::client::{sasl_authenticate, SASL_RESPONSE_MAX_BYTES};
use crate::net::stream::BrokerStream;
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use crate::security::authorizer::Authorizer;
use crate::security::bootstrap::{self, BootstrapCredential};
use crate::security::sasl::{InterBrokerSasl, SaslAuthenticator, SaslServerConfig, SaslStep};
use crate::security::scram::{ScramCredential, ScramMechanism};
use crate::security::ssl::{self, ServerTls};
use crate::security::{KafkaPrincipal, SecurityProtocol, Session};

/// Bound on a connection's TLS handshake and SASL exchange, before any HTTP.
pub const AUTHENTICATION_TIMEOUT_MS: u64 = 10_000;

/// Connections authenticating at once; more are closed at accept.
pub const AUTHENTICATIONS_IN_FLIGHT_MAX: usize = 64;

/// Kafka's `sasl.mechanism.controller.protocol`.
pub const SASL_MECHANISM_CONTROLLER_PROTOCOL: &str = "sasl.mechanism.controller.protocol";

/// How this node's controller listener is secured, and how the node calls the other
/// voters' (which share the listener's name and keys, as in Kafka).
#[derive(Debug)]
pub struct ControllerChannel {
    /// The controller listener's name (the first of `controller.listener.names`).
    pub listener_name: Arc<str>,
    pub protocol: SecurityProtocol,
    /// The listener's TLS context, for SSL and SASL_SSL.
    pub server_tls: Option<ServerTls>,
    /// The context this node connects to the other voters with.
    pub client_tls: Option<Arc<rustls::ClientConfig>>,
    /// The listener's SASL settings, for SASL_PLAINTEXT and SASL_SSL.
    pub sasl_server: Option<Arc<SaslServerConfig>>,
    /// This node's own credentials on the other voters' listeners.
    pub sasl_client: Option<Arc<InterBrokerSasl>>,
    /// `authorizer.class.name`'s authorizer, fed from this node's metadata image.
    pub authorizer: Option<Authorizer>,
    /// The SCRAM users this node was formatted with, served until the cluster records them.
    pub bootstrap_scram: Arc<Vec<BootstrapCredential>>,
    /// SASL authentications on the listener, for `/metrics` (Kafka's socket-server
    /// `successful-authentication-total` / `failed-authentication-total` of the listener).
    pub authentications: Authentications,
}

/// Counts of the controller listener's SASL authentications.
#[derive(Debug, Default)]
pub struct Authentications {
    pub successful: AtomicU64,
    pub failed: AtomicU64,
}

impl Authentications {
    fn record(&self, succeeded: bool) {
        let c = if succeeded {
            &self.successful
        } else {
            &self.failed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

impl ControllerChannel {
    /// A PLAINTEXT controller listener (and a single voter, which has none).
    pub fn plaintext() -> ControllerChannel {
        ControllerChannel {
            listener_name: Arc::from(super::DEFAULT_LISTENER_NAME),
            protocol: SecurityProtocol::Plaintext,
            server_tls: None,
            client_tls: None,
            sasl_server: None,
            sasl_client: None,
            authorizer: None,
            bootstrap_scram: Arc::default(),
            authentications: Authentications::default(),
        }
    }

    /// The controller listener of `cfg`, with Kafka's start-up errors for missing keys.
    pub fn from_broker_config(cfg: &BrokerConfig) -> Result<ControllerChannel, ConfigError> {
        let Some(l) = cfg.listeners.controller.as_ref() else {
            return Ok(ControllerChannel::plaintext());
        };
        let protocol = l.security_protocol;
        let tls_error = |e: ssl::SslError| ConfigError::Invalid(e.to_string());
        let (server_tls, client_tls) = match protocol.uses_tls() {
            true => (
                Some(ssl::server_tls(&cfg.values, &l.name, protocol).map_err(tls_error)?),
                Some(ssl::client_tls(&cfg.values, &l.name).map_err(tls_error)?),
            ),
            false => (None, None),
        };
        let (sasl_server, sasl_client) = match protocol.uses_sasl() {
            true => {
                let server = SaslServerConfig::for_listener(cfg, l)?;
                let mechanism = cfg
                    .listener_value(&l.name, SASL_MECHANISM_CONTROLLER_PROTOCOL)
                    .unwrap_or_default();
                if !server.enabled_mechanisms.contains(&mechanism) {
                    return Err(ConfigError::Invalid(format!(
                        "{SASL_MECHANISM_CONTROLLER_PROTOCOL} must be included in \
                         sasl.enabled.mechanisms of the controller listener {} when SASL is used \
                         for controller communication (it is {mechanism}; the listener enables {})",
                        l.name,
                        server.enabled_mechanisms.join(",")
                    )));
                }
                let client = InterBrokerSasl::for_listener(cfg, &l.name, mechanism)?;
                (Some(Arc::new(server)), Some(Arc::new(client)))
            }
            false => (None, None),
        };
        let authorizer = match protocol {
            SecurityProtocol::Plaintext => None,
            _ => cfg.authorizer.clone().map(Authorizer::new),
        };
        let bootstrap_scram = match protocol.uses_sasl() {
            true => bootstrap::read(&cfg.log_dir).map_err(|e| {
                ConfigError::Invalid(format!("{}: {e}", bootstrap::path(&cfg.log_dir).display()))
            })?,
            false => Vec::new(),
        };
        Ok(ControllerChannel {
            listener_name: l.name.clone(),
            protocol,
            server_tls,
            client_tls,
            sasl_server,
            sasl_client,
            authorizer,
            bootstrap_scram: Arc::new(bootstrap_scram),
            authentications: Authentications::default(),
        })
    }

    /// Whether connections to the listener are wrapped (TLS, SASL or both).
    pub fn secured(&self) -> bool {
        self.protocol != SecurityProtocol::Plaintext
    }

    /// Connects to a voter's controller listener at `addr` and authenticates: TLS, then SASL.
    /// A refused authentication is [`std::io::ErrorKind::PermissionDenied`].
    pub async fn connect(&self, addr: &str, from: i32) -> std::io::Result<BrokerStream> {
        let mut stream = crate::net::stream::connect(addr, self.client_tls.as_ref()).await?;
        if let Some(sasl) = &self.sasl_client {
            let client_id = format!("brook-controller-{from}");
            sasl_authenticate(&mut stream, sasl, &client_id).await?;
        }
        Ok(stream)
    }
}

/// An accepted controller connection once authenticated, and who it speaks for.
pub struct AuthenticatedStream {
    stream: BrokerStream,
    principal: KafkaPrincipal,
    peer: SocketAddr,
}

/// The principal and address of a controller connection, for the handlers (axum's
/// connect info).
#[derive(Clone, Debug)]
pub struct ControllerPeer {
    pub principal: KafkaPrincipal,
    pub addr: SocketAddr,
}

impl Connected<IncomingStream<'_, SecuredListener>> for ControllerPeer {
    fn connect_info(stream: IncomingStream<'_, SecuredListener>) -> Self {
        ControllerPeer {
            principal: stream.io().principal.clone(),
            addr: stream.io().peer,
        }
    }
}

/// The controller listener of a secured channel: accepts TCP connections and hands axum
/// those that complete TLS and SASL. Each runs in its own task (at most
/// [`AUTHENTICATIONS_IN_FLIGHT_MAX`], each within [`AUTHENTICATION_TIMEOUT_MS`]), so a silent
/// or slow client cannot hold up the others.
pub struct SecuredListener {
    tcp: TcpListener,
    channel: Arc<ControllerChannel>,
    image: watch::Receiver<Arc<MetadataImage>>,
    done_tx: mpsc::Sender<AuthenticatedStream>,
    done_rx: mpsc::Receiver<AuthenticatedStream>,
    in_flight: Arc<Semaphore>,
}

impl SecuredListener {
    pub fn new(
        tcp: TcpListener,
        channel: Arc<ControllerChannel>,
        image: watch::Receiver<Arc<MetadataImage>>,
    ) -> SecuredListener {
        let (done_tx, done_rx) = mpsc::channel(AUTHENTICATIONS_IN_FLIGHT_MAX);
        SecuredListener {
            tcp,
            channel,
            image,
            done_tx,
            done_rx,
            in_flight: Arc::new(Semaphore::new(AUTHENTICATIONS_IN_FLIGHT_MAX)),
        }
    }

    fn authenticate(&self, tcp: TcpStream, peer: SocketAddr) {
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            return; // Too many authentications under way: this connection is closed.
        };
        let (channel, image, done) = (
            self.channel.clone(),
            self.image.clone(),
            self.done_tx.clone(),
        );
        tokio::spawn(async move {
            let timeout = Duration::from_millis(AUTHENTICATION_TIMEOUT_MS);
            match tokio::time::timeout(timeout, accept(&channel, &image, tcp, peer)).await {
                Ok(Ok(s)) => {
                    let _ = done.send(s).await;
                }
                Ok(Err(why)) => {
                    tracing::info!(%peer, listener = %channel.listener_name, %why, "closing controller connection: authentication failed");
                }
                Err(_) => {
                    tracing::info!(%peer, listener = %channel.listener_name, "closing controller connection: authentication timed out");
                }
            }
            drop(permit);
        });
    }
}

impl axum::serve::Listener for SecuredListener {
    type Io = AuthenticatedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                Some(done) = self.done_rx.recv() => {
                    let peer = done.peer;
                    return (done, peer);
                }
                accepted = self.tcp.accept() => match accepted {
                    Ok((stream, peer)) => self.authenticate(stream, peer),
                    Err(e) => {
                        // Out of file descriptors and the like: axum's own listener waits too.
                        tracing::warn!(error = %e, "controller listener accept failed");
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

/// TLS (Kafka's `SslTransportLayer.handshake`, the principal from the client certificate)
/// then SASL (`SaslServerAuthenticator`) on one accepted connection.
async fn accept(
    channel: &ControllerChannel,
    image: &watch::Receiver<Arc<MetadataImage>>,
    tcp: TcpStream,
    peer: SocketAddr,
) -> Result<AuthenticatedStream, String> {
    let _ = tcp.set_nodelay(true);
    let (mut stream, mut principal) = match &channel.server_tls {
        Some(tls) => {
            let s = tokio_rustls::TlsAcceptor::from(tls.config.clone())
                .accept(tcp)
                .await
                .map_err(|e| format!("TLS handshake: {e}"))?;
            let leaf = s.get_ref().1.peer_certificates().and_then(|c| c.first());
            let principal = tls
                .mapper
                .principal(leaf.map(|c| c.as_ref()))
                .map_err(|e| format!("ssl.principal.mapping.rules: {e}"))?;
            (BrokerStream::ServerTls(Box::new(s)), principal)
        }
        None => (BrokerStream::Plain(tcp), KafkaPrincipal::anonymous()),
    };
    if let Some(sasl) = &channel.sasl_server {
        let exchanged = sasl_exchange(sasl, &channel.bootstrap_scram, image, &mut stream).await;
        channel.authentications.record(exchanged.is_ok());
        principal = exchanged?;
    }
    Ok(AuthenticatedStream {
        stream,
        principal,
        peer,
    })
}

/// A SCRAM credential on the controller listener: the metadata image's, or while the cluster
/// has not recorded its bootstrap users, the one this node was formatted with.
fn scram_credential(
    image: &MetadataImage,
    bootstrap: &[BootstrapCredential],
    user: &str,
    mechanism: ScramMechanism,
) -> Option<ScramCredential> {
    if let Some(c) = image.scram_credential(user, mechanism) {
        return Some(c.clone());
    }
    if image.scram_bootstrapped {
        return None;
    }
    bootstrap
        .iter()
        .find(|(u, m, _)| u == user && *m == mechanism.type_id())
        .map(|(_, _, c)| c.clone())
}

/// The server side of the SASL exchange, frame by frame through [`SaslAuthenticator`]: the
/// authenticated principal, or why the connection closes. Only the exchange's own requests
/// are served: anything else (ApiVersions included, which Brook's controller clients never
/// send) closes the connection.
async fn sasl_exchange(
    config: &Arc<SaslServerConfig>,
    bootstrap: &[BootstrapCredential],
    image: &watch::Receiver<Arc<MetadataImage>>,
    stream: &mut BrokerStream,
) -> Result<KafkaPrincipal, String> {
    let mut auth = SaslAuthenticator::new(config.clone());
    loop {
        let frame = read_frame(stream).await?;
        let image = image.borrow().clone();
        let lookup = |user: &str, m| scram_credential(&image, bootstrap, user, m);
        match auth.handle(frame, &lookup) {
            SaslStep::Respond(bytes) => write_flushed(stream, &bytes).await?,
            SaslStep::Complete {
                response,
                principal,
            } => {
                write_flushed(stream, &response).await?;
                return Ok(principal);
            }
            SaslStep::Fail { response, reason } => {
                // Kafka delays the answer to slow password guessing.
                tokio::time::sleep(auth.failed_authentication_delay()).await;
                if let Some(r) = response {
                    let _ = write_flushed(stream, &r).await;
                }
                return Err(reason);
            }
            SaslStep::FailUnexpectedRequest { reason, .. } | SaslStep::Close(reason) => {
                return Err(reason)
            }
            SaslStep::Serve => {
                return Err("a request other than SASL's before authentication".into())
            }
        }
    }
}

/// One size-prefixed Kafka frame, at most [`SASL_RESPONSE_MAX_BYTES`] (Kafka's
/// `sasl.server.max.receive.size` default).
async fn read_frame(stream: &mut BrokerStream) -> Result<Bytes, String> {
    let size = stream.read_i32().await.map_err(|e| e.to_string())?;
    if size < 0 || size as usize > SASL_RESPONSE_MAX_BYTES {
        return Err(format!("SASL frame of {size} bytes"));
    }
    let mut buf = vec![0u8; size as usize];
    stream
        .read_exact(&mut buf)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Bytes::from(buf))
}

async fn write_flushed(stream: &mut BrokerStream, bytes: &[u8]) -> Result<(), String> {
    stream.write_all(bytes).await.map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())
}

/// Kafka's `ControllerApis` check of every controller request Brook sends: CLUSTER_ACTION on
/// the cluster, answered 403 with Kafka's message otherwise. Connections of a PLAINTEXT
/// listener (no connect info) and nodes without an authorizer pass.
pub(super) async fn authorize(
    State(inner): State<Arc<Inner>>,
    req: Request,
    next: Next,
) -> Response {
    let (Some(authorizer), Some(ConnectInfo(peer))) = (
        inner.config.channel.authorizer.as_ref(),
        req.extensions()
            .get::<ConnectInfo<ControllerPeer>>()
            .cloned(),
    ) else {
        return next.run(req).await;
    };
    let image = inner.image_rx.borrow().clone();
    authorizer.follow(&image.acls, image.metadata_offset);
    let session = Session {
        principal: peer.principal.clone(),
        client_address: Some(peer.addr.ip()),
        listener_name: inner.config.channel.listener_name.clone(),
        security_protocol: inner.config.channel.protocol,
    };
    let loaded = image.metadata_offset > 0;
    let allowed = authorizer.is_super_user(&session.principal)
        || (loaded
            && authorizer.authorize(
                &session,
                AclOperation::ClusterAction,
                ResourceType::Cluster,
                CLUSTER_NAME,
            ));
    if allowed {
        return next.run(req).await;
    }
    static REFUSED: crate::log_limit::RepeatLimiter = crate::log_limit::RepeatLimiter::new();
    if let Some(note) = REFUSED.admit(crate::log_limit::key_of(peer.addr.ip())) {
        tracing::warn!(principal = %peer.principal, peer = %peer.addr, "controller request refused: no CLUSTER_ACTION on the cluster{note}");
    }
    let reason = match loaded {
        true => format!(
            "Cluster authorization failed: principal {} does not have required CLUSTER_ACTION",
            peer.principal
        ),
        false => "Authorizer is not ready yet (this controller has not loaded its metadata)".into(),
    };
    (StatusCode::FORBIDDEN, reason).into_response()
}

impl AsyncRead for AuthenticatedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for AuthenticatedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(extra: &[&str]) -> Result<ControllerChannel, ConfigError> {
        let mut o: Vec<String> = [
            "process.roles=broker,controller",
            "controller.quorum.voters=1@127.0.0.1:9192",
            "controller.listener.names=CONTROLLER",
            "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        o.extend(extra.iter().map(|s| s.to_string()));
        ControllerChannel::from_broker_config(&BrokerConfig::load(None, &o)?)
    }

    const PLAIN_JAAS: &str = "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"c\" password=\"p\" user_c=\"p\";";

    #[test]
    fn the_controller_login_comes_from_the_listeners_keys() {
        // Kafka's default mechanism, GSSAPI, is not among the enabled ones (nor served).
        let e = channel(&[PLAIN_JAAS]).unwrap_err().to_string();
        assert!(
            e.contains("sasl.mechanism.controller.protocol must be included"),
            "{e}"
        );
        let e = channel(&["sasl.mechanism.controller.protocol=PLAIN"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("listener.name.controller.plain.sasl.jaas.config"),
            "{e}"
        );
        let c = channel(&["sasl.mechanism.controller.protocol=PLAIN", PLAIN_JAAS]).unwrap();
        assert_eq!(c.protocol, SecurityProtocol::SaslPlaintext);
        let login = c.sasl_client.as_ref().unwrap();
        assert_eq!((&*login.username, &*login.password), ("c", "p"));
        assert!(c.client_tls.is_none() && c.authorizer.is_none());
    }

    #[test]
    fn a_tls_controller_listener_needs_its_stores() {
        let e = channel(&["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ssl.keystore.location"), "{e}");
    }

    #[test]
    fn bootstrap_scram_users_serve_until_the_cluster_records_them() {
        let m = ScramMechanism::Sha512;
        let formatted = crate::security::scram::generate_credential(m, "controller-secret", 4096);
        let bootstrap = vec![("controller".to_string(), m.type_id(), formatted.clone())];
        let mut image = MetadataImage::default();
        let found = |image: &MetadataImage, mech| {
            scram_credential(image, &bootstrap, "controller", mech).is_some()
        };
        assert!(found(&image, m));
        assert!(!found(&image, ScramMechanism::Sha256));
        assert!(scram_credential(&image, &bootstrap, "other", m).is_none());
        // Recorded (and then deleted): only the image counts.
        image.scram_bootstrapped = true;
        assert!(!found(&image, m));
    }
}
