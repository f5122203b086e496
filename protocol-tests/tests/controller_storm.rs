//! A node cut off from the metadata quorum by a fault rule (`--traffic controller`, every
//! peer, both directions) for 30 s must not make any node's log grow without bound: the
//! quorum leader's AppendEntries to it are answered 503 by the fault rule, and the cut-off
//! node's own elections and broker heartbeats fail. Issue 39: a 90 s cut once made the
//! leader log 1.59 million `status 503` lines (325 MB), because a 503 was a network error
//! that the Raft library retries at once instead of backing off from an unreachable peer.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use brook_protocol_tests::{poll_until, Cluster};

/// How long the node stays cut off (the scenario, shortened to 30 s to keep CI short;
/// every rate below was measured over 60 s and is steady well before 30 s).
const CUT: Duration = Duration::from_secs(30);

/// How many bytes each node's log may grow by while the node is cut off.
///
/// Measured over the 60 s (debug build, 3 nodes on loopback, a loaded 2-core machine):
/// - before the fix the quorum leader wrote 37 MB (620 KB/s; three openraft lines per
///   AppendEntries answered 503, retried at once) and passes this bound within about 5 s;
///   the release build wrote 3.6 MB/s;
/// - with 503 mapped to unreachable (openraft backs off 500 ms) but no rate limit: 139 KB
///   on the leader (2.3 KB/s), over this bound;
/// - with both: 23 KB on the leader and 9.5 KB on the cut-off node (its failed elections),
///   nothing on the third. The writers left are paced by time (backoff, election timer,
///   limiter window), not by CPU speed, so 4 times that (over the 30 s cut: 48 KB) is a safe
///   margin, and the unlimited variant (69 KB in 30 s) still fails.
const LOG_GROWTH_BYTES_MAX: u64 = 48 << 10;

/// How often the log sizes are sampled: a node over the bound fails the test at once.
const SAMPLE: Duration = Duration::from_secs(1);

#[test]
fn controller_link_cut_does_not_flood_the_logs() {
    let c = Cluster::start(3, &[]);
    let active = c.await_controller(None, Duration::from_secs(30));
    let cut = c.other_than(active);
    let rule = c.cut_link(cut, "*", "controller");
    // The rule acts: the cut-off node refuses the leader's AppendEntries (and its own calls).
    poll_until(
        &format!("the controller link rule on node {cut} fires"),
        Duration::from_secs(30),
        || (c.fault_fired_rule(cut, rule) > 0).then_some(()),
    );

    let start: Vec<(i32, u64)> = c.ids().iter().map(|id| (*id, c.log_bytes(*id))).collect();
    let began = Instant::now();
    let mut growth: Vec<(i32, u64)> = Vec::new();
    while began.elapsed() < CUT {
        std::thread::sleep(SAMPLE);
        growth = start
            .iter()
            .map(|(id, at)| (*id, c.log_bytes(*id).saturating_sub(*at)))
            .collect();
        let worst = growth.iter().map(|(_, g)| *g).max().unwrap_or(0);
        if worst > LOG_GROWTH_BYTES_MAX {
            break;
        }
    }
    let secs = began.elapsed().as_secs_f64();
    for (id, g) in &growth {
        eprintln!(
            "[controller-storm] node {id}{}: log grew {g} bytes in {secs:.1} s ({:.0} bytes/s)",
            if *id == cut {
                " (cut off)"
            } else if *id == active {
                " (active controller)"
            } else {
                ""
            },
            *g as f64 / secs
        );
    }
    for (id, g) in &growth {
        assert!(
            *g <= LOG_GROWTH_BYTES_MAX,
            "node {id}'s log grew {g} bytes in {secs:.1} s with node {cut} cut off from the \
             quorum (bound {LOG_GROWTH_BYTES_MAX})\n{}",
            c.log_tails(30)
        );
    }
    c.fault_remove(cut, rule);
}
