"""Excerpts of pydantic-ai's ``tests/conftest.py`` (see NOTICE.md): the helpers the tests here
import from their conftest, copied as they are; the imports they need, and this docstring, are
ours. pydantic-ai's conftest itself imports test dependencies this project does not have (VCR,
pytest-mock, dirty-equals, blockbuster); ``conftest.py`` here re-exports these helpers under the
names the tests import."""

from __future__ import annotations as _annotations

import importlib.util
import re
import secrets
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar, overload

import pytest
from _pytest.assertion.rewrite import AssertionRewritingHook

from pydantic_ai.messages import (
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

T = TypeVar('T')


def sanitize_filename(name: str, max_len: int) -> str:
    """Sanitize a string for safe use as a filename across platforms."""
    # Windows does not allow these characters in paths. Linux bans slashes only.
    return re.sub('[' + re.escape('<>:"/\\|?*') + ']', '-', name)[:max_len]


# pyright: reportUnknownMemberType=false, reportUnknownArgumentType=false
@pytest.fixture
def create_module(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[str], Any]:
    """Taken from `pydantic/tests/conftest.py`, create module object, execute and return it."""

    def run(
        source_code: str,
        rewrite_assertions: bool = True,
        module_name_prefix: str | None = None,
    ) -> ModuleType:
        """Create module object, execute and return it.

        Can be used as a decorator of the function from the source code of which the module will be constructed.

        Args:
            source_code: Python source code of the module
            rewrite_assertions: whether to rewrite assertions in module or not
            module_name_prefix: string prefix to use in the name of the module, does not affect the name of the file.

        """

        # Max path length in Windows is 260. Leaving some buffer here
        max_name_len = 240 - len(str(tmp_path))
        sanitized_name = sanitize_filename(request.node.name, max_name_len)
        module_name = f'{sanitized_name}_{secrets.token_hex(5)}'
        path = tmp_path / f'{module_name}.py'
        path.write_text(source_code, encoding='utf-8')
        filename = str(path)

        if module_name_prefix:  # pragma: no cover
            module_name = module_name_prefix + module_name

        if rewrite_assertions:
            loader = AssertionRewritingHook(config=request.config)
            loader.mark_rewrite(module_name)
        else:  # pragma: no cover
            loader = None

        spec = importlib.util.spec_from_file_location(module_name, filename, loader=loader)
        sys.modules[module_name] = module = importlib.util.module_from_spec(spec)  # pyright: ignore[reportArgumentType]
        spec.loader.exec_module(module)  # pyright: ignore[reportOptionalMemberAccess]
        return module

    return run




_RequestPartT = TypeVar('_RequestPartT', bound=SystemPromptPart | UserPromptPart | ToolReturnPart | RetryPromptPart)
_ResponsePartT = TypeVar(
    '_ResponsePartT',
    bound=TextPart | ToolCallPart | NativeToolCallPart | NativeToolReturnPart | ThinkingPart | FilePart,
)


@overload
def iter_message_parts(
    messages: Sequence[ModelMessage],
    message_type: type[ModelRequest],
    part_type: type[_RequestPartT],
) -> Iterator[_RequestPartT]: ...


@overload
def iter_message_parts(
    messages: Sequence[ModelMessage],
    message_type: type[ModelResponse],
    part_type: type[_ResponsePartT],
) -> Iterator[_ResponsePartT]: ...


def iter_message_parts(
    messages: Sequence[ModelMessage],
    message_type: type[ModelRequest] | type[ModelResponse],
    part_type: type[_RequestPartT] | type[_ResponsePartT],
) -> Iterator[_RequestPartT | _ResponsePartT]:
    """Iterate over all parts of a given type in messages of a given type."""
    for msg in messages:  # pragma: no branch
        if isinstance(msg, message_type):
            for part in msg.parts:
                if isinstance(part, part_type):
                    yield part


def message(messages: Sequence[ModelMessage], message_type: type[T], *, index: int = 0) -> T:
    """Return `messages[index]`, asserting it is an instance of `message_type`."""
    msg = messages[index]
    assert isinstance(msg, message_type)
    return msg


def message_part(
    messages: Sequence[ModelMessage], part_type: type[T], *, message_index: int = 0, part_index: int = 0
) -> T:
    """Return `messages[message_index].parts[part_index]`, asserting it is an instance of `part_type`."""
    msg = messages[message_index]
    part = msg.parts[part_index]
    assert isinstance(part, part_type)
    return part


# endregion
