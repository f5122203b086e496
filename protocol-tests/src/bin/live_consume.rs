//! Consumes records in a consumer group with librdkafka and commits how far it got, so that
//! a watcher sees the group's committed offset and lag; used by the live page's browser test
//! (`protocol-tests/browser/`).
//!
//! `live_consume --bootstrap HOST:PORT --topic T --group G --records N`
//!
//! Reads N records of partition 0 at read_uncommitted (open transactions included), commits
//! the offset after the last one, prints `COMMITTED offset` and exits; bounded in time by
//! [`READ_TIMEOUT`].

use std::time::{Duration, Instant};

use brook_protocol_tests::rd;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

/// How long reading the N records may take.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

fn usage() -> ! {
    eprintln!("usage: live_consume --bootstrap HOST:PORT --topic T --group G --records N");
    std::process::exit(2)
}

fn main() {
    let (mut bootstrap, mut topic, mut group, mut records) =
        (String::new(), String::new(), String::new(), 0usize);
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let [flag, value] = pair else { usage() };
        match flag.as_str() {
            "--bootstrap" => bootstrap = value.clone(),
            "--topic" => topic = value.clone(),
            "--group" => group = value.clone(),
            "--records" => records = value.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    if bootstrap.is_empty() || topic.is_empty() || group.is_empty() || records == 0 {
        usage();
    }
    let c = rd::group_consumer(
        &bootstrap,
        &group,
        &[("isolation.level", "read_uncommitted")],
    );
    c.subscribe(&[&topic]).expect("subscribe");
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut next = -1;
    for _ in 0..records {
        loop {
            assert!(
                Instant::now() < deadline,
                "not {records} records within {READ_TIMEOUT:?}"
            );
            match c.poll(Duration::from_millis(100)) {
                Some(Ok(m)) if m.partition() == 0 => {
                    next = m.offset() + 1;
                    break;
                }
                Some(Err(e)) => eprintln!("consumer: {e}"),
                _ => {}
            }
        }
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Offset(next))
        .expect("offset");
    c.commit(&tpl, CommitMode::Sync).expect("commit");
    println!("COMMITTED {next}");
}
