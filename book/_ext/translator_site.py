"""The files of the in-browser translator (book/translator.md), written into the built site.

After an HTML build, ``_static/translator/`` of the output receives:

* ``ort/``: ONNX Runtime Web (:mod:`book_tools.web.runtime`: pinned, checksum-verified, cached);
* ``models/<direction>/``: ``encoder.onnx``, ``decoder.onnx``, ``shared.bin`` (the tensors both
  hold, stored once) and ``model.json`` (what the page reads; ``tokenizer.model`` too, for
  Python), and ``models/tokenizer.json.gz``, the browser's tokenizer, once for the directions
  that share it (``model.json`` names it), exported from the
  checkpoints that ``translator_models`` names in ``_config.yml`` (once per machine:
  :func:`book_tools.web.export.cached_export`), with the BLEU measured for exactly that
  checkpoint and precision in ``translator_record``, the confidence threshold and example
  sentences of ``translator_confidence_record`` (``python -m book_tools.benchmarks.confidence``),
  and each served file's version: the start of its SHA-256, the key under which the page keeps the
  file in the browser's Cache Storage.

Each page that translates also gets ``_static/translator/start.js`` written into its head, where it
starts the translator's worker as the page begins to load (:func:`start_the_worker_first`). The
translator page gets its service worker beside it, ``translator-sw.js``
(:func:`write_service_workers`), which keeps the page's own files for offline visits.

To serve another model, point ``translator_models`` at its checkpoint and measure its BLEU
(``python -m book_tools.benchmarks.onnx_precision``): a checkpoint without a measured
BLEU stops the build, so that the page never states a number nobody measured.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError

from book_tools.web import runtime as web_runtime
from book_tools.web.export import MODEL_FILES, cached_export
from transformer_lib.files import sha256_of, write_text

SERVED = (*MODEL_FILES, "tokenizer.model")  # and model.json; the tokenizer below
START = Path(__file__).resolve().parent.parent / "_static" / "translator" / "start.js"  # see start_the_worker_first
SERVICE_WORKER = START.with_name("sw.js")  # see write_service_workers
PAGE_SCRIPT = "_static/translator/page.js"  # the translator page's script: its page gets the service worker


def record_row(record: Path, checkpoint: Path, precision: str, command: str, **match) -> dict:
    """The row of a benchmark's record measured on ``checkpoint``'s files in ``precision`` (and ``match``'s
    other fields); one clear error naming ``command`` when there is none."""
    if not record.is_file():
        raise ExtensionError(f"{record} does not exist: run {command}")
    sha = sha256_of(checkpoint)
    for row in json.loads(record.read_text(encoding="utf-8"))["rows"]:
        fields = {"checkpoint_sha256": sha, "precision": precision, **match}
        if all(row.get(key) == value for key, value in fields.items()):
            return row
    raise ExtensionError(f"{record} has no row for {checkpoint} in {precision}: run {command}")


def measured_bleu(record: Path, checkpoint: Path, precision: str) -> dict:
    """The row of the precision benchmark's record for this checkpoint and precision."""
    command = f"python -m book_tools.benchmarks.onnx_precision --models {checkpoint}"
    return record_row(record, checkpoint, precision, command, runtime="onnxruntime")


def measured_confidence(record: Path, checkpoint: Path, precision: str) -> dict:
    """The confidence benchmark's row for this checkpoint in this precision: the warning threshold and
    the examples, measured on the files the page serves."""
    return record_row(record, checkpoint, precision, "python -m book_tools.benchmarks.confidence")


def tokenizer_file(source: Path, models: Path, written: dict[str, str]) -> str:
    """The browser's tokenizer served once for every direction that has the same one (one download for a reader
    who switches): ``models/tokenizer.json.gz``, or ``tokenizer-<sha>.json.gz`` beside it for another.
    Returns its address from a direction's folder, as ``model.json`` names it."""
    sha = sha256_of(source)
    if sha not in written:
        name = "tokenizer.json.gz" if not written else f"tokenizer-{sha[:12]}.json.gz"
        shutil.copyfile(source, models / name)
        written[sha] = f"../{name}"
    return written[sha]


def write_translator_files(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = Path(app.srcdir)
    target = Path(app.outdir) / "_static" / "translator"
    web_runtime.install(target / "ort")
    precision = app.config.translator_precision
    tokenizers: dict[str, str] = {}  # SHA-256 -> the file's name, relative to a direction's folder
    for direction, name in app.config.translator_models.items():
        checkpoint = root / name
        folder = cached_export(checkpoint, precision)
        out = target / "models" / direction
        out.mkdir(parents=True, exist_ok=True)
        for file in SERVED:
            shutil.copyfile(folder / file, out / file)
        (out / "tokenizer.json.gz").unlink(missing_ok=True)  # from an older build
        info = json.loads((folder / "model.json").read_text(encoding="utf-8"))
        info["tokenizer"] = tokenizer_file(folder / "tokenizer.json.gz", target / "models", tokenizers)
        bleu = measured_bleu(root / app.config.translator_record, checkpoint, precision)
        info["checkpoint"] = name
        info["bleu"] = {k: bleu[k] for k in ("split", "sacrebleu_cased", "decoding", "sentences")}
        confidence = measured_confidence(root / app.config.translator_confidence_record, checkpoint, precision)
        info["confidence_threshold"] = confidence["threshold"]
        info["examples"] = {
            "test": [example["source"] for example in confidence["examples"]],
            "outside": [item["source"] for item in confidence["outside"][:2]],
        }
        info["megabytes"] = round(sum((out / f).stat().st_size for f in MODEL_FILES) / 1e6, 1)
        # each file's version, the start of its SHA-256: the page keeps the files in the browser's
        # Cache Storage under it, so that a reader's next visit downloads only a file that changed
        served = {file: out / file for file in MODEL_FILES}
        served[info["tokenizer"]] = (out / info["tokenizer"]).resolve()
        info["files"] = {file: sha256_of(path)[:16] for file, path in served.items()}
        write_text(out / "model.json", json.dumps(info, indent=2) + "\n")
    write_service_workers(Path(app.outdir))


def build_hash(outdir: Path, page: Path) -> str:
    """The start of a SHA-256 over the page and every file of ``_static`` but the models and the WebAssembly
    (files.js keeps those, by their own versions): it changes whenever a build changes a file the page uses."""
    digest = hashlib.sha256(page.read_bytes())
    for path in sorted((outdir / "_static").rglob("*")):
        name = path.relative_to(outdir).as_posix()
        if path.is_file() and not name.startswith("_static/translator/models/") and path.suffix != ".wasm":
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def write_service_workers(outdir: Path) -> None:
    """``translator-sw.js`` beside each page that runs ``PAGE_SCRIPT``: ``SERVICE_WORKER`` with its ``BUILD``
    set to :func:`build_hash`. A new build that changes a file gives a new hash, and the browser then
    replaces the worker and its cache (sw.js explains how)."""
    template = SERVICE_WORKER.read_text(encoding="utf-8")
    placeholder = 'const BUILD = "unbuilt";'
    if placeholder not in template:
        raise ExtensionError(f"{SERVICE_WORKER} has no line {placeholder!r} to set")
    for page in sorted(outdir.rglob("*.html")):
        if PAGE_SCRIPT in page.read_text(encoding="utf-8"):
            script = template.replace(placeholder, f'const BUILD = "{build_hash(outdir, page)}";')
            write_text(page.parent / "translator-sw.js", script)


def start_the_worker_first(app, pagename, templatename, context, doctree) -> None:
    """A page that translates (its HTML loads a script of ``_static/translator/``) carries ``START`` in its head,
    inline: the parser runs it before the theme's scripts and the page's own modules have arrived, so that the
    translator's worker starts, and fetches ONNX Runtime's WebAssembly, while the rest of the page loads. Inline,
    not a file: a file would first have to be fetched, and an async script waits for the page's busy thread."""
    if app.builder.format != "html" or doctree is None:
        return
    if any("_static/translator/" in raw.astext() for raw in doctree.findall(nodes.raw)):
        app.add_js_file(None, body=START.read_text(encoding="utf-8"), priority=100)  # before Sphinx's own (200)


def setup(app):
    app.add_config_value("translator_models", {}, "html")  # direction -> checkpoint, from the book's root
    app.add_config_value("translator_precision", "fp16", "html")
    app.add_config_value("translator_record", "results/translator/onnx_precision.json", "html")
    app.add_config_value("translator_confidence_record", "results/translator/confidence.json", "html")
    app.connect("html-page-context", start_the_worker_first)
    # late, so that the service worker's hash sees the files other extensions write when the build finishes
    # (pydata-sphinx-theme's pygments.css, the icon fonts)
    app.connect("build-finished", write_translator_files, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
