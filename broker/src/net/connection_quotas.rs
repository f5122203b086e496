//! Connection limits of the broker listener: Kafka's `max.connections` and
//! `max.connections.per.ip` (`ConnectionQuotas` in Kafka's `SocketServer`).
//!
//! Kafka treats the two differently, and so does Brook:
//! - at the broker-wide limit the acceptor waits for a slot: new connections stay in the
//!   kernel's accept backlog until an open one ends (`waitForConnectionSlot`);
//! - an address already at its limit has its new connection accepted and closed at once
//!   (`TooManyConnectionsException`), so a client sees an EOF on its first read.
//!
//! `ConnectionQuotas` is the one owner of both counts. Every accepted connection holds a
//! [`ConnectionSlot`]; dropping it (the connection's task ends, however it ends) gives both
//! counts back, so no path can leak a slot.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The open connections of the broker listener, in total and per address.
pub struct ConnectionQuotas {
    /// One permit per connection that may still open (`max.connections` minus the open ones).
    total: Arc<Semaphore>,
    /// Open connections per address; an address with none has no entry, so the map is
    /// bounded by the open connections, themselves bounded by `max.connections`.
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    max_connections_per_ip: usize,
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
}

impl ConnectionQuotas {
    /// Limits of `max_connections` in total and `max_connections_per_ip` per address.
    pub fn new(max_connections: usize, max_connections_per_ip: usize) -> Arc<Self> {
        // Kafka's limits are ints, far below the semaphore's ceiling; clamp all the same.
        let permits = max_connections.min(Semaphore::MAX_PERMITS);
        Arc::new(ConnectionQuotas {
            total: Arc::new(Semaphore::new(permits)),
            per_ip: Mutex::new(HashMap::new()),
            max_connections_per_ip,
        })
    }

    /// Waits for a broker-wide slot, then accepts one connection and counts it for its
    /// address. Cancel safe: dropping the future before it returns counts nothing.
    pub async fn accept(self: &Arc<Self>, listener: &TcpListener) -> std::io::Result<Accepted> {
        let total = match self.total.clone().acquire_owned().await {
            Ok(permit) => permit,
            // The semaphore is never closed; should it be, stop accepting rather than spin.
            Err(_) => return std::future::pending().await,
        };
        let (stream, peer) = listener.accept().await?;
        let ip = peer.ip();
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

    async fn bound() -> (TcpListener, std::net::SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    }

    #[tokio::test]
    async fn per_ip_limit_refuses_and_frees_on_drop() {
        let (l, addr) = bound().await;
        let q = ConnectionQuotas::new(100, 2);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut slots = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..2 {
            clients.push(TcpStream::connect(addr).await.unwrap());
            match q.accept(&l).await.unwrap() {
                Accepted::Connection(s, slot) => slots.push((s, slot)),
                Accepted::Refused { .. } => panic!("refused below the limit"),
            }
        }
        assert_eq!(q.open_from(ip), 2);
        clients.push(TcpStream::connect(addr).await.unwrap());
        assert!(matches!(
            q.accept(&l).await.unwrap(),
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
            q.accept(&l).await.unwrap(),
            Accepted::Connection(..)
        ));
    }

    #[tokio::test]
    async fn total_limit_waits_for_a_slot() {
        let (l, addr) = bound().await;
        let q = ConnectionQuotas::new(1, 10);
        let _c1 = TcpStream::connect(addr).await.unwrap();
        let first = match q.accept(&l).await.unwrap() {
            Accepted::Connection(s, slot) => (s, slot),
            Accepted::Refused { .. } => panic!("refused"),
        };
        let _c2 = TcpStream::connect(addr).await.unwrap();
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(200), q.accept(&l)).await;
        assert!(waited.is_err(), "accepted past max.connections");
        drop(first);
        let second = tokio::time::timeout(std::time::Duration::from_secs(5), q.accept(&l))
            .await
            .expect("a freed slot lets the next connection in")
            .unwrap();
        assert!(matches!(second, Accepted::Connection(..)));
    }
}
