"""Application options refused with TaPS's sentences, and TaPS's option names accepted."""

from __future__ import annotations

import pydantic
import pytest

from tether.bench.apps.cholesky import CholeskyApp, CholeskyAppConfig
from tether.bench.apps.failures import FailuresAppConfig
from tether.bench.apps.fedlearn import FedLearnApp, FedLearnAppConfig
from tether.bench.apps.moldesign import MolDesignAppConfig
from tether.exceptions import ConfigError


@pytest.mark.parametrize(('matrix', 'block'), [(0, 5), (5, 0), (-1, 5)])
def test_cholesky_sizes_positive(matrix: int, block: int) -> None:
    with pytest.raises(pydantic.ValidationError, match='must be greater than 0'):
        CholeskyAppConfig(matrix_size=matrix, block_size=block)
    with pytest.raises(ValueError, match='must be greater than 0'):
        CholeskyApp(matrix, block)


def test_cholesky_block_fits_the_matrix() -> None:
    sentence = 'The matrix size must be greater than or equal to the block size.'
    with pytest.raises(pydantic.ValidationError, match=sentence):
        CholeskyAppConfig(matrix_size=1, block_size=2)
    with pytest.raises(ValueError, match=sentence):
        CholeskyApp(1, 2)
    # Ragged tiles stay allowed (TaPS refuses a size that is not a multiple).
    assert CholeskyAppConfig(matrix_size=16, block_size=5).get_app().block_size == 5


@pytest.mark.parametrize('rate', [-0.1, 2.1])
def test_failure_rate_range(rate: float) -> None:
    with pytest.raises(pydantic.ValidationError, match=r'in the range \[0, 1\]\. Got'):
        FailuresAppConfig(base='synthetic', failure_rate=rate)
    assert FailuresAppConfig(base='synthetic', failure_rate=1).failure_rate == 1


def test_moldesign_initial_count() -> None:
    with pytest.raises(pydantic.ValidationError, match='Number of initial calculations'):
        MolDesignAppConfig(initial_count=3)
    assert MolDesignAppConfig(initial_count=4).initial_count == 4


def test_fedlearn_dataset_names() -> None:
    assert isinstance(FedLearnAppConfig().get_app(), FedLearnApp)
    assert FedLearnAppConfig(dataset='Digits').dataset == 'digits'
    config = FedLearnAppConfig(dataset='MNIST', data_dir='somewhere')
    assert config.dataset == 'mnist'
    assert config.data_dir.is_absolute()
    with pytest.raises(ConfigError, match='torchvision'):
        config.get_app()
    with pytest.raises(pydantic.ValidationError, match='dataset must be one of'):
        FedLearnAppConfig(dataset='imagenet')


def test_register_errors_keep_taps_builtin_bases() -> None:
    from tether.bench.registry import register
    from tether.exceptions import PluginKindError, PluginRegistrationError

    class Nameless(pydantic.BaseModel):
        pass

    with pytest.raises(ValueError, match='Unknown plugin type "test"') as kind:
        register('test')(Nameless)  # type: ignore[arg-type]
    assert isinstance(kind.value, (PluginKindError, ConfigError))
    with pytest.raises(RuntimeError, match='Failed to register Nameless as a app plugin') as reg:
        register('app')(Nameless)
    assert isinstance(reg.value, (PluginRegistrationError, ConfigError))

    class Taken(pydantic.BaseModel):
        name: str = 'cholesky'

    with pytest.raises(PluginRegistrationError, match='already registered'):
        register('app')(Taken)
