"""The in-browser translator (book/translator.md) on the built site, in headless Chromium.

The browser's tokenizer gives SentencePiece's ids for every sentence of test_2016_flickr in both
languages (and SentencePiece's text for any ids); the page translates five sentences in each
direction exactly as the package's greedy decoding of the same ONNX files does in Python, with a
heatmap row per output token; no request leaves the machine. It also prints how long a 15-word
sentence takes. Needs the built site and Chromium, like tests/site/test_browser.py.
"""

import json
import random
import re
import statistics
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from book_tools.web.export import MODEL_FILES as EXPORTED  # encoder.onnx, decoder.onnx, shared.bin
from book_tools.web.export import OnnxTranslator
from conftest import SITE
from transformer_lib.data import load_multi30k
from transformer_lib.decoding import NEVER_GENERATED, beam_search

pytestmark = pytest.mark.slow  # tens of seconds: started early by `pytest -n 2` (conftest.py)

PAGE = "book/translator.html"
MODELS = SITE / "_static" / "translator" / "models"
SENTENCES = {
    "de_en": [
        "Ein Mann fährt mit dem Fahrrad durch die Stadt.",
        "Zwei Kinder spielen im Sand am Strand.",
        "Eine Frau in einem roten Kleid singt auf einer Bühne.",
        "Ein brauner Hund springt über einen Zaun.",
        "Die Musiker spielen Gitarre, während die Leute tanzen.",
    ],
    "en_de": [
        "A man is riding a bike through the city.",
        "Two children are playing in the sand at the beach.",
        "A woman in a red dress sings on a stage.",
        "A brown dog jumps over a fence.",
        "The musicians play guitar while people dance.",
    ],
}
FIFTEEN_WORDS = {
    "de_en": "Ein Mann mit einem blauen Hut verkauft am Morgen frisches Obst auf dem belebten Markt.",
    "en_de": "A man with a blue hat sells fresh fruit at the busy market every morning.",
}
# Unusual input a reader may type: spaces everywhere, full-width and composed characters, ligatures,
# characters the vocabulary lacks, digits, an empty string.
ODD = [
    "",
    "   ",
    "  Ein   Hund  ",
    "Ｅｉｎ Ｈｕｎｄ ① ﬁ",
    "Cafe\u0301 na\u00efve e\u0301",
    "你好 世界 🙂 x",
    "\tTab\nnewline\u00a0nbsp",
    "1234 5,6 7.8 9%",
    "Café café Cafe\u0301 Über U\u0308ber",  # accents composed and decomposed
    "Ｆｕｌｌ－ｗｉｄｔｈ　ｓｐａｃｅ ｶﾞ ～",  # full-width and half-width
    "ﬁ ﬂ ﬀ ﬃ Æ œ ² ½ ™ ㎏",  # ligatures and compatibility characters
    "👨‍👩‍👧 👍🏽 🇩🇪 ☺️",  # emoji, with joiners, skin tones, flags and variation selectors
]
# A letter, ligature, full-width or compatibility character, or emoji, followed by one combining mark:
# where NFKC composes and where SentencePiece's map does not.
BASES = [*"aeiouAEOUnNcCsSyYzZß", *"ÄÖÜäöüéèçñ", *"ＥｅＡ１ﬁﬂﬀﬃÆœ①²½™㎏ｶﾞﾟ～🙂👍ǅÅ\u212bª", "👍🏽"]
MARKS = ["\u0301", "\u0300", "\u0302", "\u0303", "\u0308", "\u030a", "\u0327", "\u0323", "\u030c", "\u3099", "\ufe0f"]
WITH_MARKS = [f"x {base}{mark} y" for base in BASES for mark in MARKS]


@pytest.fixture(scope="module")
def site(open_page, serve_folder):
    if not (SITE / PAGE).is_file() or not MODELS.is_dir():
        pytest.skip(f"no built translator page in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    with serve_folder(SITE) as base:
        yield open_page, base


# Page JavaScript: `until(ok)` resolves once `ok()` is true, polling every 20 ms; it rejects when
# `ok` throws or after 120 s, with what the page's status lines said then. `choose(id, value)` picks
# `value` in the menu `id` as a reader does: the page hears of it through the menu's change event.
HELPERS = """
const statusLines = () => [...document.querySelectorAll('[id$="-status"]')].map((e) => `"${e.textContent}"`).join(", ");
const until = (ok) => new Promise((resolve, reject) => {
  const start = Date.now();
  const poll = () => {
    try {
      if (ok()) resolve();
      else if (Date.now() - start > 120000) {
        reject(new Error(`the page did not answer within 120 s; its status lines said ${statusLines()}`));
      } else setTimeout(poll, 20);
    } catch (error) {
      reject(error);
    }
  };
  poll();
});
const choose = (id, value) => {
  const menu = document.getElementById(id);
  menu.value = value;
  menu.dispatchEvent(new Event("change"));
};
"""


def run(site, body: str, timeout: float = 300):
    """What `body`, the body of an async function that can call the helpers, returns on the translator page."""
    open_page, base = site
    script = f"(async () => {{ {HELPERS} {body} }})()"
    report = open_page(base + PAGE, timeout=timeout, script=script)
    assert report.console_errors == []
    assert report.external_requests(base) == []
    return report.value


def tokenizer_script(direction: str, texts: list[str], ids: list[list[int]]) -> str:
    return f"""
      const {{ Translator }} = await import("../_static/translator/translator.js");
      const t = (await Translator.load("{direction}")).tokenizer;
      const texts = {json.dumps(texts)}, ids = {json.dumps(ids)};
      return {{ encoded: texts.map((s) => t.encode(s)), decoded: ids.map((x) => t.decode(x)) }};
    """


def exported(direction: str) -> OnnxTranslator:
    """The package's Python translator on the very files the site serves."""
    return OnnxTranslator(MODELS / direction)


def test_the_browser_tokenizer_gives_sentencepiece_ids_on_every_test_sentence(site):
    """Every test sentence, odd input, each letter with a combining mark, and every key of SentencePiece's
    character map inside a word: the browser's NFKC and the map's exceptions give SentencePiece's ids."""
    from sentencepiece import sentencepiece_model_pb2

    from book_tools.web.export import _charsmap_table

    spm = exported("de_en").tokenizer
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(spm.to_bytes())
    keys = [f"a{key}b" for key in _charsmap_table(proto.normalizer_spec.precompiled_charsmap)]
    texts = load_multi30k("test_2016_flickr", "de") + load_multi30k("test_2016_flickr", "en") + ODD + WITH_MARKS + keys
    rng = random.Random(0)
    random_ids = [[rng.randrange(len(spm)) for _ in range(rng.randrange(1, 12))] for _ in range(500)]
    random_ids += [[3, 50, 3], [1, 3], [0, 0, 2], []]
    got = run(site, tokenizer_script("de_en", texts, random_ids))
    wrong = [(t, g, spm.encode(t)) for t, g in zip(texts, got["encoded"], strict=True) if g != spm.encode(t)]
    assert not wrong, f"{len(wrong)} of {len(texts)} sentences tokenized differently, e.g. {wrong[:3]}"
    wrong = [(i, g, spm.decode(i)) for i, g in zip(random_ids, got["decoded"], strict=True) if g != spm.decode(i)]
    assert not wrong, f"{len(wrong)} of {len(random_ids)} id lists decoded differently, e.g. {wrong[:3]}"


TRANSLATE = """
  const status = document.getElementById("translator-status");
  const done = () => Number(status.dataset.done || 0);
  const translated = (before) => {
    if (status.dataset.error) throw new Error(status.dataset.error);
    return done() > before;
  };
  const jobs = JOBS, results = [];
  for (const [direction, text] of jobs) {
    choose("translator-direction", direction);
    document.getElementById("translator-input").value = text;
    const before = done();
    document.getElementById("translator-button").click();
    await until(() => translated(before));
    results.push({
      text: document.getElementById("translator-output").textContent,
      rows: document.querySelectorAll("#translator-heatmap tr.output-row").length,
      columns: document.querySelectorAll("#translator-heatmap tr:first-child th.source").length,
      ms: Number(status.dataset.ms),
      model: document.getElementById("translator-model").textContent,
    });
  }
  return results;
"""


def test_the_page_translates_as_the_package_does_in_python(site):
    jobs = [[direction, text] for direction, texts in SENTENCES.items() for text in texts]
    got = run(site, TRANSLATE.replace("JOBS", json.dumps(jobs)))
    for direction in SENTENCES:
        python = exported(direction)
        results = [r for (d, _), r in zip(jobs, got, strict=True) if d == direction]
        for text, result in zip(SENTENCES[direction], results, strict=True):
            src = python.tokenizer.encode(text, eos=True)
            ids = python.greedy(torch.tensor([src]))[0]  # without the final <eos>
            assert result["text"] == python.tokenizer.decode(ids)
            assert (result["rows"], result["columns"]) == (len(ids) + 1, len(src))  # a row per output token
        info = json.loads((MODELS / direction / "model.json").read_text(encoding="utf-8"))
        assert f"BLEU {info['bleu']['sacrebleu_cased']:.1f}" in results[0]["model"]


def test_a_fifteen_word_sentence_takes_under_a_second(site, capsys):
    jobs = [[direction, text] for direction, text in FIFTEEN_WORDS.items() for _ in range(11)]
    got = run(site, TRANSLATE.replace("JOBS", json.dumps(jobs)))
    lines = []
    for direction, text in FIFTEEN_WORDS.items():
        times = [r["ms"] for (d, _), r in zip(jobs, got, strict=True) if d == direction][1:]  # after a warm-up
        assert len(text.split()) == 15
        lines.append(f"{direction}: 15 words, median {statistics.median(times):.0f} ms, max {max(times):.0f} ms")
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_an_empty_box_asks_for_a_sentence(site):
    status = run(
        site,
        """
          document.getElementById("translator-input").value = "   ";
          document.getElementById("translator-button").click();
          return document.getElementById("translator-status").textContent;
        """,
    )
    assert status == "Type a sentence to translate first."


def test_the_model_loads_while_the_reader_reads(site):
    """No click needed: the page loads the chosen direction's model when it opens, and says so."""
    status = run(
        site,
        """
          const status = document.getElementById("translator-status");
          await until(() => status.textContent.startsWith("The model is loaded"));
          return status.textContent;
        """,
    )
    assert status == "The model is loaded: press Translate, or type a sentence of your own first."


# A page script: the next fetch of English→German's model.json fails, as on a dropped connection.
FAIL_EN_DE_LOAD_ONCE = """
const realFetch = window.fetch;
let failures = 1;
window.fetch = (url, ...rest) => {
  const fail = String(url).endsWith("/en_de/model.json") && failures-- > 0;
  return fail ? Promise.reject(new TypeError("Failed to fetch")) : realFetch(url, ...rest);
};
"""


# A page script: English→German's model.json waits until the page's script calls `releaseLoad()`.
HOLD_EN_DE_LOAD = """
const realFetch = window.fetch;
let releaseLoad;
const released = new Promise((resolve) => { releaseLoad = resolve; });
window.fetch = async (url, ...rest) => {
  if (String(url).endsWith("/en_de/model.json")) await released;
  return realFetch(url, ...rest);
};
"""


def test_an_empty_box_keeps_its_message_when_the_model_arrives(site):
    """A background load that ends after the reader pressed Translate leaves the press's message."""
    got = run(
        site,
        HOLD_EN_DE_LOAD
        + """
          const status = document.getElementById("translator-status");
          choose("translator-direction", "en_de");  // starts the load, held
          document.getElementById("translator-input").value = "   ";
          document.getElementById("translator-button").click();
          const asked = status.textContent;
          releaseLoad();
          const page = document.querySelector('script[src*="page.js"]').src;
          const { Translator } = await import(page.replace("page.js", "translator.js"));
          await Translator.loadOnce("en_de");  // the page's own wait on this load has run first
          await new Promise((resolve) => setTimeout(resolve, 0));
          return { asked, after: status.textContent };
        """,
    )
    assert got["asked"] == got["after"] == "Type a sentence to translate first."


def test_a_model_that_failed_to_load_is_loaded_again_on_the_next_try(site):
    """A network failure while loading shows a line, and pressing Translate again loads the model."""
    got = run(
        site,
        FAIL_EN_DE_LOAD_ONCE
        + """
          const status = document.getElementById("translator-status");
          const button = document.getElementById("translator-button");
          // A sentence of its own: the box's first example may not have arrived yet (on a slow machine
          // the page's load event comes first), and an empty box is refused before any load.
          document.getElementById("translator-input").value = "A dog runs on the beach.";
          choose("translator-direction", "en_de");  // starts the load that fails; Translate awaits it
          button.click();
          await until(() => status.dataset.error && !button.disabled);
          const failed = status.textContent;
          button.click();
          await until(() => status.dataset.done === "1");
          const output = document.getElementById("translator-output").textContent;
          return { failed, error: status.dataset.error ?? null, output };
        """,
    )
    assert got["failed"] == "The translator could not run: Failed to fetch"
    assert got["error"] is None and got["output"]


RUNAWAY = (
    "Ich habe heute keine Zeit, weil ich arbeiten muss."  # runs to the length limit (results/translator/confidence.txt)
)


def test_examples_confidence_and_a_sentence_that_did_not_finish(site, mirror):
    """An example fills the box and translates; the confidence is the package's; the warning fires outside
    the domain and not on a test sentence; a runaway output is reported as one that did not finish."""
    got = run(
        site,
        f"""
          const $ = (id) => document.getElementById(id);
          await until(() => document.querySelectorAll("#translator-examples button").length === 5);
          const buttons = [...document.querySelectorAll("#translator-examples button")];
          const translate = async (act) => {{
            const before = Number($("translator-status").dataset.done || 0);
            act();
            await until(() => Number($("translator-status").dataset.done || 0) > before);
            const line = $("translator-confidence");
            return {{ input: $("translator-input").value, output: $("translator-output").textContent,
                      status: $("translator-status").textContent, finished: $("translator-status").dataset.finished,
                      confidence: Number(line.dataset.confidence), warned: line.dataset.warned,
                      line: line.textContent }};
          }};
          const results = [
            await translate(() => buttons[0].click()),  // a test sentence
            await translate(() => buttons[3].click()),  // outside the domain
            await translate(() => {{
              $("translator-input").value = {json.dumps(RUNAWAY)};
              $("translator-button").click();
            }}),
          ];
          return {{ labels: buttons.map((b) => b.textContent), results }};
        """,
    )
    labels, (test, outside, runaway) = got["labels"], got["results"]
    test_set, train = set(load_multi30k("test_2016_flickr", "de")), set(load_multi30k("train", "de"))
    assert all(label in test_set and label not in train for label in labels[:3]), labels
    assert all(label.endswith("(outside the domain)") for label in labels[3:]), labels
    assert test["input"] == labels[0] and outside["input"] == labels[3].removesuffix(" (outside the domain)")
    translator = exported("de_en")
    threshold = json.loads((MODELS / "de_en" / "model.json").read_text(encoding="utf-8"))[
        "confidence_threshold"
    ]  # as served
    for shown in (test, outside, runaway):
        expected = translator.translate_one(shown["input"])
        assert shown["output"] == expected.text and shown["finished"] == str(expected.finished).lower()
        assert abs(shown["confidence"] - expected.confidence) < 1e-3, (shown, expected)
        assert shown["warned"] == str(expected.confidence < threshold).lower()
    assert test["warned"] == "false" and outside["warned"] == "true" and "is unsure" in outside["line"]
    assert runaway["finished"] == "false" and runaway["status"].startswith("Did not finish: ")
    assert test["status"].endswith("on this computer.") and runaway["output"]  # the cut output is still shown


# -- Look inside the translator (book/inside.md) ------------------------------------------------
INSIDE = "book/inside.html"
INSIDE_SENTENCE = "Ein Mann mit einer Sonnenbrille fährt auf einem Roller."
# Drives the page as a reader would (set a box, press a button) and waits until it has redrawn.
INSIDE_DRIVER = (
    HELPERS
    + """
const $ = (id) => document.getElementById(id);
const settle = () => until(() => $("inside").dataset.busy === "0");
const press = async (id) => { $(id).click(); await settle(); };  // a click's handler marks the page busy at once
const bars = () => [...document.querySelectorAll("#inside-chart .inside-bar")].map(
  (b) => [Number(b.dataset.id), Number(b.dataset.p)]);
const heatmap = () => [...document.querySelectorAll("#inside-heatmap tr.output-row")].map(
  (row) => [...row.querySelectorAll("td")].map((td) => Number(td.dataset.w)));
const view = (kind, layer, head) => {
  for (const [id, value] of [["inside-kind", kind], ["inside-layer", layer], ["inside-head", head]]) {
    choose(id, value);
  }
  return heatmap();
};
"""
)


def inside(site, body: str, timeout: float = 300):
    open_page, base = site
    script = f"(async () => {{ {INSIDE_DRIVER} await settle(); {body} }})()"  # settle: the page's module has run
    report = open_page(base + INSIDE, timeout=timeout, script=script)
    assert report.console_errors == []
    assert report.external_requests(base) == []
    return report.value


@pytest.fixture(scope="module")
def inside_site(site):
    if not (SITE / INSIDE).is_file():
        pytest.skip(f"no built inside page in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    return site


def test_the_inside_page_says_when_a_load_failed_and_start_tries_again(inside_site):
    """A model that fails to load in the background says so with what to do; Start then loads it."""
    got = inside(
        inside_site,
        FAIL_EN_DE_LOAD_ONCE
        + """
        choose("inside-direction", "en_de");
        await until(() => $("inside-status").classList.contains("inside-error"));
        const failed = $("inside-status").textContent;
        $("inside-input").value = "A dog runs on the beach.";
        await press("inside-encode");
        return { failed, error: $("inside-status").classList.contains("inside-error"), bars: bars().length };
        """,
    )
    assert got["failed"] == "The model could not load (Failed to fetch); press Start to try again."
    assert not got["error"] and got["bars"] == 10


def test_the_inside_page_keeps_a_readers_message_when_the_model_arrives(inside_site):
    """A background load that ends after the reader pressed a button leaves the button's message."""
    got = inside(
        inside_site,
        HOLD_EN_DE_LOAD
        + """
        choose("inside-direction", "en_de");
        const loading = $("inside-status").textContent;
        $("inside-input").value = "   ";
        await press("inside-encode");
        releaseLoad();
        await until(() => $("inside").dataset.ready_en_de);
        return { loading, after: $("inside-status").textContent };
        """,
    )
    assert got["loading"].startswith("Loading the model")
    assert got["after"] == "Type a sentence first."


def test_the_inside_page_loads_the_chosen_model_when_it_opens(inside_site):
    """No click needed: the default direction's model loads on opening, the other's when it is chosen."""
    got = inside(
        inside_site,
        """
        const loaded = (direction) => until(() => $("inside").dataset["ready_" + direction]);
        const before = $("inside").dataset.ready_en_de ?? null;
        await loaded("de_en");
        const status = $("inside-status").textContent;
        choose("inside-direction", "en_de");
        const switched = $("inside-status").textContent;
        await loaded("en_de");
        await press("inside-encode");
        const error = $("inside-status").dataset.message ?? null;
        return { before, status, switched, step: $("inside").dataset.step, error };
        """,
    )
    assert got["before"] is None  # en_de is not fetched until the reader picks it
    assert got["status"] == "The model is loaded: press Start, or type a sentence of your own first."
    assert got["switched"].startswith("Loading the model")  # not the other direction's "loaded"
    assert got["error"] is None and got["step"] == "1"  # Start drew the first step with the preloaded model


def test_the_inside_page_steps_as_the_package_decodes(inside_site):
    """Greedy steps, the first step's top ten probabilities and the attention rows equal those of the files the
    site serves, in the precision it serves them, run by the package in Python (ONNX Runtime)."""
    got = inside(
        inside_site,
        f"""$("inside-input").value = {json.dumps(INSIDE_SENTENCE)};
        await press("inside-encode");
        const first = bars();
        $("inside-temperature").value = "0.5"; $("inside-topk").value = "5";
        $("inside-topk").dispatchEvent(new Event("input"));
        const sharp = bars();
        $("inside-temperature").value = "1"; $("inside-topk").value = "";
        $("inside-topk").dispatchEvent(new Event("input"));
        await press("inside-finish");
        return {{
          prefix: [...document.querySelectorAll("#inside-output .inside-token")].map((t) => t.textContent),
          text: $("inside-text").textContent,
          first,
          sharp,
          cross: view("cross", "1", "2"),
          causal: view("self", "mean", "mean"),
          encoder: view("encoder", "0", "3"),
        }};""",
    )
    python = exported("de_en")
    tokenizer = python.tokenizer
    src = torch.tensor([tokenizer.encode(INSIDE_SENTENCE, eos=True)])
    ids = python.greedy(src)[0]
    assert got["text"] == tokenizer.decode(ids) and len(got["prefix"]) == len(ids) + 2  # <bos> ... <eos>
    prefix = np.array([[1, *ids, 2]])
    memory, encoder = python.encoder.run(["memory", "encoder_attention"], {"src": src.numpy()})
    (first,) = python.decoder.run(["logits"], {"tgt": prefix[:, :1], "memory": memory, "src": src.numpy()})
    cross, causal = python.decoder.run(
        ["cross_attention", "self_attention"], {"tgt": prefix, "memory": memory, "src": src.numpy()}
    )  # (1, layers, heads, len(prefix), len(src)) and (1, layers, heads, len(prefix), len(prefix))
    logits = torch.from_numpy(first[0])
    logits[NEVER_GENERATED] = float("-inf")
    probs = logits.softmax(-1)
    top10 = probs.topk(10)
    assert [i for i, _ in got["first"]] == top10.indices.tolist()
    assert np.allclose([p for _, p in got["first"]], top10.values.numpy(), atol=1e-3)
    sharp = (logits / 0.5).topk(5)  # temperature 0.5 among the top 5, as decoding.sample_token draws
    assert [i for i, _ in got["sharp"]] == sharp.indices.tolist()
    assert np.allclose([p for _, p in got["sharp"]], sharp.values.softmax(-1).numpy(), atol=1e-3)
    assert np.allclose(got["cross"], cross[0, 1, 2], atol=1e-3)  # (tgt, src): layer 2, head 3
    assert np.allclose(got["causal"], causal[0].mean((0, 1)), atol=1e-3)
    assert np.triu(np.array(got["causal"]), k=1).max() == 0  # nothing above the diagonal: the causal mask
    assert np.allclose(got["encoder"], encoder[0, 0, 3], atol=1e-3)


def test_the_inside_pages_confidence_is_the_translator_pages(inside_site):
    """Decoded greedily to the end, the inside page shows the confidence the package computes (1e-3), warns as
    the translator page does, and says when an output was cut at the length limit."""
    got = inside(
        inside_site,
        f"""const decode = async (text) => {{
          $("inside-input").value = text;
          await press("inside-encode");
          await press("inside-greedy");
          const early = $("inside-confidence").textContent;
          await press("inside-finish");
          const line = $("inside-confidence");
          return {{ early, line: line.textContent, confidence: Number(line.dataset.confidence),
                    warned: line.dataset.warned, status: $("inside-status").textContent }};
        }};
        return [await decode({json.dumps(INSIDE_SENTENCE)}), await decode({json.dumps(RUNAWAY)})];""",
    )
    translator = exported("de_en")
    threshold = json.loads((MODELS / "de_en" / "model.json").read_text(encoding="utf-8"))["confidence_threshold"]
    for shown, text in zip(got, (INSIDE_SENTENCE, RUNAWAY), strict=True):
        expected = translator.translate_one(text)
        assert shown["early"].startswith("Confidence so far ")
        assert abs(shown["confidence"] - expected.confidence) < 1e-3, (shown, expected)
        assert shown["warned"] == str(expected.confidence < threshold).lower()
    assert got[0]["status"] == "Finished: <eos> ends the sentence."
    assert got[1]["status"].startswith("Did not finish: ") and not translator.translate_one(RUNAWAY).finished


def test_the_inside_page_explains_bad_input(inside_site):
    long = " ".join(["Ein Hund läuft."] * 170)  # about 500 words
    got = inside(
        inside_site,
        f"""const out = {{}};
        const message = () => $("inside-status").dataset.message || $("inside-chart").textContent;
        $("inside-input").value = "   "; await press("inside-encode"); out.empty = message();
        $("inside-input").value = {json.dumps(long)}; await press("inside-encode"); out.long = message();
        $("inside-input").value = "Ein Hund 你好 🙂."; await press("inside-encode");
        out.unknown = $("inside-status").textContent;
        for (const [key, id, value] of [["t0", "inside-temperature", "0"], ["tneg", "inside-temperature", "-1"],
                                         ["k0", "inside-topk", "0"]]) {{
          $("inside-temperature").value = "1"; $("inside-topk").value = "";
          $(id).value = value; $(id).dispatchEvent(new Event("input"));
          out[key] = $("inside-chart").textContent;
        }}
        $("inside-topk").value = "1"; $("inside-topk").dispatchEvent(new Event("input"));
        out.k1 = bars();
        const controls = [...document.querySelectorAll("#inside :is(button, select, input, textarea)")];
        out.keyboard = controls.every((c) => c.tabIndex >= 0) && !document.querySelector("#inside [onclick]");
        return out;""",
    )
    assert got["empty"] == "Type a sentence first."
    assert got["long"].startswith("This page reads up to 100 tokens")
    assert "became <unk>" in got["unknown"]
    assert got["t0"].startswith("Temperature must be a number above 0") and got["tneg"] == got["t0"]
    assert got["k0"].startswith("Top-k must be a whole number of at least 1")
    assert len(got["k1"]) == 1 and got["k1"][0][1] == 1.0  # top-k 1: all probability on one token
    assert got["keyboard"]  # native buttons, selects and inputs: every control works from the keyboard


class ServedModel:
    """The files the site serves, in Python, as the model :func:`~transformer_lib.decoding.beam_search` searches
    with: ``encode`` gives the memory and, as the "mask", the source ids (the exported decoder masks padding
    itself); ``decode`` scores the next token of every prefix, without a cache."""

    def __init__(self, translator: OnnxTranslator) -> None:
        self.translator = translator
        self.config = SimpleNamespace(max_len=translator.info["config"]["max_len"])

    def encode(self, src):
        return torch.from_numpy(self.translator.encode(src)), src

    def decode(self, tgt, memory, src, cache=None, last=False):
        assert cache is None  # beam_search(..., use_cache=False)
        return self.translator.next_logits(tgt, memory.numpy(), src)[0][:, None]  # (batch, 1, vocab)


def test_the_inside_pages_beam_search_is_the_packages(inside_site):
    """The page's beam search picks what decoding.beam_search picks on the files the site serves, for two beam
    sizes and penalties."""
    jobs = [(text, k, alpha) for text in SENTENCES["de_en"][:3] for k, alpha in ((5, 0.6), (2, 1.0))]
    got = inside(
        inside_site,
        f"""const out = [];
        for (const [text, k, alpha] of {json.dumps(jobs)}) {{
          $("inside-input").value = text; await press("inside-encode");
          $("inside-beam").value = String(k); $("inside-alpha").value = String(alpha);
          await press("inside-beam-run");
          const rows = [...document.querySelectorAll("#inside-beam-result tr[data-text]")];
          out.push({{ winner: document.querySelector("#inside-beam-result tr.inside-winner").dataset.text,
                      hypotheses: rows.length, steps: document.querySelectorAll("details tr").length }});
        }}
        return out;""",
    )
    python = exported("de_en")
    model, tokenizer = ServedModel(python), python.tokenizer
    for (text, k, alpha), result in zip(jobs, got, strict=True):
        src = torch.tensor([tokenizer.encode(text, eos=True)])
        expected = beam_search(model, src, beam_size=k, alpha=alpha, use_cache=False)[0]
        assert result["winner"] == tokenizer.decode(expected), (text, k, alpha)
        assert result["hypotheses"] == k and result["steps"] >= len(expected) + 1


# -- The translator page for every reader: keyboard, screen reader, languages, both themes ------
READER = """
  const $ = (id) => document.getElementById(id);
  const status = $("translator-status");
  const controls = [...document.querySelectorAll("#translator :is(select, textarea, button, [tabindex])")];
  const order = { input: controls.indexOf($("translator-input")), button: controls.indexOf($("translator-button")),
                  positive: controls.filter((c) => c.tabIndex > 0).length };
  await until(() => document.querySelectorAll("#translator-examples button span[lang]").length === 5);
  const lang = () => ({ input: $("translator-input").lang, output: $("translator-output").lang,
    examples: [...new Set([...document.querySelectorAll("#translator-examples button span")].map((s) => s.lang))] });
  const before = lang();
  $("translator-input").value = "Ein Hund rennt über eine Wiese.";
  $("translator-button").click();
  await until(() => Number(status.dataset.done || 0) > 0);
  const table = $("translator-heatmap");
  const rows = [...table.querySelectorAll("tr.output-row")].map((row) => [...row.querySelectorAll("td")].map(
    (td) => [Number(td.dataset.w), td.textContent]));
  const scroll = table.closest(".translator-scroll");
  const box = { tabIndex: scroll.tabIndex, role: scroll.getAttribute("role"),
                name: $(scroll.getAttribute("aria-labelledby")).textContent.replace(/\\s+/g, " ").trim() };
  const strongest = [...$("translator-strongest").children].map((li) => li.textContent);
  const headers = { rows: [...table.querySelectorAll("th.output")].map((th) => [th.scope, th.lang]),
                    columns: [...table.querySelectorAll("th.source")].map((th) => [th.scope, th.lang]),
                    sources: [...table.querySelectorAll("th.source")].map((th) => th.textContent),
                    outputs: [...table.querySelectorAll("th.output")].map((th) => th.textContent) };
  const translated = lang();
  choose("translator-direction", "en_de");
  await until(() => document.querySelector("#translator-examples button span[lang='en']"));
  const switched = lang();
  const themes = {};
  const probe = document.createElement("td");
  probe.style.setProperty("--w", "1");
  table.querySelector("tr.output-row").append(probe);
  for (const theme of ["light", "dark"]) {
    document.documentElement.dataset.theme = theme;
    themes[theme] = { caption: $("translator-caption").innerText.replace(/\\s+/g, " "),
                      full: getComputedStyle(probe).backgroundColor,
                      page: getComputedStyle(document.body).backgroundColor };
  }
  return { order, before, translated, switched, rows, box, strongest, headers, themes };
"""


def luminance(css: str) -> float:
    """The relative luminance (WCAG 2) of an opaque CSS rgb() colour."""
    channels = [int(c) / 255 for c in re.findall(r"[\d.]+", css)[:3]]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_page_works_from_the_keyboard_a_screen_reader_and_both_themes(site):
    got = run(site, READER)
    assert got["order"]["input"] < got["order"]["button"] and got["order"]["positive"] == 0  # type, then Translate
    assert got["before"] == {"input": "de", "output": "en", "examples": ["de"]}
    assert got["translated"] == got["before"]
    assert got["switched"] == {"input": "en", "output": "en", "examples": ["en"]}  # the output is still English
    # The heatmap as a data table: every cell says its weight, every header its scope and language.
    rows = got["rows"]
    assert rows and all(text == f"{w:.2f}" for row in rows for w, text in row)
    assert {tuple(h) for h in got["headers"]["rows"]} == {("row", "en")}
    assert {tuple(h) for h in got["headers"]["columns"]} == {("col", "de")}
    assert got["box"]["tabIndex"] == 0 and got["box"]["role"] == "region"
    assert got["box"]["name"].startswith("Cross-attention weight")
    # In words: each output token's most attended source token, and its weight.
    sources, outputs = got["headers"]["sources"], got["headers"]["outputs"]
    expected = []
    for output, row in zip(outputs, rows, strict=True):
        best = max(range(len(row)), key=lambda c: row[c][0])
        expected.append(f"{output} → {sources[best]} ({row[best][0]:.2f})")
    assert got["strongest"] == expected
    # The full colour stands out from the page in both themes (4.5:1, beyond WCAG's 3:1 for graphics),
    # and the caption names the direction of the ramp that each theme shows.
    for theme, word in (("light", "darker is more"), ("dark", "brighter is more")):
        seen = got["themes"][theme]
        assert word in seen["caption"], seen
        assert contrast(seen["full"], seen["page"]) >= 4.5, seen


# -- What the translator downloads: only the direction asked for, once, and nothing it cannot run ----
LOADED = """async () => {
  const status = document.getElementById("translator-status");
  const start = Date.now();
  const direction = document.getElementById("translator-direction").value;
  while (!(status.dataset.loaded ?? "").split(" ").includes(direction)) {  // its model loaded
    if (status.dataset.error || Date.now() - start > 120000) throw new Error(status.textContent);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return direction;
}"""
TRANSLATE_ONE = """async (text) => {
  const status = document.getElementById("translator-status");
  const before = Number(status.dataset.done || 0);
  document.getElementById("translator-input").value = text;
  document.getElementById("translator-button").click();
  const start = Date.now();
  while (Number(status.dataset.done || 0) === before) {
    if (status.dataset.error || Date.now() - start > 120000) throw new Error(status.textContent);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return document.getElementById("translator-output").textContent;
}"""
SWITCH_TO = f"""async (direction) => {{  // the reader picks `direction`; resolves once its model is loaded
  const menu = document.getElementById("translator-direction");
  menu.value = direction;
  menu.dispatchEvent(new Event("change"));
  await ({LOADED})();
}}"""
MODEL_FILES = (".onnx", ".bin", ".wasm", ".json.gz")  # the bytes that matter: models, the runtime, the tokenizer


@pytest.fixture(scope="module")
def logged_site(site, serve_folder):
    """The site on a server that logs what it sends: ``(base, log)``."""
    log = []
    with serve_folder(SITE, log) as base:
        yield base, log


def visit(context, url: str, script: str | None = None, arg=None):
    """Open ``url`` in a new page of ``context``, wait until the model is loaded, run ``script``; returns
    (the direction the page chose, the script's value, the URLs the page requested, its errors)."""
    page = context.new_page()
    requests, errors = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.goto(url, wait_until="load")
    direction = page.evaluate(LOADED)
    value = page.evaluate(script, arg) if script else None
    page.wait_for_timeout(200)
    page.close()
    return direction, value, requests, errors


def model_paths(requests: list[str]) -> list[str]:
    """The model files, the runtime's WebAssembly and model.json among the requests, as paths in _static/translator."""
    marker = "_static/translator/"
    return sorted({u.split(marker)[1] for u in requests if marker in u and u.endswith((*MODEL_FILES, ".json"))})


def test_only_the_direction_asked_for_is_downloaded(logged_site, browser, capsys):
    """At start the default direction's model (or the address's, translator.html#en_de, or the one the reader
    chose last time), nothing of the other; the other when the reader picks it. Prints the bytes of each."""
    base, log = logged_site
    shared = ["models/tokenizer.json.gz", "ort/ort-wasm-simd-threaded.wasm"]
    expected = {
        d: sorted([*shared, *(f"models/{d}/{f}" for f in (*EXPORTED, "model.json"))]) for d in ("de_en", "en_de")
    }
    lines = []
    for address, direction in (("", "de_en"), ("#en_de", "en_de")):
        context = browser.new_context()
        try:
            log.clear()
            chosen, _, requests, errors = visit(context, base + PAGE + address)
            sent = [s.body_bytes for s in log if s.status == 200]
            # the reader picks the other direction: only its own files come
            other = "en_de" if direction == "de_en" else "de_en"
            _, _, switched, more_errors = visit(context, base + PAGE + address, SWITCH_TO, other)
            _, _, remembered, _ = visit(context, base + PAGE)  # the next visit opens with the reader's last choice
        finally:
            context.close()
        assert chosen == direction and errors == [] and more_errors == []
        assert model_paths(requests) == expected[direction], requests
        assert not [p for p in model_paths(switched) if direction in p and p.endswith((".onnx", ".bin"))]
        assert {f"models/{other}/{f}" for f in EXPORTED} <= set(model_paths(switched))
        assert f"models/{other}/model.json" in model_paths(remembered)
        assert not [p for p in model_paths(remembered) if f"{direction}/" in p]
        lines.append(
            f"translator.html{address}: {direction}'s model loaded after {len(sent)} requests, "
            f"{sum(sent) / 1e6:.1f} MB sent; none for {other}"
        )
    with capsys.disabled():
        print("\n" + "\n".join(lines))


# A page script: German→English's encoder never arrives unless its download is stopped (then it records that).
HOLD_DE_EN_ENCODER = """
const realFetch = window.fetch;
window.stopped = [];
window.fetch = (url, init = {}) => {
  if (!String(url).endsWith("/de_en/encoder.onnx")) return realFetch(url, init);
  return new Promise((resolve, reject) => init.signal?.addEventListener("abort", () => {
    window.stopped.push(String(url));
    reject(init.signal.reason);
  }));
};
"""


def test_choosing_the_other_direction_stops_the_first_ones_download(logged_site, browser):
    """A reader who picks English→German while German→English still arrives downloads it no further, sees
    no error, and translates; picking German→English again loads it."""
    base, _ = logged_site
    context = browser.new_context()
    try:
        page = context.new_page()
        page.add_init_script(HOLD_DE_EN_ENCODER)
        page.goto(base + PAGE, wait_until="load")
        page.evaluate("""async () => {
            while (!performance.getEntriesByType("resource").some((e) => e.name.includes("/de_en/decoder.onnx")))
              await new Promise((resolve) => setTimeout(resolve, 20));
            const menu = document.getElementById("translator-direction");
            menu.value = "en_de"; menu.dispatchEvent(new Event("change"));
        }""")
        page.evaluate(LOADED)
        output = page.evaluate(TRANSLATE_ONE, SENTENCES["en_de"][0])
        stopped = page.evaluate("window.stopped")
        status = page.evaluate("document.getElementById('translator-status').dataset.error ?? null")
    finally:
        context.close()
    assert stopped and stopped[0].endswith("/de_en/encoder.onnx")
    assert status is None
    python = exported("en_de")
    src = python.tokenizer.encode(SENTENCES["en_de"][0], eos=True)
    assert output == python.tokenizer.decode(python.greedy(torch.tensor([src]))[0])


def test_a_second_visit_downloads_no_model_and_works_offline(logged_site, browser, capsys):
    """The models, the tokenizer and the runtime's WebAssembly are kept in Cache Storage: a second visit in
    the same browser requests none of them, and translates with every model file cut off from the network."""
    base, log = logged_site
    context = browser.new_context()
    try:
        log.clear()
        _, first, _, errors = visit(context, base + PAGE, TRANSLATE_ONE, SENTENCES["de_en"][0])
        first_bytes = sum(s.body_bytes for s in log if s.status == 200)
        kept = context.new_page()
        kept.goto(base + PAGE, wait_until="load")
        keys = kept.evaluate("""async () => {
            const cache = await caches.open("transformer-book-translator");
            return (await cache.keys()).map((r) => r.url.split("_static/translator/")[1]);
        }""")
        kept.evaluate(LOADED)
        kept.close()
        # the second visit: models, tokenizer, runtime and model.json cannot come from the network
        context.route("**/_static/translator/models/**", lambda route: route.abort("internetdisconnected"))
        context.route("**/*.wasm", lambda route: route.abort("internetdisconnected"))
        log.clear()
        _, second, requests, more_errors = visit(context, base + PAGE, TRANSLATE_ONE, SENTENCES["de_en"][0])
        second_bytes = sum(s.body_bytes for s in log if s.status == 200)  # the page itself: routes bypass HTTP cache
    finally:
        context.close()
    assert errors == []
    assert [e for e in more_errors if "ERR_INTERNET_DISCONNECTED" not in e] == []  # model.json's failed fetch
    assert second == first
    assert [u for u in requests if u.endswith(MODEL_FILES)] == []
    versions = json.loads((MODELS / "de_en" / "model.json").read_text(encoding="utf-8"))["files"]
    assert f"models/de_en/encoder.onnx?v={versions['encoder.onnx']}" in keys, keys
    assert f"models/de_en/shared.bin?v={versions['shared.bin']}" in keys, keys
    assert any(k.startswith("ort/ort-wasm-simd-threaded.wasm?v=") for k in keys), keys
    with capsys.disabled():
        print(
            f"\nfirst visit {first_bytes / 1e6:.1f} MB sent; second visit {second_bytes / 1e3:.0f} KB (the page, "
            "its scripts and styles; models, tokenizer and runtime from Cache Storage)"
        )


# Once the model is loaded, the page's service worker has kept its files: resolves to how many.
OFFLINE_READY = """async () => {
  const status = document.getElementById("translator-status");
  const start = Date.now();
  while (!status.dataset.offline) {
    if (Date.now() - start > 60000) throw new Error("the service worker kept nothing within 60 s");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return Number(status.dataset.offline);
}"""


def test_the_page_opens_and_translates_offline_once_loaded(browser, serve_folder):
    """A reader opens the page online and translates; the page's service worker keeps its files. Then the
    network goes (the browser offline, the site's server stopped): the page reloads, its worker starts, and
    the same sentence gets the same translation."""
    if not (SITE / PAGE).is_file() or not MODELS.is_dir():
        pytest.skip(f"no built translator page in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    context = browser.new_context()
    errors = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        with serve_folder(SITE) as base:
            page.goto(base + PAGE, wait_until="load")
            page.evaluate(LOADED)
            online = page.evaluate(TRANSLATE_ONE, SENTENCES["de_en"][0])
            kept = page.evaluate(OFFLINE_READY)
        context.set_offline(True)
        page.reload(wait_until="load")
        controlled = page.evaluate("navigator.serviceWorker.controller !== null")
        page.evaluate(LOADED)
        offline = page.evaluate(TRANSLATE_ONE, SENTENCES["de_en"][0])
        workers = [worker.url.split("/").pop() for worker in page.workers]
    finally:
        context.close()
    assert errors == []
    assert kept >= 20, kept  # the page, its styles and scripts, the translator's modules
    assert controlled and workers == ["worker.js"]
    assert offline == online and online


UNSUPPORTED = (
    "This browser cannot run the translator: it needs WebAssembly with SIMD and module workers, which Chrome "
    "and Edge have had since 2021, Firefox since version 114 and Safari since version 16.4."
)
# A browser whose workers ignore `type` (classic workers only), as Firefox before 114.
CLASSIC_WORKERS = """
const RealWorker = window.Worker;
window.Worker = function Worker(url, options = {}) { return new RealWorker(url, { name: options.name }); };
"""


@pytest.mark.parametrize(
    "init",
    [
        "WebAssembly.validate = () => false;",
        "delete globalThis.WebAssembly;",
        "delete globalThis.Worker;",
        CLASSIC_WORKERS,
    ],
    ids=["no-simd", "no-webassembly", "no-worker", "classic-workers-only"],
)
@pytest.mark.parametrize("page_path", [PAGE, "book/inside.html"])
def test_a_browser_without_wasm_simd_or_module_workers_gets_one_sentence(logged_site, browser, init, page_path):
    """Without WebAssembly SIMD or module workers both pages say so in one sentence, download no model, and
    raise no error."""
    base, _ = logged_site
    context = browser.new_context()
    requests, errors = [], []
    try:
        page = context.new_page()
        page.add_init_script(init)
        page.on("request", lambda request: requests.append(request.url))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        page.goto(base + page_path, wait_until="networkidle")
        # the page's module script may run after the network is quiet on a busy machine: wait for its
        # sentence (a page that never writes it fails here, by timeout)
        page.wait_for_selector('[id$="-status"][data-unsupported]', state="attached", timeout=15_000)
        status = page.evaluate("""() => {
            const line = document.querySelector('[id$="-status"][data-unsupported]');
            return line && { text: line.textContent, controls: [...line.closest(".translator").querySelectorAll(
              "button, select, textarea")].every((c) => c.disabled) };
        }""")
    finally:
        context.close()
    assert errors == []
    assert status == {"text": UNSUPPORTED, "controls": True}
    assert model_paths(requests) == []  # no model, tokenizer, runtime or model.json


# A page script: the page thread's long tasks (the Long Tasks API: over 50 ms) from the start, each as
# [start, duration] in ms from the navigation, so that the page's start can be told from what follows.
LONG_TASKS = """window.longTasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.longTasks.push([entry.startTime, entry.duration]);
}).observe({ type: "longtask", buffered: true });"""


def test_inference_runs_off_the_pages_thread(logged_site, browser, capsys):
    """ONNX Runtime runs in a worker (its WebAssembly glue is imported there, never by the page's own thread),
    and the translation is the package's. Prints the page thread's longest task while loading and translating."""
    base, _ = logged_site
    context = browser.new_context()
    try:
        page = context.new_page()
        page.add_init_script(LONG_TASKS)
        page.goto(base + PAGE, wait_until="load")
        page.evaluate(LOADED)
        output = page.evaluate(TRANSLATE_ONE, FIFTEEN_WORDS["de_en"])
        page.wait_for_timeout(200)
        got = page.evaluate("""() => ({ longest: Math.max(0, ...window.longTasks.map(([, duration]) => duration)),
            resources: performance.getEntriesByType("resource").map((e) => e.name.split("/").pop()) })""")
        workers = [worker.url.split("/").pop() for worker in page.workers]
        in_worker = page.workers[0].evaluate(
            "performance.getEntriesByType('resource').map((e) => e.name.split('/').pop())"
        )
    finally:
        context.close()
    assert workers == ["worker.js"]
    glue = "ort-wasm-simd-threaded.mjs"  # ONNX Runtime's WebAssembly glue, imported where it runs
    assert glue in in_worker and glue not in got["resources"]
    python = exported("de_en")
    src = python.tokenizer.encode(FIFTEEN_WORDS["de_en"], eos=True)
    assert output == python.tokenizer.decode(python.greedy(torch.tensor([src]))[0])
    with capsys.disabled():
        print(f"\nthe page's longest task while loading and translating: {got['longest']:.0f} ms")
