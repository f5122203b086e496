//! Connection limits of the broker listeners: Kafka's `max.connections`,
//! `max.connections.per.ip`, `max.connection.creation.rate` and the `connection_creation_rate`
//! quota of `ip` entities (`ConnectionQuotas` in Kafka's `SocketServer`).
//!
//! Kafka treats them differently, and so does Brook:
//! - at the broker-wide limit the acceptor waits for a slot: new connections stay in the
//!   kernel's accept backlog until an open one ends (`waitForConnectionSlot`);
//! - over the broker-wide creation rate, or over its listener's own
//!   (`listener.name.<l>.max.connection.creation.rate`, else the broker-wide value), the
//!   acceptor holds the connection it just accepted, and with it the backlog, for the longer
//!   of the two throttle times, then serves it (the same wait); the inter-broker listener is
//!   exempt from the broker-wide rate when there are other listeners (`protectedListener`),
//!   not from its own (`recordConnectionAndGetThrottleTimeMs`);
//! - an address already at its limit has its new connection accepted and closed at once
//!   (`TooManyConnectionsException`), so a client sees an EOF on its first read;
//! - an address over its creation rate has its new connection accepted, left unread for
//!   the throttle time, then closed (`ConnectionThrottledException`); it is not counted.
//!
//! `ConnectionQuotas` is the one owner of the counts and rates. Every accepted connection
//! holds a [`ConnectionSlot`]; dropping it (the connection's task ends, however it ends) gives
//! both counts back, so no path can leak a slot.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::clock::now_ms;
use crate::quota::{QuotaWindow, RateQuota, INACTIVE_SENSOR_EXPIRATION_MS, SENSORS_SWEEP_AT};

/// The `connection_creation_rate` quota of an address (`ConnectionQuotas.connectionRateForIp`:
/// its own `ip` entity, else the default one), `None` where no quota applies.
pub type IpConnectionRate = Box<dyn Fn(IpAddr) -> Option<f64> + Send + Sync>;

/// The creation-rate limits: `max.connection.creation.rate` (Kafka's default, `i32::MAX`, is
/// no limit), each listener's, the window the rates are sampled over, and each address's quota.
pub struct ConnectionRateLimits {
    pub max_connection_creation_rate: i32,
    /// Each broker listener's own limit, by listener name (`ListenerConnectionQuota`); a
    /// listener not named has none.
    pub listener_rates: HashMap<Arc<str>, i32>,
    pub window: QuotaWindow,
    pub ip_rate: IpConnectionRate,
}

/// The sampled creation rates: the broker's, each listener's and each throttled address's.
struct Rates {
    broker: RateQuota,
    /// One per listener of `ConnectionRateLimits::listener_rates`, made at start-up.
    per_listener: HashMap<Arc<str>, RateQuota>,
    /// Addresses with a quota; idle ones are swept past [`SENSORS_SWEEP_AT`] entries.
    per_ip: HashMap<IpAddr, RateQuota>,
}

/// The open connections of the broker listeners, in total and per address, and the rates
/// they were opened at.
pub struct ConnectionQuotas {
    /// One permit per connection that may still open (`max.connections` minus the open ones).
    total: Arc<Semaphore>,
    /// Open connections per address; an address with none has no entry, so the map is
    /// bounded by the open connections, themselves bounded by `max.connections`.
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    max_connections_per_ip: usize,
    limits: ConnectionRateLimits,
    rates: Mutex<Rates>,
}

/// An accepted connection's share of the quotas; dropping it frees the share.
pub struct ConnectionSlot {
    quotas: Arc<ConnectionQuotas>,
    ip: IpAddr,
    _total: OwnedSemaphorePermit,
}

/// What one accept produced.
pub enum Accepted {
    /// A connection to serve, with its slot.
    Connection(TcpStream, ConnectionSlot),
    /// A connection closed at once: its address is at `max.connections.per.ip`.
    Refused {
        ip: IpAddr,
        max_connections_per_ip: usize,
    },
    /// A connection to leave unread for `throttle_ms` and then close: its address is over
    /// its `connection_creation_rate`.
    Throttled {
        stream: TcpStream,
        ip: IpAddr,
        throttle_ms: i64,
    },
}

impl ConnectionQuotas {
    /// Limits of `max_connections` in total and `max_connections_per_ip` per address, and the
    /// creation rates of `limits`.
    pub fn new(
        max_connections: usize,
        max_connections_per_ip: usize,
        limits: ConnectionRateLimits,
    ) -> Arc<Self> {
        // Kafka's limits are ints, far below the semaphore's ceiling; clamp all the same.
        let permits = max_connections.min(Semaphore::MAX_PERMITS);
        let per_listener = limits
            .listener_rates
            .keys()
            .map(|name| (name.clone(), RateQuota::new(now_ms())))
            .collect();
        Arc::new(ConnectionQuotas {
            total: Arc::new(Semaphore::new(permits)),
            per_ip: Mutex::new(HashMap::new()),
            max_connections_per_ip,
            limits,
            rates: Mutex::new(Rates {
                broker: RateQuota::new(now_ms()),
                per_listener,
                per_ip: HashMap::new(),
            }),
        })
    }

    /// Waits for a broker-wide slot, then accepts one connection on `listener` (named `name`),
    /// holds it while the broker (unless the listener is `protected`) or the listener is over
    /// its creation rate, and counts it for its address. Cancel safe: dropping the future
    /// before it returns counts nothing.
    pub async fn accept(
        self: &Arc<Self>,
        listener: &TcpListener,
        name: &str,
        protected: bool,
    ) -> std::io::Result<Accepted> {
        let total = match self.total.clone().acquire_owned().await {
            Ok(permit) => permit,
            // The semaphore is never closed; should it be, stop accepting rather than spin.
            Err(_) => return std::future::pending().await,
        };
        let (stream, peer) = listener.accept().await?;
        let ip = peer.ip();
        let wait_ms = self.record_connection(name, protected, now_ms());
        if wait_ms > 0 {
            tokio::time::sleep(Duration::from_millis(wait_ms as u64)).await;
        }
        if let Some(throttle_ms) = self.record_ip_connection(ip, name, protected, now_ms()) {
            // Not counted: the permit goes back with `total`.
            return Ok(Accepted::Throttled {
                stream,
                ip,
                throttle_ms,
            });
        }
        if !self.count(ip) {
            // Dropping the stream closes the socket; the permit goes back with `total`.
            return Ok(Accepted::Refused {
                ip,
                max_connections_per_ip: self.max_connections_per_ip,
            });
        }
        let slot = ConnectionSlot {
            quotas: self.clone(),
            ip,
            _total: total,
        };
        Ok(Accepted::Connection(stream, slot))
    }

    /// The most a connection is held or throttled: one quota window (Kafka's
    /// `ConnectionQuotas.maxThrottleTimeMs`).
    fn throttle_ms_max(&self) -> i64 {
        self.limits.window.window_ms
    }

    /// `recordConnectionAndGetThrottleTimeMs`: records the connection in the broker's rate
    /// (unless `protected`) and in its listener's, and answers how long the acceptor waits
    /// before serving it: the longer of the two throttle times. Both rates count it either way.
    fn record_connection(&self, name: &str, protected: bool, now: i64) -> i64 {
        let (w, max) = (self.limits.window, self.throttle_ms_max());
        let mut rates = self.rates.lock();
        let broker_ms = if protected {
            0
        } else {
            let limit = f64::from(self.limits.max_connection_creation_rate);
            rates
                .broker
                .record_and_get_throttle_ms(w, limit, 1.0, now, max)
        };
        let listener_ms = match (
            rates.per_listener.get_mut(name),
            self.limits.listener_rates.get(name),
        ) {
            (Some(rate), Some(&limit)) => {
                rate.record_and_get_throttle_ms(w, f64::from(limit), 1.0, now, max)
            }
            _ => 0,
        };
        broker_ms.max(listener_ms)
    }

    /// `recordIpConnectionMaybeThrottle`: records the connection in its address's rate if
    /// the address has a quota; over it, takes the connection back out of the address's, the
    /// broker's and the listener's rates and answers the throttle time.
    fn record_ip_connection(
        &self,
        ip: IpAddr,
        name: &str,
        protected: bool,
        now: i64,
    ) -> Option<i64> {
        let limit = (self.limits.ip_rate)(ip)?;
        let (w, max) = (self.limits.window, self.throttle_ms_max());
        let mut rates = self.rates.lock();
        if !rates.per_ip.contains_key(&ip) && rates.per_ip.len() >= SENSORS_SWEEP_AT {
            rates
                .per_ip
                .retain(|_, r| now - r.last_record_ms() < INACTIVE_SENSOR_EXPIRATION_MS);
        }
        let rate = rates
            .per_ip
            .entry(ip)
            .or_insert_with(|| RateQuota::new(now));
        let throttle_ms = rate.record_and_get_throttle_ms(w, limit, 1.0, now, max);
        if throttle_ms <= 0 {
            return None;
        }
        rate.unrecord(w, 1.0, now);
        // `updateListenerMetrics`: neither the broker's nor the listener's rate counts a
        // refused connection.
        if !protected {
            rates.broker.unrecord(w, 1.0, now);
        }
        if let Some(listener) = rates.per_listener.get_mut(name) {
            listener.unrecord(w, 1.0, now);
        }
        Some(throttle_ms)
    }

    /// Counts one more connection from `ip`, unless the address is at its limit.
    fn count(&self, ip: IpAddr) -> bool {
        let mut per_ip = self.per_ip.lock();
        let open = per_ip.entry(ip).or_insert(0);
        if *open >= self.max_connections_per_ip {
            if *open == 0 {
                per_ip.remove(&ip);
            }
            return false;
        }
        *open += 1;
        true
    }

    /// Open connections from `ip` (for tests and diagnostics).
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.per_ip.lock().get(&ip).copied().unwrap_or(0)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut per_ip = self.quotas.per_ip.lock();
        if let Some(open) = per_ip.get_mut(&self.ip) {
            *open -= 1;
            if *open == 0 {
                per_ip.remove(&self.ip);
            }
        }
        // The broker-wide permit goes back when `_total` drops, after this.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples of one second, at least one full window: a rate is the count of the last
    /// second or so.
    const W: QuotaWindow = QuotaWindow {
        samples: 2,
        window_ms: 1000,
    };

    /// The listener the tests accept on.
    const L: &str = "PLAINTEXT";

    fn limits(max_connection_creation_rate: i32, ip_rate: Option<f64>) -> ConnectionRateLimits {
        ConnectionRateLimits {
            max_connection_creation_rate,
            listener_rates: HashMap::new(),
            window: W,
            ip_rate: Box::new(move |_| ip_rate),
        }
    }

    fn unlimited() -> ConnectionRateLimits {
        limits(i32::MAX, None)
    }

    async fn bound() -> (TcpListener, std::net::SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    }

    #[tokio::test]
    async fn per_ip_limit_refuses_and_frees_on_drop() {
        let (l, addr) = bound().await;
        let q = ConnectionQuotas::new(100, 2, unlimited());
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut slots = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..2 {
            clients.push(TcpStream::connect(addr).await.unwrap());
            match q.accept(&l, L, false).await.unwrap() {
                Accepted::Connection(s, slot) => slots.push((s, slot)),
                _ => panic!("refused below the limit"),
            }
        }
        assert_eq!(q.open_from(ip), 2);
        clients.push(TcpStream::connect(addr).await.unwrap());
        assert!(matches!(
            q.accept(&l, L, false).await.unwrap(),
            Accepted::Refused {
                max_connections_per_ip: 2,
                ..
            }
        ));
        assert_eq!(q.open_from(ip), 2, "a refused connection is not counted");
        slots.pop();
        assert_eq!(q.open_from(ip), 1, "a dropped slot is given back");
        clients.push(TcpStream::connect(addr).await.unwrap());
        assert!(matches!(
            q.accept(&l, L, false).await.unwrap(),
            Accepted::Connection(..)
        ));
    }

    #[tokio::test]
    async fn total_limit_waits_for_a_slot() {
        let (l, addr) = bound().await;
        let q = ConnectionQuotas::new(1, 10, unlimited());
        let _c1 = TcpStream::connect(addr).await.unwrap();
        let first = match q.accept(&l, L, false).await.unwrap() {
            Accepted::Connection(s, slot) => (s, slot),
            _ => panic!("refused"),
        };
        let _c2 = TcpStream::connect(addr).await.unwrap();
        let waited = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            q.accept(&l, L, false),
        )
        .await;
        assert!(waited.is_err(), "accepted past max.connections");
        drop(first);
        let second =
            tokio::time::timeout(std::time::Duration::from_secs(5), q.accept(&l, L, false))
                .await
                .expect("a freed slot lets the next connection in")
                .unwrap();
        assert!(matches!(second, Accepted::Connection(..)));
    }

    #[test]
    fn an_address_over_its_creation_rate_is_throttled_by_the_excess() {
        let q = ConnectionQuotas::new(100, 100, limits(i32::MAX, Some(2.0)));
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        // Times given, not read: three connections in the same millisecond.
        let t = 1_000_000;
        assert_eq!(q.record_ip_connection(ip, L, false, t), None);
        assert_eq!(q.record_ip_connection(ip, L, false, t), None);
        // Three in the first second against two per second: (3 - 2) / 2 of the window.
        assert_eq!(q.record_ip_connection(ip, L, false, t), Some(500));
    }

    #[tokio::test]
    async fn an_address_over_its_creation_rate_is_throttled_and_not_counted() {
        let (l, addr) = bound().await;
        // Kafka's default of 11 one-second samples: a rate is the count over at least ten
        // seconds, so the third connection is over 0.25 per second however slowly (up to 2 s)
        // the three accepts run on a loaded machine.
        let mut rates = limits(i32::MAX, Some(0.25));
        rates.window = QuotaWindow {
            samples: 11,
            window_ms: 1000,
        };
        let q = ConnectionQuotas::new(100, 100, rates);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(TcpStream::connect(addr).await.unwrap());
            assert!(matches!(
                q.accept(&l, L, false).await.unwrap(),
                Accepted::Connection(..)
            ));
        }
        held.push(TcpStream::connect(addr).await.unwrap());
        match q.accept(&l, L, false).await.unwrap() {
            Accepted::Throttled { throttle_ms, .. } => assert!(throttle_ms > 0),
            _ => panic!("a third connection over the address's rate is not throttled"),
        }
        assert_eq!(
            q.open_from(ip),
            0,
            "the slots were dropped; none is counted"
        );
    }

    #[tokio::test]
    async fn the_broker_creation_rate_holds_the_acceptor_unless_protected() {
        let (l, addr) = bound().await;
        let q = ConnectionQuotas::new(100, 100, limits(2, None));
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(TcpStream::connect(addr).await.unwrap());
            assert!(matches!(
                q.accept(&l, L, false).await.unwrap(),
                Accepted::Connection(..)
            ));
        }
        held.push(TcpStream::connect(addr).await.unwrap());
        let t0 = std::time::Instant::now();
        let third = q.accept(&l, L, false).await.unwrap();
        assert!(
            matches!(third, Accepted::Connection(..)),
            "held, then served"
        );
        assert!(
            t0.elapsed() >= Duration::from_millis(450),
            "{:?}",
            t0.elapsed()
        );
        held.push(TcpStream::connect(addr).await.unwrap());
        let t0 = std::time::Instant::now();
        assert!(matches!(
            q.accept(&l, L, true).await.unwrap(),
            Accepted::Connection(..)
        ));
        assert!(
            t0.elapsed() < Duration::from_millis(450),
            "a protected listener waited"
        );
    }

    /// Accepts a burst of `n` on `name`, answering how long the last accept took.
    async fn burst_on(
        q: &Arc<ConnectionQuotas>,
        l: &TcpListener,
        addr: std::net::SocketAddr,
        name: &str,
        protected: bool,
        n: usize,
    ) -> (Duration, Vec<TcpStream>) {
        let mut held = Vec::new();
        let mut last = Duration::ZERO;
        for _ in 0..n {
            held.push(TcpStream::connect(addr).await.unwrap());
            let t0 = std::time::Instant::now();
            assert!(matches!(
                q.accept(l, name, protected).await.unwrap(),
                Accepted::Connection(..)
            ));
            last = t0.elapsed();
        }
        (last, held)
    }

    #[tokio::test]
    async fn a_listener_over_its_own_rate_is_held_even_when_protected() {
        let (l, addr) = bound().await;
        let mut lim = limits(i32::MAX, None);
        lim.listener_rates = HashMap::from([(Arc::from(L), 2), (Arc::from("OTHER"), i32::MAX)]);
        let q = ConnectionQuotas::new(100, 100, lim);
        // Two pass at once; the third waits (3 - 2) / 2 of the window, protected or not.
        let (last, _held) = burst_on(&q, &l, addr, L, true, 3).await;
        assert!(last >= Duration::from_millis(450), "{last:?}");
        // Another listener's rate is its own.
        let (last, _other) = burst_on(&q, &l, addr, "OTHER", false, 3).await;
        assert!(last < Duration::from_millis(450), "{last:?}");
    }

    #[tokio::test]
    async fn a_protected_listener_neither_waits_on_nor_fills_the_broker_rate() {
        let (l, addr) = bound().await;
        let mut lim = limits(2, None);
        lim.listener_rates = HashMap::from([(Arc::from(L), i32::MAX)]);
        let q = ConnectionQuotas::new(100, 100, lim);
        let (last, _protected) = burst_on(&q, &l, addr, L, true, 3).await;
        assert!(last < Duration::from_millis(450), "{last:?}");
        // The broker's rate saw none of them: two more pass at once, the third waits.
        let (last, _held) = burst_on(&q, &l, addr, "EXTERNAL", false, 2).await;
        assert!(last < Duration::from_millis(450), "{last:?}");
        let (last, _held) = burst_on(&q, &l, addr, "EXTERNAL", false, 1).await;
        assert!(last >= Duration::from_millis(450), "{last:?}");
    }
}
