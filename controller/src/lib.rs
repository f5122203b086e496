//! The controller's decisions (Kafka's `org.apache.kafka.controller` managers and
//! `org.apache.kafka.image`): the committed [`image::MetadataImage`] and the records that
//! change it, the writes the active controller decides ([`request::ControllerRequest`],
//! [`request::decide`]), and the control managers each request goes to.
//!
//! The rule this crate exists for: nothing here touches the network, the disk or a clock, and
//! nothing here runs a task. Its dependencies are the enforcement: there is no tokio, no
//! socket, no file and no clock to import (`scripts/check_architecture.py` also fails on
//! `std::fs`, `std::net`, `Instant` and `SystemTime` in this crate's source). A decision that
//! needs a time takes it as an argument; the broker's `controller` module runs the quorum
//! (openraft), the controller channel and the metadata files, reads the clock, and re-exports
//! these modules, so that `brook::controller::image` and the like name the one definition.
// Test functions may be long (a scenario reads top to bottom); the rest is held to clippy.toml's 70 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod acl;
pub mod acl_control;
pub mod client_quota_control;
pub mod cluster_control;
pub mod configuration_control;
pub mod error;
pub mod feature_control;
pub mod features;
#[cfg(test)]
mod fixtures;
pub mod image;
pub mod names;
mod partition_change;
pub mod producer_id_control;
pub mod replication_control;
pub mod request;
pub mod scram;
pub mod scram_control;
pub mod voter_set;
