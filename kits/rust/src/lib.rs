//! Brook in Rust tests, as one dev-dependency.
//!
//! - [`EmbeddedBroker`]: a broker inside the test process (`brook::embedded`), for
//!   `#[tokio::test]`: milliseconds to start, no binary needed;
//! - [`Cluster`]: N `brook serve` processes under one `brook cluster` supervisor on free
//!   loopback ports, for what needs separate processes: killing, restarting and pausing nodes,
//!   leader changes, replication. It drives the supervisor's HTTP API (the one `brook node`
//!   and the live page use) and waits on the JSON state views with [`brook_tools::wait`].
//!
//! ```no_run
//! use std::time::Duration;
//! use brook_testkit::{Cluster, FaultSpec};
//!
//! let cluster = Cluster::builder()
//!     .nodes(3)
//!     .config("min.insync.replicas", "2")
//!     .start()
//!     .expect("cluster");
//! let bootstrap = cluster.bootstrap_servers(); // for rdkafka's bootstrap.servers
//! // ... create "orders" (replication factor 3) and produce ...
//! let leader = cluster.leader("orders", 0, Duration::from_secs(30)).expect("a leader");
//! cluster.kill_node(leader).expect("killed");
//! cluster.start_node(leader).expect("back");
//! cluster.await_isr_size("orders", 0, 3, Duration::from_secs(30)).expect("ISR of 3");
//! let rule = FaultSpec { action: "error".into(), api: Some("produce".into()),
//!     error_code: Some(19), ..Default::default() };
//! cluster.add_fault(leader, &rule).expect("rule added");
//! // Dropping the cluster stops it; it also dies with the test process.
//! ```
//!
//! The binary: `$BROOK_BIN`, else `brook` on PATH ([`find_brook_bin`]).
// Test functions may be long (a scenario reads top to bottom); the rest is held to clippy.toml's 70 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

mod cluster;

pub use brook::embedded::{Builder as EmbeddedBuilder, EmbeddedBroker, EmbeddedError};
pub use brook::fault::{FaultSpec, When};
pub use cluster::{find_brook_bin, Cluster, ClusterBuilder, KitError};
