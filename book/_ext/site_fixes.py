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
* No page loads a script it does not use. pydata-sphinx-theme loads Font Awesome's JavaScript
  (``fontawesome.js``, 1.5 MB, which redraws each icon as SVG) on every page, though its own CSS
  and webfonts draw every icon the theme and this book use: the theme's template is read without
  that line (the build stops if the line is not found, e.g. after an upgrade of the theme). The
  theme's layout also loads Sphinx's search scripts and the whole search index (``searchindex.js``,
  190 KB) on every page, for its search-as-you-type, which this book leaves off: only the search
  page, which loads them itself, has them then (the same template, its condition widened). And
  MathJax loads only on a page with a formula of its own: Sphinx counts the formulas of every page
  a page's table of contents includes, so the introduction, which includes the whole book, loaded it.
  Nor a font it does not use: the theme's Font Awesome webfonts (270 KB on every page, for about
  twenty icons) are cut down at the end of the build to the icons the site's pages and scripts
  name, and served beside the theme's, which a browser fetches only for an icon the cut-down fonts
  lack (``unicode-range``). ``tests/site/test_page_weight.py`` checks all three in a browser.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from docutils import nodes
from jinja2 import BaseLoader
from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx import addnodes
from sphinx.errors import ExtensionError
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


# pydata-sphinx-theme's macro file and the line in it that loads Font Awesome's JavaScript
THEME_MACROS = "static/webpack-macros.html"
FONTAWESOME_JS = re.compile(r'[ \t]*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>\n?')
# Its layout, and the condition under which it leaves out the search scripts: the search page only,
# widened to every page when search-as-you-type (the only other use of them) is off
THEME_LAYOUT = ("pydata_sphinx_theme", "layout.html")
SEARCH_PAGE_ONLY = "{% if pagename == 'search' %}"
SEARCH_SCRIPTS_UNUSED = "{% if pagename == 'search' or not theme_search_as_you_type|tobool %}"


class WithoutUnusedScripts(BaseLoader):
    """The theme's templates as they are, but its macro file without the script tag of fontawesome.js,
    and its layout without the search scripts where nothing uses them."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def __getattr__(self, name):  # Sphinx's own loader's attributes (its error message reads pathchain)
        return getattr(self.loader, name)

    def get_source(self, environment, template):
        source, filename, uptodate = self.loader.get_source(environment, template)
        if template.lstrip("!") == THEME_MACROS:
            source, found = FONTAWESOME_JS.subn("", source)
            if found != 1:
                raise ExtensionError(f"{THEME_MACROS} has no script tag of fontawesome.js to leave out")
        if Path(filename).parts[-2:] == THEME_LAYOUT:
            if source.count(SEARCH_PAGE_ONLY) != 1:
                raise ExtensionError(f"{filename} has no condition on the search scripts to widen")
            source = source.replace(SEARCH_PAGE_ONLY, SEARCH_SCRIPTS_UNUSED)
        return source, filename, uptodate


def _no_unused_scripts(app) -> None:
    templates = getattr(app.builder, "templates", None)
    if app.builder.format != "html" or templates is None:
        return
    if not hasattr(templates, "environment"):
        raise ExtensionError("site_fixes: the HTML builder's template loader has no Jinja environment")
    templates.environment.loader = WithoutUnusedScripts(templates.environment.loader)


def _math_only_where_used(app, pagename, templatename, context, doctree) -> None:
    """MathJax's scripts (and its configuration) left out of a page without a formula of its own."""
    if app.builder.format != "html" or "script_files" not in context:
        return
    if app.env.get_domain("math").data["has_equations"].get(pagename, False):
        return
    mathjax = Path(app.config.mathjax_path or "tex-chtml.js").name.split("?")[0]

    def is_mathjax(script) -> bool:
        name = str(getattr(script, "filename", script) or "")
        body = getattr(script, "attributes", {}).get("body", "")
        return Path(name.split("?")[0]).name == mathjax or body.startswith("window.MathJax =")

    context["script_files"][:] = [script for script in context["script_files"] if not is_mathjax(script)]


# Font Awesome's webfonts as the theme's CSS declares them: file, family, weight
FONTAWESOME_FONTS = (
    ("fa-solid-900", "Font Awesome 6 Free", 900),
    ("fa-regular-400", "Font Awesome 6 Free", 400),
    ("fa-brands-400", "Font Awesome 6 Brands", 400),
)
ICON_CSS = "fontawesome-subset.css"
ICON_RULE = re.compile(r'([^{}]+)\{content:"\\([0-9a-f]{4,5})"\}')
ICON_CLASS = re.compile(r"\bfa-[a-z0-9-]+")
CSS_ICON = re.compile(r'--(pst-icon-[a-z-]+):"(.)"')


def icon_codepoints(outdir: Path) -> dict[str, int]:
    """Every Font Awesome icon the built site names (in its pages and scripts) or the theme's CSS draws, with
    its code point."""
    css = (outdir / "_static" / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8")
    glyphs = {}
    for selectors, code in ICON_RULE.findall(css):
        for selector in selectors.split(","):
            name = selector.strip()
            if name.startswith(".fa-") and name.endswith(":before"):
                glyphs[name[1 : -len(":before")]] = int(code, 16)
    used = set()
    for path in [*outdir.rglob("*.html"), *(outdir / "_static").rglob("*.js")]:
        if "mathjax" not in path.parts:
            used.update(ICON_CLASS.findall(path.read_text(encoding="utf-8", errors="replace")))
    icons = {name: glyphs[name] for name in sorted(used) if name in glyphs}
    # and the icons the theme's CSS draws by itself (admonitions, links, the version notes)
    icons.update({f"--{name}": ord(char) for name, char in CSS_ICON.findall(css)})
    return icons


def _subset_icon_fonts(app, exception) -> None:
    """The theme's Font Awesome webfonts cut down to the icons the site uses, as WOFF files, and the CSS that
    serves them for those code points only (any other icon still comes from the theme's full fonts)."""
    if exception is not None or app.builder.format != "html":
        return
    from fontTools import subset
    from fontTools.ttLib import TTFont

    outdir = Path(app.outdir)
    fonts = outdir / "_static" / "vendor" / "fontawesome" / "webfonts"
    codepoints = sorted(set(icon_codepoints(outdir).values()))
    if not fonts.is_dir() or not codepoints:
        raise ExtensionError(f"site_fixes: no Font Awesome webfonts in {fonts} or no icon in the theme's CSS")
    rules = []
    for name, family, weight in FONTAWESOME_FONTS:
        font = TTFont(fonts / f"{name}.ttf")
        present = [c for c in codepoints if c in font.getBestCmap()]
        if not present:
            continue
        options = subset.Options()
        options.flavor = "woff"  # zlib: no brotli needed, and every browser reads it
        options.layout_features = ["*"]
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=present)
        subsetter.subset(font)
        font.flavor = "woff"
        font.save(fonts / f"{name}.subset.woff")
        ranges = ",".join(f"U+{c:X}" for c in present)
        rules.append(
            f'@font-face{{font-display:block;font-family:"{family}";font-style:normal;font-weight:{weight};'
            f'src:url(vendor/fontawesome/webfonts/{name}.subset.woff) format("woff");unicode-range:{ranges}}}'
        )
    (outdir / "_static" / ICON_CSS).write_text(
        "/* Font Awesome's webfonts cut down to the icons this site uses (book/_ext/site_fixes.py) */\n"
        + "\n".join(rules)
        + "\n",
        encoding="utf-8",
    )


def setup(app):
    register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    app.add_transform(LocalColabBadge)
    app.add_transform(SiteLinks)
    app.connect("html-page-context", _one_of_each_script, priority=900)
    app.connect("html-page-context", _math_only_where_used, priority=900)  # after sphinx.ext.mathjax (500)
    app.connect("builder-inited", _no_unused_scripts)
    app.add_css_file(ICON_CSS, priority=900)  # after the theme's CSS: its faces come first for these icons
    app.connect("build-finished", _subset_icon_fonts)
    app.connect("doctree-resolved", _no_thebe_config, priority=900)  # after sphinx-thebe added it
    app.connect("config-inited", _version_in_footer)  # after the themes added theirs
    app.connect("config-inited", _version_switcher)
    app.connect("build-finished", _write_switcher)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
