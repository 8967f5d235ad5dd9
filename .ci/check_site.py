"""Checks on the built website that Sphinx's warnings do not catch.

    python .ci/check_site.py [_build/html]

* **Unrendered math**: prose math that MyST did not recognise (for example ``$...$`` across lines
  with ``\\\\`` inside) reaches the page as raw LaTeX. Any ``\\begin{``, or ``$`` next to a LaTeX
  command, left in a page's text outside math, code and outputs, is reported.
* **Machine paths**: no page may show an absolute path of the machine that built or ran it.
* **Other hosts**: the site works offline, so no page loads an image, script, style or frame
  from another host (links to other sites are fine: they load only when clicked).
* **Links into PyTorch**: the API page's PyTorch types link to PyTorch's documentation (intersphinx,
  from the committed inventory ``book/_inventories/torch.inv``), ``torch.Tensor`` at least.

Prints one line per problem and exits 1 if there is any.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

RAW_LATEX = re.compile(r"\\begin\{|\$\s*\\[A-Za-z]+|\\[A-Za-z]+\{[^}]*\}\s*\$")
MACHINE_PATH = re.compile(r"(/home/|/root/|/tmp/|/work/|/Users/|site-packages|[A-Z]:\\\\Users)")
SKIPPED_TAGS = {"script", "style", "pre", "code"}
SKIPPED_CLASSES = {"math", "cell_output", "highlight"}
TORCH_TENSOR = "https://docs.pytorch.org/docs/stable/tensors.html#torch.Tensor"


class ProseText(HTMLParser):
    """The text of a page outside code, outputs and rendered math."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[bool] = []  # for each open element: is it (or a parent) skipped?
        self.prose: list[str] = []
        self.everything: list[str] = []
        self.remote: list[str] = []  # resources the page itself would fetch from another host

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        source = attributes.get("src") or (attributes.get("href") if tag == "link" else None)
        if (
            tag in {"img", "script", "link", "iframe", "source"}
            and source
            and source.startswith(("http:", "https:", "//"))
        ):
            if not (tag == "link" and attributes.get("rel") in ("canonical", "alternate")):
                self.remote.append(source)
        classes = set((attributes.get("class") or "").split())
        skipped = (self.stack and self.stack[-1]) or tag in SKIPPED_TAGS or bool(classes & SKIPPED_CLASSES)
        if tag not in {"br", "img", "hr", "meta", "link", "input", "wbr"}:
            self.stack.append(skipped)

    def handle_endtag(self, tag: str) -> None:
        if tag not in {"br", "img", "hr", "meta", "link", "input", "wbr"} and self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if not (self.stack and self.stack[-1]):
            self.prose.append(data)
        self.everything.append(data)


def problems(site: Path) -> list[str]:
    found = []
    pages = [p for p in site.rglob("*.html") if "_static" not in p.parts and "mathjax" not in p.parts]
    for page in sorted(pages):
        parser = ProseText()
        parser.feed(page.read_text(encoding="utf-8"))
        name = page.relative_to(site)
        for match in RAW_LATEX.finditer(" ".join(parser.prose)):
            found.append(f"{name}: unrendered math near {match.group(0)!r}")
        for match in MACHINE_PATH.finditer(" ".join(parser.everything)):
            found.append(f"{name}: a machine path is shown ({match.group(0)!r})")
        for source in parser.remote:
            found.append(f"{name}: loads {source} from another host (serve it from the site)")
    if not pages:
        found.append(f"no pages under {site}: build the book first (jupyter-book build .)")
    api = site / "book" / "api.html"
    if pages and TORCH_TENSOR not in (api.read_text(encoding="utf-8") if api.exists() else ""):
        found.append(f"book/api.html: no link to {TORCH_TENSOR} (intersphinx, book/_inventories/torch.inv)")
    return found


def main() -> None:
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "_build/html")
    found = problems(site)
    for line in found:
        print(line)
    print(f"site check: {len(found)} problem(s)")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
