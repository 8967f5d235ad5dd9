"""Small fixes to what Jupyter Book 1's themes put on every page (a local Sphinx extension).

* sphinx-thebe adds its configuration script twice, so every page logged
  ``Identifier 'THEBE_JS_URL' has already been declared``: keep one copy of each script.
* pydata-sphinx-theme logs ``Got invalid theme mode`` on a reader's first visit unless a default
  colour mode is set: default to the reader's system setting.
"""

from __future__ import annotations


def _one_of_each_script(app, pagename, templatename, context, doctree) -> None:
    seen, unique = set(), []
    for script in context.get("script_files", []):
        # the same file or inline body (an inline script's file name is None or ""), whatever its priority
        name = getattr(script, "filename", script) or ""
        key = (name, tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    if "script_files" in context:
        context["script_files"][:] = unique
    if not context.get("default_mode"):
        context["default_mode"] = "auto"


def setup(app):
    app.connect("html-page-context", _one_of_each_script, priority=900)  # after the themes added theirs
    return {"parallel_read_safe": True, "parallel_write_safe": True}
