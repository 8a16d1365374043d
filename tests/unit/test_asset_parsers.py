"""Episode files judged from their ends, at each boundary, through the whole dataset check (its fast path for the
thousands of sound files) and the judgement that names the problem; norm stats with empty, uneven or non-finite
lists. Each case changes one thing in an otherwise sound file, so it fails for that reason alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from entrypoint.core.files import Ends
from entrypoint.core.findings import Status
from entrypoint.inspect.assets import InvalidAsset, _content_problem, check_dataset_folder, check_norm_stats
from tests.support.synthetic import MP4_FTYP, make_dataset, mp4_bytes, norm_stats, parquet_bytes

SOUND_PARQUET = parquet_bytes()  # 4 + 48 + 8 + 4 + 4 = 68 bytes, footer length 8


def footer(data: bytes, length: int) -> bytes:
    return data[:-8] + length.to_bytes(4, "little") + data[-4:]


def ftyp_size(data: bytes, size: int) -> bytes:
    return size.to_bytes(4, "big") + data[4:]


PARQUET_CASES = [
    pytest.param(SOUND_PARQUET, None, id="sound"),
    pytest.param(SOUND_PARQUET[4:], "no PAR1 magic", id="no-leading-par1"),
    pytest.param(SOUND_PARQUET[:-4], "no PAR1 magic", id="no-trailing-par1"),
    pytest.param(b"XAR1" + SOUND_PARQUET[4:], "no PAR1 magic", id="leading-magic-one-byte-off"),
    pytest.param(SOUND_PARQUET[:-1] + b"2", "no PAR1 magic", id="trailing-magic-one-byte-off"),
    pytest.param(footer(SOUND_PARQUET, 0), "footer length 0 does not fit a 68-byte file", id="footer-zero"),
    pytest.param(footer(SOUND_PARQUET, 56), None, id="footer-fills-the-file"),
    pytest.param(footer(SOUND_PARQUET, 57), "footer length 57 does not fit a 68-byte file", id="footer-one-over"),
    pytest.param(footer(SOUND_PARQUET, 60), "footer length 60 does not fit", id="footer-a-few-bytes-over"),
    pytest.param(footer(SOUND_PARQUET, 2**32 - 1), "footer length 4294967295", id="footer-huge"),
    pytest.param(b"PAR1\x01\x00\x00PAR1", "no PAR1 magic", id="eleven-bytes"),
    pytest.param(b"PAR1" + (1).to_bytes(4, "little") + b"PAR1", "footer length 1 does not fit a 12", id="twelve-bytes"),
    pytest.param(parquet_bytes(body=b"", footer=b""), "footer length 0 does not fit a 12-byte file", id="empty-frame"),
    pytest.param(parquet_bytes(body=b"", footer=b"x"), None, id="smallest-sound"),
    pytest.param(SOUND_PARQUET[: len(SOUND_PARQUET) // 2], "no PAR1 magic", id="cut-in-half"),
]

MP4_CASES = [
    pytest.param(mp4_bytes(), None, id="sound"),
    pytest.param(
        ftyp_size(mp4_bytes(), len(mp4_bytes())), "without the moov + mdat box", id="ftyp-claims-the-whole-file"
    ),
    pytest.param(ftyp_size(mp4_bytes(), len(mp4_bytes()) + 1), "no ftyp box", id="ftyp-one-byte-past-the-end"),
    pytest.param(ftyp_size(mp4_bytes(), 2**32 - 1), "no ftyp box", id="ftyp-claims-4-gib"),
    pytest.param(ftyp_size(mp4_bytes(), 16), "stop adding up at byte 16 of 64", id="ftyp-16-bytes"),
    pytest.param(ftyp_size(mp4_bytes(), 15), "no ftyp box", id="ftyp-15-bytes"),
    pytest.param(ftyp_size(mp4_bytes(), 0), "no ftyp box", id="ftyp-size-zero"),
    pytest.param(mp4_bytes()[:4] + b"free" + mp4_bytes()[8:], "no ftyp box", id="first-box-not-ftyp"),
    pytest.param(MP4_FTYP[:16], "no ftyp box", id="cut-inside-ftyp"),
    pytest.param(MP4_FTYP, "without the moov + mdat box", id="ftyp-alone"),
    pytest.param(mp4_bytes()[:-1], "stop adding up at byte 48 of 63", id="moov-one-byte-short"),
    pytest.param(mp4_bytes() + bytes(7), "stop adding up at byte 64 of 71", id="seven-stray-bytes-at-the-end"),
    pytest.param(mp4_bytes()[:48], "without the moov box", id="cut-before-moov"),
    pytest.param(mp4_bytes()[:48] + bytes(4) + b"moov", None, id="moov-of-size-0-to-the-end"),
]


@pytest.mark.parametrize("data, problem", PARQUET_CASES)
def test_parquet_ends(data, problem):
    found = _content_problem("parquet", Ends(len(data), data[:64], data[-8:]), "episode.parquet")
    assert (found is None) if problem is None else (found is not None and problem in found.en)


@pytest.mark.parametrize("data, problem", MP4_CASES)
def test_mp4_boxes(tmp_path, data, problem):
    path = tmp_path / "episode.mp4"
    path.write_bytes(data)
    found = _content_problem("mp4", Ends(len(data), data[:64], b""), str(path))
    assert (found is None) if problem is None else (found is not None and problem in found.en)


def dataset_with(tmp_path: Path, suffix: str, data: bytes) -> tuple[list, bool, int]:
    root = make_dataset(tmp_path / "physical-intelligence" / "libero", 3, video_keys=("observation.images.top",))
    if suffix == "parquet":
        target = root / "data" / "chunk-000" / "episode_000001.parquet"
    else:
        target = root / "videos" / "chunk-000" / "observation.images.top" / "episode_000001.mp4"
    target.write_bytes(data)
    return check_dataset_folder(root)


@pytest.mark.parametrize("suffix, cases", [("parquet", PARQUET_CASES), ("mp4", MP4_CASES)])
def test_the_dataset_check_agrees_with_the_judgement_for_every_case(tmp_path, suffix, cases):
    """The fast path (every sound file) and the judgement (what is wrong) must agree on every file."""
    for number, case in enumerate(cases):
        data, problem = case.values
        findings, complete, total = dataset_with(tmp_path / str(number), suffix, data)
        assert complete is (problem is None), case.id
        if problem is None:
            others = (
                3 * len(SOUND_PARQUET)
                + 3 * len(mp4_bytes())
                - len(SOUND_PARQUET if suffix == "parquet" else mp4_bytes())
            )
            assert total == others + len(data), case.id
        else:
            (broken,) = [f for f in findings if f.status is Status.FAIL]
            assert broken.id == "assets.dataset-content" and problem in broken.message.en, case.id
            assert "episode_000001" in broken.message.en, case.id


def stats_file(tmp_path: Path, change) -> Path:
    data = norm_stats(state_dim=3, action_dim=2)
    change(data["norm_stats"])
    path = tmp_path / "norm_stats.json"
    path.write_text(json.dumps(data))
    return path


def setter(key: str, field: str, value: object):
    def change(stats: dict) -> None:
        stats[key][field] = value

    return change


@pytest.mark.parametrize(
    "change, problem",
    [
        pytest.param(lambda s: None, None, id="sound"),
        *(
            pytest.param(setter(k, f, []), f"'norm_stats.{k}.{f}' is missing or empty", id=f"empty-{k}-{f}")
            for k in ("state", "actions")
            for f in ("mean", "std", "q01", "q99")
        ),
        pytest.param(setter("state", "q99", None), "'norm_stats.state.q99' is missing", id="null-list"),
        pytest.param(setter("state", "std", "1,2,3"), "'norm_stats.state.std' is missing", id="text-not-list"),
        pytest.param(setter("actions", "mean", [0.0]), "lists have different lengths (mean=1, std=2", id="short-mean"),
        pytest.param(setter("actions", "q99", [1.0] * 3), "q99=3", id="long-q99"),
        pytest.param(setter("state", "std", [1.0, True, 1.0]), "non-numeric or non-finite", id="a-bool"),
        pytest.param(setter("state", "std", [1.0, "1", 1.0]), "non-numeric or non-finite", id="a-string"),
        pytest.param(setter("state", "mean", [0.0, 10**400, 0.0]), "non-finite", id="beyond-a-float"),
        pytest.param(lambda s: s.pop("actions"), "actions", id="no-actions"),
        pytest.param(lambda s: s.update(state=[1.0]), "state", id="state-not-a-mapping"),
    ],
)
def test_norm_stats(tmp_path, change, problem):
    path = stats_file(tmp_path, change)
    if problem is None:
        assert check_norm_stats(path) == {"state": 3, "actions": 2}
        return
    with pytest.raises(InvalidAsset) as caught:
        check_norm_stats(path)
    assert problem in caught.value.text.en


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_norm_stats_with_json_constants_are_refused(tmp_path, text):
    path = tmp_path / "norm_stats.json"
    path.write_text(json.dumps(norm_stats(3, 2)).replace("1.0", text, 1))
    with pytest.raises(InvalidAsset):
        check_norm_stats(path)
