//! The broker-wide bound on request bytes: Kafka's `queued.max.request.bytes`.
//!
//! Mirrors Kafka's `SimpleMemoryPool` as `SocketServer` uses it: when a frame's size prefix
//! has been read, the connection takes that many bytes from the pool before reading the body;
//! if the pool cannot give them, the connection is not read ("muted") until requests in
//! flight give bytes back. Brook gives them back once the request's response has been written.
//!
//! The whole frame is taken at once (as Kafka's `NetworkReceive` does) rather than chunk by
//! chunk: connections that each held part of the pool while waiting for more could wait on
//! each other forever. Taken at once, a holder never waits on the pool, and since
//! `queued.max.request.bytes >= socket.request.max.bytes` (checked at start-up, as Kafka's
//! `KafkaConfig` does) every frame the broker accepts fits in the pool: a waiting connection
//! is always served once earlier requests finish. Unlike Kafka's non-strict pool, a frame
//! waits until all of its bytes are free, so the pool is a hard bound.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The pool, or none when `queued.max.request.bytes` is -1 (Kafka's default: no bound).
#[derive(Debug, Clone)]
pub struct RequestMemoryPool {
    bytes: Option<Arc<Semaphore>>,
    size_bytes: usize,
}

/// Bytes taken from the pool for one request; they go back when this is dropped.
#[derive(Debug)]
pub struct RequestMemory {
    _permit: Option<OwnedSemaphorePermit>,
}

impl RequestMemoryPool {
    /// A pool of `size_bytes`, or an unbounded one for `None`.
    pub fn new(size_bytes: Option<usize>) -> RequestMemoryPool {
        RequestMemoryPool {
            bytes: size_bytes.map(|n| Arc::new(Semaphore::new(n))),
            size_bytes: size_bytes.unwrap_or(usize::MAX),
        }
    }

    /// Waits until `frame_bytes` are free and takes them. `frame_bytes` is at most
    /// `socket.request.max.bytes`, which is at most the pool's size.
    pub async fn acquire(&self, frame_bytes: usize) -> RequestMemory {
        let Some(sem) = &self.bytes else {
            return RequestMemory { _permit: None };
        };
        assert!(
            frame_bytes <= self.size_bytes,
            "a frame of {frame_bytes} bytes cannot fit a pool of {} (config validation)",
            self.size_bytes
        );
        // The semaphore is never closed, and frame_bytes fits u32 since it is at most
        // socket.request.max.bytes (an i32).
        let permit = sem
            .clone()
            .acquire_many_owned(frame_bytes as u32)
            .await
            .expect("the request memory pool is never closed");
        RequestMemory {
            _permit: Some(permit),
        }
    }

    /// Bytes free right now (`usize::MAX` when unbounded).
    pub fn available_bytes(&self) -> usize {
        self.bytes
            .as_ref()
            .map_or(usize::MAX, |s| s.available_permits())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[tokio::test]
    async fn a_frame_waits_until_earlier_requests_give_their_bytes_back() {
        let pool = RequestMemoryPool::new(Some(100));
        let first = pool.acquire(70).await;
        assert_eq!(pool.available_bytes(), 30);
        let mut second = Box::pin(pool.acquire(50));
        assert!(
            poll_once(&mut second).await.is_none(),
            "50 bytes granted while only 30 are free"
        );
        drop(first);
        let second = second.await;
        assert_eq!(pool.available_bytes(), 50);
        // A frame as large as the whole pool is served once it is empty.
        drop(second);
        let whole = pool.acquire(100).await;
        assert_eq!(pool.available_bytes(), 0);
        drop(whole);
        assert_eq!(pool.available_bytes(), 100);
    }

    #[tokio::test]
    async fn unbounded_pool_never_waits() {
        let pool = RequestMemoryPool::new(None);
        let _a = pool.acquire(1 << 30).await;
        let _b = pool.acquire(1 << 30).await;
        assert_eq!(pool.available_bytes(), usize::MAX);
    }

    /// Polls a future once: `Some` if it completed.
    pub(crate) async fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
        std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *f).poll(cx) {
            std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
            std::task::Poll::Pending => std::task::Poll::Ready(None),
        })
        .await
    }
}
