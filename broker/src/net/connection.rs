//! One client connection: read a frame, handle it, write the answer, in request order.
//!
//! Requests on a connection are handled one at a time, as Kafka does (it mutes a channel
//! while a request is in flight), so answers always leave in request order. Clients still
//! pipeline: up to five requests wait in the socket buffer while one is handled. The reader
//! is buffered, so those arrive with few syscalls.

use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::api::{handle_frame, Outcome};
use crate::metrics::GaugeGuard;
use crate::net::codec::{read_frame, CodecError, Frame};
use crate::server::Broker;

/// Read buffer per connection.
pub const CONNECTION_READ_BUFFER_BYTES: usize = 64 * 1024;

/// Serves one connection until the peer closes it, a protocol error closes it, or the
/// broker shuts down (the request being handled is finished and answered first).
pub async fn serve(broker: Arc<Broker>, stream: TcpStream, mut shutdown: watch::Receiver<bool>) {
    let _open = GaugeGuard::new(&broker.metrics.connections);
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let (r, mut w) = stream.into_split();
    let mut reader = BufReader::with_capacity(CONNECTION_READ_BUFFER_BYTES, r);
    let max = broker.config.socket_request_max_bytes;
    loop {
        let frame = tokio::select! {
            f = read_frame(&mut reader, max, &broker.request_memory) => f,
            _ = shutdown.changed() => break,
        };
        let Frame { bytes, memory } = match frame {
            Ok(f) => f,
            Err(CodecError::Closed) => break,
            Err(e) => {
                tracing::info!(?peer, error = %e, "closing connection");
                break;
            }
        };
        let started = Instant::now();
        let (ctx, outcome) = match handle_frame(&broker, bytes).await {
            Ok(handled) => handled,
            Err(e) => {
                tracing::info!(?peer, error = %e, "closing connection");
                break;
            }
        };
        let open = match outcome {
            Outcome::Respond(bytes) => match w.write_all(&bytes).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::debug!(?peer, error = %e, "write failed");
                    false
                }
            },
            Outcome::NoResponse => true,
            Outcome::Close(reason) => {
                tracing::info!(?peer, api = ?ctx.api_key, %reason, "closing connection");
                false
            }
        };
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
    }
    let _ = w.shutdown().await;
}
