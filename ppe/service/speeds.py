"""Where each host's dedicated speed (the models' ``Benchmark``, seconds per unit of work)
comes from when a request plans or predicts, in order of trust:

1. ``request``: the request gives it;
   ``probe``: a signature probe the request asked for measured it (``ppe.service.probing``);
2. ``registered``: the host's properties (``PUT /api/v1/resources/{name}``);
3. ``calibrated``: the application's own reported runs on the host (``ppe.service.calibration``);
4. ``profile``: the PMaC convolution of the host's newest machine profile with the model's
   signature (``ppe.pmac``): for a host the application has never run on;
5. ``unused``: the model reads no benchmark (an empirical strip model).

Answers report the source per host, so a caller can tell a measured speed from a predicted one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ppe.pmac import Signature, convolve
from ppe.service.store.pmac import StoredProfile

SOURCES = ("request", "probe", "registered", "calibrated", "profile", "unused")


@dataclass(frozen=True)
class Speed:
    """A host's benchmark and where it came from; ``note`` is what the answer's warnings say
    when the source is not the request or the registry."""

    benchmark: float
    source: str
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"benchmark": self.benchmark, "source": self.source}


def signature_params(
    signature: Signature, n: int, hosts: int, params: Mapping[str, float]
) -> dict[str, float]:
    """The signature's parameters for a request over ``hosts`` hosts of an ``n``-row grid:
    ``n``, ``rows`` (the even share, ceil(n / hosts): a host's working set before the
    balancing has decided its rows) and any the request's parameters name."""
    out = {k: float(v) for k, v in params.items() if k in signature.parameters}
    if "n" in signature.parameters:
        out["n"] = float(n)
    if "rows" in signature.parameters:
        out["rows"] = float(math.ceil(n / max(hosts, 1)))
    return out


def profile_speed(
    host: str, stored: StoredProfile, signature: Signature, params: Mapping[str, float]
) -> Speed:
    """The convolution's mean seconds per unit as the host's benchmark (one rank per host,
    full overlap: the defaults docs/pmac.md measured), with a note naming what it rests on,
    its spread and anything extrapolated (raises ``ppe.pmac.SignatureError`` when the
    signature cannot be evaluated at ``params``)."""
    conv = convolve(signature, stored.profile, params)
    shown = ", ".join(f"{k}={v:g}" for k, v in sorted(conv.params.items()))
    extra = "".join(f"; {n}" for n in conv.notes)
    note = (
        f"host {host!r} has no benchmark: planned with {conv.per_unit.mean():.4g} "
        f"± {conv.per_unit.std():.2g} s per {signature.unit} predicted from its machine profile "
        f"(version {stored.version}, GET /api/v1/resources/{host}/profile) and signature "
        f"{signature.name!r} ({shown}){extra}"
    )
    return Speed(conv.per_unit.mean(), "profile", note)
