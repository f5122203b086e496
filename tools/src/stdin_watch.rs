//! `--exit-on-stdin-eof` of `brook serve` and `brook cluster`: the process stops (as on
//! SIGTERM) once its standard input reaches end of file. A test kit starts `brook` with a
//! pipe on its stdin and never writes to it; the kernel closes the pipe's write end when the
//! test process exits for any reason, SIGKILL included, so the broker never outlives the test
//! that started it. This works the same from every language (a JVM, Python, Go) where
//! Linux's `PR_SET_PDEATHSIG` would not: that fires when the forking *thread* exits, and Go
//! and the JVM fork from threads that come and go.
//!
//! `brook cluster --exit-on-stdin-eof` passes the same watch on to its nodes through a pipe
//! of its own, so a supervisor killed with SIGKILL takes its nodes with it.

use std::io::Read as _;

/// Bytes read from stdin at a time; what is read is discarded.
const STDIN_READ_BYTES: usize = 512;

/// Resolves once stdin is at end of file (or cannot be read). The reading happens on a
/// plain thread, not a runtime's blocking pool: a blocking read still in progress would
/// keep the runtime from shutting down, while a detached thread ends with the process.
pub fn stdin_eof() -> impl std::future::Future<Output = ()> {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("stdin-watch".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; STDIN_READ_BYTES];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            drop(tx);
        });
    let watching = match spawned {
        Ok(_) => true,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch stdin; --exit-on-stdin-eof is not in force");
            false
        }
    };
    async move {
        if watching {
            let _ = rx.await;
        } else {
            std::future::pending::<()>().await;
        }
    }
}

/// Resolves on SIGTERM or Ctrl-C, or, when `watch_stdin`, at stdin's end of file: the
/// shutdown trigger of `brook serve` and `brook cluster`.
pub async fn shutdown_trigger(watch_stdin: bool) {
    if watch_stdin {
        let eof = stdin_eof();
        tokio::select! {
            _ = brook::server::wait_for_shutdown_signal() => {}
            _ = eof => tracing::info!("stdin closed; stopping"),
        }
    } else {
        brook::server::wait_for_shutdown_signal().await;
    }
}
