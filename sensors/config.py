"""Sensor configuration: command-line flags beat PPE_SENSOR_* variables beat a TOML file.

Every setting is declared once in FIELDS; the flag (--batch-size), the environment variable
(PPE_SENSOR_BATCH_SIZE) and the TOML key (batch_size) are all derived from its name, so the
three sources cannot drift apart.
"""

from __future__ import annotations

import argparse
import os
import socket
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from sensors.measurement import NAME_RE

ENV_PREFIX = "PPE_SENSOR_"


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the setting and its source."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Peer:
    """A probe target; `name` is the peer's resource name when given as name=host:port."""

    endpoint: Endpoint
    name: str | None = None

    def __str__(self) -> str:
        return f"{self.name}={self.endpoint}" if self.name else str(self.endpoint)


def parse_endpoint(text: str, default_port: int | None = None) -> Endpoint:
    """host:port, [v6addr]:port, or a bare host when a default port is known."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not port_text:
        if default_port is None:
            raise ConfigError(f"{text!r}: expected host:port")
        return Endpoint(host or "0.0.0.0", default_port)
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"{text!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{text!r}: port out of range")
    return Endpoint(host or "0.0.0.0", port)


def parse_peer(text: str) -> Peer:
    """[name=]host:port; without a name the responder's announced name is used."""
    name, sep, rest = text.strip().partition("=")
    if not sep:
        return Peer(parse_endpoint(name))
    if not NAME_RE.match(name):
        raise ConfigError(f"peer {text!r}: bad resource name {name!r}")
    return Peer(parse_endpoint(rest), name)


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [v for v in (p.strip() for p in value.split(",")) if v]
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    raise ConfigError(f"expected a list or a comma-separated string, got {value!r}")


def _peers(value: Any) -> tuple[Peer, ...]:
    return tuple(parse_peer(p) for p in _as_list(value))


def _cpus(value: Any) -> frozenset[int] | None:
    """'0,2-3' or [0, 2, 3]; empty means every CPU this process may use."""
    items = _as_list(value if isinstance(value, str | list | tuple) else str(value))
    out: set[int] = set()
    for item in items:
        lo, _, hi = item.partition("-")
        try:
            out.update(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise ConfigError(f"bad CPU list item {item!r}") from None
    return frozenset(out) or None


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"expected a boolean, got {value!r}")


def _positive(kind: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        out = kind(value)
        if out <= 0:
            raise ConfigError(f"must be positive, got {value!r}")
        return out

    return convert


def _non_negative(value: Any) -> float:
    out = float(value)
    if not out >= 0 or out == float("inf"):
        raise ConfigError(f"must be 0 or a positive number, got {value!r}")
    return out


def _optional_path(value: Any) -> Path | None:
    return Path(str(value)).expanduser() if str(value) else None


@dataclass(frozen=True)
class SensorConfig:
    server: str
    token: str
    name: str = field(default_factory=socket.gethostname)
    period: float = 10.0
    peers: tuple[Peer, ...] = ()
    listen: Endpoint | None = None
    spool: Path | None = None
    batch_size: int = 100
    batch_delay: float = 10.0
    spool_max: int = 500_000
    cpu: bool = True
    cpus: frozenset[int] | None = None
    cpu_probe_interval: float = 60.0
    cpu_probe_duration: float = 0.2
    probe_size: int = 64 * 1024
    probe_timeout: float = 5.0
    http_timeout: float = 10.0
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    profile_every: float = 86400.0
    record: bool = False
    log_level: str = "INFO"

    @property
    def spool_dir(self) -> Path:
        """Explicit --spool, else systemd's $STATE_DIRECTORY, else a per-name user directory."""
        if self.spool is not None:
            return self.spool
        state = os.environ.get("STATE_DIRECTORY")
        if state:
            return Path(state.split(":")[0])
        base = Path(os.environ.get("XDG_STATE_HOME", "~/.local/state")).expanduser()
        return base / "ppe-sensor" / self.name


@dataclass(frozen=True)
class Setting:
    name: str
    convert: Callable[[Any], Any]
    help: str
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


SETTINGS: tuple[Setting, ...] = (
    Setting("server", str, "PPE service base URL, e.g. http://ppe:8000", "URL"),
    Setting("token", str, "sensor bearer token (prefer --token-file or the env var)", "TOKEN"),
    Setting("token_file", _optional_path, "file holding the sensor token", "FILE"),
    Setting("name", str, "this host's resource name (default: hostname)", "HOST"),
    Setting("period", _positive(float), "seconds between measurements (default 10)", "S"),
    Setting("peers", _peers, "peers to probe: [name=]host:port,...", "LIST"),
    Setting(
        "listen",
        lambda v: parse_endpoint(str(v), 7000) if str(v) else None,
        "serve probes on HOST:PORT (e.g. 0.0.0.0:7000)",
        "HOST:PORT",
    ),
    Setting(
        "spool",
        _optional_path,
        "spool directory (default: $STATE_DIRECTORY or ~/.local/state/ppe-sensor/NAME)",
        "DIR",
    ),
    Setting("batch_size", _positive(int), "post when this many are pending (default 100)", "N"),
    Setting(
        "batch_delay",
        _positive(float),
        "post when the oldest pending is this old (default 10 s)",
        "S",
    ),
    Setting("spool_max", _positive(int), "spool bound in measurements; the oldest go first", "N"),
    Setting("cpu", _bool, "measure CPU availability (default true)", "BOOL"),
    Setting("cpus", _cpus, "measure only these CPUs, e.g. 0 or 0-3 (default: all usable)", "LIST"),
    Setting(
        "cpu_probe_interval",
        _positive(float),
        "seconds between active CPU probes (default 60)",
        "S",
    ),
    Setting(
        "cpu_probe_duration",
        _positive(float),
        "length of one active CPU probe (default 0.2 s)",
        "S",
    ),
    Setting(
        "probe_size", _positive(int), "bandwidth probe transfer in bytes (default 65536)", "BYTES"
    ),
    Setting("probe_timeout", _positive(float), "network probe timeout (default 5 s)", "S"),
    Setting("http_timeout", _positive(float), "HTTP request timeout (default 10 s)", "S"),
    Setting("backoff_initial", _positive(float), "first retry delay (default 1 s)", "S"),
    Setting("backoff_max", _positive(float), "longest retry delay (default 60 s)", "S"),
    Setting(
        "profile_every",
        _non_negative,
        "measure this host's machine profile at start and then every S seconds, and post it "
        "(default 86400; 0: only on SIGUSR1)",
        "S",
    ),
    Setting(
        "record", _bool, "journal every measurement taken in the spool (audits, tests)", "BOOL"
    ),
    Setting("log_level", lambda v: str(v).upper(), "DEBUG, INFO, WARNING (default INFO)", "LEVEL"),
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ppe sensor",
        description="Measure CPU availability, bandwidth and latency and stream them to PPE. "
        f"Every flag also reads {ENV_PREFIX}<FLAG> and a TOML key of the same name.",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"TOML configuration file (or ${ENV_PREFIX}CONFIG)",
    )
    for s in SETTINGS:
        if s.convert is _bool:
            p.add_argument(
                s.flag,
                dest=s.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=s.help,
            )
        else:
            p.add_argument(s.flag, dest=s.name, default=None, metavar=s.metavar, help=s.help)
    return p


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path}: {e}") from None
    data = dict(data.get("sensor", data))  # a [sensor] table or top-level keys
    known = {s.name for s in SETTINGS}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"config file {path}: unknown keys {', '.join(unknown)}")
    return data


def load_config(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> SensorConfig:
    """Merge the three sources; raise ConfigError naming the setting that is wrong."""
    environ = os.environ if environ is None else environ
    args = build_parser().parse_args(list(argv or []))
    config_path = args.config or (
        Path(environ[ENV_PREFIX + "CONFIG"]) if environ.get(ENV_PREFIX + "CONFIG") else None
    )
    file_values = read_toml(config_path) if config_path else {}
    values: dict[str, Any] = {}
    for s in SETTINGS:
        raw, source = getattr(args, s.name), s.flag
        if raw is None and s.env in environ:
            raw, source = environ[s.env], s.env
        if raw is None and s.name in file_values:
            raw, source = file_values[s.name], f"{config_path}: {s.name}"
        if raw is None:
            continue
        try:
            values[s.name] = s.convert(raw)
        except (ConfigError, ValueError, TypeError) as e:
            raise ConfigError(f"{source}: {e}") from None
    return _finish(values)


def _finish(values: dict[str, Any]) -> SensorConfig:
    token_file = values.pop("token_file", None)
    if "token" not in values and token_file is not None:
        try:
            values["token"] = token_file.read_text().strip()
        except OSError as e:
            raise ConfigError(f"--token-file {token_file}: {e.strerror}") from None
    for required in ("server", "token"):
        if not values.get(required):
            raise ConfigError(
                f"--{required} is required (or {ENV_PREFIX}{required.upper()}, or the config file)"
            )
    if not values["server"].startswith(("http://", "https://")):
        raise ConfigError(f"--server {values['server']!r}: expected an http:// or https:// URL")
    values["server"] = values["server"].rstrip("/")
    cfg = SensorConfig(**values)
    if not NAME_RE.match(cfg.name):
        raise ConfigError(f"--name {cfg.name!r}: use letters, digits and _ . : @ - only")
    if cfg.backoff_max < cfg.backoff_initial:
        raise ConfigError("--backoff-max must be at least --backoff-initial")
    if cfg.cpu_probe_duration >= cfg.period:
        raise ConfigError("--cpu-probe-duration must be shorter than --period")
    if cfg.log_level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ConfigError(f"--log-level {cfg.log_level!r}: use DEBUG, INFO, WARNING or ERROR")
    return cfg


def describe(cfg: SensorConfig) -> str:
    """One log line with every setting except the token."""

    def show(name: str) -> str:
        value = cfg.spool_dir if name == "spool" else getattr(cfg, name)
        if isinstance(value, frozenset):
            value = sorted(value)
        if isinstance(value, tuple | list):
            return ",".join(str(v) for v in value) or "-"
        return str(value)

    return " ".join(f"{f.name}={show(f.name)}" for f in fields(cfg) if f.name != "token")
