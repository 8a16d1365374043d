"""The plan: every inspection's findings plus the resolved environment and torchrun command.

`build_plan` reads the machine and the CFS tree and changes nothing on disk; `check` and `plan` print it,
`run` acts on it. Settings or topology that cannot be read raise `UserError` (nothing else can be decided).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from entrypoint.core.findings import Finding, exit_code_of, failed, passed, warned
from entrypoint.core.host import Host
from entrypoint.core.messages import Text
from entrypoint.core.settings import Settings, load_settings, suggest_variable
from entrypoint.fabric.decide import FabricPlan, plan_fabric
from entrypoint.inspect.assets import inspect_assets
from entrypoint.inspect.batch import check_batch
from entrypoint.inspect.environment import EnvPlan, training_env
from entrypoint.inspect.openpi import TRAINER_SCRIPT, TrainerFlags
from entrypoint.inspect.patch import PatchState, patch_state, transformers_dir
from entrypoint.inspect.resume import ResumeDecision, decide_resume
from entrypoint.inspect.storage import check_checkpoint_storage, check_datasets_cache
from entrypoint.inspect.topology import Topology, resolve_topology
from entrypoint.taco.plan import TacoPlan, plan_taco


@dataclass
class Plan:
    settings: Settings
    topology: Topology
    fabric: FabricPlan
    env: EnvPlan
    findings: list[Finding]
    resume: ResumeDecision
    patch: PatchState
    command: list[str]
    taco: TacoPlan

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.findings)

    def to_json(self, with_command: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "topology": self.topology.to_json(),
            "fabric": {k: v for k, v in self.fabric.to_json().items() if k not in ("findings", "env_set", "env_kept")},
            "env": self.env.to_json(),
            "checks": [f.to_json() for f in self.findings],
            "resume": self.resume.to_json(),
            "transformers_patch": self.patch.to_json(),
            "taco": self.taco.to_json(),
            "settings": self.settings.to_json(),
        }
        if with_command:
            data["command"] = self.command
            data["cwd"] = self.settings.openpi_dir
        return data


def torchrun_command(
    topology: Topology, trainer_args: list[str], env: Mapping[str, str], rendezvous_timeout: int
) -> list[str]:
    """torchrun with the topology and rendezvous timeout spelled out, so no inherited PET_* default changes them."""
    torchrun = shutil.which("torchrun", path=env.get("PATH")) or "torchrun"
    return [
        torchrun,
        "--nnodes",
        str(topology.nnodes),
        "--nproc_per_node",
        str(topology.nproc_per_node),
        "--node_rank",
        str(topology.node_rank),
        "--master_addr",
        topology.master_addr,
        "--master_port",
        str(topology.master_port),
        "--rdzv_conf",
        f"timeout={rendezvous_timeout}",
    ] + trainer_args


def _check_trainer(settings: Settings, command: list[str]) -> list[Finding]:
    findings: list[Finding] = []
    script = Path(settings.openpi_dir) / TRAINER_SCRIPT
    if not script.is_file():
        findings.append(
            failed(
                "trainer.script",
                Text(f"openpi's trainer {script} does not exist", f"openpi 训练脚本 {script} 不存在"),
                Text(
                    "Use the VLA base image (openpi in /workspace/openpi), or set VLA_OPENPI_DIR to your openpi checkout.",
                    "请使用 VLA 基础镜像(openpi 位于 /workspace/openpi),或把 VLA_OPENPI_DIR 设为 openpi 代码目录。",
                ),
                str(script),
            )
        )
    if not Path(command[0]).is_absolute():
        findings.append(
            failed(
                "trainer.torchrun",
                Text("torchrun is not on PATH", "PATH 中找不到 torchrun"),
                Text(
                    "Use an image with PyTorch installed (the VLA base has it), or fix PATH.",
                    "请使用已安装 PyTorch 的镜像(VLA 基础镜像已包含),或修正 PATH。",
                ),
                "PATH",
            )
        )
    return findings


def _patch_finding(state: PatchState) -> Finding:
    if state.status == "present":
        return passed(
            "transformers-patch",
            Text("transformers patch already present", "transformers 补丁已存在"),
            str(state.transformers_dir),
        )
    if state.status == "apply":
        return passed(
            "transformers-patch",
            Text(
                f"transformers patch missing: {state.script} runs before training",
                f"transformers 补丁缺失:训练前将执行 {state.script}",
            ),
            str(state.script),
        )
    if state.status == "no-transformers":
        return passed(
            "transformers-patch",
            Text(
                "transformers is not installed for this interpreter: no patch needed",
                "当前解释器未安装 transformers:无需补丁",
            ),
            None,
        )
    return warned(
        "transformers-patch",
        Text(
            f"the transformers patch is missing and {state.script} does not exist",
            f"transformers 补丁缺失,且 {state.script} 不存在",
        ),
        Text(
            "Use the VLA base image, which ships the patch script, or apply openpi's transformers_replace yourself.",
            "请使用自带补丁脚本的 VLA 基础镜像,或自行应用 openpi 的 transformers_replace。",
        ),
        str(state.script),
    )


def _unknown_variable_findings(settings: Settings) -> list[Finding]:
    findings = []
    for name in settings.unknown_variables:
        close = suggest_variable(name)
        hint = Text(
            f"Did you mean {close}?" if close else "See the README's Settings table.",
            f"是否应为 {close}?" if close else "请参阅 README 的设置表。",
        )
        findings.append(
            warned(
                "settings.unknown-variable",
                Text(f"{name} is not a known setting and is ignored", f"{name} 不是已知设置,已忽略"),
                hint,
                name,
            )
        )
    return findings


def build_plan(host: Host, flags: Mapping[str, Any] | None = None) -> Plan:
    """Inspect everything and resolve the launch; raises `UserError` when settings or topology are unusable."""
    env = host.env
    settings = load_settings(env, flags)
    topology = resolve_topology(host, settings.device)
    findings: list[Finding] = list(topology.findings) + _unknown_variable_findings(settings)
    findings.append(check_batch(settings.batch_size, topology))
    assets = inspect_assets(settings, env)
    findings += assets.findings
    resume = decide_resume(settings)
    findings += resume.findings
    findings += check_checkpoint_storage(settings, resume.step, assets.weights_bytes)
    if settings.dataset_repo_id is not None:
        findings += check_datasets_cache(env, assets.dataset_bytes)
    env_plan = training_env(env, settings, assets.dataset_complete, assets.tokenizer_home)
    fabric = plan_fabric(host, topology)
    findings += fabric.findings
    env_plan.set.update(fabric.env_set)
    env_plan.kept.update(fabric.env_kept)
    taco = plan_taco(settings, env_plan.apply(env), baked_dir=host.path("/opt/taco-train"))
    env_plan.merge(taco.env)
    findings += taco.findings
    patch = patch_state(Path(settings.openpi_dir), transformers_dir())
    findings.append(_patch_finding(patch))
    trainer = TrainerFlags(
        exp_name=settings.exp_name,
        batch_size=settings.batch_size,
        num_train_steps=settings.num_train_steps,
        log_interval=settings.log_interval,
        save_interval=settings.save_interval,
        precision=settings.precision,
        wandb=settings.wandb,
        weights=settings.path("weights"),
        assets_base_dir=settings.path("assets_base_dir"),
        checkpoint_base_dir=settings.path("checkpoint_base_dir"),
        num_workers=settings.num_workers,
        resume=resume.action == "resume",
        extra_args=tuple(settings.extra_args),
    )
    command = torchrun_command(topology, trainer.argv(settings.train_config), env, settings.rendezvous_timeout)
    findings += _check_trainer(settings, command)
    return Plan(settings, topology, fabric, env_plan, findings, resume, patch, command, taco)
