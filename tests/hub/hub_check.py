"""A real JupyterHub serving the course to several learners at once (`make hub`; not in `make test`).

As root, on localhost only: creates LEARNERS Unix users with private homes (0700), starts JupyterHub
(the dummy authenticator with a shared password, the local process spawner, configurable-http-proxy)
from a venv holding JupyterHub and the kit's wheel. Then, for every learner at once: logs in
through the login form, starts their server (whose start command first copies the course into their
home with `attnkit course ~/attnkit-course --keep-changed`), runs notebooks 03 and 04 top to bottom
in a kernel through the server's REST API and websocket, saves them, and checks every check cell's
line and that no cell failed. Last, that no learner can list, read or write another's home (from their
kernel) or reach another's server (with their token). Everything stops and is removed at the end, also
on failure, Ctrl-C, SIGTERM or after --deadline seconds.

    build/hub/venv/bin/python tests/hub/hub_check.py --venv build/hub/venv --proxy PATH [--learners 3]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

import psutil
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

NOTEBOOKS = ["03_attention_heatmaps.ipynb", "04_head_ablation.ipynb"]
COURSE = "attnkit-course"
# The course's notebooks, as the checkout has them (it said 6 until notebook 07 came and failed it)
IN_COURSE = sorted(p.name for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PREFIX = "attnkit-hubtest-"  # every user this script makes, and only those, starts with it

CONFIG = """
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.auth_token = {proxy_token!r}
c.JupyterHub.db_url = "sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{state}/cookie_secret"
c.JupyterHub.pid_file = "{state}/jupyterhub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.Authenticator.allowed_users = {users!r}
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [{start!r}]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
# One thread per kernel: the models are tiny, and N learners' thread pools would fight for the cores.
c.Spawner.environment = {{"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}}
c.JupyterHub.services = [{{"name": "driver", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [{{"name": "driver", "scopes": ["admin:users", "admin:servers", "tokens"],
                             "services": ["driver"]}}]
"""

# The learner's server: their own copy of the course first (never overwriting their changes), then the server.
START = """#!/bin/sh
"{venv}/bin/attnkit" course "$HOME/{course}" --keep-changed || echo "attnkit course failed: starting without it" >&2
exec "{venv}/bin/jupyterhub-singleuser" "$@"
"""

PROBE = """
import json, os, pathlib
other = pathlib.Path({home!r})
tries = {{"list": lambda: os.listdir(other),
          "read": lambda: (other / {course!r} / {notebook!r}).read_bytes(),
          "write": lambda: (other / "written-by-another-learner.txt").write_text("x")}}
seen = {{}}
for what, attempt in tries.items():
    try:
        attempt()
        seen[what] = "allowed"
    except PermissionError:
        seen[what] = "denied"
print(json.dumps(seen))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Hub:
    def __init__(self, venv: Path, proxy: Path, n: int):
        self.venv, self.proxy = venv.resolve(), proxy.resolve()
        self.users = [f"{PREFIX}{i}" for i in range(1, n + 1)]
        self.password, self.token = secrets.token_hex(16), secrets.token_hex(32)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.made_users: list[str] = []
        self.state = Path(tempfile.mkdtemp(prefix="attnkit-hub-"))  # 0700: the hub's secrets
        self.process = None
        self.http = AsyncHTTPClient(force_instance=True, defaults={"request_timeout": 300})

    # -- setting up and tearing down ---------------------------------------------------------
    def make_users(self) -> None:
        for user in self.users:
            try:
                pwd.getpwnam(user)
                raise SystemExit(f"user {user} exists already: remove it (userdel -r {user}) or run elsewhere")
            except KeyError:
                pass
        for user in self.users:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", user], check=True)
            self.made_users.append(user)
            os.chmod(pwd.getpwnam(user).pw_dir, 0o700)  # Debian's useradd makes 0755 homes: readable by all

    def check_learners_can_run_the_venv(self) -> None:
        """The venv's Python must be one every user may run (not one under root's 0700 home)."""
        out = subprocess.run(
            ["runuser", "-u", self.users[0], "--", self.venv / "bin/python", "-c", "import attnkit"],
            capture_output=True,
            text=True,
        )
        if out.returncode:
            raise RuntimeError(
                f"a learner cannot run {self.venv}/bin/python ({out.stderr.strip()[-200:]}): make "
                "the hub's venv from a Python every user can run (make hub HUB_PYTHON=/usr/bin/python3.11)"
            )

    def start(self) -> None:
        start = self.state / "start-learner.sh"
        start.write_text(START.format(venv=self.venv, course=COURSE))
        start.chmod(0o755)
        os.chmod(self.state, 0o711)  # learners may run start-learner.sh, not list or read the hub's files
        for secret in ("cookie_secret",):
            (self.state / secret).write_text(secrets.token_hex(32))
            (self.state / secret).chmod(0o600)
        (self.state / "jupyterhub_config.py").write_text(
            CONFIG.format(
                port=self.port,
                hub_port=free_port(),
                proxy_api_port=free_port(),
                proxy=str(self.proxy),
                proxy_token=secrets.token_hex(32),
                state=self.state,
                password=self.password,
                users=set(self.users),
                start=str(start),
                token=self.token,
            )
        )
        (self.state / "jupyterhub_config.py").chmod(0o600)
        self.log = open(self.state / "hub.log", "wb")
        env = {**os.environ, "PATH": f"{self.venv}/bin:{os.environ['PATH']}"}
        self.process = subprocess.Popen(
            [self.venv / "bin/jupyterhub", "-f", self.state / "jupyterhub_config.py"],
            cwd=self.state,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            process_group=0,
        )

    def stop(self) -> None:
        """Stop the hub, its proxy and every learner's server and kernels; remove the users and files."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the hub stops the servers it spawned
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        for user in self.made_users:
            # a learner's server runs in its own session: whatever still runs as the user goes
            subprocess.run(["pkill", "-KILL", "-u", user], check=False)
            time.sleep(0.2)
            subprocess.run(["userdel", "--remove", user], check=False, stderr=subprocess.DEVNULL)
        if self.process is not None:
            self.log.close()
        shutil.rmtree(self.state, ignore_errors=True)

    def log_tail(self, n: int = 40) -> str:
        path = self.state / "hub.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""

    # -- talking to the hub ------------------------------------------------------------------
    async def api(self, method: str, path: str, token: str, body=None, ok=(200, 201, 202, 204)):
        request = HTTPRequest(
            self.url + path,
            method=method,
            headers={"Authorization": f"token {token}"},
            body=None if body is None and method in ("GET", "DELETE") else json.dumps(body or {}),
            follow_redirects=False,
        )
        try:
            response = await self.http.fetch(request, raise_error=False)
        except (ConnectionError, OSError):
            return None
        if response.code not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {response.code} {response.body[:300]!r}")
        return json.loads(response.body) if response.body else None

    async def wait_until_up(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterHub exited ({self.process.returncode}):\n{self.log_tail()}")
            try:
                if await self.api("GET", "/hub/api/", self.token, ok=(200,)) is not None:
                    return
            except RuntimeError:
                pass
            await asyncio.sleep(0.5)
        raise TimeoutError("JupyterHub did not come up")

    async def log_in(self, user: str) -> None:
        """The login form, as a browser sends it: the session cookie is the proof."""
        first = await self.http.fetch(self.url + "/hub/login", raise_error=False)
        cookies = "; ".join(c.split(";")[0] for c in first.headers.get_list("Set-Cookie"))
        xsrf = next(c.split("=", 1)[1] for c in cookies.split("; ") if c.startswith("_xsrf="))
        response = await self.http.fetch(
            HTTPRequest(
                self.url + "/hub/login?next=",
                method="POST",
                follow_redirects=False,
                headers={"Cookie": cookies},
                body=urlencode({"username": user, "password": self.password, "_xsrf": xsrf}),
            ),
            raise_error=False,
        )
        set_cookies = " ".join(response.headers.get_list("Set-Cookie"))
        if response.code != 302 or "jupyterhub-hub-login=" not in set_cookies:
            raise RuntimeError(f"{user} could not log in: HTTP {response.code}")
        wrong = await self.http.fetch(
            HTTPRequest(
                self.url + "/hub/login?next=",
                method="POST",
                follow_redirects=False,
                headers={"Cookie": cookies},
                body=urlencode({"username": user, "password": "wrong", "_xsrf": xsrf}),
            ),
            raise_error=False,
        )
        if "jupyterhub-hub-login=" in " ".join(wrong.headers.get_list("Set-Cookie")):
            raise RuntimeError(f"{user} logged in with a wrong password")


class Learner:
    def __init__(self, hub: Hub, name: str):
        self.hub, self.name = hub, name
        self.home = pwd.getpwnam(name).pw_dir

    async def start_server(self, deadline: float) -> None:
        await self.hub.log_in(self.name)
        self.token = (
            await self.hub.api(
                "POST", f"/hub/api/users/{self.name}/tokens", self.hub.token, {"note": "hub test", "expires_in": 3600}
            )
        )["token"]
        await self.hub.api("POST", f"/hub/api/users/{self.name}/server", self.hub.token)
        while time.monotonic() < deadline:
            model = await self.hub.api("GET", f"/hub/api/users/{self.name}", self.hub.token)
            if model["servers"].get("", {}).get("ready"):
                return
            await asyncio.sleep(1)
        raise TimeoutError(f"{self.name}'s server did not start")

    async def contents(self, path: str, body=None):
        return await self.hub.api("PUT" if body else "GET", f"/user/{self.name}/api/contents/{path}", self.token, body)

    async def run_notebook(self, notebook: str) -> dict:
        """Every code cell in a fresh kernel, in order, stopping at the first error; then saved."""
        path = f"{COURSE}/{notebook}"
        model = await self.contents(path)
        nb = model["content"]
        session = await self.hub.api(
            "POST",
            f"/user/{self.name}/api/sessions",
            self.token,
            {"path": path, "type": "notebook", "name": notebook, "kernel": {"name": "python3"}},
        )
        kernel = Kernel(self, session["kernel"]["id"])
        await kernel.connect()
        start, error = time.monotonic(), None
        try:
            for cell in nb["cells"]:
                if cell["cell_type"] != "code":
                    continue
                cell["outputs"] = await kernel.execute(
                    "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                )
                error = next((o for o in cell["outputs"] if o["output_type"] == "error"), None)
                if error:
                    break
        finally:
            kernel.close()
            await self.hub.api("DELETE", f"/user/{self.name}/api/sessions/{session['id']}", self.token)
        await self.contents(path, {"type": "notebook", "format": "json", "content": nb})
        checks = [cell for cell in nb["cells"] if "check" in cell.get("metadata", {}).get("tags", [])]
        lines = [
            "".join(
                o.get("text", "")
                for o in c.get("outputs", [])
                if o["output_type"] == "stream" and o["name"] == "stdout"
            ).strip()
            for c in checks
        ]
        return {
            "seconds": time.monotonic() - start,
            "error": error and f"{error['ename']}: {error['evalue']}",
            "checks": lines,
        }

    async def probe(self, other: Learner) -> dict:
        """From this learner's kernel: can they list, read or write the other's home? And reach their server?"""
        session = await self.hub.api(
            "POST",
            f"/user/{self.name}/api/sessions",
            self.token,
            {"path": "probe.ipynb", "type": "notebook", "name": "probe", "kernel": {"name": "python3"}},
        )
        kernel = Kernel(self, session["kernel"]["id"])
        await kernel.connect()
        try:
            outputs = await kernel.execute(PROBE.format(home=other.home, course=COURSE, notebook=NOTEBOOKS[0]))
        finally:
            kernel.close()
            await self.hub.api("DELETE", f"/user/{self.name}/api/sessions/{session['id']}", self.token)
        text = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream").strip()
        seen = json.loads(text.splitlines()[-1]) if text else {"kernel": str(outputs)}
        request = HTTPRequest(
            f"{self.hub.url}/user/{other.name}/api/contents/{COURSE}",
            headers={"Authorization": f"token {self.token}"},
            follow_redirects=False,
        )
        response = await self.hub.http.fetch(request, raise_error=False)
        seen["their server"] = "allowed" if response.code == 200 else f"denied (HTTP {response.code})"
        return seen


class Kernel:
    """A kernel of a learner's server, driven over the websocket as JupyterLab drives it."""

    def __init__(self, learner: Learner, kernel_id: str):
        self.learner, self.id, self.session = learner, kernel_id, uuid.uuid4().hex

    async def connect(self) -> None:
        url = (
            self.learner.hub.url.replace("http", "ws", 1)
            + f"/user/{self.learner.name}/api/kernels/{self.id}/channels?session_id={self.session}"
        )
        self.ws = await websocket_connect(
            HTTPRequest(url, headers={"Authorization": f"token {self.learner.token}"}), max_message_size=512 * 2**20
        )

    async def execute(self, code: str, timeout: float = 600) -> list[dict]:
        msg_id = uuid.uuid4().hex
        self.ws.write_message(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "username": self.learner.name,
                        "session": self.session,
                        "msg_type": "execute_request",
                        "version": "5.3",
                        "date": datetime.datetime.now(datetime.UTC).isoformat(),
                    },
                    "parent_header": {},
                    "metadata": {},
                    "channel": "shell",
                    "buffers": [],
                    "content": {
                        "code": code,
                        "silent": False,
                        "store_history": True,
                        "user_expressions": {},
                        "allow_stdin": False,
                        "stop_on_error": True,
                    },
                }
            )
        )
        outputs, deadline = [], time.monotonic() + timeout
        while True:
            raw = await asyncio.wait_for(self.ws.read_message(), max(1.0, deadline - time.monotonic()))
            if raw is None:
                raise RuntimeError(f"{self.learner.name}: the kernel's websocket closed (the kernel died?)")
            if isinstance(raw, bytes):
                continue  # binary buffers (widgets): not outputs
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id or msg.get("channel") != "iopub":
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
            elif kind in ("display_data", "execute_result"):
                outputs.append(
                    {
                        "output_type": kind,
                        "data": content["data"],
                        "metadata": content.get("metadata", {}),
                        **({"execution_count": content["execution_count"]} if kind == "execute_result" else {}),
                    }
                )
            elif kind == "error":
                outputs.append(
                    {
                        "output_type": "error",
                        "ename": content["ename"],
                        "evalue": content["evalue"],
                        "traceback": content["traceback"],
                    }
                )
            elif kind == "status" and content["execution_state"] == "idle":
                return outputs

    def close(self) -> None:
        self.ws.close()


async def serve_class(hub: Hub, timeout: float) -> list[str]:
    """Every learner at once: log in, start, run the notebooks; then the isolation checks. Failures."""
    deadline = time.monotonic() + timeout
    await hub.wait_until_up(deadline)
    learners = [Learner(hub, user) for user in hub.users]
    t = time.monotonic()
    await asyncio.gather(*(learner.start_server(deadline) for learner in learners))
    print(f"{len(learners)} learners logged in and their servers started in {time.monotonic() - t:.1f} s")
    failures = []
    for learner in learners:
        listing = await learner.contents(COURSE)
        names = sorted(item["name"] for item in listing["content"])
        home = Path(learner.home) / COURSE
        owners = {pwd.getpwuid(p.stat().st_uid).pw_name for p in home.iterdir()}
        if names != IN_COURSE or owners != {learner.name}:
            failures.append(f"{learner.name}: the course in their home is {names}, owned by {owners}")

    async def run_all(learner):
        return {notebook: await learner.run_notebook(notebook) for notebook in NOTEBOOKS}

    peaks = {learner.name: 0 for learner in learners}

    async def sample_memory():  # each learner's processes (server and kernels) together, every half second
        while True:
            for learner in learners:
                total = sum(
                    p.info["memory_info"].rss
                    for p in psutil.process_iter(["username", "memory_info"])
                    if p.info["username"] == learner.name and p.info["memory_info"]
                )
                peaks[learner.name] = max(peaks[learner.name], total)
            await asyncio.sleep(0.5)

    t = time.monotonic()
    sampler = asyncio.ensure_future(sample_memory())
    try:
        results = await asyncio.gather(*(run_all(learner) for learner in learners))
    finally:
        sampler.cancel()
    print(
        f"notebooks {' and '.join(n[:2] for n in NOTEBOOKS)} run by {len(learners)} learners at once: "
        f"{time.monotonic() - t:.1f} s"
    )
    print(
        "peak resident memory of each learner's processes (server + kernel): "
        + ", ".join(f"{name} {peak / 1e6:.0f} MB" for name, peak in peaks.items())
    )
    for learner, result in zip(learners, results):
        for notebook, r in result.items():
            passed = [line for line in r["checks"] if line.startswith("✅")]
            print(
                f"  {learner.name} {notebook}: {r['seconds']:.1f} s, {len(passed)}/{len(r['checks'])} checks ✅"
                + (f", stopped at {r['error']}" if r["error"] else "")
            )
            if r["error"] or not r["checks"] or len(passed) != len(r["checks"]):
                failures.append(f"{learner.name} {notebook}: {r['error'] or r['checks']}")
            saved = json.loads((Path(learner.home) / COURSE / notebook).read_text())
            if not any(cell.get("outputs") for cell in saved["cells"] if cell["cell_type"] == "code"):
                failures.append(f"{learner.name} {notebook}: the run's outputs were not saved in their home")
    for learner, other in zip(learners, learners[1:] + learners[:1]):
        seen = await learner.probe(other)
        print(f"  {learner.name} on {other.name}'s files and server: {seen}")
        if any(not value.startswith("denied") for value in seen.values()):
            failures.append(f"{learner.name} can reach {other.name}'s files or server: {seen}")
    if any(p.name == "written-by-another-learner.txt" for one in learners for p in Path(one.home).iterdir()):
        failures.append("a learner wrote into another's home")
    return failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, required=True, help="the venv with jupyterhub and the kit's wheel")
    parser.add_argument("--proxy", type=Path, required=True, help="the configurable-http-proxy executable")
    parser.add_argument("--learners", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=900, help="seconds before everything is stopped")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("run as root: the test makes a Unix user per learner (useradd) and the hub spawns as them")
    for path in (args.venv / "bin/jupyterhub", args.venv / "bin/attnkit", args.proxy):
        if not path.exists():
            parser.error(f"{path} is missing (make hub installs it)")

    def stop_now(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop_now)

    hub = Hub(args.venv, args.proxy, args.learners)
    failures = ["did not finish"]
    try:
        hub.make_users()
        hub.check_learners_can_run_the_venv()
        hub.start()
        failures = asyncio.run(asyncio.wait_for(serve_class(hub, args.deadline), args.deadline))
    except (Exception, KeyboardInterrupt) as e:
        failures = [f"{type(e).__name__}: {e}"]
        print(f"hub log (last lines):\n{hub.log_tail()}", file=sys.stderr)
    finally:
        hub.stop()
        left = [u for u in hub.users if _exists(u)]
        print(f"stopped; users removed: {not left}, hub files removed: {not hub.state.exists()}")
    for failure in failures:
        print("FAILED:", failure)
    checks = 1
    print(f"{checks - bool(failures)} passed, {int(bool(failures))} failed")
    return 1 if failures else 0


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


if __name__ == "__main__":
    sys.exit(main())
