"""Serialization strategies and the deserializer allowlist (issue 29): what a payload
names is looked up among tether's strategies, never imported, and refused unless allowed."""

from __future__ import annotations

import pytest

from tether.exceptions import SerializationError, SerializerNotAllowedError, UnknownStrategyError
from tether.faas import (
    DEFAULT_STRATEGY_CODE,
    DEFAULT_STRATEGY_DATA,
    SELECTABLE_STRATEGIES,
    AllCodeStrategies,
    AllDataStrategies,
    AllowlistWildcard,
    CombinedCode,
    ComputeSerializer,
    DillCode,
    DillCodeSource,
    DillDataBase64,
    JSONData,
    PureSourceDill,
    SerializationStrategy,
    validate_strategylike,
)
from tether.faas._allow import allowed_ids, check_serializers


def scale(x, factor=3):  # type: ignore[no-untyped-def]
    return x * factor


CODE = [s for s in SELECTABLE_STRATEGIES if s.for_code]
DATA = [s for s in SELECTABLE_STRATEGIES if not s.for_code]


@pytest.mark.parametrize('strategy', CODE, ids=lambda s: s.__name__)
def test_code_strategies_round_trip(strategy: type[SerializationStrategy]) -> None:
    payload = strategy().serialize(scale)
    assert payload.startswith(strategy.__name__.encode() + b'\n')
    assert strategy().deserialize(payload)(2, factor=5) == 10


@pytest.mark.parametrize('strategy', DATA, ids=lambda s: s.__name__)
def test_data_strategies_round_trip(strategy: type[SerializationStrategy]) -> None:
    assert strategy().deserialize(strategy().serialize({'a': [1, 2]})) == {'a': [1, 2]}


def test_combo_falls_back_to_a_strategy_that_can() -> None:
    # a builtin has no source to read: the combination keeps the by-value copy
    fn = ComputeSerializer(AllCodeStrategies()).deserialize(AllCodeStrategies().serialize(max))
    assert fn(1, 4) == 4
    assert AllDataStrategies().deserialize(AllDataStrategies().serialize({1, 2})) == {1, 2}
    with pytest.raises(SerializationError, match='every strategy of CombinedCode failed'):
        CombinedCode().serialize(3)


@pytest.mark.parametrize(
    'value',
    [
        DillCode,
        DillCode(),
        'DillCode',
        'tether.faas.DillCode',
        'globus_compute_sdk.serialize.DillCode',
    ],
)
def test_validate_strategylike_forms(value: object) -> None:
    checked = validate_strategylike(value, for_code=True)
    assert checked.type_ is DillCode
    assert checked.import_path == 'tether.faas.DillCode'


@pytest.mark.parametrize('value', ['os.system', 'evil.DillCode', '', 'no such', 3, object()])
def test_validate_strategylike_never_imports(value: object) -> None:
    with pytest.raises(UnknownStrategyError, match='Invalid strategy-like') as info:
        validate_strategylike(value)
    assert isinstance(info.value, ValueError)


def test_unknown_subclass_and_wrong_kind_refused() -> None:
    class Mine(DillCode):
        pass

    with pytest.raises(UnknownStrategyError, match='not a known serialization strategy'):
        validate_strategylike(Mine)
    with pytest.raises(UnknownStrategyError, match='code serialization strategy, expected a data'):
        validate_strategylike(DillCode, for_code=False)


@pytest.mark.parametrize('refused', SELECTABLE_STRATEGIES, ids=lambda s: s.__name__)
def test_allowlist_refuses_before_reading(refused: type[SerializationStrategy]) -> None:
    serializer = ComputeSerializer(
        allowed_deserializer_types=[s for s in SELECTABLE_STRATEGIES if s is not refused]
    )
    payload = refused().serialize(scale if refused.for_code else 'x')
    with pytest.raises(SerializerNotAllowedError, match=f'serializer {refused.__name__} disabled'):
        serializer.deserialize(payload)
    # the name is checked before the bytes: damaged bytes of a refused strategy are refused too
    with pytest.raises(SerializerNotAllowedError):
        serializer.deserialize(refused.__name__.encode() + b'\nnot a payload')


def test_allowlist_wildcards_and_rules() -> None:
    both = ComputeSerializer(
        allowed_deserializer_types=['tether.faas.*Code', AllowlistWildcard.DATA]
    )
    assert both.allowed_deserializer_types == frozenset(SELECTABLE_STRATEGIES)
    sdk_spelling = ComputeSerializer(
        allowed_deserializer_types=[
            'globus_compute_sdk.*Code',
            'globus_compute_sdk.serialize.JSONData',
        ]
    )
    assert sdk_spelling.allowed_deserializer_types == frozenset([*CODE, JSONData])
    with pytest.raises(UnknownStrategyError, match='Cannot mix'):
        ComputeSerializer(allowed_deserializer_types=[AllowlistWildcard.CODE, DillCode, JSONData])
    with pytest.raises(UnknownStrategyError, match='at least one code and one data'):
        ComputeSerializer(allowed_deserializer_types=[DillCode])
    assert ComputeSerializer().allowed_deserializer_types == frozenset()


def test_serialize_from_list_and_check_strategies() -> None:
    payload = ComputeSerializer.serialize_from_list(
        scale, ['gibberish', JSONData(), DillCodeSource]
    )
    assert payload.startswith(b'DillCodeSource\n')
    assert ComputeSerializer.serialize_from_list('x', []).startswith(b'DillDataBase64\n')
    with pytest.raises(SerializationError) as info:
        ComputeSerializer.serialize_from_list(scale, ['gibberish', JSONData()])
    group = info.value.__cause__
    assert isinstance(group, ExceptionGroup)
    assert len(group.exceptions) == 2
    fn, args, kwargs = ComputeSerializer(PureSourceDill(), JSONData()).check_strategies(
        scale, 2, factor=4
    )
    assert fn(*args, **kwargs) == 8
    assert (DillCode(), DillDataBase64()) == (DEFAULT_STRATEGY_CODE, DEFAULT_STRATEGY_DATA)


def test_endpoint_allowed_serializers() -> None:
    assert allowed_ids(None) is None
    assert allowed_ids(['DillCodeSource', 'json']) == frozenset({'source', 'json'})
    assert allowed_ids([AllowlistWildcard.CODE, 'JSONData']) == frozenset(
        {'pickle', 'source', 'json'}
    )
    assert allowed_ids(['AllCodeStrategies', 'tether']) == frozenset(
        {'source', 'pickle', 'tether'}
    )
    check_serializers(None, 'pickle', 'tether')
    check_serializers(['source', 'JSONData'], 'source', 'json')
    with pytest.raises(SerializerNotAllowedError, match="function was serialized with 'pickle'"):
        check_serializers(['source', 'json'], 'pickle', 'json')
    with pytest.raises(SerializerNotAllowedError, match="arguments were serialized with 'tether'"):
        check_serializers(['pickle', 'json'], 'pickle', 'tether')
    with pytest.raises(UnknownStrategyError, match='at least one code and one data'):
        allowed_ids(['pickle'])
    with pytest.raises(UnknownStrategyError, match='Invalid strategy-like'):
        allowed_ids(['pickle', 'yaml'])


def test_get_cached_by_class_shares_one_instance_of_known_strategies() -> None:
    first = SerializationStrategy.get_cached_by_class(JSONData)
    assert first is SerializationStrategy.get_cached_by_class(JSONData)
    assert first == JSONData()

    class Mine(JSONData):
        pass

    with pytest.raises(UnknownStrategyError, match='not a known serialization strategy'):
        SerializationStrategy.get_cached_by_class(Mine)
