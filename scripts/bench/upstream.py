#!/usr/bin/env python3
"""Fixed-answer upstream for scripts/bench-instructions: upstream.py PORT.
The harness's answers (../shared/bench/lib/gen_fixtures.py): one whole answer, or for a body
with "stream": true an SSE stream of ~50 chunks (tokens w01..w47) sent in one write; in Chat
Completions' shape, or, on a path ending in /responses, in native Responses' (the same text)."""
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


RESP_ITEM = {"type": "message", "id": "msg_perf", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": TEXT, "annotations": [], "logprobs": []}]}
RESP_USAGE = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 9,
              "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 21}


def resp(status, output, usage=None):
    return {"id": "resp_perf", "object": "response", "created_at": CREATED, "status": status,
            "model": "m", "output": output, "usage": usage}


RESP_JSON = dumps(resp("completed", [RESP_ITEM], RESP_USAGE)).encode()


def event(seq, body):
    body["sequence_number"] = seq
    return "event: %s\ndata: %s\n\n" % (body["type"], dumps(body))


def resp_sse():
    text = "".join(TOKENS)
    item = dict(RESP_ITEM, status="in_progress", content=[])
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    done_item = dict(RESP_ITEM, content=[dict(part, text=text)])
    events = [{"type": "response.created", "response": resp("in_progress", [])},
              {"type": "response.in_progress", "response": resp("in_progress", [])},
              {"type": "response.output_item.added", "output_index": 0, "item": item},
              {"type": "response.content_part.added", "item_id": "msg_perf", "output_index": 0,
               "content_index": 0, "part": part}]
    events += [{"type": "response.output_text.delta", "item_id": "msg_perf", "output_index": 0,
                "content_index": 0, "delta": t, "logprobs": []} for t in TOKENS]
    events += [{"type": "response.output_text.done", "item_id": "msg_perf", "output_index": 0,
                "content_index": 0, "text": text, "logprobs": []},
               {"type": "response.content_part.done", "item_id": "msg_perf", "output_index": 0,
                "content_index": 0, "part": dict(part, text=text)},
               {"type": "response.output_item.done", "output_index": 0, "item": done_item},
               {"type": "response.completed", "response": resp("completed", [done_item], dict(
                   RESP_USAGE, output_tokens=47, total_tokens=59))}]
    return "".join(event(i, e) for i, e in enumerate(events)).encode()


RESP_SSE = resp_sse()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.reply(b'{"object":"list","data":[{"id":"m","object":"model","owned_by":"perf"}]}', "application/json")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        stream = b'"stream":true' in body.replace(b" ", b"")
        if self.path.rstrip("/").endswith("/responses"):
            self.reply(RESP_SSE if stream else RESP_JSON, "text/event-stream" if stream else "application/json")
            return
        self.reply(CHAT_SSE if stream else CHAT_JSON, "text/event-stream" if stream else "application/json")

    def reply(self, data, kind):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
