#!/usr/bin/env python3
"""Reads the rendered Kubernetes manifests for scripts/check-k8s.sh.

  k8s_check.py prometheus-rule            the PrometheusRule made from deploy/prometheus/alerts.yml
  k8s_check.py split FILE K8S CRDS        built-in kinds to K8S, the Prometheus Operator's to CRDS
  k8s_check.py crds FILE                  validates the Prometheus Operator's kinds (see CRD_SCHEMAS)
  k8s_check.py lint FILE...               what no schema says: one source for each setting
  k8s_check.py ingress-hosts FILE         the Ingresses' host names
  k8s_check.py plan FILE SECRETS OUT      the processes a cluster would run, as files for the script
  k8s_check.py env-names HELP_FILE...     the environment variables a command's --help names
"""
import json
import os
import re
import sys
import tomllib
from urllib.parse import urlsplit

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALERTS = os.path.join(ROOT, "deploy/prometheus/alerts.yml")
CRD_GROUP = "monitoring.coreos.com/"
# The services' public API, by the Service that serves it.
OPENAPI = {"auth-server": "openapi/auth-server.yaml", "intake-api": "openapi/intake-api.yaml"}
# Never routed from outside: the admin listener's and the kubelet's.
PRIVATE_PATHS = ["/metrics", "/healthz", "/readyz"]



def workspace_version():
    """The release this tree is (the workspace's version in Cargo.toml)."""
    with open("Cargo.toml", "rb") as f:
        return tomllib.load(f)["workspace"]["package"]["version"]

def fail(message):
    sys.exit(f"FAIL {message}")


def load(paths):
    docs = []
    for path in paths:
        with open(path) as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    return docs


def prometheus_rule():
    """alerts.yml's groups as a PrometheusRule, its text kept as it is, only indented."""
    with open(ALERTS) as f:
        lines = f.read().splitlines()
    body = [line for line in lines if not line.startswith("#")]
    head = [
        "# Made from deploy/prometheus/alerts.yml, the one home of the alert rules:",
        "#   python3 scripts/k8s_check.py prometheus-rule > deploy/k8s/base/prometheus-rule.yaml",
        "# scripts/check-k8s.sh fails when the two differ.",
        "apiVersion: monitoring.coreos.com/v1",
        "kind: PrometheusRule",
        "metadata:",
        "  name: partner-intake",
        "spec:",
    ]
    print("\n".join(head + [("  " + line).rstrip() for line in body]))


def split(path, k8s_out, crd_out):
    docs = load([path])
    crds = [d for d in docs if d["apiVersion"].startswith(CRD_GROUP)]
    other = [d for d in docs if not d["apiVersion"].startswith(CRD_GROUP)]
    for out, chosen in ((k8s_out, other), (crd_out, crds)):
        with open(out, "w") as f:
            yaml.safe_dump_all(chosen, f, sort_keys=False)


# The Prometheus Operator's kinds, as far as these manifests use them, written from its API
# reference (monitoring.coreos.com/v1). Stricter than the real CRDs: a field not listed
# here fails, so a new field is added here, from the reference, before it is used.
_META = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "additionalProperties": False,
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
}
_DURATION = {"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}


def _kind(kind, spec):
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": kind},
            "metadata": _META,
            "spec": spec,
        },
    }


CRD_SCHEMAS = {
    "ServiceMonitor": _kind("ServiceMonitor", {
        "type": "object",
        "required": ["selector", "endpoints"],
        "additionalProperties": False,
        "properties": {
            "jobLabel": {"type": "string"},
            "selector": _SELECTOR,
            "namespaceSelector": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "any": {"type": "boolean"},
                    "matchNames": {"type": "array", "items": {"type": "string"}},
                },
            },
            "endpoints": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "port": {"type": "string"},
                        "path": {"type": "string", "pattern": "^/"},
                        "scheme": {"enum": ["http", "https"]},
                        "interval": _DURATION,
                        "scrapeTimeout": _DURATION,
                        "honorLabels": {"type": "boolean"},
                    },
                },
            },
        },
    }),
    "PrometheusRule": _kind("PrometheusRule", {
        "type": "object",
        "required": ["groups"],
        "additionalProperties": False,
        "properties": {
            "groups": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "rules"],
                    "additionalProperties": False,
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "interval": _DURATION,
                        "rules": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["expr"],
                                "additionalProperties": False,
                                "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                                "properties": {
                                    "alert": {"type": "string"},
                                    "record": {"type": "string"},
                                    "expr": {"type": ["string", "integer"]},
                                    "for": _DURATION,
                                    "keep_firing_for": _DURATION,
                                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                    "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                                },
                            },
                        },
                    },
                },
            },
        },
    }),
}


def crds(path):
    import jsonschema

    docs = load([path])
    for doc in docs:
        schema = CRD_SCHEMAS.get(doc.get("kind"))
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        if schema is None:
            fail(f"{path}: {name}: no schema for this kind (add one to CRD_SCHEMAS)")
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=str)
        if errors:
            fail(f"{path}: {name}: " + "; ".join(
                f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors))
        print(f"ok   {name}")


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def pod_spec(doc):
    return doc["spec"]["template"]["spec"]


def env_value(container, name):
    for e in container.get("env", []):
        if e["name"] == name:
            return e.get("value")
    return None


def shutdown_grace_secs():
    """service-kit's SHUTDOWN_GRACE: how long the servers drain after SIGTERM."""
    with open(os.path.join(ROOT, "service-kit/src/http.rs")) as f:
        found = re.search(r"SHUTDOWN_GRACE: Duration = Duration::from_secs\((\d+)\)", f.read())
    if not found:
        fail("SHUTDOWN_GRACE not found in service-kit/src/http.rs")
    return int(found.group(1))


def prestop_secs(container):
    command = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    if len(command) == 2 and command[0].endswith("/sleep"):
        return int(command[1])
    sleep = container.get("lifecycle", {}).get("preStop", {}).get("sleep")
    return int(sleep["seconds"]) if sleep else 0


def routed(ingresses, path):
    """The Service and host an Ingress sends `path` to (any host), or None."""
    for ing in ingresses:
        for rule in ing["spec"]["rules"]:
            for p in rule["http"]["paths"]:
                prefix = p["path"].rstrip("/")
                exact = p["pathType"] == "Exact"
                if path == p["path"] or (not exact and path.startswith(prefix + "/")):
                    return p["backend"]["service"]["name"], rule["host"]
    return None


def lint(paths):
    for path in paths:
        docs = load([path])
        where = os.path.basename(path)
        if by_kind(docs, "Secret"):
            fail(f"{where}: renders a Secret; secrets are created beside the manifests, never committed")
        with open(ALERTS) as f:
            groups = yaml.safe_load(f)["groups"]
        for rule in by_kind(docs, "PrometheusRule"):
            if rule["spec"]["groups"] != groups:
                fail(f"{where}: PrometheusRule/{rule['metadata']['name']} differs from "
                     "deploy/prometheus/alerts.yml; regenerate it: python3 scripts/k8s_check.py "
                     "prometheus-rule > deploy/k8s/base/prometheus-rule.yaml")
        ingresses = by_kind(docs, "Ingress")
        if ingresses:
            for service, spec_path in OPENAPI.items():
                with open(os.path.join(ROOT, spec_path)) as f:
                    api_paths = list(yaml.safe_load(f)["paths"])
                for api_path in api_paths:
                    concrete = re.sub(r"\{[^}]+\}", "x", api_path)
                    target = routed(ingresses, concrete)
                    if not target or target[0] != service:
                        fail(f"{where}: {api_path} ({spec_path}) is not routed to {service}: {target}")
            for private in PRIVATE_PATHS:
                if routed(ingresses, private):
                    fail(f"{where}: {private} is routed from outside")
            for ing in ingresses:
                hosts = [r["host"] for r in ing["spec"]["rules"]]
                tls = [h for t in ing["spec"].get("tls", []) for h in t["hosts"]]
                if sorted(hosts) != sorted(tls):
                    fail(f"{where}: Ingress/{ing['metadata']['name']}: hosts {hosts}, certificate for {tls}")
        containers = {c["name"]: c for d in by_kind(docs, "Deployment") for c in pod_spec(d)["containers"]}
        if "auth-server" in containers and "intake-api" in containers:
            issuer = env_value(containers["auth-server"], "AUTH_ISSUER")
            expected = env_value(containers["intake-api"], "INTAKE_ISSUER")
            jwks = env_value(containers["intake-api"], "INTAKE_JWKS_URL")
            if issuer != expected:
                fail(f"{where}: the auth-server issues tokens as {issuer}, the intake-api expects {expected}")
            auth_hosts = {r["host"] for i in ingresses if i["metadata"]["name"] == "auth-server"
                          for r in i["spec"]["rules"]}
            for name, url in (("AUTH_ISSUER", issuer), ("INTAKE_JWKS_URL", jwks)):
                if urlsplit(url).scheme != "https" or urlsplit(url).hostname not in auth_hosts:
                    fail(f"{where}: {name}={url} is not https on the auth-server's Ingress host {auth_hosts}")
            # DPoP proofs name the URL partners call; the controller passes on plain http.
            public = env_value(containers["intake-api"], "INTAKE_PUBLIC_URL") or ""
            intake_hosts = {r["host"] for i in ingresses if i["metadata"]["name"] == "intake-api"
                            for r in i["spec"]["rules"]}
            if urlsplit(public).scheme != "https" or urlsplit(public).hostname not in intake_hosts:
                fail(f"{where}: INTAKE_PUBLIC_URL={public or '(unset)'} is not https on the "
                     f"intake-api's Ingress host {intake_hosts}")
        grace = shutdown_grace_secs()
        for doc in by_kind(docs, "Deployment") + by_kind(docs, "Job"):
            spec = pod_spec(doc)
            labels = doc["spec"]["template"]["metadata"].get("labels", {})
            version = labels.get("app.kubernetes.io/version")
            for c in spec["containers"]:
                image = c["image"]
                tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else None
                if version is not None and tag != version:
                    fail(f"{where}: {doc['kind']}/{doc['metadata']['name']}: image {image}, version label {version}")
                if doc["kind"] == "Deployment":
                    needed = prestop_secs(c) + grace + 5
                    if spec.get("terminationGracePeriodSeconds", 30) < needed:
                        fail(f"{where}: Deployment/{doc['metadata']['name']}: terminationGracePeriodSeconds "
                             f"under preStop + the {grace} s drain + 5 s ({needed})")
            if version is not None and version != workspace_version():
                fail(f"{where}: {doc['kind']}/{doc['metadata']['name']} deploys {version}, this "
                     f"tree is {workspace_version()} (Cargo.toml): move the overlay with the release")
            if doc["kind"] == "Job" and version is not None and not doc["metadata"]["name"].endswith("-" + version):
                fail(f"{where}: Job/{doc['metadata']['name']} is not named after its release {version}")
        print(f"ok   {where}: alerts, routes, issuer, versions and drain time agree")


def resolve_port(containers, port):
    if isinstance(port, int):
        return port
    for c in containers:
        for p in c.get("ports", []):
            if p.get("name") == port:
                return p["containerPort"]
    fail(f"no container port named {port!r}")


def resolve_env(doc, container, secrets, config_maps, ip):
    env = {}
    sources = []
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            sources.append((prefix, config_maps.get(source["configMapRef"]["name"])))
        elif "secretRef" in source:
            sources.append((prefix, secrets.get(source["secretRef"]["name"])))
    for prefix, data in sources:
        if data is None:
            fail(f"{doc['metadata']['name']}: envFrom names a ConfigMap or Secret that is not there")
        env.update({prefix + k: v for k, v in data.items()})
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
            continue
        ref = e.get("valueFrom", {})
        if "secretKeyRef" in ref or "configMapKeyRef" in ref:
            kind, found = ("secretKeyRef", secrets) if "secretKeyRef" in ref else ("configMapKeyRef", config_maps)
            name, key = ref[kind]["name"], ref[kind]["key"]
            value = found.get(name, {}).get(key)
            if value is None:
                fail(f"{doc['metadata']['name']}: {e['name']} names {kind} {name}/{key}, which is not there")
            env[e["name"]] = value
        elif "fieldRef" in ref:
            field = ref["fieldRef"]["fieldPath"]
            values = {"metadata.name": doc["metadata"]["name"] + "-0",
                      "metadata.namespace": doc["metadata"].get("namespace", "default"),
                      "status.podIP": ip}
            if field not in values:
                fail(f"{doc['metadata']['name']}: {e['name']}: fieldRef {field} is not supported here")
            env[e["name"]] = values[field]
        else:
            env[e["name"]] = ""
    return env


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def plan(path, secrets_path, out):
    """One directory per Job and Deployment (Jobs first, in order): what to start and check."""
    docs = load([path])
    with open(secrets_path) as f:
        secrets = json.load(f)
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in by_kind(docs, "ConfigMap")}
    workloads = by_kind(docs, "Job") + by_kind(docs, "Deployment")
    if not by_kind(docs, "Job") or not by_kind(docs, "Deployment"):
        fail(f"{path}: a Job and a Deployment at least are needed to check anything")
    hosts = ["127.0.0.1 localhost", "::1 localhost"]
    ips = {}
    table = []
    for n, doc in enumerate(workloads):
        name = f"{doc['kind'].lower()}-{doc['metadata']['name']}"
        ip = f"127.0.0.{20 + n}"
        ips[doc["metadata"]["name"]] = ip
        spec = pod_spec(doc)
        if len(spec["containers"]) != 1 or spec.get("initContainers"):
            fail(f"{name}: one container per pod is all this check runs")
        container = spec["containers"][0]
        sc = {**spec.get("securityContext", {}), **container.get("securityContext", {})}
        uid = sc.get("runAsUser")
        if uid is None or not sc.get("runAsNonRoot"):
            fail(f"{name}: no non-root user to run as")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        mounts = []
        for m in container.get("volumeMounts", []):
            volume = volumes[m["name"]]
            if "emptyDir" not in volume:
                fail(f"{name}: volume {m['name']}: only emptyDir volumes are run here")
            mounts.append(f"{m['mountPath']} {volume['emptyDir'].get('sizeLimit', '64Mi').replace('Mi', 'm')}")
        probes = []
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            probe = container.get(kind)
            if probe:
                if "httpGet" not in probe:
                    fail(f"{name}: {kind} is not an httpGet probe")
                port = resolve_port(spec["containers"], probe["httpGet"]["port"])
                # How long a cluster gives the probe to pass before it acts.
                bound = probe.get("initialDelaySeconds", 0) + probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)
                probes.append(f"{kind} {port} {probe['httpGet']['path']} {bound}")
        command = container.get("command", []) + container.get("args", [])
        if not command:
            fail(f"{name}: no command: the image's default would run")
        env = resolve_env(doc, container, secrets, config_maps, ip)
        memory = container.get("resources", {}).get("limits", {}).get("memory", "")
        memory_kib = int(memory[:-2]) * 1024 if memory.endswith("Mi") else int(memory[:-2]) * 1024 * 1024 if memory.endswith("Gi") else 0
        d = os.path.join(out, name)
        os.makedirs(d)
        with open(os.path.join(d, "argv"), "w") as f:
            f.write("".join(a + "\0" for a in command))
        with open(os.path.join(d, "env"), "w") as f:
            f.write("".join(f"{k}={v}\0" for k, v in env.items()))
        with open(os.path.join(d, "env-names"), "w") as f:
            f.write("".join(f"{k}\n" for k in env))
        with open(os.path.join(d, "mounts"), "w") as f:
            f.write("".join(m + "\n" for m in mounts))
        with open(os.path.join(d, "probes"), "w") as f:
            f.write("".join(p + "\n" for p in probes))
        # A Deployment's time to drain after SIGTERM; a Job's to complete.
        if doc["kind"] == "Deployment":
            grace = spec.get("terminationGracePeriodSeconds", 30) - prestop_secs(container)
        else:
            grace = doc["spec"].get("activeDeadlineSeconds", 600)
        admin = [p["containerPort"] for p in container.get("ports", []) if p.get("name") == "admin"]
        table.append(f"{doc['kind']} {name} {ip} {uid} {grace} {memory_kib} {admin[0] if admin else '-'}")
    # Service names resolve to the pods they select, as the cluster's DNS would.
    services = {}
    for svc in by_kind(docs, "Service"):
        selector = svc["spec"].get("selector", {})
        pods = [d for d in by_kind(docs, "Deployment")
                if selects(selector, d["spec"]["template"]["metadata"].get("labels", {}))]
        if len(pods) != 1:
            fail(f"Service/{svc['metadata']['name']} selects {len(pods)} Deployments, not one")
        s, ns = svc["metadata"]["name"], svc["metadata"].get("namespace", "default")
        hosts.append(f"{ips[pods[0]['metadata']['name']]} {s} {s}.{ns} {s}.{ns}.svc {s}.{ns}.svc.cluster.local")
        ports = {}
        for p in svc["spec"]["ports"]:
            target = p.get("targetPort", p["port"])
            ports[p.get("name")] = ports[p["port"]] = resolve_port(pod_spec(pods[0])["containers"], target)
        services[s] = (f"{s}.{ns}.svc.cluster.local", ports)
    ingress_ip = "127.0.0.10"
    ingresses = by_kind(docs, "Ingress")
    for ing in ingresses:
        for rule in ing["spec"]["rules"]:
            hosts.append(f"{ingress_ip} {rule['host']}")
    with open(os.path.join(out, "hosts"), "w") as f:
        f.write("\n".join(hosts) + "\n")
    with open(os.path.join(out, "workloads"), "w") as f:
        f.write("\n".join(table) + "\n")
    with open(os.path.join(out, "ingress-hosts"), "w") as f:
        f.write("".join(f"{r['host']} {i['metadata']['name']}\n" for i in ingresses for r in i["spec"]["rules"]))
    nginx_conf(ingresses, services, secrets, ingress_ip, out)


def nginx_conf(ingresses, services, secrets, ip, out):
    """nginx standing in for ingress-nginx: the Ingresses' hosts, paths, TLS and annotations,
    and the controller settings of deploy/k8s/ingress-nginx."""
    with open(os.path.join(ROOT, "deploy/k8s/ingress-nginx/controller-config.yaml")) as f:
        controller = yaml.safe_load(f)["data"]
    tmp = os.path.join(out, "nginx")
    os.makedirs(tmp)
    os.makedirs(os.path.join(out, "tls"))
    lines = [
        # Root's workers can use the check's private directories.
        "user root;", "worker_processes 1;", f"pid {tmp}/nginx.pid;", "events {}", "http {",
        "  access_log off;",
        f"  client_body_temp_path {tmp}/body;", f"  proxy_temp_path {tmp}/proxy;",
        f"  fastcgi_temp_path {tmp}/fastcgi;", f"  uwsgi_temp_path {tmp}/uwsgi;", f"  scgi_temp_path {tmp}/scgi;",
        f"  client_header_timeout {controller['client-header-timeout']}s;",
        f"  client_body_timeout {controller['client-body-timeout']}s;",
        f"  keepalive_timeout {controller['keep-alive']}s;",
        f"  ssl_protocols {controller['ssl-protocols']};",
    ]
    annotation = "nginx.ingress.kubernetes.io/"
    for ing in ingresses:
        notes = {k[len(annotation):]: v for k, v in ing["metadata"].get("annotations", {}).items()
                 if k.startswith(annotation)}
        tls = {h: t["secretName"] for t in ing["spec"].get("tls", []) for h in t["hosts"]}
        for rule in ing["spec"]["rules"]:
            secret = secrets.get(tls.get(rule["host"], ""))
            if not secret:
                fail(f"Ingress/{ing['metadata']['name']}: no TLS secret for {rule['host']}")
            stem = os.path.join(out, "tls", tls[rule["host"]])
            for key, suffix in (("tls.crt", "crt"), ("tls.key", "key")):
                with open(f"{stem}.{suffix}", "w") as f:
                    f.write(secret[key])
            lines += ["  server {", f"    listen {ip}:443 ssl;", f"    server_name {rule['host']};",
                      f"    ssl_certificate {stem}.crt;", f"    ssl_certificate_key {stem}.key;",
                      f"    client_max_body_size {notes.get('proxy-body-size', '1m')};"]
            for p in rule["http"]["paths"]:
                backend = p["backend"]["service"]
                host, ports = services[backend["name"]]
                port = ports[backend["port"].get("name", backend["port"].get("number"))]
                proxy = (f"{{ proxy_pass http://{host}:{port}; proxy_http_version 1.1;"
                         " proxy_set_header Connection \"\"; proxy_set_header Host $host;"
                         " proxy_set_header X-Forwarded-For $remote_addr;"
                         f" proxy_connect_timeout {notes.get('proxy-connect-timeout', '5')}s;"
                         f" proxy_read_timeout {notes.get('proxy-read-timeout', '60')}s;"
                         f" proxy_next_upstream {notes.get('proxy-next-upstream', 'error timeout')}; }}")
                lines.append(f"    location = {p['path']} {proxy}")
                if p["pathType"] == "Prefix":
                    lines.append(f"    location {p['path'].rstrip('/')}/ {proxy}")
            lines.append("  }")
    # Other host names get a 404, as from the controller's default backend.
    lines += [f"  server {{ listen {ip}:443 ssl default_server; ssl_certificate {stem}.crt;"
              f" ssl_certificate_key {stem}.key; return 404; }}", "}"]
    with open(os.path.join(out, "nginx.conf"), "w") as f:
        f.write("\n".join(lines) + "\n")


def ingress_hosts(path):
    print("\n".join(r["host"] for i in by_kind(load([path]), "Ingress") for r in i["spec"]["rules"]))


def env_names(paths):
    names = set()
    for path in paths:
        with open(path) as f:
            names |= set(re.findall(r"\[env: ?([A-Z0-9_]+)", re.sub(r"\s+", " ", f.read())))
    print("\n".join(sorted(names)))


def main():
    args = sys.argv[1:]
    commands = {"prometheus-rule": (prometheus_rule, 0), "split": (split, 3), "crds": (crds, 1),
                "plan": (plan, 3), "ingress-hosts": (ingress_hosts, 1)}
    if args and args[0] == "lint" and len(args) > 1:
        lint(args[1:])
    elif args and args[0] == "env-names" and len(args) > 1:
        env_names(args[1:])
    elif args and args[0] in commands and len(args) == commands[args[0]][1] + 1:
        commands[args[0]][0](*args[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
