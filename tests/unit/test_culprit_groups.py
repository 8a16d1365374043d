"""Which ranks a stall names from their stacks: only a group that most ranks share makes the others outliers; a tie
between the largest groups, a single group, or ranks without stacks name nobody; the record shows every group."""

from __future__ import annotations

import pytest

from entrypoint.launch.culprit import Gathered, Method, NodeReport, RankReport, culprit_lines, name_culprit
from tests.support.stall import BARRIER, SLEEP

LOADER = ("_next_data (torch/utils/data/dataloader.py)", "main (train.py)")


def gathered(frames: list[tuple[str, ...]], per_node: int = 2) -> Gathered:
    """Ranks 0.. with the given frames, `per_node` ranks on each node."""
    nodes: dict[int, list[RankReport]] = {}
    for rank, stack in enumerate(frames):
        nodes.setdefault(rank // per_node, []).append(RankReport(rank, 100 + rank, stack, True, False))
    return Gathered({n: NodeReport(n, tuple(ranks), written_at=1.0) for n, ranks in nodes.items()}, [])


@pytest.mark.parametrize(
    "frames, ranks, nodes",
    [
        pytest.param([BARRIER, BARRIER, SLEEP, SLEEP], [], [], id="two-groups-tie"),
        pytest.param([BARRIER, BARRIER, SLEEP, SLEEP, LOADER], [], [], id="the-largest-groups-tie-beside-a-third"),
        pytest.param([BARRIER, SLEEP], [], [], id="one-against-one"),
        pytest.param([BARRIER] * 4, [], [], id="one-group"),
        pytest.param([(), (), (), ()], [], [], id="no-stacks-at-all"),
        pytest.param([BARRIER, BARRIER, BARRIER, SLEEP, LOADER], [3, 4], [1, 2], id="every-rank-outside-the-majority"),
        pytest.param([SLEEP, BARRIER, BARRIER, ()], [0], [0], id="a-rank-without-stack-is-in-no-group"),
        pytest.param([BARRIER, SLEEP, SLEEP, LOADER, SLEEP, BARRIER], [0, 3, 5], [0, 1, 2], id="majority-on-any-node"),
    ],
)
def test_only_a_group_most_ranks_share_names_the_others(frames, ranks, nodes):
    culprit = name_culprit(gathered(frames))
    assert (culprit.ranks, culprit.nodes) == (ranks, nodes)
    assert culprit.method is (Method.STACKS if ranks else Method.NONE)
    last = culprit_lines(culprit, 30, "/logs")[-1].en
    if ranks:
        assert last.startswith(f"STALL: culprit rank(s) {', '.join(map(str, ranks))} on node(s)")
    else:
        groups = len({f for f in frames if f})
        with_stacks = sum(1 for f in frames if f)
        assert last == (
            f"STALL: no single rank stands out ({groups} stack group(s) among {with_stacks} rank(s)); "
            "read the stacks above"
        )


def test_the_record_lists_the_groups_largest_first_and_names_the_majority():
    culprit = name_culprit(gathered([SLEEP, BARRIER, BARRIER, BARRIER]))
    assert culprit.groups == [
        {"frame": BARRIER[0], "ranks": [1, 2, 3]},
        {"frame": SLEEP[0], "ranks": [0]},
    ]
    assert culprit.why is not None and culprit.why.en == (
        f"their stack differs from the 3 rank(s) waiting in {BARRIER[0]}"
    )
    assert culprit.to_json()["ranks"] == [0] and culprit.to_json()["method"] == "stacks"


def test_a_tie_ordered_by_lowest_rank_still_names_nobody():
    culprit = name_culprit(gathered([SLEEP, BARRIER, SLEEP, BARRIER]))
    assert culprit.method is Method.NONE
    assert [g["ranks"] for g in culprit.groups] == [[0, 2], [1, 3]]


def test_a_node_that_sent_nothing_is_named_beside_the_verdict():
    seen = gathered([BARRIER, BARRIER, BARRIER, SLEEP])
    culprit = name_culprit(Gathered(seen.reports, [2]))
    lines = [line.en for line in culprit_lines(culprit, 30, "/logs")]
    assert lines[0] == "STALL: node 2 sent no diagnosis within 30s: look at its own log in /logs"
    assert lines[1].startswith("STALL: culprit rank(s) 3 on node(s) 1:")
    assert culprit.to_json()["missing_nodes"] == [2]


def test_the_flight_recorder_names_the_ranks_behind_and_keeps_the_groups_and_missing_nodes():
    seen = gathered([BARRIER, BARRIER, BARRIER, BARRIER, BARRIER, BARRIER])
    culprit = name_culprit(Gathered(seen.reports, [3]), {5: (7, 9, "nccl:all_reduce"), 2: (7, 9, "nccl:all_reduce")})
    assert (culprit.method, culprit.ranks, culprit.nodes, culprit.missing_nodes) == (
        Method.FLIGHT_RECORDER, [2, 5], [1, 2], [3],
    )  # fmt: skip
    assert culprit.groups == [{"frame": BARRIER[0], "ranks": [0, 1, 2, 3, 4, 5]}]
    assert culprit.why is not None and culprit.why.en == (
        "the flight recorder shows them behind: the others entered collective #9 (nccl:all_reduce), they stopped at #7"
    )
    lines = [line.en for line in culprit_lines(culprit, 30, "/logs")]
    assert lines[1].startswith("STALL: culprit rank(s) 2, 5 on node(s) 1, 2: the flight recorder")


def test_ranks_on_no_node_that_reported_are_named_with_a_question_mark():
    culprit = name_culprit(gathered([BARRIER] * 4), {9: (1, 2, "gloo:barrier")})
    assert (culprit.ranks, culprit.nodes) == ([9], [])
    assert culprit_lines(culprit, 30, "/logs")[-1].en.startswith("STALL: culprit rank(s) 9 on node(s) ?:")
