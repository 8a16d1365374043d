"""The pieces of the weights check one at a time, on small hand-written headers: which model a job builds, which
model a header holds, a signature recorded and read back, how a header differs from it, and the finding a user
reads (each field whole, in both languages), and the JAX checkpoint advice."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from entrypoint.core.findings import Finding, Status
from entrypoint.core.messages import Text
from entrypoint.inspect import weights
from entrypoint.inspect.weights import (
    CONFIG_MODELS,
    SIGNATURE_LIMIT,
    Differences,
    Model,
    Signature,
    check_model_weights,
    compare,
    describe,
    job_model,
    orbax_checkpoint,
    parse_signature,
    shipped_signatures,
    signature_of,
)

PI05 = Model("pi05", 2048, 1024, 32)
NORM = "paligemma_with_expert.paligemma.model.language_model.norm.weight"


def tensor(dtype: str, *shape: int) -> dict[str, object]:
    return {"dtype": dtype, "shape": list(shape), "data_offsets": [0, 0]}


def header(
    family_tensor: str = "time_mlp_in.weight", width: int = 2048, expert: int = 1024, dim: int = 32
) -> dict[str, object]:
    """The smallest header `describe` reads as a model: the family's tensor, the action projection, the norm."""
    return {
        family_tensor: tensor("F32", expert, expert),
        "action_in_proj.weight": tensor("F32", expert, dim),
        NORM: tensor("F32", width),
    }


def signature_file(document: object) -> bytes:
    return gzip.compress(json.dumps(document).encode())


def document(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "format": 1,
        "model": {"family": "pi05", "paligemma_width": 2048, "expert_width": 1024, "action_dim": 32},
        "tensors": {"a": ["F32", [2, 3]], "b": ["BF16", []]},
        "tied": {"c": "a"},
    }
    return base | changes


# -- which model a job builds --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "model"),
    [
        ((), PI05),
        (("--model.no-pi05",), Model("pi0", 2048, 1024, 32)),
        (("--model.no_pi05", "--model.pi05"), PI05),
        (("--model.paligemma-variant=gemma_300m",), Model("pi05", 1024, 1024, 32)),
        (("--model.paligemma_variant", "dummy"), Model("pi05", 64, 1024, 32)),
        (("--model.action-expert-variant", "gemma_2b_lora"), Model("pi05", 2048, 2048, 32)),
        (("--model.action_expert_variant=gemma_300m_lora",), PI05),
        (("--model.action-dim=7",), Model("pi05", 2048, 1024, 7)),
        (("--model.action-dim", "14", "--batch-size", "8"), Model("pi05", 2048, 1024, 14)),
        # flags that are not the model's, or not one of the four, change nothing
        (("--model.max-token-len", "gemma_7b", "--paligemma-variant=dummy", "gemma_300m"), PI05),
        (("--model.max-token-len", "5", "--model.action-dim=7"), Model("pi05", 2048, 1024, 7)),
        (("--model.action-dim", "x"), None),
        (("--model.action-dim",), None),
        (("--model.paligemma-variant",), None),
        (("--model.action-expert-variant=gemma_7b",), None),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_the_jobs_model_is_its_config_changed_by_each_model_flag(extra, model):
    assert job_model("pi05_libero", extra) == model


def test_each_config_family_has_its_model():
    assert CONFIG_MODELS["pi05_droid"] == PI05
    assert CONFIG_MODELS["pi0_aloha_sim"] == Model("pi0", 2048, 1024, 32)
    assert CONFIG_MODELS["paligemma_diffusion_droid"] == Model("pi0", 2048, 1024, 8)
    assert CONFIG_MODELS["debug"] == CONFIG_MODELS["debug_restore"] == Model("pi0", 64, 64, 32)
    assert CONFIG_MODELS["debug_pi05"] == Model("pi05", 64, 64, 32)
    assert job_model("debug_pi05", ("--model.no-pi05",)) == Model("pi0", 64, 64, 32)


def test_a_model_is_labelled_by_its_variants_or_widths():
    assert PI05.label() == Text("pi05 (gemma_2b + gemma_300m, 32-dim actions)", "pi05(gemma_2b + gemma_300m,32 维动作)")
    assert Model("pi0", 64, 512, 7).label() == Text(
        "pi0 (dummy + width=512, 7-dim actions)", "pi0(dummy + width=512,7 维动作)"
    )


# -- which model a header holds ------------------------------------------------------------------------------------


def test_a_header_names_its_family_and_sizes():
    assert describe(header()) == PI05
    assert describe(header("state_proj.weight", 1024, 64, 8)) == Model("pi0", 1024, 64, 8)
    both = header() | {"state_proj.weight": tensor("F32", 1, 1)}
    assert describe(both) == PI05
    short_norm = {k.replace("model.language_model.", "language_model."): v for k, v in header().items()}
    assert describe(short_norm) == PI05
    model_twice = {k.replace("language_model.norm", "language_model.model.norm"): v for k, v in header().items()}
    assert describe(model_twice) == PI05


@pytest.mark.parametrize(
    "broken",
    [
        {"action_in_proj.weight": tensor("F32", 1024, 32), NORM: tensor("F32", 2048)},  # no family tensor
        {"time_mlp_in.weight": tensor("F32", 1), NORM: tensor("F32", 2048)},  # no projection
        {"time_mlp_in.weight": tensor("F32", 1), "action_in_proj.weight": tensor("F32", 1024, 32)},  # no norm
        header() | {"action_in_proj.weight": tensor("F32", 1024, 32, 1)},
        header() | {"action_in_proj.weight": tensor("F32", 1024)},
        header() | {NORM: tensor("F32", 2048, 1)},
        header() | {NORM: tensor("F32")},
        header() | {NORM: {"dtype": "F32", "shape": [True]}},
        header() | {"action_in_proj.weight": {"dtype": "F32", "shape": [1024, 32.0]}},
        header() | {"action_in_proj.weight": {"dtype": "F32", "shape": "1024,32"}},
        header() | {"action_in_proj.weight": [1024, 32]},
    ],
    ids=[
        "no-family",
        "no-projection",
        "no-norm",
        "projection-3d",
        "projection-1d",
        "norm-2d",
        "norm-0d",
        "bool-size",
        "float-size",
        "shape-text",
        "info-not-object",
    ],
)
def test_a_header_that_is_not_such_a_model_is_none(broken):
    assert describe(broken) is None


# -- a signature recorded and read back ----------------------------------------------------------------------------


def test_a_signature_records_every_tensor_and_the_tied_names_the_saver_dropped():
    saved = header() | {
        "__metadata__": {"lm_head.weight": "time_mlp_in.weight", "NORM": "gone", "format": "pt", NORM: "x", "n": 1}
    }
    recorded = signature_of(saved)
    assert recorded == Signature(
        PI05,
        {
            "time_mlp_in.weight": ("F32", (1024, 1024)),
            "action_in_proj.weight": ("F32", (1024, 32)),
            NORM: ("F32", (2048,)),
        },
        {"lm_head.weight": "time_mlp_in.weight"},
    )
    assert recorded.to_json() == {
        "format": 1,
        "model": {"family": "pi05", "paligemma_width": 2048, "expert_width": 1024, "action_dim": 32},
        "tensors": {
            "action_in_proj.weight": ["F32", [1024, 32]],
            NORM: ["F32", [2048]],
            "time_mlp_in.weight": ["F32", [1024, 1024]],
        },
        "tied": {"lm_head.weight": "time_mlp_in.weight"},
    }
    assert parse_signature(signature_file(recorded.to_json())) == recorded
    assert signature_of(header() | {"__metadata__": "not an object"}).tied == {}


@pytest.mark.parametrize(
    ("saved", "message"),
    [
        (
            {"x": tensor("F32", 1)},
            "not a pi0-family model: no time_mlp_in/state_proj, action_in_proj or language model norm",
        ),
        (header() | {"x": {"shape": [1]}}, "tensor 'x' has no dtype or shape"),
        (header() | {"x": {"dtype": 3, "shape": [1]}}, "tensor 'x' has no dtype or shape"),
        (header() | {"x": {"dtype": "", "shape": [1]}}, "tensor 'x' has no dtype or shape"),
        (header() | {"x": {"dtype": "F32"}}, "tensor 'x' has no dtype or shape"),
    ],
    ids=["not-a-model", "no-dtype", "dtype-number", "dtype-empty", "no-shape"],
)
def test_a_header_that_cannot_be_recorded_says_why(saved, message):
    with pytest.raises(ValueError) as raised:
        signature_of(saved)
    assert str(raised.value) == message


def test_a_signature_file_reads_back_whole():
    assert parse_signature(signature_file(document())) == Signature(
        PI05, {"a": ("F32", (2, 3)), "b": ("BF16", ())}, {"c": "a"}
    )
    pi0 = document(model={"family": "pi0", "paligemma_width": 64, "expert_width": 64, "action_dim": 8}, tied={})
    assert parse_signature(signature_file(pi0)).model == Model("pi0", 64, 64, 8)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"format": 2}, "not a signature of format 1"),
        ({"format": "1"}, "not a signature of format 1"),
        ({"model": None}, "a signature needs model, tensors and tied"),
        (
            {"model": {"family": "pi1", "paligemma_width": 1, "expert_width": 1, "action_dim": 1}},
            "a signature needs model, tensors and tied",
        ),
        (
            {"model": {"family": "pi0", "paligemma_width": 1, "expert_width": True, "action_dim": 1}},
            "a signature needs model, tensors and tied",
        ),
        (
            {"model": {"family": "pi0", "paligemma_width": 1, "expert_width": 1}},
            "a signature needs model, tensors and tied",
        ),
        ({"tensors": {}}, "a signature needs model, tensors and tied"),
        ({"tensors": []}, "a signature needs model, tensors and tied"),
        ({"tied": []}, "a signature needs model, tensors and tied"),
        ({"tensors": {"a": ["F32", [1], 0]}}, "tensor 'a': [dtype, shape] expected"),
        ({"tensors": {"a": [1, [1]]}}, "tensor 'a': [dtype, shape] expected"),
        ({"tensors": {"a": {"dtype": "F32"}}}, "tensor 'a': [dtype, shape] expected"),
        ({"tensors": {"a": ["F32", ["1"]]}}, "tensor 'a': the shape is not a list of integers"),
        ({"tied": {"c": "nowhere"}}, "every tied name must stand for a tensor of the signature"),
        ({"tied": {"c": 1}}, "every tied name must stand for a tensor of the signature"),
    ],
    ids=[
        "format-2",
        "format-text",
        "no-model",
        "family",
        "bool-width",
        "no-dim",
        "no-tensors",
        "tensors-list",
        "tied-list",
        "entry-3",
        "dtype-number",
        "entry-object",
        "shape-text",
        "tied-nowhere",
        "tied-number",
    ],
)
def test_a_broken_signature_says_what_is_wrong(changes, message):
    with pytest.raises(ValueError) as raised:
        parse_signature(signature_file(document(**changes)))
    assert str(raised.value) == message


def test_a_signature_compressed_as_zlib_rather_than_gzip_is_refused():
    import zlib

    with pytest.raises(ValueError) as raised:
        parse_signature(zlib.compress(json.dumps(document()).encode()))
    assert str(raised.value).startswith("not a gzipped JSON signature: ")


def test_a_header_entry_that_is_not_an_object_has_no_shape_and_no_dtype():
    found = {"a": [2, 3], "b": tensor("BF16", 4), "i": tensor("I64", 1), "z": tensor("F16")}
    assert compare(found, SIGNATURE) == Differences((), (), (("a", (), (2, 3)),), 0, (("a", ""),))


def test_a_signature_of_exactly_the_limit_reads_and_one_byte_more_does_not():
    text = json.dumps(document()).encode()
    exact = text[:-1] + b" " * (SIGNATURE_LIMIT - len(text)) + b"}"
    assert len(exact) == SIGNATURE_LIMIT
    assert parse_signature(gzip.compress(exact)).model == PI05
    with pytest.raises(ValueError) as raised:
        parse_signature(gzip.compress(exact[:-1] + b" }"))
    assert str(raised.value) == "not a signature of format 1"
    with pytest.raises(ValueError) as raised:
        parse_signature(b"\x1f\x8b not really")
    assert str(raised.value).startswith("not a gzipped JSON signature: ")


def test_signatures_ship_as_named_files_in_name_order(tmp_path):
    assert shipped_signatures(tmp_path / "none") == ()
    (tmp_path / "b.signature.json.gz").write_bytes(signature_file(document()))
    pi0 = document(model={"family": "pi0", "paligemma_width": 64, "expert_width": 64, "action_dim": 8})
    (tmp_path / "a.signature.json.gz").write_bytes(signature_file(pi0))
    (tmp_path / "c.signature.json").write_bytes(b"not read")
    assert [s.model.family for s in shipped_signatures(tmp_path)] == ["pi0", "pi05"]


# -- how a header differs ------------------------------------------------------------------------------------------

SIGNATURE = Signature(
    PI05,
    {"a": ("F32", (2, 3)), "b": ("BF16", (4,)), "i": ("I64", (1,)), "z": ("F16", ())},
    {"a_tied": "a"},
)


def test_a_header_equal_to_the_signature_differs_in_nothing():
    same = {"a": tensor("F32", 2, 3), "b": tensor("BF16", 4), "i": tensor("I64", 1), "z": tensor("F16")}
    assert compare(same | {"__metadata__": {"format": "pt"}}, SIGNATURE) == Differences((), (), (), 0, ())
    assert not compare(same, SIGNATURE).refused


def test_each_difference_is_counted_as_the_strict_loader_sees_it():
    found = {
        "a_tied": tensor("F16", 2, 3),  # the tied name stands for a; F16 for F32 converts
        "a": tensor("F32", 2, 3),  # a second name of the same group is one too many
        "b": tensor("I8", 5),  # another shape, and integers where the model has floats
        "i": tensor("I32", 1),  # an integer model tensor stored as other integers: not a float matter
        "x": tensor("F32", 1),
        "w": {"dtype": "F32"},
    }
    diff = compare(found, SIGNATURE)
    assert diff == Differences(
        missing=("z",),
        extra=("a", "w", "x"),
        shapes=(("b", (5,), (4,)),),
        converted=1,
        not_float=(("b", "I8"),),
    )
    assert diff.refused
    assert compare(
        {"a": {"dtype": "F32"}, "b": tensor("BF16", 4), "i": tensor("I64", 1), "z": tensor("F16")}, SIGNATURE
    ).shapes == (("a", (), (2, 3)),)


@pytest.mark.parametrize(
    "diff",
    [
        Differences(("m",), (), (), 0, ()),
        Differences((), ("e",), (), 0, ()),
        Differences((), (), (("s", (1,), (2,)),), 0, ()),
    ],
    ids=["missing", "extra", "shapes"],
)
def test_missing_extra_or_reshaped_names_are_refused_and_dtypes_alone_are_not(diff):
    assert diff.refused
    assert not Differences((), (), (), 5, (("n", "I8"),)).refused


# -- the finding a user reads --------------------------------------------------------------------------------------

WEIGHTS = Path("/mnt/weights/pi05_base_pytorch/model.safetensors")
FOUR = Signature(PI05, {n: ("F32", (1,)) for n in ("n1", "n2", "n3", "n4")}, {})


def finding(found: Mapping[str, object], config: str = "pi05_libero", extra: tuple[str, ...] = ()) -> Finding:
    return check_model_weights(found, WEIGHTS, config, extra, [FOUR])


def test_weights_that_fit_pass_saying_how_many_tensors_and_conversions():
    ones = {n: tensor("F32", 1) for n in ("n1", "n2", "n3", "n4")}
    assert finding(ones) == Finding(
        "assets.weights-signature",
        Status.PASS,
        Text(
            f"{WEIGHTS} fits pi05 (gemma_2b + gemma_300m, 32-dim actions): its 4 tensors are named and shaped as the "
            "model's",
            f"{WEIGHTS} 与 pi05(gemma_2b + gemma_300m,32 维动作) 相符:4 个张量的名称和形状都与模型一致",
        ),
        None,
        str(WEIGHTS),
    )
    converted = finding(ones | {"n2": tensor("BF16", 1), "n3": tensor("F16", 1)})
    assert converted.status.value == "pass"
    assert converted.message.en.endswith("as the model's (2 stored as another float type, which loading converts)")
    assert converted.message.zh.endswith("一致(其中 2 个以其他浮点类型存储,加载时会自动转换)")


def test_integers_where_the_model_has_floats_warn_naming_the_first():
    found = {"n1": tensor("I8", 1), "n2": tensor("U8", 1), "n3": tensor("F32", 1), "n4": tensor("F32", 1)}
    got = finding(found)
    assert (got.id, got.status.value, got.where) == ("assets.weights-signature", "warn", str(WEIGHTS))
    assert got.message == Text(
        f"{WEIGHTS}: tensors holding integers where the model has floats: 2 (first: n1 as I8); loading converts "
        "them, so training would start from meaningless values",
        f"{WEIGHTS}:模型中为浮点数、文件里却是整数的张量:2 个(例如 n1 为 I8);加载时会被转换,训练将从无意义的数值开始",
    )
    assert got.hint == Text(
        "Use weights converted to float32 or bfloat16 by openpi's examples/convert_jax_model_to_pytorch.py.",
        "请使用 openpi 的 examples/convert_jax_model_to_pytorch.py 转换为 float32 或 bfloat16 的权重。",
    )


def test_a_partial_conversion_names_three_missing_tensors_then_an_ellipsis():
    got = finding({"n1": tensor("F32", 1)})
    assert (got.status.value, got.where) == ("fail", str(WEIGHTS))
    assert got.message == Text(
        f"{WEIGHTS} is a partial conversion: 3 of the model's 4 tensors missing (first: n2, n3, n4)",
        f"{WEIGHTS} 是不完整的转换结果:缺少模型 4 个张量中的 3 个(前几个:n2, n3, n4)",
    )
    assert got.hint == Text(
        "Convert the checkpoint again with openpi's examples/convert_jax_model_to_pytorch.py --config_name "
        f"pi05_libero (it writes every tensor of the model), then copy model.safetensors to {WEIGHTS.parent} whole.",
        "请用 openpi 的 examples/convert_jax_model_to_pytorch.py --config_name pi05_libero 重新转换检查点"
        f"(它会写出模型的全部张量),再把 model.safetensors 完整复制到 {WEIGHTS.parent}。",
    )
    assert finding({}).message.en.endswith("4 of the model's 4 tensors missing (first: n1, n2, n3, …)")


def test_extra_names_and_other_shapes_are_a_mismatch_listing_each_kind():
    found = {
        "n1": tensor("F32", 1),
        "n2": tensor("F32", 1),
        "n3": tensor("F32", 2, 2),
        "n4": tensor("F32", 3),
        "x1": tensor("F32", 1),
        "x2": tensor("F32", 1),
        "x3": tensor("F32", 1),
        "x4": tensor("F32", 1),
    }
    got = finding(found)
    assert got.status.value == "fail"
    assert got.message == Text(
        f"{WEIGHTS} does not fit pi05 (gemma_2b + gemma_300m, 32-dim actions), the model of train config pi05_libero: "
        "tensors the model does not have: 4 (first: x1, x2, x3, …); tensors shaped otherwise: 2 (first: n3 is [2, 2] "
        "where the model's is [1])",
        f"{WEIGHTS} 与训练配置 pi05_libero 的模型 pi05(gemma_2b + gemma_300m,32 维动作) 不符:模型中没有的张量:4 个"
        "(前几个:x1, x2, x3, …); 形状不同的张量:2 个(例如 n3 为 [2, 2],模型中为 [1])",
    )
    assert finding(
        {"n1": tensor("F32", 1), "n2": tensor("F32", 1), "n3": tensor("F32", 1)} | {"x\n": tensor("F32", 1)}
    ).message.en.endswith(
        "1 of the model's 4 tensors missing (first: n4); tensors the model does not have: 1 (first: x\\n)"
    )


def test_weights_of_another_model_name_both_models():
    pi0 = header("state_proj.weight")
    got = check_model_weights(pi0, WEIGHTS, "pi05_libero", (), [FOUR])
    label_pi0 = "pi0 (gemma_2b + gemma_300m, 32-dim actions)"
    assert (got.status.value, got.where) == ("fail", str(WEIGHTS))
    assert got.message.en == (
        f"{WEIGHTS} holds the weights of {label_pi0}, but train config pi05_libero builds pi05 (gemma_2b + "
        "gemma_300m, 32-dim actions): 4 of the model's 4 tensors missing (first: n1, n2, n3, …); tensors the model "
        "does not have: 3 (first: action_in_proj.weight, paligemma_with_expert.paligemma.model.language_model.norm"
        ".weight, state_proj.weight)"
    )
    assert got.message.zh == (
        f"{WEIGHTS} 是 pi0(gemma_2b + gemma_300m,32 维动作) 的权重,而训练配置 pi05_libero 构建的是 pi05(gemma_2b + "
        "gemma_300m,32 维动作):缺少模型 4 个张量中的 4 个(前几个:n1, n2, n3, …); 模型中没有的张量:3 个(前几个:"
        "action_in_proj.weight, paligemma_with_expert.paligemma.model.language_model.norm.weight, state_proj.weight)"
    )
    assert got.hint == Text(
        "Set VLA_WEIGHTS to weights converted for pi05 (gemma_2b + gemma_300m, 32-dim actions), or choose a train "
        f"config that builds {label_pi0}.",
        "请把 VLA_WEIGHTS 指向为 pi05(gemma_2b + gemma_300m,32 维动作) 转换的权重,或改用构建 "
        "pi0(gemma_2b + gemma_300m,32 维动作) 的训练配置。",
    )
    same_model = check_model_weights(header(), WEIGHTS, "pi05_libero", (), [FOUR])
    assert same_model.message.en.startswith(f"{WEIGHTS} does not fit pi05")


def test_an_unknown_model_or_signature_passes_saying_nothing_was_compared():
    unknown = check_model_weights({}, WEIGHTS, "my_config", (), [FOUR])
    assert (unknown.id, unknown.status.value, unknown.where, unknown.hint) == (
        "assets.weights-signature",
        "pass",
        str(WEIGHTS),
        None,
    )
    assert unknown.message == Text(
        f"tensor names and shapes in {WEIGHTS} not compared: the model of train config my_config (with its --model "
        "flags) is not one the launcher knows",
        f"未比对 {WEIGHTS} 中的张量名称和形状:启动器不认识训练配置 my_config(连同其 --model 参数)所用的模型",
    )
    other = check_model_weights({}, WEIGHTS, "pi0_libero", (), [FOUR])
    assert (other.status.value, other.where) == ("pass", str(WEIGHTS))
    assert check_model_weights({}, WEIGHTS, "pi05_libero", ("--model.no-pi05",), [FOUR]) == other
    assert other.message == Text(
        f"tensor names and shapes in {WEIGHTS} not compared: no signature of pi0 (gemma_2b + gemma_300m, 32-dim "
        "actions) ships with the launcher",
        f"未比对 {WEIGHTS} 中的张量名称和形状:启动器没有随附 pi0(gemma_2b + gemma_300m,32 维动作) 的签名",
    )


def test_the_shipped_signatures_are_used_when_none_are_given(monkeypatch):
    monkeypatch.setattr(weights, "shipped_signatures", lambda: (FOUR,))
    got = check_model_weights({}, WEIGHTS, "pi05_libero")
    assert got.message.en.startswith(f"{WEIGHTS} is a partial conversion")


# -- a JAX checkpoint where PyTorch weights belong -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "weights_at", "checkpoint_at", "markers"),
    [
        (("params/", "_METADATA"), "ckpt/pi05_base", "ckpt/pi05_base", "params, _METADATA"),
        (("manifest.ocdbt", "_CHECKPOINT_METADATA"), "ckpt/params", "ckpt", "manifest.ocdbt, _CHECKPOINT_METADATA"),
        (("params/", "manifest.ocdbt"), "ckpt/params", "ckpt/params", "params, manifest.ocdbt"),
        (("params",), "ckpt/run", "ckpt/run", "params"),
    ],
    ids=["folder-above-params", "params-folder-itself", "named-params-with-params-inside", "params-a-file"],
)
def test_a_jax_checkpoint_names_its_markers_and_the_conversion(tmp_path, layout, weights_at, checkpoint_at, markers):
    folder = tmp_path / weights_at
    folder.mkdir(parents=True)
    for name in layout:
        if name.endswith("/"):
            (folder / name).mkdir()
        else:
            (folder / name).write_text("x")
    checkpoint = tmp_path / checkpoint_at
    output = checkpoint.parent / f"{checkpoint.name}_pytorch"
    got = orbax_checkpoint(folder, "pi05_libero")
    assert got is not None
    assert (got.id, got.status.value, got.where) == ("assets.weights", "fail", str(folder))
    assert got.message.en == (
        f"{folder} is a JAX (orbax) checkpoint ({markers}) without model.safetensors: openpi's PyTorch trainer loads "
        "only model.safetensors"
    )
    assert got.hint is not None
    assert got.hint.en == (
        f"Convert it with openpi's script: python examples/convert_jax_model_to_pytorch.py --checkpoint_dir "
        f"{checkpoint} --config_name pi05_libero --output_path {output} (the script reads a pi05 checkpoint as pi05 "
        f"only when 'pi05' is part of that path), then set VLA_WEIGHTS to {output}."
    )


def test_a_jax_checkpoint_without_a_config_gets_a_placeholder(tmp_path):
    (tmp_path / "_METADATA").write_text("{}")
    got = orbax_checkpoint(tmp_path, None)
    assert got is not None and got.hint is not None
    assert "--config_name <train_config> " in got.hint.en and "--config_name <train_config> " in got.hint.zh


def test_a_folder_with_model_safetensors_or_no_markers_is_not_a_jax_checkpoint(tmp_path):
    assert orbax_checkpoint(tmp_path, "pi05_libero") is None
    (tmp_path / "params").mkdir()
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert orbax_checkpoint(tmp_path, "pi05_libero") is None
