import {getReferenceLlama} from "../tests/parity/lib.mjs";
const llama = await getReferenceLlama();
const model = await llama.loadModel({modelPath: process.argv[2]});
const ids = Array.from({length: 128}, (_, i) => (i * 7919) % 128000);
for (const threads of [1, 2]) {
  const ctx = await model.createContext({contextSize: 512, batchSize: 512, threads});
  const seq = ctx.getSequence();
  let t0 = performance.now();
  const it = seq.evaluate(ids, {temperature: 0});
  let r = await it.next();
  const prompt = (performance.now() - t0) / 1000;
  t0 = performance.now();
  let n = 0;
  while (n < 63) { r = await it.next(); n++; }
  const decode = (performance.now() - t0) / 1000;
  await it.return();
  console.log("llama.cpp", threads, (128 / prompt).toFixed(1), (63 / decode).toFixed(1));
  await ctx.dispose();
}
