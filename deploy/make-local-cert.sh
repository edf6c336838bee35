#!/usr/bin/env bash
# Makes a private certificate authority and a certificate signed by it, for trying the
# production layout locally: valid for localhost, 127.0.0.1 and the proxy's name on the
# internal network (the intake-api fetches the JWKS through the proxy and trusts the
# authority through INTAKE_AUTH_CA_FILE). Clients outside need the authority too:
#   curl --cacert deploy/tls/ca.crt https://localhost:8443/.well-known/jwks.json
# For a real deployment put your certificate and key in deploy/tls/ instead (see README).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p tls
if [ -e tls/local.crt ] && [ "${1:-}" != "--force" ]; then
    echo "deploy/tls/local.crt exists; --force makes a new one" >&2
    exit 0
fi
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
openssl req -x509 -newkey rsa:2048 -sha256 -days 365 -nodes \
    -keyout tls/ca.key -out tls/ca.crt -subj "/CN=partner-intake local CA" 2>/dev/null
openssl req -newkey rsa:2048 -sha256 -nodes -keyout tls/local.key -out "$work/local.csr" \
    -subj "/CN=localhost" 2>/dev/null
printf '%s\n' \
    "subjectAltName=DNS:localhost,DNS:proxy,IP:127.0.0.1" \
    "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" > "$work/ext.cnf"
openssl x509 -req -in "$work/local.csr" -CA tls/ca.crt -CAkey tls/ca.key -CAcreateserial \
    -days 365 -sha256 -extfile "$work/ext.cnf" -out tls/local.crt 2>/dev/null
rm -f tls/ca.srl
chmod 644 tls/ca.crt tls/local.crt
# The proxy's worker processes read the key.
chmod 644 tls/local.key
echo "made deploy/tls/ca.crt (the authority to trust) and local.crt/local.key (the proxy's)"
