#!/usr/bin/env python3
"""Fails when a crate's modules import each other in a circle, at any depth.

Each crate's modules are meant to stack: `state` under `routes`, `store` under both, and so
on, so that a module can be read knowing only what is below it. The same holds inside a
module: `webhooks::store::history` and `webhooks::store::events` may not name each other
both ways. A circle (A imports B, which imports A, maybe through others) is found here among
the children of every module, from the `crate::`, `super::` and `self::` paths each file
names outside its tests, and printed with the files that close it.

    scripts/module_circles.py [CRATE_DIR...]   # default: every crate of the workspace
"""

import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRATES = ["shared", "service-kit", "token-client", "partner-client", "auth-server", "intake-api", "test-support"]

# The start of a path another module is reached by.
ROOTED = re.compile(r"\b(crate|super|self)((?:::\w+)*)(::\{)?")


def code_of(text: str) -> str:
    """The file up to its test module (tests may reach anywhere), without comments: a doc
    comment naming another module is not an import."""
    text = text.split("#[cfg(test)]", 1)[0]
    return re.sub(r"//[^\n]*", "", text)


def module_of(rel: pathlib.Path) -> tuple[str, ...]:
    """The module a file under src/ defines: `a/b.rs` and `a/b/mod.rs` are `a::b`."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def group_heads(text: str, at: int) -> list[list[str]]:
    """The paths of a `{...}` group opened just before `at`, as far as their first name
    (deeper groups' own names are the same module's children, reached through it)."""
    heads, depth, item = [], 0, ""
    for ch in text[at:]:
        if ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            heads.append(item)
            item = ""
            continue
        if depth == 0:
            item += ch
    heads.append(item)
    out = []
    for head in heads:
        names = re.findall(r"\w+", head.split(" as ")[0])
        if names and names[0] != "self":
            out.append(names)
    return out


def named_paths(module: tuple[str, ...], text: str) -> list[tuple[str, ...]]:
    """Every module path a file of `module` names, resolved from the crate's root."""
    found = []
    for m in ROOTED.finditer(text):
        base = {"crate": (), "super": module[:-1], "self": module}[m.group(1)]
        rest = tuple(m.group(2).split("::")[1:])
        while rest[:1] == ("super",):
            base, rest = base[:-1], rest[1:]
        if m.group(3):
            found.extend(base + rest + tuple(names) for names in group_heads(text, m.end()))
        else:
            found.append(base + rest)
    return found


def imports(src: pathlib.Path) -> dict[tuple[str, ...], dict[str, dict[str, set[str]]]]:
    """Parent module -> child -> the sibling children it names -> the files naming them."""
    files = {}
    for path in sorted(src.rglob("*.rs")):
        # A tests.rs is a test module of its own file (`#[cfg(test)] mod tests;`).
        if path.name == "tests.rs":
            continue
        files[path] = module_of(path.relative_to(src))
    modules = set(files.values())
    graphs: dict[tuple[str, ...], dict[str, dict[str, set[str]]]] = {}
    for path, module in files.items():
        for named in named_paths(module, code_of(path.read_text())):
            # As far as it names a module: the rest is an item in it.
            while named and named not in modules:
                named = named[:-1]
            depth = 0
            while depth < min(len(module), len(named)) and module[depth] == named[depth]:
                depth += 1
            if depth == len(module) or depth == len(named):
                continue  # a module's own parent or child: not a sibling
            parent = module[:depth]
            edges = graphs.setdefault(parent, {}).setdefault(module[depth], {})
            edges.setdefault(named[depth], set()).add(os.path.relpath(path, ROOT))
    for module in modules:
        if module:
            graphs.setdefault(module[:-1], {}).setdefault(module[-1], {})
    return graphs


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
        for parent, graph in sorted(imports(ROOT / crate / "src").items()):
            where = f"{crate}::{'::'.join(parent)}" if parent else crate
            for group in circles(graph):
                failed = True
                print(f"{where}: modules import each other in a circle: {', '.join(group)}")
                for a in group:
                    for b in group:
                        for path in sorted(graph[a].get(b, ())):
                            print(f"  {a} -> {b}: {path}")
    if not failed:
        print(f"no module circles at any depth in {', '.join(crates)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
