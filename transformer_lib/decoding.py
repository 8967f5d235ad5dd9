"""Generating translations: greedy decoding, sampling and beam search, with the key-value cache (lesson 10).

All decode a batch of sentences at once and stop each one at ``<eos>`` or at its length limit,
``source length + max_extra`` tokens. The paper's section 6.1 uses input length + 50; the default
here, ``MAX_EXTRA`` = 25, is the tighter limit that lowers no BLEU score of lesson 11's translators
on the three test sets (``results/translator/length_limit.txt``, from
``book_tools.benchmarks.length_limit``): a runaway output stops 25 tokens sooner. With
``use_cache=True`` each step feeds the decoder only the newest token and reuses the keys and
values of earlier positions (:class:`~transformer_lib.attention.KVCache`); without it every step
recomputes the whole prefix. The tokens are the same either way. With ``cuda_graph=True`` the cache
lives in fixed buffers and, on a GPU, each step after the first replays one recorded CUDA graph
(:class:`StaticStep`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from transformer_lib.attention import attention_kernels
from transformer_lib.config import BOS_ID, EOS_ID, MAX_EXTRA, PAD_ID
from transformer_lib.errors import InvalidValue
from transformer_lib.model import Transformer

NEVER_GENERATED = [PAD_ID, BOS_ID]  # the decoder may output any other token, <unk> included


def _strip(row: Tensor) -> list[int]:
    """Generated ids up to (without) the first <eos>; padding dropped."""
    ids = row.tolist()
    if EOS_ID in ids:
        ids = ids[: ids.index(EOS_ID)]
    return [i for i in ids if i != PAD_ID]


def length_limits(src: Tensor, max_extra: int, max_len: int) -> Tensor:
    """Output length limits: source length + max_extra, within the model's positions (<bos> is one)."""
    return ((src != PAD_ID).sum(dim=1) + max_extra).clamp_max(max_len - 1)  # (batch,)


def extend(
    tokens: Tensor, next_logits: Callable[[Tensor], Tensor], pick: Callable[[Tensor], Tensor], limits: Tensor
) -> list[list[int]]:
    """Append one token per step to every row of ``tokens`` (batch, len) until ``<eos>``.

    ``next_logits(tokens)`` scores the next token of each row, (batch, vocab); ``pick`` chooses
    from those scores, (batch,). Row ``i`` gets at most ``limits[i]`` new tokens, the last of them
    ``<eos>``. Returns each row's new ids without the ``<eos>``. The loop of every decoder here:
    the translator's (:func:`greedy_decode`, :func:`sample`) and lesson 13's GPT.
    """
    start = tokens.shape[1]
    done = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
    for step in range(int(limits.max())):
        logits = next_logits(tokens)
        logits[:, NEVER_GENERATED] = float("-inf")
        next_token = pick(logits)  # (batch,)
        next_token = torch.where(step + 1 >= limits, EOS_ID, next_token)  # the last allowed token ends it
        next_token = torch.where(done, PAD_ID, next_token)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done |= next_token == EOS_ID
        if done.all():
            break
    return [_strip(row[start:]) for row in tokens]


class StaticStep:
    """The decoder's cached step over a :class:`~transformer_lib.attention.StaticKVCache` of
    ``capacity`` positions: ``step(token)`` takes the newest token of each row, (batch, 1), and
    returns the next-token logits, (batch, vocab).

    Every step has the same shapes and reads the same memory. So with ``cuda_graph=True`` on a
    GPU, the second step is recorded as a CUDA graph and each later step replays it: one launch
    instead of hundreds, which is most of a small model's step on a GPU (lesson 12). The first
    step always runs as it is: it computes the cross-attention's keys and values once. On a CPU
    there is nothing to record, and every step runs as it is.
    """

    def __init__(
        self, model: Transformer, memory: Tensor, src_mask: Tensor, capacity: int, cuda_graph: bool = False
    ) -> None:
        self.cache = model.new_cache(capacity, memory.device)
        self._run = lambda token: model.decode(token, memory, src_mask, self.cache, last=True)[:, -1]
        self._record = cuda_graph and memory.device.type == "cuda"
        self._graph: torch.cuda.CUDAGraph | None = None
        self._steps = 0

    def __call__(self, token: Tensor) -> Tensor:
        self._steps += 1
        if self._graph is not None:
            self._token.copy_(token)
            self._graph.replay()
            return self._logits
        if self._record and self._steps == 2:
            return self._capture(token)
        return self._run(token)

    def _capture(self, token: Tensor) -> Tensor:
        """Record this step as a CUDA graph, replay it once, and return its logits."""
        self._token = token.clone()  # (batch, 1): the graph's input, at a fixed address
        position = self.cache.length.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), attention_kernels(token.device):  # a warm-up off the main stream
            self._run(self._token)
        torch.cuda.current_stream().wait_stream(side)
        self.cache.length.copy_(position)  # the warm-up wrote what the replay writes again
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph), attention_kernels(token.device):
            self._logits = self._run(self._token)
        self._graph.replay()
        return self._logits


def _next_logits(
    model: Transformer, memory: Tensor, src_mask: Tensor, steps: int, use_cache: bool, cuda_graph: bool
) -> tuple[Callable[[Tensor], Tensor], Callable[[Tensor], None]]:
    """How to score the next token of every prefix, (batch, len) -> (batch, vocab), for at most
    ``steps`` steps, and how to keep only some rows of the batch (beam search's reordering)."""
    if cuda_graph and not use_cache:
        raise InvalidValue("cuda_graph=True replays the cached step: it needs use_cache=True")
    if cuda_graph:
        step = StaticStep(model, memory, src_mask, max(steps, 1), cuda_graph=True)  # no step: an empty cache
        return (lambda tokens: step(tokens[:, -1:])), step.cache.reorder
    cache = model.new_cache() if use_cache else None

    def next_logits(tokens: Tensor) -> Tensor:
        return model.decode(tokens[:, -1:] if use_cache else tokens, memory, src_mask, cache, last=True)[:, -1]

    return next_logits, (lambda index: None) if cache is None else cache.reorder


def _generate(
    model: Transformer,
    src: Tensor,
    pick: Callable[[Tensor], Tensor],
    max_extra: int,
    use_cache: bool,
    cuda_graph: bool = False,
) -> list[list[int]]:
    """One token per step for every sentence, chosen by ``pick`` from the (batch, vocab) next-token logits."""
    memory, src_mask = model.encode(src)
    limits = length_limits(src, max_extra, model.config.max_len)
    next_logits, _ = _next_logits(model, memory, src_mask, int(limits.max()), use_cache, cuda_graph)
    bos = torch.full((src.shape[0], 1), BOS_ID, dtype=torch.long, device=src.device)  # (batch, 1)
    return extend(bos, next_logits, pick, limits)


@torch.no_grad()
def greedy_decode(
    model: Transformer, src: Tensor, max_extra: int = MAX_EXTRA, use_cache: bool = True, cuda_graph: bool = False
) -> list[list[int]]:
    """The most probable token at every step. src (batch, src_len) ids -> one id list per sentence.

    ``cuda_graph=True``: the cache in fixed buffers, each step after the first replayed as a CUDA
    graph on a GPU (:class:`StaticStep`); the same tokens."""
    return _generate(model, src, lambda logits: logits.argmax(dim=-1), max_extra, use_cache, cuda_graph)


@torch.no_grad()
def sample(
    model: Transformer,
    src: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    max_extra: int = MAX_EXTRA,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> list[list[int]]:
    """Draw every token from softmax(logits / temperature), among the ``top_k`` most probable if given.

    Temperature below 1 sharpens the distribution (towards greedy decoding), above 1 flattens it;
    ``top_k=1`` is greedy decoding. Pass a seeded ``generator`` (on the model's device) to repeat a draw.
    """
    check_sampling(temperature, top_k)
    return _generate(
        model, src, lambda logits: sample_token(logits, temperature, top_k, generator), max_extra, use_cache
    )


def check_sampling(temperature: float, top_k: int | None) -> None:
    """Raise a clear error for settings :func:`sample_token` cannot use."""
    if not temperature > 0:
        raise InvalidValue(f"temperature must be positive (greedy decoding is the limit at 0), got {temperature}")
    if top_k is not None and top_k < 1:
        raise InvalidValue(f"top_k must be at least 1 (or None for the whole vocabulary), got {top_k}")


def sample_token(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, generator: torch.Generator | None = None
) -> Tensor:
    """One token per row of (batch, vocab) ``logits``, drawn from softmax(logits / temperature)
    among the ``top_k`` most probable; (batch,) ids."""
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]  # (batch, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(-1)


def length_penalty(length: Tensor, alpha: float) -> Tensor:
    """Wu et al. (2016): ((5 + length) / 6) ** alpha. Scores are divided by it, favouring longer outputs."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: Tensor,
    beam_size: int = 4,
    alpha: float = 0.6,
    max_extra: int = MAX_EXTRA,
    use_cache: bool = True,
    cuda_graph: bool = False,
) -> list[list[int]]:
    """Keep the ``beam_size`` most probable prefixes of each sentence; return the best by
    log-probability / length_penalty (the paper: beam 4, alpha 0.6). ``cuda_graph``: as in
    :func:`greedy_decode`.

    A hypothesis that has produced ``<eos>`` stays in its beam unchanged (extended by padding at no
    cost) and competes with the live ones by its total log-probability; the length penalty decides
    between the final hypotheses.

    Its twin in JavaScript, ``beamSearch`` in ``book/_static/translator/inside.js``, runs the same
    search for one sentence on the "Look inside the translator" page: a change to the rules here
    must be made there too (``tests/site/test_translator_page.py`` holds the two to the same beams).
    """
    if beam_size < 1:
        raise InvalidValue(f"beam_size must be at least 1, got {beam_size}")
    batch, k = src.shape[0], beam_size
    memory, src_mask = model.encode(src)
    memory, src_mask = memory.repeat_interleave(k, dim=0), src_mask.repeat_interleave(k, dim=0)
    limits = length_limits(src, max_extra, model.config.max_len).repeat_interleave(k)  # (batch * k,)
    device = src.device
    tokens = torch.full((batch * k, 1), BOS_ID, dtype=torch.long, device=device)
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # at first only one hypothesis is alive per sentence
    finished = torch.zeros(batch * k, dtype=torch.bool, device=device)
    lengths = torch.zeros(batch * k, dtype=torch.long, device=device)  # generated tokens, <eos> included
    offsets = (torch.arange(batch, device=device) * k)[:, None]  # (batch, 1): first row of each sentence
    steps = int(limits.max())
    next_logits, reorder = _next_logits(model, memory, src_mask, steps, use_cache, cuda_graph)
    for _ in range(steps):
        logits = next_logits(tokens)
        logits[:, NEVER_GENERATED] = float("-inf")
        log_probs = logits.float().log_softmax(dim=-1)  # (batch * k, vocab)
        vocab = log_probs.shape[-1]
        log_probs[finished] = float("-inf")
        log_probs[finished, PAD_ID] = 0.0  # a finished hypothesis continues with padding, for free
        at_limit = ~finished & (lengths + 1 >= limits)
        eos_only = torch.full_like(log_probs[0], float("-inf"))
        eos_only[EOS_ID] = 0.0
        log_probs[at_limit] = log_probs[at_limit] + eos_only  # the last allowed token must be <eos>
        total = (scores.reshape(-1, 1) + log_probs).view(batch, k * vocab)
        scores, flat = total.topk(k, dim=1)  # (batch, k)
        rows = (offsets + flat // vocab).view(-1)  # which hypothesis each new one extends
        new_tokens = (flat % vocab).view(-1)
        tokens = torch.cat([tokens[rows], new_tokens[:, None]], dim=1)
        lengths = lengths[rows] + (~finished[rows]).long()
        finished = finished[rows] | (new_tokens == EOS_ID)
        reorder(rows)
        if finished.all():
            break
    normalized = (scores.reshape(-1) / length_penalty(lengths.float(), alpha)).view(batch, k)
    best = (offsets[:, 0] + normalized.argmax(dim=1)).tolist()
    return [_strip(tokens[row, 1:]) for row in best]
