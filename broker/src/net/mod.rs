//! The network layer: the listener's connections and the frame codec.

pub mod codec;
pub mod connection;
pub mod memory_pool;
