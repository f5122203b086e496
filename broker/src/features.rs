//! Feature flags as the broker serves them. The table of features this node supports and
//! the levels a new cluster starts with belong to the controller
//! ([`brook_controller::features`], re-exported here so that every `crate::features` path
//! names the one table). Whether the broker's applied image enables one is
//! `api::features::enabled`, beside the handlers it gates.

pub use brook_controller::features::*;
