// Deterministic, adversarial text corpus for tokenizer parity tests (Llama 3 BPE and
// Llama 2 SentencePiece vocabularies). No dependencies; never uses Math.random.
// Every string is valid Unicode (no lone surrogates) and the list is deduplicated.

export const CORPUS_VERSION = 1;

// ---------------------------------------------------------------- PRNG helpers
function mulberry32(seed) {
  let a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function makeRng(seed) {
  const f = mulberry32(seed);
  const r = {
    f,
    int: (lo, hi) => lo + Math.floor(f() * (hi - lo + 1)),
    pick: (a) => a[Math.floor(f() * a.length)],
    chance: (p) => f() < p,
  };
  r.picks = (a, n) => Array.from({ length: n }, () => r.pick(a));
  return r;
}
const cp = (n) => String.fromCodePoint(n);
const chars = (s) => Array.from(s);
// Collect n distinct strings from gen(r, i) (bounded number of attempts).
function fill(n, seed, gen) {
  const r = makeRng(seed);
  const out = new Set();
  for (let i = 0; out.size < n && i < n * 40; i++) out.add(gen(r, i));
  return [...out];
}
function fromRanges(r, ranges, n) {
  let s = "";
  for (let i = 0; i < n; i++) {
    const [a, b] = r.pick(ranges);
    s += cp(r.int(a, b));
  }
  return s;
}
function caseMode(r, s) {
  switch (r.int(0, 6)) {
    case 0: return s.toUpperCase();
    case 1: return s.toLowerCase();
    case 2: return s.replace(/\b[a-z]/g, (c) => c.toUpperCase());
    case 3: return chars(s).map((c) => (r.chance(0.5) ? c.toUpperCase() : c.toLowerCase())).join("");
    default: return s;
  }
}

// ---------------------------------------------------------------- English prose
const WORDS = `the be to of and a in that have I it for not on with he as you do at this but his by from
they we say her she or an will my one all would there their what so up out if about who get which go me when
make can like time no just him know take people into year your good some could them see other than then now
look only come its over think also back after use two how our work first well way even new want because any
these give day most us is was are were been has had did said made find here thing many where long little very
still own old world life hand part child eye woman man place week case point government company number group
problem fact house water money story night month lot right study book job word business issue side kind head
far black white small large big high great end close open run move live believe hold bring happen write
provide sit stand lose pay meet include continue set learn change lead understand watch follow stop create
speak read allow add spend grow offer remember love consider appear buy wait serve die send expect build stay
fall cut reach kill remain suggest raise pass sell require report decide pull city tree river mountain road
window door table chair computer phone music game food coffee tea bread garden morning evening today tomorrow
yesterday always never often sometimes quickly slowly happy sad bright dark quiet loud simple hard easy strange
beautiful important possible different early late young true false together alone again almost enough perhaps
maybe however therefore although while before during without within between under above around through across
against toward upon among London Paris Monday December Alice Bob McDonald iPhone JavaScript NASA OK`.split(/\s+/);

const SENTENCES = [
  "The quick brown fox jumps over the lazy dog.", "Pack my box with five dozen liquor jugs!",
  "It was the best of times, it was the worst of times...", "To be, or not to be: that is the question.",
  "All happy families are alike; each unhappy family is unhappy in its own way.", "Call me Ishmael.",
  '"Well," she said, "I don\'t think that\'s quite right."', 'He said\u2014and I quote\u2014"nothing at all."',
  "Wait... what? No way!!!", "(This sentence is in parentheses.) [So is this one.] {And this.}",
  "I'M NOT SHOUTING, YOU'RE SHOUTING!", "'Tis the season; 'twas the night before Christmas.",
  "Rock 'n' roll never dies, y'all.", "The '90s were weird, weren't they?",
  "She's got the O'Reilly book\u2014the one about Perl.",
  "\u201cSmart quotes\u201d and \u2018single smart quotes\u2019 aren\u2019t the same as \"dumb\" ones.",
  "Mr. and Mrs. Smith arrived at 5 p.m. (approx.) on Jan. 3rd.", "e.g., i.e., etc., vs. \u2014 abbreviations galore.",
  "Hello, world!", "hello world", "HELLO WORLD", "Hello World", "What's up? Not much; you?",
  "Ain't nobody got time for that.", "O'Neil's dog's bone's gone.",
  "The cat's toys\u2014all of 'em\u2014were under the couch\u2019s cushions.",
  "Pages 10\u201320 cover it \u2026 mostly.", "\"Quoted\" 'single' `backtick` \u00abguillemets\u00bb \u201elow\u201c",
  "I'd've done it if I could've.", "WE'VE GOT IT; THEY'LL SEE; SHE'D KNOW.",
];
const CONTR = ["don't", "DON'T", "Don't", "dOn'T", "I'M", "I'm", "i'm", "we'Ll", "we'll", "WE'LL", "they'VE",
  "they've", "THEY'VE", "it's", "IT'S", "It'S", "can't", "won't", "she'd", "He'D", "you're", "YOU'RE", "You'Re",
  "isn't", "wouldn't've", "y'all", "'s", "'S", "'t", "'re", "'ve", "'m", "'ll", "'d", "'RE", "'VE", "'M", "'LL",
  "'D", "\u2019s", "don\u2019t", "I\u2019m", "we\u2019ll", "they\u2019ve", "it\u2019s", "\u2019", "'", "''", "'''",
  "o'clock", "'tis", "ma'am", "rock'n'roll", "'hello'", "' s", "s'", "James'"];

function proseSentence(r) {
  const n = r.int(2, 16), w = [];
  for (let i = 0; i < n; i++) {
    let x = r.chance(0.14) ? r.pick(CONTR) : r.pick(WORDS);
    if (r.chance(0.09)) x += r.pick([",", ";", ":", " \u2014", " \u2013", "-", "\u2026", "...", " -"]);
    if (r.chance(0.03)) x = r.pick(["(", "[", '"', "\u201c", "'"]) + x + r.pick([")", "]", '"', "\u201d", "'"]);
    w.push(x);
  }
  let s = w.join(r.chance(0.9) ? " " : "  ");
  s = s.charAt(0).toUpperCase() + s.slice(1);
  const wrap = r.int(0, 11);
  if (wrap === 0) s = `"${s}"`;
  else if (wrap === 1) s = `\u201c${s}\u201d`;
  else if (wrap === 2) s = `(${s})`;
  else if (wrap === 3) s = `'${s}'`;
  else if (wrap === 4) s = `\u2018${s}\u2019`;
  return s + r.pick([".", ".", ".", "!", "?", "...", "\u2026", "?!", "!!!", "", " \u2014", ":", ";"]);
}
function genProse(r) {
  const k = r.int(0, 6);
  if (k === 0) return caseMode(r, r.pick(SENTENCES));
  if (k === 1) return r.pick(CONTR) + r.pick(["", " "]) + proseSentence(r);
  if (k === 2) return caseMode(r, proseSentence(r));
  const para = [];
  const m = r.int(1, k >= 5 ? 8 : 3);
  for (let j = 0; j < m; j++) para.push(r.chance(0.2) ? r.pick(SENTENCES) : proseSentence(r));
  const s = para.join(r.pick([" ", " ", "  ", "\n", "\n\n", "\r\n"]));
  return r.chance(0.25) ? caseMode(r, s) : s;
}

// ---------------------------------------------------------------- source code
const IDS = ["x", "y", "i", "j", "n", "buf", "data", "count", "result", "value", "node", "ctx", "items", "key",
  "val", "len", "ptr", "my_var", "myVar", "MAX_SIZE", "_tmp", "fooBar", "HTTPServer", "parse_json",
  "getUserById", "vec", "self_", "user_id", "totalCount", "XMLHttpRequest", "a1", "b2", "__x__", "Ωmega"];
const CODE_T = [
  (p) => `#include <stdio.h>\n#include <stdlib.h>\n\nint ${p.f}(int ${p.a}, int ${p.b}) {\n\tif (${p.a} <= ${p.b} && ${p.b} != 0) {\n\t\t${p.a} >>= 1; /* shift right */\n\t\t${p.b} <<= 2;\n\t}\n\treturn ${p.a} % ${p.b} + ${p.n};\n}\n`,
  (p) => `struct ${p.f} {\n\tstruct ${p.f} *next;\n\tchar name[${p.n}];\n};\n\nvoid walk(struct ${p.f} *${p.a}) {\n\twhile (${p.a} != NULL) {\n\t\tprintf("%s\\n", ${p.a}->name);\n\t\t${p.a} = ${p.a}->next;\n\t}\n}\n`,
  (p) => `template <typename T>\nstd::vector<T> ${p.f}(const std::vector<T>& ${p.a}) {\n\tauto it = ${p.a}.begin();\n\tfor (; it != ${p.a}.end(); ++it) { std::cout << *it << "\\n"; }\n\tauto cmp = [&](const T& l, const T& r) -> bool { return l < r; };\n\treturn std::move(${p.a});\n}\n`,
  (p) => `namespace ${p.f} {\nclass Widget : public Base {\npublic:\n\texplicit Widget(int ${p.a}) : ${p.b}_(${p.a}) {}\n\t~Widget() override = default;\n\tstd::unique_ptr<Widget> clone() const { return std::make_unique<Widget>(*this); }\nprivate:\n\tint ${p.b}_{${p.n}};\n};\n}  // namespace ${p.f}\n`,
  (p) => `def ${p.f}(${p.a}, ${p.b}=None):\n\t"""${p.doc}"""\n\tif ${p.a} is None or ${p.b} != ${p.n}:\n\t\treturn [x ** 2 for x in range(${p.n})]\n\t${p.a} //= ${p.b}  # integer division\n\treturn f"{${p.a}!r}: {${p.b}:.2f}"\n`,
  (p) => `import os, sys\n\n@dataclass\nclass ${p.F}:\n\t${p.a}: int = ${p.n}\n\t${p.b}: dict[str, list[int]] = field(default_factory=dict)\n\n\tdef __repr__(self) -> str:\n\t\treturn f"<${p.F} {self.${p.a}}>"\n\nif __name__ == "__main__":\n\tprint(${p.F}(), file=sys.stderr)\n`,
  (p) => `const ${p.f} = async (${p.a}, ${p.b}) => {\n\tif (${p.a} !== ${p.b} && ${p.a} >= 0) {\n\t\treturn \`\${${p.a}}px\`;\n\t}\n\tconst re = /^[a-z_]\\w*$/gi;\n\treturn ${p.a}?.length ?? ${p.b} ?? '${p.str}';\n};\nexport default ${p.f};\n`,
  (p) => `function ${p.f}(${p.a}) {\n\tlet ${p.b} = 0;\n\tfor (let i = 0; i < ${p.a}.length; i++) {\n\t\t${p.b} += ${p.a}[i] === null ? 0 : ${p.a}[i] >>> 0;\n\t}\n\treturn { ${p.b}, ok: ${p.b} >= ${p.n} };\n}\n`,
  (p) => `fn ${p.f}<'a>(${p.a}: &'a str, ${p.b}: usize) -> Option<&'a str> {\n\tmatch ${p.a}.len() {\n\t\t0 => None,\n\t\tn if n >= ${p.b} => Some(&${p.a}[..${p.b}]),\n\t\t_ => Some(${p.a}),\n\t}\n}\n\nimpl std::fmt::Display for ${p.F} {\n\tfn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { write!(f, "{}", self.0) }\n}\n`,
  (p) => `<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>${p.str}</title></head>\n<body>\n\t<div class="${p.a}" id="${p.b}">&lt;${p.n}&gt; &amp; &nbsp;</div>\n\t<!-- ${p.doc} -->\n\t<script>document.getElementById("${p.b}").innerHTML = '<b>' + ${p.n} + '</b>';</script>\n</body>\n</html>\n`,
  (p) => `#!/usr/bin/env bash\nset -euo pipefail\nfor f in ./${p.a}/*.txt; do\n\tif [[ -f "$f" && $(wc -l < "$f") -ge ${p.n} ]]; then\n\t\techo "\${f##*/}" >> ${p.b}.log 2>&1\n\tfi\ndone\ngrep -rn 'TODO' . | sort -u | head -n ${p.n} || true\n`,
  (p) => `SELECT ${p.a}, COUNT(*) AS ${p.b}\nFROM users u\nLEFT JOIN orders o ON o.user_id = u.id\nWHERE u.created_at >= '2024-01-01' AND o.total <> ${p.n}\nGROUP BY ${p.a}\nHAVING COUNT(*) > 1\nORDER BY ${p.b} DESC;\n`,
  (p) => `.${p.a} > .${p.b}:hover {\n\tcolor: #ff00${p.n % 10}${p.n % 10};\n\tmargin: 0 auto !important;\n\twidth: calc(100% - ${p.n}px);\n}\n@media (max-width: 600px) { .${p.a} { display: none; } }\n`,
  (p) => `package main\n\nimport "fmt"\n\nfunc ${p.f}(${p.a} []int) (int, error) {\n\t${p.b} := 0\n\tfor _, v := range ${p.a} {\n\t\t${p.b} += v\n\t}\n\tif ${p.b} == ${p.n} { return 0, fmt.Errorf("bad: %d", ${p.b}) }\n\treturn ${p.b}, nil\n}\n`,
];
const OPS = ["<=", ">=", ">>=", "<<=", "->", "::", "=>", "!==", "===", "!=", "==", "&&", "||", "??", "?.", "**",
  "//", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<", ">>", ">>>", "++", "--", "...", "|>", "<=>", ":=",
  "@", "&", "|", "^", "~", "!", "%", "?", ":", ";", "->*", ".*", "<-", "**=", "..=", "#"];
function jsonValue(r, d) {
  const k = r.int(0, d > 2 ? 4 : 6);
  if (k === 0) return r.int(-100000, 100000);
  if (k === 1) return r.int(-1e6, 1e6) / 1000;
  if (k === 2) return r.pick([true, false, null]);
  if (k === 3 || k === 4) return r.chance(0.2) ? r.pick(["\u00e9t\u00e9", "\u65e5\u672c", "a\"b\\c", "tab\there", "\ud83d\ude00", "line\nbreak"]) : r.pick(WORDS) + " " + r.pick(WORDS);
  if (k === 5) return Array.from({ length: r.int(0, 4) }, () => jsonValue(r, d + 1));
  const o = {};
  for (let i = r.int(0, 4); i > 0; i--) o[r.pick(IDS)] = jsonValue(r, d + 1);
  return o;
}
function genCode(r) {
  const k = r.int(0, 9);
  if (k === 0) return JSON.stringify(jsonValue(r, 0), null, r.pick([0, 1, 2, 4, "\t"]));
  if (k === 1) {
    let s = r.pick(IDS);
    for (let i = r.int(1, 5); i > 0; i--) s += r.pick([" ", ""]) + r.pick(OPS) + r.pick([" ", ""]) + (r.chance(0.3) ? String(r.int(0, 999)) : r.pick(IDS));
    return s + r.pick([";", "", ";\n", " // done", " # ok", "  ", "\t"]);
  }
  const p = { f: r.pick(IDS), a: r.pick(IDS), b: r.pick(IDS), n: r.int(0, 4096), str: r.pick(WORDS) + r.pick([" ", "-", "_"]) + r.pick(WORDS),
    doc: proseSentence(r) };
  p.F = p.f.charAt(0).toUpperCase() + p.f.slice(1);
  let src = r.pick(CODE_T)(p);
  const unit = r.pick(["\t", "  ", "    ", "  ", "    ", "\t ", "   "]);
  let lines = src.split("\n").map((l) => l.replace(/^\t+/, (m) => unit.repeat(m.length)));
  if (r.chance(0.35)) { const a = r.int(0, lines.length - 1); lines = lines.slice(a, a + r.int(1, 4)); }
  lines = lines.map((l) => (r.chance(0.15) ? l + r.pick([" ", "  ", "\t", " \t", "    "]) : l));
  return lines.join(r.chance(0.1) ? "\r\n" : "\n");
}

// ---------------------------------------------------------------- numbers
function digits(r, n) {
  let s = String(r.int(1, 9));
  for (let i = 1; i < n; i++) s += r.int(0, 9);
  return s;
}
const groupThousands = (s, sep) => s.replace(/\B(?=(\d{3})+(?!\d))/g, sep);
const pad = (n, w) => String(n).padStart(w, "0");
const MONTHS = ["Jan", "Feb", "March", "April", "May", "June", "July", "Aug.", "Sept", "October", "Nov", "DEC"];
const UNITS = ["km", "kg", "ms", "px", "GB", "MHz", "rd", "th", "st", "nd", "x", "em", "%", "k", "M", "B", "mph", "\u00b0C", "\u00b5s"];
const NUM_GENS = [
  (r) => digits(r, r.int(1, 20)),
  (r) => (r.chance(0.4) ? "-" : "") + (r.chance(0.3) ? "0" : digits(r, r.int(1, 8))) + "." + pad(r.int(0, 99999), r.int(1, 8)),
  (r) => "-" + digits(r, r.int(1, 15)),
  (r) => groupThousands(digits(r, r.int(4, 16)), r.pick([",", ",", ".", " ", "\u202f", "'", "_", "\u00a0"])) + r.pick(["", ".00", ",50", ".5"]),
  (r) => r.pick([`+1 (${digits(r, 3)}) ${digits(r, 3)}-${pad(r.int(0, 9999), 4)}`, `${digits(r, 3)}-${digits(r, 3)}-${pad(r.int(0, 9999), 4)}`,
    `+44 20 ${digits(r, 4)} ${digits(r, 4)}`, `(0${r.int(1, 9)}) ${digits(r, 4)}.${digits(r, 4)}`, `+33 6 ${digits(r, 2)} ${digits(r, 2)} ${digits(r, 2)} ${digits(r, 2)}`]),
  (r) => { const y = r.int(1900, 2099), m = r.int(1, 12), d = r.int(1, 28);
    return r.pick([`${y}-${pad(m, 2)}-${pad(d, 2)}`, `${d}/${m}/${y}`, `${pad(m, 2)}/${pad(d, 2)}/${y % 100}`, `${MONTHS[m - 1]} ${d}, ${y}`,
      `${y}-${pad(m, 2)}-${pad(d, 2)}T${pad(r.int(0, 23), 2)}:${pad(r.int(0, 59), 2)}:${pad(r.int(0, 59), 2)}Z`, `${pad(r.int(0, 23), 2)}:${pad(r.int(0, 59), 2)}`, `${d}.${m}.${y}`, `${y}\u5e74${m}\u6708${d}\u65e5`]); },
  (r) => { const h = (r.int(0, 0xffffff) * 256 + r.int(0, 255)).toString(16); return r.pick(["0x", "0X", "#", "", "\\x"]) + (r.chance(0.5) ? h.toUpperCase() : h); },
  (r) => `${r.chance(0.3) ? "-" : ""}${r.int(1, 9)}.${digits(r, r.int(1, 6))}${r.pick(["e", "E"])}${r.pick(["", "+", "-"])}${r.int(0, 308)}`,
  (r) => r.pick([r.pick(WORDS) + r.int(0, 9999) + r.pick(WORDS), r.int(1, 999) + r.pick(UNITS), r.int(1, 99) + " " + r.pick(UNITS),
    `v${r.int(0, 20)}.${r.int(0, 99)}.${r.int(0, 999)}`, `${r.int(1, 255)}.${r.int(0, 255)}.${r.int(0, 255)}.${r.int(0, 255)}`,
    `$${groupThousands(String(r.int(0, 9999999)), ",")}.${pad(r.int(0, 99), 2)}`, `${r.int(0, 100)}%`, `${r.int(1, 99)}/${r.int(1, 99)}`,
    `0b${r.int(0, 65535).toString(2)}`, `0o${r.int(0, 4095).toString(8)}`, `${r.int(2, 10)}^${r.int(2, 64)}`, "x" + r.int(0, 99) + "y" + r.int(0, 99)]),
  (r) => `There are ${r.int(0, 99999)} items, ${r.int(0, 100)}.${r.int(0, 9)}% of ${groupThousands(digits(r, r.int(4, 9)), ",")} users, costing \u20ac${r.int(1, 999)}.`,
  (r) => Array.from({ length: r.int(2, 12) }, () => r.int(0, 1000)).join(r.pick([", ", ",", " ", "\n", "\t", "-", ""])),
];
const NUM_FIXED = ["0", "00", "007", "0.0", "-0", ".5", "5.", "1e10", "0xDEADBEEF", "0xdeadbeef", "3.14159265358979323846",
  "6.02214076e23", "1.602e-19", "-1.5E+10", "1,000,000", "1.000.000,00", "3rd", "1st", "2nd", "22nd", "100km", "5kg",
  "abc123def", "a1b2c3", "x86_64", "12345678901234567890", "99999999999999999999", "18446744073709551615", "-9223372036854775808",
  "3.0", "1..10", "1-2-3", "+1", "+-1", "\u0663.\u0661\u0664", "\u06f1\u06f2\u06f3", "\u0967\u0968\u0969", "\uff11\uff12\uff13", "\u2460\u2461\u2462", "1,2,3,4,5"];

// ---------------------------------------------------------------- whitespace
const WS = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", " \n", "\n ", "\t\n", "\u00a0", "\u2003", "\u3000", "\u2009", "\u202f",
  "\u0085", "\u2028", "\u2029", "\u200b", "\v", "\f", "\u2002", "\u205f", "\u1680", " \r\n", "\n\n", "\t\t", "\u00a0\u00a0"];
function genWhitespace(r, i) {
  if (i < 20) return " ".repeat(i + 1);
  if (i < 40) return r.pick(WORDS) + " ".repeat(i - 19) + r.pick(WORDS);
  if (i < 50) return "\t".repeat(i - 39) + r.pick(WORDS);
  if (i < 60) return "\n".repeat(i - 49);
  if (i < 70) return "x" + "\r\n".repeat(i - 59) + "y";
  if (i < 70 + WS.length) return WS[i - 70];
  if (i < 70 + 2 * WS.length) return "a" + WS[i - 70 - WS.length] + "b";
  const parts = [];
  if (r.chance(0.5)) parts.push(r.pick(WS).repeat(r.int(1, 3)));
  for (let n = r.int(0, 5); n > 0; n--) {
    parts.push(r.chance(0.3) ? r.pick(CONTR) : r.pick(WORDS));
    parts.push(r.chance(0.6) ? " ".repeat(r.int(1, 20)) : r.pick(WS) + (r.chance(0.3) ? r.pick(WS) : ""));
  }
  if (r.chance(0.3)) parts.pop();
  if (parts.length === 0 || r.chance(0.15)) parts.push(r.picks(WS, r.int(1, 6)).join(""));
  return parts.join("");
}

// ---------------------------------------------------------------- CJK
const ZH = ["\u4f60\u597d\uff0c\u4e16\u754c\uff01", "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8\u3002", "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\u3002",
  "\u673a\u5668\u5b66\u4e60\u662f\u4eba\u5de5\u667a\u80fd\u7684\u4e00\u4e2a\u5206\u652f\u3002", "\u4e2d\u534e\u4eba\u6c11\u5171\u548c\u56fd\u6210\u7acb\u4e8e1949\u5e74\u3002",
  "\u8fd9\u4e2a\u4ef7\u683c\u662f\uffe51,280\u5143\uff08\u542b\u7a0e\uff09\u3002", "\u300a\u7ea2\u697c\u68a6\u300b\u662f\u4e2d\u56fd\u53e4\u5178\u5c0f\u8bf4\u3002", "\u4ed6\u8bf4\uff1a\u201c\u4f60\u597d\u5417\uff1f\u201d",
  "\u7e41\u9ad4\u4e2d\u6587\u8207\u7c21\u9ad4\u4e2d\u6587", "\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341\u767e\u5343\u4e07\u4ebf", "\u5b78\u800c\u6642\u7fd2\u4e4b\uff0c\u4e0d\u4ea6\u8aaa\u4e4e\uff1f",
  "\u8bf7\u7528Python\u5199\u4e00\u4e2a\u51fd\u6570\u3002", "\u6570\u636e\u5e93\u8fde\u63a5\u5931\u8d25\uff01\u9519\u8bef\u4ee3\u7801\uff1a500"];
const JA = ["\u3053\u3093\u306b\u3061\u306f\u4e16\u754c", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002", "\u300c\u6771\u4eac\u300d\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002",
  "\u79c1\u306f\u30b3\u30fc\u30d2\u30fc\u304c\u597d\u304d\u3067\u3059\u3001\u3067\u3082\u7d05\u8336\u3082\u98f2\u307f\u307e\u3059\u3002", "\u30ab\u30bf\u30ab\u30ca\uff1a\u30b3\u30f3\u30d4\u30e5\u30fc\u30bf\u30fc\u3001\u30a4\u30f3\u30bf\u30fc\u30cd\u30c3\u30c8",
  "\u3072\u3089\u304c\u306a\u3060\u3051\u306e\u3076\u3093\u3057\u3087\u3046", "\uff76\uff80\uff76\uff85\u534a\u89d2", "\u4ee4\u548c5\u5e744\u67081\u65e5", "\u3042\u308a\u304c\u3068\u3046\u3054\u3056\u3044\u307e\u3059\uff01",
  "\u301c\u3067\u3059\u306d\u2026", "\u30b4\u30b8\u30e9\u5bfe\u30ad\u30f3\u30b0\u30ae\u30c9\u30e9", "\u300e\u5409\u91ce\u5bb6\u300f\u3067\u725b\u4e3c\u3092\u98df\u3079\u305f\u3002", "\u30e1\u30fc\u30eb\u3092\u9001\u4fe1\u3057\u307e\u3057\u305f\u30fb\u78ba\u8a8d\u3057\u3066\u304f\u3060\u3055\u3044"];
const KO = ["\uc548\ub155\ud558\uc138\uc694, \uc138\uacc4!", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4.", "\uc800\ub294 \ud559\uc0dd\uc785\ub2c8\ub2e4.",
  "\ub300\ud55c\ubbfc\uad6d\uc758 \uc218\ub3c4\ub294 \uc11c\uc6b8\uc785\ub2c8\ub2e4.", "\uac10\uc0ac\ud569\ub2c8\ub2e4~", "\u314b\u314b\u314b\u314b \u314e\u314e",
  "2023\ub144 12\uc6d4 25\uc77c", "\ud504\ub85c\uadf8\ub798\ubc0d \uc5b8\uc5b4", "\uc624\ub298 \ubb50 \uba39\uc5c8\uc5b4? \ubc25 \uba39\uc5c8\uc5b4!"];
const CJK_RANGES = [[[0x4e00, 0x9fa5]], [[0x3041, 0x3096]], [[0x30a1, 0x30fa]], [[0xac00, 0xd7a3]], [[0x4e00, 0x9fa5], [0x3041, 0x3096], [0x3001, 0x3002]]];
function genCJK(r) {
  const k = r.int(0, 6);
  const src = r.pick([ZH, JA, KO]);
  if (k === 0) return r.pick(src);
  if (k === 1) { const c = chars(r.pick(src)); const a = r.int(0, c.length - 1); return c.slice(a, a + r.int(1, 8)).join(""); }
  if (k === 2) return r.pick(src) + r.pick(["", " ", "\n"]) + r.pick([ZH, JA, KO].flat());
  if (k === 3) return fromRanges(r, r.pick(CJK_RANGES), r.int(1, 20));
  const sep = r.pick(["", " ", ""]);
  const p = [r.pick(src), r.pick(WORDS), String(r.int(0, 99999)), r.pick(src), r.pick(["ABC", "OK", "GPU", "AI", "iPhone"])]
    .slice(0, r.int(2, 5));
  for (let i = p.length - 1; i > 0; i--) { const j = r.int(0, i); [p[i], p[j]] = [p[j], p[i]]; }
  return p.join(sep);
}

// ---------------------------------------------------------------- emoji
const EMO = ["\u{1f600}", "\u{1f602}", "\u{1f923}", "\u2764\ufe0f", "\u2764", "\u{1f44d}", "\u{1f525}", "\u{1f389}", "\u{1f680}",
  "\u{1f64f}", "\u{1f4af}", "\u2705", "\u2728", "\u{1f30d}", "\u{1f40d}", "\u{1f980}", "\u{1f355}", "\u2615", "\u26a1", "\u2b50",
  "\u{1f308}", "\u{1f4a9}", "\u{1f916}", "\u{1f440}", "\u{1f97a}", "\u{1f914}", "\u{1f62d}", "\u{1f60a}", "\u{1f643}", "\u{1f9e0}"];
const SKIN_BASE = ["\u{1f44d}", "\u{1f44b}", "\u270b", "\u{1f64c}", "\u{1f44f}", "\u{1f469}", "\u{1f468}", "\u{1f9d1}", "\u{1f476}", "\u{1f4aa}", "\u{1f64b}", "\u{1f3c3}", "\u270c\ufe0f"];
const ZWJ = ["\u{1f468}\u200d\u{1f469}\u200d\u{1f467}\u200d\u{1f466}", "\u{1f469}\u200d\u{1f469}\u200d\u{1f466}", "\u{1f468}\u200d\u{1f468}\u200d\u{1f467}\u200d\u{1f467}",
  "\u{1f469}\u200d\u{1f4bb}", "\u{1f468}\u200d\u{1f4bb}", "\u{1f9d1}\u200d\u{1f680}", "\u{1f469}\u200d\u2695\ufe0f", "\u{1f468}\u200d\u{1f373}",
  "\u{1f469}\u200d\u{1f52c}", "\u{1f9d1}\u200d\u{1f3a8}", "\u{1f468}\u200d\u{1f692}", "\u{1f3f3}\ufe0f\u200d\u{1f308}", "\u{1f3f4}\u200d\u2620\ufe0f",
  "\u{1f415}\u200d\u{1f9ba}", "\u{1f441}\ufe0f\u200d\u{1f5e8}\ufe0f", "\u{1f469}\u{1f3fd}\u200d\u{1f4bb}", "\u{1f468}\u{1f3ff}\u200d\u{1f680}", "\u{1f3c3}\u200d\u2640\ufe0f"];
const FLAGS = ["US", "GB", "JP", "DE", "FR", "CN", "KR", "IN", "BR", "CA", "AU", "IT", "ES", "MX", "UA", "NL", "SE", "NG", "ZA", "EG", "IL", "SA", "AR", "TR", "VN", "TH", "EU", "UN"]
  .map((c) => chars(c).map((ch) => cp(0x1f1e6 + ch.charCodeAt(0) - 65)).join(""));
FLAGS.push("\u{1f3f4}\u{e0067}\u{e0062}\u{e0065}\u{e006e}\u{e0067}\u{e007f}");
const KEYCAPS = chars("0123456789#*").flatMap((c) => [c + "\ufe0f\u20e3", c + "\u20e3"]);
const VS = ["\u263a\ufe0f", "\u263a", "\u2714\ufe0f", "\u2714", "\u26a0\ufe0f", "\u2665\ufe0f", "\u2122\ufe0f", "\u00a9\ufe0f", "\u00ae\ufe0f", "\u2194\ufe0f", "\u{1f170}\ufe0f", "\u2600\ufe0f", "\u2764\ufe0e", "\ufe0f", "a\ufe0f"];
function anyEmoji(r) {
  const k = r.int(0, 5);
  if (k === 0) return r.pick(SKIN_BASE) + cp(r.int(0x1f3fb, 0x1f3ff));
  if (k === 1) return r.pick(ZWJ);
  if (k === 2) return r.pick(FLAGS);
  if (k === 3) return r.pick(KEYCAPS);
  if (k === 4) return r.pick(VS);
  return r.chance(0.5) ? r.pick(EMO) : cp(r.int(0x1f300, 0x1f64f));
}
function genEmoji(r, i) {
  const all = [...EMO, ...ZWJ, ...FLAGS, ...KEYCAPS, ...VS];
  if (i < all.length) return all[i];
  const k = r.int(0, 3);
  if (k === 0) return Array.from({ length: r.int(1, 6) }, () => anyEmoji(r)).join(r.pick(["", "", " "]));
  if (k === 1) return r.pick(WORDS) + anyEmoji(r) + r.pick(["", r.pick(WORDS)]);
  if (k === 2) return anyEmoji(r) + r.pick(WORDS) + r.pick(["", "!", " ", "\n"]) + anyEmoji(r);
  return proseSentence(r) + r.pick([" ", ""]) + anyEmoji(r).repeat(r.int(1, 3));
}

// ---------------------------------------------------------------- RTL and Indic
const RTL_IND = ["\u0628\u0650\u0633\u0652\u0645\u0650 \u0627\u0644\u0644\u0651\u064e\u0647\u0650 \u0627\u0644\u0631\u0651\u064e\u062d\u0652\u0645\u064e\u0670\u0646\u0650 \u0627\u0644\u0631\u0651\u064e\u062d\u0650\u064a\u0645\u0650",
  "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627 \u0628\u0650\u0643\u064f\u0645\u0652", "\u0627\u0644\u0633\u0644\u0627\u0645 \u0639\u0644\u064a\u0643\u0645 \u0648\u0631\u062d\u0645\u0629 \u0627\u0644\u0644\u0647",
  "\u0627\u0644\u0644\u063a\u0629 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u062c\u0645\u064a\u0644\u0629 \u062c\u062f\u0627\u064b.", "\u0627\u0644\u0639\u062f\u062f \u0661\u0662\u0663 \u0648 456\u061f",
  "\u05d1\u05b0\u05bc\u05e8\u05b5\u05d0\u05e9\u05b4\u05c1\u05d9\u05ea \u05d1\u05b8\u05bc\u05e8\u05b8\u05d0 \u05d0\u05b1\u05dc\u05b9\u05d4\u05b4\u05d9\u05dd", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "\u05d0\u05e0\u05d9 \u05d0\u05d5\u05d4\u05d1 \u05e7\u05e4\u05d4 (\u05d1\u05dc\u05d9 \u05e1\u05d5\u05db\u05e8).",
  "\u0633\u0644\u0627\u0645\u060c \u062d\u0627\u0644 \u0634\u0645\u0627 \u0686\u0637\u0648\u0631 \u0627\u0633\u062a\u061f", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \u06a9\u062a\u0627\u0628 \u0628\u062e\u0648\u0627\u0646\u0645 \u06f1\u06f2\u06f3",
  "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e", "\u092e\u0948\u0902 \u0939\u093f\u0902\u0926\u0940 \u092c\u094b\u0932\u0924\u093e \u0939\u0942\u0901\u0964", "\u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f \u0936\u094d\u0930\u0940 \u0926\u094d\u0935\u093e\u0930 \u0967\u0968\u0969",
  "\u0986\u09ae\u09bf \u09ac\u09be\u0982\u09b2\u09be\u09af\u09bc \u0997\u09be\u09a8 \u0997\u09be\u0987", "\u09b8\u09cd\u09ac\u09be\u0997\u09a4\u09ae\u09cd", "\u0bb5\u0ba3\u0b95\u0bcd\u0b95\u0bae\u0bcd \u0b89\u0bb2\u0b95\u0bae\u0bcd", "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd \u0bae\u0bca\u0bb4\u0bbf",
  "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e22\u0e34\u0e19\u0e14\u0e35\u0e17\u0e35\u0e48\u0e44\u0e14\u0e49\u0e23\u0e39\u0e49\u0e08\u0e31\u0e01", "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22\u0e07\u0e48\u0e32\u0e22\u0e21\u0e32\u0e01\u0e46 \u0e51\u0e52\u0e53"];
const SCRIPTS = [
  { L: [[0x621, 0x63a], [0x641, 0x64a]], M: [[0x64b, 0x652]] },
  { L: [[0x5d0, 0x5ea]], M: [[0x5b0, 0x5b9], [0x5bc, 0x5bc]] },
  { L: [[0x628, 0x628], [0x67e, 0x67e], [0x686, 0x686], [0x698, 0x698], [0x6a9, 0x6a9], [0x6af, 0x6af], [0x6cc, 0x6cc], [0x633, 0x648]], M: [[0x200c, 0x200c]] },
  { L: [[0x905, 0x939]], M: [[0x93e, 0x94d], [0x901, 0x903]] },
  { L: chars("\u0985\u0986\u0987\u0989\u098f\u0993\u0995\u0996\u0997\u0998\u099a\u099b\u099c\u099f\u09a1\u09a4\u09a6\u09a7\u09a8\u09aa\u09ac\u09ad\u09ae\u09af\u09b0\u09b2\u09b6\u09b8\u09b9").map((c) => [c.codePointAt(0), c.codePointAt(0)]),
    M: chars("\u09be\u09bf\u09c0\u09c1\u09c2\u09c7\u09c8\u09cb\u09cc\u09cd\u0982").map((c) => [c.codePointAt(0), c.codePointAt(0)]) },
  { L: chars("\u0b85\u0b86\u0b87\u0b88\u0b89\u0b8a\u0b8e\u0b8f\u0b90\u0b92\u0b93\u0b95\u0b99\u0b9a\u0b9e\u0b9f\u0ba3\u0ba4\u0ba8\u0baa\u0bae\u0baf\u0bb0\u0bb2\u0bb5\u0bb4\u0bb3\u0bb1\u0ba9").map((c) => [c.codePointAt(0), c.codePointAt(0)]),
    M: chars("\u0bbe\u0bbf\u0bc0\u0bc1\u0bc2\u0bc6\u0bc7\u0bc8\u0bca\u0bcb\u0bcc\u0bcd").map((c) => [c.codePointAt(0), c.codePointAt(0)]) },
  { L: [[0xe01, 0xe2e], [0xe40, 0xe44]], M: [[0xe31, 0xe31], [0xe34, 0xe3a], [0xe47, 0xe4e]] },
];
function scriptWord(r, sc) {
  let s = "";
  for (let n = r.int(1, 8); n > 0; n--) { s += fromRanges(r, sc.L, 1); if (r.chance(0.45)) s += fromRanges(r, sc.M, r.chance(0.85) ? 1 : 2); }
  return s;
}
function genRTL(r) {
  const k = r.int(0, 5);
  if (k === 0) return r.pick(RTL_IND);
  if (k === 1) { const c = chars(r.pick(RTL_IND)); const a = r.int(0, c.length - 1); return c.slice(a, a + r.int(1, 10)).join(""); }
  if (k === 2 || k === 3) { const sc = r.pick(SCRIPTS); return Array.from({ length: r.int(1, 6) }, () => scriptWord(r, sc)).join(r.pick([" ", " ", "\u060c ", ". ", "\n"])); }
  if (k === 4) return r.pick(RTL_IND) + r.pick([" ", "", "\n"]) + r.pick([proseSentence(r), String(r.int(0, 99999)), r.pick(RTL_IND), "(OK)", "\u{1f600}"]);
  return r.pick(WORDS) + r.pick([" ", ""]) + scriptWord(r, r.pick(SCRIPTS)) + r.pick([" ", ""]) + r.pick(WORDS) + r.pick(["", ".", "!", " 42"]);
}

// ---------------------------------------------------------------- combining marks
const ACCENTED = ["caf\u00e9", "na\u00efve", "r\u00e9sum\u00e9", "\u00c5ngstr\u00f6m", "pi\u00f1ata", "fa\u00e7ade", "cr\u00e8me br\u00fbl\u00e9e", "\u00fcber", "Sch\u00f6nheit",
  "Ela\u00efs \u00e0 l'\u00e9cole", "co\u00f6perate", "\u0141\u00f3d\u017a", "\u017bu\u0142\u00f3w", "\u0160koda", "\u00d1o\u00f1o", "D\u00e9j\u00e0 vu", "ma\u00f1ana", "\u00c9COLE", "\u01c4\u01c5\u01c6"];
const VIET = ["Ti\u1ebfng Vi\u1ec7t r\u1ea5t \u0111\u1eb9p", "Xin ch\u00e0o th\u1ebf gi\u1edbi", "\u0110\u00e2y l\u00e0 m\u1ed9t c\u00e2u ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u.",
  "Ng\u01b0\u1eddi Vi\u1ec7t Nam y\u00eau n\u01b0\u1edbc", "Ph\u1edf b\u00f2 H\u00e0 N\u1ed9i ngon tuy\u1ec7t", "T\u00f4i \u0111ang h\u1ecdc l\u1eadp tr\u00ecnh", "Tr\u01b0\u1eddng \u0110\u1ea1i h\u1ecdc B\u00e1ch khoa"];
const BASES = chars("aeiouAEIOUnscyzxqZ0123456789 .,!?-'\"()\u00e9\u0430\u03b1\u05d0");
function marks(r, n) { return Array.from({ length: n }, () => cp(r.int(0x300, 0x36f))).join(""); }
function genCombining(r) {
  const k = r.int(0, 7);
  const src = r.pick([ACCENTED, VIET, ["\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u304c\u304e\u3050\u30d1\u30d4\u30d7", "\u1e9b\u0323 \u1e0b\u0323 \u01d5"]]);
  if (k === 0) return r.pick(src).normalize("NFD");
  if (k === 1) return r.pick(src).normalize(r.pick(["NFC", "NFKD", "NFKC"]));
  if (k === 2) { const a = r.pick(src), b = r.pick(src); return a.normalize("NFC") + r.pick([" ", ""]) + b.normalize("NFD"); }
  if (k === 3) return r.pick(BASES) + marks(r, r.int(1, 10));
  if (k === 4) return chars(r.pick(WORDS)).map((c) => c + (r.chance(0.5) ? marks(r, r.int(1, 10)) : "")).join("");
  if (k === 5) return r.pick(["", " ", "\n", "x"]) + marks(r, r.int(1, 4)) + r.pick(["", r.pick(WORDS), "1"]);
  if (k === 6) return Array.from({ length: r.int(1, 4) }, () => r.pick(BASES) + marks(r, r.int(0, 3))).join("") + r.pick(["", " ", "."]);
  return r.pick(VIET).split(" ").map((w) => (r.chance(0.5) ? w.normalize("NFD") : w)).join(" ");
}

// ---------------------------------------------------------------- other scripts and symbols
const OTHER = ["\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!", "\u0421\u044a\u0435\u0448\u044c \u0436\u0435 \u0435\u0449\u0451 \u044d\u0442\u0438\u0445 \u043c\u044f\u0433\u043a\u0438\u0445 \u0444\u0440\u0430\u043d\u0446\u0443\u0437\u0441\u043a\u0438\u0445 \u0431\u0443\u043b\u043e\u043a, \u0434\u0430 \u0432\u044b\u043f\u0435\u0439 \u0447\u0430\u044e.",
  "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5", "\u039e\u03b5\u03c3\u03ba\u03b5\u03c0\u03ac\u03b6\u03c9 \u03c4\u03b7\u03bd \u03c8\u03c5\u03c7\u03bf\u03c6\u03b8\u03cc\u03c1\u03b1 \u03b2\u03b4\u03b5\u03bb\u03c5\u03b3\u03bc\u03af\u03b1",
  "\u0532\u0561\u0580\u0565\u0582 \u0561\u0577\u056d\u0561\u0580\u0570", "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0 \u10db\u10e1\u10dd\u10e4\u10da\u10d8\u10dd",
  "\u2211_{i=1}^{n} i\u00b2 = n(n+1)/2", "\u222b\u2080^\u221e e^{-x\u00b2} dx = \u221a\u03c0/2", "a \u2260 b \u2264 c \u2265 d \u2248 e \u2208 \u211d", "\u2200x\u2203y: x \u2227 y \u2192 \u00acz",
  "\u20ac100 \u00a350 \u00a51000 \u20b9250 \u20bf0.5 $9.99 \u20a95000 \u20bd", "\u250c\u2500\u2500\u252c\u2500\u2500\u2510\n\u2502ab\u2502cd\u2502\n\u2514\u2500\u2500\u2534\u2500\u2500\u2518",
  "\u2190 \u2191 \u2192 \u2193 \u2194 \u21d2 \u21d0 \u27f6", "\u2115 \u2124 \u211a \u211d \u2102 \u2135 \u210f \u2122 \u2103 \u2116", "\u212a vs K", "\u212b vs \u00c5 vs A\u030a",
  "\uff21\uff22\uff23\uff11\uff12\uff13\uff58\uff59\uff5a\uff01\uff1f", "x\u00b2 + y\u00b3 = z\u2074 \u00bd \u00bc \u00be \u2153 \u2154", "\u2160 \u2161 \u2162 \u2163 \u216b \u217b", "\ufb01 \ufb02 \ufb00 \u0133",
  "\u00a7 \u00b6 \u2020 \u2021 \u2022 \u00b0 \u2030 \u2032 \u2033", "\u2591\u2592\u2593\u2588\u2580\u2584", "\u2660\u2663\u2665\u2666 \u265a\u265b", "H\u2082O + CO\u2082 \u2192 H\u2082CO\u2083"];
const SYM_RANGES = [[[0x410, 0x44f]], [[0x391, 0x3a1], [0x3a3, 0x3a9], [0x3b1, 0x3c9]], [[0x531, 0x556], [0x561, 0x586]], [[0x10d0, 0x10fa]],
  [[0x2200, 0x22ff]], [[0x20a0, 0x20bf]], [[0x2500, 0x257f]], [[0x2190, 0x21ff]], [[0x2100, 0x214f]], [[0xff01, 0xff5e]],
  [[0x2070, 0x2070], [0x2074, 0x2079], [0xb2, 0xb3], [0xb9, 0xb9], [0xbc, 0xbe], [0x2150, 0x215e], [0x2080, 0x2089]], [[0x2160, 0x2188]]];
function genOther(r) {
  const k = r.int(0, 5);
  if (k === 0) return r.pick(OTHER);
  if (k === 1) return fromRanges(r, r.pick(SYM_RANGES), r.int(1, 12));
  if (k === 2) { const rg = r.pick(SYM_RANGES.slice(0, 4)); return Array.from({ length: r.int(1, 5) }, () => fromRanges(r, rg, r.int(1, 9))).join(" "); }
  if (k === 3) return r.pick(WORDS) + r.pick([" ", ""]) + fromRanges(r, r.pick(SYM_RANGES), r.int(1, 4)) + r.pick([" ", ""]) + r.int(0, 999);
  if (k === 4) return caseMode(r, r.pick(OTHER.slice(0, 6)));
  return r.pick(OTHER) + r.pick([" ", "\n", ""]) + r.pick(OTHER);
}

// ---------------------------------------------------------------- special-token text
const L3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|python_tag|>",
  "<|finetune_right_pad_id|>", "<|reserved_special_token_0|>", "<|reserved_special_token_5|>", "<|reserved_special_token_42|>", "<|reserved_special_token_247|>"];
const L2 = ["<s>", "</s>", "<unk>", "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>"];
const BROKEN = ["<|eot_id", "|eot_id|>", "<| eot_id |>", "<|EOT_ID|>", "<|eot_id|", "<eot_id>", "<||eot_id||>", "<|eot id|>", "<|begin_of_text", "begin_of_text|>",
  "<|start_header_id|user", "<|", "|>", "<|>", "<||>", "< |begin_of_text| >", "<|reserved_special_token_|>", "<|reserved_special_token_99999|>", "<s >", "< /s>", "<S>", "[inst]", "<|eot_id|\u200b>"];
const ROLES = ["system", "user", "assistant", "ipython", "tool", "User", " user"];
const shortText = (r) => r.pick([() => proseSentence(r), () => r.pick(ZH), () => r.pick(WORDS), () => String(r.int(0, 9999)), () => r.pick(EMO), () => ""])();
function chat(r) {
  let s = r.chance(0.8) ? "<|begin_of_text|>" : "";
  if (r.chance(0.5)) s += `<|start_header_id|>system<|end_header_id|>\n\n${proseSentence(r)}<|eot_id|>`;
  for (let t = r.int(1, 3); t > 0; t--) {
    s += `<|start_header_id|>user<|end_header_id|>\n\n${genProse(r)}<|eot_id|>`;
    if (r.chance(0.2)) s += `<|start_header_id|>assistant<|end_header_id|>\n\n<|python_tag|>${genCode(r)}<|eom_id|><|start_header_id|>ipython<|end_header_id|>\n\n${JSON.stringify(jsonValue(r, 1))}<|eot_id|>`;
    s += `<|start_header_id|>assistant<|end_header_id|>\n\n${genProse(r)}<|eot_id|>`;
  }
  return s + (r.chance(0.5) ? "<|start_header_id|>assistant<|end_header_id|>\n\n" : "");
}
function genSpecial(r, i) {
  if (i < L3.length + L2.length) return [...L3, ...L2][i];
  const k = r.int(0, 8);
  if (k === 0) return shortText(r) + r.pick(["", " ", "\n", "  "]) + r.pick(L3) + r.pick(["", " ", "\n", "\n\n"]) + shortText(r);
  if (k === 1) return shortText(r) + r.pick(["", " "]) + r.pick(BROKEN) + r.pick(["", " "]) + shortText(r);
  if (k === 2) return r.picks([...L3, ...L3, ...L2], r.int(2, 4)).join(r.pick(["", "", " ", "\n"]));
  if (k === 3) return r.pick([" ", "\n", "  ", "\t", " \n "]) + r.pick(L3) + r.pick([" ", "\n", "  ", "", "\n\n"]);
  if (k === 4) return `<|start_header_id|>${r.pick(ROLES)}<|end_header_id|>\n\n${shortText(r)}${r.pick(["<|eot_id|>", "", "<|eom_id|>"])}`;
  if (k === 5) return chat(r);
  if (k === 6) return `<s>[INST] ${r.chance(0.5) ? `<<SYS>>\n${proseSentence(r)}\n<</SYS>>\n\n` : ""}${proseSentence(r)} [/INST] ${proseSentence(r)} </s>${r.pick(["", "<s>[INST] again [/INST]"])}`;
  if (k === 7) return r.pick(BROKEN) + r.pick(L3) + r.pick(BROKEN);
  return shortText(r) + r.pick(L2) + shortText(r) + r.pick(["", r.pick(L2)]);
}

// ---------------------------------------------------------------- random mixtures
const BLOCKS = [[[0x20, 0x7e]], [[0xa0, 0xff]], [[0x100, 0x17f]], [[0x386, 0x386], [0x388, 0x38a], [0x38c, 0x38c], [0x38e, 0x3a1], [0x3a3, 0x3ce]],
  [[0x400, 0x4ff]], [[0x5b0, 0x5b9], [0x5d0, 0x5ea]], [[0x621, 0x652], [0x660, 0x669]], [[0x905, 0x939], [0x93e, 0x94d], [0x966, 0x96f]],
  [[0xe01, 0xe3a], [0xe3f, 0xe5b]], [[0xac00, 0xd7a3]], [[0x4e00, 0x9fa5]], [[0x3041, 0x3096]], [[0x30a1, 0x30fa]],
  [[0x2010, 0x2027], [0x2030, 0x205e]], [[0x2200, 0x22ff]], [[0x1f300, 0x1f64f]]];
function randomCodepoints(r) {
  const rs = r.picks(BLOCKS, r.int(1, 3)).flat();
  let s = "";
  for (let n = r.int(1, 80); n > 0; n--) s += r.chance(0.12) ? " " : fromRanges(r, rs, 1);
  return s;
}

// ---------------------------------------------------------------- edge cases
function edgeCases(r, pools) {
  const out = ["", " "];
  for (let c = 0x20; c <= 0x7e; c++) out.push(cp(c));
  const ctrls = [];
  for (let c = 1; c <= 0x1f; c++) ctrls.push(cp(c));
  ctrls.push("\x7f");
  for (const c of ctrls) out.push(c);
  for (const c of ctrls) out.push(r.pick(WORDS) + c + r.pick(WORDS));
  for (const c of ctrls.slice(0, 12)) out.push(c + c + " x" + c);
  const letters = "abcdefghijklmnopqrstuvwxyz";
  for (let i = 0; i < 8; i++) out.push(Array.from({ length: r.int(200, 400) }, () => r.pick(chars(i % 2 ? letters.toUpperCase() + letters : letters))).join(""));
  out.push("a".repeat(100), "!".repeat(100), " ".repeat(100), "\n".repeat(100), "\t".repeat(60), "ab".repeat(150), "\u{1f600}".repeat(50),
    "\u7684".repeat(100), "1".repeat(100), "-".repeat(100), "=".repeat(80), "\u00e9".repeat(100), "e\u0301".repeat(60), ".".repeat(257), "_".repeat(128),
    "a ".repeat(100), " a".repeat(100), "\r\n".repeat(50), "'s".repeat(40), "<|".repeat(40), "\u3000".repeat(50), "0".repeat(200), "x".repeat(1000),
    "Supercalifragilisticexpialidocious", "pneumonoultramicroscopicsilicovolcanoconiosis", "Donaudampfschifffahrtselektrizit\u00e4tenhauptbetriebswerkbauunterbeamtengesellschaft",
    "https://example.com/a/very/long/path?query=" + "x%20y&".repeat(30) + "#frag", "user.name+tag@example.co.uk");
  const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  out.push(Array.from({ length: 300 }, () => r.pick(chars(b64))).join("") + "==");
  out.push(Array.from({ length: 64 }, () => r.pick(chars("0123456789abcdef"))).join(""));
  const all = pools.flat();
  for (let i = 0; i < 6; i++) {
    const target = r.int(5000, 20000);
    let s = "";
    while (s.length < target) {
      const frag = r.chance(0.15) ? randomCodepoints(r) : r.pick(all);
      if (s.length + frag.length > 20000) continue;
      s += frag + r.pick(["", " ", "\n", "\n\n", "\t"]);
    }
    out.push(s);
  }
  return out;
}

// ---------------------------------------------------------------- assemble
export function makeCorpus() {
  const N = 225;
  const prose = fill(N, 101, genProse);
  const code = fill(N, 202, genCode);
  const numbers = [...NUM_FIXED, ...fill(N - NUM_FIXED.length + 10, 303, (r) => r.pick(NUM_GENS)(r))];
  const whitespace = fill(N, 404, genWhitespace);
  const cjk = fill(N, 505, genCJK);
  const emoji = fill(N, 606, genEmoji);
  const rtl = fill(N, 707, genRTL);
  const combining = fill(N, 808, genCombining);
  const other = fill(N, 909, genOther);
  const special = fill(N, 1010, genSpecial);
  const pools = [prose, code, numbers, whitespace, cjk, emoji, rtl, combining, other, special];
  const mixed = fill(150, 1111, (r) => {
    const parts = [];
    for (let n = r.int(2, 6); n > 0; n--) parts.push(r.pick(r.pick(pools)));
    return parts.join(r.pick(["", " ", "\n", ""]));
  });
  const randomCps = fill(130, 1212, randomCodepoints);
  const edges = edgeCases(makeRng(1313), pools);
  const seen = new Set();
  const out = [];
  for (const s of [...edges, ...pools.flat(), ...mixed, ...randomCps]) {
    if (seen.has(s)) continue;
    if (/[\ud800-\udfff]/u.test(s)) throw new Error("corpus: lone surrogate generated");
    seen.add(s);
    out.push(s);
  }
  return out;
}
