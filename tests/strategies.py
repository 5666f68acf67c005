"""The hypothesis strategies the tests share, in one place, with the values they build.

Test modules import what they need from here; each section names the tests that use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypedDict

import attrs
from hypothesis import strategies as st

import toolkernel as tk
from toolkernel.agent import Turn
from toolkernel.locks import (
    EVERYTHING,
    Claim,
    device,
    exclusive,
    pool,
    reads,
    shared,
    units,
    writes,
)
from toolkernel.testing import strategies as public

# -- claims of every kind (tests/locks/test_resources.py) ------------------------------------

# The public strategy (toolkernel.testing.strategies), over the universe these tests use.
resource_claims = public.claims(["a", "a/b", "a/b/c", "a/bc", "b"], devices=["d"], pools=["net"])


# -- lease table operations (tests/locks/test_table_stateful.py) -----------------------------

NET = "net"

# The universe is small on purpose, so that requests collide often. Hypothesis favours the first
# choices, so those are ones that make queues.
CLAIM_CHOICES: tuple[Claim, ...] = (
    writes("a/b"),
    units(pool(NET), 2),
    reads("a"),
    units(pool(NET), 1),
    writes("a"),
    reads("a/b/c"),
    reads("a/b"),
    writes("a/bc"),
    units(pool(NET), 3),
    exclusive(device("phone")),
    shared(device("phone")),
    writes("a/b/c"),
    reads("a/bc"),
    writes("b"),
    reads("b"),
    exclusive(pool(NET)),
    exclusive(device("browser")),
    shared(EVERYTHING),
    exclusive(EVERYTHING),
)

claim_lists = st.lists(st.sampled_from(CLAIM_CHOICES), min_size=1, max_size=3)
priorities = st.integers(min_value=-1, max_value=2)
groups = st.sampled_from([None, "g1", "g2"])
owner_indexes = st.integers(min_value=0, max_value=2)
rarely = st.integers(min_value=0, max_value=7).map(lambda n: n == 7)
request_args = st.tuples(claim_lists, priorities, owner_indexes, rarely)


# -- spellings of one path (tests/tools/test_workspace.py) ------------------------------------

path_noise = st.sampled_from(["", "./", "/", ".//", "ghost/../", "a/sub/../../"])


# -- scripted calls and scenarios for a real kernel (tests/kernel/test_properties.py) --------

# Claims are spelled "r X" / "w X" (shared / exclusive), X a path, "@android" or "*" (everything);
# "u lane" is one unit of the lane pool.
PATH_CLAIMS = tuple(f"{m} {p}" for p in ("a", "a/b", "a/b/c", "b", "c") for m in "rw")
DEVICE_CLAIMS = ("r @android", "w @android")
BARRIER_CLAIMS = ("w *",)
POOL_CLAIMS = ("u lane",)


def parse_claim(text: str) -> Claim:
    mode, target = text.split(" ")
    if mode == "u":
        return tk.units(tk.pool(target), 1)
    if target == "*":
        resource: object = tk.EVERYTHING
    elif target.startswith("@"):
        resource = tk.device(target[1:])
    else:
        resource = tk.path(target)
    return tk.shared(resource) if mode == "r" else tk.exclusive(resource)  # type: ignore[arg-type]


@attrs.frozen
class CallScript:
    claims: tuple[str, ...]
    duration: int
    fail: str  # "" runs and returns, "start" raises at once, "end" raises after sleeping

    @property
    def effective_duration(self) -> int:
        return 0 if self.fail == "start" else self.duration

    def declared(self) -> tuple[Claim, ...]:
        return tk.locks.canonical_claims(parse_claim(c) for c in self.claims)


@attrs.frozen
class Scenario:
    batches: tuple[tuple[CallScript, ...], ...]
    concurrent: bool  # all batches at once (at their offsets) or one after another
    offsets: tuple[float, ...]
    max_concurrency: int | None
    lane_capacity: int
    cancels: tuple[tuple[str, float], ...]  # (call id, when)

    @property
    def clean(self) -> bool:
        """No limits and no cancellations: timing is fully predictable."""
        uses_pool = any("u lane" in c.claims for b in self.batches for c in b)
        return self.max_concurrency is None and not uses_pool and not self.cancels


def call_id(batch: int, index: int) -> str:
    return f"b{batch}c{index}"


def call_scripts(universe: Sequence[str]) -> st.SearchStrategy[CallScript]:
    return st.builds(
        CallScript,
        claims=st.lists(st.sampled_from(universe), max_size=3, unique=True).map(tuple),
        duration=st.sampled_from([1, 2, 3]),
        fail=st.sampled_from(["", "", "", "start", "end"]),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    limited = draw(st.booleans())
    universe = [*PATH_CLAIMS, *DEVICE_CLAIMS, *BARRIER_CLAIMS]
    if limited:
        universe += POOL_CLAIMS * 3  # often; a call holds at most one unit (unique claims)
    scripts = call_scripts(universe)
    batches = draw(
        st.lists(st.lists(scripts, min_size=1, max_size=6).map(tuple), min_size=1, max_size=3)
    )
    ids = [call_id(b, i) for b, batch in enumerate(batches) for i in range(len(batch))]
    cancels: list[tuple[str, float]] = []
    if draw(st.booleans()):
        cancels = draw(
            st.lists(
                st.tuples(st.sampled_from(ids), st.sampled_from([0.0, 0.5, 1.5, 2.5, 4.0])),
                max_size=3,
                unique_by=lambda c: c[0],
            )
        )
    return Scenario(
        batches=tuple(batches),
        concurrent=draw(st.booleans()),
        offsets=tuple(draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])) for _ in batches),
        max_concurrency=draw(st.none() | st.integers(1, 3)) if limited else None,
        lane_capacity=draw(st.integers(1, 2)),
        cancels=tuple(cancels),
    )


# -- shell commands (tests/shell/test_properties.py) -----------------------------------

# Text that is mostly not bash: every character that means something to the shell, and a few
# letters, so parse errors, missing nodes and odd trees are common.
shell_noise = st.text(alphabet="ab x;|&<>()$`'\"\\{}[]*?~\n-=/.#!", max_size=30)

SHELL_PROGRAMS = ("cat a", "echo x", "ls src", "grep -n x f", "wc -l a", "git status", "pytest")
REDIRECT_OPERATORS = (">", ">>", "2>", "&>", ">|", "&>>", "1>")
REDIRECT_TARGETS = ("out", "o.txt", "sub/out", "sub/deep/o", "'q o'", '"dq"')


@attrs.frozen
class ShellCase:
    """A generated command line and the redirection targets it writes (as the text names them,
    relative to the directory the command starts in)."""

    command: str
    targets: tuple[str, ...]


@st.composite
def simple_shell_commands(draw: st.DrawFn) -> ShellCase:
    program = draw(st.sampled_from(SHELL_PROGRAMS))
    redirects = draw(
        st.lists(
            st.tuples(st.sampled_from(REDIRECT_OPERATORS), st.sampled_from(REDIRECT_TARGETS)),
            max_size=2,
        )
    )
    text = " ".join([program, *(f"{op} {target}" for op, target in redirects)])
    return ShellCase(text, tuple(target.strip("'\"") for _, target in redirects))


def _combined(children: st.SearchStrategy[ShellCase]) -> st.SearchStrategy[ShellCase]:
    def join(pair: tuple[ShellCase, ShellCase], operator: str) -> ShellCase:
        left, right = pair
        return ShellCase(f"{left.command} {operator} {right.command}", left.targets + right.targets)

    def wrap(case: ShellCase, shape: str) -> ShellCase:
        return ShellCase(shape.format(case.command), case.targets)

    return st.one_of(
        st.builds(join, st.tuples(children, children), st.sampled_from(["&&", "||", ";", "|"])),
        st.builds(
            wrap,
            children,
            # `$( {} )`: `$((` would start arithmetic, where `a > out` compares and writes nothing.
            st.sampled_from(["( {} )", "{{ {}; }}", "echo $( {} )", "timeout 5 {}", "! {}"]),
        ),
        st.builds(
            lambda case, target: ShellCase(
                f"{{ {case.command}; }} > {target}", (*case.targets, target)
            ),
            children,
            st.sampled_from(["grouped", "sub/grouped"]),
        ),
    )


shell_cases = st.recursive(simple_shell_commands(), _combined, max_leaves=6)


# -- tests/locks/test_keyqueue.py -------------------------------------------------------------

# (operation, value): add a new key, remove the key at a position of the sorted list (as a fraction
# of its length), or replace the key there by a new one.
key_queue_operations = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "replace"]),
        st.integers(min_value=-1_000, max_value=1_000),
        st.floats(min_value=0, max_value=1, exclude_max=True),
    ),
    max_size=300,
)


# -- tests/tools/test_workspace_descriptor.py: spellings over the maze it builds ---------------

MAZE_NAMES = ["d", "e", "f", "g", "to-d", "to-f", "up", "abs-d", "dangling", "out", "loop", "to-g"]
MAZE_NAMES += ["new", "x"]
maze_spellings = st.lists(st.sampled_from(MAZE_NAMES), min_size=1, max_size=4).map("/".join)


# -- tests/agent/test_scripted_model.py: turns a model could write ----------------------------

TOOL_NAMES = ["Read", "fs.read file", "git.status", "x" * 70]
ids = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=8)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text().filter(lambda s: not s.startswith("$")),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=5,
)
arguments = st.dictionaries(
    st.text(min_size=1, max_size=5).filter(lambda k: k != "depends_on"), values, max_size=3
)


@st.composite
def turns(draw: st.DrawFn) -> Turn:
    call_ids = draw(st.lists(ids, min_size=1, max_size=5, unique=True))
    calls = []
    for n, call_id in enumerate(call_ids):
        earlier = st.sampled_from(call_ids[:n]) if n else st.nothing()
        after = draw(st.lists(earlier, max_size=2, unique=True)) if n else []
        name = draw(st.sampled_from(TOOL_NAMES))
        calls.append(tk.ToolCall(call_id, name, draw(arguments), after=tuple(after)))
    return Turn(draw(st.text(max_size=10)), calls)


# -- tests/formats/test_strict_schema.py: tools with generated parameters ---------------------


class Point(TypedDict, total=False):
    x: int
    label: str


# (annotation, a valid value, a default) for generated tool parameters
KINDS = [
    ("int", 1, "0"),
    ("str", "s", "'d'"),
    ("bool", True, "False"),
    ("float", 1.5, "0.5"),
    ("list[str]", ["a"], "()"),
    ("Literal['a', 'b']", "a", "'b'"),
    ("int | None", 2, "None"),
    ("Point", {"x": 1}, "None"),
    ("list[Point]", [{"x": 1, "label": None}], "()"),
]


@st.composite
def generated_tools(draw: st.DrawFn) -> tuple[tk.Tool, dict[str, Any]]:
    chosen = draw(st.lists(st.sampled_from(range(len(KINDS))), min_size=1, max_size=6))
    optional = draw(st.lists(st.booleans(), min_size=len(chosen), max_size=len(chosen)))
    required = [(i, k) for i, (k, o) in enumerate(zip(chosen, optional, strict=True)) if not o]
    defaulted = [(i, k) for i, (k, o) in enumerate(zip(chosen, optional, strict=True)) if o]
    params = [f"p{i}: {KINDS[k][0]}" for i, k in required]
    params += [f"p{i}: {KINDS[k][0]} = {KINDS[k][2]}" for i, k in defaulted]
    source = f"async def generated(ctx: ToolContext, {', '.join(params)}) -> str:\n    return ''"
    namespace: dict[str, Any] = {"ToolContext": tk.ToolContext, "Literal": Literal, "Point": Point}
    exec(source, namespace)
    tool = tk.tool(namespace["generated"], claims=lambda args: [])
    # What strict mode makes a model send: every property, optional ones as null.
    arguments = {f"p{i}": KINDS[k][1] for i, k in required}
    arguments |= {f"p{i}": None for i, _ in defaulted}
    return tool, arguments
