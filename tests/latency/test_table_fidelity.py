"""What a table profiled under a time budget reached, as `nagkit build` and `nagkit generate` read
it from the table's provenance (:mod:`nagkit.latency.table_fidelity`): synthetic records, no profiling."""

from __future__ import annotations

import pytest

from nagkit.latency.table_fidelity import USABLE_WITHIN_10PCT, fidelity_line, table_fidelity


def provenance(*, w5=0.29, w10=0.79, skipped=True, block_sd=6.6, net_sd=11.7, calibrated=True, resume=True):
    """A table's provenance as `nagkit profile --time-budget 10m --calibrate` writes it (the shape of the
    2-core EPYC's runs in benchmarks/latency/README.md, the figures chosen per test)."""
    miss = [{"phase": "networks beyond 30", "items": 50, "estimate_s": 900.0},
            {"phase": "spread block passes", "items": 192, "estimate_s": 140.0}] if skipped else []
    fid = {"held_out": "leave-one-out over the 14 calibration networks", "adopted": True, "within_5pct": w5,
           "within_10pct": w10, "mape": 7.0} if calibrated else None
    rec = {"time_budget_s": 600.0, "elapsed_s": 575.0, "over_budget": False, "skipped_for_time": miss,
           "fidelity": fid, "noise_verdict": {"blocks": "blocks: ...", "networks": "this machine is ..."},
           "more_time": "about 17m more would add: ...",
           "resume_with": "--resume --time-budget 18m" if resume else None}
    prov = {"time_budget": rec, "command": "nagkit profile --device cpu --calibrate",
            "block_passes": {"noise": {"best_of_sd_pct": block_sd}, "unconfirmed_blocks": ["a"]}}
    if calibrated:
        prov["fidelity"] = {"verdict": {"meets_5pct": False, "statistic_sd_pct": net_sd, "unconfirmed_share": 0.1}}
    return prov


def test_a_table_without_a_budget_record_says_nothing():
    assert table_fidelity({}) is None and table_fidelity(None) is None
    assert table_fidelity({"source": "nagkit profile", "time_budget": None}) is None
    assert fidelity_line(None) is None


def test_a_table_cut_short_on_a_noisy_machine_below_a_usable_level_is_warned_about_three_ways():
    tf = table_fidelity(provenance())
    assert tf["cut_short"] and tf["level"] == "below usable" and tf["within_10pct"] == 0.79
    assert tf["too_noisy"] == {"blocks": True, "networks": True}
    cut, low, noisy = tf["warnings"]
    assert "cut short by its profile's time budget of 10m00s" in cut and "networks beyond 30 (50)" in cut
    assert "--resume --time-budget 18m" in cut
    assert "below a usable level: 79% of held-out networks within ±10% (usable: 80%), 29% within ±5%" in low
    assert "nagkit lut validate" in low and "too noisy for ±5% (blocks and networks)" in noisy
    line = fidelity_line(tf)
    assert line.startswith("held out 29% within ±5%, 79% within ±10% (below usable)")
    assert "profiled in 9m35s of a 10m00s time budget, cut short" in line


def test_a_whole_quiet_table_meeting_5pct_gets_no_warning():
    tf = table_fidelity(provenance(w5=0.96, w10=1.0, skipped=False, block_sd=1.0, net_sd=1.5))
    assert tf["level"] == "meets ±5%" and not tf["cut_short"] and tf["warnings"] == []
    assert fidelity_line(tf).endswith("nothing left out for time")


@pytest.mark.parametrize("w10,level", [(USABLE_WITHIN_10PCT, "usable"), (USABLE_WITHIN_10PCT - 0.01, "below usable")])
def test_the_usable_level_is_a_share_within_10pct(w10, level):
    tf = table_fidelity(provenance(w5=0.6, w10=w10, skipped=False, block_sd=1.0, net_sd=1.0))
    assert tf["level"] == level and bool(tf["warnings"]) == (level == "below usable")


def test_a_calibration_left_out_for_time_is_named_and_a_profile_without_one_is_only_unknown():
    left_out = provenance(calibrated=False, block_sd=1.0)
    left_out["time_budget"]["skipped_for_time"] = [{"phase": "calibration networks (minimum)", "items": 10}]
    tf = table_fidelity(left_out)
    assert tf["level"] == "unknown" and tf["cut_short"]
    assert "the calibration itself was left out" in tf["warnings"][0]
    plain = table_fidelity(provenance(calibrated=False, skipped=False, block_sd=1.0))  # no --calibrate asked
    assert plain["level"] == "unknown" and plain["warnings"] == []
    assert fidelity_line(plain).startswith("no held-out fidelity (no calibration ran)")


def test_a_record_from_before_resume_with_falls_back_to_its_sentence():
    tf = table_fidelity(provenance(resume=False, block_sd=1.0, net_sd=1.0, w10=0.9))
    assert tf["warnings"] == [tf["warnings"][0]] and tf["warnings"][0].endswith("about 17m more would add: ...")
