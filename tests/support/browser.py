"""A page opened in headless Chromium (Debian's `chromium`), driven through its DevTools protocol over a WebSocket
(`websocket-client`): what the page logged to its console, every network request it made, values read from its DOM,
and a full-page screenshot.

Chromium runs in its own session with a private profile folder and no network of its own use (no sync, no component
updates, no first-run pages, every host name mapped to nowhere), on a DevTools port it picks itself (read back from
`DevToolsActivePort`). Every wait is bounded; `close` ends the whole process group and removes the profile.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless=new",
    "--no-sandbox",  # tests run as root in a container-like machine
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--metrics-recording-only",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
)


class BrowserError(Exception):
    """Chromium did not start, or did not answer in time."""


@dataclass
class PageLoad:
    """What one page did while it loaded: console messages and exceptions (level, text), requests (URLs)."""

    url: str
    console: list[tuple[str, str]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        return [text for level, text in self.console if level in ("error", "exception", "assert")]

    @property
    def other_requests(self) -> list[str]:
        """Requests for anything but the page itself."""
        return [url for url in self.requests if url != self.url]


class Chromium:
    """One headless Chromium and one page of it."""

    def __init__(self, binary: str = "chromium", width: int = 1100, height: int = 900, timeout: float = 30) -> None:
        import websocket  # websocket-client

        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="vla-chromium-"))
        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            port = self._port()
            target = self._page_target(port)
            self.socket = websocket.create_connection(target, timeout=timeout, suppress_origin=True)
        except BaseException:
            self.close()
            raise
        self._next = 0
        self._events: list[dict[str, Any]] = []

    def _port(self) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                error = self.process.stderr.read().decode(errors="replace")[-2000:] if self.process.stderr else ""
                raise BrowserError(f"chromium exited {self.process.returncode}: {error}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(marker.read_text().splitlines()[0])
            time.sleep(0.05)  # polling a file Chromium writes once; there is nothing to wait on instead
        raise BrowserError(f"chromium wrote no DevTools port within {self.timeout}s")

    def _page_target(self, port: int) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=self.timeout) as answer:
            targets = json.load(answer)
        pages = [t for t in targets if t.get("type") == "page"]
        if not pages:
            raise BrowserError(f"no page target among {targets}")
        return str(pages[0]["webSocketDebuggerUrl"])

    def call(self, method: str, **params: object) -> dict[str, Any]:
        """Send one DevTools command and return its result (events that arrive meanwhile are kept)."""
        self._next += 1
        ident = self._next
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = json.loads(self.socket.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self._events.append(message)
        raise BrowserError(f"{method}: no answer within {self.timeout}s")

    def _wait_event(self, name: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for index, event in enumerate(self._events):
                if event.get("method") == name:
                    return self._events.pop(index)
            self._events.append(json.loads(self.socket.recv()))
        raise BrowserError(f"no {name} within {self.timeout}s")

    def load(self, url: str) -> PageLoad:
        """Open `url` and wait for its load event; what it logged and requested."""
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self._events.clear()
        self.call("Page.navigate", url=url)
        self._wait_event("Page.loadEventFired")
        self.evaluate("1")  # a round trip: events the load caused arrive before its answer
        seen = PageLoad(url)
        for event in self._events:
            params = event.get("params", {})
            match event.get("method"):
                case "Network.requestWillBeSent":
                    seen.requests.append(str(params["request"]["url"]))
                case "Runtime.consoleAPICalled":
                    text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                    seen.console.append((str(params.get("type")), text))
                case "Runtime.exceptionThrown":
                    seen.console.append(("exception", str(params.get("exceptionDetails", {}).get("text"))))
                case "Log.entryAdded":
                    entry = params.get("entry", {})
                    seen.console.append((str(entry.get("level")), f"{entry.get('text')} {entry.get('url', '')}"))
        return seen

    def evaluate(self, expression: str) -> Any:
        """The JSON value of `expression` evaluated in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, height: float | None = None) -> None:
        """The whole page (or its top `height` pixels), as PNG."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shown = size["height"] if height is None else min(height, size["height"])
        clip = {"x": 0, "y": 0, "width": size["width"], "height": shown, "scale": 1}
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.socket.close()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # its helper processes too: nothing is left running
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        if self.process.stderr is not None:
            self.process.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
