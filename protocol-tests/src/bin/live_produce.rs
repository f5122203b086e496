//! Produces a steady stream of records with librdkafka (idempotent, acks=all) so that a
//! watcher sees offsets move; used by the live page's browser test
//! (`protocol-tests/browser/`).
//!
//! `live_produce --bootstrap HOST:PORT --topic T [--records N] [--interval-ms MS]`
//!
//! Prints `DELIVERED n` after every 10 delivered records and exits once N records were sent
//! and flushed (bounded in count and, through the flush timeout, in time).

use std::time::Duration;

use brook_protocol_tests::rd;

fn usage() -> ! {
    eprintln!(
        "usage: live_produce --bootstrap HOST:PORT --topic T [--records N] [--interval-ms MS]"
    );
    std::process::exit(2)
}

fn main() {
    let (mut bootstrap, mut topic) = (String::new(), String::new());
    let (mut records, mut interval_ms) = (2_000usize, 50u64);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [flag, value] = pair else { usage() };
        match flag.as_str() {
            "--bootstrap" => bootstrap = value.clone(),
            "--topic" => topic = value.clone(),
            "--records" => records = value.parse().unwrap_or_else(|_| usage()),
            "--interval-ms" => interval_ms = value.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    if bootstrap.is_empty() || topic.is_empty() {
        usage();
    }
    let p = rd::producer(
        &bootstrap,
        &[
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("linger.ms", "5"),
            ("message.timeout.ms", "120000"),
        ],
    );
    let mut reported = 0;
    for i in 0..records {
        rd::send(&p, rd::record(&topic, i, None, None, Some(b"live")));
        p.poll(Duration::ZERO);
        let delivered = rd::delivered_count(&p);
        if delivered >= reported + 10 {
            reported = delivered - delivered % 10;
            println!("DELIVERED {reported}");
        }
        // Pacing, so offsets move visibly rather than all at once.
        std::thread::sleep(Duration::from_millis(interval_ms));
    }
    let d = rd::flush(&p, records, Duration::from_secs(120));
    println!("DONE {}", d.len());
}
