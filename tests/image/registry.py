"""A real Docker registry on loopback for push tests: the `docker-registry` 2.8 binary that `scripts/setup-tools test`
extracts into .work/tools/bin (no package, no service), with htpasswd (bcrypt) auth and TLS from a throw-away
self-signed certificate that the local Docker daemon trusts through `/etc/docker/certs.d/localhost:<port>/ca.crt`
(read per connection, so no daemon restart).

The registry is a child process of the test: started by `running_registry`, stopped when it exits, and killed by the
kernel should the test process die first. Needs that binary, the `bcrypt` module (the test extra), openssl, and
write access to /etc/docker/certs.d (root on the machine that runs dockerd).
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.files import tail_text

REPO = Path(__file__).resolve().parents[2]
REGISTRY_BIN = REPO / ".work" / "tools" / "bin" / "docker-registry"
CERTS_D = Path("/etc/docker/certs.d")
SETUP = "run scripts/setup-tools test"
PR_SET_PDEATHSIG = 1
BCRYPT_COST = 5  # htpasswd -B's default; the registry checks the hash on every request, so a low cost keeps pushes fast
LAUNCHED: list[tuple[int, int]] = []  # (pid, port) of every registry started in this process, for the session check


class RegistryUnavailable(RuntimeError):
    """The registry could not be set up here; the message says why and how to fix it."""


@dataclass(frozen=True)
class Registry:
    """A running registry: `host` is the `localhost:<port>` prefix of image references pushed to it."""

    host: str
    port: int
    pid: int
    username: str
    password: str
    ca_cert: Path

    @property
    def auth_config(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def registry_running(pid: int) -> bool:
    """Whether `pid` is still a process running the registry binary."""
    try:
        return Path(f"/proc/{pid}/exe").resolve() == REGISTRY_BIN.resolve()
    except OSError:
        return False


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RegistryUnavailable(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _write_credentials(workdir: Path, username: str, password: str) -> Path:
    """A bcrypt htpasswd file, hashed in this process (the password never reaches an argv)."""
    try:
        import bcrypt
    except ImportError:
        raise RegistryUnavailable(
            "the bcrypt module is missing; install the test extra: .venv/bin/python -m pip install -e '.[test]'"
        ) from None
    digest = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=BCRYPT_COST)).decode()
    path = workdir / "htpasswd"
    path.write_text(f"{username}:{digest}\n", encoding="utf-8")
    return path


def _write_certificate(workdir: Path) -> tuple[Path, Path]:
    """A self-signed EC certificate for localhost/127.0.0.1, valid one day."""
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    _run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ]
    )
    return cert, key


def _wait_ready(proc: subprocess.Popen[bytes], url: str, cert: Path, log: Path, timeout: float) -> bool:
    """Poll `url` until the registry answers (401: it demands a login); False when the process died first."""
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=cert))
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            opener.open(url, timeout=1).close()
            return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            time.sleep(0.02)
    raise RegistryUnavailable(f"registry at {url} not ready after {timeout:.0f} s; log: {tail_text(log)}")


def _die_with_parent() -> None:
    """In the child before exec: the kernel sends SIGTERM to the registry when the test process ends."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@contextmanager
def running_registry(
    workdir: Path, username: str, password: str, *, readonly: bool = False, timeout: float = 10.0, attempts: int = 3
) -> Iterator[Registry]:
    """Start a registry under `workdir`, yield it once it answers, and on exit stop it and remove its trust entry.

    `readonly` turns on the registry's maintenance read-only mode: logins work, every upload is refused.
    """
    if not REGISTRY_BIN.is_file():
        raise RegistryUnavailable(f"{REGISTRY_BIN} is missing; {SETUP}")
    if not shutil.which("openssl"):
        raise RegistryUnavailable(f"openssl is missing; {SETUP}")
    workdir.mkdir(parents=True, exist_ok=True)
    htpasswd = _write_credentials(workdir, username, password)
    cert, key = _write_certificate(workdir)
    for _ in range(attempts):  # another process may take the free port before the registry binds it
        port = free_port()
        host = f"localhost:{port}"
        config, log = workdir / f"config-{port}.yml", workdir / f"registry-{port}.log"
        config.write_text(
            "version: 0.1\n"
            "log: {level: warn}\n"
            f"storage: {{filesystem: {{rootdirectory: {workdir / 'data'}}}, "
            f"maintenance: {{readonly: {{enabled: {str(readonly).lower()}}}}}}}\n"
            f"http: {{addr: '127.0.0.1:{port}', tls: {{certificate: {cert}, key: {key}}}}}\n"
            f"auth: {{htpasswd: {{realm: push-tests, path: {htpasswd}}}}}\n",
            encoding="utf-8",
        )
        trust = CERTS_D / host
        try:
            trust.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(cert, trust / "ca.crt")
        except OSError as exc:
            raise RegistryUnavailable(
                f"cannot write {trust}/ca.crt for the Docker daemon ({exc}); run as root"
            ) from None
        with log.open("wb") as log_file:
            proc = subprocess.Popen(
                [str(REGISTRY_BIN), "serve", str(config)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        LAUNCHED.append((proc.pid, port))
        try:
            if _wait_ready(proc, f"https://{host}/v2/", cert, log, timeout):
                yield Registry(host, port, proc.pid, username, password, cert)
                return
        finally:
            _stop(proc)
            shutil.rmtree(trust, ignore_errors=True)
    raise RegistryUnavailable(f"registry did not start in {attempts} attempts; last log: {tail_text(log)}")
