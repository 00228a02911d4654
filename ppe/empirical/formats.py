"""Reading runs from the files people already have: Extra-P's inputs and a plain CSV.

Pure parsers, text (or bytes) in, :class:`~ppe.empirical.runs.RunRecord` out; every error
says where it is (a line, or a path in a JSON document). The formats:

* ``extrap``: Extra-P's text input (``PARAMETER``, ``POINTS``, ``REGION``, ``METRIC``, ``DATA``;
  docs/file-formats.md of Extra-P). Each ``DATA`` line is one point's repetitions, in the order
  of the ``POINTS``; ``REGION`` and ``METRIC`` start a new series of ``DATA`` lines.
* ``extrap-json``: Extra-P's JSON (``parameters`` and ``measurements`` by callpath and metric),
  and its older form with ids (``callpaths``, ``coordinates``, ``metrics``, ``measurements``).
* ``jsonl``: Extra-P's JSON lines, one ``{"params": {...}, "value": x | [x...], "callpath"?,
  "metric"?}`` per line; lines of the same point, callpath and metric are repetitions.
* ``csv``: a header ``app,kernel,<param>...,<metric>`` then one row per repetition; rows of the
  same application, kernel and parameter values are one run.

Extra-P's files name no application: the caller gives it (and, for every format, the system).
A region is a run's kernel (``total`` when a file names none), and the metric is ``time``
unless the file says otherwise.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ppe.empirical.runs import (
    DEFAULT_KERNEL,
    DEFAULT_METRIC,
    RunRecord,
    check_record,
    check_value,
)

FORMATS = ("extrap", "extrap-json", "jsonl", "csv")
#: Extra-P's text sections, in the order a file declares them.
SECTIONS = ("PARAMETER", "POINTS", "REGION", "METRIC", "DATA")
#: Problems listed at most in one error (the first ones, in file order).
MAX_LISTED = 20
NUMBER = (int, float)


class FormatError(ValueError):
    """A file that cannot be read as runs: each problem with where it is."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = list(problems)  # (where, message)
        super().__init__("\n".join(f"{where}: {why}" if where else why for where, why in problems))

    @classmethod
    def at(cls, line: int | None, message: str) -> FormatError:
        return cls([(f"line {line}" if line is not None else "", message)])

    @property
    def line(self) -> int | None:
        """The line of the first problem, when it is in a line-based format."""
        where = self.problems[0][0] if self.problems else ""
        match = re.fullmatch(r"line (\d+)", where)
        return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Located:
    """A run and where it was read: ``line 12``, or a path in a JSON document."""

    record: RunRecord
    where: str


def parse(
    data: str | bytes, fmt: str = "auto", *, app: str | None = None, system: str | None = None
) -> list[RunRecord]:
    """The runs in ``data``; raises :class:`FormatError` for anything it cannot take."""
    return [loc.record for loc in parse_located(data, fmt, app=app, system=system)]


def parse_located(
    data: str | bytes, fmt: str = "auto", *, app: str | None = None, system: str | None = None
) -> list[Located]:
    """:func:`parse`, keeping where each run was read (for messages about a run later)."""
    text = _text(data)
    if fmt == "auto":
        fmt = detect_format(text)
    readers: dict[str, Callable[[str, _Context], list[Located]]] = {
        "extrap": _read_extrap_text,
        "extrap-json": _read_extrap_json,
        "jsonl": _read_jsonl,
        "csv": _read_csv,
    }
    if fmt not in readers:
        raise FormatError.at(None, f"unknown format {fmt!r}: one of auto, {', '.join(FORMATS)}")
    located = readers[fmt](text, _Context(app, system, fmt))
    if not located:
        raise FormatError.at(None, "the file holds no measurements")
    problems = [
        (loc.where, f"{name}: {why}") for loc in located for name, why in check_record(loc.record)
    ]
    if problems:
        raise FormatError(problems[:MAX_LISTED])
    return located


def detect_format(text: str) -> str:
    """The format of ``text`` from its first meaningful line."""
    first = next(
        (s for s in (ln.strip() for ln in text.splitlines()) if s and not s.startswith("#")), ""
    )
    if first and first.split(None, 1)[0] in SECTIONS:
        return "extrap"
    if first.startswith(("{", "[")):
        try:
            json.loads(text)
        except json.JSONDecodeError:
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            return "jsonl" if all(ln.startswith("{") for ln in lines) else "extrap-json"
        return "extrap-json"
    return "csv"


def _text(data: str | bytes) -> str:
    """UTF-8 text, without a byte-order mark."""
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FormatError.at(line, f"not UTF-8 text (byte {exc.start})") from None


@dataclass(frozen=True)
class _Context:
    app: str | None
    system: str | None
    fmt: str

    def application(self) -> str:
        if self.app is None:
            raise FormatError.at(
                None, f"{self.fmt} files name no application: give one (ppe runs import --app)"
            )
        return self.app

    def run(
        self, kernel: str, metric: str, params: Mapping[str, float], values: Iterable[float]
    ) -> RunRecord:
        return RunRecord(
            app=self.application(),
            values=tuple(values),
            kernel=kernel,
            params=dict(params),
            system=self.system,
            metric=metric,
        )


def _number(token: str, line: int | None, what: str) -> float:
    try:
        return float(token)
    except ValueError:
        raise FormatError.at(line, f"{what}: {token[:40]!r} is not a number") from None


def _checked(value: float, line: int, what: str) -> float:
    """One repetition of a format with one per line: refused with its own line."""
    why = check_value(value)
    if why:
        raise FormatError.at(line, f"{what} {why}")
    return value


# ---------------------------------------------------------------- Extra-P text


class _TextState:
    """Where an Extra-P text file is: its parameters, points, and the current series."""

    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx
        self.params: list[str] = []
        self.points: list[tuple[float, ...]] = []
        self.region = DEFAULT_KERNEL
        self.metric = DEFAULT_METRIC
        self.series_line = 0  # the REGION or METRIC line that started the current series
        self.count = 0  # DATA lines in the current series
        self.out: list[Located] = []

    def end_series(self) -> None:
        if 0 < self.count < len(self.points):
            raise FormatError.at(
                self.series_line,
                f"region {self.region!r}, metric {self.metric!r} has {self.count} DATA "
                f"lines for {len(self.points)} POINTS (one DATA line per point)",
            )
        self.count = 0

    def parameter(self, rest: str, line: int) -> None:
        if self.points:
            raise FormatError.at(line, "PARAMETER after POINTS: declare every parameter first")
        names = rest.split()
        if not names:
            raise FormatError.at(line, "PARAMETER names no parameter")
        for name in names:
            if name in self.params:
                raise FormatError.at(line, f"parameter {name!r} declared twice")
            self.params.append(name)

    def points_line(self, rest: str, line: int) -> None:
        if not self.params:
            raise FormatError.at(line, "POINTS before any PARAMETER")
        if self.out:
            raise FormatError.at(line, "POINTS after DATA: list every point first")
        found = _points(rest, len(self.params), line)
        if not found:
            raise FormatError.at(line, "POINTS lists no point")
        self.points.extend(found)

    def series(self, keyword: str, rest: str, line: int) -> None:
        self.end_series()
        name = rest.strip()
        if not name:
            raise FormatError.at(line, f"{keyword} without a name")
        if keyword == "REGION":
            self.region = name
        else:
            self.metric = name
        self.series_line = line

    def data(self, rest: str, line: int) -> None:
        if not self.points:
            raise FormatError.at(line, "DATA before POINTS")
        if self.count >= len(self.points):
            raise FormatError.at(
                line,
                f"DATA line {self.count + 1} of region {self.region!r}, metric "
                f"{self.metric!r}, but there are {len(self.points)} POINTS",
            )
        values = [_number(tok, line, "DATA") for tok in rest.split()]
        if not values:
            raise FormatError.at(line, "DATA without values")
        params = dict(zip(self.params, self.points[self.count], strict=True))
        record = self.ctx.run(self.region, self.metric, params, values)
        self.out.append(Located(record, f"line {line}"))
        self.count += 1


_POINT_TOKEN = re.compile(r"[()]|[^\s()]+")


def _points(text: str, dims: int, line: int) -> list[tuple[float, ...]]:
    """``(4) (8)``, ``4 8`` (one parameter), ``( 2 16 ) ( 4 32 )`` or ``((2) (16)) ...``."""
    points: list[tuple[float, ...]] = []
    current: list[float] = []
    depth = 0
    for token in _POINT_TOKEN.findall(text):
        if token == "(":
            depth += 1
            if depth > 2:
                raise FormatError.at(line, "POINTS: parentheses nested too deep")
        elif token == ")":
            if depth == 0:
                raise FormatError.at(line, "POINTS: ')' without '('")
            depth -= 1
            if depth == 0:
                points.append(_point(current, dims, line))
                current = []
        elif depth == 0:
            if dims != 1:
                raise FormatError.at(
                    line, f"POINTS: with {dims} parameters, write each point as ( x y ... )"
                )
            points.append((_number(token, line, "POINTS"),))
        else:
            current.append(_number(token, line, "POINTS"))
    if depth:
        raise FormatError.at(line, "POINTS: '(' without ')'")
    return points


def _point(coords: list[float], dims: int, line: int) -> tuple[float, ...]:
    if len(coords) != dims:
        raise FormatError.at(
            line,
            f"POINTS: a point has {len(coords)} coordinates, there are {dims} parameters",
        )
    return tuple(coords)


def _read_extrap_text(text: str, ctx: _Context) -> list[Located]:
    ctx.application()  # before any line: the missing application is the first thing to say
    state = _TextState(ctx)
    for line, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        keyword, *more = stripped.split(None, 1)
        rest = more[0] if more else ""
        if keyword == "PARAMETER":
            state.parameter(rest, line)
        elif keyword == "POINTS":
            state.points_line(rest, line)
        elif keyword in ("REGION", "METRIC"):
            state.series(keyword, rest, line)
        elif keyword == "DATA":
            state.data(rest, line)
        else:
            raise FormatError.at(
                line, f"unknown section {keyword[:40]!r}: expected one of {', '.join(SECTIONS)}"
            )
    state.end_series()
    return state.out


# ---------------------------------------------------------------- Extra-P JSON


def _load_json(text: str, line_offset: int = 0) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError.at(
            exc.lineno + line_offset, f"malformed JSON: {exc.msg} (column {exc.colno})"
        ) from None
    except RecursionError:
        raise FormatError.at(None, "JSON nested too deep") from None


def _expect(value: Any, kind: type | tuple[type, ...], where: str, what: str) -> Any:
    """``value`` when it is a ``kind`` (never a bool for numbers), else a FormatError."""
    if not isinstance(value, kind) or isinstance(value, bool):
        raise FormatError([(where, f"expected {what}")])
    return value


def _numbers(value: Any, where: str, label: str) -> list[float]:
    """A number or a list of numbers, as floats."""
    items = value if isinstance(value, list) else [value]
    out = []
    for i, v in enumerate(items):
        if isinstance(v, bool) or not isinstance(v, NUMBER):
            raise FormatError([(where, f"{label}[{i}]: expected a number, got {v!r:.40}")])
        out.append(float(v))
    return out


def _read_extrap_json(text: str, ctx: _Context) -> list[Located]:
    doc = _expect(_load_json(text), dict, "document", "a JSON object")
    ctx.application()
    if "callpaths" in doc:
        return _read_legacy_json(doc, ctx)
    params = _expect(doc.get("parameters"), list, "parameters", "a list of parameter names")
    for i, name in enumerate(params):
        _expect(name, str, f"parameters[{i}]", "a parameter name")
    measurements = _expect(
        doc.get("measurements"), dict, "measurements", "an object {callpath: {metric: [...]}}"
    )
    out: list[Located] = []
    for callpath, metrics in measurements.items():
        where_c = f"measurements[{callpath!r}]"
        for metric, items in _expect(metrics, dict, where_c, "an object {metric: [...]}").items():
            where_m = f"{where_c}[{metric!r}]"
            for i, item in enumerate(_expect(items, list, where_m, "a list of points")):
                where = f"{where_m}[{i}]"
                _expect(item, dict, where, 'an object {"point": [...], "values": [...]}')
                point = _expect(item.get("point"), list, f"{where}.point", "a list of numbers")
                if len(point) != len(params):
                    why = f"{len(point)} coordinates for {len(params)} parameters"
                    raise FormatError([(f"{where}.point", why)])
                coords = _numbers(point, where, "point")
                values = _numbers(
                    _expect(item.get("values"), list, f"{where}.values", "a list of numbers"),
                    where,
                    "values",
                )
                record = ctx.run(callpath, metric, dict(zip(params, coords, strict=True)), values)
                out.append(Located(record, where))
    return out


def _by_id(doc: dict[str, Any], key: str) -> dict[Any, dict[str, Any]]:
    rows = _expect(doc.get(key), list, key, "a list of objects with ids")
    out: dict[Any, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        _expect(row, dict, f"{key}[{i}]", "an object with an id")
        if "id" not in row:
            raise FormatError([(f"{key}[{i}]", "no id")])
        out[row["id"]] = row
    return out


def _read_legacy_json(doc: dict[str, Any], ctx: _Context) -> list[Located]:
    """Extra-P's older JSON: parameters, callpaths, metrics and coordinates named by id."""
    params = _by_id(doc, "parameters")
    callpaths = _by_id(doc, "callpaths")
    metrics = _by_id(doc, "metrics")
    coordinates = _by_id(doc, "coordinates")
    grouped: dict[tuple[Any, Any, Any], tuple[str, list[float]]] = {}
    for i, m in enumerate(_expect(doc.get("measurements"), list, "measurements", "a list")):
        where = f"measurements[{i}]"
        _expect(m, dict, where, "an object")
        ids = []
        for key, table in (
            ("coordinate_id", coordinates),
            ("callpath_id", callpaths),
            ("metric_id", metrics),
        ):
            if m.get(key) not in table:
                raise FormatError([(f"{where}.{key}", f"no such id: {m.get(key)!r}")])
            ids.append(m[key])
        value = float(_expect(m.get("value"), NUMBER, f"{where}.value", "a number"))
        grouped.setdefault((ids[0], ids[1], ids[2]), (where, []))[1].append(value)
    out = []
    for (coord_id, path_id, metric_id), (where, values) in grouped.items():
        point: dict[str, float] = {}
        where_c = f"coordinates[id={coord_id!r}]"
        pairs = _expect(
            coordinates[coord_id].get("parameter_value_pairs"),
            list,
            f"{where_c}.parameter_value_pairs",
            "a list",
        )
        for pair in pairs:
            pid = pair.get("parameter_id") if isinstance(pair, dict) else None
            if pid not in params:
                raise FormatError([(where_c, f"no such parameter id: {pid!r}")])
            name = _expect(params[pid].get("name"), str, f"parameters[id={pid!r}]", "a name")
            point[name] = float(
                _expect(pair.get("parameter_value"), NUMBER, where_c, "numeric values")
            )
        callpath = _expect(callpaths[path_id].get("name"), str, "callpaths", "names")
        metric = _expect(metrics[metric_id].get("name"), str, "metrics", "names")
        out.append(Located(ctx.run(callpath, metric, point, values), where))
    return out


# ---------------------------------------------------------------- JSON lines


def _read_jsonl(text: str, ctx: _Context) -> list[Located]:
    ctx.application()
    names: tuple[str, ...] | None = None
    grouped: dict[tuple[str, str, tuple[float, ...]], tuple[int, list[float]]] = {}
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        obj = _load_json(raw, line_offset=line - 1)
        where = f"line {line}"
        _expect(obj, dict, where, 'an object {"params": {...}, "value": ...}')
        params = _expect(obj.get("params"), dict, where, '"params": an object of numbers')
        if names is None:
            names = tuple(params)
        elif set(params) != set(names):
            raise FormatError.at(
                line, f"params {sorted(params)} differ from the first line's {sorted(names)}"
            )
        coords = tuple(
            float(_expect(params[n], NUMBER, where, f'"params": {n!r} a number')) for n in names
        )
        if "value" not in obj:
            raise FormatError.at(line, 'no "value"')
        values = [_checked(v, line, "value") for v in _numbers(obj["value"], where, "value")]
        callpath = _expect(obj.get("callpath", DEFAULT_KERNEL), str, where, '"callpath": text')
        metric = _expect(obj.get("metric", DEFAULT_METRIC), str, where, '"metric": text')
        grouped.setdefault((callpath, metric, coords), (line, []))[1].extend(values)
    out = []
    for (callpath, metric, coords), (line, values) in grouped.items():
        params_of = dict(zip(names or (), coords, strict=True))
        out.append(Located(ctx.run(callpath, metric, params_of, values), f"line {line}"))
    return out


# ---------------------------------------------------------------- CSV


def _read_csv(text: str, ctx: _Context) -> list[Located]:
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    grouped: dict[tuple[str, str, tuple[float, ...]], tuple[int, list[float]]] = {}
    for row in reader:
        line = reader.line_num
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in row]
        if header is None:
            header = _csv_header(cells, line)
            continue
        if len(cells) != len(header):
            raise FormatError.at(
                line, f"{len(cells)} columns, the header has {len(header)} ({','.join(header)})"
            )
        app, kernel = cells[0], cells[1] or DEFAULT_KERNEL
        if not app:
            raise FormatError.at(line, "app is empty")
        if ctx.app is not None and app != ctx.app:
            raise FormatError.at(line, f"app {app!r} is not the {ctx.app!r} asked for")
        coords = tuple(_number(c, line, n) for n, c in zip(header[2:-1], cells[2:-1], strict=True))
        value = _checked(_number(cells[-1], line, header[-1]), line, header[-1])
        grouped.setdefault((app, kernel, coords), (line, []))[1].append(value)
    if header is None:
        raise FormatError.at(None, "no header: the first line is app,kernel,<param>...,<metric>")
    out = []
    for (app, kernel, coords), (line, values) in grouped.items():
        record = RunRecord(
            app=app,
            values=tuple(values),
            kernel=kernel,
            params=dict(zip(header[2:-1], coords, strict=True)),
            system=ctx.system,
            metric=header[-1],
        )
        out.append(Located(record, f"line {line}"))
    return out


def _csv_header(cells: list[str], line: int) -> list[str]:
    if len(cells) < 3 or [c.lower() for c in cells[:2]] != ["app", "kernel"]:
        raise FormatError.at(
            line, "the header is app,kernel,<param>...,<metric> (e.g. app,kernel,n,p,time)"
        )
    names = cells[2:]
    if any(not n for n in names):
        raise FormatError.at(line, "a column of the header has no name")
    if len(set(names)) != len(names):
        raise FormatError.at(line, "two columns of the header have the same name")
    return ["app", "kernel", *names]
