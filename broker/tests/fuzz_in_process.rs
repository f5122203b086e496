//! In-process fuzzing of the decode-and-dispatch path (issue 16): structure-aware hostile
//! frames (`brook-fuzz`) for every API and version in `api::SUPPORTED_APIS` go through
//! `net::codec::read_frame` and `api::handle_frame` of an embedded broker, as a connection
//! would send them. Each must end cleanly (an answer, no answer, or a close); a panic fails
//! the run with the frame, and an abort ends the test process.
//!
//! CI runs `FUZZ_FRAMES_DEFAULT` frames. A long run:
//! `BROOK_FUZZ_FRAMES=10000000 cargo test --release -p brook --test fuzz_in_process -- --nocapture`
//! (`BROOK_FUZZ_SEED` picks another reproducible stream).
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brook::api::{handle_frame, Outcome, SUPPORTED_APIS};
use brook::broker::Broker;
use brook::config::BrokerConfig;
use brook::net::codec::read_frame;
use brook::security::Session;
use brook::server::Server;
use brook_fuzz::{seeds, ApiRange, FuzzFrame, Generator};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Frames of a CI run: about a minute under the debug build on a loaded 2-core machine (9 s
/// on an idle one).
const FUZZ_FRAMES_DEFAULT: u64 = 60_000;
const FUZZ_SEED_DEFAULT: u64 = 16;
/// A long run reports its counts every this many frames.
const PROGRESS_FRAMES: usize = 1_000_000;
/// Frames handled at once: a frame that waits (a long-poll fetch, a parked JoinGroup) holds
/// one slot, not the run.
const FRAMES_IN_FLIGHT_MAX: usize = 64;
/// A frame still being handled after this is a legitimate wait; it is dropped and counted.
const FRAME_WAIT_MS_MAX: u64 = 2_000;
/// Peak resident memory of the whole test process (broker, generator, frames in flight) at
/// the end of a run, however long: hostile frames must not make the broker hold memory.
const FUZZ_PEAK_RSS_MIB_MAX: u64 = 1024;

fn env_u64(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{key}={v}: not a number"))
        })
        .unwrap_or(default)
}

async fn start() -> (Arc<Broker>, watch::Sender<bool>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig::load(
        None,
        &[
            "listeners=PLAINTEXT://127.0.0.1:0".to_string(),
            format!("log.dirs={}", dir.path().display()),
            // Metadata frames with flipped names would otherwise create topics by the
            // thousand; CreateTopics still creates.
            "auto.create.topics.enable=false".to_string(),
            "group.initial.rebalance.delay.ms=0".to_string(),
        ],
    )
    .unwrap();
    let server = Server::start(config).await.unwrap();
    let broker = server.broker.clone();
    let (tx, rx) = watch::channel(false);
    tokio::spawn(server.run(rx));
    broker
        .replicas
        .create_topic(seeds::TOPIC, 1, 1, Default::default(), false)
        .await
        .unwrap();
    (broker, tx, dir)
}

/// How one frame ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum End {
    /// `read_frame` refused it (size prefix out of range, or fewer bytes than it claims).
    Framing,
    Answered,
    NoAnswer,
    /// `handle_frame` closed the connection (malformed, unsupported, unknown key...).
    Closed,
    /// Still being handled after `FRAME_WAIT_MS_MAX`.
    Waited,
}

async fn run_frame(broker: Arc<Broker>, frame: FuzzFrame) -> End {
    let wire = frame.wire();
    let handled = tokio::time::timeout(Duration::from_millis(FRAME_WAIT_MS_MAX), async {
        let max = broker.config.socket_request_max_bytes;
        let Ok(f) = read_frame(&mut &wire[..], max, &broker.request_memory).await else {
            return End::Framing;
        };
        let session = Arc::new(Session::plaintext(Some(std::net::IpAddr::from([
            127, 0, 0, 1,
        ]))));
        match handle_frame(&broker, f.bytes, &session).await {
            Ok((_, Outcome::Respond(_) | Outcome::RespondChunks(_))) => End::Answered,
            Ok((_, Outcome::NoResponse)) => End::NoAnswer,
            Ok((_, Outcome::Close(_))) | Err(_) => End::Closed,
        }
    })
    .await;
    handled.unwrap_or(End::Waited)
}

/// This process's peak resident memory, from /proc/self/status.
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_frames_end_in_an_answer_or_a_close_never_a_panic() {
    let frames = env_u64("BROOK_FUZZ_FRAMES", FUZZ_FRAMES_DEFAULT);
    let seed = env_u64("BROOK_FUZZ_SEED", FUZZ_SEED_DEFAULT);
    let (broker, stop, _dir) = start().await;
    let table: Vec<ApiRange> = SUPPORTED_APIS
        .iter()
        .map(|a| ApiRange {
            key: a.key,
            min: a.min,
            max: a.max,
        })
        .collect();
    let generator = Generator::new(&table);
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    let mut in_flight: HashMap<tokio::task::Id, FuzzFrame> = HashMap::new();
    let mut ends: HashMap<End, u64> = HashMap::new();
    let mut panics: Vec<String> = Vec::new();
    let mut reap = |joined: Option<Result<(tokio::task::Id, End), tokio::task::JoinError>>,
                    in_flight: &mut HashMap<tokio::task::Id, FuzzFrame>| {
        match joined.expect("a task is in flight") {
            Ok((id, end)) => {
                in_flight.remove(&id);
                *ends.entry(end).or_default() += 1;
            }
            Err(e) => {
                let frame = in_flight.remove(&e.id());
                panics.push(format!(
                    "{e}: {} {:02x?}",
                    frame.as_ref().map_or("", |f| f.what.as_str()),
                    frame.as_ref().map(|f| f.wire())
                ));
            }
        }
    };
    for (n, frame) in generator.stream(seed).take(frames as usize).enumerate() {
        while tasks.len() >= FRAMES_IN_FLIGHT_MAX {
            reap(tasks.join_next_with_id().await, &mut in_flight);
        }
        if n > 0 && n % PROGRESS_FRAMES == 0 {
            eprintln!(
                "fuzz_in_process: {n} frames after {:.0} s, peak RSS {} MiB",
                started.elapsed().as_secs_f64(),
                peak_rss_mib()
            );
        }
        let handle = tasks.spawn(run_frame(broker.clone(), frame.clone()));
        in_flight.insert(handle.id(), frame);
    }
    while !tasks.is_empty() {
        reap(tasks.join_next_with_id().await, &mut in_flight);
    }
    let elapsed = started.elapsed();
    eprintln!(
        "fuzz_in_process: {frames} frames (seed {seed}, {} seed frames) in {:.1} s ({:.0} frames/s): \
         {ends:?}, {} panics, peak RSS {} MiB, {} partitions at the end",
        generator.template_count(),
        elapsed.as_secs_f64(),
        frames as f64 / elapsed.as_secs_f64(),
        panics.len(),
        peak_rss_mib(),
        broker.replicas.all_partitions().len()
    );
    assert!(
        panics.is_empty(),
        "frames that panicked the broker:\n{}",
        panics.join("\n")
    );
    assert!(
        peak_rss_mib() <= FUZZ_PEAK_RSS_MIB_MAX,
        "peak RSS {} MiB",
        peak_rss_mib()
    );
    let _ = stop.send(true);
}
