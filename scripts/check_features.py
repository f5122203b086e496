#!/usr/bin/env python3
"""Two build rules that cargo alone does not check.

1. One feature set. CI builds brook with `cargo build -p brook-tools --bin brook` (maturin
   builds the Python kit's wheel the same way) and then the tests with `cargo test
   --workspace`. Every library the first build compiled must resolve to the same features in
   the second, or the test build compiles it, and everything above it, a second time (with
   serde that is most of the dependency tree, and the broker itself). Features that only the
   tests or benchmarks turn on are therefore also listed in brook-tools' manifest; this check
   compares the two `cargo tree` feature sets and names every library whose features differ.
2. `brook_storage::batch::testutil`, the storage engine's batch builders for tests, is named
   only by test code: a test or benchmark file, a `tests.rs`/`*_tests.rs` module, or lines
   after a `#[cfg(test)]` in a source file. It is not behind a cargo feature (see 1).

Needs the crates downloaded (run after a cargo build); takes a few seconds.
Exit status 1, with one line per violation, when either rule is broken.
"""

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^(\S+) (v\S+)(?: \([^)]*\))?(?: ([\w,+.-]+))?(?: \(\*\))?$")
PRODUCTION = ["-p", "brook-tools", "-e", "normal,build"]
TESTS = ["--workspace", "-e", "normal,build,dev"]
# Production source folders, where testutil may appear only in test code.
SOURCES = ("broker/src/", "storage/src/", "tools/src/", "chaos/src/", "kits/rust/src/")
TESTUTIL_HOME = "storage/src/batch.rs"


def feature_sets(args):
    """Per package (name, version), the set of feature lists it is compiled with."""
    out = subprocess.run(
        ["cargo", "tree", "--locked", *args, "-f", "{p} {f}", "--prefix", "none"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    sets = defaultdict(set)
    for line in out.splitlines():
        m = LINE.match(line.strip())
        if m:
            sets[(m.group(1), m.group(2))].add(m.group(3) or "")
    return sets


def feature_drift():
    production, tests = feature_sets(PRODUCTION), feature_sets(TESTS)
    drift = []
    for package, features in sorted(production.items()):
        if tests.get(package, features) != features:
            name, version = package
            drift.append(
                f"{name} {version}: production build {sorted(features)}, "
                f"test build {sorted(tests[package])}; add the difference to tools/Cargo.toml"
            )
    return drift


def testutil_outside_tests():
    files = subprocess.run(
        ["git", "ls-files", *SOURCES], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    found = []
    for rel in files:
        name = rel.rsplit("/", 1)[-1]
        if not rel.endswith(".rs") or rel == TESTUTIL_HOME:
            continue
        if name == "tests.rs" or name.endswith("_tests.rs"):
            continue
        in_tests = False
        for lineno, line in enumerate((ROOT / rel).read_text().splitlines(), 1):
            if line.strip().startswith("#[cfg(test)]"):
                in_tests = True
            code = line.split("//", 1)[0]
            if "testutil" in code and not in_tests:
                found.append(f"{rel}:{lineno}: batch::testutil outside test code")
    return found


def main():
    problems = feature_drift() + testutil_outside_tests()
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} build rule violations", file=sys.stderr)
        return 1
    print("one feature set for the production and test builds; testutil only in tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
