#!/usr/bin/env python3
"""Reference chat-template renderer for chat_template_parity.mjs: Jinja2 set up the way Hugging Face
transformers renders chat templates (transformers.utils.chat_template_utils: _compile_jinja_template
and render_jinja_template), with Debian's python3-jinja2 (3.1.x).

Reads ONE JSON object from stdin:
  {"template": "...", "bos_token": "<s>" | null, "eos_token": "</s>" | null,
   "messages": [...], "tools": [...] (optional), "add_generation_prompt": true (default),
   ...any other key: a template variable (enable_thinking, date_string, tools_in_user_message...)}
and writes {"ok": true, "text": "..."} or
  {"ok": false, "error": "<message>", "error_type": "<exception class>", "raised": <bool>}
where "raised" tells the template's own raise_exception(...) from any other failure (a Python
TypeError such as str + list, an undefined-variable error, a syntax error).

A JSON array of such objects on stdin gives a JSON array of results, in order (one python
process for a whole test run).

Variables passed to the template, as transformers passes them: messages, tools (only when the
request has them: transformers itself passes tools=None and documents=None when there are none,
which the templates tested here cannot tell apart from an undefined variable), add_generation_prompt,
bos_token and eos_token when not null (transformers passes the tokenizer's special_tokens_map,
which leaves out the tokens that are None), then every other key of the request.

Output is ASCII JSON (non-ASCII as \\u escapes) so that no locale can mangle it.
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.sandbox


class RaisedException(jinja2.exceptions.TemplateError):
    """What raise_exception() raises: transformers raises a plain TemplateError with the message;
    the subclass only lets us tell it apart from Jinja's own errors."""


def raise_exception(message):
    raise RaisedException(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers overrides Jinja's tojson, which would HTML-escape <, >, &, ' and sort keys.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def make_environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_environment()
_compiled = {}


def render(request):
    if not isinstance(request, dict):
        return {"ok": False, "error": "request is not a JSON object", "error_type": "BadRequest", "raised": False}
    request = dict(request)
    template = request.pop("template", None)
    if not isinstance(template, str):
        return {"ok": False, "error": "request has no \"template\" string", "error_type": "BadRequest", "raised": False}
    variables = {"messages": request.pop("messages", [])}
    if "tools" in request:
        variables["tools"] = request.pop("tools")
    variables["add_generation_prompt"] = request.pop("add_generation_prompt", True)
    for token in ("bos_token", "eos_token"):
        value = request.pop(token, None)
        if value is not None:
            variables[token] = value
    variables.update(request)  # the kwargs: enable_thinking, date_string, ...
    try:
        compiled = _compiled.get(template)
        if compiled is None:
            compiled = _compiled[template] = ENV.from_string(template)
        return {"ok": True, "text": compiled.render(**variables)}
    except Exception as e:  # noqa: BLE001 - any failure of the template is a result to compare
        raised = isinstance(e, RaisedException)
        return {"ok": False, "error": str(e), "error_type": "TemplateError" if raised else type(e).__name__,
                "raised": raised}


def main():
    data = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    result = [render(r) for r in data] if isinstance(data, list) else render(data)
    sys.stdout.write(json.dumps(result, ensure_ascii=True))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
