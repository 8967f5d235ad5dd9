"""The published site: main's build at the top, each release's at its own path, one version switcher.

    python .ci/site_versions.py assemble SITE [--from-releases | TAG=SITE.tar.gz ...]

GitHub Pages serves one folder. The website workflow builds main into ``SITE`` (``_build/html``);
this puts beside it, at ``SITE/vX.Y.Z/``, the site each release built for its own version (the
release workflow attaches it to the release as ``site.tar.gz``), and writes ``switcher.json``
(main first, as the development version, then the releases, newest first) at the top and into
every release's folder, since each page reads the switcher's list from the top of its own site.
``--from-releases`` downloads each release's ``site.tar.gz`` with the GitHub CLI (``gh``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TAG = re.compile(r"v(\d+)\.(\d+)\.(\d+)")
ASSET = "site.tar.gz"  # a release's site, as the release workflow names it


def baseurl() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["html"]["baseurl"].rstrip("/") + "/"


def switcher(tags: list[str], base: str) -> list[dict]:
    """switcher.json's entries: main, then ``tags`` newest first (the newest is the preferred version)."""
    newest_first = sorted(tags, key=lambda tag: tuple(int(n) for n in TAG.fullmatch(tag).groups()), reverse=True)
    entries = [{"name": "main (development)", "version": "dev", "url": base}]
    for i, tag in enumerate(newest_first):
        entry = {"name": f"{tag} (latest release)" if i == 0 else tag, "version": tag.removeprefix("v")}
        entries.append({**entry, "url": f"{base}{tag}/", **({"preferred": True} if i == 0 else {})})
    return entries


def released_sites() -> dict[str, Path]:
    """Each release's site archive, downloaded with gh into a temporary folder."""
    listing = subprocess.run(
        ["gh", "release", "list", "--json", "tagName", "--limit", "100"], capture_output=True, text=True, check=True
    )
    tags = [r["tagName"] for r in json.loads(listing.stdout) if TAG.fullmatch(r["tagName"])]
    folder = Path(tempfile.mkdtemp())
    sites = {}
    for tag in tags:
        target = folder / tag
        done = subprocess.run(["gh", "release", "download", tag, "--pattern", ASSET, "--dir", str(target)])
        if done.returncode == 0:
            sites[tag] = target / ASSET
        else:
            print(f"{tag}: no {ASSET} attached; its site is left out", file=sys.stderr)
    return sites


def assemble(site: Path, sites: dict[str, Path], base: str | None = None) -> list[dict]:
    """Unpack each release's archive into ``site``/TAG and write switcher.json everywhere; returns its entries."""
    if not (site / "index.html").exists():
        raise SystemExit(f"{site} holds no built site (no index.html): build main's first")
    for tag, archive in sites.items():
        if not TAG.fullmatch(tag):
            raise SystemExit(f"{tag} is not a release tag like v0.3.0")
        target = site / tag
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="data")
        if not (target / "index.html").exists():
            raise SystemExit(f"{archive}: no index.html at its top")
    entries = switcher(list(sites), base or baseurl())
    text = json.dumps(entries, indent=1) + "\n"
    for folder in [site, *(site / tag for tag in sites)]:
        (folder / "switcher.json").write_text(text, encoding="utf-8")
    return entries


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("command", choices=["assemble"])
    parser.add_argument("site", type=Path)
    parser.add_argument("archives", nargs="*", help="TAG=PATH of a release's site.tar.gz")
    parser.add_argument("--from-releases", action="store_true", help="download every release's site with gh")
    args = parser.parse_intermixed_args(argv)
    sites = released_sites() if args.from_releases else {}
    for item in args.archives:
        tag, _, path = item.partition("=")
        sites[tag] = Path(path)
    entries = assemble(args.site, sites)
    print(f"{args.site}: " + ", ".join(e["name"] for e in entries))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
