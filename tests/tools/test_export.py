"""Exporting a translator to ONNX: ONNX Runtime computes what PyTorch computes.

On lesson 11's German→English model (committed, 2.6M parameters): the next-token logits and the
cross-attention weights agree with PyTorch's to a stated tolerance, greedy decoding gives the same
translation of every sentence of test_2016_flickr, and the half-precision files fit in 10 MB.
"""

import gzip
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from book_tools.cli import main as tools
from book_tools.web import runtime as web_runtime
from book_tools.web.export import MODEL_FILES, OnnxTranslator, _charsmap_table, cached_export, export_onnx
from transformer_lib.attention import keep_attention_weights
from transformer_lib.batching import pad_ids
from transformer_lib.config import BOS_ID, EOS_ID, DecodeConfig
from transformer_lib.data import DataError, load_multi30k
from transformer_lib.decoding import NEVER_GENERATED
from transformer_lib.errors import MissingFile
from transformer_lib.tokenizer import Tokenizer
from transformer_lib.translation import load_model, translate_sentences

pytestmark = pytest.mark.slow  # tens of seconds: started early by `pytest -n 2` (conftest.py)

DE_EN = Path(__file__).parents[2] / "translators" / "de_en.model_fp16.pt"
LOGIT_TOLERANCE = 1e-4  # logits are of size ~10; float32 sums in another order differ by ~1e-6
WEIGHT_TOLERANCE = 1e-5  # attention weights, in [0, 1]


@pytest.fixture(scope="module")
def exported():
    return OnnxTranslator(cached_export(DE_EN, "fp16"))


@pytest.fixture(scope="module")
def pytorch():
    model, tokenizer, _ = load_model(DE_EN, torch.device("cpu"))
    return model.float(), tokenizer


def test_logits_and_cross_attention_equal_pytorchs(exported, pytorch, mirror):
    model, tokenizer = pytorch
    keep_attention_weights(model)
    sources = load_multi30k("test_2016_flickr", "de")[:8]
    targets = load_multi30k("test_2016_flickr", "en")[:8]
    src = pad_ids(tokenizer.encode_batch(sources, eos=True))  # padded: the source mask is exercised
    for length in (1, 4, 9):
        tgt = torch.tensor([ids[:length] for ids in tokenizer.encode_batch(targets, bos=True)])
        with torch.no_grad():
            memory, src_mask = model.encode(src)
            expected = model.decode(tgt, memory, src_mask)[:, -1]
            weights = torch.stack([layer.cross_attn.weights for layer in model.decoder.layers], dim=1)
        onnx_memory = exported.encode(src)
        logits, onnx_weights = exported.next_logits(tgt, onnx_memory, src)
        np.testing.assert_allclose(onnx_memory, memory.numpy(), atol=LOGIT_TOLERANCE)
        np.testing.assert_allclose(logits.numpy(), expected.numpy(), atol=LOGIT_TOLERANCE)
        np.testing.assert_allclose(onnx_weights, weights.numpy(), atol=WEIGHT_TOLERANCE)
        assert np.allclose(onnx_weights.sum(-1), 1.0, atol=1e-5)  # each row a distribution over the source
        padding = src.numpy() == 0  # (batch, src_len): no weight on padding
        assert padding.any() and (onnx_weights.transpose(0, 4, 1, 2, 3)[padding] == 0).all()


def test_greedy_translations_of_test_2016_equal_pytorchs(exported, pytorch, mirror):
    model, tokenizer = pytorch
    sources = load_multi30k("test_2016_flickr", "de")
    expected = translate_sentences(model, tokenizer, sources, DecodeConfig(beam_size=1), torch.device("cpu"))
    got = exported.translate(sources)
    different = [(s, g, e) for s, g, e in zip(sources, got, expected, strict=True) if g != e]
    assert not different, f"{len(different)} of {len(sources)} differ, e.g. {different[:2]}"


@pytest.mark.parametrize(
    "sentence, finishes",
    [
        ("Ein Mann fährt mit dem Fahrrad durch die Stadt.", True),
        ("Ich habe heute keine Zeit, weil ich arbeiten muss.", False),  # everyday speech: a runaway
    ],
)
def test_translate_one_reports_the_models_own_confidence_and_a_runaway(exported, pytorch, sentence, finishes):
    """The confidence is the mean probability PyTorch's model gives the tokens greedy decoding chose
    (<eos> counted when chosen); an output cut at the length limit did not finish."""
    model, tokenizer = pytorch
    got = exported.translate_one(sentence)
    src = torch.tensor([tokenizer.encode(sentence, eos=True)])
    assert got.ids == exported.greedy(src)[0] and got.finished is finishes
    limit = src.shape[1] + exported.info["max_extra"]
    assert (len(got.ids) < limit - 1) is finishes  # a runaway uses every position the limit allows
    chosen = [*got.ids, EOS_ID] if finishes else got.ids  # <eos> only when the model chose it
    prefix = torch.tensor([[BOS_ID, *chosen]])
    with torch.no_grad():
        memory, mask = model.encode(src)
        logits = model.decode(prefix[:, :-1], memory, mask)[0]  # (len(chosen), vocab): each step's scores
    logits[:, NEVER_GENERATED] = float("-inf")
    expected = logits.softmax(-1).gather(1, torch.tensor(chosen)[:, None]).mean().item()
    assert abs(got.confidence - expected) < 1e-3, (got.confidence, expected)


def test_half_precision_files_hold_weights_in_fp16_and_fit_in_10_mb(exported):
    folder = cached_export(DE_EN, "fp16")
    for name in ("encoder.onnx", "decoder.onnx"):
        proto = onnx.load(folder / name)  # with the tensors it reads from shared.bin
        big = [i for i in proto.graph.initializer if np.prod(i.dims) >= 256]
        kept_float = [i.name for i in big if i.data_type != onnx.TensorProto.FLOAT16]
        assert len(big) > 10 and kept_float == ["model.positional.table"]  # the sinusoids, exact
    assert sum((folder / name).stat().st_size for name in MODEL_FILES) < 10e6
    info = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    assert (info["src"], info["tgt"], info["precision"], info["parameters"]) == ("de", "en", "fp16", 2_605_568)


def test_the_tensors_both_files_hold_are_stored_once(exported):
    """The embedding (of the encoder, the decoder and the output layer) and the sinusoids' table are in
    shared.bin, which both files name at the same places, and in neither file itself."""
    folder = cached_export(DE_EN, "fp16")
    external = {}
    for name in ("encoder.onnx", "decoder.onnx"):
        proto = onnx.load(folder / name, load_external_data=False)
        external[name] = {
            i.name: {entry.key: entry.value for entry in i.external_data}
            for i in proto.graph.initializer
            if i.data_location == onnx.TensorProto.EXTERNAL
        }
        assert not [i.name for i in proto.graph.initializer if i.name in external[name] and i.raw_data]
    assert external["encoder.onnx"] == external["decoder.onnx"]
    assert set(external["encoder.onnx"]) == {"model.generator.weight.fp16", "model.positional.table"}
    places = external["encoder.onnx"].values()
    assert {place["location"] for place in places} == {"shared.bin"}
    ends = [int(place["offset"]) + int(place["length"]) for place in places]
    assert max(ends) == (folder / "shared.bin").stat().st_size == 10_000 * 128 * 2 + 1024 * 128 * 4  # fp16, fp32


def test_the_browsers_normalization_is_nfkc_and_the_maps_exceptions(exported):
    """The browser's tokenizer gets what SentencePiece's character map does beyond NFKC: a few hundred
    entries of its 225,000 (tests/site/test_translator_page.py checks the result in a browser)."""
    import unicodedata

    folder = cached_export(DE_EN, "fp16")
    table = _charsmap_table(_charsmap(exported.tokenizer))
    assert table["ｆ"] == "f" and table["①"] == "1" and table["ﬁ"] == "fi"
    assert table["e\u0301"] == "é"  # composition: a two-character key
    assert len(table) > 200_000
    spec = json.loads(gzip.decompress((folder / "tokenizer.json.gz").read_bytes()))
    exceptions = spec["normalization_exceptions"]
    assert "normalization" not in spec and 0 < len(exceptions) < 1000
    assert exceptions["\t"] == " " and exceptions["\x01"] == ""  # whitespace a space, control characters gone
    for key, value in table.items():
        assert exceptions.get(key, unicodedata.normalize("NFKC", key)) == value, key
    assert spec["normalization_longest_key"] == max(len(key) for key in exceptions)
    assert (folder / "tokenizer.json.gz").stat().st_size < 100_000


def _charsmap(tokenizer: Tokenizer) -> bytes:
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(tokenizer.to_bytes())
    return proto.normalizer_spec.precompiled_charsmap


def first_layers(path: Path, **config) -> dict:
    """Lesson 11's German→English checkpoint with the first layer of each stack only, and ``config``
    changed, written to ``path``: a real model whose export takes a fraction of the time (the
    export's time grows with the layers)."""
    state = torch.load(DE_EN, weights_only=True)
    state["model_config"] = {**state["model_config"], "n_layers": 1, **config}
    state["model"] = {k: v for k, v in state["model"].items() if not re.search(r"\.layers\.[1-9]", k)}
    torch.save(state, path)
    return state


def test_int8_export_from_the_command_line_mostly_picks_the_same_tokens(tmp_path, capsys, mirror):
    first_layers(tmp_path / "model.pt")
    assert tools(["export-onnx", str(tmp_path / "model.pt"), str(tmp_path / "int8"), "--precision", "int8"]) == 0
    assert "exported to" in capsys.readouterr().out
    quantized = OnnxTranslator(tmp_path / "int8")
    assert quantized.info["precision"] == "int8"
    model, tokenizer, _ = load_model(tmp_path / "model.pt", torch.device("cpu"))
    model = model.float()
    src = pad_ids(tokenizer.encode_batch(load_multi30k("test_2016_flickr", "de")[:16], eos=True))
    targets = tokenizer.encode_batch(load_multi30k("test_2016_flickr", "en")[:16], bos=True)
    same = total = 0
    for length in range(1, 8):
        tgt = torch.tensor([ids[:length] for ids in targets])
        with torch.no_grad():
            expected = model(src, tgt)[:, -1]
        logits, _ = quantized.next_logits(tgt, quantized.encode(src), src)
        assert not np.allclose(logits.numpy(), expected.numpy(), atol=LOGIT_TOLERANCE)  # quantized: not equal
        same += int((logits.argmax(-1) == expected.argmax(-1)).sum())
        total += len(targets)
    assert same / total > 0.9  # 8-bit matrix products: close to the float model, not equal (the BLEU cost: the book)


def test_bad_inputs_are_one_line(tmp_path, capsys):
    assert tools(["export-onnx", str(tmp_path / "missing.pt"), str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith("error: no checkpoint at")
    assert not (tmp_path / "out").exists()
    with pytest.raises(MissingFile, match=r"not an exported translator \(missing encoder\.onnx"):
        OnnxTranslator(tmp_path)
    with pytest.raises(ValueError, match="precision must be one of"):
        export_onnx(DE_EN, tmp_path / "out", "fp8")


def test_missing_onnx_packages_are_named_in_one_line(tmp_path, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxscript" else real(name, *a))
    assert tools(["export-onnx", str(DE_EN), str(tmp_path / "out")]) == 2
    assert (
        capsys.readouterr().err
        == "error: this needs onnxscript: pip install 'transformer-book[onnx]' (requirements.txt has them)\n"
    )


def test_the_browser_runtime_is_checked_against_npms_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv(web_runtime.LOCAL_DIR_ENV, str(tmp_path))
    with pytest.raises(DataError, match=r"onnxruntime-web-1\.30\.0\.tgz does not exist"):
        web_runtime.fetch()
    (tmp_path / web_runtime.TARBALL).write_bytes(b"not the published tarball")
    with pytest.raises(DataError, match=r"checksum mismatch .* SHA-512"):
        web_runtime.fetch()


def test_the_self_attention_of_encoder_and_decoder_equal_pytorchs(pytorch, mirror):
    """What the translator page draws for every layer and head; the decoder's is causal (zero above the diagonal)."""
    import onnxruntime as ort

    model, tokenizer = pytorch
    keep_attention_weights(model)
    folder = cached_export(DE_EN, "fp16")
    encoder, decoder = (ort.InferenceSession(folder / f"{n}.onnx") for n in ("encoder", "decoder"))
    src = pad_ids(tokenizer.encode_batch(load_multi30k("test_2016_flickr", "de")[:4], eos=True))
    tgt = torch.tensor(
        [ids[:7] for ids in tokenizer.encode_batch(load_multi30k("test_2016_flickr", "en")[:4], bos=True)]
    )
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        model.decode(tgt, memory, src_mask)
    expected_encoder = torch.stack([layer.self_attn.weights for layer in model.encoder.layers], dim=1)
    expected_decoder = torch.stack([layer.self_attn.weights for layer in model.decoder.layers], dim=1)
    onnx_memory, encoder_weights = encoder.run(["memory", "encoder_attention"], {"src": src.numpy()})
    (decoder_weights,) = decoder.run(
        ["self_attention"], {"tgt": tgt.numpy(), "memory": onnx_memory, "src": src.numpy()}
    )
    np.testing.assert_allclose(encoder_weights, expected_encoder.numpy(), atol=WEIGHT_TOLERANCE)
    np.testing.assert_allclose(decoder_weights, expected_decoder.numpy(), atol=WEIGHT_TOLERANCE)
    assert decoder_weights.shape == (4, model.config.n_layers, model.config.n_heads, 7, 7)
    assert (np.triu(decoder_weights, k=1) == 0).all() and np.allclose(decoder_weights.sum(-1), 1.0, atol=1e-5)


def test_a_model_with_rotary_positions_exports_and_computes_what_pytorch_does(tmp_path, mirror):
    """The CPU recipes rotate queries and keys instead of adding sinusoids: a reader's own
    model must export too. Lesson 11's weights under ``positional: rotary`` (not what they were
    trained with, which does not matter here), one layer of each stack (:func:`first_layers`: one
    exercises every rotation): ONNX Runtime's logits and greedy outputs are PyTorch's."""
    checkpoint = tmp_path / "rotary.pt"
    state = first_layers(checkpoint, positional="rotary")
    model, tokenizer, _ = load_model(checkpoint, torch.device("cpu"))
    assert all(layer.self_attn.rotary for layer in (*model.encoder.layers, *model.decoder.layers))
    exported = OnnxTranslator(export_onnx(checkpoint, tmp_path / "onnx", "fp32"))
    sources = load_multi30k("test_2016_flickr", "de")[:8]
    src = pad_ids(tokenizer.encode_batch(sources, eos=True))
    targets = tokenizer.encode_batch(load_multi30k("test_2016_flickr", "en")[:8], bos=True)
    tgt = torch.tensor([ids[:6] for ids in targets])  # (batch, 6): a prefix of each reference
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        expected = model.decode(tgt, memory, src_mask)[:, -1]  # (batch, vocab)
    logits, _ = exported.next_logits(tgt, exported.encode(src), src)
    np.testing.assert_allclose(logits.numpy(), expected.numpy(), atol=LOGIT_TOLERANCE)
    sinusoids = tmp_path / "sinusoids.pt"
    torch.save({**state, "model_config": {**state["model_config"], "positional": "sinusoidal"}}, sinusoids)
    with_sinusoids = load_model(sinusoids, torch.device("cpu"))[0].float()
    with torch.no_grad():  # the check can fail: the same weights with sinusoids compute other logits
        other = with_sinusoids.decode(tgt, *with_sinusoids.encode(src))[:, -1]
    assert (other - expected).abs().max() > 100 * LOGIT_TOLERANCE
    greedy = translate_sentences(model, tokenizer, sources, DecodeConfig(beam_size=1), torch.device("cpu"))
    assert exported.translate(sources) == greedy
