#!/usr/bin/env python3
"""Token requests of a FAPI 2.0 partner, made ahead for bench/fapi_token.sh: COUNT lines, each
a new client assertion (private_key_jwt, signed with the client's key in KEY_JWK, for the
token endpoint TOKEN_URL) and a new DPoP proof for that request (signed with a DPoP key of
the same algorithm), separated by a tab. Signed on every core, with jwskate (which
requests-oauth2client uses).

    fapi_token_requests.py TOKEN_URL CLIENT_ID KEY_JWK COUNT > requests.txt
"""

import json
import os
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor

from jwskate import Jwk, Jwt

JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def lines(args):
    token_url, client_id, key_file, count = args
    key = Jwk(json.load(open(key_file)))
    alg = key.alg
    # A DPoP key of the partner's own, apart from its client key, as FAPI 2.0 expects.
    dpop = Jwk.generate(alg=alg, **({"key_size": 2048} if alg.startswith("PS") else {}))
    header = {"jwk": dict(dpop.public_jwk())}
    out = []
    for _ in range(count):
        now = int(time.time())
        assertion = Jwt.sign({"iss": client_id, "sub": client_id, "aud": token_url, "iat": now,
                              "exp": now + 600, "jti": str(uuid.uuid4())}, key=key, alg=alg)
        proof = Jwt.sign({"jti": str(uuid.uuid4()), "htm": "POST", "htu": token_url, "iat": now},
                         key=dpop, alg=alg, typ="dpop+jwt", extra_headers=header)
        out.append(f"{assertion}\t{proof}\n")
    return "".join(out)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    token_url, client_id, key_file, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    workers = os.cpu_count() or 1
    shares = [count // workers + (1 if n < count % workers else 0) for n in range(workers)]
    with ProcessPoolExecutor(workers) as pool:
        for chunk in pool.map(lines, [(token_url, client_id, key_file, s) for s in shares]):
            sys.stdout.write(chunk)


if __name__ == "__main__":
    main()
