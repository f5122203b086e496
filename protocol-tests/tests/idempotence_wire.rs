//! Idempotent produce over the raw wire: a verbatim resend is a duplicate answered with the
//! original offset; gaps get OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch gets
//! INVALID_PRODUCER_EPOCH; the log keeps exactly one copy of everything accepted.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::*;
use brook_protocol_tests::wire::*;
use brook_protocol_tests::{unique_topic, Broker, WireClient};
use kafka_protocol::messages::ApiKey;

fn recs(tag: &str, n: usize) -> Vec<Rec> {
    (0..n)
        .map(|i| {
            Rec::kv(
                &format!("{tag}-k{i}"),
                &format!("{tag}-v{i}"),
                1_000 + i as i64,
            )
        })
        .collect()
}

#[test]
fn idempotent_resend_sequence_gap_and_old_epoch() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    c.require_versions(&[
        (ApiKey::Produce, PRODUCE_V),
        (ApiKey::Fetch, FETCH_V),
        (ApiKey::InitProducerId, INIT_PRODUCER_ID_V),
        (ApiKey::Metadata, METADATA_V),
    ]);
    let topic = unique_topic("idem-wire");
    c.ensure_topic(&topic);

    // Two plain records first, so the idempotent batch does not start at offset 0.
    let r = c.produce(&topic, 0, encode_batch(Producer::NONE, &recs("plain", 2)));
    assert_eq!(
        (r.error_code, r.base_offset),
        (NONE, 0),
        "plain produce: {r:?}"
    );

    let (pid, epoch) = c.init_producer_id();

    // Batch A: sequences 0..=2.
    let a = encode_batch(
        Producer {
            id: pid,
            epoch,
            base_sequence: 0,
        },
        &recs("A", 3),
    );
    let r = c.produce(&topic, 0, a.clone());
    assert_eq!(r.error_code, NONE, "first idempotent batch: {r:?}");
    let x = r.base_offset;
    assert_eq!(x, 2, "first idempotent batch base offset");

    // The same bytes again: success with the original base offset, nothing appended.
    let r = c.produce(&topic, 0, a.clone());
    assert_eq!(
        (r.error_code, r.base_offset),
        (NONE, x),
        "verbatim resend of batch A must be a duplicate answered with offset {x}: {r:?}"
    );
    // ... also from another connection.
    let mut c2 = WireClient::connect(&broker.bootstrap());
    let r = c2.produce(&topic, 0, a.clone());
    assert_eq!(
        (r.error_code, r.base_offset),
        (NONE, x),
        "resend of batch A on a new connection: {r:?}"
    );

    // A gap: 3 is expected, 4 is sent.
    let gap = encode_batch(
        Producer {
            id: pid,
            epoch,
            base_sequence: 4,
        },
        &recs("GAP", 1),
    );
    let r = c.produce(&topic, 0, gap);
    assert_eq!(
        r.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "batch with sequence 4 when 3 is expected: {r:?}"
    );

    // The expected sequence is still accepted after the rejection.
    let b = encode_batch(
        Producer {
            id: pid,
            epoch,
            base_sequence: 3,
        },
        &recs("B", 1),
    );
    let r = c.produce(&topic, 0, b);
    assert_eq!(
        (r.error_code, r.base_offset),
        (NONE, x + 3),
        "batch B (sequence 3): {r:?}"
    );

    // A is no longer the last batch but is among the last five: still a duplicate.
    let r = c.produce(&topic, 0, a.clone());
    assert_eq!(
        (r.error_code, r.base_offset),
        (NONE, x),
        "resend of batch A after B: {r:?}"
    );

    // A newer epoch starting at sequence 0 is accepted...
    let c_batch = encode_batch(
        Producer {
            id: pid,
            epoch: epoch + 1,
            base_sequence: 0,
        },
        &recs("C", 1),
    );
    let r = c.produce(&topic, 0, c_batch);
    assert_eq!(
        (r.error_code, r.base_offset),
        (NONE, x + 4),
        "batch C at epoch {}: {r:?}",
        epoch + 1
    );
    // ... after which the old epoch is fenced.
    let old = encode_batch(
        Producer {
            id: pid,
            epoch,
            base_sequence: 4,
        },
        &recs("OLD", 1),
    );
    let r = c.produce(&topic, 0, old);
    assert_eq!(
        r.error_code, INVALID_PRODUCER_EPOCH,
        "batch at older epoch {epoch}: {r:?}"
    );
    // A new epoch that does not start at 0 while state exists is out of order.
    let bad_new_epoch = encode_batch(
        Producer {
            id: pid,
            epoch: epoch + 2,
            base_sequence: 7,
        },
        &recs("E2", 1),
    );
    let r = c.produce(&topic, 0, bad_new_epoch);
    assert_eq!(
        r.error_code,
        OUT_OF_ORDER_SEQUENCE_NUMBER,
        "new epoch {} starting at sequence 7: {r:?}",
        epoch + 2
    );

    // The log: plain x2, A x3 (once), B, C. Nothing else.
    let batches = c.fetch_all(&topic, 0);
    let values: Vec<(i64, String)> = batches
        .iter()
        .flat_map(|b| b.records.iter())
        .map(|r| {
            (
                r.offset,
                String::from_utf8(r.value.clone().unwrap()).unwrap(),
            )
        })
        .collect();
    let want: Vec<(i64, String)> = [
        "plain-v0", "plain-v1", "A-v0", "A-v1", "A-v2", "B-v0", "C-v0",
    ]
    .iter()
    .enumerate()
    .map(|(i, v)| (i as i64, v.to_string()))
    .collect();
    assert_eq!(
        values, want,
        "partition content after duplicates and rejections"
    );
    let a_batch = batches
        .iter()
        .find(|b| b.base_offset == x)
        .expect("batch A");
    assert_eq!(
        (
            a_batch.producer_id,
            a_batch.producer_epoch,
            a_batch.base_sequence,
            a_batch.record_count
        ),
        (pid, epoch, 0, 3),
        "stored batch A header"
    );
}

/// Producer state is rebuilt after a restart (from the log and/or snapshots): a retry of a batch
/// written before the restart is still a duplicate, a gap is still out of order, an old epoch
/// is still fenced.
fn state_survives(kill: bool) {
    let mut broker = Broker::start();
    let topic = unique_topic(if kill { "idem-kill" } else { "idem-term" });
    let (pid, epoch, a, b) = {
        let mut c = WireClient::connect(&broker.bootstrap());
        c.ensure_topic(&topic);
        let (pid, epoch) = c.init_producer_id();
        // Epoch E+1 is used from the start so that epoch E is "old" after the restart.
        let epoch = epoch + 1;
        let a = encode_batch(
            Producer {
                id: pid,
                epoch,
                base_sequence: 0,
            },
            &recs("A", 4),
        );
        let b = encode_batch(
            Producer {
                id: pid,
                epoch,
                base_sequence: 4,
            },
            &recs("B", 2),
        );
        let r = c.produce(&topic, 0, a.clone());
        assert_eq!((r.error_code, r.base_offset), (NONE, 0), "batch A: {r:?}");
        let r = c.produce(&topic, 0, b.clone());
        assert_eq!((r.error_code, r.base_offset), (NONE, 4), "batch B: {r:?}");
        (pid, epoch, a, b)
    };
    if kill {
        broker.kill9();
    } else {
        broker.stop();
    }
    broker.start_again();
    let how = if kill { "SIGKILL" } else { "SIGTERM" };

    let mut c = WireClient::connect(&broker.bootstrap());
    let r = c.produce(&topic, 0, b.clone());
    assert_eq!(
        (r.error_code, r.base_offset),
        (NONE, 4),
        "resend of the last batch after {how}: {r:?}"
    );
    let r = c.produce(&topic, 0, a.clone());
    assert_eq!(
        (r.error_code, r.base_offset),
        (NONE, 0),
        "resend of an earlier batch after {how}: {r:?}"
    );
    let gap = encode_batch(
        Producer {
            id: pid,
            epoch,
            base_sequence: 9,
        },
        &recs("GAP", 1),
    );
    let r = c.produce(&topic, 0, gap);
    assert_eq!(
        r.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "sequence 9 when 6 is expected, after {how}: {r:?}"
    );
    let old = encode_batch(
        Producer {
            id: pid,
            epoch: epoch - 1,
            base_sequence: 6,
        },
        &recs("OLD", 1),
    );
    let r = c.produce(&topic, 0, old);
    assert_eq!(
        r.error_code, INVALID_PRODUCER_EPOCH,
        "older epoch after {how}: {r:?}"
    );
    let next = encode_batch(
        Producer {
            id: pid,
            epoch,
            base_sequence: 6,
        },
        &recs("C", 1),
    );
    let r = c.produce(&topic, 0, next);
    assert_eq!(
        (r.error_code, r.base_offset),
        (NONE, 6),
        "next sequence after {how}: {r:?}"
    );

    let values: Vec<String> = c
        .fetch_all(&topic, 0)
        .iter()
        .flat_map(|b| b.records.iter())
        .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
        .collect();
    assert_eq!(
        values,
        ["A-v0", "A-v1", "A-v2", "A-v3", "B-v0", "B-v1", "C-v0"],
        "partition content after {how} and retries"
    );

    // A fresh InitProducerId after the restart must not hand out the same producer id again
    // with an epoch the partition would fence or confuse.
    let (pid2, _) = c.init_producer_id();
    assert_ne!(
        pid2, pid,
        "InitProducerId after {how} reused producer id {pid}"
    );
}

#[test]
fn idempotent_state_survives_sigterm_restart() {
    state_survives(false);
}

#[test]
fn idempotent_state_survives_sigkill_restart() {
    state_survives(true);
}
