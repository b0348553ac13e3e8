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
  const seqs = extra.includes("--max-seqs") ? [] : ["--max-seqs", "2"];
  const s = await start(["serve", "-m", modelPath, "--http", "127.0.0.1:0", "-t", "1", "--ctx", "512", ...seqs, ...extra]);
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

test("template errors, bad tool choices and bad response formats are 4xx with the reason; the server stays up", async () => {
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
  await bad({messages: [{role: "user", content: "a"}], tools: TOOLS, tool_choice: {type: "function", function: {name: "nope"}}},
            400, null, "'tool_choice' names 'nope', which is not among 'tools'");
  await bad({messages: [{role: "user", content: "a"}], tool_choice: "required"}, 400, null, "forces a tool call but 'tools' is empty");
  await bad({messages: [{role: "user", content: "a"}], response_format: {type: "yaml"}}, 400, null, "'response_format.type' must be");
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

// A validator for the schema subset the tests use (daisy's grammar is what is under test).
function validate(schema, v, defs = schema.$defs ?? {}) {
  if (schema.$ref) return validate(defs[schema.$ref.split("/").pop()], v, defs);
  if (schema.enum) return schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(v));
  if (schema.anyOf) return schema.anyOf.some((s) => validate(s, v, defs));
  const types = [].concat(schema.type ?? []);
  const is = {string: typeof v === "string", integer: Number.isInteger(v), number: typeof v === "number",
              boolean: typeof v === "boolean", null: v === null, array: Array.isArray(v),
              object: v !== null && typeof v === "object" && !Array.isArray(v)};
  if (types.length && !types.some((t) => is[t])) return false;
  if (is.string && schema.maxLength !== undefined && [...v].length > schema.maxLength) return false;
  if (is.array) {
    if (schema.maxItems !== undefined && v.length > schema.maxItems) return false;
    if (schema.minItems !== undefined && v.length < schema.minItems) return false;
    return !schema.items || v.every((x) => validate(schema.items, x, defs));
  }
  if (is.object && schema.properties) {
    for (const k of Object.keys(v)) if (!(k in schema.properties)) return false;
    for (const k of schema.required ?? []) if (!(k in v)) return false;
    return Object.entries(v).every(([k, x]) => validate(schema.properties[k], x, defs));
  }
  return true;
}

const SCHEMAS = {
  person: {type: "object", properties: {name: {type: "string", maxLength: 12}, age: {type: "integer"},
           kind: {enum: ["cat", "dog", 7]}, ok: {type: "boolean"}, score: {type: ["number", "null"]}},
           required: ["name", "age", "kind"]},
  nested: {type: "object", properties: {items: {type: "array", maxItems: 3, items: {$ref: "#/$defs/item"}},
           total: {type: "number"}}, required: ["items", "total"],
           $defs: {item: {type: "object", properties: {id: {type: "integer"}, tags: {type: "array", maxItems: 2,
                   items: {type: "string", maxLength: 6}}}, required: ["id"]}}},
  list: {type: "array", minItems: 1, maxItems: 4, items: {anyOf: [{type: "boolean"}, {type: "string", maxLength: 4}]}},
};

test("json_schema and json_object output always parses and matches, streamed and not, whole and on 2 stages, with speculation exact", async () => {
  const m = makeModel("m-json", ["--layers", "2", "--type", "q8_0", "--seed", "13", "--tokenizer", tokenizerJson("llama3")]);
  const s = await serve(m, ["--lookup"]);
  const out = path.join(dir, "json-2");
  must(["compile", "-m", m, "--stages", "2", "-o", out]);
  const w = await start(["worker", "--shard", path.join(out, "stage-1.daisy"), "--listen", "127.0.0.1:0", "-t", "1"]);
  servers.push(w);
  const p = await start(["serve", "--shard", path.join(out, "stage-0.daisy"), "--workers", `127.0.0.1:${w.port}`,
                         "--http", "127.0.0.1:0", "-t", "1", "--ctx", "512", "--max-seqs", "2"]);
  servers.push(p);
  const pclient = new OpenAI({baseURL: `http://127.0.0.1:${p.port}/v1`, apiKey: "none", maxRetries: 0});
  const messages = [{role: "user", content: "Give me JSON."}];
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    for (const temperature of [0, 0.9]) {
      // Sampled requests decode plainly: speculative sampling draws differently with other drafts.
      const req = {model: s.ready.model, messages, max_tokens: 400, temperature, seed: 3, speculative: temperature === 0,
                   response_format: {type: "json_schema", json_schema: {name, schema, strict: true}}};
      const r = await s.client.chat.completions.create(req);
      assert.equal(r.choices[0].finish_reason, "stop", `${name}: ${r.choices[0].message.content}`);
      const text = r.choices[0].message.content;
      const v = JSON.parse(text);
      assert.ok(validate(schema, v), `${name} at temperature ${temperature}: ${text}`);
      let streamed = "";
      for await (const c of await s.client.chat.completions.create({...req, stream: true})) streamed += c.choices[0]?.delta?.content ?? "";
      assert.equal(streamed, text, `${name}: the stream`);
      const split = await pclient.chat.completions.create({...req, model: p.ready.model});
      assert.equal(split.choices[0].message.content, text, `${name}: the 2-stage pipeline`);
      if (temperature === 0) {
        // Greedy under a grammar: speculation (prompt lookup) keeps the ids.
        const plain = await s.client.chat.completions.create({...req, speculative: false});
        assert.equal(plain.choices[0].message.content, text, `${name}: speculative vs plain`);
      }
    }
  }
  const obj = await s.client.chat.completions.create({model: s.ready.model, messages, max_tokens: 400, temperature: 0,
                                                      response_format: {type: "json_object"}});
  if (obj.choices[0].finish_reason === "stop") {
    const v = JSON.parse(obj.choices[0].message.content);
    assert.equal(typeof v, "object");
    assert.ok(!Array.isArray(v));
  } else {
    assert.ok(obj.choices[0].message.content.trimStart().startsWith("{"));
  }
  // An unconstrained request on the same server: exactly the plain answer.
  const free = await s.client.chat.completions.create({model: s.ready.model, messages, max_tokens: 6, temperature: 0});
  const prompt = chatTemplate(m, {messages, add_generation_prompt: true});
  assert.equal(free.choices[0].message.content, alone(m, prompt, 6, "<|begin_of_text|>").text);
  // Schemas daisy cannot enforce are refused, naming the keyword.
  const bad = await s.post("/v1/chat/completions", {messages, response_format: {type: "json_schema",
    json_schema: {name: "x", schema: {type: "string", pattern: "^a$"}}}});
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /'pattern' \(at #\) is not supported/);
});

test("tool_choice required and a named function force a call, parsed into tool_calls, streamed as deltas", async () => {
  for (const fam of ["qwen3", "llama3_2"]) {
    const m = makeModel(`m-tools-${fam}`, ["--layers", "2", "--type", "q8_0", "--seed", "17", "--tokenizer", tokenizerJson(fam)]);
    const s = await serve(m);
    const tools = [{type: "function", function: {name: "get_weather", description: "The weather in a city",
                     parameters: {type: "object", properties: {city: {type: "string", maxLength: 10},
                                                               days: {type: "integer", enum: [1, 2, 3]}}, required: ["city"]}}},
                   {type: "function", function: {name: "now", parameters: {type: "object", properties: {}}}}];
    for (const tool_choice of ["required", {type: "function", function: {name: "get_weather"}}]) {
      const req = {model: s.ready.model, messages: [{role: "user", content: "Weather?"}], tools, tool_choice,
                   max_tokens: 200, temperature: 0.7, seed: 11, chat_template_kwargs: {date_string: "05 Dec 2026"}};
      const r = await s.client.chat.completions.create(req);
      const msg = r.choices[0].message;
      assert.equal(r.choices[0].finish_reason, "tool_calls", JSON.stringify(msg));
      assert.equal(msg.tool_calls.length, 1);
      const call = msg.tool_calls[0];
      assert.equal(call.type, "function");
      if (typeof tool_choice === "object") assert.equal(call.function.name, "get_weather");
      const schema = tools.find((t) => t.function.name === call.function.name).function.parameters;
      assert.ok(validate(schema, JSON.parse(call.function.arguments)), call.function.arguments);
      // Streamed: the openai client's own assembly of the tool-call deltas.
      const stream = s.client.chat.completions.stream({...req});
      const final = await stream.finalChatCompletion();
      assert.deepEqual(final.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]),
                       msg.tool_calls.map((c) => [c.function.name, c.function.arguments]));
      assert.equal(final.choices[0].finish_reason, "tool_calls");
      // The call goes back through the template with its result.
      const turn = await s.post("/apply-template", {messages: [...req.messages, msg,
        {role: "tool", tool_call_id: call.id, content: "sunny"}], tools});
      assert.equal(turn.status, 200, JSON.stringify(turn.body));
      assert.ok(turn.body.prompt.includes("sunny"));
    }
    s.proc.kill("SIGTERM");
  }
});

test("logprobs and top_logprobs (chat) and logprobs (completions) are the model's, streamed and not", async () => {
  const m = makeModel("m-logprobs", ["--layers", "2", "--type", "q8_0", "--seed", "23", "--tokenizer", tokenizerJson("llama3")]);
  const s = await serve(m);
  const messages = [{role: "user", content: "Count."}];
  const prompt = chatTemplate(m, {messages, add_generation_prompt: true});
  const plain = alone(m, prompt, 6, "<|begin_of_text|>");  // ids and each token's log-probability
  const r = await s.client.chat.completions.create({model: s.ready.model, messages, max_tokens: 6, temperature: 0,
                                                    logprobs: true, top_logprobs: 3});
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 6);
  assert.equal(content.map((c) => c.token).join(""), r.choices[0].message.content);
  content.forEach((c, i) => {
    assert.ok(Math.abs(c.logprob - plain.logprobs[i]) < 1e-4, `token ${i}: ${c.logprob} vs ${plain.logprobs[i]}`);
    assert.equal(c.top_logprobs.length, 3);
    assert.equal(c.top_logprobs[0].token, c.token);  // greedy: the most likely one
    assert.ok(Math.abs(c.top_logprobs[0].logprob - c.logprob) < 1e-6);
    assert.ok(c.top_logprobs[1].logprob <= c.top_logprobs[0].logprob && c.top_logprobs[2].logprob <= c.top_logprobs[1].logprob);
    assert.deepEqual(Buffer.from(c.bytes).toString("utf8"), c.token);
  });
  let streamed = [];
  for await (const c of await s.client.chat.completions.create({model: s.ready.model, messages, max_tokens: 6, temperature: 0,
                                                                logprobs: true, top_logprobs: 3, stream: true})) {
    streamed.push(...(c.choices[0]?.logprobs?.content ?? []));
  }
  assert.deepEqual(streamed, content);
  // The completions API: tokens, token_logprobs, top_logprobs maps, text offsets.
  const text = prompt.slice("<|begin_of_text|>".length);
  const c = await s.client.completions.create({model: s.ready.model, prompt: text, max_tokens: 6, temperature: 0, logprobs: 2});
  const lp = c.choices[0].logprobs;
  assert.equal(lp.tokens.join(""), c.choices[0].text);
  assert.equal(lp.text_offset[0], 0);
  assert.equal(lp.text_offset[1], lp.tokens[0].length);
  lp.token_logprobs.forEach((x, i) => assert.ok(Math.abs(x - plain.logprobs[i]) < 1e-4));
  assert.equal(Object.keys(lp.top_logprobs[0]).length <= 2, true);
  const bad = await s.post("/v1/chat/completions", {messages, top_logprobs: 3});
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /'top_logprobs' needs 'logprobs': true/);
});

test("n choices are the single requests with seeds seed, seed + 1, ...; streamed by index", async () => {
  const m = makeModel("m-n", ["--layers", "2", "--type", "q8_0", "--seed", "29", "--tokenizer", tokenizerJson("llama3")]);
  const s = await serve(m, ["--max-seqs", "4"]);
  const messages = [{role: "user", content: "Say something."}];
  const base = {model: s.ready.model, messages, max_tokens: 8, temperature: 1.0, seed: 40};
  const r = await s.client.chat.completions.create({...base, n: 3});
  assert.equal(r.choices.length, 3);
  const singles = [];
  for (let i = 0; i < 3; i++) singles.push((await s.client.chat.completions.create({...base, seed: 40 + i})).choices[0]);
  r.choices.forEach((c, i) => {
    assert.equal(c.index, i);
    assert.equal(c.message.content, singles[i].message.content);
  });
  assert.equal(r.usage.completion_tokens, 24);
  const texts = ["", "", ""];
  let usage = null;
  for await (const c of await s.client.chat.completions.create({...base, n: 3, stream: true, stream_options: {include_usage: true}})) {
    for (const ch of c.choices) texts[ch.index] += ch.delta?.content ?? "";
    if (c.usage) usage = c.usage;
  }
  assert.deepEqual(texts, singles.map((c) => c.message.content));
  assert.equal(usage.completion_tokens, 24);
  const bad = await s.post("/v1/chat/completions", {messages, n: 9});
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /'n' is 9; it must be between 1 and 8/);
});

test("chat-template --batch renders each conversation as it does alone, and reports each one's error in its place", () => {
  const m = makeModel("m-batch", ["--layers", "1", "--type", "f32", "--tokenizer", tokenizerJson("qwen3")]);
  const inputs = [{messages: [{role: "user", content: "Hello"}], add_generation_prompt: true},
                  {messages: [{role: "system", content: "Terse."}, {role: "user", content: "Hi"}, {role: "assistant", content: "Hello."}, {role: "user", content: "Weather?"}], tools: TOOLS, add_generation_prompt: true},
                  {messages: [{role: "user", content: "No generation prompt"}]}];
  const alone = inputs.map((input) => chatTemplate(m, input));
  const r = run(["chat-template", "-m", m, "--batch"], JSON.stringify([inputs[0], 7, inputs[1], {messages: "not a list"}, inputs[2]]));
  assert.equal(r.code, 0, r.err);
  const results = lastJson(r.out);
  assert.equal(results.length, 5);
  assert.deepEqual([results[0], results[2], results[4]], alone.map((text) => ({text})));
  assert.deepEqual(results[1], {error: "a conversation must be a JSON object"});
  assert.ok(typeof results[3].error === "string" && results[3].error.length > 0, JSON.stringify(results[3]));
  const bad = run(["chat-template", "-m", m, "--batch"], JSON.stringify(inputs[0]));
  assert.notEqual(bad.code, 0);
  assert.match(bad.err, /--batch: stdin must be a JSON list of conversation objects/);
});
