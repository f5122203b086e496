//! Brook: a small Kafka-wire-compatible broker.
#![forbid(unsafe_code)]

pub mod log;
