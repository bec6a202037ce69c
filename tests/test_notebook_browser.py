"""Open every committed notebook in JupyterLab, in a real headless browser, without running it.

A reader's first look is JupyterLab (or GitHub) showing the saved outputs: this
checks what they see. For each notebook, in Debian's chromium driven by
Playwright (no browser is downloaded), it asserts that a knob is drawn as a
widget rather than as the text ``interactive(children=...``, that every saved
matplotlib figure is drawn as an image and every Mermaid diagram as an SVG (and
that each main lesson shows at least one such picture), that no "Jupyter news"
pop-up appears,
that the page asks nothing of a remote host, and that opening the notebook
(which starts its kernel) leaves the document clean and the file unchanged.
A screenshot per notebook lands in ``build/screenshots/`` (git-ignored) and
must not be blank.

JupyterLab runs on a free loopback port with a token, with the project's own
settings (``.jupyter/jupyter_lab_config.py``, as ``make lab`` uses) and
throwaway user settings, over copies of the notebooks; it is shut down, with
its kernels, at the end. Waits are for elements or states, with generous limits.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from PIL import Image
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
# The lessons and their going-further notebooks (distinct names, so they can sit side by side).
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted(
    (ROOT / "notebooks" / "going_further").glob("[0-9][0-9]_*.ipynb")
)
LAB_CONFIG = ROOT / ".jupyter" / "jupyter_lab_config.py"
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PATIENCE_S = 180  # the longest wait for an element or a state; never a pass condition
SETTLE_S = 5  # after the kernel is idle: time for a late metadata write to show up
KNOB = ".jp-OutputArea-output .widget-slider, .jp-OutputArea-output .widget-dropdown"
# A knob shown as text: ipywidgets' own form, or the readable note the build writes instead.
AS_TEXT = re.compile(r"interactive\(children=|A knob, drawn when the notebook is trusted")
# ipywidgets marks each view of a saved knob that no kernel drives yet with a red "chain-broken"
# icon (four a knob); .jupyter/custom/custom.css draws one grey line on the knob instead.
RED_ICONS = """() => [...document.querySelectorAll('.jupyter-widgets-disconnected')].filter(
    e => !e.classList.contains('widget-interact')
         && getComputedStyle(e, '::before').content !== 'none').length"""
# JupyterLab draws a Mermaid block locally into an SVG image (a data: URL, no request).
MERMAID = '.jp-RenderedMermaid img[src^="data:image/svg+xml"]'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server on 127.0.0.1 over a copy of the notebooks, and its REST API."""

    def __init__(self, root: Path, home: Path):
        self.root, self.token, self.port = root, secrets.token_hex(16), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSTATE_LLM_")}
        env.update(
            JUPYTER_CONFIG_DIR=str(home / "config"),  # no user settings from ~/.jupyter
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTER_DATA_DIR=str(home / "data"),
        )
        # As `make lab` serves it: .jupyter/custom/custom.css from the config folder.
        shutil.copytree(LAB_CONFIG.parent / "custom", home / "config" / "custom")
        jupyter = str(Path(sys.executable).with_name("jupyter"))
        # As `make lab` does: a notebook the reader has not trusted shows every widget as text.
        notebooks = sorted(str(p) for p in root.glob("*.ipynb"))
        subprocess.run([jupyter, "trust", *notebooks], env=env, check=True, capture_output=True)
        cmd = [
            jupyter, "lab", f"--config={LAB_CONFIG}",
            "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={root}", "--allow-root",
        ]  # fmt: skip
        self.log = (home / "lab.log").open("w")
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._wait_ready()

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            body = reply.read()
        return json.loads(body) if body else None

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited early; see {self.log.name}")
            try:
                self.api("/api/status")
                return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer within {PATIENCE_S} s")

    def idle_kernel(self, name: str) -> bool:
        sessions = self.api("/api/sessions")
        return any(s["path"] == name and s["kernel"]["execution_state"] == "idle" for s in sessions)

    def close_sessions(self) -> None:
        for session in self.api("/api/sessions"):
            self.api(f"/api/sessions/{session['id']}", method="DELETE")

    def stop(self) -> None:
        """Shut the server down through its API (kernels too), then make sure it is gone."""
        if self.proc.poll() is None:
            try:
                self.api("/api/shutdown", method="POST")
            except (urllib.error.URLError, ConnectionError):
                pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.log.close()


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {PATIENCE_S} s waiting for {what}")
        time.sleep(0.5)


def draw_knob(page, lab: Lab, notebook: Path) -> int:
    """Wait until the first slider or dropdown is drawn; how many reloads it took (0 or 1).

    JupyterLab's widget manager sometimes loses a notebook's saved widget
    state when the kernel connects while the page restores it (an upstream
    race, jupyter-widgets/ipywidgets#3823, likelier on a busy machine): the
    output then reads "Error displaying widget: model not found", and a reload
    draws it, as the README tells readers. The check allows one reload; a
    widget shown as text, or an error that a reload does not clear, fails.
    """
    knob = page.locator(KNOB).first
    broken = page.locator(".jp-OutputArea-output", has_text="Error displaying widget")
    shown = page.locator(".jp-OutputArea-output", has_text=AS_TEXT)
    for reloads in range(2):
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=PATIENCE_S * 1000)
        wait_until(lambda: lab.idle_kernel(notebook.name), f"the kernel of {notebook.name}")
        wait_until(
            lambda: knob.count() + broken.count() + shown.count() > 0,
            "a slider or a dropdown (or a widget error)",
        )
        if knob.count() and not broken.count() and not shown.count():
            return reloads
        if shown.count() or reloads:
            break
        page.reload()
    raise AssertionError(
        f"no slider or dropdown drawn: {shown.count()} widget(s) shown as text, "
        f"{broken.count()} 'Error displaying widget' after {reloads} reload(s)"
    )


def off_loopback(url: str) -> list[str]:
    """The URL if it goes over the network to anything but this machine (data: URLs do not)."""
    parts = urlsplit(url)
    networked = parts.scheme in ("http", "https", "ws", "wss")
    return [url] if networked and parts.hostname != "127.0.0.1" else []


def has_knob(path: Path) -> bool:
    """Whether the saved notebook shows a widget (every main lesson has a knob)."""
    nb = json.loads(path.read_text())
    outputs = [out for cell in nb["cells"] for out in cell.get("outputs", [])]
    return any("application/vnd.jupyter.widget-view+json" in out.get("data", {}) for out in outputs)


def saved_figures(path: Path) -> int:
    nb = json.loads(path.read_text())
    outputs = [out for cell in nb["cells"] for out in cell.get("outputs", [])]
    return sum("image/png" in out.get("data", {}) for out in outputs)


def saved_mermaid(path: Path) -> int:
    """Mermaid diagrams in the notebook's markdown cells and in its markdown outputs."""
    nb = json.loads(path.read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    outputs = [
        "".join(out.get("data", {}).get("text/markdown", ""))
        for cell in nb["cells"]
        for out in cell.get("outputs", [])
    ]
    return sum(text.count("```mermaid") for text in cells + outputs)


def is_lesson(path: Path) -> bool:
    return path.parent == ROOT / "notebooks"


def not_blank(png: Path) -> bool:
    """More than a handful of colours and over 1% of pixels that are not the background."""
    with Image.open(png) as image:
        pixels = image.convert("RGB")
        colours = pixels.getcolors(maxcolors=1 << 16) or []
        if len(colours) < 16:
            return False
        background = max(colours)[0]
        return 1 - background / (pixels.width * pixels.height) > 0.01


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: `make browser` installs it with apt-get")
    root = tmp_path_factory.mktemp("notebooks")
    for path in NOTEBOOKS:
        shutil.copy2(path, root / path.name)
    home = tmp_path_factory.mktemp("jupyter-home")
    server = Lab(root, home)
    yield server
    server.stop()
    assert server.proc.returncode is not None, "JupyterLab still running"
    # Kernels run in sessions of their own; each one's command line names its
    # connection file in this server's runtime directory.
    wait_until(lambda: not processes_mentioning(str(home / "runtime")), "the kernels to exit")


def processes_mentioning(text: str) -> list[int]:
    """Ids of the processes whose command line contains ``text`` (Linux /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:  # the process ended while we looked
            continue
    return found


@pytest.fixture(scope="module")
def browser(lab):
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.mark.browser
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_opens_as_saved(lab, browser, notebook: Path):
    copy = lab.root / notebook.name
    before = hashlib.sha256(copy.read_bytes()).hexdigest()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    remote: list[str] = []
    page.on("request", lambda request: remote.extend(off_loopback(request.url)))
    try:
        page.goto(
            f"{lab.url}/lab/workspaces/{notebook.stem}/tree/{notebook.name}?token={lab.token}"
        )
        knobbed = has_knob(notebook)  # a going-further notebook may have none
        if knobbed:
            draw_knob(page, lab, notebook)  # one reload allowed, see there
            knob = page.locator(KNOB).first
            knob.scroll_into_view_if_needed(timeout=PATIENCE_S * 1000)
            knob.wait_for(state="visible", timeout=PATIENCE_S * 1000)
        else:
            page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=PATIENCE_S * 1000)
            wait_until(lambda: lab.idle_kernel(notebook.name), f"the kernel of {notebook.name}")
        assert page.locator(".jp-OutputArea-output", has_text=AS_TEXT).count() == 0

        images = page.locator(".jp-RenderedImage img")
        expected = saved_figures(notebook)
        diagrams, expected_diagrams = page.locator(MERMAID), saved_mermaid(notebook)
        if is_lesson(notebook):
            assert expected + expected_diagrams >= 1, "a main lesson shows no picture"
        wait_until(lambda: images.count() >= expected, f"{expected} figures")
        for i in range(images.count()):
            images.nth(i).scroll_into_view_if_needed(timeout=PATIENCE_S * 1000)
            drawn = "e => e.complete && e.naturalWidth > 0"
            assert images.nth(i).evaluate(drawn), f"figure {i + 1} is not drawn"
        wait_until(lambda: diagrams.count() >= expected_diagrams, f"{expected_diagrams} diagrams")
        for i in range(diagrams.count()):
            diagrams.nth(i).scroll_into_view_if_needed(timeout=PATIENCE_S * 1000)
            drawn = "e => e.complete && e.naturalWidth > 50 && e.naturalHeight > 20"
            assert diagrams.nth(i).evaluate(drawn), f"Mermaid diagram {i + 1} is not drawn"

        time.sleep(SETTLE_S)
        if knobbed:
            knob.scroll_into_view_if_needed(timeout=PATIENCE_S * 1000)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / f"{notebook.stem}.png"
        page.screenshot(path=str(shot))
        widget_blank = False
        if knobbed:
            widget_shot = SCREENSHOTS / f"{notebook.stem}.widget.png"
            # The knob's widget: a finished progress bar (tqdm) is a hidden widget before it.
            widget = page.locator(".jp-OutputArea-output .jupyter-widgets:visible").first
            widget.screenshot(path=str(widget_shot))
            widget_blank = not not_blank(widget_shot)

        news = page.get_by_text("Jupyter news")
        seen = {
            "news pop-up": news.count(),
            "toasts": page.locator(".Toastify__toast").count(),
            "dirty tabs": page.locator(".lm-TabBar-tab.jp-mod-dirty").count(),
            "file changed": hashlib.sha256(copy.read_bytes()).hexdigest() != before,
            "remote requests": remote,
            "screenshot blank": not not_blank(shot),
            "widget blank": widget_blank,
            "red disconnected icons": page.evaluate(RED_ICONS),
        }
        assert seen == {
            "news pop-up": 0,
            "toasts": 0,
            "dirty tabs": 0,
            "file changed": False,
            "remote requests": [],
            "screenshot blank": False,
            "widget blank": False,
            "red disconnected icons": 0,
        }
    finally:
        page.close()
        lab.close_sessions()
