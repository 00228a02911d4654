"""Replay jobs against hostile requests: decompression bombs, oversized settings, files that
are not traces, odd file names, leaked paths, a failed job's status, leftovers of a crash.

Each attack is first sent as the attack report sent it; the server must refuse it with a
4xx naming the file or key and the limit, keep its memory, and never show its own paths.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from fastapi.testclient import TestClient

from ppe.replay.cli import build_parser, config_from_args
from ppe.replay.config import LIMITS, LOCAL_LIMITS, ReplayConfig
from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.replay_jobs import job_config, public_error, upload_root
from ppe.service.store.db import make_engine
from ppe.traces import TraceFormatError, TraceLimits, TraceTooLarge, check_trace, read_trace

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "ppe" / "service" / "dashboard" / "static"

SMALL = {
    "n": 400,
    "iterations": 20,
    "hosts": 2,
    "starts": 3,
    "workers": 1,
    "executor": "serial",
    "strategies": ["mean"],
}
GIB = 2**30
ROW = b"1372636800,0.5\n"
MB = 2**20


def _gzip_stream(path: Path, chunk: bytes, total: int) -> Path:
    """``total`` bytes of ``chunk`` repeated, compressed as they are written (never in memory)."""
    with gzip.GzipFile(path, "wb", compresslevel=9) as g:
        block = chunk * max(1, (1 << 20) // len(chunk))
        written = 0
        while written < total:
            part = block[: total - written]
            g.write(part)
            written += len(part)
    return path


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """1 GiB of zeros (no line break at all) and 1 GiB of valid rows, each ~1-2 MB gzipped."""
    d = tmp_path_factory.mktemp("bombs")
    return {
        "zeros": _gzip_stream(d / "zeros.csv.gz", b"\0", GIB),
        "rows": _gzip_stream(d / "rows.csv.gz", ROW, GIB),
    }


def multipart(parts: list[tuple[str, bytes | None, bytes]]) -> tuple[bytes, dict[str, str]]:
    """A multipart body built byte by byte, so file names reach the server exactly as given."""
    boundary = "ppe-hardening-boundary"
    body = bytearray()
    for field, filename, data in parts:
        body += f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"'.encode()
        if filename is not None:
            body += b'; filename="' + filename + b'"'
        body += b"\r\n\r\n" + data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return bytes(body), {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def config_part(config: dict[str, Any] | None = None) -> tuple[str, None, bytes]:
    return ("config", None, json.dumps(SMALL if config is None else config).encode())


@pytest.fixture
def make_client(
    db_url: str, traces_dir: Path, env_tokens_factory: Callable[[str], dict[str, str]]
) -> Iterator[Callable[..., tuple[TestClient, dict[str, str]]]]:
    """``make_client(**settings)``: a client of a fresh app and an operator's headers."""
    tokens = env_tokens_factory(db_url)
    opened: list[TestClient] = []

    def make(**settings: Any) -> tuple[TestClient, dict[str, str]]:
        base = {"database_url": db_url, "trace_dirs": (str(traces_dir.parent),)}
        client = TestClient(create_app(Settings(**{**base, **settings})))
        client.__enter__()
        opened.append(client)
        return client, {"Authorization": f"Bearer {tokens['operator']}"}

    yield make
    for c in opened:
        c.__exit__(None, None, None)


def uploads_kept(client: TestClient) -> list[Path]:
    root: Path = client.app.state.services.replays.upload_root  # type: ignore[attr-defined]
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def wait_done(c: TestClient, url: str, headers: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        job = c.get(url, headers=headers).json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.2)
    raise TimeoutError(job)


def reasons(r: httpx.Response) -> str:
    return " ".join(p["reason"] for p in r.json()["detail"])


# ---- 1. decompression bombs ----------------------------------------------------------------


def test_trace_reader_stops_at_its_bounds(bombs: dict[str, Path], tmp_path: Path) -> None:
    """Streaming reads: each bound raises TraceTooLarge at once, naming the limit."""
    limits = TraceLimits()
    with pytest.raises(TraceTooLarge, match="line longer than 65536"):
        check_trace(bombs["zeros"], limits)
    with pytest.raises(TraceTooLarge, match="more than 1000000 data rows") as err:
        read_trace(bombs["rows"], limits)
    assert err.value.line == 1_000_001
    comments = _gzip_stream(tmp_path / "c.csv.gz", b"# " + b"x" * 1000 + b"\n", 60 * MB)
    with pytest.raises(TraceTooLarge, match="more than 50 MiB once decompressed"):
        check_trace(comments, limits)
    small = TraceLimits(max_rows=10)
    assert check_trace(_gzip_stream(tmp_path / "ok.csv.gz", ROW, 10 * len(ROW)), small) == 10
    with pytest.raises(TraceTooLarge, match="more than 10 data rows"):
        read_trace(_gzip_stream(tmp_path / "r.csv.gz", ROW, 11 * len(ROW)), small)


def test_gzip_bomb_upload_is_refused_in_bounded_memory(  # type: ignore[no-untyped-def]
    db_url: str, server_factory, env_tokens_factory, bombs: dict[str, Path]
) -> None:
    """The report's attack on a live server: a ~1 MB .csv.gz unpacking to 1 GiB. Refused
    (422: no line break in 64 KiB; 413: over 1 000 000 rows) while the server's RSS stays
    within 200 MB of its start (it used to grow by 5.5 GB)."""
    tokens = env_tokens_factory(db_url)
    server = server_factory(db_url)
    proc = psutil.Process(server.proc.pid)
    start_rss = proc.memory_info().rss
    peak = [start_rss]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            stop.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    headers = {"Authorization": f"Bearer {tokens['operator']}"}
    answers = {}
    try:
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=120) as client:
            for kind, path in bombs.items():
                files = [("files", (f"{kind}.csv.gz", path.read_bytes(), "application/gzip"))]
                answers[kind] = client.post(
                    "/api/v1/replays", data={"config": json.dumps(SMALL)}, files=files
                )
    finally:
        stop.set()
        sampler.join()
    grown_mb = (peak[0] - start_rss) / MB
    print(
        f"server RSS at start {start_rss / MB:.0f} MB, peak {peak[0] / MB:.0f} MB (+{grown_mb:.0f})"
    )
    zeros, rows = answers["zeros"], answers["rows"]
    assert zeros.status_code == 413, zeros.text
    assert "'zeros.csv.gz'" in reasons(zeros) and "65536 characters" in reasons(zeros)
    assert rows.status_code == 413, rows.text
    assert "'rows.csv.gz'" in reasons(rows) and "1000000 data rows" in reasons(rows)
    for r in answers.values():
        assert "/tmp" not in r.text and str(upload_root(make_engine(db_url))) not in r.text
    assert grown_mb < 200


def test_compressed_upload_cap_is_checked_as_bytes_arrive(make_client) -> None:  # type: ignore[no-untyped-def]
    """Over the compressed cap: 413 naming the limit, from the declared length or (chunked
    body, no length) from the bytes counted as they stream in; nothing is kept."""
    c, op = make_client(max_upload_bytes=MB)
    blob = gzip.compress(ROW * 10) + bytes(3 * MB)
    body, headers = multipart([config_part(), ("files", b"1.csv.gz", blob)])
    r = c.post("/api/v1/replays", content=body, headers={**op, **headers})
    assert r.status_code == 413 and "exceed 1 MiB" in reasons(r), r.text

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(body), 64 * 1024):
            yield body[i : i + 64 * 1024]

    r = c.post("/api/v1/replays", content=chunks(), headers={**op, **headers})
    assert r.status_code == 413 and "exceed 1 MiB" in reasons(r) and "'1.csv.gz'" in reasons(r)
    assert uploads_kept(c) == []
    many = [("files", f"{i}.csv".encode(), b"1,0.5\n") for i in range(4)]
    c2, _ = make_client(max_upload_files=3)
    body, headers = multipart([config_part(), *many])
    r = c2.post("/api/v1/replays", content=body, headers={**op, **headers})
    assert r.status_code == 413 and "at most 3 files" in reasons(r)
    big = {**SMALL, "note": "x" * 100_000}
    r = c.post("/api/v1/replays", json=big, headers=op)
    assert r.status_code == 413 and "64 KiB" in reasons(r)


# ---- 2. bounded settings ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"workers": 100_000}, "workers must be between 0 and"),
        ({"starts": 1e9}, "starts must be between 1 and 5000"),
        ({"starts": 3e9}, "starts must be between 1 and 5000"),  # was a 500 on PostgreSQL
        ({"schedule_samples": 1e9}, "schedule_samples must be between 10 and 100000"),
        ({"predict_samples": 10**9}, "predict_samples must be between 10 and 100000"),
        ({"hosts": 1000}, "hosts must be between 1 and 64"),
        ({"n": 10**7}, "n must be between 1 and 100000"),
        ({"iterations": 10**7}, "iterations must be between 1 and 100000"),
        ({"replan_every_s": 1}, "replan_every_s must be between 60"),
        ({"history_s": 1e12}, "history_s must be between"),
        ({"benchmark": 1e-3, "n": 100_000}, "a run would take"),
        ({"starts": True}, "starts must be an integer, got True"),
        ({"include_runs": 1}, "include_runs must be true or false"),
        ({"n": "400"}, "n must be an integer"),
        ({"starts": 2.5}, "starts must be an integer, got 2.5"),
        ({"executor": "dask"}, "needs a server started with --dask-scheduler"),
        (
            {"executor": "dask", "scheduler_address": "tcp://198.51.100.7:8786"},
            "scheduler_address is set by the server",
        ),
        ({"start_method": "fork"}, "start_method is chosen by the server"),
        ({"strategies": ["mean"] * 50}, "strategies: at most"),
    ],
)
def test_oversized_settings_are_refused(  # type: ignore[no-untyped-def]
    make_client, traces_dir: Path, change: dict[str, Any], words: str
) -> None:
    c, op = make_client()
    body = {**SMALL, "traces": [f"{traces_dir.name}/1.csv.gz"], **change}
    r = c.post("/api/v1/replays", json=body, headers=op)
    assert r.status_code == 422 and words in reasons(r), r.text
    assert c.get("/api/v1/replays", headers=op).json() == []


def test_non_objects_and_non_finite_numbers_are_refused(make_client, traces_dir: Path) -> None:  # type: ignore[no-untyped-def]
    c, op = make_client()
    json_h = {**op, "Content-Type": "application/json"}
    trace = f'"traces": ["{traces_dir.name}/1.csv.gz"]'
    for raw, words in [
        (b"[1, 2]", "must be a JSON object"),
        (b'"starts"', "must be a JSON object"),
        (b"", "body must be JSON"),
        (b"{nope", "not valid JSON"),
        (f'{{{trace}, "confidence": NaN}}'.encode(), "NaN is not a JSON number"),
        (f'{{{trace}, "latency": Infinity}}'.encode(), "Infinity is not a JSON number"),
        (f'{{{trace}, "bandwidth": 1e999}}'.encode(), "bandwidth must be a finite number"),
    ]:
        r = c.post("/api/v1/replays", content=raw, headers=json_h)
        assert r.status_code == 422 and words in reasons(r), (raw, r.text)
    one = ("files", b"1.csv", b"1,0.5\n2,0.5\n")
    for text, words in [
        (b"[1]", "must be a JSON object"),
        (b"null", "must be a JSON object"),
        (b'{"starts": NaN}', "NaN is not a JSON number"),
        (json.dumps({**SMALL, "traces": ["/etc"]}).encode(), "leave 'traces' out"),
    ]:
        body, headers = multipart([("config", None, text), one])
        r = c.post("/api/v1/replays", content=body, headers={**op, **headers})
        assert r.status_code == 422 and words in reasons(r), (text, r.text)
    assert uploads_kept(c) == []


def test_limits_table_names_key_and_bound() -> None:
    """One table, used by the service (LIMITS) and the CLI (LOCAL_LIMITS: larger sizes)."""
    with pytest.raises(ValueError, match="starts must be between 1 and 5000, got 1000000000"):
        ReplayConfig.from_flat({"starts": 1e9})
    assert ReplayConfig.from_flat({"starts": 1e3}).starts == 1000  # an integral JSON float
    assert ReplayConfig.from_flat({"starts": 20_000}, LOCAL_LIMITS).starts == 20_000
    with pytest.raises(ValueError, match="starts must be between 1 and 1000000"):
        ReplayConfig.from_flat({"starts": 10**7}, LOCAL_LIMITS)
    assert set(LIMITS.bounds) == set(ReplayConfig().to_flat())  # every flat key is bounded
    assert ReplayConfig.from_flat(ReplayConfig().to_flat()) == ReplayConfig()
    args = build_parser().parse_args(["t.csv", "--starts", "20000"])
    assert config_from_args(args).starts == 20_000


def test_dask_runs_only_on_the_servers_scheduler() -> None:
    on = Settings(dask_scheduler="tcp://10.0.0.5:8786", replay_max_workers=2)
    cfg = job_config({"executor": "dask", "traces": ["t"]}, on)
    assert cfg.scheduler_address == "tcp://10.0.0.5:8786" and cfg.workers == 2
    assert job_config({"traces": ["t"]}, on).workers == 2  # 0 ("all cores") is the server's most
    with pytest.raises(ValueError, match="workers must be between 0 and 2"):
        job_config({"traces": ["t"], "workers": 3}, on)


# ---- 3. uploads checked before acceptance ---------------------------------------------------


def test_bad_uploads_are_refused_before_acceptance(make_client, traces_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """What got 202 and failed later (with server paths in the error) is now a 422 naming the
    uploaded file; odd names never 500; nothing is kept."""
    c, op = make_client()
    real = (traces_dir / "1.csv.gz").read_bytes()
    plain = gzip.decompress(real)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    cases: list[tuple[bytes, bytes, str]] = [
        (b"traces.zip", b"PK\x03\x04" + bytes(100), "a trace file is named"),
        (b"1.csv", png, "'1.csv': line 1: cannot read file"),
        (b"1.csv", real, "'1.csv': is gzip data but its name does not end in .gz"),
        (b"1.csv.gz", plain, "'1.csv.gz': is named .gz but is not gzip data"),
        (b"notes.txt", b"hello world\n", "'notes.txt': line 1: expected 'timestamp,value'"),
        (b"1.csv", b"t,v\n1,0.5\n2,nan\n", "'1.csv': line 3: value: not finite"),
        (b".", real, "a trace file is named"),
        (b"..", real, "a trace file is named"),
        (b"", real, "a trace file is named"),
        (b"../..", real, "a trace file is named"),
        (b"a/..", real, "a trace file is named"),
        (b".csv.gz", real, "no host name"),
        (b"1\x00.csv.gz", real, "NUL"),
        (b"x" * 300 + b".csv", plain, "at most 128 characters"),
    ]
    for name, data, words in cases:
        body, headers = multipart([config_part(), ("files", name, data)])
        r = c.post("/api/v1/replays", content=body, headers={**op, **headers})
        assert r.status_code == 422, (name, r.status_code, r.text)
        assert words in reasons(r), (name, r.text)
        assert "/tmp" not in r.text and "ppe-uploads" not in r.text
    two = [("files", b"1.csv.gz", real), ("files", b"1.csv", plain)]
    body, headers = multipart([config_part(), *two])
    r = c.post("/api/v1/replays", content=body, headers={**op, **headers})
    assert r.status_code == 422 and "are both host '1'" in reasons(r)
    body, headers = multipart([config_part()])
    r = c.post("/api/v1/replays", content=body, headers={**op, **headers})
    assert r.status_code == 422 and "at least one file" in reasons(r)
    assert uploads_kept(c) == []
    assert c.get("/api/v1/replays", headers=op).json() == []
    # a path in a name is cut to its base name, characters outside [A-Za-z0-9._-] become "_"
    files = [("files", b"C:\\data\\../1.csv.gz", real), ("files", b"my trace 2.csv", plain)]
    body, headers = multipart([config_part({**SMALL, "hosts": 1}), *files])
    r = c.post("/api/v1/replays", content=body, headers={**op, **headers})
    assert r.status_code == 202, r.text
    job = wait_done(c, r.json()["url"], op)
    assert job["config"]["traces"] == ["1.csv.gz", "my_trace_2.csv"]
    assert job["status"] == "done", job["error"]
    assert job["report"]["config"]["traces"] == ["1.csv.gz", "my_trace_2.csv"]


def test_failed_jobs_show_no_server_paths(make_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Server-side traces are read when the job runs: a bad one fails the job, and its error
    names the trace as the caller did, not where it lies on the server."""
    d = tmp_path / "srv-traces"
    d.mkdir()
    (d / "bad.csv").write_text("t,v\n1,0.5\n2,oops\n")
    c, op = make_client(trace_dirs=(str(d),))
    r = c.post("/api/v1/replays", json={**SMALL, "traces": ["bad.csv"]}, headers=op)
    assert r.status_code == 202, r.text
    job = wait_done(c, r.json()["url"], op)
    assert job["status"] == "failed"
    assert job["error"] == "TraceFormatError: bad.csv:3: value: not a number: 'oops'"
    assert job["config"]["traces"] == ["bad.csv"]
    assert str(tmp_path) not in json.dumps(job)


def test_public_error_strips_directories() -> None:
    up = Path("/tmp/ppe-uploads-abc/job-7")
    err = TraceFormatError(up / "1.csv.gz", 3, "bad")
    assert public_error(err, [up]) == "TraceFormatError: 1.csv.gz:3: bad"
    other = FileNotFoundError(2, "No such file", "/srv/secret/dir/x.csv")
    assert "/srv" not in public_error(other, []) and "x.csv" in public_error(other, [])
    assert public_error(ValueError("rows/s and 1/2"), []) == "ValueError: rows/s and 1/2"


# ---- 4. a failed job's status on the dashboard -----------------------------------------------


NODE_HARNESS = r"""
const fs = require("fs"); const vm = require("vm");
const els = {};
function el(key) {
  if (!els[key]) els[key] = { className: "", textContent: "", dataset: {}, style: {}, value: "",
    max: 0, classList: { add() {}, contains() { return false; } }, addEventListener() {},
    replaceChildren() {}, append() {}, setAttribute() {} };
  return els[key];
}
global.window = global; global.Node = class {};
global.document = { body: { dataset: { root: "" } }, hidden: false, addEventListener() {},
  querySelector: (s) => el(s), querySelectorAll: () => [], createElement: (t) => el("new-" + t) };
global.location = { pathname: "/replays/7", search: "", assign() {} };
global.setInterval = () => 0;
el("#replay-page").dataset.job = "7";
const job = JSON.parse(process.argv[3]);
global.fetch = async () => ({ status: 200, ok: true, headers: { get: () => null },
  text: async () => JSON.stringify(job) });
for (const f of ["ppe.js", "replay.js"]) vm.runInThisContext(fs.readFileSync(process.argv[2] + "/" + f, "utf8"));
setTimeout(() => console.log(JSON.stringify({ dot: el("#live-dot").className,
  status: el("#status").textContent, state: window.PPE.jobState(job.status) })), 50);
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_failed_job_shows_a_red_failed_dot(tmp_path: Path) -> None:
    """The replay page's dot: red "Failed" for a failed job (it was a green "Finished")."""
    harness = tmp_path / "harness.js"
    harness.write_text(NODE_HARNESS)

    def page(status: str) -> dict[str, str]:
        job = {"id": 7, "status": status, "done": 1, "total": 3, "error": "boom", "config": {}}
        out = subprocess.run(
            ["node", str(harness), str(STATIC), json.dumps(job)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return dict(json.loads(out.stdout))

    assert page("failed") == {"dot": "dot err", "status": "Failed", "state": "failed"}
    assert page("done") == {"dot": "dot on", "status": "Finished", "state": "done"}
    assert page("running")["dot"] == "dot on" and page("running")["state"] == "running"


# ---- 5. default strategies -----------------------------------------------------------------


def test_naming_strategies_replans_only_named_ones() -> None:
    assert ReplayConfig.from_flat({"strategies": ["mean"]}).reported() == ("mean",)
    assert ReplayConfig.from_flat({"strategies": ["expected"]}).reported() == (
        "expected",
        "expected+replan",
    )
    assert ReplayConfig.from_flat({"strategies": "mean", "replan": "mean"}).reported() == (
        "mean",
        "mean+replan",
    )
    assert ReplayConfig.from_flat({}) == ReplayConfig()  # the default run is unchanged
    assert "expected+replan" in ReplayConfig().reported()
    cli = config_from_args(build_parser().parse_args(["t.csv"]))
    assert cli == ReplayConfig(traces=("t.csv",))  # the CLI's default table is unchanged
    cli = config_from_args(build_parser().parse_args(["t.csv", "--strategies", "mean"]))
    assert cli.reported() == ("mean",)


# ---- 6. uploads left by a killed server ------------------------------------------------------


def test_uploads_left_by_a_killed_server_are_removed_at_start(  # type: ignore[no-untyped-def]
    db_url: str, server_factory, env_tokens_factory, traces_dir: Path
) -> None:
    tokens = env_tokens_factory(db_url)
    root = upload_root(make_engine(db_url))
    server = server_factory(db_url)
    headers = {"Authorization": f"Bearer {tokens['operator']}"}
    slow = {**SMALL, "starts": 500, "n": 2000, "iterations": 200, "strategies": ["expected"]}
    files = [
        ("files", (f, (traces_dir / f).read_bytes(), "application/gzip"))
        for f in ("1.csv.gz", "2.csv.gz")
    ]
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=60) as client:
        r = client.post("/api/v1/replays", data={"config": json.dumps(slow)}, files=files)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    held = root / f"job-{job_id}"
    assert sorted(p.name for p in held.iterdir()) == ["1.csv.gz", "2.csv.gz"]
    server.kill()  # SIGKILL mid-job: no shutdown hook removes the folder
    assert held.exists()
    stray = root / "upload-stray"  # a request that never became a job
    stray.mkdir()
    (stray / "x.csv").write_text("1,0.5\n")
    server2 = server_factory(db_url)
    with httpx.Client(base_url=server2.base_url, headers=headers, timeout=60) as client:
        job = client.get(f"/api/v1/replays/{job_id}").json()
    assert job["status"] == "failed" and "interrupted" in job["error"]
    assert not held.exists() and not stray.exists()
