#!/usr/bin/env python3
"""Finds the changes between two versions of an OpenAPI 3.0 document that break a partner
built against the older one, as the README's "Versioning and change policy" defines them:

- an operation removed, or a media type it took or answered with;
- a response field removed, or no longer always present;
- an enum value removed, in a request or an answer;
- a request field or parameter newly required (a new required one included), or a request
  body required where it was optional;
- a type narrowed: another type anywhere, and in a request a tighter length, size, range,
  pattern, format or item count, a new enum, or a new rule (an `allOf` branch).

New operations, optional fields, enum values, answers' fields and webhook event types are
compatible: partners are told to tolerate them. So is naming, in an operation's security
requirement, the scope the operation already asked of a token: the request a partner sends
is the same, only the document tells more. Each break is printed as one line naming
where it is; the exit status is 1 when there is one.

    scripts/contract_breaks.py OLD.yaml NEW.yaml
    scripts/contract_breaks.py --release        # openapi/*.yaml against the last release's,
                                                # less openapi/accepted-breaks.txt
    scripts/contract_breaks.py --self-test      # each kind of break, made on purpose, is found
"""

import copy
import subprocess
import sys
from pathlib import Path

import yaml

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
# A request may not tighten these (lower is tighter for the max-, higher for the min-ones).
UPPER_BOUNDS = ("maxLength", "maxItems", "maximum", "maxProperties")
LOWER_BOUNDS = ("minLength", "minItems", "minimum", "minProperties")


class Contract:
    """One document, with `$ref`s resolved against its own components."""

    def __init__(self, doc):
        self.doc = doc

    def resolve(self, schema):
        seen = set()
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            if ref in seen or not ref.startswith("#/"):
                break
            seen.add(ref)
            target = self.doc
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            schema = target
        return schema if isinstance(schema, dict) else {}

    def operations(self):
        for path, item in (self.doc.get("paths") or {}).items():
            for method in METHODS:
                if method in (item or {}):
                    yield (method.upper(), path), item[method], item.get("parameters") or []


def ref_name(schema):
    ref = schema.get("$ref", "") if isinstance(schema, dict) else ""
    return ref.rsplit("/", 1)[-1]


class Comparison:
    def __init__(self, old, new):
        self.old, self.new = Contract(old), Contract(new)
        self.breaks = []
        self.compared = set()

    def report(self, where, what):
        self.breaks.append(f"{where}: {what}")

    def run(self):
        new_ops = {key: (op, shared) for key, op, shared in self.new.operations()}
        for key, old_op, old_shared in self.old.operations():
            where = f"{key[0]} {key[1]}"
            if key not in new_ops:
                self.report(where, "operation removed")
                continue
            new_op, new_shared = new_ops[key]
            self.parameters(where, old_op, old_shared, new_op, new_shared)
            self.request_body(where, old_op.get("requestBody"), new_op.get("requestBody"))
            old_answers, new_answers = old_op.get("responses") or {}, new_op.get("responses") or {}
            for status, old_answer in old_answers.items():
                if status in new_answers:
                    self.answer(f"{where} {status}", old_answer, new_answers[status])
        return self.breaks

    def parameters(self, where, old_op, old_shared, new_op, new_shared):
        def listed(op, shared):
            found = {}
            for p in list(shared) + list(op.get("parameters") or []):
                p = (self.old if op is old_op else self.new).resolve(p)
                found[(p.get("in"), p.get("name"))] = p
            return found

        old, new = listed(old_op, old_shared), listed(new_op, new_shared)
        for key, p in new.items():
            at = f"{where} {key[0]} parameter {key[1]}"
            before = old.get(key)
            if p.get("required") and not (before and before.get("required")):
                self.report(at, "newly required")
            if before:
                self.schema(at, before.get("schema") or {}, p.get("schema") or {}, request=True)

    def request_body(self, where, old_body, new_body):
        old_body = self.old.resolve(old_body or {})
        new_body = self.new.resolve(new_body or {})
        if new_body.get("required") and not old_body.get("required"):
            self.report(f"{where} request body", "newly required")
        self.content(f"{where} request", old_body, new_body, request=True)

    def answer(self, where, old_answer, new_answer):
        old_answer, new_answer = self.old.resolve(old_answer), self.new.resolve(new_answer)
        self.content(f"{where} answer", old_answer, new_answer, request=False)

    def content(self, where, old, new, request):
        """Each media type of a request body or an answer: still there, and its schema."""
        old_media, new_media = old.get("content") or {}, new.get("content") or {}
        gone = "no longer taken" if request else "no longer answered"
        for media, content in old_media.items():
            if media not in new_media:
                self.report(f"{where}{' body' if request else ''}", f"{media} {gone}")
                continue
            self.schema(where, content.get("schema") or {},
                        new_media[media].get("schema") or {}, request=request)

    def schema(self, where, old, new, request):
        """Compares two schemas at `where`; `request` says which way a change breaks."""
        # A named schema is compared once per direction, wherever it is used: its breaks are
        # reported at its first use, and a schema that refers to itself ends.
        if ref_name(old):
            key = (ref_name(old), ref_name(new), request)
            if key in self.compared:
                return
            self.compared.add(key)
        old, new = self.old.resolve(old), self.new.resolve(new)
        old_type, new_type = old.get("type"), new.get("type")
        if old_type and new_type and old_type != new_type:
            self.report(where, f"type {old_type} became {new_type}")
        # Enum values: none may go; a request field may not gain a list it did not have.
        if "enum" in old:
            gone = [v for v in old["enum"] if v not in (new.get("enum") or old["enum"])]
            for value in gone:
                self.report(where, f"enum value {value!r} removed")
        elif "enum" in new and request:
            self.report(where, "now limited to an enum")
        if request:
            self.tightened(where, old, new)
        self.properties(where, old, new, request)
        if "items" in old and "items" in new:
            self.schema(f"{where}[]", old["items"], new["items"], request)
        old_extra, new_extra = old.get("additionalProperties"), new.get("additionalProperties")
        if isinstance(old_extra, dict) and isinstance(new_extra, dict):
            self.schema(f"{where}.*", old_extra, new_extra, request)
        elif request and old_extra is not False and new_extra is False:
            self.report(where, "no longer takes other fields")
        for combiner in ("allOf", "anyOf", "oneOf"):
            old_parts, new_parts = old.get(combiner) or [], new.get(combiner) or []
            for i, (o, n) in enumerate(zip(old_parts, new_parts)):
                self.schema(f"{where}.{combiner}[{i}]", o, n, request)
            if request and combiner == "allOf" and len(new_parts) > len(old_parts):
                self.report(where, f"{len(new_parts) - len(old_parts)} new rule(s) (allOf)")
            if combiner in ("anyOf", "oneOf") and len(new_parts) < len(old_parts):
                self.report(where, f"{combiner} lost {len(old_parts) - len(new_parts)} choice(s)")
        old_map = (old.get("discriminator") or {}).get("mapping") or {}
        new_map = (new.get("discriminator") or {}).get("mapping") or {}
        for value in old_map:
            if value not in new_map:
                self.report(where, f"discriminator value {value!r} removed")

    def tightened(self, where, old, new):
        for bound in UPPER_BOUNDS:
            if bound in new and (bound not in old or new[bound] < old[bound]):
                self.report(where, f"{bound} tightened to {new[bound]}")
        for bound in LOWER_BOUNDS:
            if bound in new and (bound not in old or new[bound] > old[bound]):
                self.report(where, f"{bound} tightened to {new[bound]}")
        for rule in ("pattern", "format"):
            if rule in new and new[rule] != old.get(rule):
                self.report(where, f"{rule} {new[rule]!r} where it was {old.get(rule)!r}")
        if old.get("nullable") and not new.get("nullable"):
            self.report(where, "null no longer taken")

    def properties(self, where, old, new, request):
        old_props, new_props = old.get("properties") or {}, new.get("properties") or {}
        old_req, new_req = set(old.get("required") or []), set(new.get("required") or [])
        if request:
            for name in sorted(new_req - old_req):
                self.report(f"{where}.{name}", "newly required")
        else:
            for name in sorted(old_props):
                if name not in new_props:
                    self.report(f"{where}.{name}", "answer field removed")
                elif name in old_req and name not in new_req:
                    self.report(f"{where}.{name}", "no longer always answered")
        for name, schema in old_props.items():
            if name in new_props:
                self.schema(f"{where}.{name}", schema, new_props[name], request)


def breaks(old, new):
    return Comparison(old, new).run()


def load(path):
    return yaml.safe_load(Path(path).read_text())


def last_release():
    """The newest release in RELEASES: (version, commit)."""
    lines = [l.split() for l in Path("RELEASES").read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    return lines[-1][0], lines[-1][1]


def released(commit, path):
    shown = subprocess.run(["git", "show", f"{commit}:{path}"], capture_output=True, text=True)
    if shown.returncode != 0:
        sys.exit(f"cannot read {path} at {commit}: {shown.stderr.strip()} (a full clone is needed)")
    return yaml.safe_load(shown.stdout)


ACCEPTED = Path("openapi/accepted-breaks.txt")


def accepted():
    """The breaks made on purpose since the last release: line -> why."""
    listed = {}
    for line in ACCEPTED.read_text().splitlines() if ACCEPTED.exists() else []:
        if line.strip() and not line.startswith("#"):
            change, _, why = line.partition("  # ")
            listed[change.strip()] = why.strip()
    return listed


def against_release():
    """Breaks of openapi/*.yaml against the last release's, less those accepted; a line
    accepted that matches no break counts too, so the list stays true."""
    version, commit = last_release()
    listed = accepted()
    found = 0
    for path in sorted(Path("openapi").glob("*.yaml")):
        problems = [f"{path}: {line}" for line in breaks(released(commit, str(path)), load(path))]
        for line in problems:
            if line in listed:
                print(f"accepted: {line} ({listed.pop(line)})")
            else:
                print(f"BREAKING: {line}")
                found += 1
        if not problems:
            print(f"{path}: compatible with {version} ({commit})")
    for line in listed:
        print(f"{ACCEPTED} lists a break that is no longer made: {line}")
        found += 1
    if found:
        print(f"{found} breaking change(s) against {version}: keep the old form beside the new "
              f"(README, Versioning and change policy), or list the change in {ACCEPTED} "
              f"with why, and say so in CHANGELOG.md")
    return found


# Each kind of break the policy names, made on purpose in a copy of the intake document.
def self_test():
    doc = load("openapi/intake-api.yaml")
    schemas = doc["components"]["schemas"]
    enquiry_post = doc["paths"]["/partners/external/intake"]["post"]
    case_schema = next(name for name in schemas if schemas[name].get("properties", {}).get("reference")
                       and name.endswith("Response"))
    enum_schema = next(name for name, s in schemas.items() if len(s.get("enum") or []) > 1)
    request_schema = "PurchaseEnquiry"

    def remove_operation(d):
        del d["paths"]["/partners/external/intake"]["post"]

    def remove_answer_field(d):
        del d["components"]["schemas"][case_schema]["properties"]["reference"]

    def remove_enum_value(d):
        d["components"]["schemas"][enum_schema]["enum"].pop()

    def require_request_field(d):
        d["components"]["schemas"][request_schema]["required"].append("product_uuid")

    def narrow_type(d):
        d["components"]["schemas"][request_schema]["properties"]["first_name"]["maxLength"] = 10

    def change_type(d):
        d["components"]["schemas"][request_schema]["properties"]["deposit_amount"]["type"] = "string"

    cases = {
        "a removed operation": (remove_operation, "operation removed"),
        "a removed answer field": (remove_answer_field, "answer field removed"),
        "a removed enum value": (remove_enum_value, "enum value"),
        "a newly required request field": (require_request_field, "product_uuid: newly required"),
        "a narrowed length": (narrow_type, "maxLength tightened to 10"),
        "a changed type": (change_type, "type number became string"),
    }
    failed = []
    if breaks(doc, copy.deepcopy(doc)):
        failed.append(f"the document against itself: {breaks(doc, doc)}")
    for name, (mutate, expected) in cases.items():
        broken = copy.deepcopy(doc)
        mutate(broken)
        found = breaks(doc, broken)
        if not any(expected in line for line in found):
            failed.append(f"{name}: expected {expected!r}, found {found}")
        else:
            print(f"found {name}: {[l for l in found if expected in l][0]}")
    assert enquiry_post  # the operation the first case removes exists
    compatible = copy.deepcopy(doc)
    schemas_c = compatible["components"]["schemas"]
    schemas_c[enum_schema]["enum"].append("a_new_value")
    schemas_c[case_schema]["properties"]["a_new_field"] = {"type": "string"}
    schemas_c[request_schema]["properties"]["a_new_option"] = {"type": "string"}
    compatible["paths"]["/partners/external/new"] = {"get": {"responses": {"200": {"description": "new"}}}}
    if breaks(doc, compatible):
        failed.append(f"compatible changes reported: {breaks(doc, compatible)}")
    else:
        print("a new enum value, answer field, optional request field and operation: compatible")
    # The document as it was before its requirements named their scopes.
    unscoped = copy.deepcopy(doc)
    scoped = 0
    for item in unscoped["paths"].values():
        for op in item.values():
            for requirement in op.get("security") or [] if isinstance(op, dict) else []:
                for scheme in requirement:
                    scoped += bool(requirement[scheme])
                    requirement[scheme] = []
    if not scoped:
        failed.append("no security requirement of the document names a scope")
    elif breaks(unscoped, doc):
        failed.append(f"scopes named in security requirements reported: {breaks(unscoped, doc)}")
    else:
        print("scopes named in operations' security requirements: compatible")
    for line in failed:
        print(f"FAILED: {line}", file=sys.stderr)
    return len(failed)


def main(args):
    if args == ["--release"]:
        return 1 if against_release() else 0
    if args == ["--self-test"]:
        return 1 if self_test() else 0
    if len(args) == 2:
        found = breaks(load(args[0]), load(args[1]))
        for line in found:
            print(line)
        return 1 if found else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
