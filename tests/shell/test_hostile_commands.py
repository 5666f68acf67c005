"""Commands written to slip past the rules: each one's claims cover all it can write and read.

Every case names the files a command really writes (and reads) when ``/bin/sh`` runs it; its
claims must cover each write exclusively and each read at least shared, or the command must be a
barrier (which covers everything). A case is one a rule or the walk once got wrong.
"""

from __future__ import annotations

import pytest

import toolkernel as tk
from toolkernel.locks import Mode, Path
from toolkernel.shell import analyse
from toolkernel.tools import shell_claims

BARRIER = [tk.exclusive(tk.path())]


def covered(target: str, claims: list[tk.Claim], *, exclusive: bool) -> bool:
    key = tk.path(target)
    return any(
        isinstance(claim.resource, Path)
        and (claim.mode is Mode.EXCLUSIVE or not exclusive)
        and key.parts[: len(claim.resource.parts)] == claim.resource.parts
        for claim in claims
    )


WRITES = {
    # sed scripts are programs: `w` writes, `s///w` writes, `r` reads
    "sed 'w out' a": ["out"],
    "sed -n '/x/w out' a": ["out"],
    "sed 's/a/b/w out' a": ["out"],
    "sed -e p -e 'w sub/out' a": ["sub/out"],
    "sed --expression='1,3W out' a": ["out"],
    # sed -i with an attached suffix: the letters of the suffix are not options
    "sed -i.bl s/a/b/ sub/x": ["sub/x", "sub/x.bl"],
    "sed -i.l s/a/b/ sub/x": ["sub/x"],
    "sed --in-place=.bak s/a/b/ sub/x": ["sub/x", "sub/x.bak"],
    "sed -ie s/a/b/ sub/x": ["sub/x", "sub/xe"],
    # abbreviations of long options, as getopt_long reads them
    "sort --out=sub/f a": ["sub/f"],
    "sort --o=sub/f a": ["sub/f"],
    "sed --in s/a/b/ sub/x": ["sub/x"],
    "sed --in-pl s/a/b/ sub/x": ["sub/x"],
    "cp --target=sub/d a": ["sub/d"],
    # `-o=x`: GNU reads `=x`, Go's flag package `x`
    "go build -o=bin/app .": ["bin/app"],
    # git: a branch name creates a branch; -D deletes one
    "git branch newb": [".git"],
    "git branch -v newb": [".git"],
    "git branch --format=%(refname) newb": [".git"],
    "git branch -D old": [".git"],
    "git branch --delete old": [".git"],
    "git branch -u origin/x": [".git"],
    "git branch --set-upstream-to=origin/x": [".git"],
    "git branch -m a b": [".git"],
    "git reflog expire --all": [".git"],
    "git reflog delete HEAD@{1}": [".git"],
    "git config --file sub/settings a.b c": ["sub/settings"],
    # tools find their project's root upward: its caches, environment and lock file
    "cd sub && pytest": [".pytest_cache"],
    "cd sub/deep && python -m pytest": [".pytest_cache", "sub/.pytest_cache"],
    "cd sub && uv run pytest": [".venv", "uv.lock"],
    "uv run pytest": ["uv.lock"],
    "uv run --frozen ruff check": [".ruff_cache"],
    "cargo -C crates/x build": ["target"],
    "cd sub && ruff check": [".ruff_cache"],
    "cd sub && mypy .": [".mypy_cache"],
    "cd sub && go mod tidy": ["go.mod", "go.sum"],
    # pytest's rootdir (its cache) is found upward from its arguments, or named
    "pytest sub/tests": ["sub/.pytest_cache", "sub/tests/.pytest_cache"],
    "pytest sub/deep/test_a.py::test_x": ["sub/.pytest_cache", "sub/deep/.pytest_cache"],
    "pytest sub/test_*.py": ["sub/.pytest_cache"],
    "pytest --rootdir=sub": ["sub/.pytest_cache"],
    "pytest -c sub/pytest.ini": ["sub/.pytest_cache"],
    "python -m pytest --config-file sub/tox.ini": ["sub/.pytest_cache"],
    "pytest $TESTS": ["sub/.pytest_cache"],
    "pytest --log-file=out.log": ["out.log"],
    "pytest --log-file out.log": ["out.log"],
    "py.test --log-file=out.log": ["out.log"],
    "pytest --debug": ["pytestdebug.log"],
    "pytest --debug=sub/x.log": ["sub/x.log"],
    "pytest -o cache_dir=elsewhere": ["elsewhere"],
    "pytest --override-ini=cache_dir=elsewhere": ["elsewhere"],
    "pytest -o log_file=x.log": ["x.log"],
    "pytest -o addopts=--basetemp=sub/x": ["sub/x"],
    "pytest -o $OPTION": ["anything"],
    # npm --prefix and pnpm -C run the scripts of the package there
    "npm --prefix sub test": ["sub/node_modules/.cache"],
    "npm test --prefix sub": ["sub/node_modules/.cache"],
    "pnpm -C sub test": ["sub/node_modules/.cache"],
    "pnpm --dir=sub lint": ["sub/node_modules/.cache", "sub/.eslintcache"],
    # go build without -o writes the program of a main package where it runs
    "go build": ["app"],
    "go build .": ["app"],
    "go build ./cmd/app": ["app"],
    "go build main.go util.go": ["main"],
    "cd sub && go build": ["sub/app"],
    # cargo writes Cargo.lock when it is missing or out of date
    "cargo test": ["Cargo.lock"],
    "cargo build --release": ["Cargo.lock"],
    "cargo tree": ["Cargo.lock"],
    "cargo metadata --format-version 1": ["Cargo.lock"],
    # a backup is a new entry beside the copy (b~, b.~1~, b.x)
    "cp -b a sub/b": ["sub/b~"],
    "cp --backup=numbered a sub/b": ["sub/b.~1~"],
    "cp --back a sub/b": ["sub/b~"],
    "cp -S .x a sub/b": ["sub/b.x"],
    "cp --suffix=.x a sub/b": ["sub/b.x"],
    "cp -fb a sub/b": ["sub/b~"],
    # programs run without a subcommand: `yarn` installs, `mix` runs the default task
    "yarn": ["node_modules"],
    "yarn --frozen-lockfile": ["node_modules"],
    "mix": ["_build"],
    # interpreters reading their program from standard input
    "python < script.py": ["anything"],
    "echo 'import os; os.remove(\"x\")' | python3": ["x"],
    "echo 'rm x' | bash": ["x"],
    "sh < script.sh": ["anything"],
    "bash -x": ["anything"],
    "node < script.js": ["anything"],
    # python -m runs a module, npx/uvx a package: not the program of that name
    "python -m rm x": ["anything"],
    "python -m ls": ["anything"],
    "npx rm sub/x": ["anything"],
    "npx cat a": ["anything"],
    "uvx cat a": ["anything"],
    # dash (the shell where there is no bash) reads `&>` as `&` then `>`: opened before the cd
    "cd sub && ls &> out": ["out", "sub/out"],
    "cd sub && ls &>> out": ["out", "sub/out"],
    "curl --etag-save etag https://example.org": ["etag"],
    "curl --libcurl code.c https://example.org": ["code.c"],
    # find -exec: `{}` inside a longer word need not name a path beneath the start
    "find sub/deep -exec rm -rf {}/../../../x \\;": ["x"],
    "find sub -exec touch {}.x \\;": ["sub.x"],
    # git clone without a destination makes one named after the repository
    "git clone https://example.org/repo.git": ["repo"],
    # $'...' is `$...` to dash (/bin/sh)
    "echo hi > $'sub/y'": ["$sub/y"],
    "rm $'sub/x'": ["$sub/x"],
    'echo hi > $"sub/y"': ["$sub/y"],
}


@pytest.mark.parametrize(("command", "writes"), list(WRITES.items()))
def test_every_file_a_command_writes_is_claimed_exclusively(
    command: str, writes: list[str]
) -> None:
    claims = shell_claims(command)
    for target in writes:
        assert covered(target, claims, exclusive=True), (command, target, claims)


READS = {
    # xargs -i takes an attached replace string or none: `env` is the command, not the string
    "xargs -i env cp {} d < list": ["listed"],
    "xargs -l env cat < list": ["listed"],
    # lists of files to read, and links followed wherever they lead
    "sha256sum -c SUMS": ["listed"],
    "md5sum --check SUMS": ["listed"],
    "wc --files0-from=list": ["listed"],
    "du --files0-from=list": ["listed"],
    "sort --files0-from=list": ["listed"],
    "grep -R x sub": ["elsewhere"],
    "grep --dereference-recursive x sub": ["elsewhere"],
    "rg -L x sub": ["elsewhere"],
    "rg --follow x sub": ["elsewhere"],
    "tree -l sub": ["elsewhere"],
    "du -L sub": ["elsewhere"],
    "find -L sub -name x": ["elsewhere"],
    "sed 'r other' a": ["other", "a"],
    "sed '1R sub/other' a": ["sub/other"],
    "cat $'a'": ["$a"],
}


@pytest.mark.parametrize(("command", "reads"), list(READS.items()))
def test_every_file_a_command_reads_is_claimed(command: str, reads: list[str]) -> None:
    claims = shell_claims(command)
    for target in reads:
        assert covered(target, claims, exclusive=False), (command, target, claims)


RUNS_ANYTHING = [
    # sed's e command and the e flag of s run the shell
    "sed 'e touch f' a",
    "sed '1e touch f' a",
    "sed 's/a/touch f/e' a",
    "sed -n 's/x/y/pe' a",
    "sed -f script.sed a",
    "sed --file=script.sed a",
    "sed -i'../backup/*' s/a/b/ f",
    "git clone --template=/tmp/hooks https://example.org/r.git d",
    # options that name files to write where the rule can't see them
    "curl -K curl.cfg https://example.org",
    "sort -T sub a",
    "jq --rawfile x f.txt .a d.json",
    "git clone -c core.hooksPath=/tmp/hooks https://example.org/r.git d",
    # bash evaluates a variable's value as arithmetic: `a[$(rm -rf x)]` in a file runs
    "n=$(cat count); echo $((n + 1))",
    "n=$(cat count); echo $(($n))",
    "n=$(cat count); [[ $n -gt 0 ]] && ls",
    "n=$(cat count); echo ${list[$n]}",
    "for ((i = $(cat count); i > 0; i--)); do echo; done",
    # zsh runs code in glob qualifiers and expansions a bash parse does not see
    "zsh -c 'ls *(e:\"rm -rf x\":)'",
    "zsh -c 'ls'",
    # scripts of packages the text does not name; settings that move cargo's writes
    "npm -w pkg test",
    "npm test --workspaces",
    "pnpm --filter web test",
    "pnpm -r test",
    "pnpm test --recursive",
    "cargo --config 'build.target-dir=\"elsewhere\"' build",
    "cargo --config=build.rustc-wrapper=/tmp/evil test",
    "go test -fuzz=FuzzX",
    # an option whose `when` table says the command is not described
    "git branch --edit-description",
    "git branch --edit-desc",
    # git config --global and --system write outside the workspace
    "git config --global user.name x",
    "git config --global core.pager 'rm -rf x'",
    "git config --system a.b c",
    # abbreviations of options a rule refuses
    "rg --pr=./filter x",
    "pytest --basete=/tmp/x",
    "env --split=x",
    # a variable that changes what runs, set by something other than an assignment
    "read PATH < p; ls",
    "read -a PATH; ls",
    "printf -v PATH /tmp/evil; ls",
    "printf -vPATH /tmp/evil; ls",
    "getopts ab PATH; ls",
    "for PATH in /tmp/evil; do ls; done",
    "select PATH in /tmp/evil; do ls; done",
    "for CDPATH in /; do :; done; cd tmp; rm -rf x",
    "for ((PATH=0; PATH<1; PATH++)); do ls; done",
    "declare -n r=PATH; r=/tmp/evil; ls",
    "local -n r=PATH",
    "echo $((PATH=5)); ls",
    ": ${PATH:=/tmp/evil}; ls",
    ": ${LD_PRELOAD=/tmp/evil.so}; ls",
    "unset PATH; ls",
    # names that reach declaration builtins as quoted or built words
    'export "PATH=/tmp/evil"; ls',
    "export 'PATH'=/tmp/evil; ls",
    "export PA\\TH=/tmp/evil; ls",
    "export P$x=/tmp/evil; ls",
    "declare $name=/tmp/evil; ls",
    'unset "PATH"; ls',
    "hash -p /tmp/evil/ls ls; ls",
    # variables through which tools take options, places to write, or programs to run
    "PYTEST_ADDOPTS=--basetemp=/tmp/x pytest",
    "CARGO_TARGET_DIR=elsewhere cargo build",
    "RUSTC_WRAPPER=/tmp/evil cargo build",
    "GOFLAGS=-toolexec=/tmp/evil go test ./...",
    "LESSOPEN='|rm -rf x %s' less a",
    "RIPGREP_CONFIG_PATH=rg.cfg rg x",
    "npm_config_cache=cache npm test",
    "MYPY_CACHE_DIR=elsewhere mypy src",
    "UV_PROJECT_ENVIRONMENT=elsewhere uv run pytest",
    "CURL_HOME=. curl https://example.org",
    "export COVERAGE_FILE=elsewhere; pytest",
]


@pytest.mark.parametrize("command", RUNS_ANYTHING)
def test_what_runs_or_rewires_unknown_programs_is_a_barrier(command: str) -> None:
    assert shell_claims(command) == BARRIER, analyse(command)


def test_a_program_whose_own_rule_says_what_it_does_alone_is_understood_without_a_subcommand() -> (
    None
):
    assert analyse("git stash").barrier is None  # `git stash` pushes: confined, not a barrier
    assert analyse("yarn").barrier == "yarn: without a subcommand it is not described"


def test_git_branch_write_options_do_not_raise() -> None:
    # A `when` table saying git = "write" was refused while the command was analysed.
    assert {str(c) for c in shell_claims("git branch -d old")} == {"shared .", "exclusive .git"}


STILL_UNDERSTOOD = {
    "git branch": {"shared ."},
    "git branch -a": {"shared ."},
    "git branch --list 'f*'": {"shared ."},
    "git branch --merged main": {"shared ."},
    "command -v git": set(),
    "git remote -v": {"shared ."},
    "git reflog -n 5": {"shared ."},
    "git stash": {"exclusive ."},
    "sed -n 1,20p a.txt": {"shared a.txt"},
    "sed -i.bak 's/a/b/g' src/x.py": {"exclusive src"},
    "sed -n '/start/,/end/{p;}' a": {"shared a"},
    "sed 's|a/b|c|g; y/abc/xyz/' a": {"shared a"},
    "sed '/^#/d;s/x/y/2g' a": {"shared a"},
    "sed '$a\\\nlast line' a": {"shared a"},
    "sed -e :a -e '$!N;ba' a": {"shared a"},
    "sed 'w /dev/stdout' a": {"shared a"},
    "sort --output=f a": {"shared a", "exclusive f"},
    "pytest --co -q": {"shared .", "exclusive .pytest_cache"},
    "python -m pytest -x": {"shared .", "exclusive .pytest_cache"},
    "npx eslint src": {"shared ."},
    "bash -c 'ls'": {"shared ."},
    "go test -count=1 ./...": {"shared ."},
    "read -r line < a": {"shared a"},
    "for f in a b; do cat $f; done": {"shared ."},
    "echo $((1 + 2))": set(),
    "PYTHONPATH=src pytest -q": {"shared .", "exclusive .pytest_cache"},
    "RUST_BACKTRACE=1 cargo test": {"shared .", "exclusive target", "exclusive Cargo.lock"},
    "LC_ALL=C sort a": {"shared a"},
    "for file in a b; do cat $file; done": {"shared ."},
    '[ "$n" -gt 0 ] && cat a': {"shared a"},
    "[[ $? -eq 0 ]] && cat a": {"shared a"},
    "echo $(($? + 1)) ${#list[@]} ${list[0]}": set(),
}


@pytest.mark.parametrize(("command", "expected"), list(STILL_UNDERSTOOD.items()))
def test_common_commands_stay_understood(command: str, expected: set[str]) -> None:
    assert {str(c) for c in shell_claims(command)} == expected, analyse(command).barrier


HEREDOCS_THAT_RUN_COMMANDS = [
    "cat <<E\n`rm x`\nE",
    "cat <<E > out\nhello `rm -rf sub`\nE",
    "cat <<-E\n\t$(rm x)\n\tE",
]


@pytest.mark.parametrize("command", HEREDOCS_THAT_RUN_COMMANDS)
def test_an_unquoted_heredoc_whose_commands_the_parser_misses_is_a_barrier(command: str) -> None:
    assert shell_claims(command) == BARRIER


def test_a_quoted_heredoc_runs_nothing() -> None:
    assert shell_claims("cat <<'E' > out\n`rm x` $(rm y)\nE") == [tk.exclusive(tk.path("out"))]


@pytest.mark.parametrize(
    "command",
    [
        "ls \ud800",
        "echo \udfff > f",
        "ls\x00; rm x",
        "ls\r\nrm x",
        "echo " + "$(" * 3000 + ")" * 3000,
    ],
)
def test_shell_claims_never_raises(command: str) -> None:
    assert shell_claims(command) == BARRIER


def test_a_command_too_large_to_read_quickly_is_a_barrier_unread() -> None:
    assert analyse("ls " + "a " * 30_000).barrier == (
        "the command has more than 20000 syntax nodes"
    )
    assert shell_claims("cat " + "a " * 5_000) == [tk.shared(tk.path("a"))]


PROGRAMS_OF_THE_REPOSITORY = [
    # a path into the workspace names the repository's own program, not the one the rule knows
    "bin/pytest",
    "sub/bin/cat a",
    "./ls",
    "./scripts/ls sub",
    "scripts/bin/grep x a",
    ".bin/eslint src",
    "~/bin/cat a",
    "/opt/tools/bin/cat a",
    "../.venv/bin/pytest",
    ".venv/bin/rm -rf sub",
    "node_modules/.bin/cat a",
    "timeout 5 bin/cat a",
    "xargs bin/cat < list",
    "find . -exec ./cat {} \\;",
    "env A=1 ./bin/grep x a",
    # only a virtualenv's activate script is known; another is the repository's own
    "source bin/activate && ls",
    ". tools/bin/activate; ls",
    "source ../.venv/bin/activate && ls",
    "source /opt/x/bin/activate && ls",
]


@pytest.mark.parametrize("command", PROGRAMS_OF_THE_REPOSITORY)
def test_a_program_named_by_a_path_in_the_workspace_is_a_barrier(command: str) -> None:
    assert shell_claims(command) == BARRIER, analyse(command)


INSTALLED_PROGRAMS = {
    ".venv/bin/pytest -q": {"shared .", "exclusive .pytest_cache"},
    "./.venv/bin/python -m mypy src": {"shared .", "exclusive .mypy_cache"},
    "sub/.venv/bin/ruff check": {"shared .", "exclusive .ruff_cache"},
    "node_modules/.bin/eslint src": {"shared ."},
    "/usr/bin/grep x a": {"shared a"},
    "/bin/cat a": {"shared a"},
}


@pytest.mark.parametrize(("command", "expected"), list(INSTALLED_PROGRAMS.items()))
def test_system_programs_and_installed_tools_named_by_path_keep_their_rule(
    command: str, expected: set[str]
) -> None:
    assert {str(c) for c in shell_claims(command)} == expected, analyse(command).barrier


CURL_FILES = {
    # -w %output{f} (curl 8.3) writes what follows to f; -w @f reads a format that may say so
    "curl -w '%output{sub/f}x' https://example.org": BARRIER,
    "curl -sw '%output{>>f}x' https://example.org": BARRIER,
    "curl --write-out=%output{f} https://example.org": BARRIER,
    "curl --write %output{f} https://example.org": BARRIER,
    "curl -w @format.txt https://example.org": BARRIER,
    'curl -w "$FORMAT" https://example.org': BARRIER,
    # -o with #1 names a file by each URL's glob; --create-dirs and --no-clobber write more
    "curl -o 'page_#1' 'https://example.org/[1-3]'": BARRIER,
    "curl --create-dirs -o sub/d/f https://example.org": BARRIER,
    "curl --no-clobber -o f https://example.org": BARRIER,
}


@pytest.mark.parametrize(("command", "expected"), list(CURL_FILES.items()))
def test_curl_values_that_write_files_are_barriers(command: str, expected: list[tk.Claim]) -> None:
    assert shell_claims(command) == expected, analyse(command)


CURL_READS = {
    "curl -d @body.json https://example.org": ["body.json"],
    "curl --data-binary @sub/body https://example.org": ["sub/body"],
    "curl --json @body.json https://example.org": ["body.json"],
    "curl -F file=@upload.bin https://example.org": ["upload.bin"],
    "curl -F 'text=<notes.txt' https://example.org": ["notes.txt"],
    "curl --data-urlencode name@value.txt https://example.org": ["value.txt"],
    "curl -H @headers.txt https://example.org": ["headers.txt"],
    "curl --cacert ca.pem https://example.org": ["ca.pem"],
}


@pytest.mark.parametrize(("command", "reads"), list(CURL_READS.items()))
def test_curl_values_that_read_files_are_claimed(command: str, reads: list[str]) -> None:
    claims = shell_claims(command)
    assert claims != BARRIER
    for target in reads:
        assert covered(target, claims, exclusive=False), (command, target, claims)


def test_curl_that_only_prints_stays_understood() -> None:
    assert shell_claims("curl -sS -w '%{http_code}' -d 'a=1' https://example.org") == []
    assert {str(c) for c in shell_claims("curl -o out.html https://example.org")} == {
        "exclusive out.html"
    }
