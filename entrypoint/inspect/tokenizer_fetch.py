"""Whether openpi's trainer can download the PaliGemma tokenizer itself, when it is not staged.

openpi fetches `gs://big_vision/paligemma_tokenizer.model` with fsspec, which needs the `gcsfs` package in the
training Python (this interpreter: the launcher runs the image's python3) and a connection to Google Cloud
Storage's endpoint (gcsfs's default, or `STORAGE_EMULATOR_HOST`, which gcsfs honours). gcsfs connects directly:
its HTTP client ignores proxy variables. Without gcsfs the trainer fails in seconds ("Please install gcsfs");
without a connection it cannot download either.

The answer comes from `importlib.util.find_spec` (nothing imported) and one TCP connection attempt, bounded by
`PROBE_TIMEOUT_S` for the name lookup and again for the connection; no process is started, nothing is written. A
lookup or connection that does not answer in time is `UNKNOWN`, never `UNREACHABLE`: a slow network is not proof
of none.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

from entrypoint.core.messages import Text
from entrypoint.core.oserror import os_error_text
from entrypoint.inspect.messages import MESSAGES as M

GCS_ENDPOINT = "https://storage.googleapis.com"  # gcsfs's endpoint unless STORAGE_EMULATOR_HOST says otherwise
EMULATOR_VARIABLE = "STORAGE_EMULATOR_HOST"
PROBE_TIMEOUT_S = 2.0


class Fetch(StrEnum):
    """What the trainer can do about a tokenizer that is not staged."""

    REACHABLE = "reachable"  # gcsfs present and the endpoint accepts connections: openpi downloads it
    NO_GCSFS = "no-gcsfs"  # the training Python lacks gcsfs: openpi fails at its first batch
    UNREACHABLE = "unreachable"  # the endpoint's name does not resolve, or the connection is refused
    UNKNOWN = "unknown"  # no answer in time: cannot tell


@dataclass(frozen=True)
class FetchVerdict:
    """The verdict, the endpoint probed (host:port) and, when it failed, why (the system's words)."""

    state: Fetch
    endpoint: str
    reason: Text | None = None


def endpoint(env: Mapping[str, str]) -> tuple[str, int]:
    """(host, port) gcsfs connects to: `STORAGE_EMULATOR_HOST` (with or without a scheme) or Google's endpoint."""
    location = env.get(EMULATOR_VARIABLE) or GCS_ENDPOINT
    if "://" not in location:
        location = f"http://{location}"
    parts = urlsplit(location)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.hostname or "", port or (443 if parts.scheme == "https" else 80)


def gcsfs_present() -> bool:
    """Whether this interpreter can import gcsfs (found, not imported)."""
    try:
        return importlib.util.find_spec("gcsfs") is not None
    except (ImportError, ValueError):
        return False


def _lookup(host: str, port: int) -> list[tuple[int, tuple[str, int]]] | Text | None:
    """Addresses for host:port; the error when the name does not resolve; None when no answer in time."""
    import socket  # only when a tokenizer is missing: `check`'s start-up imports no networking
    import threading

    answer: list[list[tuple[int, tuple[str, int]]] | Text] = []

    def resolve() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            answer.append([(family, (str(addr[0]), int(addr[1]))) for family, _, _, _, addr in infos])
        except (OSError, UnicodeError) as exc:
            answer.append(os_error_text(exc))

    worker = threading.Thread(target=resolve, daemon=True)  # getaddrinfo itself has no timeout
    worker.start()
    worker.join(PROBE_TIMEOUT_S)
    return answer[0] if answer else None


def probe(env: Mapping[str, str]) -> FetchVerdict:
    """Whether the trainer can download the tokenizer from here: gcsfs first, then one connection to the endpoint."""
    host, port = endpoint(env)
    where = f"{host}:{port}"
    if not gcsfs_present():
        return FetchVerdict(Fetch.NO_GCSFS, where)
    if not host:
        return FetchVerdict(Fetch.UNREACHABLE, where, M("tokenizer-no-host", variable=EMULATOR_VARIABLE))
    found = _lookup(host, port)
    if found is None:
        return FetchVerdict(Fetch.UNKNOWN, where)
    if isinstance(found, Text):
        return FetchVerdict(Fetch.UNREACHABLE, where, found)
    if not found:
        return FetchVerdict(Fetch.UNREACHABLE, where, M("tokenizer-no-address"))
    family, address = found[0]
    import socket

    try:
        with socket.socket(family, socket.SOCK_STREAM) as connection:
            connection.settimeout(PROBE_TIMEOUT_S)
            connection.connect(address)
    except TimeoutError:
        return FetchVerdict(Fetch.UNKNOWN, where)
    except OSError as exc:
        return FetchVerdict(Fetch.UNREACHABLE, where, os_error_text(exc))
    return FetchVerdict(Fetch.REACHABLE, where)
