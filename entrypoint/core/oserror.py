"""What the system said, in both languages: an `OSError`'s `strerror` is English prose, so a Chinese line gets the
Chinese words for the errors a launcher meets (files, storage, network, processes) and, for any other, the error's
symbolic name and number instead of English."""

from __future__ import annotations

import errno
import os

from entrypoint.core.messages import Catalogue, Text

MESSAGES = Catalogue(
    "core",
    {
        "os-timeout": ("timed out", "超时"),
        "os-error-plain": ("{english}", "系统错误({english})"),
        "os-error-unlisted": ("{english} ({name}, errno {number})", "系统错误 {name}(errno {number}:{english})"),
    },
)

_CHINESE = {
    errno.ENOENT: "没有该文件或目录",
    errno.ENOTDIR: "路径中的某一级不是目录",
    errno.EISDIR: "这是一个目录",
    errno.EEXIST: "文件已存在",
    errno.ENOTEMPTY: "目录不为空",
    errno.EACCES: "权限不足",
    errno.EPERM: "不允许该操作",
    errno.EROFS: "只读文件系统",
    errno.ENOSPC: "设备上没有剩余空间",
    errno.EDQUOT: "超出磁盘配额",
    errno.EFBIG: "文件过大",
    errno.EIO: "输入/输出错误",
    errno.ELOOP: "符号链接层数过多",
    errno.ENAMETOOLONG: "文件名过长",
    errno.EXDEV: "不能跨文件系统操作",
    errno.ESTALE: "NFS 文件句柄已失效",
    errno.EBUSY: "设备或资源忙",
    errno.ETXTBSY: "文件正被执行,无法写入",
    errno.EMFILE: "打开的文件过多",
    errno.ENFILE: "系统打开的文件过多",
    errno.ENOMEM: "内存不足",
    errno.EAGAIN: "资源暂时不可用",
    errno.EINTR: "被信号中断",
    errno.EINVAL: "参数无效",
    errno.ENOEXEC: "可执行文件格式错误",
    errno.E2BIG: "参数列表过长",
    errno.ENXIO: "没有该设备或地址",
    errno.ENODEV: "没有该设备",
    errno.EPIPE: "管道已断开",
    errno.ETIMEDOUT: "连接超时",
    errno.ECONNREFUSED: "连接被拒绝",
    errno.ECONNRESET: "连接被对方重置",
    errno.ECONNABORTED: "连接被中止",
    errno.EHOSTUNREACH: "主机不可达",
    errno.ENETUNREACH: "网络不可达",
    errno.ENETDOWN: "网络已断开",
    errno.EADDRINUSE: "地址已被占用",
    errno.EADDRNOTAVAIL: "无法分配请求的地址",
}

_RESOLVER = {  # getaddrinfo's answers (socket.gaierror), by name: `socket` is imported only where one is met
    "EAI_NONAME": "未知的主机名或服务名",
    "EAI_AGAIN": "域名解析暂时失败,请稍后重试",
    "EAI_FAIL": "域名解析失败",
}


def os_error_text(error: BaseException | int | None, english: str = "") -> Text:
    """The system's words for `error` (an exception, or an errno with its `english` text): English as `strerror`
    gives it; Chinese from the table, else a Chinese lead with the symbolic name and number and the English words in
    brackets (an error the table does not list, or one without a number)."""
    number = error if isinstance(error, int) else getattr(error, "errno", None)
    if isinstance(error, BaseException):
        english = getattr(error, "strerror", None) or str(error) or type(error).__name__
    if type(error).__name__ == "gaierror" and isinstance(number, int):
        import socket

        names = {getattr(socket, name, None): chinese for name, chinese in _RESOLVER.items()}
        return Text(english, names.get(number, "域名解析失败"))
    if isinstance(error, TimeoutError) and not isinstance(number, int):
        return MESSAGES("os-timeout")
    if not isinstance(number, int):
        return MESSAGES("os-error-plain", english=english[:200])
    english = english or os.strerror(number)
    chinese = _CHINESE.get(number)
    if chinese is None:
        return MESSAGES("os-error-unlisted", english=english, name=errno.errorcode.get(number, "?"), number=number)
    return Text(english, chinese)
