"""The one LiteRT / ONNX Runtime / torch adapter set, conversion and versions.

Everything that opens a runtime goes through here, so timing (:mod:`nagkit.devices.worker`),
parity checks and bundle verification (:mod:`nagkit.export`), block conversion
(:mod:`nagkit.latency.blocks`) and the app layer use the same settings:

- :mod:`~nagkit.runtimes.litert` and :mod:`~nagkit.runtimes.ort`: how an interpreter / session
  is opened (``open_interpreter``, ``session_options``/``open_session``), the model that runs
  inputs (``LiteRTModel``, ``OnnxModel``) and the timing runner (``LiteRTRunner``,
  ``OnnxRuntimeRunner``), both built on that one opener;
- :mod:`~nagkit.runtimes.torchrt`: the torch runner and scoped thread counts;
- :mod:`~nagkit.runtimes.models`: ``load_model(path)`` by suffix, and the runner table;
- :mod:`~nagkit.runtimes.convert`: torch -> ONNX / TFLite;
- :mod:`~nagkit.runtimes.versions`: which runtimes and converters are installed.

Nothing heavy is imported here; each runtime loads on demand.
"""
