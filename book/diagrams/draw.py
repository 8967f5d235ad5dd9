"""Draw the book's diagrams: ``python book/diagrams/draw.py`` writes every ``book/_static/figures/NAME.svg``.

Why a script rather than hand-written SVG files: the thirteen diagrams share one palette, one font
stack, one arrow and one box, so a change of style is made once and reaches every figure; the
numbers a figure shows (padding counts, beam scores, positional-encoding stripes) are computed, not
typed. ``tests/lessons/test_figures.py`` checks that running this script reproduces the committed files.

Style, the same in every figure:

* Each SVG paints its own light background (a rounded rectangle filling the canvas) with dark text
  and strokes, so it reads the same in the site's light and dark modes: an ``<img>`` cannot see the
  page's theme.
* Flat boxes, one colour per kind of part: attention blue, feed-forward green, normalisation amber,
  embeddings violet, output red, data grey.
* Text is ``<text>`` in a generic sans-serif stack; each file has a ``<title>``, a ``<desc>``, a
  ``viewBox``, a width and a height.
* Data flows from the bottom up in the model's diagrams, as in the paper's figures.
* Every text is at least 12 units high and has a contrast of at least 4.5:1 with what is behind it
  (``tests/lessons/test_figures.py`` checks both: 12 units stay above 9 pixels in the page's column).

What a diagram says about the package comes from the package: the special tokens' ids and names
and the class names it labels are imported from ``transformer_lib``, so a renamed class or a moved
id breaks this script instead of leaving a figure that no longer matches the code.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import torch

ROOT = Path(__file__).resolve().parent.parent.parent
FIGURES = ROOT / "book" / "_static" / "figures"
if str(ROOT) not in sys.path:  # run as a script from a checkout the package is not installed from
    sys.path.insert(0, str(ROOT))

from transformer_lib.attention import KVCache, MultiHeadAttention  # noqa: E402
from transformer_lib.config import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, DecodeConfig  # noqa: E402
from transformer_lib.decoding import length_penalty  # noqa: E402
from transformer_lib.embeddings import SinusoidalPositionalEncoding, TokenEmbedding  # noqa: E402
from transformer_lib.family import bert, gpt  # noqa: E402
from transformer_lib.layers import DecoderLayer, EncoderLayer, FeedForward  # noqa: E402
from transformer_lib.model import Transformer  # noqa: E402

# Names as the code spells them (a figure's label follows a rename)
PAD, BOS, EOS = (next(name for name, i in SPECIAL_TOKENS.items() if i == wanted) for wanted in (PAD_ID, BOS_ID, EOS_ID))

FONT = "Helvetica, Arial, 'Liberation Sans', 'DejaVu Sans', sans-serif"
INK = "#1f2933"  # text and arrows
MUTED = "#52606d"  # notes and shapes
PAPER = "#ffffff"  # every figure's own background
EDGE = "#cbd2d9"  # the background's border
FAINT = "#9aa5b1"  # pruned, not stored

# (fill, stroke) of each kind of part
KINDS = {
    "attn": ("#dbeafe", "#2563eb"),
    "ffn": ("#dcfce7", "#15803d"),
    "norm": ("#fef3c7", "#b45309"),
    "embed": ("#ede9fe", "#6d28d9"),
    "out": ("#fee2e2", "#b91c1c"),
    "data": ("#f1f5f9", "#475569"),
    "frame": ("#f8fafc", "#94a3b8"),
    "new": ("#ffedd5", "#c2410c"),
    "linear": ("#e0f2fe", "#0e7490"),
}
KEPT_CELL, MASKED_CELL, PAD_CELL = "#93c5fd", "#64748b", "#d9dee5"


def num(value: float) -> str:
    """A coordinate as short text: 12, 12.5 (no float noise in the files)."""
    return f"{round(value, 1):g}"


@dataclass(frozen=True)
class Box:
    """A placed rectangle; its edges and centre are where arrows start and end."""

    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    @property
    def top(self) -> float:
        return self.y

    @property
    def bottom(self) -> float:
        return self.y + self.h

    @property
    def left(self) -> float:
        return self.x

    @property
    def right(self) -> float:
        return self.x + self.w


class Figure:
    """One SVG drawing: shapes are appended in order (later ones on top), then ``svg()`` writes the file's text."""

    def __init__(self, name: str, width: int, height: int, title: str, desc: str, image: bool = True) -> None:
        self.name, self.width, self.height = name, width, height
        self.title, self.desc, self.image = title, desc, image
        self.parts: list[str] = []
        self.markers: dict[str, str] = {}

    # -- primitives ---------------------------------------------------------------------------
    def add(self, element: str) -> None:
        self.parts.append(element)

    def text(
        self,
        x: float,
        y: float,
        words: str,
        size: float = 14,
        anchor: str = "middle",
        weight: str = "normal",
        fill: str = INK,
        italic: bool = False,
    ) -> None:
        """Text whose first line's baseline is at y; a newline starts a line below."""
        lines = words.split("\n")
        attrs = f'x="{num(x)}" y="{num(y)}" font-size="{num(size)}" text-anchor="{anchor}" fill="{fill}"'
        if weight != "normal":
            attrs += f' font-weight="{weight}"'
        if italic:
            attrs += ' font-style="italic"'
        if len(lines) == 1:
            self.add(f"<text {attrs}>{escape(words)}</text>")
            return
        spans = "".join(
            f'<tspan x="{num(x)}" dy="{0 if i == 0 else num(size * 1.25)}">{escape(line)}</tspan>'
            for i, line in enumerate(lines)
        )
        self.add(f"<text {attrs}>{spans}</text>")

    def centred_text(self, cx: float, cy: float, words: str, size: float = 14, **kw) -> None:
        """Text centred on (cx, cy), over as many lines as it has."""
        n = words.count("\n") + 1
        first = cy - (n - 1) * size * 1.25 / 2 + size * 0.35
        self.text(cx, first, words, size=size, **kw)

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str, rx: float = 6, **extra) -> None:
        attrs = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in extra.items())
        self.add(
            f'<rect x="{num(x)}" y="{num(y)}" width="{num(w)}" height="{num(h)}" rx="{num(rx)}" '
            f'fill="{fill}" stroke="{stroke}"{attrs}/>'
        )

    def key(self, x: float, y: float, w: float, h: float, fill: str, stroke: str, label: str, **extra) -> None:
        """A legend's entry: a swatch at (x, y), ``w`` by ``h``, and its label to the right of it.

        ``extra`` styles the swatch (``rx``, ``opacity``, ...)."""
        extra.setdefault("rx", 4)
        self.rect(x, y, w, h, fill, stroke, **extra)
        self.text(x + w + 8, y + h - 3, label, size=12, anchor="start")

    def box(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        label: str,
        kind: str = "data",
        size: float = 14,
        sub: str | None = None,
        faded: bool = False,
        weight: str = "normal",
    ) -> Box:
        """A labelled box of one kind; ``sub`` is a smaller grey line (a class name or a shape) under the label."""
        fill, stroke = KINDS[kind]
        extra = {"stroke_width": "1.5"}
        if faded:
            extra.update(opacity="0.45", stroke_dasharray="4 3")
        self.rect(x, y, w, h, fill, stroke, **extra)
        colour = MUTED if faded else INK  # faded boxes keep readable text (4.5:1 or more)
        if sub is None:
            self.centred_text(x + w / 2, y + h / 2, label, size=size, fill=colour, weight=weight)
        else:
            n = label.count("\n") + 1
            total = n * size * 1.25 + 12 * 1.25
            top = y + h / 2 - total / 2
            self.text(x + w / 2, top + size, label, size=size, fill=colour, weight=weight)
            self.text(x + w / 2, top + n * size * 1.25 + 12, sub, size=12, fill=MUTED)
        return Box(x, y, w, h)

    def marker(self, colour: str) -> str:
        """The id of an arrowhead of this colour (one ``<marker>`` per colour, in ``<defs>``)."""
        if colour not in self.markers:
            self.markers[colour] = f"{self.name}-arrow{len(self.markers)}"
        return self.markers[colour]

    def arrow(
        self,
        *points: tuple[float, float],
        colour: str = INK,
        dashed: bool = False,
        width: float = 1.6,
        head: bool = True,
    ) -> None:
        """A line through the points, with an arrowhead at the last one."""
        path = " ".join(f"{num(x)},{num(y)}" for x, y in points)
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        end = f' marker-end="url(#{self.marker(colour)})"' if head else ""
        self.add(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="{num(width)}" '
            f'stroke-linejoin="round"{dash}{end}/>'
        )

    def up(self, x: float, y_from: float, y_to: float, shape: str | None = None, side: int = 1) -> None:
        """A vertical arrow from y_from up to y_to, with a shape written beside it."""
        self.arrow((x, y_from), (x, y_to))
        if shape:
            self.text(
                x + side * 8, (y_from + y_to) / 2 + 4, shape, size=12, anchor="start" if side > 0 else "end", fill=MUTED
            )

    def dot(self, x: float, y: float, r: float = 3.5, colour: str = INK) -> None:
        self.add(f'<circle cx="{num(x)}" cy="{num(y)}" r="{num(r)}" fill="{colour}"/>')

    def plus(self, cx: float, cy: float, r: float = 11) -> Box:
        """The ⊕ of a residual sum or of adding positions."""
        self.add(
            f'<circle cx="{num(cx)}" cy="{num(cy)}" r="{num(r)}" fill="{PAPER}" stroke="{INK}" stroke-width="1.5"/>'
        )
        k = r * 0.6
        self.add(
            f'<path d="M{num(cx - k)},{num(cy)}H{num(cx + k)}M{num(cx)},{num(cy - k)}V{num(cy + k)}" '
            f'stroke="{INK}" stroke-width="1.5"/>'
        )
        return Box(cx - r, cy - r, 2 * r, 2 * r)

    def grid(
        self,
        x: float,
        y: float,
        rows: int,
        cols: int,
        cell: float,
        masked: Callable[[int, int], bool],
        title: str | None = None,
        kept: str = KEPT_CELL,
    ) -> Box:
        """A mask as a grid of cells (row i: a query, column j: a key); masked cells grey with a cross."""
        for i in range(rows):
            for j in range(cols):
                cx, cy = x + j * cell, y + i * cell
                if masked(i, j):
                    self.rect(cx, cy, cell, cell, MASKED_CELL, PAPER, rx=0)
                    k = cell * 0.25
                    self.add(
                        f'<path d="M{num(cx + k)},{num(cy + k)}L{num(cx + cell - k)},{num(cy + cell - k)}'
                        f'M{num(cx + cell - k)},{num(cy + k)}L{num(cx + k)},{num(cy + cell - k)}" '
                        f'stroke="{PAPER}" stroke-width="1.5"/>'
                    )
                else:
                    self.rect(cx, cy, cell, cell, kept, PAPER, rx=0)
        if title:
            self.text(x + cols * cell / 2, y - 8, title, size=12, fill=INK)
        return Box(x, y, cols * cell, rows * cell)

    def heading(self, x: float, y: float, words: str, anchor: str = "start", size: float = 16) -> None:
        self.text(x, y, words, size=size, anchor=anchor, weight="bold")

    @contextlib.contextmanager
    def link(self, href: str, label: str) -> Iterator[None]:
        """A link: what the ``with`` block draws goes to ``href`` (the whole page, target _top)."""
        self.add(
            f'<a href={quoteattr(href)} target="_top" aria-label={quoteattr(label)}><title>{escape(label)}</title>'
        )
        yield
        self.add("</a>")

    # -- the file -----------------------------------------------------------------------------
    def svg(self) -> str:
        defs = "".join(
            f'<marker id="{ident}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="{colour}"/></marker>'
            for colour, ident in self.markers.items()
        )
        role = f' role="img" aria-labelledby="{self.name}-title {self.name}-desc"' if self.image else ""
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" font-family="{FONT}"{role}>'
        )
        body = [
            head,
            f'<title id="{self.name}-title">{escape(self.title)}</title>',
            f'<desc id="{self.name}-desc">{escape(self.desc)}</desc>',
            f"<defs>{defs}</defs>",
            f'<rect x="0.5" y="0.5" width="{self.width - 1}" height="{self.height - 1}" rx="12" fill="{PAPER}" '
            f'stroke="{EDGE}"/>',
            *self.parts,
            "</svg>",
        ]
        return "\n".join(body) + "\n"


# -- shared pieces of the model's diagrams -------------------------------------------------------
def residual(f: Figure, cx: float, y_branch: float, target: Box, side: int, offset: float) -> None:
    """The residual path: from a dot on the main line at y_branch, around the sublayer, into target's side."""
    x = cx + side * offset
    edge = target.right if side > 0 else target.left
    f.dot(cx, y_branch)
    f.arrow((cx, y_branch), (x, y_branch), (x, target.cy), (edge, target.cy))


def stack(
    f: Figure,
    cx: float,
    items: list[tuple[str, str, str | None]],
    bottom: float,
    gap: float = 34,
    w: float = 200,
    h: float = 36,
) -> list[Box]:
    """Parts of a layer piled up from ``bottom``, ``gap`` apart, joined by arrows.

    Each item is (kind, label, sub); kind "+" is a residual sum.

    A box with a ``sub`` line is 10 px taller than ``h``; the gaps leave room for a residual branch's dot.
    """
    boxes: list[Box] = []
    y = bottom
    for kind, label, sub in items:
        if kind == "+":
            boxes.append(f.plus(cx, y - 11))
        else:
            height = h + (10 if sub else 0)
            boxes.append(f.box(cx - w / 2, y - height, w, height, label, kind, sub=sub))
        y = boxes[-1].top - gap
    for lower, upper in pairwise(boxes):
        f.up(cx, lower.top, upper.bottom)
    return boxes


# -- the diagrams ----------------------------------------------------------------------------------
def rnn_vs_attention() -> Figure:
    f = Figure(
        "rnn_vs_attention",
        880,
        390,
        "An RNN's path between two tokens against self-attention's",
        "Left: a recurrent network reads five tokens one after another; the first token enters h1 and "
        "reaches the last hidden state, h5, four steps later, one after another. Right: self-attention "
        "links every token to every other in one step, so the path between any two tokens has length 1 "
        "and all positions are computed at once.",
    )
    words = ["the", "cat", "sat", "on", "it"]
    accent = KINDS["new"][1]
    f.add(f'<line x1="440" y1="24" x2="440" y2="366" stroke="{EDGE}"/>')
    # the RNN
    f.heading(30, 40, "A recurrent network (RNN)")
    f.text(30, 62, "reads the tokens one after another", size=13, anchor="start", fill=MUTED)
    xs = [50 + 76 * i for i in range(5)]
    hidden = []
    for i, x in enumerate(xs):
        token = f.box(x, 280, 60, 34, words[i], "data")
        state = f.box(x, 170, 60, 40, f"h{i + 1}", "norm")
        f.arrow((token.cx, token.top), (state.cx, state.bottom), colour=accent if i == 0 else INK)
        hidden.append(state)
    for a, b in pairwise(hidden):
        f.arrow((a.right, a.cy), (b.left, b.cy), colour=accent, width=2.2)
    f.text(30, 128, "hidden state h passed along, one step at a time", size=12, anchor="start", fill=MUTED)
    f.text(235, 346, "h1 to h5: n − 1 = 4 steps in a row", size=13, fill=accent, weight="bold")
    f.text(235, 366, "the path grows with n, and step t waits for step t − 1", size=12, fill=MUTED)
    # self-attention
    f.heading(460, 40, "Self-attention")
    f.text(460, 62, "every token looks at every token at once", size=13, anchor="start", fill=MUTED)
    xs = [480 + 76 * i for i in range(5)]
    outs, ins = [], []
    for i, x in enumerate(xs):
        ins.append(f.box(x, 280, 60, 34, words[i], "data"))
        outs.append(Box(x, 120, 60, 34))
    for j, o in enumerate(outs):
        for i, t in enumerate(ins):
            if (i, j) != (0, 4):
                f.add(
                    f'<line x1="{num(t.cx)}" y1="{num(t.top)}" x2="{num(o.cx)}" y2="{num(o.bottom)}" '
                    f'stroke="{FAINT}" stroke-width="1"/>'
                )
    f.add(
        f'<line x1="{num(ins[0].cx)}" y1="{num(ins[0].top)}" x2="{num(outs[4].cx)}" y2="{num(outs[4].bottom)}" '
        f'stroke="{accent}" stroke-width="2.4"/>'
    )
    for i, o in enumerate(outs):
        f.box(o.x, o.y, o.w, o.h, words[i], "attn", weight="bold")
    f.text(660, 346, "any token to any other: path length 1", size=13, fill=accent, weight="bold")
    f.text(660, 366, "all n positions are computed in parallel", size=12, fill=MUTED)
    return f


# positions' example: a sentence's pieces (ids from lesson 2's tokenizer), then <eos>, as encode_pairs writes it
SOURCE_IDS = [315, 47, 908, EOS_ID]


def positions() -> Figure:
    f = Figure(
        "positions",
        780,
        560,
        "The input stage: token embeddings plus sinusoidal positions",
        f"Source token ids of shape (batch, seq), a sentence's pieces followed by {EOS} (id {EOS_ID}), go through "
        f"{TokenEmbedding.__name__}, a table lookup scaled by the square root of d_model, giving "
        f"(batch, seq, d_model). {SinusoidalPositionalEncoding.__name__} adds a fixed (seq, d_model) table of sines "
        "and cosines, the same for every sentence; dropout follows, and the result, (batch, seq, d_model), is the "
        "encoder's input.",
    )
    cx = 200
    f.heading(30, 34, "The input stage")
    out = f.box(cx - 120, 54, 240, 46, "the encoder's input", "data", sub="(batch, seq, d_model)")
    drop = f.box(cx - 100, 140, 200, 36, "Dropout", "data")
    add = f.plus(cx, 232)
    emb = f.box(
        cx - 130, 300, 260, 56, TokenEmbedding.__name__, "embed", sub="a (vocab_size, d_model) table, × √d_model"
    )
    ids = f.box(cx - 120, 420, 240, 56, "source token ids", "data", sub=str([SOURCE_IDS]))
    f.text(cx, ids.bottom + 22, f"the sentence's pieces, then {EOS} (id {EOS_ID})", size=12, fill=MUTED)
    f.text(cx, ids.bottom + 40, f"a shorter sentence is padded with {PAD} (id {PAD_ID})", size=12, fill=MUTED)
    f.up(cx, ids.top, emb.bottom, "(batch, seq)")
    f.up(cx, emb.top, add.bottom, "(batch, seq, d_model)")
    f.up(cx, add.top, drop.bottom, "(batch, seq, d_model)")
    f.up(cx, drop.top, out.bottom)
    # the positional encoding, with a picture of its table
    pe = Box(380, 110, 370, 380)
    f.rect(pe.x, pe.y, pe.w, pe.h, *KINDS["embed"], stroke_width="1.5")
    f.text(pe.cx, pe.y + 26, SinusoidalPositionalEncoding.__name__, size=15, weight="bold")
    f.text(pe.cx, pe.y + 50, "PE(pos, 2i) = sin(pos / 10000^(2i/d_model))", size=13)
    f.text(pe.cx, pe.y + 70, "PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))", size=13)
    rows, cols, cell = 20, 32, 9
    x0, y0 = pe.cx - cols * cell / 2 + 14, pe.y + 92  # shifted right: room for the rows' labels
    cells = []
    for pos in range(rows):
        for d in range(cols):
            i = d // 2
            angle = pos / 10000 ** (2 * i / cols)
            value = math.sin(angle) if d % 2 == 0 else math.cos(angle)
            cells.append(
                f'<rect x="{num(x0 + d * cell)}" y="{num(y0 + pos * cell)}" width="{cell}" height="{cell}" '
                f'fill="{diverging(value)}"/>'
            )
    f.add("<g>" + "".join(cells) + "</g>")
    f.text(x0 - 6, y0 + 8, "pos 0", size=12, anchor="end", fill=MUTED)
    f.text(x0 - 6, y0 + rows * cell, "pos 19", size=12, anchor="end", fill=MUTED)
    f.text(x0, y0 + rows * cell + 16, "dimension 0", size=12, anchor="start", fill=MUTED)
    f.text(x0 + cols * cell, y0 + rows * cell + 16, "31", size=12, anchor="end", fill=MUTED)
    f.text(pe.cx, pe.bottom - 36, "d_model = 32 here: blue −1, white 0, orange +1", size=12, fill=MUTED)
    f.text(pe.cx, pe.bottom - 16, "fixed, no weights; the same for every sentence", size=12, fill=MUTED)
    f.arrow((pe.left, add.cy), (add.right, add.cy))
    f.text((add.right + pe.left) / 2, add.cy - 8, "(seq, d_model)", size=12, fill=MUTED)
    return f


def diverging(value: float) -> str:
    """A colour for a value in [-1, 1]: blue at -1, white at 0, orange at +1."""
    low, high = (37, 99, 235), (234, 88, 12)
    end = high if value > 0 else low
    t = min(abs(value), 1.0)
    rgb = (round(255 + (c - 255) * t) for c in end)
    return "#" + "".join(f"{c:02x}" for c in rgb)


def attention() -> Figure:
    f = Figure(
        "attention",
        820,
        590,
        "Scaled dot-product attention, step by step",
        "Q and K are multiplied into scores of shape (batch, h, q_len, k_len), scaled by 1 over the square root "
        "of d_k, masked, turned into weights by a softmax over the keys, and multiplied with V into the output "
        "(batch, h, q_len, d_v). Two masks are drawn as grids: a padding mask hides the keys that are padding, "
        "a causal mask hides the keys after each query; masked cells are grey with a cross.",
    )
    cx, w = 430, 180
    f.heading(30, 34, "Scaled dot-product attention:  softmax(QKᵀ / √d_k) V")
    out = f.box(cx - 110, 52, 220, 46, "output", "data", sub="(batch, h, q_len, d_v)")
    mm2 = f.box(cx - w / 2, 138, w, 36, "MatMul  (weights · V)", "attn")
    soft = f.box(cx - w / 2, 210, w, 36, "Softmax over keys", "attn")
    mask = f.box(cx - w / 2, 282, w, 36, "Mask (optional)", "norm")
    scale = f.box(cx - w / 2, 354, w, 36, "Scale  ÷ √d_k", "attn")
    mm1 = f.box(cx - w / 2, 426, w, 36, "MatMul  Q Kᵀ", "attn")
    q = f.box(cx - 185, 505, 150, 46, "Q", "data", sub="(batch, h, q_len, d_k)", weight="bold")
    k = f.box(cx + 35, 505, 150, 46, "K", "data", sub="(batch, h, k_len, d_k)", weight="bold")
    v = f.box(cx + 215, 505, 150, 46, "V", "data", sub="(batch, h, k_len, d_v)", weight="bold")
    f.arrow((q.cx, q.top), (q.cx, 484), (cx - 30, 484), (cx - 30, mm1.bottom))
    f.arrow((k.cx, k.top), (k.cx, 484), (cx + 30, 484), (cx + 30, mm1.bottom))
    scores = "scores (batch, h, q_len, k_len)"
    f.up(cx, mm1.top, scale.bottom, scores)
    f.up(cx, scale.top, mask.bottom, scores)
    f.up(cx, mask.top, soft.bottom, scores)
    f.up(cx, soft.top, mm2.bottom, "weights (batch, h, q_len, k_len)")
    f.up(cx, mm2.top, out.bottom)
    f.arrow((v.cx, v.top), (v.cx, mm2.cy), (mm2.right, mm2.cy))
    # the two masks
    cell = 16
    pad = f.grid(40, 240, 6, 6, cell, lambda i, j: j >= 4, "padding mask")
    causal = f.grid(170, 240, 6, 6, cell, lambda i, j: j > i, "causal mask")
    f.text(pad.cx, pad.bottom + 16, f"the last 2 keys\nare {PAD}", size=12, fill=MUTED)
    f.text(causal.cx, causal.bottom + 16, "no key after\nits query", size=12, fill=MUTED)
    f.arrow((causal.right + 8, mask.cy), (mask.left - 2, mask.cy), dashed=True, colour=MUTED)
    f.text(40, 226 - 22, "rows: queries, columns: keys", size=12, anchor="start", fill=MUTED)
    f.key(40, 380, 14, 14, KEPT_CELL, PAPER, "kept", rx=0)
    f.key(40, 402, 14, 14, MASKED_CELL, PAPER, "masked: score set to −∞,\nso its weight is 0", rx=0)
    return f


def multi_head() -> Figure:
    f = Figure(
        "multi_head",
        900,
        700,
        "Multi-head attention, with the shape on every arrow",
        "The query (batch, q_len, d_model) and the key and value (batch, k_len, d_model) go through their own "
        "linear maps W_Q, W_K and W_V and are split into n_heads heads of d_head = d_model / n_heads, giving "
        "(batch, n_heads, q_len or k_len, d_head); each head runs scaled dot-product attention, the heads are "
        "concatenated back to (batch, q_len, d_model) and W_O mixes them into the output.",
    )
    f.heading(30, 32, f"Multi-head attention  ({MultiHeadAttention.__name__})")
    cx = 400
    out = f.box(cx - 120, 50, 240, 40, "output (batch, q_len, d_model)", "data")
    wo = f.box(cx - 110, 130, 220, 40, "W_O", "linear", sub="out_proj: Linear(d_model, d_model)")
    concat = f.box(cx - 110, 214, 220, 46, "concatenate the heads", "attn", sub="transpose, reshape")
    for back in (2, 1):
        f.rect(cx - 150 + 10 * back, 300 - 10 * back, 300, 60, *KINDS["attn"], stroke_width="1.5")
    card = f.box(cx - 150, 300, 300, 60, "scaled dot-product attention", "attn", sub="one head: its own d_head slice")
    f.text(cx + 182, 316, "× n_heads heads,\nall at once", size=13, anchor="start", fill=MUTED)
    f.up(cx, wo.top, out.bottom, "(batch, q_len, d_model)")
    f.up(cx, concat.top, wo.bottom, "(batch, q_len, n_heads · d_head) = (batch, q_len, d_model)")
    f.up(cx, 280, concat.bottom, "(batch, n_heads, q_len, d_head)")
    names = [("query", "W_Q", "q_proj"), ("key", "W_K", "k_proj"), ("value", "W_V", "v_proj")]
    for i, (name, weight, attr) in enumerate(names):
        x = 150 + 250 * i
        seq = "q_len" if name == "query" else "k_len"
        inp = f.box(x - 85, 600, 170, 46, name, "data", sub=f"(batch, {seq}, d_model)")
        lin = f.box(x - 85, 516, 170, 46, weight, "linear", sub=f"{attr}: Linear")
        split = f.box(x - 85, 420, 170, 46, "split into heads", "attn", sub="view, transpose")
        f.up(x, inp.top, lin.bottom)
        f.up(x, lin.top, split.bottom, f"(batch, {seq}, d_model)")
        port = cx + 60 * (i - 1)
        f.arrow((x, split.top), (x, 390), (port, 390), (port, card.bottom))
    f.text(660, 406, "(batch, n_heads, q_len or k_len, d_head)", size=12, anchor="start", fill=MUTED)
    f.text(
        450,
        676,
        "In self-attention query, key and value are all x (q_len = k_len); in cross-attention key and value are the "
        "encoder's memory.",
        size=12,
        fill=MUTED,
    )
    # d_model cut into n_heads slices
    bx, by, seg = 36, 150, 28
    f.text(bx, by - 12, "d_model = n_heads × d_head", size=13, anchor="start", weight="bold")
    for h in range(8):
        f.rect(bx + h * seg, by, seg, 26, KINDS["attn"][0] if h % 2 else KEPT_CELL, KINDS["attn"][1], rx=0)
        f.text(bx + h * seg + seg / 2, by + 18, str(h + 1), size=12)
    f.text(bx, by + 46, "the paper: 512 = 8 heads × 64", size=12, anchor="start", fill=MUTED)
    f.text(bx, by + 64, "each head sees one slice", size=12, anchor="start", fill=MUTED)
    return f


def encoder_layer() -> Figure:
    f = Figure(
        "encoder_layer",
        880,
        690,
        "The encoder layer, post-norm and pre-norm",
        f"Two versions of {EncoderLayer.__name__} side by side, data flowing upward. Post-norm, as in the paper: each "
        "sublayer (multi-head self-attention, then the position-wise feed-forward network) is followed by "
        "dropout, adding its input back and a LayerNorm. Pre-norm: a LayerNorm comes before each sublayer, and "
        "dropout and the residual sum come after it, leaving the residual path free of normalisation.",
    )
    attn = ("attn", "multi-head self-attention", "self_attn")
    ffn = ("ffn", FeedForward.__name__, "d_model → d_ff → d_model")
    norm = ("norm", "LayerNorm", None)
    add = ("+", "", None)
    panels = [
        (
            220,
            "Post-norm (the paper)",
            "norm_first=False",
            [attn, add, norm, ffn, add, norm],
            [(-1, 1), (2, 4)],
            "x = LayerNorm(x + Dropout(Sublayer(x)))",
        ),
        (
            660,
            "Pre-norm",
            "norm_first=True",
            [norm, attn, add, norm, ffn, add],
            [(-1, 2), (2, 5)],
            "x = x + Dropout(Sublayer(LayerNorm(x)))\n(Encoder adds one LayerNorm after the last layer)",
        ),
    ]
    f.add(f'<line x1="440" y1="24" x2="440" y2="666" stroke="{EDGE}"/>')
    for cx, title, flag, parts, skips, rule in panels:
        f.heading(cx, 34, title, anchor="middle")
        f.text(cx, 54, f"{EncoderLayer.__name__}(..., {flag})", size=13, fill=MUTED)
        inp = f.box(cx - 110, 576, 220, 44, "x", "data", sub="(batch, seq, d_model)")
        boxes = stack(f, cx, parts, inp.top - 34, w=210)
        out = f.box(cx - 110, boxes[-1].top - 34 - 44, 220, 44, "output", "data", sub="(batch, seq, d_model)")
        f.up(cx, inp.top, boxes[0].bottom)
        f.up(cx, boxes[-1].top, out.bottom)
        for start, end in skips:
            below = inp.top if start < 0 else boxes[start].top
            above = boxes[start + 1].bottom
            residual(f, cx, (below + above) / 2, boxes[end], -1, 135)
        f.text(cx, 644, rule, size=13)
    return f


def decoder_layer() -> Figure:
    f = Figure(
        "decoder_layer",
        860,
        850,
        "The decoder layer: masked self-attention, cross-attention, feed-forward",
        f"{DecoderLayer.__name__}, data flowing upward, in the paper's post-norm order. First masked "
        "multi-head self-attention over the target (the causal mask, and in a padded batch the target's "
        "padding); then cross-attention, whose queries come from the decoder and "
        "whose keys and values come from the encoder's memory; then the position-wise feed-forward network. Each "
        "sublayer is followed by dropout, a residual sum and a LayerNorm.",
    )
    cx = 450
    f.heading(30, 34, DecoderLayer.__name__)
    f.text(30, 54, "post-norm, as in the paper: x = LayerNorm(x + Dropout(Sublayer(x)))", size=13, anchor="start",
           fill=MUTED)  # fmt: skip
    parts = [
        ("attn", "masked multi-head self-attention", "self_attn: causal mask, target's padding"),
        ("+", "", None),
        ("norm", "LayerNorm", None),
        ("attn", "multi-head cross-attention", "cross_attn: Q from below, K and V from memory"),
        ("+", "", None),
        ("norm", "LayerNorm", None),
        ("ffn", FeedForward.__name__, "d_model → d_ff → d_model"),
        ("+", "", None),
        ("norm", "LayerNorm", None),
    ]
    inp = f.box(cx - 120, 780, 240, 46, "target so far", "data", sub="(batch, tgt_len, d_model)")
    boxes = stack(f, cx, parts, inp.top - 34, w=290)
    out = f.box(cx - 120, boxes[-1].top - 34 - 46, 240, 46, "output", "data", sub="(batch, tgt_len, d_model)")
    f.up(cx, inp.top, boxes[0].bottom)
    f.up(cx, boxes[-1].top, out.bottom)
    for start, end in [(-1, 1), (2, 4), (5, 7)]:
        below = inp.top if start < 0 else boxes[start].top
        residual(f, cx, (below + boxes[start + 1].bottom) / 2, boxes[end], 1, 175)
    cross = boxes[3]
    memory = f.box(24, cross.cy - 28, 220, 56, "memory from the encoder", "embed", sub="(batch, src_len, d_model)")
    f.arrow((memory.right, cross.cy), (cross.left, cross.cy))
    f.text((memory.right + cross.left) / 2, cross.cy - 8, "K, V", size=13, weight="bold")
    f.text(cx - 10, cross.bottom + 14, "Q", size=13, weight="bold", anchor="end")
    # the two masks, beside their sublayers
    first = boxes[0]
    grid = f.grid(670, first.cy - 30, 5, 5, 12, lambda i, j: j > i)
    note = "causal mask:\nquery t sees\nkeys 1 … t;\npadding hidden too"
    f.text(grid.right + 10, grid.y + 10, note, size=12, anchor="start", fill=MUTED)
    f.text(670, cross.cy - 4, "mask: the source's\npadding only", size=12, anchor="start", fill=MUTED)
    return f


def transformer() -> Figure:
    f = Figure(
        "transformer",
        900,
        900,
        "The whole Transformer, labelled with the package's class names",
        f"The paper's Figure 1, data flowing upward. Left, the encoder: source ids, {TokenEmbedding.__name__}, plus "
        f"{SinusoidalPositionalEncoding.__name__}, then N {EncoderLayer.__name__}s of multi-head self-attention and "
        f"{FeedForward.__name__}, each with Add & Norm. Right, the decoder: target ids shifted right, the same "
        f"{TokenEmbedding.__name__} (tied by default) plus positions, then N {DecoderLayer.__name__}s of masked "
        f"self-attention, cross-attention and {FeedForward.__name__}. In cross-attention the query comes from the "
        "decoder's own stream below it, and the encoder's output, the memory, gives the keys and the values. "
        "The generator, a Linear layer from d_model to vocab_size, gives the logits the model returns; a softmax, "
        "in the loss, in sampling and in beam search, turns them into next-token probabilities (greedy decoding "
        "takes the largest logit, the same token).",
    )
    f.heading(30, 34, f"The Transformer  ({Transformer.__name__})")
    f.text(30, 54, "N = n_layers layers in each stack (6 in the paper)", size=13, anchor="start", fill=MUTED)
    enc, dec, bottom = 290, 620, 664
    add_norm = ("norm", "Add & Norm", None)

    def tower(cx: float, side: int, embed: str, ids: str, ids_shape: str) -> Box:
        """Ids, embedding and positions under a stack; returns the ⊕ that feeds the stack."""
        ids_box = f.box(cx - 110, 832, 220, 48, ids, "data", sub=ids_shape)
        emb = f.box(cx - 100, 760, 200, 46, TokenEmbedding.__name__, "embed", sub=f"{embed}, × √d_model")
        add = f.plus(cx, 723)
        f.up(cx, ids_box.top, emb.bottom)
        f.up(cx, emb.top, add.bottom)
        name = SinusoidalPositionalEncoding.__name__
        pe = f.box(20 if side < 0 else 670, add.cy - 22, 210, 44, f"{name[:20]}-\n{name[20:]}", "embed", size=13)
        f.arrow((pe.right, add.cy) if side < 0 else (pe.left, add.cy), (add.left if side < 0 else add.right, add.cy))
        return add

    def frame(cx: float, top: float, label: str, side: int) -> None:
        box = Box(cx - 150, top, 300, bottom + 26 - top)
        f.rect(box.x, box.y, box.w, box.h, *KINDS["frame"], rx=10, stroke_width="1.5")
        f.text(
            box.x + 10 if side < 0 else box.right - 10,
            box.y + 18,
            label,
            size=13,
            anchor="start" if side < 0 else "end",
            weight="bold",
        )

    mha = MultiHeadAttention.__name__
    attn = ("attn", "multi-head self-attention", mha)
    ffn = ("ffn", FeedForward.__name__, "d_model → d_ff → d_model")
    # the encoder (its frame is drawn first, under its parts: a throwaway layout measures its top)
    e_items = [attn, add_norm, ffn, add_norm]
    d_items = [
        ("attn", "masked self-attention", mha),
        add_norm,
        ("attn", "cross-attention", mha),
        add_norm,
        ffn,
        add_norm,
    ]
    e_top = bottom - sum(46 if sub else 36 for _, _, sub in e_items) - 30 * (len(e_items) - 1) - 34
    d_top = bottom - sum(46 if sub else 36 for _, _, sub in d_items) - 30 * (len(d_items) - 1) - 34
    frame(enc, e_top, f"{EncoderLayer.__name__} × N", -1)
    frame(dec, d_top, f"{DecoderLayer.__name__} × N", 1)
    e_add = tower(enc, -1, "src_embed", "source ids", "(batch, src_len)")
    d_add = tower(dec, 1, "tgt_embed (tied)", "target ids, shifted right", f"(batch, tgt_len), from {BOS}")
    e = stack(f, enc, e_items, bottom, gap=30)
    d = stack(f, dec, d_items, bottom, gap=30)
    f.up(enc, e_add.top, e[0].bottom)
    f.up(dec, d_add.top, d[0].bottom)
    residual(f, enc, e[0].bottom + 18, e[1], -1, 125)
    residual(f, enc, (e[1].top + e[2].bottom) / 2, e[3], -1, 125)
    residual(f, dec, d[0].bottom + 18, d[1], 1, 125)
    for start, end in [(1, 3), (3, 5)]:
        residual(f, dec, (d[start].top + d[start + 1].bottom) / 2, d[end], 1, 125)
    # the memory: the encoder's output gives every decoder layer's cross-attention its keys and values;
    # the query comes from below, the decoder's own stream
    cross, turn = d[2], e_top - 30
    k_in, v_in = cross.cy - 9, cross.cy + 9
    f.arrow((enc, e[-1].top), (enc, turn), (450, turn), (450, v_in), (cross.left, v_in))
    f.dot(450, k_in)
    f.arrow((450, k_in), (cross.left, k_in))
    f.text(cross.left - 26, k_in - 5, "K", size=13, weight="bold")
    f.text(cross.left - 26, v_in + 16, "V", size=13, weight="bold")
    f.text(dec - 8, cross.bottom + 18, "Q", size=13, anchor="end", weight="bold")
    f.text((enc + 450) / 2, turn - 24, "memory", size=12, fill=MUTED)
    f.text((enc + 450) / 2, turn - 8, "(batch, src_len, d_model)", size=12, fill=MUTED)
    # the output
    gen = f.box(dec - 110, d_top - 26 - 44, 220, 44, "Linear (tied)", "out", sub="generator: d_model → vocab_size")
    soft = f.box(dec - 80, gen.top - 26 - 32, 160, 32, "Softmax", "out")
    probs = f.box(
        dec - 120, soft.top - 26 - 44, 240, 44, "next-token probabilities", "data", sub="(batch, tgt_len, vocab_size)"
    )
    f.up(dec, d[-1].top, gen.bottom)
    f.up(dec, gen.top, soft.bottom)
    f.up(dec, soft.top, probs.bottom)
    f.text(dec - 10, (gen.top + soft.bottom) / 2 + 4, "logits: what forward() returns", size=12, anchor="end")
    f.text(soft.left - 20, soft.top + 12, "in the loss, sampling", size=12, anchor="end", fill=MUTED)
    f.text(soft.left - 20, soft.top + 28, "and beam search", size=12, anchor="end", fill=MUTED)
    return f


LENGTHS = [9, 4, 12, 6, 3, 10, 7, 5, 11, 4, 8, 6]  # twelve sentences' lengths in tokens, in corpus order
BATCH_SIZE, TOKEN_BUDGET = 4, 40


def budget_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Lengths sorted, then cut greedily so that rows × longest stays within the budget of padded slots."""
    batches: list[list[int]] = [[]]
    for n in sorted(lengths):
        if batches[-1] and (len(batches[-1]) + 1) * n > budget:
            batches.append([])
        batches[-1].append(n)
    return batches


def token_batching() -> Figure:
    fixed = [LENGTHS[i : i + BATCH_SIZE] for i in range(0, len(LENGTHS), BATCH_SIZE)]
    packed = budget_batches(LENGTHS, TOKEN_BUDGET)
    tokens = sum(LENGTHS)

    def slots(batches: list[list[int]]) -> int:
        return sum(len(b) * max(b) for b in batches)

    f = Figure(
        "token_batching",
        900,
        430,
        "The same twelve sentences batched two ways",
        f"Left: batches of {BATCH_SIZE} sentences in corpus order, each padded to its longest sentence: "
        f"{slots(fixed) - tokens} of {slots(fixed)} slots are padding. Right: the sentences sorted by length and "
        f"cut into batches of at most {TOKEN_BUDGET} padded slots, so a batch of short sentences holds more of "
        f"them: {slots(packed) - tokens} of {slots(packed)} slots are padding. Training then shuffles the batches.",
    )
    cell, row = 15, 18
    panels = [
        (40, "Fixed batches of 4, in corpus order", "each padded to its longest sentence", fixed),
        (480, f"Sorted by length, at most {TOKEN_BUDGET} slots a batch", "rows × longest ≤ the token budget", packed),
    ]
    f.add(f'<line x1="450" y1="24" x2="450" y2="370" stroke="{EDGE}"/>')
    for x0, title, sub, batches in panels:
        f.heading(x0, 36, title, size=15)
        f.text(x0, 56, sub, size=13, anchor="start", fill=MUTED)
        y = 80
        for b, batch in enumerate(batches):
            f.text(x0 + 60, y + len(batch) * row / 2 + 4, f"batch {b + 1}", size=12, anchor="end", fill=MUTED)
            width = max(batch)
            cells = []
            for n in batch:
                for j in range(width):
                    colour = KEPT_CELL if j < n else PAD_CELL
                    cells.append(
                        f'<rect x="{num(x0 + 72 + j * cell)}" y="{num(y)}" width="{cell - 2}" height="{row - 3}" '
                        f'fill="{colour}"/>'
                    )
                y += row
            f.add("<g>" + "".join(cells) + "</g>")
            y += 12
        padding = slots(batches) - tokens
        f.text(
            x0,
            352,
            f"{len(batches)} batches, {slots(batches)} slots: {padding} padding "
            f"({round(100 * padding / slots(batches))}%)",
            size=14,
            anchor="start",
            weight="bold",
        )
    f.key(40, 386, 14, 14, KEPT_CELL, PAPER, "a token", rx=0)
    f.key(140, 386, 14, 14, PAD_CELL, PAPER, f"padding ({PAD}): computed, then masked and thrown away", rx=0)
    return f


# Beam search's example: each node is (token, log-probability of that token given the prefix above
# it); children follow. Only the kept hypotheses' children are ever scored, so a pruned node has
# none. Greedy would follow the most probable child at every step: A man rides <eos>. Beam search
# also keeps "Two", second at step 1, and "Two men ride <eos>" ends with the better total.
BEAM_TREE = (
    BOS,
    0.0,
    [
        (
            "A",
            -0.6,
            [
                (
                    "man",
                    -0.5,
                    [
                        ("rides", -0.7, [(EOS, -0.6, []), ("a", -1.2, [])]),
                        ("is", -1.0, []),
                    ],
                ),
                ("dog", -1.6, []),
            ],
        ),
        (
            "Two",
            -1.0,
            [
                (
                    "men",
                    -0.3,
                    [
                        ("ride", -0.2, [(EOS, -0.2, []), ("bikes", -2.0, [])]),
                        ("are", -1.9, []),
                    ],
                ),
                ("dogs", -1.8, []),
            ],
        ),
        ("The", -3.0, []),
    ],
)
BEAM_WIDTH, BEAM_STEPS = 2, 4


def beam_columns(tree: tuple = BEAM_TREE, width: int = BEAM_WIDTH, steps: int = BEAM_STEPS) -> list[list[dict]]:
    """The search, step by step: column s holds every hypothesis scored at step s (column 0: the root).

    Each node is a dict: ``token``, ``score`` (the sum of log-probabilities from the root), ``parent``,
    ``children`` (the tree's), ``rank`` among its column's scores (1 is best) and ``kept`` (rank <= width).
    Only kept hypotheses that have not ended with <eos> are extended. In
    ``transformer_lib.decoding.beam_search`` a finished one keeps its score and competes with the
    extensions for a place in the beam; this tree ends every hypothesis at its last step, so a finished
    one is drawn once, at its step, and never has to compete.
    """
    root = {"token": tree[0], "score": 0.0, "children": tree[2], "parent": None, "rank": 1, "kept": True}
    columns = [[root]]
    for _ in range(steps):
        column = [
            {"token": token, "score": round(parent["score"] + logp, 1), "children": children, "parent": parent}
            for parent in columns[-1]
            if parent["kept"] and parent["token"] != EOS
            for token, logp, children in parent["children"]
        ]
        for rank, node in enumerate(sorted(column, key=lambda n: -n["score"]), start=1):
            node["rank"], node["kept"] = rank, rank <= width
        columns.append(column)
    return columns


def hypothesis(node: dict) -> list[str]:
    """The tokens from the root to ``node``, the root excluded."""
    tokens = []
    while node["parent"] is not None:
        tokens.append(node["token"])
        node = node["parent"]
    return tokens[::-1]


def greedy_path(tree: tuple = BEAM_TREE) -> tuple[list[str], float]:
    """Greedy decoding on the same tree: the most probable child at every step, and its total score."""
    tokens, score, children = [], 0.0, tree[2]
    while children:
        token, logp, children = max(children, key=lambda child: child[1])
        tokens.append(token)
        score = round(score + logp, 1)
        if token == EOS:
            break
    return tokens, score


def beam_winner(columns: list[list[dict]]) -> dict:
    """The best finished hypothesis in the final beam (all kept ones are finished here), ranked as
    ``beam_search`` ranks them: its score over the length penalty (its tokens, <eos> counted), default alpha."""
    finished = [n for n in columns[-1] if n["kept"] and n["token"] == EOS]

    def normalized(node: dict) -> float:
        length = torch.tensor(float(len(hypothesis(node))))
        return node["score"] / float(length_penalty(length, DecodeConfig.alpha))

    return max(finished, key=normalized)


def minus(score: float) -> str:
    """A score as the figure writes it: one decimal, a true minus sign."""
    return "0.0" if score == 0 else f"{score:.1f}".replace("-", "−")


def beam_search() -> Figure:
    columns = beam_columns()
    winner = beam_winner(columns)
    won, won_text = hypothesis(winner), " ".join(hypothesis(winner))
    greedy, greedy_score = greedy_path()
    greedy_text = " ".join(greedy)
    # the first step at which the winner's prefix ranked second
    prefix, second = winner, None
    while prefix["parent"] is not None:
        if prefix["rank"] == 2:
            second = prefix
        prefix = prefix["parent"]
    second_text, second_step = " ".join(hypothesis(second)), len(hypothesis(second))
    f = Figure(
        "beam_search",
        900,
        560,
        f"Beam search with beam width {BEAM_WIDTH}, over {BEAM_STEPS} steps: the winner was second at step "
        f"{second_step}",
        f"A tree of hypotheses growing left to right from {BOS}. Each node shows a token and the hypothesis's "
        f"score, the sum of its tokens' log-probabilities. At each step only the {BEAM_WIDTH} best hypotheses are "
        f"kept (highlighted, with their rank) and extended; the others are pruned (faded). '{second_text}' ranks "
        f"second at step {second_step}, yet '{won_text}' wins with {minus(winner['score'])}. Greedy decoding, "
        f"taking the most probable token at each step, follows '{greedy_text}' and ends with "
        f"{minus(greedy_score)}.",
    )
    f.heading(30, 34, f"Beam search, beam width {BEAM_WIDTH}")
    f.text(
        30,
        54,
        "each node: a token and its hypothesis's score, the sum of log-probabilities so far",
        size=13,
        anchor="start",
        fill=MUTED,
    )
    xs, w, h, gap = [80, 240, 420, 600, 780], 120, 44, 70
    won_nodes, greedy_nodes = set(), set()
    for step, (x, column) in enumerate(zip(xs, columns, strict=True)):
        if step:
            f.text(x, 92, f"step {step}", size=13, weight="bold", fill=MUTED)
        top = 270 - (len(column) - 1) * gap / 2
        for i, node in enumerate(column):
            node["box"] = Box(x - w / 2, top + i * gap - h / 2, w, h)
            if hypothesis(node) == won[: len(hypothesis(node))]:
                won_nodes.add(id(node))
            if hypothesis(node) == greedy[: len(hypothesis(node))]:
                greedy_nodes.add(id(node))
    winner_colour, greedy_colour = KINDS["ffn"][1], KINDS["new"][1]
    for column in columns[1:]:
        for node in column:
            parent, box = node["parent"]["box"], node["box"]
            colour = (
                winner_colour
                if id(node) in won_nodes
                else greedy_colour
                if id(node) in greedy_nodes
                else INK
                if node["kept"]
                else FAINT
            )
            f.arrow(
                (parent.right, parent.cy),
                (box.left - 2, box.cy),
                colour=colour,
                dashed=not node["kept"],
                width=2.6 if colour in (winner_colour, greedy_colour) else 1.6 if node["kept"] else 1.2,
            )
    for step, column in enumerate(columns):
        for node in column:
            b = node["box"]
            finished = node["kept"] and node["token"] == EOS
            kind = "ffn" if finished else "attn" if node["kept"] else "data"
            f.box(b.x, b.y, b.w, b.h, node["token"], kind, sub=minus(node["score"]), faded=not node["kept"],
                  weight="bold")  # fmt: skip
            if finished:
                f.rect(b.x - 4, b.y - 4, b.w + 8, b.h + 8, "none", KINDS["ffn"][1], rx=9, stroke_width="1.5")
            if step and node["kept"]:
                rank = "1st" if node["rank"] == 1 else "2nd"
                f.text(b.left, b.top - (9 if finished else 6), rank, size=12, anchor="start", weight="bold")
    w_box = winner["box"]
    f.text(w_box.right + 4, w_box.top - 9, "the winner", size=12, anchor="end", weight="bold", fill=winner_colour)
    ly = 462
    f.key(30, ly, 22, 16, *KINDS["attn"], "kept in the beam (1st, 2nd)")
    f.key(250, ly, 22, 16, *KINDS["data"], f"pruned: not among the {BEAM_WIDTH} best", opacity="0.45",
          stroke_dasharray="4 3")  # fmt: skip
    f.key(500, ly, 22, 16, *KINDS["ffn"], f"finished: ends with {EOS}, keeps its score")
    f.arrow((30, ly + 38), (52, ly + 38), colour=winner_colour, width=2.6)
    f.text(
        60,
        ly + 42,
        f"beam search: {won_text}  {minus(winner['score'])}; '{second_text}' was only 2nd at step {second_step}",
        size=13,
        anchor="start",
        weight="bold",
        fill=winner_colour,
    )
    f.arrow((30, ly + 62), (52, ly + 62), colour=greedy_colour, width=2.6)
    f.text(
        60,
        ly + 66,
        f"greedy, the most probable token at each step: {greedy_text}  {minus(greedy_score)}",
        size=13,
        anchor="start",
        weight="bold",
        fill=greedy_colour,
    )
    return f


def kv_cache() -> Figure:
    f = Figure(
        "kv_cache",
        900,
        590,
        "The key-value cache of one self-attention during decoding",
        "Three decoding steps, one a row. At step t only the new token is fed in: from its vector x_t the layer's "
        "projections compute its query q_t (W_Q), key k_t (W_K) and value v_t (W_V). k_t and v_t are appended "
        "to the cached K and V (orange), the earlier ones are read from the cache (blue), and only the new "
        "token's query attends over the whole cache, giving one new output row. Each decoder layer also keeps its "
        "cross-attention's keys and values of the encoder's memory, computed at the first step.",
    )
    f.heading(30, 34, f"One self-attention's key-value cache  (in {KVCache.__name__}: one a decoder layer)")
    f.text(
        30,
        54,
        "decoding one token a step: keys and values are computed once, then kept",
        size=13,
        anchor="start",
        fill=MUTED,
    )
    heads = [(100, "new token"), (205, "its query"), (370, "K cache"), (630, "V cache"), (820, "output")]
    for x, label in heads:
        f.text(x, 92, label, size=13, weight="bold")
    f.text(100, 110, "(batch, 1, d_model)", size=12, fill=MUTED)
    f.text(370, 110, "(batch, n_heads, t, d_head)", size=12, fill=MUTED)
    f.text(630, 110, "(batch, n_heads, t, d_head)", size=12, fill=MUTED)
    words = [BOS, "A", "man"]
    cw, ch = 44, 34
    accent = KINDS["new"][1]
    for t in range(1, 4):
        cy = 100 + 90 * t
        f.text(20, cy + 4, f"t = {t}", size=12, anchor="start", fill=MUTED)
        token = f.box(60, cy - 22, 80, 44, words[t - 1], "data", sub=f"x{t}", weight="bold")
        q = f.box(180, cy - ch / 2, 50, ch, f"q{t}", "new")
        f.arrow((token.right, cy), (q.left, cy), colour=accent)
        f.text((token.right + q.left) / 2, cy - 7, "W_Q", size=12, fill=accent, weight="bold")
        new = {}
        for name, x0 in (("k", 280), ("v", 540)):
            for i in range(1, t + 1):
                cell = f.box(x0 + (i - 1) * cw, cy - ch / 2, cw - 4, ch, f"{name}{i}", "new" if i == t else "attn")
            new[name] = cell
        # k_t and v_t come from the same x_t, through W_K and W_V
        low = cy + 40
        f.arrow((token.cx, token.bottom), (token.cx, low), (new["v"].cx, low), (new["v"].cx, new["v"].bottom),
                colour=accent)  # fmt: skip
        f.dot(new["k"].cx, low, colour=accent)
        f.arrow((new["k"].cx, low), (new["k"].cx, new["k"].bottom), colour=accent)
        f.text(new["k"].cx + 6, low - 6, "W_K", size=12, anchor="start", fill=accent, weight="bold")
        f.text(new["v"].cx + 6, low - 6, "W_V", size=12, anchor="start", fill=accent, weight="bold")
        f.arrow((q.right, cy), (276, cy))
        f.arrow((280 + t * cw, cy), (536, cy))
        f.arrow((540 + t * cw, cy), (770, cy))
        f.box(772, cy - ch / 2, 96, ch, "1 new row", "data", size=12)
    f.text(430, 182, "softmax(q kᵀ / √d_head)", size=12, fill=MUTED)
    f.text(700, 182, "weights · V", size=12, fill=MUTED)
    ly = 456
    f.key(30, ly, 22, 16, *KINDS["new"], "computed this step, from the new token's x_t: q_t, k_t and v_t")
    f.key(30, ly + 26, 22, 16, *KINDS["attn"], "read from the cache, not computed again")
    f.text(
        30,
        ly + 64,
        "W_Q, W_K, W_V: the attention layer's q_proj, k_proj and v_proj, then split into heads; k_t and v_t are "
        "appended.",
        size=12,
        anchor="start",
        fill=MUTED,
    )
    f.text(
        30,
        ly + 86,
        "Without a cache, step t would compute the keys and values of all t tokens again.",
        size=12,
        anchor="start",
        fill=MUTED,
    )
    f.text(
        30,
        ly + 108,
        "Each decoder layer's cross-attention also keeps the keys and values of the encoder's memory, computed at "
        "step 1.",
        size=12,
        anchor="start",
        fill=MUTED,
    )
    return f


def flash_tiles() -> Figure:
    f = Figure(
        "flash_tiles",
        900,
        540,
        "Tiled attention: one query block meets each key and value block in turn",
        "Q, K and V are cut into four blocks each. The n by n matrix of scores is drawn dashed: it is never stored "
        "whole. Query block 2 meets key and value block 1 (done), block 2 (now) and blocks 3 and 4 (next), one tile "
        "of scores at a time, keeping a running maximum and a running sum per row (the online softmax), so the "
        "result equals softmax(QKᵀ/√d_k)V, up to rounding, without the n by n matrix. (Lesson 12's flash_by_hand "
        "takes every query block at once, a column of tiles a step; the package's tiled_attention walks the query "
        "blocks as drawn.)",
    )
    f.heading(30, 34, "Tiled attention (FlashAttention's idea)")
    f.text(30, 54, "the n × n scores exist one tile at a time, never whole", size=13, anchor="start", fill=MUTED)
    x0, y0, t, row = 190, 140, 70, 1
    f.text(x0 + 2 * t, 92, "K blocks (keys)", size=13, weight="bold")
    f.text(110 + 30, y0 - 14, "Q blocks", size=13, weight="bold")
    for j in range(4):
        f.box(x0 + j * t + 4, 102, t - 8, 28, f"K{j + 1}", "attn", size=13)
        f.box(x0 + j * t + 4, y0 + 4 * t + 12, t - 8, 28, f"V{j + 1}", "ffn", size=13)
    f.text(x0 + 2 * t, y0 + 4 * t + 62, "V blocks (split as K is)", size=13, weight="bold")
    for i in range(4):
        f.box(
            110,
            y0 + i * t + 4,
            60,
            t - 8,
            f"Q{i + 1}",
            "new" if i == row else "data",
            size=13,
            weight="bold" if i == row else "normal",
        )
    for i in range(4):
        for j in range(4):
            x, y = x0 + j * t, y0 + i * t
            if i == row and j == 0:
                f.rect(x + 3, y + 3, t - 6, t - 6, KINDS["new"][0], KINDS["new"][1], rx=3, opacity="0.5")
                f.text(x + t / 2, y + t / 2 + 4, "done", size=12, fill=MUTED)
            elif i == row and j == 1:
                f.rect(x + 3, y + 3, t - 6, t - 6, KINDS["new"][0], KINDS["new"][1], rx=3, stroke_width="2.5")
                f.text(x + t / 2, y + t / 2 - 8, "S =", size=12, weight="bold")
                f.text(x + t / 2, y + t / 2 + 7, "Q2 K2ᵀ", size=12, weight="bold")
            elif i == row:
                f.rect(x + 3, y + 3, t - 6, t - 6, "none", KINDS["new"][1], rx=3, stroke_dasharray="4 3")
                f.text(x + t / 2, y + t / 2 + 4, "next", size=12, fill=MUTED)
            else:
                f.rect(x + 3, y + 3, t - 6, t - 6, "none", FAINT, rx=3, stroke_dasharray="3 4")
    f.arrow((x0 + 8, y0 + row * t + t - 8), (x0 + 4 * t - 8, y0 + row * t + t - 8), colour=KINDS["new"][1])
    # the online softmax, as the kernel runs it for one query block
    px = 500
    f.rect(px, 84, 370, 366, *KINDS["frame"], rx=10, stroke_width="1.5")
    f.text(px + 16, 110, "for each K, V block j, in turn:", size=14, anchor="start", weight="bold")
    steps = [
        "S = Q_i K_jᵀ / √d_k",
        "m_new = max(m, rowmax(S))",
        "ℓ = ℓ · e^(m − m_new) + rowsum(e^(S − m_new))",
        "O = O · e^(m − m_new) + e^(S − m_new) V_j",
        "m = m_new",
    ]
    for k, line in enumerate(steps):
        f.text(px + 28, 140 + 26 * k, line, size=13, anchor="start")
    f.text(px + 16, 290, "after the last block:  O = O / ℓ", size=14, anchor="start", weight="bold")
    f.text(px + 16, 322, "m: running maximum of each row's scores", size=12, anchor="start", fill=MUTED)
    f.text(px + 16, 342, "ℓ: running sum of each row's exponentials", size=12, anchor="start", fill=MUTED)
    f.text(px + 16, 362, "O: the output block, rescaled as m grows", size=12, anchor="start", fill=MUTED)
    f.text(px + 16, 394, "fast memory holds one tile, not n × n", size=12, anchor="start", weight="bold")
    f.text(px + 16, 416, "(lesson 12's flash_by_hand takes all Q blocks at once:", size=12, anchor="start", fill=MUTED)
    f.text(px + 16, 434, "a column of tiles a step)", size=12, anchor="start", fill=MUTED)
    f.text(
        450, 516, "The result equals softmax(QKᵀ / √d_k) V, up to rounding; memory grows as n, not n².", size=13,
        weight="bold",
    )  # fmt: skip
    return f


def cuda_graph() -> Figure:
    f = Figure(
        "cuda_graph",
        900,
        420,
        "A training step's kernels: launched one by one, or the model's passes replayed as CUDA graphs",
        "Two timelines of the same step, time running to the right. Above, the CPU launches each small kernel in "
        "turn and the GPU runs each one as soon as it is launched, so the GPU idles between kernels and the step ends "
        "late. Below, the CPU replays the model's recorded forward pass with one launch, launches the loss, replays "
        "the recorded backward pass with one launch, and launches the gradients' scaling, their clipping and the "
        "optimizer's update one by one. The GPU runs each graph's kernels back to back, so the step ends earlier.",
    )
    f.heading(30, 34, "Launching kernels one by one, or replaying the model's passes as CUDA graphs")
    f.text(30, 54, "a small model's step: the GPU waits for the CPU's launches", size=13, anchor="start", fill=MUTED)
    launch, gap, run = 40, 6, 18
    # (CPU label, CPU width, GPU kernels it starts): a graph's replay starts all of its pass's kernels;
    # "scale" multiplies the gradients by the step's scale (the optimizer's apply)
    launches = [
        ("forward", 64, 3),
        ("loss", launch, 1),
        ("backward", 72, 3),
        ("scale", launch, 1),
        ("clip", launch, 1),
        ("Adam", launch, 1),
    ]
    kernels = sum(count for _, _, count in launches)  # one by one, each its own launch
    x0, lane = 150, 30
    cpu, gpu = KINDS["attn"], KINDS["ffn"]

    def lanes(y: float, title: str) -> None:
        f.text(30, y - 14, title, size=14, anchor="start", weight="bold")
        f.text(x0 - 12, y + lane * 0.65, "CPU", size=13, anchor="end")
        f.text(x0 - 12, y + 44 + lane * 0.65, "GPU", size=13, anchor="end")
        f.arrow((x0, y + 44 + lane + 10), (860, y + 44 + lane + 10), colour=FAINT, head=True, width=1.2)

    top = 100
    lanes(top, "one by one")
    for k in range(kernels):
        x = x0 + k * (launch + gap)
        f.rect(x, top, launch, lane, *cpu, rx=3)
        f.rect(x + launch, top + 44, run, lane, *gpu, rx=3)
    eager_end = x0 + (kernels - 1) * (launch + gap) + launch + run
    f.text(eager_end + 10, top + 44 + lane * 0.65, "idle between kernels", size=12, anchor="start", fill=MUTED)
    f.arrow((eager_end, top - 6), (eager_end, top + 44 + lane + 4), colour=MUTED, dashed=True, head=False)
    f.text(eager_end, top - 10, "step ends", size=12, fill=MUTED)

    bottom = 260
    lanes(bottom, "the model's forward and backward passes replayed as CUDA graphs")
    cpu_x = gpu_x = x0
    for label, width, count in launches:
        f.rect(cpu_x, bottom, width, lane, *cpu, rx=3)
        f.centred_text(cpu_x + width / 2, bottom + lane / 2, label, size=12)
        cpu_x += width
        gpu_x = max(gpu_x, cpu_x)  # a kernel starts once it is launched and the one before has run
        for _ in range(count):
            f.rect(gpu_x, bottom + 44, run, lane, *gpu, rx=3)
            gpu_x += run + 2
    graph_end = gpu_x - 2
    f.arrow((graph_end, bottom - 6), (graph_end, bottom + 44 + lane + 14), colour=MUTED, dashed=True, head=False)
    f.text(graph_end, bottom + 44 + lane + 28, "step ends", size=12, fill=MUTED)  # below: the title is long
    f.text(graph_end + 10, bottom + 44 + lane * 0.65, "a graph's kernels run back to back", size=12, anchor="start",
           fill=MUTED)  # fmt: skip

    ly = 380
    f.key(30, ly, 22, 16, *cpu, "CPU: launching a kernel (or replaying a graph)")
    f.key(420, ly, 22, 16, *gpu, "GPU: running a kernel")
    f.text(760, ly + 13, "time →", size=12, fill=MUTED)
    return f


def family() -> Figure:
    BERT, GPT = bert.BERT.__name__, gpt.GPT.__name__
    layer, dlayer = EncoderLayer.__name__, DecoderLayer.__name__
    f = Figure(
        "family",
        900,
        480,
        "The Transformer's family and their attention masks",
        f"Three panels. Encoder-only, like BERT (family.{BERT}): a stack of {layer}s with bidirectional attention, "
        f"every token sees every token; only {PAD} keys are masked (a full mask grid, as this sentence has no "
        f"padding). Decoder-only, like GPT (family.{GPT}): the same {layer}s, run with a causal mask, so each token "
        f"sees itself and earlier tokens (a lower triangle); without cross-attention a decoder layer is an encoder "
        f"layer. Encoder-decoder, like T5 and the original {Transformer.__name__}: {layer}s with a padding mask, "
        f"{dlayer}s with a causal mask (and, in a padded batch, the target's padding), and cross-attention from every "
        f"target token to every source token but {PAD} (the grids show a sentence without padding).",
    )
    f.heading(450, 32, "One architecture, three families", anchor="middle")
    f.text(450, 52, "masks: rows are queries, columns are keys; grey cells are masked", size=12, fill=MUTED)
    for x in (300, 600):
        f.add(f'<line x1="{x}" y1="64" x2="{x}" y2="456" stroke="{EDGE}"/>')
    panels = [
        (
            150,
            "Encoder-only",
            f"BERT (family.{BERT})",
            f"bidirectional: every token sees\nevery token; only {PAD} is hidden",
            "fill in masked words,\nclassify, tag",
        ),
        (
            450,
            "Decoder-only",
            f"GPT (family.{GPT})",
            "causal: each token sees\nitself and the tokens before",
            "generate text, one\nnext token at a time",
        ),
        (
            750,
            "Encoder-decoder",
            f"T5; the original ({Transformer.__name__})",
            f"encoder: padding mask; decoder:\ncausal; cross: every source\ntoken but {PAD}",
            "translate, summarise:\ntext in, text out",
        ),
    ]
    for cx, title, sub, mask_note, uses in panels:
        f.text(cx, 84, title, size=16, weight="bold")
        f.text(cx, 104, sub, size=13, fill=MUTED)
        f.text(cx, 386, mask_note, size=12, fill=MUTED)
        f.text(cx, 436, "uses: " + uses.split("\n")[0], size=13)
        f.text(cx, 453, uses.split("\n")[1], size=13)
    # the blocks, named as the code builds them
    f.box(150 - 100, 122, 200, 56, f"{layer} × N", "attn", sub="self-attention, padding mask")
    f.box(450 - 100, 122, 200, 56, f"{layer} × N", "attn", sub="self-attention, causal mask")
    f.text(450, 204, "no cross-attention: the same layer as BERT's", size=12, fill=MUTED)
    enc = f.box(612, 122, 122, 56, "encoder", "attn", sub=f"{layer} × N")
    dec = f.box(766, 122, 122, 56, "decoder", "attn", sub=f"{dlayer} × N")
    f.arrow((enc.right, enc.cy), (dec.left, dec.cy))
    # the masks (rows: queries, columns: keys)
    f.grid(100, 244, 5, 5, 20, lambda i, j: False, "every token, both ways")
    f.grid(400, 244, 5, 5, 20, lambda i, j: j > i, "no looking ahead")
    f.grid(620, 244, 5, 5, 13, lambda i, j: False, "encoder")
    f.grid(718, 244, 5, 5, 13, lambda i, j: j > i, "decoder")
    f.grid(816, 244, 5, 5, 13, lambda i, j: False, "cross")
    return f


# book_map's links: from book/_static/figures/ (the SVG's own address decides) to each lesson's page.
# Every notebook in notebooks/ has a part: the lessons by number, the appendix as "A".
LESSONS = {
    "01": "01_why_attention",
    "02": "02_tokens",
    "03": "03_embeddings_and_positions",
    "04": "04_attention",
    "05": "05_multi_head_attention",
    "06": "06_encoder",
    "07": "07_decoder",
    "08": "08_transformer",
    "09": "09_training",
    "10": "10_decoding",
    "11": "11_multi30k",
    "12": "12_efficiency",
    "13": "13_family",
    "A": "appendix_cpu_recipe",
}


def lesson_url(number: str) -> str:
    """The lesson's page relative to the map itself (_static/figures/), so it holds in <object> and alone."""
    return f"../../notebooks/{LESSONS[number]}.html"


def lesson_name(number: str) -> str:
    """How a link names its page: "Lesson 4", or "The appendix"."""
    return "The appendix" if number == "A" else f"Lesson {int(number)}"


def book_map() -> Figure:
    f = Figure(
        "book_map",
        900,
        870,
        "The map of the book: the Transformer, each part linked to its lesson",
        "The Transformer drawn once, each part a link to the lesson that builds it: why attention (lesson 1), "
        "tokens (2), embeddings and positions (3), attention (4), multi-head attention (5), the encoder (6), the "
        "decoder (7), the whole model (8), training (9), decoding (10) and the German-English translator (11); "
        "above them, efficiency (12), the family of BERT and GPT (13) and the appendix's CPU recipe.",
        image=False,
    )
    f.add("<style>a:hover .part{stroke-width:3px} a:focus .part{stroke-width:3px}</style>")

    def badge(x: float, y: float, number: str) -> None:
        f.add(f'<circle cx="{num(x)}" cy="{num(y)}" r="14" fill="{INK}"/>')
        f.text(x, y + 4.5, number, size=12, weight="bold", fill=PAPER)

    def part(number: str, box: Box, kind: str, label: str, sub: str | None = None, title: str = "") -> None:
        """A linked box with its lesson's number in a badge at its top-left corner."""
        with f.link(lesson_url(number), f"{lesson_name(number)}: {title or label}"):
            fill, stroke = KINDS[kind]
            f.add(
                f'<rect class="part" x="{num(box.x)}" y="{num(box.y)}" width="{num(box.w)}" height="{num(box.h)}" '
                f'rx="8" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
            )
            if sub and label:
                f.text(box.cx + 12, box.cy - 3, label, size=14, weight="bold")
                f.text(box.cx + 12, box.cy + 15, sub, size=12, fill=MUTED)
            elif label:
                f.centred_text(box.cx + 12, box.cy, label, size=14, weight="bold")
            else:  # a frame around another part: its title at the top-left, beside the badge
                f.text(box.x + 44, box.y + 25, title, size=14, anchor="start", weight="bold")
            badge(box.x + 20, box.y + (box.h / 2 if label else 22), number)

    f.heading(30, 34, "The map of the book")
    f.text(
        30,
        54,
        "the Transformer drawn once: click a part to open the lesson that builds it",
        size=13,
        anchor="start",
        fill=MUTED,
    )
    # beyond the model: efficiency, the family, the appendix
    part("12", Box(30, 72, 270, 56), "new", "Efficiency", "FlashAttention, caches, precision", title="Efficiency")
    part("13", Box(330, 72, 260, 56), "new", "The family", "BERT, GPT, Vision Transformer", title="The family")
    part("A", Box(620, 72, 250, 56), "new", "The CPU recipe", "tuning the translator on a CPU",
         title="tuning the CPU recipe")  # fmt: skip
    d = 84  # everything below sits under that row
    # what the model is for: training, decoding, the translator
    train = Box(30, 72 + d, 270, 56)
    decode = Box(330, 72 + d, 260, 56)
    translate = Box(620, 72 + d, 250, 56)
    part("09", train, "out", "Training", "loss, warm-up, batches")
    part("10", decode, "out", "Decoding", "greedy, beam search, cache")
    part("11", translate, "out", "The translator", "German ↔ English", title="The translator: Multi30k")
    # the whole model: one linked frame, drawn first so its parts sit on top
    whole = Box(30, 150 + d, 840, 450)
    with f.link(lesson_url("08"), "Lesson 8: the whole Transformer"):
        f.add(
            f'<rect class="part" x="{num(whole.x)}" y="{num(whole.y)}" width="{num(whole.w)}" height="{num(whole.h)}" '
            f'rx="12" fill="{KINDS["frame"][0]}" stroke="{KINDS["frame"][1]}" stroke-width="1.5"/>'
        )
        badge(whole.x + 22, whole.y + 22, "08")
        f.text(whole.x + 44, whole.y + 27, "The whole Transformer", size=15, anchor="start", weight="bold")
        gen = f.box(520, 170 + d, 300, 44, "Linear", "out", sub="next-token logits")
    # the encoder, with multi-head attention and attention inside it
    enc = Box(60, 300 + d, 370, 210)
    with part_frame(f, "06", enc, "Encoder  (× N)", badge):
        f.box(90, 346 + d, 310, 40, "feed-forward, Add & Norm", "ffn", size=13)
    mha = Box(90, 402 + d, 310, 96)
    part("05", mha, "attn", "", title="Multi-head attention")
    part("04", Box(130, 438 + d, 250, 48), "linear", "Attention", "softmax(QKᵀ/√d_k) V", title="Attention")
    # the decoder
    dec = Box(470, 240 + d, 370, 270)
    with part_frame(f, "07", dec, "Decoder  (× N)", badge):
        f.box(500, 286 + d, 310, 40, "feed-forward, Add & Norm", "ffn", size=13)
        cross = f.box(
            500, 346 + d, 310, 52, "cross-attention", "attn", size=13, sub="Q from the decoder, K and V from memory"
        )
        f.box(500, 418 + d, 310, 52, "masked self-attention", "attn", size=13, sub="no looking ahead")
    # how they connect
    f.arrow((245, enc.top), (245, 270 + d), (450, 270 + d), (450, cross.cy), (cross.left, cross.cy))
    f.text(255, 262 + d, "memory", size=12, anchor="start", fill=MUTED)
    f.arrow((gen.cx, dec.top), (gen.cx, gen.bottom))
    f.arrow((560, gen.top), (560, decode.bottom))
    f.arrow((gen.left, 204 + d), (165, 204 + d), (165, train.bottom))
    f.arrow((decode.right, decode.cy), (translate.left, translate.cy))
    # embeddings, tokens, and where the book starts
    emb = Box(60, 530 + d, 780, 54)
    part("03", emb, "embed", "Embeddings and positions", "× √d_model, + sinusoidal positional encoding")
    f.arrow((245, emb.top), (245, enc.bottom))
    f.arrow((655, emb.top), (655, dec.bottom))
    tokens = Box(60, 620 + d, 780, 54)
    part(
        "02",
        tokens,
        "data",
        "Tokens",
        "\u201cZwei Hunde spielen im Schnee.\u201d → subword ids, and back",
        title="Tokens",
    )
    f.arrow((245, tokens.top), (245, emb.bottom))
    f.arrow((655, tokens.top), (655, emb.bottom))
    start = Box(60, 710 + d, 780, 54)
    part("01", start, "data", "Why attention", "start here: a recurrent network against self-attention",
         title="Why attention")  # fmt: skip
    return f


@contextlib.contextmanager
def part_frame(
    f: Figure, number: str, box: Box, label: str, badge: Callable[[float, float, str], None]
) -> Iterator[None]:
    """A linked frame (a stack of layers) with its lesson's badge and name at its top-left corner; what the
    ``with`` block draws (the frame's own sub-layers) is inside the link."""
    with f.link(lesson_url(number), f"{lesson_name(number)}: the {label.split()[0].lower()}"):
        f.add(
            f'<rect class="part" x="{num(box.x)}" y="{num(box.y)}" width="{num(box.w)}" height="{num(box.h)}" '
            f'rx="10" fill="#eef2f7" stroke="#64748b" stroke-width="1.5"/>'
        )
        badge(box.x + 22, box.y + 22, number)
        f.text(box.x + 44, box.y + 27, label, size=15, anchor="start", weight="bold")
        yield


DIAGRAMS = [
    rnn_vs_attention,
    positions,
    attention,
    multi_head,
    encoder_layer,
    decoder_layer,
    transformer,
    token_batching,
    beam_search,
    kv_cache,
    flash_tiles,
    cuda_graph,
    family,
    book_map,
]


def render_all() -> dict[str, str]:
    """Every diagram's file name and SVG text."""
    out = {}
    for draw in DIAGRAMS:
        figure = draw()
        out[f"{figure.name}.svg"] = figure.svg()
    return out


def main(folder: Path = FIGURES) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in render_all().items():
        (folder / name).write_text(text, encoding="utf-8")
        print(f"{name}: {len(text.encode()) / 1024:.1f} KB")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else FIGURES)
