//! The wall clock in milliseconds since the epoch, as record timestamps, quota samples and
//! share-group locks read it. It imports nothing of the crate, so every module can use it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
