//! The live fuzzer (issue 16): `brook-fuzz` frames over TCP to a running broker from many
//! connections, and after every batch a check that the broker is alive and still round-trips
//! a record (produce, then fetch it back). The API table comes from the broker's own
//! ApiVersions answer, so every API and version it advertises is covered.
//!
//! `cargo run -p brook-protocol-tests --bin fuzz_live -- --bootstrap HOST:PORT --frames N`;
//! `tests/fuzz_live.rs` runs a bounded one against a `brook serve` it starts.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use brook_fuzz::{seeds, ApiRange, FuzzFrame, Generator};
use kafka_protocol::messages::ApiKey;

use crate::batch::{encode_batch, parse_batches, Producer, Rec};
use crate::wire::{WireClient, FETCH_V, PRODUCE_V};

/// What a live run does.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    pub bootstrap: String,
    pub frames: u64,
    pub connections: usize,
    /// Frames between two liveness checks.
    pub batch_frames: u64,
    pub seed: u64,
    /// How long a frame may go unanswered before its connection is dropped (a long poll, an
    /// acks=0 produce, or a frame whose size prefix claims more than was sent).
    pub answer_wait: Duration,
}

impl LiveConfig {
    pub fn new(bootstrap: &str, frames: u64) -> LiveConfig {
        LiveConfig {
            bootstrap: bootstrap.to_string(),
            frames,
            connections: 8,
            batch_frames: 2_000,
            seed: 16,
            answer_wait: Duration::from_millis(500),
        }
    }
}

/// What a live run saw.
#[derive(Debug, Default, Clone)]
pub struct LiveReport {
    pub frames_sent: u64,
    pub answered: u64,
    pub closed: u64,
    /// Frames still unanswered after `answer_wait`.
    pub unanswered: u64,
    pub liveness_checks: u64,
    /// Liveness checks the broker failed (it died or stopped serving).
    pub aborts: u64,
    pub elapsed: Duration,
}

impl LiveReport {
    fn add(&mut self, o: &LiveReport) {
        self.frames_sent += o.frames_sent;
        self.answered += o.answered;
        self.closed += o.closed;
        self.unanswered += o.unanswered;
    }
}

/// The broker's ApiVersions table as the generator's input.
pub fn served_apis(bootstrap: &str) -> Vec<ApiRange> {
    let mut c = WireClient::connect(bootstrap);
    c.api_versions()
        .api_keys
        .iter()
        .filter_map(|k| {
            Some(ApiRange {
                key: ApiKey::try_from(k.api_key).ok()?,
                min: k.min_version,
                max: k.max_version,
            })
        })
        .collect()
}

/// Sends `frames` from one thread, each on a fresh connection: the frame, then its answer, a
/// close, or `answer_wait` of silence.
fn send_all(cfg: &LiveConfig, frames: &[FuzzFrame]) -> LiveReport {
    let mut r = LiveReport::default();
    let mut buf = vec![0u8; 64 * 1024];
    for f in frames {
        // A refused connection is left to the liveness check after the batch.
        let Ok(mut s) = TcpStream::connect(&cfg.bootstrap) else {
            continue;
        };
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(cfg.answer_wait));
        let _ = s.set_write_timeout(Some(cfg.answer_wait));
        r.frames_sent += 1;
        if s.write_all(&f.wire()).is_err() {
            r.closed += 1;
            continue;
        }
        match s.read(&mut buf) {
            Ok(0) => r.closed += 1,
            Ok(_) => r.answered += 1,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                r.unanswered += 1
            }
            Err(_) => r.closed += 1,
        }
    }
    r
}

/// One produce and a fetch of what it wrote, on a fresh connection.
fn round_trip(bootstrap: &str, topic: &str, n: u64) -> Result<(), String> {
    let mut c = WireClient::try_connect(bootstrap, Duration::from_secs(10))
        .map_err(|e| format!("connect: {e}"))?;
    let value = format!("live-check-{n}");
    let req = WireClient::produce_request(
        topic,
        0,
        encode_batch(Producer::NONE, &[Rec::kv("k", &value, 1)]),
        -1,
    );
    let resp = c.try_request(PRODUCE_V, &req)?;
    let p = resp
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .ok_or_else(|| format!("empty produce answer {resp:?}"))?;
    if p.error_code != 0 {
        return Err(format!("produce answered {p:?}"));
    }
    let fetch = WireClient::fetch_request(topic, 0, p.base_offset, 0);
    let resp = c.try_request(FETCH_V, &fetch)?;
    let records = resp
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .and_then(|p| p.records.clone())
        .ok_or_else(|| format!("fetch at {} returned no records", p.base_offset))?;
    let batches = parse_batches(&records)?;
    let got = batches
        .first()
        .and_then(|b| b.records.first())
        .and_then(|r| r.value.clone());
    if got.as_deref() != Some(value.as_bytes()) {
        return Err(format!(
            "fetch at {} returned {got:?}, not {value}",
            p.base_offset
        ));
    }
    Ok(())
}

/// Runs the live fuzzer; `Err` carries the report when a liveness check failed.
pub fn run(cfg: &LiveConfig) -> Result<LiveReport, LiveReport> {
    let started = Instant::now();
    let check_topic = "fuzz-live-check";
    {
        let mut c = WireClient::connect(&cfg.bootstrap);
        c.ensure_topic(seeds::TOPIC);
        c.ensure_topic(check_topic);
    }
    let generator = Generator::new(&served_apis(&cfg.bootstrap));
    let mut frames = generator.stream(cfg.seed);
    let mut report = LiveReport::default();
    while report.frames_sent < cfg.frames {
        let n = cfg.batch_frames.min(cfg.frames - report.frames_sent) as usize;
        let batch: Vec<FuzzFrame> = frames.by_ref().take(n).collect();
        let per = batch.len().div_ceil(cfg.connections).max(1);
        let parts: Vec<LiveReport> = std::thread::scope(|s| {
            let handles: Vec<_> = batch
                .chunks(per)
                .map(|c| s.spawn(|| send_all(cfg, c)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for p in &parts {
            report.add(p);
        }
        report.liveness_checks += 1;
        if let Err(e) = round_trip(&cfg.bootstrap, check_topic, report.liveness_checks) {
            eprintln!(
                "fuzz_live: liveness check {} failed after {} frames: {e}",
                report.liveness_checks, report.frames_sent
            );
            report.aborts += 1;
            report.elapsed = started.elapsed();
            return Err(report);
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}
