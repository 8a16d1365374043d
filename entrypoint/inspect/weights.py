"""Weights that belong to the model: a weights file's tensor names, shapes and dtypes against the model's.

openpi's trainer loads `--pytorch-weight-path DIR` with `safetensors.torch.load_model(model, DIR/model.safetensors)`,
strict: every name of the model's state dict must be in the file and nothing else, except that tied tensors are
saved once (`save_model` names the dropped ones in the header's `__metadata__`) and any one name of a tied group
stands for it; every shape must equal the model's (torch refuses a size mismatch). Dtypes may differ: loading
copies each tensor into the model's parameter, converting it.

The model's names, shapes and dtypes ship as package data, one gzipped JSON signature per model
(`entrypoint/inspect/data/<name>.signature.json.gz`), recorded from the real model's saved checkpoint with
    python3 -m scripts.weights_signature CHECKPOINT/model.safetensors entrypoint/inspect/data/pi05.signature.json.gz
(the header JSON alone works as input too). Which model a job builds comes from its train config (openpi's table,
below) and the `--model.*` flags of its extra args. Only headers are compared: nothing here reads tensor data.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from entrypoint.core.files import Problem, problem_at
from entrypoint.core.findings import Finding, failed, passed, warned
from entrypoint.core.messages import Text
from entrypoint.core.numbers import whole_number
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.messages import joined, shown, verbatim

SIGNATURES = Path(__file__).parent / "data"  # package data, installed as plain files beside the module
SIGNATURE_SUFFIX = ".signature.json.gz"
SIGNATURE_FORMAT = 1
SIGNATURE_LIMIT = 4 << 20  # a signature is tens of kilobytes; this bounds what a wrong package costs
ORBAX_MARKERS = ("params", "_METADATA", "manifest.ocdbt", "_CHECKPOINT_METADATA")
# What openpi's `gemma.get_config` makes of each variant name (PyTorch builds no LoRA weights: same shapes).
VARIANT_WIDTH = {"dummy": 64, "gemma_300m": 1024, "gemma_300m_lora": 1024, "gemma_2b": 2048, "gemma_2b_lora": 2048}
WIDTH_VARIANT = {64: "dummy", 1024: "gemma_300m", 2048: "gemma_2b"}
FLOAT_DTYPES = frozenset({"F4", "F6_E2M3", "F6_E3M2", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F16", "BF16", "F32", "F64"})
_SHOWN = 3
# The vision-language model's final norm: its length is the language model's width.
_LANGUAGE_NORM = re.compile(r"paligemma\.(?:model\.)?language_model\.(?:model\.)?norm\.weight")


@dataclass(frozen=True)
class Model:
    """What decides a pi0-family model's tensors: pi0 or pi05, the two widths, the action dimension."""

    family: str
    paligemma_width: int
    expert_width: int
    action_dim: int

    def label(self) -> Text:
        def variant(width: int) -> str:
            return WIDTH_VARIANT.get(width, f"width={width}")

        return M(
            "weights-model",
            family=self.family,
            paligemma=variant(self.paligemma_width),
            expert=variant(self.expert_width),
            dim=self.action_dim,
        )


def _pi0(paligemma: str = "gemma_2b", expert: str = "gemma_300m", action_dim: int = 32, pi05: bool = False) -> Model:
    return Model("pi05" if pi05 else "pi0", VARIANT_WIDTH[paligemma], VARIANT_WIDTH[expert], action_dim)


# openpi's train configs built on `Pi0Config` (src/openpi/training/config.py and training/misc/, commit 15a9616).
CONFIG_MODELS: Mapping[str, Model] = {
    **dict.fromkeys(
        (
            "pi05_aloha",
            "pi05_droid",
            "pi05_libero",
            "pi05_aloha_pen_uncap",
            "pi05_full_droid_finetune",
            "pi05_droid_finetune",
            "pi05_droid_jointpos_polaris",
        ),
        _pi0(pi05=True),
    ),
    **dict.fromkeys(
        (
            "pi0_aloha",
            "pi0_aloha_towel",
            "pi0_aloha_tupperware",
            "pi0_droid",
            "pi0_libero",
            "pi0_libero_low_mem_finetune",
            "pi0_aloha_pen_uncap",
            "pi0_aloha_sim",
            "pi0_droid_jointpos_polaris",
            "pi0_droid_jointpos_100k_polaris",
        ),
        _pi0(),
    ),
    "paligemma_diffusion_droid": _pi0(action_dim=8),
    "debug": _pi0("dummy", "dummy"),
    "debug_restore": _pi0("dummy", "dummy"),
    "debug_pi05": _pi0("dummy", "dummy", pi05=True),
}


def job_model(train_config: str, extra_args: Sequence[str] = ()) -> Model | None:
    """The model a job builds: its config's, changed by `--model.pi05`, `--model.paligemma-variant`,
    `--model.action-expert-variant` and `--model.action-dim` in `extra_args`; None when not known."""
    model = CONFIG_MODELS.get(train_config)
    if model is None:
        return None
    family, paligemma, expert, dim = model.family, model.paligemma_width, model.expert_width, model.action_dim
    args = list(extra_args)
    for index, arg in enumerate(args):
        flag, equals, value = arg.partition("=")
        flag = flag.replace("_", "-")
        if not flag.startswith("--model."):
            continue
        if flag in ("--model.pi05", "--model.no-pi05"):  # a boolean flag pair, as tyro spells it
            family = "pi05" if flag == "--model.pi05" else "pi0"
            continue
        if flag not in ("--model.paligemma-variant", "--model.action-expert-variant", "--model.action-dim"):
            continue
        if not equals:
            value = args[index + 1] if index + 1 < len(args) else ""
        if flag == "--model.action-dim":
            number = whole_number(value)
            if number is None:
                return None
            dim = number
        elif value not in VARIANT_WIDTH:
            return None
        elif flag == "--model.paligemma-variant":
            paligemma = VARIANT_WIDTH[value]
        else:
            expert = VARIANT_WIDTH[value]
    return Model(family, paligemma, expert, dim)


def _shape(info: object) -> tuple[int, ...] | None:
    shape = info.get("shape") if isinstance(info, dict) else None
    if isinstance(shape, list) and all(type(n) is int for n in shape):
        return tuple(shape)
    return None


def _dtype(info: object) -> str:
    dtype = info.get("dtype") if isinstance(info, dict) else None
    return dtype if isinstance(dtype, str) else ""


def describe(header: Mapping[str, object]) -> Model | None:
    """Which pi0-family model a safetensors header holds, from names and shapes openpi's `PI0Pytorch` gives it:
    pi05 has `time_mlp_in`, pi0 `state_proj`; `action_in_proj.weight` is [expert width, action dim]; the language
    model's final norm is [paligemma width]. None when the header is not such a model."""
    if "time_mlp_in.weight" in header:
        family = "pi05"
    elif "state_proj.weight" in header:
        family = "pi0"
    else:
        return None
    projection = _shape(header.get("action_in_proj.weight"))
    norm = next((_shape(info) for name, info in header.items() if _LANGUAGE_NORM.search(name)), None)
    if projection is None or len(projection) != 2 or norm is None or len(norm) != 1:
        return None
    return Model(family, norm[0], projection[0], projection[1])


@dataclass(frozen=True)
class Signature:
    """A model's tensors as its saved `model.safetensors` names them: name -> (dtype, shape); `tied` maps each name
    the saver dropped to the kept name it shares storage with."""

    model: Model
    tensors: Mapping[str, tuple[str, tuple[int, ...]]]
    tied: Mapping[str, str]

    def to_json(self) -> dict[str, object]:
        return {
            "format": SIGNATURE_FORMAT,
            "model": {
                "family": self.model.family,
                "paligemma_width": self.model.paligemma_width,
                "expert_width": self.model.expert_width,
                "action_dim": self.model.action_dim,
            },
            "tensors": {name: [dtype, list(shape)] for name, (dtype, shape) in sorted(self.tensors.items())},
            "tied": dict(sorted(self.tied.items())),
        }


def signature_of(header: Mapping[str, object]) -> Signature:
    """The signature a saved model's header records; ValueError when the header is not a pi0-family model's."""
    model = describe(header)
    if model is None:
        raise ValueError("not a pi0-family model: no time_mlp_in/state_proj, action_in_proj or language model norm")
    tensors = {}
    for name, info in header.items():
        shape = _shape(info)
        if name != "__metadata__":
            if shape is None or not _dtype(info):
                raise ValueError(f"tensor {name!r} has no dtype or shape")
            tensors[name] = (_dtype(info), shape)
    metadata = header.get("__metadata__")
    tied = {}
    if isinstance(metadata, dict):
        tied = {k: v for k, v in metadata.items() if isinstance(v, str) and v in tensors and k not in tensors}
    return Signature(model, tensors, tied)


def parse_signature(data: bytes) -> Signature:
    """A shipped signature file's content (gzipped JSON) as a `Signature`; ValueError when it is not one."""
    try:
        raw = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(data, SIGNATURE_LIMIT + 1)
        document = json.loads(raw)
    except (zlib.error, ValueError) as exc:
        raise ValueError(f"not a gzipped JSON signature: {exc}") from None
    if len(raw) > SIGNATURE_LIMIT or not isinstance(document, dict) or document.get("format") != SIGNATURE_FORMAT:
        raise ValueError(f"not a signature of format {SIGNATURE_FORMAT}")
    model, tensors, tied = document.get("model"), document.get("tensors"), document.get("tied")
    fields = ("paligemma_width", "expert_width", "action_dim")
    if not (
        isinstance(model, dict)
        and model.get("family") in ("pi0", "pi05")
        and all(type(model.get(f)) is int for f in fields)
        and isinstance(tensors, dict)
        and tensors
        and isinstance(tied, dict)
    ):
        raise ValueError("a signature needs model, tensors and tied")
    parsed = {}
    for name, entry in tensors.items():
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
            raise ValueError(f"tensor {name!r}: [dtype, shape] expected")
        shape = _shape({"shape": entry[1]})
        if shape is None:
            raise ValueError(f"tensor {name!r}: the shape is not a list of integers")
        parsed[name] = (entry[0], shape)
    if not all(isinstance(v, str) and v in parsed for v in tied.values()):
        raise ValueError("every tied name must stand for a tensor of the signature")
    return Signature(Model(model["family"], *(model[f] for f in fields)), parsed, tied)


@cache
def shipped_signatures(folder: Path = SIGNATURES) -> tuple[Signature, ...]:
    """Every signature shipped in `folder` (none when it has none)."""
    if not folder.is_dir():
        return ()
    found = sorted((f for f in folder.iterdir() if f.name.endswith(SIGNATURE_SUFFIX)), key=lambda f: f.name)
    return tuple(parse_signature(f.read_bytes()) for f in found)


@dataclass(frozen=True)
class Differences:
    """How a header differs from a signature, as the strict loader sees it: names missing or extra, shapes that
    differ (name, found, expected), float dtypes loading converts, integer dtypes where the model has floats."""

    missing: tuple[str, ...]
    extra: tuple[str, ...]
    shapes: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]
    converted: int
    not_float: tuple[tuple[str, str], ...]

    @property
    def refused(self) -> bool:
        return bool(self.missing or self.extra or self.shapes)


def compare(header: Mapping[str, object], signature: Signature) -> Differences:
    """Compare a parsed safetensors header with a signature the way `load_model(strict=True)` compares a file with
    the model: a tied name stands for its group, and a group named twice has one name too many."""
    covered: set[str] = set()
    extra, shapes, not_float = [], [], []
    converted = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        kept = name if name in signature.tensors else signature.tied.get(name)
        if kept is None or kept in covered:
            extra.append(name)
            continue
        covered.add(kept)
        dtype, shape = signature.tensors[kept]
        found_shape, found_dtype = _shape(info) or (), _dtype(info)
        if found_shape != shape:
            shapes.append((name, found_shape, shape))
        if found_dtype != dtype and dtype in FLOAT_DTYPES:
            if found_dtype in FLOAT_DTYPES:
                converted += 1
            else:
                not_float.append((name, found_dtype))
    missing = tuple(sorted(n for n in signature.tensors if n not in covered))
    return Differences(missing, tuple(sorted(extra)), tuple(sorted(shapes)), converted, tuple(sorted(not_float)))


def _names(names: Sequence[str]) -> str:
    return ", ".join(shown(n) for n in names[:_SHOWN]) + (", …" if len(names) > _SHOWN else "")


def _details(diff: Differences, total: int) -> Text:
    parts = []
    if diff.missing:
        parts.append(M("weights-names-missing", count=len(diff.missing), total=total, names=_names(diff.missing)))
    if diff.extra:
        parts.append(M("weights-names-extra", count=len(diff.extra), names=_names(diff.extra)))
    if diff.shapes:
        name, found, expected = diff.shapes[0]
        parts.append(
            M(
                "weights-shapes-differ",
                count=len(diff.shapes),
                name=shown(name),
                found=list(found),
                expected=list(expected),
            )
        )
    return joined(parts, "; ")


def check_model_weights(
    header: Mapping[str, object],
    path: Path,
    train_config: str,
    extra_args: Sequence[str] = (),
    signatures: Iterable[Signature] | None = None,
) -> Finding:
    """Whether the weights file at `path` (its parsed, validated `header`) loads into the model the job builds.
    Fails what the strict loader refuses (another model, a partial conversion, extra names, other shapes); warns on
    integers where the model has floats; passes, saying so, when the job's model or its signature is not known."""
    where = str(path)
    expected = job_model(train_config, extra_args)
    if expected is None:
        return passed("assets.weights-signature", M("weights-unknown-model", path=path, config=train_config), where)
    shipped = shipped_signatures() if signatures is None else signatures
    signature = next((s for s in shipped if s.model == expected), None)
    if signature is None:
        return passed("assets.weights-signature", M("weights-no-signature", path=path, model=expected.label()), where)
    diff = compare(header, signature)
    if diff.refused:
        details = _details(diff, len(signature.tensors))
        found = describe(header)
        if found is not None and found != expected:
            what = M(
                "weights-other-model",
                path=path,
                found=found.label(),
                config=train_config,
                expected=expected.label(),
                details=details,
            )
            fix = M("weights-other-model-fix", expected=expected.label(), found=found.label())
            return failed("assets.weights-signature", what, fix, where)
        name = "weights-partial" if not (diff.extra or diff.shapes) else "weights-mismatch"
        what = M(name, path=path, expected=expected.label(), config=train_config, details=details)
        fix = M("weights-convert-fix", config=train_config, weights=path.parent)
        return failed("assets.weights-signature", what, fix, where)
    if diff.not_float:
        name, dtype = diff.not_float[0]
        what = M("weights-not-float", path=path, count=len(diff.not_float), name=shown(name), dtype=dtype)
        return warned("assets.weights-signature", what, M("weights-not-float-fix"), where)
    converted = M("weights-dtypes-converted", count=diff.converted) if diff.converted else verbatim("")
    what = M("weights-match", path=path, model=expected.label(), count=len(signature.tensors), dtypes=converted)
    return passed("assets.weights-signature", what, where)


def orbax_checkpoint(weights: Path, train_config: str | None) -> Finding | None:
    """A failure when `weights` has no model.safetensors but holds a JAX/orbax checkpoint (`params/`, `_METADATA`,
    `manifest.ocdbt`, `_CHECKPOINT_METADATA`), with openpi's conversion command; else None. Only stats names."""
    if problem_at(weights / "model.safetensors") is not Problem.MISSING:
        return None
    markers = [name for name in ORBAX_MARKERS if problem_at(weights / name) is not Problem.MISSING]
    if not markers:
        return None
    params_inside = problem_at(weights / "params") is Problem.FOLDER
    checkpoint = weights if params_inside or weights.name != "params" else weights.parent
    output = checkpoint.parent / f"{checkpoint.name}_pytorch"
    config = train_config or "<train_config>"
    what = M("weights-orbax", weights=weights, markers=", ".join(markers))
    fix = M("weights-orbax-fix", checkpoint=checkpoint, config=config, output=output)
    return failed("assets.weights", what, fix, str(weights))
