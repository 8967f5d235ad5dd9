// The translator's inference, off the page's thread: ONNX Runtime Web (WebAssembly) runs the
// encoder and decoder sessions here, so that compiling the runtime, starting a session or a
// decoder step never freezes the page. translator.js sends the model files' bytes and each run's
// inputs, and gets the outputs back; the runtime's WebAssembly is fetched here, from Cache Storage
// when an earlier visit kept it.

import * as ort from "./ort/ort.wasm.min.mjs";
import { cachedBytes } from "./files.js";

const here = new URL(".", import.meta.url);
ort.env.wasm.wasmPaths = new URL("ort/", here).href;
ort.env.wasm.numThreads = 1; // a static site cannot turn on the cross-origin isolation threads need

// The runtime's WebAssembly (3.7 MB as sent), fetched when the worker starts, while the page fetches
// the model files. A failed fetch is tried again by the next session.
let wasm = null;
function runtime() {
  if (!wasm) {
    const url = new URL("ort/ort-wasm-simd-threaded.wasm", here).href;
    wasm = cachedBytes(url, ort.env.versions.web).then((bytes) => {
      ort.env.wasm.wasmBinary = bytes;
    });
    wasm.catch(() => (wasm = null));
  }
  return wasm;
}
runtime().catch(() => {});

const sessions = new Map(); // a name ("de_en/encoder.onnx") -> its session
const tensor = ({ type, data, dims }) => new ort.Tensor(type, data, dims);

const ops = {
  async create({ name, bytes, options }) {
    await runtime();
    sessions.set(name, await ort.InferenceSession.create(bytes, options));
    return name;
  },
  async run({ name, feeds }) {
    const inputs = Object.fromEntries(Object.entries(feeds).map(([key, value]) => [key, tensor(value)]));
    const outputs = await sessions.get(name).run(inputs);
    return Object.fromEntries(Object.entries(outputs).map(([key, t]) => [key, { type: t.type, data: t.data, dims: t.dims }]));
  },
};

self.onmessage = async ({ data: { id, op, args } }) => {
  try {
    self.postMessage({ id, value: await ops[op](args) });
  } catch (error) {
    self.postMessage({ id, error: error?.message ?? String(error) });
  }
};
