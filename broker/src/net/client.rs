//! A broker-to-broker request connection: one request at a time over one TCP stream, with
//! bounded I/O times and response sizes. The transaction coordinator sends WriteTxnMarkers
//! with it, and partition leaders send AddPartitionsToTxn (verify only) to coordinators.
//! TLS when the inter-broker listener uses it.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::net::stream::{connect, BrokerStream};

/// Largest response accepted on an inter-broker request connection.
pub const INTER_BROKER_RESPONSE_MAX_BYTES: usize = 16 * 1024 * 1024;

/// A connection to one broker's listener.
pub struct BrokerConnection {
    addr: String,
    stream: Option<BrokerStream>,
    /// The inter-broker listener's TLS client context, when it uses TLS.
    tls: Option<Arc<rustls::ClientConfig>>,
    correlation_id: i32,
    client_id: String,
    /// Bound on connecting and on each request's round trip.
    io_timeout: Duration,
}

/// Why a request got no answer. The connection is dropped; the next request reconnects.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("i/o with {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("request to {0} timed out")]
    TimedOut(String),
    #[error("bad response from {addr}: {why}")]
    Protocol { addr: String, why: String },
}

impl BrokerConnection {
    pub fn new(addr: String, client_id: String, io_timeout: Duration) -> Self {
        BrokerConnection {
            addr,
            stream: None,
            tls: None,
            correlation_id: 0,
            client_id,
            io_timeout,
        }
    }

    /// Connects with TLS (`BrokerConfig::tls`'s inter-broker context) when given.
    pub fn with_tls(mut self, tls: Option<Arc<rustls::ClientConfig>>) -> Self {
        self.tls = tls;
        self
    }

    /// Sends one request and reads its response.
    pub async fn send<R: Request>(
        &mut self,
        version: i16,
        req: &R,
    ) -> Result<R::Response, ClientError> {
        let r = self.exchange(version, req).await;
        if r.is_err() {
            self.stream = None;
        }
        r
    }

    async fn exchange<R: Request>(
        &mut self,
        version: i16,
        req: &R,
    ) -> Result<R::Response, ClientError> {
        let addr = self.addr.clone();
        let protocol = |why: String| ClientError::Protocol {
            addr: addr.clone(),
            why,
        };
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, <R as HeaderVersion>::header_version(version))
            .map_err(|e| protocol(e.to_string()))?;
        req.encode(&mut body, version)
            .map_err(|e| protocol(e.to_string()))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        let timeout = self.io_timeout;
        let io = async {
            if self.stream.is_none() {
                self.stream = Some(connect(&self.addr, self.tls.as_ref()).await?);
            }
            let Some(conn) = self.stream.as_mut() else {
                return Err(std::io::Error::other("no connection"));
            };
            conn.write_all(&frame).await?;
            conn.flush().await?;
            let size = conn.read_i32().await?;
            if size < 0 || size as usize > INTER_BROKER_RESPONSE_MAX_BYTES {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("response of {size} bytes"),
                ));
            }
            let mut buf = vec![0u8; size as usize];
            conn.read_exact(&mut buf).await?;
            Ok(Bytes::from(buf))
        };
        let mut buf = tokio::time::timeout(timeout, io)
            .await
            .map_err(|_| ClientError::TimedOut(addr.clone()))?
            .map_err(|source| ClientError::Io {
                addr: addr.clone(),
                source,
            })?;
        let rh = ResponseHeader::decode(
            &mut buf,
            <R::Response as HeaderVersion>::header_version(version),
        )
        .map_err(|e| protocol(e.to_string()))?;
        if rh.correlation_id != self.correlation_id {
            return Err(protocol("correlation id mismatch".into()));
        }
        let resp = R::Response::decode(&mut buf, version).map_err(|e| protocol(e.to_string()))?;
        if buf.has_remaining() {
            return Err(protocol("trailing bytes".into()));
        }
        Ok(resp)
    }
}
