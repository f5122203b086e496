"""aiokafka (pinned in scripts/old-clients) against a running cluster: an idempotent producer
(acks=all), a group consumed with AIOKafkaConsumer(group_id=...) and explicit commits, and a
second run of the same group that must read only the one record produced after the first
run's commits. Every result is compared whole with what it must be.

    aiokafka_check.py --bootstrap HOST:PORT[,...] --replication-factor N
"""

import argparse
import asyncio
import sys
import uuid

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

PARTITIONS = 3
RECORDS = 50
# How long one wait for records may take before the run fails.
TIMEOUT_S = 30


def check(what, got, want):
    if got != want:
        sys.exit(f"FAIL {what}:\n  got  {got!r}\n  want {want!r}")
    print(f"  ok {what}")


async def produce(bootstrap, topic, records):
    """Sends (key, value) records from an idempotent producer (acks=all); returns
    {(partition, offset): (key, value)}."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await producer.start()
    try:
        futures = [(await producer.send(topic, key=k, value=v), (k, v)) for k, v in records]
        written = {}
        for future, record in futures:
            meta = await asyncio.wait_for(future, TIMEOUT_S)
            written[(meta.partition, meta.offset)] = record
    finally:
        await producer.stop()
    return written


async def consume_group(bootstrap, topic, group, count):
    """One run of `group`: reads `count` records, commits, and returns them with the offsets
    the coordinator then holds."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    got = {}
    try:
        async with asyncio.timeout(TIMEOUT_S):
            while len(got) < count:
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    for m in batch:
                        got[(m.partition, m.offset)] = (m.key, m.value)
        await consumer.commit()
        committed = {p: await consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        await consumer.stop()
    return got, committed


async def end_offsets(bootstrap, topic):
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
    finally:
        await consumer.stop()
    return {tp.partition: o for tp, o in ends.items()}


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--replication-factor", type=int, required=True)
    args = parser.parse_args()
    bootstrap = args.bootstrap.split(",")
    tag = uuid.uuid4().hex[:8]
    topic, group = f"aiokafka-{tag}", f"aiokafka-group-{tag}"
    print(f"== aiokafka {aiokafka.__version__}: topic {topic}")

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    created = await admin.create_topics([NewTopic(topic, PARTITIONS, args.replication_factor)])
    check("create_topics", [(t, e) for t, e, *_ in created.topic_errors], [(topic, 0)])

    records = [(b"key%d" % i, b"value%d" % i) for i in range(RECORDS)]
    written = await produce(bootstrap, topic, records)
    check("idempotent producer wrote every record once", sorted(written.values()), sorted(records))
    got, committed = await consume_group(bootstrap, topic, group, RECORDS)
    check("group run reads exactly the records written", got, written)
    check("committed offsets are the end offsets", committed, await end_offsets(bootstrap, topic))

    late = await produce(bootstrap, topic, [(b"late", b"record")])
    got, committed = await consume_group(bootstrap, topic, group, 1)
    check("second run of the group reads only the new record", got, late)
    check("committed offsets after the second run", committed, await end_offsets(bootstrap, topic))

    await admin.delete_topics([topic])
    await admin.close()
    print("== aiokafka: every check passed")


if __name__ == "__main__":
    asyncio.run(main())
