#!/usr/bin/env python3
"""Runs a Dockerfile's build without a Docker engine: each stage in a directory of its own,
the build context copied as `docker build` sends it (.dockerignore applied), and every RUN
of a toolchain stage executed on this machine, whose toolchain and Debian release must be
the base images'. RUN layers are cached by the same key Docker uses (the parent layer, the
instruction, the content of what was copied), so an unchanged dependency layer is reused.

The final stage is put together, not run: its COPY instructions fill an image root, and
its USER, ENV, WORKDIR, EXPOSE, HEALTHCHECK and CMD are written to image.json there, for
scripts/check-image.sh to start the binaries as the image would. Its RUN instructions
install Debian packages into the base image; they are listed, not run on this machine.

    replay_dockerfile.py --context . --work /var/tmp/image [--cache DIR] [--build-arg K=V]
"""

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


def instructions(text):
    """The Dockerfile's instructions as (keyword, argument text), continuations joined."""
    out, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = (pending + stripped).strip()
        pending = ""
        keyword, _, rest = whole.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    if pending:
        sys.exit("the Dockerfile ends inside a continued line")
    return out


def ignore_patterns(context):
    path = context / ".dockerignore"
    if not path.exists():
        return []
    patterns = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip("/"))
        patterns.append((negate, re.compile(glob_regex(pattern))))
    return patterns


def glob_regex(pattern):
    """Docker's pattern syntax: `*` and `?` stay within one path element, `**` spans any."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return out + "$"


def ignored(rel, patterns):
    """Whether the context path `rel` is left out: the last pattern that matches it or one
    of its parent directories decides."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for negate, regex in patterns:
        if any(regex.match(p) for p in prefixes):
            verdict = not negate
    return verdict


def send_context(context, dest):
    """Copies the context as `docker build` would send it: everything not ignored."""
    patterns = ignore_patterns(context)
    for root, dirs, files in os.walk(context):
        rel_root = os.path.relpath(root, context)
        rel_root = "" if rel_root == "." else rel_root + "/"
        dirs[:] = [d for d in dirs if not ignored(rel_root + d, patterns)]
        for d in dirs:
            (dest / (rel_root + d)).mkdir(parents=True, exist_ok=True)
        for f in files:
            if not ignored(rel_root + f, patterns):
                target = dest / (rel_root + f)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(Path(root) / f, target, follow_symlinks=False)


def tree_digest(path):
    """A digest of a file tree's names, modes and contents, for layer cache keys."""
    h = hashlib.sha256()
    paths = [path] if path.is_file() else sorted(p for p in path.rglob("*"))
    for p in paths:
        rel = p.name if path.is_file() else str(p.relative_to(path))
        h.update(rel.encode() + b"\0" + oct(p.lstat().st_mode).encode() + b"\0")
        if p.is_file() and not p.is_symlink():
            h.update(hashlib.sha256(p.read_bytes()).digest())
        elif p.is_symlink():
            h.update(os.readlink(p).encode())
    return h.hexdigest()


class Stage:
    def __init__(self, name, base, root):
        self.name, self.base, self.root = name, base, root
        self.workdir, self.env, self.user = "/", {}, "root"
        self.key = hashlib.sha256(base.encode()).hexdigest()
        self.config = {}

    def path(self, inside):
        """Where a path inside the stage's file system is on this machine."""
        absolute = inside if inside.startswith("/") else os.path.join(self.workdir, inside)
        return self.root / os.path.normpath(absolute).lstrip("/")

    def advance(self, *parts):
        h = hashlib.sha256(self.key.encode())
        for part in parts:
            h.update(b"\0" + part.encode())
        self.key = h.hexdigest()


def check_base(image, host):
    """A toolchain stage runs on this machine: its Rust and Debian release must be the
    image's, or what is proven here is not what the image would build."""
    m = re.match(r"rust:(\d+\.\d+)(?:\.\d+)?-(?:slim-)?(\w+)$", image)
    if m:
        if not host["rustc"].startswith(f"rustc {m.group(1)}."):
            sys.exit(f"{image} has Rust {m.group(1)}, this machine {host['rustc']}")
        release = m.group(2)
    else:
        m = re.match(r"debian:(\w+)(?:-slim)?$", image)
        if not m:
            sys.exit(f"no stand-in on this machine for the base image {image}")
        release = m.group(1)
    if release != host["release"]:
        sys.exit(f"{image} is Debian {release}, this machine {host['release']}")
    return "toolchain" if image.startswith("rust:") else "runtime"


def host_facts():
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=True)
    release = ""
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            release = line.split("=", 1)[1].strip('"')
    return {"rustc": rustc.stdout.strip(), "release": release}


def copy_into(sources, dest, stage, from_stage, context):
    """COPY: the sources (context paths, or paths in another stage) into `dest`."""
    source_paths = []
    for src in sources:
        if from_stage is None:
            p = context / os.path.normpath(src)
            if not p.exists():
                sys.exit(f"COPY {src}: not in the build context (or ignored)")
        else:
            p = from_stage.path(src)
            if not p.exists():
                sys.exit(f"COPY --from={from_stage.name} {src}: not in that stage")
        source_paths.append(p)
    into_dir = dest.endswith("/") or len(sources) > 1 or dest in (".", "./")
    target = stage.path(dest)
    for p in source_paths:
        if p.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copytree(p, target, symlinks=True, dirs_exist_ok=True)
        else:
            final = target / p.name if into_dir else target
            final.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, final)
    return "".join(tree_digest(p) for p in source_paths)


def run(stage, command, args, cache, log):
    """RUN, or its result from the layer cache when the same layer was built before."""
    stage.advance("RUN", command, json.dumps(args, sort_keys=True))
    cached = cache / stage.key if cache else None
    if cached and cached.is_dir():
        log(f"RUN {command}  (cached layer {stage.key[:12]})")
        shutil.rmtree(stage.root)
        shutil.copytree(cached, stage.root, symlinks=True)
        return
    log(f"RUN {command}")
    cwd = stage.path(stage.workdir)
    cwd.mkdir(parents=True, exist_ok=True)
    # The image's environment, not this machine's build settings: a CARGO_TARGET_DIR or
    # RUSTFLAGS here would build somewhere or something else than the image does.
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "CARGO_HOME" or not (k.startswith(("CARGO_", "RUST")) and k != "RUSTUP_HOME")
    }
    env.update(stage.env)
    env.update(args)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=env)
    if done.returncode != 0:
        sys.exit(f"RUN {command}: exit {done.returncode}")
    if cached:
        partial = cache / (stage.key + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(stage.root, partial, symlinks=True)
        partial.rename(cached)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=Path, default=Path("."))
    parser.add_argument("--dockerfile", type=Path)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--cache", type=Path, help="layer cache directory")
    parser.add_argument("--build-arg", action="append", default=[])
    opts = parser.parse_args()
    context = opts.context.resolve()
    dockerfile = opts.dockerfile or context / "Dockerfile"
    given = dict(a.split("=", 1) for a in opts.build_arg)
    host = host_facts()
    work = opts.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sent = work / "context"
    sent.mkdir()
    send_context(context, sent)
    if opts.cache:
        opts.cache.mkdir(parents=True, exist_ok=True)
    used = set()

    def log(message):
        print(f"[{stage.name}] {message}", flush=True)

    stages, stage, args, skipped = {}, None, {}, []
    for keyword, rest in instructions(dockerfile.read_text()):
        if keyword == "FROM":
            words = rest.split()
            base = words[0]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else f"stage{len(stages)}"
            root = work / "stages" / name
            if base in stages:
                parent = stages[base]
                shutil.copytree(parent.root, root, symlinks=True)
                stage = Stage(name, base, root)
                stage.key, stage.workdir = parent.key, parent.workdir
                stage.env, stage.user = dict(parent.env), parent.user
                stage.kind = parent.kind
            else:
                root.mkdir(parents=True)
                stage = Stage(name, base, root)
                stage.kind = check_base(base, host)
            stages[name] = stage
            args = {}
            log(f"FROM {base}")
        elif keyword == "WORKDIR":
            stage.workdir = os.path.join(stage.workdir, rest)
            stage.path(stage.workdir).mkdir(parents=True, exist_ok=True)
            stage.advance("WORKDIR", stage.workdir)
        elif keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name] = given.get(name, default)
            stage.advance("ARG", name, args[name])
        elif keyword == "ENV":
            pairs = shlex.split(rest)
            if len(pairs) >= 2 and "=" not in pairs[0]:
                pairs = [f"{pairs[0]}={' '.join(pairs[1:])}"]
            for pair in pairs:
                k, _, v = pair.partition("=")
                stage.env[k] = v
            stage.advance("ENV", rest)
        elif keyword == "COPY":
            words = shlex.split(rest)
            flags = [w for w in words if w.startswith("--")]
            paths = [w for w in words if not w.startswith("--")]
            source_stage = None
            for flag in flags:
                if flag.startswith("--from="):
                    source_stage = stages[flag.split("=", 1)[1]]
            if source_stage is None:
                sources = [str(Path(p)) for p in paths[:-1]]
                digest = copy_into(sources, paths[-1], stage, None, sent)
            else:
                digest = copy_into(paths[:-1], paths[-1], stage, source_stage, None)
            stage.advance("COPY", rest, digest)
            log(f"COPY {rest}")
        elif keyword == "RUN":
            if stage.kind == "runtime":
                skipped.append(rest)
                log(f"RUN {rest}  (not run here: it installs into the base image)")
                continue
            run(stage, rest, args, opts.cache, log)
            used.add(stage.key)
        elif keyword == "USER":
            stage.user = rest
        elif keyword in ("CMD", "ENTRYPOINT", "EXPOSE", "HEALTHCHECK", "LABEL", "SHELL"):
            stage.config[keyword.lower()] = rest
        else:
            sys.exit(f"{keyword}: not an instruction this replay knows")

    # The last stage is the image.
    image = {
        "stage": stage.name,
        "base": stage.base,
        "root": str(stage.root),
        "user": stage.user,
        "workdir": stage.workdir,
        "env": stage.env,
        "not_run": skipped,
        **stage.config,
    }
    (work / "image.json").write_text(json.dumps(image, indent=2))
    if opts.cache:
        # Only the layers this build used are kept: an old dependency layer goes once a
        # build no longer needs it.
        for entry in opts.cache.iterdir():
            if entry.name not in used:
                shutil.rmtree(entry, ignore_errors=True)
    print(f"image root: {stage.root}")


if __name__ == "__main__":
    main()
