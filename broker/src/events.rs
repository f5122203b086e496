//! The event stream behind `GET /v1/events` (docs/EVENTS.md): typed events about what this
//! node decided or saw, each emitted once, by the part of the broker that owns the fact
//! (the `Partition` for ISR changes and the duplicate batches its log's appends return, the
//! metadata apply path for leadership and fencing, the produce handler for the errors it
//! answers, the fault engine, the marker writer, the group coordinator).
//!
//! Events go into a bounded ring (`admin.event.buffer.len.max`, oldest dropped first) with a
//! sequence number per process, so a reader can replay what it missed (`?since=N`); a reader
//! that asks for events already dropped is told how many it lost. Nothing is recorded while
//! nobody listens: [`emit`] costs one atomic load then, and the event is never built.
//!
//! One log per process ([`install`]): a node is one process, and the code that owns the facts
//! (a `Partition`) has no handle on the `Broker`, much as `tracing` has one global subscriber.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use axum::response::sse;
use futures_util::Stream;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::sync::watch;

/// Events one wake-up of a reader takes from the ring at most (the rest on the next turn).
pub const EVENTS_PER_READ_MAX: usize = 256;

/// What happened. Serialized with `type` set to the variant's snake_case name.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The committed ISR lost members (reported by the partition's leader).
    IsrShrink {
        topic: String,
        partition: i32,
        isr: Vec<i32>,
        removed: Vec<i32>,
        partition_epoch: i32,
    },
    /// The committed ISR gained members (reported by the partition's leader).
    IsrExpand {
        topic: String,
        partition: i32,
        isr: Vec<i32>,
        added: Vec<i32>,
        partition_epoch: i32,
    },
    /// This node became the partition's leader at a new leader epoch.
    LeaderElected {
        topic: String,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
        /// The leader this node followed before, -1 when none or unknown.
        previous_leader: i32,
        isr: Vec<i32>,
    },
    /// A follower removed records its leader does not have.
    FollowerTruncation {
        topic: String,
        partition: i32,
        leader: i32,
        from_log_end_offset: i64,
        to_offset: i64,
        /// Everything was dropped and the log restarts at the leader's log start.
        full: bool,
    },
    /// The controller fenced a broker (seen by the active controller's image).
    BrokerFenced { broker: i32, broker_epoch: u64 },
    /// The controller unfenced a broker.
    BrokerUnfenced { broker: i32, broker_epoch: u64 },
    /// A group moved to a rebalance phase (`phase` is Kafka's state name).
    GroupRebalance {
        group_id: String,
        protocol: &'static str,
        phase: &'static str,
        /// Classic: the generation id; consumer: the group epoch.
        generation: i32,
        members: usize,
    },
    /// A produce retry matched one of the producer's last batches: answered with its offsets.
    DuplicateBatch {
        topic: String,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        first_sequence: i32,
        last_sequence: i32,
        first_offset: i64,
    },
    /// A produce partition was answered with an error worth watching
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    ProduceError {
        topic: String,
        partition: i32,
        error: String,
        error_code: i16,
        message: Option<String>,
    },
    /// A fault rule fired.
    FaultFired {
        rule: u64,
        kind: &'static str,
        action: String,
        api_key: Option<i16>,
    },
    /// A transaction marker (COMMIT or ABORT) was appended on this leader.
    TxnMarker {
        topic: String,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        committed: bool,
        coordinator_epoch: i32,
        offset: i64,
    },
}

/// One buffered event: its sequence number and its JSON text.
#[derive(Debug, Clone)]
pub struct Buffered {
    pub seq: u64,
    pub json: Arc<str>,
}

struct Ring {
    events: VecDeque<Buffered>,
    /// The sequence number the next event gets; the first is 1.
    next_seq: u64,
}

/// What one read found after a cursor.
#[derive(Debug, Default)]
pub struct Read {
    /// Events after the cursor that were dropped before this read.
    pub dropped: u64,
    pub events: Vec<Buffered>,
}

/// The ring of recent events and the readers' wake-ups.
pub struct EventLog {
    node_id: i32,
    len_max: usize,
    listeners: AtomicUsize,
    ring: Mutex<Ring>,
    /// Carries the newest sequence number; readers wait on it.
    appended: watch::Sender<u64>,
    /// Set on shutdown: open streams end, so the admin listener can stop.
    closed: watch::Sender<bool>,
}

static GLOBAL: OnceLock<Arc<EventLog>> = OnceLock::new();

/// Makes `log` the process's event log, unless one is installed already; returns the one in
/// use (a test process that starts several brokers shares the first one's).
pub fn install(log: EventLog) -> Arc<EventLog> {
    GLOBAL.get_or_init(|| Arc::new(log)).clone()
}

/// Records the event `make` builds, if the process has an event log and someone listens.
#[inline]
pub fn emit(make: impl FnOnce() -> EventKind) {
    if let Some(log) = GLOBAL.get() {
        if log.listening() {
            log.push(make());
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl EventLog {
    /// An empty log for node `node_id` keeping at most `len_max` events (at least one).
    pub fn new(node_id: i32, len_max: usize) -> EventLog {
        EventLog {
            node_id,
            len_max: len_max.max(1),
            listeners: AtomicUsize::new(0),
            ring: Mutex::new(Ring {
                events: VecDeque::new(),
                next_seq: 1,
            }),
            appended: watch::channel(0).0,
            closed: watch::channel(false).0,
        }
    }

    /// Whether any reader is subscribed.
    pub fn listening(&self) -> bool {
        self.listeners.load(Ordering::Relaxed) > 0
    }

    /// Records an event of this node, now.
    pub fn push(&self, kind: EventKind) -> u64 {
        let mut obj = match serde_json::to_value(&kind) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        obj.insert("time_ms".into(), json!(now_ms()));
        obj.insert("node".into(), json!(self.node_id));
        self.push_object(obj)
    }

    /// Records an event given as a JSON object (the supervisor merges nodes' events this
    /// way); `seq` is set here. Returns it.
    pub fn push_object(&self, mut obj: Map<String, Value>) -> u64 {
        let seq = {
            let mut ring = self.ring.lock();
            let seq = ring.next_seq;
            ring.next_seq += 1;
            obj.insert("seq".into(), json!(seq));
            let json: Arc<str> = Value::Object(obj).to_string().into();
            if ring.events.len() >= self.len_max {
                ring.events.pop_front();
            }
            ring.events.push_back(Buffered { seq, json });
            seq
        };
        self.appended.send_replace(seq);
        seq
    }

    /// Up to `max` events after sequence number `cursor`, and how many after it were dropped.
    pub fn read_after(&self, cursor: u64, max: usize) -> Read {
        let ring = self.ring.lock();
        let oldest = ring.events.front().map_or(ring.next_seq, |e| e.seq);
        // Sequence numbers are dense, so the position of `cursor + 1` is arithmetic.
        let start = (cursor + 1).saturating_sub(oldest) as usize;
        Read {
            dropped: oldest.saturating_sub(cursor + 1),
            events: ring.events.iter().skip(start).take(max).cloned().collect(),
        }
    }

    /// Where a new reader starts: after `since`, but no later than the newest event (a
    /// cursor from an earlier process reads what comes next); without it, before the oldest.
    fn start_cursor(&self, since: Option<u64>) -> u64 {
        let ring = self.ring.lock();
        match since {
            Some(s) => s.min(ring.next_seq - 1),
            None => ring.events.front().map_or(ring.next_seq, |e| e.seq) - 1,
        }
    }

    /// Ends every open stream (shutdown).
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// A server-sent event stream: the events after `since` (without it, every buffered one),
    /// then each new one as it comes; a `dropped` event says how many were lost in between.
    pub fn stream(
        self: &Arc<Self>,
        since: Option<u64>,
    ) -> impl Stream<Item = Result<sse::Event, Infallible>> + Send + 'static {
        self.listeners.fetch_add(1, Ordering::Relaxed);
        let reader = Reader {
            cursor: self.start_cursor(since),
            pending: VecDeque::new(),
            appended: self.appended.subscribe(),
            closed: self.closed.subscribe(),
            log: Listener(self.clone()),
        };
        futures_util::stream::unfold(reader, |mut r| async move {
            let next = r.next().await?;
            Some((Ok(next), r))
        })
    }
}

/// Counts a subscribed reader for as long as it lives.
struct Listener(Arc<EventLog>);

impl Drop for Listener {
    fn drop(&mut self) {
        self.0.listeners.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Reader {
    cursor: u64,
    pending: VecDeque<sse::Event>,
    appended: watch::Receiver<u64>,
    closed: watch::Receiver<bool>,
    log: Listener,
}

impl Reader {
    /// The next event to send; `None` once the log is closed.
    async fn next(&mut self) -> Option<sse::Event> {
        // Bounded: each turn either yields or waits for an append or the close.
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if *self.closed.borrow() {
                return None;
            }
            self.appended.borrow_and_update();
            let read = self.log.0.read_after(self.cursor, EVENTS_PER_READ_MAX);
            if read.dropped > 0 {
                self.cursor += read.dropped;
                let note = json!({ "dropped": read.dropped, "next_seq": self.cursor + 1 });
                self.pending.push_back(
                    sse::Event::default()
                        .event("dropped")
                        .data(note.to_string()),
                );
            }
            for e in read.events {
                self.cursor = e.seq;
                self.pending
                    .push_back(sse::Event::default().id(e.seq.to_string()).data(&*e.json));
            }
            if self.pending.is_empty() {
                tokio::select! {
                    r = self.appended.changed() => r.ok()?,
                    _ = self.closed.changed() => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(rule: u64) -> EventKind {
        EventKind::FaultFired {
            rule,
            kind: "request",
            action: "error".into(),
            api_key: Some(3),
        }
    }

    #[test]
    fn the_ring_drops_the_oldest_and_reports_what_a_reader_lost() {
        let log = EventLog::new(1, 3);
        for i in 0..5 {
            log.push(fault(i));
        }
        let r = log.read_after(0, 10);
        assert_eq!(r.dropped, 2);
        assert_eq!(
            r.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [3, 4, 5]
        );
        let r = log.read_after(4, 10);
        assert_eq!((r.dropped, r.events.len()), (0, 1));
        assert!(r.events[0].json.contains("\"type\":\"fault_fired\""));
        // A cursor from an earlier process reads only what comes next.
        assert_eq!(log.start_cursor(Some(99)), 5);
        assert_eq!(log.start_cursor(None), 2);
    }
}
