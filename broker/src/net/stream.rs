//! A connection's byte stream: plain TCP, or TLS over TCP on the server side (an SSL or
//! SASL_SSL listener's connection) or the client side (the broker's own connections to a
//! TLS listener). Kafka's `PlaintextTransportLayer` and `SslTransportLayer`: the code above
//! reads and writes frames the same way over either.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TCP stream, TLS or not.
pub enum BrokerStream {
    Plain(TcpStream),
    ServerTls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    ClientTls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// Connects to `addr` (`host:port`), with TLS when `tls` is given: the peer's certificate is
/// verified for `host` as the client context says (`ssl.endpoint.identification.algorithm`).
pub async fn connect(
    addr: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> io::Result<BrokerStream> {
    let tcp = TcpStream::connect(addr).await?;
    let _ = tcp.set_nodelay(true);
    let Some(config) = tls else {
        return Ok(BrokerStream::Plain(tcp));
    };
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
    let tls = tokio_rustls::TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await?;
    Ok(BrokerStream::ClientTls(Box::new(tls)))
}

impl AsyncRead for BrokerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            BrokerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            BrokerStream::ServerTls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            BrokerStream::ClientTls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for BrokerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            BrokerStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            BrokerStream::ServerTls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            BrokerStream::ClientTls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            BrokerStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            BrokerStream::ServerTls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            BrokerStream::ClientTls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            BrokerStream::Plain(s) => s.is_write_vectored(),
            BrokerStream::ServerTls(s) => s.is_write_vectored(),
            BrokerStream::ClientTls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            BrokerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            BrokerStream::ServerTls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            BrokerStream::ClientTls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            BrokerStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            BrokerStream::ServerTls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            BrokerStream::ClientTls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
