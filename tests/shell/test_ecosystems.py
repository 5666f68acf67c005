"""The common tools of the main ecosystems, and the system's read-only tools: their claims, and
whether their effects are known from the text (``effects_known``)."""

from __future__ import annotations

import pytest

from toolkernel.shell import analyse
from toolkernel.tools import shell_claims

BARRIER = {"exclusive ."}


def claims(command: str) -> set[str]:
    return {str(claim) for claim in shell_claims(command)}


# command: (claims, effects known)
CASES: dict[str, tuple[set[str], bool]] = {
    # the system: what runs, what is installed
    "ps aux": (set(), True),
    "ps -ef | grep node": (set(), True),
    "pgrep -f uvicorn": (set(), True),
    "df -h": (set(), True),
    "free -m": (set(), True),
    "uname -a": (set(), True),
    "uptime": (set(), True),
    "env": (set(), True),
    "env | sort": (set(), True),
    "which go cargo": (set(), True),
    "lsof -p 1234": (set(), True),
    "top -b -n 1 | head -20": (set(), True),
    "docker ps -a": (set(), True),
    "docker images": (set(), True),
    "docker logs --tail 50 web": (set(), True),
    "docker compose ps": ({"shared ."}, True),
    "docker build -t app .": ({"shared ."}, True),
    # Python
    "python -m venv .venv": ({"exclusive .venv"}, False),
    "python -m build": ({"shared .", "exclusive dist"}, False),
    "uv sync": ({"shared .", "exclusive .venv", "exclusive uv.lock"}, False),
    "coverage run -m pytest": (
        {"shared .", "exclusive .coverage", "exclusive .pytest_cache"},
        False,
    ),
    "coverage report -m": ({"shared ."}, True),
    "flake8 src": ({"shared ."}, True),
    "poetry run pytest": ({"shared .", "exclusive .pytest_cache"}, False),
    # JavaScript and TypeScript
    "npx jest": ({"shared .", "exclusive node_modules/.cache"}, False),
    "npx vitest run": (
        {
            "shared .",
            "exclusive node_modules/.cache",
            "exclusive node_modules/.vite",
            "exclusive node_modules/.vitest",
        },
        False,
    ),
    "npx tsc --noEmit": ({"shared ."}, True),
    "biome check src": ({"shared ."}, True),
    "biome check --write src": ({"shared .", "exclusive src"}, True),
    # Elixir
    "mix test": ({"shared .", "exclusive _build/test", "exclusive tmp"}, False),
    "mix deps.get": ({"shared .", "exclusive deps", "exclusive mix.lock"}, False),
    "mix ecto.migrate": ({"shared .", "exclusive _build/dev"}, False),
    "mix credo --strict": ({"shared .", "exclusive _build/dev"}, False),
    "mix new demo": ({"exclusive demo"}, True),
    # Go
    "go mod init example.com/x": ({"exclusive go.mod"}, True),
    "go get example.com/y@latest": ({"shared .", "exclusive go.mod", "exclusive go.sum"}, True),
    "go build -mod=mod ./...": ({"shared .", "exclusive go.mod", "exclusive go.sum"}, True),
    "golangci-lint run ./...": ({"shared ."}, True),
    # Rust
    "cargo new demo": ({"exclusive demo", "exclusive Cargo.toml"}, True),
    "cargo add serde": ({"shared .", "exclusive Cargo.toml", "exclusive Cargo.lock"}, True),
    "cargo nextest run": ({"shared .", "exclusive target", "exclusive Cargo.lock"}, False),
    "cargo bench": ({"shared .", "exclusive target", "exclusive Cargo.lock"}, False),
    # Java
    "mvn -q test": ({"shared .", "exclusive target"}, False),
    # -f names a pom.xml or its directory; target/ is beside it, claimed in each directory up.
    "mvn -f sub/pom.xml package -DskipTests": (
        {"shared .", "exclusive sub/pom.xml/target", "exclusive sub/target", "exclusive target"},
        False,
    ),
    "gradle test": (
        {"shared .", "exclusive build", "exclusive .gradle", "exclusive .kotlin"},
        False,
    ),
    "./gradlew build -x test": (
        {"shared .", "exclusive build", "exclusive .gradle", "exclusive .kotlin"},
        False,
    ),
    # Ruby
    "bundle exec rspec spec/models": (
        {
            "shared .",
            "exclusive tmp",
            "exclusive log",
            "exclusive coverage",
            "exclusive spec/examples.txt",
            "exclusive .rspec_status",
        },
        False,
    ),
    "bundle exec rubocop": ({"shared ."}, False),
    "rubocop -a app": ({"shared .", "exclusive app"}, True),
    # C and C++
    "gcc -O2 -o app main.c util.c": ({"shared .", "exclusive app"}, True),
    "cc main.c": ({"shared .", "exclusive a.out"}, True),
    "gcc -c src/a.c src/b.cpp": ({"shared .", "exclusive a.o", "exclusive b.o"}, True),
    "gcc -fsyntax-only main.c": ({"shared ."}, True),
    "cmake -S . -B build": ({"shared .", "exclusive build"}, False),
    "cmake --build build -j4": ({"shared .", "exclusive build"}, False),
    "cd build && cmake .. && make": (BARRIER, False),
    "ninja -C build": ({"shared .", "exclusive build"}, False),
    "ctest --test-dir build": ({"shared .", "exclusive Testing", "exclusive build/Testing"}, False),
    # git's submodules
    "git submodule status": ({"shared ."}, True),
    "git submodule add https://example.org/r.git vendor/r": (
        {"shared .", "exclusive .git", "exclusive .gitmodules", "exclusive vendor/r"},
        False,
    ),
    # SQLite and beads
    "sqlite3 app.db 'select count(*) from t'": (
        {
            "exclusive app.db",
            "exclusive app.db-wal",
            "exclusive app.db-shm",
            "exclusive app.db-journal",
        },
        True,
    ),
    "bd list --status open": ({"exclusive .beads"}, True),
    "cd sub && bd ready": ({"exclusive .beads", "exclusive sub/.beads"}, True),
}


@pytest.mark.parametrize(("command", "expected"), CASES.items())
def test_each_ecosystems_tool_claims_what_it_touches(
    command: str, expected: tuple[set[str], bool]
) -> None:
    want, known = expected
    assert claims(command) == want
    assert analyse(command).effects_known is known, analyse(command).unknown_effects


@pytest.mark.parametrize(
    "command",
    [
        "sqlite3 app.db",  # SQL from standard input
        "sqlite3 app.db '.output x.txt'",
        "sqlite3 app.db '.shell rm -rf x'",
        "sqlite3 app.db \"ATTACH 'other.db' AS o\"",
        "sqlite3 app.db \"VACUUM INTO 'copy.db'\"",
        "sqlite3 app.db \"select writefile('x', 'y')\"",
        "sqlite3 -cmd '.read x' app.db",
        "docker run -v $PWD:/src img",
        "docker exec web rm -rf /src",
        "docker compose up -d",
        "bd sync",
        "rake db:migrate",
        "rails runner 'User.delete_all'",
        "ruby script.rb",
        "java -jar app.jar",
        "bundle install",
        "tox -e py312",
        "go generate ./...",
        "cmake --install build",
        "npm start",
        "git submodule update --init",
        "git submodule add https://example.org/r.git",  # a directory named after it
    ],
)
def test_what_reaches_beyond_its_rule_is_a_barrier(command: str) -> None:
    assert claims(command) == BARRIER


def test_sqlite_with_safe_reads_its_sql_from_standard_input() -> None:
    assert claims("sqlite3 -safe app.db < schema.sql") == {
        "shared schema.sql",
        "exclusive app.db",
        "exclusive app.db-wal",
        "exclusive app.db-shm",
        "exclusive app.db-journal",
    }


def test_a_database_option_claims_the_files_beside_it() -> None:
    from toolkernel.tools import ShellRules

    rules = ShellRules.default().extended(
        '[tracker]\ndatabase-options = ["--db"]\noperands = "text..."'
    )
    assert {str(c) for c in shell_claims("tracker --db data/t.db list", rules)} == {
        "exclusive data/t.db",
        "exclusive data/t.db-wal",
        "exclusive data/t.db-shm",
        "exclusive data/t.db-journal",
    }
