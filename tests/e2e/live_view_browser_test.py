#!/usr/bin/env python3
"""The live view (GET /view) in a real headless browser: Debian's chromium driven by chromedriver + selenium.

    python3 tests/e2e/live_view_browser_test.py --baton build/apps/baton --models build/test-models \
        [--screenshot DIR]

A cluster as an operator runs it: a real etcd on loopback (free ports, a temporary data directory), a
prefill node and a decode node that register themselves (`--etcd --advertise --lease-ttl 2`), and a router
that follows etcd with no static node list. Checked, in one browser session:

  * Cluster: the router's page loads with no console warning or error, shows every node
    with its pool and health "up", draws both charts (Chart.js from Debian's libjs-chart.js, served by the
    router at /view/chart.js), and after a streamed and a non-streamed PD chat shows their timelines with the
    prefill and decode steps naming the nodes that ran them (direct transfer: the decode step shows the
    state's bytes, which the decode node fetched inside it); after a chat of a few KV blocks, the caches table
    shows the decode node's blocks in the router's prefix index.
  * Joins and deaths: a second decode node started later appears on the open page (health "up") without a
    reload; the first decode node, killed with SIGKILL, stops showing "up" (its lease expires, or the health
    checker ejects it), again without a reload.
  * Node view: a node's own page shows it and its slots, the generation it served as a timeline, and its
    host prompt cache in the caches table.
  * API key: on a router started with --api-key the page asks for the key (the state answers 401, the one
    console error allowed there), and once it is entered shows the nodes.
With --screenshot DIR the cluster page is saved as DIR/live-view-router.png and a node's as
DIR/live-view-node.png (docs/images holds the ones the docs show). Uses the process helpers of
openai_client_test.py (every process reaped); every wait is bounded. Exits 1 if any case fails.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openai_client_test as base  # noqa: E402  (the process helpers)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PAGE_WAIT_S = 20  # a node's lease is 2 s and the router checks health every 0.5 s: changes show within a few s
CLUSTER = f"view-{os.getpid()}"
SCREENSHOTS = None  # --screenshot DIR


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """A one-member etcd on loopback (free ports, a temporary data directory), reaped by stop()."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="baton-view-etcd-")
        self.client_port, peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        p = f"http://127.0.0.1:{peer}"
        self.proc = subprocess.Popen(
            ["etcd", "--name", "default", "--data-dir", self.dir + "/data", "--listen-client-urls", self.url,
             "--advertise-client-urls", self.url, "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
             "--initial-cluster", "default=" + p, "--log-level", "error"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=base._die_with_parent)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("etcd did not become healthy")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def node(name, etcd, role, cleanup):
    port = free_port()
    return base.start(name, "serve", "-m", base.model_path(), "-t", "1", "-np", "2", "-c", "2048", "--temp", "0",
                      "--role", role, "--etcd", etcd.url, "--cluster", CLUSTER, "--lease-ttl", "2",
                      "--port", str(port), "--advertise", f"http://127.0.0.1:{port}", cleanup=cleanup)


def router(etcd, cleanup, *extra):
    return base.start("router", "route", "--etcd", etcd.url, "--cluster", CLUSTER, "--port", "0",
                      "--pd-min-tokens", "1", "--health-interval", "0.5", "--timeout", "60", *extra, cleanup=cleanup)


def post_json(url, body, headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=base.REQUEST_TIMEOUT_S) as r:
        return r.status, dict(r.headers), r.read()


def chat(url, stream):
    return post_json(url + "/v1/chat/completions", {"messages": base.CHAT_MESSAGES, "max_tokens": 8,
                                                    "stream": stream})


def wait_for(what, fn, timeout=PAGE_WAIT_S):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"after {timeout} s: {what} (last: {last!r})")


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1100", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)


def rows(driver):
    """The nodes table as the page shows it: [{url, pool, health}]."""
    return driver.execute_script(
        "return [...document.querySelectorAll('tr.node-row')].map(r => "
        "({url: r.dataset.url, pool: r.dataset.pool, health: r.dataset.health}));")


def polls(driver):
    return int(driver.execute_script("return Number(document.body.dataset.polls || 0);"))


def steps(driver):
    """Every timeline step's tooltip ("prefill on http://...: 12.3 ms")."""
    return driver.execute_script("return [...document.querySelectorAll('#timeline .step')].map(s => s.title);")


def caches(driver):
    """The caches table as the page shows it: [{cache, where, entries}]."""
    return driver.execute_script(
        "return [...document.querySelectorAll('tr.cache-row')].map(r => "
        "({cache: r.dataset.cache, where: r.cells[1].textContent, entries: r.cells[2].textContent}));")


def console(driver):
    """The page's console messages of level WARNING and above (Chrome's DEBUG-level hints are not the page's)."""
    return [e for e in driver.get_log("browser") if e["level"] in ("WARNING", "SEVERE")]


def setUpModule():
    base.ensure_model()


class LiveView(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.etcd = Etcd()
        cls.addClassCleanup(cls.etcd.stop)
        cls.prefill = node("prefill node", cls.etcd, "prefill", cls.addClassCleanup)
        cls.decode = node("decode node 1", cls.etcd, "decode", cls.addClassCleanup)
        cls.router = router(cls.etcd, cls.addClassCleanup)
        cls.driver = browser()
        cls.addClassCleanup(cls.driver.quit)

    def open(self, url):
        self.driver.get(url + "/view")
        start = polls(self.driver)
        wait_for("the page polled its state", lambda: polls(self.driver) > start)

    def node_health(self):
        return {r["url"]: r["health"] for r in rows(self.driver)}

    def test_1_cluster_page_shows_nodes_charts_and_timelines(self):
        wait_for("the router's state shows both nodes up",
                 lambda: self._state_health() == {self.prefill.url: "up", self.decode.url: "up"})
        for stream in (False, True):
            status, headers, _ = chat(self.router.url, stream)
            self.assertEqual(status, 200)
            self.assertEqual(headers.get("X-Baton-Route"), "pd")
        # A prompt of a few KV blocks (64 tokens each), so the prefix index has blocks to show.
        long_chat = {"messages": [{"role": "user", "content": " ".join(f"w{i}" for i in range(200))}],
                     "max_tokens": 2}
        status, headers, _ = post_json(self.router.url + "/v1/chat/completions", long_chat)
        self.assertEqual((status, headers.get("X-Baton-Route")), (200, "pd"))
        self.open(self.router.url)
        health = wait_for("both nodes shown up", lambda: (lambda h: h if h.get(self.prefill.url) == "up" and
                                                          h.get(self.decode.url) == "up" else None)(
            self.node_health()))
        self.assertEqual(health, {self.prefill.url: "up", self.decode.url: "up"})
        pools = {r["url"]: r["pool"] for r in rows(self.driver)}
        self.assertEqual(pools, {self.prefill.url: "prefill", self.decode.url: "decode"})
        self.assertTrue(self.driver.execute_script("return typeof Chart === 'function';"), "Chart.js did not load")
        self.assertTrue(self.driver.execute_script("return !document.getElementById('charts').hidden;"))
        drawn = self.driver.execute_script(
            "return ['c-latency', 'c-load'].map(id => Chart.getChart(document.getElementById(id)) != null);")
        self.assertEqual(drawn, [True, True])
        titles = wait_for("three timelines", lambda: steps(self.driver) if len(
            self.driver.find_elements("css selector", "#timeline .track")) >= 3 else None)
        # (Direct transfer, the default: the decode node fetches the state inside its step, which shows its bytes.)
        for name, url in (("prefill", self.prefill.url), ("decode", self.decode.url)):
            self.assertEqual(sum(t.startswith(f"{name} on {url}:") for t in titles), 3, (name, titles))
        self.assertEqual(sum(t.startswith("decode") and re.search(r", [0-9.]+ (B|KiB|MiB|GiB)$", t) is not None
                             for t in titles), 3, titles)
        # The caches: the prefix index holds blocks of the decode node (it holds the long prompt's state).
        index = wait_for("the decode node's blocks in the prefix index", lambda: [
            c for c in caches(self.driver) if c["cache"] == "prefix index" and c["where"] == self.decode.url and
            c["entries"].isdigit() and int(c["entries"]) > 0])
        self.assertEqual(len(index), 1, caches(self.driver))
        if SCREENSHOTS:
            self.driver.save_screenshot(os.path.join(SCREENSHOTS, "live-view-router.png"))
        self.assertEqual(console(self.driver), [])

    def test_2_page_follows_a_join_and_a_death(self):
        self.open(self.router.url)
        console(self.driver)  # (drained: this case checks its own messages)
        joined = node("decode node 2", self.etcd, "decode", self.addCleanup)
        wait_for("the new node shown up without a reload", lambda: self.node_health().get(joined.url) == "up")
        self.decode.proc.send_signal(signal.SIGKILL)
        self.decode.proc.wait(10)
        wait_for("the killed node no longer shown up", lambda: self.node_health().get(self.decode.url, "up") != "up")
        self.assertEqual(self.node_health().get(joined.url), "up")
        status, headers, _ = chat(self.router.url, False)  # the cluster still serves, through the new node
        self.assertEqual((status, headers.get("X-Baton-Decode-Node")), (200, joined.url))
        self.assertEqual(console(self.driver), [])
        # The node view: the node itself, its slots, and the generation it just served.
        self.open(joined.url)
        self.assertEqual(self.driver.execute_script("return document.body.dataset.kind;"), "node")
        self.assertEqual([r["health"] for r in rows(self.driver)], ["up"])
        self.assertEqual(len(self.driver.find_elements("css selector", "#slots tbody tr")), 2)
        titles = wait_for("the generation's timeline", lambda: steps(self.driver))
        self.assertTrue(any(t.startswith("generate") for t in titles), titles)
        self.assertIn("host prompt cache", [c["cache"] for c in caches(self.driver)])
        if SCREENSHOTS:
            self.driver.save_screenshot(os.path.join(SCREENSHOTS, "live-view-node.png"))
        self.assertEqual(console(self.driver), [])

    def test_3_api_key_is_asked_for(self):
        keyed = router(self.etcd, self.addCleanup, "--api-key", "view-secret")
        self.driver.get(keyed.url + "/view")
        wait_for("the key box", lambda: self.driver.execute_script("return !document.getElementById('keybox').hidden;"))
        self.assertEqual(rows(self.driver), [])
        self.driver.find_element("id", "key").send_keys("view-secret")
        self.driver.find_element("id", "keybtn").click()
        wait_for("nodes shown once the key is given", lambda: rows(self.driver))
        messages = [e["message"] for e in console(self.driver)]
        # The one message: the browser's own note of the state's 401 before the key was entered.
        self.assertTrue(all("view/state" in m and "401" in m for m in messages), messages)

    def _state_health(self):
        with urllib.request.urlopen(self.router.url + "/view/state", timeout=5) as r:
            return {n["url"]: n["health"] for n in json.loads(r.read())["nodes"]}


def main():
    def configure(args):
        global SCREENSHOTS
        SCREENSHOTS = args.screenshot

    return base.run(__doc__, lambda ap: ap.add_argument("--screenshot", help="save the pages' screenshots in this "
                                                        "directory"), configure)


if __name__ == "__main__":
    sys.exit(main())
