"""The application layer: what a command does, without the command line.

- :mod:`~nagkit.app.workspace`: workspaces (``nagkit.toml`` binding a space, supernet, latency
  table, accuracy source and the dataset/evaluator/generator artifacts; presets in
  ``nagkit/resources/workspaces/``);
- :mod:`~nagkit.app.build`: from a budget to a verified bundle;
- :mod:`~nagkit.app.check`: a bundle or model measured on a device against a budget;
- :mod:`~nagkit.app.export`: a subnet of a checkpoint exported, checked and bundled;
- :mod:`~nagkit.app.demo`: the demo's work on the embedded default workspace.

It sits above every other package except :mod:`nagkit.cli`, which only parses and prints;
nothing below imports it.
"""
