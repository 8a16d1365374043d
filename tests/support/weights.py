"""pi0-family weights files for tests: headers laid out as openpi's `PI0Pytorch` names its tensors.

`model_tensors` gives name -> (dtype, shape) for a model of the given widths (real sizes by default: ~800 tensors,
7 GB); `write_weights` writes a safetensors file with those tensors, sparse (the header is real, the data holes),
so a real-size header costs kilobytes of disk. Test data only: the launcher's shipped signature is recorded from
the real model (scripts/weights_signature.py); `write_shipped_weights` writes a file that signature accepts, for
synthetic trees that must pass the check.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from entrypoint.inspect import weights
from entrypoint.inspect.assets import DTYPE_BITS

VOCAB = 257152
PREFIX = "paligemma_with_expert."
LANGUAGE = PREFIX + "paligemma.model.language_model."
VISION = PREFIX + "paligemma.model.vision_tower.vision_model."
EXPERT = PREFIX + "gemma_expert."
TIED = (LANGUAGE + "embed_tokens.weight", PREFIX + "paligemma.lm_head.weight")  # (kept, dropped by the saver)

Tensors = dict[str, tuple[str, list[int]]]


def _gemma_layers(prefix: str, width: int, mlp: int, depth: int, ada: bool, dtype: str) -> Tensors:
    heads, head_dim = 8, 256
    tensors: Tensors = {}
    for i in range(depth):
        layer = f"{prefix}layers.{i}."
        tensors |= {
            layer + "self_attn.q_proj.weight": (dtype, [heads * head_dim, width]),
            layer + "self_attn.k_proj.weight": (dtype, [head_dim, width]),
            layer + "self_attn.v_proj.weight": (dtype, [head_dim, width]),
            layer + "self_attn.o_proj.weight": (dtype, [width, heads * head_dim]),
            layer + "mlp.gate_proj.weight": (dtype, [mlp, width]),
            layer + "mlp.up_proj.weight": (dtype, [mlp, width]),
            layer + "mlp.down_proj.weight": (dtype, [width, mlp]),
        }
        for norm in ("input_layernorm", "post_attention_layernorm"):
            if ada:
                tensors[f"{layer}{norm}.dense.weight"] = ("F32", [3 * width, width])
                tensors[f"{layer}{norm}.dense.bias"] = ("F32", [3 * width])
            else:
                tensors[f"{layer}{norm}.weight"] = ("F32", [width])
    return tensors


def model_tensors(
    pi05: bool = True,
    paligemma: int = 2048,
    expert: int = 1024,
    action_dim: int = 32,
    depth: int = 18,
    vision_depth: int = 27,
    vocab: int = VOCAB,
    dtype: str = "BF16",
    vision: int = 1152,
    vision_mlp: int = 4304,
) -> Tensors:
    """A pi0/pi05 model's tensors as its saved checkpoint holds them (the tied lm_head left out, as saved)."""
    tensors: Tensors = {
        LANGUAGE + "embed_tokens.weight": (dtype, [vocab, paligemma]),
        LANGUAGE + "norm.weight": ("F32", [paligemma]),
        VISION + "embeddings.patch_embedding.weight": ("F32", [vision, 3, 14, 14]),
        VISION + "embeddings.patch_embedding.bias": ("F32", [vision]),
        VISION + "embeddings.position_embedding.weight": ("F32", [256, vision]),
        VISION + "post_layernorm.weight": (dtype, [vision]),
        VISION + "post_layernorm.bias": (dtype, [vision]),
        PREFIX + "paligemma.model.multi_modal_projector.linear.weight": (dtype, [paligemma, vision]),
        PREFIX + "paligemma.model.multi_modal_projector.linear.bias": (dtype, [paligemma]),
        EXPERT + "lm_head.weight": (dtype, [vocab, expert]),
        "action_in_proj.weight": ("F32", [expert, action_dim]),
        "action_in_proj.bias": ("F32", [expert]),
        "action_out_proj.weight": ("F32", [action_dim, expert]),
        "action_out_proj.bias": ("F32", [action_dim]),
    }
    tensors |= _gemma_layers(LANGUAGE, paligemma, 8 * paligemma, depth, False, dtype)
    tensors |= _gemma_layers(EXPERT + "model.", expert, 4 * expert, depth, pi05, dtype)
    for i in range(vision_depth):
        layer = f"{VISION}encoder.layers.{i}."
        for part, shape in (
            ("self_attn.q_proj", [vision, vision]),
            ("self_attn.k_proj", [vision, vision]),
            ("self_attn.v_proj", [vision, vision]),
            ("self_attn.out_proj", [vision, vision]),
            ("mlp.fc1", [vision_mlp, vision]),
            ("mlp.fc2", [vision, vision_mlp]),
            ("layer_norm1", [vision]),
            ("layer_norm2", [vision]),
        ):
            tensors[f"{layer}{part}.weight"] = (dtype, shape)
            tensors[f"{layer}{part}.bias"] = (dtype, shape[:1])
    if pi05:
        tensors[EXPERT + "model.norm.dense.weight"] = ("F32", [3 * expert, expert])
        tensors[EXPERT + "model.norm.dense.bias"] = ("F32", [3 * expert])
        for name in ("time_mlp_in", "time_mlp_out"):
            tensors[f"{name}.weight"] = ("F32", [expert, expert])
            tensors[f"{name}.bias"] = ("F32", [expert])
    else:
        tensors[EXPERT + "model.norm.weight"] = ("F32", [expert])
        tensors["state_proj.weight"] = ("F32", [expert, action_dim])
        tensors["state_proj.bias"] = ("F32", [expert])
        tensors["action_time_mlp_in.weight"] = ("F32", [expert, 2 * expert])
        tensors["action_time_mlp_in.bias"] = ("F32", [expert])
        tensors["action_time_mlp_out.weight"] = ("F32", [expert, expert])
        tensors["action_time_mlp_out.bias"] = ("F32", [expert])
    return tensors


def header_json(tensors: Tensors, metadata: dict[str, str] | None = None) -> dict[str, object]:
    """The safetensors header of `tensors`, back to back in name order, with the saver's tied-name metadata."""
    header: dict[str, object] = {"__metadata__": {"format": "pt", TIED[1]: TIED[0]} if metadata is None else metadata}
    offset = 0
    for name, (dtype, shape) in sorted(tensors.items()):
        size = DTYPE_BITS[dtype] // 8
        for length in shape:
            size *= length
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    return header


def write_weights(path: Path, tensors: Tensors, metadata: dict[str, str] | None = None) -> Path:
    """A sparse safetensors file holding `tensors` (header real, data holes); returns `path`."""
    header = header_json(tensors, metadata)
    data_end = max((info["data_offsets"][1] for name, info in header.items() if name != "__metadata__"), default=0)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        handle.truncate(8 + len(raw) + data_end)
    return path


def write_shipped_weights(path: Path, train_config: str = "pi05_libero") -> bool:
    """Sparse weights holding the tensors of the shipped signature of `train_config`'s model, as openpi's saver
    writes them; False (nothing written) while no such signature ships."""
    model = weights.job_model(train_config)
    signature = next((s for s in weights.shipped_signatures() if s.model == model), None)
    if signature is None:
        return False
    tensors = {name: (dtype, list(shape)) for name, (dtype, shape) in signature.tensors.items()}
    write_weights(path, tensors, {"format": "pt", **signature.tied})
    return True
