#!/usr/bin/env python3
"""Parses Prometheus text (version 0.0.4) from stdin with the official Python client's parser
(prometheus_client.parser) and prints what it read as JSON: one object per family with its
name, type and samples. The metrics tests compare it with their own strict parse, so a
scrape must satisfy a real Prometheus parser, not only Brook's own reading of the format."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = sys.stdin.read()
    families = []
    for f in text_string_to_metric_families(text):
        families.append({
            "name": f.name,
            "type": f.type,
            "samples": [[s.name, s.labels, s.value] for s in f.samples],
        })
    json.dump(families, sys.stdout)


if __name__ == "__main__":
    main()
