#!/usr/bin/env python3
"""A partner using DPoP through a deployment's TLS proxy, with requests-oauth2client as is: a
DPoP-bound token from the token endpoint, an enquiry sent with it and a fresh proof, and the
same token refused when sent as a bearer token. The proofs name the https URLs the partner
calls, so this passes only when each service knows its public URL (the auth-server its
issuer, the intake-api INTAKE_PUBLIC_URL). scripts/check-layout.sh and scripts/check-k8s.sh
run it, with the proxy's CA in REQUESTS_CA_BUNDLE:

    dpop_through_proxy.py TOKEN_ENDPOINT INTAKE_URL CLIENT_ID CLIENT_SECRET EMAIL
"""

import json
import sys
from pathlib import Path

import requests
from requests_oauth2client import OAuth2Client

SCOPE = "enquiry:case:intake:create"
ENQUIRY = Path(__file__).resolve().parent.parent / "bench" / "enquiry.json"


def main() -> None:
    token_endpoint, intake, client_id, client_secret, email = sys.argv[1:6]
    client = OAuth2Client(token_endpoint, (client_id, client_secret), dpop_bound_access_tokens=True)
    token = client.client_credentials(scope=SCOPE)
    if token.token_type.lower() != "dpop":
        sys.exit(f"asked {token_endpoint} for a DPoP-bound token and got a {token.token_type} one")
    url = f"{intake.rstrip('/')}/partners/external/intake"
    enquiry = json.loads(ENQUIRY.read_text().replace("EMAIL", email))
    sent = requests.post(url, json=enquiry, auth=token, timeout=10)
    if sent.status_code != 201:
        sys.exit(f"a DPoP-bound enquiry to {url}: {sent.status_code} "
                 f"{sent.headers.get('www-authenticate')} {sent.text[:300]}")
    stolen = requests.post(url, json=enquiry, timeout=10,
                           headers={"Authorization": f"Bearer {token.access_token}"})
    challenge = stolen.headers.get("www-authenticate", "")
    if stolen.status_code != 401 or not challenge.startswith('DPoP error="invalid_token"'):
        sys.exit(f"the DPoP-bound token sent as Bearer to {url}: {stolen.status_code} {challenge}")
    print(f"case {sent.json()['reference']} created with a DPoP-bound token; as Bearer it is refused")


if __name__ == "__main__":
    main()
