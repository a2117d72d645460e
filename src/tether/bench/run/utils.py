"""Small helpers of the run command (TaPS's ``run.utils``): nested options, cwd, environment."""

from __future__ import annotations

import contextlib
import os
import pathlib
from collections.abc import Iterator, Mapping
from typing import Any

import pydantic

from tether.exceptions import InvalidArgumentError

__all__ = [
    'change_cwd',
    'flatten_mapping',
    'prettify_mapping',
    'prettify_validation_error',
    'update_environment',
]


@contextlib.contextmanager
def change_cwd(path: str | os.PathLike[str]) -> Iterator[pathlib.Path]:
    """Make ``path`` the working directory inside the block (yielded, absolute)."""
    before = pathlib.Path.cwd()
    target = pathlib.Path(path).absolute()
    os.chdir(target)
    try:
        yield target
    finally:
        os.chdir(before)


def flatten_mapping(mapping: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
    """``{'a': {'b': 1}}`` -> ``{'a.b': 1}`` (dotted keys, as the command-line options)."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        dotted = f'{prefix}.{key}' if prefix else str(key)
        if isinstance(value, Mapping) and value:
            flat.update(flatten_mapping(value, dotted))
        else:
            flat[dotted] = value
    return flat


def _ordered(keys: Any) -> list[str]:
    # ``name`` (a plugin's kind) first, then the rest alphabetically.
    return sorted(keys, key=lambda key: (key != 'name', key))


def prettify_mapping(mapping: Mapping[str, Any], indent: int = 0) -> str:
    """A nested mapping as indented ``key: value`` lines (``name`` first in each level)."""
    pad = '  ' * indent
    lines = []
    for key in _ordered(mapping):
        value = mapping[key]
        if isinstance(value, Mapping):
            lines.append(f'{pad}{key}:')
            if value:
                lines.append(prettify_mapping(value, indent + 1))
        else:
            lines.append(f'{pad}{key}: {value!r}')
    return '\n'.join(lines)


def prettify_validation_error(
    error: pydantic.ValidationError,
    model: type[pydantic.BaseModel] | None = None,
) -> InvalidArgumentError:
    """One readable exception (a ``ValueError``) of a validation error, a line per problem.

    Each line names the option (dotted), the error type and pydantic's message; ``model``
    names the configuration in the first line (default: pydantic's title).
    """
    title = model.__name__ if model is not None else error.title
    lines = [f'{error.error_count()} invalid option(s) of {title}:']
    for item in error.errors():
        where = '.'.join(str(part) for part in item['loc']) or '(root)'
        lines.append(f'  {where}: {item["msg"]} [type={item["type"]}, input={item["input"]!r}]')
    return InvalidArgumentError('\n'.join(lines))


@contextlib.contextmanager
def update_environment(variables: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables inside the block; restore (or remove) them after."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
