"""The book's repository address: set once in _config.yml, used by every badge and install line.

    python .ci/repository.py check            # every use agrees with _config.yml (tests do this too)
    python .ci/repository.py set URL          # a fork: write URL to _config.yml and every use
    python .ci/repository.py expect OWNER/NAME # fail unless _config.yml names that repository (the website workflow)

Uses: the Colab badges and install cells of the notebooks and assignments, the README, the book's pages,
pyproject.toml, CITATION.cff, CONTRIBUTING.md and the issue templates. A Colab badge must also name its own
notebook on the configured branch. The site's
address (``html.baseurl``, where GitHub Pages publishes OWNER/NAME: https://OWNER.github.io/NAME/),
which the lessons use to link to the book's other pages, follows the repository's.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
USES = [
    "README.md",
    "pyproject.toml",
    "CITATION.cff",
    "CONTRIBUTING.md",
    ".github/ISSUE_TEMPLATE/*.yml",
    "book/*.md",
    "notebooks/*.ipynb",
    "assignments/*/*.ipynb",
    "assignments/*.txt",
]
GITHUB = re.compile(r"github\.com/([\w.-]+/[\w.-]+?)(?=[/\"'\s)#@]|\.git\b|$)")
SITE = re.compile(r"([\w-]+)\.github\.io/([\w.-]+?)(?=[/\"'\s)#]|$)")
PLACEHOLDER = "OWNER/NAME"  # how the README names a fork's repository: not a use to check
COLAB = re.compile(r"colab\.research\.google\.com/github/([\w.-]+/[\w.-]+)/blob/([\w.-]+)/notebooks/([\w.<>-]+)")


@functools.cache
def head_commit() -> str:
    """The commit checked out here, which a clone of this checkout holds (asked of git once)."""
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def clone_to(folder: Path) -> None:
    """The committed state of this checkout, cloned into ``folder`` (no files shared with it)."""
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(folder)], check=True)


def configured() -> tuple[str, str]:
    """(owner/name, branch) from _config.yml's repository section."""
    repository = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]
    match = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+)", repository["url"])
    if match is None:
        raise SystemExit(f"_config.yml: repository.url must be https://github.com/OWNER/NAME, got {repository['url']}")
    return match.group(1), repository["branch"]


def pages(repo: str) -> str:
    """Where GitHub Pages publishes the repository owner/name, as host/path: owner.github.io/name."""
    owner, name = repo.split("/")
    return f"{owner}.github.io/{name}"


def site(repo: str) -> str:
    """The site's address, as html.baseurl holds it."""
    return f"https://{pages(repo)}/"


def files() -> list[Path]:
    return sorted(path for pattern in USES for path in ROOT.glob(pattern))


def problems() -> list[str]:
    """Every use that disagrees with _config.yml, one line each (empty when all agree)."""
    repo, branch = configured()
    found = []
    baseurl = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8")).get("html", {}).get("baseurl")
    if baseurl != site(repo):
        found.append(f"_config.yml: html.baseurl is {baseurl}, but {repo} is published at {site(repo)}")
    for path in files():
        text, name = path.read_text(encoding="utf-8"), path.relative_to(ROOT)
        for slug in GITHUB.findall(text):
            if slug not in (repo, PLACEHOLDER):
                found.append(f"{name}: github.com/{slug}, but _config.yml says {repo}")
        for owner, project in SITE.findall(text):
            if f"{owner}/{project}" not in (repo, PLACEHOLDER):
                found.append(f"{name}: the site {owner}.github.io/{project}, but {repo} is published at {site(repo)}")
        for slug, on_branch, notebook in COLAB.findall(text):
            if slug != repo:
                found.append(f"{name}: a Colab link to {slug}, but _config.yml says {repo}")
            if on_branch != branch:
                found.append(f"{name}: a Colab link on branch {on_branch}, but _config.yml says {branch}")
            if path.suffix == ".ipynb" and notebook != path.name:
                found.append(f"{name}: its Colab badge opens {notebook}")
    return found


def set_repository(url: str) -> None:
    """Write ``url`` into _config.yml and replace the old address in every use."""
    old, _ = configured()
    match = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+)", url)
    if match is None:
        raise SystemExit(f"the address must be https://github.com/OWNER/NAME, got {url}")
    for path in [ROOT / "_config.yml", *files()]:
        text = path.read_text(encoding="utf-8")
        new = text.replace(f"github.com/{old}", f"github.com/{match.group(1)}")
        new = new.replace(f"google.com/github/{old}/", f"google.com/github/{match.group(1)}/")  # Colab links
        new = new.replace(pages(old), pages(match.group(1)))  # the site
        if new != text:
            path.write_text(new, encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv[:1] == ["set"] and len(argv) == 2:
        set_repository(argv[1])
    elif argv[:1] == ["expect"] and len(argv) == 2:
        if configured()[0] != argv[1]:
            print(
                f"_config.yml names {configured()[0]}, but this is {argv[1]}: its pages would link there. "
                f"Run python .ci/repository.py set https://github.com/{argv[1]} and commit.",
                file=sys.stderr,
            )
            return 1
    elif argv != ["check"]:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    found = problems()
    print("\n".join(found) or f"every use names {configured()[0]} on branch {configured()[1]}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
