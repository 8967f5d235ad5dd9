// The translator's inference, off the page's thread: ONNX Runtime Web (WebAssembly) runs the
// encoder and decoder sessions here, so that compiling the runtime, starting a session or a
// decoder step never freezes the page. translator.js sends the model files' bytes and each run's
// inputs, and gets the outputs back; the runtime's WebAssembly is fetched here, from Cache Storage
// when an earlier visit kept it.

import * as ort from "./ort/ort.wasm.min.mjs";
import { cachedBytes } from "./files.js";
import { greedy } from "./greedy.js";

const here = new URL(".", import.meta.url);
ort.env.wasm.wasmPaths = new URL("ort/", here).href;
ort.env.wasm.numThreads = 1; // a static site cannot turn on the cross-origin isolation threads need

// The runtime's WebAssembly (3.7 MB as sent), fetched when the worker starts, and ONNX Runtime
// started on it as soon as it is in (a session of IDENTITY, a one-node model, makes it compile and
// initialise), so that this is done while the page fetches the model files (translator.js asks for
// them once the WebAssembly is in). A failed fetch or start is tried again by the next session.
const IDENTITY = new Uint8Array([ // ONNX: y = Identity(x), x and y float[1], opset 13
  8, 7, 18, 0, 58, 55, 10, 16, 10, 1, 120, 18, 1, 121, 34, 8, 73, 100, 101, 110, 116, 105, 116, 121, 18, 1, 103,
  90, 15, 10, 1, 120, 18, 10, 10, 8, 8, 1, 18, 4, 10, 2, 8, 1, 98, 15, 10, 1, 121, 18, 10, 10, 8, 8, 1, 18, 4,
  10, 2, 8, 1, 66, 4, 10, 0, 16, 13,
]);
let runtime = null; // { fetched, started }: the WebAssembly's bytes handed to ONNX Runtime; ONNX Runtime started
function startRuntime() {
  if (!runtime) {
    const url = new URL("ort/ort-wasm-simd-threaded.wasm", here).href;
    const fetched = cachedBytes(url, ort.env.versions.web).then((bytes) => {
      ort.env.wasm.wasmBinary = bytes;
    });
    const started = fetched
      .then(() => ort.InferenceSession.create(IDENTITY, { executionProviders: ["wasm"] }))
      .then((session) => session.release());
    runtime = { fetched, started };
    started.catch(() => (runtime = null));
  }
  return runtime;
}
startRuntime();
// ONNX Runtime's JavaScript for its WebAssembly, which it imports when it starts: fetched now, beside the
// WebAssembly, instead of after it (the same address, so ONNX Runtime's import finds it loaded).
import("./ort/ort-wasm-simd-threaded.mjs").catch(() => {});

const sessions = new Map(); // a name ("de_en/encoder.onnx") -> its session
const tensor = ({ type, data, dims }) => new ort.Tensor(type, data, dims);
const plain = (t) => ({ type: t.type, data: t.data, dims: t.dims }); // what a message can carry
const ids = (values) => new ort.Tensor("int64", BigInt64Array.from(values, BigInt), [1, values.length]);

const ops = {
  async runtime() { // resolves once the WebAssembly is in: the page then fetches the model files
    await startRuntime().fetched;
  },
  // A session of a model file, both given as Blobs (files.js): their bytes are read here, handed to
  // ONNX Runtime, which copies them into its own memory, and then left for the garbage collector.
  async create({ name, model, options }) {
    await startRuntime().started;
    const bytes = async (blob) => new Uint8Array(await blob.arrayBuffer());
    const externalData = await Promise.all(
      (options.externalData ?? []).map(async ({ path, data }) => ({ path, data: await bytes(data) })),
    );
    sessions.set(name, await ort.InferenceSession.create(await bytes(model), { ...options, externalData }));
    return name;
  },
  async run({ name, feeds }) {
    const inputs = Object.fromEntries(Object.entries(feeds).map(([key, value]) => [key, tensor(value)]));
    const outputs = await sessions.get(name).run(inputs);
    return Object.fromEntries(Object.entries(outputs).map(([key, t]) => [key, plain(t)]));
  },
  // A whole greedy translation (greedy.js) here, each decoder step without a round trip to the page:
  // the generated ids, the last step's cross-attention, whether the model ended the sentence itself
  // and the probability of each token it chose.
  async translate({ encoder, decoder, srcIds, limit, bos, eos, neverGenerated }) {
    const src = ids(srcIds);
    const { memory } = await sessions.get(encoder).run({ src });
    const next = async (prefix) => {
      const result = await sessions.get(decoder).run({ tgt: ids(prefix), memory, src });
      const logits = result.logits.data;
      for (const id of neverGenerated) logits[id] = -Infinity;
      return { logits, cross: result.cross_attention };
    };
    const { attention, ...rest } = await greedy(next, { bos, eos, limit });
    return { ...rest, attention: plain(attention) };
  },
};

self.onmessage = async ({ data: { id, op, args } }) => {
  try {
    self.postMessage({ id, value: await ops[op](args) });
  } catch (error) {
    self.postMessage({ id, error: error?.message ?? String(error) });
  }
};
