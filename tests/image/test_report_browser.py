"""The job report of a real two-container job, seen in a real browser.

Two containers of the image run a 2-node job (real torchrun and gloo, the stand-in trainer); a worker on node 1 is
killed at step 12, every node restarts its workers once and the job ends 0. Node 0 then writes the report by itself.
Headless Chromium (Debian's package, driven through its DevTools protocol) opens it from the CFS folder: the page
logs no console error and requests nothing but itself; its timeline has both nodes and the restart; its loss chart
has one point per progress line in node 0's log. The full-page screenshot is kept in `.work/artifacts/` (and its top,
which docs/report.png is). The same
job's TensorBoard event files are read back with TensorBoard's own reader."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.image.containers import Sandbox, start_two_nodes
from tests.support.browser import Chromium

pytestmark = pytest.mark.image
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / ".work" / "artifacts"
EXP = "pi05_libero_pytorch"
JOB = {
    "VLA_MAX_RESTARTS": "2",
    "VLA_NUM_TRAIN_STEPS": "24",
    "VLA_SAVE_INTERVAL": "5",
    "VLA_LOG_INTERVAL": "1",
    "VLA_PREFLIGHT": "off",
    "VLA_METRICS_INTERVAL": "2",
    "STANDIN_STEP_SECONDS": "0.3",
}
STEP_LINE = re.compile(r"\bstep=\d+ loss=")


@pytest.fixture
def sandbox(docker_client, built_image) -> Iterator[Sandbox]:
    with Sandbox(docker_client, built_image) as box:
        yield box


def test_the_report_of_a_restarted_two_node_job_in_headless_chromium(sandbox: Sandbox, cfs: Path) -> None:
    if shutil.which("chromium") is None:
        pytest.fail("chromium is missing: run scripts/setup-tools test (as root) first", pytrace=False)
    node0, node1 = start_two_nodes(sandbox, cfs, **JOB)
    node0.wait_for(r"step=12 loss", timeout=240)
    assert node1.exec(["kill", "-KILL", str(max(node1.workers()))])[0] == 0
    codes = (node0.exit(240), node1.exit(240))
    assert codes == (0, 0), node0.output[-6000:] + node1.output[-4000:]
    assert "RESTART 1/2" in node0.output
    report = cfs / "logs" / f"{EXP}-report.html"
    assert f"report of the whole job: /home/tione/notebook/embodied-ai/openpi-assets/logs/{report.name}" in node0.output
    assert "report of the whole job" not in node1.output  # a worker node that ends 0 leaves it to node 0
    (log0,) = (cfs / "logs").glob(f"{EXP}-node0-*.log")
    logged = sum(1 for line in log0.read_text(errors="replace").splitlines() if STEP_LINE.search(line))

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-browser.png"
    with Chromium(height=1200) as browser:
        seen = browser.load(report.as_uri())
        cause = browser.evaluate("document.body.firstElementChild.innerText")
        rows = "[...document.querySelectorAll('#timeline-chart g.node-row')]"
        nodes = browser.evaluate(f"{rows}.map(g => g.dataset.node)")
        restarts = browser.evaluate(
            "[...document.querySelectorAll('#timeline-chart g.restart')].map(g => [g.dataset.node, g.dataset.cause])"
        )
        points = browser.evaluate("document.querySelectorAll('#loss-chart circle.pt').length")
        headings = browser.evaluate("[...document.querySelectorAll('h2')].map(h => h.innerText)")
        browser.screenshot(shot)
        browser.screenshot(ARTIFACTS / "report-browser-top.png", height=1500)  # the README's picture
    print(f"\nreport {report} ({report.stat().st_size} bytes); screenshot {shot}")
    assert seen.errors == [] and seen.other_requests == [], (seen.console, seen.requests)
    assert cause.startswith("SUCCEEDED: all 2 node(s) exited 0") and "1 restart(s)" in cause, cause
    assert "成功" in cause
    assert sorted(nodes) == ["0", "1"]
    assert sorted(node for node, _ in restarts) == ["0", "1"], restarts
    assert all(why in ("collective-error", "worker-exited", "peer-restarted") for _, why in restarts), restarts
    assert points == logged and logged >= 24, (points, logged)
    assert "Timeline per node · 各节点时间线" in headings and "Exit codes · 退出码" in headings
    assert shot.stat().st_size > 10_000

    (events,) = (cfs / "logs" / "tensorboard" / EXP).glob("node0-*")
    accumulator = EventAccumulator(str(events))
    accumulator.Reload()
    steps = [e.step for e in accumulator.Scalars("train/loss")]
    assert len(steps) == logged and max(steps) == 23
    assert [e.value for e in accumulator.Scalars("events/restart")] == [1.0]
    assert [e.value for e in accumulator.Scalars("events/exit_code")] == [0.0]
    assert "no GPU samples in the event files" in node0.output  # CPU containers: said once
    assert node0.output.count("no GPU samples in the event files") == 1
