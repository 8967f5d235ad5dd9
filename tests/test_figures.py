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

ROOT = Path(__file__).resolve().parent.parent
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
