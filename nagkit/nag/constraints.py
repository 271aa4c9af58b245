"""Limits beside the latency budget: parameters, exported file size, MACs, peak activation memory.

Every limit is met by construction, through the decoder's masks (:mod:`nagkit.nag.generator`),
never by retraining: the generator stays conditioned on the latency budget alone (decisions 39).

Parameters, file size and MACs become *additive* constraints over the decoder's steps, like
latency; the peak a filter on the choices:

- ``max_params``, ``max_macs``: the arch's count is ``fixed(r) + sum of its active slots``
  (:class:`nagkit.space.resources.SlotResources`).
- ``max_size_mb``: the exported file's bytes, estimated as ``bytes_per_weight(precision) x params +
  overhead(format, precision)`` (:data:`SIZE_OVERHEAD`, measured on exported networks), so a limit on
  the params: ``params <= (limit - overhead) / bytes_per_weight``. The real file is checked after
  export (``nagkit build``).
- ``max_peak_kb``: the peak is a maximum over layers, not a sum, so it rules choices out instead:
  a resolution whose fixed layers are over, or a block whose own layer is over, is not allowed,
  and every cheapest completion (latency's too) is taken among the allowed choices only
  (:meth:`nagkit.latency.slots.SlotLatency.within`): a depth that would need a slot with no
  allowed block is masked, and so is a resolution with no allowed network.

A prefix is completed in one of a few fixed ways, its *floors*: the cheapest completion of each
rule (latency's, and each additive limit's: its cheapest allowed choice at every remaining step).
A choice is allowed when one floor completes it within the budget and every limit at once
(:meth:`MaskArrays.allowed`). Each floor is a real completion, so an allowed choice always has
one that meets everything, and that floor's own next choice is allowed again: decoding never
reaches a step with every choice masked. Latency's floor is what the latency-only mask uses, so
with no other limit the masks are the same. Where the floors agree (the table's fastest block
is the smallest one, which is also the cheapest in parameters and MACs) the mask is exact: it
allows every choice some completion can fit. Where they differ (fmnist's table: k3e4 is faster
than k3e3 in stage 0's first slot) it still allows a choice whenever one limit's cheapest
completion fits all the others, so a limit at its smallest value in the space is reachable
whenever the budget allows that network (tested); only a network that mixes floors is missed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from nagkit.errors import BadInputError, CheckFailedError, short_repr
from nagkit.latency.slots import SlotLatency
from nagkit.space.resources import ACTIVATION_BYTES, SlotResources

#: What each limit is called on the command line, its unit and whether suffixes are read.
LIMITS = {"max_params": ("--max-params", "parameters"), "max_size_mb": ("--max-size-mb", "MB"),
          "max_macs": ("--max-macs", "MACs"), "max_peak_kb": ("--max-peak-kb", "kB")}
SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9}
_NUMBER = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)([A-Za-z]*)")
MAX_LIMIT = 1e15  # well above any network of any space; a larger "limit" is a typo

#: Bytes per parameter of an exported file and the bytes beyond them (graph, names, metadata),
#: per (format, precision): upper bounds over 28 exported networks (24 of fmnist-mbv3-w0.5 at its
#: four resolutions, 4 of ofa-mbv3-w1.0; int8: 6 of fmnist), each measured maximum rounded up.
#: int8 files hold 1 byte per weight plus int32 biases, per-channel scales and the float operators'
#: constants (SE runs in float): 1.40-1.46 bytes per parameter on 6 measured files, but 1.53 on a
#: build's pick with fewer SE weights (benchmarks/constraints/results/real_files*.json), so 1.65:
#: an upper bound with margin until the per-layer make-up is modelled. An onnx-int8 file is not
#: modelled (refused). benchmarks/constraints/results/summary.json; decisions 39.
BYTES_PER_WEIGHT = {"fp32": 4, "fp16": 2, "int8": 1.65}
SIZE_OVERHEAD = {("tflite", "fp32"): 48_000, ("onnx", "fp32"): 80_000, ("tflite", "fp16"): 112_000,
                 ("tflite", "int8"): 32_000}


def parse_limit(value: Any, name: str) -> float | None:
    """A limit as a finite number > 0: a number, or text with an optional suffix K (10^3), M
    (10^6) or G (10^9) for ``max_params`` and ``max_macs``. ``None`` is no limit. Anything else
    is one :class:`BadInputError` naming the option, the value and what is valid."""
    if value is None:
        return None
    flag, unit = LIMITS[name]
    counts = name in ("max_params", "max_macs")
    example = {"max_params": "2.5M", "max_macs": "300M", "max_peak_kb": "512", "max_size_mb": "4"}[name]
    valid = (f"a number > 0 with an optional suffix K (10^3), M (10^6) or G (10^9), e.g. {flag} {example}" if counts
             else f"a number of {unit} > 0 (1 {unit} = {'1,000' if unit == 'kB' else '1,000,000'} bytes), "
                  f"e.g. {flag} {example}")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadInputError(f"{flag} {short_repr(value)} is not a limit; give {valid}")
    if isinstance(value, str):
        m = _NUMBER.fullmatch(value.strip())
        if value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise BadInputError(f"{flag} {short_repr(value)} must be a finite number > 0; give {valid}")
        if m is None:
            raise BadInputError(f"{flag} {short_repr(value)} is not a number; give {valid}")
        suffix = m.group(2)
        if suffix.upper() not in SUFFIXES or (suffix and not counts):
            what = f"unknown suffix {suffix!r}" if counts else f"{unit} take no suffix ({suffix!r})"
            raise BadInputError(f"{flag} {short_repr(value)}: {what}; give {valid}")
        v = float(m.group(1)) * SUFFIXES[suffix.upper()]
    else:
        v = float(value)
    if not math.isfinite(v) or v <= 0 or v > MAX_LIMIT:
        raise BadInputError(f"{flag} {short_repr(value)} must be a finite number > 0 (and below {MAX_LIMIT:.0e}); "
                            f"give {valid}")
    return v


@dataclass(frozen=True)
class Limits:
    """The limits of one generation besides the latency budget (``None``: no limit). Counts in
    units, ``max_size_mb`` in MB of 10^6 bytes, ``max_peak_kb`` in kB of 10^3 bytes."""

    max_params: float | None = None
    max_size_mb: float | None = None
    max_macs: float | None = None
    max_peak_kb: float | None = None

    @classmethod
    def parse(cls, **values: Any) -> Limits:
        """From CLI text or API values (numbers, or text such as ``"2.5M"``), each checked."""
        unknown = sorted(set(values) - set(LIMITS))
        if unknown:
            raise BadInputError(f"unknown limit(s) {', '.join(unknown)}; valid: {', '.join(LIMITS)}")
        return cls(**{k: parse_limit(v, k) for k, v in values.items()})

    @property
    def active(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def to_dict(self) -> dict[str, float | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def size_model(formats: tuple[str, ...], precision: str) -> tuple[float, int]:
    """(bytes per weight, overhead bytes) of the largest file ``formats`` export at ``precision``."""
    if precision not in BYTES_PER_WEIGHT:
        raise BadInputError(f"precision {precision!r} is not one of {', '.join(BYTES_PER_WEIGHT)}")
    missing = [f for f in formats if (f, precision) not in SIZE_OVERHEAD]
    if missing:
        raise BadInputError(f"--max-size-mb has no file-size model for {', '.join(missing)} at {precision} (not "
                            f"measured); known: {', '.join(f'{f}-{p}' for f, p in SIZE_OVERHEAD)}",
                            hint="export tflite-int8 for a size limit at int8, or drop --max-size-mb")
    return BYTES_PER_WEIGHT[precision], max(SIZE_OVERHEAD[(f, precision)] for f in formats)


class LimitsUnreachableError(CheckFailedError):
    """The limits (with the budget) admit no network of the space (exit 1)."""


@dataclass
class _Rule:
    """One limit as an additive constraint: ``fixed[r] + sum of active slots' cost <= limit``."""

    name: str  # params, size, macs, peak
    limit: float
    fixed: np.ndarray  # [R]
    slots: np.ndarray  # [R, slots, n_blocks]


class Constraints:
    """The active :class:`Limits` of one generation on a space and latency table: the arrays the
    decoder's masks read (:meth:`tensors`), what an arch reaches (:meth:`reached`) and the
    check that some network meets them all (:meth:`check`)."""

    def __init__(self, latency: SlotLatency, resources: SlotResources, limits: Limits, *,
                 formats: tuple[str, ...] = ("tflite",), precision: str = "fp32"):
        if limits.max_peak_kb is not None and precision == "int8":
            raise BadInputError(
                "--max-peak-kb is modelled for float graphs (fp32, fp16) only: an int8 export runs h-swish and SE "
                "in float between QUANTIZE and DEQUANTIZE operators (decisions 23), which the estimate does not "
                "model (decisions 39)", hint="drop --max-peak-kb, or export fp32 or fp16")
        self.table_latency, self.res, self.limits = latency, resources, limits
        self.formats, self.precision = tuple(formats), precision
        self.act_bytes = ACTIVATION_BYTES[precision]
        self.bpw, self.overhead = size_model(self.formats, precision) if limits.max_size_mb is not None else (0, 0)
        self.latency = latency  # the decoder's latency bounds: among peak-allowed choices with a peak limit
        if limits.max_peak_kb is not None:
            cap = self.peak_cap
            self.latency = latency.within(resources.fixed["peak"] <= cap, resources.slots["peak"] <= cap)
        nr, ns = latency.slots.shape[:2]
        lat_slots = self.latency.slots.reshape(nr, ns, -1)  # +inf where the peak limit rules a block out
        allowed = np.isfinite(lat_slots)
        fixed_ok = np.isfinite(self.latency.r_min)
        flat = lambda a: np.where(allowed, a.reshape(nr, ns, -1).astype(np.float64), np.inf)  # noqa: E731
        # the latency budget is rule 0 (its limit is each row's budget), then the additive limits
        self.rules: list[_Rule] = [_Rule("latency", np.inf, np.where(fixed_ok, latency.fixed, np.inf), lat_slots)]
        p, m = resources.slots["params"], resources.slots["macs"]
        if limits.max_params is not None:
            self.rules.append(_Rule("params", limits.max_params, resources.fixed["params"] * 1.0, flat(p)))
        if limits.max_size_mb is not None:
            self.rules.append(_Rule("size", (limits.max_size_mb * 1e6 - self.overhead) / self.bpw,
                                    resources.fixed["params"] * 1.0, flat(p)))
        if limits.max_macs is not None:
            self.rules.append(_Rule("macs", limits.max_macs, resources.fixed["macs"] * 1.0, flat(m)))
        self._floors()

    @property
    def peak_cap(self) -> float:
        """``max_peak_kb`` in activation elements at the precision."""
        return self.limits.max_peak_kb * 1000 / self.act_bytes

    def _floors(self) -> None:
        """Per floor f (the cheapest completion of rule f: its cheapest allowed choice at every
        remaining step) and rule c, the arrays of f's completion costed in c: ``slot_floor``
        [R, slots, F, C], ``depth_cost`` [R, S, nd, F, C] (a stage of each depth, f's blocks),
        ``depth_floor`` [R, S, F, C] (f's depth) and ``r_cost`` [R, F, C] (f's whole network)."""
        sp = self.latency.space
        nr, ns, md, nsl = len(sp.resolutions), sp.n_stages, sp.max_depth, sp.n_block_slots
        depths = np.asarray(sp.depth_list)
        slots = np.stack([r.slots for r in self.rules], axis=-1)  # [R, slots, nb, C]
        fixed = np.stack([r.fixed for r in self.rules], axis=-1)  # [R, C]
        sf, dc, df, rc = [], [], [], []
        with np.errstate(invalid="ignore"):  # inf - inf where a floor cannot be completed: never allowed
            for f in range(len(self.rules)):
                blk = slots[..., f].argmin(axis=2)  # [R, slots]: f's cheapest allowed block
                sf_f = np.take_along_axis(slots, blk[:, :, None, None], axis=2)[:, :, 0, :]  # [R, slots, C]
                dc_f = np.cumsum(sf_f.reshape(nr, ns, md, -1), axis=2)[:, :, depths - 1, :]  # [R, S, nd, C]
                dfl = dc_f[..., f].argmin(axis=2)  # [R, S]: f's cheapest depth
                df_f = np.take_along_axis(dc_f, dfl[:, :, None, None], axis=2)[:, :, 0, :]  # [R, S, C]
                sf.append(sf_f)
                dc.append(dc_f)
                df.append(df_f)
                rc.append(fixed + df_f.sum(axis=1))
        self.slot_floor, self.depth_cost = np.stack(sf, axis=2), np.stack(dc, axis=3)
        self.depth_floor, self.r_cost = np.stack(df, axis=2), np.stack(rc, axis=1)
        self.slot_cost = slots
        assert self.slot_floor.shape == (nr, nsl, len(self.rules), len(self.rules))

    # -- the masks -------------------------------------------------------------------------------
    def tensors(self) -> MaskArrays:
        return MaskArrays(self)

    # -- feasibility -----------------------------------------------------------------------------
    def smallest(self) -> dict[str, float]:
        """The smallest value each resource reaches in the space (at its resolutions), alone."""
        lat, res, sp = self.table_latency, self.res, self.table_latency.space
        nr, md = len(sp.resolutions), sp.max_depth
        dmin = min(sp.depth_list)
        out = {"latency_ms": lat.fastest_ms}
        for name in ("params", "macs"):
            smin = res.slots[name].reshape(nr, sp.n_stages, md, -1).min(axis=3)[:, :, :dmin].sum(axis=(1, 2))
            out[name] = float((res.fixed[name] + smin).min())
        pmin = res.slots["peak"].reshape(nr, sp.n_stages, md, -1).min(axis=3)[:, :, :dmin].max(axis=(1, 2))
        out["peak_kb"] = float(np.maximum(res.fixed["peak"], pmin).min()) * self.act_bytes / 1000
        out["size_mb"] = (out["params"] * self.bpw + self.overhead) / 1e6 if self.bpw else float("nan")
        return out

    def check(self, budget_ms: float) -> None:
        """Raise :class:`LimitsUnreachableError` when no network meets the budget and every limit
        (nothing is generated then), naming the smallest value each one reaches."""
        lim = np.array([budget_ms + 1e-9] + [_tol(r.limit) for r in self.rules[1:]])  # the decoder's tolerances
        ok = (self.r_cost <= lim).all(axis=2).any(axis=1)  # [R]: some floor meets every limit
        if ok.any():
            return
        lo, lim = self.smallest(), self.limits
        rows = [("latency", f"{budget_ms:g} ms", budget_ms, lo["latency_ms"], f"{lo['latency_ms']:.4g} ms")]
        for name, key, fmt in (("--max-params", "params", "{:,.0f}"), ("--max-size-mb", "size_mb", "{:.4g} MB"),
                               ("--max-macs", "macs", "{:,.0f}"), ("--max-peak-kb", "peak_kb", "{:.4g} kB")):
            value = getattr(lim, name[2:].replace("-", "_"))
            if value is not None:
                rows.append((name, fmt.format(value), value, lo[key], fmt.format(lo[key])))
        given = [f"{n} {v} (the smallest in the space: {s}{', at ' + self.precision if n in ('--max-size-mb', '--max-peak-kb') else ''})"
                 for n, v, _, _, s in rows]
        below = [f"{n} to at least {s}" if n != "latency" else f"the budget to at least {s}"
                 for n, _, v, m, s in rows if v < m * (1 - 1e-12)]
        sp = self.latency.space
        raise LimitsUnreachableError(
            f"no network of space {sp.name!r} (resolutions {sp.resolutions[0]}..{sp.resolutions[-1]}) meets these "
            f"limits together: {'; '.join(given)}",
            hint=f"raise {' and '.join(below)}" if below else
                 "each limit alone is reachable, but no network meets them together: raise one of them")

    def fastest_ms(self) -> float:
        """The fastest network the masks admit under every limit but the budget (a floor's:
        :meth:`check` passes at any budget from here); raises like :meth:`check` when none is."""
        ok = (self.r_cost[:, :, 1:] <= np.array([_tol(r.limit) for r in self.rules[1:]])).all(axis=2)
        lat = np.where(ok, self.r_cost[:, :, 0], np.inf)
        if not np.isfinite(lat).any():
            self.check(float(self.table_latency.slowest_ms))
        return float(lat.min())

    # -- what an arch reaches ----------------------------------------------------------------------
    def reached(self, dec) -> dict[str, np.ndarray]:
        """Per row: ``params``, ``macs``, ``peak_kb`` (estimate at the precision) and, with a
        size limit, ``size_mb`` (the estimate the mask used)."""
        v = self.res(dec)
        out = {"params": v["params"], "macs": v["macs"], "peak_kb": v["peak"] * self.act_bytes / 1000}
        out["size_mb"] = (v["params"] * self.bpw + self.overhead) / 1e6 if self.bpw else np.full(len(dec), np.nan)
        return out

    def fits(self, dec) -> np.ndarray:
        """[n] bool: every limit met (the decoder's guarantee, checked again)."""
        r, lim = self.reached(dec), self.limits
        ok = np.ones(len(dec), dtype=bool)
        for key, value in (("params", lim.max_params), ("macs", lim.max_macs)):
            if value is not None:
                ok &= r[key] <= _tol(value)
        if lim.max_size_mb is not None:
            ok &= r["size_mb"] <= _tol(lim.max_size_mb)
        if lim.max_peak_kb is not None:
            ok &= r["peak_kb"] <= _tol(lim.max_peak_kb)
        return ok


def _tol(limit: float) -> float:
    return limit + 1e-9 * max(1.0, abs(limit))


def report(limits: Limits, budget_ms: float, latency_ms: float, reached: dict[str, float],
           size_bytes: dict[str, int] | None = None) -> dict[str, Any]:
    """The ``constraints`` record of ``--json`` and the manifest: each limit given, the value the
    chosen network reaches, its share of the limit, and which one binds (the largest share;
    the latency budget counts too)."""
    rows = {"latency_ms": {"limit": budget_ms, "value": latency_ms}}
    if limits.max_params is not None:
        rows["params"] = {"limit": limits.max_params, "value": int(reached["params"])}
    if limits.max_size_mb is not None:
        value = max(size_bytes.values()) / 1e6 if size_bytes else float(reached["size_mb"])
        rows["size_mb"] = {"limit": limits.max_size_mb, "value": value,
                           "estimated_mb": float(reached["size_mb"]), "measured": bool(size_bytes)}
    if limits.max_macs is not None:
        rows["macs"] = {"limit": limits.max_macs, "value": int(reached["macs"])}
    if limits.max_peak_kb is not None:
        rows["peak_kb"] = {"limit": limits.max_peak_kb, "value": float(reached["peak_kb"])}
    for r in rows.values():
        r["share"] = r["value"] / r["limit"]
    binding = max(rows, key=lambda k: rows[k]["share"])
    peak = reached["peak_kb"]
    values = {"params": int(reached["params"]), "macs": int(reached["macs"]),
              "peak_kb": None if peak is None else float(peak),
              "file_bytes": dict(size_bytes) if size_bytes else None}
    return {"limits": {"budget_ms": budget_ms, **limits.to_dict()}, "reached": values, "constraints": rows,
            "binding": binding}


class MaskArrays:
    """What :class:`Generator`'s steps read: ``latency``, the latency bounds among the choices a
    peak limit allows (None without one), and :class:`Constraints`' floors as float64 tensors:
    ``start(n)`` each floor's cost per rule before any choice [n, F, C], ``options(...)`` each
    choice's cost of prefix + choice + floor completion [n, size, F, C], ``allowed(opt, budget)``
    the choices some floor completes within every limit [n, size]."""

    def __init__(self, c: Constraints):
        import torch

        self.latency = c.latency if c.limits.max_peak_kb is not None else None
        self.md = c.latency.space.max_depth
        t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
        self.limit = t([_tol(r.limit) for r in c.rules[1:]])  # [C - 1]: the budget is each row's
        self.r_cost, self.depth_cost, self.depth_floor = t(c.r_cost), t(c.depth_cost), t(c.depth_floor)
        self.slot_floor, self.blocks = t(c.slot_floor), t(c.slot_cost)  # [R, slots, F, C], [R, slots, nb, C]

    def start(self, n: int):
        import torch

        first = torch.where(torch.isfinite(self.r_cost), self.r_cost, torch.zeros(())).min(dim=0).values
        return first.expand(n, -1, -1).clone()  # read only where there is one resolution

    def options(self, kind: str, s: int, j: int, lo, ri, live):
        import torch

        n = lo.shape[0]
        if kind == "r":
            return self.r_cost.expand(n, -1, -1, -1)
        if kind == "depth":
            return (lo - self.depth_floor[ri, s])[:, None] + self.depth_cost[ri, s]
        slot = s * self.md + j
        with_block = (lo - self.slot_floor[ri, slot])[:, None] + self.blocks[ri, slot][:, :, None, :]
        if live is None:  # a slot every depth has (Generator._options)
            return with_block
        return torch.where(live[:, None, None, None], with_block, lo[:, None].expand_as(with_block))

    def allowed(self, opt, budgets):
        """[n, size]: some floor's completion of the choice meets the budget and every limit (a
        NaN, from a floor that cannot be completed, meets nothing)."""
        import torch

        lim = torch.cat([(budgets + 1e-9)[:, None], self.limit.expand(len(budgets), -1)], dim=1)  # [n, C]
        return (opt <= lim[:, None, None, :]).all(dim=3).any(dim=2)
