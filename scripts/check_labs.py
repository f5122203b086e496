#!/usr/bin/env python3
"""Checks that docs/LABS.md and the lab tests name each other.

A lab is a JUnit test under protocol-tests/java tagged `@Tag(Lab.TAG)` (the tag "lab"). The document
runs each one with a line `scripts/lab Class#method` followed by a ```text block: the report the test
prints, which the test itself compares with that block (`Lab.finish`). This script checks the names:

- every `scripts/lab Class#method` line names a tagged test method of that class, once;
- every tagged test method is in the document;
- every such line is followed by a ```text block before the next lab;
- every lab of the live page (tools/src/supervisor/labs.json) names, as its `article`, a lab
  heading of the document, and every lab heading is named by a lab of the page (issue 35:
  every lab runs from the page too), or by a row `| not on the page | [N](#anchor) | why |`
  of the document's table of page labs, which says why not.

Exit status 1 and one line per problem.
"""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "LABS.md"
JAVA = ROOT / "protocol-tests" / "java" / "src" / "test" / "java"
PAGE_LABS = ROOT / "tools" / "src" / "supervisor" / "labs.json"

# A @Tag(Lab.TAG) (or @Tag("lab")) among the annotations right before a method declaration.
TAGGED = re.compile(
    r'@Tag\((?:Lab\.TAG|"lab")\)\s*(?:@\w+(?:\([^)]*\))?\s*)*void\s+(\w+)\s*\(', re.S
)
# A row of the page-lab table for a lab the page cannot run, with the reason in its last cell.
NOT_ON_PAGE = re.compile(r"^\| not on the page \| \[\d+\]\(#([\w-]+)\) \| [^|]*\w[^|]* \|$", re.M)
RUN = re.compile(r"^\s*scripts/lab\s+(\S+)\s*$")


def lab_tests():
    """{'Class#method'} of every tagged test method."""
    out = set()
    for path in JAVA.rglob("*.java"):
        for m in TAGGED.finditer(path.read_text(errors="replace")):
            out.add(f"{path.stem}#{m.group(1)}")
    return out


def documented(lines):
    """[(line number, 'Class#method', has a text block)] for every `scripts/lab` line."""
    runs = [(i, RUN.match(l).group(1)) for i, l in enumerate(lines) if RUN.match(l)]
    out = []
    for k, (i, name) in enumerate(runs):
        end = runs[k + 1][0] if k + 1 < len(runs) else len(lines)
        has_block = any(l.strip() == "```text" for l in lines[i + 1 : end])
        out.append((i + 1, name, has_block))
    return out


def anchor(heading):
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def page_lab_problems(lines):
    """One line per page lab whose `article` is not `docs/LABS.md#<a lab heading's anchor>`."""
    anchors = {anchor(l[4:]) for l in lines if l.startswith("### ")}
    problems = []
    on_page = set()
    for lab in json.loads(PAGE_LABS.read_text())["labs"]:
        doc, _, frag = lab["article"].partition("#")
        if doc != "docs/LABS.md" or frag not in anchors:
            problems.append(f"{PAGE_LABS.relative_to(ROOT)}: lab {lab['name']}: {lab['article']} is no lab of docs/LABS.md")
        on_page.add(frag)
    excused = set(NOT_ON_PAGE.findall("\n".join(lines)))
    for frag in sorted(excused & on_page):
        problems.append(f"docs/LABS.md#{frag}: on the page, yet listed as not on the page")
    for frag in sorted(anchors - on_page - excused):
        problems.append(f"docs/LABS.md#{frag}: no lab of {PAGE_LABS.relative_to(ROOT)} runs it on the live page")
    return problems


def main():
    lines = DOC.read_text().splitlines()
    tests = lab_tests()
    problems = []
    seen = {}
    for lineno, name, has_block in documented(lines):
        if name in seen:
            problems.append(f"docs/LABS.md:{lineno}: {name} is already run at line {seen[name]}")
        seen[name] = lineno
        if name not in tests:
            problems.append(f"docs/LABS.md:{lineno}: {name} is not a @Tag(Lab.TAG) test method")
        if not has_block:
            problems.append(f"docs/LABS.md:{lineno}: no ```text report block after `scripts/lab {name}`")
    for name in sorted(tests - set(seen)):
        problems.append(f"{name} is tagged as a lab but docs/LABS.md has no `scripts/lab {name}` line")
    problems += page_lab_problems(lines)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"docs/LABS.md: {len(seen)} labs, each a tagged test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
