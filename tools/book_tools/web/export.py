"""A trained translator as ONNX files, for ONNX Runtime in Python or in a web browser.

:func:`export_onnx` writes one folder per model:

* ``encoder.onnx``: source ids (batch, src_len) -> memory (batch, src_len, d_model) and the
  self-attention weights of every layer and head, ``encoder_attention`` (batch, layers, heads,
  src_len, src_len);
* ``decoder.onnx``: target prefix (batch, tgt_len), memory and source ids -> the next token's
  logits (batch, vocab), the cross-attention weights of every layer and head,
  (batch, layers, heads, tgt_len, src_len), and the decoder's causal self-attention weights,
  ``self_attention`` (batch, layers, heads, tgt_len, tgt_len). The decoder reads the whole prefix
  at every step (no key-value cache): for sentences of a few dozen tokens that is fast enough, and
  the last step's weights are one row per output token, the heatmaps of the book's translator page;
* ``shared.bin``: the tensors both files hold byte for byte (the embedding that encoder, decoder
  and output layer share, and the sinusoids' table), stored once: both ``.onnx`` files name it as
  their external data, so a reader downloads them once (a third of lesson 11's int8 files);
* ``tokenizer.model`` (SentencePiece, for Python) and ``tokenizer.json.gz`` (the same pieces and
  scores, and what its normalization does beyond NFKC, for the browser's tokenizer: 70 KB);
* ``model.json``: languages, sizes, special ids, decoding limits, precision and the checkpoint's SHA-256.

``precision="fp16"`` stores the weights in half precision and casts them back to float when the
session starts: half the bytes, float arithmetic (the sinusoidal table stays float32). ``"int8"``
quantizes the matrix products dynamically (``onnxruntime.quantization``). Either can change
translations; lesson 11's models were stored in half precision already, so for them ``fp16``
changes nothing (``book_tools.benchmarks.onnx_precision`` measures both).
:class:`OnnxTranslator` decodes with exported files in Python, through the package's own
generation loop (:func:`transformer_lib.decoding.extend`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import io
import json
import logging
import os
import shutil
import struct
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from transformer_lib import decoding
from transformer_lib.attention import keep_attention_weights, padding_mask
from transformer_lib.batching import pad_ids
from transformer_lib.checkpoint import model_file
from transformer_lib.config import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, DecodeConfig
from transformer_lib.data import cache_root
from transformer_lib.decoding import NEVER_GENERATED, extend, length_limits
from transformer_lib.errors import InvalidValue, MissingFile, TransformerLibError
from transformer_lib.files import sha256_of, write_bytes, write_text
from transformer_lib.model import Transformer, count_parameters
from transformer_lib.tokenizer import Tokenizer
from transformer_lib.translation import load_model, translate_in_batches

PRECISIONS = ("fp32", "fp16", "int8")
OPSET = 20
MAX_BATCH = 4096  # sentences per call of the exported files
SHARED = "shared.bin"  # the tensors encoder and decoder share, stored once (_store_shared_once)
FILES = ("encoder.onnx", "decoder.onnx", SHARED, "tokenizer.model", "tokenizer.json.gz", "model.json")
PYTHON_FILES = ("encoder.onnx", "decoder.onnx", SHARED, "tokenizer.model", "model.json")  # what OnnxTranslator reads
MODEL_FILES = ("encoder.onnx", "decoder.onnx", SHARED)  # the model's bytes: what a reader downloads, with the tokenizer


class _Encoder(nn.Module):
    """Source ids in; the memory and every self-attention weight of the encoder out."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model
        keep_attention_weights(model.encoder)  # the by-hand path, which keeps its weights

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        memory = self.model.encode(src)[0]  # (batch, src_len, d_model)
        weights = [layer.self_attn.weights for layer in self.model.encoder.layers]  # (batch, heads, src, src)
        return memory, torch.stack(weights, dim=1)  # (batch, layers, heads, src_len, src_len)


class _Decoder(nn.Module):
    """The whole prefix in; the last position's logits and every attention weight of the decoder out."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model
        keep_attention_weights(model.decoder)  # the by-hand path, which keeps its weights

    def forward(self, tgt: Tensor, memory: Tensor, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        logits = self.model.decode(tgt, memory, padding_mask(src, PAD_ID), last=True)[:, -1]  # (batch, vocab)
        layers = self.model.decoder.layers
        cross = torch.stack([layer.cross_attn.weights for layer in layers], dim=1)  # (batch, layers, heads, tgt, src)
        causal = torch.stack([layer.self_attn.weights for layer in layers], dim=1)  # (batch, layers, heads, tgt, tgt)
        return logits, cross, causal


@contextlib.contextmanager
def _quiet_exporter(logger: logging.Logger | None = None):
    """The exporter reports each stage and warns about optional packages: keep the command's output short."""
    logger = logger or logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _require(*modules: str) -> None:
    """One line, not an ImportError's traceback, when the ONNX packages (an optional extra) are missing."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise TransformerLibError(
            f"this needs {', '.join(missing)}: pip install 'transformer-book[onnx]' (requirements.txt has them)"
        )


def _to_onnx(module: nn.Module, args: tuple, names: tuple[list[str], list[str]], dynamic: dict):
    """One module as an ONNX ModelProto with its weights inside (no external data file)."""
    with _quiet_exporter():
        program = torch.onnx.export(
            module,
            args,
            input_names=names[0],
            output_names=names[1],
            dynamic_shapes=dynamic,
            opset_version=OPSET,
            dynamo=True,
            verbose=False,
        )
    proto = program.model_proto
    # The exporter records each node's Python stack trace: this machine's file paths, and line numbers
    # that change with any edit. The files must not carry them.
    for node in [*proto.graph.node, *(n for f in proto.functions for n in f.node)]:
        del node.metadata_props[:]
        node.doc_string = ""
    for value in [*proto.graph.value_info, *proto.graph.input, *proto.graph.output]:
        del value.metadata_props[:]
    return proto


def _store_half(proto) -> None:
    """Tensors that float16 holds exactly (the weights, rounded before export) stored in float16, each
    cast back to float32 by a node the runtime folds at load time. Computed tables (the sinusoidal
    positions) stay float32: rounding them would change translations."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    casts = []
    for init in proto.graph.initializer:
        if init.data_type != TensorProto.FLOAT or np.prod(init.dims) < 256:
            continue
        values = numpy_helper.to_array(init)
        if not np.array_equal(values.astype(np.float16).astype(np.float32), values):
            continue
        half = numpy_helper.from_array(values.astype(np.float16), f"{init.name}.fp16")
        casts.append(helper.make_node("Cast", [half.name], [init.name], to=TensorProto.FLOAT))
        init.CopyFrom(half)
    for node in reversed(casts):
        proto.graph.node.insert(0, node)
    onnx.checker.check_model(proto)


def _quantize_int8(proto):
    """Matrix products in int8 with per-tensor scales computed on the fly (weights int8 on disk)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp, _quiet_exporter(logging.getLogger()):  # it logs advice on root
        source, target = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        onnx.save(proto, source)
        quantize_dynamic(source, target, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gather"])
        return onnx.load(target)


def _store_shared_once(encoder, decoder, align: int = 64) -> bytes:
    """Move every tensor that ``encoder`` and ``decoder`` both hold, under the same name and byte for
    byte (the embedding the encoder, the decoder and the output layer share; the sinusoids' table),
    out of both protos into one external data file, ``SHARED``, which both name with the tensor's
    offset and length. Returns that file's bytes. The graphs and every value stay as they were: only
    where the bytes are stored changes (ONNX Runtime reads them from the file beside the ``.onnx``
    in Python, from the ``externalData`` it is given in a browser)."""
    from onnx import TensorProto

    theirs = {tensor.name: tensor for tensor in decoder.graph.initializer}
    blob = bytearray()
    for tensor in encoder.graph.initializer:
        other = theirs.get(tensor.name)
        if (
            other is None
            or len(tensor.raw_data) < 4096  # small tensors: not worth a second file's bookkeeping
            or other.SerializeToString() != tensor.SerializeToString()
        ):
            continue
        blob += bytes(-len(blob) % align)
        offset, length = len(blob), len(tensor.raw_data)
        blob += tensor.raw_data
        for stored in (tensor, other):
            stored.ClearField("raw_data")
            stored.data_location = TensorProto.EXTERNAL
            del stored.external_data[:]
            for key, value in (("location", SHARED), ("offset", str(offset)), ("length", str(length))):
                entry = stored.external_data.add()
                entry.key, entry.value = key, value
    return bytes(blob)


def _charsmap_table(blob: bytes) -> dict[str, str]:
    """Every entry of a SentencePiece normalizer's precompiled character map, sorted by key.

    The map is a Darts double-array trie over UTF-8 byte strings whose leaves point into a blob of
    NUL-terminated replacements. SentencePiece replaces, at each position of a sentence, the longest
    string the trie holds; the browser's tokenizer does the same with this table.
    """
    (trie_size,) = struct.unpack_from("<I", blob, 0)
    units = np.frombuffer(blob, dtype="<u4", count=trie_size // 4, offset=4).astype(np.int64)
    replacements = blob[4 + trie_size :]

    def offset(unit: np.ndarray) -> np.ndarray:
        return (unit >> 10) << ((unit & (1 << 9)) >> 6)

    # A node's child for byte b sits at position (node ^ b) and carries the label b, so every
    # labelled unit names its parent: sorted by parent, the units list each node's children.
    labels = units & ((1 << 31) | 0xFF)  # bit 31 marks a leaf, which is no one's labelled child
    (labelled,) = np.nonzero((labels >= 1) & (labels <= 255))
    parents = labelled ^ labels[labelled]
    order = np.argsort(parents, kind="stable")
    parents, children_by_parent = parents[order], labelled[order]

    table: dict[str, str] = {}
    nodes, keys = offset(units[:1]), [b""]  # one level of the trie at a time: positions, keys so far
    while len(nodes):
        first = np.searchsorted(parents, nodes, "left")
        counts = np.searchsorted(parents, nodes, "right") - first
        # the children of every node of this level, node by node
        children = children_by_parent[np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts - first, counts)]
        parent = np.repeat(np.arange(len(nodes)), counts)
        keys = [keys[p] + bytes([b]) for p, b in zip(parent.tolist(), labels[children].tolist(), strict=True)]
        nodes = children ^ offset(units[children])
        (ends,) = np.nonzero((units[children] >> 8) & 1)  # a key ends here: its leaf holds the replacement's offset
        for i, start in zip(ends.tolist(), (units[nodes[ends]] & ((1 << 31) - 1)).tolist(), strict=True):
            table[keys[i].decode("utf-8")] = replacements[start : replacements.index(b"\0", start)].decode("utf-8")
    return dict(sorted(table.items()))


def nfkc_exceptions(table: dict[str, str]) -> dict[str, str]:
    """The entries of a character map that NFKC does not give, for a normaliser that applies NFKC to the rest.

    SentencePiece's ``nmt_nfkc`` map is 225,000 entries, 99.8 % of them exactly NFKC (mostly Hangul
    jamo sequences that compose into syllables). The browser's tokenizer replaces, at each position,
    the longest key of this smaller map and normalises the text between such keys with
    ``String.prototype.normalize("NFKC")``: the entries kept are those whose replacement differs
    from NFKC (control characters dropped, whitespace made a space, characters newer than the
    map's Unicode left alone), and every character NFKC changes but the map leaves as it is (mapped
    to itself). tests/site/test_translator_page.py checks the result against SentencePiece in a browser,
    whose Unicode may be newer than this Python's.
    """
    import unicodedata

    def nfkc(text: str) -> str:
        return unicodedata.normalize("NFKC", text)

    kept = {key: value for key, value in table.items() if nfkc(key) != value}
    for code in range(0x110000):
        char = chr(code)
        if not 0xD800 <= code < 0xE000 and char not in table and nfkc(char) != char:
            kept[char] = char
    return dict(sorted(kept.items()))


def tokenizer_spec(tokenizer: Tokenizer) -> dict:
    """What a byte-pair-encoding tokenizer in another language needs to give SentencePiece's ids.

    The pieces with their scores (a merge's priority) and types (which are special), and the
    normalizer: its character map as a table and its whitespace switches.
    """
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(tokenizer.to_bytes())
    if proto.trainer_spec.model_type != sentencepiece_model_pb2.TrainerSpec.BPE or proto.trainer_spec.byte_fallback:
        raise InvalidValue("only byte-pair-encoding tokenizers without byte fallback can be exported for the browser")
    norm = proto.normalizer_spec
    if proto.denormalizer_spec.precompiled_charsmap or proto.trainer_spec.treat_whitespace_as_suffix:
        raise InvalidValue("tokenizers with a denormalizer or suffix whitespace cannot be exported for the browser")
    table = _charsmap_table(norm.precompiled_charsmap) if norm.precompiled_charsmap else {}
    exceptions = nfkc_exceptions(table)
    return {
        "pieces": [[p.piece, p.score, p.type] for p in proto.pieces],  # type 1 normal, 2 unknown, 3 control
        "unk_surface": proto.trainer_spec.unk_surface,
        # What the character map does that the browser's own NFKC normalisation does not
        # (nfkc_exceptions): a few hundred entries in place of 225,000.
        "normalization_exceptions": exceptions,
        "normalization_longest_key": max(map(len, exceptions), default=1),  # in characters (code points)
        "add_dummy_prefix": norm.add_dummy_prefix,
        "remove_extra_whitespaces": norm.remove_extra_whitespaces,
        "escape_whitespaces": norm.escape_whitespaces,
    }


def export_onnx(checkpoint: str | os.PathLike, out_dir: str | os.PathLike, precision: str = "fp16") -> Path:
    """Write the translator of ``checkpoint`` to ``out_dir``: a checkpoint file, or a run folder
    (:func:`~transformer_lib.checkpoint.model_file` says which of its files)."""
    if precision not in PRECISIONS:
        raise InvalidValue(f"precision must be one of {list(PRECISIONS)}, got {precision!r}")
    _require("onnx", "onnxscript", *(["onnxruntime"] if precision == "int8" else []))
    checkpoint = model_file(checkpoint)
    model, tokenizer, record = load_model(checkpoint, torch.device("cpu"))
    model = model.float().eval()
    if precision == "fp16":
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(parameter.half().float())  # what a float16 file can hold
    out = Path(out_dir)
    # Any example will do (every size is dynamic) but a size of 1, which the exporter would fix as constant.
    src = pad_ids(tokenizer.encode_batch(["a b c d e f", "g h i"], eos=True))
    memory = model.encode(src)[0]
    tgt = torch.full((2, 3), BOS_ID)
    # Bounds stated (the positions' table ends at max_len): PyTorch before 2.7 otherwise fails on guards it derives.
    batch = torch.export.Dim("batch", max=MAX_BATCH)
    src_len, tgt_len = (torch.export.Dim(name, max=model.config.max_len) for name in ("src_len", "tgt_len"))
    encoder = _to_onnx(
        _Encoder(model), (src,), (["src"], ["memory", "encoder_attention"]), {"src": {0: batch, 1: src_len}}
    )
    decoder = _to_onnx(
        _Decoder(model),
        (tgt, memory, src),
        (["tgt", "memory", "src"], ["logits", "cross_attention", "self_attention"]),
        {"tgt": {0: batch, 1: tgt_len}, "memory": {0: batch, 1: src_len}, "src": {0: batch, 1: src_len}},
    )
    protos = []
    for proto in (encoder, decoder):
        if precision == "fp16":
            _store_half(proto)
        elif precision == "int8":
            proto = _quantize_int8(proto)
        protos.append(proto)
    write_bytes(out / SHARED, _store_shared_once(*protos))
    for name, proto in zip(("encoder.onnx", "decoder.onnx"), protos, strict=True):
        write_bytes(out / name, proto.SerializeToString())
    write_bytes(out / "tokenizer.model", tokenizer.to_bytes())
    spec = json.dumps(tokenizer_spec(tokenizer), ensure_ascii=False).encode()
    write_bytes(out / "tokenizer.json.gz", gzip.compress(spec, mtime=0))
    c = model.config
    info = {
        "src": record.src,
        "tgt": record.tgt,
        "precision": precision,
        "parameters": count_parameters(model),
        "config": {k: getattr(c, k) for k in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len")},
        "max_extra": DecodeConfig().max_extra,  # the output length limit: source length + max_extra
        "special_ids": SPECIAL_TOKENS,
        "never_generated": NEVER_GENERATED,
        "checkpoint_sha256": sha256_of(checkpoint),
        "torch": torch.__version__,
        "opset": OPSET,
    }
    write_text(out / "model.json", json.dumps(info, indent=2) + "\n")
    return out


class OnnxTranslator:
    """Greedy translation with an exported folder and ONNX Runtime: what the browser runs, in Python."""

    def __init__(self, folder: str | os.PathLike, threads: int = 1) -> None:
        _require("onnxruntime")
        import onnxruntime as ort

        folder = Path(folder)
        missing = [name for name in PYTHON_FILES if not (folder / name).is_file()]
        if missing:
            raise MissingFile(f"{folder} is not an exported translator (missing {', '.join(missing)}); run export-onnx")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.encoder = ort.InferenceSession(folder / "encoder.onnx", options, providers=["CPUExecutionProvider"])
        self.decoder = ort.InferenceSession(folder / "decoder.onnx", options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer((folder / "tokenizer.model").read_bytes())
        self.info = json.loads((folder / "model.json").read_text(encoding="utf-8"))

    def encode(self, src: Tensor) -> np.ndarray:
        return self.encoder.run(["memory"], {"src": src.numpy()})[0]

    def next_logits(self, tokens: Tensor, memory: np.ndarray, src: Tensor) -> tuple[Tensor, np.ndarray]:
        """(batch, len) prefix -> next-token logits (batch, vocab) and cross-attention weights,
        (batch, layers, heads, len, src_len)."""
        inputs = {"tgt": tokens.numpy(), "memory": memory, "src": src.numpy()}
        logits, weights = self.decoder.run(["logits", "cross_attention"], inputs)
        return torch.from_numpy(logits), weights

    def greedy(self, src: Tensor) -> list[list[int]]:
        """The most probable token at every step, as :func:`transformer_lib.decoding.greedy_decode`
        does: one id list per sentence."""
        memory = self.encode(src)
        limits = length_limits(src, self.info["max_extra"], self.info["config"]["max_len"])
        bos = torch.full((src.shape[0], 1), BOS_ID, dtype=torch.long)
        return extend(bos, lambda tokens: self.next_logits(tokens, memory, src)[0], lambda x: x.argmax(-1), limits)

    def translate(self, sentences: Sequence[str], batch_size: int = 64) -> list[str]:
        """Translate sentences greedily, as :func:`transformer_lib.translation.translate_sentences` does."""
        return translate_in_batches(self.tokenizer, sentences, self.greedy, batch_size, self.info["config"]["max_len"])

    def translate_one(self, sentence: str) -> Translation:
        """One sentence, greedily, as the translator page decodes it: with whether it finished and
        how sure the model was (:class:`Translation`)."""
        src = torch.tensor([[*self.tokenizer.encode(sentence), EOS_ID]])
        memory = self.encode(src)
        picked: list[tuple[int, float]] = []  # the model's pick at each step, and its probability

        def pick(logits: Tensor) -> Tensor:  # (1, vocab), the never-generated tokens at -inf
            probs = logits.float().softmax(-1)
            token = probs.argmax(-1)  # (1,)
            picked.append((int(token), float(probs[0, token])))
            return token

        limits = length_limits(src, self.info["max_extra"], self.info["config"]["max_len"])
        bos = torch.full((1, 1), BOS_ID, dtype=torch.long)
        ids = extend(bos, lambda tokens: self.next_logits(tokens, memory, src)[0], pick, limits)[0]
        finished = picked[-1][0] == EOS_ID  # else the limit forced <eos> in place of the pick
        chosen = [p for _, p in (picked if finished else picked[:-1])]
        return Translation(self.tokenizer.decode(ids), ids, finished, _mean(chosen))


@dataclasses.dataclass(frozen=True)
class Translation:
    """A greedy translation of one sentence, as the translator page shows it."""

    text: str
    ids: list[int]  # the output tokens, without <eos>
    finished: bool  # False: it reached the length limit without choosing <eos> (a runaway output)
    confidence: float  # the mean probability of the tokens the model chose, <eos> included when it chose it


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


# The package's modules whose code becomes the exported graphs, and decoding's, whose limit model.json carries.
TRACED = ("config.py", "attention.py", "embeddings.py", "layers.py", "model.py", "decoding.py")


def cached_export(checkpoint: str | os.PathLike, precision: str = "fp16") -> Path:
    """The export of ``checkpoint``, made once per machine and kept in the package's cache.

    Keyed by the checkpoint's SHA-256, the precision, the sources of this module, of the modules
    whose code the export traces (``TRACED``) and of decoding (``model.json`` carries its length
    limit), and the PyTorch version, so that a new model, a new exporter, a change to the layers
    or a new limit makes a new folder. The book build (the translator page) and the tests share it.
    """
    checkpoint = Path(checkpoint)
    if not checkpoint.is_file():
        raise MissingFile(f"no checkpoint at {checkpoint}")
    key = hashlib.sha256()
    package = Path(decoding.__file__).parent
    sources = (path.read_text(encoding="utf-8") for path in (Path(__file__), *(package / name for name in TRACED)))
    for part in (sha256_of(checkpoint), precision, *sources, torch.__version__):
        key.update(part.encode())
    folder = cache_root() / "onnx" / f"{checkpoint.stem}-{key.hexdigest()[:16]}"
    if not all((folder / name).is_file() for name in FILES):
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder.parent, ignore_cleanup_errors=True) as tmp:  # whole, then renamed
            export_onnx(checkpoint, tmp, precision)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
    return folder
