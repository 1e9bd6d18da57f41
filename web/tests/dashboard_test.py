#!/usr/bin/env python3
"""End-to-end test of the web dashboard in Debian's headless Chromium.

Starts the real `tessera serve --demo` on a free loopback port, opens its dashboard in
headless Chromium and drives it over the Chrome DevTools Protocol (a WebSocket; the client
below uses only Python's standard library). It checks that

  1. the page loads and shows the seeded fleet: every demo node by name, all its GPUs, the
     demo label;
  2. nothing is logged as an error on the console (console.error, uncaught exceptions, failed
     resource loads, Content-Security-Policy violations);
  3. the page updates by itself: a replica the test places through the JSON API appears on
     the fleet map;

and saves a full-page screenshot as <artifacts>/dashboard.png.

Exit codes: 0 passed, 1 failed, 77 skipped (no Chromium: scripts/install-deps.sh installs it).
"""

import argparse
import base64
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

DEMO_NODES = ["h100-a", "h100-b", "a100-a", "a100-mig", "l4-a", "l4-b"]
DEMO_GPUS = 20
PROBE = "browser-probe-0"
TIMEOUT_S = 90  # generous: the test polls for outcomes, it never sleeps for a fixed time


class Failure(Exception):
    pass


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def wait_for(what, fn, timeout=TIMEOUT_S, interval=0.25):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise Failure(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def http(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, json.loads(res.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class WebSocket:
    """The client side of RFC 6455, enough for the DevTools protocol: text frames."""

    def __init__(self, url):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        if not m:
            raise Failure(f"unexpected DevTools URL {url}")
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT_S)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise Failure("DevTools closed the connection during the handshake")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise Failure(f"DevTools refused the WebSocket: {head[:200]!r}")

    def send(self, text):
        payload = text.encode()
        header = bytes([0x81])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise Failure("DevTools closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            if b1 & 0x80:
                mask = self._read(4)
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(self._read(n)))
            else:
                data = self._read(n)
            if opcode == 0x8:
                raise Failure("DevTools closed the WebSocket")
            if opcode == 0x9:  # ping: answer with a pong
                self.sock.sendall(bytes([0x8A, 0x80]) + os.urandom(4))
                continue
            message += data
            if b0 & 0x80:
                return message.decode()


class DevTools:
    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.errors = []  # console errors, exceptions, failed loads

    def _note(self, msg):
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.errors.append(f"console.{p['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append("uncaught: " + d.get("exception", {}).get("description", d.get("text", "")))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            self.errors.append(f"log ({e.get('source')}): {e.get('text')} {e.get('url', '')}".strip())

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise Failure(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._note(msg)

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in r:
            raise Failure(f"evaluating {expression!r}: {r['exceptionDetails'].get('text')}")
        return r.get("result", {}).get("value")


def start_server(tessera, workdir):
    log = open(os.path.join(workdir, "serve.log"), "w")
    proc = subprocess.Popen([tessera, "serve", "--demo", "--demo-speed", "4", "--listen",
                             "127.0.0.1:0", "--store", ":memory:"],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
    if not m:
        proc.kill()
        raise Failure(f"tessera serve did not say where it listens: {line!r}")
    return proc, int(m.group(1))


def start_chromium(chromium, profile):
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage", "--disable-extensions",
            "--hide-scrollbars", f"--user-data-dir={profile}", "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1", "--window-size=1400,1700", "about:blank"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(profile, "..", "chromium.log"), "w"),
                            start_new_session=True)
    port_file = os.path.join(profile, "DevToolsActivePort")

    def port():
        if proc.poll() is not None:
            raise Failure(f"chromium exited with {proc.returncode} (see chromium.log)")
        if os.path.exists(port_file):
            lines = open(port_file).read().split()
            if len(lines) >= 2:
                return int(lines[0])
        return None

    devtools_port = wait_for("chromium's DevTools port", port)
    return proc, devtools_port


def run(tessera, chromium, artifacts):
    workdir = tempfile.mkdtemp(prefix="tessera-dashboard-")
    profile = os.path.join(workdir, "profile")
    os.makedirs(profile)
    server = browser = None
    try:
        server, port = start_server(tessera, workdir)
        base = f"http://127.0.0.1:{port}"
        browser, devtools_port = start_chromium(chromium, profile)

        def page_target():
            with urllib.request.urlopen(f"http://127.0.0.1:{devtools_port}/json/list", timeout=10) as r:
                pages = [t for t in json.load(r) if t.get("type") == "page"]
            return pages[0]["webSocketDebuggerUrl"] if pages else None

        cdp = DevTools(wait_for("a page target", page_target))
        for domain in ("Runtime", "Log", "Page"):
            cdp.call(f"{domain}.enable")
        cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=1700,
                 deviceScaleFactor=1, mobile=False)
        cdp.call("Page.navigate", url=base + "/")

        # 1. The seeded fleet is on the page.
        wait_for("the fleet map", lambda: cdp.evaluate(
            "document.querySelectorAll('[data-node]').length") == len(DEMO_NODES))
        nodes = cdp.evaluate("[...document.querySelectorAll('[data-node]')].map(n => n.dataset.node)")
        if sorted(nodes) != sorted(DEMO_NODES):
            raise Failure(f"fleet map shows nodes {nodes}, expected {DEMO_NODES}")
        text = cdp.evaluate("document.body.innerText")
        for name in DEMO_NODES:
            if name not in text:
                raise Failure(f"node {name} is not in the page's text")
        gpus = cdp.evaluate("document.querySelectorAll('[data-gpu]').length")
        if gpus != DEMO_GPUS:
            raise Failure(f"fleet map shows {gpus} GPUs, expected {DEMO_GPUS}")
        stat = cdp.evaluate("document.querySelector('[data-stat=gpus] b').textContent")
        if stat != str(DEMO_GPUS):
            raise Failure(f"summary says {stat} GPUs, expected {DEMO_GPUS}")
        if cdp.evaluate("document.getElementById('demo-badge').hidden") is not False:
            raise Failure("the page does not say it shows a demo")
        # The demo's own replicas are drawn on their GPUs.
        wait_for("replicas on the map", lambda: cdp.evaluate(
            "document.querySelectorAll('[data-replica]').length") >= 5)

        # 2. A replica placed through the API appears without reloading the page.
        status, body = http("POST", base + "/api/v1/models",
                            {"name": "browser-probe", "weightsMib": 512, "kvCacheMib": 0,
                             "overheadMib": 256, "computeMilli": 50, "sharing": ["shared"]})
        if status != 200:
            raise Failure(f"POST /api/v1/models answered {status}: {body}")
        status, body = http("POST", base + "/api/v1/replicas",
                            {"replicaId": PROBE, "model": "browser-probe"})
        if status != 201:
            raise Failure(f"POST /api/v1/replicas answered {status}: {body}")
        node = body["replicas"][0]["node"]
        wait_for(f"{PROBE} on the fleet map", lambda: cdp.evaluate(
            f"!!document.querySelector('[data-node=\"{node}\"] [data-replica=\"{PROBE}\"]')"))
        if PROBE not in cdp.evaluate("document.getElementById('events').innerText"):
            wait_for(f"{PROBE} in the event list", lambda: PROBE in cdp.evaluate(
                "document.getElementById('events').innerText"))

        # Let the charts gather a few samples and the autoscalers act, for the screenshot.
        wait_for("ten chart samples", lambda: cdp.evaluate("state.history.length") >= 10)
        wait_for("a scaling event on the page", lambda: cdp.evaluate(
            "document.querySelectorAll('#scaling .scale-events li').length") > 0)

        # 3. No console errors along the way.
        cdp.evaluate("1")  # drain pending notifications
        if cdp.errors:
            raise Failure("errors on the console:\n  " + "\n  ".join(cdp.errors))

        height = cdp.evaluate("Math.ceil(document.documentElement.scrollHeight)")
        cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=max(900, int(height)),
                 deviceScaleFactor=1, mobile=False)
        shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        os.makedirs(artifacts, exist_ok=True)
        path = os.path.join(artifacts, "dashboard.png")
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(f"screenshot: {os.path.abspath(path)}")
        try:
            cdp.call("Browser.close")
        except Failure:
            pass
    finally:
        if browser is not None:
            try:
                browser.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(browser.pid, signal.SIGKILL)
                browser.wait()
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tessera", required=True, help="the tessera binary")
    ap.add_argument("--artifacts", required=True, help="where dashboard.png goes")
    ap.add_argument("--chromium", default=os.environ.get("TESSERA_CHROMIUM"))
    args = ap.parse_args()
    chromium = args.chromium or find_chromium()
    if not chromium:
        print("SKIP: no chromium found (scripts/install-deps.sh installs Debian's chromium)")
        return 77
    try:
        run(args.tessera, chromium, args.artifacts)
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    print("PASS: the dashboard shows the demo fleet, updates live, logs no errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
