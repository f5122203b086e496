"""The kit itself: each bad input gives one BrookError naming its cause, and no cluster
outlives the program that started it."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_brook import Brook, BrookError

DEATH_WAIT_S = 30


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def await_gone(pids, what):
    deadline = time.monotonic() + DEATH_WAIT_S
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)], f"{what}: still running"


def test_unknown_kafka_config_key_is_named():
    with pytest.raises(BrookError, match='unknown config key "no.such.broker.key"'):
        Brook.start(config={"no.such.broker.key": "1"})


def test_port_in_use_is_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(BrookError, match=f"port 127.0.0.1:{port} is in use"):
            Brook.start(base_port=port)


def test_missing_binary_is_named(tmp_path):
    with pytest.raises(BrookError, match=f"brook binary not found: {tmp_path}/brook"):
        Brook.start(binary=tmp_path / "brook")


def test_wrong_architecture_is_named(tmp_path):
    elf = bytearray(64)
    elf[0:4] = b"\x7fELF"
    elf[18] = 0xB7  # aarch64; these tests run on x86_64
    fake = tmp_path / "brook"
    fake.write_bytes(bytes(elf))
    fake.chmod(0o755)
    with pytest.raises(BrookError, match="is built for aarch64, this machine is linux-x86_64"):
        Brook.start(binary=fake)


def test_topics_are_led_once_the_cluster_is_ready():
    with Brook.start(topics=["orders:3"]) as b:
        # Read once, no wait: the cluster counts as ready only when every partition has its leader.
        partitions = b.partitions_view("orders")["1"]["partitions"]
        assert [(p["partition"], p["role"]) for p in partitions] == [(0, "leader"), (1, "leader"), (2, "leader")]


def test_refused_topic_is_named():
    # One node cannot hold two replicas.
    with pytest.raises(BrookError, match="creating topic orders: InvalidReplicationFactor"):
        Brook.start(topics=["orders:1:2"])


def test_not_ready_in_time_stops_everything():
    t0 = time.monotonic()
    with pytest.raises(BrookError, match="not ready within 0.05 s"):
        Brook.start(nodes=3, ready_timeout=0.05)
    assert time.monotonic() - t0 < 20
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    await_gone([int(c) for c in children], "the supervisor of a cluster that was not ready")


def test_the_cluster_dies_with_the_program_that_started_it():
    # A program that starts a cluster, prints its processes, and waits to be killed.
    program = (
        "import sys, time; from pytest_brook import Brook; b = Brook.start(nodes=2); "
        "print(b.process.pid, *[n['pid'] for n in b.nodes()], flush=True); time.sleep(600)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, env=env)
    try:
        pids = [int(x) for x in p.stdout.readline().split()]
        assert len(pids) == 3 and all(alive(x) for x in pids)
        p.kill()  # SIGKILL: no handler, no atexit
        p.wait()
        await_gone(pids, "the supervisor and nodes of a SIGKILLed parent")
    finally:
        p.kill()
        p.stdout.close()


def test_nodes_die_with_a_killed_supervisor():
    b = Brook.start(nodes=1)
    try:
        node_pids = [n["pid"] for n in b.nodes()]
        os.kill(b.process.pid, signal.SIGKILL)
        b.process.wait()
        await_gone(node_pids, "the nodes of a SIGKILLed supervisor")
    finally:
        b.close()


#: How long closing a 3-node cluster may take: the nodes are killed, not shut down one by one
#: (a clean stop of all three at once waited out broker.session.timeout.ms, 3 s with the kit's
#: timings, 9 s at Kafka's default).
CLOSE_S_MAX = 3


def test_closing_three_nodes_is_quick_and_leaves_no_process():
    b = Brook.start(nodes=3)
    pids = [b.process.pid, *[n["pid"] for n in b.nodes()]]
    t0 = time.monotonic()
    b.close()
    took = time.monotonic() - t0
    assert not [p for p in pids if alive(p)], "a process outlived close()"
    assert took < CLOSE_S_MAX, f"close() of 3 nodes took {took:.1f} s"
    assert not b.directory.exists()
