"""SimGrid platform files as what-if nodesets and linksets (docs/whatif.md, "SimGrid platforms").

People who simulate with SimGrid already describe their machines in its platform XML (version
4.1: ``<zone>``, ``<host>``, ``<link>``, ``<route>``, ``<cluster>``, ``<zoneRoute>``; the older
``<AS>`` / ``<ASroute>`` names too). This module reads such a file and gives the ``[[nodeset]]``
and ``[[linkset]]`` tables a spec would have written by hand, as plain SI numbers, so
:mod:`ppe.whatif.spec` builds and checks them exactly like its own:

* hosts with the same speed (x cores) and availability -> one nodeset (a cluster -> its own);
* the routes between the hosts of two nodesets -> an ``updown`` linkset (within one nodeset, an
  ``across`` linkset): a route's bandwidth is its slowest link's, its latency the sum of its
  links'; over several routes between the same nodesets, the slowest bandwidth and the largest
  latency (the chain's strips may land on any of them, and the slowest pair paces the chain);
* a cluster's route crosses a host's private link, the backbone and the other private link;
  a ``zoneRoute`` between two zones crosses, in a cluster, the private link and backbone up to
  the cluster's router, the route's links, and the same down in the other cluster;
* an ``availability_file`` (``speed_file``) in SimGrid's trace format becomes a normal load
  with the mean and standard deviation of its values (PPE's trace readers take GWA-T-12 or
  ``timestamp,value`` CSV, not this format); a note says so. So does an inline ``<trace>``
  that a ``<trace_connect kind="SPEED">`` attaches to a host.

Pure: files are read through the caller's ``read`` (a spec's resolver). XML is read with the
stdlib's expat (positions for every element; entity declarations refused, as defusedxml does).
"""

from __future__ import annotations

import math
import posixpath
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from xml.parsers import expat

__all__ = ["Platform", "PlatformError", "parse_platform", "parse_value", "read_platform"]


class PlatformError(ValueError):
    """Every problem found in a platform file, as ``(line, column, message)``."""

    def __init__(self, problems: Sequence[tuple[int | None, int | None, str]], source: str) -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__("\n".join(self.render(p) for p in self.problems))

    def render(self, problem: tuple[int | None, int | None, str]) -> str:
        line, column, message = problem
        where = self.source if line is None else f"{self.source}:{line}:{column}"
        return f"{where}: {message}"


# ----------------------------------------------------------------------------- units

_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_IEC = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_LONG = {"": "", "k": "kilo", "M": "mega", "G": "giga", "T": "tera", "P": "peta", "E": "exa"}


def _units() -> dict[str, dict[str, float]]:
    """SimGrid's unit suffixes (its documentation's tables): dimension -> suffix -> factor."""
    speed: dict[str, float] = {}
    for p, f in _SI.items():
        speed[f"{p}f"] = f
        speed[f"{_LONG.get(p, p)}flops"] = f
    rate: dict[str, float] = {}
    for p, f in {**_SI, **_IEC}.items():
        rate[f"{p}Bps"] = f
        rate[f"{p}bps"] = f / 8.0
    time = {
        "w": 7 * 86400.0,
        "d": 86400.0,
        "h": 3600.0,
        "m": 60.0,
        "s": 1.0,
        "ms": 1e-3,
        "us": 1e-6,
        "ns": 1e-9,
        "ps": 1e-12,
    }
    return {"speed": speed, "bandwidth": rate, "latency": time}


UNITS = _units()
_VALUE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_value(text: str, dimension: str) -> float:
    """``"1Gf"`` -> 1e9 (``dimension``: speed, bandwidth or latency). A bare number is in the
    SI unit, as SimGrid reads it; an unknown suffix is a ValueError naming the accepted ones."""
    m = _VALUE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a number with a unit (e.g. {_example(dimension)})")
    number, unit = float(m.group(1)), m.group(2)
    if unit == "":
        return number
    table = UNITS[dimension]
    if unit not in table:
        near = [u for u in table if u.lower() == unit.lower()]
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ValueError(
            f"unknown {dimension} unit {unit!r} in {text!r}{hint} "
            f"(SimGrid's: {', '.join(_short(table))})"
        )
    return number * table[unit]


def _short(table: Mapping[str, float]) -> list[str]:
    return [u for u in table if len(u) <= 5]


def _example(dimension: str) -> str:
    return {"speed": '"1Gf"', "bandwidth": '"125MBps"', "latency": '"50us"'}[dimension]


# ------------------------------------------------------------------------------- XML


@dataclass
class Element:
    """An XML element with where it starts (expat's line and 1-based column)."""

    tag: str
    attrs: dict[str, str]
    line: int
    column: int
    children: list[Element] = field(default_factory=list)
    text: str = ""


def _parse_xml(text: str, source: str) -> Element:
    parser = expat.ParserCreate()
    root: list[Element] = []
    stack: list[Element] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        el = Element(tag, attrs, parser.CurrentLineNumber, parser.CurrentColumnNumber + 1)
        (stack[-1].children if stack else root).append(el)
        stack.append(el)

    def end(_tag: str) -> None:
        stack.pop()

    def chars(data: str) -> None:
        if stack:
            stack[-1].text += data

    def refuse_entity(*_args: object) -> None:
        raise ValueError("entity declarations are not accepted")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.EntityDeclHandler = refuse_entity
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    try:
        parser.Parse(text, True)
    except expat.ExpatError as exc:
        reason = expat.ErrorString(exc.code) if exc.code else str(exc)
        raise PlatformError(
            [(exc.lineno, exc.offset + 1, f"not well-formed XML: {reason}")], source
        ) from None
    except ValueError as exc:
        raise PlatformError(
            [(parser.CurrentLineNumber, parser.CurrentColumnNumber + 1, str(exc))], source
        ) from None
    return root[0]


# ---------------------------------------------------------------------------- platform


@dataclass(frozen=True)
class Route:
    """A route's links, reduced: its bottleneck bandwidth and its total latency."""

    bandwidth: float
    latency: float

    def then(self, other: Route) -> Route:
        return Route(min(self.bandwidth, other.bandwidth), self.latency + other.latency)


_EMPTY = Route(math.inf, 0.0)


@dataclass(frozen=True)
class Platform:
    """What a platform file gives a spec: nodeset and linkset tables (TOML-shaped, SI), and
    notes on what was approximated or ignored."""

    nodesets: tuple[dict[str, Any], ...]
    linksets: tuple[dict[str, Any], ...]
    notes: tuple[str, ...] = ()


@dataclass
class _Group:
    key: tuple[Any, ...]
    cluster: str | None
    hosts: list[str]
    speed: float
    load: dict[str, Any]
    name: str = ""


ZONE_TAGS = {"zone", "AS"}
ZONE_ROUTE_TAGS = {"zoneRoute", "ASroute"}
#: Tags read for their children only or that carry nothing the spec uses.
QUIET_TAGS = {"prop", "config", "platform", "link_ctn"}
_NAME_OK = re.compile(r"[^A-Za-z0-9_.-]")


class _Reader:
    def __init__(self, source: str, read: Callable[[str], str] | None) -> None:
        self.source = source
        self.read = read
        self.problems: list[tuple[int | None, int | None, str]] = []
        self.notes: list[str] = []
        self.links: dict[str, Route] = {}
        self.host_group: dict[str, _Group] = {}  # after group_hosts
        self.host_zones: dict[str, tuple[str, ...]] = {}
        self.groups: dict[tuple[Any, ...], _Group] = {}
        self.clusters: dict[str, tuple[Route, Route]] = {}  # id -> (host to router, within)
        self.routes: list[tuple[Element, str]] = []  # (element, "route" or "zone")
        self.pairs: dict[tuple[str, str], Route] = {}
        self.ignored: dict[str, int] = {}
        self.routers: set[str] = set()
        self.pending: dict[str, tuple[float, dict[str, Any], str | None]] = {}
        self.traces: dict[str, Element] = {}
        self.connects: list[Element] = []

    def problem(self, el: Element, message: str) -> None:
        self.problems.append((el.line, el.column, message))

    def value(self, el: Element, attr: str, dimension: str, required: bool = True) -> float | None:
        raw = el.attrs.get(attr)
        if raw is None:
            if required:
                self.problem(el, f"<{el.tag} id={el.attrs.get('id', '?')!r}> has no {attr!r}")
            return None
        try:
            value = parse_value(raw.split(",")[0], dimension)  # a pstate list: the first
        except ValueError as exc:
            self.problem(el, f"{el.tag} {el.attrs.get('id', '?')!r}: {attr}: {exc}")
            return None
        if value <= 0 and dimension != "latency":
            self.problem(el, f"{el.tag} {el.attrs.get('id', '?')!r}: {attr} must be > 0")
            return None
        return value

    # -- walking

    def walk(self, el: Element, zones: tuple[str, ...]) -> None:
        for child in el.children:
            tag = child.tag
            if tag in ZONE_TAGS:
                self.walk(child, (*zones, child.attrs.get("id", "?")))
            elif tag == "host":
                self.host(child, zones, None)
            elif tag == "link":
                self.link(child)
            elif tag == "trace":
                self.traces[child.attrs.get("id", "")] = child
            elif tag == "trace_connect":
                self.connects.append(child)
            elif tag == "router":
                self.routers.add(child.attrs.get("id", ""))
            elif tag == "cluster":
                self.cluster(child, zones)
            elif tag == "route":
                self.routes.append((child, "route"))
            elif tag in ZONE_ROUTE_TAGS:
                self.routes.append((child, "zone"))
            elif tag not in QUIET_TAGS:
                self.ignored[tag] = self.ignored.get(tag, 0) + 1

    def link(self, el: Element) -> None:
        name = el.attrs.get("id")
        if name is None:
            self.problem(el, "<link> has no 'id'")
            return
        bw = self.value(el, "bandwidth", "bandwidth")
        lat = self.value(el, "latency", "latency", required=False)
        if bw is None:
            return
        path = Route(bw, lat or 0.0)
        self.links[name] = path
        if el.attrs.get("sharing_policy") == "SPLITDUPLEX":  # SimGrid names both directions
            self.links[f"{name}_UP"] = path
            self.links[f"{name}_DOWN"] = path

    def host(self, el: Element, zones: tuple[str, ...], cluster: str | None) -> None:
        name = el.attrs.get("id")
        if name is None:
            self.problem(el, "<host> has no 'id'")
            return
        speed = self.value(el, "speed", "speed")
        cores = self.cores(el)
        load = self.availability(el)
        if speed is None or cores is None or load is None:
            return
        self.add_host(name, speed * cores, load, zones, cluster)

    def add_host(
        self,
        name: str,
        speed: float,
        load: dict[str, Any],
        zones: tuple[str, ...],
        cluster: str | None,
    ) -> None:
        self.pending[name] = (speed, load, cluster)
        self.host_zones[name] = zones

    def group_hosts(self) -> None:
        """Hosts with the same cluster, speed and load make one group (after the inline
        traces are connected to them)."""
        for name, (speed, load, cluster) in self.pending.items():
            key = (cluster, speed, tuple(sorted(load.items())))
            group = self.groups.setdefault(key, _Group(key, cluster, [], speed, load))
            group.hosts.append(name)
            self.host_group[name] = group

    def connect_traces(self) -> None:
        """``<trace_connect kind="SPEED" trace=T element=H>``: inline ``<trace>`` T is host H's
        availability (other kinds are noted and ignored)."""
        for el in self.connects:
            kind, ref, host = (el.attrs.get(k, "") for k in ("kind", "trace", "element"))
            if kind != "SPEED":
                self.notes.append(f"trace_connect {ref!r} of kind {kind!r} ignored (SPEED only)")
                continue
            if ref not in self.traces:
                self.problem(el, f"trace_connect names trace {ref!r}, which is not defined")
                continue
            if host not in self.pending:
                self.problem(el, f"trace_connect names host {host!r}, which is not defined")
                continue
            trace = self.traces[ref]
            load = (
                self.trace_file(trace, trace.attrs["file"])
                if "file" in trace.attrs
                else self.summarise(trace, f"trace {ref!r}", partial(parse_trace, trace.text))
            )
            if load is not None:
                speed, _, cluster = self.pending[host]
                self.pending[host] = (speed, load, cluster)

    def cores(self, el: Element) -> int | None:
        raw = el.attrs.get("core", "1")
        if not raw.isdigit() or int(raw) < 1:
            self.problem(
                el, f"{el.tag} {el.attrs.get('id', '?')!r}: core must be a whole number >= 1"
            )
            return None
        return int(raw)

    def availability(self, el: Element) -> dict[str, Any] | None:
        ref = el.attrs.get("availability_file") or el.attrs.get("speed_file")
        return {"kind": "dedicated"} if ref is None else self.trace_file(el, ref)

    def trace_file(self, el: Element, ref: str) -> dict[str, Any] | None:
        read = self.read
        if read is None:
            self.problem(el, f"availability file {ref!r}: nothing to read it with")
            return None
        full = ref if posixpath.isabs(ref) else posixpath.join(posixpath.dirname(self.source), ref)
        return self.summarise(el, f"availability file {ref!r}", lambda: parse_trace(read(full)))

    def summarise(
        self, el: Element, what: str, values_of: Callable[[], list[float]]
    ) -> dict[str, Any] | None:
        """A SimGrid speed trace as a normal load: the mean and std of its values."""
        try:
            values = values_of()
        except OSError as exc:
            why = "no such file" if isinstance(exc, FileNotFoundError) else str(exc)
            self.problem(el, f"{what}: cannot read it: {why}")
            return None
        except ValueError as exc:
            self.problem(el, f"{what}: {exc}")
            return None
        mean = statistics.fmean(values)
        std = statistics.pstdev(values) if len(values) > 1 else 0.0
        if not 0 < mean <= 1:
            self.problem(el, f"{what}: its mean {mean:g} is not in (0, 1]")
            return None
        self.notes.append(
            f"{what}: SimGrid availability trace read as a normal load (mean {mean:.4g}, "
            f"std {std:.4g} of its {len(values)} values)"
        )
        return {"kind": "normal", "mean": mean, "std": std}

    def cluster(self, el: Element, zones: tuple[str, ...]) -> None:
        cid = el.attrs.get("id")
        if cid is None:
            self.problem(el, "<cluster> has no 'id'")
            return
        speed = self.value(el, "speed", "speed")
        cores = self.cores(el)
        bw = self.value(el, "bw", "bandwidth")
        lat = self.value(el, "lat", "latency")
        bb_bw = self.value(el, "bb_bw", "bandwidth", required=False)
        bb_lat = self.value(el, "bb_lat", "latency", required=False) or 0.0
        radical = self.radical(el)
        load = self.availability(el)
        if None in (speed, cores, bw, lat, radical, load):
            return
        assert speed is not None and cores is not None and bw is not None and lat is not None
        assert radical is not None and load is not None
        private = Route(bw, lat)
        up = private.then(Route(bb_bw, bb_lat)) if bb_bw is not None else private
        within = up.then(private)
        self.clusters[cid] = (up, within)
        prefix, suffix = el.attrs.get("prefix", ""), el.attrs.get("suffix", "")
        for i in radical:
            self.add_host(f"{prefix}{i}{suffix}", speed * cores, load, (*zones, cid), cid)
        if bb_bw is not None and el.attrs.get("bb_sharing_policy", "SHARED") == "SHARED":
            self.notes.append(
                f"cluster {cid!r}: its backbone ({bb_bw:g} B/s) is shared by all its hosts in "
                "SimGrid; the linkset takes it as each route's bottleneck, not divided among "
                "concurrent messages"
            )
        if el.attrs.get("topology", "FLAT") != "FLAT":
            self.notes.append(
                f"cluster {cid!r}: topology {el.attrs['topology']} read as a flat cluster"
            )

    def radical(self, el: Element) -> list[int] | None:
        raw = el.attrs.get("radical")
        if raw is None:
            self.problem(el, f"cluster {el.attrs.get('id')!r} has no 'radical' (e.g. \"0-15\")")
            return None
        out: list[int] = []
        for part in re.split(r"[,;]", raw):
            m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
            if m is None or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
                self.problem(el, f"cluster {el.attrs.get('id')!r}: bad radical {raw!r}")
                return None
            out.extend(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
        return out

    # -- routes

    def route_path(self, el: Element) -> Route | None:
        path = _EMPTY
        for ctn in el.children:
            if ctn.tag != "link_ctn":
                continue
            ref = ctn.attrs.get("id", "")
            if ref not in self.links:
                known = ", ".join(sorted(self.links)) or "none"
                self.problem(
                    ctn, f"the route names link {ref!r}, which is not defined (defined: {known})"
                )
                return None
            path = path.then(self.links[ref])
        return path

    def routes_done(self) -> None:
        for g in self.groups.values():
            if g.cluster is not None and len(g.hosts) > 1:
                self.join(g, g, self.clusters[g.cluster][1])
        for el, kind in self.routes:
            src, dst = el.attrs.get("src"), el.attrs.get("dst")
            if src is None or dst is None:
                self.problem(el, f"<{el.tag}> needs 'src' and 'dst'")
                continue
            path = self.route_path(el)
            if path is None:
                continue
            if kind == "route":
                self.host_route(el, src, dst, path)
            else:
                self.zone_route(el, src, dst, path)

    def host_route(self, el: Element, src: str, dst: str, path: Route) -> None:
        missing = [h for h in (src, dst) if h not in self.host_group]
        if set(missing) <= self.routers and missing:
            self.notes.append(f"route {src}->{dst}: routes through routers are not followed")
            return
        if missing:
            self.problem(el, f"the route's {', '.join(repr(h) for h in missing)}: no such host")
            return
        if src != dst:
            self.join(self.host_group[src], self.host_group[dst], path)

    def zone_route(self, el: Element, src: str, dst: str, path: Route) -> None:
        ends = []
        for zone in (src, dst):
            hosts = [h for h, zs in self.host_zones.items() if zone in zs]
            if not hosts:
                self.problem(el, f"the {el.tag}'s {zone!r}: no zone or cluster with hosts")
                return
            if zone not in self.clusters:
                self.notes.append(
                    f"{el.tag} {src}->{dst}: the links inside zone {zone!r} up to its gateway "
                    "are not counted (only a cluster's are)"
                )
            ends.append((hosts, self.clusters[zone][0] if zone in self.clusters else _EMPTY))
        (a_hosts, a_up), (b_hosts, b_up) = ends
        full = a_up.then(path).then(b_up)
        pairs = {(id(self.host_group[a]), id(self.host_group[b])) for a in a_hosts for b in b_hosts}
        by_id = {id(g): g for g in self.groups.values()}
        for ga, gb in pairs:
            self.join(by_id[ga], by_id[gb], full)

    def join(self, a: _Group, b: _Group, path: Route) -> None:
        pair = (a.name, b.name) if a.name <= b.name else (b.name, a.name)
        old = self.pairs.get(pair)
        self.pairs[pair] = (
            path
            if old is None
            else Route(min(old.bandwidth, path.bandwidth), max(old.latency, path.latency))
        )

    # -- naming and tables

    def name_groups(self) -> None:
        taken: set[str] = set()
        for g in self.groups.values():
            base = _safe(g.cluster) if g.cluster else _common_name(g.hosts)
            name, k = base, 2
            while name in taken:
                name, k = f"{base}-{k}", k + 1
            taken.add(name)
            g.name = name

    def tables(self) -> Platform:
        nodesets = tuple(
            {
                "name": g.name,
                "type": "cpu",
                "number": len(g.hosts),
                "floatspeed": g.speed,
                "load": dict(g.load),
            }
            for g in self.groups.values()
        )
        linksets: list[dict[str, Any]] = []
        for (a, b), path in self.pairs.items():
            table: dict[str, Any] = {"name": f"{a}-net" if a == b else f"{a}-{b}"}
            table.update({"across": a} if a == b else {"updown": [a, b]})
            if math.isinf(path.bandwidth):
                self.notes.append(f"the routes between {a!r} and {b!r} cross no link")
                continue
            table.update({"bandwidth": path.bandwidth, "latency": path.latency})
            linksets.append(table)
        for tag, count in sorted(self.ignored.items()):
            self.notes.append(f"<{tag}> ({count}) ignored: it has no counterpart in a what-if spec")
        return Platform(nodesets, tuple(linksets), tuple(dict.fromkeys(self.notes)))


def _common_name(hosts: Sequence[str]) -> str:
    """``node-0 .. node-15`` -> ``node``: the hosts' common prefix without its trailing digits
    and separators (the first host's id when nothing is left)."""
    prefix = posixpath.commonprefix(list(hosts)) if len(hosts) > 1 else hosts[0]
    base = re.sub(r"[0-9_.-]+$", "", prefix) if len(hosts) > 1 else prefix
    return _safe(base or hosts[0])


def _safe(name: str) -> str:
    """A usable nodeset name (spec.py's: letters, digits, ``_-.``, not starting with a digit)."""
    name = _NAME_OK.sub("_", name)
    return name if re.match(r"[A-Za-z_]", name) else f"h{name}"


def parse_trace(text: str) -> list[float]:
    """The values of a SimGrid trace (``PERIODICITY p`` / ``LOOPAFTER p`` and ``time value``
    lines; ``#`` comments)."""
    values: list[float] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.split()[0].upper() in ("PERIODICITY", "LOOPAFTER", "WAITFOR"):
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError
            float(parts[0])
            values.append(float(parts[1]))
        except ValueError:
            raise ValueError(f"line {lineno}: expected 'time value', got {raw.strip()!r}") from None
    if not values:
        raise ValueError("no 'time value' lines")
    return values


def parse_platform(
    text: str, source: str = "platform.xml", read: Callable[[str], str] | None = None
) -> Platform:
    """Read a SimGrid platform; :class:`PlatformError` lists every problem with its line and
    column (malformed XML, unknown units, undefined links or hosts, a host without speed).
    ``read`` reads the availability files it names, relative to ``source``'s folder."""
    root = _parse_xml(text, source)
    if root.tag != "platform":
        raise PlatformError(
            [(root.line, root.column, f"the root is <{root.tag}>, not <platform>")], source
        )
    reader = _Reader(source, read)
    version = root.attrs.get("version", "")
    if version and not version.startswith("4"):
        reader.notes.append(f"platform version {version}: read with the 4.1 names (AS = zone)")
    reader.walk(root, ())
    reader.connect_traces()
    reader.group_hosts()
    reader.name_groups()
    reader.routes_done()
    if not reader.groups and not reader.problems:
        reader.problem(root, "the platform has no hosts")
    if reader.problems:
        raise PlatformError(reader.problems, source)
    return reader.tables()


def read_platform(ref: str, read: Callable[[str], str]) -> Platform:
    """The platform ``ref`` names, read (and its availability files) through ``read``."""
    return parse_platform(read(ref), ref, read)
