"""NCCL's debug routing: the variables that make NCCL write its INIT and NET INFO lines to one file per rank.

The plan needs only this; `nccl_log` reads those files after training (its parser is not imported to plan).
"""

from __future__ import annotations

from collections.abc import Mapping

LOG_PATTERN = "nccl.%h.%p.log"
DEBUG_VARIABLES = ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS")


def debug_env(log_dir: str, platform: Mapping[str, str]) -> dict[str, str]:
    """Variables that make NCCL write INFO lines for INIT and NET to `<log_dir>/nccl.<host>.<pid>.log`.

    `platform` is the environment plus NCCL config-file values (`FabricPlan.env_kept` holds the NCCL ones).
    Empty when the user already set `NCCL_DEBUG`, `NCCL_DEBUG_FILE` or `NCCL_DEBUG_SUBSYS` (even empty): their
    debug output is theirs, and `nccl_log.parse_lines` can still read a node log that captured it."""
    if any(name in platform for name in DEBUG_VARIABLES):
        return {}
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "NCCL_DEBUG_FILE": f"{log_dir.rstrip('/')}/{LOG_PATTERN}",
    }
