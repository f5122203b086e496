//! One client connection: read a frame, handle it, write the answer, in request order.
//!
//! Requests on a connection are handled one at a time, as Kafka does (it mutes a channel
//! while a request is in flight), so answers always leave in request order. Clients still
//! pipeline: up to five requests wait in the socket buffer while one is handled. The reader
//! is buffered, so those arrive with few syscalls.
//!
//! A connection that reads and writes nothing for `connections.max.idle.ms` is closed, as
//! Kafka's `Selector` expires idle channels: the clock restarts at every byte read and every
//! answer written, so a slow but live frame is not cut off.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::api::{handle_frame, Outcome};
use crate::broker::Broker;
use crate::listeners::Listener;
use crate::metrics::{GaugeGuard, RequestMetrics};
use crate::net::codec::{read_frame, CodecError, Frame};
use crate::security::sasl::{SaslAuthenticator, SaslStep};
use crate::security::ssl::ServerTls;
use crate::security::{KafkaPrincipal, Session};

/// Chunks handed to one vectored write (Linux's IOV_MAX is 1024).
pub const WRITE_IOVECS_MAX: usize = 64;

/// Read buffer per connection.
pub const CONNECTION_READ_BUFFER_BYTES: usize = 64 * 1024;

/// Read buffer under a TLS connection's TLS layer: the bytes taken from the socket per read.
/// rustls asks its socket for 4 KiB at a time (or the rest of its record buffer), so without
/// it a 16 KiB record cost several reads (a produce over SSL made four times the plaintext
/// path's `recvfrom` calls; with it, one and a half times); Kafka's
/// `SslTransportLayer` reads up to its whole network buffer per read too. As large as the
/// plaintext path's [`CONNECTION_READ_BUFFER_BYTES`], so both read the socket alike.
pub const TLS_SOCKET_READ_BUFFER_BYTES: usize = CONNECTION_READ_BUFFER_BYTES;

/// The socket under a TLS connection: reads buffered by [`TLS_SOCKET_READ_BUFFER_BYTES`],
/// writes passed straight through (rustls hands over whole records, vectored).
type TlsSocket = BufReader<TcpStream>;

fn tls_socket<S: AsyncRead>(socket: S) -> BufReader<S> {
    BufReader::with_capacity(TLS_SOCKET_READ_BUFFER_BYTES, socket)
}

/// Serves one connection until the peer closes it, a protocol error closes it, or the
/// broker shuts down (the request being handled is finished and answered first). The steps
/// of Kafka's `SocketServer` `Processor` for one channel: the new connection configured
/// (`open_channel`), each complete receive read (`next_frame`) and handled, its response sent
/// (`send_outcome`), and the channel muted for a throttled answer (`mute_for_throttle`).
pub async fn serve(
    broker: Arc<Broker>,
    stream: TcpStream,
    listener: Arc<Listener>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _open = GaugeGuard::new(&broker.metrics.connections);
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let Some((session, r, mut w)) =
        open_channel(&broker, stream, &listener, peer, &mut shutdown).await
    else {
        return;
    };
    let mut session = Arc::new(session);
    let mut sasl = broker
        .config
        .sasl
        .get(&listener.name)
        .map(|c| SaslAuthenticator::new(c.clone()));
    let activity = Arc::new(Activity::new());
    let tracked = Tracked {
        inner: r,
        activity: activity.clone(),
    };
    let mut reader = BufReader::with_capacity(CONNECTION_READ_BUFFER_BYTES, tracked);
    loop {
        let Some(Frame { bytes, memory }) =
            next_frame(&broker, &mut reader, &activity, peer, &mut shutdown).await
        else {
            break;
        };
        if let Some(auth) = sasl.as_mut() {
            let bytes = bytes.clone();
            match authenticate(&broker, auth, &mut session, bytes, &mut w, &activity).await {
                Authenticating::Done => {
                    drop(memory);
                    continue;
                }
                Authenticating::Closed => break,
                Authenticating::Serve => {}
            }
        }
        let started = Instant::now();
        let (ctx, outcome) = match handle_frame(&broker, bytes, &session).await {
            Ok(handled) => handled,
            Err(e) => {
                closing_on_error(&broker.metrics.requests, peer, &e);
                break;
            }
        };
        let open = send_outcome(&mut w, outcome, ctx.api_key, &activity, peer).await;
        // Kafka's TotalTimeMs also ends when the answer is sent.
        broker
            .metrics
            .requests
            .record(ctx.api_key, ctx.api_version, started.elapsed());
        if !open {
            break;
        }
        // The request's pool bytes go back only now that its answer has been written, as
        // Kafka's request handler releases the buffer after handling.
        drop(memory);
        if !mute_for_throttle(ctx.throttle.get(), &activity, &mut shutdown).await {
            break;
        }
    }
    let _ = w.shutdown().await;
}

/// The new connection's session and halves (Kafka's `Processor.configureNewConnections`):
/// unauthenticated (User:ANONYMOUS) on the listener it came in on, or, on an SSL listener,
/// after the TLS handshake, with the principal its client certificate names (Kafka's
/// `DefaultKafkaPrincipalBuilder`). `None`: the handshake failed and the connection is closed.
async fn open_channel(
    broker: &Broker,
    stream: TcpStream,
    listener: &Listener,
    peer: Option<std::net::SocketAddr>,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<(Session, ReadHalf, WriteHalf)> {
    let mut session = Session::anonymous(
        listener.name.clone(),
        listener.security_protocol,
        peer.map(|a| a.ip()),
    );
    let Some(tls) = broker.tls.get(&listener.name) else {
        let (r, w) = stream.into_split();
        return Some((session, Box::new(r) as ReadHalf, Box::new(w) as WriteHalf));
    };
    let idle = broker.config.connections_max_idle_ms;
    let (stream, principal) = tls_accept(&tls, stream, peer, idle, shutdown).await?;
    session.principal = principal;
    let (r, w) = tokio::io::split(stream);
    Some((session, Box::new(r) as ReadHalf, Box::new(w) as WriteHalf))
}

/// The next complete request frame (Kafka's `Processor.processCompletedReceives`), or `None`
/// when the connection is to close: the peer closed it, a bad frame, the broker shutting down,
/// or `connections.max.idle.ms` of silence (Kafka's idle expiry).
async fn next_frame<R: AsyncRead + Unpin>(
    broker: &Broker,
    reader: &mut R,
    activity: &Activity,
    peer: Option<std::net::SocketAddr>,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<Frame> {
    let max = broker.config.socket_request_max_bytes;
    let idle = broker
        .config
        .connections_max_idle_ms
        .map(Duration::from_millis);
    let frame = tokio::select! {
        f = read_frame(reader, max, &broker.request_memory) => f,
        _ = shutdown.changed() => return None,
        _ = idle_expired(activity, idle) => {
            tracing::debug!(?peer, "closing idle connection (connections.max.idle.ms)");
            return None;
        }
    };
    match frame {
        Ok(f) => Some(f),
        Err(CodecError::Closed) => None,
        Err(e) => {
            tracing::info!(?peer, error = %e, "closing connection");
            None
        }
    }
}

/// Writes a handled request's outcome (Kafka's `Processor.sendResponse`); `false` when the
/// connection is to close: the write failed or the outcome closes it.
async fn send_outcome(
    w: &mut WriteHalf,
    outcome: Outcome,
    api_key: kafka_protocol::messages::ApiKey,
    activity: &Activity,
    peer: Option<std::net::SocketAddr>,
) -> bool {
    match outcome {
        Outcome::Respond(bytes) => {
            let sent = async {
                w.write_all(&bytes).await?;
                w.flush().await
            };
            written(sent.await, activity, peer)
        }
        Outcome::RespondChunks(chunks) => {
            let sent = async {
                write_chunks(w, chunks).await?;
                w.flush().await
            };
            written(sent.await, activity, peer)
        }
        Outcome::NoResponse => true,
        Outcome::Close(reason) => {
            tracing::info!(?peer, api = ?api_key, %reason, "closing connection");
            false
        }
    }
}

/// KIP-219: a client over a quota has its answer at once, then its connection is not read
/// for the throttle time (Kafka mutes the channel until its `ThrottledChannel` expires). The
/// broker chose the silence, so it does not count as idleness. `false`: the broker is
/// shutting down.
async fn mute_for_throttle(
    mute_ms: i32,
    activity: &Activity,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    if mute_ms > 0 {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(mute_ms as u64)) => activity.touch(),
            _ = shutdown.changed() => return false,
        }
    }
    true
}

/// A connection's read half: a TCP socket's, or a TLS stream's.
type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// A connection's write half. TLS buffers records, so every answer is flushed.
type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// The TLS handshake of an SSL or SASL_SSL listener's connection (Kafka's
/// `SslTransportLayer.handshake`) and the principal its client certificate maps to.
/// Garbage, a plaintext client, a certificate that fails verification or one no
/// `ssl.principal.mapping.rules` rule names close the connection. The handshake is bounded
/// by `connections.max.idle.ms`, as Kafka's idle expiry covers a silent handshake.
async fn tls_accept(
    tls: &ServerTls,
    stream: TcpStream,
    peer: Option<std::net::SocketAddr>,
    idle_ms: Option<u64>,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<(
    Box<tokio_rustls::server::TlsStream<TlsSocket>>,
    KafkaPrincipal,
)> {
    let accept = tokio_rustls::TlsAcceptor::from(tls.config.clone()).accept(tls_socket(stream));
    let bound = async {
        match idle_ms {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            None => std::future::pending().await,
        }
    };
    let stream = tokio::select! {
        s = accept => match s {
            Ok(s) => s,
            Err(e) => {
                tracing::info!(?peer, error = %e, "closing connection: TLS handshake failed");
                return None;
            }
        },
        _ = bound => {
            tracing::info!(?peer, "closing connection: TLS handshake idle (connections.max.idle.ms)");
            return None;
        }
        _ = shutdown.changed() => return None,
    };
    let leaf = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first());
    match tls.mapper.principal(leaf.map(|c| c.as_ref())) {
        Ok(principal) => {
            tracing::debug!(?peer, %principal, "TLS connection authenticated");
            Some((Box::new(stream), principal))
        }
        Err(e) => {
            tracing::info!(?peer, error = %e, "closing connection: ssl.principal.mapping.rules");
            None
        }
    }
}

/// What [`authenticate`] did with a frame.
enum Authenticating {
    /// The frame was part of the SASL exchange and has been answered.
    Done,
    /// The request handlers serve the frame.
    Serve,
    /// The connection must close.
    Closed,
}

/// Runs a frame through the connection's SASL state (Kafka's `SaslServerAuthenticator`, and
/// the session expiry and re-authentication checks of `SocketServer`'s processor).
async fn authenticate<W: AsyncWrite + Unpin>(
    broker: &Broker,
    auth: &mut SaslAuthenticator,
    session: &mut Arc<Session>,
    frame: Bytes,
    w: &mut W,
    activity: &Activity,
) -> Authenticating {
    let listener = session.listener_name.clone();
    if auth.complete() && !auth.begins_reauthentication(&frame, &session.principal) {
        if auth.session_expired(Instant::now()) {
            tracing::debug!(principal = %session.principal, "closing: SASL session expired (connections.max.reauth.ms)");
            return Authenticating::Closed;
        }
        return Authenticating::Serve;
    }
    let image = broker.replicas.controller().image().borrow().clone();
    let lookup = |user: &str, m| image.scram_credential(user, m).cloned();
    let peer = session.client_address;
    let reauth = auth.reauthenticating();
    match auth.handle(frame, &lookup) {
        SaslStep::Serve => Authenticating::Serve,
        SaslStep::Respond(bytes) => match written(write_flushed(w, &bytes).await, activity, None) {
            true => Authenticating::Done,
            false => Authenticating::Closed,
        },
        SaslStep::Complete {
            response,
            principal,
        } => {
            broker.metrics.authentication(&listener, true, reauth);
            tracing::debug!(?peer, %principal, "SASL authentication succeeded");
            let mut s = (**session).clone();
            s.principal = principal;
            *session = Arc::new(s);
            match written(write_flushed(w, &response).await, activity, None) {
                true => Authenticating::Done,
                false => Authenticating::Closed,
            }
        }
        SaslStep::FailUnexpectedRequest { frame, reason } => {
            let response = crate::api::illegal_sasl_state_response(broker, frame, session).await;
            broker.metrics.authentication(&listener, false, reauth);
            failed(auth, response, &reason, w).await
        }
        SaslStep::Fail { response, reason } => {
            broker.metrics.authentication(&listener, false, reauth);
            failed(auth, response, &reason, w).await
        }
        SaslStep::Close(reason) => {
            tracing::info!(?peer, %reason, "closing connection during SASL authentication");
            Authenticating::Closed
        }
    }
}

/// A failed authentication: answered after `connection.failed.authentication.delay.ms` when
/// there is an answer (Kafka delays both, to slow password guessing), then closed.
async fn failed<W: AsyncWrite + Unpin>(
    auth: &SaslAuthenticator,
    response: Option<Bytes>,
    reason: &str,
    w: &mut W,
) -> Authenticating {
    tracing::info!(%reason, "SASL authentication failed; closing the connection");
    tokio::time::sleep(auth.failed_authentication_delay()).await;
    if let Some(r) = response {
        let _ = write_flushed(w, &r).await;
    }
    Authenticating::Closed
}

/// Writes a whole answer and flushes it: a TLS stream holds written records until flushed.
async fn write_flushed<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    w.write_all(bytes).await?;
    w.flush().await
}

/// Logs why a request closes its connection. A response Brook could not encode is Brook's
/// bug, not the client's: it is logged at error level with the API and version, and counted
/// (`brook_response_encode_failures_total`), so that test and chaos runs can fail on it.
fn closing_on_error(requests: &RequestMetrics, peer: Option<std::net::SocketAddr>, e: &CodecError) {
    if let CodecError::Encode {
        api_key, version, ..
    } = e
    {
        requests.record_encode_failure(*api_key, *version);
        tracing::error!(?peer, error = %e, "closing connection: a response could not be encoded");
        return;
    }
    tracing::info!(?peer, error = %e, "closing connection");
}

/// Whether the connection stays open after writing an answer.
fn written(
    result: std::io::Result<()>,
    activity: &Activity,
    peer: Option<std::net::SocketAddr>,
) -> bool {
    match result {
        Ok(()) => {
            activity.touch();
            true
        }
        Err(e) => {
            tracing::debug!(?peer, error = %e, "write failed");
            false
        }
    }
}

/// Writes `chunks` in order with vectored writes, at most [`WRITE_IOVECS_MAX`] at a time.
async fn write_chunks<W: AsyncWrite + Unpin>(
    w: &mut W,
    mut chunks: Vec<Bytes>,
) -> std::io::Result<()> {
    let mut first = 0;
    while first < chunks.len() {
        let end = chunks.len().min(first + WRITE_IOVECS_MAX);
        let slices: Vec<IoSlice<'_>> = chunks[first..end].iter().map(|c| IoSlice::new(c)).collect();
        let mut n = w.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        // Drop what was written: whole chunks, then the front of a partly written one.
        while n > 0 {
            let len = chunks[first].len();
            if n >= len {
                n -= len;
                first += 1;
            } else {
                chunks[first].advance(n);
                n = 0;
            }
        }
        while first < chunks.len() && chunks[first].is_empty() {
            first += 1;
        }
    }
    Ok(())
}

/// When the connection last moved bytes, in milliseconds since it opened.
struct Activity {
    opened: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            opened: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = self.opened.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.opened + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// The socket's read half, noting each read that brings bytes.
struct Tracked<R> {
    inner: R,
    activity: Arc<Activity>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Tracked<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

/// Resolves once the connection has been idle for `idle` (never when `None`).
async fn idle_expired(activity: &Activity, idle: Option<Duration>) {
    let Some(idle) = idle else {
        return std::future::pending().await;
    };
    loop {
        let deadline = activity.last() + idle;
        if Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep_until(deadline.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SUPPORTED_APIS;
    use crate::net::codec::encode_response;
    use kafka_protocol::messages::list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };
    use kafka_protocol::messages::{ApiKey, ListOffsetsResponse};

    /// A response with a field its version lacks (ListOffsets' leader epoch arrived with v4):
    /// the bug that dropped old clients' connections without a trace.
    fn leader_epoch_at_every_version() -> ListOffsetsResponse {
        let partition = ListOffsetsPartitionResponse::default()
            .with_offset(7)
            .with_leader_epoch(3);
        ListOffsetsResponse::default().with_topics(vec![
            ListOffsetsTopicResponse::default().with_partitions(vec![partition])
        ])
    }

    #[test]
    fn an_unencodable_response_names_its_api_and_version_and_is_counted() {
        let resp = leader_epoch_at_every_version();
        let err = encode_response(ApiKey::ListOffsets, 3, 1, &resp).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("ListOffsets") && text.contains("v3"),
            "the error names neither the API nor the version: {text}"
        );
        let requests = RequestMetrics::new(SUPPORTED_APIS);
        closing_on_error(&requests, None, &err);
        assert_eq!(requests.encode_failures(ApiKey::ListOffsets, 3), 1);
        assert_eq!(requests.encode_failures(ApiKey::ListOffsets, 4), 0);
        // At v4, where the field exists, the same response encodes.
        assert!(encode_response(ApiKey::ListOffsets, 4, 1, &resp).is_ok());
    }

    #[test]
    fn a_client_error_is_not_counted_as_an_encode_failure() {
        let requests = RequestMetrics::new(SUPPORTED_APIS);
        closing_on_error(&requests, None, &CodecError::Malformed("bad body".into()));
        assert_eq!(requests.encode_failures(ApiKey::ListOffsets, 3), 0);
    }
}

/// The TLS read path's socket reads (benches/RESULTS.md, "TLS and SCRAM next to Kafka 4.4").
#[cfg(test)]
mod tls_read_tests {
    use super::*;
    use crate::security::ssl::certs::Ca;
    use crate::security::ssl::provider;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
    use tokio::io::AsyncReadExt;

    /// Bytes the client sends after the handshake.
    const SENT_BYTES: usize = 1 << 20;
    /// The in-memory socket's buffer, as a loopback socket's.
    const PIPE_BYTES: usize = 256 * 1024;

    /// A socket that counts the reads made of it.
    struct CountingReads<S> {
        inner: S,
        reads: Arc<AtomicU64>,
    }

    impl<S: AsyncRead + Unpin> AsyncRead for CountingReads<S> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            Pin::new(&mut self.inner).poll_read(cx, buf)
        }
    }

    impl<S: AsyncWrite + Unpin> AsyncWrite for CountingReads<S> {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            Pin::new(&mut self.inner).poll_write(cx, buf)
        }
        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }
        fn poll_shutdown(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    fn configs() -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
        let ca = Ca::new("ca").unwrap();
        let issued = ca.issue("broker", &["localhost"]).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(issued.key_der.clone()));
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(issued.cert_der.clone())], key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(ca.cert_der())).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        (Arc::new(server), Arc::new(client))
    }

    /// A megabyte of TLS records (16 KiB each) takes the server at most three socket reads
    /// per four records (28 reads for these 64 when measured, waits for data included).
    /// rustls alone asks for 4 KiB per read, or what is left of its record buffer: 79 reads
    /// without the buffer.
    #[tokio::test]
    async fn a_tls_connection_reads_its_socket_more_than_a_record_at_a_time() {
        let (server, client) = configs();
        let (near, far) = tokio::io::duplex(PIPE_BYTES);
        let reads = Arc::new(AtomicU64::new(0));
        let counted = CountingReads {
            inner: far,
            reads: reads.clone(),
        };
        let serve = async {
            let mut tls = tokio_rustls::TlsAcceptor::from(server)
                .accept(tls_socket(counted))
                .await
                .unwrap();
            let before = reads.load(Ordering::Relaxed);
            let mut got = vec![0u8; SENT_BYTES];
            tls.read_exact(&mut got).await.unwrap();
            reads.load(Ordering::Relaxed) - before
        };
        let send = async {
            let name = ServerName::try_from("localhost").unwrap();
            let mut tls = tokio_rustls::TlsConnector::from(client)
                .connect(name, near)
                .await
                .unwrap();
            tls.write_all(&vec![7u8; SENT_BYTES]).await.unwrap();
            tls.flush().await.unwrap();
            tls
        };
        let (socket_reads, _client) = tokio::join!(serve, send);
        let records = (SENT_BYTES / (16 * 1024)) as u64;
        assert!(
            socket_reads <= records * 3 / 4,
            "{socket_reads} socket reads for {records} records of 16 KiB"
        );
    }
}
