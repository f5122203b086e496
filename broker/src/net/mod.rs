//! The network layer: the frame codec, streams, broker-to-broker clients and the listeners'
//! connection limits. The connection loop, which hands each frame to `api`, is
//! `crate::connection`, above this module: `net` is used by `api`, `security`, `cluster` and
//! the coordinators, so importing `api` from here would put them all in one import circle.

pub mod client;
pub mod codec;
pub mod connection_quotas;
pub mod http_client;
pub mod memory_pool;
pub mod stream;
