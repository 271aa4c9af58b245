"""One-line descriptions of a latency table's fidelity and calibration records (`nagkit profile`,
`lut show`, `lut calibrate`)."""

from __future__ import annotations


def describe_fidelity(f: dict) -> str:
    """One line for a table's fidelity record (``provenance.fidelity``)."""
    from nagkit.latency.passes import statistic_sd

    ho, nz = f["held_out"], f.get("noise") or {}
    sd = statistic_sd(nz)
    return (f"held out ({ho['method']}): {'calibrated' if f['adopted'] else 'raw (calibration not adopted)'} "
            f"{(ho['calibrated_within_5pct'] if f['adopted'] else ho['raw_within_5pct']):.0%} within ±5%, MAPE "
            f"{(ho['calibrated_mape'] if f['adopted'] else ho['raw_mape']):.2f}%; measurement noise "
            f"{'unknown' if sd is None else f'{sd:.2f}% sd'}"
            + ("" if (f.get("verdict") or {}).get("meets_5pct", True) else " — below the ±5% target"))


def describe_calibration(c: dict) -> str:
    """One line for a calibration record (linear or grouped)."""
    if c.get("model") == "grouped":
        loo = f", leave-one-out MAPE {c['loo_mape']:.2f}% ({c['loo_within_5pct']:.0%} within ±5%)" \
            if "loo_mape" in c else ""
        gs = c["group_scales"].values()
        return (f"grouped ({c['group_by']}, {len(c['group_scales'])} groups, factors {min(gs):.3f}..{max(gs):.3f}, "
                f"intercept {c['intercept_ms']:+.4f} ms; fit MAPE {c['fit_error']:.2f}%{loo}, raw MAPE "
                f"{c.get('raw_mape', float('nan')):.2f}%, n={c['n_fit']})")
    raw = f", raw MAPE {c['raw_mape']:.2f}%" if "raw_mape" in c else ""
    loo = f", leave-one-out MAPE {c['loo_mape']:.2f}% ({c['loo_within_5pct']:.0%} within ±5%)" \
        if "loo_mape" in c else ""
    return (f"measured ≈ {c['scale']:.4f} × sum + {c['offset']:.4f} ms (fit MAPE {c['fit_error']:.2f}%{loo}{raw}, "
            f"n={c['n_fit']})")
