"""A small text file someone wrote (a job file, a manifest): read only when it is a regular file, and bounded.

A folder, FIFO, device or dangling link is reported (`FileProblem`), never opened blocking; a file is opened
non-blocking and checked again once open, and read only up to a limit.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from entrypoint.core.messages import Catalogue, Text
from entrypoint.core.oserror import os_error_text

MESSAGES = Catalogue(
    "core",
    {
        "file-missing": ("nothing is there", "该路径下没有任何文件"),
        "file-directory": ("it is a folder", "它是文件夹"),
        "file-fifo": (
            "it is a FIFO (named pipe): never read, reading it could block forever",
            "它是 FIFO(命名管道):不会读取,读取可能永远阻塞",
        ),
        "file-special": ("it is a device or socket, not a regular file", "它是设备或套接字,不是普通文件"),
        "file-dangling": (
            "it is a symbolic link to {target}, which is missing",
            "它是指向 {target} 的符号链接,但链接目标缺失",
        ),
        "file-loop": ("it is a loop of symbolic links", "它是循环的符号链接"),
        "file-name-too-long": (
            "the path is too long for the file system (a name over 255 bytes, or over 4095 in all)",
            "路径超出文件系统的长度限制(单个名称超过 255 字节,或总长超过 4095 字节)",
        ),
        "file-too-big": (
            "it is {size} bytes; a file like this is at most {limit} bytes",
            "文件大小为 {size} 字节;此类文件最多 {limit} 字节",
        ),
        "file-not-utf8": (
            "it is not UTF-8 text (byte {position} cannot be decoded)",
            "它不是 UTF-8 文本(第 {position} 字节无法解码)",
        ),
        "file-os-error": ("the system refused: {error}", "系统拒绝访问:{error}"),
    },
)

MAX_BYTES = 256 << 10  # a job file or manifest is a few KB


class FileProblem(Exception):
    """The file cannot be read as text: `text` says why; `missing` when nothing at all is at the path."""

    def __init__(self, text: Text, missing: bool = False) -> None:
        super().__init__(text.en)
        self.text, self.missing = text, missing


def _kind_problem(path: Path) -> FileProblem | None:
    """Why `path` is not a regular file (following links); None when it is one."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            return FileProblem(MESSAGES("file-dangling", target=os.readlink(path)))
        return FileProblem(MESSAGES("file-missing"), missing=True)
    except NotADirectoryError:
        return FileProblem(MESSAGES("file-missing"), missing=True)
    except OSError as error:
        return _os_problem(error)
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return FileProblem(MESSAGES("file-directory"))
    if stat.S_ISFIFO(mode):
        return FileProblem(MESSAGES("file-fifo"))
    return FileProblem(MESSAGES("file-special"))


def _os_problem(error: OSError) -> FileProblem:
    if error.errno == errno.ELOOP:
        return FileProblem(MESSAGES("file-loop"))
    if error.errno == errno.ENAMETOOLONG:
        return FileProblem(MESSAGES("file-name-too-long"))
    return FileProblem(MESSAGES("file-os-error", error=os_error_text(error)))


def read_text(path: Path, max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of the regular file `path`; raises `FileProblem` for anything else, a file over `max_bytes`
    included. Opened non-blocking and checked again once open, so a FIFO swapped in meanwhile cannot block."""
    problem = _kind_problem(path)
    if problem is not None:
        raise problem
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as error:
        raise _os_problem(error) from None
    with os.fdopen(fd, "rb") as handle:
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                raise _kind_problem(path) or FileProblem(MESSAGES("file-special"))
            if opened.st_size > max_bytes:
                raise FileProblem(MESSAGES("file-too-big", size=opened.st_size, limit=max_bytes))
            data = handle.read(max_bytes + 1)
        except OSError as error:
            raise _os_problem(error) from None
    if len(data) > max_bytes:
        raise FileProblem(MESSAGES("file-too-big", size=len(data), limit=max_bytes))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileProblem(MESSAGES("file-not-utf8", position=error.start)) from None
