"""Every ```python block of README.md and of docs/**/*.md runs as written and prints what the
page shows.

The convention, for every block (those added later too):

- Each ```python block runs alone, as a script (``python block.py``, this checkout's
  interpreter, at most ``TIMEOUT`` seconds), in a fresh, empty temporary directory: what a
  newcomer has at hand in a project of their own, nothing of this clone. It must exit with
  status 0. A block that needs files makes them.
- What it prints is compared with the first ```text block after it, before the next ```python
  block or heading. ``...`` in a line of that block matches any text (a time, a line number); a
  line may be only ``...``, matching any number of lines. Trailing spaces don't count. A block
  with no ```text block after it must print nothing.
- ``OPENAI_BASE_URL`` points at a stand-in Chat Completions server on 127.0.0.1 that this test
  runs (every answer is ``STANDIN_REPLY``, with no tool calls) and ``OPENAI_API_KEY`` is set, so
  the agent examples run offline; the interpreter's bin directory is first on ``PATH``
  (``mcp-server-git`` is found there). A ``DeprecationWarning`` the block itself causes is an
  error: the documentation shows no spelling that is on its way out.
- ``<!-- readme-test: skip because REASON -->`` on the line before a ```python block leaves
  that block out, saying why. Only for what can't run here at all.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
"""The pages whose blocks run: the README and every page of the documentation site."""
TIMEOUT = 90.0
STANDIN_REPLY = "Done: greet() is now welcome() everywhere."

_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_SKIP = re.compile(r"<!--\s*readme-test:\s*skip because (.+?)\s*-->\s*\Z", re.DOTALL)


@attrs.frozen
class Block:
    line: int
    code: str
    expected: str | None
    skip: str | None


def readme_blocks(text: str) -> list[Block]:
    """The ```python blocks of a README, each with its expected output and skip reason."""
    fences = list(_FENCE.finditer(text))
    blocks = []
    for index, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        expected = None
        for later in fences[index + 1 :]:
            between = text[fence.end() : later.start()]
            if later.group(1) == "python" or re.search(r"^#", between, re.MULTILINE):
                break
            if later.group(1) == "text":
                expected = later.group(2)
                break
        skip = _SKIP.search(text[: fence.start()].rstrip() + "\n")
        line = text.count("\n", 0, fence.start()) + 1
        blocks.append(Block(line, fence.group(2), expected, skip.group(1) if skip else None))
    return blocks


def matches(expected: str, printed: str) -> bool:
    """Whether ``printed`` is what ``expected`` shows, ``...`` matching any text."""
    pattern = []
    for line in expected.rstrip("\n").split("\n"):
        line = line.rstrip()
        if line == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(".*?".join(map(re.escape, line.split("..."))) + r"[ \t]*\n")
    printed = "\n".join(line.rstrip() for line in printed.rstrip("\n").split("\n")) + "\n"
    return re.fullmatch("".join(pattern), printed, re.DOTALL) is not None


class _StandIn(http.server.BaseHTTPRequestHandler):
    """A Chat Completions server that answers every request with ``STANDIN_REPLY``."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        message = {"role": "assistant", "content": STANDIN_REPLY}
        body = json.dumps(
            {
                "id": "chatcmpl-readme",
                "object": "chat.completion",
                "created": 0,
                "model": "stand-in",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


BLOCKS = [
    (document.relative_to(ROOT).as_posix(), block)
    for document in DOCUMENTS
    for block in readme_blocks(document.read_text())
]


@pytest.mark.parametrize(
    ("page", "block"),
    [
        pytest.param(
            page,
            block,
            id=f"{page}:line-{block.line}",
            marks=pytest.mark.skip(reason=block.skip) if block.skip else (),
        )
        for page, block in BLOCKS
    ],
)
def test_the_block_runs_and_prints_what_its_page_shows(
    page: str, block: Block, tmp_path: Path, model_url: str
) -> None:
    script = tmp_path.parent / f"{tmp_path.name}-readme-block.py"
    script.write_text(block.code)
    environment = {
        **os.environ,
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "readme-test",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    environment.pop("OPENAI_MODEL", None)
    ran = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning:__main__", str(script)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    where = f"{page}'s block at line {block.line}"
    assert ran.returncode == 0, f"{where} failed:\n{ran.stdout}\n{ran.stderr}"
    if block.expected is None:
        assert ran.stdout == "", (
            f"{where} printed this, but no ```text block after it shows what it prints:\n"
            f"{ran.stdout}"
        )
    else:
        assert matches(block.expected, ran.stdout), (
            f"{where} printed:\n{ran.stdout}\nwhere the page shows:\n{block.expected}"
        )


# -- the convention itself ---------------------------------------------------------------------


def test_every_python_block_of_every_page_is_found() -> None:
    for document in DOCUMENTS:
        found = [block for page, block in BLOCKS if page == document.relative_to(ROOT).as_posix()]
        assert len(found) == document.read_text().count("```python\n"), document
    assert any(page == "README.md" for page, _ in BLOCKS), "README.md has no ```python block"
    assert len(DOCUMENTS) > 1, "no page under docs/"


def test_an_output_block_is_the_next_text_block_before_a_heading_or_python_block() -> None:
    text = (
        "```python\nprint(1)\n```\n\nIt prints:\n\n```text\n1\n```\n\n"
        "```python\nprint(2)\n```\n\n## Next\n\n```text\n2\n```\n\n"
        "<!-- readme-test: skip because it needs a phone -->\n```python\ntap()\n```\n"
    )
    assert readme_blocks(text) == [
        Block(1, "print(1)\n", "1\n", None),
        Block(11, "print(2)\n", None, None),
        Block(22, "tap()\n", None, "it needs a phone"),
    ]


def test_dots_match_any_text_and_a_dots_line_any_lines() -> None:
    assert matches("c1 OK ...# toolkernel\n", "c1 OK      1\t# toolkernel\n")
    assert matches("a\n...\nz\n", "a\nb\nc\nz\n")
    assert matches("a\n...\nz\n", "a\nz\n")
    assert matches("a  \n", "a\n")
    assert not matches("c1 OK\n", "c1 Status.OK\n")
    assert not matches("a\nz\n", "a\nb\nz\n")
