//! Frames built to take a broker down (issue 16), against a real `brook serve` process: the
//! broker answers or closes the connection, and keeps serving.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use std::collections::BTreeSet;

use brook_fuzz::Generator;
use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::fuzz_live::served_apis;
use brook_protocol_tests::process::proc_status_bytes;
use brook_protocol_tests::{unique_topic, Broker, WireClient};

const CLOSE_WITHIN: Duration = Duration::from_secs(10);

/// The broker answers ApiVersions on a fresh connection and round-trips a record.
fn assert_serves(broker: &Broker, after: &str) {
    let mut c = WireClient::connect(&broker.bootstrap());
    assert_eq!(
        c.api_versions().error_code,
        NONE,
        "after {after}: ApiVersions"
    );
    let topic = unique_topic("hostile");
    c.ensure_topic(&topic);
    let r = c.produce(
        &topic,
        0,
        encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1)]),
    );
    assert_eq!(r.error_code, NONE, "after {after}: produce {r:?}");
    let got: Vec<_> = c
        .fetch_all(&topic, 0)
        .into_iter()
        .flat_map(|b| b.records)
        .collect();
    assert_eq!(got.len(), 1, "after {after}: fetch {got:?}");
}

/// Issue 16's 27 bytes: size 23, ListOffsets v7 (header v2, client id "ab"), replica id -1,
/// isolation level 0, and a compact `topics` array claiming 0xFFFFFFFE entries.
const ISSUE_16_FRAME: [u8; 27] = [
    0x00, 0x00, 0x00, 0x17, 0x00, 0x02, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, b'a', b'b',
    0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0xff, 0xff, 0xff, 0xff, 0x0f,
];

#[test]
fn issue_16_list_offsets_frame_closes_the_connection_and_the_broker_keeps_serving() {
    let mut broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    c.write_raw(&ISSUE_16_FRAME).unwrap();
    c.expect_closed(CLOSE_WITHIN)
        .unwrap_or_else(|e| panic!("ListOffsets v7 claiming 0xFFFFFFFE topics: {e}"));
    assert!(
        broker.is_running(),
        "the broker died: {}",
        broker.log_tail(20)
    );
    assert_serves(&broker, "the issue 16 frame");
}

/// Issue 16's frame generalised: for every API and version the broker advertises, each
/// length or count field (of the header and of a default and a populated body) that the codec
/// can no longer decode once set to its type's maximum. Each must close its connection.
#[test]
fn a_huge_count_in_any_served_api_and_version_closes_the_connection() {
    let mut broker = Broker::start();
    let table = served_apis(&broker.bootstrap());
    let family = Generator::new(&table).huge_count_family();
    let covered: BTreeSet<(i16, i16)> = family
        .iter()
        .map(|f| {
            let p = &f.payload;
            (
                i16::from_be_bytes([p[0], p[1]]),
                i16::from_be_bytes([p[2], p[3]]),
            )
        })
        .collect();
    for a in &table {
        for v in a.min..=a.max {
            assert!(
                covered.contains(&(a.key as i16, v)),
                "no huge-count frame for {:?} v{v}",
                a.key
            );
        }
    }
    eprintln!(
        "{} huge-count frames over {} APIs and versions",
        family.len(),
        covered.len()
    );
    let mut previous = "none";
    for f in &family {
        let sent = WireClient::try_connect(&broker.bootstrap(), CLOSE_WITHIN)
            .and_then(|mut c| c.write_raw(&f.wire()).map(|_| c))
            .map_err(|e| e.to_string());
        if let Err(e) = sent.and_then(|mut c| c.expect_closed(CLOSE_WITHIN)) {
            let state = if broker.is_running() {
                "running"
            } else {
                "gone"
            };
            panic!(
                "{}: {e} (broker {state}; the frame before: {previous})\n{}",
                f.what,
                broker.log_tail(10)
            );
        }
        previous = &f.what;
    }
    assert!(
        broker.is_running(),
        "the broker died: {}",
        broker.log_tail(20)
    );
    assert_serves(&broker, "every huge-count frame");
}

/// Kafka's default socket.request.max.bytes, and the pool size the test configures.
const FRAME_MAX_BYTES: usize = 104_857_600;
/// Bytes of its 100 MiB frame each connection sends before stalling.
const PARTIAL_FRAME_BYTES: usize = 96 << 20;
const CONNECTIONS: usize = 10;
/// Slack over the idle broker's RSS besides the pool: allocator rounding while one frame's
/// buffer grows, and the per-connection read buffers.
const RSS_MARGIN_BYTES: u64 = 64 << 20;

/// Writes a 100 MiB prefix and up to `PARTIAL_FRAME_BYTES` of body; a connection the broker
/// does not read stops at the write timeout. Returns the stream (kept open) and bytes sent.
fn send_partial_frame(addr: &str) -> (TcpStream, usize) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(&(FRAME_MAX_BYTES as i32).to_be_bytes())
        .unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    let mut sent = 0;
    while sent < PARTIAL_FRAME_BYTES {
        match s.write(&chunk) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    (s, sent)
}

#[test]
fn ten_partial_100_mib_frames_stay_within_queued_max_request_bytes() {
    let pool = FRAME_MAX_BYTES.to_string();
    let broker = Broker::start_with(&[("queued.max.request.bytes", &pool)]);
    assert_serves(&broker, "start-up");
    let pid = broker.pid().unwrap();
    let baseline = proc_status_bytes(pid, "VmRSS:");

    let addr = broker.bootstrap();
    let senders: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || send_partial_frame(&addr))
        })
        .collect();
    let streams: Vec<(TcpStream, usize)> = senders.into_iter().map(|t| t.join().unwrap()).collect();
    let sent: usize = streams.iter().map(|(_, n)| n).sum();
    // Whatever the broker read is in its memory now; the peak (VmHWM) only grows, so reading it
    // after the connections close and a produce is served covers the whole episode.
    drop(streams);
    assert_serves(&broker, "ten partial 100 MiB frames, closed");
    let peak = proc_status_bytes(pid, "VmHWM:");
    let bound = baseline + FRAME_MAX_BYTES as u64 + RSS_MARGIN_BYTES;
    eprintln!(
        "idle RSS {} MiB, peak RSS {} MiB, bound {} MiB, clients sent {} MiB",
        baseline >> 20,
        peak >> 20,
        bound >> 20,
        sent >> 20
    );
    assert!(
        peak <= bound,
        "broker peak RSS {} MiB over the bound {} MiB (idle {} MiB + queued.max.request.bytes \
         {} MiB + margin {} MiB); the clients sent {} MiB",
        peak >> 20,
        bound >> 20,
        baseline >> 20,
        FRAME_MAX_BYTES >> 20,
        RSS_MARGIN_BYTES >> 20,
        sent >> 20
    );
}
