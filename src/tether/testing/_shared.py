"""What the conformance suites' classes share between their tests: one started engine,
task server or launcher per class (starting one can take seconds), given to a test only
while every test that used it passed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar, cast

import pytest

__all__ = ['ClassShared', 'class_fixture']

T = TypeVar('T')


class ClassShared(Generic[T]):
    """The object a suite class shares between its tests (``current``), made on first use.

    A test gets it inside :meth:`lent` only while every test that used it passed (a failed
    test may have left it busy or broken): after a failure it is stopped and the next test
    makes a fresh one, so a test's outcome never depends on another's. Subclasses say how
    one starts and ends, and whether it is still usable.
    """

    def __init__(self) -> None:
        self.current: T | None = None

    def _start(self, made: T) -> T:
        """Start ``made``; return what tests use."""
        return made

    def _end(self, current: T) -> None:
        """Stop ``current``."""

    def _usable(self, current: T) -> bool:
        return True

    def take(self, make: Callable[[], T]) -> T:
        """The shared object; made and started by ``make`` if there is none (or it is no
        longer usable)."""
        if self.current is None or not self._usable(self.current):
            self.stop()
            self.current = self._start(make())
        return self.current

    def stop(self) -> None:
        current, self.current = self.current, None
        if current is not None:
            self._end(current)

    @contextlib.contextmanager
    def lent(self, request: pytest.FixtureRequest) -> Iterator[None]:
        """Around a test's use of the shared object: stopped if the test failed."""
        failed = request.session.testsfailed
        try:
            yield
        finally:
            if request.session.testsfailed != failed:
                self.stop()


def class_fixture(name: str, make: Callable[[Any], ClassShared[Any]], doc: str) -> Any:
    """A class-scoped fixture ``name``: ``make(the test class)``, stopped after the class's
    last test."""

    def shared(cls: Any) -> Iterator[ClassShared[Any]]:
        made = make(cls)
        yield made
        made.stop()

    shared.__doc__ = doc
    return pytest.fixture(scope='class', name=name)(cast(Any, classmethod(shared)))
