"""The README and the pages of docs/ as a reader uses them (issue 23, item 1): every command they
show parses, every flag of coreio's programs they name is one that program's `--help` lists, every
file, module and link they point at exists, and the README stays a front door (under 150 lines,
linking every page). The README's start command is run as written by tests/integration/test_wheel.py;
the manifests of examples/ by tests/integration/test_examples.py."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = (README, *sorted(DOCS.glob("*.md")))
SHELL = ("sh", "bash", "shell", "console")
# Languages whose blocks are data or pictures, not commands.
OTHER = ("yaml", "json", "text")
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
LONG_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*[a-z0-9])(?![\w-])")
# coreio's programs, as the docs invoke them, and the module each runs.
PROGRAMS = {
    "coreio-apiserver": "apiserver",
    "coreio-operator": "apiserver_operator",
    "kubectl coreio": "kubectl_coreio",
    "coreio-export": "coreio_export",
}
# Long flags of other programs the pages name in prose: a backquoted flag is one of coreio's
# programs' (checked against their --help) or one of these.
OTHER_FLAGS = {
    "kubectl": {"--server-side", "--list"},
    "helm": {"--set"},
    "setup.py": {"--inplace", "--release"},
    "etcd": {"--watch-progress-notify-interval"},
    "kube-apiserver": {
        "--authorization-config",
        "--authorization-webhook-config-file",
        "--authorization-webhook-version",
    },
}
# The repository's top-level entries: a backquoted path starting with one of them must exist.
TOP_LEVEL = (*(path.name for path in ROOT.iterdir() if not path.name.startswith(".")), ".ci", ".importlinter")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    text: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


FENCE = re.compile(r"^( *)```([\w-]*)[^\n]*\n(.*?)^\1```[ \t]*$", re.M | re.S)


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        indent = len(match.group(1))
        body = "\n".join(line[indent:] for line in match.group(3).splitlines())
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(page, line, match.group(2), body))
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks(page)]
SHELL_BLOCKS = [block for block in ALL_BLOCKS if block.language in SHELL]


def prose(page: Path) -> str:
    """The page without its code blocks."""
    return FENCE.sub("", page.read_text())


def script(block: Block) -> str:
    """What a reader would type: a console block's `$ ` lines (with their continuations), a shell
    block whole."""
    if block.language != "console":
        return block.text
    typed, continued = [], False
    for line in block.text.splitlines():
        if line.startswith("$ ") or continued:
            typed.append(line.removeprefix("$ "))
            continued = line.endswith("\\")
    return "\n".join(typed)


def commands(source: str) -> list[list[str]]:
    """The simple commands of a script, each as its words (lines, pipelines, lists and comments
    split off; environment assignments, sudo and exec dropped)."""
    found: list[list[str]] = []
    for line in source.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        found.append([])
        for word in lexer:
            if set(word) <= set(";&|()<>"):
                found.append([])
            else:
                found[-1].append(word)
    for words in found:
        while words and (re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]) or words[0] in ("sudo", "exec")):
            del words[0]
    return [words for words in found if words]


@functools.cache
def help_text(module: str, *subcommand: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, *subcommand, "--help"],
        cwd=ROOT,
        # Wide, so that argparse wraps no option line; the source tree first, as the suite runs it.
        env={
            **os.environ,
            "COLUMNS": "500",
            "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@functools.cache
def options(module: str, *subcommand: str) -> frozenset[str]:
    """The options a program's --help lists (each name, aliases included)."""
    names = set()
    for line in help_text(module, *subcommand).splitlines():
        if line.startswith("  -"):
            invocation = line.strip().split("  ")[0]
            names.update(FLAG.findall(invocation))
    return frozenset(names)


def plugin_commands() -> tuple[str, ...]:
    """The commands `kubectl coreio --help` lists."""
    listed = help_text("kubectl_coreio").split("COMMAND\n", 1)[1].split("\n\n", 1)[0]
    return tuple(line.split()[0] for line in listed.splitlines())


def all_options() -> dict[str, frozenset[str]]:
    """Each of coreio's programs and the options of any of its commands."""
    plugin = set(options("kubectl_coreio"))
    for command in plugin_commands():
        plugin |= options("kubectl_coreio", command)
    return {
        "coreio-apiserver": options("apiserver"),
        "coreio-operator": options("apiserver_operator"),
        "kubectl coreio": frozenset(plugin),
        "coreio-export": options("coreio_export"),
    }


def invocation(words: list[str]) -> tuple[str, tuple[str, ...], list[str]] | None:
    """(program, its subcommand, the words after it) when `words` runs one of coreio's programs."""
    program = Path(words[0]).name
    if program in ("python", "python3") and words[1:3] in (["-m", "apiserver"], ["-m", "apiserver_operator"]):
        program = {"apiserver": "coreio-apiserver", "apiserver_operator": "coreio-operator"}[words[2]]
        words = words[2:]
    if program == "kubectl" and words[1:2] == ["coreio"]:
        program, words = "kubectl coreio", words[1:]
    elif program == "kubectl-coreio":
        program = "kubectl coreio"
    if program not in PROGRAMS:
        return None
    rest = words[1:]
    if program == "kubectl coreio" and rest and rest[0] in plugin_commands():
        return program, (rest[0],), rest[1:]
    return program, (), rest


def test_every_code_block_names_its_language() -> None:
    """So that none escapes the checks below: `sh` or `console` for commands, `text` for pictures."""
    unnamed = [str(block) for block in ALL_BLOCKS if block.language not in (*SHELL, *OTHER)]
    assert unnamed == []


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=str)
def test_each_shell_block_parses(block: Block) -> None:
    assert script(block).strip(), f"{block}: a shell block without a command"
    done = subprocess.run(["bash", "-n"], input=script(block), capture_output=True, text=True)
    assert done.returncode == 0, f"{block}: {done.stderr}"


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.language in ("yaml", "json")], ids=str)
def test_each_yaml_and_json_block_parses(block: Block) -> None:
    if block.language == "json":
        json.loads(block.text)
    else:
        list(yaml.safe_load_all(block.text))


def unknown_flags(shown: list[Block]) -> tuple[list[str], int]:
    """The flags of coreio's programs in `shown` commands that their --help does not list, and how
    many flags were checked."""
    unknown, checked = [], 0
    for block in shown:
        for words in commands(script(block)):
            found = invocation(words)
            if found is None:
                continue
            program, subcommand, rest = found
            known = options(PROGRAMS[program], *subcommand)
            for word in rest:
                if word.startswith("-") and word != "-":
                    checked += 1
                    flag = word.split("=", 1)[0]
                    if flag not in known:
                        unknown.append(f"{block}: {' '.join((program, *subcommand))} {flag}")
    return unknown, checked


def test_the_flags_of_coreios_programs_in_commands_are_in_their_help() -> None:
    unknown, checked = unknown_flags(SHELL_BLOCKS)
    assert unknown == []
    assert checked > 0


def test_a_flag_no_program_has_is_found_wherever_it_is_shown() -> None:
    """The check above, on commands written as the pages write them, each with one flag too many."""
    shown = Block(
        README,
        1,
        "sh",
        "COREIO=1 .venv/bin/coreio-apiserver --data-dir /x --etcd-server=https://e:2379 &&\n"
        "  kubectl coreio why alice get events --group devs --problems | head  # the flag of bindings\n"
        "sudo coreio-operator uninstall --wait 10 -n coreio-system --installations coreio\n"
        "python -m apiserver --workers=2 \\\n  --no-such-flag",
    )
    console = Block(
        README, 1, "console", "$ kubectl-coreio bindings --problems -A --group x\nbindings --nope"
    )
    unknown, checked = unknown_flags([shown, console])
    assert [entry.split(": ", 1)[1] for entry in unknown] == [
        "coreio-apiserver --etcd-server",
        "kubectl coreio why --problems",
        "coreio-operator --installations",
        "coreio-apiserver --no-such-flag",
        "kubectl coreio bindings --group",
    ]
    assert checked == 12  # the console block's output line (bindings --nope) is no command


def test_every_long_flag_named_in_prose_is_a_flag_of_some_program() -> None:
    """A backquoted `--flag` is one of coreio's programs' (as their --help lists it) or another
    program's named in OTHER_FLAGS: a flag renamed or removed leaves no page naming it."""
    ours = frozenset().union(*all_options().values())
    others = frozenset().union(*OTHER_FLAGS.values())
    unknown = []
    for page in PAGES:
        for quoted in re.findall(r"`([^`\n]+)`", prose(page)):
            for flag in LONG_FLAG.findall(quoted):
                if flag not in ours and flag not in others:
                    unknown.append(f"{page.relative_to(ROOT)}: {flag}")
    assert unknown == []


@pytest.mark.parametrize(
    ("page", "program"),
    [
        ("operations.md", "coreio-apiserver"),
        ("install.md", "coreio-operator"),
        ("kubectl-coreio.md", "kubectl coreio"),
    ],
)
def test_each_flag_of_a_program_is_described_on_its_page(page: str, program: str) -> None:
    text = (DOCS / page).read_text()
    named = set(FLAG.findall(" ".join(re.findall(r"`([^`\n]+)`", text))))
    undescribed = sorted(
        flag
        for flag in all_options()[program]
        if flag.startswith("--") and flag not in named and flag not in ("--help", "--version")
    )
    assert undescribed == [], f"docs/{page} does not name them"


def _paths(text: str) -> set[str]:
    """Repository paths named in `text`: a word starting with a top-level entry and a slash."""
    found = set()
    for word in re.findall(r"[\w./-]+", text):
        word = word.rstrip(".,:;)")
        if "/" in word and word.split("/", 1)[0] in TOP_LEVEL and "*" not in word:
            found.add(word.split("#", 1)[0])
    return found


def test_every_repository_path_they_name_exists() -> None:
    missing = []
    for page in PAGES:
        quoted = " ".join(re.findall(r"`([^`\n]+)`", prose(page)))
        shown = " ".join(script(block) for block in blocks(page) if block.language in SHELL)
        for path in sorted(_paths(quoted) | _paths(shown)):
            if not (ROOT / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert missing == []


def test_every_python_module_a_command_runs_exists() -> None:
    missing = []
    for block in SHELL_BLOCKS:
        for words in commands(script(block)):
            if Path(words[0]).name.startswith("python") and words[1:2] == ["-m"]:
                module = words[2].replace(".", "/")
                runs = (ROOT / f"{module}.py", ROOT / module / "__main__.py")
                if module.split("/")[0] in TOP_LEVEL and not any(path.exists() for path in runs):
                    missing.append(f"{block}: {words[2]}")
    assert missing == []


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose(page), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        anchors.add(slug)
    return anchors


def _links(page: Path) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", prose(page))


def test_relative_links_resolve() -> None:
    broken = []
    for page in PAGES:
        for link in _links(page):
            if re.match(r"[a-z]+:", link):
                continue
            target, _, anchor = link.partition("#")
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such heading)")
    assert broken == []


def test_the_readme_is_a_front_door() -> None:
    """Under 150 lines, and every page of docs/ is one link away."""
    lines = README.read_text().count("\n")
    assert lines < 150, f"README.md has {lines} lines"
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in _links(README)}
    unlinked = [page.name for page in PAGES[1:] if page.resolve() not in linked]
    assert unlinked == []


def _section_command(heading: str) -> str:
    section = README.read_text().split(f"\n## {heading}", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert block, f"README.md: no command under '## {heading}'"
    return block.group(1).strip()


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run runs what the README tells a reader to run for the whole suite."""
    run = (ROOT / ".ci" / "run").read_text()
    (executed,) = re.findall(r"^exec (.+)$", run, re.M)
    assert _section_command("Run the whole test suite") == executed


def test_the_readme_starts_the_server_with_nothing_but_python() -> None:
    """The start command tests/integration/test_wheel.py runs: a virtualenv, the package, the server
    on its defaults (no flags, so the embedded SQLite)."""
    command = _section_command("Start the server")
    assert commands(command)[-1] == [".venv/bin/coreio-apiserver"], command
    assert "pip install ." in command
