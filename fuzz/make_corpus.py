#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/): wire frames laid out as
docs/protocol.md says, JSON schemas, API bodies, texts, chat outputs and templates of daisy's own.
The GGUF seed is a model `daisy gen-model` makes (scripts/fuzz.sh)."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def string(x):
    b = x.encode()
    return struct.pack("<I", len(b)) + b


def forward(masks=False, dim=8, fid=7):
    header = struct.pack("<QBBHiI", fid, 0, 0, 0, dim, 1) + struct.pack("<iii", 0, 0, 2)
    out = struct.pack("<BBH", 1, 0, 0) + struct.pack("<fifff", 0.0, 0, 1.0, 0.0, 1.0) + struct.pack("<i", 64)
    out += struct.pack("<QQ", 5, 2) + struct.pack("<I", 0)
    out += struct.pack("<I", 1) + struct.pack("<BI", 0, 2) + struct.pack("<ii", 3, 9) if masks else struct.pack("<I", 0)
    return header + struct.pack("<I", len(out)) + out + b"\0" * (2 * dim * 4)


# fuzz_frames: the first byte picks the decoder (fuzz_frames.cc).
put("fuzz_frames", "forward", b"\x00" + forward())
put("fuzz_frames", "forward-masks", b"\x00" + forward(masks=True))
put("fuzz_frames", "forward-middle", b"\x01" + forward())
result = struct.pack("<QI", 7, 1) + struct.pack("<iIHHI", 0, 1, 1, 0, 0) + struct.pack("<if", 3, -0.5) * 2
put("fuzz_frames", "result", b"\x02" + result)
put("fuzz_frames", "configure", b"\x03" + struct.pack("<Q", 99) + string("127.0.0.1:9000") + struct.pack("<BiiiiQI", 0, 64, 4, 512, 0, 0, 0))
put("fuzz_frames", "ping", b"\x05" + struct.pack("<Q", 1))
put("fuzz_frames", "configured", b"\x07" + struct.pack("<I", 2) + struct.pack("<iiii", 3, 40, 5, 1))
put("fuzz_frames", "error", b"\x08" + struct.pack("<Q", 3) + string("boom"))

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 2},
                                      "pet": {"$ref": "#/$defs/pet"}},
     "required": ["name"], "$defs": {"pet": {"type": "object", "properties": {"kind": {"const": "cat"}}}}},
    {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}]},
    {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": ["boolean", "string"]}},
    {"$ref": "#/$defs/n", "$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}}},
]
for i, s in enumerate(SCHEMAS):
    put("fuzz_json_schema", f"schema{i}.json", json.dumps(s))

BODIES = [
    {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    {"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": [{"type": "text", "text": "a"}]}],
     "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"c": {"type": "string"}}}}}],
     "tool_choice": "required", "logprobs": True, "top_logprobs": 2, "n": 2},
    {"messages": [{"role": "user", "content": "q"}], "response_format": {"type": "json_schema", "json_schema": {"schema": SCHEMAS[0]}}},
    {"prompt": "hello", "max_tokens": 3, "logprobs": 2, "stop": ["x", "y"], "seed": 4, "temperature": 0.5},
    {"messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function",
                                                                         "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
                  {"role": "tool", "tool_call_id": "1", "content": "r"}], "chat_template_kwargs": {"enable_thinking": False}},
]
for i, b in enumerate(BODIES):
    put("fuzz_api", f"body{i}.json", json.dumps(b))

for i, t in enumerate([b"Hello, world!", b"<|begin_of_text|>x<|eot_id|>", "h\u00e9llo \u4e2d\u6587 \U0001f642\n\t  x".encode(),
                       b"\xff\xfe broken \xc3"]):
    put("fuzz_tokenizer", f"text{i}", t)

# fuzz_chat_output: the first byte is the format (bit 0 reasoning, bit 1 open, bits 2-3 tools).
for i, (f, t) in enumerate([(5, "<think>\nhmm\n</think>\n\nhi <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"),
                            (8, "{\"name\": \"f\", \"parameters\": {}}"),
                            (12, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]"),
                            (3, "reasoning</think>answer")]):
    put("fuzz_chat_output", f"out{i}", bytes([f]) + t.encode())

for name in ("llama2-chat.jinja", "think-open.jinja"):
    with open(os.path.join(HERE, "..", "tests", "chat", name)) as f:
        put("fuzz_jinja", name, f.read())
put("fuzz_jinja", "features.jinja",
    "{% set ns = namespace(n=0) %}{% macro m(a, b=2) %}{{ a ~ b }}{% endmacro %}"
    "{% for x in messages if x.role != 'tool' %}{{ loop.index }}"
    "{{ x.content | trim | upper if x.content is string else x.content | tojson(indent=2) }}"
    "{% set ns.n = ns.n + 1 %}{% else %}none{% endfor %}{{ m(ns.n) }}"
    "{{ tools | map(attribute='function') | list | length }}{{ 'a,b'.split(',')[::-1] | join('-') }}"
    "{% raw %}{{ x }}{% endraw %}{%- if x is not defined and 3 is divisibleby 3 -%} {{ 10 // 3 }} {%- endif %}")

# fuzz_http: the first byte is the piece size the request arrives in (fuzz_http.cc).
for i, r in enumerate([b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                       b"POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n"
                       b"{\"prompt\": \"hi\"}GET / HTTP/1.0\r\n\r\n",
                       b"POST /p?x=1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
                       b"5;e=1\r\nhello\r\n0\r\nT: 1\r\n\r\n",
                       b"\r\nGET http://h:80/v1/models?q HTTP/1.1\nConnection: close\n\n"]):
    put("fuzz_http", f"req{i}", bytes([i * 7]) + r)

# fuzz_link: the first byte is the role (0/1 dialer open/keyed, 2/3 acceptor open/keyed, 4 frames only).
def frame(t, payload):
    return struct.pack("<IHHI", 0x31595344, 5, t, len(payload)) + payload
put("fuzz_link", "dialer-open", b"\x00" + frame(1, b"\x00" + b"n" * 32) + frame(3, b"\x00" * 32) + frame(25, struct.pack("<Q", 1)))
put("fuzz_link", "dialer-keyed", b"\x01" + frame(1, b"\x01" + b"n" * 32) + frame(4, string("wrong cluster key")))
put("fuzz_link", "acceptor-open", b"\x02" + frame(2, b"\x00" + b"c" * 32 + b"\x00" * 32) + frame(16, b""))
put("fuzz_link", "acceptor-keyed", b"\x03" + frame(2, b"\x01" + b"c" * 32 + b"m" * 32))
put("fuzz_link", "start-tls", b"\x01" + frame(5, b""))
put("fuzz_link", "frames", b"\x04" + frame(26, struct.pack("<QQQI", 1, 2, 0, 3)) + frame(24, struct.pack("<Q", 0) + string("x")))

# fuzz_worker: what one connection sends a worker holding the last stage (d_model 32) after the
# authentication: a session, a forward, a ping, a release.
configure = frame(18, struct.pack("<Q", 99) + string("") + struct.pack("<BiiiiQI", 0, 16, 4, 64, 0, 0, 0))
resume = frame(18, struct.pack("<Q", 100) + string("") + struct.pack("<BiiiiQIi", 0, 16, 4, 64, 0, 99, 1, 0))
put("fuzz_worker", "describe", frame(16, b""))
put("fuzz_worker", "session", configure + frame(25, struct.pack("<Q", 1)) + frame(21, forward(dim=32, fid=1)) +
    frame(23, struct.pack("<Ii", 1, 0)))
put("fuzz_worker", "two-forwards", configure + frame(21, forward(dim=32, fid=1)) + frame(21, forward(masks=True, dim=32, fid=2)))
put("fuzz_worker", "join", frame(20, struct.pack("<Q", 99)))
put("fuzz_worker", "resume", configure + frame(21, forward(dim=32, fid=1)) + resume + frame(21, forward(dim=32, fid=2)))
