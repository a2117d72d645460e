"""Inputs in transit look as Colmena's do: ``inputs[0]`` args, ``inputs[1]`` kwargs, strings."""

from __future__ import annotations

import pytest

from tether.connectors.local import LocalConnector
from tether.steer.models import Result
from tether.store import Store


def test_json_inputs_show_their_json_text() -> None:
    result = Result(((1, 'a'), {'k': [1, 2]}), method='m', serialization_method='json')
    result.serialize()
    assert len(result.inputs) == 2
    assert result.inputs[0] == ['1', '"a"']
    assert result.inputs[1] == {'k': '[1, 2]'}
    result.deserialize()
    assert result.args == (1, 'a')
    assert result.kwargs == {'k': [1, 2]}


def test_pickle_inputs_show_hex_and_proxies_as_they_are() -> None:
    with Store('packed-view', LocalConnector()) as store:
        big = store.proxy(b'x' * 100)
        result = Result(((b'small', big), {}), method='m')
        result.serialize()
        args, kwargs = result.inputs[0], result.inputs[1]
        assert isinstance(args[0], str)
        assert bytes.fromhex(args[0])  # the serialized bytes, as hex
        assert args[1] is result.inputs.items[1]  # the proxy itself
        assert kwargs == {}
        result.deserialize()
        assert result.args[0] == b'small'
        assert result.args[1] == b'x' * 100


def test_packed_value_and_bad_index() -> None:
    result = Result(((), {}), method='m')
    result.set_result(5)
    result.serialize()
    with pytest.raises(TypeError, match='deserialize'):
        result.value[0]
    with pytest.raises(TypeError, match='deserialize'):
        len(result.value)
    assert result.value  # truthy, as any packed value was
    result.serialize()
    with pytest.raises(IndexError):
        result.inputs[2]
