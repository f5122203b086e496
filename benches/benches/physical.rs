//! The machine's own limits, the references the broker's figures are read against
//! (`benches/RESULTS.md`): copying memory, CRC-32C (what the broker computes over every
//! produced and replicated batch), a loopback TCP stream (what every client and follower
//! byte crosses), and sequential writes into the page cache (what an append costs before any
//! flush). Each moves `CHUNK_BYTES` per iteration, so criterion reports bytes per second.

use std::hint::black_box;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Bytes per iteration: about one produce request's worth at high batching.
const CHUNK_BYTES: usize = 1 << 20;
/// The page-cache file is rewound at this size, so the benchmark's disk use is bounded.
const FILE_BYTES_MAX: u64 = 256 << 20;

fn chunk() -> Vec<u8> {
    (0..CHUNK_BYTES).map(|i| (i % 251) as u8).collect()
}

fn bench_memory(c: &mut Criterion) {
    let mut group = c.benchmark_group("physical");
    group.throughput(Throughput::Bytes(CHUNK_BYTES as u64));
    let src = chunk();
    let mut dst = vec![0u8; CHUNK_BYTES];
    group.bench_function("memcpy", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&src)));
    });
    group.bench_function("crc32c", |b| {
        b.iter(|| crc32c::crc32c(black_box(&src)));
    });
    group.finish();
}

fn bench_page_cache_write(c: &mut Criterion) {
    let mut group = c.benchmark_group("physical");
    group.throughput(Throughput::Bytes(CHUNK_BYTES as u64));
    let src = chunk();
    let mut file = tempfile::tempfile().expect("a temporary file");
    let mut written = 0u64;
    group.bench_function("page_cache_write", |b| {
        b.iter(|| {
            if written >= FILE_BYTES_MAX {
                file.set_len(0).expect("truncate");
                file.seek(SeekFrom::Start(0)).expect("rewind");
                written = 0;
            }
            file.write_all(&src).expect("write");
            written += CHUNK_BYTES as u64;
        });
    });
    group.finish();
}

fn bench_loopback_tcp(c: &mut Criterion) {
    let mut group = c.benchmark_group("physical");
    group.throughput(Throughput::Bytes(CHUNK_BYTES as u64));
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("local address");
    // The reading side drains everything on its own thread until the writer closes.
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; CHUNK_BYTES];
        while s.read(&mut buf).is_ok_and(|n| n > 0) {}
    });
    let mut out = TcpStream::connect(addr).expect("connect");
    out.set_nodelay(true).expect("nodelay");
    let src = chunk();
    group.bench_function("loopback_tcp", |b| {
        b.iter(|| out.write_all(&src).expect("send"));
    });
    group.finish();
    drop(out);
    reader.join().expect("reader thread");
}

criterion_group!(
    benches,
    bench_memory,
    bench_page_cache_write,
    bench_loopback_tcp
);
criterion_main!(benches);
