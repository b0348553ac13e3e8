// Deterministic English-like text for tokenizer benchmarks: sentences of common words with
// realistic punctuation, capitals, numbers, quotes and paragraphs.
import {mulberry32} from "../tests/parity/lib.mjs";

const WORDS = (
  "the of and to a in is it you that he was for on are with as I his they be at one have this " +
  "from or had by hot word but what some we can out other were all there when up use your how " +
  "said an each she which do their time if will way about many then them write would like so " +
  "these her long make thing see him two has look more day could go come did number sound no " +
  "most people my over know water than call first who may down side been now find any new work " +
  "part take get place made live where after back little only round man year came show every " +
  "good me give our under name very through just form sentence great think say help low line " +
  "differ turn cause much mean before move right boy old too same tell does set three want air " +
  "well also play small end put home read hand port large spell add even land here must big " +
  "high such follow act why ask men change went light kind off need house picture try us again " +
  "animal point mother world near build self earth father head stand own page should country " +
  "found answer school grow study still learn plant cover food sun four between state keep eye " +
  "never last let thought city tree cross farm hard start might story saw far sea draw left " +
  "late run don't while press close night real life few north open seem together next white " +
  "children begin got walk example ease paper group always music those both mark often letter " +
  "until mile river car feet care second book carry took science eat room friend began idea " +
  "fish mountain stop once base hear horse cut sure watch color face wood main enough plain " +
  "girl usual young ready above ever red list though feel talk bird soon body dog family " +
  "direct pose leave song measure door product black short numeral class wind question happen " +
  "complete ship area half rock order fire south problem piece told knew pass since top whole " +
  "king space heard best hour better true during hundred five remember step early hold west " +
  "ground interest reach fast verb sing listen six table travel less morning ten simple several"
).split(" ");

export function englishText(bytes, seed = 42) {
  const rand = mulberry32(seed);
  const pick = (a) => a[Math.floor(rand() * a.length)];
  const parts = [];
  let size = 0;
  while (size < bytes) {
    let paragraph = "";
    const sentences = 2 + Math.floor(rand() * 6);
    for (let s = 0; s < sentences; s++) {
      const n = 4 + Math.floor(rand() * 18);
      const words = [];
      for (let w = 0; w < n; w++) {
        let word = pick(WORDS);
        const r = rand();
        if (r < 0.03) word = String(Math.floor(rand() * 10000));
        else if (r < 0.05) word = `"${word}"`;
        else if (r < 0.09 && w < n - 1) word += ",";
        words.push(word);
      }
      words[0] = words[0][0].toUpperCase() + words[0].slice(1);
      paragraph += (s ? " " : "") + words.join(" ") + pick([".", ".", ".", "?", "!", "..."]);
    }
    parts.push(paragraph);
    size += paragraph.length + 2;
  }
  return parts.join("\n\n").slice(0, bytes);
}
