//! The matrix's connections and the situation every case reads: a topic with records on
//! several partitions, a group with a member and committed offsets, a transactional producer
//! mid-transaction and a KIP-848 group. Built once, with requests at versions that Brook and
//! Kafka 4.4 both serve, before any case runs.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Request, StrBytes};

use crate::batch::{encode_batch, Producer, Rec};
use crate::wire::{topic_name, WireClient};
use crate::{poll_until_ok, unique_topic};

/// Bound on one request's answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// Bound on the situation settling (topics led, coordinators loaded).
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Partitions of the data topic.
pub const DATA_PARTITIONS: i32 = 3;
/// Record batches written to each data partition, two records each.
pub const DATA_BATCHES: i32 = 3;
/// Long enough that the fixture member outlives the whole matrix without heartbeats.
pub const SESSION_TIMEOUT_MS: i32 = 300_000;

/// A node to send to: a broker id from Metadata.
pub type NodeId = i32;

/// Names of everything the fixture made, with ids the cases need.
#[derive(Debug, Clone, Default)]
pub struct Fixture {
    pub run: String,
    pub data: String,
    pub data_id: uuid::Uuid,
    /// Produce, DeleteRecords, markers and producer state: it changes as cases run.
    pub side: String,
    pub side_id: uuid::Uuid,
    pub cfg: String,
    pub grow: String,
    pub group: String,
    pub member: String,
    pub generation: i32,
    pub assignment: Bytes,
    pub txn: String,
    pub txn_pid: i64,
    pub txn_epoch: i16,
    pub txn_group: String,
    pub cg: String,
    pub replication: i16,
}

pub struct Env {
    bootstrap: String,
    addrs: BTreeMap<NodeId, String>,
    clients: HashMap<NodeId, WireClient>,
    pub fix: Fixture,
    fresh: u32,
    /// The client id of every request from now on (fault rules match on it).
    client_id: String,
}

/// The client id of the matrix's requests.
pub const CLIENT_ID: &str = "brook-version-matrix";

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

impl Env {
    pub fn connect(bootstrap: &str) -> Env {
        let mut env = Env {
            bootstrap: bootstrap.to_string(),
            addrs: BTreeMap::new(),
            clients: HashMap::new(),
            fix: Fixture::default(),
            fresh: 0,
            client_id: CLIENT_ID.into(),
        };
        // The first bootstrap address that answers, as clients do.
        let mut c = bootstrap
            .split(',')
            .find_map(|a| WireClient::try_connect(a, CALL_TIMEOUT).ok())
            .unwrap_or_else(|| panic!("no bootstrap address of {bootstrap} answers"));
        let md: MetadataResponse = c.request(12, &WireClient::metadata_request(&[], false));
        for b in md.brokers {
            env.addrs
                .insert(b.node_id.0, format!("{}:{}", b.host.as_str(), b.port));
        }
        env
    }

    pub fn node_ids(&self) -> Vec<NodeId> {
        self.addrs.keys().copied().collect()
    }

    /// Any node: the first one Metadata listed.
    pub fn any(&self) -> NodeId {
        *self.addrs.keys().next().expect("Metadata listed no broker")
    }

    /// A name unique to this run and call (a fresh object for a state-changing case).
    pub fn fresh(&mut self, what: &str) -> String {
        self.fresh += 1;
        format!("{}-{what}-{}", self.fix.run, self.fresh)
    }

    /// A uuid unique to this run and call (a KIP-848 member id from v1).
    pub fn fresh_uuid(&mut self) -> uuid::Uuid {
        self.fresh += 1;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        uuid::Uuid::from_u128(nanos ^ (u128::from(self.fresh) << 64))
    }

    /// Sends every request from now on with `client_id`.
    pub fn set_client_id(&mut self, client_id: &str) {
        self.client_id = client_id.to_string();
        for c in self.clients.values_mut() {
            c.client_id = client_id.to_string();
        }
    }

    /// Drops every connection, after a failed pair left one in an unknown state.
    pub fn reset(&mut self) {
        self.clients.clear();
    }

    fn client(&mut self, node: NodeId) -> Result<&mut WireClient, String> {
        if !self.clients.contains_key(&node) {
            let addr = self
                .addrs
                .get(&node)
                .cloned()
                .unwrap_or_else(|| self.bootstrap.clone());
            let mut c = WireClient::try_connect(&addr, CALL_TIMEOUT)
                .map_err(|e| format!("connect node {node} at {addr}: {e}"))?;
            c.client_id = self.client_id.clone();
            self.clients.insert(node, c);
        }
        Ok(self.clients.get_mut(&node).expect("inserted above"))
    }

    /// One request and its answer; a closed connection or I/O error is an `Err`.
    pub fn call<R: Request>(&mut self, node: NodeId, v: i16, req: &R) -> Result<R::Response, String>
    where
        R::Response: std::fmt::Debug,
    {
        let r = self.client(node)?.try_request(v, req);
        if r.is_err() {
            self.clients.remove(&node);
        }
        r
    }

    /// Sends a request frame (header and body) the node must answer by closing the
    /// connection.
    pub fn send_expect_close(&mut self, node: NodeId, frame: &[u8]) -> Result<(), String> {
        let c = self.client(node)?;
        c.write_frame(frame).map_err(|e| e.to_string())?;
        let r = c.expect_closed(CALL_TIMEOUT);
        self.clients.remove(&node);
        r
    }

    /// Metadata v12 for `topic` from `node`.
    pub fn topic_metadata(
        &mut self,
        node: NodeId,
        topic: &str,
    ) -> Result<metadata_response::MetadataResponseTopic, String> {
        let md = self.call(node, 12, &WireClient::metadata_request(&[topic], false))?;
        md.topics
            .into_iter()
            .next()
            .ok_or_else(|| format!("Metadata for {topic}: no topic"))
    }

    /// The leader of each partition of `topic`, grouped by leader.
    pub fn leaders(&mut self, topic: &str) -> Result<BTreeMap<NodeId, Vec<i32>>, String> {
        let t = self.topic_metadata(self.any(), topic)?;
        let mut out: BTreeMap<NodeId, Vec<i32>> = BTreeMap::new();
        for p in &t.partitions {
            if p.leader_id.0 < 0 {
                return Err(format!("{topic}-{} has no leader", p.partition_index));
            }
            out.entry(p.leader_id.0)
                .or_default()
                .push(p.partition_index);
        }
        out.values_mut().for_each(|ps| ps.sort());
        Ok(out)
    }

    /// The coordinator of `key` (0 group, 1 transaction), FindCoordinator v3.
    pub fn coordinator(&mut self, key: &str, key_type: i8) -> NodeId {
        let req = FindCoordinatorRequest::default()
            .with_key(s(key))
            .with_key_type(key_type);
        let any = self.any();
        poll_until_ok(&format!("coordinator of {key}"), SETTLE_TIMEOUT, || {
            let r = self.call(any, 3, &req)?;
            if r.error_code != 0 {
                return Err(format!("{r:?}"));
            }
            Ok(r.node_id.0)
        })
    }

    /// `f` until its answer's error code is not one that a client retries on at a coordinator
    /// (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
    /// CONCURRENT_TRANSACTIONS): a new group or transactional id may land on a coordinator
    /// partition still loading.
    pub fn retry_coordinator<T: std::fmt::Debug>(
        &mut self,
        what: &str,
        mut f: impl FnMut(&mut Env) -> Result<T, String>,
        code: impl Fn(&T) -> i16,
    ) -> Result<T, String> {
        const RETRIABLE: [i16; 4] = [14, 15, 16, 51];
        let deadline = std::time::Instant::now() + SETTLE_TIMEOUT;
        loop {
            let r = f(self)?;
            if !RETRIABLE.contains(&code(&r)) || std::time::Instant::now() >= deadline {
                return Ok(r);
            }
            eprintln!("version matrix: {what}: {r:?}; retrying");
            // Paces the retries, as a client's backoff does; the answer is the event.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Creates `topic` and waits until every partition's leader serves it.
    pub fn create_topic(&mut self, topic: &str, partitions: i32) {
        let rf = self.fix.replication;
        let req = WireClient::create_topics_request(topic, partitions, rf, &[], CALL_TIMEOUT);
        let any = self.any();
        let r = self.call(any, 5, &req).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.topics[0].error_code, 0, "CreateTopics {topic}: {r:?}");
        self.await_served(topic, partitions);
    }

    /// Waits until each partition of `topic` has a leader that answers ListOffsets for it.
    pub fn await_served(&mut self, topic: &str, partitions: i32) {
        poll_until_ok(&format!("{topic} served"), SETTLE_TIMEOUT, || {
            let leaders = self.leaders(topic)?;
            let n: usize = leaders.values().map(Vec::len).sum();
            if n != partitions as usize {
                return Err(format!("leaders {leaders:?}"));
            }
            for (node, ps) in leaders {
                for p in ps {
                    let req = WireClient::list_offsets_request(topic, p, -1);
                    let r = self.call(node, 7, &req)?;
                    let code = r.topics[0].partitions[0].error_code;
                    if code != 0 {
                        return Err(format!("{topic}-{p} on {node}: error {code}"));
                    }
                }
            }
            // Every node knows the topic (cases ask any node).
            for node in self.node_ids() {
                let t = self.topic_metadata(node, topic)?;
                if t.error_code != 0 || t.partitions.len() != partitions as usize {
                    return Err(format!("node {node}: {t:?}"));
                }
            }
            Ok(())
        });
    }

    /// Appends `batches` plain batches of two records to `topic`-`partition` (Produce v9,
    /// acks=all) and returns the last base offset.
    pub fn produce_plain(&mut self, topic: &str, partition: i32, batches: i32) -> i64 {
        let mut base = -1;
        for b in 0..batches {
            let recs = [
                Rec::kv(&format!("k{b}a"), "v", 1_700_000_000_000 + b as i64),
                Rec::kv(&format!("k{b}b"), "v", 1_700_000_000_001 + b as i64),
            ];
            let req = WireClient::produce_request(
                topic,
                partition,
                encode_batch(Producer::NONE, &recs),
                -1,
            );
            let leader = self.leader_of(topic, partition);
            let r = self.call(leader, 9, &req).unwrap_or_else(|e| panic!("{e}"));
            let p = &r.responses[0].partition_responses[0];
            assert_eq!(p.error_code, 0, "Produce {topic}-{partition}: {r:?}");
            base = p.base_offset;
        }
        base
    }

    pub fn leader_of(&mut self, topic: &str, partition: i32) -> NodeId {
        let leaders = self.leaders(topic).unwrap_or_else(|e| panic!("{e}"));
        leaders
            .into_iter()
            .find(|(_, ps)| ps.contains(&partition))
            .map(|(n, _)| n)
            .unwrap_or_else(|| panic!("{topic}-{partition}: no leader"))
    }

    pub fn topic_id(&mut self, topic: &str) -> uuid::Uuid {
        let any = self.any();
        self.topic_metadata(any, topic)
            .unwrap_or_else(|e| panic!("{e}"))
            .topic_id
    }

    /// Builds the fixture: topics with records, a stable group with committed offsets, an
    /// ongoing transaction, a KIP-848 group.
    pub fn build_fixture(&mut self) {
        let run = unique_topic("vm");
        let replication = self.addrs.len().min(3) as i16;
        self.fix = Fixture {
            data: format!("{run}-data"),
            side: format!("{run}-side"),
            cfg: format!("{run}-cfg"),
            grow: format!("{run}-grow"),
            group: format!("{run}-group"),
            txn: format!("{run}-txn"),
            txn_group: format!("{run}-txn-group"),
            cg: format!("{run}-cg"),
            run,
            replication,
            ..Fixture::default()
        };
        let f = self.fix.clone();
        self.create_topic(&f.data, DATA_PARTITIONS);
        for p in 0..DATA_PARTITIONS {
            self.produce_plain(&f.data, p, DATA_BATCHES);
        }
        self.create_topic(&f.side, 1);
        self.produce_plain(&f.side, 0, 2);
        self.create_topic(&f.cfg, 1);
        self.create_topic(&f.grow, 1);
        self.fix.data_id = self.topic_id(&f.data);
        self.fix.side_id = self.topic_id(&f.side);
        super::groups::build_group(self);
        super::txns::build_transaction(self);
        super::groups::build_consumer_group(self);
    }
}

/// `name` as a topic name.
pub fn tn(name: &str) -> TopicName {
    topic_name(name)
}
