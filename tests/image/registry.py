"""A real Docker registry on loopback for push tests: Debian's `docker-registry` 2.8 with htpasswd (bcrypt) auth
and TLS from a throw-away self-signed certificate that the local Docker daemon trusts through
`/etc/docker/certs.d/localhost:<port>/ca.crt` (read per connection, so no daemon restart).

Needs the Debian packages docker-registry, apache2-utils (htpasswd) and openssl, and write access to
/etc/docker/certs.d (root on the machine that runs dockerd).
"""

from __future__ import annotations

import shutil
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

CERTS_D = Path("/etc/docker/certs.d")
TOOLS = {"docker-registry": "docker-registry", "htpasswd": "apache2-utils", "openssl": "openssl"}
INSTALL = "apt-get install -y docker-registry apache2-utils openssl"


class RegistryUnavailable(RuntimeError):
    """The registry could not be set up here; the message says why and how to fix it."""


@dataclass(frozen=True)
class Registry:
    """A running registry: `host` is the `localhost:<port>` prefix of image references pushed to it."""

    host: str
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


def _run(argv: list[str], stdin: str | None = None) -> str:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RegistryUnavailable(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _write_credentials(workdir: Path, username: str, password: str) -> Path:
    """A bcrypt htpasswd file; the password goes through stdin, never argv."""
    path = workdir / "htpasswd"
    path.write_text(_run(["htpasswd", "-B", "-i", "-n", username], stdin=password), encoding="utf-8")
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
    raise RegistryUnavailable(f"registry at {url} not ready after {timeout:.0f} s; log: {log.read_text()[-2000:]}")


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
    missing = [f"{tool} (package {package})" for tool, package in TOOLS.items() if not shutil.which(tool)]
    if missing:
        raise RegistryUnavailable(f"missing {', '.join(missing)}; install with: {INSTALL}")
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
                ["docker-registry", "serve", str(config)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            if _wait_ready(proc, f"https://{host}/v2/", cert, log, timeout):
                yield Registry(host, username, password, cert)
                return
        finally:
            _stop(proc)
            shutil.rmtree(trust, ignore_errors=True)
    raise RegistryUnavailable(f"registry did not start in {attempts} attempts; last log: {log.read_text()[-2000:]}")
