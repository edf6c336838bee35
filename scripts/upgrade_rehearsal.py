#!/usr/bin/env python3
"""A rolling upgrade and its rollback, rehearsed under load on PostgreSQL and Redis, as
scripts/check-upgrade.sh runs it:

  1. the previous release migrates, then serves: two auth-server and two intake-api
     replicas, with a partner sending tokens, enquiries, updates and attaches throughout,
     and a webhook endpoint receiving every event;
  2. the next release migrates, while the previous release serves;
  3. the replicas are replaced by the next release one at a time (each taken out of the
     partner's rotation, stopped with SIGTERM so it drains, started again, back in);
  4. rollback: replaced by the previous release again, one at a time.

Then, with the load stopped: every write acknowledged is in the database, no answer was a
5xx other than 503 (documented: a replica draining or a dependency down), no valid token
was refused, every case activated exactly once, and every webhook event was delivered.

    upgrade_rehearsal.py PREV_BIN_DIR NEXT_BIN_DIR
Needs TEST_POSTGRES_URL (a server where it may create and drop two databases), REDIS_URL,
and the standardwebhooks package (the receiver is scripts/webhook_receiver.py).
"""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

PREV, NEXT = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
HERE = Path(__file__).resolve().parent
ENQUIRY = (HERE.parent / "bench" / "enquiry.json").read_text()
PRODUCT = "3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07"
SCOPE = "enquiry:case:intake:create"
# Long enough for a phase's cases to still be pending when replicas change, short enough
# for all of them to be due before the end.
ACTIVATION_DELAY_SECS = 3
PHASE_SECS = float(os.environ.get("UPGRADE_PHASE_SECS", "4"))
# New enquiries a second, across the partner's workers: a steady partner, not a flood, so
# that webhook delivery (a few dozen events a second per partner) drains soon after.
RATE = float(os.environ.get("UPGRADE_RATE", "8"))
WORKERS = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def psql(url, sql):
    out = subprocess.run(
        ["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
        capture_output=True, text=True,
    )
    if out.returncode != 0:
        sys.exit(f"psql: {out.stderr}")
    return out.stdout.strip()


def db_url(name):
    parts = urllib.parse.urlsplit(ADMIN_URL)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def fail(message):
    print(f"FAIL upgrade: {message}", file=sys.stderr)
    sys.exit(1)


class Replica:
    """One server process of one service, on a port it keeps across releases."""

    def __init__(self, service, index, env, logs):
        self.service, self.index, self.env, self.logs = service, index, env, logs
        self.port, self.admin_port = free_port(), free_port()
        self.proc, self.release = None, None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, bin_dir, release):
        prefix = "AUTH" if self.service == "auth-server" else "INTAKE"
        env = dict(self.env)
        env[f"{prefix}_BIND"] = f"127.0.0.1:{self.port}"
        env[f"{prefix}_ADMIN_BIND"] = f"127.0.0.1:{self.admin_port}"
        log = open(self.logs / f"{self.service}-{self.index}.log", "a")
        log.write(f"--- {release} ---\n")
        log.flush()
        self.proc = subprocess.Popen(
            [str(bin_dir / self.service), "serve"], env=env, stdout=log, stderr=log
        )
        self.release = release
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                fail(f"{self.service}-{self.index} ({release}) exited {self.proc.returncode}; "
                     f"see {log.name}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.admin_port}/readyz", timeout=2
                ) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        fail(f"{self.service}-{self.index} ({release}) never became ready; see {log.name}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            fail(f"{self.service}-{self.index} did not stop within 60 s of SIGTERM")
        if code != 0:
            fail(f"{self.service}-{self.index} ({self.release}) exited {code} on SIGTERM")


class Partner:
    """A partner sending work to whichever replicas are in rotation, recording every
    acknowledgement and every answer that breaks a promise."""

    def __init__(self, client_id, secret):
        self.client_id, self.secret = client_id, secret
        self.auth, self.intake = [], []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.acked_emails, self.attached = set(), set()
        self.counts = {}
        self.violations = []
        self.token = None

    def rotation(self, pool):
        with self.lock:
            return random.choice(pool) if pool else None

    def request(self, url, body=None, form=None, token=None):
        data, headers = None, {}
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = body.encode()
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            # A connection refused or reset: the replica was stopping. Nothing was
            # acknowledged, so nothing is owed; the partner tries again.
            return None, str(e).encode()

    def note(self, what, status, body):
        with self.lock:
            self.counts[(what, status)] = self.counts.get((what, status), 0) + 1
            if status is not None and status >= 500 and status != 503:
                self.violations.append(f"{what}: {status} {body[:200]!r}")

    def fetch_token(self):
        replica = self.rotation(self.auth)
        if replica is None:
            return
        status, body = self.request(
            replica.url + "/oauth/token",
            form={"grant_type": "client_credentials", "client_id": self.client_id,
                  "client_secret": self.secret, "scope": SCOPE},
        )
        self.note("token", status, body)
        if status == 200:
            self.token = json.loads(body)["access_token"]
        elif status not in (None, 503):
            with self.lock:
                self.violations.append(f"token: {status} {body[:200]!r}")

    def intake_call(self, what, path, body):
        replica = self.rotation(self.intake)
        if replica is None or self.token is None:
            return None
        status, answer = self.request(replica.url + path, body=body, token=self.token)
        self.note(what, status, answer)
        if status == 401:
            with self.lock:
                self.violations.append(f"{what}: a valid token refused by "
                                       f"{replica.service}-{replica.index} ({replica.release}): "
                                       f"{answer[:200]!r}")
        return status

    def run(self, worker):
        n = 0
        pause = WORKERS / RATE
        while not self.stop.wait(pause):
            n += 1
            if self.token is None or n % 25 == 0:
                self.fetch_token()
            email = f"upgrade-{worker}-{n}@example.com"
            status = self.intake_call("create", "/partners/external/intake",
                                      ENQUIRY.replace("EMAIL", email))
            if status in (200, 201):
                with self.lock:
                    self.acked_emails.add(email)
                if n % 3 == 0:
                    self.intake_call("update", "/partners/external/intake",
                                     ENQUIRY.replace("EMAIL", email))
                if n % 2 == 0:
                    attach = json.dumps({"email": email, "product_uuid": PRODUCT})
                    if self.intake_call("attach", "/partners/external/intake/attach",
                                        attach) == 200:
                        with self.lock:
                            self.attached.add(email)


def roll(partner, replicas, pool, bin_dir, release):
    """Replaces each replica with `release`, one at a time, as a rolling deploy does."""
    for replica in replicas:
        with partner.lock:
            pool.remove(replica)
        replica.stop()
        replica.start(bin_dir, release)
        with partner.lock:
            pool.append(replica)
        print(f"  - {replica.service}-{replica.index} now runs {release}", flush=True)
        time.sleep(PHASE_SECS / 2)


def main():
    work = Path(tempfile.mkdtemp(prefix="upgrade-"))
    suffix = uuid.uuid4().hex[:12]
    auth_db, intake_db = f"upgrade_auth_{suffix}", f"upgrade_intake_{suffix}"
    psql(ADMIN_URL, f"CREATE DATABASE {auth_db}")
    psql(ADMIN_URL, f"CREATE DATABASE {intake_db}")
    replicas, receiver = [], None
    try:
        kek, intake_kek = (
            subprocess.run(["openssl", "rand", "-base64", "32"], capture_output=True,
                           text=True, check=True).stdout.strip()
            for _ in range(2))
        base = {k: v for k, v in os.environ.items() if not k.startswith(("AUTH_", "INTAKE_"))}
        base.update({"RUST_LOG": "info", "LOG_FORMAT": "json", "REDIS_URL": REDIS_URL})
        auth_env = dict(base, AUTH_DATABASE_URL=db_url(auth_db), AUTH_KEY_ENCRYPTION_KEY=kek)
        auth = [Replica("auth-server", i, auth_env, work) for i in (1, 2)]
        issuer = auth[0].url
        for a in auth:
            a.env = dict(auth_env, AUTH_ISSUER=issuer)
        intake_env = dict(
            base, INTAKE_DATABASE_URL=db_url(intake_db), INTAKE_ISSUER=issuer,
            # The previous release ignores it; this one needs it.
            INTAKE_KEY_ENCRYPTION_KEY=intake_kek,
            INTAKE_JWKS_URL=f"{issuer}/.well-known/jwks.json",
            INTAKE_ACTIVATION_DELAY_SECS=str(ACTIVATION_DELAY_SECS),
            INTAKE_ACTIVATION_POLL_MS="200", INTAKE_WEBHOOK_POLL_MS="200",
            INTAKE_WEBHOOK_BACKOFF_MS="200", INTAKE_WEBHOOK_ALLOW_INSECURE="true",
            # A partner's steady load, not a flood: the limits are not what is tested.
            INTAKE_RATE_LIMIT="1000000",
        )
        intake = [Replica("intake-api", i, intake_env, work) for i in (1, 2)]
        replicas = auth + intake

        def command(bin_dir, service, *args, env):
            out = subprocess.run([str(bin_dir / service), *args], env=env,
                                 capture_output=True, text=True)
            if out.returncode != 0:
                fail(f"{service} {' '.join(args)}: {out.stderr}")
            return out.stdout

        print("previous release: migrate, serve, load", flush=True)
        command(PREV, "auth-server", "migrate", env=auth_env)
        command(PREV, "intake-api", "migrate", env=intake_env)
        # The intake-api's own client, which reads the list of disabled clients; both
        # releases' intake-apis are given it.
        reader = json.loads(command(PREV, "auth-server", "client", "create", "--name",
                                    "intake-api", "--scopes", "revocations:read", "-o", "json",
                                    env=auth_env))
        for r in intake:
            r.env = dict(r.env, INTAKE_REVOCATIONS_CLIENT_ID=reader["client_id"],
                         INTAKE_REVOCATIONS_CLIENT_SECRET=reader["client_secret"])
        for r in replicas:
            r.start(PREV, "previous")
        client = json.loads(command(PREV, "auth-server", "client", "create", "--name",
                                    "Upgrade partner", "--scopes", SCOPE, "-o", "json",
                                    env=auth_env))
        receiver_port = free_port()
        (work / "events.jsonl").touch()
        secret_file = work / "secret"
        webhook = json.loads(command(
            PREV, "intake-api", "webhook", "set", client["client_id"],
            f"http://127.0.0.1:{receiver_port}/hooks", "--show-secret", "-o", "json",
            env=intake_env))
        secret_file.write_text(webhook["secret"])
        receiver = subprocess.Popen(
            [sys.executable, str(HERE / "webhook_receiver.py"), str(receiver_port),
             str(secret_file), str(work / "events.jsonl"), str(work / "receiver-down")])

        partner = Partner(client["client_id"], client["client_secret"])
        partner.auth.extend(auth)
        partner.intake.extend(intake)
        # Daemons: a failed step ends the process without waiting for the partner.
        workers = [threading.Thread(target=partner.run, args=(w,), daemon=True)
                   for w in range(WORKERS)]
        for w in workers:
            w.start()
        time.sleep(PHASE_SECS)

        print("next release: migrate beside the previous release's replicas", flush=True)
        command(NEXT, "auth-server", "migrate", env=auth_env)
        command(NEXT, "intake-api", "migrate", env=intake_env)
        time.sleep(PHASE_SECS / 2)
        print("next release: roll out", flush=True)
        roll(partner, intake, partner.intake, NEXT, "next")
        roll(partner, auth, partner.auth, NEXT, "next")
        time.sleep(PHASE_SECS)
        print("rollback: the previous release on the migrated database", flush=True)
        roll(partner, intake, partner.intake, PREV, "previous")
        roll(partner, auth, partner.auth, PREV, "previous")
        time.sleep(PHASE_SECS)
        partner.stop.set()
        for w in workers:
            w.join()

        verify(partner, intake_db, work)
        # The logs stay for a failure to be read; a pass needs none of them.
        shutil.rmtree(work, ignore_errors=True)
    finally:
        for r in replicas:
            if r.proc and r.proc.poll() is None:
                r.proc.kill()
                r.proc.wait()
        if receiver:
            receiver.kill()
            receiver.wait()
        psql(ADMIN_URL, f"DROP DATABASE IF EXISTS {auth_db} WITH (FORCE)")
        psql(ADMIN_URL, f"DROP DATABASE IF EXISTS {intake_db} WITH (FORCE)")


def verify(partner, intake_db, work):
    counts = sorted((f"{w} {s}", n) for (w, s), n in partner.counts.items())
    print("  answers: " + ", ".join(f"{k}: {n}" for k, n in counts), flush=True)
    if partner.violations:
        fail(f"{len(partner.violations)} broken promises, first: {partner.violations[:3]}")
    acked = partner.acked_emails
    if len(acked) < 50:
        fail(f"only {len(acked)} enquiries were acknowledged: too little load to prove anything")
    url = db_url(intake_db)
    stored = set(psql(url, "SELECT email FROM cases WHERE email LIKE 'upgrade-%'").split())
    lost = acked - stored
    if lost:
        fail(f"{len(lost)} acknowledged enquiries are not in the database, e.g. {sorted(lost)[:3]}")
    attached = set(psql(url, "SELECT email FROM cases WHERE product_uuid IS NOT NULL "
                             "AND email LIKE 'upgrade-%'").split())
    if partner.attached - attached:
        fail(f"{len(partner.attached - attached)} acknowledged attaches are not stored")
    print(f"  - {len(acked)} acknowledged enquiries and {len(partner.attached)} attaches "
          "all stored", flush=True)

    deadline = time.time() + ACTIVATION_DELAY_SECS + 60
    while True:
        pending = int(psql(url, "SELECT count(*) FROM cases WHERE activated_at IS NULL"))
        if pending == 0:
            break
        if time.time() > deadline:
            fail(f"{pending} cases never activated (the previous release runs; its "
                 "activation pass should have taken them)")
        time.sleep(0.5)
    twice = psql(url, "SELECT count(*) FROM (SELECT case_id FROM case_events WHERE "
                      "kind = 'activated' GROUP BY case_id HAVING count(*) <> 1) t")
    if twice != "0":
        fail(f"{twice} cases activated other than exactly once")
    print("  - every case activated exactly once", flush=True)

    deadline = time.time() + 300
    while True:
        undelivered = int(psql(url, "SELECT count(*) FROM webhook_deliveries "
                                    "WHERE delivered_at IS NULL"))
        if undelivered == 0:
            break
        if time.time() > deadline:
            fail(f"{undelivered} webhook events not delivered")
        time.sleep(0.5)
    # The webhook-id of an event is msg_ and its id's 32 hex digits.
    expected = {"msg_" + i.replace("-", "")
                for i in psql(url, "SELECT id FROM webhook_deliveries").split()}
    received = set()
    for line in (work / "events.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "forged" in record:
            fail(f"a webhook did not verify: {record}")
        received.add(record["id"])
    missing = expected - received
    if missing:
        fail(f"{len(missing)} webhook events marked delivered never reached the receiver")
    print(f"  - {len(expected)} webhook events, each delivered and verified", flush=True)
    print("ok   upgrade: rolled forward and back under load with nothing lost", flush=True)


if __name__ == "__main__":
    main()
