"""What downloads say: refusals, failures (with their details) and progress lines."""

from __future__ import annotations

from entrypoint.core.messages import Catalogue

MESSAGES = Catalogue(
    "net",
    {
        # refusals before any connection
        "unsupported-scheme": (
            "unsupported address {source}: only https://, http://, file:// or a path",
            "不支持的地址 {source}:仅支持 https://、http://、file:// 或文件路径",
        ),
        "unsupported-scheme-fix": ("Give an https URL or a file path.", "请提供 https 地址或文件路径。"),
        "url-malformed": ("{source} is not a valid URL: {problem}", "{source} 不是合法的 URL:{problem}"),
        "url-malformed-fix": (
            "Write it as https://host/path/file or https://host:port/path/file (port 1-65535).",
            "请写成 https://host/path/file 或 https://host:port/path/file(端口 1-65535)。",
        ),
        "url-port": ("the port '{port}' is not a number from 1 to 65535", "端口 '{port}' 不是 1 到 65535 之间的数字"),
        "url-no-host": ("it names no host", "其中没有主机名"),
        "url-host-label": (
            "the host name '{host}' has an empty part or a part longer than 63 characters",
            "主机名 '{host}' 中有空的部分或超过 63 个字符的部分",
        ),
        "url-brackets": (
            "the brackets around an IPv6 address do not match",
            "IPv6 地址两侧的方括号不匹配",
        ),
        "url-characters": ("it contains spaces or control characters", "其中含有空格或控制字符"),
        "url-userinfo": (
            "a user name or password in the address (user:password@host) is not sent by downloads ({error}); use a "
            "pre-signed URL, a proxy variable, or a local file",
            "下载不会发送地址中的用户名或密码(user:password@host)({error});请改用预签名 URL、代理变量或本地文件",
        ),
        "plain-http": ("{source} is plain http: downloads are https-only", "{source} 使用明文 http:下载仅允许 https"),
        "plain-http-fix": (
            "Use an https URL, or explicitly allow http for a trusted network.",
            "请改用 https 地址,或在可信网络中显式允许 http。",
        ),
        "redirect-to-http": (
            "{source} redirects to plain http ({target}): refused",
            "{source} 重定向到明文 http({target}):已拒绝",
        ),
        "redirect-to-http-fix": ("Use a URL that stays on https.", "请使用始终为 https 的地址。"),
        "no-file-name": ("{source} names no file", "{source} 未指明文件名"),
        "no-file-name-fix": ("Give the URL of the file itself.", "请提供文件本身的地址。"),
        "local-missing": ("{path} does not exist or is not a file", "{path} 不存在或不是文件"),
        "local-missing-fix": ("Check the path (is the storage mounted?).", "请检查路径(存储是否已挂载?)。"),
        # the result
        "checksum": (
            "{source} has sha256 {actual}, not the expected {expected}: refused",
            "{source} 的 sha256 为 {actual},与期望的 {expected} 不符:已拒绝",
        ),
        "checksum-fix": (
            "Check that the pinned checksum belongs to this file, or fix the source.",
            "请确认所固定的校验和属于该文件,或修正来源。",
        ),
        "changed": ("{source} changed on the server during the download", "{source} 在下载过程中被服务器端更新"),
        "changed-fix": (
            "Run the same command again: it starts this file over.",
            "请再次运行同一命令:该文件将重新下载。",
        ),
        "no-range": ("{source}: the server ignored a range request", "{source}:服务器忽略了范围请求"),
        "no-range-fix": ("Use a single stream for this server.", "请对该服务器使用单连接下载。"),
        # a failed transfer: `failed` with one of the details below
        "failed": ("download of {source} failed: {detail}", "下载 {source} 失败:{detail}"),
        "failed-fix": (
            "Check the URL and the network (proxy variables, DNS), or provide the file locally.",
            "请检查地址与网络(代理变量、DNS),或改为提供本地文件。",
        ),
        "range-416": ("HTTP 416 for a resumed range; starting over", "续传范围无效(HTTP 416);将重新下载"),
        "http-status": ("HTTP {code} {reason}", "服务器返回 HTTP {code} {reason}"),
        "stalled": ("no data for {seconds:g} s at byte {offset}", "第 {offset} 字节处 {seconds:g} 秒无数据,已超时"),
        "connection-lost": ("connection lost ({error}) at byte {offset}", "第 {offset} 字节处连接中断({error})"),
        "no-answer": ("no answer within {seconds:g} s", "{seconds:g} 秒内无响应"),
        "unreachable": ("cannot reach {source}: {reason}", "无法访问 {source}:{reason}"),
        "name-unresolved": ("cannot resolve {host} ({reason})", "无法解析 {host}({reason})"),
        "name-unknown": (
            "the name {host} does not resolve ({reason}): no such host, or no DNS on this machine",
            "名称 {host} 无法解析({reason}):主机不存在,或本机没有可用的 DNS",
        ),
        "name-unknown-fix": (
            "Check the host name in the URL and this machine's network (DNS); without internet access, give a "
            "local file (a path) instead, or set https_proxy to a proxy that can reach it.",
            "请检查 URL 中的主机名与本机网络(DNS);无法访问外网时,请改为提供本地文件(路径),或把 https_proxy "
            "设为能访问它的代理。",
        ),
        "proxy-unknown-fix": (
            "The proxy named by {variable} does not resolve: correct {variable} (http://host:port) or unset it.",
            "{variable} 指定的代理无法解析:请修正 {variable}(http://host:port)或取消设置。",
        ),
        "proxy-malformed": (
            "the proxy variable {variable} ({proxy}) is not a usable proxy URL for {source}: {problem}",
            "代理变量 {variable}({proxy})不是可用于 {source} 的代理地址:{problem}",
        ),
        "proxy-malformed-fix": (
            "Write {variable} as http://host:port (port 1-65535), or unset it.",
            "请把 {variable} 写成 http://host:port(端口 1-65535),或取消设置。",
        ),
        "closed-early": ("connection closed after {have} of {total} bytes", "传输在 {have}/{total} 字节处中断"),
        "wrong-range": ("the server answered a different range; starting over", "服务器返回的范围不符;将重新下载"),
        "closed-while-skipping": (
            "connection closed while skipping to byte {offset}",
            "跳到第 {offset} 字节时连接中断",
        ),
        "deadline": ("not finished within {seconds:g} s", "{seconds:g} 秒内未完成"),
        "ended-early": (
            "the server ended the file at byte {offset} of {size}",
            "服务器在第 {offset}/{size} 字节处结束了文件",
        ),
        # progress lines, each after `download <name>: `
        "progress": ("{have} at {rate}/s", "{have},速度 {rate}/s"),
        "progress-of": ("{have} of {total} ({percent}%) at {rate}/s", "{have} / {total}({percent}%),速度 {rate}/s"),
        "hashing": ("hashing {have} at {rate}/s", "正在计算 sha256:{have},速度 {rate}/s"),
        "done": (
            "done, {size} in {seconds:.1f} s ({rate}/s), sha256 {digest}…",
            "完成,{size},用时 {seconds:.1f} 秒({rate}/s),sha256 {digest}…",
        ),
        "retrying": (
            "attempt {attempt} of {tries} at {host} failed ({reason}); next attempt in {wait:g} s, from byte {offset}",
            "访问 {host} 的第 {attempt}/{tries} 次尝试失败({reason});{wait:g} 秒后从第 {offset} 字节重试",
        ),
        "lookup-retrying": (
            "{reason}: lookup {attempt} of {tries}; next lookup in {wait:g} s",
            "{reason}:第 {attempt}/{tries} 次解析;{wait:g} 秒后再次解析",
        ),
        "one-stream": (
            "the server stopped honouring ranges; continuing from byte {offset} in one stream",
            "服务器不再支持范围请求;从第 {offset} 字节起改为单连接继续",
        ),
    },
)
