//! The bound on a test's lifetime. libtest has no per-test timeout, and a hung client call
//! (librdkafka's consumer close polls until the group is left, a synchronous commit waits
//! without a deadline) would otherwise hold the whole suite until CI's own limit, with no word
//! on which test hung. Every [`crate::process::BrookProcess`] arms a [`Watchdog`]: a broker
//! still owned by its test after [`TEST_LIFETIME_MAX`] means the test hangs, so the watchdog
//! names the test, prints any panic the test already raised (libtest's captured output is lost
//! when the process exits), SIGKILLs every process the test binary started and exits the test
//! binary with libtest's failure status.

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, Once};
use std::time::Duration;

/// How long one broker may stay owned by its test: several times the slowest test's whole run
/// (the page labs, about 130 s on a 2-core machine under the full suite's load).
pub const TEST_LIFETIME_MAX: Duration = Duration::from_secs(600);

/// Overrides [`TEST_LIFETIME_MAX`], in seconds: for the watchdog's own test.
pub const TEST_LIFETIME_ENV: &str = "BROOK_TEST_LIFETIME_MAX_S";

/// libtest's exit status when a test failed.
const EXIT_STATUS_TEST_FAILED: i32 = 101;

/// Panic messages, with their thread's name, kept for a watchdog that fires later. Bounded:
/// only the first few matter (the rest are the same failure unwinding through other tests).
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
const PANICS_KEPT_MAX: usize = 8;

/// The test a watchdog guards: its thread's name and id, and its broker's name and log.
struct Hung {
    test: String,
    tid: libc::pid_t,
    broker: String,
    log_path: PathBuf,
}

/// Lines of the broker's log and of the hung thread's backtrace printed when a watchdog fires.
const REPORT_LINES_MAX: usize = 40;
/// Bound on gdb's attach and backtrace.
const GDB_SECONDS_MAX: &str = "60";

/// Disarms on drop: the broker's owner let go of it within the bound.
pub struct Watchdog {
    _disarm: mpsc::Sender<()>,
}

impl Watchdog {
    /// Arms a watchdog for the broker `name` logging to `log_path`, owned by the calling
    /// thread's test (libtest names each test's thread after the test).
    pub fn arm(name: &str, log_path: PathBuf) -> Watchdog {
        record_panics();
        let test = std::thread::current()
            .name()
            .unwrap_or("(unnamed thread)")
            .to_string();
        // SAFETY: gettid(2) has no preconditions.
        let tid = unsafe { libc::gettid() };
        let name = name.to_string();
        let lifetime_max = std::env::var(TEST_LIFETIME_ENV)
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(TEST_LIFETIME_MAX, Duration::from_secs);
        let (tx, rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if rx.recv_timeout(lifetime_max) == Err(RecvTimeoutError::Timeout) {
                fire(
                    &Hung {
                        test,
                        tid,
                        broker: name,
                        log_path,
                    },
                    lifetime_max,
                );
            }
        });
        Watchdog { _disarm: tx }
    }
}

/// Chains a panic hook (once per test binary) that keeps each panic's message for [`fire`].
fn record_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current().name().unwrap_or("?").to_string();
            if let Ok(mut kept) = PANICS.lock() {
                if kept.len() < PANICS_KEPT_MAX {
                    kept.push(format!("{thread}: {info}"));
                }
            }
            previous(info);
        }));
    });
}

fn fire(hung: &Hung, lifetime_max: Duration) -> ! {
    let panics = PANICS.lock().map(|p| p.join("\n")).unwrap_or_default();
    let log = std::fs::read_to_string(&hung.log_path).unwrap_or_default();
    // Straight to the file descriptor: libtest captures only the print macros' output.
    let _ = writeln!(
        std::io::stderr(),
        "\nTEST HUNG: `{}` still owns {} after {lifetime_max:?}; killing every process this \
         test binary started and exiting.\n\
         Panics raised before it hung (empty if none):\n{panics}\n\
         Where the test's thread waits:\n{}\n\
         The last lines of {}:\n{}",
        hung.test,
        hung.broker,
        backtrace_of(hung.tid),
        hung.log_path.display(),
        last_lines(&log, REPORT_LINES_MAX),
    );
    crate::process::kill_descendants(std::process::id());
    std::process::exit(EXIT_STATUS_TEST_FAILED);
}

/// The backtrace of this process's thread `tid`, from gdb attached for a moment (bounded by
/// `timeout`), or why there is none.
fn backtrace_of(tid: libc::pid_t) -> String {
    let out = std::process::Command::new("timeout")
        .args([GDB_SECONDS_MAX, "gdb", "-batch", "-nx", "-p"])
        .arg(std::process::id().to_string())
        .args(["-ex", "thread apply all bt"])
        .output();
    let text = match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
        Err(e) => return format!("(no backtrace: gdb did not run: {e})"),
    };
    // gdb heads each thread with `Thread N (Thread 0x... (LWP tid) "name"):`.
    let lwp = format!("(LWP {tid})");
    text.split("\nThread ")
        .find(|block| block.lines().next().is_some_and(|l| l.contains(&lwp)))
        .map_or_else(
            || format!("(no backtrace: gdb showed no thread {tid})"),
            // Innermost frames first: the wait, then the calls that led to it.
            |block| first_lines(block, REPORT_LINES_MAX),
        )
}

fn first_lines(text: &str, n: usize) -> String {
    text.lines().take(n).collect::<Vec<_>>().join("\n")
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
