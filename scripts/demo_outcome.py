"""What a `scripts/demo` run did, from node 0's start-up record: when the experiment had already reached its last
save (a second demo into the same folder), say that nothing was trained and how to train again.
    python3 -m scripts.demo_outcome CFS_DIR
Prints nothing for a run that trained; exits 0 either way (the job's exit codes are the demo's verdict)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

RECORD_LIMIT = 16 << 20  # a start-up record is tens of kilobytes


def finished_step(logs: Path) -> int | None:
    """The step node 0's newest record says the experiment was already trained to; None when it trained (or there
    is no readable record)."""
    records = sorted(logs.glob("*-node0-*.json"), key=lambda p: p.stat().st_mtime)
    records = [r for r in records if not r.name.endswith((".error.json", ".stall.json"))]
    if not records or records[-1].stat().st_size > RECORD_LIMIT:
        return None
    try:
        record = json.loads(records[-1].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if record.get("outcome", {}).get("class") != "already-finished":
        return None
    step = record.get("plan", {}).get("resume", {}).get("step")
    return step if isinstance(step, int) else -1


def message(cfs: Path, step: int) -> str:
    reached = f"step {step}" if step >= 0 else "its last save"
    return (
        f"demo: nothing was trained: {cfs} already holds this experiment, trained to {reached} by an earlier demo, so "
        "each node ended at once (exit 0).\n"
        "demo: to train again: VLA_OVERWRITE=1 scripts/demo (the old experiment is moved aside, never deleted), "
        "VLA_EXP_NAME=<new name> scripts/demo, or scripts/demo <another folder>.\n"
        f"demo: 没有训练:{cfs} 中的该实验已由之前的演示训练到 {reached},各节点立即结束(退出码 0)。\n"
        "demo: 如需重新训练:VLA_OVERWRITE=1 scripts/demo(旧实验会被移到一旁,不会删除)、"
        "VLA_EXP_NAME=<新名称> scripts/demo,或 scripts/demo <另一个目录>。"
    )


def main(argv: list[str]) -> int:
    cfs = Path(argv[0])
    step = finished_step(cfs / "logs")
    if step is not None:
        print(message(cfs, step))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
