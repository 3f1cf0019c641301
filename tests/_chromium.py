"""Headless Chromium driven over the DevTools protocol on a pipe (no extra package, no port).

``--window-size`` cannot make a headless window narrower than 500 px, so phone widths are
set the way DevTools' device mode sets them: ``Emulation.setDeviceMetricsOverride``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))
                 if p), None)


class Browser:
    """One headless Chromium with one page, spoken to over ``--remote-debugging-pipe``."""

    def __init__(self, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds() -> None:  # Chromium reads commands on fd 3 and answers on fd 4
            # Copied above 4 first: a pipe end may itself be fd 3 or 4, and dup2 of an fd
            # onto itself would leave it closed on exec.
            read_end = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            write_end = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self._proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", f"--user-data-dir={profile}", "--remote-debugging-pipe",
             "about:blank"],
            preexec_fn=child_fds, close_fds=False,  # noqa: PLW1509 - the child runs no thread
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self._dialogs: list[dict[str, Any]] = []
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self._session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                  flatten=True)["sessionId"]

    def close(self) -> None:
        """Stop the browser."""
        self._proc.terminate()
        self._proc.wait(timeout=30)
        os.close(self._to_chrome)
        os.close(self._from_chrome)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        answer: dict[str, Any] = json.loads(message)
        if answer.get("method") == "Page.javascriptDialogOpening":
            self._dialogs.append(answer)
        return answer

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command (to the page's session when ``session`` is given); its result."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]
            self._events.append(answer)

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        """A command to the page."""
        return self.call(method, self._session, **params)

    def open(self, url: str, width: int, height: int = 900) -> None:
        """Load ``url`` in a viewport ``width`` px wide (a phone's below 720) and wait for it."""
        self.page("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=width < 720)
        self.page("Page.enable")
        self._events.clear()
        self.page("Page.navigate", url=url)
        deadline = time.monotonic() + 60
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            self._events.append(self._read(deadline))

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        return self.page("Runtime.evaluate", expression=expression,
                         returnByValue=True)["result"].get("value")

    def screenshot(self, path: Path) -> tuple[int, int]:
        """A PNG of the whole page at the current width; its size in CSS pixels."""
        width, height = self.evaluate(
            "[document.documentElement.clientWidth, document.documentElement.scrollHeight]")
        data = self.page("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        path.write_bytes(base64.b64decode(data["data"]))
        return width, height

    def follow(self, expression: str) -> None:
        """Run ``expression`` (a click, a form's submit) and wait for the page it loads."""
        self._events.clear()
        self.evaluate(expression)
        deadline = time.monotonic() + 60
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            self._events.append(self._read(deadline))

    def dialogs(self) -> list[dict[str, Any]]:
        """The JavaScript dialogs (alert, confirm, prompt) the page opened so far."""
        return list(self._dialogs)
