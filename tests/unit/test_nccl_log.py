"""Transport proof from NCCL INFO lines (formats as NCCL 2.7-2.2x print them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from entrypoint.core.findings import Status
from entrypoint.fabric.inventory import Transport
from entrypoint.fabric.nccl_log import ProofKind, debug_env, parse_lines, proof_findings, read_logs

ROCE_GDR = """\
node-a:5663:5663 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>
node-a:5663:5663 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node-a:5663:5809 [0] NCCL INFO NET/IB : Using [0]mlx5_bond_0:1/RoCE [1]mlx5_bond_1:1/RoCE [RO]; OOB eth0:10.0.0.2<0>
node-a:5663:5809 [0] NCCL INFO Using network IB
node-a:5663:5809 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
node-a:5663:5809 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
node-a:5663:5809 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1(8)/GDRDMA
node-a:5664:5810 [1] NCCL INFO Channel 02/0 : 9[1] -> 1[1] [receive] via NET/IB/1/GDRDMA/Shared
"""

IBEXT_NO_GDR = """\
node-b:987:1260 [7] NCCL INFO Using network IBext_v8
node-b:987:1260 [7] NCCL INFO Channel 03/0 : 47[7] -> 39[7] [receive] via NET/IBext_v8/2
node-b:986:1254 [6] NCCL INFO Channel 00/0 : 6[6] -> 38[6] [receive] via NET/IBext_v8/1/GDRDMA
"""

SOCKET = """\
node-c:919:919 [0] NCCL INFO NET/IB : No device found.
node-c:919:919 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>
node-c:919:1150 [0] NCCL INFO Using network Socket
node-c:926:1151 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3
node-c:921:1146 [2] NCCL INFO Channel 00/0 : 10[2] -> 9[1] via P2P/IPC/read
"""

LOCAL = """\
solo:70:90 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
solo:71:91 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct
solo:72:92 [2] NCCL INFO Channel 01/0 : 2[2] -> 3[3] via P2P/direct pointer/read
"""

OLD_FORMAT = """\
old-1:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA
old-1:120890:121563 [3] NCCL INFO Channel 01 : 3[ca000] -> 2[c7000] [send] via NET/IB/2/GDRDMA
"""

PREFIXED_BY_TORCHRUN = """\
[default0]:tione-worker-1:77:215 [2] NCCL INFO Channel 02/0 : 3[3] -> 10[2] [receive] via NET/IBext/10/GDRDMA
[rank3]: some training output mentioning via NET/Socket/0 without an NCCL prefix
Traceback (most recent call last): nothing to see here
"""


@pytest.mark.parametrize(
    "text, host, kind, net, intra",
    [
        pytest.param(ROCE_GDR, "node-a", "rdma-gdr", ["IB"], ["P2P/CUMEM"], id="roce-gdrdma-with-pxn-and-shared"),
        pytest.param(IBEXT_NO_GDR, "node-b", "rdma", ["IBext_v8"], [], id="ibext-plugin-partly-without-gdr"),
        pytest.param(SOCKET, "node-c", "socket", ["Socket"], ["P2P/IPC"], id="socket-fallback"),
        pytest.param(LOCAL, "solo", "local", [], ["P2P/CUMEM", "P2P/direct pointer", "SHM/direct"], id="single-node"),
        pytest.param(OLD_FORMAT, "old-1", "rdma-gdr", ["IB"], [], id="pre-2.12-channel-format"),
        pytest.param(PREFIXED_BY_TORCHRUN, "tione-worker-1", "rdma-gdr", ["IBext"], [], id="inside-a-node-log"),
        pytest.param("x:1:1 [0] NCCL INFO Using network IBext\n", "x", "rdma", [], [], id="init-line-only"),
    ],
)
def test_classify_node(text, host, kind, net, intra):
    proof = parse_lines(text.splitlines())
    assert [n.host for n in proof.nodes] == [host]
    node = proof.nodes[0]
    assert (node.kind, sorted(node.net), sorted(node.intra)) == (kind, net, intra)


def test_node_details():
    node = parse_lines(ROCE_GDR.splitlines()).nodes[0]
    assert (node.net_channels, node.gdr_channels, node.version) == (3, 3, "2.21.5")
    assert node.nics == {"mlx5_bond_0:1/RoCE", "mlx5_bond_1:1/RoCE"} and node.network == {"IB"}
    socket_node = parse_lines(SOCKET.splitlines()).nodes[0]
    assert socket_node.nics == {"eth0:10.0.0.3<0>"}


def test_nothing_recognisable():
    assert parse_lines(["", "hello", "NCCL WARN nothing", "\x00\xff"]).nodes == ()


def test_read_logs_per_rank_files(tmp_path):
    (tmp_path / "nccl.node-a.5663.log").write_text(ROCE_GDR)
    (tmp_path / "nccl.node-c.919.log").write_text("NCCL version 2.18.1+cuda12.1\n" + SOCKET)
    (tmp_path / "nccl.garbage.1.log").write_bytes(b"\xff\xfe\x00 not text")
    (tmp_path / "nccl.dir.2.log").mkdir()
    (tmp_path / "unrelated.txt").write_text(SOCKET.replace("node-c", "node-z"))
    proof = read_logs(tmp_path)
    assert [(n.host, n.kind, n.version) for n in proof.nodes] == [
        ("node-a", "rdma-gdr", "2.21.5"),
        ("node-c", "socket", "2.18.1"),
    ]
    assert proof.socket_nodes == ("node-c",)
    shown = json.loads(json.dumps(proof.to_json()))
    assert shown["socket_nodes"] == ["node-c"]
    assert [n["kind"] for n in shown["nodes"]] == ["rdma-gdr", "socket"]
    assert [n.kind for n in proof.nodes] == [ProofKind.RDMA_GDR, ProofKind.SOCKET]
    assert read_logs(tmp_path / "missing").nodes == ()


@pytest.mark.parametrize(
    "texts, planned, expected",
    [
        pytest.param(
            [ROCE_GDR, SOCKET], Transport.ROCE, ("fabric.proof-socket", Status.WARN), id="socket-while-rdma-planned"
        ),
        pytest.param([ROCE_GDR, IBEXT_NO_GDR], Transport.ROCE, ("fabric.proof", Status.PASS), id="rdma-as-planned"),
        pytest.param([SOCKET], Transport.SOCKET, ("fabric.proof", Status.PASS), id="socket-as-planned"),
        pytest.param([LOCAL], Transport.LOCAL, ("fabric.proof", Status.PASS), id="single-node"),
        pytest.param(["nothing here"], Transport.ROCE, None, id="no-evidence"),
    ],
)
def test_proof_findings(texts, planned, expected):
    findings = proof_findings(parse_lines("\n".join(texts).splitlines()), planned)
    assert [(f.id, f.status) for f in findings] == ([expected] if expected else [])
    if expected and expected[1] is Status.WARN:
        assert "node-c" in findings[0].message.en and "1-3 GB/s" in findings[0].message.en
        assert "although RoCE was planned" in findings[0].message.en and "计划使用 RoCE" in findings[0].message.zh
        assert findings[0].hint.zh and findings[0].message.zh


@pytest.mark.parametrize(
    "platform, expected",
    [
        pytest.param(
            {},
            {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG_FILE": "/cfs/logs/job/nccl.%h.%p.log"},
            id="ours",
        ),
        pytest.param({"NCCL_DEBUG": "WARN"}, {}, id="user-level-kept"),
        pytest.param({"NCCL_DEBUG": ""}, {}, id="user-empty-kept"),
        pytest.param({"NCCL_DEBUG_FILE": "/tmp/mine.%p"}, {}, id="user-file-kept"),
        pytest.param({"NCCL_DEBUG_SUBSYS": "COLL"}, {}, id="user-subsys-kept"),
    ],
)
def test_debug_env(platform, expected):
    assert debug_env("/cfs/logs/job/", platform) == expected


# ---- real logs (tests/support/real/nccl, sources in its README): older, fused and plugin formats ----

REAL = Path(__file__).resolve().parents[1] / "support" / "real" / "nccl"


def real(name: str) -> list[str]:
    return (REAL / name).read_text(encoding="utf-8").splitlines()


def test_real_pre_2_12_direct_shared_memory_is_shm():
    (node,) = parse_lines(real("nccl-issue-622_pre-2.12_shm.log")).nodes
    assert (node.host, node.kind, node.intra) == ("machine2", ProofKind.LOCAL, {"SHM/direct"})


def test_real_fused_nics_are_listed_one_by_one():
    proof = parse_lines(real("fused-nics_2.2x.log"))
    nodes = {n.host: n for n in proof.nodes}
    assert nodes["bigo"].nics == {"mlx5_0:1/RoCE", "mlx5_1:1/RoCE", "mlx5_2:1/RoCE", "mlx5_3:1/RoCE"}
    assert nodes["bigo"].network == {"IBext_v8"} and nodes["bigo"].kind is ProofKind.RDMA
    gpuserver = nodes["gpuserver1"]  # `host:pid [dev]`: a log pasted without thread ids
    assert gpuserver.nics == {"rocep130s0:1/RoCE", "rocep130s0:2/RoCE"}
    assert (gpuserver.kind, gpuserver.net, gpuserver.intra) == (ProofKind.RDMA, {"IB"}, {"SHM/direct"})


def test_real_multi_word_network_from_a_plugin():
    proof = parse_lines(real("aws-efa-eks_2.9.9.log"))
    assert [n.host for n in proof.nodes] == ["nccl-tests-efa-16-worker-0", "nccl-tests-efa-16-worker-1"]
    for node in proof.nodes:
        assert node.network == {"AWS Libfabric"} and node.net == {"AWS Libfabric"}
        assert node.kind is ProofKind.RDMA_GDR
    assert proof.nodes[0].intra == {"P2P/IPC"}
    (finding,) = proof_findings(proof, Transport.IB)
    assert finding.id == "fabric.proof" and "AWS Libfabric" in finding.message.en


def test_real_socket_fallback_after_a_failed_plugin():
    (node,) = parse_lines(real("training-on-eks_2.27.3_socket.log")).nodes
    assert (node.kind, node.version, node.network) == (ProofKind.SOCKET, "2.27.3", {"Socket"})
    assert node.nics == {"eth0:10.0.4.51<0>"}  # `NET/IB : Using [RO]; OOB …` names no device
    (finding,) = proof_findings(parse_lines(real("training-on-eks_2.27.3_socket.log")), Transport.ROCE)
    assert finding.id == "fabric.proof-socket"


def test_real_pxn_channels_with_gdr():
    (node,) = parse_lines(real("slurmv4_2.27.5.log")).nodes
    assert (node.kind, node.net_channels, node.gdr_channels, node.intra) == (ProofKind.RDMA_GDR, 4, 4, {"P2P/IPC"})


@pytest.mark.parametrize(
    "line, field, expected",
    [
        ("h:1:2 [0] NCCL INFO Ring 00 : 0 -> 1 via direct shared memory", "intra", {"SHM/direct"}),
        ("h:1:2 [0] NCCL INFO Ring 00 : 1 -> 0 via NET/IB/0", "net", {"IB"}),
        ("h:1:2 [0] NCCL INFO Using network AWS Libfabric  ", "network", {"AWS Libfabric"}),
        ("h:1:2 [0] NCCL INFO NET/IB : Using [0]={[0] mlx5_7:1/RoCE, [1] mlx5_6:1/RoCE} [RO]; OOB eth0:1.2.3.4<0>",
         "nics", {"mlx5_7:1/RoCE", "mlx5_6:1/RoCE"}),
        ("h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP [RO]; OOB ib0:10.0.0.1<0>",
         "nics", {"mlx5_0:1/IB/SHARP", "mlx5_1:1/IB/SHARP"}),
    ],
)  # fmt: skip
def test_format_variants(line, field, expected):
    (node,) = parse_lines([line]).nodes
    assert getattr(node, field) == expected


# ---- what the run record and the check's messages show, word for word ----


def test_a_nodes_record_names_every_field():
    (node,) = parse_lines(ROCE_GDR.splitlines()).nodes
    assert json.loads(json.dumps(node.to_json())) == {
        "host": "node-a",
        "kind": "rdma-gdr",
        "net": ["IB"],
        "net_channels": 3,
        "gdr_channels": 3,
        "intra": ["P2P/CUMEM"],
        "nics": ["mlx5_bond_0:1/RoCE", "mlx5_bond_1:1/RoCE"],
        "network": ["IB"],
        "nccl_version": "2.21.5",
    }


def test_a_log_named_without_a_pid_is_still_read(tmp_path):
    """`nccl.<host>.log` (NCCL_DEBUG_FILE without %p) names no host: its lines' own prefixes do."""
    (tmp_path / "nccl.node-c.log").write_text(SOCKET)
    (tmp_path / "nccl.node-b.17.log").write_text("NCCL version 2.21.5+cuda12.4\n" + IBEXT_NO_GDR)
    proof = read_logs(tmp_path)
    assert [(n.host, n.kind, n.version) for n in proof.nodes] == [
        ("node-b", "rdma", "2.21.5"),  # the bare version line belongs to the file name's host
        ("node-c", "socket", None),
    ]


def test_the_summary_names_each_nodes_paths():
    """The path named per node: the network transports used, else the network picked, else the local ones."""
    picked_only = "node-d:1:1 [0] NCCL INFO Using network IB\nnode-d:1:1 [0] NCCL INFO via P2P/IPC/read\n"
    rings_only = "node-e:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0\n"
    text = ROCE_GDR + SOCKET + LOCAL + picked_only + rings_only
    proof = parse_lines(text.splitlines())
    (finding,) = proof_findings(proof, Transport.IB)
    summary = (
        "node-a: rdma-gdr (IB), node-c: socket (Socket), node-d: rdma (IB), node-e: rdma (IB), "
        "solo: local (P2P/CUMEM/P2P/direct pointer/SHM/direct)"
    )
    assert finding.message.en == (
        f"NCCL ran over TCP sockets on node-c although IB was planned: expect 1-3 GB/s between nodes ({summary})"
    )
    two = parse_lines((SOCKET + SOCKET.replace("node-c", "node-f")).splitlines())
    (finding,) = proof_findings(two, Transport.ROCE)
    assert "TCP sockets on node-c, node-f although" in finding.message.en
    (finding,) = proof_findings(parse_lines(LOCAL.splitlines()), Transport.LOCAL)
    assert finding.message.en == "NCCL transports: solo: local (P2P/CUMEM/P2P/direct pointer/SHM/direct)"
