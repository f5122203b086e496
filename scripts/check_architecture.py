#!/usr/bin/env python3
"""Checks that every code name in docs/ARCHITECTURE.md still exists in the code.

The architecture document names files, types, functions, constants and config keys in
backticks. A rename or a deletion that forgets the document leaves it describing code that is
gone; this check turns that into a failure. What it checks, per backticked token:

- a path (`storage/src/`, `segment.rs`, `tests/cluster.rs`): a tracked file or folder whose
  path ends with it, or a file name the source writes at run time (`"vote.json"`);
- a type (`UnifiedLog`, `Partition`): a Rust struct, enum, trait or type alias, or a Java class,
  with that name, or an enum variant or library type the code names by path (`::Notify`);
- a constant (`MAX_FAULT_RULES`): a Rust `const` or `static`;
- a path of names (`Partition::apply_registration`, `api::handle_frame`, `brook::wait`): the
  last segment is defined (a `fn`, type, constant or module) and each earlier one is a type, a
  module or a workspace crate;
- a function (`apply_image`): a Rust `fn`;
- a config key (`replica.lag.time.max.ms`, `retention.ms=-1`): the key appears quoted in the
  broker's source.

Tokens in a clause that says "Kafka's" (Kafka's own class and config names), tokens with spaces (commands), with
placeholders (`<topic>`, `N`, `*`) and plain words are not code names and are skipped.

And the other way round, so that the code map cannot fall behind the code: every Rust source
file of the workspace crates (`SOURCE_ROOTS`) is named, by its file name or a path ending in
it (a `mod.rs`, `lib.rs` or `main.rs` also by its folder), and every variant of the metadata
log's `MetadataRecord` is named.

And the controller's decisions stay pure (see "Crate graph"): brook-controller's
`[dependencies]` name no crate that does I/O or runs tasks (`CONTROLLER_IO_CRATES`), and its
code (comments left out) names no file, socket, process, environment or clock
(`CONTROLLER_IO_NAMES`).
Exit status 1 and one line per stale or missing name when anything is wrong.
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"

# The folders whose Rust files the code map must name: every crate's sources, not its tests.
SOURCE_ROOTS = (
    "broker/src/", "storage/src/", "controller/src/", "tools/src/", "chaos/src/", "benches/src/", "kits/rust/src/",
    "kits/rust/example/src/", "protocol-tests/src/", "fuzz/src/",
)
# The metadata log's record type, whose every variant the document names.
METADATA_RECORD = ("controller/src/image.rs", "MetadataRecord")
# What brook-controller may not depend on: crates that do I/O, read randomness from the OS
# for their own purposes, or run tasks.
CONTROLLER_MANIFEST = "controller/Cargo.toml"
CONTROLLER_IO_CRATES = (
    "tokio", "tokio-rustls", "openraft", "axum", "hyper", "hyper-util", "mio", "socket2",
    "nix", "rustls", "tempfile", "rand", "brook", "brook-storage",
)
# What brook-controller's code may not name: the disk, the network, processes, the
# environment, threads and clocks. A decision that needs a time takes it as an argument.
CONTROLLER_IO_NAMES = re.compile(
    r"\bstd::(fs|net|process|env|thread)\b|\b(Instant|SystemTime|UNIX_EPOCH)\b"
)

FILE_SUFFIXES = (".rs", ".md", ".java", ".py", ".toml", ".properties", ".json", ".jsonl", ".yml")


def tracked_files():
    out = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return [line for line in out.splitlines() if line]


def collect_definitions(files):
    """Every name defined in the project's Rust and Java sources, by kind."""
    types, consts, fns, modules, fields = set(), set(), set(), set(), set()
    sources = []
    for rel in files:
        if rel.endswith("Cargo.toml") and not rel.startswith("vendor/"):
            # A workspace crate is the first module of its paths (`brook::wait`).
            manifest = (ROOT / rel).read_text()
            package = re.search(r'(?m)^\[package\]\s*\nname\s*=\s*"([^"]+)"', manifest)
            if package:
                modules.add(package.group(1).replace("-", "_"))
            continue
        if rel.startswith("vendor/") or not rel.endswith((".rs", ".java")):
            continue
        text = (ROOT / rel).read_text(errors="replace")
        sources.append(text)
        if rel.endswith(".rs"):
            stem = Path(rel).stem
            modules.add(Path(rel).parent.name if stem == "mod" else stem)
            types.update(re.findall(r"\b(?:struct|enum|trait|type|union)\s+([A-Za-z_]\w*)", text))
            consts.update(re.findall(r"\b(?:const|static)\s+([A-Za-z_]\w*)\s*:", text))
            fns.update(re.findall(r"\bfn\s+([A-Za-z_]\w*)", text))
            modules.update(re.findall(r"\bmod\s+([A-Za-z_]\w*)", text))
            fields.update(
                re.findall(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?([a-z_]\w*)\s*:\s*[\w&(\[<]", text)
            )
        else:
            types.update(re.findall(r"\b(?:class|interface|enum|record)\s+([A-Za-z_]\w*)", text))
    # A field counts where a path of names ends in one (`GroupEntry::persisted`).
    return types, consts, fns | fields, modules, "\n".join(sources)


def tokens(doc_text):
    """(line number, token) for each backticked token not introduced as Kafka's own name."""
    for m in re.finditer(r"`([^`\n]+)`", doc_text):
        lineno = doc_text.count("\n", 0, m.start()) + 1
        # The clause the token stands in, across line breaks: from the last opening
        # parenthesis, sentence end or blank line.
        clause = re.split(r"[.;:]\s|\(|\n\s*\n", doc_text[max(0, m.start() - 400) : m.start()])[-1]
        if "Kafka's" in clause or "Kafka " in clause:
            continue
        yield lineno, m.group(1).strip()


def is_placeholder(tok):
    return any(c in tok for c in " <>*(){}[]%|,") or re.search(r"(^|[-_/.])N([-_/.]|$)", tok)


def check(tok, files, dirs, types, consts, fns, modules, source_text):
    """None if the token is fine or not a code name; otherwise why it is stale."""
    if is_placeholder(tok):
        return None
    if "/" in tok or tok.endswith(FILE_SUFFIXES) or tok.startswith("."):
        if tok.startswith(".") and "/" not in tok:
            return None  # a file extension such as `.index`
        path = tok.rstrip("/")
        if path.startswith("/") or path.startswith("__"):
            return None  # an HTTP path or a data-directory name
        if any(f == path or f.endswith("/" + path) for f in files) or any(
            d == path or d.endswith("/" + path) for d in dirs
        ):
            return None
        if "/" not in path and f'"{path}"' in source_text:
            return None  # a file the broker writes at run time, named in its source
        return "no such file or folder"
    if "::" in tok:
        parts = tok.split("::")
        *heads, last = parts
        for head in heads:
            if head not in types and head not in modules and head not in ("crate", "tokio", "std"):
                if head in ("parking_lot", "oneshot", "sync"):
                    continue
                return f"no type or module `{head}`"
        if heads and heads[0] in ("tokio", "std", "parking_lot", "oneshot"):
            return None  # a library's name
        if last in fns or last in types or last in consts or last in modules:
            return None
        return f"`{last}` is not defined"
    if re.fullmatch(r"[a-z][a-z0-9]*(\.[a-z0-9]+)+(=.*)?", tok):
        key = tok.split("=", 1)[0]
        if f'"{key}"' in source_text:
            return None
        return "config key not found in the source"
    if re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+", tok):
        return None if tok in consts else "no such constant"
    if re.fullmatch(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[A-Z][a-z0-9]{3,}", tok):
        if tok in types:
            return None
        # An enum variant or a library's type: used by path somewhere in the code.
        used = re.search(rf"::{tok}\b", source_text) or re.search(
            rf"(?m)^\s*use .*\b{tok}\b", source_text
        )
        return None if used else "no such type"
    if re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)+", tok):
        if tok in fns or tok in modules or tok in consts:
            return None
        # snake_case that is a field or a config of the Raft library, not a function.
        return None if re.search(rf"\b{re.escape(tok)}\b", source_text) else "not found in the code"
    return None


def doc_tokens(doc_text):
    """Every backticked token of the document, fenced code blocks left out."""
    return set(re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", doc_text, flags=re.S)))


def unnamed_files(files, toks):
    """Source files under SOURCE_ROOTS that no token names."""
    folders = {t.rstrip("/") for t in toks if t.endswith("/")}
    missing = []
    for rel in files:
        if not rel.endswith(".rs") or not rel.startswith(SOURCE_ROOTS):
            continue
        name = rel.rsplit("/", 1)[-1]
        if any(t == name or t == rel or rel.endswith("/" + t) for t in toks):
            continue
        folder = rel.rsplit("/", 1)[0]
        if name in ("mod.rs", "lib.rs", "main.rs") and any(
            folder == d or folder.endswith("/" + d) for d in folders
        ):
            continue
        missing.append(rel)
    return missing


def unnamed_record_types(toks):
    """Variants of the metadata log's record enum that no token names."""
    path, enum = METADATA_RECORD
    text = (ROOT / path).read_text()
    body = re.search(rf"pub enum {enum} \{{(.*?)\n\}}", text, flags=re.S)
    if not body:
        return [f"{path}: enum {enum} not found"]
    variants = re.findall(r"(?m)^    ([A-Z]\w*)\b", body.group(1))
    named = {t.split("::")[-1] for t in toks}
    return [v for v in variants if v not in named]


def controller_io():
    """Where brook-controller's manifest or code reaches for I/O or a clock."""
    found = []
    manifest = (ROOT / CONTROLLER_MANIFEST).read_text()
    deps = re.search(r"(?ms)^\[dependencies\]\n(.*?)(?=^\[|\Z)", manifest)
    for name in re.findall(r"(?m)^([A-Za-z0-9_-]+)\s*[=.]", deps.group(1) if deps else ""):
        if name in CONTROLLER_IO_CRATES:
            found.append(f"{CONTROLLER_MANIFEST}: depends on `{name}`, which does I/O")
    for rs in sorted((ROOT / "controller" / "src").rglob("*.rs")):
        for n, line in enumerate(rs.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            m = CONTROLLER_IO_NAMES.search(code)
            if m:
                found.append(f"{rs.relative_to(ROOT)}:{n}: `{m.group(0)}` in the controller's decisions")
    return found


def main():
    files = tracked_files()
    dirs = {str(Path(f).parent) for f in files}
    dirs |= {str(p) for f in files for p in Path(f).parents}
    types, consts, fns, modules, source_text = collect_definitions(files)
    stale = []
    for lineno, tok in tokens(DOC.read_text()):
        why = check(tok, files, dirs, types, consts, fns, modules, source_text)
        if why:
            stale.append(f"docs/ARCHITECTURE.md:{lineno}: `{tok}`: {why}")
    toks = doc_tokens(DOC.read_text())
    for rel in unnamed_files(files, toks):
        stale.append(f"docs/ARCHITECTURE.md: the code map does not name `{rel}`")
    for variant in unnamed_record_types(toks):
        stale.append(f"docs/ARCHITECTURE.md: no `{variant}` (a {METADATA_RECORD[1]} variant)")
    stale += controller_io()
    for line in stale:
        print(line)
    if stale:
        print(
            f"{len(stale)} stale or missing names in docs/ARCHITECTURE.md or I/O in brook-controller",
            file=sys.stderr,
        )
        return 1
    print("docs/ARCHITECTURE.md: every code name it mentions exists, and it names every source file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
