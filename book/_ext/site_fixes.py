"""Small fixes to what Jupyter Book 1's themes put on every page (a local Sphinx extension).

* sphinx-thebe adds its configuration script twice, so every page logged
  ``Identifier 'THEBE_JS_URL' has already been declared``: keep one copy of each script. And
  Jupyter Book loads Thebe on every page even where no button starts it (``launch_buttons.thebe``
  off, as here): then its scripts and styles are left out.
* pydata-sphinx-theme logs ``Got invalid theme mode`` on a reader's first visit unless a default
  colour mode is set: default to the reader's system setting.
* The citations in the text are author-year ("Vaswani et al., 2017"); the bibliography's entries
  get the same labels (pybtex's styles offer only numbers or "[VSP+17]"), sorted by author and
  year: the style ``authoryear`` (``bibtex_default_style`` in ``_config.yml``).
* Each lesson's *Open in Colab* badge is Colab's own image, so that it renders wherever the
  notebook is opened alone (Colab, GitHub, a download); the site shows its copy of that image
  (``book/_static/open-in-colab.svg``), so no page loads anything from another host.
* A lesson links to the book's other pages by their public address (``html.baseurl`` in
  ``_config.yml``), so that the link works where the notebook is opened alone; on the site such a
  link becomes a link to the page beside it, checked as ``{doc}`` links are (a missing page fails
  the build).
* Every page's footer names the version of the book and its package (``transformer_lib.__version__``,
  the one place it is written) and links to the changes in ``CHANGELOG.md``: a course that pins a
  release can see which one a page belongs to. A release's site is built with ``BOOK_RELEASE=vX.Y.Z``
  (``.ci/release.py``) and says that version; without it the site is main's, the development version.
* A version switcher (pydata-sphinx-theme's) in the sidebar lists main's site and each release's,
  from ``switcher.json`` at the top of the site. The build writes one naming only itself; the
  website workflow writes the full list over it (``.ci/site_versions.py``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from docutils import nodes
from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx import addnodes
from sphinx.transforms import SphinxTransform

COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
LOCAL_BADGE = "/book/_static/open-in-colab.svg"  # from the source folder, as Sphinx reads a leading /
RELEASE_ENV = "BOOK_RELEASE"  # vX.Y.Z when building a release's site
DEVELOPMENT = "dev"  # the switcher's version of main's site


class AuthorYearLabels(BaseLabelStyle):
    """ "Vaswani et al., 2017", "Kudo and Richardson, 2018", "Kudo, 2018": as the text cites them."""

    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            names = ["".join(person.last_names).replace("{", "").replace("}", "") for person in people]
            if len(names) > 2:
                who = f"{names[0]} et al."
            elif names:
                who = " and ".join(names)
            else:
                who = entry.fields.get("institution", entry.key)
            yield f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearStyle(UnsrtStyle):
    default_label_style = "authoryear"
    default_sorting_style = "author_year_title"


class LocalColabBadge(SphinxTransform):
    """Colab's badge image, served from the site: the lessons' badges link to Colab, load nothing from it."""

    default_priority = 500

    def apply(self, **kwargs) -> None:
        for image in self.document.findall(nodes.image):
            if image["uri"] == COLAB_BADGE:
                image["uri"] = LOCAL_BADGE


class SiteLinks(SphinxTransform):
    """A link to ``<html_baseurl>PAGE.html`` becomes a cross-reference to the document PAGE of this build."""

    default_priority = 500

    def apply(self, **kwargs) -> None:
        base = self.config.html_baseurl
        if not base:
            return
        base = base.rstrip("/") + "/"
        for link in list(self.document.findall(nodes.reference)):
            uri = link.get("refuri", "")
            if uri.startswith(base) and uri.endswith(".html"):
                page = addnodes.pending_xref(
                    "",
                    *link.children,
                    refdomain="std",
                    reftype="doc",
                    reftarget="/" + uri[len(base) : -len(".html")],
                    refexplicit=True,
                    refwarn=True,
                    refdoc=self.env.docname,
                )
                link.replace_self(page)


def release() -> str | None:
    """The release this build is for (``BOOK_RELEASE``, checked against the package), or None for main."""
    from transformer_lib import __version__

    tag = os.environ.get(RELEASE_ENV)
    if tag and tag != f"v{__version__}":
        raise RuntimeError(
            f"{RELEASE_ENV}={tag}, but the package is version {__version__}: build the tag v{__version__}"
        )
    return tag or None


def _version_in_footer(app, config) -> None:
    from transformer_lib import __version__

    options = config.html_theme_options
    tag = release()
    repository, branch = options.get("repository_url", ""), tag or options.get("repository_branch", "main")
    changes = f'<a href="{repository}/blob/{branch}/CHANGELOG.md">changes</a>' if repository else "CHANGELOG.md"
    # The release workflow attaches the book as one PDF to each release, always under this name.
    pdf = f"{repository}/releases/{f'download/{tag}' if tag else 'latest/download'}/transformer-book.pdf"
    if tag:
        note = f"Version {__version__} of the book and its package, transformer_lib ({changes})."
        note += f' <a href="{pdf}">This version as a PDF</a>.' if repository else ""
    else:
        note = f"The development version of the book (main), after {__version__}: its {changes} since then."
        note += f' <a href="{pdf}">The latest release as a PDF</a>.' if repository else ""
    options["extra_footer"] = options.get("extra_footer", "") + f'<p class="book-version">{note}</p>'


def _version_switcher(app, config) -> None:
    """The switcher in the sidebar, reading switcher.json from the top of the site the page is in."""
    options = config.html_theme_options
    tag = release()
    options["switcher"] = {"json_url": "switcher.json", "version_match": tag.removeprefix("v") if tag else DEVELOPMENT}
    options["check_switcher"] = False  # the file is written into the built site, not read from the sources
    if not config.html_sidebars:
        sidebars = ["navbar-logo.html", "version-switcher.html", "icon-links.html", "search-button-field.html"]
        config.html_sidebars = {"**": [*sidebars, "sbt-sidebar-nav.html"]}


def switcher_entry(base: str, tag: str | None) -> dict:
    """One version in switcher.json: main's site at ``base``, a release's at ``base``vX.Y.Z/."""
    base = base.rstrip("/") + "/"
    if tag is None:
        return {"name": "main (development)", "version": DEVELOPMENT, "url": base}
    return {"name": tag, "version": tag.removeprefix("v"), "url": f"{base}{tag}/"}


def _write_switcher(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        entries = [switcher_entry(app.config.html_baseurl or "/", release())]
        (Path(app.outdir) / "switcher.json").write_text(json.dumps(entries, indent=1) + "\n", encoding="utf-8")


def _is_thebe(asset) -> bool:
    text = f"{getattr(asset, 'filename', asset) or ''} {getattr(asset, 'attributes', {}).get('body', '')}"
    return re.search("thebe", text, re.I) is not None


def _thebe_on(app) -> bool:
    return bool((app.config.html_theme_options.get("launch_buttons") or {}).get("thebe", False))


def _no_thebe_config(app, doctree, docname) -> None:
    """sphinx-thebe's configuration block (a Binder repository of its own) and kernel name, left out without Thebe."""
    if _thebe_on(app):
        return
    for raw in list(doctree.findall(nodes.raw)):
        if "x-thebe-config" in raw.astext() or raw.astext().startswith("<script>kernelName = "):
            raw.parent.remove(raw)


def _one_of_each_script(app, pagename, templatename, context, doctree) -> None:
    seen, unique = set(), []
    thebe = _thebe_on(app)
    for script in context.get("script_files", []):
        if not thebe and _is_thebe(script):
            continue
        # the same file or inline body (an inline script's file name is None or ""), whatever its priority
        name = getattr(script, "filename", script) or ""
        key = (name, tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    if "script_files" in context:
        context["script_files"][:] = unique
    if not thebe and "css_files" in context:
        context["css_files"][:] = [css for css in context["css_files"] if not _is_thebe(css)]
    if not context.get("default_mode"):
        context["default_mode"] = "auto"


def setup(app):
    register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    app.add_transform(LocalColabBadge)
    app.add_transform(SiteLinks)
    app.connect("html-page-context", _one_of_each_script, priority=900)
    app.connect("doctree-resolved", _no_thebe_config, priority=900)  # after sphinx-thebe added it
    app.connect("config-inited", _version_in_footer)  # after the themes added theirs
    app.connect("config-inited", _version_switcher)
    app.connect("build-finished", _write_switcher)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
