"""TaPS's module of the failure-injection application (see :mod:`tether.bench.apps.failures`)."""

from __future__ import annotations

from tether.bench.apps.failures import FailureInjectionApp, FailuresApp

__all__ = ['FailureInjectionApp', 'FailuresApp']
