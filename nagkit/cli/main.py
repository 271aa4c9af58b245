"""The ``nagkit`` command. Command modules are imported lazily, so ``--help`` is fast.

Errors: every exception is mapped to a one-line message and an exit code by
:mod:`nagkit.errors` (0 ok, 1 a check failed, 2 bad input, 3 device or runtime failure).
``NAGKIT_DEBUG=1`` re-raises so the traceback shows.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from nagkit.version import __version__

# name -> (module, attribute, short help). One module per command group.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "space": ("nagkit.cli.space", "space", "Show search spaces."),
    "arch": ("nagkit.cli.space", "arch", "Inspect an architecture (canonical string, OFA dict, params, MACs)."),
    "export": ("nagkit.cli.export", "export", "Export a subnet of a supernet checkpoint to ONNX/TFLite, with parity checks."),
    "devices": ("nagkit.cli.devices", "devices", "List devices and what is reachable."),
    "profile": ("nagkit.cli.latency", "profile", "Measure a device block by block into a latency table."),
    "lut": ("nagkit.cli.latency", "lut", "Latency tables: import OFA tables, predict, validate, show."),
    "dataset": ("nagkit.cli.nag", "dataset", "Sample architectures with latency and accuracy into a dataset."),
    "train": ("nagkit.cli.nag", "train", "Train the evaluator and the budget-conditioned generator."),
    "generate": ("nagkit.cli.nag", "generate", "Generate the best architecture for one or more budgets."),
    "search": ("nagkit.cli.nag", "search", "Run a baseline search (evolution, random, RL, NSGA-II) for a budget."),
    "compare": ("nagkit.cli.nag", "compare", "Compare NAG with the baselines across budgets."),
    "build": ("nagkit.cli.build", "build", "From a budget to a verified TFLite/ONNX bundle."),
    "check": ("nagkit.cli.build", "check", "Verify a bundle; gate a model's latency on a device (exit 1 when over budget)."),
    "finetune": ("nagkit.cli.finetune", "finetune", "Fine-tune a bundle's subnet on your own images (an ImageFolder)."),
    "supernet": ("nagkit.cli.supernet", "supernet", "Train or evaluate a supernet."),
    "init": ("nagkit.cli.workspace", "init", "Make a workspace of your own (a copy of a preset)."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        mod, attr, _ = COMMANDS[name]
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name and e.name.startswith("nagkit.cli"):
                return _unavailable(name)
            raise
        return getattr(module, attr)

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            if args and args[0] not in COMMANDS:
                from nagkit.errors import did_you_mean

                dym = did_you_mean(args[0], COMMANDS)
                hint = f" {dym.capitalize()}" if dym else ""
                raise click.UsageError(
                    f"unknown command {args[0]!r}.{hint} Commands: {', '.join(sorted(COMMANDS))}"
                ) from None
            raise e

    def format_commands(self, ctx, formatter):
        rows = [(n, COMMANDS[n][2]) for n in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _unavailable(name: str) -> click.Command:
    @click.command(name=name, help=COMMANDS[name][2] + " (not available in this build)")
    def _cmd() -> None:
        from nagkit.errors import NagkitError

        raise NagkitError(f"`nagkit {name}` is not available in this build of nagkit {__version__}")

    return _cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="nagkit")
def cli() -> None:
    """nagkit: the most accurate model that meets a latency budget on a device.

    Results go to stdout (--json for machines); logs and progress bars go to stderr.
    Exit codes: 0 ok, 1 a check failed, 2 bad input, 3 device or runtime failure.
    """


def main(argv: list[str] | None = None) -> int:
    from nagkit.cli.options import setup_logging
    from nagkit.errors import exit_code_for, message_for

    setup_logging()  # nagkit's warnings as `warning: ...` lines; -v/-q change the level
    debug = os.environ.get("NAGKIT_DEBUG", "") not in ("", "0")
    try:
        cli.main(args=argv, prog_name="nagkit", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as e:
        if debug:
            raise
        e.show()
        return 2
    except KeyboardInterrupt:
        click.echo("interrupted (partial progress is saved; rerun with --resume where supported)", err=True)
        return 130
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 1
    except BaseException as e:  # noqa: BLE001 - the single mapping point
        if debug:
            raise
        click.echo(f"error: {message_for(e)}", err=True)
        return exit_code_for(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
