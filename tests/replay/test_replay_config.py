"""Replay settings: each knob lives in its owner's object, the flat form (flags, service API,
report ``config``) keeps its keys."""

from __future__ import annotations

import pytest

from ppe.pipeline import DEFAULT_LINK, PlanOptions
from ppe.replay.cli import FLAGS, build_parser, config_from_args, flag
from ppe.replay.config import FLAT_KEYS, REPLAY_PLAN, ReplayConfig
from ppe.replay.simulate import SimConfig
from scheduler import ReplanPolicy

#: The flat keys as reports, saved jobs and API clients know them (order included).
KEYS = (
    "traces app n iterations hosts starts strategies bandwidth bandwidth_from_trace latency "
    "benchmark benchmark_spread confidence k quantile seed workers executor scheduler_address "
    "min_history_s history_s window_s max_gap_s schedule_samples predict_samples include_runs "
    "inputs start_method replan replan_every_s replan_lag replan_gain"
).split()


def test_flat_form_keeps_its_keys_and_round_trips() -> None:
    assert list(ReplayConfig().to_flat()) == KEYS == list(FLAT_KEYS)
    cfg = ReplayConfig(
        traces=("a", "b"),
        sim=SimConfig("jacobi2d", 400, 20, bandwidth=1e6, latency=0.0),
        plan=PlanOptions(confidence=0.9, k=3.0, schedule_samples=100, predict_samples=200),
        replan_policy=ReplanPolicy(120.0, 1.5, 0.1),
        strategies=("mean",),
        replan=(),
        history_s=None,
    )
    flat = cfg.to_flat()
    assert flat["replan_every_s"] == 120.0 and flat["predict_samples"] == 200
    assert flat["traces"] == ["a", "b"] and flat["replan"] == []
    assert ReplayConfig.from_flat(flat) == cfg


def test_each_flat_key_reaches_its_owner() -> None:
    cfg = ReplayConfig.from_flat(
        {"replan_every_s": 60, "predict_samples": 10, "latency": 0, "strategies": "mean,expected"}
    )
    assert cfg.replan_policy == ReplanPolicy(every_s=60)
    assert cfg.plan == PlanOptions(
        schedule_samples=REPLAY_PLAN.schedule_samples, predict_samples=10
    )
    assert cfg.sim == SimConfig("sor", 10000, 1000, latency=0)
    assert cfg.strategies == ("mean", "expected")
    default = ReplayConfig()
    assert (default.sim.bandwidth, default.sim.latency) == (
        DEFAULT_LINK.bandwidth,
        DEFAULT_LINK.latency,
    )
    # replay's deliberate difference from the service's PlanOptions is in REPLAY_PLAN only
    assert default.plan == REPLAY_PLAN != PlanOptions()


def test_bad_flat_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown replay settings"):
        ReplayConfig.from_flat({"colour": "red"})
    with pytest.raises(ValueError, match="every_s"):
        ReplayConfig.from_flat({"replan_every_s": 0})
    with pytest.raises(ValueError, match="confidence"):
        ReplayConfig.from_flat({"confidence": 1.5})
    with pytest.raises(ValueError, match="replan_every_s"):
        ReplayConfig(plan=PlanOptions(replan_every_s=60.0))


def test_flags_are_flat_keys_with_the_owners_defaults() -> None:
    assert set(FLAGS) <= set(FLAT_KEYS)
    assert flag("replan_every_s") == "--replan-every" and flag("max_gap_s") == "--max-gap"
    args = build_parser().parse_args(["t.csv", "--replan-every", "90", "--history", "0"])
    cfg = config_from_args(args)
    assert cfg.replan_policy.every_s == 90 and cfg.history_s is None
    assert cfg.plan == REPLAY_PLAN and cfg.sim == ReplayConfig().sim
