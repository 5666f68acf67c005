"""Admission: from a call as the model sent it to validated arguments and canonical claims, and
the ``after=`` edges between the calls of a batch. Pure decisions: nothing here waits.

Every way a call can be refused here raises (or returns) an exception from ``_messages``; the
scheduler turns it into that call's result. Nothing here changes a record: each function
returns what it found (a tool, parsed arguments and claims, the links between calls) and the
scheduler, the record's one writer, sets it. The same ``compute_claims`` runs at admission and
again after the grant (when a call's paths are re-keyed), so a claims function or a workspace
that fails is handled the same way both times. For a tool whose claims follow its keys alone,
the paths it keyed are noted at admission, and after the grant they are keyed again first
(``keys_unchanged``): the claims are computed again only if one of them changed.
"""

from __future__ import annotations

import gc
import json
import re
import weakref
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Final, TypeVar

from .._errors import (
    CapacityError,
    InvalidCallError,
    InvalidClaimError,
    ToolDeclarationError,
    UnknownPoolError,
)
from ..locks import (
    EVERYTHING,
    Claim,
    Path,
    Pool,
    canonical_claims,
    covers,
    exclusive,
    path,
    shared,
)
from . import _messages as messages
from ._call import Status, ToolCall, ToolResult
from ._messages import RootCause
from ._protocol import KernelTool, key_owner
from ._record import CallRecord

__all__ = [
    "CallNames",
    "REMEMBERED_FINISHED",
    "Admitted",
    "Parsed",
    "Unfilled",
    "Links",
    "admit",
    "load_arguments",
    "parse",
    "compute_claims",
    "keys_unchanged",
    "KeyLog",
    "with_more",
    "check_structure",
    "link_dependencies",
    "find_cycles",
    "split_by_cover",
    "gc_paused_for",
    "placeholders",
    "fill_in",
    "map_strings",
]


# -- Output passing: a call's arguments may use the outputs of calls it runs after. Pure ----------
# A call that lists ``c1`` in ``after=`` may write ``"${c1}"`` inside any string argument, or a
# whole string ``"$c1"``, for c1's output (the LLMCompiler ``$1`` idea, opt-in per dependency)::
#
#     ToolCall("c1", "Glob", {"pattern": "**/config.py"})
#     ToolCall("c2", "Read", {"file_path": "$c1"}, after=["c1"])
#     ToolCall("c3", "Bash", {"command": "wc -l ${c1}"}, after=["c1"])
#
# Only ids named in ``after=`` are placeholders, so ``$HOME`` in a shell command stays as it is. A
# whole-string placeholder becomes the output itself when it is a JSON value (a list stays a list),
# otherwise its text; a placeholder inside a longer string becomes the output's text
# (``ToolResult.text()``). Such a call is admitted in two steps: at submission only what can be
# known then (its tool, its dependencies), and when its dependencies have finished, its arguments
# (filled in), their validation and its claims.
_EMBEDDED = re.compile(r"\$\{([^}]+)\}")
_JSON = (str, int, float, bool, list, dict, type(None))


def placeholders(arguments: Any, ids: Collection[str]) -> set[str]:
    """The ids among ``ids`` that ``arguments`` use as ``${id}`` or a whole-string ``$id``."""
    if not isinstance(ids, AbstractSet):
        ids = frozenset(ids)  # looked up for every string: ``after=`` may list thousands
    found: set[str] = set()
    stack = [arguments]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if "$" not in value:
                continue
            if value[1:] in ids and value[0] == "$":
                found.add(value[1:])
            found.update(m for m in _EMBEDDED.findall(value) if m in ids)
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return found


def fill_in(arguments: Any, results: Mapping[str, ToolResult]) -> Any:
    """``arguments`` with every placeholder of ``results``' ids replaced by that output."""
    return map_strings(arguments, lambda text: _filled(text, results))


def _filled(text: str, results: Mapping[str, ToolResult]) -> Any:
    if text[:1] == "$":
        braced = text[1:2] == "{" and text[-1:] == "}"
        name = text[2:-1] if braced else text[1:]
        if name in results:
            output = results[name].output
            return output if isinstance(output, _JSON) else results[name].text()
    if "${" not in text:
        return text
    return _EMBEDDED.sub(
        lambda m: results[m.group(1)].text() if m.group(1) in results else m.group(0), text
    )


def map_strings(value: Any, function: Callable[[str], Any]) -> Any:
    """``value`` with every string in it replaced by ``function(string)``; mappings are rebuilt
    as dicts, lists and tuples as lists, anything else is kept.

    Iterative, not recursive: arguments come from a model, and no depth of nesting it sends may
    exhaust the stack (a recursive walk raised ``RecursionError`` at a few hundred levels). A
    container met twice (shared, or holding itself) is rebuilt once.
    """
    if isinstance(value, str):
        return function(value)
    if not isinstance(value, Mapping | list | tuple):
        return value
    top: list[Any] = [None]
    built: dict[int, Any] = {}
    stack: list[tuple[Any, Any, Any]] = [(top, 0, value)]  # (where, key, what goes there)
    while stack:
        target, key, item = stack.pop()
        if isinstance(item, str):
            target[key] = function(item)
        elif not isinstance(item, Mapping | list | tuple):
            target[key] = item
        elif id(item) in built:
            target[key] = built[id(item)]
        elif isinstance(item, Mapping):
            mapping: dict[Any, Any] = dict.fromkeys(item)  # the keys in their order, first
            target[key] = built[id(item)] = mapping
            stack.extend((mapping, k, v) for k, v in item.items())
        else:
            items: list[Any] = [None] * len(item)
            target[key] = built[id(item)] = items
            stack.extend((items, i, v) for i, v in enumerate(item))
    return top[0]


_BARRIER = (exclusive(EVERYTHING),)

REMEMBERED_FINISHED = 10_000
"""How many finished top-level calls ``after=`` can still name (the most recent ones): an id
stays nameable while its call is unfinished and for the next 10,000 calls that finish after it,
so memory stays flat over any number of batches."""

BIG_BATCH = 1_000
"""Batches of at least this many calls are admitted with the garbage collector paused."""


# -- Admission: a call looked up, checked, keyed and linked to the calls it runs after ------------
def gc_paused_for(batch_size: int) -> AbstractContextManager[None]:
    """Pause the garbage collector while a big batch is admitted.

    Admitting makes nothing but live objects (records, claims, requests), yet the collector
    would scan them again and again as they pile up: on a 100,000-call batch, 12% of the batch's
    time (``benchmarks/deep_queues.py``), 2.5% with it paused. A small batch gets a shared
    do-nothing context: a generator-based one would cost a lone call 3% of its time.
    """
    if batch_size < BIG_BATCH or not gc.isenabled():
        return _NOTHING
    return _GcPaused()


_NOTHING = nullcontext()


class _GcPaused:
    __slots__ = ()

    def __enter__(self) -> None:
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        gc.enable()


class CallNames:
    """What ``after=`` and ``Kernel.cancel`` can name: unfinished top-level calls by id, and of
    the most recent finished ones only their tool, status and error (neither their records nor
    their outputs stay alive)."""

    def __init__(self) -> None:
        self.live: dict[str, CallRecord] = {}
        # Unfinished calls a newer one with the same id shadows (two agents' "call_1"s):
        # ``after=`` names the newest, even once it has ended; ``Kernel.cancel`` them all.
        self.shadowed: dict[str, list[CallRecord]] = {}
        self.ended: OrderedDict[str, tuple[str, Status, str | None, RootCause | None]] = (
            OrderedDict()
        )

    def add(self, record: CallRecord) -> None:
        """Name ``record`` by its id (a later call with the same id shadows it)."""
        call_id = record.call.id
        if isinstance(call_id, str):
            live = self.live
            previous = live.get(call_id)
            live[call_id] = record
            if previous is not None:
                self.shadowed.setdefault(call_id, []).append(previous)

    def all_live(self, call_id: str) -> list[CallRecord]:
        """Every unfinished call with this id, the newest first."""
        newest = self.live.get(call_id)
        older = self.shadowed.get(call_id, ())
        return [*([] if newest is None else [newest]), *reversed(older)]

    def forget(self, record: CallRecord, status: Status, error: str | None) -> None:
        """``record`` finished: keep what ``after=`` needs, for a while."""
        call_id = record.call.id
        if not isinstance(call_id, str):
            return  # never named: its id is not a string
        if self.live.get(call_id) is not record:
            self._unshadow(call_id, record)
            return  # shadowed: ``after=`` names the newer one
        del self.live[call_id]
        ended = self.ended
        if call_id in ended:
            ended.move_to_end(call_id)
        ended[call_id] = (record.name, status, error, record.root_cause)
        if len(ended) > REMEMBERED_FINISHED:
            ended.popitem(last=False)

    def _unshadow(self, call_id: str, record: CallRecord) -> None:
        older = self.shadowed.get(call_id)
        if older is not None and record in older:
            older.remove(record)
            if not older:
                del self.shadowed[call_id]


def skip(
    dep_id: str, name: str, status: Status, error: str | None, root: RootCause | None
) -> tuple[RootCause, BaseException]:
    """A call skipped because ``dep_id`` ended ``status`` (skipped in turn when ``root`` is not
    None): the head of the chain, which it carries on for whoever runs after it, and why."""
    why = messages.dependency_failed(dep_id, name, status, error, root)
    return root or RootCause(dep_id, name, status, error), why


Failures = dict[int, tuple[Status, BaseException]]
"""Calls of a batch that failed admission: uid -> (status, why)."""

Parsed = tuple[Mapping[str, Any], tuple[Claim, ...], "tuple[tuple[str, Path], ...] | None"]
"""A call's validated arguments, its canonical claims, and the paths they keyed (as spelled and
as keyed) when its tool's claims follow the keys alone (else None)."""


class Unfilled:
    """A call whose arguments use outputs of calls it runs after (``fill_in``): admitted in
    full once they have finished."""

    __slots__ = ("arguments",)

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        self.arguments = arguments


Admitted = tuple["KernelTool | None", "Parsed | Unfilled | BaseException"]
"""What admission found of a call: its tool (None if there is none), and its arguments and
claims, or that they wait for other calls' outputs, or why it can't run."""


def check_structure(call: ToolCall) -> BaseException | None:
    """What makes a call unusable before its tool is even looked up: ids, names and ``after=``
    entries that are not strings (a model's or a program's garbage, not a crash)."""
    if type(call.id) is not str and not isinstance(call.id, str):
        return messages.bad_call_id(call.id)
    if type(call.name) is not str and not isinstance(call.name, str):
        return messages.bad_tool_name(call.name)
    for dep in call.after:
        if not isinstance(dep, str):
            return messages.bad_dependency(dep)
    return None


# Classes whose instances are tools, whatever the instance: checking a runtime protocol looks up
# each of its members on every instance (slow before Python 3.12), and a batch that brings its
# tools (``kernel.run(calls, tools=...)``) is checked on every submission.
_TOOL_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()
_TOOL_MEMBERS: Final = (
    "name",
    "wait_timeout",
    "run_timeout",
    "parse_arguments",
    "claims",
    "invoke",
)


def _is_tool(tool: object) -> bool:
    kind = type(tool)
    if kind in _TOOL_CLASSES:
        return True
    if not isinstance(tool, KernelTool):
        return False
    if all(hasattr(kind, member) for member in _TOOL_MEMBERS):  # not set per instance
        _TOOL_CLASSES.add(kind)
    return True


def tools_by_name(tools: Iterable[KernelTool]) -> dict[str, KernelTool]:
    """The tools keyed by name; a non-tool, a bad name or a name given twice is refused with
    a ``ToolDeclarationError`` (a ``TypeError`` and a ``ValueError``)."""
    found: dict[str, KernelTool] = {}
    for tool in tools:
        if not _is_tool(tool):
            raise ToolDeclarationError(f"expected a tool (made with @tool or Tool), not {tool!r}")
        if not isinstance(tool.name, str) or not tool.name:
            raise ToolDeclarationError(
                f"a tool's name must be a non-empty string, not {tool.name!r}"
            )
        if tool.name in found:
            raise ToolDeclarationError(f"two tools are named {tool.name!r}")
        found[tool.name] = tool
    return found


def admit(
    call: ToolCall,
    tools: Mapping[str, KernelTool],
    key: Callable[[str], Path],
    pools: Mapping[str, int],
) -> Admitted:
    """Find the call's tool, parse its arguments, compute its claims. A call using other calls'
    outputs (``fill_in``) is admitted in full later."""
    if type(call.id) is not str or type(call.name) is not str or call.after:
        problem = check_structure(call)
        if problem is not None:
            return None, problem
    tool = tools.get(call.name)
    if tool is None:
        return None, messages.unknown_tool(call.name, tools)
    if call.after:  # output passing: placeholders can only name calls it runs after
        try:
            loaded = load_arguments(tool.name, call.arguments)
        except InvalidCallError as exc:
            return tool, exc
        if placeholders(loaded, call.after):
            return tool, Unfilled(loaded)
    return tool, parse(tool, call.arguments, key, pools)


def load_arguments(tool_name: str, raw: object) -> Mapping[str, Any]:
    """The arguments as a mapping: parsed if they came as a JSON string."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise messages.bad_json(tool_name, exc.msg, exc.pos) from None
        except RecursionError:
            raise messages.bad_json(tool_name, "nested too deeply", 0) from None
    if type(raw) is not dict and not isinstance(raw, Mapping):  # dict: the usual, cheap
        raise messages.not_an_object(tool_name, raw)
    return raw  # the tool checks the names (``parse_arguments``)


def parse(
    tool: KernelTool, raw: object, key: Callable[[str], Path], pools: Mapping[str, int]
) -> Parsed | BaseException:
    """Parse ``raw`` as ``tool``'s arguments and compute their claims, or say why not."""
    keyed: list[tuple[str, Path]] | None = [] if _follows_keys(tool, key) else None
    try:
        loaded = raw if type(raw) is dict else load_arguments(tool.name, raw)
        arguments = tool.parse_arguments(loaded)
        claims = compute_claims(tool, arguments, key, pools, keyed)
    except (InvalidCallError, InvalidClaimError) as exc:
        return exc
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a tool's own parse_arguments failing: this call's error
        return messages.arguments_failed(tool.name, exc)
    return arguments, claims, None if keyed is None else _interned(tuple(keyed), _RECENT_KEYED)


def _follows_keys(tool: KernelTool, key: Callable[[str], Path]) -> bool:
    """Whether a call of ``tool`` that waited can be checked by keying its paths again
    (``keys_unchanged``): its claims follow the keys alone, and there is a workspace to ask
    (keys from ``path`` alone mean the same forever)."""
    wrapped = key.__wrapped__ if isinstance(key, KeyLog) else key
    return wrapped is not path and getattr(tool, "claims_follow_keys", False) is True


def compute_claims(
    tool: KernelTool,
    arguments: Mapping[str, Any],
    key: Callable[[str], Path],
    pools: Mapping[str, int],
    keyed: list[tuple[str, Path]] | None = None,
) -> tuple[Claim, ...]:
    """The canonical claims of a call: what the tool declares, every path keyed by ``key``
    (each spelling and its key appended to ``keyed``, if given).

    A tool that declares nothing is a barrier (exclusive on everything). Raises an
    ``InvalidCallError`` or ``InvalidClaimError`` with the message for the model; whatever else
    the tool's claims function or the workspace raises is wrapped in one.
    """
    log = None
    if keyed is not None:
        log = key if isinstance(key, KeyLog) else KeyLog(key, once=False)
        log.noted = keyed
        key = log
    # The links the spellings pass through, claimed shared below (``Workspace.note_links``):
    # noted into the batch's log while it admits (``KeyLog.noting``), else for this call.
    noting = key.links if isinstance(key, KeyLog) else None
    alone = None
    if noting is None and key is not path:  # lexical keys pass through no link
        alone = key if isinstance(key, KeyLog) else KeyLog(key, once=False)
        if alone.noting():
            key = alone
            noting = alone.links
        else:
            alone = None
    start = 0 if noting is None else len(noting)
    try:
        declared = tool.claims(arguments, key)
        claims: tuple[Claim, ...]
        if declared is None:
            claims = _BARRIER
        elif type(declared) is list or type(declared) is tuple:
            claims = tuple(declared)
        elif isinstance(declared, Claim | str | bytes) or not isinstance(declared, Iterable):
            raise messages.claims_not_a_list(tool.name, declared)
        else:
            claims = tuple(declared)
        canonical: tuple[Claim, ...]
        if len(claims) == 1 and type(claims[0]) is Claim:
            canonical = claims  # one claim is canonical as it is
        else:
            canonical = canonical_claims(claims) if claims else ()
    except (InvalidCallError, InvalidClaimError):
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit included: the tool's bug, this call's error
        raise messages.claims_failed(tool.name, exc) from exc
    finally:
        if log is not None:
            log.noted = None
        if alone is not None:
            alone.done_noting()
    if noting is not None and len(noting) > start and canonical is not _BARRIER:
        links = (shared(link) for link in noting[start:])
        canonical = canonical_claims((*canonical, *links))
    for claim in canonical:
        if isinstance(claim.resource, Pool):
            _check_pool(tool.name, claim, pools)
    return _interned(canonical, _RECENT_CLAIMS)


class KeyLog:
    """``key`` (its ``__wrapped__``), noting in ``noted``, while that is a list, each spelling
    it is asked and the key it answered; with ``once``, asked once for each spelling (a string)
    however often it is given, for the calls of one batch, keyed at one moment (what it refuses
    is asked again, and refused again).

    One object for a whole batch, its log swapped call by call (``parse``): a closure a call,
    and a function attribute on each, cost a tenth of a call's admission
    (``benchmarks/overhead.py``)."""

    __slots__ = ("__wrapped__", "_before", "_known", "_note", "links", "noted")

    def __init__(self, key: Callable[[str], Path], *, once: bool) -> None:
        self.__wrapped__ = key  # see KeyFunction
        self._known: dict[str, Path] | None = {} if once else None
        self.noted: list[tuple[str, Path]] | None = None
        self.links: list[Path] | None = None
        """While :meth:`noting`: every link the spellings keyed pass through, in order."""
        self._before: list[Path] | None = None
        self._note: Callable[[list[Path] | None], list[Path] | None] | None = None

    def noting(self) -> bool:
        """Have the workspace note the links the spellings pass through in ``links``, until
        :meth:`done_noting` (for a batch: once, not call by call); False if ``key`` is no
        workspace's (it has no links)."""
        note = getattr(key_owner(self.__wrapped__), "note_links", None)
        if not callable(note):
            return False
        self.links, self._note = [], note
        self._before = note(self.links)
        return True

    def done_noting(self) -> None:
        if self._note is not None:
            self._note(self._before)
            self.links = self._before = self._note = None

    def __call__(self, text: str) -> Path:
        known = self._known
        found = None if known is None or type(text) is not str else known.get(text)
        if found is None:
            links = self.links
            met = 0 if links is None else len(links)
            found = self.__wrapped__(text)
            # A spelling through a link is keyed again each time: each call notes the link.
            if known is not None and type(text) is str and (links is None or len(links) == met):
                known[text] = found
        noted = self.noted
        if noted is not None:
            noted.append((text, found))
        return found


def keys_unchanged(keyed: tuple[tuple[str, Path], ...], key: Callable[[str], Path]) -> bool:
    """Whether every spelling in ``keyed`` still keys to what it did. A workspace that now
    refuses one (it escapes the root through a retargeted link) counts as a change: computing
    the claims again then says why."""
    try:
        for text, found in keyed:
            if key(text) != found:
                return False
    except Exception:
        return False
    return True


_RECENT_CLAIMS: dict[tuple[Claim, ...], tuple[Claim, ...]] = {}
_RECENT_KEYED: dict[tuple[tuple[str, Path], ...], tuple[tuple[str, Path], ...]] = {}
_RECENT_LIMIT = 4096
_INTERNED_LONGEST = 8
"""Longer sets are not interned: a batch of calls naming thousands of long paths each would
otherwise stay alive, 4,096 of them, long after the calls finished."""

_Item = TypeVar("_Item")


def _interned(
    items: tuple[_Item, ...], recent: dict[tuple[_Item, ...], tuple[_Item, ...]]
) -> tuple[_Item, ...]:
    """One object for equal claim sets (or logs of keyed paths) made recently: calls queued on
    one file (the deep queues a hot file makes) then share their claims, keys and paths instead
    of holding a copy each, about a quarter of what a queued call keeps alive."""
    if len(items) > _INTERNED_LONGEST:
        return items
    found = recent.get(items)
    if found is not None:
        return found
    if len(recent) >= _RECENT_LIMIT:
        recent.clear()  # bounded, and what is hot now comes back at once
    recent[items] = items
    return items


def with_more(
    tool_name: str, claims: tuple[Claim, ...], more: object, pools: Mapping[str, int]
) -> tuple[Claim, ...]:
    """``claims`` and the claims ``more`` (what a tool asked to hold, ``HoldMore``), canonical.
    Raises ``InvalidClaimError`` for anything in ``more`` that is not a valid claim."""
    if isinstance(more, Claim) or not isinstance(more, list | tuple):
        raise InvalidClaimError(
            f"{tool_name} asked to hold more, but not as a list of claims: {more!r}"
        )
    canonical = canonical_claims([*claims, *more])
    for claim in canonical:
        if isinstance(claim.resource, Pool):
            _check_pool(tool_name, claim, pools)
    return canonical


def _check_pool(tool_name: str, claim: Claim, pools: Mapping[str, int]) -> None:
    """Refuse pool claims the lease table could never grant (it would raise on request)."""
    assert isinstance(claim.resource, Pool)
    name = claim.resource.name
    capacity = pools.get(name)
    if capacity is None:
        known = ", ".join(sorted(pools)) or "none"
        raise UnknownPoolError(
            f"{tool_name} claims pool {name!r}, which this kernel does not have "
            f"(its pools: {known}); open the kernel with pools={{{name!r}: n}}"
        )
    if not claim.is_exclusive and claim.units > capacity:
        raise CapacityError(
            f"{tool_name} claims {claim.units} units of pool {name!r}, but its capacity is "
            f"{capacity}"
        )


Links = list[tuple[CallRecord, "dict[str, CallRecord] | None", list[CallRecord]]]
"""Calls of a batch and what they wait for: the calls whose outputs fill their arguments (by
id), and the unfinished calls they run after."""


def link_dependencies(
    records: list[CallRecord], failures: Failures, names: CallNames
) -> tuple[Links, list[tuple[CallRecord, RootCause]]]:
    """Refuse duplicate ids and bad ``after=`` entries, find ``after=`` cycles, and find the
    unfinished calls each call waits for. Adds to ``failures``; returns the links of the calls
    that have not failed, and the head of the chain of each call skipped because a call it
    runs after has failed.

    ``names`` tells the kernel's unfinished top-level calls and what is remembered of finished
    ones.
    """
    live, ended = names.live, names.ended
    in_batch: dict[str, CallRecord] = {}
    for record in records:
        if record.uid in failures:
            continue
        if record.call.id in in_batch:
            failures[record.uid] = (Status.ERROR, messages.duplicate_id(record.call.id))
        else:
            in_batch[record.call.id] = record
    links: Links = []
    roots: list[tuple[CallRecord, RootCause]] = []
    if not any(record.call.after for record in records):
        return links, roots  # no edges, so no cycles and nothing to wait for
    edges: dict[int, list[CallRecord]] = {}
    failed_before: Failures = {}  # calls after a call that has already failed
    for record in records:
        if record.uid in failures:
            continue
        deps = []
        for dep_id in record.call.after:
            dep = in_batch.get(dep_id) or live.get(dep_id)
            remembered = ended.get(dep_id) if dep is None else None
            if remembered is not None:
                if remembered[1] is not Status.OK and record.uid not in failed_before:
                    root, why = skip(dep_id, *remembered)
                    roots.append((record, root))
                    failed_before[record.uid] = (Status.SKIPPED, why)
                continue
            if dep is None or dep is record:
                error = messages.unknown_dependency(dep_id, itself=dep is record)
                failures.setdefault(record.uid, (Status.ERROR, error))
                continue
            deps.append(dep)
        edges[record.uid] = deps
    for cycle in find_cycles(records, edges):
        error = messages.dependency_cycle([r.call.id for r in cycle])
        for record in cycle:
            failures.setdefault(record.uid, (Status.ERROR, error))
    for record in records:
        if record.uid in failures:
            continue
        if record.uid in failed_before:
            failures[record.uid] = failed_before[record.uid]
            continue
        waits: list[CallRecord] = []
        sources = None
        if record.unfilled is not None:  # output passing: it needs its sources' records
            sources = {dep.call.id: dep for dep in edges[record.uid]}
            missing = sorted(placeholders(record.unfilled, record.call.after) - set(sources))
            if missing:
                failures[record.uid] = (Status.ERROR, messages.output_gone(missing[0]))
                continue
        for dep in edges[record.uid]:
            result = dep.result
            if result is None:
                # Unfinished, or failing admission in this very batch: when it finishes, a
                # failure skips this call through ``dependents``.
                waits.append(dep)
            elif result.status is not Status.OK:
                root, failed = skip(
                    dep.call.id, dep.name, result.status, result.error, dep.root_cause
                )
                roots.append((record, root))
                failures[record.uid] = (Status.SKIPPED, failed)
                break
        else:
            if waits or sources is not None:
                links.append((record, sources, waits))
    return links, roots


def find_cycles(
    records: list[CallRecord], edges: Mapping[int, list[CallRecord]]
) -> Iterator[list[CallRecord]]:
    """Cycles among ``records`` through their dependency edges (iterative DFS, in order)."""
    by_uid = {r.uid: r for r in records}
    color: dict[int, int] = {}  # 1 on the stack, 2 done
    for root in records:
        if root.uid in color:
            continue
        # Each frame keeps its call's edges, filtered once: filtering them again at every
        # step made a call after n others cost O(n^2).
        stack: list[tuple[CallRecord, int, list[CallRecord]]] = [(root, 0, [])]
        trail: list[CallRecord] = []
        on_trail: dict[int, int] = {}  # uid -> its index in ``trail``
        while stack:
            record, index, deps = stack.pop()
            if index == 0:
                color[record.uid] = 1
                on_trail[record.uid] = len(trail)
                trail.append(record)
                deps = [d for d in edges.get(record.uid, ()) if d.uid in by_uid]
            if index < len(deps):
                stack.append((record, index + 1, deps))
                dep = deps[index]
                state = color.get(dep.uid)
                if state is None:
                    stack.append((dep, 0, []))
                elif state == 1:
                    yield trail[on_trail[dep.uid] :]
            else:
                color[record.uid] = 2
                del on_trail[trail.pop().uid]


def split_by_cover(
    held: tuple[Claim, ...], wanted: tuple[Claim, ...]
) -> tuple[tuple[Claim, ...], tuple[Claim, ...]]:
    """``wanted`` split into the claims that ``held`` covers and the rest (a nested call's
    claims against its parent's leases)."""
    inside = tuple(c for c in wanted if any(covers(h, c) for h in held))
    outside = tuple(c for c in wanted if c not in inside)
    return inside, outside
