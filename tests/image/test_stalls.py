"""The stall watchdog in real containers: a rank that never joins a collective and a data loader that blocks are
detected within the bound, diagnosed with Python stacks, and end the node non-zero; a slow job and a slow
checkpoint write are not killed."""

from __future__ import annotations

import json

import pytest

from tests.image.conftest import CFS_IN_CONTAINER, run_container, tione_env
from tests.support.files import small_text

pytestmark = pytest.mark.image
BOUND_S = 8


def stalled_run(client, image, cfs, fault: str, **extra: str):
    settings = {
        "VLA_STALL_TIMEOUT": str(BOUND_S),
        "VLA_NUM_TRAIN_STEPS": "20",
        "VLA_LOG_INTERVAL": "1",
        "STANDIN_FAULT": fault,
        "VLA_MAX_RESTARTS": "0",  # restarts are tests/image/test_restarts.py's
    }
    env = tione_env(per_node=2, **(settings | extra))
    result = run_container(client, image, env=env, mounts={str(cfs): CFS_IN_CONTAINER}, timeout=180)
    (record_path,) = (cfs / "logs").glob("*[0-9].json")  # beside it: the node's `.stall.json` diagnosis
    return result, json.loads(small_text(record_path))


@pytest.mark.parametrize(
    "fault, frame, where",
    [
        ("hang-collective@1:3", "_hang_forever", "in_collective"),
        ("hang-dataloader@3", "_hang_forever", "in_dataloader"),
    ],
    ids=["rank-skips-collective", "dataloader-blocks"],
)
def test_stall_is_detected_diagnosed_and_fails_the_node(docker_client, built_image, cfs, fault, frame, where):
    result, record = stalled_run(docker_client, built_image, cfs, fault)
    assert result.code == 124, result.logs
    stall = record["stall"]
    print(
        f"\n{fault}: stalled {stall['silent_s']}s against a {stall['limit_s']}s bound; "
        f"container ran {result.seconds:.1f}s"
    )
    assert BOUND_S <= stall["silent_s"] < BOUND_S + 3
    assert record["outcome"]["class"] == "stalled"
    assert stall["diagnosis"]["method"] == "py-spy" and stall["diagnosis"][where]
    stacks = (cfs / "logs").glob("*.stacks.txt")
    assert frame in small_text(next(stacks))
    assert "STALL: no training progress" in result.stdout
    assert result.stdout.count("STALL: no flight recorder here") == 1  # gloo on torch 2.6: stacks decide
    assert stall["culprit"]["missing_nodes"] == [] and stall["flight_recorder"]["dumps"] == []


def test_silent_trainer_is_reported_but_warn_mode_keeps_it(docker_client, built_image, cfs):
    result, record = stalled_run(
        docker_client, built_image, cfs, "silent@2", VLA_STALL_ACTION="warn", VLA_NUM_TRAIN_STEPS="14"
    )
    assert result.code == 0, result.logs
    assert record["stall"]["action"] == "warn" and "stall_action=warn: training goes on" in result.stdout


def test_slow_steps_and_a_slow_checkpoint_write_are_not_killed(docker_client, built_image, cfs):
    env = tione_env(
        per_node=2,
        VLA_STALL_TIMEOUT="6",
        VLA_NUM_TRAIN_STEPS="8",
        VLA_LOG_INTERVAL="1",
        VLA_SAVE_INTERVAL="4",
        STANDIN_STEP_SECONDS="1",
        STANDIN_SAVE_SECONDS="3",
    )
    result = run_container(docker_client, built_image, env=env, mounts={str(cfs): CFS_IN_CONTAINER}, timeout=180)
    assert result.code == 0, result.logs
    assert "STALL" not in result.stdout
