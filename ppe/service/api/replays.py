"""Replay jobs: start one on server-side or uploaded traces, follow it, read its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, BinaryIO

from fastapi import APIRouter, Depends, Query, Request, status
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from ppe.service.api.job_cancel import cancelled
from ppe.service.auth import OPERATE, READ, require
from ppe.service.config import Settings
from ppe.service.deps import ReplayRunnerDep, SessionDep, SettingsDep
from ppe.service.errors import JOB_ENDED, NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.jobs import job_summary
from ppe.service.replay_jobs import JobError, TooLarge, upload_name
from ppe.service.schemas import IdPath, ProblemReport
from ppe.service.store.models import ReplayJob

router = APIRouter(tags=["replays"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)

#: Largest JSON body, and largest `config` field of a multipart body: settings, not data.
MAX_CONFIG_BYTES = 64 * 2**10
#: Room for multipart boundaries and part headers on top of the files' bytes.
MULTIPART_SLACK = 2**20

POST_DESCRIPTION = """Start a replay job (202 with its URL); follow it with `GET /replays/{id}`.

Either a JSON object of replay settings (the flat keys of `ppe replay`, `ppe.replay.config.
FLAT_KEYS`) whose `traces` name files or folders under the server's trace directories, or
`multipart/form-data` with `config` (that JSON object, without `traces`) and one or more
`files` (`NAME.csv`, `.csv.gz`, `.txt`, `.txt.gz`: GWA-T-12 or `timestamp,value`).

Strategies: `strategies` names the static strategies; `replan` those also run as an
application that re-plans when behind (`<name>+replan`). Without `replan`, a request that
names `strategies` re-plans only those of them among the default (`expected`): `["mean"]`
runs `mean` alone, `["mean", "expected"]` adds `expected+replan`; a request naming neither
runs every strategy and `expected+replan`.

Bounds: every setting is checked (type, finite, range; e.g. `starts` <= 5000, `hosts` <= 64,
`n` and `iterations` <= 100000, `workers` <= the server's limit; 422 naming the key and the
bound). `executor: "dask"` runs on the server's own scheduler only (`--dask-scheduler`);
`scheduler_address` and `start_method` are the server's to set. Uploads are checked before
the job is accepted: 413 when over a size limit (compressed bytes or files per request,
decompressed bytes, rows or line length per file, rows of all files), 422 for a file that
is not a trace, each naming the file and the limit."""


def _summary(j: ReplayJob) -> dict[str, Any]:
    return {**job_summary(j), "config": j.config}


def _settings_object(text: str | bytes) -> dict[str, Any]:
    """A JSON object of settings; NaN and Infinity are not JSON numbers and are refused."""

    def no_constant(name: str) -> None:
        raise JobError(f"config: {name} is not a JSON number")

    try:
        value = json.loads(text, parse_constant=no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, JobError):
            raise
        raise JobError(f"config is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise JobError(
            f"config must be a JSON object of replay settings, not {type(value).__name__}"
        )
    return value


async def _json_body(request: Request) -> dict[str, Any]:
    """The JSON body, read up to :data:`MAX_CONFIG_BYTES` (never an unbounded read)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_CONFIG_BYTES:
            raise TooLarge(f"a JSON body is at most {MAX_CONFIG_BYTES // 1024} KiB of settings")
    if not body:
        raise JobError("body must be JSON (or multipart with files)")
    return _settings_object(bytes(body))


class _Uploads:
    """Multipart parser callbacks: file parts go straight to their own file in ``folder`` in
    the chunks they arrive in, counted against the request's limits as they come."""

    def __init__(self, folder: Path, settings: Settings) -> None:
        self.folder, self.settings = folder, settings
        self.names: list[str] = []
        self.config = bytearray()
        self.total = 0
        self._header = (bytearray(), bytearray())
        self._disposition = b""
        self._file: BinaryIO | None = None
        self._field: str | None = None

    def callbacks(self) -> dict[str, Any]:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda d, a, b: self._header[0].extend(d[a:b]),
            "on_header_value": lambda d, a, b: self._header[1].extend(d[a:b]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._data,
            "on_part_end": self._part_end,
        }

    def _part_begin(self) -> None:
        self._disposition, self._field = b"", None

    def _header_end(self) -> None:
        name, value = self._header
        if bytes(name).lower() == b"content-disposition":
            self._disposition = bytes(value)
        name.clear()
        value.clear()

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        field = options.get(b"name", b"").decode("utf-8", "replace")
        if b"filename" in options:
            if field != "files":
                raise JobError(f"unexpected file field {field!r:.40}; send traces as 'files'")
            if len(self.names) >= self.settings.max_upload_files:
                raise TooLarge(
                    f"at most {self.settings.max_upload_files} files per request", "files"
                )
            name = upload_name(options[b"filename"].decode("utf-8", "replace"))
            if name in self.names:
                raise JobError(f"two uploads are named {name!r}", "files")
            self.names.append(name)
            self._file = (self.folder / name).open("xb")
        elif field != "config":
            raise JobError(f"unexpected form field {field!r:.40}; send 'config' and 'files'")
        self._field = field

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self._file is not None:
            self.total += end - start
            if self.total > self.settings.max_upload_bytes:
                raise TooLarge(
                    f"uploads exceed {self.settings.max_upload_bytes / 2**20:g} MiB in all "
                    f"(compressed), reached at {self.names[-1]!r}",
                    "files",
                )
            self._file.write(data[start:end])
        elif self._field == "config":
            self.config += data[start:end]
            if len(self.config) > MAX_CONFIG_BYTES:
                raise TooLarge(f"config is at most {MAX_CONFIG_BYTES // 1024} KiB")

    def _part_end(self) -> None:
        self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


async def _receive_uploads(
    request: Request, folder: Path, settings: Settings
) -> tuple[dict[str, Any], list[str]]:
    """Stream a multipart body to ``folder`` (the compressed total capped as it arrives, never
    a whole file in memory); returns the ``config`` object and the files' safe names."""
    length = request.headers.get("content-length", "")
    cap = settings.max_upload_bytes + MAX_CONFIG_BYTES + MULTIPART_SLACK
    if length.isdigit() and int(length) > cap:
        raise TooLarge(
            f"uploads exceed {settings.max_upload_bytes / 2**20:g} MiB in all (compressed)", "files"
        )
    _, params = parse_options_header(request.headers.get("content-type", ""))
    boundary = params.get(b"boundary")
    if not boundary:
        raise JobError("multipart body without a boundary", "files")
    uploads = _Uploads(folder, settings)
    parser = MultipartParser(boundary, uploads.callbacks())  # type: ignore[arg-type]
    try:
        async for chunk in request.stream():
            await run_in_threadpool(parser.write, chunk)  # callbacks write to disk
        parser.finalize()
    except FormParserError as exc:
        raise JobError(f"malformed multipart body: {exc}", "files") from None
    finally:
        uploads.close()
    config = _settings_object(bytes(uploads.config)) if uploads.config else {}
    return config, uploads.names


@router.post(
    "/replays",
    status_code=status.HTTP_202_ACCEPTED,
    description=POST_DESCRIPTION,
    responses={413: {"model": ProblemReport, "description": "over a size limit"}},
)
async def post_replay(
    request: Request,
    _role: Annotated[str, Depends(require(*OPERATE))],
    runner: ReplayRunnerDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    try:
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            folder = runner.upload_dir()
            try:
                config, names = await _receive_uploads(request, folder, settings)
            except BaseException:
                runner.discard(folder)
                raise
            job_id = await run_in_threadpool(runner.submit, config, settings, folder, names)
        else:
            config = await _json_body(request)
            job_id = await run_in_threadpool(runner.submit, config, settings)
    except TooLarge as exc:
        raise problem(413, str(exc), exc.field) from exc
    except JobError as exc:
        raise problem(422, str(exc), exc.field) from exc
    except (ValueError, TypeError) as exc:
        raise problem(422, str(exc), "config") from exc
    return {"id": job_id, "status": "queued", "url": f"/api/v1/replays/{job_id}"}


@router.get("/replays")
def list_replays(
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[dict[str, Any]]:
    jobs = session.execute(select(ReplayJob).order_by(ReplayJob.id.desc()).limit(limit)).scalars()
    return [_summary(j) for j in jobs]


@router.get("/replays/{job_id}", responses=NOT_FOUND)
def get_replay(
    job_id: IdPath, session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> dict[str, Any]:
    job = session.get(ReplayJob, job_id)
    if job is None:
        raise problem(404, f"no replay job {job_id}", "path.job_id")
    return {**_summary(job), "report": job.report}


@router.post(
    "/replays/{job_id}/cancel",
    responses=JOB_ENDED,
    description="Cancel a queued or running replay job: 200 with the job, now `cancelled` (a "
    "running one stops at its next progress step and stores no report); 409 when it has "
    "already ended. Cancelling a cancelled job is a no-op.",
)
def cancel_replay(
    job_id: IdPath, session: SessionDep, _role: Annotated[str, Depends(require(*OPERATE))]
) -> dict[str, Any]:
    return _summary(cancelled(session, ReplayJob, job_id, "replay"))
