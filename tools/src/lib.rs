//! The operator tools: what drives Brook nodes from outside, never what a node runs.
//!
//! - [`supervisor`]: `brook cluster`, N `brook serve` child processes under one supervisor;
//! - [`supervisor_views`]: the supervisor's cluster-wide state views and event stream;
//! - [`dump_log`]: `brook dump-log`, reading segment and index files offline;
//! - [`wait`]: waits on a node's state views, for tests that drive Brook;
//! - [`stdin_watch`]: `--exit-on-stdin-eof`, so a node never outlives the test that started it.
//!
//! The rule this crate enforces (docs/ARCHITECTURE.md, "Crate graph"): it depends on the
//! broker crate and the broker never on it. The tools reach a running node only through its
//! listeners (client, admin HTTP) or its files when it is stopped.
#![forbid(unsafe_code)]
// Test functions may be long (a scenario reads top to bottom); the rest is held to clippy.toml's 70 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod dump_log;
pub mod stdin_watch;
pub mod supervisor;
pub mod supervisor_views;
pub mod wait;

/// Runs a `brook` command (`serve`, `cluster`) to its exit code on a new multi-threaded
/// runtime, with `worker_threads` threads or one per core; a runtime that cannot start is
/// reported and the command fails.
pub fn block_on_command(
    worker_threads: Option<usize>,
    command: impl std::future::Future<Output = std::process::ExitCode>,
) -> std::process::ExitCode {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = worker_threads {
        builder.worker_threads(n);
    }
    match builder.enable_all().build() {
        Ok(runtime) => runtime.block_on(command),
        Err(e) => {
            eprintln!("brook: cannot start runtime: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
