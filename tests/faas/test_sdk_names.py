"""The Globus Compute SDK's names that need no service: versions, serialization
strategies, shell results (issue 29)."""

from __future__ import annotations

import json
import pathlib
import uuid

import pytest

from tether.exceptions import FaasError, SerializationError, UnknownStrategyError
from tether.faas import (
    Batch,
    Client,
    CombinedCode,
    ComputeSerializer,
    DillCode,
    DillCodeSource,
    DillDataBase64,
    JSONData,
    PureSourceTextInspect,
    ShellFunction,
    ShellResult,
    VersionMismatch,
    as_optional_uuid,
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


def test_shell_function_run_dir_and_return_dict(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / 'runs' / 'one'  # created by the call
    shell = ShellFunction('pwd; echo hi >&2', stdout='out.txt', run_dir=run_dir)
    result = shell()
    assert isinstance(result, ShellResult)
    assert result.stdout.strip() == str(run_dir)
    assert (run_dir / 'out.txt').read_text().strip() == str(run_dir)
    monkeypatch.setenv('TETHER_FAAS_TASK_DIR', str(tmp_path / 'env'))
    as_dict = ShellFunction('pwd', return_dict=True)()
    assert isinstance(as_dict, dict)
    assert as_dict['stdout'].strip() == str(tmp_path / 'env')
    assert json.loads(json.dumps(as_dict))['returncode'] == 0
    blocker = tmp_path / 'file'
    blocker.write_text('')
    with pytest.raises(NotADirectoryError):
        ShellFunction('pwd', run_dir=blocker / 'sub')()


@pytest.mark.parametrize('name', ['for', ' abc', '2be', 'a-b'])
def test_shell_function_name_must_be_an_identifier(name: str) -> None:
    with pytest.raises(ValueError, match='Python identifier'):
        ShellFunction('pwd', name=name)
    assert ShellFunction('pwd', name='École').__name__ == 'École'


def test_batch_task_group_id_is_an_optional_uuid() -> None:
    group = uuid.uuid4()
    batch = Batch(str(group))
    assert batch.task_group_id == group
    for empty in (None, '', 0):
        batch.task_group_id = empty  # type: ignore[assignment]
        assert batch.task_group_id is None
    for bad in (123, ' ', 'a', str(group)[:-1]):
        with pytest.raises(ValueError, match='task_group_id must be a UUID'):
            batch.task_group_id = bad  # type: ignore[assignment]
    assert as_optional_uuid(str(group)) == group
    assert as_optional_uuid(0) is None
