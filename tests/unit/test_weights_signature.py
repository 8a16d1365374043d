"""Weights that belong to the model: a weights folder's header against the model's signature, JAX checkpoints,
partial conversions, hostile files, and the script that records a signature."""

from __future__ import annotations

import gzip
import json
import os
import time

import numpy as np
import pytest
from safetensors.numpy import save_file

from entrypoint.inspect import weights
from entrypoint.inspect.assets import check_weights
from entrypoint.inspect.weights import (
    SIGNATURE_LIMIT,
    Model,
    job_model,
    parse_signature,
    shipped_signatures,
    signature_of,
)
from scripts import weights_signature
from tests.support.files import small_bytes
from tests.support.synthetic import make_assets_tree
from tests.support.weights import EXPERT, TIED, header_json, model_tensors, write_weights

SIGNATURE = signature_of(header_json(model_tensors()))  # stands for the recorded pi05 (gemma_2b + gemma_300m)
PI05 = "pi05 (gemma_2b + gemma_300m, 32-dim actions)"


@pytest.fixture
def shipped(monkeypatch):
    monkeypatch.setattr(weights, "shipped_signatures", lambda: (SIGNATURE,))


def folder_with(tmp_path, tensors, metadata=None):
    folder = tmp_path / "pi05_base_pytorch"
    write_weights(folder / "model.safetensors", tensors, metadata)
    (folder / "config.json").write_text("{}")
    return folder


def signature_finding(folder, config="pi05_libero", extra=()):
    findings, _ = check_weights(folder, config, extra)
    (finding,) = [f for f in findings if f.id == "assets.weights-signature"]
    return finding


def test_the_models_weights_pass_in_milliseconds(tmp_path, shipped):
    folder = folder_with(tmp_path, model_tensors())
    start = time.perf_counter()
    findings, size = check_weights(folder, "pi05_libero")
    elapsed_ms = (time.perf_counter() - start) * 1000
    print(f"real-size header ({len(SIGNATURE.tensors)} tensors, {size / 1e9:.2f} GB): checked in {elapsed_ms:.1f} ms")
    assert [(f.id, f.status.value) for f in findings] == [
        ("assets.weights", "pass"),
        ("assets.weights-signature", "pass"),
    ]
    assert f"fits {PI05}: its {len(SIGNATURE.tensors)} tensors" in findings[1].message.en
    assert len(SIGNATURE.tensors) > 750 and size > 7 * 10**9


def test_other_float_dtypes_pass_since_loading_converts_them(tmp_path, shipped):
    finding = signature_finding(folder_with(tmp_path, model_tensors(dtype="F32")))
    converted = sum(dtype == "BF16" for dtype, _ in SIGNATURE.tensors.values())
    assert finding.status.value == "pass"
    assert f"({converted} stored as another float type, which loading converts)" in finding.message.en


def test_a_tied_tensor_may_go_by_either_name_but_not_both(tmp_path, shipped):
    tensors = model_tensors()
    tensors[TIED[1]] = tensors.pop(TIED[0])
    assert signature_finding(folder_with(tmp_path / "a", tensors, {})).status.value == "pass"
    both = {**model_tensors(), TIED[1]: model_tensors()[TIED[0]]}
    finding = signature_finding(folder_with(tmp_path / "b", both))
    assert finding.status.value == "fail" and "tensors the model does not have: 1" in finding.message.en


@pytest.mark.parametrize(
    "tensors, found",
    [
        (model_tensors(expert=2048), "pi05 (gemma_2b + gemma_2b, 32-dim actions)"),
        (model_tensors(pi05=False), "pi0 (gemma_2b + gemma_300m, 32-dim actions)"),
        (model_tensors(action_dim=7), "pi05 (gemma_2b + gemma_300m, 7-dim actions)"),
    ],
    ids=["gemma_2b-expert", "pi0", "7-dim-actions"],
)
def test_another_variant_is_named(tmp_path, shipped, tensors, found):
    finding = signature_finding(folder_with(tmp_path, tensors))
    assert finding.status.value == "fail"
    assert finding.message.en.startswith(
        f"{tmp_path}/pi05_base_pytorch/model.safetensors holds the weights of {found}, but train config pi05_libero "
        f"builds {PI05}: "
    )
    assert (
        finding.hint.en
        == f"Set VLA_WEIGHTS to weights converted for {PI05}, or choose a train config that builds {found}."
    )
    assert "的权重,而训练配置 pi05_libero 构建的是" in finding.message.zh


TINY = model_tensors(paligemma=16, expert=8, depth=2, vision_depth=1, vocab=32, dtype="F32", vision=4, vision_mlp=8)


@pytest.fixture
def tiny(monkeypatch):
    """A tiny pi05 the launcher takes for train config `tiny_pi05`, its signature shipped."""
    signature = signature_of(header_json(TINY))
    monkeypatch.setitem(weights.CONFIG_MODELS, "tiny_pi05", signature.model)
    monkeypatch.setattr(weights, "shipped_signatures", lambda: (signature,))
    return signature


def saved(folder, tensors, metadata=None):
    """Written by the safetensors library itself, as openpi's saver writes it."""
    folder.mkdir(parents=True)
    arrays = {name: np.zeros(shape, np.float32) for name, (_, shape) in tensors.items()}
    save_file(
        arrays, str(folder / "model.safetensors"), metadata={"format": "pt", TIED[1]: TIED[0], **(metadata or {})}
    )
    (folder / "config.json").write_text("{}")
    return folder


def test_weights_written_by_the_library_pass(tmp_path, tiny):
    finding = signature_finding(saved(tmp_path / "w", TINY), "tiny_pi05")
    assert finding.status.value == "pass" and f"its {len(TINY)} tensors" in finding.message.en


def test_a_partial_conversion_says_how_much_is_missing(tmp_path, tiny):
    lost = sorted(n for n in TINY if n.startswith(EXPERT + "model.layers.1."))
    folder = saved(tmp_path / "w", {n: v for n, v in TINY.items() if n not in lost})
    finding = signature_finding(folder, "tiny_pi05")
    assert finding.status.value == "fail"
    assert finding.message.en == (
        f"{folder}/model.safetensors is a partial conversion: {len(lost)} of the model's {len(TINY)} tensors missing "
        f"(first: {lost[0]}, {lost[1]}, {lost[2]}, …)"
    )
    assert finding.hint.en.startswith(
        "Convert the checkpoint again with openpi's examples/convert_jax_model_to_pytorch.py --config_name tiny_pi05"
    )


def test_extra_names_and_other_shapes_are_listed(tmp_path, tiny):
    extra = {**TINY, "ema.action_in_proj.weight": ("F32", [8, 32])}
    finding = signature_finding(saved(tmp_path / "a", extra), "tiny_pi05")
    assert finding.status.value == "fail" and finding.message.en.endswith(
        "tensors the model does not have: 1 (first: ema.action_in_proj.weight)"
    )
    name = EXPERT + "lm_head.weight"
    reshaped = {**TINY, name: ("F32", [33, 8])}
    finding = signature_finding(saved(tmp_path / "b", reshaped), "tiny_pi05")
    assert finding.message.en.endswith(
        f"tensors shaped otherwise: 1 (first: {name} is [33, 8] where the model's is [32, 8])"
    )


def test_integers_where_the_model_has_floats_warn(tmp_path, shipped):
    tensors = {name: ("I8" if dtype == "BF16" else dtype, shape) for name, (dtype, shape) in model_tensors().items()}
    findings, _ = check_weights(folder_with(tmp_path, tensors), "pi05_libero")
    assert [f.status.value for f in findings] == ["pass", "warn"]
    assert "tensors holding integers where the model has floats:" in findings[1].message.en


@pytest.mark.parametrize("inside", [True, False], ids=["checkpoint-folder", "its-params-folder"])
def test_a_jax_checkpoint_is_told_to_convert(tmp_path, inside):
    checkpoint = tmp_path / "pi05_base"
    (checkpoint / "params" / "ocdbt.process_0").mkdir(parents=True)
    (checkpoint / "params" / "_METADATA").write_text("{}")
    (checkpoint / "params" / "manifest.ocdbt").write_bytes(b"x")
    (checkpoint / "_CHECKPOINT_METADATA").write_text("{}")
    weights_path = checkpoint if inside else checkpoint / "params"
    (finding,), size = check_weights(weights_path, "pi05_libero")
    markers = "params, _CHECKPOINT_METADATA" if inside else "_METADATA, manifest.ocdbt"
    assert size is None and finding.status.value == "fail"
    assert finding.message.en == (
        f"{weights_path} is a JAX (orbax) checkpoint ({markers}) without model.safetensors: openpi's PyTorch trainer "
        "loads only model.safetensors"
    )
    assert (
        f"python examples/convert_jax_model_to_pytorch.py --checkpoint_dir {checkpoint} --config_name pi05_libero "
        f"--output_path {tmp_path}/pi05_base_pytorch" in finding.hint.en
    )


def test_check_fails_a_jax_checkpoint_with_exit_code_3(world):
    weights_path = world.assets / "checkpoints/pi05_base_pytorch"
    for name in ("model.safetensors", "config.json"):
        (weights_path / name).unlink()
    (weights_path / "params").mkdir()
    result = world.cli("check", "--json")
    failing = [c for c in json.loads(result.out)["checks"] if c["status"] == "fail"]
    assert result.code == 3 and [c["id"] for c in failing] == ["assets.weights"]
    assert "convert_jax_model_to_pytorch.py" in failing[0]["hint"] and "JAX (orbax)" in failing[0]["message"]


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda p: p.write_bytes(b"\xff" * 8 + b"{}"), "header length"),
        (lambda p: p.write_bytes((10**9).to_bytes(8, "little") + b"{}"), "header length"),
        (lambda p: p.write_bytes((9).to_bytes(8, "little") + b"[1, 2, 3]"), "not an object"),
        (lambda p: os.truncate(write_weights(p, model_tensors()), 10**9), "truncated"),
        (lambda p: os.mkfifo(p), "FIFO"),
        (lambda p: p.mkdir(), "a folder is where a file should be"),
    ],
    ids=["huge-header-length", "header-longer-than-file", "garbage-header", "truncated", "fifo", "folder"],
)
def test_hostile_weights_files_fail_clearly(tmp_path, shipped, make, reason):
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    make(folder / "model.safetensors")
    findings, size = check_weights(folder, "pi05_libero")
    assert size is None and [(f.id, f.status.value) for f in findings] == [("assets.weights-model", "fail")]
    assert reason in findings[0].message.en


@pytest.mark.parametrize(
    "config, extra, model",
    [
        ("pi05_libero", (), Model("pi05", 2048, 1024, 32)),
        ("pi0_libero", (), Model("pi0", 2048, 1024, 32)),
        (
            "debug_pi05",
            ("--model.paligemma-variant", "gemma_2b", "--model.action_expert_variant=gemma_300m"),
            Model("pi05", 2048, 1024, 32),
        ),
        ("pi05_libero", ("--model.no-pi05", "--model.action-dim", "8"), Model("pi0", 2048, 1024, 8)),
        ("pi05_libero", ("--model.paligemma-variant", "gemma_7b"), None),
        ("my_own_config", (), None),
    ],
    ids=["pi05", "pi0", "debug-full-size", "flags", "unknown-variant", "unknown-config"],
)
def test_the_jobs_model_follows_config_and_flags(config, extra, model):
    assert job_model(config, extra) == model


def test_unknown_models_and_unshipped_signatures_pass_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr(weights, "shipped_signatures", lambda: ())
    folder = folder_with(tmp_path, model_tensors())
    finding = signature_finding(folder, "pi0_libero")
    assert finding.status.value == "pass" and finding.message.en.endswith(
        "not compared: no signature of pi0 (gemma_2b + gemma_300m, 32-dim actions) ships with the launcher"
    )
    finding = signature_finding(folder, "my_own_config")
    assert finding.status.value == "pass" and "train config my_own_config" in finding.message.en


def test_the_script_records_the_same_signature_from_a_file_its_first_bytes_or_its_header(tmp_path, capsys):
    model = write_weights(tmp_path / "model.safetensors", model_tensors())
    with model.open("rb") as handle:  # 7 GB, sparse: read only the header
        length = int.from_bytes(handle.read(8), "little")
        raw = handle.read(length)
    first = tmp_path / "first-bytes"
    first.write_bytes(length.to_bytes(8, "little") + raw)
    header = tmp_path / "header.json"
    header.write_bytes(raw)
    outputs = []
    for source in (model, first, header):
        out = tmp_path / f"{source.name}.signature.json.gz"
        assert weights_signature.main([str(source), str(out)]) == 0
        outputs.append(small_bytes(out))
    assert outputs[0] == outputs[1] == outputs[2] and len(outputs[0]) < 50_000
    assert parse_signature(outputs[0]) == SIGNATURE
    assert f"{PI05}; {len(SIGNATURE.tensors)} tensors, 1 tied names" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="not a model the launcher knows"):
        weights_signature.signature_bytes(header_json({"weight": ("U8", [4])}))


@pytest.mark.parametrize(
    "data",
    [b"not gzip", gzip.compress(b"[]"), gzip.compress(b" " * (SIGNATURE_LIMIT + 8)), gzip.compress(b'{"format": 1}')],
    ids=["not-gzip", "not-an-object", "too-big", "no-tensors"],
)
def test_a_broken_signature_is_refused(data):
    with pytest.raises(ValueError):
        parse_signature(data)


def test_the_shipped_signatures_parse_and_name_their_model():
    """The package data the image carries (recorded from the real model); skipped until one is shipped."""
    shipped = shipped_signatures()
    if not shipped:
        pytest.skip("no signature shipped yet")
    assert {s.model for s in shipped} >= {Model("pi05", 2048, 1024, 32)}
    assert all(len(s.tensors) > 100 for s in shipped)


def test_the_synthetic_tree_fits_a_shipped_signature(tmp_path, shipped):
    """Trees the other tests and the benchmarks build keep passing once the real signature ships."""
    assets = make_assets_tree(tmp_path / "assets")
    findings, size = check_weights(assets / "checkpoints/pi05_base_pytorch", "pi05_libero")
    assert [f.status.value for f in findings] == ["pass", "pass"] and size > 7 * 10**9
