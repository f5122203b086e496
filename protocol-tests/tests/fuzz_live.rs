//! A bounded live fuzz run (issue 16) against a `brook serve` process: generated hostile
//! frames from many connections, and after every batch the broker must be alive and
//! round-trip a record.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use brook_protocol_tests::fuzz_live::{run, LiveConfig};
use brook_protocol_tests::Broker;

/// Frames of the CI run (about 20 s here).
const LIVE_FRAMES: u64 = 10_000;

#[test]
fn live_fuzz_leaves_the_broker_serving() {
    let mut broker = Broker::start_with(&[("group.initial.rebalance.delay.ms", "0")]);
    let cfg = LiveConfig::new(&broker.bootstrap(), LIVE_FRAMES);
    let result = run(&cfg);
    let running = broker.is_running();
    let report = match result {
        Ok(r) => r,
        Err(r) => panic!(
            "the broker stopped serving ({}): {r:?}\n{}",
            if running {
                "still running"
            } else {
                "process gone"
            },
            broker.log_tail(30)
        ),
    };
    eprintln!("fuzz_live: {report:?}");
    assert!(running, "broker exited: {}", broker.log_tail(30));
    assert_eq!(report.frames_sent, LIVE_FRAMES, "{report:?}");
    assert_eq!(report.aborts, 0, "{report:?}");
}
