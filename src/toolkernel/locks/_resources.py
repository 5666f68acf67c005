"""Resources, modes and claims: what a call says it will touch, as plain values.

A *resource* is something calls can conflict over:

- a **path** — a workspace-relative key, a tuple of components; a claim on a path covers its whole
  subtree, so ``a`` overlaps ``a/b/c`` but ``a/b`` does not overlap ``a/bc``;
- a **device** — a flat named thing (a phone, a browser, a terminal);
- a **pool** — counted units (``network`` with 5), capacity set on the lease table;
- **everything** — the root above all of them, which is what a call that declares nothing holds.

Every resource has a *node*: its address in one hierarchy whose root is ``EVERYTHING``. Two claims
overlap iff one node is a prefix of the other. That one rule gives path subtrees, flat devices, and
the barrier of an undeclared call.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from os import PathLike, fspath
from typing import TypeAlias

import attrs

from .._checks import check_capacity as check_capacity  # the one pool checker, used from here
from .._errors import InvalidClaimError, PathEscapeError

__all__ = [
    "Mode",
    "Path",
    "Device",
    "Pool",
    "Everything",
    "EVERYTHING",
    "Resource",
    "Claim",
    "path",
    "device",
    "pool",
    "shared",
    "exclusive",
    "units",
    "reads",
    "writes",
    "canonical_claims",
    "claims_overlap",
    "claims_conflict",
    "covers",
]

_PATH_ROOT = "path"
_DEVICE_ROOT = "device"
_POOL_ROOT = "pool"


class Mode(enum.Enum):
    """How a claim holds its resource: ``SHARED`` (readers together) or ``EXCLUSIVE`` (alone)."""

    SHARED = "shared"
    EXCLUSIVE = "exclusive"

    def __repr__(self) -> str:
        return f"Mode.{self.name}"

    # Hashed by identity, as its members are compared: every claim's hash takes its mode's,
    # and the inherited one is Python code (a call more for each claim hashed).
    __hash__ = object.__hash__


# The modes as module globals for the code that builds or checks a claim per call: on Python 3.11
# reading ``Mode.SHARED`` goes through the enum metaclass's ``__getattr__`` hook (~0.1 us a time).
SHARED, EXCLUSIVE = Mode.SHARED, Mode.EXCLUSIVE


_new_object = object.__new__
_set_field = object.__setattr__


@attrs.frozen(order=True, init=False)
class Path:
    """A workspace-relative path key: a tuple of components, ``()`` being the workspace root.

    Build it with :func:`path`, which normalizes the spelling. Built by hand, it normalizes the
    same way, so that one file has one key whichever way the key was made::

        >>> Path(("src/pkg", "..", "a.py")) == Path("src/a.py") == path("src/a.py")
        True
    """

    parts: tuple[str, ...]

    def __init__(self, parts: tuple[str, ...] | str | PathLike[str]) -> None:
        # A key is built for every call: canonical components (no "/", ".", "..", "", NUL) are
        # kept as they are, the "/" counted in one joined string rather than looked for one by
        # one; anything else is spelled out again through path().
        if type(parts) is tuple:
            try:
                joined = "/".join(parts)
            except TypeError:  # a component that is not a string: path() says which
                joined = None
            if not (
                joined is None
                or "" in parts
                or "." in parts
                or ".." in parts
                or joined.count("/") >= max(len(parts), 1)
                or "\x00" in joined
            ):
                _set_field(self, "parts", parts)
                return
        _set_field(self, "parts", _normalized_parts(parts))

    @property
    def node(self) -> tuple[str, ...]:
        return (_PATH_ROOT, *self.parts)

    def __str__(self) -> str:
        return "/".join(self.parts) or "."

    def is_relative_to(self, other: Path) -> bool:
        """True iff ``self`` is ``other`` or lies inside it, component-wise."""
        return self.parts[: len(other.parts)] == other.parts


@attrs.frozen(order=True, init=False)
class Device:
    """A flat, named resource: a phone, a browser, a PTY, a GPU."""

    name: str

    def __init__(self, name: str) -> None:
        _check_name(name, "device name")
        _set_field(self, "name", name)

    @property
    def node(self) -> tuple[str, ...]:
        return (_DEVICE_ROOT, self.name)

    def __str__(self) -> str:
        return f"device:{self.name}"


@attrs.frozen(order=True, init=False)
class Pool:
    """A counted resource; its capacity is set on the lease table (``pools={"network": 5}``)."""

    name: str

    def __init__(self, name: str) -> None:
        _check_name(name, "pool name")
        _set_field(self, "name", name)

    @property
    def node(self) -> tuple[str, ...]:
        return (_POOL_ROOT, self.name)

    def __str__(self) -> str:
        return f"pool:{self.name}"


@attrs.frozen(order=True)
class Everything:
    """The root of all resources. Exclusive on it is a barrier: it conflicts with every claim."""

    @property
    def node(self) -> tuple[str, ...]:
        return ()

    def __str__(self) -> str:
        return "everything"


EVERYTHING = Everything()

Resource: TypeAlias = Path | Device | Pool | Everything


def _check_component_text(text: str, what: str) -> None:
    if not isinstance(text, str):
        raise InvalidClaimError(f"{what} must be a string, not {type(text).__name__}")
    if "\x00" in text:
        raise InvalidClaimError(f"{what} {text!r} contains a NUL byte")


def _check_name(name: str, what: str) -> None:
    _check_component_text(name, what)
    if not name:
        raise InvalidClaimError(f"{what} must not be empty")


def _normalized_parts(parts: object) -> tuple[str, ...]:
    if isinstance(parts, str | PathLike):
        return path(parts).parts
    if isinstance(parts, tuple | list):
        return path(*parts).parts
    raise InvalidClaimError(
        f"a Path takes a tuple of components or a string, not {type(parts).__name__}; "
        f"path() builds one"
    )


def _valid_path(parts: tuple[str, ...]) -> Path:
    """``Path(parts)`` for components :func:`path` has just made canonical (skips the checks)."""
    key = _new_object(Path)
    _set_field(key, "parts", parts)
    return key


def path(*segments: str | PathLike[str]) -> Path:
    """Return the canonical key of a relative POSIX path, normalized lexically.

    ``./``, ``//``, trailing ``/`` and ``..`` are resolved on the text alone; ``..`` that would
    climb above the root and absolute paths are errors. Several segments are joined::

        >>> path("src//./a.py") == path("src", "a.py")
        True

    The file system is not consulted: turning real paths (symlinks, case folding) into keys is the
    workspace's job.
    """
    if len(segments) == 1 and type(segments[0]) is str:
        # Fast path for a spelling that is already canonical ("src/a.py"): keys are built for
        # every call a model makes, and most arrive this way. An empty component stands for a
        # leading, doubled or trailing "/" (or an empty path); those, "." and ".." take the
        # general path below, as does a NUL byte (to be refused there).
        text = segments[0]
        components = text.split("/")
        if (
            "" not in components
            and "." not in components
            and ".." not in components
            and "\x00" not in text
        ):
            return _valid_path(tuple(components))
    texts = [_path_text(segment) for segment in segments]
    parts: list[str] = []
    for text in texts:
        if text.startswith("/"):
            raise PathEscapeError(
                f"path {text!r} is absolute; lease keys are relative to the workspace root"
            )
        for component in text.split("/"):
            if component in ("", "."):
                continue
            if component == "..":
                if not parts:
                    whole = "/".join(texts)
                    raise PathEscapeError(f"path {whole!r} climbs above the root with '..'")
                parts.pop()
            else:
                parts.append(component)
    return _valid_path(tuple(parts))


def _path_text(segment: object) -> str:
    if isinstance(segment, str):
        text = segment
    elif isinstance(segment, PathLike):
        text = fspath(segment)
    else:
        raise InvalidClaimError(
            f"path must be a string or an os.PathLike, not {type(segment).__name__}"
            + (
                "; use shared() or exclusive() for a device or a pool"
                if isinstance(segment, Device | Pool | Everything)
                else ""
            )
        )
    _check_component_text(text, "path")
    return text


def device(name: str) -> Device:
    """Return the flat resource named ``name`` (``device("android")``)."""
    return Device(name)


def pool(name: str) -> Pool:
    """Return the counted resource named ``name``; set its capacity on the table or manager."""
    return Pool(name)


def _check_units(instance: Claim, attribute: attrs.Attribute[int], value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidClaimError(f"units must be an int, not {type(value).__name__}")
    if isinstance(instance.resource, Pool):
        if instance.mode is Mode.SHARED and value < 1:
            raise InvalidClaimError(f"a claim on {instance.resource} needs at least 1 unit")
        if instance.mode is Mode.EXCLUSIVE and value != 1:
            # It holds the whole pool; a count would only make equal claims compare unequal.
            raise InvalidClaimError(
                f"an exclusive claim on {instance.resource} holds the whole pool and takes no "
                f"unit count (got {value}); for n units use units(pool(...), n)"
            )
    elif value != 1:
        raise InvalidClaimError(
            f"only pool claims count units; {instance.resource} was given {value}"
        )


def _check_resource(instance: Claim, attribute: attrs.Attribute[Resource], value: object) -> None:
    if not isinstance(value, Path | Device | Pool | Everything):
        raise InvalidClaimError(
            f"a claim needs a resource made by path(), device() or pool(), not {value!r}"
        )


def _check_mode(instance: Claim, attribute: attrs.Attribute[Mode], value: object) -> None:
    if not isinstance(value, Mode):
        raise InvalidClaimError(f"mode must be Mode.SHARED or Mode.EXCLUSIVE, not {value!r}")


@attrs.frozen
class Claim:
    """One resource held in one mode.

    On a pool, a ``SHARED`` claim holds ``units`` units (see :func:`units`) and an ``EXCLUSIVE``
    claim holds the whole pool. On any other resource ``units`` is 1.
    """

    resource: Resource = attrs.field(validator=_check_resource)
    mode: Mode = attrs.field(validator=_check_mode)
    units: int = attrs.field(default=1, validator=_check_units, kw_only=True)

    @property
    def node(self) -> tuple[str, ...]:
        return self.resource.node

    @property
    def is_exclusive(self) -> bool:
        return self.mode is EXCLUSIVE

    def __str__(self) -> str:
        if isinstance(self.resource, Pool) and self.mode is Mode.SHARED:
            return f"{self.units} of {self.resource}"
        return f"{self.mode.value} {self.resource}"


def _valid_claim(resource: Resource, mode: Mode, units: int = 1) -> Claim:
    """``Claim(resource, mode, units=units)`` for arguments already known to be valid.

    The helpers below build a claim for every call a model makes, from a resource they have
    just checked and a mode and unit count that are valid by construction; running the three
    field validators again would double the cost of a claim. The result is an ordinary
    ``Claim`` (equal to, and hashed like, one built the usual way).
    """
    claim = _new_object(Claim)
    _set_field(claim, "resource", resource)
    _set_field(claim, "mode", mode)
    _set_field(claim, "units", units)
    return claim


def _as_resource(target: Resource | str | PathLike[str]) -> Resource:
    if isinstance(target, Path | Device | Pool | Everything):
        return target
    return path(target)


def shared(resource: Resource | str | PathLike[str]) -> Claim:
    """A shared claim; a string is taken as a path. On a pool it holds one unit."""
    return _valid_claim(_as_resource(resource), SHARED)


def exclusive(resource: Resource | str | PathLike[str]) -> Claim:
    """An exclusive claim; a string is taken as a path. On a pool it holds every unit."""
    return _valid_claim(_as_resource(resource), EXCLUSIVE)


def units(resource: Pool, n: int = 1) -> Claim:
    """A claim on ``n`` units of a pool."""
    if not isinstance(resource, Pool):
        raise InvalidClaimError(f"units() takes a pool, not {resource!r}")
    return Claim(resource, Mode.SHARED, units=n)


def reads(p: str | PathLike[str] | Path) -> Claim:
    """Shorthand for ``shared(path(p))``."""
    return _valid_claim(p if isinstance(p, Path) else path(p), SHARED)


def writes(p: str | PathLike[str] | Path) -> Claim:
    """Shorthand for ``exclusive(path(p))``."""
    return _valid_claim(p if isinstance(p, Path) else path(p), EXCLUSIVE)


def claims_overlap(a: Claim, b: Claim) -> bool:
    """True iff the resources of ``a`` and ``b`` overlap (one node is a prefix of the other)."""
    na, nb = a.node, b.node
    n = min(len(na), len(nb))
    return na[:n] == nb[:n]


def claim_tuple(claims: Iterable[Claim]) -> tuple[Claim, ...]:
    """``tuple(claims)``, refusing the two things easily passed by mistake for a list of claims:
    a lone claim (not iterable) and a string (iterable, by character)."""
    if isinstance(claims, Claim | str):
        raise InvalidClaimError(
            f"claims must be a list of claims, not {claims!r}; wrap a single claim in [...]"
        )
    return tuple(claims)


def canonical_claims(claims: Iterable[Claim]) -> tuple[Claim, ...]:
    """Merge a claim set into its canonical form, sorted by resource.

    Duplicates of one resource merge to the strongest mode (units on a pool add up); a claim
    covered by an exclusive claim on an ancestor is dropped, since the ancestor already holds it.
    """
    given = claim_tuple(claims)
    if len(given) == 1 and isinstance(given[0], Claim):
        return given  # one claim is canonical as it is: the common case, spared the merge
    merged: dict[tuple[str, ...], Claim] = {}
    for claim in given:
        if not isinstance(claim, Claim):
            raise InvalidClaimError(f"expected a Claim, got {claim!r}")
        previous = merged.get(claim.node)
        if previous is None:
            merged[claim.node] = claim
        elif previous.is_exclusive or claim.is_exclusive:
            merged[claim.node] = Claim(claim.resource, Mode.EXCLUSIVE, units=1)
        elif isinstance(claim.resource, Pool):
            merged[claim.node] = units(claim.resource, previous.units + claim.units)
    exclusive_nodes = {node for node, claim in merged.items() if claim.is_exclusive}
    # Only prefixes as long as an exclusive node can be one: testing those lengths, not every
    # prefix, keeps a path thousands of components deep linear rather than quadratic.
    depths = sorted({len(node) for node in exclusive_nodes})
    kept = [
        claim
        for node, claim in merged.items()
        if not any(node[:i] in exclusive_nodes for i in depths if i < len(node))
    ]
    kept.sort(key=lambda claim: claim.node)
    return tuple(kept)


def claims_conflict(a: Claim, b: Claim) -> bool:
    """True iff ``a`` and ``b`` can never be held together: they overlap and one is exclusive.

    Two unit claims on one pool are not counted as conflicting here: whether they fit together
    depends on the pool's capacity, which only the lease table knows.
    """
    return (a.is_exclusive or b.is_exclusive) and claims_overlap(a, b)


def covers(holder: Claim, wanted: Claim) -> bool:
    """True iff holding ``holder`` gives everything ``wanted`` asks for.

    The holder's resource must be ``wanted``'s or an ancestor of it, and exclusive unless
    ``wanted`` is shared. Pool units are covered only by an exclusive claim on the whole pool.
    """
    held, asked = holder.node, wanted.node
    if asked[: len(held)] != held:
        return False
    if holder.is_exclusive:
        return True
    return not wanted.is_exclusive and not isinstance(wanted.resource, Pool)
