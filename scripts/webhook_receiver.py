"""A partner's webhook receiver for scripts/check-webhooks.sh: verifies every request with the
Standard Webhooks reference library and appends each verified event to a file.

Usage: webhook_receiver.py PORT SECRET_FILE EVENTS_FILE DOWN_FLAG_FILE
SECRET_FILE holds one secret a line; a request must verify with each of them (during a
secret rotation's grace, with the new and the previous one). While DOWN_FLAG_FILE exists it
answers 503 without looking at the request; a request that fails verification is answered
400 and written to EVENTS_FILE as {"forged": ...}.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

PORT, SECRET_FILE, EVENTS_FILE, DOWN_FLAG = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if os.path.exists(DOWN_FLAG):
            self.send_response(503)
            self.end_headers()
            return
        with open(SECRET_FILE) as f:
            secrets = [line.strip() for line in f if line.strip()]
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            if not secrets:
                raise WebhookVerificationError("no secret to verify with")
            events = [Webhook(secret).verify(body, headers) for secret in secrets]
            record = {"id": headers["webhook-id"], "event": events[0], "secrets": len(secrets)}
            status = 204
        except WebhookVerificationError as e:
            record = {"forged": str(e)}
            status = 400
        with open(EVENTS_FILE, "a") as f:
            f.write(json.dumps(record) + "\n")
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
