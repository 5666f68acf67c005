"""Optional features and the extras that bring their packages.

A feature that needs a package the core does not depend on says, when the package is missing,
which extra to install, before anything else fails on it with a bare ``ModuleNotFoundError``.
Whether a package is there is asked of the import system (``find_spec``), which finds it
without importing it, so a check costs nothing at import time.

The command it gives is one that works for the way this copy of toolkernel was installed,
read from the distribution's ``direct_url.json`` (PEP 610): an editable install from a clone
gets ``pip install -e '/the/clone[EXTRA]'``, an install from a wheel, an sdist or a directory
gets that path with the extra, one from a VCS or another URL gets ``toolkernel[EXTRA] @ URL``,
and only an install from a package index gets the plain ``pip install 'toolkernel[EXTRA]'``.
A plain name is never given otherwise: toolkernel is not on PyPI, and the name there could be
someone else's package.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

__all__ = ["install_command", "missing_extra", "require_extra"]

_DISTRIBUTION = "toolkernel"
_PACKAGE = Path(__file__).resolve().parent
"""The directory this copy of the package is imported from."""


def missing_extra(extra: str, what: str, *modules: str) -> str | None:
    """The message for the first of ``modules`` that is not installed, or None if all are.

    ``what`` names the feature (``"toolkernel.mcp"``, ``"the console"``) and ``extra`` the
    extra of toolkernel that installs ``modules``.
    """
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent missing, or an entry that is not a module
            found = False
        if not found:
            return f"{what} needs the {extra!r} extra ({module} is not installed): " + (
                install_command(extra)
            )
    return None


def require_extra(extra: str, what: str, *modules: str) -> None:
    """Raise ``ImportError`` naming ``extra`` if any of ``modules`` is not installed."""
    message = missing_extra(extra, what, *modules)
    if message is not None:
        raise ImportError(message, name=modules[0])


def install_command(extra: str) -> str:
    """The pip command that adds ``extra`` to this copy of toolkernel, the way it was installed.

    ::

        >>> install_command("cli")  # in an editable install from a clone in ~/src/toolkernel
        "pip install -e '/home/me/src/toolkernel[cli]'"
    """
    return _command(_origin(), extra)


@functools.cache
def _origin() -> dict[str, Any] | None:
    """Where this copy was installed from: ``direct_url.json``'s content, or, for a source tree
    imported without being installed (``PYTHONPATH=src``), a ``dir_info`` naming the tree as
    editable. None for an install from an index (or anything unrecognised)."""
    try:
        distribution = importlib.metadata.distribution(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        distribution = None
    origin = _direct_url(distribution) if distribution is not None else None
    if distribution is not None and _owns_this_copy(distribution, origin):
        return origin
    # Imported from somewhere no installed distribution describes: a clone's src/ on sys.path.
    tree = _PACKAGE.parent.parent
    if _PACKAGE.parent.name == "src" and (tree / "pyproject.toml").is_file():
        return {"url": tree.as_uri(), "dir_info": {"editable": True}}
    return None


def _direct_url(distribution: importlib.metadata.Distribution) -> dict[str, Any] | None:
    try:
        text = distribution.read_text("direct_url.json")
        origin = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    return origin if isinstance(origin, dict) and isinstance(origin.get("url"), str) else None


def _owns_this_copy(
    distribution: importlib.metadata.Distribution, origin: dict[str, Any] | None
) -> bool:
    """Whether the installed distribution found is the one this module was imported from (a
    clone's ``src/`` ahead of another install on ``sys.path`` is not)."""
    if origin is not None and (origin.get("dir_info") or {}).get("editable"):
        tree = _local_path(origin["url"])
        return tree is not None and tree.resolve() in (_PACKAGE, *_PACKAGE.parents)
    installed = Path(str(distribution.locate_file(_DISTRIBUTION))).resolve()
    return installed == _PACKAGE


def _local_path(url: str) -> Path | None:
    parts = urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return Path(url2pathname(unquote(parts.path)))


def _command(origin: dict[str, Any] | None, extra: str) -> str:
    if origin is None:
        return f"pip install {shlex.quote(f'{_DISTRIBUTION}[{extra}]')}"
    url: str = origin["url"]
    vcs = origin.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs"):
        commit = vcs.get("commit_id") or vcs.get("requested_revision")
        source = f"{vcs['vcs']}+{url}" + (f"@{commit}" if commit else "")
        subdirectory = origin.get("subdirectory")
        if subdirectory:
            source += f"#subdirectory={subdirectory}"
        return f"pip install {shlex.quote(f'{_DISTRIBUTION}[{extra}] @ {source}')}"
    path = _local_path(url)
    if path is None:  # an archive on the web
        return f"pip install {shlex.quote(f'{_DISTRIBUTION}[{extra}] @ {url}')}"
    if origin.get("subdirectory"):
        path = path / origin["subdirectory"]
    editable = bool((origin.get("dir_info") or {}).get("editable"))
    command = f"pip install {'-e ' if editable else ''}{shlex.quote(f'{path}[{extra}]')}"
    if not path.exists():
        command += f" (toolkernel was installed from {path}, which is no longer there)"
    return command
