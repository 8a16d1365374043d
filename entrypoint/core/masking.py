"""Secrets never reach logs or records: values of secret-looking variable names are masked."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping

SECRET_NAME = re.compile(r"TOKEN|PASSWORD|PASSWD|SECRET|KEY|CREDENTIAL", re.IGNORECASE)


def masked(values: Mapping[str, str]) -> dict[str, str]:
    """A sorted copy with the values of secret-looking names (`*TOKEN*`, `*PASSWORD*`, `*SECRET*`, `*KEY*`) hidden."""
    return {k: ("***" if SECRET_NAME.search(k) and v else v) for k, v in sorted(values.items())}


def safe_url(source: str) -> str:
    """`source` safe for logs: a URL loses its user info and query (signed URLs carry credentials there)."""
    parts = urllib.parse.urlsplit(source)
    if not parts.scheme or len(parts.scheme) == 1:  # a plain path (or a Windows drive letter)
        return source
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    query = "?…" if parts.query else ""
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", "")) + query
