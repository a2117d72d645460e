"""TaPS's homes of the application configs: ``tether.bench.apps.configs.<app>``.

Each module re-exports its application's config under TaPS's class name
(``CholeskyConfig`` is :class:`~tether.bench.apps.cholesky.CholeskyAppConfig`, ...). The
configs themselves live beside their applications.
"""

from __future__ import annotations

__all__: list[str] = []
