"""`ppe sensor`: parse the configuration, run the daemon, stop cleanly on SIGTERM/SIGINT;
SIGUSR1 measures and posts a machine profile now (`systemctl kill -s USR1 ppe-sensor`)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sensors.config import ConfigError, load_config
from sensors.spool import SpoolLocked

if TYPE_CHECKING:
    from sensors.daemon import SensorDaemon

log = logging.getLogger("ppe.sensor")


def install_signals(daemon: SensorDaemon) -> None:
    """SIGTERM and SIGINT stop the daemon, SIGUSR1 asks it for a machine profile now (the
    handlers only set events). Call from the main thread."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: daemon.request_stop())
    signal.signal(signal.SIGUSR1, lambda *_: daemon.request_profile())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for `ppe sensor ...` and `python -m sensors ...`; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = load_config(argv)
    except SystemExit as e:  # argparse: --help, or a flag it does not know
        return e.code if isinstance(e.code, int) else 2
    except ConfigError as e:
        print(f"ppe sensor: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=cfg.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for chatty in ("httpx", "httpcore"):  # one line per request drowns the sensor's own log
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.getLogger().level))
    from sensors.daemon import SensorDaemon  # after logging is set up

    try:
        daemon = SensorDaemon(cfg)
    except SpoolLocked as e:
        log.error("%s", e)
        return 1
    except ConfigError as e:
        print(f"ppe sensor: {e}", file=sys.stderr)
        return 2
    if threading.current_thread() is threading.main_thread():
        install_signals(daemon)
    try:
        return daemon.run()
    except OSError as e:  # e.g. the probe port is taken
        log.error("sensor cannot run: %s", e)
        daemon.stop(flush_timeout=0.0)
        return 1
