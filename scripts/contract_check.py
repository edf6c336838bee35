"""Checks the published contract as a partner's tools read it, against the running stack.

Run by scripts/check-contract.sh, which starts the stack and passes its URLs, the demo
client's file and a scratch directory:
  python3 scripts/contract_check.py AUTH_URL INTAKE_URL DEMO_CLIENT_JSON WORK_DIR

1. The committed documents read the same under a YAML 1.1 loader (PyYAML) as what each
   service serves, and both pass openapi-spec-validator.
2. openapi-python-client generates a client from each committed document with no warning
   and every operation present; openapi-typescript generates types with every path.
3. A token, a referral, a submission completing it, an attach and a case read back through
   the generated clients.
4. Every request example in the documents gets its documented success when sent.
5. The enquiry schema and the service agree: each example is valid under the schema, and
   each example broken in one documented way is invalid under the schema and gets 422.
"""

import copy
import importlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import yaml
from jsonschema import FormatChecker
from jwskate import Jwk, Jwt
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate

AUTH, INTAKE, DEMO, WORK = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ISSUER = "http://127.0.0.1:8081"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def documents():
    docs = {}
    for name, base in (("auth-server", AUTH), ("intake-api", INTAKE)):
        # The documents name this deployment's issuer; the committed ones the default one.
        served = json.loads(httpx.get(f"{base}/openapi.json").text.replace(AUTH, DEFAULT_ISSUER))
        committed = yaml.safe_load((ROOT / "openapi" / f"{name}.yaml").read_text())
        check(committed == served, f"{name}: the committed YAML, read by YAML 1.1, is what is served")
        for label, doc in (("served", served), ("committed", committed)):
            try:
                validate(doc)
                check(True, f"{name}: the {label} document passes openapi-spec-validator")
            except Exception as e:  # noqa: BLE001 - any validation error fails the check
                check(False, f"{name}: the {label} document fails openapi-spec-validator: {e}")
        docs[name] = served
    return docs


def generate(docs):
    clients = {}
    for name, doc in docs.items():
        out = WORK / f"{name}-client"
        run = subprocess.run(
            ["openapi-python-client", "generate", "--path", str(ROOT / "openapi" / f"{name}.yaml"),
             "--output-path", str(out), "--overwrite"],
            capture_output=True, text=True, cwd=WORK,
        )
        text = run.stdout + run.stderr
        noisy = [line for line in text.splitlines() if line.strip() and not line.startswith("Generating ")]
        check(run.returncode == 0 and not noisy,
              f"{name}: openapi-python-client generates with no warning" + ("" if not noisy else ":\n" + text))
        package = next(out.glob("*/api")).parent
        for path, item in doc["paths"].items():
            for op in item.values():
                module = "".join("_" + c.lower() if c.isupper() else c for c in op["operationId"])
                found = list(package.glob(f"api/*/{module}.py"))
                check(bool(found), f"{name}: the generated client has {op['operationId']}")
        sys.path.insert(0, str(out))
        clients[name] = importlib.import_module(package.name)
        ts = WORK / f"{name}.d.ts"
        run = subprocess.run(["openapi-typescript", str(ROOT / "openapi" / f"{name}.yaml"), "-o", str(ts)],
                             capture_output=True, text=True)
        check(run.returncode == 0 and all(f'"{p}"' in ts.read_text() for p in doc["paths"]),
              f"{name}: openapi-typescript generates every path" + ("" if run.returncode == 0 else ":\n" + run.stderr))
    return clients


def through_generated_clients(clients, demo):
    auth_pkg, intake_pkg = clients["auth-server"], clients["intake-api"]
    token_api = importlib.import_module(f"{auth_pkg.__name__}.api.o_auth_2_0.issue_token")
    token_models = importlib.import_module(f"{auth_pkg.__name__}.models")
    auth = auth_pkg.Client(base_url=AUTH)
    answer = token_api.sync_detailed(client=auth, body=token_models.TokenRequest(
        grant_type=token_models.TokenRequestGrantType.CLIENT_CREDENTIALS,
        client_id=demo["client_id"], client_secret=demo["client_secret"],
        scope="enquiry:case:intake:create enquiry:referral:create webhooks:manage"))
    check(answer.status_code == 200, f"a token through the generated auth-server client ({answer.status_code})")
    token = answer.parsed.access_token
    intake = intake_pkg.AuthenticatedClient(base_url=INTAKE, token=token)
    models = importlib.import_module(f"{intake_pkg.__name__}.models")
    submit = importlib.import_module(f"{intake_pkg.__name__}.api.intake.submit_enquiry")
    attach = importlib.import_module(f"{intake_pkg.__name__}.api.intake.attach_product")
    get_case = importlib.import_module(f"{intake_pkg.__name__}.api.intake.get_case")
    refer = importlib.import_module(f"{intake_pkg.__name__}.api.referrals.refer_customer")
    email = f"generated.{uuid.uuid4().hex[:8]}@example.com"
    referred = refer.sync_detailed(client=intake, body=models.ReferralRequest.from_dict({
        "brand": "brand_a", "first_name": "Gen", "last_name": "Client", "email": email,
        "mobile_number": "+44 7700 900123", "contact_consent": True, "note": "Call after 6pm.",
    }))
    check(referred.status_code == 201 and referred.parsed.redirect.startswith("http"),
          f"referCustomer through the generated client ({referred.status_code})")
    # A referral grants nothing: the case is read back only after an enquiry of one's own.
    referred_case = get_case.sync_detailed(client=intake, reference=referred.parsed.reference)
    check(referred_case.status_code == 404,
          f"a referred case is not the referrer's to read ({referred_case.status_code})")
    enquiry = models.PurchaseEnquiry.from_dict({
        "brand": "brand_a", "first_name": "Gen", "last_name": "Client", "email": email,
        "mobile_number": "+44 7700 900123", "date_of_birth": "1990-05-17", "terms_agreement": True,
        "stage": "researching", "application_type": "single", "employment_status": "employed",
        "total_annual_income": 50000, "mortgage_purpose": "purchase", "purchase_type": "home_mover",
        "new_property_value": 300000, "deposit_amount": 60000, "has_credit_issues": False,
    })
    created = submit.sync_detailed(client=intake, body=enquiry)
    check(created.status_code == 200 and created.parsed.reference == referred.parsed.reference,
          f"submitEnquiry completing the referral through the generated client ({created.status_code})")
    linked = attach.sync_detailed(client=intake, body=models.AttachRequest(
        email=email, product_uuid=uuid.UUID("3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07")))
    check(linked.status_code == 200 and linked.parsed.redirect.startswith("http"),
          f"attachProduct through the generated client ({linked.status_code})")
    status = get_case.sync_detailed(client=intake, reference=created.parsed.reference)
    check(status.status_code == 200 and status.parsed.reference == created.parsed.reference,
          f"getCase through the generated client ({status.status_code})")
    # The event catalogue, read into the generated models: each example is of its own type.
    event_types = importlib.import_module(f"{intake_pkg.__name__}.api.webhooks.list_webhook_event_types")
    listed = event_types.sync_detailed(client=intake)
    entries = listed.parsed.data if listed.status_code == 200 else []
    check(listed.status_code == 200 and len(entries) > 0
          and all(e.type_ == e.example.type_ for e in entries)
          and {e.type_.value for e in entries} >= {"case.created", "case.updated", "case.activated", "product.attached"},
          f"listWebhookEventTypes through the generated client, each example of its type ({listed.status_code})")
    return token


def examples(doc, path, method):
    content = doc["paths"][path][method].get("requestBody", {}).get("content", {})
    media = content.get("application/json", {})
    return {name: ex["value"] for name, ex in media.get("examples", {}).items()}


def keyed_partner():
    """A client registered with a public key only (private_key_jwt), through the
    auth-server's own command (AUTH_SERVER_BIN, on the stack's database), and its private
    key."""
    private = Jwk.generate(alg="ES256", kid="contract-key")
    jwks = WORK / "contract-keys.json"
    jwks.write_text(json.dumps({"keys": [private.public_jwk().to_dict()]}))
    created = subprocess.run(
        [os.environ["AUTH_SERVER_BIN"], "client", "create", "--name", f"Contract {uuid.uuid4().hex[:6]}",
         "--scopes", "enquiry:case:intake:create", "--auth-method", "private_key_jwt",
         "--jwks-file", str(jwks), "-o", "json"],
        check=True, capture_output=True, text=True,
    )
    return json.loads(created.stdout)["client_id"], private


def assertion(client_id, private):
    now = int(time.time())
    claims = {"iss": client_id, "sub": client_id, "aud": f"{AUTH}/oauth/token", "iat": now,
              "exp": now + 60, "jti": str(uuid.uuid4())}
    return str(Jwt.sign(claims, key=private, alg="ES256"))


def path_values(token):
    """Values for the documents' path parameters: an endpoint the demo partner makes."""
    made = httpx.post(f"{INTAKE}/partners/external/webhooks/endpoints",
                      json={"url": "https://partner.example/contract"},
                      headers={"Authorization": f"Bearer {token}"})
    check(made.status_code == 201, f"a webhook endpoint to send the examples to ({made.status_code})")
    return {"endpoint_id": made.json().get("id", "ep_none")}


def every_example_succeeds(docs, demo, token):
    headers = {"Authorization": f"Bearer {token}"}
    keyed = keyed_partner()
    values = path_values(token)
    sent = 0
    for name, doc in docs.items():
        base = AUTH if name == "auth-server" else INTAKE
        for path, item in doc["paths"].items():
            for method, op in item.items():
                for label, body in examples(doc, path, method).items():
                    body = copy.deepcopy(body)
                    if path == "/oauth/token" and "client_assertion" in body:
                        # The example's assertion stands for one the partner signs.
                        body.update(client_id=keyed[0], client_assertion=assertion(*keyed))
                    elif path == "/oauth/token":
                        # The example's credentials stand for the partner's own.
                        body.update(client_id=demo["client_id"], client_secret=demo["client_secret"])
                    success = sorted(s for s in op["responses"] if s.startswith("2"))
                    target = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)
                    answer = httpx.request(method.upper(), base + target, json=body, headers=headers)
                    sent += 1
                    check(str(answer.status_code) in success,
                          f"{op['operationId']} example {label!r} answers {answer.status_code} (documented success: {', '.join(success)})")
    check(sent >= 5, f"{sent} request examples sent")


def schema_and_service_agree(doc, token):
    validator = OAS30Validator(
        {"$ref": "#/components/schemas/EnquiryRequest", "components": doc["components"]},
        format_checker=FormatChecker(),
    )
    headers = {"Authorization": f"Bearer {token}"}
    base = examples(doc, "/partners/external/intake", "post")
    for label, body in base.items():
        check(validator.is_valid(body), f"example {label!r} is valid under the schema")
    purchase, remortgage = base["purchase"], base["remortgage_borrow_more"]
    broken = {
        "an unknown brand": (purchase, {"brand": "brand_z"}),
        "terms not agreed": (purchase, {"terms_agreement": False}),
        "an impossible date of birth": (purchase, {"date_of_birth": "1990-02-30"}),
        "a date of birth before 1900": (purchase, {"date_of_birth": "1899-12-31"}),
        "a 6,000-character mobile number": (purchase, {"mobile_number": "1" * 6000}),
        "a first name of 256 characters": (purchase, {"first_name": "J" * 256}),
        "a blank first name": (purchase, {"first_name": "   "}),
        "an unknown stage": (purchase, {"stage": "dreaming"}),
        "a purchase without its deposit": (purchase, {"deposit_amount": None}),
        "a first-time buyer without a scheme": (purchase, {"purchase_type": "first_time_buyer"}),
        "credit issues without the list": (purchase, {"has_credit_issues": True}),
        "an unknown credit issue": (purchase, {"credit_issues": ["bad_luck"]}),
        "a remortgage to borrow more without the amount": (remortgage, {"additional_borrowing_amount": None}),
        "a negative income": (remortgage, {"total_annual_income": -1}),
        "an address without a postcode": (remortgage, {"addresses": [{"line_1": "1 High Street"}]}),
        "an impossible moving-in date": (remortgage, {"addresses": [{"line_1": "1 High Street", "postcode": "LS1 1AA", "date_moved_in": "2019-13-01"}]}),
    }
    for what, (example, change) in broken.items():
        body = copy.deepcopy(example)
        for field, value in change.items():
            if value is None:
                body.pop(field, None)
            else:
                body[field] = value
        body["email"] = f"broken.{uuid.uuid4().hex[:8]}@example.com"
        invalid = not validator.is_valid(body)
        answer = httpx.post(f"{INTAKE}/partners/external/intake", json=body, headers=headers)
        check(invalid and answer.status_code == 422,
              f"{what}: the schema {'rejects' if invalid else 'ACCEPTS'} it, the service answers {answer.status_code}")


def main():
    demo = json.loads(DEMO.read_text())
    docs = documents()
    clients = generate(docs)
    token = through_generated_clients(clients, demo)
    every_example_succeeds(docs, demo, token)
    schema_and_service_agree(docs["intake-api"], token)
    if failures:
        print(f"{len(failures)} contract check(s) failed", file=sys.stderr)
        sys.exit(1)


main()
