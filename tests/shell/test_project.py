"""The project's own configuration, read where it decides what a command does
(``analyse(command, root=...)``, ``shell_claims(command, root=...)``): its rules file,
package.json scripts, mix aliases and databases, Rails' databases, build backends, the
repository's hooks and programs, workspace programs shadowing the ones the rules describe."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from toolkernel.shell import analyse
from toolkernel.shell._project import project_rules
from toolkernel.tools import shell_claims

BARRIER = {"exclusive ."}


def claims(command: str, root: pathlib.Path) -> set[str]:
    return {str(claim) for claim in shell_claims(command, root=root)}


def write(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def git(root: pathlib.Path, *arguments: str) -> None:
    subprocess.run(["git", *arguments], cwd=root, check=True, capture_output=True)


SIDES = ("", "-wal", "-shm", "-journal")
MIX_SOURCES = {
    f"shared {name}"
    for name in (
        "mix.exs mix.lock .formatter.exs .credo.exs .dialyzer_ignore.exs .iex.exs config lib "
        "test priv deps rel include src"
    ).split()
}


def database(name: str) -> set[str]:
    return {f"exclusive {name}{side}" for side in SIDES}


# -- the project's rules file --------------------------------------------------------------------


def test_a_rules_file_in_the_workspace_describes_its_programs(tmp_path: pathlib.Path) -> None:
    write(
        tmp_path,
        {".toolkernel/shell.toml": '[tracker.show]\nreads = [".tracker/"]\noperands = "text..."'},
    )
    assert claims("tracker show 3", tmp_path) == {"shared .tracker"}
    assert shell_claims("tracker show 3") == shell_claims("make")  # not without the project


def test_pyproject_can_hold_the_rules(tmp_path: pathlib.Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": (
                '[project]\nname = "x"\n\n[tool.toolkernel.shell."manage.py"]\n'
                'barrier = "it runs Django"\n[tool.toolkernel.shell.tracker]\n'
                'writes = [".tracker/"]\noperands = "text..."\n'
            )
        },
    )
    assert claims("tracker add x", tmp_path) == {"exclusive .tracker"}
    rules = project_rules(tmp_path)
    assert rules.get("tracker") is not None
    assert rules.get("cat") is not None  # the built-in ones are kept


def test_the_rules_file_is_read_again_when_it_changes(tmp_path: pathlib.Path) -> None:
    file = tmp_path / ".toolkernel" / "shell.toml"
    write(tmp_path, {".toolkernel/shell.toml": '[tracker]\nreads = [".t/"]\noperands = "text..."'})
    assert claims("tracker x", tmp_path) == {"shared .t"}
    file.write_text('[tracker]\nwrites = [".t/"]\noperands = "text..."\n# longer now')
    assert claims("tracker x", tmp_path) == {"exclusive .t"}


# -- package.json scripts ------------------------------------------------------------------------

PACKAGE = """{"scripts": {
  "pretest": "tsc --noEmit",
  "test": "vitest run",
  "lint": "eslint src",
  "format": "prettier --write src",
  "build": "tsc -p . && node scripts/bundle.js",
  "check": "npm run lint && npm test"
}}"""


def test_npm_runs_the_scripts_package_json_names(tmp_path: pathlib.Path) -> None:
    write(tmp_path, {"package.json": PACKAGE})
    assert claims("npm run lint", tmp_path) == {"shared ."}
    assert claims("npm run format", tmp_path) == {"shared .", "exclusive src"}
    assert claims("npm test", tmp_path) == {
        "shared .",
        "exclusive node_modules/.cache",
        "exclusive node_modules/.vite",
        "exclusive node_modules/.vitest",
    }
    assert claims("npm run check", tmp_path) == claims("npm test", tmp_path)
    assert claims("npm run build", tmp_path) == BARRIER  # node runs a script
    assert claims("npm run absent", tmp_path) == {"shared package.json"}


def test_a_script_runs_in_its_packages_directory(tmp_path: pathlib.Path) -> None:
    write(tmp_path, {"web/package.json": PACKAGE, "web/src/a.ts": ""})
    assert claims("cd web/src && npm run format", tmp_path) == {"shared .", "exclusive web/src"}


def test_extra_arguments_go_to_the_script(tmp_path: pathlib.Path) -> None:
    write(tmp_path, {"package.json": '{"scripts": {"fmt": "prettier --write"}}'})
    assert claims("npm run fmt -- docs", tmp_path) == {"shared .", "exclusive docs"}


def test_a_command_that_rewrites_what_decides_its_own_steps_is_a_barrier(
    tmp_path: pathlib.Path,
) -> None:
    write(tmp_path, {"package.json": PACKAGE, "web/package.json": PACKAGE})
    # What npm test runs is read before the command; the command changes it first.
    assert (
        claims(
            """echo '{"scripts": {"test": "rm -rf src"}}' > package.json && npm test""", tmp_path
        )
        == BARRIER
    )
    assert claims("cp other.json web/package.json && cd web && npm run lint", tmp_path) == BARRIER
    assert claims("echo x > notes.txt && npm run lint", tmp_path) == {
        "shared .",
        "exclusive notes.txt",
    }


def test_an_npmrc_naming_a_shell_is_a_barrier(tmp_path: pathlib.Path) -> None:
    write(tmp_path, {"package.json": PACKAGE, ".npmrc": "script-shell=/bin/zsh\n"})
    assert claims("npm run lint", tmp_path) == BARRIER


# -- mix ----------------------------------------------------------------------------------------

MIX_EXS = """defmodule Demo.MixProject do
  use Mix.Project

  def project do
    [app: :demo, version: "0.1.0", aliases: aliases(), deps: deps()]
  end

  defp deps do
    [{:ecto_sqlite3, "~> 0.17"}, {:phoenix, "~> 1.7"}]
  end

  defp aliases do
    [
      setup: ["deps.get", "ecto.setup"],
      "ecto.setup": ["ecto.create", "ecto.migrate"],
      test: ["ecto.create --quiet", "ecto.migrate --quiet", "test"],
      precommit: ["compile --warnings-as-errors", "test"]
    ]
  end
end
"""
CONFIG_TEST = """import Config
config :demo, Demo.Repo,
  database: Path.expand("../demo_test.db", __DIR__),
  pool_size: 5
"""


def test_mix_test_opens_the_test_database_its_configuration_names(
    tmp_path: pathlib.Path,
) -> None:
    write(tmp_path, {"mix.exs": MIX_EXS, "config/test.exs": CONFIG_TEST})
    # The alias's ecto steps run in the environment of the task asked for: _build/test. Only
    # the places a mix project reads are claimed shared, not its _build.
    assert claims("mix test", tmp_path) == {
        *MIX_SOURCES,
        "exclusive _build/test",
        "exclusive tmp",
        *database("demo_test.db"),
    }
    # An alias naming the alias's own task runs the task itself, once; all of it in the
    # environment of the task asked for (precommit: dev).
    assert claims("mix precommit", tmp_path) == {
        *MIX_SOURCES,
        "exclusive _build/dev",
        "exclusive tmp",
        *database("demo_test.db"),
    }
    assert claims("mix setup", tmp_path) == {
        *(MIX_SOURCES - {"shared deps", "shared mix.lock"}),  # written there: exclusive
        "exclusive _build/dev",
        "exclusive deps",
        "exclusive mix.lock",
        *database("demo_test.db"),
    }


def test_each_mix_environment_builds_apart(tmp_path: pathlib.Path) -> None:
    write(tmp_path, {"mix.exs": MIX_EXS.replace("aliases: aliases(),", "")})
    assert claims("mix compile", tmp_path) == {*MIX_SOURCES, "exclusive _build/dev"}
    assert claims("MIX_ENV=prod mix compile", tmp_path) == {
        *MIX_SOURCES,
        "exclusive _build/dev",
        "exclusive _build/prod",
    }
    assert claims("MIX_ENV=$E mix compile", tmp_path) == {*MIX_SOURCES, "exclusive _build"}
    preferring = MIX_EXS.replace(
        "aliases: aliases(),", "preferred_envs: [credo: :test, dialyzer: :ci],"
    )
    write(tmp_path, {"mix.exs": preferring})
    assert claims("mix dialyzer", tmp_path) == {
        *MIX_SOURCES,
        "exclusive _build/ci",
        "exclusive _build/dev",
        "exclusive priv/plts",
    }


def test_a_test_partition_names_the_database(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = (
        "import Config\nconfig :demo, Demo.Repo,\n  database: Path.join(__DIR__, "
        '"../demo_test#{System.get_env("MIX_TEST_PARTITION")}.db"),\n  pool_size: 5\n'
    )
    write(tmp_path, {"mix.exs": MIX_EXS, "config/test.exs": config})
    monkeypatch.delenv("MIX_TEST_PARTITION", raising=False)
    assert database("demo_test.db") <= claims("mix test", tmp_path)
    monkeypatch.setenv("MIX_TEST_PARTITION", "2")
    assert database("demo_test2.db") <= claims("mix test", tmp_path)


def test_ash_setup_opens_the_database_of_an_ash_sqlite_project(tmp_path: pathlib.Path) -> None:
    text = MIX_EXS.replace("ecto_sqlite3", "ash_sqlite").replace(
        '"ecto.create --quiet", "ecto.migrate --quiet", "test"', '"ash.setup --quiet", "test"'
    )
    write(tmp_path, {"mix.exs": text, "config/test.exs": CONFIG_TEST})
    assert database("demo_test.db") <= claims("mix test", tmp_path)


def test_mix_config_with_a_database_not_read_is_a_barrier(tmp_path: pathlib.Path) -> None:
    write(
        tmp_path,
        {
            "mix.exs": MIX_EXS,
            "config/test.exs": "import Config\nconfig :demo, Demo.Repo,\n  database: db_path()\n",
        },
    )
    assert claims("mix test", tmp_path) == BARRIER
    assert claims("mix format", tmp_path) == {"exclusive ."}  # formatting opens no database


def test_a_mix_project_reads_its_layout_not_the_other_environments_build(
    tmp_path: pathlib.Path,
) -> None:
    write(tmp_path, {"mix.exs": MIX_EXS, "config/test.exs": CONFIG_TEST})
    test = {c for c in claims("mix test", tmp_path) if c.startswith("shared")}
    assert test == MIX_SOURCES  # so `mix test` and `mix credo` run side by side
    moved = MIX_EXS.replace("aliases: aliases(),", 'build_path: "../../_build",')
    write(tmp_path, {"mix.exs": moved})
    assert "shared ." in claims("mix compile", tmp_path)
    dotenv = 'import Config\nconfig :demo, key: File.read!(".env")\n'
    write(tmp_path, {"mix.exs": MIX_EXS, "config/config.exs": dotenv})
    assert "shared ." in claims("mix compile", tmp_path)


def test_mix_alias_running_a_function_is_a_barrier(tmp_path: pathlib.Path) -> None:
    text = MIX_EXS.replace('test: ["ecto.create --quiet", ', "test: [&reset/1, ")
    write(tmp_path, {"mix.exs": text, "config/test.exs": CONFIG_TEST})
    assert claims("mix test", tmp_path) == BARRIER


def test_elixir_make_runs_a_makefile(tmp_path: pathlib.Path) -> None:
    text = MIX_EXS.replace("aliases: aliases(),", "compilers: [:elixir_make] ++ Mix.compilers(),")
    write(tmp_path, {"mix.exs": text})
    assert claims("mix compile", tmp_path) == BARRIER
    assert claims("mix test", tmp_path) == BARRIER
    assert claims("mix deps.get", tmp_path) != BARRIER


def test_a_database_outside_the_workspace_is_not_claimed(tmp_path: pathlib.Path) -> None:
    write(
        tmp_path,
        {
            "app/mix.exs": MIX_EXS,
            "app/config/test.exs": CONFIG_TEST.replace("../demo_test.db", "../../demo.db"),
        },
    )
    assert claims("mix test", tmp_path / "app") == {
        *MIX_SOURCES,
        "exclusive _build/test",
        "exclusive tmp",
    }


# -- Rails ---------------------------------------------------------------------------------------


def test_rspec_opens_the_sqlite_databases_database_yml_names(tmp_path: pathlib.Path) -> None:
    write(
        tmp_path,
        {
            "config/database.yml": (
                "default: &default\n  adapter: sqlite3\n\ntest:\n  <<: *default\n"
                "  database: storage/test.sqlite3\n"
            )
        },
    )
    assert database("storage/test.sqlite3") <= claims("bundle exec rspec", tmp_path)
    write(tmp_path, {"config/database.yml": "test:\n  database: <%= ENV['DB'] %>\n sqlite3"})
    assert claims("bundle exec rspec", tmp_path) == BARRIER


# -- Python build backends -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build_system", "known"),
    [
        ('[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n', True),
        ('[build-system]\nrequires = ["uv_build"]\nbuild-backend = "uv_build"\n', True),
        ("", True),  # no build system: uv builds nothing
    ],
)
def test_uv_run_with_a_backend_that_runs_no_project_code_has_known_build_effects(
    tmp_path: pathlib.Path, build_system: str, known: bool
) -> None:
    write(tmp_path, {"pyproject.toml": f'[project]\nname = "x"\n{build_system}'})
    found = analyse("uv run ruff check", root=tmp_path)
    assert found.barrier is None
    assert found.effects_known is known, found.unknown_effects


@pytest.mark.parametrize(
    "files",
    [
        {
            "pyproject.toml": (
                '[project]\nname = "x"\n[build-system]\nrequires = ["setuptools"]\n'
                'build-backend = "setuptools.build_meta"\n'
            )
        },
        {"pyproject.toml": '[project]\nname = "x"\n', "setup.py": "from setuptools import setup"},
        {
            "pyproject.toml": (
                '[project]\nname = "x"\n[build-system]\nbuild-backend = "hatchling.build"\n'
                "[tool.hatch.build.hooks.custom]\n"
            )
        },
    ],
)
def test_a_build_backend_that_writes_beside_the_sources_is_a_barrier(
    tmp_path: pathlib.Path, files: dict[str, str]
) -> None:
    # setuptools writes *.egg-info and build/ beside the sources; setup.py and hooks are code.
    write(tmp_path, files)
    assert claims("uv run pytest", tmp_path) == BARRIER
    assert claims("python -m build", tmp_path) == BARRIER


# -- workspace programs --------------------------------------------------------------------------


def test_python_m_finds_the_workspaces_module_first(tmp_path: pathlib.Path) -> None:
    assert claims("python -m pip list", tmp_path) == {"shared ."}
    write(tmp_path, {"pip.py": "import shutil; shutil.rmtree('src')"})
    assert claims("python -m pip list", tmp_path) == BARRIER
    write(tmp_path, {"sub/pytest/__init__.py": ""})
    assert claims("cd sub && python -m pytest", tmp_path) == BARRIER


SHIM = """#!{python}
# -*- coding: utf-8 -*-
import sys
from pytest import console_main
if __name__ == "__main__":
    sys.exit(console_main())
"""


def test_a_virtualenvs_program_must_be_what_installs_it(tmp_path: pathlib.Path) -> None:
    write(tmp_path, {".venv/bin/pytest": SHIM.format(python=sys.executable)})
    assert claims(".venv/bin/pytest -q", tmp_path) == {"shared .", "exclusive .pytest_cache"}
    write(tmp_path, {".venv/bin/pytest": "#!/bin/sh\nrm -rf src\n"})
    assert claims(".venv/bin/pytest -q", tmp_path) == BARRIER


def test_a_program_found_on_path_in_the_workspace_is_checked(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, {".venv/bin/ruff": "#!/bin/sh\necho hacked > src/a.py\n"})
    (tmp_path / ".venv/bin/ruff").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / '.venv/bin'}:{os.environ['PATH']}")
    assert claims("ruff check src", tmp_path) == BARRIER


# -- the environment ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "command"),
    [
        ("CARGO_TARGET_DIR", "cargo build"),
        ("MIX_BUILD_PATH", "mix compile"),
        ("UV_PROJECT_ENVIRONMENT", "uv run pytest"),
        ("GOCACHE", "go build ./..."),
    ],
)
def test_a_variable_moving_writes_into_the_workspace_is_a_barrier(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, variable: str, command: str
) -> None:
    monkeypatch.setenv(variable, str(tmp_path / "elsewhere"))
    assert claims(command, tmp_path) == BARRIER
    monkeypatch.setenv(variable, "/var/cache/outside-the-workspace")
    assert claims(command, tmp_path) != BARRIER


def test_goflags_with_mod_is_a_barrier(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOFLAGS", "-mod=mod")
    assert claims("go test ./...", tmp_path) == BARRIER
    monkeypatch.setenv("GOFLAGS", "-count=1")
    assert claims("go test ./...", tmp_path) == {"shared ."}


# -- the repository ------------------------------------------------------------------------------


@pytest.fixture
def repository(tmp_path: pathlib.Path) -> pathlib.Path:
    git(tmp_path, "init", "-q", "-b", "main", ".")
    return tmp_path


def test_git_commands_that_write_run_the_repositorys_hooks(repository: pathlib.Path) -> None:
    assert claims("git commit -qm x", repository) == {"shared .", "exclusive .git"}
    assert analyse("git commit -qm x", root=repository).effects_known  # no hook here
    write(repository, {".git/hooks/pre-commit": "#!/bin/sh\nruff format . && git add -u\n"})
    assert claims("git commit -qm x", repository) == BARRIER
    assert claims("git push", repository) == BARRIER
    assert claims("git status", repository) == {"shared ."}  # hooks are off for reading


def test_a_hooks_path_or_an_editor_in_the_configuration_is_a_barrier(
    repository: pathlib.Path,
) -> None:
    git(repository, "config", "core.hooksPath", ".husky/_")
    assert claims("git commit -qm x", repository) == BARRIER
    git(repository, "config", "--unset", "core.hooksPath")
    git(repository, "config", "core.editor", "./scripts/edit")
    assert claims("git commit", repository) == BARRIER


@pytest.mark.parametrize(
    "setting",
    [
        ("diff.py.textconv", "python3 x.py"),
        ("man.viewer", "evil"),
        ("remote.origin.uploadpack", "./evil"),
        ("core.worktree", "../elsewhere"),
    ],
)
def test_a_configuration_naming_programs_makes_reading_git_a_barrier(
    repository: pathlib.Path, setting: tuple[str, str]
) -> None:
    git(repository, "config", *setting)
    assert claims("git diff && git log -p", repository) == BARRIER


def test_a_nested_repositorys_drivers_are_read(repository: pathlib.Path) -> None:
    nested = repository / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    assert claims("cd vendor/lib && git diff --cached", repository) == {"shared ."}
    git(nested, "config", "filter.x.smudge", "./evil")
    assert claims("cd vendor/lib && git diff --cached", repository) == BARRIER
    assert claims("git -C vendor/lib status", repository) == BARRIER
    assert claims("git status", repository) == {"shared ."}  # the outer one has none


def test_a_dot_git_file_is_followed_where_the_command_writes(tmp_path: pathlib.Path) -> None:
    (tmp_path / "store").mkdir()
    git(tmp_path, "init", "-q", "--separate-git-dir", str(tmp_path / "store" / "sub.git"), "sub")
    assert (tmp_path / "sub" / ".git").is_file()
    assert claims("cd sub && git commit -qm x", tmp_path) == {
        "shared .",
        "exclusive .git",  # where a repository above would be
        "exclusive sub/.git",
        "exclusive store/sub.git",
    }


def test_without_a_project_the_prediction_is_the_texts(tmp_path: pathlib.Path) -> None:
    write(tmp_path, {".git/hooks/pre-commit": "#!/bin/sh\n"})
    assert shell_claims("git commit -qm x") == shell_claims("git commit -qm y")
    assert claims("git commit -qm x", tmp_path) == BARRIER
