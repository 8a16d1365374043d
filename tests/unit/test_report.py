"""The job report: `vla-entrypoint report` over the files a job leaves, and the report `run` writes by itself.

Job folders are made by hand (`tests.support.jobfiles`) in the shapes the launcher writes; one case runs the real
`run` (with the unit tier's stand-in torchrun) and reads what it left, so the report cannot drift from the record.
The page is checked as a user would: the cause line first, every node and restart in the timeline, one chart point
per logged step, nothing it would load from elsewhere, no secret."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from entrypoint.launch.culprit import report_path as stall_report_path
from entrypoint.launch.restarts import GAVE_UP_FILE
from entrypoint.plan import REPORT_SUFFIX, NodeFiles
from entrypoint.report import collect
from entrypoint.report.collect import Experiment
from entrypoint.report.summary import LIMIT, cause_summary
from tests.support.edges import run_cli
from tests.support.jobfiles import EXP, plant, record, restarted_job, step_lines
from tests.unit.conftest import World

LIMIT_S = 60.0
# What a page could load or run: a tag that fetches, an attribute that points elsewhere, CSS that imports.
EXTERNAL = re.compile(
    r"<(?:script|link|iframe|img|object|embed|audio|video|source)\b|<[^>]*\b(?:src|href)\s*=|url\(|@import", re.I
)


def report(world: World, *args: str, **env: str) -> tuple[int, str, str]:
    """`vla-entrypoint report ARGS` in a child: (exit code, stdout + stderr, the page or '')."""
    done = run_cli(world, ("report", *args), env, LIMIT_S)
    assert "Traceback" not in done.text, done.text
    page = world.assets / "logs" / f"{EXP}-report.html"
    return done.code, done.text, page.read_text(encoding="utf-8") if page.is_file() else ""


def test_a_restarted_two_node_job_on_one_page(world: World) -> None:
    restarted_job(world.assets / "logs")
    code, out, page = report(world)
    assert code == 0, out
    assert out.startswith("SUCCEEDED: all 2 node(s) exited 0; reached step 30 (loss 0.05); recovered from 1 restart")
    body = page.split("<body>", 1)[1]
    assert body.startswith('<p id="cause" class="cause ok">SUCCEEDED: all 2 node(s) exited 0')  # the first line
    assert "成功:全部 2 个节点以 0 退出" in body
    for heading in ("Timeline per node · 各节点时间线", "Loss · 损失", "Exit codes · 退出码", "Checkpoints saved"):
        assert heading in page
    rows = re.findall(r'<g class="node-row ok" data-node="(\d)"', page)
    assert rows == ["0", "1"]
    assert (
        len(re.findall(r'<g class="restart" data-node="\d" data-attempt="1" data-cause="collective-error"', page)) == 2
    )
    loss_chart = page[page.index('id="loss-chart"') : page.index("</svg>", page.index('id="loss-chart"'))]
    assert loss_chart.count('<circle class="pt"') == 13 + 21  # every logged step, both attempts
    assert re.findall(r"<td>node 0 · 20261205-150000</td><td class=\"num\">(\d+)</td>", page) == [
        "5", "10", "15", "20", "25", "30",
    ]  # fmt: skip
    assert not EXTERNAL.search(page), EXTERNAL.search(page)
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert len(page.encode()) < 1 << 20
    assert sorted(p.name for p in (world.assets / "logs").iterdir() if p.name.startswith(".")) == []  # no temp left


def test_json_is_the_same_content(world: World) -> None:
    restarted_job(world.assets / "logs")
    done = run_cli(world, ("report", "--json"), {}, LIMIT_S)
    assert done.code == 0, done.text
    data = json.loads(done.out)
    assert next(iter(data)) == "summary" and data["summary"].startswith("SUCCEEDED")
    assert data["summary_zh"].startswith("成功")
    runs = {r["node_rank"]: r for r in data["runs"]}
    assert runs[0]["attempts"][0]["cause"] == "collective-error" and runs[0]["attempts"][1]["resumed_step"] == 10
    assert runs[0]["log_scan"]["progress_lines"] == 34 and len(runs[0]["log_scan"]["points"]) == 34
    assert [c["step"] for c in runs[0]["checkpoints"]] == [5, 10, 15, 20, 25, 30]
    assert not (world.assets / "logs" / f"{EXP}-report.html").exists()  # --json prints; it writes no page


def failed_stall(folder: Path) -> None:
    """Node 0 ended 124 after a stall that named rank 3 on node 1; node 1 ended with its workers."""
    culprit = {"method": "stacks", "ranks": [3], "nodes": [1], "why": "their stack differs", "missing_nodes": []}
    attempts = [{"attempt": 0, "started_s": 1.0, "cause": "stall", "detected_s": 30.0}]
    zero = record(0, code=124, klass="stalled", attempts=attempts, stall={"silent_s": 30.0, "culprit": culprit})
    zero["outcome"]["root_cause"] = "no progress for 30.0s"  # type: ignore[index]
    plant(folder, 0, log=step_lines(range(0, 12)), body=zero)
    one = record(1, code=1, klass="training-crashed")
    one["outcome"]["root_cause"] = "RuntimeError: Connection closed by peer"  # type: ignore[index]
    plant(folder, 1, log="", body=one)


def do_not_requeue(folder: Path) -> None:
    attempts = [
        {"attempt": 0, "started_s": 1.0, "cause": "trainer-exception", "detail": "RuntimeError: boom at step 3"},
        {"attempt": 1, "started_s": 5.0, "cause": "trainer-exception", "detail": "RuntimeError: boom at step 3"},
    ]
    body = record(0, nnodes=1, code=93, klass="do-not-requeue", attempts=attempts)
    body["outcome"].update(verdict="same-exception", root_cause="RuntimeError: boom at step 3")  # type: ignore[attr-defined]
    plant(folder, 0, log=step_lines(range(0, 3)), body=body, gave_up="same-exception")


def missing_node(folder: Path) -> None:
    plant(folder, 0, log=step_lines(range(0, 5)), body=record(0, nnodes=3))
    plant(folder, 1, log="", body=record(1, nnodes=3))


def still_running(folder: Path) -> None:
    plant(folder, 0, log=step_lines(range(0, 7)), body=record(0, nnodes=1, code=None), attempts={0: {}, 1: {}})


def already_finished(folder: Path) -> None:
    for rank in (0, 1):
        plant(folder, rank, log="", body=record(rank, code=0, klass="already-finished"))


@pytest.mark.parametrize(
    ("make", "first", "zh", "also"),
    [
        pytest.param(
            failed_stall,
            "FAILED: node 0 exited 124 (stalled): no progress for 30.0s; culprit rank(s) 3 on node(s) 1",
            "失败:节点 0 以 124 退出",
            ["also node 1 exited 1"],
            id="stall-culprit",
        ),
        pytest.param(
            do_not_requeue,
            "FAILED: node 0 exited 93 (do-not-requeue, same-exception): RuntimeError: boom at step 3; 1 restart(s) "
            "(trainer-exception)",
            "失败:节点 0 以 93 退出",
            [],
            id="do-not-requeue",
        ),
        pytest.param(
            missing_node,
            "SUCCEEDED: all 2 node(s) exited 0",
            "节点 2 没有留下任何文件",
            ["no file at all from node(s) 2"],
            id="a-node-without-files",
        ),
        pytest.param(
            still_running,
            "NO OUTCOME: node(s) 0 recorded none",
            "没有结果",
            ["last step seen 30", "1 restart(s) (?)"],
            id="no-outcome-yet",
        ),
        pytest.param(already_finished, "ALREADY FINISHED: all 2 node(s)", "已完成", [], id="already-finished"),
    ],
)
def test_the_cause_line(tmp_path: Path, make, first: str, zh: str, also: list[str]) -> None:  # type: ignore[no-untyped-def]
    make(tmp_path)
    summary = cause_summary(collect.collect(tmp_path, EXP))
    assert summary.en.startswith(first), summary.en
    assert zh in summary.zh
    for part in also:
        assert part in summary.en, summary.en
    assert "\n" not in summary.en and len(summary.en) <= LIMIT and len(summary.zh) <= LIMIT


def test_the_cause_line_is_bounded_whatever_the_root_cause(tmp_path: Path) -> None:
    body = record(0, nnodes=1, code=1, klass="training-crashed")
    body["outcome"]["root_cause"] = "ValueError: " + "x" * 5000  # type: ignore[index]
    plant(tmp_path, 0, log="", body=body)
    summary = cause_summary(collect.collect(tmp_path, EXP))
    assert len(summary.en) == LIMIT and summary.en.endswith("…")


def test_no_run_of_the_experiment_is_exit_3_with_the_fix(world: World) -> None:
    plant(world.assets / "logs", 0, body=record(0), exp="another_experiment")
    code, out, page = report(world)
    assert code == 3 and page == ""
    assert "no file of experiment pi05_libero_pytorch" in out and "--exp-name" in out and "没有实验" in out
    code, out, page = report(world, "--exp-name", "another_experiment")
    assert code == 0 and "another_experiment-report.html" in out


def test_only_an_earlier_report_is_replaced_and_out_chooses_the_place(world: World) -> None:
    restarted_job(world.assets / "logs")
    page = world.assets / "logs" / f"{EXP}-report.html"
    page.mkdir()  # a folder where the page goes
    code, out, _ = report(world)
    assert code == 3 and "is a folder, not a report" in out and "--out" in out and "不是报告" in out
    page.rmdir()
    page.write_text("my notes about this run\n")  # a file of the user's
    code, out, _ = report(world)
    assert code == 3 and "never overwritten" in out and page.read_text() == "my notes about this run\n"
    page.unlink()
    assert report(world)[0] == 0 and report(world)[0] == 0  # an earlier report of ours is replaced
    elsewhere = world.root / "elsewhere" / "job.html"
    code, out, _ = report(world, "--out", str(elsewhere))
    assert code == 0 and elsewhere.read_text().startswith("<!DOCTYPE html>")
    (world.root / "a-file").write_text("")
    code, out, _ = report(world, "--out", str(world.root / "a-file" / "x.html"))
    assert code == 3 and "cannot be written" in out


def test_secrets_stay_masked_in_the_page_and_the_json(world: World) -> None:
    folder = world.assets / "logs"
    body = record(0, nnodes=1, code=1, klass="training-crashed")
    body["outcome"]["root_cause"] = "ValueError: --wandb-key=9f8e7d6c5b4a3 https://bob:hunter2pass@host/x"  # type: ignore[index]
    log = step_lines(range(3)) + "HF_TOKEN=hf_abcdefghijklmnop123 in the environment\n"
    plant(folder, 0, log=log, body=body)
    code, _, page = report(world)
    done = run_cli(world, ("report", "--json"), {}, LIMIT_S)
    assert code == 0 and done.code == 0
    for secret in ("9f8e7d6c5b4a3", "hunter2pass", "hf_abcdefghijklmnop123"):
        assert secret not in page and secret not in done.out, secret
    assert "***" in page


def test_markup_in_the_files_is_shown_as_text(world: World) -> None:
    body = record(0, nnodes=1, code=1, klass="<script>alert(1)</script>")
    body["host"] = '<img src="http://x/y.png">'
    plant(world.assets / "logs", 0, log="<iframe src=//x></iframe>\n" + step_lines(range(2)), body=body)
    code, _, page = report(world)
    assert code == 0 and not EXTERNAL.search(page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_run_writes_the_report_on_node_0_and_plan_shows_where(world: World) -> None:
    """The real `run` (stand-in torchrun): the report and the event folder are where `plan --json` said."""
    env = {"VLA_METRICS_INTERVAL": "0"}
    planned = json.loads(run_cli(world, ("plan", "--json"), env, LIMIT_S).out)["launch"]
    logs = world.assets / "logs"
    assert planned["report"] == str(logs / f"{EXP}-report.html")
    assert re.fullmatch(rf"{re.escape(str(logs))}/tensorboard/{EXP}/node0-\d{{8}}-\d{{6}}", planned["events_dir"])
    assert planned["metrics_interval_s"] == 0
    done = run_cli(world, ("run",), {**env, "FAKE_TORCHRUN_EXIT": "1", "FAKE_TORCHRUN_TRACEBACK": "1"}, LIMIT_S)
    assert done.code == 1
    assert f"report of the whole job: {planned['report']}" in done.out
    page = Path(planned["report"]).read_text()
    assert "FAILED: node 0 exited 1 (training-crashed): ValueError: batch_size=0 on rank 3" in page
    (events,) = (logs / "tensorboard" / EXP).iterdir()
    assert events.name.startswith("node0-") and list(events.glob("events.out.tfevents.*"))
    lines = done.out.rstrip().splitlines()
    assert lines[-2].startswith("vla-entrypoint: node log")  # the node's files stay the last line


@pytest.mark.parametrize(
    ("exit_code", "written"),
    [pytest.param("0", False, id="worker-succeeds-leaves-it-to-node-0"), pytest.param("1", True, id="worker-fails")],
)
def test_a_worker_node_writes_the_report_only_on_its_own_failure(world: World, exit_code: str, written: bool) -> None:
    env = world.tione(nodes=2, per_node=8, rank=1, VLA_MASTER_WAIT_TIMEOUT="0", FAKE_TORCHRUN_EXIT=exit_code)
    done = run_cli(world, ("run",), env, LIMIT_S)
    assert done.code == int(exit_code), done.text
    assert (world.assets / "logs" / f"{EXP}-report.html").exists() is written
    assert ("report of the whole job" in done.out) is written


def test_the_names_the_report_reads_are_the_ones_run_writes(tmp_path: Path) -> None:
    log = tmp_path / f"{EXP}-node0-20261205-150000.log"
    files = NodeFiles("20261205-150000", log)
    assert files.record == log.with_name(log.stem + collect.RECORD_SUFFIX)
    assert files.attempts == log.with_name(log.stem + collect.ATTEMPTS_SUFFIX)
    assert stall_report_path(log) == log.with_name(log.stem + collect.STALL_SUFFIX)
    assert GAVE_UP_FILE == collect.GAVE_UP_FILE and REPORT_SUFFIX == collect.REPORT_SUFFIX


def test_only_the_newest_runs_are_read(tmp_path: Path) -> None:
    for minute in range(collect.MAX_RUNS + 5):
        plant(tmp_path, 0, f"20261205-15{minute:02d}00", log="", body=record(0, nnodes=1))
    experiment: Experiment = collect.collect(tmp_path, EXP)
    assert len(experiment.runs) == collect.MAX_RUNS and experiment.older_runs == 5
    assert experiment.runs[-1].stamp == f"20261205-15{collect.MAX_RUNS + 4:02d}00"


def test_logs_are_read_newest_first_within_the_reading_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect, "READ_BUDGET", 3000)
    for minute in range(4):
        plant(tmp_path, 0, f"20261205-15{minute:02d}00", log=step_lines(range(20)), body=record(0, nnodes=1))
    runs = collect.collect(tmp_path, EXP).runs
    read = [run.scan is not None for run in runs]
    assert read == [False, False, True, True]  # each log is about 1.6 kB: the two newest use the budget
    assert "used the report's" in runs[0].problems[0].en and "读取额度" in runs[0].problems[0].zh


@pytest.mark.parametrize(
    ("health", "shown"),
    [
        pytest.param(
            {"status": "pass", "checks": [{"id": "gpu.ecc", "status": "pass", "message": "no uncorrected ECC error"}]},
            ["<th>id</th><th>status</th><th>message</th>", "<td>gpu.ecc</td>", "no uncorrected ECC error"],
            id="checks-table",
        ),
        pytest.param(["odd", 3], ["[&quot;odd&quot;, 3]"], id="any-shape"),
    ],
)
def test_health_is_shown_when_a_record_has_it(tmp_path: Path, health: object, shown: list[str]) -> None:
    from entrypoint.report.html import page

    plant(tmp_path, 0, log="", body=record(0, nnodes=1, health=health))
    plant(tmp_path, 0, "20261205-140000", log="", body=record(0, nnodes=1))  # an older run without health
    experiment = collect.collect(tmp_path, EXP)
    html = page(experiment, cause_summary(experiment))
    assert "Node health checks · 节点健康检查" in html
    section = html[html.index('<section id="health">') :]
    section = section[: section.index("</section>")]
    assert "20261205-140000" not in section
    for text in shown:
        assert text in section


def test_no_health_section_without_health(tmp_path: Path) -> None:
    from entrypoint.report.html import page

    plant(tmp_path, 0, log="", body=record(0, nnodes=1))
    experiment = collect.collect(tmp_path, EXP)
    assert 'id="health"' not in page(experiment, cause_summary(experiment))
