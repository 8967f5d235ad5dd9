"""The GitHub Actions workflows run what they claim, and a release is the package's one version.

`.ci/run` validates the workflows against GitHub's schema (check-jsonschema) and builds the wheel
and sdist; these tests check what the schema cannot: which commands each workflow runs.
"""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import transformer_lib

ROOT = Path(__file__).resolve().parent.parent
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


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / ".ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)
    return module


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
    repository = load_script("repository")
    owner_name = repository.configured()[0]
    assert repository.main(["expect", owner_name]) == 0
    assert repository.main(["expect", "someone/fork"]) == 1


def test_a_release_builds_from_pyproject_checks_the_tag_and_attaches_the_files():
    flow = workflow("release.yml")
    assert triggers(flow)["push"]["tags"] == ["v*.*.*"]
    build = commands(flow["jobs"]["build"])
    assert 'python .ci/release.py check "${{ github.ref_name }}"' in build
    assert "python -m build" in build.splitlines() and "twine check --strict dist/*" in build.splitlines()
    assert "gh release create" in commands(flow["jobs"]["github-release"])
    pypi = flow["jobs"]["pypi"]
    assert pypi["if"] == "vars.PUBLISH_TO_PYPI == 'true'"  # off until the owner turns it on
    assert uses(pypi)[-1] == "pypa/gh-action-pypi-publish"


def test_the_matrix_runs_weekly_and_on_tags_with_every_python_it_needs():
    flow = workflow("matrix.yml")
    assert "schedule" in triggers(flow) and triggers(flow)["push"]["tags"] == ["v*.*.*"]
    job = flow["jobs"]["matrix"]
    assert "python .ci/matrix.py" in commands(job).splitlines()
    setup = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python"))
    offered = set(setup["with"]["python-version"].split())
    assert {entry.python for entry in load_script("matrix").ENTRIES} <= offered


def test_the_version_is_written_once():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = pyproject.split("[project]\n")[1].split("\n[")[0]  # the [project] table
    assert re.search(r"^version\s*=", project, re.M) is None and 'dynamic = ["version"]' in project
    assert 'version = { attr = "transformer_lib.__version__" }' in pyproject
    assert re.fullmatch(r"\d+\.\d+\.\d+", transformer_lib.__version__)
    assert load_script("release").version() == transformer_lib.__version__


def test_the_command_line_says_its_version():
    out = subprocess.run(
        [sys.executable, "-m", "transformer_lib", "--version"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0 and out.stdout.strip() == f"transformer_lib {transformer_lib.__version__}"


def test_the_changelog_has_this_version_and_a_tag_must_match_it(capsys):
    release = load_script("release")
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
