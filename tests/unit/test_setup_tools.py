"""scripts/setup-tools on a fake Debian machine: every host command it could use to change the machine (apt-get,
dpkg, dpkg-deb, systemctl, update-rc.d, ...) is a recorder on PATH, so each case states what the script did to the
host: which packages it installed, that it fetched .debs only through a temporary source list and unpacked them
instead of installing them, where the binaries landed, and that no service was ever touched.

The machine starts bare (no buildx, no compose, no debootstrap, no pip, no venv module) unless a case says otherwise.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.files import small_bytes, small_text

REPO = Path(__file__).resolve().parents[2]
SEP = "\x1f"
SERVICE_TOOLS = (
    "systemctl",
    "service",
    "update-rc.d",
    "invoke-rc.d",
    "deb-systemd-helper",
    "deb-systemd-invoke",
    "dpkg",
    "apt",
    "apt-mark",
)
REGISTRY_WORDS = ("registry", "apache2-utils", "htpasswd")
MIRROR = "file:///srv/fake-mirror/debian"
# The apt packages `setup-tools test` installs on a bare machine.
TEST_PACKAGES = (
    "chromium",
    "dbus-x11",
    "debootstrap",
    "fonts-wqy-microhei",
    "fuse3",
    "openssl",
    "python3-pip",
    "python3-venv",
)
# Init scripts that run once at boot and leave no process running: not services.
ONE_SHOT_INIT = {
    "procps": "/etc/init.d/procps",  # applies /etc/sysctl.d at boot
    "x11-common": "/etc/init.d/x11-common",  # creates /tmp/.X11-unix at boot (chromium's X libraries need it)
}

RECORD = f"""{{ printf '%s' "${{0##*/}}"; printf '{SEP}%s' "$@"; printf '\\n'; }} >>"$FAKE_STATE/calls"
"""

# A plugin binary as unpacked from its .deb: answers `version` like the real one.
PLUGIN = {
    "docker-buildx": '#!/bin/sh\necho "github.com/docker/buildx 0.13.1+ds1 fake"\n',
    "docker-compose": '#!/bin/sh\necho "2.26.1-4"\n',
}
DEB_FILES = {  # what `dpkg-deb -x` unpacks for each package: the real .debs' paths
    "docker-buildx": {"usr/libexec/docker/cli-plugins/docker-buildx": PLUGIN["docker-buildx"]},
    "docker-compose": {"usr/libexec/docker/cli-plugins/docker-compose": PLUGIN["docker-compose"]},
    "docker-registry": {
        "usr/bin/docker-registry": '#!/bin/sh\necho "docker-registry github.com/docker/distribution 2.8.3+ds1"\n',
        "usr/lib/systemd/system/docker-registry.service": "[Service]\nExecStart=/usr/bin/docker-registry serve\n",
        "etc/init.d/docker-registry": "#!/bin/sh\n",
        "etc/docker/registry/config.yml": "version: 0.1\n",
    },
}

FAKES = {
    "docker": RECORD
    + """plugins=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins
case "$1" in
  buildx | compose) [ -x "$plugins/docker-$1" ] && exec "$plugins/docker-$1" "$@" ;;
esac
exit 1
""",
    "apt-get": RECORD
    + """for arg in "$@"; do
  case "$arg" in Dir::Etc::sourcelist=*) echo "sources${SEP}$(cat "${arg#*=}")" >>"$FAKE_STATE/calls" ;; esac
done
action=""
for arg in "$@"; do
  case "$action:$arg" in
    :update | :install | :download | :remove | :purge) action=$arg ;;
    install:-*) ;;
    install:*) echo "$arg" >>"$FAKE_STATE/installed" ;;
    download:*) echo "$arg" >"${arg}_9.9_amd64.deb" ;;
  esac
done
""".replace("${SEP}", SEP),
    "dpkg-deb": RECORD
    + """[ "$1" = -x ] && [ -d "$(dirname "$3")" ] || exit 2  # like dpkg-deb: the target's parent must exist
pkg=$(cat "$2"); mkdir -p "$3"
"$FAKE_PYTHON" - "$pkg" "$3" <<'PY'
import json, os, sys
from pathlib import Path
for rel, text in json.loads(os.environ["FAKE_DEB_FILES"])[sys.argv[1]].items():
    path = Path(sys.argv[2], rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
PY
""",
    "dpkg-query": RECORD
    + """pkg=${!#}
grep -qx "$pkg" "$FAKE_STATE/installed" || exit 1
case "$*" in *Status-Abbrev*) printf 'ii ' ;; *) printf '1.0-fake' ;; esac
""",
    "python3": RECORD
    + """case "$*" in
  "-m pip --version") grep -qx python3-pip "$FAKE_STATE/installed" ;;
  "-c import ensurepip") grep -qx python3-venv "$FAKE_STATE/installed" ;;
  "-m pip download "*) dest=""; prev=""
    for arg in "$@"; do [ "$prev" = -d ] && dest=$arg; prev=$arg; done
    mkdir -p "$dest"
    for arg in "$@"; do  # pip's file name: the project name lower-cased, '-' as '_'
      case "$arg" in
        *==*) name=${arg%%==*}; name=${name,,}; touch "$dest/${name//-/_}-${arg#*==}-py3-none-any.whl" ;;
      esac
    done ;;
  *) exit 3 ;;
esac
""",
    "id": '[ "$1" = -u ] && echo "$FAKE_UID"\n',
    **{name: RECORD for name in SERVICE_TOOLS},
}


@dataclass
class Call:
    tool: str
    args: list[str]

    @property
    def text(self) -> str:
        return " ".join([self.tool, *self.args])


@dataclass
class Machine:
    """A checkout copy (`repo`), a home, and the state the fakes keep (`installed` packages, recorded calls)."""

    root: Path

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def plugins(self) -> Path:
        return self.home / ".docker" / "cli-plugins"

    @property
    def state(self) -> Path:
        return self.root / "state"

    def installed(self) -> list[str]:
        return small_text(self.state / "installed").split()

    def calls(self) -> list[Call]:
        path = self.state / "calls"
        lines = small_text(path).splitlines() if path.exists() else []
        return [Call(line.split(SEP)[0], line.split(SEP)[1:]) for line in lines]

    def run(self, *args: str, uid: int = 0) -> subprocess.CompletedProcess[str]:
        (self.state / "calls").unlink(missing_ok=True)
        env = {
            "PATH": f"{self.root / 'bin'}:/usr/bin:/bin",
            "HOME": str(self.home),
            "FAKE_STATE": str(self.state),
            "FAKE_UID": str(uid),
            "FAKE_PYTHON": shutil.which("python3") or "/usr/bin/python3",
            "FAKE_DEB_FILES": json.dumps(DEB_FILES),
            "LC_ALL": "C.UTF-8",
        }
        return subprocess.run(
            [str(self.repo / "scripts" / "setup-tools"), *args], env=env, capture_output=True, text=True, timeout=60
        )


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    m = Machine(tmp_path)
    (m.repo / "scripts").mkdir(parents=True)
    (m.repo / "docker" / "tools").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "setup-tools", m.repo / "scripts" / "setup-tools")
    mirror = m.repo / "scripts" / "debian-mirror"
    mirror.write_text(f"#!/bin/sh\necho {MIRROR}\n")
    mirror.chmod(0o755)
    m.home.mkdir()
    m.state.mkdir()
    (m.state / "installed").write_text("")
    (m.root / "bin").mkdir()
    for name, body in FAKES.items():
        fake = m.root / "bin" / name
        fake.write_text("#!/bin/bash\n" + body)
        fake.chmod(0o755)
    return m


def apt_actions(calls: list[Call], action: str) -> list[list[str]]:
    """The package arguments of every `apt-get <action>` call."""
    found = []
    for call in calls:
        if call.tool == "apt-get" and action in call.args:
            after = call.args[call.args.index(action) + 1 :]
            found.append([arg for arg in after if not arg.startswith("-")])
    return found


def assert_host_untouched_by_services(m: Machine) -> None:
    """No service manager or dpkg call, nothing removed, nothing installed from a .deb file."""
    calls = m.calls()
    assert [c.text for c in calls if c.tool in SERVICE_TOOLS] == []
    assert apt_actions(calls, "remove") == [] and apt_actions(calls, "purge") == []
    assert all(not arg.endswith(".deb") for pkgs in apt_actions(calls, "install") for arg in pkgs)
    downloads = [c for c in calls if c.tool == "apt-get" and "download" in c.args]
    for call in downloads:  # .debs come only through the temporary trixie source list, never the host's
        assert any(arg.startswith("Dir::Etc::sourcelist=/") for arg in call.args)
        assert "Dir::Etc::sourceparts=-" in call.args


def test_demo_on_a_bare_machine_installs_nothing_registry_related(machine: Machine) -> None:
    done = machine.run("demo")
    assert done.returncode == 0, done.stderr
    calls = machine.calls()
    assert sorted(machine.installed()) == ["debootstrap", "python3-pip"]
    assert apt_actions(calls, "download") == [["docker-buildx"]]
    assert (
        f"sources{SEP}deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {MIRROR} trixie main"
        in small_text(machine.state / "calls")
    )
    assert_host_untouched_by_services(machine)
    for word in (*REGISTRY_WORDS, "docker-compose"):
        assert not [c.text for c in calls if word in c.text], word
    assert sorted(p.name for p in machine.plugins.iterdir()) == ["docker-buildx"]
    assert not (machine.repo / ".work").exists()
    assert (
        done.stdout.splitlines()[-1] == "setup-tools: ready for scripts/demo: buildx 0.13.1+ds1, debootstrap 1.0-fake"
    )


def test_no_argument_means_demo_and_a_wrong_one_is_refused(machine: Machine) -> None:
    assert machine.run().returncode == 0
    assert "docker-compose" not in small_text(machine.state / "calls")
    done = machine.run("everything")
    assert done.returncode == 2 and "usage:" in done.stderr and machine.calls() == []


def test_test_tools_on_a_bare_machine_extract_the_registry_binary_only(machine: Machine) -> None:
    done = machine.run("test")
    assert done.returncode == 0, done.stderr
    assert sorted(machine.installed()) == sorted(TEST_PACKAGES)
    assert apt_actions(machine.calls(), "download") == [["docker-buildx", "docker-compose", "docker-registry"]]
    assert_host_untouched_by_services(machine)
    assert sorted(p.name for p in machine.plugins.iterdir()) == ["docker-buildx", "docker-compose"]
    tools = machine.repo / ".work" / "tools"
    assert [str(p.relative_to(tools)) for p in sorted(tools.rglob("*"))] == ["bin", "bin/docker-registry"]
    assert not list(machine.root.rglob("docker-registry.service")), "the package's service unit was kept somewhere"
    assert done.stdout.splitlines()[-1] == (
        "setup-tools: ready for scripts/test: buildx 0.13.1+ds1, debootstrap 1.0-fake, compose 2.26.1-4,"
        " registry 2.8.3+ds1 in .work/tools/bin, openssl 1.0-fake"
    )


def test_second_run_touches_neither_apt_nor_the_network(machine: Machine) -> None:
    assert machine.run("test").returncode == 0
    done = machine.run("test")
    assert done.returncode == 0
    assert [c.text for c in machine.calls() if c.tool in ("apt-get", "dpkg-deb") or "download" in c.args] == []
    assert len(done.stdout.splitlines()) == 1


def test_compose_v1_package_stays_and_v2_comes_as_a_plugin(machine: Machine) -> None:
    """A host with Debian's docker-compose v1: `docker compose` is missing, `docker-compose` works and is kept."""
    (machine.state / "installed").write_text(
        "debootstrap\nfuse3\nopenssl\npython3-pip\npython3-venv\nchromium\nfonts-wqy-microhei\ndocker-compose\n"
    )
    v1 = machine.root / "bin" / "docker-compose"
    v1.write_text('#!/bin/sh\necho "docker-compose version 1.29.2"\n')
    v1.chmod(0o755)
    before = small_bytes(v1)
    done = machine.run("test")
    assert done.returncode == 0, done.stderr
    assert apt_actions(machine.calls(), "install") == [] and apt_actions(machine.calls(), "update") == [[]]
    assert_host_untouched_by_services(machine)
    assert "docker-compose" in machine.installed() and small_bytes(v1) == before
    assert small_text(machine.plugins / "docker-compose") == PLUGIN["docker-compose"]


def test_plugins_and_registry_need_no_root(machine: Machine) -> None:
    (machine.state / "installed").write_text(
        "debootstrap\nfuse3\nopenssl\npython3-pip\npython3-venv\nchromium\nfonts-wqy-microhei\n"
    )
    done = machine.run("test", uid=1000)
    assert done.returncode == 0, done.stderr
    assert apt_actions(machine.calls(), "install") == []
    assert not any("APT::Sandbox::User=root" in c.args for c in machine.calls())
    assert (machine.repo / ".work" / "tools" / "bin" / "docker-registry").is_file()


def test_missing_apt_package_without_root_says_so(machine: Machine) -> None:
    done = machine.run("demo", uid=1000)
    assert done.returncode == 1
    assert "must run as root to install debootstrap python3-pip" in done.stderr
    assert apt_actions(machine.calls(), "install") == []


def test_packages_it_may_install_ship_no_service(machine: Machine, tmp_path: Path) -> None:
    """Checked against this Debian host's package data: what apt would install on a bare machine for the packages
    the script may ask for (its own resolution, simulated against an empty package status, without recommends, as
    the script installs) ships no systemd unit and no init script (except essential packages, present on every Debian
    system, and the boot-time one-shot scripts of `ONE_SHOT_INIT`), so installing them starts no daemon. Each package
    is checked through its file list where this host has it installed."""
    if not shutil.which("apt-get") or not shutil.which("dpkg-query"):
        pytest.skip("needs Debian's package data (apt-get, dpkg-query)")
    assert machine.run("test").returncode == 0
    bare = tmp_path / "status"
    bare.write_text("")
    simulated = subprocess.run(
        [
            "apt-get",
            "-s",
            "-o",
            f"Dir::State::status={bare}",
            "install",
            "--no-install-recommends",
            *machine.installed(),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    packages = sorted({line.split()[1] for line in simulated.splitlines() if line.startswith("Inst ")})
    assert set(machine.installed()) <= set(packages)
    with_services = {}
    for package in packages:
        query = ["dpkg-query", "-W", "-f=${Essential} ${Priority}", package]
        if subprocess.run(query, capture_output=True, text=True).stdout in ("yes required", "yes ", "no required"):
            continue
        files = subprocess.run(["dpkg-query", "-L", package], capture_output=True, text=True).stdout.split()
        found = [f for f in files if "/systemd/system/" in f or f.startswith("/etc/init.d/")]
        if found and found != [ONE_SHOT_INIT.get(package)]:
            with_services[package] = found
    assert with_services == {}
