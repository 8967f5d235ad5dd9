// The translator page (book/translator.md): a text box, a direction, the translation, and the
// cross-attention of every output token over the source tokens as a heatmap.

import { showExamples } from "./examples.js";
import { drawHeatmap as drawTable, drawStrongest } from "./heatmap.js";
import { Translator, modelInfo, openingDirection, remember, unsupported } from "./translator.js";

const $ = (id) => document.getElementById(id);
let last = null; // the latest result, redrawn when the layer or head changes

function describe(info) {
  const c = info.config;
  const bleu = info.bleu;
  return `Model: ${info.src}→${info.tgt}, trained on Multi30k in lesson 11 (${c.n_layers} encoder and ` +
    `${c.n_layers} decoder layers, d_model ${c.d_model}, ${c.n_heads} heads, ` +
    `${(info.parameters / 1e6).toFixed(1)}M parameters), ${info.megabytes} MB in ${info.precision}. ` +
    `BLEU ${bleu.sacrebleu_cased.toFixed(1)} (cased sacreBLEU, ${bleu.decoding} decoding of these files, ` +
    `${bleu.sentences} sentences of ${bleu.split}).`;
}

// Mean weight over the chosen layers and heads: attention (1, layers, heads, rows, cols).
function weights(attention, layer, head) {
  const [, layers, heads, rows, cols] = attention.dims;
  const data = attention.data;
  const chosenLayers = layer === "mean" ? [...Array(layers).keys()] : [Number(layer)];
  const chosenHeads = head === "mean" ? [...Array(heads).keys()] : [Number(head)];
  const out = Array.from({ length: rows }, () => new Float64Array(cols));
  for (const l of chosenLayers) for (const h of chosenHeads) {
    const base = (l * heads + h) * rows * cols;
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[r][c] += data[base + r * cols + c];
  }
  const n = chosenLayers.length * chosenHeads.length;
  return out.map((row) => row.map((w) => w / n));
}

// The heatmap of the latest translation for the chosen layer and head: what heatmap.js draws.
function heatmap() {
  const { result, tokenizer, direction } = last;
  const [src, tgt] = direction.split("_");
  return {
    rows: result.ids.map((id) => tokenizer.label(id)),
    columns: result.srcIds.map((id) => tokenizer.label(id)),
    weights: weights(result.attention, $("translator-layer").value, $("translator-head").value),
    corner: "output ↓ / source →",
    rowLang: tgt,
    columnLang: src,
  };
}

// The layer or head changed: the table and the list in words again.
function drawHeatmap() {
  if (!last) return; // nothing translated yet
  const map = heatmap();
  drawTable($("translator-heatmap"), map);
  drawStrongest($("translator-strongest"), map);
}

// Resolves once the browser has painted the page as it is now: a frame's callback runs just before
// its paint, and a task queued from it runs after. A hidden page paints nothing: no wait.
const painted = () => document.hidden ? Promise.resolve()
  : new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve)));

// The box's language (lang="de" or "en") follows the direction; the output's is set with each
// translation, and the examples' by examples.js.
function setLanguages() {
  $("translator-input").lang = $("translator-direction").value.split("_")[0];
}

function fillSelect(select, count, noun) {
  const current = select.value;
  select.replaceChildren(new Option(`mean of all ${noun}s`, "mean"));
  for (let i = 0; i < count; i++) select.append(new Option(`${noun} ${i + 1}`, String(i)));
  select.value = [...select.options].some((o) => o.value === current) ? current : "mean";
}

let presses = 0; // Translate's presses (and Enters), so that a background load never talks over one

async function run() {
  presses += 1;
  const direction = $("translator-direction").value;
  const text = $("translator-input").value;
  const status = $("translator-status");
  if (!text.trim()) {
    status.textContent = "Type a sentence to translate first.";
    return;
  }
  $("translator-button").disabled = true;
  status.textContent = "Loading the model…";
  delete status.dataset.error;
  try {
    const model = await Translator.loadOnce(direction, { keep: true }); // usually in already; a failed load is tried again
    if (!$("translator-examples").childElementCount) examples(direction).catch(() => {});
    $("translator-model").textContent = describe(model.info);
    status.textContent = "Translating…";
    const result = await model.translate(text);
    $("translator-output").textContent = result.text;
    $("translator-output").lang = direction.split("_")[1];
    showConfidence(result, model.info);
    const [, layers, heads] = result.attention.dims;
    fillSelect($("translator-layer"), layers, "layer");
    fillSelect($("translator-head"), heads, "head");
    last = { result, tokenizer: model.tokenizer, direction };
    status.textContent = result.finished
      ? `${result.ids.length} tokens from ${result.srcIds.length} in ${Math.round(result.ms)} ms, on this computer.`
      : `Did not finish: the model reached its length limit (${result.ids.length} tokens) without ending the ` +
        "sentence, so what it wrote is cut there. It often repeats itself like this on sentences unlike " +
        "the ones it learned from.";
    status.dataset.finished = String(result.finished);
    status.dataset.ms = String(result.ms);
    // The translation is painted first, then the heatmap, then its list in words, each drawn in a
    // task of its own: on a phone's slower CPU, all three at once keep the page from answering
    // for longer than a reader's click should wait.
    const map = heatmap();
    await painted();
    drawTable($("translator-heatmap"), map);
    await painted();
    drawStrongest($("translator-strongest"), map);
    status.dataset.done = String(Number(status.dataset.done || 0) + 1);
  } catch (error) {
    if (error.name === "AbortError") return; // the reader chose the other direction meanwhile
    status.textContent = `The translator could not run: ${error.message}`;
    status.dataset.error = error.message;
  } finally {
    $("translator-button").disabled = false;
  }
}

// The confidence beside each translation, and a warning in plain words under the threshold that
// benchmarks/confidence.py chose on test_2016_flickr (model.json carries it).
function showConfidence(result, info) {
  const line = $("translator-confidence");
  const low = result.confidence < info.confidence_threshold;
  line.textContent = `Confidence ${result.confidence.toFixed(2)}: the mean probability of the tokens the model ` +
    `chose (a warning below ${info.confidence_threshold.toFixed(2)}).` + (low
    ? " The model is unsure of this translation: sentences unlike the photo descriptions it learned " +
      "from are often translated wrongly, and this may be one."
    : "");
  line.classList.toggle("translator-warning", low);
  Object.assign(line.dataset, { confidence: String(result.confidence), warned: String(low) });
}

// Sentences to start from (examples.js): a click fills the box and translates. The box starts with
// the first of them, and changes with the direction unless the reader typed a sentence of their own.
let offered = new Set([""]);
async function examples(direction) {
  const pick = (text) => {
    $("translator-input").value = text;
    run();
  };
  const found = await showExamples($("translator-examples"), direction, pick);
  if (!found || $("translator-direction").value !== direction) return;
  if (offered.has($("translator-input").value.trim())) $("translator-input").value = found.test[0];
  offered = new Set(["", ...found.test, ...found.outside]);
}

// Load the chosen direction (only it: another one still arriving stops) while the reader reads or
// types, and say how much it downloads and when it is in, unless the reader has pressed Translate
// since (it awaits the same load, and reports a failure and tries again; "Type a sentence to
// translate first." stays until the next press).
function preload() {
  const direction = $("translator-direction").value;
  const status = $("translator-status");
  const pressed = presses;
  const idle = () => presses === pressed && !$("translator-button").disabled && !status.dataset.done &&
    !status.dataset.error && $("translator-direction").value === direction;
  Translator.stopOthers(direction);
  const loading = Translator.loadOnce(direction);
  modelInfo(direction).then((info) => {
    if (idle() && !status.dataset.loaded?.split(" ").includes(direction)) status.textContent = loadingLine(info);
  }, () => {});
  loading.then(() => {
    status.dataset.loaded = `${status.dataset.loaded ?? ""} ${direction}`.trim();
    keepOffline();
    examples(direction).catch(() => {}); // in case model.json's first fetch failed
    if (idle()) status.textContent = "The model is loaded: press Translate, or type a sentence of your own first.";
  }, () => {});
}

// Offline: once a model is loaded, a service worker (translator-sw.js beside the page, which
// translator_site.py writes) keeps the page's own files, so that the page opens and translates with
// no network on a later visit. The page sends it every file it used so far, and the files of the
// translator's worker. It is started only now so that it never slows the first translation.
// Without service workers (a private window may refuse them) the page works as before, online.
let kept = null;
function keepOffline() {
  if (kept || !("serviceWorker" in navigator)) return;
  kept = (async () => {
    const registration = await navigator.serviceWorker.register("translator-sw.js", { scope: location.pathname });
    const worker = registration.active ?? (await navigator.serviceWorker.ready).active;
    const files = ["worker.js", "files.js", "greedy.js", "ort/ort.wasm.min.mjs", "ort/ort-wasm-simd-threaded.mjs"];
    const urls = [
      location.href.split("#")[0],
      ...performance.getEntriesByType("resource").map((entry) => entry.name),
      ...files.map((file) => new URL(file, import.meta.url).href),
    ];
    const reply = new MessageChannel();
    const done = new Promise((resolve) => (reply.port1.onmessage = ({ data }) => resolve(data)));
    worker.postMessage({ keep: urls }, [reply.port2]);
    const { kept: count } = await done;
    $("translator-status").dataset.offline = String(count); // the files kept, for the tests
  })().catch(() => {}); // refused: the page works online as before
}

// What the model's load downloads, from model.json: the two ONNX files as the build wrote them.
function loadingLine(info) {
  return `Loading the model (${info.megabytes} MB; your browser keeps it for your next visit)… ` +
    "You can type meanwhile.";
}

const missing = unsupported();
if (missing) { // one sentence instead of the translator; nothing is downloaded
  $("translator-status").textContent = missing;
  $("translator-status").dataset.unsupported = "true";
  for (const control of document.querySelectorAll("#translator :is(select, textarea, button)")) control.disabled = true;
} else {
  $("translator-direction").addEventListener("change", () => {
    remember($("translator-direction").value);
    setLanguages();
    examples($("translator-direction").value).catch(() => {});
    preload();
  });
  $("translator-button").addEventListener("click", run);
  $("translator-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); run(); }
  });
  $("translator-layer").addEventListener("change", drawHeatmap);
  $("translator-head").addEventListener("change", drawHeatmap);
  $("translator-button").disabled = false;
  openingDirection($("translator-direction"));
  setLanguages();
  examples($("translator-direction").value).catch(() => {});
  preload();
}
