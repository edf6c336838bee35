#!/usr/bin/env python3
"""Reads the rendered Kubernetes manifests for scripts/check-k8s.sh.

  k8s_check.py prometheus-rule            the PrometheusRule made from deploy/prometheus/alerts.yml
  k8s_check.py split FILE K8S CRDS        built-in kinds to K8S, the Prometheus Operator's to CRDS
  k8s_check.py crds FILE                  validates the Prometheus Operator's kinds (see CRD_SCHEMAS)
  k8s_check.py lint FILE...               what no schema says: one source for each setting
  k8s_check.py ingress-hosts FILE         the Ingresses' host names
  k8s_check.py play FILE SECRETS_DIR NET CA OUT  `podman kube play` files for the workloads, nginx for the Ingresses
  k8s_check.py env-names HELP_FILE...     the environment variables a command's --help names
"""
import base64
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
# `$(NAME)` in a container's command: the kubelet puts the variable's value there.
VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")



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
            for c in spec.get("initContainers", []) + spec["containers"]:
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


def secret_values(directory):
    """The Secrets made for the run (`kubectl create secret ... -o json`), decoded: name -> key -> value."""
    found = {}
    for file in sorted(os.listdir(directory)):
        with open(os.path.join(directory, file)) as f:
            secret = json.load(f)
        found[secret["metadata"]["name"]] = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    return found


def expand(value, container, secrets):
    """`$(NAME)` in a command as the kubelet expands it, from the container's own environment
    (podman 4.3 leaves it as written)."""
    def one(match):
        for e in container.get("env", []):
            if e["name"] != match.group(1):
                continue
            if "value" in e:
                return e["value"]
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref and ref["key"] in secrets.get(ref["name"], {}):
                return secrets[ref["name"]][ref["key"]]
            fail(f"{container['name']}: $({match.group(1)}) names a Secret key that is not there")
        return match.group(0)
    return VAR_REF.sub(one, value)


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def play(path, secrets_dir, network, ca_bundle, out):
    """The production overlay as `podman kube play` files, Jobs first: one file per workload,
    with what podman 4.3 does not do itself done here (a Job becomes the Pod it would run,
    $(VAR) is expanded, the image is the one tagged locally), and what a cluster around it
    gives its pods (the Ingresses' hosts at the ingress controller, which nginx stands in for,
    and a trust store that knows the check's certificate authority). Then what the script
    checks: each pod's address, user, deadline, memory limit, probes and admin port, each
    container's command and variables, and nginx's configuration from the Ingresses."""
    docs = load([path])
    secrets = secret_values(secrets_dir)
    if not by_kind(docs, "Job") or not by_kind(docs, "Deployment"):
        fail(f"{path}: a Job and a Deployment at least are needed to check anything")
    ingresses = by_kind(docs, "Ingress")
    ingress_ip = f"{network}.10"
    hosts_alias = {"ip": ingress_ip, "hostnames": [r["host"] for i in ingresses for r in i["spec"]["rules"]]}
    table, pods_of, volumes, next_ip, commands = [], {}, [], 20, 0
    os.makedirs(os.path.join(out, "commands"))
    for doc in by_kind(docs, "Job") + by_kind(docs, "Deployment"):
        name, kind = doc["metadata"]["name"], doc["kind"]
        spec = json.loads(json.dumps(pod_spec(doc)))
        sc = spec.get("securityContext", {})
        if sc.get("runAsUser") is None or not sc.get("runAsNonRoot"):
            fail(f"{kind}/{name}: no non-root user to run as")
        replicas = doc["spec"].get("replicas", 1) if kind == "Deployment" else 1
        ips = [f"{network}.{next_ip + n}" for n in range(replicas)]
        next_ip += replicas
        spec["hostAliases"] = spec.get("hostAliases", []) + [hosts_alias]
        # podman 4.3 makes an emptyDir a volume named as it is, which every pod naming it
        # shares and which outlives them: each workload's get its own name.
        renamed = {}
        for v in spec.get("volumes", []):
            if "emptyDir" in v:
                renamed[v["name"]] = v["name"] = f"{name}-{v['name']}"
        volumes += renamed.values()
        spec.setdefault("volumes", []).append(
            {"name": "check-ca-bundle", "hostPath": {"path": ca_bundle, "type": "File"}})
        # podman 4.3 publishes every containerPort on the host, where two replicas collide:
        # the pods' ports are declarations only, so they go, the probes naming numbers.
        for c in spec["containers"]:
            for probe_kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                if "httpGet" in c.get(probe_kind, {}):
                    get = c[probe_kind]["httpGet"]
                    get["port"] = resolve_port(pod_spec(doc)["containers"], get["port"])
            c.pop("ports", None)
        for c in spec.get("initContainers", []) + spec["containers"]:
            command = c.get("command", []) + c.get("args", [])
            if not command:
                fail(f"{kind}/{name}: {c['name']} has no command: the image's default would run")
            c.pop("args", None)
            c["command"] = [expand(a, c, secrets) for a in command]
            # A variable the command itself names ($(NAME), --secret-env NAME) is read
            # through it; the others must be ones the program reads (its --help names them).
            named = {m for a in command for m in VAR_REF.findall(a)} | set(command)
            c["imagePullPolicy"] = "IfNotPresent"
            for m in c.get("volumeMounts", []):
                m["name"] = renamed.get(m["name"], m["name"])
            c.setdefault("volumeMounts", []).append(
                {"name": "check-ca-bundle", "mountPath": "/etc/ssl/certs/ca-certificates.crt", "readOnly": True})
            commands += 1
            with open(os.path.join(out, "commands", f"{commands}.argv"), "w") as f:
                f.write("".join(a + "\0" for a in c["command"]))
            with open(os.path.join(out, "commands", f"{commands}.env"), "w") as f:
                f.write(f"{kind}/{name} {c['name']}\n"
                        + "".join(e["name"] + "\n" for e in c.get("env", []) if e["name"] not in named))
        labels = doc["spec"]["template"]["metadata"].get("labels", {})
        if kind == "Job":
            # The Pod a Job's controller would make; its deadline is the script's to enforce.
            spec["restartPolicy"] = "Never"
            played = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}
            pods = [name]
            grace = doc["spec"].get("activeDeadlineSeconds", 600)
        else:
            played = {**doc, "spec": {**doc["spec"], "template": {"metadata": {"labels": labels}, "spec": spec}}}
            played["metadata"] = {k: v for k, v in doc["metadata"].items() if k != "namespace"}
            pods = [f"{name}-pod-{n}" for n in range(replicas)]
            container = spec["containers"][0]
            grace = spec.get("terminationGracePeriodSeconds", 30) - prestop_secs(container)
        with open(os.path.join(out, f"{name}.yaml"), "w") as f:
            yaml.safe_dump(played, f, sort_keys=False)
        pods_of[name] = (doc, ips)
        containers = [c["name"] for c in spec["containers"]]
        memory = spec["containers"][0].get("resources", {}).get("limits", {}).get("memory", "")
        memory_bytes = int(memory[:-2]) << (20 if memory.endswith("Mi") else 30) if memory[-2:] in ("Mi", "Gi") else 0
        admin = [p["containerPort"] for p in pod_spec(doc)["containers"][0].get("ports", []) if p.get("name") == "admin"]
        for pod, ip in zip(pods, ips):
            table.append(f"{kind} {name} {pod} {pod}-{containers[0]} {ip} {sc['runAsUser']} {grace} "
                         f"{memory_bytes} {admin[0] if admin else '-'}")
        probes = []
        for probe_kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            probe = spec["containers"][0].get(probe_kind)
            if probe:
                if "httpGet" not in probe:
                    fail(f"{kind}/{name}: {probe_kind} is not an httpGet probe")
                port = resolve_port(spec["containers"], probe["httpGet"]["port"])
                # How long a cluster gives the probe to pass before it acts.
                bound = probe.get("initialDelaySeconds", 0) + probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)
                probes.append(f"{probe_kind} {port} {probe['httpGet']['path']} {bound}")
        with open(os.path.join(out, f"{name}.probes"), "w") as f:
            f.write("".join(p + "\n" for p in probes))
    # Where a Service's port leads: its Deployment's pods, as the controller reads its endpoints.
    services = {}
    for svc in by_kind(docs, "Service"):
        selector = svc["spec"].get("selector", {})
        matched = [n for n, (d, _) in pods_of.items() if d["kind"] == "Deployment"
                   and selects(selector, d["spec"]["template"]["metadata"].get("labels", {}))]
        if len(matched) != 1:
            fail(f"Service/{svc['metadata']['name']} selects {len(matched)} Deployments, not one")
        doc, ips = pods_of[matched[0]]
        ports = {}
        for p in svc["spec"]["ports"]:
            target = resolve_port(pod_spec(doc)["containers"], p.get("targetPort", p["port"]))
            ports[p.get("name")] = ports[p["port"]] = target
        services[svc["metadata"]["name"]] = (ips, ports)
    with open(os.path.join(out, "workloads"), "w") as f:
        f.write("\n".join(table) + "\n")
    with open(os.path.join(out, "volumes"), "w") as f:
        f.write("".join(v + "\n" for v in volumes))
    with open(os.path.join(out, "hosts"), "w") as f:
        f.write("127.0.0.1 localhost\n" + "".join(f"{ingress_ip} {h}\n" for h in hosts_alias["hostnames"]))
    with open(os.path.join(out, "ingress-hosts"), "w") as f:
        f.write("".join(f"{r['host']} {i['metadata']['name']}\n" for i in ingresses for r in i["spec"]["rules"]))
    nginx_conf(ingresses, services, secrets, out)


def nginx_conf(ingresses, services, secrets, out):
    """nginx standing in for ingress-nginx: the Ingresses' hosts, paths, TLS and annotations,
    the controller settings of deploy/k8s/ingress-nginx, and each Service's pods as upstream.
    Written for the nginx image, with the certificates beside it in OUT/tls (/etc/ingress/tls)."""
    with open(os.path.join(ROOT, "deploy/k8s/ingress-nginx/controller-config.yaml")) as f:
        controller = yaml.safe_load(f)["data"]
    os.makedirs(os.path.join(out, "tls"))
    lines = [
        "worker_processes 1;", "pid /run/nginx.pid;", "events {}", "http {",
        "  access_log off;",
        f"  client_header_timeout {controller['client-header-timeout']}s;",
        f"  client_body_timeout {controller['client-body-timeout']}s;",
        f"  keepalive_timeout {controller['keep-alive']}s;",
        f"  ssl_protocols {controller['ssl-protocols']};",
    ]
    for name, (ips, ports) in services.items():
        for port in sorted({p for p in ports.values()}):
            lines.append(f"  upstream {name}-{port} {{ {' '.join(f'server {ip}:{port};' for ip in ips)} keepalive 8; }}")
    annotation = "nginx.ingress.kubernetes.io/"
    for ing in ingresses:
        notes = {k[len(annotation):]: v for k, v in ing["metadata"].get("annotations", {}).items()
                 if k.startswith(annotation)}
        tls = {h: t["secretName"] for t in ing["spec"].get("tls", []) for h in t["hosts"]}
        for rule in ing["spec"]["rules"]:
            secret = secrets.get(tls.get(rule["host"], ""))
            if not secret:
                fail(f"Ingress/{ing['metadata']['name']}: no TLS secret for {rule['host']}")
            for key, suffix in (("tls.crt", "crt"), ("tls.key", "key")):
                with open(os.path.join(out, "tls", f"{tls[rule['host']]}.{suffix}"), "w") as f:
                    f.write(secret[key])
            stem = f"/etc/ingress/tls/{tls[rule['host']]}"
            lines += ["  server {", "    listen 443 ssl;", f"    server_name {rule['host']};",
                      f"    ssl_certificate {stem}.crt;", f"    ssl_certificate_key {stem}.key;",
                      f"    client_max_body_size {notes.get('proxy-body-size', '1m')};"]
            for p in rule["http"]["paths"]:
                backend = p["backend"]["service"]
                _, ports = services[backend["name"]]
                port = ports[backend["port"].get("name", backend["port"].get("number"))]
                proxy = (f"{{ proxy_pass http://{backend['name']}-{port}; proxy_http_version 1.1;"
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
    lines += [f"  server {{ listen 443 ssl default_server; ssl_certificate {stem}.crt;"
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
                "play": (play, 5), "ingress-hosts": (ingress_hosts, 1)}
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
