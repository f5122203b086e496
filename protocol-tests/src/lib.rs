//! Helpers for the real-client tests.
//!
//! This crate never links the broker: it starts a `brook` process (see [`broker::Broker`]), or
//! a cluster of them ([`cluster::Cluster`]), and talks to it either through librdkafka (the
//! `rdkafka` crate, see [`rd`]) or through a tiny raw-wire client ([`wire::WireClient`]) for
//! tests that must control the bytes.
// Test functions may be long (a scenario reads top to bottom); the rest is held to clippy.toml's 70 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod batch;
pub mod broker;
pub mod cluster;
pub mod fuzz_live;
pub mod process;
pub mod rd;
pub mod sasl;
pub mod share;
pub mod supervised;
pub mod version_matrix;
pub mod watchdog;
pub mod wire;

pub use broker::Broker;
pub use cluster::Cluster;
pub use wire::WireClient;

/// Kafka error codes used by the tests.
pub mod errors {
    pub const NONE: i16 = 0;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const CORRUPT_MESSAGE: i16 = 2;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
}

/// Polls `f` until it returns `Some`, or panics with `what` after `timeout`.
/// The pause between polls is short and only paces the loop; it is never the synchronisation.
pub fn poll_until<T>(
    what: &str,
    timeout: std::time::Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    poll_until_ok(what, timeout, || f().ok_or_else(String::new))
}

/// Polls `f` until it returns `Ok`, or panics with `what` and the description of the state
/// that the last `Err` carried after `timeout`.
pub fn poll_until_ok<T>(
    what: &str,
    timeout: std::time::Duration,
    mut f: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let state = match f() {
            Ok(v) => return v,
            Err(state) => state,
        };
        if std::time::Instant::now() >= deadline {
            let state = if state.is_empty() {
                state
            } else {
                format!("\nlast state: {state}")
            };
            panic!("timed out after {timeout:?} waiting for: {what}{state}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The `__consumer_offsets` partition of `group`: Kafka's `Utils.abs(group.hashCode()) %
/// partitions`, with Java's String.hashCode over UTF-16.
pub fn offsets_partition_of(group: &str, partitions: i32) -> i32 {
    let h = group
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions
}

/// A topic name unique within the process (tests of one binary share nothing but this counter).
pub fn unique_topic(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
