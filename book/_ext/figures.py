"""The book's diagrams on the site come from the site itself (a local Sphinx extension).

A lesson shows a diagram by its public address, ``<html_baseurl>_static/figures/NAME.svg``, so that
the picture appears wherever the notebook is opened alone (Colab, GitHub, a download). On the site
that image becomes the local file ``book/_static/figures/NAME.svg`` (drawn by
``book/diagrams/draw.py``), so the page loads nothing from another host and a build shows the
diagrams of its own checkout, not those published last. A name with no such file is a warning, which
``-W`` turns into a failed build.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

FOLDER = "book/_static/figures"  # from the source folder (the repository root)
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


def setup(app):
    app.add_transform(LocalFigures)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
