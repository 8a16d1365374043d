"""pytest plugin for a run with one mutant switched on by `MUTANT_UNDER_TEST` (`-p scripts.mutant_env`).

Tests that run the CLI in-process replace the environment wholesale (`mock.patch.dict(os.environ, ..., clear=True)`),
which would switch the mutant off for the code they reach; mutmut's own runs keep a process-local copy, and this
plugin sets that copy for runs started by hand or by `scripts/mutation`'s fresh-import recheck.
"""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    name = os.environ.get("MUTANT_UNDER_TEST")
    if name:
        from mutmut.mutation.trampoline import set_mutant_under_test

        set_mutant_under_test(name)
