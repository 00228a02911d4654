"""The README's quick tour runs as written, on what a fresh clone has after `make run`.

Every fenced ```sh block in the "A quick tour" section runs, in order, in one bash session
(`set -euo pipefail`), as a reader pastes them into one terminal. A block is left out only
when its first line says so, as a reader sees it: ``# (not run by the tour test: why)``; the
blocks left out are pinned below (:data:`NOT_RUN`), so a new one cannot slip by. Synopses
that are not commands are fenced as ```text.

The server is the one `make run` starts: the test asks make for the command (`make -n run`)
in a temporary directory laid out like a fresh clone (no ``../shared`` beside it, the
Makefile, ``examples/`` and a ``.venv/bin`` standing for the virtualenv `make` creates, whose
programs are those next to this interpreter), and runs it on a free port. The two values a
reader fills in, the lines ``PPE=...`` and ``ADMIN=...``, are set to that server's address and
to the admin token it printed on its first start.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import ROOT, free_port

TOUR_HEADING = "## A quick tour"
NOT_RUN_MARK = "# (not run by the tour test:"
#: The blocks the tour test leaves out, by the start of their first command.
NOT_RUN = (
    ".venv/bin/python benchmarks/sor_experiment.py",
    "ppe sensor --server",
    "ppe replay ../shared/traces/",
)
#: What `make run` starts on a fresh clone: the demo traces are a trace directory.
MAKE_RUN = [".venv/bin/ppe", "serve", "--db", "sqlite:///ppe.db", "--trace-dir", "examples/traces"]
BLOCK_MARK = "::tour-block {}::"


@dataclass
class Block:
    line: int  # of the opening fence, 1-based
    text: str

    @property
    def first_command(self) -> str:
        lines = [ln for ln in self.text.splitlines() if ln.strip() and not ln.startswith("#")]
        return lines[0] if lines else ""

    @property
    def runs(self) -> bool:
        return not self.text.startswith(NOT_RUN_MARK)


def tour_blocks(readme: str) -> list[Block]:
    """The ```sh blocks between the tour's heading and the next level-2 heading."""
    lines = readme.splitlines()
    start = lines.index(TOUR_HEADING)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    blocks: list[Block] = []
    i = start
    while i < end:
        if lines[i] == "```sh":
            close = lines.index("```", i + 1)
            blocks.append(Block(i + 1, "\n".join(lines[i + 1 : close]) + "\n"))
            i = close
        i += 1
    return blocks


def fill_in(text: str, values: dict[str, str]) -> str:
    """Set the ``NAME=...`` lines a reader fills in (each must be there exactly once)."""
    for name, value in values.items():
        pattern = re.compile(rf"^{name}=.*$", re.MULTILINE)
        assert len(pattern.findall(text)) == 1, f"the tour sets {name}= once"
        line = f"{name}={shlex.quote(value)}"
        text = pattern.sub(line.replace("\\", "\\\\"), text)  # a literal replacement
    return text


def fresh_clone(where: Path) -> Path:
    """A directory laid out like a fresh clone after `make` has set up ``.venv``."""
    clone = where / "clone"
    clone.mkdir()
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, clone / name)  # copies: make compares their times
    (clone / "examples").symlink_to(ROOT / "examples")
    real_bin = Path(sys.executable).parent
    ppe = real_bin / "ppe"
    assert ppe.exists(), f"the ppe entry point is not installed next to {sys.executable}"
    bin_dir = clone / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "ppe").symlink_to(ppe)
    # What the real `activate` does for the tour: the virtualenv's programs come first.
    (bin_dir / "activate").write_text(f'export PATH={shlex.quote(str(real_bin))}:"$PATH"\n')
    (clone / ".venv" / ".installed").touch()  # newer than pyproject.toml: nothing to install
    return clone


def tour_env() -> dict[str, str]:
    env = dict(os.environ)
    # The code under test is this checkout's, whatever the virtualenv was installed from.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for name in ("PPE_DATABASE_URL", "PPE_TRACE_DIRS", "PPE_DEMO_AUTH"):
        env.pop(name, None)  # the tour's defaults, not the caller's
    return env


class MakeRun:
    """`make run`'s server, on a free port, in ``clone``."""

    def __init__(self, clone: Path, env: dict[str, str]) -> None:
        # Not the outer make's flags (`make test DB=...`) nor the caller's Makefile variables.
        drop = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "TRACE_DIR", "DB", "VENV"}
        dry = subprocess.run(
            ["make", "-n", "--no-print-directory", "run"],
            cwd=clone,
            env={k: v for k, v in env.items() if k not in drop},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert dry.returncode == 0, dry.stdout + dry.stderr
        command = shlex.split(dry.stdout.strip().splitlines()[-1])
        assert command == MAKE_RUN, dry.stdout  # and nothing to set up first
        self.base_url = f"http://127.0.0.1:{free_port()}"
        self.log = clone / "make-run.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*command, "--port", self.base_url.rsplit(":", 1)[1], "--log-level", "warning"],
                cwd=clone,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its replay workers go with it
            )
        self.admin = self._wait_ready()

    def _wait_ready(self, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"make run's server exited:\n{self.log.read_text()}")
            try:
                if httpx.get(self.base_url + "/healthz", timeout=1.0).status_code == 200:
                    found = re.search(r"PPE_ADMIN_TOKEN=(\S+)", self.log.read_text())
                    assert found, f"no admin token printed:\n{self.log.read_text()}"
                    return found.group(1)
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"make run's server did not come up:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(20)


@pytest.fixture
def served_clone(tmp_path: Path) -> Iterator[tuple[Path, MakeRun, dict[str, str]]]:
    if shutil.which("make") is None or shutil.which("curl") is None:
        pytest.skip("the tour needs make and curl")
    env = tour_env()
    clone = fresh_clone(tmp_path)
    server = MakeRun(clone, env)
    try:
        yield clone, server, env
    finally:
        server.stop()


def json_lines(output: str) -> list[dict[str, Any]]:
    out = []
    for line in output.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def test_tour_blocks_are_found_and_marked() -> None:
    blocks = tour_blocks((ROOT / "README.md").read_text())
    skipped = [b.first_command for b in blocks if not b.runs]
    assert len(skipped) == len(NOT_RUN)
    assert all(c.startswith(p) for c, p in zip(skipped, NOT_RUN, strict=True)), skipped
    runnable = "".join(b.text for b in blocks if b.runs)
    for needed in ("/api/v1/measurements", "/api/v1/schedules", "/api/v1/predictions"):
        assert needed in runnable
    assert "ppe replay examples/traces/" in runnable and "../shared" not in runnable


def whatif_tables(output: str) -> list[dict[int | None, float]]:
    """The predicted means of each `ppe whatif` table printed, by its first column's value
    (None for a table without a sweep)."""
    tables: list[dict[int | None, float]] = []
    header: list[str] = []
    for line in output.splitlines():
        cells = line.split()
        if "mean s" in line and "interval s" in line:
            header = re.split(r"\s{2,}", line.strip())
            tables.append({})
        elif tables and header and cells and re.fullmatch(r"[0-9.]+", cells[0]):
            row = re.split(r"\s{2,}", line.strip())
            key = None if header[0] == "mean s" else int(float(row[0]))
            tables[-1][key] = float(row[header.index("mean s")])
    return tables


def whatif_means(output: str) -> list[float]:
    """The predicted means of a `ppe whatif` table's rows, in order."""
    header: list[str] = []
    means = []
    for line in output.splitlines():
        if "mean s" in line and "interval s" in line:
            header = re.split(r"\s{2,}", line.strip())
        elif header and re.match(r"[0-9.]+\s", line):
            means.append(float(re.split(r"\s{2,}", line.strip())[header.index("mean s")]))
    return means


@pytest.mark.slow
def test_readme_tour_runs_as_written(
    served_clone: tuple[Path, MakeRun, dict[str, str]],
) -> None:
    clone, server, env = served_clone
    blocks = [b for b in tour_blocks((ROOT / "README.md").read_text()) if b.runs]
    script = "set -euo pipefail\n"
    for k, block in enumerate(blocks):
        script += f"echo {shlex.quote(BLOCK_MARK.format(k))}\n{block.text}"
    script = fill_in(script, {"PPE": server.base_url, "ADMIN": server.admin})
    run = subprocess.run(
        ["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )
    outputs = re.split(r"^::tour-block \d+::$", run.stdout, flags=re.MULTILINE)[1:]
    if run.returncode != 0:
        failed = blocks[len(outputs) - 1] if outputs else blocks[0]
        pytest.fail(
            f"README block at line {failed.line} failed (exit {run.returncode}):\n{failed.text}"
            f"\n--- stdout\n{run.stdout[-4000:]}\n--- stderr\n{run.stderr[-4000:]}"
        )
    assert len(outputs) == len(blocks)

    answers = json_lines(run.stdout)
    planned = [a for a in answers if "allocation" in a and "strategy" in a]
    schedules = {a["app"]: a for a in planned if "probes" not in a}
    assert set(schedules) == {"sor", "stencil", "jacobi2d"}, run.stdout
    # the schedule that probed h1 and h2 with the posted signature planned with their speeds
    (probed,) = [a for a in planned if "probes" in a]
    assert {(p["host"], p["status"]) for p in probed["probes"]} == {("h1", "ok"), ("h2", "ok")}
    assert {a["speed"]["source"] for a in probed["allocation"]} == {"probe"}
    for app, n in (("sor", 4000), ("stencil", 2000)):
        rows = {a["host"]: a["rows"] for a in schedules[app]["allocation"]}
        assert set(rows) == {"h1", "h2"} and sum(rows.values()) == n
        assert all(r > 0 for r in rows.values())
    # h2 has no benchmark in the store: its speed comes from the profile the tour posted
    sources = {a["host"]: a["speed"]["source"] for a in schedules["jacobi2d"]["allocation"]}
    assert sources == {"h1": "registered", "h2": "profile"}, schedules["jacobi2d"]
    # an application known only from its runs: the fit it was planned with is named
    assert any("stencil/row" in w for w in schedules["stencil"]["warnings"])
    # what-if on the hosts the tour fed: h1 and 32 more like it, and h2
    whatifs = [a for a in answers if a.get("status") == "done" and "report" in a]
    assert len(whatifs) == 1, run.stdout
    (point,) = whatifs[0]["report"]["points"]
    assert point["hosts"] == 34 and point["makespan"]["mean"] > 0
    predictions = [a for a in answers if "hosts" in a and "makespan" in a]
    assert len(predictions) == 1 and predictions[0]["makespan"]["mean"] > 0
    assert (clone / "report.json").is_file() and (clone / "report.html").is_file()
    assert (clone / "whatif.html").is_file()  # ppe whatif --html
    # the worked example: the Bitbrains hosts now, + 8/16/32 like the quietest, a 2x network
    (k,) = [i for i, b in enumerate(blocks) if "bitbrains-more.toml" in b.text]
    now, more, faster = whatif_tables(outputs[k])
    assert list(now) == [None] and list(more) == list(faster) == [8, 16, 32], outputs[k]
    assert "the 3 quietest of 11 traces" in outputs[k]
    assert ": 2 (1.000 ± 0.000), 4 (0.992 ± 0.005), 1 (0.884 ± 0.048)" in outputs[k]
    assert more[8] > more[16] > more[32] and more[32] < now[None] / 3  # as the README says
    assert all(faster[n] < more[n] for n in more)  # a network twice as fast helps a little
    assert (clone / "whatif-bitbrains.html").is_file()
    # ... and as one spec: number = 0, 32, 32 and the links' bandwidths swept together
    (k,) = [i for i, b in enumerate(blocks) if "bitbrains-scenarios.toml" in b.text]
    assert whatif_means(outputs[k]) == [now[None], more[32], faster[32]], outputs[k]

    # The replay job the tour started resolves `bitbrains-sample` and runs to the end.
    headers = {"Authorization": f"Bearer {server.admin}"}
    jobs = httpx.get(server.base_url + "/api/v1/replays", headers=headers).json()
    assert [j["config"]["traces"] for j in jobs] == [["bitbrains-sample"]]
    url = f"{server.base_url}/api/v1/replays/{jobs[0]['id']}"
    job = httpx.get(url, headers=headers).json()
    while job["status"] in ("queued", "running"):  # bounded by the test's timeout
        time.sleep(0.5)
        job = httpx.get(url, headers=headers).json()
    assert job["status"] == "done", job.get("error")
    assert job["done"] == job["total"] == 5
