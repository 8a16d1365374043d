"""Secrets never reach output: the `secrets` family of edge cases, plus the masking rules themselves.

Each case plants credentials where users really put them — trainer flags in `VLA_EXTRA_ARGS`, `--extra-args` and the
job file's `extra_args` (both `--flag=value` and `--flag value`), secret variables in the job file's `env`, a URL's
user info and signed query strings in `VLA_TACO_WHEEL`, `fetch-assets --base-url` and a manifest, secrets echoed
by training itself — and runs the real command line (`tests/support/edges.py`): the harness proves the secret is
absent from stdout, stderr, the node log and the start-up record; `test_secret_is_nowhere_on_disk` proves more:
no file the launcher wrote under the world holds it.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from entrypoint.core import masking
from entrypoint.core.findings import Status
from entrypoint.core.masking import (
    MASK,
    MaskedStream,
    StreamMask,
    mask_argv,
    mask_json,
    mask_text,
    masked,
    secret_name,
    secrets_in,
)
from entrypoint.core.settings import load_settings
from entrypoint.net.source import DownloadOptions
from entrypoint.taco.activate import ActivationStatus, activate_taco
from entrypoint.taco.plan import plan_taco
from tests.support.edges import Edge, WorldLike, check_edge
from tests.support.files import holding, small_text
from tests.support.httpserver import serve
from tests.support.synthetic import CONFIG, REPO_ID
from tests.support.taco_wheel import interpreter_tag
from tests.unit.conftest import World

FAMILY = "secrets"
LIVE: dict[str, str] = {}  # the module's HTTP server (every request answered 404): its base URL
WHEEL = f"taco_train-0.1.0-{interpreter_tag()}.whl"
NORM_STATS = Path("assets") / CONFIG / REPO_ID / "norm_stats.json"
ERROR = "trainer.error.json"  # the user's own TORCHELASTIC_ERROR_FILE: training writes it, not the launcher


@pytest.fixture(scope="module", autouse=True)
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real server on 127.0.0.1 that serves nothing: every download from it fails with 404."""
    with serve(tmp_path_factory.mktemp("empty-server")) as server:
        LIVE["url"] = server.url
        yield server.url


@pytest.fixture(autouse=True)
def fresh_masking() -> Iterator[None]:
    """Values remembered by one in-process test do not mask the next one's output."""
    masking.forget()
    yield
    masking.forget()


# ---- setups: what the user did besides the variables ----


def job_file(text: str) -> Callable[[WorldLike], None]:
    def setup(world: WorldLike) -> None:
        (world.assets / "code").mkdir(parents=True, exist_ok=True)
        (world.assets / "code" / "job.yaml").write_text(text)

    return setup


def without_norm_stats(then: Callable[[WorldLike], None] | None = None) -> Callable[[WorldLike], None]:
    """A broken asset tree (exit 3), so a JSON case has a finding to name besides the planted secret."""

    def setup(world: WorldLike) -> None:
        (world.assets / NORM_STATS).unlink()
        if then is not None:
            then(world)

    return setup


def variables(**values: str) -> Callable[[WorldLike], None]:
    """Variables whose value needs the live server's address (`{live}` in the value)."""

    def setup(world: WorldLike) -> None:
        world.env.update({name: value.format(live=LIVE["url"]) for name, value in values.items()})

    return setup


ECHOING_TORCHRUN = """\
import json, os, sys, time
print("trainer argv: " + " ".join(sys.argv[1:]), flush=True)
key = os.environ.get("WANDB_API_KEY", "")
mode = os.environ.get("ECHO_MODE", "argv")
if mode == "env":
    print("wandb: using key " + key, flush=True)
if mode == "split":  # the secret arrives in two chunks
    sys.stdout.write("wandb: key=" + key[:4])
    sys.stdout.flush()
    time.sleep(0.3)
    sys.stdout.write(key[4:] + " accepted\\n")
    sys.stdout.flush()
if mode == "url":
    print("fetching " + os.environ["DATA_URL"], flush=True)
if mode == "error-file":
    with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as handle:
        json.dump({"message": {"message": "ValueError: wandb rejected the key " + key}}, handle)
    sys.exit(1)
if mode == "root-cause":
    print("Root Cause (first observed failure):\\n[0]:\\n  host      : node0\\n  rank      : 3 (local_rank: 3)")
    print("  exitcode  : 1 (pid: 7)\\n  traceback : PermissionError: 401 for token " + key, flush=True)
    sys.exit(1)
"""


def echoing_torchrun(mode: str, then: Callable[[WorldLike], None] | None = None) -> Callable[[WorldLike], None]:
    """A stand-in torchrun that echoes what it was given (argv, a secret variable), like a chatty trainer."""

    def setup(world: WorldLike) -> None:
        folder = world.root / "echo-bin"
        folder.mkdir(exist_ok=True)
        script = folder / "torchrun"
        script.write_text(f"#!{sys.executable}\n{ECHOING_TORCHRUN}")
        script.chmod(0o755)
        world.env["PATH"] = f"{folder}{os.pathsep}{world.env['PATH']}"
        world.env["ECHO_MODE"] = mode
        if then is not None:
            then(world)

    return setup


def manifest(url: str) -> Callable[[WorldLike], None]:
    def setup(world: WorldLike) -> None:
        entry = {"name": "stats", "url": url.format(live=LIVE["url"]), "to": "x/norm_stats.json", "check": "file"}
        (world.root / "manifest.yaml").write_text(json.dumps({"entries": [entry]}))
        (world.root / "fresh").mkdir(exist_ok=True)

    return setup


def fresh_root(world: WorldLike) -> None:
    (world.root / "fresh").mkdir(exist_ok=True)


def chained(*setups: Callable[[WorldLike], None]) -> Callable[[WorldLike], None]:
    def setup(world: WorldLike) -> None:
        for step in setups:
            step(world)

    return setup


FETCH = ("--assets-root", "fresh", "--allow-http", "--retries", "1", "--backoff", "0.01", "--timeout", "5")
TACO = {"VLA_TACO": "auto", "VLA_TACO_ALLOW_HTTP": "1"}


def edge(id: str, code: int, culprit: str, secrets: tuple[str, ...], **fields: object) -> Edge:
    return Edge(id, FAMILY, code, culprit, secrets=secrets, **fields)  # type: ignore[arg-type]


# The secret each case plants is spelled out once, in its `secrets`, and nowhere else in the output.
EDGES = [
    # trainer flags in VLA_EXTRA_ARGS, both forms, every way the launcher shows the command
    edge("extra-args-eq-plan", 0, "--wandb-key", ("wk-9f2c1e",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--wandb-key=wk-9f2c1e"}),
    edge("extra-args-space-plan", 0, "--token", ("tk-77aa01",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--token tk-77aa01"}),
    edge("extra-args-password-plan", 0, "--password", ("pw-Zq81x!",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--password='pw-Zq81x!'"}),
    edge("extra-args-quoted-spaces-plan", 0, "--password", ("open sesame 42",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--password 'open sesame 42'"}),
    edge("extra-args-api-key-plan", 0, "--api-key", ("ak-3b9d0f",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--api-key ak-3b9d0f"}),
    edge("extra-args-secret-plan", 0, "--secret", ("sc-51e0aa",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--secret=sc-51e0aa"}),
    edge("extra-args-hf-token-plan", 0, "--hf-token", ("hf_AbCdEf123456",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--hf-token hf_AbCdEf123456"}),
    edge("extra-args-dotted-plan", 0, "--wandb.api-key", ("dk-0c0ffee0",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--wandb.api-key=dk-0c0ffee0"}),
    edge("extra-args-url-userinfo-plan", 0, "--data-url", ("up-p4ssw0rd",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--data-url=https://alice:up-p4ssw0rd@data.example/x"}),
    edge("extra-args-signed-query-plan", 0, "--data-url", ("sg-aws5ig",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--data-url https://b.s3.amazonaws.com/x?X-Amz-Signature=sg-aws5ig&X-Amz-Date=1"}),
    edge("extra-args-header-plan", 0, "--header", ("br-t0k3n-xyz",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--header 'Authorization: Bearer br-t0k3n-xyz'"}),
    edge("extra-args-flag-plan", 0, "--token", ("fl-8812aa",), argv=("plan", "--extra-args", "--token", "fl-8812aa")),
    edge("extra-args-eq-json", 3, "norm_stats", ("js-5566ab",), argv=("plan", "--json"),
         env={"VLA_EXTRA_ARGS": "--wandb-key=js-5566ab"}, setup=without_norm_stats()),
    edge("extra-args-space-json", 3, "norm_stats", ("js-7788cd",), argv=("plan", "--json"),
         env={"VLA_EXTRA_ARGS": "--token js-7788cd"}, setup=without_norm_stats()),
    edge("extra-args-check-failing", 3, "norm_stats", ("ck-4411ee",), argv=("check",),
         env={"VLA_EXTRA_ARGS": "--wandb-key ck-4411ee"}, setup=without_norm_stats()),
    # the job file: extra_args in both forms, secret variables, a URL's password
    edge("job-extra-args-eq-plan", 0, "--wandb-key", ("jb-a1b2c3",), argv=("plan",),
         setup=job_file("extra_args: ['--wandb-key=jb-a1b2c3']\n")),
    edge("job-extra-args-space-plan", 0, "--token", ("jb-d4e5f6",), argv=("plan",),
         setup=job_file("extra_args: ['--token', 'jb-d4e5f6']\n")),
    edge("job-extra-args-json", 3, "norm_stats", ("jb-0a0b0c",), argv=("plan", "--json"),
         setup=without_norm_stats(job_file("extra_args: ['--hf-token', 'jb-0a0b0c']\n"))),
    edge("job-env-secret-plan", 0, "WANDB_API_KEY", ("je-998877",), argv=("plan",),
         setup=job_file("env: {WANDB_API_KEY: je-998877}\n")),
    edge("job-env-url-plan", 0, "HF_ENDPOINT", ("je-url-pass",), argv=("plan",),
         setup=job_file("env: {HF_ENDPOINT: 'https://bob:je-url-pass@hf.example'}\n")),
    edge("job-env-secret-json", 3, "norm_stats", ("je-334455",), argv=("plan", "--json"),
         setup=without_norm_stats(job_file("env: {HF_TOKEN: je-334455}\n"))),
    edge("job-extra-args-mapping", 2, "extra_args", ("jm-6655aa",), argv=("check",),
         setup=job_file("extra_args: {token: jm-6655aa}\n")),
    # settings errors that quote the value
    edge("bad-quoting-space", 2, "VLA_EXTRA_ARGS", ("bq-101010",), argv=("check",),
         env={"VLA_EXTRA_ARGS": "--token bq-101010 'unbalanced"}),
    edge("bad-quoting-eq", 2, "VLA_EXTRA_ARGS", ("bq-202020",), argv=("plan",),
         env={"VLA_EXTRA_ARGS": "--wandb-key=bq-202020 \"unbalanced"}),
    edge("secret-in-a-number", 2, "VLA_NUM_TRAIN_STEPS", ("nm-303030",), argv=("check",),
         env={"VLA_NUM_TRAIN_STEPS": "--token=nm-303030"}),
    edge("url-as-weights-path", 3, "VLA_WEIGHTS", ("wp-404040",), argv=("check",),
         env={"VLA_WEIGHTS": "https://carol:wp-404040@models.example/pi05"}),
    edge("unknown-flag-with-secret", 2, "--wandb-key", ("uf-505050",), argv=("check", "--wandb-key=uf-505050")),
    # run: the start command, the node log, the start-up record
    edge("run-extra-args-eq", 0, "--wandb-key", ("rn-a0a0a0",), argv=("run",),
         env={"VLA_EXTRA_ARGS": "--wandb-key=rn-a0a0a0"}),
    edge("run-extra-args-space", 0, "--token", ("rn-b1b1b1",), argv=("run",),
         env={"VLA_EXTRA_ARGS": "--token rn-b1b1b1"}),
    edge("run-job-file", 0, "--password", ("rn-c2c2c2",), argv=("run",),
         setup=job_file("extra_args: ['--password', 'rn-c2c2c2']\nenv: {WANDB_API_KEY: rn-c2c2c2x}\n")),
    edge("run-extra-args-flag", 0, "--api-key", ("rn-d3d3d3",), argv=("run", "--extra-args", "--api-key=rn-d3d3d3")),
    # run: training echoes what it was given
    edge("echo-argv", 0, "--wandb-key", ("ec-e4e4e4",), argv=("run",),
         env={"VLA_EXTRA_ARGS": "--wandb-key ec-e4e4e4"}, setup=echoing_torchrun("argv")),
    edge("echo-secret-variable", 0, "--token", ("ec-f5f5f5f5",), argv=("run",),
         env={"VLA_EXTRA_ARGS": "--token=x-y", "WANDB_API_KEY": "ec-f5f5f5f5"}, setup=echoing_torchrun("env")),
    edge("echo-split-across-chunks", 0, "--token", ("ec-0123456789",), argv=("run",),
         env={"VLA_EXTRA_ARGS": "--token=x-y", "WANDB_API_KEY": "ec-0123456789"}, setup=echoing_torchrun("split")),
    edge("echo-url-password", 0, "data.example", ("ec-urlpass",), argv=("run",),
         env={"VLA_EXTRA_ARGS": "--no-x", "DATA_URL": "https://dave:ec-urlpass@data.example/set"},
         setup=echoing_torchrun("url")),
    edge("echo-in-error-file", 1, "ValueError", ("ef-6a6a6a",), argv=("run",), env={"WANDB_API_KEY": "ef-6a6a6a"},
         setup=echoing_torchrun("error-file", lambda w: w.env.update(TORCHELASTIC_ERROR_FILE=str(w.root / ERROR)))),
    edge("echo-in-root-cause", 1, "PermissionError", ("rc-7b7b7b",), argv=("run",),
         env={"WANDB_API_KEY": "rc-7b7b7b"}, setup=echoing_torchrun("root-cause")),
    # TACO: a wheel URL with credentials, downloaded at start and failing (a real server answering 404)
    edge("taco-userinfo-via-proxy", 0, "taco.activate", ("tw-pass-81",), argv=("run",), env=TACO,
         setup=variables(VLA_TACO_WHEEL=f"http://ops:tw-pass-81@127.0.0.1/{WHEEL}", http_proxy="{live}")),
    edge("taco-aws-signature", 0, "taco.activate", ("tw-amzsig", "AKIAtwcred"), argv=("run",), env=TACO,
         setup=variables(VLA_TACO_WHEEL="{live}/" + WHEEL + "?X-Amz-Credential=AKIAtwcred&X-Amz-Signature=tw-amzsig")),
    edge("taco-cos-signature", 0, "taco.activate", ("tw-qsig-1", "AKIDtwcos"), argv=("run",), env=TACO,
         setup=variables(VLA_TACO_WHEEL="{live}/" + WHEEL + "?q-sign-time=1&q-ak=AKIDtwcos&q-signature=tw-qsig-1")),
    edge("taco-sas-signature", 0, "taco.activate", ("tw-sas-sig",), argv=("run",), env=TACO,
         setup=variables(VLA_TACO_WHEEL="{live}/" + WHEEL + "?sv=2020&sig=tw-sas-sig")),
    edge("taco-token-query", 3, "taco.activate", ("tw-tok-qq",), argv=("run",), env={**TACO, "VLA_TACO": "on"},
         setup=variables(VLA_TACO_WHEEL="{live}/" + WHEEL + "?token=tw-tok-qq")),
    edge("taco-userinfo-plan", 0, "--no-x", ("tw-plan-pw",), argv=("plan",), env={**TACO, "VLA_EXTRA_ARGS": "--no-x"},
         setup=variables(VLA_TACO_WHEEL=f"http://ops:tw-plan-pw@127.0.0.1/{WHEEL}")),
    # fetch-assets: --base-url and manifest URLs with credentials
    edge("fetch-base-url-userinfo", 2, "norm-stats", ("fb-pass-11",), tione=False, setup=fresh_root,
         argv=("fetch-assets", *FETCH, "--only", "norm-stats", "--base-url", "http://ops:fb-pass-11@127.0.0.1/")),
    edge("fetch-base-url-proxy", 3, "norm-stats", ("fb-pass-22",), tione=False,
         setup=chained(fresh_root, variables(http_proxy="{live}")),
         argv=("fetch-assets", *FETCH, "--only", "norm-stats", "--base-url", "http://ops:fb-pass-22@127.0.0.1/")),
    edge("fetch-manifest-signed", 3, "stats", ("fm-sig-33", "AKIAfmcred"), tione=False,
         setup=manifest("{live}/norm_stats.json?X-Amz-Credential=AKIAfmcred&X-Amz-Signature=fm-sig-33"),
         argv=("fetch-assets", *FETCH, "--manifest", "manifest.yaml")),
    edge("fetch-manifest-userinfo", 3, "stats", ("fm-pass-44",), tione=False,
         setup=chained(manifest("http://ops:fm-pass-44@127.0.0.1/norm_stats.json"), variables(http_proxy="{live}")),
         argv=("fetch-assets", *FETCH, "--manifest", "manifest.yaml")),
]  # fmt: skip


@pytest.mark.parametrize("case", EDGES, ids=[e.id for e in EDGES])
def test_secret_is_never_shown(world: World, case: Edge) -> None:
    base = world.tione(nodes=2, per_node=8, rank=0) if case.tione else {}
    outcome = check_edge(world, case, base)
    if case.code == 0 and case.argv[0] in ("plan", "run"):
        assert MASK in outcome.text or case.id.startswith(("taco-", "echo-url")), "the secret was not shown masked"


@pytest.mark.parametrize("case", [e for e in EDGES if e.argv[0] in ("run", "fetch-assets")], ids=lambda e: e.id)
def test_secret_is_nowhere_on_disk(world: World, case: Edge) -> None:
    """Beyond logs and records: no file the launcher created or changed anywhere under the world (fetch state,
    TACO's download, NCCL folders, the HOME cache) holds the secret. Only what the command wrote is read, in
    bounded chunks: the world's sparse weights (~7.5 GB of holes) are not."""
    base = world.tione(nodes=2, per_node=8, rank=0) if case.tione else {}
    written = [path for path in check_edge(world, case, base).written if path != world.root / ERROR]
    assert written, f"{case.id}: the command wrote no file, so this case proves nothing"
    needles = [secret.encode() for secret in case.secrets]
    leaks = {str(path): found for path in written if (found := holding(path, needles))}
    assert not leaks, f"{case.id}: secrets on disk: {leaks}"


def test_plan_json_masks_while_torchrun_gets_the_real_values(world: World, tmp_path: Path) -> None:
    """`plan --json` shows `***`; what is launched keeps the secret (the full proof is in test_plan_is_launch)."""
    env = {"VLA_EXTRA_ARGS": "--wandb-key=real-key-1 --token real-token-2", "FAKE_TORCHRUN_RECORD": str(tmp_path / "s")}
    plan = json.loads(world.cli("plan", "--json", env=env).out)
    assert plan["command"][-3:] == ["--wandb-key=***", "--token", "***"]
    assert plan["settings"]["values"]["extra_args"] == ["--wandb-key=***", "--token", "***"]
    assert world.cli("run", env=env).code == 0
    saw = json.loads(small_text(tmp_path / "s"))
    assert saw["argv"][-3:] == ["--wandb-key=real-key-1", "--token", "real-token-2"]


@pytest.mark.parametrize("mode, status", [("auto", Status.WARN), ("on", Status.FAIL)])
def test_taco_download_error_quoting_the_password(tmp_path: Path, mode: str, status: Status) -> None:
    """urllib hands `user:PASS@host` to http.client, whose error quotes it (`nonnumeric port: 'PASS@host'`):
    activation's console lines, finding, reason and record show it masked, whatever stream it is given."""
    secret = "tw-nonnumeric-77"
    variables = {
        "VLA_BAKED_JOB_FILE": str(tmp_path / "none.yaml"),
        "VLA_ASSETS_ROOT": str(tmp_path),
        "VLA_TACO": mode,
        "VLA_TACO_ALLOW_HTTP": "1",
        "VLA_TACO_WHEEL": f"http://ops:{secret}@127.0.0.1/{WHEEL}",
    }
    plan = plan_taco(load_settings(variables), {}, None, tmp_path / "no-baked", tmp_path / "prefix")
    out = io.StringIO()
    fast = DownloadOptions(timeout_s=2, attempts=2, backoff_s=0.01, deadline_s=10, allow_http=True)
    activation = activate_taco(plan, plan.env.apply({}), out, lang="both", options=fast)
    assert activation.status is ActivationStatus.FAILED and activation.finding is not None
    assert activation.finding.status is status and "nonnumeric port: '***@127.0.0.1'" in out.getvalue()
    reason = activation.reason
    assert reason is not None
    shown = [out.getvalue(), json.dumps(activation.to_json()), reason.en, reason.zh, activation.finding.where or ""]
    assert not [text for text in shown if secret in text]


# ---- the masking rules ----


@pytest.mark.parametrize(
    "name, secret",
    [
        ("WANDB_API_KEY", True),
        ("HF_TOKEN", True),
        ("--wandb-key", True),
        ("--hf-token", True),
        ("--password", True),
        ("--pwd", True),
        ("--auth", True),
        ("X-Amz-Signature", True),
        ("X-Amz-Credential", True),
        ("X-Amz-Security-Token", True),
        ("q-signature", True),
        ("q-ak", True),
        ("sig", True),
        ("Signature", True),
        ("OSSAccessKeyId", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("--model.max-token-len", False),
        ("max_tokens", False),
        ("--num-workers", False),
        ("--author", False),
        ("--task", False),
        ("NCCL_SOCKET_IFNAME", False),
        ("X-Amz-Date", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


@pytest.mark.parametrize(
    "text, shown",
    [
        ("--wandb-key=abc123 --num-workers 4", "--wandb-key=*** --num-workers 4"),
        ("--token abc123 --resume", "--token *** --resume"),
        ("--password 'two words' next", "--password '***' next"),
        ("https://u:p4ss@h.example/a?b=1", "https://***@h.example/a?b=1"),
        ("https://ghp_abcdef@github.com/o/r.git", "https://***@github.com/o/r.git"),
        ("/assets/https:/u:p4ss@h/w does not exist", "/assets/https:/***@h/w does not exist"),
        ("x?X-Amz-Signature=s1&X-Amz-Date=2&X-Amz-Credential=c1",
         "x?X-Amz-Signature=***&X-Amz-Date=2&X-Amz-Credential=***"),
        ("f?q-sign-algorithm=sha1&q-ak=AKID1&q-signature=s2", "f?q-sign-algorithm=***&q-ak=***&q-signature=***"),
        ("f?sv=2020&sig=s3&se=2", "f?sv=2020&sig=***&se=2"),
        ("nonnumeric port: 'p4ss@127.0.0.1'", "nonnumeric port: '***@127.0.0.1'"),
        ("Authorization: Bearer abcdefgh1234", "Authorization: ***"),
        ("{'token': 'abc123', 'other': 'x'}", "{'token': '***', 'other': 'x'}"),
        ("['--hf-token', 'abc123', '--x', 'y']", "['--hf-token', '***', '--x', 'y']"),
        ("HF_TOKEN: abc123 and API_KEY=xyz", "HF_TOKEN: *** and API_KEY=***"),
        ("VLA_NUM_TRAIN_STEPS='--token=abc123' 无效", "VLA_NUM_TRAIN_STEPS='--token=***' 无效"),
        ("Write each entry as 'key: value' lines", "Write each entry as 'key: value' lines"),
        ("norm stats key: action", "norm stats key: action"),
        ("TOKENIZERS_PARALLELISM=false --model.max-token-len 200",) * 2,
        ("== health check summary: PASS (11 pass, 1 warn, 0 fail) ==",) * 2,
    ],
)  # fmt: skip
def test_mask_text(text: str, shown: str) -> None:
    assert mask_text(text) == shown
    assert mask_text(shown) == shown  # masking twice changes nothing


def test_mask_argv_keeps_the_shape() -> None:
    argv = ["torchrun", "--nnodes", "2", "train.py", "--wandb-key", "k1", "--token=t1", "--hf-token", "--resume"]
    argv += ["--password=", "--url=https://u:p1@h/x"]
    assert mask_argv(argv) == [
        "torchrun", "--nnodes", "2", "train.py", "--wandb-key", MASK, "--token=***", "--hf-token", "--resume",
        "--password=", "--url=https://***@h/x",
    ]  # fmt: skip


def test_masked_variables_and_json() -> None:
    values = {"WANDB_API_KEY": "k", "HF_ENDPOINT": "https://u:p@h/", "PATH": "/bin", "TOKENIZERS_PARALLELISM": "false"}
    assert masked(values) == {
        "HF_ENDPOINT": "https://***@h/",
        "PATH": "/bin",
        "TOKENIZERS_PARALLELISM": "false",
        "WANDB_API_KEY": MASK,
    }
    data = {"command": ["python", "--token", "t-123456"], "env": {"HF_TOKEN": "h"}, "n": 3, "cause": "sig=abc"}
    assert mask_json(data) == {
        "command": ["python", "--token", MASK],
        "env": {"HF_TOKEN": MASK},
        "n": 3,
        "cause": "sig=***",
    }


def test_secrets_in_leaves_out_short_values_paths_and_words() -> None:
    """What would garble output if masked everywhere is left to the pattern rules (`--key=…`, `*_KEY=…`)."""
    argv = ["--token", "t-123456", "--key=ab", "--password", "welcome", "--api-key", "averyveryverylongword"]
    env = {"SSL_KEY_FILE": "/etc/ssl/key.pem", "HF_TOKEN": "hf-98765", "CACHE_KEY_MODE": "default"}
    assert secrets_in(argv, env) == {"t-123456", "hf-98765", "averyveryverylongword"}
    assert mask_argv(argv)[4] == MASK and masked(env)["CACHE_KEY_MODE"] == MASK  # still hidden where they stand


def test_remembered_values_are_masked_everywhere() -> None:
    masking.remember(["t-123456", "abc"])  # too short to mask as free text: ordinary words would vanish
    assert mask_text("ValueError: bad token t-123456 for abc") == "ValueError: bad token *** for abc"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64])
def test_stream_mask_across_chunks(size: int) -> None:
    secret = "s3cr3t-value"
    stream = StreamMask([secret])
    data = f"start {secret} middle {secret[:5]} {secret}{secret} end s3c".encode()
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    out = b"".join(stream.feed(c) for c in chunks) + stream.flush()
    assert out == b"start *** middle s3cr3 ****** end s3c"


def test_stream_mask_without_secrets_passes_bytes_through() -> None:
    stream = StreamMask()
    assert stream.feed(b"\r 10%|#   |") == b"\r 10%|#   |" and stream.flush() == b""


def test_masked_stream_writes_through() -> None:
    out = io.StringIO()
    stream = MaskedStream(out, ["lit-secret-1"])
    assert stream.write("a lit-secret-1 and https://u:p@h/ b\n") == len("a lit-secret-1 and https://u:p@h/ b\n")
    stream.flush()
    assert out.getvalue() == "a *** and https://***@h/ b\n" and not stream.isatty()
