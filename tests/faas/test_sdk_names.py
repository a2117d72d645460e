"""The Globus Compute SDK's names that need no service: versions, serialization
strategies, shell results (issue 29)."""

from __future__ import annotations

import pytest

from tether.exceptions import FaasError, SerializationError, UnknownStrategyError
from tether.faas import (
    Client,
    CombinedCode,
    ComputeSerializer,
    DillCode,
    DillCodeSource,
    DillDataBase64,
    JSONData,
    PureSourceTextInspect,
    ShellResult,
    VersionMismatch,
    compare_versions,
)
from tether.faas._serde import code_serializer_of, data_serializer_of


@pytest.mark.parametrize(
    ('current', 'minimum'),
    [('1.2.3', '1.2.3'), ('1.2.3-dev', '1.2.3'), ('1.2.3a1', '1.2.3-dev'), ('2.0', '1.9.9')],
)
def test_compare_versions_accepts(current: str, minimum: str) -> None:
    compare_versions(current, minimum)


@pytest.mark.parametrize(
    ('current', 'minimum'), [('1.2.3', '1.2.4'), ('1.2.3', '1.2.4-dev'), ('0.9', '1')]
)
def test_compare_versions_refuses(current: str, minimum: str) -> None:
    with pytest.raises(VersionMismatch, match='older than') as info:
        compare_versions(current, minimum, package_name='pkg')
    assert isinstance(info.value, FaasError)
    assert 'upgrade pkg' in str(info.value)


def test_compare_versions_bad_input() -> None:
    with pytest.raises(ValueError, match='not a version'):
        compare_versions('latest', '1.0')


def test_strategies_map_to_tether_serializers() -> None:
    assert code_serializer_of(DillCode()) == 'pickle'
    assert code_serializer_of(CombinedCode) == 'pickle'
    assert code_serializer_of(PureSourceTextInspect()) == 'source'
    assert data_serializer_of(JSONData()) == 'json'
    assert data_serializer_of(DillDataBase64) == 'tether'
    assert code_serializer_of('tether.faas.PureSourceDill') == 'source'
    with pytest.raises(UnknownStrategyError, match='data serialization strategy, expected a code'):
        code_serializer_of(JSONData())
    with pytest.raises(ValueError, match='Invalid strategy-like'):
        data_serializer_of('yaml')


def test_compute_serializer_roundtrip_and_defaults() -> None:
    s = ComputeSerializer(strategy_data=JSONData())
    assert (s.function_serializer_id, s.data_serializer_id) == ('source', 'json')
    assert (s.code_serializer, s.data_serializer) == (DillCodeSource(), JSONData())
    assert s.deserialize(s.serialize({'a': [1, 2]})) == {'a': [1, 2]}
    default = ComputeSerializer()
    assert (default.function_serializer_id, default.data_serializer_id) == ('pickle', 'tether')
    assert default.deserialize(default.serialize((1, {2}))) == (1, {2})
    with pytest.raises(UnknownStrategyError, match='JSONData is a data serialization'):
        ComputeSerializer(strategy_code=JSONData())
    with pytest.raises(SerializationError, match='no strategy name line'):
        DillCodeSource().deserialize(b'')


def test_client_takes_strategies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('TETHER_FAAS_URL', 'http://127.0.0.1:9')
    monkeypatch.setenv('TETHER_FAAS_TOKEN', 'x')
    with Client(
        code_serialization_strategy=DillCodeSource(), data_serialization_strategy=JSONData()
    ) as client:
        assert (client.function_serializer, client.data_serializer) == ('source', 'json')


def test_shell_result_text() -> None:
    ok = ShellResult('true', 'line\n' * 20, 'err', 0)
    text = str(ok)
    assert text.startswith('exit code: 0')
    assert text.count('line') == 10
    assert 'stderr' not in text
    failed = str(ShellResult('false', '', 'boom', 2, 'Bad'))
    assert 'boom' in failed
    assert 'exception: Bad' in failed
