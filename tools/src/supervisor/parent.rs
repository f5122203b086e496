//! `brook cluster --exit-with-parent`: the cluster lives no longer than the program that
//! started it (a test kit's JVM or Python process), even when that program is killed.
//!
//! Two links, because no single one survives every death:
//! - parent → supervisor: the parent holds the write end of the supervisor's stdin. The
//!   kernel closes it whatever way the parent ends, so end of file on stdin stops the
//!   cluster (children SIGTERMed, as on Ctrl-C). A JVM cannot ask the kernel for a death
//!   signal, but every runtime can hold a pipe.
//! - supervisor → node: each `brook serve` child asks the kernel (Linux `PR_SET_PDEATHSIG`)
//!   for SIGKILL when the supervisor dies, so a SIGKILLed supervisor leaves no node behind.
//!   The child learns it should from [`SUPERVISOR_PID_ENV`], and checks that its parent is
//!   still that pid after asking, which closes the race with a supervisor that died first.

use std::io::Read as _;

/// Set on a `brook serve` child by a supervisor started with `--exit-with-parent`: the
/// supervisor's pid.
pub const SUPERVISOR_PID_ENV: &str = "BROOK_SUPERVISOR_PID";

/// Called first by `brook serve`: with [`SUPERVISOR_PID_ENV`] set, die with the supervisor.
/// Exits at once if the supervisor is already gone.
pub fn die_with_supervisor() {
    let Some(pid) = std::env::var(SUPERVISOR_PID_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL) {
        eprintln!("brook: cannot ask to die with the supervisor: {e}");
    }
    if nix::unistd::getppid().as_raw() != pid {
        eprintln!("brook: the supervisor (pid {pid}) is gone; not starting");
        std::process::exit(1);
    }
}

/// Resolves once stdin reaches end of file (or cannot be read). A plain thread, not
/// tokio's stdin: a runtime waits for its blocking threads at shutdown, and this read only
/// ends when the parent goes.
pub(super) fn stdin_closed() -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("parent-watch".into())
        .spawn(move || {
            let mut buf = [0u8; 512];
            let mut stdin = std::io::stdin().lock();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let _ = tx.send(());
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot watch stdin; the cluster will not stop with its parent");
    }
    rx
}
