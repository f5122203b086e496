//! Waiting for a node's internals from a test that drives Brook: "until the ISR is back to
//! three", "until the high watermark reaches 100", "until the group is stable at generation
//! 2". Each wait reads the node's JSON state views (docs/STATE-VIEWS.md) on its admin listener
//! until the condition holds or the deadline passes, so it works the same for a node in this
//! process, a `brook serve` child or a `brook cluster` node. Other languages read the same
//! views.
//!
//! ```no_run
//! use std::time::Duration;
//! let views = brook_tools::wait::Views::new("127.0.0.1:9644");
//! let p = views.wait_for_isr_size("orders", 0, 3, Duration::from_secs(30))?;
//! assert_eq!(p["isr"].as_array().map(Vec::len), Some(3));
//! # Ok::<(), brook_tools::wait::WaitError>(())
//! ```
//!
//! A view that cannot be read yet (the node restarting, a topic not created yet: 404) counts
//! as "not yet", and the last answer seen is in the timeout error.

use std::time::{Duration, Instant};

use serde_json::Value;

/// Bound on one GET of a view.
pub const VIEW_CALL_TIMEOUT_MS: u64 = 5_000;
/// Pause between two readings of a view. It only paces the loop; the condition decides.
pub const POLL_INTERVAL_MS: u64 = 20;
/// Bound on a view answer's size, in bytes.
pub const VIEW_ANSWER_BYTES_MAX: u64 = 16 << 20;
/// How much of the last answer a timeout error repeats, in characters.
const LAST_SEEN_CHARS_MAX: usize = 2_000;

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The view could not be read: no connection, a non-200 status, not JSON.
    #[error("GET {path} on {admin}: {message}")]
    View {
        admin: String,
        path: String,
        message: String,
    },
    /// The condition did not hold before the deadline.
    #[error("{what}: not reached within {waited_ms} ms; last seen: {last_seen}")]
    Timeout {
        what: String,
        waited_ms: u64,
        last_seen: String,
    },
}

/// One node's state views, at its admin listener's address (`host:port`).
pub struct Views {
    admin: String,
    agent: ureq::Agent,
    /// The `Authorization` value for an admin listener with credentials.
    authorization: Option<String>,
}

impl Views {
    pub fn new(admin: impl Into<String>) -> Views {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_millis(VIEW_CALL_TIMEOUT_MS)))
            .build()
            .into();
        Views {
            admin: admin.into(),
            agent,
            authorization: None,
        }
    }

    /// The same views, asked with HTTP Basic credentials (`admin.basic.auth.credentials.file`).
    pub fn with_credentials(mut self, user: &str, password: &str) -> Views {
        self.authorization = Some(brook::admin_security::basic_header(user, password));
        self
    }

    /// `GET path` (with its query): the JSON answer of a 200.
    pub fn get(&self, path: &str) -> Result<Value, WaitError> {
        let err = |message: String| WaitError::View {
            admin: self.admin.clone(),
            path: path.to_string(),
            message,
        };
        let url = format!("http://{}{path}", self.admin);
        let request = self.agent.get(&url);
        let request = match &self.authorization {
            Some(a) => request.header("Authorization", a),
            None => request,
        };
        let resp = request.call().map_err(|e| err(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .with_config()
            .limit(VIEW_ANSWER_BYTES_MAX)
            .read_to_string()
            .map_err(|e| err(e.to_string()))?;
        if status != 200 {
            return Err(err(format!("status {status}: {body}")));
        }
        serde_json::from_str(&body).map_err(|e| err(format!("not JSON ({e}): {body}")))
    }

    /// One partition's entry of `GET /v1/partitions?topic=T` on this node.
    pub fn partition(&self, topic: &str, partition: i32) -> Result<Value, WaitError> {
        let path = format!("/v1/partitions?topic={}", query_value(topic));
        let answer = self.get(&path)?;
        answer["partitions"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["partition"] == partition))
            .cloned()
            .ok_or_else(|| WaitError::View {
                admin: self.admin.clone(),
                path,
                message: format!("partition {partition} is not hosted here: {answer}"),
            })
    }

    /// Reads with `read` until `accept` takes the value, or `timeout` passes.
    pub fn wait_until<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut read: impl FnMut(&Views) -> Result<Value, WaitError>,
        mut accept: impl FnMut(&Value) -> Option<T>,
    ) -> Result<T, WaitError> {
        let start = Instant::now();
        loop {
            let mut last_seen = match read(self) {
                Ok(v) => match accept(&v) {
                    Some(t) => return Ok(t),
                    None => v.to_string(),
                },
                Err(e) => e.to_string(),
            };
            if start.elapsed() >= timeout {
                last_seen.truncate(floor_char_boundary(&last_seen, LAST_SEEN_CHARS_MAX));
                return Err(WaitError::Timeout {
                    what: what.to_string(),
                    waited_ms: start.elapsed().as_millis() as u64,
                    last_seen,
                });
            }
            std::thread::sleep(Duration::from_millis(POLL_INTERVAL_MS));
        }
    }

    /// Waits until this node's ISR of the partition (as committed and applied here) has
    /// `size` members; returns the partition entry.
    pub fn wait_for_isr_size(
        &self,
        topic: &str,
        partition: i32,
        size: usize,
        timeout: Duration,
    ) -> Result<Value, WaitError> {
        self.wait_until(
            &format!("{topic}-{partition}: an ISR of {size}"),
            timeout,
            |v| v.partition(topic, partition),
            |p| (p["isr"].as_array().map(Vec::len) == Some(size)).then(|| p.clone()),
        )
    }

    /// Waits until this node's high watermark of the partition is at least `offset`;
    /// returns it.
    pub fn wait_for_high_watermark(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        timeout: Duration,
    ) -> Result<i64, WaitError> {
        self.wait_until(
            &format!("{topic}-{partition}: a high watermark of at least {offset}"),
            timeout,
            |v| v.partition(topic, partition),
            |p| p["high_watermark"].as_i64().filter(|hw| *hw >= offset),
        )
    }

    /// Waits until this node, as the group's coordinator, has the group `Stable` at a
    /// generation (classic) or group epoch (consumer) of at least `generation`; returns the
    /// group's entry of `GET /v1/groups`.
    pub fn wait_for_stable_group(
        &self,
        group_id: &str,
        generation: i64,
        timeout: Duration,
    ) -> Result<Value, WaitError> {
        self.wait_until(
            &format!("group {group_id}: Stable at generation {generation} or later"),
            timeout,
            |v| v.get("/v1/groups"),
            |answer| {
                let group = answer["groups"]
                    .as_array()?
                    .iter()
                    .find(|g| g["group_id"] == group_id)?;
                let stable = group["state"] == "Stable"
                    && group["generation"]
                        .as_i64()
                        .is_some_and(|g| g >= generation);
                stable.then(|| group.clone())
            },
        )
    }
}

/// `s` percent-encoded for a query value (topic names are `[a-zA-Z0-9._-]`, which need
/// none; anything else is encoded rather than trusted).
fn query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'_' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The largest char boundary of `s` at or below `at`.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    (0..=at.min(s.len()))
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_encoded_outside_the_topic_alphabet() {
        assert_eq!(query_value("orders.v1_a-b"), "orders.v1_a-b");
        assert_eq!(query_value("a b&c"), "a%20b%26c");
    }

    #[test]
    fn a_wait_that_never_holds_times_out_with_the_last_reading() {
        let views = Views::new("127.0.0.1:1");
        let err = views
            .wait_until(
                "never",
                Duration::from_millis(50),
                |_| Ok(serde_json::json!({"high_watermark": 3})),
                |_| None::<()>,
            )
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("never: not reached"), "{text}");
        assert!(text.contains("\"high_watermark\":3"), "{text}");
    }
}
