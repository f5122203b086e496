//! Brook: a small Kafka-wire-compatible broker.
//!
//! See `docs/ARCHITECTURE.md` for the map. In request order:
//! [`net`] (frames) → [`api`] (one module per API family) → [`cluster`] (ReplicaManager,
//! Partition) → the storage engine, its own crate [`brook_storage`] (UnifiedLog, LogSegment,
//! indexes, ProducerStateManager), the only way to the partitions' files.
#![forbid(unsafe_code)]
// Test functions may be long (a scenario reads top to bottom); the rest is held to clippy.toml's 70 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod admin;
pub mod admin_security;
pub mod api;
pub mod auto_topic_creation;
pub mod broker;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod config_def;
pub mod connection;
pub mod controller;
pub mod embedded;
pub mod errors;
pub mod events;
pub mod fault;
pub mod features;
pub mod group;
pub mod listeners;
pub mod live_page;
pub mod log_limit;
pub mod metadata;
pub mod metrics;
pub mod net;
pub mod quota;
pub mod security;
pub mod server;
pub mod share;
pub mod state_views;
pub mod telemetry;
pub mod txn;
