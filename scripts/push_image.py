#!/usr/bin/env python3
"""Push image tags to Tencent Container Registry (TCR) through the local Docker engine.

Contract: every reference is validated before anything is pushed; the password comes only from the
`TCR_PASSWORD` environment variable or stdin (`--password-stdin`), travels to the engine per push as
`auth_config` (nothing is written to ~/.docker/config.json), and is masked in every message. Progress goes to
stderr; stdout holds one `<reference>@sha256:…` line per pushed tag (also for tags pushed before a failure).
Exit codes: 0 all pushed, 1 a push failed (registry or engine), 2 bad input, missing credentials or missing
docker SDK (nothing was pushed).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

try:
    import docker
    import docker.errors
    import requests.exceptions
except ImportError as missing:
    sys.stderr.write(
        f"push_image: {missing}; install the docker SDK: python3 -m pip install 'docker>=7'\n"
        f"push_image: 缺少 Python 包，请安装 docker SDK：python3 -m pip install 'docker>=7'\n"
    )
    raise SystemExit(2) from None

EXIT_OK = 0
EXIT_PUSH = 1
EXIT_INPUT = 2

PROG = "push_image"
MASK = "******"
ENGINE_TIMEOUT_S = 600  # longest silence from the engine before a push counts as hung

NAMESPACE_RULES = (
    "2-30 characters of a-z, 0-9, '.', '_', '-'; starts and ends with a letter or digit; no two separators in a row"
)
NAMESPACE_RULES_ZH = "2-30 个字符，只能是 a-z、0-9、'.'、'_'、'-'；以字母或数字开头和结尾；分隔符不能相连"
EXAMPLE_REF = "ccr.ccs.tencentyun.com/my-ns/vla-openpi:v1"

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?")
_NAMESPACE = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")
_REPO_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


@dataclass
class Failure(Exception):
    """A condition that ends the run: what is wrong, where, and the fix, in English and Chinese."""

    code: int
    id: str
    where: str
    what: str
    what_zh: str
    fix: str
    fix_zh: str

    def render(self) -> str:
        return (
            f"{PROG}: error [{self.id}] at {self.where}\n"
            f"  problem: {self.what}\n"
            f"  fix:     {self.fix}\n"
            f"  错误:    {self.what_zh}\n"
            f"  解决:    {self.fix_zh}\n"
        )


@dataclass(frozen=True)
class Reference:
    """`<registry>/<namespace>/<repository>:<tag>`, already validated."""

    registry: str
    namespace: str
    repository: str
    tag: str

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.namespace}/{self.repository}"

    def __str__(self) -> str:
        return f"{self.name}:{self.tag}"


def _bad_ref(text: str, id: str, what: str, what_zh: str, fix: str, fix_zh: str) -> Failure:
    return Failure(EXIT_INPUT, id, text, what, what_zh, fix, fix_zh)


def namespace_problem(namespace: str) -> tuple[str, str] | None:
    """Why `namespace` breaks TCR's namespace rules (English, Chinese), or None when it is valid."""
    if not 2 <= len(namespace) <= 30:
        return (f"it has {len(namespace)} characters", f"长度为 {len(namespace)} 个字符")
    if not re.fullmatch(r"[a-z0-9._-]+", namespace):
        return ("it has characters other than a-z, 0-9, '.', '_', '-'", "含有 a-z、0-9、'.'、'_'、'-' 以外的字符")
    if not _NAMESPACE.fullmatch(namespace):
        return ("it starts or ends with a separator or has two in a row", "以分隔符开头或结尾，或有相连的分隔符")
    return None


def parse_reference(text: str) -> Reference:
    """Split and validate one image reference; raise an exit-2 `Failure` saying what to change."""
    if "@" in text:
        raise _bad_ref(
            text,
            "ref-digest",
            "a digest reference names content that is already in a registry; it cannot be pushed",
            "带摘要（@sha256:…）的地址指向已在仓库中的内容，无法推送",
            f"name the tag to push, e.g. {EXAMPLE_REF}",
            f"请写出要推送的标签，例如 {EXAMPLE_REF}",
        )
    parts = text.split("/")
    # Docker reads the first component as a registry only if it has a '.' or ':' or is 'localhost'
    explicit_host = "." in parts[0] or ":" in parts[0] or parts[0] == "localhost"
    if len(parts) < 2 or not (explicit_host and _HOST.fullmatch(parts[0])):
        raise _bad_ref(
            text,
            "ref-registry",
            "the reference does not start with a registry host, so Docker would send it to Docker Hub",
            "镜像地址没有以镜像仓库域名开头，Docker 会把它推送到 Docker Hub",
            "start it with the TCR host: ccr.ccs.tencentyun.com/<namespace>/<repository>:<tag> (personal edition) "
            "or <instance>.tencentcloudcr.com/<namespace>/<repository>:<tag> (enterprise edition)",
            "以 TCR 域名开头：个人版 ccr.ccs.tencentyun.com/<命名空间>/<镜像仓库>:<标签>，"
            "企业版 <实例名>.tencentcloudcr.com/<命名空间>/<镜像仓库>:<标签>",
        )
    registry, rest = parts[0], parts[1:]
    last, _, tag = rest[-1].partition(":")
    if not tag:
        raise _bad_ref(
            text,
            "ref-tag",
            "the reference has no tag (without one Docker would push every local tag of the repository)",
            "镜像地址缺少标签（没有标签时 Docker 会推送该仓库在本地的所有标签）",
            f"add the tag to push, e.g. {EXAMPLE_REF}",
            f"请加上要推送的标签，例如 {EXAMPLE_REF}",
        )
    if not _TAG.fullmatch(tag):
        raise _bad_ref(
            text,
            "ref-tag",
            f"tag '{tag}' is not valid (1-128 characters of A-Z, a-z, 0-9, '_', '.', '-', "
            "not starting with '.' or '-')",
            f"标签 '{tag}' 不合法（1-128 个字符，只能是 A-Z、a-z、0-9、'_'、'.'、'-'，且不能以 '.' 或 '-' 开头）",
            "rename the tag (docker tag SOURCE NEW) and push the new name",
            "用 docker tag 源镜像 新地址 换一个合法标签后再推送",
        )
    if len(rest) < 2:
        raise _bad_ref(
            text,
            "ref-namespace",
            f"the reference has no namespace between the registry host and the repository '{last}'",
            f"镜像地址在仓库域名和镜像仓库 '{last}' 之间缺少命名空间",
            f"insert your TCR namespace: {registry}/<namespace>/{last}:{tag}",
            f"加上您的 TCR 命名空间：{registry}/<命名空间>/{last}:{tag}",
        )
    namespace, repository = rest[0], "/".join([*rest[1:-1], last])
    problem = namespace_problem(namespace)
    if problem:
        raise _bad_ref(
            text,
            "ref-namespace",
            f"namespace '{namespace}' breaks TCR's rules: {problem[0]}",
            f"命名空间 '{namespace}' 不符合 TCR 规则：{problem[1]}",
            f"use a namespace that exists in the TCR console and has {NAMESPACE_RULES}",
            f"请使用在 TCR 控制台中已创建的命名空间，规则：{NAMESPACE_RULES_ZH}",
        )
    if not all(_REPO_COMPONENT.fullmatch(c) for c in repository.split("/")) or len(text) > 255:
        raise _bad_ref(
            text,
            "ref-repository",
            f"repository name '{repository}' is not valid for Docker",
            f"镜像仓库名 '{repository}' 不符合 Docker 的命名规则",
            "use lowercase letters and digits, separated by single '.', '_', '__' or '-', "
            "at most 255 characters in all",
            "请只用小写字母和数字，以单个 '.'、'_'、'__' 或 '-' 分隔，整个地址不超过 255 个字符",
        )
    return Reference(registry, namespace, repository, tag)


def _human(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


@dataclass
class _Layer:
    current: int = 0
    total: int = 0
    done: bool = False


class Progress:
    """Turns the engine's push chunks into a progress display on `out`.

    Per-layer byte counts are summed into one line `<ref>: D/N layers, SENT / TOTAL (P%)`. On a terminal
    that line is rewritten in place (at most every `refresh` seconds); otherwise it is printed every `interval`
    seconds, with one line per layer event (pushed, already exists, mounted, retrying). `close()` ends the display.
    """

    def __init__(
        self,
        ref: str,
        out: TextIO,
        tty: bool,
        interval: float = 10.0,
        refresh: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ref, self.out, self.tty, self.clock = ref, out, tty, clock
        self.every = refresh if tty else interval
        self.layers: dict[str, _Layer] = {}
        self._shown_at = -math.inf
        self._shown = ""

    def line(self) -> str:
        layers = self.layers.values()
        sent = sum(min(layer.current, layer.total) if layer.total else layer.current for layer in layers)
        total = sum(layer.total for layer in layers)
        done = sum(layer.done for layer in layers)
        text = f"{self.ref}: {done}/{len(self.layers)} layers, {_human(sent)}"
        return text + (f" / {_human(total)} ({100 * sent // total}%)" if total else "")

    def feed(self, chunk: Mapping[str, Any]) -> None:
        layer_id, status = chunk.get("id"), str(chunk.get("status", ""))
        if not layer_id:
            return
        layer = self.layers.setdefault(str(layer_id), _Layer())
        if status == "Pushing":
            detail = chunk.get("progressDetail") or {}
            layer.current = int(detail.get("current", layer.current))
            layer.total = int(detail.get("total", layer.total))
        elif status not in ("Preparing", "Waiting"):
            if status in ("Pushed", "Layer already exists") or status.startswith("Mounted from"):
                layer.done = True
                layer.current = max(layer.current, layer.total)
            if not self.tty:
                self.out.write(f"  layer {layer_id}: {status}\n")
        self._show()

    def _show(self) -> None:
        now = self.clock()
        if now - self._shown_at < self.every:
            return
        self._shown_at = now
        self._draw(end="")

    def _draw(self, end: str) -> None:
        self._shown = self.line()
        self.out.write(f"\r{self._shown}\x1b[K{end}" if self.tty else f"{self._shown}\n")
        self.out.flush()

    def close(self) -> None:
        """Draw the final state: ends the terminal line; in plain mode only if it changed since the last line."""
        if self.tty or self.line() != self._shown:
            self._draw(end="\n")


class Masker:
    """Replaces the secret in any text that may echo it (server messages, exception strings)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def __call__(self, text: str) -> str:
        return text.replace(self.secret, MASK) if self.secret else text


def _classify(ref: Reference, detail: str) -> Failure:
    """An exit-1 `Failure` for a push of `ref` that the engine or registry reported as `detail` (already masked)."""
    low, host, where = detail.lower(), ref.registry, str(ref)
    if "x509" in low or "certificate" in low:
        return Failure(
            EXIT_PUSH,
            "push-tls",
            where,
            f"the TLS certificate of {host} is not trusted: {detail}",
            f"{host} 的 TLS 证书不受信任：{detail}",
            f"put the CA certificate that signed it in /etc/docker/certs.d/{host}/ca.crt on the Docker host",
            f"请把签发该证书的 CA 证书放到 Docker 主机的 /etc/docker/certs.d/{host}/ca.crt",
        )
    if any(s in low for s in ("unauthorized", "authentication required", "incorrect username or password", " 401")):
        return Failure(
            EXIT_PUSH,
            "push-auth",
            where,
            f"{host} rejected the user name or password: {detail}",
            f"{host} 拒绝了用户名或密码：{detail}",
            "check TCR_USERNAME and TCR_PASSWORD: the personal edition takes your Tencent Cloud account ID and the "
            "registry password set in the TCR console; the enterprise edition takes an access credential of the "
            "instance (temporary tokens expire after 1 hour)",
            "请检查 TCR_USERNAME 和 TCR_PASSWORD：个人版用户名是腾讯云账号 ID，密码是在 TCR 控制台设置的镜像仓库密码；"
            "企业版请使用实例的访问凭证（临时令牌 1 小时后失效）",
        )
    if any(s in low for s in ("denied", "forbidden", " 403")):
        return Failure(
            EXIT_PUSH,
            "push-denied",
            where,
            f"{host} refused the push to {ref.namespace}/{ref.repository}: {detail}",
            f"{host} 拒绝推送到 {ref.namespace}/{ref.repository}：{detail}",
            f"create namespace '{ref.namespace}' in the TCR console, or grant this account push permission on it",
            f"请在 TCR 控制台创建命名空间 '{ref.namespace}'，或为该账号授予推送权限",
        )
    if any(
        s in low
        for s in (
            "connection refused",
            "no such host",
            "i/o timeout",
            "dial tcp",
            "no route to host",
            "network is unreachable",
            "timeout",
        )
    ):
        return Failure(
            EXIT_PUSH,
            "push-unreachable",
            where,
            f"cannot reach the registry {host}: {detail}",
            f"无法连接镜像仓库 {host}：{detail}",
            "check the host name and this machine's network; <instance>-vpc.tencentcloudcr.com resolves only inside "
            "the instance's VPC, from elsewhere use <instance>.tencentcloudcr.com with public access enabled",
            "请检查域名和本机网络；<实例名>-vpc.tencentcloudcr.com 只能在实例所在 VPC 内解析，"
            "在其他地方请使用已开启公网访问的 <实例名>.tencentcloudcr.com",
        )
    return Failure(
        EXIT_PUSH,
        "push-failed",
        where,
        f"{host} did not accept the push: {detail}",
        f"{host} 未能接受推送：{detail}",
        "act on the registry's message quoted here, then run the same command again; layers already uploaded "
        "are not sent again",
        "请按上述仓库报错处理后重新运行同一命令；已上传的层不会重复上传",
    )


def _engine_failure(where: str, detail: str) -> Failure:
    return Failure(
        EXIT_PUSH,
        "docker-engine",
        where,
        f"cannot talk to the Docker engine: {detail}",
        f"无法与 Docker 引擎通信：{detail}",
        "start Docker, check DOCKER_HOST, or run as a user allowed to use /var/run/docker.sock",
        "请启动 Docker、检查 DOCKER_HOST，或以有权访问 /var/run/docker.sock 的用户运行",
    )


def push_one(
    client: docker.DockerClient, ref: Reference, auth: Mapping[str, str], progress: Progress, mask: Masker
) -> str:
    """Push `ref` and return its manifest digest; any error chunk in the stream raises an exit-1 `Failure`."""
    digest = None
    try:
        try:
            chunks: Iterable[Mapping[str, Any]] = client.images.push(
                ref.name, tag=ref.tag, stream=True, decode=True, auth_config=dict(auth)
            )
            for chunk in chunks:
                if "error" in chunk or "errorDetail" in chunk:
                    detail = (chunk.get("errorDetail") or {}).get("message") or chunk.get("error") or str(chunk)
                    raise _classify(ref, mask(str(detail)))
                progress.feed(chunk)
                digest = (chunk.get("aux") or {}).get("Digest", digest)
        finally:
            progress.close()
    except docker.errors.APIError as exc:
        raise _classify(ref, mask(str(exc.explanation or exc))) from None
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise _engine_failure(str(ref), mask(str(exc))) from None
    if not digest:
        raise _classify(ref, "the push ended without the registry reporting a manifest digest")
    return str(digest)


def read_credentials(args: argparse.Namespace, env: Mapping[str, str], stdin: TextIO) -> tuple[str, str]:
    """(user name, password) from `--username`/`TCR_USERNAME` and `--password-stdin`/`TCR_PASSWORD`."""
    if args.password_argv is not None:
        raise Failure(
            EXIT_INPUT,
            "password-argv",
            "--password",
            "a password on the command line is readable by other users (ps, /proc) and kept in shell history",
            "命令行中的密码会被其他用户（ps、/proc）看到，并留在 shell 历史中",
            "pass it in the TCR_PASSWORD environment variable or on stdin with --password-stdin, and change it if "
            "this command line was shared",
            "请通过环境变量 TCR_PASSWORD 或 --password-stdin 从标准输入传入；若该命令行已泄露，请修改密码",
        )
    username = args.username or env.get("TCR_USERNAME", "")
    if not username:
        raise Failure(
            EXIT_INPUT,
            "username-missing",
            "--username / TCR_USERNAME",
            "no registry user name was given",
            "未提供镜像仓库用户名",
            "set TCR_USERNAME (personal edition: your Tencent Cloud account ID) or pass --username",
            "请设置 TCR_USERNAME（个人版为腾讯云账号 ID）或使用 --username",
        )
    if args.password_stdin:
        password, where = stdin.read().rstrip("\r\n"), "--password-stdin"
    else:
        password, where = env.get("TCR_PASSWORD", ""), "TCR_PASSWORD"
    if not password:
        raise Failure(
            EXIT_INPUT,
            "password-missing",
            where,
            f"no registry password was given ({where} is empty)",
            f"未提供镜像仓库密码（{where} 为空）",
            "export TCR_PASSWORD (e.g. read -rs TCR_PASSWORD; export TCR_PASSWORD) or pipe it into --password-stdin",
            "请设置环境变量 TCR_PASSWORD（例如 read -rs TCR_PASSWORD; export TCR_PASSWORD），"
            "或通过管道传给 --password-stdin",
        )
    return username, password


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="push_image.py",
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Push built image tags to Tencent Container Registry (TCR) with the local Docker engine.\n"
        "The password is read from TCR_PASSWORD or stdin, never from the command line, and is not "
        "stored\n(no docker login). Progress goes to stderr; stdout gets one <ref>@sha256:… line per tag.",
        epilog="exit codes: 0 all tags pushed, 1 a push failed, 2 bad reference, missing image or credentials\n\n"
        "examples:\n"
        "  export TCR_USERNAME=100012345678            # personal edition: your account ID\n"
        "  read -rs TCR_PASSWORD && export TCR_PASSWORD\n"
        f"  scripts/push_image.py {EXAMPLE_REF} ccr.ccs.tencentyun.com/my-ns/vla-openpi:latest\n"
        '  printf \'%s\' "$TOKEN" | scripts/push_image.py --username "$TCR_USER" --password-stdin \\\n'
        "      myinstance.tencentcloudcr.com/my-ns/vla-openpi:v1",
    )
    parser.add_argument(
        "references",
        nargs="+",
        metavar="REFERENCE",
        help="image to push, <registry>/<namespace>/<repository>:<tag>, already tagged locally; "
        f"e.g. {EXAMPLE_REF}. Namespace: {NAMESPACE_RULES}",
    )
    parser.add_argument("--username", "-u", help="registry user name (env: TCR_USERNAME)")
    parser.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password or token from stdin instead of the environment (env: TCR_PASSWORD)",
    )
    parser.add_argument("--password", "-p", dest="password_argv", help=argparse.SUPPRESS)
    parser.add_argument(
        "--progress",
        choices=("auto", "tty", "plain"),
        default="auto",
        help="progress display: one updating line (tty), a line every --interval seconds (plain), "
        "or tty when stderr is a terminal (auto, the default)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds between progress lines in plain mode (default 10)",
    )
    return parser


def run(args: argparse.Namespace, env: Mapping[str, str], stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """Validate everything, then push each reference in order, stopping at the first failure."""
    refs = [parse_reference(text) for text in args.references]
    username, password = read_credentials(args, env, stdin)
    mask = Masker(password)
    try:
        client = docker.from_env(timeout=ENGINE_TIMEOUT_S)
        for ref in refs:
            try:
                client.images.get(str(ref))
            except docker.errors.ImageNotFound:
                raise Failure(
                    EXIT_INPUT,
                    "image-missing",
                    str(ref),
                    "there is no local image with this name and tag",
                    "本地没有这个名称和标签的镜像",
                    "build the image and tag it with this name first (docker tag IMAGE REFERENCE); list local tags "
                    "with: docker images",
                    "请先构建镜像并用 docker tag 镜像 地址 打上该标签；可用 docker images 查看本地标签",
                ) from None
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise _engine_failure(env.get("DOCKER_HOST", "unix:///var/run/docker.sock"), mask(str(exc))) from None
    tty = args.progress == "tty" or (args.progress == "auto" and err.isatty())
    auth = {"username": username, "password": password}
    pushed: list[str] = []
    try:
        for ref in refs:
            err.write(f"pushing {ref}\n")
            digest = push_one(client, ref, auth, Progress(str(ref), err, tty, interval=args.interval), mask)
            pushed.append(f"{ref}@{digest}")
    finally:
        for line in pushed:
            out.write(line + "\n")
        out.flush()
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: returns the exit code; messages never carry a traceback or the password."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has already printed
        return exc.code if isinstance(exc.code, int) else EXIT_INPUT
    try:
        return run(args, os.environ, sys.stdin, sys.stdout, sys.stderr)
    except Failure as failure:
        sys.stderr.write(failure.render())
        return failure.code
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{PROG}: interrupted / 已中断\n")
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
