"""The docs stay true to the checkout: every relative link in README.md, docs/ and the other top-level
pages resolves to a file (and a heading, for an anchor), every `make` target, console script and
`python -m` module they name exists, every alert of deploy/prometheus/ has its runbook section in
docs/monitoring.md, docs/flags.md lists exactly the flags each command's --help shows, and the
README stays a short page that opens with the two commands, without run times; CHANGELOG.md is
release notes in Keep a Changelog form."""
from __future__ import annotations

import configparser
import importlib.util
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
README_MAX_BYTES = 10 * 1024
PAGES = sorted({README, *REPO.glob("*.md"), *(REPO / "docs").rglob("*.md"), REPO / "charts" / "etcd-operator" / "README.md"})

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`]+`")  # may wrap onto the next line, as in CommonMark
LINK = re.compile(r"\[[^\]\n]*\]\(([^()\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)


def relative(path: Path) -> str:
    return str(path.relative_to(REPO))


def prose(text: str) -> str:
    """The text without fenced code blocks and code spans."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def code(text: str) -> list[str]:
    """Fenced code blocks and code spans (a wrapped span as one line)."""
    return FENCE.findall(text) + [span.replace("\n", " ") for span in CODE_SPAN.findall(FENCE.sub("", text))]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        anchor = slug(heading)
        suffix = 0
        while (anchor if suffix == 0 else f"{anchor}-{suffix}") in found:
            suffix += 1
        found.add(anchor if suffix == 0 else f"{anchor}-{suffix}")
    return frozenset(found)


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {relative(destination)}")
    assert not broken, f"{relative(page)}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_no_bare_angle_brackets_outside_code(page: Path) -> None:
    """`<bucket>` outside a code span is an unknown HTML tag to a Markdown renderer: it vanishes."""
    text = re.sub(r"<!--.*?-->", "", prose(page.read_text()), flags=re.DOTALL)
    assert not re.findall(r"<[A-Za-z][^>\n]*>", text), relative(page)


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*):", (REPO / "Makefile").read_text(), re.MULTILINE))


def console_scripts() -> set[str]:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    entries = config["options.entry_points"]["console_scripts"].strip().splitlines()
    return {entry.split("=")[0].strip() for entry in entries}


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_every_make_target_named_exists(page: Path) -> None:
    named = {target for snippet in code(page.read_text())
             for target in re.findall(r"(?:^|[\s`;&|(])make ([a-z][\w-]*)", snippet, re.MULTILINE)}
    assert named <= makefile_targets(), f"{relative(page)} names make targets the Makefile lacks: {named - makefile_targets()}"


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_every_console_script_named_exists(page: Path) -> None:
    """A command `etcd-...` run in the docs (with flags or a subcommand, or from .venv/bin/) is a
    console script of setup.cfg."""
    named = set()
    for snippet in code(page.read_text()):
        named |= set(re.findall(r"(?:^|[\s`;&|(])(etcd-[a-z-]+) (?:--|fetch\b|install\b)", snippet, re.MULTILINE))
        named |= set(re.findall(r"\.venv/bin/(etcd-[a-z-]+)", snippet))
    assert named <= console_scripts(), f"{relative(page)} runs commands setup.cfg does not install: {named - console_scripts()}"


def test_the_docs_name_console_scripts_at_all() -> None:
    """The two tests above are not vacuous: the docs run make targets and console scripts."""
    text = (REPO / "docs" / "flags.md").read_text() + README.read_text()
    assert {"etcd-operator", "etcd-backup"} <= {m for s in code(text) for m in re.findall(r"(etcd-[a-z-]+) --", s)}
    assert "demo" in {m for s in code(README.read_text()) for m in re.findall(r"make ([a-z]+)", s)}


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_every_python_module_run_exists(page: Path) -> None:
    named = {module for snippet in code(page.read_text()) for module in re.findall(r"python -m ([\w.]+)", snippet)}
    missing = {module for module in named if importlib.util.find_spec(module) is None}
    assert not missing, f"{relative(page)} runs modules that do not exist: {missing}"


def test_every_console_script_has_its_section_in_flags_md() -> None:
    headings = set(HEADING.findall((REPO / "docs" / "flags.md").read_text()))
    assert {f"`{script}`" for script in console_scripts()} <= headings


def test_every_alert_has_a_runbook_section_and_every_runbook_an_alert() -> None:
    alerts = {rule["alert"] for path in (REPO / "deploy" / "prometheus").glob("*-rules.yaml")
              for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"] if "alert" in rule}
    page = (REPO / "docs" / "monitoring.md").read_text()
    runbook = page[page.index("## Runbook"):]
    sections = set(re.findall(r"^### (\w+)$", runbook, re.MULTILINE))
    assert alerts and sections == alerts, (alerts - sections, sections - alerts)


# The commands of docs/flags.md: its section heading -> the module `python -m` runs.
COMMANDS = {"etcd-operator": "etcd_operator", "etcd-backup-operator": "backup_operator",
            "etcd-restore-operator": "restore_operator", "etcd-backup": "backup_operator.oneshot"}
OPERATORS = ("etcd-operator", "etcd-backup-operator", "etcd-restore-operator")


def flags_by_section() -> dict[str, set[str]]:
    sections: dict[str, set[str]] = {}
    current = ""
    for line in (REPO / "docs" / "flags.md").read_text().splitlines():
        heading = re.match(r"^##+ (.+)$", line)
        if heading:
            current = heading.group(1).strip("`")
        flag = re.match(r"^\| `(--[a-z0-9-]+)` \|", line)
        if flag:
            sections.setdefault(current, set()).add(flag.group(1))
    return sections


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_flags_md_lists_exactly_the_flags_of_each_command(command: str) -> None:
    result = subprocess.run([sys.executable, "-m", COMMANDS[command], "--help"], capture_output=True, text=True,
                            cwd=REPO, timeout=60, env={**os.environ, "COLUMNS": "500"})  # no flag wrapped
    assert result.returncode == 0, result.stderr
    shown = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", result.stdout))
    sections = flags_by_section()
    documented = sections[command] | (sections["Flags of all three operators"] if command in OPERATORS else set())
    assert documented == shown, f"docs/flags.md, {command}: missing {shown - documented}, not a flag {documented - shown}"


def test_readme_is_short_and_opens_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.encode()) <= README_MAX_BYTES, f"README.md is {len(text.encode())} bytes"
    lines = text.splitlines()
    assert lines[0] == "# etcd-operator-py"
    block = text[:text.index("```\n", text.index("```sh") + 1)]
    assert "\n## " not in block, "the two commands come before the first section"
    assert re.search(r"^make demo +#", block, re.MULTILINE) and re.search(r"^make test +#", block, re.MULTILINE)
    timings = re.findall(r"\d+ min \d+ s|last took|\d(?:\.\d+)? ?s for `\.ci/run`", text)
    assert not timings, f"README.md carries run times {timings}: the current figures are docs/dev/benchmarks.md's"


CHANGELOG_SECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def test_changelog_is_release_notes() -> None:
    """CHANGELOG.md follows Keep a Changelog: `## [Unreleased]` first, then released versions newest
    first as `## [x.y.z] - YYYY-MM-DD`, the newest being setup.cfg's version; under each only the
    standard sections, each a list of one-line entries. No measurement journal: figures live in
    docs/dev/benchmarks.md (the current ones) and git (their history)."""
    text = (REPO / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert versions and versions[0] == "[Unreleased]", versions
    released = [re.fullmatch(r"\[(\d+)\.(\d+)\.(\d+)\] - \d{4}-\d{2}-\d{2}", version) for version in versions[1:]]
    assert released and all(released), f"version headings not as '## [x.y.z] - YYYY-MM-DD': {versions[1:]}"
    numbers = [tuple(int(part) for part in match.groups()) for match in released if match]
    assert numbers == sorted(set(numbers), reverse=True), "versions are not newest first, once each"
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    assert ".".join(map(str, numbers[0])) == config["metadata"]["version"], "the newest version is not setup.cfg's"
    body = text[text.index("\n## [Unreleased]"):]
    for section in re.split(r"^## .+$", body, flags=re.MULTILINE)[1:]:
        names = re.findall(r"^### (.+)$", section, re.MULTILINE)
        assert names and set(names) <= set(CHANGELOG_SECTIONS) and len(names) == len(set(names)), names
    strays = [line for line in body.splitlines() if line and not line.startswith(("## ", "### ", "- ", "["))]
    assert not strays, f"CHANGELOG.md lines that are not headings or one-line entries: {strays[:5]}"
    timings = re.findall(r"\d+ min \d+ s|for `\.ci/run`|\| run \|", text)
    assert not timings, f"CHANGELOG.md records measurements {timings[:5]}: the current figures go to docs/dev/benchmarks.md"


SHIPPED_PACKAGES = ("kube_adapter", "operator_runtime", "etcd_common", "etcd_operator", "backup_operator",
                    "restore_operator")


def test_the_architecture_page_names_every_shipped_module() -> None:
    """docs/dev/architecture.md matches the tree: each module of the six shipped packages is in its
    tables (by file name; a subpackage's modules by `<subpackage>/<file>`)."""
    page = (REPO / "docs" / "dev" / "architecture.md").read_text()
    missing = []
    for package in SHIPPED_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if path.name in ("__init__.py", "__main__.py"):
                continue
            inside = path.relative_to(REPO / package).as_posix()
            if f"`{inside}`" not in page:
                missing.append(f"{package}/{inside}")
    assert not missing, f"modules docs/dev/architecture.md does not describe: {missing}"
