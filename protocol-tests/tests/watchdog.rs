//! The test watchdog (`brook_protocol_tests::watchdog`): a test that hangs while it owns a
//! broker ends its test binary with libtest's failure status once the bound passes, names
//! itself, repeats the panic it raised before hanging, and leaves no broker running.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use brook_protocol_tests::watchdog::TEST_LIFETIME_ENV;

/// The bound given to the hung test, and how long its whole run may take (a broker start, the
/// bound, the kill).
const LIFETIME_S: u64 = 3;
const RUN_MAX: Duration = Duration::from_secs(60);

#[test]
fn a_hung_test_fails_names_itself_and_kills_its_broker() {
    let t0 = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hung_test"))
        .env(TEST_LIFETIME_ENV, LIFETIME_S.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hung_test");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t0.elapsed() > RUN_MAX {
            let _ = child.kill();
            panic!("the hung test still runs after {RUN_MAX:?}: the watchdog did not fire");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    let stderr = reader.join().expect("stderr reader");
    assert_eq!(status.code(), Some(101), "{stdout}\n{stderr}");
    assert!(
        t0.elapsed() >= Duration::from_secs(LIFETIME_S),
        "fired before its bound"
    );
    let (_, report) = stderr
        .split_once("TEST HUNG: `main` still owns broker")
        .unwrap_or_else(|| panic!("no hang report naming the test: {stderr}"));
    assert!(
        report.contains("the_failing_part: ")
            && report.contains("the assertion that failed before the hang"),
        "the earlier panic is repeated after the report: {report}"
    );
    assert!(
        report.contains("hung_test::main"),
        "the report shows where the hung thread waits: {report}"
    );
    let pid: u32 = stdout
        .trim()
        .strip_prefix("broker pid ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no broker pid: {stdout}"));
    // The broker was the hung test's child: killed, it is reaped by init, not left serving.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        {
            break;
        }
        assert!(Instant::now() < deadline, "broker {pid} still runs: {stat}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
