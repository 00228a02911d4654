"""The `ppe` command: serve, tokens, and the tools other packages provide.

Each subcommand imports what it runs when it runs (store, app, replay), so that `ppe sensor`
on a host does not load the service, numpy or SQLAlchemy; no import here dodges a cycle.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppe.empirical.formats import FORMATS
from ppe.service.config import (
    ENV_DB_URL,
    RETENTION_ENV,
    RetentionPolicy,
    database_url_from_env,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from ppe.empirical.formats import Located
    from ppe.empirical.report import Fit
    from ppe.empirical.runs import RunProblem
    from ppe.service.store.models import ApiToken, Run

# Subcommands implemented elsewhere: name -> (module with main(argv), one-line help).
DELEGATED = {
    "sensor": ("sensors.cli", "run a sensor daemon on this host"),
    "replay": ("ppe.replay.cli", "replay recorded load traces through the pipeline"),
    "forecast-eval": ("ppe.evaluation.forecast_eval", "score the forecaster on load traces"),
    "loadgen": ("sensors.loadgen", "burn CPU on a core following a recorded trace's usage"),
    "profile": ("sensors.profile", "measure this machine's PMaC profile (docs/pmac.md)"),
    "convolve": ("ppe.convolve_cli", "predict a kernel's time on a host: signature x profile"),
    "whatif": ("ppe.whatif_cli", "predict an application on a machine described in a spec"),
    "pas2p": ("ppe.pas2p_cli", "phases and signature of a traced MPI run (docs/pas2p.md)"),
}


def _db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help=f"database URL (default: ${ENV_DB_URL} or sqlite)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ppe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="start the HTTP service and dashboard")
    _db_arg(serve)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument(
        "--demo-auth",
        action="store_true",
        help="requests without a token act as admin (local trials only)",
    )
    serve.add_argument(
        "--trace-dir",
        action="append",
        default=[],
        help="directory of server-side traces replay jobs may use",
    )
    serve.add_argument(
        "--dask-scheduler",
        default=None,
        help="Dask scheduler (tcp://host:8786) replay and what-if jobs may run on with "
        "executor 'dask'",
    )
    serve.add_argument("--log-level", default="info")
    serve.add_argument(
        "--retain",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="retention setting, e.g. served_log_days=3 (README 'Retention'; else PPE_RETAIN_*)",
    )

    token = sub.add_parser("token", help="manage API tokens (list, create, label, revoke)")
    tsub = token.add_subparsers(dest="token_command", required=True)
    create = tsub.add_parser("create", help="create a token; it is printed alone on the last line")
    create.add_argument("--role", required=True, choices=["sensor", "app", "operator", "admin"])
    create.add_argument("--label", default="")
    create.add_argument(
        "--expires-in",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="lifetime, e.g. 90d, 12h, 30m, 3600s (default: never expires)",
    )
    _db_arg(create)
    listing = tsub.add_parser("list", help="list tokens (never their secrets)")
    listing.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    _db_arg(listing)
    label = tsub.add_parser("label", help="change a token's label")
    label.add_argument("id", type=int)
    label.add_argument("label")
    _db_arg(label)
    revoke = tsub.add_parser(
        "revoke", help="revoke a token (a running server stops accepting it within 10 s)"
    )
    revoke.add_argument("id", type=int)
    _db_arg(revoke)

    mig = sub.add_parser("migrate", help="apply database migrations and exit")
    _db_arg(mig)

    ret = sub.add_parser("retention", help="trim the store to its retention policy")
    rsub = ret.add_subparsers(dest="retention_command", required=True)
    run = rsub.add_parser("run", help="one pass now (the service also runs them periodically)")
    _db_arg(run)
    run.add_argument("--dry-run", action="store_true", help="count what would go; change nothing")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a policy setting (e.g. served_log_days=3); default: the PPE_RETAIN_* "
        "environment, else README's defaults",
    )

    _add_runs_parser(sub)
    _add_model_parser(sub)

    for name, (_, help_text) in DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _add_runs_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    runs = sub.add_parser("runs", help="the performance database of runs (import, list)")
    rsub = runs.add_subparsers(dest="runs_command", required=True)
    imp = rsub.add_parser(
        "import",
        help="store the runs in a file: Extra-P text, JSON or JSON lines, or CSV "
        "(app,kernel,<param>...,time); all of them or, on any error, none",
    )
    imp.add_argument("file", type=Path)
    imp.add_argument("--format", choices=["auto", *FORMATS], default="auto")
    imp.add_argument("--app", default=None, help="the application (Extra-P files name none)")
    imp.add_argument("--system", default=None, help="the system the runs ran on, e.g. h0,h1")
    _db_arg(imp)
    listing = rsub.add_parser("list", help="list stored runs, newest first")
    listing.add_argument("--app", default=None)
    listing.add_argument("--kernel", default=None)
    listing.add_argument("--limit", type=int, default=50, help="at most this many (1-1000)")
    listing.add_argument("--json", action="store_true", help="one JSON array, as the API gives")
    _db_arg(listing)


def _add_model_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    model = sub.add_parser("model", help="empirical performance models (fit)")
    msub = model.add_subparsers(dest="model_command", required=True)
    fit = msub.add_parser(
        "fit",
        help="fit a model to measured runs (a file, or an application's stored runs) and "
        "predict with 95 % intervals",
        description="Fit one series of runs (an application's kernel, one metric, one system): "
        "from FILE (Extra-P text, JSON or JSON lines, or CSV app,kernel,<param>...,time) or "
        "from the store (--app). With one kernel in the runs it is fitted directly; else "
        "--kernel picks. docs/empirical.md, 'Command and API'.",
    )
    fit.add_argument("file", nargs="?", type=Path, help="a file of runs (or give --app)")
    fit.add_argument(
        "--app", default=None, help="the stored runs of this application (with FILE: its runs)"
    )
    fit.add_argument("--kernel", default=None, help="the kernel (region) to fit")
    fit.add_argument("--metric", default=None, help="the metric to fit (default: the only one)")
    fit.add_argument("--system", default=None, help="the system (default: the only one)")
    fit.add_argument(
        "--type",
        default="search",
        help="search (default: normal form, cross-validated), unknown (Prophecy's least "
        "residual norm), or a graph type: linear, quadratic, cubic, poly4..poly6, "
        "inverse_linear, inverse_quadratic, inverse_cubic, inverse_poly4..inverse_poly6",
    )
    fit.add_argument("--x", default=None, help="fit over this parameter alone (others fixed)")
    fit.add_argument(
        "--predict",
        action="append",
        default=[],
        metavar="n=1200,p=8",
        help="a point to predict at (repeatable)",
    )
    fit.add_argument(
        "--suggest",
        type=int,
        default=None,
        metavar="N",
        help="also list the N runs to measure next that most narrow the intervals at the "
        "--predict points",
    )
    fit.add_argument(
        "--by-cost",
        action="store_true",
        help="with --suggest: rank runs by narrowing per unit of predicted time, not per run",
    )
    fit.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    _db_arg(fit)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ppe.service.store.db import migrate

    try:  # refuse bad values before touching anything
        values = _assignments(args.retain)
        RetentionPolicy.from_env().with_values(values)
    except ValueError as exc:
        print(f"ppe serve: {exc}", file=sys.stderr)
        return 2
    retain = {RETENTION_ENV[k]: v for k, v in values.items()}
    url = database_url_from_env(args.db)
    migrate(url)  # once, before any worker starts
    _prepare_store(url)
    os.environ[ENV_DB_URL] = url
    os.environ["PPE_SKIP_MIGRATIONS"] = "1"
    os.environ["PPE_DEMO_AUTH"] = "1" if args.demo_auth else ""
    if args.trace_dir:
        os.environ["PPE_TRACE_DIRS"] = os.pathsep.join(args.trace_dir)
    if args.dask_scheduler:
        os.environ["PPE_DASK_SCHEDULER"] = args.dask_scheduler
    os.environ.update(retain)  # workers read their settings from the environment
    print(f"PPE serving on http://{args.host}:{args.port} (store: {url})", flush=True)
    with _worker_metrics(args.workers):
        uvicorn.run(
            "ppe.service.app:create_app_from_env",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log_level=args.log_level,
        )
    return 0


@contextlib.contextmanager
def _worker_metrics(workers: int) -> Iterator[None]:
    """Several workers share one fresh metrics directory, so any of them reports the totals
    (prometheus-client reads the variable when a worker imports it)."""
    from ppe.service.metrics import MULTIPROC_ENV

    if workers <= 1 or os.environ.get(MULTIPROC_ENV):  # one process, or the operator's own dir
        yield
        return
    path = tempfile.mkdtemp(prefix="ppe-metrics-")
    os.environ[MULTIPROC_ENV] = path
    try:
        yield
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(path, ignore_errors=True)


def _prepare_store(url: str) -> None:
    """Once per start, before workers fork: fail jobs a dead server left, bootstrap a token."""
    from ppe.service.replay_jobs import fail_interrupted
    from ppe.service.store.db import make_engine, make_sessionmaker, session_scope
    from ppe.service.store.tokens import bootstrap_admin

    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    fail_interrupted(sessions)
    with session_scope(sessions) as session:
        token = bootstrap_admin(session)
    engine.dispose()
    if token:
        print("First start on this store: an admin token was created (shown once).")
        print("  log in to the dashboard with it, or make others: ppe token create --role ...")
        print(f"  PPE_ADMIN_TOKEN={token}", flush=True)


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _duration(text: str) -> float:
    """`90d`, `12h`, `30m`, `3600s` or plain seconds, as seconds (> 0)."""
    text = text.strip().lower()
    unit = DURATION_UNITS.get(text[-1:], None)
    number = text[:-1] if unit else text
    try:
        seconds = float(number) * (unit or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (try 90d, 12h, 30m)") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"a duration must be positive: {text!r}")
    return seconds


@contextlib.contextmanager
def _token_store(db: str | None) -> Iterator[Session]:
    from ppe.service.store.db import make_engine, make_sessionmaker, migrate, session_scope

    url = database_url_from_env(db)
    migrate(url)
    engine = make_engine(url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            yield session
    finally:
        engine.dispose()


def _when(ts: float | None) -> str:
    import time

    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def cmd_token(args: argparse.Namespace) -> int:
    import time

    from ppe.service.store.tokens import (
        article,
        check_label,
        issue_token,
        list_tokens,
        relabel_token,
        revoke_token,
    )

    command = args.token_command
    if command in ("create", "label"):
        try:
            check_label(args.label)
        except ValueError as exc:
            print(f"ppe token {command}: {exc}", file=sys.stderr)
            return 2
    with _token_store(args.db) as session:
        if command == "create":
            expires = time.time() + args.expires_in if args.expires_in else None
            new, token = issue_token(session, args.role, args.label, expires)
            until = f", expires {_when(expires)}" if expires else ""
            print(
                f"created {article(args.role)} {args.role} token (id {new.id}{until}; "
                "store it now, only its hash is kept):",
                file=sys.stderr,
            )
            print(token)
            return 0
        if command == "list":
            return _print_tokens(list_tokens(session), as_json=args.json)
        row = (
            relabel_token(session, args.id, args.label)
            if command == "label"
            else revoke_token(session, args.id)
        )
        if row is None:
            print(f"ppe token {command}: no token {args.id}", file=sys.stderr)
            return 1
        done = f"labelled {args.label!r}" if command == "label" else "revoked"
        print(f"token {row.id} ({row.role}) {done}")
        return 0


def _print_tokens(rows: Sequence[ApiToken], *, as_json: bool) -> int:
    import json
    import time

    from ppe.service.schemas_tokens import TokenOut

    now = time.time()
    listed = [TokenOut.of(row, now) for row in rows]
    if as_json:
        print(json.dumps([t.model_dump() for t in listed], indent=2))
        return 0
    print(
        f"{'id':>5}  {'role':<8}  {'state':<7}  {'created':<16}  {'expires':<16}  "
        f"{'last used':<16}  label"
    )
    for t in listed:
        state = "revoked" if t.revoked else "active" if t.active else "expired"
        print(
            f"{t.id:>5}  {t.role:<8}  {state:<7}  {_when(t.created_at):<16}  "
            f"{_when(t.expires_at):<16}  {_when(t.last_used_at):<16}  {t.label}"
        )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from ppe.service.store.db import migrate

    url = database_url_from_env(args.db)
    migrate(url)
    print(f"schema is up to date ({url})")
    return 0


def _assignments(items: list[str]) -> dict[str, str]:
    """NAME=VALUE flags."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def cmd_retention_run(args: argparse.Namespace) -> int:
    import json

    from ppe.service.store.db import make_engine, migrate
    from ppe.service.store.retention import exclusive, run_pass

    try:
        policy = RetentionPolicy.from_env().with_values(_assignments(args.set))
    except ValueError as exc:
        print(f"ppe retention: {exc}", file=sys.stderr)
        return 2
    url = database_url_from_env(args.db)
    migrate(url)
    engine = make_engine(url)
    try:
        with exclusive(engine) as mine:
            if not mine and not args.dry_run:  # passes are safe side by side: go on
                print(
                    "ppe retention: a server is running retention on this store too",
                    file=sys.stderr,
                )
            report = run_pass(engine, policy, dry_run=args.dry_run)
    finally:
        engine.dispose()
    print(json.dumps(report.as_dict()))
    return 0


class _Refused(Exception):
    """Ends the store's transaction without committing: the batch was refused."""


def cmd_runs_import(args: argparse.Namespace) -> int:
    """Read, check (as POST /api/v1/runs does) and store a file of runs, in one transaction."""
    from ppe.empirical.formats import FormatError, parse_located

    name = f"ppe runs import: {args.file}"
    try:
        data = args.file.read_bytes()
    except OSError as exc:
        print(f"{name}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        located = parse_located(data, args.format, app=args.app, system=args.system)
    except FormatError as exc:
        for where, why in exc.problems:
            print(f"{name}: {where + ': ' if where else ''}{why}", file=sys.stderr)
        return 1
    problems = _api_checks(located)
    if not problems:
        try:
            stored, duplicates = _store_located(located, args.db)
        except _Refused as exc:
            problems = list(exc.args[0])
    if problems:
        for line in problems:
            print(f"{name}: {line}", file=sys.stderr)
        print(f"{name}: nothing stored", file=sys.stderr)
        return 1
    print(f"{args.file}: {len(located)} runs read, {stored} stored, {duplicates} already stored")
    return 0


def _api_checks(located: Sequence[Located]) -> list[str]:
    """What the API's schema says about each run read (names, bounds), where it was read."""
    from pydantic import ValidationError

    from ppe.service.errors import problems_of
    from ppe.service.schemas_runs import RunIn

    out: list[str] = []
    for loc in located:
        try:
            RunIn.of(loc.record)
        except ValidationError as exc:
            out.extend(f"{loc.where}: {p.field}: {p.reason}" for p in problems_of(exc.errors()))
    return out


def _store_located(located: Sequence[Located], db: str | None) -> tuple[int, int]:
    """Store every run in one transaction, in batches of the API's size; (stored, duplicates).

    Raises _Refused (nothing stored) with the problems the store's checks found."""
    from ppe.empirical.runs import MAX_BATCH
    from ppe.service.store.runs import StoredRuns, store_runs

    stored = duplicates = 0
    with _token_store(db) as session:
        for start in range(0, len(located), MAX_BATCH):
            chunk = located[start : start + MAX_BATCH]
            result = store_runs(session, [loc.record for loc in chunk])
            if not isinstance(result, StoredRuns):
                raise _Refused([_where_in(chunk, p) for p in result])
            stored += result.stored
            duplicates += result.duplicates
    return stored, duplicates


def _where_in(chunk: Sequence[Located], p: RunProblem) -> str:
    where = chunk[p.index].where if p.index is not None else "the file"
    return f"{where}: {p.field}: {p.reason}"


def cmd_runs_list(args: argparse.Namespace) -> int:
    import json

    from ppe.service.api.runs import run_out
    from ppe.service.store.runs import RunFilter, query_runs

    if not 1 <= args.limit <= 1000:
        print("ppe runs list: --limit is 1 to 1000", file=sys.stderr)
        return 2
    with _token_store(args.db) as session:
        rows = query_runs(session, RunFilter(app=args.app, kernel=args.kernel), args.limit)
        listed = [run_out(r) for r in rows]
    if args.json:
        print(json.dumps([r.model_dump() for r in listed], indent=2))
        return 0
    _print_runs(rows)
    return 0


def _print_runs(rows: Sequence[Run]) -> None:
    import statistics

    print(
        f"{'id':>6}  {'app':<12}  {'kernel':<16}  {'params':<24}  {'system':<12}  "
        f"{'metric':<8}  {'reps':>4}  {'mean':>10}  {'status':<9}  {'schedule':>8}  stored"
    )
    for r in rows:
        params = " ".join(f"{k}={v:g}" for k, v in r.params.items())
        print(
            f"{r.id:>6}  {r.app:<12}  {r.kernel:<16}  {params:<24}  {r.system or '-':<12}  "
            f"{r.metric:<8}  {len(r.values):>4}  {statistics.fmean(r.values):>10.4g}  "
            f"{r.status:<9}  {r.schedule_id or '-':>8}  {_when(r.created_at)}"
        )


class _BadInput(Exception):
    """A `ppe model fit` input it cannot use: the message, and exit status 2."""


def cmd_model_fit(args: argparse.Namespace) -> int:
    """Fit, predict at every --predict point, and print a table or the report's JSON."""
    import json

    from ppe.empirical.errors import EmpiricalError

    try:
        points = [_point(text) for text in args.predict]
        fit = _fit_file(args) if args.file is not None else _fit_store(args)
        for text, point in zip(args.predict, points, strict=True):
            try:
                fit.predict(point)
            except EmpiricalError as exc:
                raise _BadInput(f"--predict {text}: {exc.message}") from None
        report = fit.report(points)
        if args.suggest is not None:
            if args.suggest < 1:
                raise _BadInput(f"--suggest {args.suggest}: the budget is at least 1 run")
            if not points:
                raise _BadInput("--suggest plans for the sizes you care about: give --predict")
            report["suggested"] = fit.suggest(args.suggest, points, args.by_cost)
            report["suggested_per"] = "time" if args.by_cost else "run"
    except _BadInput as exc:
        print(f"ppe model fit: {exc}", file=sys.stderr)
        return 2
    except EmpiricalError as exc:
        option = f" (--{exc.name})" if exc.kind in ("ambiguous", "no_runs") else ""
        print(f"ppe model fit: {exc.message}{option}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_fit(report)
    return 0


def _point(text: str) -> dict[str, float]:
    """`n=1200,p=8` as a point: each name once, finite numbers."""
    import math

    point: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name:
            raise _BadInput(f"--predict {text}: expected NAME=VALUE[,NAME=VALUE...]")
        if name in point:
            raise _BadInput(f"--predict {text}: {name} is given twice")
        try:
            number = float(value)
        except ValueError:
            raise _BadInput(f"--predict {text}: {value!r} is not a number") from None
        if not math.isfinite(number):
            raise _BadInput(f"--predict {text}: {name} is {value}: a point is finite")
        point[name] = number
    return point


def _check_type(kind: str) -> None:
    from ppe.empirical.report import FIT_TYPES

    if kind not in FIT_TYPES:
        raise _BadInput(f"unknown --type {kind!r}: one of {', '.join(FIT_TYPES)}")


def _fit_file(args: argparse.Namespace) -> Fit:
    from ppe.empirical.formats import FormatError, detect_format, parse
    from ppe.empirical.report import fit_series, select_series

    if args.db is not None:
        raise _BadInput("--db reads the store: give --app without a FILE")
    _check_type(args.type)
    try:
        data = args.file.read_bytes()
    except OSError as exc:
        raise _BadInput(f"{args.file}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
        csv = detect_format(text) == "csv"
        # Extra-P's formats name no application: the file's runs are --app's, or the file's.
        app = None if csv else (args.app or args.file.stem or "runs")
        records = parse(text, app=app)
    except UnicodeDecodeError:
        raise _BadInput(f"{args.file}: not UTF-8 text") from None
    except FormatError as exc:
        where, why = exc.problems[0]
        raise _BadInput(f"{args.file}: {where + ': ' if where else ''}{why}") from None
    key, series = select_series(
        records,
        app=args.app if csv else None,
        kernel=args.kernel,
        metric=args.metric,
        system=args.system,
    )
    return fit_series(key, series, args.type, args.x)


def _fit_store(args: argparse.Namespace) -> Fit:
    from ppe.service.empirical import FitSpec, fit_stored

    if args.app is None:
        raise _BadInput("give a FILE of runs, or --app for an application's stored runs")
    _check_type(args.type)
    spec = FitSpec(args.app, args.kernel, args.metric, args.system, args.type, args.x)
    with _token_store(args.db) as session:
        return fit_stored(session, spec)


def _print_fit(report: dict[str, Any]) -> None:
    """The report as a table people read (the same numbers --json prints)."""
    where = f" on {report['system']}" if report["system"] else ""
    print(f"{report['app']}/{report['kernel']} ({report['metric']}{where})")
    fixed = ", ".join(f"{k}={v:g}" for k, v in report["fixed"].items())
    ranges = ", ".join(f"{p} {lo:g}..{hi:g}" for p, (lo, hi) in report["ranges"].items())
    print(
        f"  runs       {report['n_points']} points, {report['n_obs']} runs; {ranges}"
        + (f"; held fixed: {fixed}" if fixed else "")
    )
    asked = report["requested_type"]
    kind = report["type"] + (f" (from {asked})" if asked != report["type"] else "")
    print(f"  model      {report['model']}")
    print(f"  type       {kind}")
    cv = report["cv_error"]
    print(
        "  cv error   "
        + (
            "- (no point can be left out: each one fixes a coefficient)"
            if cv is None
            else f"{cv:.2%} (mean leave-one-point-out error, relative to the measured mean)"
        )
    )
    print(
        f"  noise      {report['noise']}, sigma {report['sigma']:.4g}, {report['dof']} dof; "
        f"residual norm {report['residual_norm']:.4g}"
    )
    print(f"  {'term':<28}  {'coefficient':>14}")
    for c in report["coefficients"]:
        print(f"  {c['term']:<28}  {c['value']:>14.6g}")
    spread = report["spread"]
    if spread["used"]:
        cov = ", ".join(f"{float(c):.0%}: {v:.0%}" for c, v in spread["coverage"].items())
        print(f"  spread     std of a run = {spread['model']} (calibrated)")
        print(f"  coverage   {cov} of left-out runs (nested leave-one-point-out)")
    else:
        print(f"  spread     - ({spread['reason']}): a run's spread is the mean model's")
    if not report["predictions"]:
        return
    print(f"  {'point':<28}  {'mean':>12}  {'95 % interval of a run':<27}")
    for p in report["predictions"]:
        point = ", ".join(f"{k}={v:g}" for k, v in p["point"].items())
        band = p["interval"]
        lo_hi = "-" if band is None else f"[{band[0]:.4g}, {band[1]:.4g}]"
        note = "  extrapolated" if p["extrapolated"] else ""
        print(f"  {point:<28}  {p['mean']:>12.4g}  {lo_hi:<27}{note}")
        if "spread" in p:
            slo, shi = p["spread"]["interval"]
            print(f"  {'  calibrated spread':<28}  {'':>12}  [{slo:.4g}, {shi:.4g}]")
    if "suggested" in report:
        per = "unit of predicted time" if report["suggested_per"] == "time" else "run"
        print(f"  measure next (most narrowing the intervals above, per {per}):")
        for i, point in enumerate(report["suggested"], 1):
            print(f"  {i:>4}. " + ", ".join(f"{k}={v:g}" for k, v in point.items()))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        module = importlib.import_module(DELEGATED[argv[0]][0])
        return int(module.main(argv[1:]) or 0)
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return cmd_serve(args)
    if args.command == "token":
        return cmd_token(args)
    if args.command == "migrate":
        return cmd_migrate(args)
    if args.command == "retention":
        return cmd_retention_run(args)
    if args.command == "runs":
        return cmd_runs_import(args) if args.runs_command == "import" else cmd_runs_list(args)
    if args.command == "model":
        return cmd_model_fit(args)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
