"""kafka-python pinned to an old protocol (api_version=(0, 11) and (1, 0)) against a running
cluster: produce, a group's consume with commits, offsets by time, and its admin calls, each
result compared whole with what it must be. Run by scripts/old-clients, which installs the
pinned kafka-python.

    old_clients_kafka_python.py --bootstrap HOST:PORT[,...] --replication-factor N

api_version fixes the request versions kafka-python sends (it does not negotiate them): at
(0, 11) Produce v3, Fetch v5, ListOffsets v2, Metadata v4, JoinGroup v2, OffsetCommit v3,
CreateTopics v2, DeleteTopics v1, DescribeConfigs v0; at (1, 0) Produce v5, Fetch v6,
Metadata v5. Kafka 4.4 serves DescribeConfigs from v1 (KIP-896 removed v0), so describe
configs runs at (1, 1), the first version that sends v1, and at the pinned versions the
connection is closed, as Kafka 4.4 closes it for a version it does not serve.
"""

import argparse
import sys
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import KafkaConnectionError, KafkaTimeoutError

PARTITIONS = 3
RECORDS = 30
RECORD_SPACING_MS = 10
# How long one client call or one wait for records may take before the run fails.
TIMEOUT_S = 30
RETENTION_MS = "3600000"


def check(what, got, want):
    if got != want:
        sys.exit(f"FAIL {what}:\n  got  {got!r}\n  want {want!r}")
    print(f"  ok {what}")


def produce(bootstrap, version, topic, records):
    """Sends (key, value, timestamp_ms) records with acks=all; returns {(partition, offset): record}."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=version, acks="all")
    futures = [
        (producer.send(topic, key=k, value=v, timestamp_ms=ts), (k, v, ts)) for k, v, ts in records
    ]
    producer.flush(timeout=TIMEOUT_S)
    written = {}
    for future, record in futures:
        meta = future.get(timeout=TIMEOUT_S)
        written[(meta.partition, meta.offset)] = record
    producer.close()
    return written


def consume_group(bootstrap, version, topic, group, count):
    """Reads `count` records as a member of `group`, commits them, and returns them with the
    offsets the coordinator then holds."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        api_version=version,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got = {}
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            for m in batch:
                got[(m.partition, m.offset)] = (m.key, m.value, m.timestamp)
    # One more poll: a record beyond `count` would show here.
    for batch in consumer.poll(timeout_ms=500).values():
        for m in batch:
            got[(m.partition, m.offset)] = (m.key, m.value, m.timestamp)
    consumer.commit()
    committed = {p: consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    consumer.close()
    return got, committed


def offsets_by_time(bootstrap, version, topic, written, probes):
    """ListOffsets by timestamp (and earliest/latest) against what was written."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=version)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    for probe in probes:
        found = consumer.offsets_for_times({tp: probe for tp in tps})
        got = {tp.partition: (o.offset, o.timestamp) if o else None for tp, o in found.items()}
        want = {}
        for p in range(PARTITIONS):
            later = sorted((o, r[2]) for (q, o), r in written.items() if q == p and r[2] >= probe)
            want[p] = later[0] if later else None
        check(f"offsets_for_times({probe})", got, want)
    ends = {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
    want_ends = {p: sum(1 for (q, _) in written if q == p) for p in range(PARTITIONS)}
    check("end_offsets", ends, want_ends)
    starts = {tp.partition: o for tp, o in consumer.beginning_offsets(tps).items()}
    check("beginning_offsets", starts, {p: 0 for p in range(PARTITIONS)})
    consumer.close()


def topic_admin(admin, topic, replication_factor):
    result = admin.create_topics(
        [NewTopic(topic, PARTITIONS, replication_factor, topic_configs={"retention.ms": RETENTION_MS})],
        timeout_ms=TIMEOUT_S * 1000,
    )
    check("create_topics", [(t, e) for t, e, _ in result.topic_errors], [(topic, 0)])
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        described = admin.describe_topics([topic])
        parts = described[0]["partitions"] if described and described[0]["error_code"] == 0 else []
        if len(parts) == PARTITIONS and all(p["leader"] >= 0 for p in parts):
            break
        if time.monotonic() > deadline:
            sys.exit(f"FAIL describe_topics: {described!r}")
        time.sleep(0.1)
    shape = sorted(
        (p["partition"], p["error_code"], len(p["replicas"]), sorted(p["isr"]) == sorted(p["replicas"]),
         p["leader"] in p["replicas"])
        for p in parts
    )
    check("describe_topics", shape, [(p, 0, replication_factor, True, True) for p in range(PARTITIONS)])


def describe_configs(bootstrap, version, topic):
    """At (1, 1): DescribeConfigs v1, the oldest Kafka 4.4 serves."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=(1, 1))
    response = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])[0]
    (error, _, rtype, name, entries), = response.resources
    check("describe_configs resource", (error, rtype, name), (0, ConfigResourceType.TOPIC.value, topic))
    by_name = {e[0]: e for e in entries}
    # (name, value, read_only, config_source, is_sensitive): 1 = TOPIC_CONFIG, 5 = DEFAULT_CONFIG.
    check("describe_configs retention.ms", by_name["retention.ms"][:4], ("retention.ms", RETENTION_MS, False, 1))
    check("describe_configs cleanup.policy", by_name["cleanup.policy"][:4], ("cleanup.policy", "delete", False, 5))
    admin.close()
    # At the pinned version the request is DescribeConfigs v0: the connection is closed.
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=version)
    try:
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        sys.exit("FAIL describe_configs v0 was answered; Kafka 4.4 serves v1-v4")
    except (KafkaConnectionError, KafkaTimeoutError) as e:
        print(f"  ok describe_configs v0 closes the connection ({type(e).__name__})")
    admin.close()


def group_admin(admin, topic, group, committed):
    groups = admin.list_consumer_groups()
    check("list_consumer_groups has the group", [g for g in groups if g[0] == group], [(group, "consumer")])
    (described,) = admin.describe_consumer_groups([group])
    check(
        "describe_consumer_groups",
        (described.group, described.state, described.protocol_type, described.members),
        (group, "Empty", "consumer", []),
    )
    offsets = admin.list_consumer_group_offsets(group)
    got = {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == topic}
    check("list_consumer_group_offsets", got, committed)


def delete_topic(admin, topic):
    result = admin.delete_topics([topic], timeout_ms=TIMEOUT_S * 1000)
    check("delete_topics", [(t, e) for t, e in result.topic_error_codes], [(topic, 0)])
    deadline = time.monotonic() + TIMEOUT_S
    while topic in admin.list_topics():
        if time.monotonic() > deadline:
            sys.exit(f"FAIL {topic} still listed {TIMEOUT_S} s after delete_topics")
        time.sleep(0.1)
    print("  ok topic gone from list_topics")


def run(bootstrap, version, replication_factor):
    tag = f"{version[0]}-{version[1]}-{uuid.uuid4().hex[:8]}"
    topic, group = f"old-kafka-python-{tag}", f"old-kafka-python-group-{tag}"
    print(f"== kafka-python api_version={version}: topic {topic}")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=version)
    topic_admin(admin, topic, replication_factor)

    # Timestamps a minute back, RECORD_SPACING_MS apart: inside retention, before now.
    t0 = int(time.time() * 1000) - 60_000
    records = [(b"k%d" % i, b"v%d" % i, t0 + i * RECORD_SPACING_MS) for i in range(RECORDS)]
    written = produce(bootstrap, version, topic, records)
    counts = {p: sum(1 for (q, _) in written if q == p) for p in range(PARTITIONS)}
    check("produced offsets", sorted(written), [(p, o) for p in range(PARTITIONS) for o in range(counts[p])])

    got, committed = consume_group(bootstrap, version, topic, group, RECORDS)
    check("group consume: every record once", got, written)
    want_committed = dict(counts)
    check("committed offsets", committed, want_committed)

    # The group again, from its committed offsets: only a new record.
    late = produce(bootstrap, version, topic, [(b"late", b"late", t0 + RECORDS * RECORD_SPACING_MS)])
    got, committed = consume_group(bootstrap, version, topic, group, 1)
    check("second run of the group reads only the new record", got, late)
    written.update(late)
    (late_partition, _), = late
    want_committed[late_partition] += 1
    check("committed offsets after the second run", committed, want_committed)

    probes = [t0 - 1, t0 + (RECORDS // 2) * RECORD_SPACING_MS + 5, t0 + RECORDS * RECORD_SPACING_MS + 1]
    offsets_by_time(bootstrap, version, topic, written, probes)
    group_admin(admin, topic, group, want_committed)
    describe_configs(bootstrap, version, topic)
    delete_topic(admin, topic)
    admin.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--replication-factor", type=int, required=True)
    args = parser.parse_args()
    for version in [(0, 11), (1, 0)]:
        run(args.bootstrap.split(","), version, args.replication_factor)
    print("== kafka-python: every check passed")


if __name__ == "__main__":
    main()
