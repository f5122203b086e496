//! A broker-to-broker request connection: one request at a time over one TCP stream, with
//! bounded I/O times and response sizes. The transaction coordinator sends WriteTxnMarkers
//! with it, and partition leaders send AddPartitionsToTxn (verify only) to coordinators.
//! TLS when the inter-broker listener uses it. [`BrokerConnection::send_negotiated`] picks a
//! request's version from what the peer advertised in ApiVersions, as Kafka's
//! `NetworkClient` does (the share persister's state RPCs go through it).

use std::collections::HashMap;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::net::stream::{connect, BrokerStream};

use crate::security::sasl::{InterBrokerSasl, PLAIN};
use crate::security::scram::{ScramClient, ScramMechanism};

/// Largest response accepted on an inter-broker request connection.
pub const INTER_BROKER_RESPONSE_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Bound on the SASL exchange's answers (Kafka's `sasl.server.max.receive.size` default).
pub const SASL_RESPONSE_MAX_BYTES: usize = 512 * 1024;

/// A connection to one broker's listener.
pub struct BrokerConnection {
    addr: String,
    stream: Option<BrokerStream>,
    /// The inter-broker listener's TLS client context, when it uses TLS.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The credentials to authenticate a new connection with, when the inter-broker listener
    /// speaks SASL.
    sasl: Option<Arc<InterBrokerSasl>>,
    correlation_id: i32,
    client_id: String,
    /// Bound on connecting and on each request's round trip.
    io_timeout: Duration,
    /// What the peer advertised on the current connection (asked by the first negotiated
    /// request on it, forgotten with the connection).
    peer_versions: Option<NodeApiVersions>,
}

/// The ApiVersions version asked: v3 (KIP-511) is served by every broker since Kafka 2.4.
const API_VERSIONS_VERSION: i16 = 3;

/// The version ranges a peer advertised in its ApiVersions answer (Kafka's `NodeApiVersions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeApiVersions(HashMap<i16, (i16, i16)>);

impl NodeApiVersions {
    pub fn from_response(resp: &kafka_protocol::messages::ApiVersionsResponse) -> Self {
        NodeApiVersions(
            resp.api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect(),
        )
    }

    /// The newest version of `R` both this node and the peer speak (Kafka's
    /// `NodeApiVersions.latestUsableVersion`); `None` when the ranges do not meet.
    pub fn latest_usable<R: Request>(&self) -> Option<i16> {
        let &(min, max) = self.0.get(&R::KEY)?;
        let high = max.min(R::VERSIONS.max);
        (min.max(R::VERSIONS.min) <= high).then_some(high)
    }
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
    /// The peer serves no version of the API that this node speaks (Kafka's
    /// `UnsupportedVersionException` from `NetworkClient`).
    #[error("{addr} does not support API key {api_key} at a version this node speaks")]
    UnsupportedVersion { addr: String, api_key: i16 },
}

impl BrokerConnection {
    pub fn new(addr: String, client_id: String, io_timeout: Duration) -> Self {
        BrokerConnection {
            addr,
            stream: None,
            tls: None,
            sasl: None,
            correlation_id: 0,
            client_id,
            io_timeout,
            peer_versions: None,
        }
    }

    /// Connects with TLS (`BrokerConfig::tls`'s inter-broker context) when given.
    pub fn with_tls(mut self, tls: Option<Arc<rustls::ClientConfig>>) -> Self {
        self.tls = tls;
        self
    }

    /// Authenticates every new connection with `sasl` (the inter-broker listener's SASL).
    pub fn with_sasl(mut self, sasl: Option<Arc<InterBrokerSasl>>) -> Self {
        self.sasl = sasl;
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
            self.peer_versions = None;
        }
        r
    }

    /// Sends `req` at the newest version both sides speak, with the version sent. The first
    /// negotiated request on a connection asks the peer's ApiVersions first, as Kafka's
    /// `NetworkClient` does on every new connection before its first request
    /// (`handleApiVersionsResponse`), so a peer of another release gets a version it serves.
    pub async fn send_negotiated<R: Request>(
        &mut self,
        req: &R,
    ) -> Result<(i16, R::Response), ClientError> {
        if self.stream.is_none() || self.peer_versions.is_none() {
            let ask = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("brook"))
                .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
            let resp = self.send(API_VERSIONS_VERSION, &ask).await?;
            if resp.error_code != 0 {
                self.stream = None;
                return Err(ClientError::Protocol {
                    addr: self.addr.clone(),
                    why: format!("ApiVersions answered error {}", resp.error_code),
                });
            }
            self.peer_versions = Some(NodeApiVersions::from_response(&resp));
        }
        let version = self
            .peer_versions
            .as_ref()
            .and_then(NodeApiVersions::latest_usable::<R>)
            .ok_or_else(|| ClientError::UnsupportedVersion {
                addr: self.addr.clone(),
                api_key: R::KEY,
            })?;
        Ok((version, self.send(version, req).await?))
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
                let mut s = connect(&self.addr, self.tls.as_ref()).await?;
                if let Some(sasl) = &self.sasl {
                    sasl_authenticate(&mut s, sasl, &self.client_id).await?;
                }
                self.stream = Some(s);
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

/// One request and its answer on `stream`, outside any connection state.
async fn round_trip<R: Request>(
    stream: &mut BrokerStream,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    req: &R,
) -> std::io::Result<R::Response> {
    let bad = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, <R as HeaderVersion>::header_version(version))
        .map_err(|e| bad(e.to_string()))?;
    req.encode(&mut body, version)
        .map_err(|e| bad(e.to_string()))?;
    let mut frame = BytesMut::with_capacity(body.len() + 4);
    frame.put_i32(body.len() as i32);
    frame.extend_from_slice(&body);
    stream.write_all(&frame).await?;
    let size = stream.read_i32().await?;
    if size < 0 || size as usize > SASL_RESPONSE_MAX_BYTES {
        return Err(bad(format!("response of {size} bytes")));
    }
    let mut buf = vec![0u8; size as usize];
    stream.read_exact(&mut buf).await?;
    let mut buf = Bytes::from(buf);
    let rh = ResponseHeader::decode(
        &mut buf,
        <R::Response as HeaderVersion>::header_version(version),
    )
    .map_err(|e| bad(e.to_string()))?;
    if rh.correlation_id != correlation_id {
        return Err(bad("correlation id mismatch".into()));
    }
    R::Response::decode(&mut buf, version).map_err(|e| bad(e.to_string()))
}

/// Authenticates a new inter-broker connection as Kafka's `SaslClientAuthenticator` does:
/// SaslHandshake v1, then SaslAuthenticate rounds (PLAIN and OAUTHBEARER: one; SCRAM: two,
/// checking the server's signature).
pub async fn sasl_authenticate(
    stream: &mut BrokerStream,
    sasl: &InterBrokerSasl,
    client_id: &str,
) -> std::io::Result<()> {
    use kafka_protocol::messages::SaslHandshakeRequest;
    let refused = |why: String| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why);
    let handshake = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_string(sasl.mechanism.clone()));
    let h = round_trip(stream, 1, -2, client_id, &handshake).await?;
    if h.error_code != 0 {
        return Err(refused(format!(
            "SaslHandshake for {} refused with error {}",
            sasl.mechanism, h.error_code
        )));
    }
    if let Some(login) = &sasl.oauthbearer {
        // A token refused gets an error challenge; the client's 0x01 then gets the failure.
        let first = login.first_message(crate::security::oauthbearer::now_ms());
        let challenge = sasl_round(stream, client_id, first, 1).await?;
        if !challenge.is_empty() {
            sasl_round(stream, client_id, vec![0x01], 2).await?;
            return Err(refused(String::from_utf8_lossy(&challenge).into_owned()));
        }
        return Ok(());
    }
    if sasl.mechanism == PLAIN {
        let token = format!("\0{}\0{}", sasl.username, sasl.password).into_bytes();
        sasl_round(stream, client_id, token, 1).await?;
        return Ok(());
    }
    let m = ScramMechanism::from_name(&sasl.mechanism)
        .ok_or_else(|| refused(format!("unsupported mechanism {}", sasl.mechanism)))?;
    let (mut client, first) = ScramClient::start(m, &sasl.username, &sasl.password);
    let server_first = sasl_round(stream, client_id, first, 1).await?;
    let last = client.client_final(&server_first).map_err(refused)?;
    let server_final = sasl_round(stream, client_id, last, 2).await?;
    client.verify_server_final(&server_final).map_err(refused)
}

/// One SaslAuthenticate round: the server's token.
async fn sasl_round(
    stream: &mut BrokerStream,
    client_id: &str,
    token: Vec<u8>,
    n: i32,
) -> std::io::Result<Vec<u8>> {
    use kafka_protocol::messages::SaslAuthenticateRequest;
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let r = round_trip(stream, 2, -2 - n, client_id, &req).await?;
    match r.error_code {
        0 => Ok(r.auth_bytes.to_vec()),
        code => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "SaslAuthenticate failed with error {code}: {}",
                r.error_message.as_deref().unwrap_or_default()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{
        ApiVersionsResponse, RequestHeader, WriteShareGroupStateRequest,
        WriteShareGroupStateResponse,
    };
    use kafka_protocol::protocol::{Decodable, Message};
    use tokio::net::TcpListener;

    /// Reads one request frame: its header and the body left.
    async fn read_request(
        s: &mut tokio::net::TcpStream,
        header_version: i16,
    ) -> (RequestHeader, Bytes) {
        let size = s.read_i32().await.expect("frame size");
        let mut buf = vec![0u8; size as usize];
        s.read_exact(&mut buf).await.expect("frame");
        let mut buf = Bytes::from(buf);
        let h = RequestHeader::decode(&mut buf, header_version).expect("header");
        (h, buf)
    }

    async fn write_response<R: Encodable + HeaderVersion>(
        s: &mut tokio::net::TcpStream,
        correlation_id: i32,
        version: i16,
        resp: &R,
    ) {
        let mut body = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut body, R::header_version(version))
            .expect("header");
        resp.encode(&mut body, version).expect("body");
        s.write_all(&(body.len() as i32).to_be_bytes())
            .await
            .expect("size");
        s.write_all(&body).await.expect("body");
    }

    /// A peer advertising WriteShareGroupState `min..=max` (Kafka 4.1 served only v0):
    /// answers ApiVersions, then the one request it gets, and hands back its version.
    async fn peer(min: i16, max: i16) -> (String, tokio::task::JoinHandle<Option<i16>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let (h, _) = read_request(&mut s, 2).await;
            assert_eq!(h.request_api_key, ApiVersionsRequest::KEY);
            let keys = vec![ApiVersion::default()
                .with_api_key(WriteShareGroupStateRequest::KEY)
                .with_min_version(min)
                .with_max_version(max)];
            let answer = ApiVersionsResponse::default().with_api_keys(keys);
            write_response(&mut s, h.correlation_id, h.request_api_version, &answer).await;
            let size = s.read_i32().await.ok()?;
            let mut buf = vec![0u8; size as usize];
            s.read_exact(&mut buf).await.ok()?;
            let mut buf = Bytes::from(buf);
            let h = RequestHeader::decode(&mut buf, 2).expect("header");
            let v = h.request_api_version;
            write_response(
                &mut s,
                h.correlation_id,
                v,
                &WriteShareGroupStateResponse::default(),
            )
            .await;
            Some(v)
        });
        (addr, task)
    }

    /// The version `send_negotiated` sent to a peer advertising `min..=max` (or its error),
    /// and the version the peer received, if any.
    async fn negotiate(min: i16, max: i16) -> (Result<i16, ClientError>, Option<i16>) {
        let (addr, served) = peer(min, max).await;
        let mut c = BrokerConnection::new(addr, "t".into(), Duration::from_secs(10));
        let sent = c
            .send_negotiated(&WriteShareGroupStateRequest::default())
            .await
            .map(|(v, _)| v);
        drop(c);
        (sent, served.await.expect("peer"))
    }

    #[tokio::test]
    async fn the_version_sent_is_the_newest_the_peer_advertises() {
        let (sent, served) = negotiate(0, 0).await;
        assert_eq!((sent.expect("answered"), served), (0, Some(0)));
        let newest = WriteShareGroupStateRequest::VERSIONS.max;
        let (sent, served) = negotiate(0, 7).await;
        assert_eq!((sent.expect("answered"), served), (newest, Some(newest)));
        // No version in common: nothing is sent, the caller gets UnsupportedVersion.
        let (sent, served) = negotiate(5, 7).await;
        let e = sent.expect_err("no common version");
        assert!(
            matches!(e, ClientError::UnsupportedVersion { api_key: 85, .. }),
            "{e}"
        );
        assert_eq!(served, None);
    }
}
