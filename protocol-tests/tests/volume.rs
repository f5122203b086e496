//! Many records over three partitions, read back in per-partition order with exact counts.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::rd;
use brook_protocol_tests::{unique_topic, Broker};

const N: usize = 30_000;
const PARTITIONS: i32 = 3;

#[test]
fn thirty_thousand_records_over_three_partitions() {
    let broker = Broker::start_with(&[("num.partitions", "3")]);
    let topic = unique_topic("volume");
    let producer = rd::producer(&broker.bootstrap(), &[("linger.ms", "10")]);
    let keys: Vec<String> = (0..N).map(|i| format!("k{i}")).collect();
    let values: Vec<String> = (0..N)
        .map(|i| format!("v{i}-{}", "x".repeat(i % 64)))
        .collect();
    for i in 0..N {
        let rec = rd::record(
            &topic,
            i,
            Some(i as i32 % PARTITIONS),
            Some(keys[i].as_bytes()),
            Some(values[i].as_bytes()),
        );
        rd::send(&producer, rec);
        if i % 1000 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    let deliveries = rd::flush(&producer, N, Duration::from_secs(90));
    rd::assert_all_delivered(&deliveries);
    drop(producer);

    let parts: Vec<i32> = (0..PARTITIONS).collect();
    let got = rd::read_to_end(&broker.bootstrap(), &topic, &parts, Duration::from_secs(90));
    for p in 0..PARTITIONS {
        let msgs = &got[&p];
        let expected: Vec<usize> = (0..N).filter(|i| *i as i32 % PARTITIONS == p).collect();
        assert_eq!(msgs.len(), expected.len(), "partition {p}: record count");
        for (pos, (m, i)) in msgs.iter().zip(&expected).enumerate() {
            assert_eq!(
                m.offset, pos as i64,
                "partition {p}: offset at position {pos}"
            );
            assert_eq!(
                m.key.as_deref(),
                Some(keys[*i].as_bytes()),
                "partition {p}: key at offset {pos} (per-partition order)"
            );
            assert_eq!(
                m.value.as_deref(),
                Some(values[*i].as_bytes()),
                "partition {p}: value at offset {pos}"
            );
            let d = &deliveries[*i];
            assert_eq!(
                (d.partition, d.offset),
                (p, pos as i64),
                "delivery report of record {i}"
            );
        }
    }
}
