"""Version checks: :func:`compare_versions` and :class:`VersionMismatch`.

Versions are compared by their release numbers (``MAJOR.MINOR.PATCH``, as many parts as
given, missing parts counting as 0). A pre-release or development suffix (``1.2.3a1``,
``1.2.3b2``, ``1.2.3rc1``, ``1.2.3-dev``, ``1.2.3.dev4``) is ignored: a development build
of a release satisfies that release, and never a later one.
"""

from __future__ import annotations

import re

from tether.exceptions import FaasError

__all__ = ['VersionMismatch', 'compare_versions', 'release_of']

_RELEASE = re.compile(r'\s*v?(\d+(?:\.\d+)*)')


class VersionMismatch(FaasError):  # noqa: N818 (the Globus Compute SDK's name)
    """A version older than the one required (a ``FaasError``)."""


def release_of(version: str) -> tuple[int, ...]:
    """The release numbers of ``version`` (``'1.2.3-dev'`` -> ``(1, 2, 3)``).

    Raises:
        ValueError: ``version`` does not start with a release number.
    """
    if not isinstance(version, str):
        raise TypeError(f'a version is a string, not {type(version).__name__}')
    found = _RELEASE.match(version)
    if found is None:
        raise ValueError(f'{version!r} is not a version (expected MAJOR.MINOR.PATCH...)')
    parts = [int(p) for p in found.group(1).split('.')]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def compare_versions(current: str, min_version: str, *, package_name: str = 'tether') -> None:
    """Raise :class:`VersionMismatch` if ``current`` is older than ``min_version``.

    Only release numbers count (see the module's docstring): ``compare_versions('1.2.3-dev',
    '1.2.3')`` passes, ``compare_versions('1.2.3', '1.2.4-dev')`` raises.
    """
    if release_of(current) < release_of(min_version):
        raise VersionMismatch(
            f'{package_name} {current} is older than the {min_version} required: '
            f'upgrade {package_name}'
        )
