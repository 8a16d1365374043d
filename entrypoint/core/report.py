"""Human-readable output: the health-check summary, a command-ending error and the command line.

The banner lines (`== ... health check: ... ==`, `== health check summary: PASS (...) ==`) stay English in
every language: scripts and tests look for them in logs. Everything printed here is masked (`core.masking`): a
finding or an error may quote a value that carries a secret.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TextIO

from entrypoint import __version__
from entrypoint.core.errors import UserError
from entrypoint.core.findings import Finding, Status
from entrypoint.core.masking import mask_argv, mask_text
from entrypoint.core.messages import Lang, render

_LABEL = {Status.PASS: "PASS", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "SKIP"}


def health_summary(findings: Sequence[Finding], heading: str, lang: Lang | str, out: TextIO) -> None:
    """One line per check with PASS/WARN/FAIL (SKIP: not checked on this machine), the fix under each problem,
    then the overall verdict; skips are counted only when there are any (a node's summary line never changes)."""
    print(f"== vla-entrypoint {__version__} health check: {heading} ==", file=out)
    width = max((len(f.id) for f in findings), default=10)
    pad = " " * (width + 10)
    for finding in findings:
        lead = f"  {_LABEL[finding.status]}  {finding.id:<{width}}  "
        print(mask_text(render(finding.message, lang, lead=lead)), file=out)
        if finding.status is not Status.PASS and finding.hint:
            print(mask_text(render(finding.hint, lang, lead=pad + "-> ")), file=out)
    counts = {s: sum(1 for f in findings if f.status is s) for s in Status}
    verdict = "FAIL" if counts[Status.FAIL] else "PASS"
    skips = f", {counts[Status.SKIP]} skip" if counts[Status.SKIP] else ""
    print(
        f"== health check summary: {verdict} ({counts[Status.PASS]} pass, {counts[Status.WARN]} warn, "
        f"{counts[Status.FAIL]} fail{skips}) ==",
        file=out,
        flush=True,
    )


def problem_block(error: UserError, chinese: bool = True) -> str:
    """A command-ending error in both languages (this is what a failed job leaves in its log); English alone when
    the output cannot hold Chinese (`chinese` false)."""
    english = (
        f"vla-entrypoint: error [{error.id}] at {error.where}\n  problem: {error.what.en}\n  fix:     {error.fix.en}"
    )
    if not chinese:
        return mask_text(english)
    return mask_text(f"{english}\n  错误:    {error.what.zh}\n  解决:    {error.fix.zh}")


def command_line(command: list[str], cwd: str) -> str:
    """The command as a shell line, for display: secret flag values and URL credentials masked."""
    return f"cd {shlex.quote(mask_text(cwd))} && " + shlex.join(mask_argv(command))
