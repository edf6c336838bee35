#!/usr/bin/env python3
"""Fails when the README promises behaviour that no test names.

A promise is a README sentence saying what always or never happens, or what happens at once,
exactly once, or not any more ("at once", "nothing more", "never", "exactly once",
"always"). Each is listed in `promises.toml` by a fragment of its own words, with the tests
that hold it to its word (`path::test_name`), or, when it promises no behaviour (a remark on
how to run the tests, say), as an aside with the reason. The check fails when:

- a promise of the README is in neither list (a new promise without its test),
- a listed fragment is no longer in the README (the promise changed: look at its tests),
- a listed test is not in its file (renamed or removed: the promise lost its test).

    scripts/promises.py            # check
    scripts/promises.py --list     # print the README's promises, each with its tests
"""

import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORDS = re.compile(r"\b(at once|nothing more|never|exactly once|always)\b", re.I)


def collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def sentences(readme: str) -> list[str]:
    """The README's sentences, white space collapsed; a code block's comment lines count as
    sentences of their own (they promise as much as prose does)."""
    prose, found = [], []
    in_code = False
    for line in readme.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            if "#" in line:
                found.append(collapse(line.split("#", 1)[1]))
            continue
        prose.append(line)
    # A sentence ends at a full stop, colon or semicolon followed by white space, or at a
    # paragraph's or a list item's end.
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*] |\d+\. |\|))", "\n".join(prose)):
        for s in re.split(r"(?<=[.;])\s+", collapse(block)):
            if s:
                found.append(s)
    return found


def test_exists(spec: str) -> bool:
    path, _, name = spec.partition("::")
    file = ROOT / path
    if not file.is_file():
        return False
    if file.suffix != ".rs":
        # A check script: the text of the line that checks the promise.
        return name in file.read_text()
    return re.search(rf"\bfn {re.escape(name)}\s*[(<]", file.read_text()) is not None


def main() -> int:
    readme = (ROOT / "README.md").read_text()
    listed = tomllib.loads((ROOT / "promises.toml").read_text())
    promises = listed.get("promise", [])
    asides = listed.get("aside", [])
    flat = collapse(readme)
    problems = []
    for entry in promises + asides:
        if collapse(entry["says"]) not in flat:
            problems.append(f"not in the README any more: {entry['says']!r}")
    for entry in promises:
        if not entry.get("tests"):
            problems.append(f"a promise without a test: {entry['says']!r}")
        for spec in entry.get("tests", []):
            if not test_exists(spec):
                problems.append(f"no test {spec} (for {entry['says']!r})")
    for entry in asides:
        if not entry.get("why"):
            problems.append(f"an aside without its reason: {entry['says']!r}")
    # Where each entry's words are in the README: a sentence is covered by the entries whose
    # words overlap it (a fragment may run across a sentence's end, or stop short of it).
    spans = []
    for e in promises + asides:
        f = collapse(e["says"])
        start = flat.find(f)
        while start >= 0:
            spans.append((start, start + len(f), e))
            start = flat.find(f, start + 1)
    for s in sentences(readme):
        if not WORDS.search(s):
            continue
        at = flat.find(s)
        covering = [e for a, b, e in spans if at >= 0 and a < at + len(s) and at < b]
        if "--list" in sys.argv:
            tests = [t for e in covering for t in e.get("tests", [])] or [
                f"(aside: {e['why']})" for e in covering if "why" in e
            ]
            print(f"- {s}\n    " + ("\n    ".join(tests) or "NOTHING"))
        elif not covering:
            problems.append(f"a promise no test names: {s!r}")
    if "--list" in sys.argv:
        return 0
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} problem(s): list each promise in promises.toml with its tests", file=sys.stderr)
        return 1
    print(f"every promise of the README is named by a test ({len(promises)} promises, {len(asides)} asides)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
