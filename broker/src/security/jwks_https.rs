//! A JWKS fetched over http(s) and kept fresh, as Kafka's `RefreshingHttpsJwks` (with jose4j's
//! `HttpsJwks` and `Get` under it) keeps it for `RefreshingHttpsJwksVerificationKeyResolver`:
//!
//! - start-up fetches the set once and fails when it cannot (Kafka's `init`: "Could not
//!   refresh JWKS", which stops the broker), retrying as jose4j's `Get` does;
//! - a refresh every `sasl.oauthbearer.jwks.endpoint.refresh.ms` after that, each retried with
//!   Kafka's `Retry` (`retry.backoff.ms` doubling, for at most `retry.backoff.max.ms`); a
//!   refresh that still fails keeps the keys it had;
//! - a token whose `kid` is not in the set asks for an early refresh, at most once a minute per
//!   `kid` (`MISSING_KEY_ID_CACHE_IN_FLIGHT_MS`, 16 such ids remembered); the token itself
//!   is refused, as Kafka refuses it.
//!
//! Validation never waits on the network: it reads the keys last fetched. The fetches run on
//! one thread of their own (Kafka's single-thread scheduled executor), so two never overlap.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::jwks::{parse_jwks, Jwk};
use crate::net::http_client::{HttpClient, HttpError};

/// `RefreshingHttpsJwks.MISSING_KEY_ID_CACHE_MAX_ENTRIES`.
const MISSING_KEY_ID_CACHE_MAX_ENTRIES: usize = 16;
/// `RefreshingHttpsJwks.MISSING_KEY_ID_CACHE_IN_FLIGHT_MS`: how long one unknown `kid` waits
/// before it may ask for another early refresh.
const MISSING_KEY_ID_CACHE_IN_FLIGHT_MS: u64 = 60_000;
/// `RefreshingHttpsJwks.MISSING_KEY_ID_MAX_KEY_LENGTH`: a longer `kid` is taken for a
/// malformed token and never causes a refresh.
const MISSING_KEY_ID_MAX_KEY_LENGTH: usize = 1000;
/// jose4j `Get`: retries after the first attempt, the first wait, and the wait's bound (each
/// wait doubles).
const GET_RETRIES: u32 = 3;
const GET_RETRY_WAIT_MS_INITIAL: u64 = 180;
const GET_RETRY_WAIT_MS_MAX: u64 = 8_000;

/// The refresh settings (`sasl.oauthbearer.jwks.endpoint.*`).
#[derive(Debug, Clone, Copy)]
pub struct RefreshSettings {
    pub refresh_ms: u64,
    pub retry_backoff_ms: u64,
    pub retry_backoff_max_ms: u64,
}

/// What the validator and the refresh thread share.
#[derive(Debug)]
struct Shared {
    location: String,
    keys: Mutex<Arc<Vec<Jwk>>>,
    /// Unknown key ids and when each may ask again, least recently asked first (Kafka's
    /// access-ordered `LinkedHashMap`).
    missing_key_ids: Mutex<Vec<(String, Instant)>>,
    wake: Notify,
    closed: AtomicBool,
}

/// The keys of a JWKS URL, refreshed on a thread of their own until this is dropped.
#[derive(Debug)]
pub struct RefreshingHttpsJwks {
    shared: Arc<Shared>,
}

impl RefreshingHttpsJwks {
    /// Fetches the set (Kafka's `init`), then starts the refresh thread. The caller waits:
    /// start-up is where Kafka blocks on the network too.
    pub fn start(
        location: &str,
        client: HttpClient,
        settings: RefreshSettings,
    ) -> Result<RefreshingHttpsJwks, String> {
        if settings.refresh_ms == 0 {
            return Err("JWKS validation key refresh configuration value retryWaitMs value must be positive".into());
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("Could not refresh JWKS: {e}"))?;
        let location = location.to_string();
        let (started_tx, started_rx) = std::sync::mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new()
            .name("jwks-refresh".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let keys = match fetch(&client, &location).await {
                        Ok(keys) => keys,
                        Err(e) => {
                            let _ = started_tx.send(Err(format!("Could not refresh JWKS: {e}")));
                            return;
                        }
                    };
                    let shared = Arc::new(Shared {
                        location,
                        keys: Mutex::new(Arc::new(keys)),
                        missing_key_ids: Mutex::new(Vec::new()),
                        wake: Notify::new(),
                        closed: AtomicBool::new(false),
                    });
                    if started_tx.send(Ok(shared.clone())).is_ok() {
                        refresh_loop(&shared, &client, settings).await;
                    }
                })
            });
        if let Err(e) = spawned {
            return Err(format!("Could not refresh JWKS: {e}"));
        }
        let shared = started_rx
            .recv()
            .map_err(|_| "Could not refresh JWKS: the refresh thread ended".to_string())??;
        tracing::info!(
            location = %shared.location,
            refresh_ms = settings.refresh_ms,
            "JWKS validation key refresh thread started"
        );
        Ok(RefreshingHttpsJwks { shared })
    }

    /// The keys last fetched (never waits on the network).
    pub(crate) fn keys(&self) -> Arc<Vec<Jwk>> {
        self.shared.keys.lock().clone()
    }

    pub fn location(&self) -> &str {
        &self.shared.location
    }

    /// `maybeExpediteRefresh`: asks for a refresh now when `kid` was not asked about within
    /// the last minute; true when it asked.
    pub fn maybe_expedite_refresh(&self, kid: &str) -> bool {
        if kid.len() > MISSING_KEY_ID_MAX_KEY_LENGTH {
            let shown: String = kid.chars().take(MISSING_KEY_ID_MAX_KEY_LENGTH).collect();
            tracing::warn!(
                "Key ID {shown} (trimmed to first {MISSING_KEY_ID_MAX_KEY_LENGTH} characters out of {} total) was too long to cache",
                kid.len()
            );
            return false;
        }
        let now = Instant::now();
        let mut missing = self.shared.missing_key_ids.lock();
        if let Some(i) = missing.iter().position(|(k, _)| k == kid) {
            let entry = missing.remove(i);
            if entry.1 > now {
                missing.push(entry);
                return false;
            }
        }
        let next_check = now + Duration::from_millis(MISSING_KEY_ID_CACHE_IN_FLIGHT_MS);
        missing.push((kid.to_string(), next_check));
        if missing.len() > MISSING_KEY_ID_CACHE_MAX_ENTRIES {
            missing.remove(0);
        }
        self.shared.wake.notify_one();
        true
    }
}

impl Drop for RefreshingHttpsJwks {
    /// Kafka's `close`: the refresh thread ends at its next wake-up, which this is.
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.wake.notify_one();
    }
}

/// The scheduled refreshes (every `refresh_ms` after start-up) and the expedited ones, one at
/// a time. A refresh that overran its period is not made up for with a burst.
async fn refresh_loop(shared: &Shared, client: &HttpClient, settings: RefreshSettings) {
    let period = Duration::from_millis(settings.refresh_ms);
    let mut next = tokio::time::Instant::now() + period;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {
                next = (next + period).max(tokio::time::Instant::now());
            }
            _ = shared.wake.notified() => {}
        }
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
        refresh(shared, client, settings).await;
    }
}

/// `RefreshingHttpsJwks.refresh`: the fetch under Kafka's `Retry`; new keys replace the old
/// and are no longer missing; a failure keeps the old keys.
async fn refresh(shared: &Shared, client: &HttpClient, settings: RefreshSettings) {
    tracing::debug!(location = %shared.location, "OAuth JWKS refresh starting");
    match with_kafka_retry(settings, || fetch(client, &shared.location)).await {
        Ok(keys) => {
            let mut missing = shared.missing_key_ids.lock();
            missing.retain(|(kid, _)| !keys.iter().any(|k| k.kid() == Some(kid.as_str())));
            *shared.keys.lock() = Arc::new(keys);
            tracing::debug!(location = %shared.location, "OAuth JWKS refresh complete");
        }
        Err(e) => tracing::warn!(
            location = %shared.location,
            "OAuth JWKS refresh encountered an error; not updating local JWKS cache: {e}"
        ),
    }
}

/// Kafka's `Retry.execute`: attempts until `retry_backoff_max_ms` has passed, waiting
/// `retry_backoff_ms`, then twice that, and so on, never past the deadline.
async fn with_kafka_retry<F, Fut>(
    settings: RefreshSettings,
    mut attempt: F,
) -> Result<Vec<Jwk>, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Jwk>, String>>,
{
    let end = Instant::now() + Duration::from_millis(settings.retry_backoff_max_ms);
    let mut first_error = None;
    let mut attempts: u32 = 0;
    while Instant::now() <= end {
        attempts += 1;
        let e = match attempt().await {
            Ok(keys) => return Ok(keys),
            Err(e) => e,
        };
        tracing::warn!("Error during retry attempt {attempts}: {e}");
        let error = first_error.get_or_insert(e);
        let doubling = 1u64.checked_shl(attempts - 1).unwrap_or(u64::MAX);
        let wait = settings.retry_backoff_ms.saturating_mul(doubling);
        let left = end.saturating_duration_since(Instant::now());
        let wait = Duration::from_millis(wait).min(left);
        if wait.is_zero() {
            return Err(error.clone());
        }
        tokio::time::sleep(wait).await;
    }
    Err(first_error.unwrap_or_else(|| "Exhausted all retry attempts".into()))
}

/// jose4j's `HttpsJwks.refresh`: a GET of the set (retried as `Get` retries), parsed.
async fn fetch(client: &HttpClient, location: &str) -> Result<Vec<Jwk>, String> {
    let body = get_with_retries(client, location)
        .await
        .map_err(|e| e.to_string())?;
    parse_jwks(&body, location)
}

/// jose4j `Get.get`: a retriable failure is tried again up to [`GET_RETRIES`] times, the wait
/// doubling from [`GET_RETRY_WAIT_MS_INITIAL`] up to [`GET_RETRY_WAIT_MS_MAX`].
async fn get_with_retries(client: &HttpClient, location: &str) -> Result<bytes::Bytes, HttpError> {
    let mut wait_ms = GET_RETRY_WAIT_MS_INITIAL;
    let mut retries = 0;
    loop {
        match client.get(location).await {
            Err(e) if e.is_retriable() && retries < GET_RETRIES => {
                retries += 1;
                tracing::debug!("Waiting {wait_ms}ms before retrying ({retries} of {GET_RETRIES}) HTTP GET of {location} after failed attempt: {e}");
                tokio::time::sleep(Duration::from_millis(wait_ms)).await;
                wait_ms = (wait_ms * 2).min(GET_RETRY_WAIT_MS_MAX);
            }
            other => return other,
        }
    }
}
