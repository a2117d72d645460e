"""Options that several ``tether`` commands share, made in one place so that they read and
parse alike everywhere.

A kit module (any tether package may import it): it depends on nothing of tether.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ['config_option']

F = TypeVar('F', bound=Callable[..., Any])


def config_option(
    dest: str, help: str | None = None, *, required: bool = False
) -> Callable[[F], F]:
    """``--config FILE``: the path of the command's configuration file (not a folder).

    Args:
        dest: The name of the command's parameter that receives it.
        help: The option's line in ``--help`` (none by default).
        required: The command refuses to run without it (else it receives ``None``).
    """
    # No ``default=None``: with it, click (8.3 on) takes ``None`` as a given value and no
    # longer refuses a missing required option.
    return click.option(
        '--config',
        dest,
        type=click.Path(dir_okay=False),
        required=required,
        help=help,
    )
