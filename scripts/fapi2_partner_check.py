#!/usr/bin/env python3
"""A partner of a FAPI 2.0 deployment, with requests-oauth2client as is: the metadata offers
private_key_jwt alone; a token request with an ES256 assertion and a DPoP proof gets a
DPoP-bound token, one without a proof none; an enquiry with that token and a fresh proof
is created, and the same token sent as a bearer token is refused, as is any client secret.
Both services hand out DPoP nonces and require them (on by default under the profile): the
library meets `use_dpop_nonce` at each and sends again with the nonce, on its own.
scripts/check-partner-auth.sh runs it against the one-process stack with AUTH_FAPI2 and
INTAKE_FAPI2 on:

    fapi2_partner_check.py AUTH_URL INTAKE_URL DATA_DIR
"""

import base64
import json
import sys
from pathlib import Path

import requests
from requests_oauth2client import OAuth2Client, PrivateKeyJwt
from requests_oauth2client.exceptions import EndpointError

SCOPE = "enquiry:case:intake:create"
ENQUIRY = Path(__file__).resolve().parent.parent / "bench" / "enquiry.json"


def fail(message: str) -> None:
    sys.exit(f"FAPI 2.0: {message}")


def main() -> None:
    auth, intake, data = sys.argv[1].rstrip("/"), sys.argv[2].rstrip("/"), Path(sys.argv[3])
    metadata = requests.get(f"{auth}/.well-known/oauth-authorization-server", timeout=10).json()
    if metadata["token_endpoint_auth_methods_supported"] != ["private_key_jwt"]:
        fail(f"the metadata offers {metadata['token_endpoint_auth_methods_supported']}")
    for field in ("token_endpoint_auth_signing_alg_values_supported",
                  "dpop_signing_alg_values_supported"):
        if "RS256" in metadata[field]:
            fail(f"{field} offers RS256: {metadata[field]}")
    for service in (auth, intake):
        profile = requests.get(f"{service}/healthz", timeout=10).json().get("profile")
        if profile != "fapi2":
            fail(f"{service}/healthz says profile {profile!r}")

    client_id = json.loads((data / "demo-client.json").read_text())["client_id"]
    private = json.loads((data / "demo-client-key.jwk.json").read_text())
    token_endpoint = metadata["token_endpoint"]
    bound = OAuth2Client(token_endpoint, auth=PrivateKeyJwt(client_id, private),
                         dpop_bound_access_tokens=True, testing=True)
    token = bound.client_credentials(scope=SCOPE)
    if token.token_type.lower() != "dpop":
        fail(f"a token request with a proof got a {token.token_type} token")

    unbound = OAuth2Client(token_endpoint, auth=PrivateKeyJwt(client_id, private), testing=True)
    try:
        unbound.client_credentials(scope=SCOPE)
        fail("a token request without a DPoP proof got a token")
    except EndpointError as e:
        if e.error != "invalid_dpop_proof":
            fail(f"a token request without a proof was refused with {e.error}, not invalid_dpop_proof")

    secret = requests.post(token_endpoint, timeout=10, data={
        "grant_type": "client_credentials", "scope": SCOPE,
        "client_id": client_id, "client_secret": "a-secret"})
    described = secret.json().get("error_description", "")
    if secret.status_code != 401 or "private_key_jwt" not in described:
        fail(f"a client secret got {secret.status_code} {secret.text[:200]}")

    url = f"{intake}/partners/external/intake"
    enquiry = json.loads(ENQUIRY.read_text().replace("EMAIL", "fapi2.partner@example.com"))
    sent = requests.post(url, json=enquiry, auth=token, timeout=10)
    if sent.status_code not in (200, 201):
        fail(f"a DPoP-bound enquiry: {sent.status_code} {sent.headers.get('www-authenticate')} "
             f"{sent.text[:300]}")
    if not sent.headers.get("DPoP-Nonce"):
        fail("the intake-api's answer carries no DPoP-Nonce")
    proof = sent.request.headers.get("DPoP", "")
    claims = json.loads(base64.urlsafe_b64decode(proof.split(".")[1] + "=="))
    if claims.get("nonce") is None:
        fail("the proof that was taken carries no nonce: are nonces off?")
    stolen = requests.post(url, json=enquiry, timeout=10,
                           headers={"Authorization": f"Bearer {token.access_token}"})
    challenge = stolen.headers.get("www-authenticate", "")
    if stolen.status_code != 401 or not challenge.startswith('DPoP error="invalid_token"'):
        fail(f"the token sent as Bearer: {stolen.status_code} {challenge}")
    print(f"FAPI 2.0: requests-oauth2client (private_key_jwt ES256, DPoP with server nonces) "
          f"made case {sent.json()['reference']}; no proof, a secret and Bearer are refused")


if __name__ == "__main__":
    main()
