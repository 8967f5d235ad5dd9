"""The book's diagrams on the site come from the site itself (a local Sphinx extension).

A lesson shows a diagram by its public address, ``<html_baseurl>_static/figures/NAME.svg``, so that
the picture appears wherever the notebook is opened alone (Colab, GitHub, a download). On the site
that image becomes the local file ``book/_static/figures/NAME.svg`` (drawn by
``book/diagrams/draw.py``), so the page loads nothing from another host and a build shows the
diagrams of its own checkout, not those published last. A name with no such file is a warning, which
``-W`` turns into a failed build.

Every diagram opens full size: on the site each one is a link to its own SVG file, and an
``<object>`` that shows one (the book map on the intro page) is followed by such a link. A phone
shows a 900-unit drawing in under 400 pixels; the file alone can be zoomed until its text reads.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.osutil import relative_uri

FOLDER = "book/_static/figures"  # from the source folder (the repository root)
SERVED = "_static/figures"  # where html_static_path puts the same files in the site
DIAGRAM = re.compile(r"(?:^|/)book/_static/figures/([\w.-]+\.svg)$")  # an image's uri as Sphinx holds it
OBJECT = re.compile(r"<object\b[^>]*\bdata=\"([^\"]*_static/figures/[\w.-]+\.svg)\"")  # a diagram in raw HTML
OPEN_IMAGE = "Open the diagram full size"
OPEN_OBJECT = "Open the map full size"
logger = logging.getLogger(__name__)


def published_prefix(baseurl: str) -> str:
    """The address under which the site publishes the diagrams: ``<baseurl>_static/figures/``."""
    return baseurl.rstrip("/") + "/_static/figures/"


def local_uri(uri: str, prefix: str) -> str | None:
    """The local path Sphinx should read for a published diagram's address, or None for any other image."""
    if not prefix or not uri.startswith(prefix):
        return None
    return f"/{FOLDER}/{uri[len(prefix) :]}"  # a leading / is the source folder, as Sphinx reads it


class LocalFigures(SphinxTransform):
    """``<html_baseurl>_static/figures/NAME.svg`` becomes ``/book/_static/figures/NAME.svg``."""

    default_priority = 500

    def apply(self, **kwargs) -> None:
        base = self.config.html_baseurl
        if not base:
            return
        prefix = published_prefix(base)
        for image in self.document.findall(nodes.image):
            local = local_uri(image["uri"], prefix)
            if local is None:
                continue
            if not (Path(self.env.srcdir) / local.lstrip("/")).is_file():
                logger.warning(
                    "no diagram %s: run python book/diagrams/draw.py, or fix the name", local, location=image
                )
            image["uri"] = local


def diagram_file(uri: str) -> str | None:
    """The diagram's file name (``attention.svg``) if ``uri`` is one of book/_static/figures/, else None."""
    found = DIAGRAM.search(uri)
    return found.group(1) if found else None


def full_size_link(refuri: str, label: str = "") -> nodes.reference:
    """A link to a diagram's own file, titled so that a pointer's hover says where it goes."""
    return nodes.reference("", label, refuri=refuri, reftitle=label or OPEN_IMAGE, classes=["diagram-full-size"])


class FullSizeLinks(SphinxPostTransform):
    """On the HTML site, each diagram's image becomes a link to its SVG file, and each ``<object>`` that
    shows a diagram is followed by a paragraph with such a link."""

    default_priority = 400
    formats = ("html",)

    def run(self, **kwargs) -> None:
        page = self.app.builder.get_target_uri(self.env.docname)
        for image in list(self.document.findall(nodes.image)):
            name = diagram_file(image["uri"])
            if name is None or isinstance(image.parent, nodes.reference):
                continue
            link = full_size_link(relative_uri(page, f"{SERVED}/{name}"))
            image.replace_self(link)
            link.append(image)
        for raw in list(self.document.findall(nodes.raw)):
            found = OBJECT.search(raw.astext()) if "html" in raw.get("format", "").split() else None
            after = raw.parent.index(raw) + 1
            if found and not (after < len(raw.parent) and "diagram-open" in raw.parent[after].get("classes", [])):
                link = full_size_link(found.group(1), OPEN_OBJECT)
                raw.parent.insert(after, nodes.paragraph("", "", link, classes=["diagram-open"]))


def setup(app):
    app.add_transform(LocalFigures)
    app.add_post_transform(FullSizeLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
