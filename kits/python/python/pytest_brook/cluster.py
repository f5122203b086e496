"""The Brook cluster handle: ``brook cluster`` as a child process, driven through the
supervisor's HTTP API (tools/src/supervisor in the Brook repository) and the nodes' JSON
state views (docs/STATE-VIEWS.md), which the waits poll."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

#: Pause between two readings of a view in the waits; the condition decides, not this.
POLL_INTERVAL_S = 0.02
#: Bound on one call to the supervisor (a node restart waits for READY).
CALL_TIMEOUT_S = 90
#: How long close() lets the supervisor stop its nodes before it kills them.
STOP_TIMEOUT_S = 20
#: Lines of the supervisor's output an error message repeats.
TAIL_LINES = 30
#: How much of the last reading a wait's timeout error repeats, in characters.
LAST_SEEN_CHARS_MAX = 2000

_ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}


class BrookError(RuntimeError):
    """Why a Brook cluster could not be started or driven; the message names the cause."""


def _platform() -> str:
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    return f"{sys.platform.rstrip('0123456789')}-{arch}"


def check_binary(path: Path, source: str) -> Path:
    """Present, executable and (on Linux) an ELF file for this machine's architecture."""
    if not path.exists():
        raise BrookError(f"brook binary not found: {path} (from {source})")
    if not os.access(path, os.X_OK):
        raise BrookError(f"brook binary is not executable: {path} (from {source})")
    if not sys.platform.startswith("linux"):
        return path
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        raise BrookError(f"brook binary is not a Linux executable (no ELF header): {path} (from {source})")
    machine = int.from_bytes(head[18:20], "little")
    built = _ELF_MACHINES.get(machine, f"ELF machine {machine}")
    if f"linux-{built}" != _platform():
        raise BrookError(f"brook binary {path} (from {source}) is built for {built}, this machine is {_platform()}")
    return path


def find_binary(explicit: str | os.PathLike | None = None) -> Path:
    """``explicit``, else ``$BROOK_BIN``, else the ``brook`` this wheel installed next to Python."""
    if explicit:
        return check_binary(Path(explicit).absolute(), "the brook_bin option")
    if os.environ.get("BROOK_BIN"):
        return check_binary(Path(os.environ["BROOK_BIN"]).absolute(), "$BROOK_BIN")
    scripts = Path(sysconfig.get_path("scripts")) / "brook"
    if scripts.exists():
        return check_binary(scripts, "the pytest-brook wheel")
    found = shutil.which("brook")
    if not found:
        raise BrookError("no brook binary: install the pytest-brook wheel, or set BROOK_BIN")
    return check_binary(Path(found), "PATH")


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return f"(cannot read {path}: {e})"
    return f"last lines of {path}:\n" + "\n".join(lines[-TAIL_LINES:])


def _cause(directory: Path) -> str:
    """The supervisor's own error lines ("brook: ..."), else the tail of its stderr."""
    log = directory / "supervisor.log"
    try:
        own = [l[len("brook: "):] for l in log.read_text(errors="replace").splitlines() if l.startswith("brook: ")]
    except OSError:
        own = []
    return "; ".join(own) if own else _tail(log)


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the supervisor's children (read from /proc) and the supervisor."""
    for child in _children(proc.pid):
        try:
            os.kill(child, 9)
        except OSError:
            pass
    proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


class Brook:
    """A running cluster. Use ``Brook.start(...)`` (a context manager: ``with Brook.start() as b``)."""

    def __init__(self, proc: subprocess.Popen, directory: Path, keep_dir: bool, ready: dict, nodes: int):
        self.process = proc
        self.directory = directory
        self._keep_dir = keep_dir
        self._bootstrap = ready["bootstrap"]
        self.supervisor = ready["supervisor"]
        self.node_ids = list(range(1, nodes + 1))

    # ----------------------------------------------------------------------------------
    # Starting and stopping
    # ----------------------------------------------------------------------------------

    @classmethod
    def start(cls, nodes: int = 1, config: dict | None = None, base_port: int = 0, ready_timeout: float = 60,
              binary: str | os.PathLike | None = None, keep_dir: bool = False,
              topics: list[str] | None = None) -> "Brook":
        """Starts ``nodes`` nodes (ids 1..n, each a broker and a quorum voter) with Kafka broker
        ``config`` on every node, and waits until each lists every node as a broker.

        ``topics`` are created before it returns, each ``"name"``, ``"name:partitions"`` or
        ``"name:partitions:replication_factor"`` (the broker's defaults otherwise): every node
        then names a leader for each partition, so a first producer needs no metadata retry."""
        if nodes < 1:
            raise ValueError(f"nodes must be at least 1, not {nodes}")
        bin_path = find_binary(binary)
        deadline = time.monotonic() + ready_timeout
        directory = Path(tempfile.mkdtemp(prefix="brook-"))
        cmd = [str(bin_path), "cluster", "--nodes", str(nodes), "--base-port", str(base_port),
               "--supervisor-listener", "127.0.0.1:0", "--data-dir", str(directory), "--exit-on-stdin-eof",
               # The timings every kit sets (the supervisor's one list); ``config`` wins.
               "--test-timings",
               "--ready-timeout-secs", str(max(1, int(ready_timeout)))]
        for k, v in (config or {}).items():
            cmd += ["--override", f"{k}={v}"]
        for t in topics or []:
            cmd += ["--topic", t]
        with open(directory / "supervisor.log", "ab") as err:
            # stdin is a pipe this process holds: when it ends, however it ends, the pipe
            # closes and the supervisor stops the cluster (--exit-on-stdin-eof).
            proc = subprocess.Popen(cmd, cwd=directory, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=err)
        try:
            line = cls._await_ready_line(proc, directory, deadline, ready_timeout)
        except BaseException:
            _kill_tree(proc)
            if not keep_dir:
                shutil.rmtree(directory, ignore_errors=True)
            raise
        fields = dict(p.split("=", 1) for p in line.split()[2:] if "=" in p)
        brook = cls(proc, directory, keep_dir, fields, nodes)
        try:
            brook.await_brokers_registered(max(0.0, deadline - time.monotonic()))
        except BrookError as e:
            brook.close()
            raise BrookError(f"brook cluster of {nodes} did not become ready within {ready_timeout} s: {e}") from None
        return brook

    @staticmethod
    def _await_ready_line(proc, directory: Path, deadline: float, ready_timeout: float) -> str:
        found: list[str] = []
        done = threading.Event()

        def pump() -> None:
            with open(directory / "supervisor.out", "ab") as out:
                for raw in proc.stdout:
                    out.write(raw)
                    out.flush()
                    if not found and raw.startswith(b"CLUSTER READY "):
                        found.append(raw.decode().strip())
                        done.set()
            done.set()

        threading.Thread(target=pump, name="brook-cluster-stdout", daemon=True).start()
        if not done.wait(max(0.001, deadline - time.monotonic())):
            raise BrookError(f"brook cluster not ready within {ready_timeout} s; {_tail(directory / 'supervisor.log')}")
        if found:
            return found[0]
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = "still running"
        raise BrookError(f"brook cluster failed to start (exit code {code}): {_cause(directory)}")

    def close(self) -> None:
        """Kills every node, stops the supervisor (closing its stdin), then deletes the temp directory.

        The cluster is thrown away, as the Java kit's ``close()`` and Testcontainers do: a clean
        stop of every node at once would wait, since each node's controlled shutdown (Kafka's
        ``BrokerServer.shutdown``) needs the metadata quorum to commit it, and once most voters
        have gone the last ones give up only after ``broker.session.timeout.ms``. What a node
        acknowledged is on disk either way; ``stop(node)`` is the clean shutdown of one node."""
        if self.process.poll() is None:
            try:
                self._kill_nodes()
                self.process.stdin.close()
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                _kill_tree(self.process)
        if self.process.stdout:
            self.process.stdout.close()
        if not self._keep_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _kill_nodes(self) -> None:
        """SIGKILL every running node through the supervisor, which answers once it has reaped it."""
        try:
            running = [n["id"] for n in self.nodes() if n["alive"]]
        except BrookError:
            return  # the supervisor is not answering: closing its stdin, then _kill_tree, still stop it
        for node in running:
            try:
                self.kill(node)
            except BrookError:
                pass  # exited meanwhile (409); the supervisor reaps it either way

    def __enter__(self) -> "Brook":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Brook({len(self.node_ids)} nodes, bootstrap {self._bootstrap}, supervisor {self.supervisor})"

    # ----------------------------------------------------------------------------------
    # HTTP
    # ----------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://{self.supervisor}{path}", data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=CALL_TIMEOUT_S) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as e:
            raise BrookError(f"{method} {path}: status {e.code}: {e.read().decode(errors='replace')}") from None
        except OSError as e:
            raise BrookError(f"{method} {path} on the supervisor {self.supervisor}: {e}") from None
        return json.loads(text) if text else None

    # ----------------------------------------------------------------------------------
    # Addresses and nodes
    # ----------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """Every node's client address, comma-separated: ``bootstrap.servers``."""
        return self._bootstrap

    def nodes(self) -> list[dict]:
        """``GET /nodes``: each node's id, pid, alive, paused, ports, log file and last exit."""
        return self.request("GET", "/nodes")["nodes"]

    def live_node_ids(self) -> list[int]:
        return [n["id"] for n in self.nodes() if n["alive"]]

    def kill(self, node: int) -> None:
        """SIGKILL; returns once the process is gone. It stays down until ``start(node)``."""
        self.request("POST", f"/nodes/{node}/kill")

    def stop(self, node: int) -> None:
        """SIGTERM (a clean shutdown); returns once the process is gone."""
        self.request("POST", f"/nodes/{node}/kill?signal=term")

    def start_node(self, node: int) -> None:
        """Starts a stopped node with its data and ports; waits until every live node lists it."""
        self.request("POST", f"/nodes/{node}/start")
        self.await_brokers_registered(CALL_TIMEOUT_S)

    def restart(self, node: int) -> None:
        self.request("POST", f"/nodes/{node}/restart")
        self.await_brokers_registered(CALL_TIMEOUT_S)

    def pause(self, node: int) -> None:
        """SIGSTOP: the node keeps its connections but answers nothing."""
        self.request("POST", f"/nodes/{node}/pause")

    def resume(self, node: int) -> None:
        self.request("POST", f"/nodes/{node}/resume")

    # ----------------------------------------------------------------------------------
    # Faults (docs/FAULTS.md)
    # ----------------------------------------------------------------------------------

    def add_fault(self, node: int, **rule) -> int:
        """Installs a rule on ``node`` (``action="error", api="produce", error_code=19``); its id."""
        return self.request("POST", f"/nodes/{node}/faults", rule)["id"]

    def faults(self, node: int) -> list[dict]:
        return self.request("GET", f"/nodes/{node}/faults")["rules"]

    def remove_fault(self, node: int, rule: int) -> None:
        self.request("DELETE", f"/nodes/{node}/faults/{rule}")

    def clear_faults(self, node: int) -> None:
        self.request("DELETE", f"/nodes/{node}/faults")

    # ----------------------------------------------------------------------------------
    # State views, every node's under its id, and waits on them
    # ----------------------------------------------------------------------------------

    def cluster_view(self) -> dict:
        return self.request("GET", "/v1/cluster")["nodes"]

    def partitions_view(self, topic: str) -> dict:
        return self.request("GET", "/v1/partitions?topic=" + urllib.parse.quote(topic, safe=""))["nodes"]

    def groups_view(self) -> dict:
        return self.request("GET", "/v1/groups")["nodes"]

    def producers_view(self, topic: str, partition: int) -> dict:
        q = urllib.parse.urlencode({"topic": topic, "partition": partition})
        return self.request("GET", "/v1/producers?" + q)["nodes"]

    def leader_entry(self, topic: str, partition: int) -> dict | None:
        """The partition's entry on the node that leads it, or None."""
        for view in self.partitions_view(topic).values():
            for p in view.get("partitions") or []:
                if p["partition"] == partition and p["role"] == "leader":
                    return p
        return None

    def leader(self, topic: str, partition: int) -> int:
        e = self.leader_entry(topic, partition)
        return -1 if e is None else e["leader"]

    def wait(self, what: str, timeout: float, read, accept):
        """Reads with ``read`` until ``accept`` gives non-None, or ``timeout`` passes: then
        raises with the last reading."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                v = read()
                t = accept(v)
                if t is not None:
                    return t
                last = json.dumps(v)
            except (BrookError, KeyError, TypeError) as e:
                last = repr(e)
            if time.monotonic() >= deadline:
                raise BrookError(f"{what}: not reached within {timeout} s; last seen: {last[:LAST_SEEN_CHARS_MAX]}")
            time.sleep(POLL_INTERVAL_S)

    def await_leader(self, topic: str, partition: int, timeout: float = 30) -> int:
        return self.wait(f"{topic}-{partition} has a leader", timeout, lambda: self.leader_entry(topic, partition),
                         lambda e: None if e is None else e["leader"])

    def await_isr_size(self, topic: str, partition: int, size: int, timeout: float = 30) -> dict:
        return self.wait(f"{topic}-{partition}: an ISR of {size}", timeout, lambda: self.leader_entry(topic, partition),
                         lambda e: e if e is not None and len(e["isr"]) == size else None)

    def await_high_watermark(self, topic: str, partition: int, offset: int, timeout: float = 30) -> int:
        return self.wait(f"{topic}-{partition}: a high watermark of at least {offset}", timeout,
                         lambda: self.leader_entry(topic, partition),
                         lambda e: e["high_watermark"] if e is not None and e["high_watermark"] >= offset else None)

    def await_stable_group(self, group_id: str, generation: int = 0, timeout: float = 30) -> dict:
        def accept(view):
            for v in view.values():
                for g in v.get("groups") or []:
                    if g["group_id"] == group_id and g["state"] == "Stable" and (g["generation"] or 0) >= generation:
                        return g
            return None

        return self.wait(f"group {group_id}: Stable at generation {generation} or later", timeout,
                         self.groups_view, accept)

    def await_brokers_registered(self, timeout: float = 30) -> None:
        """Waits until every live node lists every live node as an unfenced broker."""

        def accept(view):
            live = set(self.live_node_ids())
            for node in live:
                brokers = (view.get(str(node)) or {}).get("controller") or {}
                seen = {b["id"] for b in brokers.get("brokers") or [] if not b["fenced"]}
                if not live <= seen:
                    return None
            return True

        self.wait("every live node lists every live node as an unfenced broker", timeout, self.cluster_view, accept)
