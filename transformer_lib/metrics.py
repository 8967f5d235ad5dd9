"""BLEU, the standard score of machine translation (lesson 10), through sacreBLEU.

Three variants, because the literature reports all three:

* :func:`sacrebleu_score`: **cased, detokenized sacreBLEU**, the reproducible standard (Post, 2018):
  ``sacrebleu.corpus_bleu(hypotheses, [references])`` with its defaults (13a tokenization,
  case kept, exponential smoothing). Hypotheses and references are plain detokenized text.
* :func:`tokenized_bleu`: **lowercased, tokenized BLEU**, the way most Multi30k papers and tutorials
  report it (lowercased text, tokenized, then BLEU-4): here ``corpus_bleu(..., lowercase=True)``
  with the same 13a tokenizer.
* :func:`moses_bleu`: the papers' exact protocol (Wu et al., 2021 among them): text lowercased and
  tokenized by Moses' tokenizer (``sacremoses``), then BLEU-4 on the tokens. Moses also splits
  off apostrophes ("man 's"), which 13a does not; the two differ by a few tenths.

All return BLEU on sacreBLEU's 0 to 100 scale.
"""

from __future__ import annotations

from collections.abc import Sequence

import sacrebleu

from transformer_lib.errors import InvalidValue


def _check(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise InvalidValue(f"{len(hypotheses)} hypotheses but {len(references)} references: they must pair up")


def sacrebleu_score(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Cased, detokenized corpus BLEU with sacreBLEU's default settings."""
    _check(hypotheses, references)
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score


def tokenized_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Lowercased, 13a-tokenized corpus BLEU: comparable with the usual Multi30k numbers."""
    _check(hypotheses, references)
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)], lowercase=True, tokenize="13a").score


def moses_bleu(hypotheses: Sequence[str], references: Sequence[str], lang: str) -> float:
    """Lowercased BLEU-4 on Moses-tokenized text (``lang``: the target language), as the papers score."""
    _check(hypotheses, references)
    try:
        from sacremoses import MosesTokenizer
    except ImportError:
        raise InvalidValue("Moses-tokenized BLEU needs sacremoses: pip install sacremoses") from None
    moses = MosesTokenizer(lang=lang)

    def tokens(text: str) -> str:
        return moses.tokenize(text.lower(), escape=False, return_str=True)

    hyps, refs = [tokens(h) for h in hypotheses], [tokens(r) for r in references]
    return sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", force=True).score


def sacrebleu_signature(hypotheses: Sequence[str], references: Sequence[str]) -> str:
    """sacreBLEU's signature of :func:`sacrebleu_score` on these sentences: what its number means."""
    _check(hypotheses, references)
    bleu = sacrebleu.metrics.BLEU()
    bleu.corpus_score(list(hypotheses), [list(references)])
    return str(bleu.get_signature())


def bleu_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """The two scores every evaluation reports, rounded to two decimals: the keys of scores.json."""
    return {
        "bleu_tokenized_lowercase": round(tokenized_bleu(hypotheses, references), 2),
        "sacrebleu_cased": round(sacrebleu_score(hypotheses, references), 2),
    }
