"""`nagkit init`: a workspace of your own (a copy of a preset or of another workspace)."""

from __future__ import annotations

import click

from nagkit.cli.options import emit, json_option, verbosity_option


@click.command("init")
@click.argument("dest", required=False)
@click.option("--from", "source", default=None,
              help="Workspace to copy: a preset (fmnist, fmnist-int8, ofa-note10, ofa-cpu-w1.0), a name or a folder "
                   "(default: the default workspace).")
@click.option("--latency-table", "latency_table", default=None, type=click.Path(dir_okay=False),
              help="Re-target the copy to this latency table (e.g. one `nagkit profile` made; read and checked "
                   "first); the copied evaluator and generator belong to the old table and are left out.")
@click.option("--force", is_flag=True, help="Replace an existing workspace at DEST.")
@json_option
@verbosity_option
def init(dest: str | None, source: str | None, latency_table: str | None, force: bool, as_json: bool) -> None:
    """Make a workspace of your own at DEST: a folder path, or a name (kept in
    $NAGKIT_HOME/workspaces, default ~/.local/share/nagkit/workspaces, and found by that name).
    A name is 1 to 100 letters, digits, '-', '_', '.', '@' or '+', not starting with '.' or '-'
    (for any other name, give a folder path: ./NAME). DEST must be new, an empty folder, or (with
    --force) a workspace; the copy follows your umask. Shipped presets are never modified;
    commands that write to one write to your copy."""
    from nagkit.app.workspace import init_workspace

    ws = init_workspace(dest, source=source, latency_table=latency_table, force=force)
    trained = ws.artifact_path("generator").is_file()
    result = {"workspace": ws.ref, "root": str(ws.root), "copied_from": ws.copied_from, "space": ws.space.name,
              "latency_table": ws.latency_table_spec, "trained": trained}
    emit(result, as_json, lambda r: "\n".join([
        f"workspace  {r['workspace']} ({r['root']})",
        f"from       {r['copied_from']}",
        f"space      {r['space']}",
        f"table      {r['latency_table']}",
        "next       " + (f"nagkit build --workspace {r['workspace']} --budget B --export tflite" if r["trained"]
                         else f"nagkit train --workspace {r['workspace']}   (then nagkit build --workspace "
                              f"{r['workspace']} --budget B)"),
    ]))
