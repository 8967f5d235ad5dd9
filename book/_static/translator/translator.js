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

export class Translator {
  static async load(direction) {
    const folder = new URL(`models/${direction}/`, here);
    const info = await (await fetchOk(new URL("model.json", folder))).json();
    const tokenizerUrl = new URL(info.tokenizer ?? "tokenizer.json.gz", folder).href;
    if (!tokenizers.has(tokenizerUrl)) tokenizers.set(tokenizerUrl, fetchJsonGz(tokenizerUrl).then((s) => new Tokenizer(s)));
    const options = { executionProviders: ["wasm"] };
    const [tokenizer, encoder, decoder] = await Promise.all([
      tokenizers.get(tokenizerUrl),
      ort.InferenceSession.create(new URL("encoder.onnx", folder).href, options),
      ort.InferenceSession.create(new URL("decoder.onnx", folder).href, options),
    ]);
    return new Translator(info, tokenizer, encoder, decoder);
  }

  constructor(info, tokenizer, encoder, decoder) {
    Object.assign(this, { info, tokenizer, encoder, decoder });
  }

  // Greedy decoding: the most probable token at each step, until <eos> or the length limit
  // (source tokens + max_extra, the last allowed token forced to <eos>). The decoder reads the
  // whole prefix each step; the last step's cross-attention has one row per output token.
  async translate(text) {
    const start = performance.now();
    const { "<bos>": BOS, "<eos>": EOS } = this.info.special_ids; // model.json: the package's ids
    const srcIds = [...this.tokenizer.encode(text), EOS];
    if (srcIds.length > this.info.config.max_len) {
      throw new Error(`the sentence has ${srcIds.length} tokens, more than the ${this.info.config.max_len} ` +
        "the model can read: shorten it");
    }
    const src = new ort.Tensor("int64", BigInt64Array.from(srcIds, BigInt), [1, srcIds.length]);
    const { memory } = await this.encoder.run({ src });
    const limit = Math.min(srcIds.length + this.info.max_extra, this.info.config.max_len - 1);
    const out = [BOS];
    let attention = null;
    for (let step = 0; step < limit; step++) {
      const tgt = new ort.Tensor("int64", BigInt64Array.from(out, BigInt), [1, out.length]);
      const result = await this.decoder.run({ tgt, memory, src });
      const logits = result.logits.data;
      for (const id of this.info.never_generated) logits[id] = -Infinity; // <pad>, <bos>
      let next = 0;
      for (let v = 1; v < logits.length; v++) if (logits[v] > logits[next]) next = v;
      if (step + 1 >= limit) next = EOS;
      out.push(next);
      attention = result.cross_attention;
      if (next === EOS) break;
    }
    const ids = out.slice(1); // the generated tokens, <eos> last
    return {
      text: this.tokenizer.decode(ids.slice(0, -1)),
      srcIds,
      ids,
      attention, // (1, layers, heads, len(ids), len(srcIds))
      ms: performance.now() - start,
    };
  }
}
