"""A Chinese line carries no English the user would have to read: the resume decision, why there is no node log,
the system's own error words (strerror), a JSON or UTF-8 decoder's complaint."""

from __future__ import annotations

import errno
import re
import socket

import pytest

from entrypoint.core.oserror import os_error_text
from tests.unit.conftest import World

ZH = {"VLA_LANG": "zh"}
ENGLISH_PROSE = re.compile(r"\b(?:[A-Za-z]{3,} ){2,}[A-Za-z]{3,}\b")  # three English words in a row
SYSTEM_WORDS = ("No such file", "Permission denied", "Not a directory", "Expecting value", "codec can't decode")


@pytest.mark.parametrize(
    "error, chinese",
    [
        (FileNotFoundError(errno.ENOENT, "No such file or directory"), "没有该文件或目录"),
        (PermissionError(errno.EACCES, "Permission denied"), "权限不足"),
        (OSError(errno.EROFS, "Read-only file system"), "只读文件系统"),
        (OSError(errno.ENOSPC, "No space left on device"), "设备上没有剩余空间"),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "连接被拒绝"),
        (OSError(errno.EOVERFLOW, "Value too large"), "系统错误 EOVERFLOW(errno 75:Value too large)"),
        (ValueError("no number"), "系统错误(no number)"),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "未知的主机名或服务名"),
        (TimeoutError("timed out"), "超时"),
        (errno.EIO, "输入/输出错误"),
    ],
    ids=[
        "enoent",
        "eacces",
        "erofs",
        "enospc",
        "econnrefused",
        "unlisted-errno",
        "no-errno",
        "unknown-host",
        "timeout",
        "errno",
    ],
)
def test_the_systems_words_in_chinese(error, chinese: str) -> None:
    text = os_error_text(error)
    assert text.zh == chinese and text.en


def zh_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(r"[\u4e00-\u9fff]", line)]


def test_the_plan_in_chinese_names_the_resume_decision_and_the_missing_log_in_chinese(world: World) -> None:
    (world.root / "a-file").write_text("")
    result = world.cli("plan", env={**ZH, "VLA_LOG_DIR": str(world.root / "a-file" / "logs")})
    assert "续训:全新开始" in result.out and "续训:fresh" not in result.out
    (log_line,) = [line for line in result.out.splitlines() if line.startswith("节点日志")]
    assert log_line.startswith("节点日志:无(") and "已存在,但不是文件夹" in log_line
    assert not ENGLISH_PROSE.search(log_line.replace(str(world.root), ""))


@pytest.mark.parametrize(
    "content, chinese",
    [
        (b'{"norm_stats": ', "此处应为一个值"),
        (b'{"norm_stats": {}} trailing', "JSON 值之后还有多余内容"),
        (b"\xff\xfe not utf-8", "第 0 字节无法解码"),
        (b'{"norm_stats": NaN}', "非有限数 NaN"),
    ],
    ids=["cut-short", "extra-data", "not-utf8", "nan"],
)
def test_a_broken_json_asset_is_explained_in_chinese(world: World, content: bytes, chinese: str) -> None:
    (world.assets / "assets/pi05_libero/physical-intelligence/libero/norm_stats.json").write_bytes(content)
    result = world.cli("check", env=ZH)
    assert result.code == 3 and chinese in result.out
    assert not any(words in line for line in zh_lines(result.out) for words in SYSTEM_WORDS)
