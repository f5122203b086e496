//! Sends generated hostile frames to a live broker and checks after every batch that it is
//! alive and round-trips a record. See `brook_protocol_tests::fuzz_live`.
//!
//! `fuzz_live --bootstrap HOST:PORT [--frames N] [--connections C] [--batch B] [--seed S]`

use brook_protocol_tests::fuzz_live::{run, LiveConfig};

fn usage() -> ! {
    eprintln!(
        "usage: fuzz_live --bootstrap HOST:PORT [--frames N] [--connections C] [--batch B] [--seed S]"
    );
    std::process::exit(2)
}

fn main() {
    let mut cfg = LiveConfig::new("", 100_000);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [flag, value] = pair else { usage() };
        let num = || value.parse::<u64>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--bootstrap" => cfg.bootstrap = value.clone(),
            "--frames" => cfg.frames = num(),
            "--connections" => cfg.connections = num().max(1) as usize,
            "--batch" => cfg.batch_frames = num().max(1),
            "--seed" => cfg.seed = num(),
            _ => usage(),
        }
    }
    if cfg.bootstrap.is_empty() {
        usage()
    }
    let (ok, r) = match run(&cfg) {
        Ok(r) => (true, r),
        Err(r) => (false, r),
    };
    println!(
        "fuzz_live: {} frames sent in {:.1} s: {} answered, {} closed, {} unanswered after {:?}; \
         {} liveness checks, {} aborts",
        r.frames_sent,
        r.elapsed.as_secs_f64(),
        r.answered,
        r.closed,
        r.unanswered,
        cfg.answer_wait,
        r.liveness_checks,
        r.aborts
    );
    if !ok {
        std::process::exit(1)
    }
}
