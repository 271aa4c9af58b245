"""`nagkit space show` and `nagkit arch info`."""

from __future__ import annotations

import click

from nagkit.cli.options import emit, json_option, space_option


@click.group()
def space() -> None:
    """Search spaces."""


@space.command("show")
@click.option("--space", "space_name", default=None, help="One space (default: all).")
@json_option
def space_show(space_name: str | None, as_json: bool) -> None:
    """Show one or all registered search spaces."""
    from nagkit.space import get_space, list_spaces

    names = [space_name] if space_name else list_spaces()
    result = [get_space(n).describe() for n in names]

    def human(rs):
        lines = []
        for d in rs:
            w = d["widths"]
            lines += [
                f"{d['name']}: {d['description']}",
                f"  widths     stem {w['stem']} | first {w['first_block']} | stages {w['stages']} | "
                f"final {w['final_expand']} | mix {w['feature_mix']}",
                f"  strides    {d['stage_strides']} (stem {d['stem_stride']})   acts {d['stage_acts']}   SE {d['stage_se']}",
                f"  choices    k {d['kernels']}  e {d['expand_ratios']}  d {d['depths']}",
                f"  resolution {d['resolutions'][0]}..{d['resolutions'][-1]} ({len(d['resolutions'])} values)"
                f"   in_channels {d['in_channels']}   classes {d['n_classes']}",
                f"  size       {d['n_architectures']:.3e} architectures",
            ]
        return "\n".join(lines)

    emit(result if not space_name else result[0], as_json, (lambda r: human(r if isinstance(r, list) else [r])))


@click.group()
def arch() -> None:
    """Architectures."""


@arch.command("info")
@click.argument("arch_text", metavar="ARCH")
@space_option
@json_option
def arch_info(arch_text: str, space_name: str, as_json: bool) -> None:
    """Canonical string, OFA dict, params and MACs of ARCH.

    ARCH is a canonical string (r224-k3e4.k5e6-...) or OFA's dict as JSON
    ('{"ks": [...20], "e": [...20], "d": [...5], "r": 224}'), or @FILE holding either.
    """
    from nagkit.space import get_space

    sp = get_space(space_name)
    a = sp.parse_arch(read_arch_arg(arch_text))
    result = {
        "space": sp.name,
        "arch": str(a),
        "ofa": sp.to_ofa_dict(a),
        "depths": list(a.depths),
        "resolution": a.r,
        "params": sp.params(a),
        "macs": sp.macs(a),
    }
    emit(result, as_json, lambda r: "\n".join([
        f"arch    {r['arch']}",
        f"ofa     {__import__('json').dumps(r['ofa'])}",
        f"params  {r['params']:,} ({r['params'] / 1e6:.2f} M)",
        f"macs    {r['macs']:,} ({r['macs'] / 1e6:.1f} M)",
    ]))


def read_arch_arg(text: str) -> str:
    """`@path` reads the arch from a file; anything else is returned as is (the checks live in
    :func:`nagkit.space.arch.read_arch_arg`; imported here on use to keep `--help` fast)."""
    from nagkit.space.arch import read_arch_arg as read

    return read(text)
