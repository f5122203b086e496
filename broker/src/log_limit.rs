//! Rate limits for log lines that a fault can make repeat on every request.
//!
//! A link cut by a fault rule, a peer that answers 503 or a client in a reconnect loop turns a
//! warning written per call into thousands of lines a second (issue 39: 1.59 million lines,
//! 325 MB in 90 s). A [`RepeatLimiter`] lets the first [`LINES_PER_WINDOW_MAX`] lines of a key
//! through per [`WINDOW`] and counts the rest; the next line written for that key carries the
//! count ("… (N similar suppressed in the last 10 s)"), so nothing is lost silently.
//!
//! Two users:
//! - Brook's own call sites that repeat per request hold a `static` limiter each and key it by
//!   the peer (node, address, partition): `if let Some(note) = LIMIT.admit(key) { warn!(…"{note}") }`;
//! - [`LimitedFormat`], the log formatter of `brook serve`, applies [`LIBRARY_WARNINGS`] to
//!   the warnings and errors of libraries (openraft logs every failed replication call at
//!   WARN and ERROR), keyed by call site, since their call sites cannot be changed.
//!
//! Bounded and without a global lock: a limiter is a fixed array of slots, each behind its
//! own mutex; a key probes [`PROBES`] slots from its hash, and keys that find none free share
//! one overflow slot (limited together rather than not at all).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The window over which lines of one key are counted.
pub const WINDOW: Duration = Duration::from_secs(10);

/// Lines of one key written per [`WINDOW`]; more than one, so that a short burst (one line
/// per peer, say) is seen whole.
pub const LINES_PER_WINDOW_MAX: u32 = 3;

/// Keys one limiter tracks at once (besides the shared overflow slot).
const SLOTS: usize = 32;

/// Slots a key tries, from the one its hash names, before it falls back to the overflow slot.
const PROBES: usize = 4;

/// The limiter [`LimitedFormat`] applies to library warnings, keyed by call site.
pub static LIBRARY_WARNINGS: RepeatLimiter = RepeatLimiter::new();

/// The state of one key.
#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    /// When the current window began; `None` for a slot never used.
    window_start: Option<Instant>,
    /// Lines written in the current window.
    written: u32,
    /// Lines suppressed since the current window began.
    suppressed: u64,
}

impl Slot {
    const EMPTY: Slot = Slot {
        key: 0,
        window_start: None,
        written: 0,
        suppressed: 0,
    };

    /// Whether another key may take the slot: never used, or its window is over with no count
    /// left to report. A count left behind by a key that never logs again is reported by
    /// nobody; after a second window the slot is taken anyway, so slots cannot run out.
    fn is_free(&self, now: Instant) -> bool {
        match self.window_start {
            None => true,
            Some(start) => {
                let idle = now.saturating_duration_since(start);
                (idle >= WINDOW && self.suppressed == 0) || idle >= 2 * WINDOW
            }
        }
    }
}

/// Decides, per key, which repeated lines are written; see the module documentation.
pub struct RepeatLimiter {
    /// [`SLOTS`] slots, then the overflow slot.
    slots: [Mutex<Slot>; SLOTS + 1],
}

impl Default for RepeatLimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl RepeatLimiter {
    pub const fn new() -> RepeatLimiter {
        RepeatLimiter {
            slots: [const { Mutex::new(Slot::EMPTY) }; SLOTS + 1],
        }
    }

    /// Whether a line of `key` is written now: `Some(note)` to write it with `note` appended,
    /// `None` to drop it (it is counted).
    pub fn admit(&self, key: u64) -> Option<Suppressed> {
        self.admit_at(key, Instant::now())
    }

    /// [`RepeatLimiter::admit`] at time `now`.
    pub fn admit_at(&self, key: u64, now: Instant) -> Option<Suppressed> {
        let mut slot = self.slot(key, now);
        match slot.window_start {
            Some(start) if now.saturating_duration_since(start) < WINDOW => {
                if slot.written < LINES_PER_WINDOW_MAX {
                    slot.written += 1;
                    Some(Suppressed::NONE)
                } else {
                    slot.suppressed += 1;
                    None
                }
            }
            // A new window: this line goes out with what the last one held back.
            start => {
                let note = Suppressed {
                    count: slot.suppressed,
                    over: start.map_or(Duration::ZERO, |s| now.saturating_duration_since(s)),
                };
                slot.window_start = Some(now);
                slot.written = 1;
                slot.suppressed = 0;
                Some(note)
            }
        }
    }

    /// The slot holding `key`, else a free one of its probes (claimed for `key`), else the
    /// overflow slot (whose keys count as one).
    fn slot(&self, key: u64, now: Instant) -> parking_lot::MutexGuard<'_, Slot> {
        // Fibonacci hashing spreads keys that differ only in low bits (addresses, node ids).
        let first = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % SLOTS;
        let probes = || (0..PROBES).map(|i| &self.slots[(first + i) % SLOTS]);
        for s in probes() {
            let guard = s.lock();
            if guard.key == key && guard.window_start.is_some() {
                return guard;
            }
        }
        for s in probes() {
            let mut guard = s.lock();
            if guard.is_free(now) {
                *guard = Slot { key, ..Slot::EMPTY };
                return guard;
            }
        }
        self.slots[SLOTS].lock()
    }
}

/// A limiter key for anything hashable (a node id, an address, a call site and a peer).
pub fn key_of(parts: impl Hash) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// How many lines of a key were dropped before the one being written, over how long.
/// Displays as nothing when none were, else as " (N similar suppressed in the last S s)".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Suppressed {
    pub count: u64,
    pub over: Duration,
}

impl Suppressed {
    pub const NONE: Suppressed = Suppressed {
        count: 0,
        over: Duration::ZERO,
    };
}

impl fmt::Display for Suppressed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count == 0 {
            return Ok(());
        }
        let secs = self.over.as_secs() + u64::from(self.over.subsec_nanos() > 0);
        write!(
            f,
            " ({} similar suppressed in the last {secs} s)",
            self.count
        )
    }
}

/// An event formatter that writes library warnings and errors through [`LIBRARY_WARNINGS`]
/// (keyed by call site) and everything else as `inner` does. A suppressed event is formatted
/// as nothing, so the writer gets no bytes for it.
pub struct LimitedFormat<F> {
    pub inner: F,
}

impl<S, N, F> FormatEvent<S, N> for LimitedFormat<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        if *meta.level() > Level::WARN || meta.target().starts_with("brook") {
            return self.inner.format_event(ctx, writer, event);
        }
        // A call site's metadata is a static: its address names the call site.
        let key = std::ptr::from_ref(meta) as usize as u64;
        let Some(note) = LIBRARY_WARNINGS.admit(key) else {
            return Ok(());
        };
        if note.count == 0 {
            return self.inner.format_event(ctx, writer, event);
        }
        // The note goes before the line's newline. (This one line is formatted without
        // colours: a `Writer` of our own cannot turn them on.)
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        let line = line.strip_suffix('\n').unwrap_or(&line);
        writeln!(writer, "{line}{note}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(limiter: &RepeatLimiter, key: u64, at: Instant, n: usize) -> Vec<Option<Suppressed>> {
        (0..n).map(|_| limiter.admit_at(key, at)).collect()
    }

    #[test]
    fn a_key_writes_its_burst_per_window_then_reports_what_it_dropped() {
        let l = RepeatLimiter::new();
        let t0 = Instant::now();
        let first = run(&l, 7, t0, 1000);
        let written = LINES_PER_WINDOW_MAX as usize;
        assert!(first[..written]
            .iter()
            .all(|a| *a == Some(Suppressed::NONE)));
        assert!(first[written..].iter().all(Option::is_none));
        // Still inside the window: dropped.
        assert_eq!(l.admit_at(7, t0 + WINDOW - Duration::from_millis(1)), None);
        let next = l.admit_at(7, t0 + WINDOW).expect("a new window writes");
        assert_eq!(next.count, 1000 - written as u64 + 1);
        assert_eq!(
            next.to_string(),
            format!(" ({} similar suppressed in the last 10 s)", next.count)
        );
        // The count was reported once.
        assert_eq!(l.admit_at(7, t0 + WINDOW), Some(Suppressed::NONE));
    }

    #[test]
    fn keys_are_limited_apart() {
        let l = RepeatLimiter::new();
        let t0 = Instant::now();
        run(&l, 1, t0, 100);
        assert_eq!(l.admit_at(2, t0), Some(Suppressed::NONE));
    }

    #[test]
    fn more_keys_than_slots_share_the_overflow_slot_and_stay_bounded() {
        let l = RepeatLimiter::new();
        let t0 = Instant::now();
        let keys = 10 * SLOTS as u64;
        let written: usize = (0..keys)
            .map(|k| run(&l, key_of(k), t0, 50).iter().flatten().count())
            .sum();
        // Each slot writes the burst of the key that claimed it, the overflow slot one burst
        // for all the keys that found no slot.
        let burst = LINES_PER_WINDOW_MAX as usize;
        assert!(written <= (SLOTS + 1) * burst, "{written}");
        assert!(written > SLOTS / 2 * burst, "{written}");
        // After two windows every slot is free again for a new key.
        assert_eq!(
            l.admit_at(key_of(-1), t0 + 2 * WINDOW),
            Some(Suppressed::NONE)
        );
    }

    /// A `MakeWriter` into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(std::sync::Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_formatter_limits_library_warnings_and_nothing_else() {
        let out = Buffer::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .event_format(LimitedFormat {
                inner: tracing_subscriber::fmt::format::Format::default(),
            })
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            for i in 0..100 {
                tracing::warn!(target: "openraft::replication", i, "error replication");
                tracing::info!(target: "openraft::replication", i, "library info");
                tracing::warn!(i, "brook warning");
            }
        });
        let text = String::from_utf8(out.0.lock().clone()).unwrap();
        let count = |needle: &str| text.lines().filter(|l| l.contains(needle)).count();
        assert_eq!(count("error replication"), LINES_PER_WINDOW_MAX as usize);
        assert_eq!(count("library info"), 100);
        assert_eq!(count("brook warning"), 100);
    }

    #[test]
    fn nothing_suppressed_displays_as_nothing() {
        assert_eq!(Suppressed::NONE.to_string(), "");
        let s = Suppressed {
            count: 3,
            over: Duration::from_millis(12_300),
        };
        assert_eq!(s.to_string(), " (3 similar suppressed in the last 13 s)");
    }
}
