"""A user's tests: the pytest-brook wheel and confluent-kafka, nothing else.

`brook_cluster` is three nodes for this module (min.insync.replicas=2); each test has its own
topic."""

import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

WAIT_S = 30


def create_topic(brook, topic, partitions=1):
    admin = AdminClient({"bootstrap.servers": brook.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(WAIT_S)
    for p in range(partitions):
        brook.await_isr_size(topic, p, 3)


def producer(brook, **extra):
    return Producer({"bootstrap.servers": brook.bootstrap_servers, "acks": "all",
                     "enable.idempotence": True, **extra})


def consume(brook, topic, group, n, isolation="read_uncommitted"):
    c = Consumer({"bootstrap.servers": brook.bootstrap_servers, "group.id": group,
                  "auto.offset.reset": "earliest", "isolation.level": isolation})
    c.subscribe([topic])
    values = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(values) < n and time.monotonic() < deadline:
            for m in c.consume(n - len(values), 0.2):
                if m.error() is None:
                    values.append(m.value().decode())
        brook.await_stable_group(group)
        c.commit(asynchronous=False)
    finally:
        c.close()
    return values


def produce_all(p, topic, values, failures=None, flush=True):
    failures = [] if failures is None else failures
    for v in values:
        p.produce(topic, v.encode(), on_delivery=lambda err, _m: err and failures.append(err))
    if flush:
        assert p.flush(WAIT_S * 2) == 0
        assert failures == []


def test_produce_and_consume_in_a_group(brook_cluster):
    create_topic(brook_cluster, "orders", 3)
    produce_all(producer(brook_cluster), "orders", [f"order-{i}" for i in range(30)])
    assert sorted(consume(brook_cluster, "orders", "billing", 30)) == sorted(f"order-{i}" for i in range(30))


def test_a_transaction_commits_and_aborts_as_a_unit(brook_cluster):
    create_topic(brook_cluster, "ledger")
    p = producer(brook_cluster, **{"transactional.id": "ledger-writer"})
    p.init_transactions(WAIT_S)
    p.begin_transaction()
    p.produce("ledger", b"aborted")
    p.abort_transaction(WAIT_S)
    p.begin_transaction()
    p.produce("ledger", b"committed-1")
    p.produce("ledger", b"committed-2")
    p.commit_transaction(WAIT_S)
    assert consume(brook_cluster, "ledger", "auditors", 2, "read_committed") == ["committed-1", "committed-2"]


def test_a_leader_kill_loses_no_acknowledged_record(brook_cluster):
    create_topic(brook_cluster, "payments")
    old = brook_cluster.leader("payments", 0)
    p = producer(brook_cluster, **{"delivery.timeout.ms": 60000})
    failures = []
    # The kill comes while the first hundred are still in flight.
    produce_all(p, "payments", [f"payment-{i}" for i in range(100)], failures, flush=False)
    brook_cluster.kill(old)
    try:
        produce_all(p, "payments", [f"payment-{i}" for i in range(100, 200)], failures)
        assert brook_cluster.await_leader("payments", 0) != old
        brook_cluster.await_high_watermark("payments", 0, 200)
        got = consume(brook_cluster, "payments", "payments-check", 200)
        assert got == [f"payment-{i}" for i in range(200)], "every acknowledged record once, in order"
    finally:
        brook_cluster.start_node(old)


def test_a_fault_rule_is_retried_through(brook_cluster):
    create_topic(brook_cluster, "audit")
    leader = brook_cluster.leader("audit", 0)
    # NOT_ENOUGH_REPLICAS (19) once: a retriable error the producer retries.
    rule = brook_cluster.add_fault(leader, action="error", api="produce", topic="audit", error_code=19, times=1)
    produce_all(producer(brook_cluster), "audit", ["entry"])
    assert [r["fired"] for r in brook_cluster.faults(leader)] == [1]
    brook_cluster.remove_fault(leader, rule)
