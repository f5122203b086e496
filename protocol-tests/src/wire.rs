//! A tiny blocking Kafka wire client built on `kafka-protocol` message types.
//! It frames requests itself so that tests can also send arbitrary bytes; over plain TCP or,
//! for SSL and SASL_SSL listeners, over a rustls session on it ([`WireClient::try_connect_tls`]).

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::{MetadataResponse, MetadataResponseTopic};
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};

use crate::batch::{parse_batches, ParsedBatch};

/// Request versions used by the raw tests (those librdkafka / Java use, with topic names).
pub const API_VERSIONS_V: i16 = 3;
pub const METADATA_V: i16 = 12;
pub const PRODUCE_V: i16 = 9;
pub const FETCH_V: i16 = 12;
pub const LIST_OFFSETS_V: i16 = 7;
pub const INIT_PRODUCER_ID_V: i16 = 4;
pub const CREATE_TOPICS_V: i16 = 5;

/// Default socket timeout of a wire client.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

pub struct WireClient {
    stream: TcpStream,
    /// The TLS session on `stream` when the listener speaks TLS: every byte goes through it.
    tls: Option<Box<rustls::ClientConnection>>,
    next_correlation_id: i32,
    pub client_id: String,
}

/// The byte stream frames go over: the socket, or the TLS session on it.
enum Io<'a> {
    Plain(&'a mut TcpStream),
    Tls(rustls::Stream<'a, rustls::ClientConnection, TcpStream>),
}

impl Read for Io<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Io::Plain(s) => s.read(buf),
            Io::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Io<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Io::Plain(s) => s.write(buf),
            Io::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Io::Plain(s) => s.flush(),
            Io::Tls(s) => s.flush(),
        }
    }
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

impl WireClient {
    pub fn connect(addr: &str) -> WireClient {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        Self::with_stream(stream, IO_TIMEOUT).unwrap()
    }

    /// Connects within `timeout`, with `timeout` as the socket timeout too: an error instead of
    /// a panic, for probing nodes that may be down.
    pub fn try_connect(addr: &str, timeout: Duration) -> std::io::Result<WireClient> {
        let sa = addr.to_socket_addrs()?.next().ok_or_else(|| {
            std::io::Error::new(ErrorKind::InvalidInput, format!("no address for {addr}"))
        })?;
        Self::with_stream(TcpStream::connect_timeout(&sa, timeout)?, timeout)
    }

    /// [`WireClient::try_connect`] to a TLS listener: the handshake with `config`, the
    /// certificate checked against `addr`'s host, done before this returns.
    pub fn try_connect_tls(
        addr: &str,
        timeout: Duration,
        config: Arc<rustls::ClientConfig>,
    ) -> std::io::Result<WireClient> {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| std::io::Error::new(ErrorKind::InvalidInput, format!("{host}: {e}")))?;
        let mut conn =
            rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
        let mut c = Self::try_connect(addr, timeout)?;
        while conn.is_handshaking() {
            conn.complete_io(&mut c.stream)?;
        }
        c.tls = Some(Box::new(conn));
        Ok(c)
    }

    fn with_stream(stream: TcpStream, io_timeout: Duration) -> std::io::Result<WireClient> {
        stream.set_read_timeout(Some(io_timeout))?;
        stream.set_write_timeout(Some(io_timeout))?;
        stream.set_nodelay(true)?;
        Ok(WireClient {
            stream,
            tls: None,
            next_correlation_id: 1,
            client_id: "brook-protocol-tests".into(),
        })
    }

    /// The socket (under the TLS session, if there is one).
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    fn io(&mut self) -> Io<'_> {
        match &mut self.tls {
            Some(conn) => Io::Tls(rustls::Stream::new(conn.as_mut(), &mut self.stream)),
            None => Io::Plain(&mut self.stream),
        }
    }

    /// Writes raw bytes (no framing).
    pub fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut io = self.io();
        io.write_all(bytes)?;
        io.flush()
    }

    /// Writes a length-prefixed frame.
    pub fn write_frame(&mut self, payload: &[u8]) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(4 + payload.len());
        buf.extend_from_slice(&(payload.len() as i32).to_be_bytes());
        buf.extend_from_slice(payload);
        self.write_raw(&buf)
    }

    /// Reads one length-prefixed frame. `Ok(None)` on a clean EOF before any byte.
    pub fn read_frame(&mut self) -> std::io::Result<Option<Bytes>> {
        let mut len = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            let n = self.io().read(&mut len[got..])?;
            if n == 0 {
                if got == 0 {
                    return Ok(None);
                }
                return Err(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "EOF in length",
                ));
            }
            got += n;
        }
        let len = i32::from_be_bytes(len);
        if !(0..=256 * 1024 * 1024).contains(&len) {
            return Err(std::io::Error::new(
                ErrorKind::InvalidData,
                format!("response length prefix {len}"),
            ));
        }
        let mut buf = vec![0u8; len as usize];
        self.io().read_exact(&mut buf)?;
        Ok(Some(Bytes::from(buf)))
    }

    /// Builds header+body bytes (without the length prefix) for `key`/`version`.
    pub fn encode_request<R: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        header_version: i16,
        body: &R,
        body_version: i16,
    ) -> (i32, Vec<u8>) {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_string(self.client_id.clone()));
        let mut buf = Vec::new();
        header
            .encode(&mut buf, header_version)
            .expect("encode request header");
        body.encode(&mut buf, body_version)
            .unwrap_or_else(|e| panic!("encode {key:?} v{body_version} body: {e:#}"));
        (correlation_id, buf)
    }

    /// Sends a request; returns its correlation id.
    pub fn send<R: Request>(&mut self, version: i16, body: &R) -> i32 {
        self.try_send(version, body)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Sends a request; returns its correlation id, or a description of the I/O error.
    pub fn try_send<R: Request>(&mut self, version: i16, body: &R) -> Result<i32, String> {
        let key = ApiKey::try_from(R::KEY).expect("known api key");
        let (cid, bytes) = self.encode_request(
            key,
            version,
            key.request_header_version(version),
            body,
            version,
        );
        self.write_frame(&bytes)
            .map_err(|e| format!("send {key:?} v{version}: {e}"))?;
        Ok(cid)
    }

    /// Reads the response to `correlation_id` and decodes it, checking every byte is consumed.
    pub fn receive<R: Request>(&mut self, version: i16, correlation_id: i32) -> R::Response
    where
        R::Response: std::fmt::Debug,
    {
        self.try_receive::<R>(version, correlation_id)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`WireClient::receive`], but an I/O error or a closed connection is an `Err` (a
    /// response that does not decode still panics: that is a protocol bug).
    pub fn try_receive<R: Request>(
        &mut self,
        version: i16,
        correlation_id: i32,
    ) -> Result<R::Response, String>
    where
        R::Response: std::fmt::Debug,
    {
        let key = ApiKey::try_from(R::KEY).expect("known api key");
        let frame = self
            .read_frame()
            .map_err(|e| format!("read {key:?} v{version} response: {e}"))?
            .ok_or_else(|| format!("connection closed instead of a {key:?} v{version} response"))?;
        Ok(decode_response::<R::Response>(
            key,
            version,
            correlation_id,
            frame,
        ))
    }

    /// Sends a request and waits for its response.
    pub fn request<R: Request>(&mut self, version: i16, body: &R) -> R::Response
    where
        R::Response: std::fmt::Debug,
    {
        self.try_request(version, body)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Sends a request and waits for its response; an I/O error is an `Err`.
    pub fn try_request<R: Request>(&mut self, version: i16, body: &R) -> Result<R::Response, String>
    where
        R::Response: std::fmt::Debug,
    {
        let cid = self.try_send(version, body)?;
        self.try_receive::<R>(version, cid)
    }

    /// Waits until the peer closes the connection. Returns Err with a description when data
    /// arrives instead, or when it is still open after `within`.
    pub fn expect_closed(&mut self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        let mut buf = [0u8; 4096];
        let mut received = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "connection still open after {within:?} ({} unexpected bytes received: {:02x?})",
                    received.len(),
                    &received[..received.len().min(64)]
                ));
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.io().read(&mut buf) {
                Ok(0) => {
                    return if received.is_empty() {
                        Ok(())
                    } else {
                        Err(format!(
                            "broker answered ({} bytes: {:02x?}) before closing",
                            received.len(),
                            &received[..received.len().min(64)]
                        ))
                    }
                }
                Ok(n) => received.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::ConnectionReset
                            | ErrorKind::ConnectionAborted
                            | ErrorKind::BrokenPipe
                            // A TLS peer that closed without close_notify.
                            | ErrorKind::UnexpectedEof
                    ) =>
                {
                    return if received.is_empty() {
                        Ok(())
                    } else {
                        Err(format!(
                            "broker answered ({} bytes) before resetting",
                            received.len()
                        ))
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(format!("read error {e}")),
            }
        }
    }

    // ---------------------------------------------------------------- typed helpers

    pub fn api_versions(&mut self) -> ApiVersionsResponse {
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = StrBytes::from_static_str("brook-protocol-tests");
        req.client_software_version = StrBytes::from_static_str("0.1.0");
        self.request(API_VERSIONS_V, &req)
    }

    /// Panics unless the broker advertises each (api, version).
    pub fn require_versions(&mut self, wanted: &[(ApiKey, i16)]) {
        let resp = self.api_versions();
        assert_eq!(
            resp.error_code, 0,
            "ApiVersions v{API_VERSIONS_V} error {}",
            resp.error_code
        );
        for (key, v) in wanted {
            let k = *key as i16;
            let range = resp.api_keys.iter().find(|a| a.api_key == k);
            match range {
                None => panic!("broker does not advertise {key:?} (key {k}) at all"),
                Some(a) => assert!(
                    a.min_version <= *v && *v <= a.max_version,
                    "broker advertises {key:?} {}..={}, the test needs v{v}",
                    a.min_version,
                    a.max_version
                ),
            }
        }
    }

    pub fn metadata(&mut self, topics: &[&str], auto_create: bool) -> MetadataResponse {
        self.request(METADATA_V, &Self::metadata_request(topics, auto_create))
    }

    /// A Metadata request for `topics` (all topics when empty is not meant: an empty list asks
    /// for none, only brokers and the controller).
    pub fn metadata_request(topics: &[&str], auto_create: bool) -> MetadataRequest {
        let mut req = MetadataRequest::default();
        req.topics = Some(
            topics
                .iter()
                .map(|t| {
                    let mut mt = MetadataRequestTopic::default();
                    mt.name = Some(topic_name(t));
                    mt
                })
                .collect(),
        );
        req.allow_auto_topic_creation = auto_create;
        req
    }

    /// Creates `topic` through Metadata auto-creation and waits until every partition has a
    /// leader, and the partitions this node leads serve ListOffsets (as in Kafka, Metadata
    /// answers before the creation and may show partitions a moment before their leader
    /// opened them). Returns the topic's metadata.
    pub fn ensure_topic(&mut self, topic: &str) -> MetadataResponseTopic {
        let t = self.await_topic_in_metadata(topic);
        let me = self.stream.peer_addr().map(|a| a.port() as i32).ok();
        let md = self.metadata(&[], false);
        let my_id = md
            .brokers
            .iter()
            .find(|b| Some(b.port) == me)
            .map(|b| b.node_id.0);
        for p in t.partitions.iter().filter(|p| Some(p.leader_id.0) == my_id) {
            let req = Self::list_offsets_request(topic, p.partition_index, -1);
            crate::poll_until_ok(
                &format!("{topic}-{} served by its leader", p.partition_index),
                Duration::from_secs(20),
                || {
                    let r = self.try_request(LIST_OFFSETS_V, &req)?;
                    match r.topics.first().and_then(|t| t.partitions.first()) {
                        Some(pr) if pr.error_code == 0 => Ok(()),
                        other => Err(format!("{other:?}")),
                    }
                },
            );
        }
        t
    }

    fn await_topic_in_metadata(&mut self, topic: &str) -> MetadataResponseTopic {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = None;
        loop {
            let md = self.metadata(&[topic], true);
            if let Some(t) = md
                .topics
                .iter()
                .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(topic))
            {
                if t.error_code == 0
                    && !t.partitions.is_empty()
                    && t.partitions
                        .iter()
                        .all(|p| p.error_code == 0 && p.leader_id.0 >= 0)
                {
                    return t.clone();
                }
                last = Some(t.clone());
            }
            if Instant::now() >= deadline {
                panic!("topic {topic} not ready through Metadata v{METADATA_V} auto-create within 20 s; last: {last:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn init_producer_id(&mut self) -> (i64, i16) {
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = None;
        req.transaction_timeout_ms = 60_000;
        req.producer_id = (-1i64).into();
        req.producer_epoch = -1;
        let resp = self.request(INIT_PRODUCER_ID_V, &req);
        assert_eq!(
            resp.error_code, 0,
            "InitProducerId v{INIT_PRODUCER_ID_V}: {resp:?}"
        );
        assert!(
            resp.producer_id.0 >= 0,
            "InitProducerId gave producer id {:?}",
            resp.producer_id
        );
        assert!(
            resp.producer_epoch >= 0,
            "InitProducerId gave epoch {}",
            resp.producer_epoch
        );
        (resp.producer_id.0, resp.producer_epoch)
    }

    pub fn produce_request(
        topic: &str,
        partition: i32,
        records: Vec<u8>,
        acks: i16,
    ) -> ProduceRequest {
        let mut pd = PartitionProduceData::default();
        pd.index = partition;
        pd.records = Some(Bytes::from(records));
        let mut td = TopicProduceData::default();
        td.name = topic_name(topic);
        td.partition_data = vec![pd];
        let mut req = ProduceRequest::default();
        req.transactional_id = None;
        req.acks = acks;
        req.timeout_ms = 30_000;
        req.topic_data = vec![td];
        req
    }

    /// Produces one record set (acks=-1) and returns the single partition response.
    pub fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: Vec<u8>,
    ) -> PartitionProduceResponse {
        let req = Self::produce_request(topic, partition, records, -1);
        let resp = self.request(PRODUCE_V, &req);
        assert_eq!(resp.responses.len(), 1, "Produce response topics: {resp:?}");
        let t = &resp.responses[0];
        assert_eq!(
            t.name.0.as_str(),
            topic,
            "Produce response topic name: {resp:?}"
        );
        assert_eq!(
            t.partition_responses.len(),
            1,
            "Produce response partitions: {resp:?}"
        );
        let p = t.partition_responses[0].clone();
        assert_eq!(
            p.index, partition,
            "Produce response partition index: {resp:?}"
        );
        p
    }

    pub fn fetch_request(
        topic: &str,
        partition: i32,
        offset: i64,
        max_wait_ms: i32,
    ) -> FetchRequest {
        let mut fp = FetchPartition::default();
        fp.partition = partition;
        fp.current_leader_epoch = -1;
        fp.fetch_offset = offset;
        fp.last_fetched_epoch = -1;
        fp.log_start_offset = -1;
        fp.partition_max_bytes = 1024 * 1024;
        let mut ft = FetchTopic::default();
        ft.topic = topic_name(topic);
        ft.partitions = vec![fp];
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_wait_ms = max_wait_ms;
        req.min_bytes = 1;
        req.max_bytes = 4 * 1024 * 1024;
        req.isolation_level = 0;
        req.session_id = 0;
        req.session_epoch = -1;
        req.topics = vec![ft];
        req
    }

    /// One Fetch (v12, read_uncommitted) of one partition; returns its partition data.
    pub fn fetch(&mut self, topic: &str, partition: i32, offset: i64) -> PartitionData {
        let req = Self::fetch_request(topic, partition, offset, 200);
        let resp = self.request(FETCH_V, &req);
        assert_eq!(resp.error_code, 0, "Fetch top-level error: {resp:?}");
        assert_eq!(resp.responses.len(), 1, "Fetch response topics: {resp:?}");
        let t = &resp.responses[0];
        assert_eq!(t.topic.0.as_str(), topic);
        assert_eq!(t.partitions.len(), 1);
        t.partitions[0].clone()
    }

    /// Reads the whole partition from offset 0 up to its high watermark with raw Fetches.
    pub fn fetch_all(&mut self, topic: &str, partition: i32) -> Vec<ParsedBatch> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut out: Vec<ParsedBatch> = Vec::new();
        let mut offset = 0i64;
        loop {
            let pd = self.fetch(topic, partition, offset);
            assert_eq!(
                pd.error_code, 0,
                "Fetch {topic}-{partition} at {offset}: {pd:?}"
            );
            let hw = pd.high_watermark;
            let data = pd.records.clone().unwrap_or_default();
            let batches = parse_batches(&data).unwrap_or_else(|e| {
                panic!("Fetch {topic}-{partition} at {offset}: bad records: {e}")
            });
            for b in batches {
                assert!(b.crc_valid, "fetched batch with bad CRC: {b:?}");
                if b.last_offset() < offset {
                    continue; // a batch that starts before the fetch offset may be returned
                }
                offset = b.last_offset() + 1;
                out.push(b);
            }
            if offset >= hw {
                return out;
            }
            if Instant::now() >= deadline {
                panic!("fetch_all {topic}-{partition}: stuck at offset {offset} below high watermark {hw}");
            }
        }
    }

    pub fn list_offsets(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> ListOffsetsPartitionResponse {
        let req = Self::list_offsets_request(topic, partition, timestamp);
        let resp = self.request(LIST_OFFSETS_V, &req);
        assert_eq!(resp.topics.len(), 1, "ListOffsets response: {resp:?}");
        assert_eq!(resp.topics[0].name.0.as_str(), topic);
        assert_eq!(
            resp.topics[0].partitions.len(),
            1,
            "ListOffsets response: {resp:?}"
        );
        let pr = resp.topics[0].partitions[0].clone();
        assert_eq!(pr.partition_index, partition);
        pr
    }

    /// A ListOffsets request (read_uncommitted) for one partition at `timestamp` (-1 latest,
    /// -2 earliest).
    pub fn list_offsets_request(topic: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = partition;
        p.current_leader_epoch = -1;
        p.timestamp = timestamp;
        let mut t = ListOffsetsTopic::default();
        t.name = topic_name(topic);
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(-1);
        req.isolation_level = 0;
        req.topics = vec![t];
        req
    }

    /// A CreateTopics request for one topic with `configs`, answered within `timeout`.
    pub fn create_topics_request(
        topic: &str,
        partitions: i32,
        rf: i16,
        configs: &[(&str, &str)],
        timeout: Duration,
    ) -> CreateTopicsRequest {
        let mut t = CreatableTopic::default();
        t.name = topic_name(topic);
        t.num_partitions = partitions;
        t.replication_factor = rf;
        t.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut c = CreatableTopicConfig::default();
                c.name = StrBytes::from_string(k.to_string());
                c.value = Some(StrBytes::from_string(v.to_string()));
                c
            })
            .collect();
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = timeout.as_millis() as i32;
        req
    }
}

/// Decodes a response frame (header + body) and checks the correlation id and that the body
/// is consumed exactly.
pub fn decode_response<T: Decodable + std::fmt::Debug>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    frame: Bytes,
) -> T {
    let mut buf = frame.clone();
    let hv = key.response_header_version(version);
    let header = ResponseHeader::decode(&mut buf, hv).unwrap_or_else(|e| {
        panic!(
            "decode {key:?} v{version} response header v{hv}: {e:#}; frame {:02x?}",
            &frame[..frame.len().min(64)]
        )
    });
    assert_eq!(
        header.correlation_id, correlation_id,
        "{key:?} v{version}: response correlation id"
    );
    let body = T::decode(&mut buf, version).unwrap_or_else(|e| {
        panic!(
            "decode {key:?} v{version} response body: {e:#}; frame ({} bytes) {:02x?}",
            frame.len(),
            &frame[..frame.len().min(128)]
        )
    });
    assert_eq!(
        buf.remaining(),
        0,
        "{key:?} v{version} response: {} trailing bytes after the body {body:?}",
        buf.remaining()
    );
    body
}
