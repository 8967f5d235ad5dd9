"""A release's checks, notes and rehearsal, for the release workflow (.github/workflows/release.yml).

    python .ci/release.py check vX.Y.Z   # the tag is the package's version; CHANGELOG.md and CITATION.cff have it
    python .ci/release.py notes vX.Y.Z   # that version's CHANGELOG.md section, the release's notes on GitHub
    python .ci/release.py rehearse       # everything a tag publishes, built and checked in a throwaway clone

The version is written once, in transformer_lib/__init__.py (pyproject.toml reads it).

``rehearse`` clones this repository's committed state into a temporary folder, tags it there
(``v`` + the package's version; this repository gets no tag) and builds what the release workflow
builds from a tag, then checks each product: (a) the wheel and sdist, named ``transformer-book`` at
that version, the sdist without half a test suite; (b) the site for that version, whose footer and
version switcher name it, placed beside main's at ``/vX.Y.Z/`` (``.ci/site_versions.py``); (c)
the lessons, whose Colab badges and install cells point at the tag, and whose install line installs
that tag's package; (d) the PDF, with every lesson's title and figures (``.ci/pdf.py``). It takes
about as long as two builds of the book. ``--skip site,pdf`` leaves products out while iterating.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from repository import ROOT, clone_to

DISTRIBUTION = "transformer-book"
PRODUCTS = ("package", "notebooks", "site", "pdf")  # in the release workflow's order


def version(root: Path = ROOT) -> str:
    """``transformer_lib.__version__``, read without importing the package (no PyTorch needed)."""
    tree = ast.parse((root / "transformer_lib" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]:
            return ast.literal_eval(node.value)
    raise SystemExit("transformer_lib/__init__.py sets no __version__")


def section(number: str) -> str | None:
    """The CHANGELOG.md section of version ``number`` (without its heading), or None."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(number)}\b.*?\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1).strip() if match else None


def cited_version() -> str | None:
    match = re.search(r"^version: (\S+)$", (ROOT / "CITATION.cff").read_text(encoding="utf-8"), re.M)
    return match.group(1).strip("\"'") if match else None


def problems(tag: str) -> list[str]:
    found = []
    if tag != f"v{version()}":
        found.append(f"the tag {tag} is not the package's version v{version()} (transformer_lib/__init__.py)")
    if section(tag.removeprefix("v")) is None:
        found.append(f"CHANGELOG.md has no section '## {tag.removeprefix('v')}'")
    if cited_version() != version():
        found.append(f"CITATION.cff says version {cited_version()}, the package {version()}")
    return found


def script(name: str, root: Path):
    """One of ``root``/.ci's scripts, imported (the clone's own, not this checkout's)."""
    spec = importlib.util.spec_from_file_location(f"{name}_of_{abs(hash(root))}", root / ".ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def run(command: list[str], cwd: Path, **env: str) -> str:
    """``command`` in ``cwd``, importing transformer_lib from there (not from this checkout's editable install)."""
    print("$", " ".join(command), flush=True)
    env = {**os.environ, "PYTHONPATH": str(cwd), **env}
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def check_package(clone: Path, tag: str, out: Path) -> list[str]:
    """(a) The wheel and sdist the tag builds: our name, the tag's version, the sdist's tests whole or absent."""
    run([sys.executable, "-m", "build", "--outdir", str(out), "."], clone)
    number = tag.removeprefix("v")
    found = []
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    if [w.name for w in wheels] != [f"transformer_book-{number}-py3-none-any.whl"]:
        found.append(
            f"package: the wheel is {[w.name for w in wheels]}, not transformer_book-{number}-py3-none-any.whl"
        )
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            metadata = archive.read(f"transformer_book-{number}.dist-info/METADATA").decode()
            names = archive.namelist()
        if f"\nName: {DISTRIBUTION}\n" not in metadata or f"\nVersion: {number}\n" not in metadata:
            found.append(f"package: the wheel's metadata does not say {DISTRIBUTION} {number}")
        if not any(n.startswith("transformer_lib/") for n in names):
            found.append("package: the wheel holds no transformer_lib")
    for sdist in sdists:
        with tarfile.open(sdist) as archive:
            tests = [n.split("/", 1)[1] for n in archive.getnames() if "/tests/" in n]
        if tests and "tests/conftest.py" not in tests:
            found.append(f"package: the sdist ships {len(tests)} test files without tests/conftest.py")
    return found


def check_site(clone: Path, tag: str, out: Path) -> list[str]:
    """(b) The site built for the tag says its version, and sits beside main's at /TAG/."""
    run(["jupyter-book", "build", ".", "-W", "-n", "--keep-going"], clone, BOOK_RELEASE=tag)
    html = clone / "_build" / "html"
    found = []
    page = (html / "notebooks" / "01_why_attention.html").read_text(encoding="utf-8")
    if f"Version {tag.removeprefix('v')} of the book" not in page:
        found.append("site: lesson 1's footer does not name the version")
    if "version-switcher" not in page:
        found.append("site: no version switcher")
    archive = out / "site.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(html, arcname=".")
    main = out / "published"
    (main / "notebooks").mkdir(parents=True)
    (main / "index.html").write_text("main's site\n", encoding="utf-8")
    entries = script("site_versions", clone).assemble(main, {tag: archive}, base="https://example.org/book/")
    if not (main / tag / "notebooks" / "01_why_attention.html").exists():
        found.append(f"site: the assembled site has no {tag}/notebooks/01_why_attention.html")
    versions = [e["version"] for e in entries]
    if versions != ["dev", tag.removeprefix("v")]:
        found.append(f"site: switcher.json lists {versions}")
    if json.loads((main / tag / "switcher.json").read_text(encoding="utf-8")) != entries:
        found.append(f"site: {tag}/switcher.json is not the top's")
    return found


def check_notebooks(clone: Path, tag: str, out: Path) -> list[str]:
    """(c) The lessons, rewritten as the release workflow does, open and install the tag."""
    install_cell = script("install_cell", clone)
    run([sys.executable, ".ci/install_cell.py", "write", "--ref", tag], clone)
    found = []
    for path in sorted((clone / "notebooks").glob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        if f"/blob/{tag}/notebooks/{path.name}" not in text:
            found.append(f"notebooks: {path.name}'s Colab badge does not open {tag}")
        first = next(c for c in json.loads(text)["cells"] if c["cell_type"] == "code")
        if "".join(first["source"]) != install_cell.cell_source(tag):
            found.append(f"notebooks: {path.name}'s install cell does not install {tag}")
    # what the cell installs, from the clone instead of GitHub: that tag's package, under our name
    url = install_cell.cell_source(tag).split('url = "')[1].split('"')[0]
    local = url.replace(install_cell.repository(), f"file://{clone}")
    target = out / "installed"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            f"{DISTRIBUTION} @ {local}",
        ],
        out,
    )
    installed = [p.name for p in target.glob("*.dist-info")]
    if installed != [f"transformer_book-{tag.removeprefix('v')}.dist-info"]:
        found.append(f"notebooks: the install cell's line installed {installed}")
    return found


def check_pdf(clone: Path, tag: str, out: Path) -> list[str]:
    """(d) The PDF, built from the clone, with every lesson's title and figures."""
    pdf = out / "transformer-book.pdf"
    run([sys.executable, ".ci/pdf.py", str(pdf)], clone, BOOK_RELEASE=tag)
    return [f"pdf: {line}" for line in script("pdf", clone).problems(pdf)]


def rehearse(skip: set[str]) -> list[str]:
    """Build and check every product of a release on a throwaway tag in a temporary clone."""
    tag = f"v{version()}"
    found = problems(tag)
    with tempfile.TemporaryDirectory() as tmp:
        clone, out = Path(tmp) / "clone", Path(tmp) / "out"
        out.mkdir()
        clone_to(clone)
        run(["git", "tag", tag], clone)
        checks = {"package": check_package, "site": check_site, "notebooks": check_notebooks, "pdf": check_pdf}
        for product in PRODUCTS:
            if product in skip:
                print(f"== {product}: skipped", flush=True)
                continue
            print(f"== {product}", flush=True)
            found += checks[product](clone, tag, out)
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("command", choices=["check", "notes", "rehearse"])
    parser.add_argument("tag", nargs="?")
    parser.add_argument("--skip", default="", help=f"products to leave out of a rehearsal: {','.join(PRODUCTS)}")
    args = parser.parse_intermixed_args(argv)
    if args.command == "rehearse":
        skip = set(filter(None, args.skip.split(",")))
        if skip - set(PRODUCTS):
            print(f"--skip takes {', '.join(PRODUCTS)}", file=sys.stderr)
            return 2
        found = rehearse(skip)
        checked = ", ".join(p for p in PRODUCTS if p not in skip)
        done = "ready to tag" if not skip else f"skipped {', '.join(sorted(skip))}: not yet ready to tag"
        print("\n".join(found) or f"v{version()}: {checked} built and checked; {done}")
        return 1 if found else 0
    if args.tag is None:
        print(f"{args.command} needs a tag: python .ci/release.py {args.command} vX.Y.Z", file=sys.stderr)
        return 2
    found = problems(args.tag)
    if found:
        print("\n".join(found), file=sys.stderr)
        return 1
    number = args.tag.removeprefix("v")
    print(section(number) if args.command == "notes" else f"{args.tag}: the version, with its changes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
