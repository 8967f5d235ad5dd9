// The book's translator, run by the reader's browser: ONNX Runtime Web (WebAssembly) on the
// exported encoder and decoder, the tokenizer of tokenizer.js, and greedy decoding exactly as the
// package's decoding.extend does it. Nothing is sent anywhere: every file comes from this site.

import { cachedBlob, cachedBytes, fetchOk, openCache } from "./files.js";
import { confidenceOf } from "./greedy.js";
import { Tokenizer } from "./tokenizer.js";

export { argmax, confidenceOf, probability } from "./greedy.js"; // for the look-inside page

const here = new URL(".", import.meta.url);
const SHARED = "shared.bin"; // the tensors encoder.onnx and decoder.onnx both read, as the export names it

// A tensor as ONNX Runtime's: its element type, its data (a typed array) and its dimensions.
class Tensor {
  constructor(type, data, dims) {
    Object.assign(this, { type, data, dims });
  }
}

// The sessions live in a worker (worker.js), which runs ONNX Runtime off the page's thread, so that
// the page never freezes while the runtime compiles, a session starts or the decoder runs. start.js,
// in the page's head, started it as the page began to load (it fetches the runtime's WebAssembly at
// once). `call` asks it for one operation; if it fails to start, every call waiting on it fails and
// the next call starts another.
const start = self.translatorStart;
if (!start) throw new Error("translator.js needs start.js in the page's head (book/_ext/translator_site.py)");

// null, or the sentence a page shows instead of the translator (no WebAssembly SIMD or module workers)
export function unsupported() {
  return start.unsupported;
}

let worker = null;
const pending = new Map(); // a call's id -> its { resolve, reject }
let calls = 0;

function startWorker() {
  if (worker) return worker;
  worker = start.takeWorker() ?? new Worker(new URL("worker.js", here), { type: "module" });
  worker.onmessage = ({ data: { id, value, error } }) => {
    const waiting = pending.get(id);
    pending.delete(id);
    if (error === undefined) waiting.resolve(value);
    else waiting.reject(new Error(error));
  };
  worker.onerror = (event) => {
    event.preventDefault();
    worker = null;
    for (const waiting of pending.values()) {
      waiting.reject(new Error(event.message || "the translator's worker did not start"));
    }
    pending.clear();
  };
  return worker;
}

function call(op, args, transfer = []) {
  const to = startWorker();
  return new Promise((resolve, reject) => {
    const id = ++calls;
    pending.set(id, { resolve, reject });
    to.postMessage({ id, op, args }, transfer);
  });
}

// A session in the worker, run as ONNX Runtime's own: `run(feeds)` resolves to the outputs by name.
class Session {
  constructor(name) {
    this.name = name;
  }

  // `model` and the external data's `data` are Blobs: the worker reads them, so the page never holds their bytes.
  static async create(name, model, options) {
    await call("create", { name, model, options });
    return new Session(name);
  }

  run(feeds) {
    const plain = Object.fromEntries(
      Object.entries(feeds).map(([key, t]) => [key, { type: t.type, data: t.data, dims: t.dims }]),
    );
    return call("run", { name: this.name, feeds: plain });
  }
}

// tokenizer.json.gz: gunzip here, unless the server already did (some send .gz with Content-Encoding).
async function jsonGz(bytes) {
  if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) return JSON.parse(new TextDecoder().decode(bytes));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

const tokenizers = new Map(); // one per file: both directions may share it
const loads = new Map(); // direction -> { promise: Promise<Translator>, controller, kept, settled }
const infos = new Map(); // direction -> Promise<model.json>

// A direction's model.json, fetched once for whoever asks (the model's load, the examples); from
// the network first (it names the model files' versions), else the copy kept at the last visit
// (offline). A failed fetch is forgotten, so that asking again tries again.
export function modelInfo(direction) {
  if (!infos.has(direction)) {
    const url = new URL(`models/${direction}/model.json`, here).href;
    const loading = (async () => {
      let response;
      try {
        response = await fetchOk(url);
      } catch (error) {
        const kept = await (await openCache())?.match(url).catch(() => null);
        if (!kept) throw error;
        return kept.json();
      }
      const text = await response.text();
      (await openCache())?.put(url, new Response(text)).catch(() => {});
      return JSON.parse(text);
    })();
    loading.catch(() => infos.delete(direction));
    infos.set(direction, loading);
  }
  return infos.get(direction);
}

// The direction a page opens with: the address's (translator.html#en_de), else the one the reader
// chose last time, else the menu's first. `remember` keeps the reader's choice for the next visit.
const REMEMBERED = "transformer-book-translator-direction";
export function openingDirection(select) {
  const options = [...select.options].map((o) => o.value);
  let remembered = null;
  try {
    remembered = localStorage.getItem(REMEMBERED);
  } catch {
    // storage refused: the menu's first
  }
  const wanted = [location.hash.slice(1), remembered].find((d) => options.includes(d));
  if (wanted) select.value = wanted;
  return select.value;
}
export function remember(direction) {
  try {
    localStorage.setItem(REMEMBERED, direction);
  } catch {
    // storage refused: nothing kept
  }
}

export class Translator {
  // The direction's translator, loaded once and shared by whoever asks (a page may start the load
  // when it opens and await it when the reader acts; `keep`: a reader waits for it, so that
  // `stopOthers` leaves it). A failed load is forgotten, so that asking again tries again.
  static loadOnce(direction, { keep = false } = {}) {
    if (!loads.has(direction)) {
      const controller = new AbortController();
      const entry = { controller, kept: false, settled: false };
      entry.promise = Translator.load(direction, controller.signal);
      entry.promise.then(() => (entry.settled = true), () => loads.delete(direction));
      loads.set(direction, entry);
    }
    const entry = loads.get(direction);
    entry.kept ||= keep;
    return entry.promise;
  }

  // The reader chose `direction`: the model files of another direction still arriving are not
  // downloaded further, unless a press waits for them (a later choice of it loads it again).
  static stopOthers(direction) {
    for (const [other, entry] of loads) {
      if (other !== direction && !entry.settled && !entry.kept) {
        loads.delete(other);
        entry.controller.abort();
      }
    }
  }

  // The runtime's WebAssembly (the worker fetches it as it starts), model.json and the tokenizer at
  // once, then the encoder, the decoder and the tensors they share (shared.bin: the embedding and the
  // sinusoids' table, downloaded once, which both sessions read as their external data), each from
  // Cache Storage when an earlier visit kept it. The model files are asked for once the WebAssembly
  // is in: on a slow connection it then arrives first, with the whole bandwidth, and ONNX Runtime
  // compiles it while they arrive, instead of every file sharing the bandwidth and the compiling
  // waiting for the last one. A session starts as soon as its files are in. "basic" graph
  // optimisation (constant folding, no fusions): the sessions start about 0.1 s sooner than with
  // "all" on a 2-core machine, and each step is as fast.
  static async load(direction, signal) {
    const folder = new URL(`models/${direction}/`, here);
    const runtime = call("runtime"); // starts the worker, which fetches the WebAssembly
    runtime.catch(() => {}); // awaited below
    const info = await modelInfo(direction);
    const versions = info.files ?? {};
    // the model files as Blobs, handed to the worker unread; the tokenizer's bytes, read here
    const file = (name, abort) => cachedBlob(new URL(name, folder).href, versions[name] ?? "unversioned", abort);
    const name = info.tokenizer ?? "tokenizer.json.gz";
    const url = new URL(name, folder).href;
    if (!tokenizers.has(url)) { // shared by the directions: never stopped with one of them
      const bytes = cachedBytes(url, versions[name] ?? "unversioned");
      const loading = bytes.then(jsonGz).then((spec) => new Tokenizer(spec));
      loading.catch(() => tokenizers.delete(url)); // a failed load is tried again next time
      tokenizers.set(url, loading);
    }
    await runtime;
    signal?.throwIfAborted();
    const shared = file(SHARED, signal);
    shared.catch(() => {}); // awaited by each session below
    const session = async (name) => {
      const [model, data] = await Promise.all([file(name, signal), shared]);
      signal?.throwIfAborted();
      const options = {
        executionProviders: ["wasm"], graphOptimizationLevel: "basic", externalData: [{ path: SHARED, data }],
      };
      return Session.create(`${direction}/${name}`, model, options);
    };
    const [tokenizer, encoder, decoder] = await Promise.all([
      tokenizers.get(url), session("encoder.onnx"), session("decoder.onnx"),
    ]);
    return new Translator(info, tokenizer, encoder, decoder);
  }

  constructor(info, tokenizer, encoder, decoder) {
    Object.assign(this, { info, tokenizer, encoder, decoder });
  }

  // A sentence's ids, <eos> last, and the length limit of its translation (source tokens +
  // max_extra, within the model's positions).
  source(text) {
    const { "<eos>": EOS } = this.info.special_ids; // model.json: the package's ids
    const srcIds = [...this.tokenizer.encode(text), EOS];
    if (srcIds.length > this.info.config.max_len) {
      throw new Error(`the sentence has ${srcIds.length} tokens, more than the ${this.info.config.max_len} ` +
        "the model can read: shorten it");
    }
    return { srcIds, limit: Math.min(srcIds.length + this.info.max_extra, this.info.config.max_len - 1) };
  }

  // The source side once per sentence: its ids (<eos> last), the encoder's memory and its
  // self-attention, (1, layers, heads, len(srcIds), len(srcIds)).
  async encode(text) {
    const { srcIds, limit } = this.source(text);
    const src = new Tensor("int64", BigInt64Array.from(srcIds, BigInt), [1, srcIds.length]);
    const { memory, encoder_attention: attention } = await this.encoder.run({ src });
    return { srcIds, src, memory, attention, limit };
  }

  // One decoder call on the whole prefix (<bos> first): the next token's logits, with the tokens
  // that are never generated (<pad>, <bos>) at -Infinity, and the attention of every prefix position,
  // cross (1, layers, heads, len(prefix), len(srcIds)) and causal self (1, layers, heads, len, len).
  async next(source, prefix) {
    const tgt = new Tensor("int64", BigInt64Array.from(prefix, BigInt), [1, prefix.length]);
    const result = await this.decoder.run({ tgt, memory: source.memory, src: source.src });
    const logits = result.logits.data;
    for (const id of this.info.never_generated) logits[id] = -Infinity;
    return { logits, cross: result.cross_attention, self: result.self_attention };
  }

  // One decoder call on `rows` prefixes of the same length, each reading the same source: the
  // next token's logits of each, (rows, vocab) as one flat array, never-generated tokens at -Infinity.
  async nextOfMany(source, prefixes) {
    const [rows, length] = [prefixes.length, prefixes[0].length];
    const repeat = (tensor, type) => {
      const one = tensor.data, out = new one.constructor(one.length * rows);
      for (let r = 0; r < rows; r++) out.set(one, r * one.length);
      return new Tensor(type, out, [rows, ...tensor.dims.slice(1)]);
    };
    const tgt = new Tensor("int64", BigInt64Array.from(prefixes.flat(), BigInt), [rows, length]);
    const result = await this.decoder.run({
      tgt, memory: repeat(source.memory, "float32"), src: repeat(source.src, "int64"),
    });
    const logits = result.logits.data, vocab = logits.length / rows;
    for (let r = 0; r < rows; r++) for (const id of this.info.never_generated) logits[r * vocab + id] = -Infinity;
    return { logits, vocab };
  }

  // Greedy decoding (greedy.js), run in the worker: the encoder, then one decoder call per token.
  // The last step's cross-attention has one row per output token. `finished` says whether the model
  // chose <eos> itself (false: a runaway output, cut at the limit), `confidence` is the mean
  // probability of the tokens it chose (OnnxTranslator.translate_one, in Python).
  async translate(text) {
    const start = performance.now();
    const { "<bos>": bos, "<eos>": eos } = this.info.special_ids;
    const { srcIds, limit } = this.source(text);
    const { ids, attention, finished, chosen } = await call("translate", {
      encoder: this.encoder.name, decoder: this.decoder.name, srcIds, limit, bos, eos,
      neverGenerated: this.info.never_generated,
    });
    return {
      text: this.tokenizer.decode(ids.slice(0, -1)),
      srcIds,
      ids, // the generated tokens, <eos> last
      attention, // (1, layers, heads, len(ids), len(srcIds))
      finished,
      confidence: confidenceOf(chosen),
      ms: performance.now() - start,
    };
  }
}
