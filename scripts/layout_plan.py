"""Turns `docker-compose config` output into the plan scripts/check-layout.sh runs.

Usage: layout_plan.py RESOLVED_YAML DOCKERFILE BIN_DIR PG_BIN_DIR OUT_DIR

Writes, under OUT_DIR:
  order                 services to start, dependencies first
  skipped               services left out, each with why
  networks              "name internal(0|1) prefix-length gateway" per network
  svc/NAME/argv, env    NUL-separated: the command and its environment
  svc/NAME/health       NUL-separated health test as argv (absent: none)
  svc/NAME/health_times "interval timeout retries start_period" in seconds
  svc/NAME/meta         kind, user, workdir, stop signal: one "key value" a line
  svc/NAME/volumes      "source<TAB>target<TAB>ro|rw" a line
  svc/NAME/owned        "path uid:gid": what the image owns that a volume would inherit
  svc/NAME/private      container-private directories (the image's own filesystem)
  svc/NAME/depends      "service condition" a line
  svc/NAME/nets         "network address" a line
  svc/NAME/ports        "host_ip published target" a line
  svc/NAME/hosts        the /etc/hosts the service sees
"""

import ipaddress
import os
import re
import shlex
import sys

import yaml

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def seconds(value, default):
    """Compose durations ("5s", "1m30s", "250ms") in seconds."""
    if value is None:
        return default
    total = 0.0
    for number, unit in re.findall(r"([\d.]+)(ms|us|ns|h|m|s)", str(value)):
        total += float(number) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[unit]
    return total


def dockerfile_final_stage(path):
    """ENV, WORKDIR, USER (as uid:gid) and HEALTHCHECK of the Dockerfile's last stage."""
    with open(path) as f:
        text = re.sub(r"\\\n", " ", f.read())
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    last_from = max(i for i, l in enumerate(lines) if l.upper().startswith("FROM "))
    stage = {"env": {}, "workdir": "/", "user": "0:0", "health": None}
    uids = {}
    for line in lines[last_from + 1:]:
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                stage["env"][key] = value
        elif word == "WORKDIR":
            stage["workdir"] = rest.strip()
        elif word == "RUN":
            for m in re.finditer(r"useradd\s+([^&;|]*)", rest):
                args = m.group(1).split()
                if "--uid" in args:
                    uids[args[-1]] = args[args.index("--uid") + 1]
        elif word == "USER":
            name = rest.strip()
            uid = name if name.isdigit() else uids.get(name)
            if uid is None:
                sys.exit(f"Dockerfile: USER {name} has no uid the script can find")
            # useradd --system without --gid makes a group of the user's own, same number here.
            stage["user"] = f"{uid}:{uid}"
        elif word == "HEALTHCHECK":
            opts, _, cmd = rest.partition(" CMD ")
            flags = dict(re.findall(r"--([\w-]+)=(\S+)", opts))
            stage["health"] = {
                "test": ["CMD-SHELL", cmd.strip()],
                "interval": flags.get("interval"),
                "timeout": flags.get("timeout"),
                "retries": int(flags.get("retries", 3)),
                "start_period": flags.get("start-period"),
            }
    return stage


def image_runtime(name, service, image, project, bin_dir, pg_bin):
    """How a service's image runs here: the command, user, working directory, environment,
    stop signal, directories of its own, and what the image's entrypoint would do."""
    repo = image.rsplit(":", 1)[0]
    command = service.get("command")
    if isinstance(command, str):
        command = shlex.split(command)
    if repo == "partner-intake":
        command = command or ["auth-server", "serve"]
        return {
            "kind": "partner",
            "argv": [os.path.join(bin_dir, command[0])] + command[1:],
            "user": project["user"],
            "workdir": project["workdir"],
            "env": dict(project["env"], PATH=PATH),
            "health": project["health"],
            "stop": "TERM",
            "private": [project["workdir"]],
            "owned": {project["workdir"]: project["user"]},
        }
    if repo == "postgres":
        # The image's entrypoint initialises an empty data directory from POSTGRES_* and
        # docker-entrypoint-initdb.d, then runs the command as user postgres.
        return {
            "kind": "postgres",
            "argv": command or ["postgres"],
            "user": "0:0",
            "workdir": "/",
            "env": {"PATH": f"{pg_bin}:{PATH}", "PGDATA": "/var/lib/postgresql/data"},
            "health": None,
            "stop": "INT",
            "private": [],
            "owned": {},
        }
    if repo == "redis":
        # The image builds redis-server with protected mode off, so the other containers
        # may connect without a password; Debian's keeps it on.
        argv = command or ["redis-server"]
        return {
            "kind": "redis",
            "argv": argv + ["--protected-mode", "no"],
            "user": "0:0",
            "workdir": "/data",
            "env": {"PATH": PATH},
            "health": None,
            "stop": "TERM",
            "private": [],
            "owned": {},
        }
    if repo == "nginx":
        return {
            "kind": "nginx",
            "argv": command or ["nginx", "-g", "daemon off;"],
            "user": "0:0",
            "workdir": "/",
            "env": {"PATH": PATH},
            "health": None,
            "stop": "QUIT",
            # Debian's nginx keeps its access log and temporary files here.
            "private": ["/var/log/nginx", "/var/lib/nginx"],
            "owned": {},
        }
    if repo == "prom/prometheus":
        return {
            "kind": "prometheus",
            "argv": ["prometheus"] + (command or []),
            "user": "65534:65534",
            "workdir": "/prometheus",
            "env": {"PATH": PATH},
            "health": None,
            "stop": "TERM",
            "private": [],
            "owned": {"/prometheus": "65534:65534"},
        }
    return None


SKIP = {"grafana/grafana": "Grafana is not packaged by Debian"}


def main():
    resolved, dockerfile, bin_dir, pg_bin, out = sys.argv[1:6]
    with open(resolved) as f:
        compose = yaml.safe_load(f)
    services = compose["services"]
    project = dockerfile_final_stage(dockerfile)

    skipped, plans = {}, {}
    for name, service in services.items():
        image = service.get("image", "")
        reason = SKIP.get(image.rsplit(":", 1)[0])
        if reason:
            skipped[name] = reason
            continue
        runtime = image_runtime(name, service, image, project, bin_dir, pg_bin)
        if runtime is None:
            sys.exit(f"{name}: no way to run image {image!r} here")
        plans[name] = runtime

    depends = {}
    for name in plans:
        raw = services[name].get("depends_on") or {}
        if isinstance(raw, list):
            raw = {d: {"condition": "service_started"} for d in raw}
        depends[name] = {d: (c or {}).get("condition", "service_started") for d, c in raw.items()}
        for d in depends[name]:
            if d not in plans:
                sys.exit(f"{name} depends on {d}, which is {skipped.get(d, 'not a service')}")

    order, done = [], set()
    while len(order) < len(plans):
        ready = sorted(n for n in plans if n not in done and set(depends[n]) <= done)
        if not ready:
            sys.exit("depends_on has a cycle among: " + " ".join(sorted(set(plans) - done)))
        order.extend(ready)
        done.update(ready)

    # Each network gets its subnet, or one of 10.89.N.0/24 not otherwise taken; containers
    # are numbered from .2, the gateway's .1 left to the host side of a non-internal one.
    networks = compose.get("networks") or {}
    subnets = {}
    for net, spec in networks.items():
        config = ((spec or {}).get("ipam") or {}).get("config") or []
        if config and config[0].get("subnet"):
            subnets[net] = ipaddress.ip_network(config[0]["subnet"])
    spare = (ipaddress.ip_network(f"10.89.{i}.0/24") for i in range(1, 255))
    for net in networks:
        if net not in subnets:
            subnets[net] = next(s for s in spare if not any(s.overlaps(t) for t in subnets.values()))
    hosts_iter = {net: subnets[net].hosts() for net in networks}
    for net in networks:
        next(hosts_iter[net])  # the gateway
    # An ipv4_address the file gives is kept; the rest are handed out around them.
    fixed = {
        (name, net): ipaddress.ip_address(spec["ipv4_address"])
        for name in order
        for net, spec in (services[name].get("networks") or {}).items()
        if isinstance(spec, dict) and spec.get("ipv4_address")
    }
    taken = set(fixed.values())
    addresses = {}
    for name in order:
        nets = services[name].get("networks") or {"default": None}
        addresses[name] = {
            net: fixed.get((name, net)) or next(a for a in hosts_iter[net] if a not in taken)
            for net in nets
        }

    os.makedirs(os.path.join(out, "svc"), exist_ok=True)
    with open(os.path.join(out, "order"), "w") as f:
        f.write("".join(n + "\n" for n in order))
    with open(os.path.join(out, "skipped"), "w") as f:
        f.write("".join(f"{n}\t{r}\n" for n, r in sorted(skipped.items())))
    with open(os.path.join(out, "networks"), "w") as f:
        for net, spec in networks.items():
            internal = 1 if (spec or {}).get("internal") else 0
            gateway = next(subnets[net].hosts())
            f.write(f"{net} {internal} {subnets[net].prefixlen} {gateway}\n")

    for name in order:
        service, plan = services[name], plans[name]
        d = os.path.join(out, "svc", name)
        os.makedirs(d, exist_ok=True)

        def write(file, text):
            with open(os.path.join(d, file), "w") as f:
                f.write(text)

        env = dict(plan["env"], HOSTNAME=name, HOME="/root" if plan["user"] == "0:0" else plan["workdir"])
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(e.split("=", 1) for e in environment)
        env.update({k: "" if v is None else str(v) for k, v in environment.items()})
        write("argv", "".join(a + "\0" for a in plan["argv"]))
        write("env", "".join(f"{k}={v}\0" for k, v in env.items()))

        health = service.get("healthcheck") or plan["health"]
        if health and not health.get("disable") and health["test"][0] != "NONE":
            test = health["test"]
            argv = ["/bin/sh", "-c", test[1]] if test[0] == "CMD-SHELL" else test[1:]
            write("health", "".join(a + "\0" for a in argv))
            write("health_times", "%g %g %d %g\n" % (
                seconds(health.get("interval"), 30), seconds(health.get("timeout"), 30),
                int(health.get("retries", 3)), seconds(health.get("start_period"), 0)))

        write("meta", f"kind {plan['kind']}\nuser {plan['user']}\nworkdir {plan['workdir']}\nstop {plan['stop']}\n")
        lines = []
        for v in service.get("volumes") or []:
            if isinstance(v, dict):
                source, target, mode = v.get("source"), v["target"], "ro" if v.get("read_only") else "rw"
                kind = v.get("type")
            else:
                parts = v.split(":")
                source, target = parts[0], parts[1]
                mode = "ro" if len(parts) > 2 and "ro" in parts[2].split(",") else "rw"
                kind = "bind" if source.startswith("/") or source.startswith(".") else "volume"
            if kind == "volume":
                source = os.path.join(out, "volumes", source)
                os.makedirs(source, exist_ok=True)
            lines.append(f"{source}\t{target}\t{mode}\n")
        write("volumes", "".join(lines))
        write("owned", "".join(f"{p} {u}\n" for p, u in plan["owned"].items()))
        write("private", "".join(p + "\n" for p in plan["private"]))
        write("depends", "".join(f"{dep} {cond}\n" for dep, cond in depends[name].items()))
        nets = addresses[name]
        write("nets", "".join(f"{net} {addr}\n" for net, addr in nets.items()))

        ports = []
        for p in service.get("ports") or []:
            if isinstance(p, dict):
                ports.append((p.get("host_ip") or "0.0.0.0", p.get("published"), p["target"]))
            else:
                parts = str(p).split("/")[0].split(":")
                host_ip = parts[0] if len(parts) == 3 else "0.0.0.0"
                ports.append((host_ip, parts[-2] if len(parts) > 1 else parts[-1], parts[-1]))
        write("ports", "".join(f"{h} {pub} {t}\n" for h, pub, t in ports))

        # Other services by name, at their address on the first network shared with this one.
        hosts = ["127.0.0.1\tlocalhost"]
        for other in order:
            shared = [net for net in nets if net in addresses[other]]
            if shared:
                hosts.append(f"{addresses[other][shared[0]]}\t{other}")
        write("hosts", "\n".join(hosts) + "\n")


main()
