#!/usr/bin/env python3
"""Fails when the broker crate's top-level modules import each other in a circle.

A module is a top-level file `broker/src/X.rs` or folder `broker/src/X/`. There is an edge
A -> B when a file of A names `crate::B`: in `use crate::B::..`, in a path in code
(`crate::B::f()`), or inside a group (`use crate::{B, C::D}`). Comments are left out, and so
is test code: a `#[cfg(test)] mod tests { .. }` block, and a file a `#[cfg(test)] mod X;`
declares; a test may reach across modules without making the modules depend on each other.

The script prints every strongly connected component of more than one module, and for each
edge inside one the file:line of a reference. It exits with status 1 when an edge inside a
component is not in `ALLOWED_EDGES`, the circles that existed when this check was written;
an edge cut from the code should be cut from the list too, which the script asks for, so the
list only shrinks. The goal is an empty list.

`--graph` prints every edge, inside a circle or not, with its reference; `--shrink` takes the
edges no longer inside a circle out of `ALLOWED_EDGES`, in this file.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "broker" / "src"

# Edges inside an import circle that the code still has. Cut the edge from the code, then
# from here; never add one.
ALLOWED_EDGES = {
    ("admin_security", "security"),
    ("auto_topic_creation", "txn"),
    ("broker", "auto_topic_creation"),
    ("broker", "metrics"),
    ("broker", "share"),
    ("broker", "txn"),
    ("config", "admin_security"),
    ("config", "listeners"),
    ("config", "security"),
    ("listeners", "security"),
    ("metrics", "broker"),
    ("net", "security"),
    ("security", "config"),
    ("security", "listeners"),
    ("security", "net"),
    ("share", "broker"),
    ("share", "txn"),
    ("txn", "broker"),
    ("txn", "share"),
}

CRATE_PATH = re.compile(r"\bcrate\s*::\s*(\{|[A-Za-z_][A-Za-z0-9_]*)")
TEST_MOD_FILE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_]\w*)\s*;")
TEST_MOD_BLOCK = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+[A-Za-z_]\w*\s*\{")


def modules():
    """The top-level modules: file stem or folder name -> its .rs files."""
    found = {}
    for path in sorted(SRC.iterdir()):
        if path.is_dir():
            files = sorted(path.rglob("*.rs"))
            if files:
                found[path.name] = files
        elif path.suffix == ".rs" and path.name != "lib.rs":
            found[path.stem] = [path]
    return found


def blank(text, start, end):
    """`text` with [start, end) replaced by spaces, newlines kept so line numbers hold."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def strip_comments_and_strings(text):
    """Blanks comments, string and char literals, keeping every offset and line."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 8]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            j = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if j < 0 else j + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '{'), not a lifetime ('a).
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def without_test_blocks(text):
    while True:
        m = TEST_MOD_BLOCK.search(text)
        if not m:
            return text
        text = blank(text, m.start(), matching_brace(text, m.end() - 1))


def test_files(files):
    """The files that a `#[cfg(test)] mod X;` declares."""
    tests = set()
    for path in files:
        for name in TEST_MOD_FILE.findall(path.read_text()):
            base = path.parent if path.name in ("mod.rs", "lib.rs") else path.with_suffix("")
            tests.update({base / f"{name}.rs", base / name / "mod.rs"})
    return tests


def group_heads(text, open_at):
    """The first segment of each item of a `crate::{..}` group."""
    close = matching_brace(text, open_at)
    depth, start, heads = 0, open_at + 1, []
    for j in range(open_at + 1, close):
        ch = text[j]
        if ch == "{":
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
        elif ch in ",}" and depth == 0:
            item = text[start:j]
            m = re.match(r"\s*([A-Za-z_]\w*)", item)
            if m:
                heads.append((m.group(1), start + m.start(1)))
            start = j + 1
    return heads


def references(path):
    """(module name, line) for each `crate::X` the file names outside comments and tests."""
    text = without_test_blocks(strip_comments_and_strings(path.read_text()))
    found = []
    for m in CRATE_PATH.finditer(text):
        heads = group_heads(text, m.start(1)) if m.group(1) == "{" else [(m.group(1), m.start(1))]
        for name, offset in heads:
            found.append((name, text.count("\n", 0, offset) + 1))
    return found


def graph():
    mods = modules()
    excluded = test_files([p for files in mods.values() for p in files] + [SRC / "lib.rs"])
    edges = {}
    for name, files in mods.items():
        for path in files:
            if path in excluded:
                continue
            for target, line in references(path):
                if target in mods and target != name and (name, target) not in edges:
                    edges[(name, target)] = f"{path.relative_to(ROOT)}:{line}"
    return mods, edges


def strongly_connected(nodes, edges):
    """Tarjan's algorithm, iteratively: the components, each a sorted list."""
    succ = {n: sorted(b for (a, b) in edges if a == n) for n in nodes}
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if i < len(succ[node]):
                work.append((node, i + 1))
                nxt = succ[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                comps.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return comps


def shrink(gone):
    """Rewrites this file without the allowed edges in `gone`."""
    me = Path(__file__)
    text = me.read_text()
    for a, b in gone:
        text = text.replace(f'    ("{a}", "{b}"),\n', "", 1)
    me.write_text(text)


def main():
    mods, edges = graph()
    if "--graph" in sys.argv:
        for (a, b), where in sorted(edges.items()):
            print(f"{a} -> {b}  {where}")
        return 0
    circles = [c for c in strongly_connected(mods, edges) if len(c) > 1]
    inside = {e: w for e, w in edges.items() if any(e[0] in c and e[1] in c for c in circles)}
    for comp in circles:
        comp_edges = sorted(e for e in inside if e[0] in comp)
        print(f"import circle of {len(comp)} modules, {len(comp_edges)} edges: {', '.join(comp)}")
        for a, b in comp_edges:
            mark = "" if (a, b) in ALLOWED_EDGES else "  NEW"
            print(f"  {a} -> {b}  {inside[(a, b)]}{mark}")
    new = sorted(e for e in inside if e not in ALLOWED_EDGES)
    gone = sorted(e for e in ALLOWED_EDGES if e not in inside)
    if gone and "--shrink" in sys.argv:
        shrink(gone)
        gone = []
    for a, b in gone:
        print(f"allowed edge {a} -> {b} is no longer in a circle: take it out of ALLOWED_EDGES")
    for a, b in new:
        print(f"new import circle edge {a} -> {b} ({inside[(a, b)]}): the modules import each other")
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
