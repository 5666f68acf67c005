"""Each built-in rule's claims, the shell constructs the walk follows, and what fails closed.

Claims are written as strings: ``"shared src"`` is a shared claim on ``src`` and everything under
it, ``"exclusive ."`` the exclusive claim on the whole workspace that a command the rules do not
understand (a barrier) declares.
"""

from __future__ import annotations

import pathlib

import pytest

import toolkernel as tk
from toolkernel.shell import analyse
from toolkernel.tools import ShellRules, Workspace, builtin_tools, shell_claims
from toolkernel.tools._bash import BashTool

BARRIER = {"exclusive ."}


def claims(command: str, rules: ShellRules | None = None) -> set[str]:
    return {str(claim) for claim in shell_claims(command, rules)}


CASES = {
    # viewers and searchers
    "ls": {"shared ."},
    "ls -la src": {"shared src"},
    "ls --color=auto -la src tests": {"shared src", "shared tests"},
    "cat src/a.py": {"shared src/a.py"},
    "head -n 20 a.txt": {"shared a.txt"},
    "head -20 a.txt": {"shared a.txt"},
    "tail -f log.txt": {"shared log.txt"},
    "wc -l src/*.py": {"shared src"},
    "wc -w work/*.md": {"shared work"},
    "grep -n def src/a.py": {"shared src/a.py"},
    "grep def": set(),
    "grep -rn TODO": {"shared ."},
    "grep -rn TODO src": {"shared src"},
    "grep -e a -e b x y": {"shared x", "shared y"},
    "grep -f patterns.txt src": {"shared patterns.txt", "shared src"},
    "rg foo": {"shared ."},
    "rg -n -g '*.py' foo src": {"shared src"},
    "rg --files src": {"shared src"},
    "find . -name '*.py'": {"shared ."},
    "find src tests -type f": {"shared src", "shared tests"},
    "find . -name '*.pyc' -delete": {"exclusive ."},
    "find build -delete": {"exclusive ."},
    "find src -name x -exec grep -n foo {} \\;": {"shared src"},
    "find src -name x -exec rm {} +": {"exclusive ."},
    "find sub/src -exec rm {} +": {"exclusive sub"},
    "find . -fprint list.txt": {"shared .", "exclusive list.txt"},
    "tree -L 2 src": {"shared src"},
    "tree -o out.txt src": {"shared src", "exclusive out.txt"},
    "sed -n 1,20p a.txt": {"shared a.txt"},
    "sed -i s/a/b/ src/x.py": {"exclusive src"},
    "sed -e s/a/b/ -i src/x.py": {"exclusive src"},
    "sort -o sorted.txt a.txt": {"shared a.txt", "exclusive sorted.txt"},
    "sort a.txt | uniq -c": {"shared a.txt"},
    "uniq in.txt out.txt": {"shared in.txt", "exclusive out.txt"},
    "cut -d, -f1 data.csv": {"shared data.csv"},
    "diff -u a.txt b.txt": {"shared a.txt", "shared b.txt"},
    "stat a.txt": {"shared a.txt"},
    "file a.bin": {"shared a.bin"},
    "du -sh": {"shared ."},
    "jq .name package.json": {"shared package.json"},
    "echo hi": set(),
    "pwd": set(),
    "which python3": set(),
    "sleep 2": set(),
    "date +%s": set(),
    "true": set(),
    # files
    "touch a.txt": {"exclusive a.txt"},
    "mkdir build": {"exclusive ."},
    "mkdir -p build/x": {"exclusive build/x"},
    "rm a.txt": {"exclusive ."},
    "rm -rf sub/build": {"exclusive sub"},
    "cp a.txt b.txt": {"shared a.txt", "exclusive b.txt"},
    "cp a.txt b.txt dir/": {"shared a.txt", "shared b.txt", "exclusive dir"},
    "cp -r src sub/dst": {"shared src", "exclusive sub"},
    "cp -t dir a b": {"shared a", "shared b", "exclusive dir"},
    "mv sub/a.txt sub/b.txt": {"exclusive sub"},
    "ln -s ../a sub/link": {"exclusive sub"},
    "chmod +x run.sh": {"exclusive run.sh"},
    "echo x | tee a.txt": {"exclusive a.txt"},
    # redirections
    "ls > out.txt": {"shared .", "exclusive out.txt"},
    "cat a >> log/b": {"shared a", "exclusive log/b"},
    "cat < in.txt": {"shared in.txt"},
    "ls 2> err.txt": {"shared .", "exclusive err.txt"},
    "ls &> all.txt": {"shared .", "exclusive all.txt"},
    "ls > /dev/null 2>&1": {"shared ."},
    "ls 2>/dev/null | head": {"shared ."},
    "ls >&2": {"shared ."},
    "> empty.txt": {"exclusive empty.txt"},
    "cat <<'EOF' > note.md\nhello $(rm -rf x)\nEOF": {"exclusive note.md"},
    "cat <<EOF > note.md\nhello $(rm -rf x)\nEOF": {"exclusive ."},
    "wc -l <<< 'a b'": set(),
    # sequences, pipelines, subshells, substitutions
    "cat a | grep x | wc -l": {"shared a"},
    "ls src && cat a": {"shared src", "shared a"},
    "ls src || cat a; cat b": {"shared src", "shared a", "shared b"},
    "(cd sub && cat a) && cat b": {"shared sub/a", "shared b"},
    "{ cat a; cat b; } > both.txt": {"shared a", "shared b", "exclusive both.txt"},
    "echo $(cat version.txt)": {"shared version.txt"},
    "echo `cat version.txt`": {"shared version.txt"},
    "diff <(sort a) <(sort b)": {"shared a", "shared b"},
    "x=$(cat a); echo $x": {"shared a"},
    "echo ${x:-$(cat a)}": {"shared a"},
    "[[ -f a ]] && cat a": {"shared a"},
    "if [ -f a ]; then cat a; else cat b; fi": {"shared a", "shared b"},
    "for f in src/*.py; do wc -l $f; done": {"shared ."},
    "! grep -q x a": {"shared a"},
    "ls &": {"shared ."},
    "FOO=1 ls src": {"shared src"},
    "export FOO=1; ls src": {"shared src"},
    # cd
    "cd sub && cat a > out": {"shared sub/a", "exclusive sub/out"},
    "cd sub; cat a": {"shared a", "shared sub/a"},
    "cd sub || cat a": {"shared a"},
    "cd sub && cd inner && ls": {"shared sub/inner"},
    "cd sub && ls ../other": {"shared other"},
    # wrappers
    "timeout 10 cat a": {"shared a"},
    "timeout -s KILL 10 rm x": {"exclusive ."},
    "env FOO=1 cat a": {"shared a"},
    "env -C sub cat a": {"shared sub/a"},
    "nice -n 5 cat a": {"shared a"},
    "nohup cat a": {"shared a"},
    "time cat a": {"shared a"},
    "xargs cat < list.txt": {"shared ."},
    "xargs -I{} cp {} out/ < list.txt": {"shared .", "exclusive out"},
    "bash -c 'cat a > b'": {"shared a", "exclusive b"},
    "sh -c 'cd sub && ls'": {"shared sub"},
    "command -v git": set(),
    "command cat a": {"shared a"},
    "uv run pytest": {
        "shared .",
        "exclusive .pytest_cache",
        "exclusive .venv",
        "exclusive uv.lock",
    },
    "npx eslint src": {"shared ."},
    "(source .venv/bin/activate && pytest)": {
        "shared .",
        "exclusive .pytest_cache",
    },
    ".venv/bin/pytest -q": {"shared .", "exclusive .pytest_cache"},
    # git
    "git status": {"shared ."},
    # git diff refreshes the index when it compares with the work tree
    "git status --short && git diff --stat && git log --oneline -5": {
        "shared .",
        "exclusive .git",
    },
    "git diff --cached": {"shared ."},
    "git -C sub log": {"shared ."},
    "git diff --output=patch.diff": {"shared .", "exclusive .git", "exclusive patch.diff"},
    "git branch -a": {"shared ."},
    "git branch --show-current": {"shared ."},
    "git stash list": {"shared ."},
    "git add a.txt": {"shared .", "exclusive .git"},
    "git commit -m 'x'": {"shared .", "exclusive .git"},
    "git -C sub add a": {"shared .", "exclusive .git", "exclusive sub/.git"},
    "git fetch --all": {"shared .", "exclusive .git"},
    "git tag -l": {"shared ."},
    "git tag v1": {"shared .", "exclusive .git"},
    "git config --get user.name": {"shared ."},
    "git checkout -b topic": {"exclusive ."},
    "git merge --no-ff topic": {"exclusive ."},
    "git stash": {"exclusive ."},
    "git reset --hard HEAD": {"exclusive ."},
    "git clone https://example.org/r.git dest": {"exclusive dest"},
    # test runners, linters, type checkers, formatters, build tools
    "pytest": {"shared .", "exclusive .pytest_cache"},
    "pytest -x -k 'not slow' tests/test_a.py": {
        "shared .",
        "exclusive .pytest_cache",
        "exclusive tests/.pytest_cache",
    },
    "pytest --junitxml=report.xml": {"shared .", "exclusive .pytest_cache", "exclusive report.xml"},
    "python -m pytest -q": {"shared .", "exclusive .pytest_cache"},
    "python3 -m mypy src": {"shared .", "exclusive .mypy_cache"},
    "mypy --strict src": {"shared .", "exclusive .mypy_cache"},
    "ruff check src": {"shared .", "exclusive .ruff_cache"},
    "ruff check --fix src": {"shared .", "exclusive .ruff_cache", "exclusive src"},
    "ruff format": {"exclusive ."},
    "ruff format src/a.py": {"shared .", "exclusive .ruff_cache", "exclusive src/a.py"},
    "ruff format --check": {"shared .", "exclusive .ruff_cache"},
    "black --check src": {"shared ."},
    "black src/a.py": {"shared .", "exclusive src/a.py"},
    "npm test": {"shared .", "exclusive node_modules/.cache"},
    "npm run lint": {"shared .", "exclusive .eslintcache", "exclusive node_modules/.cache"},
    "pnpm test": {"shared .", "exclusive node_modules/.cache"},
    "tsc --noEmit": {"shared ."},
    "cargo test": {"shared .", "exclusive target", "exclusive Cargo.lock"},
    "cargo build --release": {"shared .", "exclusive target", "exclusive Cargo.lock"},
    "go test ./...": {"shared ."},
    "go vet ./...": {"shared ."},
    "mix test": {"shared .", "exclusive _build/test", "exclusive tmp"},
    "python --version": set(),
    "node --version": set(),
    "gh pr view 12 --json url": set(),
    "gh api --help": set(),
    "curl -s https://example.org": set(),
    "curl -o page.html https://example.org": {"exclusive page.html"},
}


@pytest.mark.parametrize(("command", "expected"), list(CASES.items()))
def test_each_rule_declares_what_the_command_touches(command: str, expected: set[str]) -> None:
    assert claims(command) == expected, analyse(command).barrier


FAIL_CLOSED = [
    # not understood by the rules
    "make",
    "make test",
    "npm install",
    "npm run dev",
    "pnpm dev",
    "cargo run",
    "go run .",
    "awk '{print $1}' a",
    "python script.py",
    "python -c 'print(1)'",
    "node -e 'x'",
    "some-unknown-program --flag",
    "./run.sh",
    "rg --pre ./script foo",
    "tree -R -H . x",
    "git -c core.pager=less log",
    "git submodule update",
    "git frobnicate",
    "ruff server",
    "ln -s target",
    "tar -xf a.tar",
    "hostname newname",
    # shell constructs that can't be followed
    "f() { rm -rf x; }; f",
    "eval 'rm -rf x'",
    "exec rm -rf x",
    "source ./env.sh && ls",
    ". ./env.sh",
    "alias ls='rm -rf'; ls",
    "trap 'rm x' EXIT",
    "kill 1",
    "PATH=/tmp/evil:$PATH ls",
    "export PATH=/tmp; ls",
    "LD_PRELOAD=/tmp/x.so ls",
    "GIT_DIR=/tmp/g git status",
    "HOME=/tmp git status",
    "cd $HOME && ls",
    "cd && ls",
    "cd - && ls",
    "cd .. && rm x",
    "cd /tmp && rm x",
    "cd ~/other && rm x",
    "for d in a b; do cd $d; done",
    "if true; then cd sub; fi; rm x",
    "$(echo rm) x",
    "$CMD",
    "rm $FILE",
    "cp a $DEST",
    "echo x > $OUT",
    "echo x > /tmp/out",
    "echo x > ~/out",
    "echo x > ../out",
    "echo x >& $F",
    "xargs rm < list.txt",
    # parse errors, missing nodes, and the grammar's newline trap
    "cat 'unclosed",
    "ls (",
    "if true; then ls",
    "echo $(ls",
    "cat a | grep x | head -30\necho B && rm -rf s",
    "",
    "   ",
]


@pytest.mark.parametrize("command", FAIL_CLOSED)
def test_what_is_not_understood_is_a_barrier(command: str) -> None:
    assert claims(command) == BARRIER


def test_a_barrier_says_why() -> None:
    assert analyse("make").barrier == (
        "make: make runs what the Makefile says (add a rule for a target that only reads)"
    )
    assert analyse("f() { ls; }").barrier == "it defines a function"
    assert analyse("PATH=/x ls").barrier == "it sets PATH, which changes what runs and how"
    trap = analyse("cat a | grep x | head -30\necho B && rm -rf s").barrier
    assert trap == "a newline splits the words of one command (a known misparse)"


def test_the_newline_trap_is_caught_only_where_the_grammar_springs_it() -> None:
    # A newline after a one-stage pipeline, or ending a line with `;`, parses correctly.
    assert claims("cat a\necho B && cat b") == {"shared a", "shared b"}
    assert claims("cat a | head -3;\necho B && cat b") == {"shared a", "shared b"}
    # A line continuation is not a newline between words.
    assert claims("cat \\\n  a") == {"shared a"}


def test_read_only_git_commands_are_marked_so_the_tool_disables_repository_programs() -> None:
    assert analyse("git status && git log").git == "read"
    assert analyse("git status && git add x").git == "write"
    assert analyse("ls").git is None


def test_outside_writes_come_from_the_rules() -> None:
    assert "~/.cache/uv" in analyse("uv run ruff check").outside_writes


def test_a_project_extends_the_rules() -> None:
    rules = ShellRules.default().extended(
        """
        [tracker.show]
        reads = [".tracker/"]
        operands = "text..."
        [tracker.create]
        writes = [".tracker/"]
        operands = "text..."
        [git.status]
        operands = "barrier..."
        """
    )
    assert claims("tracker show 12", rules) == {"shared .tracker"}
    assert claims("tracker create 'fix it'", rules) == {"exclusive .tracker"}
    assert claims("tracker close 12", rules) == BARRIER  # not in the project's rules
    assert claims("tracker show 12") == BARRIER  # not in the built-in ones
    # Merged subcommand by subcommand: git status changed, git log kept.
    assert claims("git status x", rules) == BARRIER
    assert claims("git log", rules) == {"shared ."}


def test_a_project_rules_file_extends_the_built_in_rules(tmp_path: object) -> None:
    import pathlib

    assert isinstance(tmp_path, pathlib.Path)
    file = tmp_path / "shell-rules.toml"
    file.write_text('[make.test]\nreads = ["{workspace}"]\nwrites = ["build/"]\n')
    rules = ShellRules.from_file(file)
    # `make` itself stays a barrier; the rule for `make test` is the project's.
    assert claims("make", rules) == BARRIER
    assert claims("make test", rules) == {"shared .", "exclusive build"}
    assert claims("ls", rules) == {"shared ."}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[x]\noperands = "reed"', "shell rule 'x': operand role 'reed' is not one of"),
        ("[x]\nfrobs = 1", "shell rule 'x' has unknown field 'frobs'"),
        ('[x]\nvalue-options = ["n"]', "shell rule 'x': value-options names options"),
        ('[x]\noperands = ["read...", "write..."]', "only one operand role may end in '...'"),
        ("[x]\nbarrier = 1", "shell rule 'x': barrier must be a reason"),
        ("[x", "shell rules are not valid TOML"),
    ],
)
def test_a_rule_that_cant_be_understood_is_refused_by_name(text: str, message: str) -> None:
    with pytest.raises(tk.errors.ShellRulesError) as caught:
        ShellRules.from_toml(text)
    assert message in str(caught.value)


def test_empty_rules_know_no_program() -> None:
    assert claims("ls", ShellRules.empty()) == BARRIER
    assert claims("echo hi > a", ShellRules.empty()) == BARRIER


def test_shell_claims_keys_paths_as_spelled_and_the_bash_tool_through_its_workspace(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a").write_text("A\n")
    (tmp_path / "link").symlink_to("src")
    bash = next(t for t in builtin_tools(bash=True) if t.name == "Bash")
    assert isinstance(bash, BashTool)
    key = Workspace(tmp_path).key
    assert claims("cat link/a") == {"shared link/a"}
    assert {str(c) for c in bash.claims({"command": "cat link/a"}, key)} == {"shared src/a"}
    assert claims(f"cat {tmp_path}/src/a") == {"shared ."}
    assert {str(c) for c in bash.claims({"command": f"cat {tmp_path}/src/a"}, key)} == {
        "shared src/a"
    }


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # The repository is DIR/.git, DIR itself when bare, or where it runs without DIR.
        ("git init", {"exclusive .git"}),
        ("git init -q -b main d", {"exclusive d"}),
        ("git init --bare d", {"exclusive d"}),
        ("git --bare init d", {"exclusive d"}),
        ("git init --bare", {"exclusive ."}),
        ("cd sub && git --bare init", {"exclusive sub"}),
        ("git init --shared d", {"exclusive d"}),
        ("git init --shared=group --ref-format files d", {"exclusive d"}),
        ("git init --separate-git-dir ../x.git", BARRIER),  # outside the workspace
        ("git init --separate-git-dir sep/r.git d", {"exclusive sep/r.git", "exclusive d"}),
        ("git init --separate-git-dir sep.git", {"exclusive sep.git", "exclusive .git"}),
        # A clone makes DEST (a bare one too); --separate-git-dir puts the repository there.
        ("git clone https://example.org/r.git dest", {"exclusive dest"}),
        ("git clone --bare https://example.org/r.git dest.git", {"exclusive dest.git"}),
        ("git clone --mirror https://example.org/r.git dest.git", {"exclusive dest.git"}),
        (
            "git clone --separate-git-dir repos/r.git https://example.org/r.git dest",
            {"exclusive repos/r.git", "exclusive dest"},
        ),
    ],
)
def test_git_init_and_clone_claim_the_repository_they_make(
    command: str, expected: set[str]
) -> None:
    assert claims(command) == expected


def test_git_bare_with_another_command_is_not_described() -> None:
    assert claims("git --bare log") == BARRIER
    assert claims("git --bare fetch origin") == BARRIER
