"""The book's diagrams: every planned file is there and well formed, the script draws exactly them,
the lessons show them by names that exist with alt text, the map links to every lesson, the site
serves its own copies and opens each one full size (book/_ext/figures.py); what the diagrams say
about the package (special tokens, class names, beam search) is true of it; their text is legible
(large enough, with enough contrast)."""

import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from docutils import nodes
from docutils.utils import new_document

from conftest import load_file

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "book" / "_static" / "figures"
SVG = "{http://www.w3.org/2000/svg}"
PLAN = [
    "rnn_vs_attention",
    "positions",
    "attention",
    "multi_head",
    "encoder_layer",
    "decoder_layer",
    "transformer",
    "token_batching",
    "beam_search",
    "kv_cache",
    "flash_tiles",
    "cuda_graph",
    "family",
    "book_map",
]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
# The map's badge for each notebook: the lesson's number, "A" for the appendix
MAP_LESSONS = {stem: stem[:2] if stem[:2].isdigit() else "A" for stem in NOTEBOOKS}
BASEURL = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["html"]["baseurl"]
PUBLISHED = BASEURL.rstrip("/") + "/_static/figures/"
MARKDOWN_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def draw():
    return load_file(ROOT / "book" / "diagrams" / "draw.py", "book_diagrams_draw")


@pytest.fixture(scope="module")
def extension():
    return load_file(ROOT / "book" / "_ext" / "figures.py", "book_ext_figures")


@pytest.mark.parametrize("name", PLAN)
def test_each_planned_figure_is_a_small_accessible_svg_with_its_own_background(name):
    path = FIGURES / f"{name}.svg"
    assert path.is_file(), f"{path.name} is missing: run python book/diagrams/draw.py"
    assert path.stat().st_size < 100 * 1024, f"{path.name} is {path.stat().st_size} bytes (limit 100 KB)"
    root = ET.parse(path).getroot()  # well-formed XML or an exception
    assert root.tag == f"{SVG}svg"
    width, height = float(root.get("width")), float(root.get("height"))
    assert 600 <= width <= 900 and height > 0, f"{path.name} is {width} px wide"
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    title, desc = root.find(f"{SVG}title"), root.find(f"{SVG}desc")
    assert title is not None and title.text.strip(), "no <title>"
    assert desc is not None and len(desc.text.split()) >= 10, "no <desc> that says what the picture shows"
    # an <img> cannot see the page's light or dark theme: the first shape paints the whole canvas light
    background = next(child for child in root if child.tag == f"{SVG}rect")
    assert float(background.get("width")) >= width - 1 and float(background.get("height")) >= height - 1
    assert background.get("fill") == "#ffffff"
    assert root.findall(f".//{SVG}text"), "text is drawn as <text>"


def test_the_script_draws_exactly_the_committed_files(draw, tmp_path):
    draw.main(tmp_path)
    drawn = sorted(p.name for p in tmp_path.iterdir())
    assert drawn == sorted(f"{name}.svg" for name in PLAN)
    assert sorted(p.name for p in FIGURES.glob("*.svg")) == drawn
    for name in drawn:
        committed = (FIGURES / name).read_text(encoding="utf-8")
        assert (tmp_path / name).read_text(encoding="utf-8") == committed, (
            f"{name} differs from what book/diagrams/draw.py draws: run it and commit the result"
        )


def test_the_map_links_each_part_to_a_lesson_that_exists():
    root = ET.parse(FIGURES / "book_map.svg").getroot()
    links = root.findall(f".//{SVG}a")
    hrefs = [a.get("href") for a in links]
    assert all(a.get("target") == "_top" for a in links), "a link inside <object> must open in the whole page"
    linked = []
    for href in hrefs:
        # relative to the map's own address on the site, _static/figures/, as a browser resolves it in <object>
        assert href.startswith("../../notebooks/") and href.endswith(".html"), href
        notebook = ROOT / href.removeprefix("../../").replace(".html", ".ipynb")
        assert notebook.is_file(), f"book_map links to {href}, and there is no {notebook.relative_to(ROOT)}"
        linked.append(notebook.stem)
    for a in links:  # each part shows its lesson's number (the appendix: A)
        badge = MAP_LESSONS[a.get("href").split("/")[-1].removesuffix(".html")]
        assert any((t.text or "").strip() == badge for t in a.iter(f"{SVG}text")), a.get("href")


def test_every_part_of_the_map_is_in_a_link():
    """A click on any box or label of a part opens its lesson: only the heading, the line under it and
    the arrow's label lie outside the links (a label outside would take the click and go nowhere)."""
    root = ET.parse(FIGURES / "book_map.svg").getroot()
    linked = {id(e) for a in root.iter(f"{SVG}a") for e in a.iter()}
    loose = ["".join(t.itertext()) for t in root.iter(f"{SVG}text") if id(t) not in linked]
    assert loose == [
        "The map of the book",
        "the Transformer drawn once: click a part to open the lesson that builds it",
        "memory",
    ]
    boxes = [r for r in root.iter(f"{SVG}rect") if float(r.get("width")) < 899]  # all but the background
    assert all(id(r) in linked for r in boxes), [r.attrib for r in boxes if id(r) not in linked]


def test_the_map_reaches_every_lesson_and_the_appendix():
    root = ET.parse(FIGURES / "book_map.svg").getroot()
    linked = {a.get("href").split("/")[-1].removesuffix(".html") for a in root.iter(f"{SVG}a")}
    assert "appendix_cpu_recipe" in NOTEBOOKS and len(NOTEBOOKS) >= 14, NOTEBOOKS
    assert sorted(linked) == NOTEBOOKS, f"not on the map: {sorted(set(NOTEBOOKS) - linked)}"


def test_the_map_is_named_for_links_not_as_a_flat_image():
    root = ET.parse(FIGURES / "book_map.svg").getroot()
    assert root.get("role") != "img", "role=img would hide the map's links from screen readers"


def notebook_images():
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for index, cell in enumerate(json.loads(notebook.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] == "markdown":
                for alt, url in MARKDOWN_IMAGE.findall("".join(cell["source"])):
                    if url.startswith(PUBLISHED):
                        yield notebook.name, index, alt, url[len(PUBLISHED) :]


def test_every_diagram_a_lesson_shows_exists_and_has_alt_text():
    for notebook, index, alt, name in notebook_images():
        assert (FIGURES / name).is_file(), f"{notebook} cell {index} shows {name}, which book/diagrams/draw.py lacks"
        assert len(alt.split()) >= 5, f"{notebook} cell {index}: {name} needs alt text that says what it shows"


def test_the_site_build_uses_the_extension():
    sphinx = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]
    assert "figures" in sphinx["extra_extensions"]
    assert sphinx["local_extensions"]["figures"] == "book/_ext"


def transformed(extension, *uris: str) -> tuple[list[str], object]:
    document = new_document("lesson.md")
    env = SimpleNamespace(config=SimpleNamespace(html_baseurl=BASEURL), srcdir=str(ROOT))
    document.settings.env = env
    for uri in uris:
        document += nodes.image(uri=uri)
    extension.LocalFigures(document).apply()
    return [image["uri"] for image in document.findall(nodes.image)], document


def test_the_site_shows_its_own_copy_of_each_diagram(extension):
    uris, _ = transformed(
        extension,
        PUBLISHED + "attention.svg",
        "https://colab.research.google.com/assets/colab-badge.svg",
        BASEURL + "_static/favicon.svg",
    )
    assert uris == [
        "/book/_static/figures/attention.svg",
        "https://colab.research.google.com/assets/colab-badge.svg",
        BASEURL + "_static/favicon.svg",
    ]
    assert (ROOT / uris[0].lstrip("/")).is_file()


def test_a_diagram_with_no_file_is_a_warning_that_names_it(extension, caplog):
    uris, _ = transformed(extension, PUBLISHED + "no_such_figure.svg")
    assert uris == ["/book/_static/figures/no_such_figure.svg"]
    assert "no diagram /book/_static/figures/no_such_figure.svg" in caplog.text


def test_each_diagram_on_the_site_opens_full_size(extension):
    """On the HTML site a diagram is a link to its own SVG file (zoomable on a phone); the book map's
    <object> is followed by one. Other images are left alone."""
    document = new_document("lesson.md")
    builder = SimpleNamespace(name="html", format="html", get_target_uri=lambda docname: docname + ".html")
    document.settings.env = SimpleNamespace(docname="notebooks/04_attention", app=SimpleNamespace(builder=builder))
    section = nodes.section()
    document += section
    diagram = nodes.image(uri="book/_static/figures/attention.svg", alt="Q and K meet in a matrix product")
    plot = nodes.image(uri="_build/jupyter_execute/plot.png", alt="a plot")
    section += nodes.paragraph("", "", diagram)
    section += nodes.paragraph("", "", plot)
    obj = '<object class="book-map" type="image/svg+xml" data="../_static/figures/book_map.svg"></object>'
    section += nodes.raw("", obj, format="html")
    extension.FullSizeLinks(document).apply()
    link = diagram.parent
    assert isinstance(link, nodes.reference) and link["refuri"] == "../_static/figures/attention.svg"
    assert link["reftitle"] == "Open the diagram full size"
    assert (ROOT / "book" / link["refuri"].removeprefix("../")).is_file()  # html_static_path serves book/_static
    assert not isinstance(plot.parent, nodes.reference)
    after = section[section.index(next(section.findall(nodes.raw))) + 1]
    opened = next(after.findall(nodes.reference))
    assert opened["refuri"] == "../_static/figures/book_map.svg" and opened.astext() == "Open the map full size"
    extension.FullSizeLinks(document).apply()  # a second pass wraps nothing twice
    assert isinstance(diagram.parent, nodes.reference) and not isinstance(diagram.parent.parent, nodes.reference)
    assert len(list(section.findall(lambda n: isinstance(n, nodes.paragraph) and "diagram-open" in n["classes"]))) == 1


# -- what the diagrams say about the package ------------------------------------------------------


def svg_texts(name: str) -> list[str]:
    """Every <text> of a figure, its lines joined by a space."""
    root = ET.parse(FIGURES / f"{name}.svg").getroot()
    return [" ".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_special_tokens_in_the_diagrams_are_the_packages(draw):
    from transformer_lib.config import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS

    assert (draw.PAD, draw.BOS, draw.EOS) == tuple(
        next(n for n, i in SPECIAL_TOKENS.items() if i == wanted) for wanted in (PAD_ID, BOS_ID, EOS_ID)
    )
    for name in PLAN:
        named = set(re.findall(r"<[a-z]+>", " ".join(svg_texts(name))))
        assert named <= set(SPECIAL_TOKENS), f"{name}.svg names {named - set(SPECIAL_TOKENS)}, not the package's"
    # the example source: a sentence's pieces, then <eos>, no <bos> (transformer_lib.batching.encode_pairs)
    texts = svg_texts("positions")
    ids = [json.loads(t) for t in texts if re.fullmatch(r"\[\[[\d, ]+\]\]", t)]
    assert ids == [[draw.SOURCE_IDS]] and draw.SOURCE_IDS[-1] == EOS_ID and BOS_ID not in draw.SOURCE_IDS
    specials = {f"{token} (id {i})" for token, i in SPECIAL_TOKENS.items()}
    said = {m for t in texts for m in re.findall(r"<[a-z]+> \(id \d+\)", t)}
    assert said and said <= specials, said


NOT_THE_PACKAGES = {"LayerNorm", "MatMul", "FlashAttention"}  # torch.nn's class, an operation, a method


def test_class_names_in_the_diagrams_are_the_packages():
    import transformer_lib
    from transformer_lib import family

    for name in PLAN:
        text = re.sub(r"(\w)- (\w)", r"\1\2", " ".join(svg_texts(name)))  # a name broken over two lines, joined
        for word in set(re.findall(r"\b[A-Z][a-z]+[A-Z][A-Za-z]*\b|\bKVCache\b", text)) - NOT_THE_PACKAGES:
            assert hasattr(transformer_lib, word), f"{name}.svg names {word}, which transformer_lib lacks"
        for word in re.findall(r"\bfamily\.(\w+)", text):
            assert any(hasattr(getattr(family, m), word) for m in ("bert", "gpt", "vit")), word


def test_the_family_diagram_draws_what_the_family_module_does():
    import inspect

    from transformer_lib.family import bert, gpt
    from transformer_lib.model import SingleStack

    # what the figure relies on: one stack of EncoderLayers, given a padding mask (BERT) or a causal one (GPT)
    assert "Encoder.of" in inspect.getsource(SingleStack.__init__)
    assert "padding_mask" in inspect.getsource(bert.BERT.encode)
    assert "causal_mask" in inspect.getsource(gpt.GPT.forward)
    texts = svg_texts("family")
    assert texts.count("EncoderLayer × N") == 3  # BERT's and GPT's stacks, and the encoder-decoder's encoder
    assert "self-attention, padding mask" in texts and "self-attention, causal mask" in texts
    assert not any("no mask" in t or "decoder layers" in t for t in texts)


def test_the_transformer_diagram_feeds_memory_as_keys_and_values_and_the_query_from_below():
    texts = svg_texts("transformer")
    assert {"K", "V", "Q"} <= set(texts)
    assert "memory" in texts and "(batch, src_len, d_model)" in texts  # on two lines, clear of the decoder's frame
    root = ET.parse(FIGURES / "transformer.svg").getroot()
    frames = [r for r in root.iter(f"{SVG}rect") if r.get("fill") == "#f8fafc"]
    label = next(t for t in root.iter(f"{SVG}text") if t.text == "(batch, src_len, d_model)")
    right = float(label.get("x")) + 0.55 * 12 * len(label.text) / 2
    decoder = max(frames, key=lambda r: float(r.get("x")))
    assert right < float(decoder.get("x")), "the memory's label runs into the decoder's frame"


def test_the_kv_cache_diagram_says_where_each_new_key_and_value_comes_from():
    texts = svg_texts("kv_cache")
    assert texts.count("W_K") == 3 and texts.count("W_V") == 3 and texts.count("W_Q") == 3  # one a step
    assert {"x1", "x2", "x3"} <= set(texts)
    assert any("k_proj" in t and "v_proj" in t for t in texts)


def independent_beam(tree, width, steps):
    """Beam search over the figure's tree, written again here: [(tokens, score, rank)] per step, and the
    final beam. A hypothesis ending with <eos> keeps its score and competes for a place, as beam_search's does."""
    eos = "<eos>"
    beam = [((), 0.0, tree[2])]
    history = []
    for _ in range(steps):
        candidates = []
        for tokens, score, children in beam:
            if tokens and tokens[-1] == eos:
                continue
            candidates += [((*tokens, t), round(score + lp, 1), c) for t, lp, c in children]
        ranked = sorted(candidates, key=lambda c: -c[1])
        history.append({c[0]: rank for rank, c in enumerate(ranked, start=1)})
        finished = [b for b in beam if b[0] and b[0][-1] == eos]
        beam = sorted(finished + ranked, key=lambda c: -c[1])[:width]
    return history, beam


def test_beam_search_diagram_shows_a_second_ranked_prefix_winning_over_greedy(draw):
    tree, width = draw.BEAM_TREE, draw.BEAM_WIDTH

    def nodes_of(node):
        yield node
        for child in node[2]:
            yield from nodes_of(child)

    for node in nodes_of(tree):  # each node's children: log-probabilities of one distribution
        assert sum(math.exp(lp) for _, lp, _ in node[2]) <= 1 + 1e-9, node[0]
        assert all(lp < 0 for _, lp, _ in node[2])
    history, beam = independent_beam(tree, width, draw.BEAM_STEPS)
    assert all(tokens[-1] == "<eos>" for tokens, _, _ in beam), "the search has not ended by the last step"
    winner, score, _ = max(beam, key=lambda b: b[1])
    greedy, greedy_score = draw.greedy_path()
    assert list(winner) != greedy and greedy_score < score
    assert any(ranks.get(winner[: i + 1]) == 2 for i, ranks in enumerate(history)), "the winner was never second"
    # the figure draws this search: its winner, and the scores as sums along each path
    columns = draw.beam_columns()
    assert draw.hypothesis(draw.beam_winner(columns)) == list(winner)
    for step, ranks in enumerate(history, start=1):
        assert {tuple(draw.hypothesis(n)): n["rank"] for n in columns[step]} == ranks
    texts = svg_texts("beam_search")
    minus = draw.minus
    assert any(" ".join(winner) in t and minus(score) in t for t in texts)
    assert any(" ".join(greedy) in t and minus(greedy_score) in t for t in texts)


# -- legible text ---------------------------------------------------------------------------------

# The width, in CSS pixels, at which the site draws a diagram on a 1280-pixel desktop screen: the
# article column of sphinx-book-theme (a 1280 x 900 window in headless Chromium, the built site's
# lesson 8, img.getBoundingClientRect().width of transformer.svg, with custom.css's diagram card
# and no padding around the drawing). A narrower figure is drawn at its own width.
COLUMN_WIDTH = 688
SMALLEST_TEXT = 9  # pixels high, at that width


@pytest.mark.parametrize("name", PLAN)
def test_each_diagrams_text_is_at_least_9_pixels_high_on_a_desktop(name):
    root = ET.parse(FIGURES / f"{name}.svg").getroot()
    width = float(root.get("viewBox").split()[2])
    scale = min(COLUMN_WIDTH, float(root.get("width"))) / width
    smallest = min(float(t.get("font-size")) for t in root.iter(f"{SVG}text"))
    assert smallest * scale >= SMALLEST_TEXT, f"{name}.svg: {smallest} units show as {smallest * scale:.1f} px"


def rgb(colour: str) -> tuple[float, float, float]:
    colour = colour.lstrip("#")
    if len(colour) == 3:
        colour = "".join(c * 2 for c in colour)
    return tuple(int(colour[i : i + 2], 16) / 255 for i in (0, 2, 4))


def luminance(colour: tuple[float, float, float]) -> float:
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = map(linear, colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: tuple, b: tuple) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def painted(root) -> list:
    """Every element in painting order, with the opacity its groups pass down."""
    out = []

    def walk(element, opacity):
        opacity *= float(element.get("opacity", 1))
        out.append((element, opacity))
        for child in element:
            walk(child, opacity)

    walk(root, 1.0)
    return out


def background_at(shapes: list, x: float, y: float) -> tuple:
    """The colour painted at (x, y) by the filled rectangles and circles before a text, blended by opacity."""
    colour = (1.0, 1.0, 1.0)
    for element, opacity in shapes:
        fill = element.get("fill")
        if not fill or not fill.startswith("#"):
            continue
        tag = element.tag.removeprefix(SVG)
        if tag == "rect":
            x0, y0 = float(element.get("x", 0)), float(element.get("y", 0))
            inside = x0 <= x <= x0 + float(element.get("width")) and y0 <= y <= y0 + float(element.get("height"))
        elif tag == "circle":
            cx, cy, r = (float(element.get(k)) for k in ("cx", "cy", "r"))
            inside = (x - cx) ** 2 + (y - cy) ** 2 <= r * r
        else:
            continue
        if inside:
            alpha = opacity * float(element.get("fill-opacity", 1))
            colour = tuple(alpha * f + (1 - alpha) * c for f, c in zip(rgb(fill), colour, strict=True))
    return colour


@pytest.mark.parametrize("name", PLAN)
def test_each_diagrams_text_has_a_contrast_of_at_least_4_5(name):
    """WCAG's 4.5:1 for every text against what is painted behind it (sampled at its start, middle and end)."""
    root = ET.parse(FIGURES / f"{name}.svg").getroot()
    order = painted(root)
    low = []
    for index, (element, opacity) in enumerate(order):
        if element.tag != f"{SVG}text":
            continue
        size, x = float(element.get("font-size")), float(element.get("x"))
        y = float(element.get("y")) - 0.35 * size
        longest = max(("".join(element.itertext()) or " ").split("\n"), key=len)
        half = 0.25 * size * len(longest)  # a little under half the line: the samples stay on the glyphs
        anchor = element.get("text-anchor", "start")
        middle = x + half if anchor == "start" else x - half if anchor == "end" else x
        below = [(e, o) for e, o in order[:index] if e.tag in (f"{SVG}rect", f"{SVG}circle")]
        ink = tuple(opacity * c + (1 - opacity) * 1 for c in rgb(element.get("fill")))
        for sample in (middle - half * 0.8, middle, middle + half * 0.8):
            ratio = contrast(ink, background_at(below, sample, y))
            if ratio < 4.5:
                low.append(f"{''.join(element.itertext())!r}: {ratio:.2f}:1")
                break
    assert not low, f"{name}.svg: text under 4.5:1: " + ", ".join(low)


def test_the_contrast_check_catches_faint_text():
    faint = ET.fromstring(
        '<svg xmlns="http://www.w3.org/2000/svg"><rect x="0" y="0" width="100" height="40" fill="#ffffff"/>'
        '<text x="50" y="20" font-size="12" fill="#9aa5b1">pruned</text></svg>'
    )
    order = painted(faint)
    text = next(e for e, _ in order if e.tag == f"{SVG}text")
    assert contrast(rgb(text.get("fill")), background_at(order, 50, 16)) < 4.5
    assert contrast(rgb("#52606d"), (1.0, 1.0, 1.0)) >= 4.5
