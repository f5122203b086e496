//! The network layer: the listener's connections and the frame codec.

pub mod client;
pub mod codec;
pub mod connection;
pub mod connection_quotas;
pub mod http_client;
pub mod memory_pool;
pub mod stream;
