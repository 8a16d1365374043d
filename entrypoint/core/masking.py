"""Secrets never reach logs or records: values of secret-looking variable names are masked."""

from __future__ import annotations

import re
from collections.abc import Mapping

SECRET_NAME = re.compile(r"TOKEN|PASSWORD|PASSWD|SECRET|KEY|CREDENTIAL", re.IGNORECASE)


def masked(values: Mapping[str, str]) -> dict[str, str]:
    """A sorted copy with the values of secret-looking names (`*TOKEN*`, `*PASSWORD*`, `*SECRET*`, `*KEY*`) hidden."""
    return {k: ("***" if SECRET_NAME.search(k) and v else v) for k, v in sorted(values.items())}
