"""Bad arguments to the SDK-shaped classes give clear errors that the SDK's callers catch."""

from __future__ import annotations

from typing import Any

import pytest

from tether.exceptions import InvalidArgumentError, WalltimeError
from tether.faas import Executor, ShellFunction


@pytest.mark.parametrize('walltime', [-1, -0.5, float('nan')])
def test_a_negative_walltime_is_refused(walltime: float) -> None:
    with pytest.raises(WalltimeError, match='walltime must be a number of seconds >= 0') as e:
        ShellFunction('true', walltime=walltime)
    # what the SDK's users catch (its check is an assert) and what tether's do
    assert isinstance(e.value, AssertionError)
    assert isinstance(e.value, ValueError)
    assert isinstance(e.value, InvalidArgumentError)


def test_zero_walltime_is_accepted() -> None:
    assert ShellFunction('true', walltime=0).walltime == 0


def test_an_unknown_executor_keyword_names_it_and_the_known_ones() -> None:
    bad: dict[str, Any] = {'endpoint': 'x'}
    with pytest.raises(TypeError, match="invalid argument 'endpoint'") as e:
        Executor(**bad)
    assert 'endpoint_id' in str(e.value)
    assert 'resource_specification' in str(e.value)


def test_a_subclass_taking_any_keyword_checks_its_own() -> None:
    class Labelled(Executor):
        def __init__(self, **kwargs: Any) -> None:
            self.extra = kwargs  # no super().__init__: no service is contacted

    assert Labelled(anything=1).extra == {'anything': 1}


@pytest.mark.parametrize('builtin', [max, len, str.join])
def test_a_builtin_has_no_source(builtin: Any) -> None:
    from tether.exceptions import SerializationError, SourceNotFoundError
    from tether.faas import CombinedCode, DillCodeSource, PureSourceTextInspect

    for strategy in (DillCodeSource(), PureSourceTextInspect()):
        with pytest.raises(SourceNotFoundError, match='has no Python source') as e:
            strategy.serialize(builtin)
        assert isinstance(e.value, TypeError)  # what the SDK raises
        assert isinstance(e.value, SerializationError)
    combined = CombinedCode()  # falls back to sending it by value
    assert combined.deserialize(combined.serialize(builtin)) is builtin


def test_a_plain_function_still_serializes_as_source() -> None:
    from tether.faas import DillCodeSource

    def add(a: int, b: int) -> int:
        return a + b

    strategy = DillCodeSource()
    assert strategy.deserialize(strategy.serialize(add))(2, 3) == 5
