#!/usr/bin/env python3
"""Sequential keep-alive POSTs for scripts/bench-instructions: client.py PORT BODYFILE N KIND.
KIND json: each answer must be a completed response whose text is the upstream's; sse: each
stream must carry w01, w47 and response.completed. Prints {"n","bad","connects"} as JSON."""
import http.client, json, sys

port, body_file, n, kind = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
body = open(body_file, "rb").read()
headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
conn, bad, connects = None, 0, 0
for _ in range(n):
    if conn is None:
        conn, connects = http.client.HTTPConnection("127.0.0.1", port, timeout=600), connects + 1
    conn.request("POST", "/v1/responses", body=body, headers=headers)
    r = conn.getresponse()
    text = r.read().decode("utf-8", "replace")
    ok = r.status == 200
    if ok and kind == "json":
        try:
            o = json.loads(text)
            ok = o.get("status") == "completed" and "Hi! How can I help you today?" in text
        except ValueError:
            ok = False
    elif ok:
        ok = "response.completed" in text and "w01" in text and "w47" in text
    if not ok:
        bad += 1
        if bad <= 2:
            sys.stderr.write("BAD %d: %s\n" % (r.status, text[:300]))
    if r.getheader("connection", "").lower() == "close":
        conn.close()
        conn = None
print(json.dumps({"n": n, "bad": bad, "connects": connects}))
