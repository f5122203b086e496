//! A broker inside the test process, for `#[tokio::test]`: a stable, thin front of
//! [`Server`] (the same code `brook serve` runs) on a free loopback port, with its log
//! directory in a fresh temporary directory removed at the end.
//!
//! In a test, the body below goes in a `#[tokio::test(flavor = "multi_thread")] async fn`
//! (multi-threaded, so that a client blocking a thread does not stall the broker):
//!
//! ```
//! use brook::embedded::EmbeddedBroker;
//! # #[tokio::main] async fn main() {
//! let broker = EmbeddedBroker::builder()
//!     .config("num.partitions", "3") // any Kafka broker key Brook serves
//!     .start()
//!     .await
//!     .expect("broker");
//! let bootstrap = broker.bootstrap_servers(); // "127.0.0.1:PORT" for any Kafka client
//! assert!(bootstrap.starts_with("127.0.0.1:"));
//! // ... produce and consume with rdkafka, or any Kafka client ...
//! broker.shutdown().await.expect("clean shutdown");
//! # }
//! ```
//!
//! The broker serves until [`EmbeddedBroker::shutdown`] (or the handle is dropped, which asks
//! it to stop without waiting). Fault rules are one call away ([`EmbeddedBroker::faults`]),
//! the JSON state views and the fault API are on [`EmbeddedBroker::admin_address`], and
//! [`EmbeddedBroker::await_high_watermark`] waits on a partition's state. For a cluster of
//! several nodes (kills, restarts, leader changes), each node is its own `brook` process:
//! the `brook-testkit` crate (kits/rust) starts them under `brook cluster`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::config::{BrokerConfig, ConfigError};
use crate::fault::FaultEngine;
use crate::server::{Server, ServerError};

/// Pause between two readings in the waits; it paces the loop, the condition decides.
const POLL_INTERVAL_MS: u64 = 10;

/// Why an embedded broker did not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error("cannot create the log directory {path}: {source}")]
    LogDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the broker stopped before it served")]
    Stopped,
    #[error("the broker task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("{what}: not reached within {waited_ms} ms; last seen: {last_seen}")]
    Timeout {
        what: String,
        waited_ms: u64,
        last_seen: String,
    },
}

/// Settings of an [`EmbeddedBroker`] before it starts.
#[derive(Debug, Default, Clone)]
pub struct Builder {
    overrides: Vec<String>,
    log_dir: Option<PathBuf>,
}

impl Builder {
    /// Sets a broker property by its Kafka name (`server.properties`); a key Kafka does not
    /// declare makes [`Builder::start`] fail naming it.
    pub fn config(mut self, key: &str, value: &str) -> Builder {
        self.overrides.push(format!("{key}={value}"));
        self
    }

    /// Keeps the logs in `dir` (kept afterwards) instead of a temporary directory.
    pub fn log_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.log_dir = Some(dir.into());
        self
    }

    /// Starts the broker and returns once it accepts connections.
    pub async fn start(self) -> Result<EmbeddedBroker, EmbeddedError> {
        let temp = match &self.log_dir {
            Some(_) => None,
            None => Some(TempDir::new()?),
        };
        let dir = self
            .log_dir
            .clone()
            .or_else(|| temp.as_ref().map(|t| t.0.clone()))
            .unwrap_or_default();
        // Defaults first: the caller's settings win.
        let mut overrides = vec![
            "listeners=PLAINTEXT://127.0.0.1:0".to_string(),
            "admin.listener=127.0.0.1:0".to_string(),
            format!("log.dirs={}", dir.display()),
        ];
        overrides.extend(self.overrides);
        let server = Server::start(BrokerConfig::load(None, &overrides)?).await?;
        let broker = server.broker.clone();
        let admin = server.admin_addr;
        let (stop, stop_rx) = watch::channel(false);
        let (serving_tx, serving_rx) = oneshot::channel();
        let task = tokio::spawn(server.run_with(stop_rx, move |addr| {
            let _ = serving_tx.send(addr);
        }));
        let Ok(bootstrap) = serving_rx.await else {
            return Err(match task.await? {
                Err(e) => e.into(),
                Ok(()) => EmbeddedError::Stopped,
            });
        };
        Ok(EmbeddedBroker {
            broker,
            bootstrap,
            admin,
            stop,
            task: Some(task),
            _temp: temp,
        })
    }
}

/// A running broker in this process. Dropping it asks the broker to stop; call
/// [`EmbeddedBroker::shutdown`] to wait until its logs are flushed.
pub struct EmbeddedBroker {
    broker: Arc<Broker>,
    bootstrap: SocketAddr,
    admin: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<Result<(), ServerError>>>,
    _temp: Option<TempDir>,
}

impl EmbeddedBroker {
    /// Settings: Kafka's keys with [`Builder::config`], then [`Builder::start`].
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A broker with the defaults (Kafka's, on a free loopback port).
    pub async fn start() -> Result<EmbeddedBroker, EmbeddedError> {
        Builder::default().start().await
    }

    /// `host:port` for a client's `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        self.bootstrap.to_string()
    }

    /// The admin listener (HTTP): the JSON state views (`/v1/partitions`, `/v1/groups`, ...,
    /// docs/STATE-VIEWS.md), `/metrics` and the fault API; `None` if `admin.listener` was
    /// set empty.
    pub fn admin_address(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// The fault rules of this broker (docs/FAULTS.md): `faults().add(FaultSpec { .. })`.
    pub fn faults(&self) -> &FaultEngine {
        &self.broker.faults
    }

    /// The broker itself, for what this front does not cover. Not a stable interface.
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// Waits until the high watermark of `topic`-`partition` is at least `offset`; returns it.
    pub async fn await_high_watermark(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        timeout: Duration,
    ) -> Result<i64, EmbeddedError> {
        let start = Instant::now();
        loop {
            let hw = self
                .broker
                .replicas
                .partition(topic, partition)
                .map(|p| p.status().high_watermark);
            if let Some(hw) = hw.filter(|hw| *hw >= offset) {
                return Ok(hw);
            }
            if start.elapsed() >= timeout {
                return Err(EmbeddedError::Timeout {
                    what: format!("{topic}-{partition}: a high watermark of at least {offset}"),
                    waited_ms: start.elapsed().as_millis() as u64,
                    last_seen: hw.map_or("no such partition".into(), |hw| hw.to_string()),
                });
            }
            tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
        }
    }

    /// Stops the broker as SIGTERM stops `brook serve` (in-flight requests answered, logs
    /// flushed, the clean-shutdown marker written) and waits for it.
    pub async fn shutdown(mut self) -> Result<(), EmbeddedError> {
        self.stop.send_replace(true);
        match self.task.take() {
            Some(task) => Ok(task.await??),
            None => Ok(()),
        }
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// A fresh directory under the system's temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, EmbeddedError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "brook-embedded-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).map_err(|source| EmbeddedError::LogDir {
            path: path.clone(),
            source,
        })?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(Path::new(&self.0));
    }
}
