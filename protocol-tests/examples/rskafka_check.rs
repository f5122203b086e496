//! rskafka (a pure-Rust client with no consumer groups; pinned in protocol-tests' Cargo.toml)
//! against a running cluster: per partition, records produced (rskafka always sends acks=all)
//! and fetched back by offset, ListOffsets earliest/latest/by timestamp, DeleteRecords and the
//! earliest offset after it. Every result is compared whole with what it must be. Run by
//! scripts/old-clients (cargo test --workspace builds it):
//!
//!   rskafka_check --bootstrap HOST:PORT[,...] --replication-factor N

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::{Duration, Instant};

use rskafka::chrono::{TimeZone, Utc};
use rskafka::client::error::{Error, ProtocolError};
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;

const PARTITIONS: i32 = 3;
/// Records per partition, sent in two produce requests.
const RECORDS: i64 = 20;
/// How long one wait for records may take before the run fails.
const TIMEOUT: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT_MS: i32 = 30_000;
const FETCH_MAX_WAIT_MS: i32 = 500;
/// Records deleted from the front of each partition by DeleteRecords.
const DELETED: i64 = 5;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn check<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Result<()> {
    if got != want {
        return Err(format!("FAIL {what}:\n  got  {got:?}\n  want {want:?}").into());
    }
    println!("  ok {what}");
    Ok(())
}

/// Record `i` of partition `p`: key, value, a header and a timestamp one second apart.
fn record(p: i32, i: i64) -> Record {
    Record {
        key: Some(format!("key{p}-{i}").into_bytes()),
        value: Some(format!("value{p}-{i}").into_bytes()),
        headers: BTreeMap::from([("h".to_string(), format!("{i}").into_bytes())]),
        timestamp: Utc
            .timestamp_millis_opt(1_700_000_000_000 + i * 1000)
            .unwrap(),
    }
}

/// Reads records from `from` until `count` are there; returns them with their offsets.
async fn fetch_all(
    client: &PartitionClient,
    from: i64,
    count: usize,
) -> Result<Vec<(i64, Record)>> {
    let deadline = Instant::now() + TIMEOUT;
    let mut got = Vec::new();
    let mut next = from;
    while got.len() < count {
        if Instant::now() > deadline {
            return Err(format!(
                "FAIL fetch: {} of {count} records in {TIMEOUT:?}",
                got.len()
            )
            .into());
        }
        let (records, _high_watermark) = client
            .fetch_records(next, 1..1_000_000, FETCH_MAX_WAIT_MS)
            .await?;
        for r in records {
            next = r.offset + 1;
            got.push((r.offset, r.record));
        }
    }
    Ok(got)
}

async fn check_partition(client: &PartitionClient) -> Result<()> {
    let p = client.partition();
    let records: Vec<Record> = (0..RECORDS).map(|i| record(p, i)).collect();
    let half = records.len() / 2;
    let mut offsets = client
        .produce(records[..half].to_vec(), Compression::NoCompression)
        .await?;
    offsets.extend(
        client
            .produce(records[half..].to_vec(), Compression::NoCompression)
            .await?,
    );
    check(
        &format!("partition {p}: produced offsets"),
        offsets,
        (0..RECORDS).collect(),
    )?;

    let want: Vec<(i64, Record)> = (0..RECORDS).zip(records).collect();
    check(
        &format!("partition {p}: fetched records"),
        fetch_all(client, 0, want.len()).await?,
        want.clone(),
    )?;
    check(
        &format!("partition {p}: earliest"),
        client.get_offset(OffsetAt::Earliest).await?,
        0,
    )?;
    check(
        &format!("partition {p}: latest"),
        client.get_offset(OffsetAt::Latest).await?,
        RECORDS,
    )?;
    let at = want[7].1.timestamp - rskafka::chrono::Duration::milliseconds(1);
    check(
        &format!("partition {p}: offset by timestamp"),
        client.get_offset(OffsetAt::Timestamp(at)).await?,
        7,
    )?;

    client.delete_records(DELETED, REQUEST_TIMEOUT_MS).await?;
    check(
        &format!("partition {p}: earliest after DeleteRecords"),
        client.get_offset(OffsetAt::Earliest).await?,
        DELETED,
    )?;
    let below = client
        .fetch_records(0, 1..1_000_000, FETCH_MAX_WAIT_MS)
        .await;
    let out_of_range = matches!(
        below,
        Err(Error::ServerError {
            protocol_error: ProtocolError::OffsetOutOfRange,
            ..
        })
    );
    check(
        &format!("partition {p}: fetch below earliest is OFFSET_OUT_OF_RANGE"),
        out_of_range,
        true,
    )?;
    let rest = fetch_all(client, DELETED, (RECORDS - DELETED) as usize).await?;
    check(
        &format!("partition {p}: fetched from earliest"),
        rest,
        want[DELETED as usize..].to_vec(),
    )
}

async fn run(bootstrap: Vec<String>, replication_factor: i16) -> Result<()> {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    let topic = format!("rskafka-{:x}", since_epoch.as_nanos());
    println!("== rskafka 0.6.0: topic {topic}");
    let client = ClientBuilder::new(bootstrap)
        .client_id("brook-rskafka-check")
        .build()
        .await?;
    let controller = client.controller_client()?;
    controller
        .create_topic(
            topic.as_str(),
            PARTITIONS,
            replication_factor,
            REQUEST_TIMEOUT_MS,
        )
        .await?;
    println!("  ok create_topic");
    for p in 0..PARTITIONS {
        let partition = client
            .partition_client(topic.as_str(), p, UnknownTopicHandling::Retry)
            .await?;
        check_partition(&partition).await?;
    }
    controller
        .delete_topic(topic.as_str(), REQUEST_TIMEOUT_MS)
        .await?;
    println!("  ok delete_topic");
    Ok(())
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(bootstrap), Some(rf)) = (
        arg(&args, "--bootstrap"),
        arg(&args, "--replication-factor"),
    ) else {
        eprintln!("usage: rskafka_check --bootstrap HOST:PORT[,...] --replication-factor N");
        std::process::exit(2);
    };
    let Ok(rf) = rf.parse::<i16>() else {
        eprintln!("rskafka_check: --replication-factor {rf} is not a number");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let bootstrap = bootstrap.split(',').map(str::to_string).collect();
    if let Err(e) = runtime.block_on(run(bootstrap, rf)) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    println!("== rskafka: every check passed");
}
