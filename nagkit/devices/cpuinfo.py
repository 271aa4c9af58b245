"""Which CPU this is: the identity that tells two CPUs apart when a hypervisor gives them one model
name, and the rule for whether a table's CPU is this one (decisions 33)."""

from __future__ import annotations

from typing import Any

# What tells two CPUs apart when a hypervisor gives both the same model name ("AMD EPYC" names a
# Zen 4 and a Zen 5 alike): x86's vendor, family, model and stepping; Arm's implementer,
# architecture, part, variant and revision (first core; a big.LITTLE phone lists several parts,
# and the first is enough to tell one SoC's table from another's).
_ID_FIELDS = (("vendor_id", "cpu family", "model", "stepping"),
              ("CPU implementer", "CPU architecture", "CPU part", "CPU variant", "CPU revision"))


def cpu_id(cpuinfo: str) -> str | None:
    """The identity of the first CPU in ``cpuinfo`` (the text of ``/proc/cpuinfo``), e.g.
    ``"AuthenticAMD family 26 model 2 stepping 1"``, or None when it names none of the fields."""
    first: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        k, sep, v = line.partition(":")
        k = k.strip()
        if sep and v.strip() and k not in first:
            first[k] = v.strip()
    for fields in _ID_FIELDS:
        if all(f in first for f in fields):
            return " ".join(first[f] if f == "vendor_id" else f"{f.split()[-1]} {first[f]}" for f in fields)
    return None


def same_cpu(theirs: dict[str, Any], mine: dict[str, Any]) -> bool:
    """Whether two CPU device records (:func:`nagkit.devices.cpu.host_info`) name the same CPU. VMs share host names
    ("vm"), and a hypervisor can give two CPU models one name ("AMD EPYC" for a Zen 4 and a Zen 5):
    where both records carry a ``cpu_id`` it decides, else the model name does; a record that
    names neither matches (tables from before either was recorded)."""
    if theirs.get("cpu_id") and mine.get("cpu_id"):
        return theirs["cpu_id"] == mine["cpu_id"]
    return theirs.get("cpu_model") is None or theirs.get("cpu_model") == mine.get("cpu_model")


def describe_cpu(info: dict[str, Any]) -> str:
    """``"AMD EPYC (AuthenticAMD family 26 model 2 stepping 1)"``: the model name and the identity."""
    name, ident = info.get("cpu_model"), info.get("cpu_id")
    return f"{name or 'an unnamed CPU'}" + (f" ({ident})" if ident else "")


def named_cpu(info: dict[str, Any]) -> str | None:
    """:func:`describe_cpu` for a record that names a CPU (a model name or an identity), else None."""
    return describe_cpu(info) if info.get("cpu_model") or info.get("cpu_id") else None
