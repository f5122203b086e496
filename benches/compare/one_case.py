#!/usr/bin/env python3
"""One produce case of run.py's rdkafka suite, on a fresh node or cluster, with the figures
per node: for before/after comparisons of two brook binaries, or Brook against Kafka, run
alternately by hand or by a shell loop.

    python3 benches/compare/one_case.py --nodes 3 --size 1024 --partitions 1 --records 600000 \
        [--system brook|kafka] [--brook-bin PATH]

Starts the system on a fresh data directory, creates the topic (RF = nodes, and
min.insync.replicas=2 on three nodes), runs `rdkafka_load produce` at full speed, stops the
system and deletes its data (so the next run's page-cache writes reuse the memory this one
freed; benches/RESULTS.md, "Physical references"). --rate paces the producers, for latency
below saturation. Prints one JSON line: run.py's produce
figures, plus broker CPU seconds and minor page faults per GiB for each node, and the load
generator's own CPU per GiB.
"""
import argparse
import json
import os
import resource
import shutil

import run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, choices=[1, 3], default=3)
    ap.add_argument("--size", type=int, default=1024, help="record bytes")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--records", type=int, default=600_000)
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--rate", type=int, default=0, help="records per second over all producers (0: full speed)")
    ap.add_argument("--system", choices=["brook", "kafka"], default="brook")
    ap.add_argument("--brook-bin", default=os.path.join(run.ROOT, "target", "release", "brook"))
    a = ap.parse_args()
    sysm = run.Brook(a.brook_bin) if a.system == "brook" else run.Kafka()
    data = os.path.join(run.WORK, f"{a.system}-one-case")
    os.makedirs(run.WORK, exist_ok=True)
    sysm.start(a.nodes, data)
    try:
        configs = ["min.insync.replicas=2"] if a.nodes == 3 else []
        run.create_topic(sysm.bootstrap, "one-case", a.nodes, configs, partitions=a.partitions)
        pids = sysm.node_pids()
        cpu0 = [run.cpu_seconds([p]) for p in pids]
        faults0 = [run.minor_faults([p]) for p in pids]
        client0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = run.rd_produce(sysm, "one-case", a.records, a.size, a.producers, a.rate)
        client1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        gib = a.records * a.size / 2**30
        r["node_cpu_s_per_gib"] = [(run.cpu_seconds([p]) - c) / gib for p, c in zip(pids, cpu0)]
        r["node_faults_per_gib"] = [(run.minor_faults([p]) - f) / gib for p, f in zip(pids, faults0)]
        client = (client1.ru_utime + client1.ru_stime) - (client0.ru_utime + client0.ru_stime)
        r["load_generator_cpu_s_per_gib"] = client / gib
        print(json.dumps(r))
    finally:
        sysm.stop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
