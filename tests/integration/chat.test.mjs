// Chat with real templates through `daisy serve` and the official `openai` npm client, with
// real processes on loopback: each family's own template (Qwen3, Gemma 3, Llama 3.2, DeepSeek
// V3) renders the prompt the model is fed (POST /apply-template == `daisy chat-template`), and
// the answer is exactly `daisy run` on that prompt, streamed and not; tool definitions, assistant
// tool calls and tool results go through the template; reasoning in an open <think> comes back
// as reasoning_content; template errors and unsupported tool choices are 4xx with the reason,
// and the server stays up. Runs the binary named by $DAISY.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {after, test} from "node:test";
import OpenAI from "openai";
import {tokenizerJson} from "../parity/lib.mjs";
import {harness, lastJson} from "./lib.mjs";

const {dir, run, must, start, makeModel} = harness("chat");
const here = path.dirname(new URL(import.meta.url).pathname);
const servers = [];
after(() => servers.forEach((s) => s.proc.kill("SIGTERM")));

const TOOLS = [{type: "function", function: {name: "get_weather", description: "The weather in a city",
  parameters: {type: "object", properties: {city: {type: "string", description: "Name, e.g. Zürich"},
                                            days: {type: "integer", enum: [1, 2, 3]}}, required: ["city"]}}}];
const TOOL_TURN = [
  {role: "user", content: "Weather in Zürich?"},
  {role: "assistant", content: null, tool_calls: [{id: "call_1", type: "function",
    function: {name: "get_weather", arguments: JSON.stringify({city: "Zürich", days: 2})}}]},
  {role: "tool", tool_call_id: "call_1", content: "sunny, 21 °C"},
];

async function serve(modelPath, extra = []) {
  const s = await start(["serve", "-m", modelPath, "--http", "127.0.0.1:0", "-t", "1", "--ctx", "512", "--max-seqs", "2", ...extra]);
  servers.push(s);
  s.client = new OpenAI({baseURL: `http://127.0.0.1:${s.port}/v1`, apiKey: "none", maxRetries: 0});
  s.post = async (p, body) => {
    const r = await fetch(`http://127.0.0.1:${s.port}${p}`, {method: "POST", headers: {"Content-Type": "application/json"},
                                                              body: JSON.stringify(body)});
    return {status: r.status, body: await r.json()};
  };
  return s;
}

// `daisy chat-template` on the same input.
function chatTemplate(modelPath, input, extra = []) {
  const r = run(["chat-template", "-m", modelPath, "--json", ...extra], JSON.stringify(input));
  assert.equal(r.code, 0, r.err);
  return JSON.parse(r.out);
}

// `daisy run` on a rendered prompt (BOS stripped when the model adds its own, as the server does).
function alone(modelPath, prompt, n, bos) {
  const text = bos && prompt.startsWith(bos) ? prompt.slice(bos.length) : prompt;
  return lastJson(must(["run", "-m", modelPath, "-p", text, "-n", String(n), "--temp", "0", "-t", "1", "--json"]).out);
}

const FAMILIES = [
  {name: "qwen3", tools: true, bos: null},
  {name: "gemma3", tools: false, bos: "<bos>"},
  {name: "llama3_2", tools: true, bos: "<|begin_of_text|>"},
  {name: "deepseek_v3", tools: false, bos: "<｜begin▁of▁sentence｜>"},
];

for (const fam of FAMILIES) {
  test(`${fam.name}: the model's template feeds the model, and the answer is daisy run's on that prompt`, async () => {
    const m = makeModel(`m-${fam.name}`, ["--layers", "2", "--type", "q8_0", "--seed", "5", "--tokenizer", tokenizerJson(fam.name)]);
    const s = await serve(m);
    const messages = [{role: "system", content: "You are terse."}, {role: "user", content: "Name three colours."}];
    const body = {messages, ...(fam.tools ? {tools: TOOLS} : {}), chat_template_kwargs: {date_string: "05 Dec 2026"}};
    const applied = await s.post("/apply-template", body);
    assert.equal(applied.status, 200, JSON.stringify(applied.body));
    const want = chatTemplate(m, {messages, ...(fam.tools ? {tools: TOOLS} : {}), add_generation_prompt: true,
                                  date_string: "05 Dec 2026"});
    assert.equal(applied.body.prompt, want);
    if (fam.tools) assert.ok(want.includes("get_weather"), "the tools are in the prompt");
    const plain = alone(m, want, 8, fam.bos);
    const r = await s.client.chat.completions.create({model: s.ready.model, ...body, max_tokens: 8, temperature: 0});
    assert.equal(r.choices[0].message.content, plain.text);
    assert.equal(r.usage.prompt_tokens, plain.prompt_tokens);
    const stream = await s.client.chat.completions.create({model: s.ready.model, ...body, max_tokens: 8, temperature: 0, stream: true});
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? "";
    assert.equal(text, plain.text);
    if (fam.tools) {
      // An assistant tool call and its result go back through the template (arguments as the
      // object the template expects, though the client sends a JSON string).
      const turn = await s.post("/apply-template", {messages: TOOL_TURN, tools: TOOLS});
      assert.equal(turn.status, 200, JSON.stringify(turn.body));
      assert.ok(turn.body.prompt.includes("sunny, 21 °C"), turn.body.prompt);
      assert.ok(turn.body.prompt.includes('"city": "Zürich"'), turn.body.prompt);
      const r2 = await s.client.chat.completions.create({model: s.ready.model, messages: TOOL_TURN, tools: TOOLS, max_tokens: 4, temperature: 0});
      assert.equal(r2.choices[0].message.role, "assistant");
    }
    s.proc.kill("SIGTERM");
  });
}

test("an open <think> comes back as reasoning_content, streamed and not; reasoning_format none keeps it as content", async () => {
  const m = makeModel("m-think", ["--layers", "2", "--type", "q8_0", "--seed", "9", "--tokenizer", tokenizerJson("qwen3")]);
  const tmpl = path.join(here, "..", "chat", "think-open.jinja");
  const s = await serve(m, ["--chat-template", tmpl]);
  const messages = [{role: "user", content: "What is 2 + 2?"}];
  const prompt = chatTemplate(m, {messages, add_generation_prompt: true}, ["--chat-template", tmpl]);
  assert.ok(prompt.endsWith("<think>\n"));
  const plain = alone(m, prompt, 12, null);
  const r = await s.client.chat.completions.create({model: s.ready.model, messages, max_tokens: 12, temperature: 0});
  // Random weights never close the block: all of it is reasoning (trimmed), none is content.
  assert.equal(r.choices[0].message.reasoning_content, plain.text.trim());
  assert.equal(r.choices[0].message.content, "");
  const stream = await s.client.chat.completions.create({model: s.ready.model, messages, max_tokens: 12, temperature: 0, stream: true});
  let reasoning = "", content = "";
  for await (const c of stream) {
    reasoning += c.choices[0]?.delta?.reasoning_content ?? "";
    content += c.choices[0]?.delta?.content ?? "";
  }
  assert.equal(reasoning, plain.text.trim());
  assert.equal(content, "");
  const raw = await s.client.chat.completions.create({model: s.ready.model, messages, max_tokens: 12, temperature: 0,
                                                      reasoning_format: "none"});
  assert.equal(raw.choices[0].message.content, plain.text);
  assert.equal(raw.choices[0].message.reasoning_content, undefined);
});

test("template errors and tool choices daisy cannot honour are 4xx with the reason; the server stays up", async () => {
  const m = makeModel("m-errors", ["--layers", "1", "--type", "q8_0", "--tokenizer", tokenizerJson("gemma3")]);
  const s = await serve(m);
  const bad = async (body, status, code, text) => {
    const r = await s.post("/v1/chat/completions", {max_tokens: 2, ...body});
    assert.equal(r.status, status, JSON.stringify(r.body));
    if (code) assert.equal(r.body.error.code, code, JSON.stringify(r.body));
    assert.ok(r.body.error.message.includes(text), r.body.error.message);
  };
  // Gemma's template refuses roles that do not alternate: its own message comes back.
  await bad({messages: [{role: "user", content: "a"}, {role: "user", content: "b"}]}, 400, "chat_template_error",
            "Conversation roles must alternate user/assistant/user/assistant");
  await bad({messages: [{role: "user", content: "a"}], tools: TOOLS, tool_choice: "required"}, 400, "unsupported_tool_choice",
            "tool_choice 'required' is not supported yet");
  await bad({messages: [{role: "user", content: "a"}], tool_choice: "sometimes"}, 400, null, "'tool_choice' must be");
  await bad({messages: [{role: "robot", content: "a"}]}, 400, null, "daisy takes system, developer, user, assistant and tool messages");
  const applied = await s.post("/apply-template", {messages: [{role: "user", content: "a"}, {role: "user", content: "b"}]});
  assert.equal(applied.status, 400);
  assert.equal((await fetch(`http://127.0.0.1:${s.port}/health`)).status, 200);
  const ok = await s.client.chat.completions.create({model: s.ready.model, messages: [{role: "user", content: "hi"}], max_tokens: 2});
  assert.equal(ok.choices[0].message.role, "assistant");
  // A --chat-template daisy cannot parse is refused at start, naming the construct.
  const file = path.join(dir, "bad.jinja");
  fs.writeFileSync(file, "{% for m in messages %}{% include 'x' %}{% endfor %}");
  const r = run(["serve", "-m", m, "--http", "127.0.0.1:0", "--chat-template", file], undefined, 20000);
  assert.notEqual(r.code, 0);
  assert.match(r.err, /the \{% include %\} statement is not supported/);
});
