//! A test that hangs, for the watchdog's own test (`tests/watchdog.rs`): it starts a broker,
//! prints the broker's pid, lets a thread panic, then waits on a channel nobody sends on, as a
//! client call without a deadline would. Its run ends when the watchdog fires (exit 101) or,
//! if the watchdog failed, after `WAIT_MAX` with status 0, which the test reports.

use std::sync::mpsc;
use std::time::Duration;

use brook_protocol_tests::Broker;

const WAIT_MAX: Duration = Duration::from_secs(120);

fn main() {
    let broker = Broker::start();
    println!("broker pid {}", broker.pid().expect("running"));
    let failing = std::thread::Builder::new()
        .name("the_failing_part".into())
        .spawn(|| panic!("the assertion that failed before the hang"))
        .expect("spawn");
    assert!(failing.join().is_err(), "the thread panicked");
    let (_tx, rx) = mpsc::channel::<()>();
    let _ = rx.recv_timeout(WAIT_MAX);
    drop(broker);
}
