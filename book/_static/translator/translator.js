// The book's translator, run by the reader's browser: ONNX Runtime Web (WebAssembly) on the
// exported encoder and decoder, the tokenizer of tokenizer.js, and greedy decoding exactly as the
// package's decoding.extend does it. Nothing is sent anywhere: every file comes from this site.

import * as ort from "./ort/ort.wasm.min.mjs";
import { Tokenizer } from "./tokenizer.js";

const here = new URL(".", import.meta.url);
ort.env.wasm.wasmPaths = new URL("ort/", here).href;
ort.env.wasm.numThreads = 1; // a static site cannot turn on the cross-origin isolation threads need


async function fetchOk(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: ${response.status} ${response.statusText}`);
  return response;
}

// tokenizer.json.gz: gunzip here, unless the server already did (some send .gz with Content-Encoding).
async function fetchJsonGz(url) {
  const bytes = new Uint8Array(await (await fetchOk(url)).arrayBuffer());
  if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) return JSON.parse(new TextDecoder().decode(bytes));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

const tokenizers = new Map(); // one per file: both directions may share it
const loads = new Map(); // direction -> Promise<Translator>
const infos = new Map(); // direction -> Promise<model.json>

// A direction's model.json, fetched once for whoever asks (the model's load, the examples); a failed
// fetch is forgotten, so that asking again tries again.
export function modelInfo(direction) {
  if (!infos.has(direction)) {
    const loading = fetchOk(new URL(`models/${direction}/model.json`, here)).then((response) => response.json());
    loading.catch(() => infos.delete(direction));
    infos.set(direction, loading);
  }
  return infos.get(direction);
}

export class Translator {
  // The direction's translator, loaded once and shared by whoever asks (a page may start the load
  // when it opens and await it when the reader acts). A failed load is forgotten, so that asking
  // again tries again.
  static loadOnce(direction) {
    if (!loads.has(direction)) {
      const loading = Translator.load(direction);
      loading.catch(() => loads.delete(direction));
      loads.set(direction, loading);
    }
    return loads.get(direction);
  }

  // Everything at once: the sessions start (and the runtime's WebAssembly compiles) while model.json
  // and the tokenizer arrive. "basic" graph optimisation (constant folding, no fusions): the sessions
  // start about 0.1 s sooner than with "all" on a 2-core machine, and each step is as fast.
  static async load(direction) {
    const folder = new URL(`models/${direction}/`, here);
    const options = { executionProviders: ["wasm"], graphOptimizationLevel: "basic" };
    const info = modelInfo(direction);
    const [infoJson, tokenizer, encoder, decoder] = await Promise.all([
      info,
      info.then(({ tokenizer: name }) => {
        const url = new URL(name ?? "tokenizer.json.gz", folder).href;
        if (!tokenizers.has(url)) {
          const loading = fetchJsonGz(url).then((spec) => new Tokenizer(spec));
          loading.catch(() => tokenizers.delete(url)); // a failed load is tried again next time
          tokenizers.set(url, loading);
        }
        return tokenizers.get(url);
      }),
      ort.InferenceSession.create(new URL("encoder.onnx", folder).href, options),
      ort.InferenceSession.create(new URL("decoder.onnx", folder).href, options),
    ]);
    return new Translator(infoJson, tokenizer, encoder, decoder);
  }

  constructor(info, tokenizer, encoder, decoder) {
    Object.assign(this, { info, tokenizer, encoder, decoder });
  }

  // The source side once per sentence: its ids (<eos> last), the encoder's memory and its
  // self-attention, (1, layers, heads, len(srcIds), len(srcIds)).
  async encode(text) {
    const { "<eos>": EOS } = this.info.special_ids; // model.json: the package's ids
    const srcIds = [...this.tokenizer.encode(text), EOS];
    if (srcIds.length > this.info.config.max_len) {
      throw new Error(`the sentence has ${srcIds.length} tokens, more than the ${this.info.config.max_len} ` +
        "the model can read: shorten it");
    }
    const src = new ort.Tensor("int64", BigInt64Array.from(srcIds, BigInt), [1, srcIds.length]);
    const { memory, encoder_attention: attention } = await this.encoder.run({ src });
    const limit = Math.min(srcIds.length + this.info.max_extra, this.info.config.max_len - 1);
    return { srcIds, src, memory, attention, limit };
  }

  // One decoder call on the whole prefix (<bos> first): the next token's logits, with the tokens
  // that are never generated (<pad>, <bos>) at -Infinity, and the attention of every prefix position,
  // cross (1, layers, heads, len(prefix), len(srcIds)) and causal self (1, layers, heads, len, len).
  async next(source, prefix) {
    const tgt = new ort.Tensor("int64", BigInt64Array.from(prefix, BigInt), [1, prefix.length]);
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
      return new ort.Tensor(type, out, [rows, ...tensor.dims.slice(1)]);
    };
    const tgt = new ort.Tensor("int64", BigInt64Array.from(prefixes.flat(), BigInt), [rows, length]);
    const result = await this.decoder.run({
      tgt, memory: repeat(source.memory, "float32"), src: repeat(source.src, "int64"),
    });
    const logits = result.logits.data, vocab = logits.length / rows;
    for (let r = 0; r < rows; r++) for (const id of this.info.never_generated) logits[r * vocab + id] = -Infinity;
    return { logits, vocab };
  }

  // Greedy decoding, exactly as the package's decoding.extend does it: the most probable token at
  // each step, until <eos> or the length limit (source tokens + max_extra, the last allowed token
  // forced to <eos>). The last step's cross-attention has one row per output token. `finished` says
  // whether the model chose <eos> itself (false: a runaway output, cut at the limit), `confidence`
  // is the mean probability of the tokens it chose (OnnxTranslator.translate_one, in Python).
  async translate(text) {
    const start = performance.now();
    const { "<bos>": BOS, "<eos>": EOS } = this.info.special_ids;
    const source = await this.encode(text);
    const out = [BOS];
    const chosen = []; // the probability of each token the model picked
    let attention = null;
    let finished = false;
    for (let step = 0; step < source.limit; step++) {
      const { logits, cross } = await this.next(source, out);
      const next = argmax(logits);
      attention = cross;
      if (step + 1 >= source.limit && next !== EOS) { // the limit: <eos> forced, not chosen
        out.push(EOS);
        break;
      }
      out.push(next);
      chosen.push(probability(logits, next));
      if (next === EOS) {
        finished = true;
        break;
      }
    }
    const ids = out.slice(1); // the generated tokens, <eos> last
    return {
      text: this.tokenizer.decode(ids.slice(0, -1)),
      srcIds: source.srcIds,
      ids,
      attention, // (1, layers, heads, len(ids), len(srcIds))
      finished,
      confidence: confidenceOf(chosen),
      ms: performance.now() - start,
    };
  }
}

// The translator's confidence: the mean probability the model gave the tokens it chose (0 for none).
export function confidenceOf(probabilities) {
  return probabilities.length ? probabilities.reduce((a, b) => a + b, 0) / probabilities.length : 0;
}

// softmax(logits)[index], in double precision (never-generated tokens are -Infinity: weight 0).
export function probability(logits, index) {
  const top = logits[argmax(logits)];
  let sum = 0;
  for (let v = 0; v < logits.length; v++) sum += Math.exp(logits[v] - top);
  return Math.exp(logits[index] - top) / sum;
}

// The index of the largest value (the first of equals, as torch.argmax on a CPU).
export function argmax(values) {
  let best = 0;
  for (let v = 1; v < values.length; v++) if (values[v] > values[best]) best = v;
  return best;
}
