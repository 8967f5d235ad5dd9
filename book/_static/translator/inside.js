// Look inside the translator (book/inside.md): decode the reader's sentence one token at a time,
// with the next token's distribution under a temperature and top-k, and every attention weight of
// the encoder and decoder. The model and its files are the translator page's (translator.js).

import { showExamples } from "./examples.js";
import { drawHeatmap } from "./heatmap.js";
import {
  Translator, argmax, confidenceOf, modelInfo, openingDirection, probability, remember, unsupported,
} from "./translator.js";

const $ = (id) => document.getElementById(id);
const MAX_SOURCE = 100; // tokens: each step reads the whole prefix, so a paragraph would crawl
const SHOWN = 10; // bars of the next-token chart

// softmax(logits / temperature) among the top_k most probable tokens, as the package's
// decoding.sample_token draws from it: ties with the k-th value are kept, the rest get 0.
export function distribution(logits, temperature, topK) {
  const scaled = Float64Array.from(logits, (x) => x / temperature);
  if (topK < scaled.length) {
    const kth = [...scaled].sort((a, b) => b - a)[topK - 1];
    for (let v = 0; v < scaled.length; v++) if (scaled[v] < kth) scaled[v] = -Infinity;
  }
  const max = Math.max(...scaled);
  let sum = 0;
  const probs = scaled.map((x) => { const e = Math.exp(x - max); sum += e; return e; });
  return probs.map((p) => p / sum);
}

// The `count` most probable ids, most probable first (ties: the smaller id first).
export function top(probs, count) {
  const ids = [...probs.keys()].filter((id) => probs[id] > 0);
  ids.sort((a, b) => probs[b] - probs[a] || a - b);
  return ids.slice(0, count);
}

// A small seeded generator (mulberry32): the same seed draws the same tokens in every browser.
export function generator(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function drawToken(probs, random) {
  let u = random();
  for (let id = 0; id < probs.length; id++) {
    u -= probs[id];
    if (u < 0) return id;
  }
  return argmax(probs); // rounding left a sliver: the most probable token
}

// The mean weight over the chosen layers and heads of an attention tensor (1, layers, heads, rows, cols).
export function attentionRows(tensor, layer, head) {
  const [, layers, heads, rows, cols] = tensor.dims;
  const chosenLayers = layer === "mean" ? [...Array(layers).keys()] : [Number(layer)];
  const chosenHeads = head === "mean" ? [...Array(heads).keys()] : [Number(head)];
  const out = Array.from({ length: rows }, () => new Float64Array(cols));
  for (const l of chosenLayers) for (const h of chosenHeads) {
    const base = (l * heads + h) * rows * cols;
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[r][c] += tensor.data[base + r * cols + c];
  }
  const n = chosenLayers.length * chosenHeads.length;
  return out.map((row) => row.map((w) => w / n));
}

function logSoftmax(logits, start, vocab) {
  let max = -Infinity;
  for (let v = 0; v < vocab; v++) max = Math.max(max, logits[start + v]);
  let sum = 0;
  for (let v = 0; v < vocab; v++) sum += Math.exp(logits[start + v] - max);
  const logSum = max + Math.log(sum);
  return Float64Array.from({ length: vocab }, (_, v) => logits[start + v] - logSum);
}

// Wu et al. (2016), as the package's decoding.length_penalty: scores are divided by it.
export function lengthPenalty(length, alpha) {
  return ((5 + length) / 6) ** alpha;
}

// Beam search as the package's decoding.beam_search does it for one sentence: the k most probable
// prefixes survive each step; a hypothesis that produced <eos> stays, extended by <pad> at no cost;
// at the length limit the last token must be <eos>; the winner has the best log-probability divided
// by the length penalty. Returns every step's beam (for the page's table) and the final hypotheses.
export async function beamSearch(model, source, k, alpha) {
  const { "<bos>": BOS, "<eos>": EOS, "<pad>": PAD } = model.info.special_ids;
  let tokens = Array.from({ length: k }, () => [BOS]);
  let scores = Array.from({ length: k }, (_, i) => (i === 0 ? 0 : -Infinity)); // one live hypothesis at first
  let finished = Array(k).fill(false), lengths = Array(k).fill(0);
  const steps = [];
  for (let step = 0; step < source.limit; step++) {
    const { logits, vocab } = await model.nextOfMany(source, tokens);
    const candidates = [];
    for (let r = 0; r < k; r++) {
      let logProbs;
      if (finished[r]) {
        logProbs = new Float64Array(vocab).fill(-Infinity);
        logProbs[PAD] = 0;
      } else {
        logProbs = logSoftmax(logits, r * vocab, vocab);
        if (lengths[r] + 1 >= source.limit) logProbs = logProbs.map((x, v) => (v === EOS ? x : -Infinity));
      }
      for (let v = 0; v < vocab; v++) {
        const total = scores[r] + logProbs[v];
        if (total > -Infinity) candidates.push([total, r * vocab + v]);
      }
    }
    candidates.sort((a, b) => b[0] - a[0] || a[1] - b[1]);
    const kept = candidates.slice(0, k);
    const rows = kept.map(([, flat]) => Math.floor(flat / vocab)), ids = kept.map(([, flat]) => flat % vocab);
    tokens = rows.map((r, i) => [...tokens[r], ids[i]]);
    lengths = rows.map((r) => lengths[r] + (finished[r] ? 0 : 1));
    finished = rows.map((r, i) => finished[r] || ids[i] === EOS);
    scores = kept.map(([total]) => total);
    steps.push(tokens.map((t, i) => ({ tokens: t, score: scores[i], finished: finished[i], from: rows[i] })));
    if (finished.every(Boolean)) break;
  }
  const final = tokens.map((t, i) => {
    const penalty = lengthPenalty(lengths[i], alpha);
    return { tokens: t, score: scores[i], length: lengths[i], penalty, normalized: scores[i] / penalty };
  });
  const best = final.reduce((b, h, i) => (h.normalized > final[b].normalized ? i : b), 0);
  return { steps, final, best };
}

// Load the chosen direction in the background, and say when it is in, or why not, unless the reader
// has pressed anything since (Start awaits the same load and reports it itself; a message such as
// "Type a sentence first." stays until the reader acts again).
function preload() {
  const direction = $("inside-direction").value;
  const actions = state.actions;
  const idle = () => !state.source && state.actions === actions && $("inside").dataset.busy !== "1" && $("inside-direction").value === direction;
  const loading = () => idle() && !$("inside").dataset[`ready_${direction}`];
  if (loading()) say("Loading the model… You can type meanwhile.");
  Translator.stopOthers(direction); // only the chosen direction downloads
  const load = Translator.loadOnce(direction);
  modelInfo(direction).then((info) => {
    if (loading()) say(`Loading the model (${info.megabytes} MB; your browser keeps it for your next visit)… You can type meanwhile.`);
  }, () => {});
  load.then(() => {
    $("inside").dataset[`ready_${direction}`] = String(performance.now()); // ms after the page was opened
    if (!$("inside-examples").childElementCount) { // model.json's first fetch failed: show them now
      showExamples($("inside-examples"), direction, pickExample).catch(() => {});
    }
    if (idle()) say("The model is loaded: press Start, or type a sentence of your own first.");
  }, (error) => {
    if (idle()) say(`The model could not load (${error.message}); press Start to try again.`, true);
  });
}

// The page's state: the model, the encoded source, the prefix (<bos> first) and, for each prefix
// length, the decoder's answer (so that going back is instant).
const state = { model: null, direction: "de_en", source: null, prefix: [], steps: [], random: null, cut: false, actions: 0 };

function say(text, isError = false) {
  const status = $("inside-status");
  status.textContent = text;
  status.classList.toggle("inside-error", isError);
  if (isError) status.dataset.message = text;
  else delete status.dataset.message;
}

// The controls' values, or a message naming the one that is wrong.
function settings() {
  const temperature = Number($("inside-temperature").value);
  const k = $("inside-topk").value.trim();
  const topK = k === "" ? Infinity : Number(k); // empty: every token
  const seed = Number($("inside-seed").value);
  if (!(temperature > 0) || !Number.isFinite(temperature)) {
    return { error: "Temperature must be a number above 0 (1 is the model's own distribution; lower is sharper)." };
  }
  if (!(Number.isInteger(topK) || topK === Infinity) || topK < 1) {
    return { error: "Top-k must be a whole number of at least 1, or empty for every token." };
  }
  if (!Number.isInteger(seed) || seed < 0) return { error: "The seed must be a whole number of at least 0." };
  return { temperature, topK, seed };
}

async function encode() {
  const text = $("inside-input").value;
  if (!text.trim()) return say("Type a sentence first.", true);
  $("inside-encode").disabled = true;
  try {
    const direction = $("inside-direction").value;
    if (!$("inside").dataset[`ready_${direction}`]) say("Loading the model…");
    const model = await Translator.loadOnce(direction, { keep: true });
    const pieces = model.tokenizer.encode(text);
    if (pieces.length + 1 > MAX_SOURCE) {
      return say(`This page reads up to ${MAX_SOURCE} tokens, a sentence or two; yours has ${pieces.length + 1}. ` +
        "Shorten it (the translator page takes longer text).", true);
    }
    const start = performance.now();
    state.model = model;
    state.direction = direction;
    state.source = await model.encode(text);
    state.prefix = [model.info.special_ids["<bos>"]];
    state.steps = [];
    state.random = null;
    state.cut = false;
    await decodeStep();
    const unknown = state.source.srcIds.filter((id) => id === model.info.special_ids["<unk>"]).length;
    const note = unknown ? ` ${unknown} piece(s) the vocabulary lacks became <unk>.` : "";
    const ms = performance.now() - start;
    say(`Encoded ${state.source.srcIds.length} source tokens and took the first step in ${Math.round(ms)} ms.${note}`);
    $("inside-status").dataset.ms = String(ms);
  } catch (error) {
    say(`The model could not run: ${error.message}`, true);
  } finally {
    $("inside-encode").disabled = false;
  }
}

// Run the decoder on the prefix (unless this length is already known) and redraw.
async function decodeStep() {
  const n = state.prefix.length;
  if (!state.steps[n - 1]) state.steps[n - 1] = await state.model.next(state.source, state.prefix);
  state.steps.length = n;
  draw();
}

function finished() {
  const { prefix, model, source } = state;
  return prefix.at(-1) === model.info.special_ids["<eos>"] || prefix.length - 1 >= source.limit;
}

// Take one token: the reader's choice, the most probable, or a draw from the distribution.
async function take(how, chosen) {
  if (!state.source || finished()) return;
  const options = settings();
  if (options.error) return say(options.error, true);
  const step = state.steps[state.prefix.length - 1];
  const probs = distribution(step.logits, options.temperature, options.topK);
  let id = chosen;
  if (how === "greedy") id = argmax(step.logits);
  if (how === "sample") {
    state.random ??= generator(options.seed);
    id = drawToken(probs, state.random);
  }
  const EOS = state.model.info.special_ids["<eos>"];
  const cut = state.prefix.length >= state.source.limit && id !== EOS; // the length limit: <eos> forced
  if (cut) id = EOS;
  state.prefix = [...state.prefix, id];
  state.cut = cut;
  await decodeStep();
  if (!finished()) return say(`Step ${state.prefix.length}: choose the next token.`);
  say(cut
    ? `Did not finish: the output reached the length limit (${state.source.limit} tokens) without <eos>, so it is ` +
      "cut there. The model often repeats itself like this on sentences unlike the ones it learned from."
    : "Finished: <eos> ends the sentence.");
}

async function back() {
  if (!state.source || state.prefix.length < 2) return;
  state.prefix = state.prefix.slice(0, -1);
  state.cut = false;
  await decodeStep();
  say(`Back to step ${state.prefix.length}.`);
}

async function finish() {
  while (state.source && !finished()) await take("greedy");
}

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

function draw() {
  const { model, prefix } = state;
  const label = (id) => model.tokenizer.label(id);
  $("inside-output").replaceChildren(...prefix.map((id, i) =>
    element("span", label(id), i === prefix.length - 1 ? "inside-token inside-current" : "inside-token")));
  $("inside-output").lang = $("inside-text").lang = state.direction.split("_")[1];
  $("inside-text").textContent = model.tokenizer.decode(prefix.slice(1).filter((id) => id !== model.info.special_ids["<eos>"]));
  drawConfidence();
  drawChart();
  drawAttention();
  $("inside-back").disabled = prefix.length < 2;
  for (const id of ["inside-greedy", "inside-sample", "inside-finish"]) $(id).disabled = finished();
  $("inside").dataset.step = String(prefix.length); // for tests: the page is drawn
}

// The translator page's confidence, for the tokens taken so far whoever chose them: the mean
// probability the model gave each (temperature 1, no top-k; a forced <eos> is not the model's). At
// the end, the page's warning below the threshold and its line for an output cut at the limit.
function drawConfidence() {
  const { model, prefix, steps } = state;
  const line = $("inside-confidence");
  const taken = prefix.slice(1).map((id, i) => probability(steps[i].logits, id));
  if (state.cut) taken.pop();
  if (!taken.length) {
    line.textContent = "";
    line.classList.remove("translator-warning");
    return;
  }
  const confidence = confidenceOf(taken);
  const threshold = model.info.confidence_threshold;
  const low = finished() && confidence < threshold;
  line.textContent = `Confidence ${finished() ? "" : "so far "}${confidence.toFixed(2)}: the mean probability ` +
    `the model gave the ${taken.length} token(s) taken (the translator page warns below ${threshold.toFixed(2)}).` +
    (low ? " The model is unsure of this translation." : "");
  line.classList.toggle("translator-warning", low || state.cut);
  Object.assign(line.dataset, { confidence: String(confidence), warned: String(low), cut: String(state.cut) });
}

function drawChart() {
  const chart = $("inside-chart");
  const options = settings();
  if (options.error) {
    chart.replaceChildren(element("p", options.error, "inside-error"));
    return;
  }
  if (finished()) {
    chart.replaceChildren(element("p", "The translation is complete: go back a step to choose differently."));
    return;
  }
  const { model } = state;
  const probs = distribution(state.steps[state.prefix.length - 1].logits, options.temperature, options.topK);
  const rows = top(probs, SHOWN).map((id) => {
    const row = element("button", undefined, "inside-bar");
    row.type = "button";
    row.dataset.id = String(id);
    row.dataset.p = String(probs[id]);
    row.title = `take “${model.tokenizer.label(id)}” as the next token`;
    const bar = element("span", undefined, "inside-bar-fill");
    bar.style.width = `${(100 * probs[id]).toFixed(1)}%`;
    row.append(element("span", model.tokenizer.label(id), "inside-bar-label"), bar,
      element("span", probs[id].toFixed(3), "inside-bar-value"));
    row.addEventListener("click", action(() => take("chosen", id)));
    return row;
  });
  chart.replaceChildren(...rows);
}

function drawAttention() {
  const { model, prefix, steps, source } = state;
  const kind = $("inside-kind").value;
  const last = steps[prefix.length - 1];
  const tensor = kind === "encoder" ? source.attention : kind === "self" ? last.self : last.cross;
  const [, layers, heads] = tensor.dims;
  fill($("inside-layer"), layers, "layer");
  fill($("inside-head"), heads, "head");
  const weights = attentionRows(tensor, $("inside-layer").value, $("inside-head").value);
  const rowIds = kind === "encoder" ? source.srcIds : prefix;
  const colIds = kind === "cross" ? source.srcIds : rowIds;
  const label = (id) => model.tokenizer.label(id);
  const [src, tgt] = state.direction.split("_");
  drawHeatmap($("inside-heatmap"), {
    rows: rowIds.map(label),
    columns: colIds.map(label),
    weights,
    corner: kind === "encoder" ? "source ↓ / source →" : kind === "self" ? "output ↓ / output →" : "output ↓ / source →",
    rowLang: kind === "encoder" ? src : tgt,
    columnLang: kind === "self" ? tgt : src,
  });
}

function fill(select, count, noun) {
  if (select.options.length === count + 1) return;
  const current = select.value;
  select.replaceChildren(new Option(`mean of all ${noun}s`, "mean"));
  for (let i = 0; i < count; i++) select.append(new Option(`${noun} ${i + 1}`, String(i)));
  select.value = [...select.options].some((o) => o.value === current) ? current : "mean";
}

const EXAMPLES = {
  de_en: "Ein Mann mit einer Sonnenbrille fährt auf einem Roller.",
  en_de: "A man in sunglasses is riding a scooter.",
};

// The generated ids of a hypothesis: after <bos>, up to <eos> (not included).
function generated(tokens, eos) {
  const end = tokens.indexOf(eos);
  return tokens.slice(1, end < 0 ? undefined : end);
}

async function runBeam() {
  if (!state.source) return say("Press Start first: the beam searches from your sentence.", true);
  const k = Number($("inside-beam").value), alpha = Number($("inside-alpha").value);
  if (!Number.isInteger(k) || k < 1 || k > 5) return say("The beam size must be a whole number from 1 to 5.", true);
  if (!Number.isFinite(alpha) || alpha < 0) return say("The length penalty α must be a number of at least 0.", true);
  const start = performance.now();
  const result = await beamSearch(state.model, state.source, k, alpha);
  const ms = performance.now() - start;
  drawBeam(result);
  say(`Beam search with ${k} beam(s) and α = ${alpha} took ${result.steps.length} steps, ${Math.round(ms)} ms.`);
}

function drawBeam({ steps, final, best }) {
  const { model } = state;
  const EOS = model.info.special_ids["<eos>"];
  const text = (tokens) => model.tokenizer.decode(generated(tokens, EOS)) || "(empty)";
  const table = element("table", undefined, "inside-beam-table");
  const head = element("tr");
  for (const title of ["", "hypothesis", "log p", "length", "penalty", "score: log p / penalty"]) {
    head.append(element("th", title));
  }
  table.append(head);
  final.forEach((h, i) => {
    const row = element("tr", undefined, i === best ? "inside-winner" : "");
    row.dataset.text = text(h.tokens);
    row.append(element("td", i === best ? "winner" : ""), element("td", text(h.tokens), "inside-hypothesis"),
      element("td", h.score.toFixed(3)), element("td", String(h.length)), element("td", h.penalty.toFixed(3)),
      element("td", h.normalized.toFixed(3)));
    table.append(row);
  });
  const perStep = element("table", undefined, "inside-beam-table");
  steps.forEach((beam, s) => {
    const row = element("tr");
    row.append(element("th", `step ${s + 1}`));
    for (const h of beam) {
      const label = model.tokenizer.label(h.tokens.at(-1));
      const td = element("td", `${h.finished ? "✓ " : ""}${label} (${h.score.toFixed(2)}, from ${h.from + 1})`);
      td.title = text(h.tokens);
      if (h.finished) td.className = "inside-finished";
      row.append(td);
    }
    perStep.append(row);
  });
  const details = element("details");
  details.append(element("summary", "Every step's beam: the token each hypothesis added, its log-probability, " +
    "and which hypothesis of the step before it extends (✓: finished)"), wrapped(perStep));
  $("inside-beam-result").replaceChildren(wrapped(table), details);
}

function wrapped(table) {  // a wide table scrolls in its own box, never the page
  const scroll = element("div", undefined, "translator-scroll");
  scroll.append(table);
  return scroll;
}

// Each action runs alone; `data-busy` says when it is done (the tests wait on it).
function action(fn) {
  return async (...args) => {
    const page = $("inside");
    if (page.dataset.busy === "1") return;
    page.dataset.busy = "1";
    state.actions += 1;
    try {
      await fn(...args);
    } finally {
      page.dataset.busy = "0";
    }
  };
}

// The page's controls, once the browser is known to run the model.
function start() {
  $("inside-direction").addEventListener("change", () => {
    remember($("inside-direction").value);
    $("inside-input").value = EXAMPLES[$("inside-direction").value];
    $("inside-input").lang = $("inside-direction").value.split("_")[0];
    showExamples($("inside-examples"), $("inside-direction").value, pickExample).catch(() => {});
    preload();
  });
  $("inside-encode").addEventListener("click", action(encode));
  $("inside-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); action(encode)(); }
  });
  $("inside-greedy").addEventListener("click", action(() => take("greedy")));
  $("inside-sample").addEventListener("click", action(() => take("sample")));
  $("inside-back").addEventListener("click", action(back));
  $("inside-finish").addEventListener("click", action(finish));
  $("inside-beam-run").addEventListener("click", action(runBeam));
  for (const id of ["inside-temperature", "inside-topk"]) {
    $(id).addEventListener("input", () => { if (state.source) drawChart(); });
  }
  $("inside-seed").addEventListener("input", () => { state.random = null; });
  for (const id of ["inside-kind", "inside-layer", "inside-head"]) {
    $(id).addEventListener("change", () => { if (state.source) drawAttention(); });
  }
  openingDirection($("inside-direction"));
  $("inside-input").value = EXAMPLES[$("inside-direction").value];
  $("inside-input").lang = $("inside-direction").value.split("_")[0];
  showExamples($("inside-examples"), $("inside-direction").value, pickExample).catch(() => {});
  $("inside-encode").disabled = false;
  $("inside").dataset.busy = "0";
  preload();
}

const pickExample = (text) => { $("inside-input").value = text; };
const missing = unsupported();
if (missing) { // one sentence instead of the page's controls; nothing is downloaded
  say(missing);
  $("inside-status").dataset.unsupported = "true";
  for (const control of document.querySelectorAll("#inside :is(select, textarea, button, input)")) control.disabled = true;
  $("inside").dataset.busy = "0";
} else {
  start();
}
