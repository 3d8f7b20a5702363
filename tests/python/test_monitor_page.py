"""The training monitor's page in a real browser: Debian's headless Chromium, driven over WebDriver (chromedriver)
with nothing but the standard library, follows `crema train --monitor` while it trains: the loss chart grows between
two looks, "Snapshot now" is refused without the run's token and writes a snapshot with it, "Stop" ends the run
after one. The screenshot it takes goes to $CREMA_MONITOR_SCREENSHOT when set (docs/images/monitor.png is one).
And `crema monitor --export`'s report of two logs (crema's and Caffe's) opens from a file with the network cut off."""

import base64
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

NET = """name: "small"
layer { name: "data" type: "DummyData" top: "data" top: "target"
        dummy_data_param { shape { dim: 16 dim: 8 } shape { dim: 16 dim: 1 }
                           data_filler { type: "gaussian" } data_filler { type: "gaussian" } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 1 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" }
"""


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(what, check, seconds=30):
    """check() until it returns something true; fails naming `what` after `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"gave up waiting for {what}")


class Browser:
    """A WebDriver session on headless Chromium, through chromedriver's HTTP interface."""

    def __init__(self, offline=False):
        for program in ("chromium", "chromedriver"):
            if shutil.which(program) is None:
                pytest.fail(f"{program} is not installed (scripts/install_deps.sh installs chromium and chromium-driver)")
        port = free_port()
        self.driver = subprocess.Popen(["chromedriver", f"--port={port}"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{port}"
        wait_for("chromedriver", self._ready)
        options = {"binary": shutil.which("chromium"),
                   "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            "--window-size=1300,1000"]}
        if offline:
            # Every name unresolvable and every request through a proxy that is not there: no network at all.
            options["args"] += ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9"]
        answer = self._call("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options}}})
        self.session = f"/session/{answer['sessionId']}"

    def _ready(self):
        try:
            return self._call("GET", "/status")["ready"]
        except OSError:
            return False

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)["value"]

    def call(self, method, path, body=None):
        return self._call(method, self.session + path, body)

    def open(self, url):
        self.call("POST", "/url", {"url": url})

    def script(self, code):
        return self.call("POST", "/execute/sync", {"script": code, "args": []})

    def element(self, css):
        found = self.call("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(found.values()))

    def click(self, css):
        self.call("POST", f"/element/{self.element(css)}/click", {})

    def type(self, css, text):
        element = self.element(css)
        self.call("POST", f"/element/{element}/clear", {})
        if text:
            self.call("POST", f"/element/{element}/value", {"text": text})

    def text(self, css):
        return self.call("GET", f"/element/{self.element(css)}/text")

    def screenshot(self):
        return base64.b64decode(self.call("GET", "/screenshot"))

    def close(self):
        try:
            self._call("DELETE", self.session)
        finally:
            self.driver.terminate()
            self.driver.wait(timeout=30)


def test_the_page_follows_snapshots_and_stops_a_run(tmp_path, tools_dir):
    (tmp_path / "net.prototxt").write_text(NET)
    (tmp_path / "solver.prototxt").write_text(
        f"net: '{tmp_path / 'net.prototxt'}' base_lr: 0.001 lr_policy: 'fixed' display: 500 max_iter: 100000000 "
        f"snapshot_prefix: '{tmp_path / 'small'}'")
    log_path = tmp_path / "train.log"
    with open(log_path, "w") as log:
        # The "Monitor:" line is an INFO line, which ctest's GLOG_minloglevel=1 for the Python tests would hide.
        training = subprocess.Popen([str(tools_dir / "crema"), "train", f"--solver={tmp_path / 'solver.prototxt'}",
                                     "--monitor=127.0.0.1:0"], stdout=log, stderr=subprocess.STDOUT,
                                    env=dict(os.environ, GLOG_minloglevel="0"))
    browser = None
    try:
        match = wait_for("the Monitor: line", lambda: re.search(r"Monitor: (http://127\.0\.0\.1:\d+/\?token=(\w+))",
                                                                 log_path.read_text()))
        url, token = match.group(1), match.group(2)
        browser = Browser()
        browser.open(url)
        # Two looks at the loss chart: more points the second time, drawn without reloading the page.
        points = "const p = document.querySelector(\"[data-key='loss'] path\");" \
                 "return p ? (p.getAttribute('d').match(/[ML]/g) || []).length : 0;"
        first = wait_for("the loss chart", lambda: browser.script(points) >= 2 and browser.script(points))
        second = wait_for("the loss chart to grow", lambda: browser.script(points) > first and browser.script(points))
        assert second > first
        assert browser.script("return performance.getEntriesByType('navigation').length") == 1
        assert browser.text("#phase") == "training"
        assert int(browser.text("#iteration")) > 0
        # Where one sampled iteration's time went, layer by layer.
        layers = wait_for("the layer times", lambda: browser.script(
            "const p = document.getElementById('layers'); return !p.hidden && p.textContent"))
        assert "InnerProduct" in layers and "EuclideanLoss" in layers
        # The training net, drawn by Graphviz beside training, shows up under "The net".
        wait_for("the drawing of the net", lambda: browser.script(
            "const n = document.getElementById('net'); return !n.hidden && n.querySelector('img').naturalWidth > 0"))

        # Without the token the page is refused; with it a snapshot follows.
        browser.type("#token", "")
        browser.click("#snapshot")
        assert "needs the run's token" in wait_for("the refusal", lambda: browser.text("#said"))
        assert not list(tmp_path.glob("*.solverstate"))
        browser.type("#token", token)
        browser.click("#snapshot")
        wait_for("the snapshot on the page", lambda: ".solverstate" in browser.text("#snapshots"))
        snapshots = list(tmp_path.glob("small_iter_*.solverstate"))
        assert len(snapshots) == 1

        shot = browser.screenshot()
        assert shot.startswith(b"\x89PNG") and len(shot) > 10000
        pathlib.Path(os.environ.get("CREMA_MONITOR_SCREENSHOT", tmp_path / "monitor.png")).write_bytes(shot)

        browser.click("#stop")
        assert training.wait(timeout=60) == 0
        assert "Optimization stopped early" in log_path.read_text()
        assert len(list(tmp_path.glob("small_iter_*.solverstate"))) == 2
    finally:
        if browser is not None:
            browser.close()
        if training.poll() is None:
            training.kill()
            training.wait()


CREMA_LOG = """I20261128 10:00:00.000000 1 solver.cpp:1] Iteration 0, loss = 2.3
I20261128 10:00:00.000000 1 solver.cpp:1] Iteration 0, lr = 0.01
I20261128 10:00:09.000000 1 solver.cpp:1] Iteration 100, loss = 0.6
I20261128 10:00:10.000000 1 solver.cpp:1] Iteration 100, Testing net (#0)
I20261128 10:00:11.000000 1 solver.cpp:1]     Test net output #0: accuracy = 0.85
"""
CAFFE_LOG = """I1122 10:31:07.123456  1234 solver.cpp:218] Iteration 0 (0 iter/s, 0.1s/100 iters), loss = 2.4
I1122 10:31:17.123456  1234 solver.cpp:218] Iteration 100 (10 iter/s, 10s/100 iters), loss = 0.7
I1122 10:31:18.000000  1234 solver.cpp:330] Iteration 100, Testing net (#0)
I1122 10:31:19.000000  1234 solver.cpp:397]     Test net output #0: accuracy = 0.8
"""


def test_an_exported_report_of_two_logs_opens_without_network(tmp_path, tools_dir):
    (tmp_path / "ours.log").write_text(CREMA_LOG)
    (tmp_path / "caffes.log").write_text(CAFFE_LOG)
    report = tmp_path / "report.html"
    subprocess.run([str(tools_dir / "crema"), "monitor", str(tmp_path / "ours.log"), str(tmp_path / "caffes.log"),
                    f"--export={report}"], check=True, capture_output=True)
    browser = Browser(offline=True)
    try:
        browser.open(report.as_uri())
        legend = wait_for("the loss chart", lambda: browser.script(
            "const l = document.querySelector(\"[data-key='loss'] .legend\"); return l && l.textContent"))
        assert "ours loss" in legend and "caffes loss" in legend
        assert "ours test accuracy" in browser.text("[data-key='other'] .legend")
        # The two runs' last figures, side by side.
        rows = browser.script("return [...document.querySelectorAll('#finals tr')].map(r => r.textContent)")
        assert len(rows) == 3 and rows[1].startswith("ours100") and rows[2].startswith("caffes100"), rows
        assert browser.text("#phase") == "2 logs"
        # Nothing was fetched: the report holds everything it shows.
        assert browser.script("return performance.getEntriesByType('resource').length") == 0
    finally:
        browser.close()
