//! Partitions and the ReplicaManager that owns them.

pub mod fetch_session;
pub mod fetch_session_handler;
pub mod log_cleaner;
pub mod partition;
pub mod replica_fetcher;
pub mod replica_manager;
