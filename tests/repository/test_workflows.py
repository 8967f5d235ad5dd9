"""The GitHub Actions workflows run what they claim, and a release is the package's one version.

`.ci/run` validates the workflows against GitHub's schema (check-jsonschema) and builds the wheel
and sdist; these tests check what the schema cannot: which commands each workflow runs.
"""

import ast
import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import transformer_lib
from conftest import ci_script

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"


def workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def triggers(flow: dict) -> dict:
    return flow[True]  # YAML 1.1 reads the key `on` as True


def commands(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def uses(job: dict) -> list[str]:
    return [step["uses"].split("@")[0] for step in job["steps"] if "uses" in step]


def readme_command(number: int) -> str:
    """The README's numbered command: the line after its `# N.` comment."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(rf"^# {number}\. .*\n(.+)$", text, re.M).group(1).strip()


def test_each_workflow_is_commented_and_least_privileged():
    for path in sorted(WORKFLOWS.glob("*.yml")):
        assert path.read_text(encoding="utf-8").startswith("# "), f"{path.name}: say what it does first"
        assert "permissions" in workflow(path.name), f"{path.name}: no permissions block"
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == ["matrix.yml", "pages.yml", "release.yml", "tests.yml"]


def test_the_tests_run_ci_on_linux_and_the_readmes_commands_on_macos_and_windows():
    flow = workflow("tests.yml")
    assert {"push", "pull_request"} <= set(triggers(flow))
    assert "bash .ci/run" in commands(flow["jobs"]["linux"]).splitlines()
    laptops = flow["jobs"]["laptops"]
    assert set(laptops["strategy"]["matrix"]["os"]) == {"macos-14", "windows-2022"}  # macos-14: Apple silicon
    assert readme_command(2) in commands(laptops).splitlines()
    assert "pip install -r requirements.txt" in commands(laptops)


def test_the_website_is_command_1_uploaded_and_deployed():
    flow = workflow("pages.yml")
    assert triggers(flow)["push"]["branches"] == ["main"]
    build, deploy = flow["jobs"]["build"], flow["jobs"]["deploy"]
    assert readme_command(1) in commands(build).splitlines()
    assert "_build/html/" in (ROOT / "README.md").read_text(encoding="utf-8")  # where the README says it builds
    upload = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    assert uses(deploy) == ["actions/deploy-pages"] and deploy["needs"] == "build"
    assert flow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert 'python .ci/repository.py expect "${{ github.repository }}"' in commands(build)


def test_the_website_workflow_refuses_a_fork_that_kept_another_repositorys_address():
    repository = ci_script("repository")
    owner_name = repository.configured()[0]
    assert repository.main(["expect", owner_name]) == 0
    assert repository.main(["expect", "someone/fork"]) == 1


def test_a_release_builds_from_pyproject_checks_the_tag_and_attaches_the_files():
    flow = workflow("release.yml")
    assert triggers(flow)["push"]["tags"] == ["v*.*.*"]
    build = commands(flow["jobs"]["package"])
    assert 'python .ci/release.py check "${{ github.ref_name }}"' in build
    assert "python -m build" in build.splitlines() and "twine check --strict dist/*" in build.splitlines()
    release = flow["jobs"]["github-release"]
    assert "gh release create" in commands(release) and set(release["needs"]) == {"package", "book"}
    pypi = flow["jobs"]["pypi"]
    assert pypi["if"] == "vars.PUBLISH_TO_PYPI == 'true'"  # off until the owner turns it on
    assert uses(pypi)[-1] == "pypa/gh-action-pypi-publish"
    assert pypi["environment"]["url"] == "https://pypi.org/project/transformer-book/"


def test_a_release_builds_its_site_lessons_and_pdf_at_the_tag_and_publishes_the_site():
    flow = workflow("release.yml")
    book = flow["jobs"]["book"]
    lines = commands(book).splitlines()
    assert 'python .ci/install_cell.py write --ref "${{ github.ref_name }}"' in lines
    step = next(s for s in book["steps"] if "jupyter-book build" in s.get("run", ""))
    assert step["env"]["BOOK_RELEASE"] == "${{ github.ref_name }}"  # the site says its version
    ordered = [line.strip() for line in step["run"].splitlines()]
    assert ordered.index("jupyter-book build . -W -n --keep-going") < ordered.index(
        "python .ci/pdf.py book-dist/transformer-book.pdf"
    )
    assert "tar -czf book-dist/site.tar.gz -C _build/html ." in ordered  # the name .ci/site_versions.py downloads
    install = lines.index('python .ci/install_cell.py write --ref "${{ github.ref_name }}"')
    assert install < lines.index("jupyter-book build . -W -n --keep-going")  # the site shows the pinned lessons
    assert ci_script("site_versions").ASSET == "site.tar.gz"
    website = flow["jobs"]["website"]
    assert website["uses"] == "./.github/workflows/pages.yml" and website["needs"] == "github-release"
    assert website["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    pages = workflow("pages.yml")
    assert "workflow_call" in triggers(pages)
    checkout = pages["jobs"]["build"]["steps"][0]
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["ref"] == "main"
    assert "python .ci/site_versions.py assemble _build/html --from-releases" in commands(pages["jobs"]["build"])


# The majors each action's own documentation shows (Dependabot, .github/dependabot.yml, keeps them there).
CURRENT = {
    "actions/checkout": 5,
    "actions/setup-python": 6,
    "actions/cache": 5,
    "actions/upload-artifact": 6,
    "actions/download-artifact": 7,
    "actions/upload-pages-artifact": 4,
    "actions/deploy-pages": 4,
}


def test_the_actions_are_on_their_current_majors_and_dependabot_keeps_them_there():
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for job in workflow(path.name)["jobs"].values():
            for step in job.get("steps", []):
                name, _, ref = step.get("uses", "@").partition("@")
                if name in CURRENT:
                    assert int(ref.removeprefix("v")) >= CURRENT[name], f"{path.name}: {name}@{ref}"
    dependabot = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text(encoding="utf-8"))
    assert {"package-ecosystem": "github-actions", "directory": "/"}.items() <= dependabot["updates"][0].items()


def test_the_matrix_runs_weekly_and_on_tags_with_every_python_it_needs():
    flow = workflow("matrix.yml")
    assert "schedule" in triggers(flow) and triggers(flow)["push"]["tags"] == ["v*.*.*"]
    job = flow["jobs"]["matrix"]
    assert "python .ci/matrix.py" in commands(job).splitlines()
    setup = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python"))
    offered = set(setup["with"]["python-version"].split())
    assert {entry.python for entry in ci_script("matrix").ENTRIES} <= offered


def test_the_version_is_written_once():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = pyproject.split("[project]\n")[1].split("\n[")[0]  # the [project] table
    assert re.search(r"^version\s*=", project, re.M) is None and 'dynamic = ["version"]' in project
    assert 'version = { attr = "transformer_lib.__version__" }' in pyproject
    assert re.fullmatch(r"\d+\.\d+\.\d+", transformer_lib.__version__)
    assert ci_script("release").version() == transformer_lib.__version__


def test_the_command_line_says_its_version():
    out = subprocess.run(
        [sys.executable, "-m", "transformer_lib", "--version"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0 and out.stdout.strip() == f"transformer_lib {transformer_lib.__version__}"


def test_the_changelog_has_this_version_and_a_tag_must_match_it(capsys):
    release = ci_script("release")
    tag = f"v{transformer_lib.__version__}"
    assert release.problems(tag) == []
    assert release.main(["notes", tag]) == 0 and "course" in capsys.readouterr().out
    assert release.main(["check", "v99.0.0"]) == 1
    assert "is not the package's version" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["tests.yml", "pages.yml", "matrix.yml"])
def test_downloads_are_cached_under_the_packages_cache_folder(name):
    """Multi30k and ONNX Runtime Web are fetched once per cache key (the package's cache folder)."""
    flow = workflow(name)
    caches = [s for job in flow["jobs"].values() for s in job["steps"] if s.get("uses", "").startswith("actions/cache")]
    assert caches and all(s["with"]["path"] == "~/.cache/transformer_lib" for s in caches)


# The import name of each third-party module a .ci script needs, and the package pip installs it from
DISTRIBUTIONS = {"yaml": "pyyaml"}


def ci_imports(name: str, seen: frozenset = frozenset()) -> set[str]:
    """The third-party modules ``.ci/NAME.py`` imports at its top, with those of the .ci modules it imports."""
    tree = ast.parse((ROOT / ".ci" / f"{name}.py").read_text(encoding="utf-8"))
    found = set()
    for node in tree.body:
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module]
        for module in (m.split(".")[0] for m in modules):
            if (ROOT / ".ci" / f"{module}.py").is_file() and module not in seen:
                found |= ci_imports(module, seen | {name})
            elif module not in sys.stdlib_module_names and module != "__future__":
                found.add(module)
    return found


def installed_before_each_ci_script(job: dict) -> list[tuple[str, set[str], set[str] | None]]:
    """Each ``python .ci/X.py`` of a job's steps: (X, what it imports, what pip installed before it;
    None after ``pip install -r requirements.txt``, which installs everything)."""
    installed: set[str] | None = set()
    found = []
    for step in job.get("steps", []):
        for line in step.get("run", "").replace("&&", "\n").splitlines():
            words = line.split()
            if words[:2] == ["pip", "install"] and installed is not None:
                if "-r" in words:
                    installed = None
                else:  # names, not options or an option's value
                    values = {w for a, w in itertools.pairwise(words) if a.startswith("--") and not w.startswith("-")}
                    installed |= {w.split("=")[0].lower() for w in words[2:] if not w.startswith("-")} - values
            match = re.match(r"python \.ci/(\w+)\.py", line.strip())
            if match:
                found.append(
                    (match.group(1), ci_imports(match.group(1)), None if installed is None else set(installed))
                )
    return found


def test_each_ci_script_a_workflow_runs_has_its_modules_installed_before_it():
    """A fresh runner's Python has no PyYAML: a step that runs a .ci script installs what it imports first."""
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for job_name, job in workflow(path.name)["jobs"].items():
            for script, imports, installed in installed_before_each_ci_script(job):
                if installed is None:
                    continue
                missing = {DISTRIBUTIONS.get(m, m) for m in imports} - installed
                assert not missing, (
                    f"{path.name}, job {job_name}: .ci/{script}.py imports {sorted(missing)} not installed yet"
                )


def test_the_install_check_reads_pip_lines_as_pip_does():
    job = {
        "steps": [
            {"run": "python .ci/repository.py expect x"},
            {"run": "pip install pyyaml && python .ci/release.py check v1"},
        ]
    }
    assert installed_before_each_ci_script(job) == [("repository", {"yaml"}, set()), ("release", {"yaml"}, {"pyyaml"})]
    job = {
        "steps": [
            {
                "run": "pip install torch==2.13.0 --index-url https://x\n"
                "pip install -r requirements.txt\npython .ci/pdf.py a"
            }
        ]
    }
    assert installed_before_each_ci_script(job)[0][2] is None
