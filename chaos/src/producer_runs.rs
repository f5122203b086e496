//! Who wrote each stretch of the final log: after the final read, every partition is read
//! once more with raw Fetches (read_uncommitted, from offset 0 to the high watermark) and its
//! batch headers are folded into [`Op::ProducerRun`]s: consecutive offsets written by one
//! producer id under one epoch.
//!
//! A consumer sees a record's value and offset, not its batch's producer id and epoch; the
//! checker needs them to tell two kinds of `duplicate` apart. The broker deduplicates a
//! producer's retries by sequence number within one producer epoch (Kafka's
//! `ProducerStateManager`); a record written under two epochs of one producer was sent twice
//! by the client, after it bumped its epoch and renumbered what it still held (librdkafka
//! does that after a message timeout, KIP-360). One written twice under the same epoch is the
//! broker's fault.

use std::time::{Duration, Instant};

use crate::security::ClientSecurity;
use brook_protocol_tests::batch::parse_batches;
use brook_protocol_tests::wire::{WireClient, FETCH_V, METADATA_V};
use kafka_protocol::messages::{FetchRequest, MetadataRequest};

use crate::history::Op;

/// Bound on connecting to a node and on one request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on reading one partition's headers.
pub const PARTITION_READ_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a Fetch may wait for data (none should be needed below the high watermark).
const FETCH_WAIT_MS: i32 = 100;

/// Reads the batch headers of every partition of `topic` from its leader, folded into runs.
pub fn read(
    bootstrap: &str,
    security: &ClientSecurity,
    topic: &str,
    partitions: i32,
) -> Result<Vec<Op>, String> {
    let mut ops = Vec::new();
    for partition in 0..partitions {
        let leader = leader_address(bootstrap, security, topic, partition)?;
        let mut client = security.connect(&leader, REQUEST_TIMEOUT)?;
        ops.extend(read_partition(&mut client, topic, partition)?);
    }
    Ok(ops)
}

/// The address of `partition`'s leader, from any bootstrap address that answers Metadata.
fn leader_address(
    bootstrap: &str,
    security: &ClientSecurity,
    topic: &str,
    partition: i32,
) -> Result<String, String> {
    let mut failures = Vec::new();
    for addr in bootstrap.split(',') {
        let answer = security.connect(addr, REQUEST_TIMEOUT).and_then(|mut c| {
            c.try_request::<MetadataRequest>(
                METADATA_V,
                &WireClient::metadata_request(&[topic], false),
            )
        });
        let md = match answer {
            Ok(md) => md,
            Err(e) => {
                failures.push(format!("{addr}: {e}"));
                continue;
            }
        };
        let leader = md
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .map(|p| p.leader_id.0);
        let broker = md.brokers.iter().find(|b| Some(b.node_id.0) == leader);
        match broker {
            Some(b) => return Ok(format!("{}:{}", b.host.as_str(), b.port)),
            None => failures.push(format!("{addr}: partition {partition} has no live leader")),
        }
    }
    Err(format!(
        "leader of {topic}-{partition}: {}",
        failures.join("; ")
    ))
}

/// One partition's runs, from offset 0 to the high watermark.
fn read_partition(client: &mut WireClient, topic: &str, partition: i32) -> Result<Vec<Op>, String> {
    let deadline = Instant::now() + PARTITION_READ_TIMEOUT;
    let mut runs: Vec<Op> = Vec::new();
    let mut offset = 0i64;
    loop {
        let req: FetchRequest = WireClient::fetch_request(topic, partition, offset, FETCH_WAIT_MS);
        let resp = client.try_request::<FetchRequest>(FETCH_V, &req)?;
        let pd = resp
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| {
                format!("Fetch {topic}-{partition} at {offset}: no partition in the answer")
            })?;
        if resp.error_code != 0 || pd.error_code != 0 {
            return Err(format!(
                "Fetch {topic}-{partition} at {offset}: error {} / {}",
                resp.error_code, pd.error_code
            ));
        }
        let data = pd.records.as_deref().unwrap_or_default();
        for b in parse_batches(data).map_err(|e| format!("{topic}-{partition} at {offset}: {e}"))? {
            if b.last_offset() < offset {
                continue; // a batch that starts before the fetch offset may come back
            }
            if !b.is_control() {
                extend(
                    &mut runs,
                    partition,
                    b.base_offset,
                    b.last_offset(),
                    b.producer_id,
                    b.producer_epoch,
                );
            }
            offset = b.last_offset() + 1;
        }
        if offset >= pd.high_watermark {
            return Ok(runs);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{topic}-{partition}: at offset {offset} after {PARTITION_READ_TIMEOUT:?}, high watermark {}",
                pd.high_watermark
            ));
        }
    }
}

/// Appends a batch to the last run when it continues it (same producer id and epoch),
/// else starts a new run.
fn extend(runs: &mut Vec<Op>, partition: i32, first: i64, last: i64, id: i64, epoch: i16) {
    if let Some(Op::ProducerRun {
        last_offset,
        producer_id,
        producer_epoch,
        ..
    }) = runs.last_mut()
    {
        if *producer_id == id && *producer_epoch == epoch {
            *last_offset = last;
            return;
        }
    }
    runs.push(Op::ProducerRun {
        partition,
        first_offset: first,
        last_offset: last,
        producer_id: id,
        producer_epoch: epoch,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_of_one_producer_epoch_fold_into_one_run() {
        let mut runs = Vec::new();
        extend(&mut runs, 0, 0, 4, 7, 0);
        extend(&mut runs, 0, 5, 9, 7, 0);
        extend(&mut runs, 0, 10, 10, 7, 1);
        extend(&mut runs, 0, 12, 15, 8, 1);
        let spans: Vec<(i64, i64, i64, i16)> = runs
            .iter()
            .map(|op| match op {
                Op::ProducerRun {
                    first_offset,
                    last_offset,
                    producer_id,
                    producer_epoch,
                    ..
                } => (*first_offset, *last_offset, *producer_id, *producer_epoch),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(spans, vec![(0, 9, 7, 0), (10, 10, 7, 1), (12, 15, 8, 1)]);
    }
}
