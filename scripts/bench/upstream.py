#!/usr/bin/env python3
"""Fixed-answer Chat Completions upstream for scripts/bench-instructions: upstream.py PORT.
The harness's answers (../shared/bench/lib/gen_fixtures.py): one whole answer, or for a body
with "stream": true an SSE stream of ~50 chunks (tokens w01..w47) sent in one write."""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CREATED = 1764460800
TEXT = "Hi! How can I help you today?"
TOKENS = ["w01"] + [" w%02d" % i for i in range(2, 48)]


def dumps(o):
    return json.dumps(o, separators=(",", ":"))


CHAT_JSON = dumps({
    "id": "chatcmpl-perf", "object": "chat.completion", "created": CREATED, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": TEXT, "refusal": None},
                 "logprobs": None, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
}).encode()


def chunk(delta, finish=None, usage=None):
    c = {"id": "chatcmpl-perf", "object": "chat.completion.chunk", "created": CREATED, "model": "m",
         "choices": [] if usage else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    if usage:
        c["usage"] = usage
    return "data: " + dumps(c) + "\n\n"


CHAT_SSE = "".join([chunk({"role": "assistant", "content": ""})] + [chunk({"content": t}) for t in TOKENS]
                   + [chunk({}, "stop"), chunk(None, usage={"prompt_tokens": 12, "completion_tokens": 47,
                                                            "total_tokens": 59}), "data: [DONE]\n\n"]).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.reply(b'{"object":"list","data":[{"id":"m","object":"model","owned_by":"perf"}]}', "application/json")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        stream = b'"stream":true' in body.replace(b" ", b"")
        self.reply(CHAT_SSE if stream else CHAT_JSON, "text/event-stream" if stream else "application/json")

    def reply(self, data, kind):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
