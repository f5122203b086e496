"""Issue 32's Python benchmark: time from a test's first line to the first acknowledged produce
(acks=all, confluent-kafka), and resident memory, for the pytest-brook kit and for a Kafka 4.4
node of scripts/kafka-reference, alternating which goes first. Not part of CI.

    PYTHONPATH=kits/python/python BROOK_BIN=... python benches/kits-python/startup.py [--rounds 5] [--nodes 1] \
        [--release-bin target/release/brook]

Brook: ``Brook.start(topics=["bench"])`` (the topic created before it returns), and without it
(auto-created on the first produce). Kafka: ``scripts/kafka-reference start`` on storage formatted
beforehand (the format's own time is printed apart), then the topic created with the AdminClient,
as spring-kafka-test's embedded broker does. Memory: the whole RSS of every process of each
(Brook's supervisor and nodes; Kafka's JVMs), read at the first ack.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pytest_brook import Brook

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "scripts" / "kafka-reference"
#: Clear of the ports Brook's free-port picking and other benchmarks use.
KAFKA_BASE_PORT = 29092
#: Bound on one topic creation or first ack.
WAIT_S = 60


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def first_ack(bootstrap: str) -> None:
    acks = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    p.produce("bench", b"v", on_delivery=lambda err, msg: acks.append(err))
    deadline = time.monotonic() + WAIT_S
    while not acks and time.monotonic() < deadline:
        p.poll(0.002)
    if not acks or acks[0] is not None:
        raise RuntimeError(f"no acknowledgement: {acks}")


def brook(nodes: int, topic_at_start: bool, binary: str | None = None) -> tuple[float, int]:
    t0 = time.monotonic()
    kw = {"topics": [f"bench:1:{nodes}"]} if topic_at_start else {"config": {"auto.create.topics.enable": "true"}}
    kw["binary"] = binary
    with Brook.start(nodes=nodes, **kw) as b:
        first_ack(b.bootstrap_servers)
        ms = (time.monotonic() - t0) * 1000
        rss = rss_kb(b.process.pid) + sum(rss_kb(n["pid"]) for n in b.nodes())
    return ms, rss


def kafka(nodes: int) -> tuple[float, int, float]:
    data = tempfile.mkdtemp(prefix="kafka-bench-")
    args = ["--nodes", str(nodes), "--base-port", str(KAFKA_BASE_PORT), "--data-dir", data]
    try:
        t0 = time.monotonic()
        subprocess.run([str(REFERENCE), "format", *args], check=True, capture_output=True)
        format_ms = (time.monotonic() - t0) * 1000
        t0 = time.monotonic()
        out = subprocess.run([str(REFERENCE), "start", *args], check=True, capture_output=True, text=True).stdout
        ready = dict(f.split("=", 1) for f in out.split()[1:])
        admin = AdminClient({"bootstrap.servers": ready["bootstrap"]})
        admin.create_topics([NewTopic("bench", 1, nodes)])["bench"].result(WAIT_S)
        first_ack(ready["bootstrap"])
        ms = (time.monotonic() - t0) * 1000
        rss = sum(rss_kb(int(p)) for p in ready["pids"].split(","))
        return ms, rss, format_ms
    finally:
        subprocess.run([str(REFERENCE), "stop", "--data-dir", data], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--release-bin", help="also a release build of brook, topic at start")
    a = ap.parse_args()
    runs = {
        "brook, topic at start": lambda: brook(a.nodes, True),
        "brook, auto-created topic": lambda: brook(a.nodes, False),
        "kafka 4.4 (kafka-reference)": lambda: kafka(a.nodes),
    }
    if a.release_bin:
        runs["brook release, topic at start"] = lambda: brook(a.nodes, True, a.release_bin)
    results = {k: [] for k in runs}
    for r in range(a.rounds):
        order = list(runs) if r % 2 == 0 else list(reversed(runs))
        for name in order:
            res = runs[name]()
            results[name].append(res)
            extra = f", format {res[2]:.0f} ms" if len(res) > 2 else ""
            print(f"RESULT {a.nodes} node(s) {name:30} round {r + 1}: first ack {res[0]:7.0f} ms, RSS {res[1] // 1024:5d} MB{extra}",
                  flush=True)
    for name, rs in results.items():
        ms = [x[0] for x in rs]
        print(f"SUMMARY {a.nodes} node(s) {name:30} first ack median {statistics.median(ms):.0f} ms "
              f"({min(ms):.0f}-{max(ms):.0f}), RSS median {statistics.median([x[1] for x in rs]) / 1024:.0f} MB")


if __name__ == "__main__":
    main()
