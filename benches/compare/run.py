#!/usr/bin/env python3
"""Brook next to Apache Kafka 4.4.0: the same workloads, the same client tools, alternating.

    scripts/kafka-reference fetch
    cargo build --release --bin brook
    python3 benches/compare/run.py                      # full: 1,000,000 records, 4 alternations
    python3 benches/compare/run.py --records 200000 --reps 2   # reduced
    python3 benches/compare/run.py --records 200000 --reps 3 --txn-only   # W7, W8, W9 alone
    cargo build --release -p brook-benches --bin handshakes
    python3 benches/compare/run.py --records 500000 --reps 2 --tls-only   # secured, below

Each alternation runs Brook, then Kafka (A B A B ...), each on fresh data directories:
  start one node (timed: process start until the first acks=all produce succeeds; idle RSS),
  W1 produce 1 KiB records acks=1 RF=1 (ProducerPerformance), RSS after W1,
  W4 consume W1's topic (ConsumerPerformance), W3 produce 100-byte records acks=1,
  W6 end-to-end latency at a fixed rate (E2eLatency.java),
  W7 produce 1 KiB records acks=all with idempotence, W8 the same records in transactions
  of --txn-ms each (ProducerPerformance --transactional-id --transaction-duration-ms),
  W9 the latency of commitTransaction() itself (TxnCommitLatency.java: transactions of 10
  records over 3 partitions, each flushed before the commit is timed), stop;
  start three nodes (timed, idle RSS per node), W2 produce 1 KiB acks=all RF=3
  min.insync.replicas=2, stop.
--tls-only runs the secured workloads instead (issue 29): one node per system serving
PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) listeners from the same settings and certificates
(class Security: `brook certs` once per run, PKCS12 stores for both; the SCRAM user made with
kafka-configs), new connections per second over SSL (TLS handshake + ApiVersions) and SASL_SSL
(+ the SCRAM login) with benches/src/bin/handshakes.rs, then W1 and W4 over each listener, so
each system's CPU per GiB over TLS can be set against its own over PLAINTEXT.
Broker CPU is utime+stime from /proc/<pid>/stat of every broker process (for Brook's cluster,
the supervisor and its `brook serve` children), read before and after each tool run.
Prints a table of medians and Brook/Kafka ratios; --json FILE keeps every sample.
Python 3 standard library only; the client tools are Kafka's own (kafka-tools 4.4.0).

--suite rdkafka runs librdkafka's side instead, with the project's load generator
(`cargo build --release -p brook-protocol-tests --bin rdkafka_load`), which batches as
librdkafka's own performance tool does: on one node and on three (RF=3,
min.insync.replicas=2), acks=all with idempotence, records of 100 B and 1 KiB into topics of
1 and 12 partitions, from --rd-producers producers: peak throughput, broker CPU and minor page
faults per GiB, then the delivery latency at half the peak rate (p50/p99/p99.9); and the
throughput of one consumer reading the 1 KiB, 12-partition topic back. The load generator
runs on the same cores as the brokers, so its CPU is taken from theirs, for Kafka and Brook
alike (about three quarters of the machine in a single-node 1 KiB run).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB = os.environ.get("KAFKA_REFERENCE_LIB", os.path.join(ROOT, "target", "kafka-reference", "lib"))
WORK = os.path.join(ROOT, "target", "compare")
CLK = os.sysconf("SC_CLK_TCK")
TOOL_JVM = ["-Xmx512M", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
BROOK_PORT, KAFKA_PORT = 29092, 19092
RD_LOAD = os.environ.get("RDKAFKA_LOAD", os.path.join(ROOT, "target", "release", "rdkafka_load"))


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- /proc

def children_map():
    m = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    s = f.read()
                ppid = int(s[s.rindex(")") + 2:].split()[1])
                m.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError):
                pass
    return m


def tree(pid):
    m, out, todo = children_map(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(m.get(p, []))
    return out


def cpu_seconds(pids):
    t = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                s = f.read()
            fields = s[s.rindex(")") + 2:].split()
            t += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        except OSError:
            pass
    return t / CLK


def minor_faults(pids):
    """Minor page faults of `pids` so far: memory the processes touched for the first time
    (or again after giving it back), each a fresh page from the kernel."""
    n = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                s = f.read()
            n += int(s[s.rindex(")") + 2:].split()[7])  # minflt (field 10)
        except OSError:
            pass
    return n


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


# ---------------------------------------------------------------- a tiny Kafka client (start-up probe)

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _crc32c_table()


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = _T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if n & ~0x7F:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        else:
            out.append(n)
            return bytes(out)


def kstr(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def one_record_batch(value):
    rec = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(len(value)) + value + varint(0)
    rec = varint(len(rec)) + rec
    now = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", 0, 0, now, now, -1, -1, -1, 1) + rec
    body = struct.pack(">ib", -1, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(body)) + body


class Conn:
    def __init__(self, host, port, timeout=2.0):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def call(self, key, ver, body):
        self.cid += 1
        req = struct.pack(">hhi", key, ver, self.cid) + kstr("brook-compare") + body
        self.s.sendall(struct.pack(">i", len(req)) + req)
        n = struct.unpack(">i", self._read(4))[0]
        resp = self._read(n)
        return resp[4:]

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            c = self.s.recv(n - len(buf))
            if not c:
                raise ConnectionError("closed")
            buf += c
        return buf

    def close(self):
        self.s.close()


class Rd:
    def __init__(self, b):
        self.b, self.i = b, 0

    def u(self, fmt):
        v = struct.unpack_from(">" + fmt, self.b, self.i)
        self.i += struct.calcsize(">" + fmt)
        return v[0]

    def s(self):
        n = self.u("h")
        if n < 0:
            return None
        v = self.b[self.i:self.i + n].decode()
        self.i += n
        return v


def metadata_leader(conn, topic):
    """Metadata v4 (auto-create): (error, leader host, leader port)."""
    r = Rd(conn.call(3, 4, struct.pack(">i", 1) + kstr(topic) + b"\x01"))
    r.u("i")
    brokers = {}
    for _ in range(r.u("i")):
        nid, host, port = r.u("i"), r.s(), r.u("i")
        r.s()
        brokers[nid] = (host, port)
    r.s()
    r.u("i")
    for _ in range(r.u("i")):
        err, _name, _internal = r.u("h"), r.s(), r.u("b")
        if err:
            return err, None, None
        for _ in range(r.u("i")):
            perr, idx, leader = r.u("h"), r.u("i"), r.u("i")
            for _ in range(r.u("i")):
                r.u("i")
            for _ in range(r.u("i")):
                r.u("i")
            if idx == 0:
                if perr or leader not in brokers:
                    return perr or -1, None, None
                return 0, brokers[leader][0], brokers[leader][1]
    return -1, None, None


def produce_acks_all(conn, topic, value):
    """Produce v7, acks=-1, one record to partition 0: the partition's error code."""
    recs = one_record_batch(value)
    body = struct.pack(">hhi", -1, -1, 30000) + struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", 1) \
        + struct.pack(">ii", 0, len(recs)) + recs
    r = Rd(conn.call(0, 7, body))
    r.u("i")
    r.s()
    r.u("i")
    r.u("i")
    return r.u("h")


def wait_first_produce(bootstrap, topic, t0, limit=180.0):
    """Seconds from t0 until one acks=all produce to `topic` (auto-created) succeeds."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    while time.monotonic() - t0 < limit:
        try:
            c = Conn(host, int(port))
            try:
                err, lh, lp = metadata_leader(c, topic)
                if err == 0:
                    lc = Conn(lh, lp) if (lh, lp) != (host, int(port)) else c
                    try:
                        if produce_acks_all(lc, topic, b"probe-\x01\x02\x03") == 0:
                            return time.monotonic() - t0
                    finally:
                        if lc is not c:
                            lc.close()
            finally:
                c.close()
        except (OSError, ConnectionError, struct.error):
            pass
        time.sleep(0.005)
    raise RuntimeError(f"no successful acks=all produce on {bootstrap} within {limit} s")


# ---------------------------------------------------------------- systems

class Brook:
    name = "brook"

    def __init__(self, binary):
        self.binary = binary
        self.proc = None

    def start(self, nodes, data, security=None):
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(data)
        self.logf = open(os.path.join(data, "brook.log"), "w")
        if nodes == 1:
            listeners = security.overrides(BROOK_PORT) if security else \
                [f"listeners=PLAINTEXT://127.0.0.1:{BROOK_PORT}"]
            cmd = [self.binary, "serve", "--override", "node.id=1", "--override", f"log.dirs={data}/node-1"]
            for o in listeners:
                cmd += ["--override", o]
            self.bootstrap = f"127.0.0.1:{BROOK_PORT}"
        else:
            cmd = [self.binary, "cluster", "--nodes", "3", "--data-dir", data, "--base-port", str(BROOK_PORT),
                   "--supervisor-listener", f"127.0.0.1:{BROOK_PORT + 508}",
                   "--override", "default.replication.factor=3", "--override", "min.insync.replicas=2"]
            self.bootstrap = ",".join(f"127.0.0.1:{BROOK_PORT + i}" for i in range(3))
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, cwd=data)
        startup = wait_first_produce(self.bootstrap, "startup-probe", t0)
        self.nodes = nodes
        return startup

    def node_pids(self):
        if self.nodes == 1:
            return [self.proc.pid]
        return [p for p in tree(self.proc.pid) if p != self.proc.pid]

    def cpu_pids(self):
        return tree(self.proc.pid)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            for p in tree(self.proc.pid):
                os.kill(p, signal.SIGKILL)
            self.proc.wait()
        self.logf.close()


class Kafka:
    name = "kafka"

    def start(self, nodes, data, security=None):
        script = os.path.join(ROOT, "scripts", "kafka-reference")
        shutil.rmtree(data, ignore_errors=True)
        args = ["--nodes", str(nodes), "--base-port", str(KAFKA_PORT), "--data-dir", data]
        if nodes == 3:
            args += ["--override", "default.replication.factor=3", "--override", "min.insync.replicas=2"]
        if security:
            # kafka-reference appends overrides to each node's properties, where the last
            # `listeners` line wins; its controller listener is the client port + 100.
            for o in security.overrides(KAFKA_PORT, controller_port=KAFKA_PORT + 100):
                args += ["--override", o]
        subprocess.run([script, "format"] + args, check=True, stdout=subprocess.DEVNULL)
        self.data, self.nodes = data, nodes
        self.bootstrap = ",".join(f"127.0.0.1:{KAFKA_PORT + i}" for i in range(nodes))
        t0 = time.monotonic()
        p = subprocess.Popen([script, "start"] + args, stdout=subprocess.PIPE, text=True)
        startup = wait_first_produce(self.bootstrap, "startup-probe", t0)
        out, _ = p.communicate(timeout=240)
        m = re.search(r"pids=(\S+)", out)
        if p.returncode != 0 or not m:
            raise RuntimeError(f"kafka-reference start failed: {out}")
        self.pids = [int(x) for x in m.group(1).split(",")]
        return startup

    def node_pids(self):
        return self.pids

    def cpu_pids(self):
        return self.pids

    def stop(self):
        subprocess.run([os.path.join(ROOT, "scripts", "kafka-reference"), "stop", "--data-dir", self.data],
                       check=True, stderr=subprocess.DEVNULL)


# ---------------------------------------------------------------- tools

def java(cls, args, timeout=1800):
    cp = os.path.join(LIB, "*")
    p = subprocess.run(["java"] + TOOL_JVM + ["-cp", cp, cls] + args, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{cls} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p.stdout


def create_topic(bootstrap, topic, rf, configs=(), partitions=1):
    args = ["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", str(partitions),
            "--replication-factor", str(rf)]
    for c in configs:
        args += ["--config", c]
    java("org.apache.kafka.tools.TopicCommand", args)


PERF_RE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                     r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def produce(sysm, topic, n, size, acks, extra=(), bootstrap=None):
    pids = sysm.cpu_pids()
    c0 = cpu_seconds(pids)
    out = java("org.apache.kafka.tools.ProducerPerformance",
               ["--bootstrap-server", bootstrap or sysm.bootstrap, "--topic", topic, "--num-records", str(n),
                "--record-size", str(size), "--throughput", "-1", "--command-property", f"acks={acks}"]
               + list(extra))
    cpu = cpu_seconds(pids) - c0
    m = PERF_RE.findall(out)
    if not m:
        raise RuntimeError("unparsed ProducerPerformance output:\n" + out[-2000:])
    sent, rps, mbs, _avg, _mx, p50, _p95, p99, p999 = m[-1]
    gib = int(sent) * size / 2**30
    return {"records_s": float(rps), "mib_s": float(mbs), "p50_ms": float(p50), "p99_ms": float(p99),
            "p999_ms": float(p999), "cpu_s": cpu, "cpu_s_per_gib": cpu / gib,
            "cpu_s_per_m_records": cpu / (int(sent) / 1e6)}


def consume(sysm, topic, n, size, extra=(), bootstrap=None):
    pids = sysm.cpu_pids()
    c0 = cpu_seconds(pids)
    out = java("org.apache.kafka.tools.ConsumerPerformance",
               ["--bootstrap-server", bootstrap or sysm.bootstrap, "--topic", topic, "--num-records", str(n),
                "--timeout", "60000", "--group", f"perf-{topic}-{time.time_ns()}"] + list(extra))
    cpu = cpu_seconds(pids) - c0
    lines = [l for l in out.splitlines() if l.strip() and not l.startswith("start.time")]
    v = [x.strip() for x in lines[-1].split(",")]
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    got = int(v[4])
    if got < n:
        raise RuntimeError(f"consumer read {got} of {n} records:\n{out}")
    gib = float(v[2]) / 1024
    return {"mib_s": float(v[8]), "mib_s_with_join": float(v[3]), "rebalance_ms": float(v[6]),
            "cpu_s": cpu, "cpu_s_per_gib": cpu / gib}


def e2e(sysm, topic, rate, seconds, warmup, size):
    cp = os.path.join(LIB, "*")
    src = os.path.join(ROOT, "benches", "compare", "E2eLatency.java")
    p = subprocess.run(["java"] + TOOL_JVM + ["-cp", cp, src, sysm.bootstrap, topic, str(rate), str(seconds),
                                              str(warmup), str(size)], capture_output=True, text=True, timeout=600)
    m = re.search(r"p50_us=(\d+) p99_us=(\d+) p999_us=(\d+)", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"E2eLatency failed:\n{p.stdout}\n{p.stderr[-3000:]}")
    return {"p50_ms": int(m.group(1)) / 1000, "p99_ms": int(m.group(2)) / 1000, "line": p.stdout.strip()}


def commit_latency(sysm, topic, partitions, txns, warmup, records, size):
    cp = os.path.join(LIB, "*")
    src = os.path.join(ROOT, "benches", "compare", "TxnCommitLatency.java")
    p = subprocess.run(["java"] + TOOL_JVM + ["-cp", cp, src, sysm.bootstrap, topic, str(partitions), str(txns),
                                              str(warmup), str(records), str(size)],
                       capture_output=True, text=True, timeout=900)
    m = re.search(r"commit_p50_us=(\d+) commit_p99_us=(\d+) commit_max_us=(\d+) txn_p50_us=(\d+) txn_p99_us=(\d+)",
                  p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"TxnCommitLatency failed:\n{p.stdout}\n{p.stderr[-3000:]}")
    g = [int(x) / 1000 for x in m.groups()]
    return {"commit_p50_ms": g[0], "commit_p99_ms": g[1], "commit_max_ms": g[2], "txn_p50_ms": g[3],
            "txn_p99_ms": g[4], "line": p.stdout.strip()}


def transactions(sysm, rep, a, r):
    """W7 idempotent acks=all, then W8 the same in transactions of a.txn_ms: records/s of
    each, and what one commit costs (the extra time of W8 over W7, per transaction)."""
    def w7():
        t7 = f"w7-{rep}"
        create_topic(sysm.bootstrap, t7, 1)
        log(sysm.name, rep, "W7 produce", a.records, "x 1 KiB acks=all idempotent")
        r["w7"] = produce(sysm, t7, a.records, 1024, "all", ["--command-property", "enable.idempotence=true"])

    def w8():
        t8 = f"w8-{rep}"
        create_topic(sysm.bootstrap, t8, 1)
        log(sysm.name, rep, "W8 produce", a.records, "x 1 KiB in transactions of", a.txn_ms, "ms")
        r["w8"] = produce(sysm, t8, a.records, 1024, "all",
                          ["--transactional-id", f"perf-{sysm.name}-{rep}-{time.time_ns()}",
                           "--transaction-duration-ms", str(a.txn_ms)])

    # The first run on a fresh node is slower (cold JVM tool, new segment files): alternate
    # which goes first, so neither workload always pays for it.
    for w in ((w7, w8) if rep % 2 == 0 else (w8, w7)):
        w()
    t_idem = a.records / r["w7"]["records_s"]
    t_txn = a.records / r["w8"]["records_s"]
    commits = max(1.0, t_txn * 1000 / a.txn_ms)
    r["w8"]["commits"] = commits
    r["w8"]["ms_per_commit"] = (t_txn - t_idem) * 1000 / commits
    t9 = f"w9-{rep}"
    create_topic(sysm.bootstrap, t9, 1, partitions=3)
    log(sysm.name, rep, "W9 commit latency:", a.commit_txns, "transactions of 10 x 1 KiB over 3 partitions")
    r["w9"] = commit_latency(sysm, t9, 3, a.commit_txns, 20, 10, 1024)


def rd_load(args, timeout=1800):
    p = subprocess.run([RD_LOAD] + [str(x) for x in args], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"rdkafka_load failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def rd_produce(sysm, topic, n, size, producers, rate=0):
    pids = sysm.cpu_pids()
    c0, f0 = cpu_seconds(pids), minor_faults(pids)
    out = rd_load(["produce", "--bootstrap", sysm.bootstrap, "--topic", topic, "--records", n,
                   "--record-size", size, "--producers", producers, "--acks", "all", "--rate", rate])
    cpu, faults = cpu_seconds(pids) - c0, minor_faults(pids) - f0
    if out["failed"]:
        raise RuntimeError(f"{out['failed']} deliveries failed on {topic}")
    lat = out["latency_ms"]
    gib = out["bytes"] / 2**30
    return {"records_s": out["records_per_s"], "mib_s": out["mib_per_s"], "p50_ms": lat["p50"],
            "p99_ms": lat["p99"], "p999_ms": lat["p999"], "cpu_s": cpu,
            "cpu_s_per_gib": cpu / gib, "faults_per_gib": faults / gib}


def rd_consume(sysm, topic, n):
    pids = sysm.cpu_pids()
    c0 = cpu_seconds(pids)
    out = rd_load(["consume", "--bootstrap", sysm.bootstrap, "--topic", topic, "--records", n])
    cpu = cpu_seconds(pids) - c0
    return {"mib_s": out["mib_per_s"], "records_s": out["records_per_s"], "cpu_s": cpu,
            "cpu_s_per_gib": cpu / (out["bytes"] / 2**30)}


RD_CASES = [(nodes, size, parts) for nodes in (1, 3) for size in (100, 1024) for parts in (1, 12)]


def rd_key(nodes, size, parts):
    return f"rd-n{nodes}-{size}b-p{parts}"


def rd_round(sysm, rep, a):
    r = {}
    for nodes in (1, 3):
        data = os.path.join(WORK, f"{sysm.name}-rd{nodes}")
        log(sysm.name, rep, f"start {nodes} node(s)")
        sysm.start(nodes, data)
        try:
            for n, size, parts in RD_CASES:
                if n != nodes:
                    continue
                key = rd_key(nodes, size, parts)
                t = f"{key}-{rep}"
                create_topic(sysm.bootstrap, t, nodes, ["min.insync.replicas=2"] if nodes == 3 else [],
                             partitions=parts)
                records = a.rd_records if size == 1024 else a.rd_records * 10
                log(sysm.name, rep, key, "peak", records, "records")
                peak = rd_produce(sysm, t, records, size, a.rd_producers)
                half = max(1, int(peak["records_s"] / 2))
                log(sysm.name, rep, key, "latency at", half, "records/s")
                at_half = rd_produce(sysm, t, min(records, half * a.rd_latency_secs), size, a.rd_producers, half)
                r[key] = {"peak": peak, "half": at_half}
                if size == 1024 and parts == 12:
                    log(sysm.name, rep, key, "consume")
                    r[key]["consume"] = rd_consume(sysm, t, records)
        finally:
            sysm.stop()
            shutil.rmtree(data, ignore_errors=True)
    log(sysm.name, rep, "done", json.dumps(r))
    return r


def rd_rows():
    rows = []
    for nodes, size, parts in RD_CASES:
        k = rd_key(nodes, size, parts)
        name = f"{'RF=1, 1 node' if nodes == 1 else 'RF=3, 3 nodes'}, {size} B, {parts} partition(s)"
        unit, get = ("MiB/s", lambda r, k=k: r[k]["peak"]["mib_s"]) if size == 1024 else \
            ("rec/s", lambda r, k=k: r[k]["peak"]["records_s"])
        rows += [
            (f"{name}: peak", get, unit, "high"),
            (f"{name}: broker CPU per GiB", lambda r, k=k: r[k]["peak"]["cpu_s_per_gib"], "s/GiB", "low"),
            (f"{name}: broker minor page faults per GiB", lambda r, k=k: r[k]["peak"]["faults_per_gib"],
             "faults/GiB", "low"),
            (f"{name}: latency p50 at half the peak", lambda r, k=k: r[k]["half"]["p50_ms"], "ms", "low"),
            (f"{name}: latency p99 at half the peak", lambda r, k=k: r[k]["half"]["p99_ms"], "ms", "low"),
            (f"{name}: latency p99.9 at half the peak", lambda r, k=k: r[k]["half"]["p999_ms"], "ms", "low"),
        ]
        if size == 1024 and parts == 12:
            rows += [(f"{name}: consume", lambda r, k=k: r[k]["consume"]["mib_s"], "MiB/s", "high"),
                     (f"{name}: consume broker CPU per GiB", lambda r, k=k: r[k]["consume"]["cpu_s_per_gib"],
                      "s/GiB", "low")]
    return rows


# ---------------------------------------------------------------- secured listeners (--tls-only)

STORE_PASSWORD = "brook-secret"
SCRAM_USER, SCRAM_PASSWORD, SCRAM_ITERATIONS = "bench", "bench-secret", 4096
# Each system's node serves three client listeners: PLAINTEXT on its client port, SSL and
# SASL_SSL (SCRAM-SHA-512) on that port plus these offsets.
LISTENER_OFFSETS = {"PLAINTEXT": 0, "SSL": 10, "SASL_SSL": 20}
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"


class Security:
    """The one owner of the secured settings both systems start from: certificates made once
    per run by `brook certs` (a CA and a broker key store naming 127.0.0.1, PKCS12 and PEM),
    the server.properties lines of the three listeners, the SCRAM user, and the client
    properties Kafka's tools read (--command-config)."""

    def __init__(self, brook_bin, d):
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run([brook_bin, "certs", "--dir", d, "--password", STORE_PASSWORD], check=True,
                       stdout=subprocess.DEVNULL)
        self.dir, self.ca_pem = d, os.path.join(d, "ca.pem")
        trust = ["ssl.truststore.type=PKCS12", f"ssl.truststore.location={d}/truststore.p12",
                 f"ssl.truststore.password={STORE_PASSWORD}"]
        sasl = ["sasl.mechanism=SCRAM-SHA-512",
                f'sasl.jaas.config={SCRAM_JAAS} username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";']
        self.client_config = {}
        for proto, lines in (("SSL", trust), ("SASL_SSL", trust + sasl)):
            path = os.path.join(d, f"{proto.lower()}-client.properties")
            with open(path, "w") as f:
                f.write("\n".join([f"security.protocol={proto}"] + lines) + "\n")
            self.client_config[proto] = path

    def overrides(self, port, controller_port=None):
        """server.properties lines of a node whose PLAINTEXT listener is `port`."""
        names = ",".join(f"{n}://127.0.0.1:{port + o}" for n, o in LISTENER_OFFSETS.items())
        pmap = ",".join(f"{n}:{n}" for n in LISTENER_OFFSETS)
        listeners = names
        if controller_port:
            listeners += f",CONTROLLER://127.0.0.1:{controller_port}"
            pmap += ",CONTROLLER:PLAINTEXT"
        return [f"listeners={listeners}", f"advertised.listeners={names}",
                f"listener.security.protocol.map={pmap}",
                "ssl.keystore.type=PKCS12", f"ssl.keystore.location={self.dir}/broker.keystore.p12",
                f"ssl.keystore.password={STORE_PASSWORD}",
                "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
                f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_JAAS};"]

    @staticmethod
    def bootstrap(plain_bootstrap, proto):
        host, port = plain_bootstrap.rsplit(":", 1)
        return f"{host}:{int(port) + LISTENER_OFFSETS[proto]}"

    def client_args(self, proto):
        return ["--command-config", self.client_config[proto]] if proto != "PLAINTEXT" else []

    @staticmethod
    def add_user(sysm):
        """The SCRAM user, through AlterUserScramCredentials on the PLAINTEXT listener."""
        java("org.apache.kafka.tools.ConfigCommand",
             ["--bootstrap-server", sysm.bootstrap, "--alter", "--entity-type", "users", "--entity-name",
              SCRAM_USER, "--add-config",
              f"SCRAM-SHA-512=[iterations={SCRAM_ITERATIONS},password={SCRAM_PASSWORD}]"])


def handshakes(sysm, sec, proto, a):
    """benches/src/bin/handshakes.rs against one listener: connections per second, and the
    broker's CPU per connection (warm-up included in both the CPU and the count)."""
    pids = sysm.cpu_pids()
    c0 = cpu_seconds(pids)
    p = subprocess.run([a.handshakes_bin, "--addr", sec.bootstrap(sysm.bootstrap, proto), "--protocol",
                        proto.lower().replace("_", "-"), "--ca", sec.ca_pem, "--user", SCRAM_USER,
                        "--password", SCRAM_PASSWORD, "--connections", str(a.handshakes),
                        "--warmup", str(HANDSHAKE_WARMUP), "--threads", str(a.handshake_threads)],
                       capture_output=True, text=True, timeout=900)
    cpu = cpu_seconds(pids) - c0
    if p.returncode != 0:
        raise RuntimeError(f"handshakes failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["cpu_ms_per_conn"] = cpu * 1000 / (a.handshakes + HANDSHAKE_WARMUP)
    return out


HANDSHAKE_WARMUP = 50
SECURED = ("PLAINTEXT", "SSL", "SASL_SSL")


def tls_round(sysm, rep, a, sec):
    """One node with the three listeners: new-connection rates over SSL and SASL_SSL, then W1
    (produce 1 KiB acks=1) and W4 (consume it) over each listener, in an order that turns
    round every alternation so no listener always runs on the coldest broker."""
    r = {}
    data = os.path.join(WORK, f"{sysm.name}-tls")
    log(sysm.name, rep, "start 1 node with PLAINTEXT, SSL and SASL_SSL listeners")
    r["startup1_s"] = sysm.start(1, data, sec)
    try:
        sec.add_user(sysm)
        for proto in ("SSL", "SASL_SSL"):
            log(sysm.name, rep, proto, a.handshakes, "new connections")
            r[f"hs_{proto}"] = handshakes(sysm, sec, proto, a)
        order = SECURED[rep % 3:] + SECURED[:rep % 3]
        for proto in order:
            t = f"w1-{proto.lower()}-{rep}"
            create_topic(sysm.bootstrap, t, 1)
            boot = sec.bootstrap(sysm.bootstrap, proto)
            log(sysm.name, rep, proto, "W1 produce", a.records, "x 1 KiB acks=1")
            r[f"w1_{proto}"] = produce(sysm, t, a.records, 1024, "1", sec.client_args(proto), bootstrap=boot)
            log(sysm.name, rep, proto, "W4 consume")
            r[f"w4_{proto}"] = consume(sysm, t, a.records, 1024, sec.client_args(proto), bootstrap=boot)
    finally:
        sysm.stop()
        shutil.rmtree(data, ignore_errors=True)
    log(sysm.name, rep, "done", json.dumps(r))
    return r


def tls_rows():
    rows = []
    for w, what in (("w1", "W1 produce 1 KiB acks=1"), ("w4", "W4 consume")):
        for proto in SECURED:
            k = f"{w}_{proto}"
            rows += [(f"{what} over {proto}: throughput", lambda r, k=k: r[k]["mib_s"], "MiB/s", "high"),
                     (f"{what} over {proto}: broker CPU per GiB", lambda r, k=k: r[k]["cpu_s_per_gib"],
                      "s/GiB", "low")]
            if w == "w1":
                rows.append((f"{what} over {proto}: latency p99", lambda r, k=k: r[k]["p99_ms"], "ms", "low"))
        for proto in ("SSL", "SASL_SSL"):
            rows.append((f"{what}: CPU per GiB over {proto} / over PLAINTEXT (same system)",
                         lambda r, k=f"{w}_{proto}", p=f"{w}_PLAINTEXT": r[k]["cpu_s_per_gib"] / r[p]["cpu_s_per_gib"],
                         "ratio", "low"))
    for proto, what in (("SSL", "TLS handshake + ApiVersions"),
                        ("SASL_SSL", "TLS handshake + ApiVersions + SCRAM-SHA-512 login")):
        k = f"hs_{proto}"
        rows += [(f"{what}: connections per second", lambda r, k=k: r[k]["per_s"], "conn/s", "high"),
                 (f"{what}: p50 per connection", lambda r, k=k: r[k]["p50_ms"], "ms", "low"),
                 (f"{what}: broker CPU per connection", lambda r, k=k: r[k]["cpu_ms_per_conn"], "ms", "low")]
    return rows


# ---------------------------------------------------------------- one alternation

def one_round(sysm, rep, a):
    r = {}
    data = os.path.join(WORK, f"{sysm.name}-1")
    log(sysm.name, rep, "start 1 node")
    r["startup1_s"] = sysm.start(1, data)
    if a.txn_only:
        try:
            transactions(sysm, rep, a, r)
        finally:
            sysm.stop()
            shutil.rmtree(data, ignore_errors=True)
        log(sysm.name, rep, "done", json.dumps(r))
        return r
    try:
        time.sleep(a.idle_wait)
        r["idle_rss1_mib"] = statistics.mean(rss_mib(p) for p in sysm.node_pids())
        t = f"w1-{rep}"
        create_topic(sysm.bootstrap, t, 1)
        log(sysm.name, rep, "W1 produce", a.records, "x 1 KiB acks=1")
        r["w1"] = produce(sysm, t, a.records, 1024, "1")
        r["rss_after_w1_mib"] = statistics.mean(rss_mib(p) for p in sysm.node_pids())
        log(sysm.name, rep, "W4 consume")
        r["w4"] = consume(sysm, t, a.records, 1024)
        t3 = f"w3-{rep}"
        create_topic(sysm.bootstrap, t3, 1)
        log(sysm.name, rep, "W3 produce", a.small_records, "x 100 B acks=1")
        r["w3"] = produce(sysm, t3, a.small_records, 100, "1")
        t6 = f"w6-{rep}"
        create_topic(sysm.bootstrap, t6, 1)
        log(sysm.name, rep, "W6 e2e", a.e2e_rate, "records/s for", a.e2e_seconds, "s")
        r["w6"] = e2e(sysm, t6, a.e2e_rate, a.e2e_seconds, a.e2e_warmup, 1024)
        transactions(sysm, rep, a, r)
    finally:
        sysm.stop()
        shutil.rmtree(data, ignore_errors=True)
    data = os.path.join(WORK, f"{sysm.name}-3")
    log(sysm.name, rep, "start 3 nodes")
    r["startup3_s"] = sysm.start(3, data)
    try:
        time.sleep(a.idle_wait)
        r["idle_rss3_mib"] = statistics.mean(rss_mib(p) for p in sysm.node_pids())
        t = f"w2-{rep}"
        create_topic(sysm.bootstrap, t, 3, ["min.insync.replicas=2"])
        log(sysm.name, rep, "W2 produce", a.records, "x 1 KiB acks=all RF=3")
        r["w2"] = produce(sysm, t, a.records, 1024, "all")
    finally:
        sysm.stop()
        shutil.rmtree(data, ignore_errors=True)
    log(sysm.name, rep, "done", json.dumps(r))
    return r


ROWS = [
    # (label, getter, unit, better)
    ("W1 1 node RF=1 acks=1 1 KiB: throughput", lambda r: r["w1"]["mib_s"], "MiB/s", "high"),
    ("W1 latency p50", lambda r: r["w1"]["p50_ms"], "ms", "low"),
    ("W1 latency p99", lambda r: r["w1"]["p99_ms"], "ms", "low"),
    ("W1 latency p99.9", lambda r: r["w1"]["p999_ms"], "ms", "low"),
    ("W1 broker CPU per GiB", lambda r: r["w1"]["cpu_s_per_gib"], "s/GiB", "low"),
    ("W2 3 nodes RF=3 acks=all minISR=2: throughput", lambda r: r["w2"]["mib_s"], "MiB/s", "high"),
    ("W2 latency p50", lambda r: r["w2"]["p50_ms"], "ms", "low"),
    ("W2 latency p99", lambda r: r["w2"]["p99_ms"], "ms", "low"),
    ("W2 latency p99.9", lambda r: r["w2"]["p999_ms"], "ms", "low"),
    ("W2 broker CPU per GiB (3 nodes)", lambda r: r["w2"]["cpu_s_per_gib"], "s/GiB", "low"),
    ("W3 1 node 100 B: records/s", lambda r: r["w3"]["records_s"], "rec/s", "high"),
    ("W3 broker CPU per million records", lambda r: r["w3"]["cpu_s_per_m_records"], "s/M", "low"),
    ("W4 consume W1's topic (fetch phase)", lambda r: r["w4"]["mib_s"], "MiB/s", "high"),
    ("W4 broker CPU per GiB", lambda r: r["w4"]["cpu_s_per_gib"], "s/GiB", "low"),
    ("W5 start-up to first acks=all produce, 1 node", lambda r: r["startup1_s"], "s", "low"),
    ("W5 start-up to first acks=all produce, 3 nodes", lambda r: r["startup3_s"], "s", "low"),
    ("W5 idle RSS per node, 1 node", lambda r: r["idle_rss1_mib"], "MiB", "low"),
    ("W5 idle RSS per node, 3 nodes", lambda r: r["idle_rss3_mib"], "MiB", "low"),
    ("W5 RSS after W1", lambda r: r["rss_after_w1_mib"], "MiB", "low"),
    ("W6 end-to-end latency p50", lambda r: r["w6"]["p50_ms"], "ms", "low"),
    ("W6 end-to-end latency p99", lambda r: r["w6"]["p99_ms"], "ms", "low"),
    ("W7 1 node acks=all idempotent 1 KiB: records/s", lambda r: r["w7"]["records_s"], "rec/s", "high"),
    ("W8 the same in transactions: records/s", lambda r: r["w8"]["records_s"], "rec/s", "high"),
    ("W8/W7 records/s (same system)", lambda r: r["w8"]["records_s"] / r["w7"]["records_s"], "ratio", "high"),
    ("W8 extra time per commit", lambda r: r["w8"]["ms_per_commit"], "ms", "low"),
    ("W8 broker CPU per million records", lambda r: r["w8"]["cpu_s_per_m_records"], "s/M", "low"),
    ("W9 commitTransaction() after flush, p50", lambda r: r["w9"]["commit_p50_ms"], "ms", "low"),
    ("W9 commitTransaction() after flush, p99", lambda r: r["w9"]["commit_p99_ms"], "ms", "low"),
    ("W9 whole transaction (10 records, 3 partitions), p50", lambda r: r["w9"]["txn_p50_ms"], "ms", "low"),
]


def fmt(x):
    if x != x:
        return "n/a"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}"


def table(results, rows=None):
    out = ["| figure | unit | Brook | Kafka | Brook/Kafka |", "|---|---|---:|---:|---:|"]
    for label, get, unit, _ in rows or ROWS:
        vals = {}
        for s in ("brook", "kafka"):
            xs = []
            for r in results[s]:
                try:
                    xs.append(get(r))
                except (KeyError, TypeError):
                    pass
            vals[s] = statistics.median(xs) if xs else float("nan")
        ratio = vals["brook"] / vals["kafka"] if vals["kafka"] else float("nan")
        out.append(f"| {label} | {unit} | {fmt(vals['brook'])} | {fmt(vals['kafka'])} | {fmt(ratio)} |")
    return "\n".join(out)


def rows_of(a):
    if getattr(a, "tls_only", False):
        return tls_rows()
    return rd_rows() if getattr(a, "suite", "java") == "rdkafka" else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="records in W1, W2 and W4 (default 1,000,000)")
    ap.add_argument("--small-records", type=int, default=None, help="records in W3 (default: --records)")
    ap.add_argument("--reps", type=int, default=4, help="alternations Brook, Kafka (default 4)")
    ap.add_argument("--e2e-rate", type=int, default=1000, help="W6 records per second (default 1000)")
    ap.add_argument("--e2e-seconds", type=float, default=15, help="W6 duration (default 15)")
    ap.add_argument("--e2e-warmup", type=float, default=3, help="W6 seconds not counted (default 3)")
    ap.add_argument("--txn-ms", type=int, default=100, help="W8 transaction duration (default 100 ms)")
    ap.add_argument("--txn-only", action="store_true", help="run only W7, W8 and W9 (and start-up)")
    ap.add_argument("--commit-txns", type=int, default=500,
                    help="W9 transactions timed (after 20 not counted; default 500)")
    ap.add_argument("--tls-only", action="store_true",
                    help="run only the secured workloads: W1 and W4 over PLAINTEXT, SSL and SASL_SSL "
                         "(SCRAM-SHA-512) on one node, and new connections per second over SSL and SASL_SSL")
    ap.add_argument("--handshakes", type=int, default=2000,
                    help="--tls-only: connections timed per listener (default 2000)")
    ap.add_argument("--handshake-threads", type=int, default=2,
                    help="--tls-only: connections open at a time (default 2)")
    ap.add_argument("--handshakes-bin", default=os.path.join(ROOT, "target", "release", "handshakes"))
    ap.add_argument("--idle-wait", type=float, default=3, help="seconds after start-up before idle RSS (default 3)")
    ap.add_argument("--brook-bin", default=os.path.join(ROOT, "target", "release", "brook"))
    ap.add_argument("--only", choices=["brook", "kafka"], help="run one system only")
    ap.add_argument("--suite", choices=["java", "rdkafka"], default="java",
                    help="Kafka's Java tools (W1-W9, default) or librdkafka through rdkafka_load")
    ap.add_argument("--rd-records", type=int, default=1_000_000,
                    help="rdkafka suite: 1 KiB records per peak run; 100 B runs send ten times as many")
    ap.add_argument("--rd-producers", type=int, default=1, help="rdkafka suite: producer processes' threads")
    ap.add_argument("--rd-latency-secs", type=int, default=10, help="rdkafka suite: length of a half-peak run")
    ap.add_argument("--json", help="write every sample here (after each round)")
    ap.add_argument("--report", metavar="JSON", help="only print the table of a --json file (e.g. of a cut-short run)")
    a = ap.parse_args()
    if a.report:
        with open(a.report) as f:
            d = json.load(f)
        res = d["results"]
        print(f"records={d['args']['records']} small_records={d['args']['small_records']} "
              f"rounds: brook {len(res['brook'])}, kafka {len(res['kafka'])}")
        print(table(res, rows_of(argparse.Namespace(**d["args"]))))
        return
    if a.small_records is None:
        a.small_records = a.records
    if not os.path.exists(os.path.join(LIB, "kafka-tools-4.4.0.jar")):
        sys.exit(f"no Kafka jars in {LIB}: run scripts/kafka-reference fetch")
    if not os.access(a.brook_bin, os.X_OK):
        sys.exit(f"no brook binary at {a.brook_bin}: run cargo build --release --bin brook")
    if a.tls_only and not os.access(a.handshakes_bin, os.X_OK):
        sys.exit(f"no handshake benchmark at {a.handshakes_bin}: run cargo build --release -p brook-benches --bin handshakes")
    if a.suite == "rdkafka" and not os.access(RD_LOAD, os.X_OK):
        sys.exit(f"no load generator at {RD_LOAD}: run cargo build --release -p brook-protocol-tests --bin rdkafka_load")
    os.makedirs(WORK, exist_ok=True)
    systems = [Brook(a.brook_bin), Kafka()]
    if a.only:
        systems = [s for s in systems if s.name == a.only]
    results = {"brook": [], "kafka": []}
    sec = Security(a.brook_bin, os.path.join(WORK, "pki")) if a.tls_only else None
    t0 = time.monotonic()
    for rep in range(a.reps):
        # Each round reverses the order: on a VM whose host reclaims freed memory, the
        # system that runs first in a round writes into memory that must be faulted in from
        # the host, and the second into what the first one's deleted data just freed
        # (benches/RESULTS.md, "Physical references"). An even number of rounds balances it.
        for s in (systems if rep % 2 == 0 else systems[::-1]):
            if a.tls_only:
                results[s.name].append(tls_round(s, rep, a, sec))
            elif a.suite == "rdkafka":
                results[s.name].append(rd_round(s, rep, a))
            else:
                results[s.name].append(one_round(s, rep, a))
            if a.json:
                with open(a.json, "w") as f:
                    json.dump({"args": vars(a), "results": results}, f, indent=1)
    print(f"records={a.records} small_records={a.small_records} reps={a.reps} "
          f"e2e={a.e2e_rate}/s for {a.e2e_seconds}s; wall time {time.monotonic() - t0:.0f} s")
    print(table(results, rows_of(a)))


if __name__ == "__main__":
    main()
