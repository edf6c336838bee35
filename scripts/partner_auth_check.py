#!/usr/bin/env python3
"""Partners' own OAuth libraries against the running stack, unchanged: requests-oauth2client
gets DPoP-bound tokens and calls the intake-api with them, and signs private_key_jwt client
assertions (alone and with DPoP); Authlib signs them too. Every token must work, and a
DPoP-bound one must not work as a bearer token. As scripts/check-partner-auth.sh runs it:

    partner_auth_check.py AUTH_URL INTAKE_URL CLIENT_ID CLIENT_SECRET AUTH_SERVER_BIN

AUTH_SERVER_BIN registers the private_key_jwt client (its database in the environment).
"""

import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import requests
from authlib.integrations.requests_client import OAuth2Session
from joserfc.jwk import ECKey
from authlib.oauth2.rfc7523 import PrivateKeyJWT
from jwskate import Jwk
from requests_oauth2client import OAuth2Client, PrivateKeyJwt

SCOPE = "enquiry:case:intake:create"
HERE = Path(__file__).resolve().parent


def enquiry() -> dict:
    body = json.loads((HERE.parent / "bench" / "enquiry.json").read_text())
    text = json.dumps(body).replace("EMAIL", f"py-{uuid.uuid4().hex[:12]}@example.com")
    return json.loads(text)


def submit(intake: str, what: str, auth=None, headers=None) -> None:
    resp = requests.post(
        f"{intake}/partners/external/intake", json=enquiry(), auth=auth, headers=headers, timeout=10
    )
    if resp.status_code != 201:
        sys.exit(f"{what}: the enquiry got {resp.status_code} {resp.headers.get('www-authenticate')} {resp.text}")


def main() -> None:
    auth_url, intake, client_id, client_secret, auth_server = sys.argv[1:6]
    token_endpoint = f"{auth_url}/oauth/token"

    # DPoP with a client secret: the token is bound, each call carries a new proof.
    # testing=True: the library's only concession to the local stack's plain http.
    client = OAuth2Client(
        token_endpoint, (client_id, client_secret), dpop_bound_access_tokens=True, testing=True
    )
    token = client.client_credentials(scope=SCOPE)
    if token.token_type.lower() != "dpop":
        sys.exit(f"requests-oauth2client asked for a DPoP token and got {token.token_type}")
    for _ in range(2):
        submit(intake, "requests-oauth2client, DPoP", auth=token)
    stolen = requests.post(
        f"{intake}/partners/external/intake",
        json=enquiry(),
        headers={"Authorization": f"Bearer {token.access_token}"},
        timeout=10,
    )
    challenge = stolen.headers.get("www-authenticate", "")
    if stolen.status_code != 401 or not challenge.startswith('DPoP error="invalid_token"'):
        sys.exit(f"a DPoP-bound token sent as Bearer got {stolen.status_code} {challenge}")

    # private_key_jwt: a client registered with its public key only.
    private = Jwk.generate(alg="ES256", kid="partner-key-1")
    with tempfile.TemporaryDirectory() as tmp:
        jwks = Path(tmp) / "partner-keys.json"
        jwks.write_text(json.dumps({"keys": [private.public_jwk().to_dict()]}))
        created = subprocess.run(
            [auth_server, "client", "create", "--name", f"Keyed partner {uuid.uuid4().hex[:6]}",
             "--scopes", SCOPE, "--auth-method", "private_key_jwt", "--jwks-file", str(jwks),
             "-o", "json"],
            check=True, capture_output=True, text=True,
        )
    keyed_id = json.loads(created.stdout)["client_id"]
    if "client_secret" in json.loads(created.stdout):
        sys.exit("a private_key_jwt client was given a secret")

    keyed = OAuth2Client(token_endpoint, auth=PrivateKeyJwt(keyed_id, private.to_dict()), testing=True)
    submit(intake, "requests-oauth2client, private_key_jwt", auth=keyed.client_credentials(scope=SCOPE))
    keyed_dpop = OAuth2Client(
        token_endpoint,
        auth=PrivateKeyJwt(keyed_id, private.to_dict()),
        dpop_bound_access_tokens=True,
        testing=True,
    )
    bound = keyed_dpop.client_credentials(scope=SCOPE)
    if bound.token_type.lower() != "dpop":
        sys.exit(f"private_key_jwt with DPoP got a {bound.token_type} token")
    submit(intake, "requests-oauth2client, private_key_jwt and DPoP", auth=bound)

    session = OAuth2Session(
        keyed_id,
        # Authlib reads a bare PEM as an RSA key: an EC one goes in typed.
        ECKey.import_key(private.to_pem()),
        token_endpoint_auth_method=PrivateKeyJWT(token_endpoint, alg="ES256"),
        scope=SCOPE,
    )
    fetched = session.fetch_token(token_endpoint, grant_type="client_credentials")
    submit(intake, "Authlib, private_key_jwt",
           headers={"Authorization": f"Bearer {fetched['access_token']}"})
    print("requests-oauth2client (DPoP, private_key_jwt, both) and Authlib (private_key_jwt) work")


if __name__ == "__main__":
    main()
