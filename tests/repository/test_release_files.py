"""What a course adopts the book by, and what a release publishes: checked without building anything.

* A reader's set-up (requirements-lessons.txt) holds what the lessons import and none of the
  toolchain; the maintainers' (requirements.txt) includes it; every Python the README names gets
  an onnxruntime that has a wheel for it (.ci/resolve.py resolves the whole file per Python in CI).
* The site of a release sits beside main's, with one version switcher (.ci/site_versions.py).
* CITATION.cff, the licences, the contributing guide, the code of conduct and the issue templates.
"""

import json
import re
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

import transformer_lib
from conftest import ci_script, tool_script

ROOT = Path(__file__).resolve().parents[2]
TOOLCHAIN = {"jupyter-book", "nbval", "otter-grader", "pytest", "ruff", "build", "twine", "check-jsonschema"}


def names(lines: list[str]) -> set[str]:
    return {re.split(r"[=<>~ ;\[]", line)[0].lower() for line in lines}


def test_a_reader_installs_what_the_lessons_need_and_no_toolchain():
    resolve = ci_script("resolve")
    reader = names(resolve.requirements(ROOT / "requirements-lessons.txt", "3.11"))
    assert not reader & TOOLCHAIN, reader & TOOLCHAIN
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(r"^book = \[(.*)\]$", pyproject, re.M).group(1)
    package = re.search(r"^dependencies = \[(.*?)\]", pyproject, re.M | re.S).group(1)
    needed = names(re.findall(r'"([^"]+)"', extra + package))
    assert needed <= reader, needed - reader  # the package's dependencies and its [book] extra
    assert {"jupyterlab", "ipykernel"} <= reader
    assert "-e ." in (ROOT / "requirements-lessons.txt").read_text(encoding="utf-8").splitlines()


def test_the_maintainers_set_up_includes_the_readers():
    resolve = ci_script("resolve")
    maintainers = names(resolve.requirements(ROOT / "requirements.txt", "3.11"))
    assert names(resolve.requirements(ROOT / "requirements-lessons.txt", "3.11")) <= maintainers
    assert TOOLCHAIN <= maintainers


@pytest.mark.parametrize(("python", "onnxruntime"), [("3.10", "onnxruntime==1.23.*"), ("3.13", "onnxruntime==1.32.*")])
def test_each_python_gets_an_onnxruntime_with_a_wheel_for_it(python, onnxruntime):
    lines = ci_script("resolve").requirements(ROOT / "requirements.txt", python)
    assert [line for line in lines if line.startswith("onnxruntime")] == [onnxruntime]


def test_the_pythons_resolved_start_at_the_packages_floor():
    pythons = ci_script("resolve").PYTHONS
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'requires-python = ">={pythons[0]}"' in pyproject
    assert [int(p.split(".")[1]) for p in pythons] == list(range(10, 10 + len(pythons)))  # none skipped


def test_a_releases_site_sits_beside_mains_with_one_switcher(tmp_path):
    site_versions = ci_script("site_versions")
    main = tmp_path / "html"
    main.mkdir()
    (main / "index.html").write_text("main\n", encoding="utf-8")
    archives = {}
    for tag in ("v0.3.0", "v0.10.0"):
        built = tmp_path / f"built-{tag}"
        (built / "notebooks").mkdir(parents=True)
        (built / "index.html").write_text(tag, encoding="utf-8")
        (built / "notebooks" / "01.html").write_text(tag, encoding="utf-8")
        archives[tag] = tmp_path / f"{tag}.tar.gz"
        with tarfile.open(archives[tag], "w:gz") as tar:
            tar.add(built, arcname=".")
    entries = site_versions.assemble(main, archives, base="https://example.org/book/")
    assert (main / "v0.3.0" / "notebooks" / "01.html").read_text(encoding="utf-8") == "v0.3.0"
    assert [(e["version"], e["url"]) for e in entries] == [
        ("dev", "https://example.org/book/"),
        ("0.10.0", "https://example.org/book/v0.10.0/"),  # newest first: 10 > 3 as numbers
        ("0.3.0", "https://example.org/book/v0.3.0/"),
    ]
    assert [e.get("preferred", False) for e in entries] == [False, True, False]
    for folder in (main, main / "v0.3.0", main / "v0.10.0"):
        assert json.loads((folder / "switcher.json").read_text(encoding="utf-8")) == entries
    with pytest.raises(SystemExit, match="is not a release tag"):
        site_versions.assemble(main, {"main": archives["v0.3.0"]})


def test_the_site_names_its_version_and_leaves_thebe_out_without_its_button(monkeypatch):
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import site_fixes
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    monkeypatch.delenv(site_fixes.RELEASE_ENV, raising=False)
    assert site_fixes.release() is None
    assert site_fixes.switcher_entry("https://x.org/b", None)["version"] == "dev"
    monkeypatch.setenv(site_fixes.RELEASE_ENV, f"v{transformer_lib.__version__}")
    assert site_fixes.release() == f"v{transformer_lib.__version__}"
    monkeypatch.setenv(site_fixes.RELEASE_ENV, "v99.0.0")
    with pytest.raises(RuntimeError, match="but the package is version"):
        site_fixes.release()

    class Script:
        def __init__(self, filename, body=""):
            self.filename, self.attributes = filename, {"body": body}

    assert site_fixes._is_thebe(Script("_static/sphinx-thebe.js"))
    assert site_fixes._is_thebe(Script(None, "const THEBE_JS_URL = 'x'"))
    assert not site_fixes._is_thebe(Script("_static/scripts/bootstrap.js"))


def test_citation_cff_names_the_packages_version_and_repository():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["title"] and cff["message"] and cff["authors"]
    assert cff["version"] == transformer_lib.__version__  # .ci/release.py check refuses a tag otherwise
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert cff["repository-code"] == config["repository"]["url"] and cff["url"] == config["html"]["baseurl"]


def test_the_files_a_course_adopts_a_book_by():
    assert "CC BY 4.0" in (ROOT / "LICENSE-BOOK.md").read_text(encoding="utf-8")
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert "Contributor Covenant" in (ROOT / "CODE_OF_CONDUCT.md").read_text(encoding="utf-8")
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "CODE_OF_CONDUCT.md" in contributing and "LICENSE-BOOK.md" in contributing
    templates = {
        p.name: yaml.safe_load(p.read_text(encoding="utf-8"))
        for p in (ROOT / ".github" / "ISSUE_TEMPLATE").glob("*.yml")
    }
    assert {"erratum.yml", "instructor_question.yml"} <= set(templates)
    for name in ("erratum.yml", "instructor_question.yml"):
        assert templates[name]["name"] and templates[name]["description"] and templates[name]["body"]


def test_built_files_stay_out_of_git_and_the_sdist_has_no_half_test_suite():
    assert "dist/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "prune tests" in (ROOT / "MANIFEST.in").read_text(encoding="utf-8").splitlines()


def test_the_committed_pytorch_inventory_is_the_one_its_script_writes():
    """book/_inventories/torch.inv resolves the site's links into PyTorch offline; every class under both its names."""
    from sphinx.util.inventory import InventoryFile

    script = tool_script("torch_inventory")
    with open(ROOT / "book" / "_inventories" / "torch.inv", "rb") as f:
        inventory = InventoryFile.load(f, script.BASE, lambda base, uri: base + uri)
    names = {name for role in inventory.values() for name in role}
    assert names == {line.split()[0] for line in script.entries()}
    linear = inventory["py:class"]["torch.nn.modules.linear.Linear"][2]  # the name autodoc writes
    assert linear == script.BASE + "generated/torch.nn.Linear.html#torch.nn.Linear"
    assert inventory["py:class"]["torch.Tensor"][2] == script.BASE + "tensors.html#torch.Tensor"


def test_the_readmes_command_2_time_is_its_record():
    """The README states command 2's time as tools/scripts/command2.py recorded it on a clean clone."""
    record = json.loads((ROOT / "results" / "commands" / "command2.json").read_text(encoding="utf-8"))
    minutes, seconds = divmod(record["seconds"], 60)
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    stated = f"Command 2 took {minutes} min {seconds} s on a clean clone of commit {record['git_commit'][:7]}"
    assert stated in readme, stated
    assert record["tests"]["passed"] > 1000 and not record["tests"].get("failed")


def test_the_how_to_run_page_states_the_commands_timings_as_recorded():
    """The timing section: command 1's record and every other run of command 2, as tools/scripts/ recorded them."""
    page = " ".join((ROOT / "book" / "how_to_run.md").read_text(encoding="utf-8").split())
    commands = ROOT / "results" / "commands"
    command1 = json.loads((commands / "command1_python3.10.json").read_text(encoding="utf-8"))
    minutes, seconds = divmod(command1["install_seconds"], 60)
    assert f"it took {minutes} min {seconds} s to install" in page
    assert f"and {command1['build_seconds']} s to build the book" in page
    main = json.loads((commands / "command2.json").read_text(encoding="utf-8"))
    minutes, seconds = divmod(main["seconds"], 60)
    stated = f"Command 2 (`pytest -n 2 --dist loadfile`) took {minutes} min {seconds} s on a clean clone"
    assert f"{stated} of commit {main['git_commit'][:7]}" in page
    for run in json.loads((commands / "command2_other_runs.json").read_text(encoding="utf-8")):
        minutes, seconds = divmod(run["seconds"], 60)
        assert f"{minutes} min {seconds} s" in page, run["started_utc"]


def test_command2_reads_each_files_seconds_and_the_counts_from_pytests_report():
    command2 = tool_script("command2")
    report = """
    ============================= slowest durations =============================
    98.62s call     notebooks/09_training.ipynb::Cell 15
    1.50s setup    tests/library/test_cli.py::test_train[a b]
    0.50s call     notebooks/09_training.ipynb::Cell 3
    0.01s teardown tests/library/test_cli.py::test_train[a b]
    ============ 1278 passed, 5 skipped, 6 warnings in 791.85s (0:13:11) ============
    """
    seconds = command2.per_file(report)
    assert list(seconds.items()) == [("notebooks/09_training.ipynb", 99.1), ("tests/library/test_cli.py", 1.5)]
    assert command2.counts(report) == {"passed": 1278, "skipped": 5, "warnings": 6}
    with pytest.raises(SystemExit, match="no summary"):
        command2.counts("collected 0 items")
