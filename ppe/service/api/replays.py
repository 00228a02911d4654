"""Replay jobs: start one on server-side or uploaded traces, follow it, read its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from sqlalchemy import select
from starlette.datastructures import UploadFile

from ppe.service.auth import OPERATE, READ, require
from ppe.service.deps import ReplayRunnerDep, SessionDep, SettingsDep
from ppe.service.replay_jobs import JobError, ReplayRunner, discard, resolve_traces
from ppe.service.store.models import ReplayJob

router = APIRouter(tags=["replays"])
MAX_UPLOAD_BYTES = 64 * 1024 * 1024


def _summary(j: ReplayJob) -> dict[str, Any]:
    return {
        "id": j.id,
        "status": j.status,
        "done": j.done,
        "total": j.total,
        "created_at": j.created_at,
        "finished_at": j.finished_at,
        "error": j.error or None,
        "config": j.config,
    }


async def _config_from(
    request: Request, runner: ReplayRunner, trace_dirs: tuple[str, ...]
) -> tuple[dict[str, Any], Path | None]:
    """JSON body with server-side `traces`, or multipart: `config` (JSON) plus `files`
    (saved to a folder of their own, returned with the config)."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await request.form()
        config = json.loads(str(form.get("config") or "{}"))
        files = [f for f in form.getlist("files") if isinstance(f, UploadFile)]
        if not files:
            raise JobError("multipart replay requests need at least one file in 'files'")
        folder = runner.upload_dir()
        try:
            await _save_uploads(files, folder)
        except BaseException:
            discard(folder)
            raise
        config["traces"] = [str(folder)]
        return dict(config), folder
    try:
        config = await request.json()
    except ValueError as exc:
        raise JobError("body must be JSON (or multipart with files)") from exc
    if not isinstance(config, dict):
        raise JobError("body must be a JSON object of replay settings")
    traces = config.get("traces") or []
    config["traces"] = resolve_traces(
        [traces] if isinstance(traces, str) else list(traces),
        trace_dirs,
    )
    return config, None


async def _save_uploads(files: list[UploadFile], folder: Path) -> None:
    total = 0
    for f in files:
        data = await f.read()
        total += len(data)
        if total > MAX_UPLOAD_BYTES:
            raise JobError(f"uploads exceed {MAX_UPLOAD_BYTES // 2**20} MiB")
        name = (f.filename or "trace.csv").replace("/", "_").replace("\\", "_")
        (folder / name).write_bytes(data)


@router.post("/replays", status_code=status.HTTP_202_ACCEPTED)
async def post_replay(
    request: Request,
    _role: Annotated[str, Depends(require(*OPERATE))],
    runner: ReplayRunnerDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    try:
        config, uploads = await _config_from(request, runner, settings.trace_dirs)
        job_id = runner.submit(config, uploads)
    except (JobError, ValueError, TypeError) as exc:
        raise HTTPException(422, [{"field": "config", "reason": str(exc)}]) from exc
    return {"id": job_id, "status": "queued", "url": f"/api/v1/replays/{job_id}"}


@router.get("/replays")
def list_replays(
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[dict[str, Any]]:
    jobs = session.execute(select(ReplayJob).order_by(ReplayJob.id.desc()).limit(limit)).scalars()
    return [_summary(j) for j in jobs]


@router.get("/replays/{job_id}")
def get_replay(
    job_id: int, session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> dict[str, Any]:
    job = session.get(ReplayJob, job_id)
    if job is None:
        raise HTTPException(404, f"no replay job {job_id}")
    return {**_summary(job), "report": job.report}
