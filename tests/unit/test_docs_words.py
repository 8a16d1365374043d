"""What the README and docs tell a user to type and believe: no secret on a command line in either language, no
figure without the command and date that produced it, no retired goal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SECRET_ON_A_COMMAND_LINE = re.compile(r"\b\w*(?:PASSWORD|TOKEN|SECRET)=\S")


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_no_secret_is_typed_on_a_command_line(doc: Path) -> None:
    """A password in `VAR=value command` lands in the shell history and the process list: both languages read it
    with `read -rs` instead."""
    found = [line for line in doc.read_text(encoding="utf-8").splitlines() if SECRET_ON_A_COMMAND_LINE.search(line)]
    assert not found, found


def test_both_quick_starts_read_the_registry_password_without_echo() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    chinese = text[text.index("## 中文快速上手") : text.index("## Using the image on TI-ONE")]
    english = text[text.index("## Using the image on TI-ONE") :]
    for section in (chinese, english):
        assert "read -rs TCR_PASSWORD; export TCR_PASSWORD" in section


def test_the_benchmarks_describe_the_weights_file_they_measured(tmp_path: Path) -> None:
    """The synthetic tree's weights hold the shipped pi05 signature: their size and tensor count, as written."""
    import json
    import struct

    from tests.support.synthetic import make_assets_tree

    weights = make_assets_tree(tmp_path / "tree", episodes=1) / "checkpoints/pi05_base_pytorch/model.safetensors"
    with weights.open("rb") as handle:
        header = json.loads(handle.read(struct.unpack("<Q", handle.read(8))[0]))
    count, size = len([k for k in header if k != "__metadata__"]), weights.stat().st_size
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert f"sparse {size / 1e9:.2f} GB `model.safetensors` (the {count} tensors" in text
    assert f"({count} tensors, 4.14 B parameters" in text
    assert "sparse 14 GB" not in text and "813 tensors" not in text


@pytest.mark.parametrize("doc", [*DOCS, ROOT / "scripts" / "bench_check.py"], ids=lambda d: d.name)
def test_the_retired_start_up_goal_is_not_claimed(doc: Path) -> None:
    """`check`'s start-up against a bare interpreter is a regression guard (scripts/bench_check.py), not a ≤ 3× goal."""
    text = doc.read_text(encoding="utf-8")
    assert not re.search(r"goal (?:\(issue 15\) )?is (?:check )?≤ ?3×|the goal is\s+≤ ?3×", text)


def test_every_measured_figure_in_the_readme_says_how_and_when() -> None:
    """A figure someone measured (seconds, sizes) sits beside the command or page that produced it and the date."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraphs = re.split(r"\n\s*\n|\n(?=\s*- )", text)
    figure = re.compile(r"\b\d+(?:\.\d+)?(?:–\d+(?:\.\d+)?)? ?(?:s|ms)\b")
    measured = [p for p in paragraphs if re.search(r"\bMeasured\b|measured on|\btook \d", p) and figure.search(p)]
    assert measured, "the README quotes measured figures"
    for paragraph in measured:
        assert re.search(r"\b20\d\d-\d\d-\d\d\b", paragraph), paragraph
        assert re.search(r"`[^`]*(?:pytest|python3 -m|vla-entrypoint)[^`]*`|docs/\w+\.md", paragraph), paragraph


def test_the_readme_says_what_the_demo_and_the_tests_cost_and_fetch() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    cost = text[text.index("**What the demo and the tests cost.**") :].split("\n\n")[0]
    for fact in ("py-spy", "PyPI", "docker/tools", "GB", "The unit tier", "resident", "`.venv`"):
        assert fact in cost, fact
    assert "A second `scripts/demo` into the same folder trains nothing" in text
