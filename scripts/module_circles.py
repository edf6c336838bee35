#!/usr/bin/env python3
"""Fails when a crate's top-level modules import each other in a circle.

Each crate's modules are meant to stack: `state` under `routes`, `store` under both, and so
on, so that a module can be read knowing only what is below it. A circle (A imports B, which
imports A, maybe through others) is found here from the `crate::` paths each module's files
name outside their tests, and printed with the files that close it.

    scripts/module_circles.py [CRATE_DIR...]   # default: every crate of the workspace
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRATES = ["shared", "service-kit", "token-client", "partner-client", "auth-server", "intake-api", "test-support"]

# `crate::name`, and each first name of `crate::{a, b::c}`.
SINGLE = re.compile(r"\bcrate::(\w+)")
GROUP = re.compile(r"\bcrate::\{([^}]*)\}", re.S)


def code_of(text: str) -> str:
    """The file up to its test module (tests may reach anywhere), without comments: a doc
    comment naming another module is not an import."""
    text = text.split("#[cfg(test)]", 1)[0]
    return re.sub(r"//[^\n]*", "", text)


def imports(src: pathlib.Path) -> dict[str, dict[str, set[str]]]:
    """Top-level module -> the modules it names -> the files naming them."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        module = rel.parts[0].removesuffix(".rs")
        # A tests.rs is a test module of its own file (`#[cfg(test)] mod tests;`).
        if module in ("lib", "main") or path.name == "tests.rs":
            continue
        text = code_of(path.read_text())
        named = set(SINGLE.findall(text))
        for group in GROUP.findall(text):
            named.update(m.group(1) for m in re.finditer(r"(?:^|,)\s*(\w+)", group))
        edges = graph.setdefault(module, {})
        for other in named - {module}:
            edges.setdefault(other, set()).add(str(path.relative_to(ROOT)))
    return graph


def circles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    crates = sys.argv[1:] or CRATES
    failed = False
    for crate in crates:
        graph = imports(ROOT / crate / "src")
        for group in circles(graph):
            failed = True
            print(f"{crate}: modules import each other in a circle: {', '.join(group)}")
            for a in group:
                for b in group:
                    for path in sorted(graph[a].get(b, ())):
                        print(f"  {a} -> {b}: {path}")
    if not failed:
        print(f"no module circles in {', '.join(crates)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
