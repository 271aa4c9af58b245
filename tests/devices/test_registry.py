"""Device specs, profiles, overrides, entry-point plugins, listing and the `nagkit devices` CLI."""

from __future__ import annotations

import importlib
import json
import logging
import textwrap
from pathlib import Path

import pytest

from nagkit.devices.base import MeasureConfig
from nagkit.devices.listing import list_devices
from nagkit.devices.profiles import load_profile
from nagkit.devices.registry import get_device, parse_device_spec
from nagkit.devices.spec import DeviceSpec, adb_transport, parse_cores
from nagkit.errors import BadInputError, DeviceError, UnknownNameError, exit_code_for

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- good specs


@pytest.mark.parametrize("spec, kind, target, opts", [
    ("cpu", "cpu", None, {"runtime": "litert", "threads": 1}),
    ("cpu:runtime=onnxruntime,threads=2,cores=0-1", "cpu", None,
     {"runtime": "onnxruntime", "threads": 2, "cores": (0, 1)}),
    ("cpu:torch", "cpu", None, {"runtime": "torch", "threads": 1}),
    ("cpu:cores=0,2,threads=2", "cpu", None, {"runtime": "litert", "threads": 2, "cores": (0, 2)}),
    ("cpu:runtime=tflite", "cpu", None, {"runtime": "litert", "threads": 1}),
    ("cuda", "cuda", "0", {"index": 0, "mode": "graph"}),
    ("cuda:1", "cuda", "1", {"index": 1, "mode": "graph"}),
    ("cuda:1,mode=eager", "cuda", "1", {"index": 1, "mode": "eager"}),
    ("cuda:mode=graph,window_ms=3", "cuda", "0", {"index": 0, "mode": "graph", "window_ms": 3.0}),
    ("adb:R58M12ABCDE", "adb", "R58M12ABCDE", {}),
    ("adb:192.168.1.20:5555", "adb", "192.168.1.20:5555", {}),
    ("adb:emulator-5554", "adb", "emulator-5554", {}),
])
def test_good_specs_parse(spec, kind, target, opts):
    ds = parse_device_spec(spec)
    assert isinstance(ds, DeviceSpec)
    assert (ds.kind, ds.target, ds.opts) == (kind, target, opts)
    assert ds.source == spec
    if kind in ("cpu", "cuda"):  # the canonical string parses back to the same options
        assert parse_device_spec(str(ds)).opts == ds.opts
    hash(ds)  # frozen and hashable
    with pytest.raises(AttributeError):
        ds.kind = "other"  # type: ignore[misc]


def test_adb_transport_from_target():
    assert adb_transport("192.168.1.20:5555") == "tcp"
    assert adb_transport("R58M12ABCDE") == "usb"
    assert adb_transport("emulator-5554") == "usb"


def test_core_lists():
    assert parse_cores("0-2,5") == (0, 1, 2, 5)
    assert parse_cores([3, 1]) == (1, 3)
    assert parse_cores(2) == (2,)
    assert str(parse_device_spec("cpu:cores=0-2,5")) == "cpu:cores=0-2,5,runtime=litert,threads=1"


# --------------------------------------------------------------------------- bad specs


@pytest.mark.parametrize("spec, exc, words", [
    ("cpu:runtime=tensorrt", UnknownNameError, ["'tensorrt'", "litert, onnxruntime, torch"]),
    ("cpu:thread=2", BadInputError, ["'thread'", "did you mean 'threads'", "Valid:"]),
    ("cpu:threads=0", BadInputError, ["threads='0'", ">= 1"]),
    ("cpu:threads=two", BadInputError, ["threads='two'"]),
    ("cpu:cores=3-1", BadInputError, ["'3-1'", "0-3"]),
    ("cpu:threads=1,threads=2", BadInputError, ["given twice"]),
    ("cpu:runtime=litert,2", BadInputError, ["'2'", "key=value"]),
    ("cpu:", BadInputError, ["empty option"]),
    ("cuda:mode=fast", UnknownNameError, ["'fast'", "eager, graph"]),
    ("cuda:gpu1", BadInputError, ["index='gpu1'"]),
    ("adb:", BadInputError, ["adb:SERIAL", "adb:HOST:PORT"]),
    ("adb:10.0.0.1:adb", BadInputError, ["port 'adb'"]),
    ("adb:10.0.0.1:70000", BadInputError, ["out of range"]),
    ("adb:abc;rm -rf /", BadInputError, ["'abc;rm -rf /'", "only letters"]),
    ("cpux", UnknownNameError, ["'cpux'", "did you mean 'cpu'"]),
    ("gpu", UnknownNameError, ["'gpu'", "cuda"]),
    ("", BadInputError, ["empty device spec", "cpu:runtime="]),
    ("no/such/profile.yaml", BadInputError, ["does not exist"]),
])
def test_bad_specs_name_the_value_and_the_options(spec, exc, words):
    with pytest.raises(exc) as ei:
        parse_device_spec(spec)
    text = str(ei.value)
    for w in words:
        assert w in text, text
    assert ei.value.exit_code == 2
    assert ei.value.hint  # every error says what to do next


def test_unknown_device_lists_valid_forms_and_the_listing_command():
    with pytest.raises(UnknownNameError) as ei:
        parse_device_spec("pixel7")
    assert "adb:HOST:PORT" in ei.value.hint and "nagkit devices" in ei.value.hint
    assert "cpu-litert-1t" in ei.value.options  # shipped profiles are offered


def test_overrides_win_and_none_is_ignored():
    ds = parse_device_spec("cpu:runtime=onnxruntime,threads=2").with_options(threads=4, runtime=None, cores="0")
    assert ds.opts == {"runtime": "onnxruntime", "threads": 4, "cores": (0,)}
    with pytest.raises(BadInputError, match="did you mean 'threads'"):
        parse_device_spec("cpu").with_options(thread=4)


# --------------------------------------------------------------------------- profiles


def test_overriding_a_profile_changes_its_spec_string():
    ds = parse_device_spec("cpu-litert-1t")
    assert ds.with_options(threads=None).source == "cpu-litert-1t"
    changed = ds.with_options(threads=2)
    assert changed.source == "cpu:runtime=litert,threads=2" and changed.profile == ds.profile
    assert get_device("cpu-litert-1t", threads=2).spec == "cpu:runtime=litert,threads=2"
    assert get_device("cpu-litert-1t").spec == "cpu-litert-1t"


def test_shipped_profiles_load():
    ds = parse_device_spec("cpu-litert-1t")
    assert (ds.kind, ds.get("runtime"), ds.get("threads")) == ("cpu", "litert", 1)
    assert isinstance(ds.measure, MeasureConfig) and ds.measure.target_rel_iqr == 0.05
    assert ds.profile.endswith("cpu-litert-1t.yaml") and ds.source == "cpu-litert-1t"
    ort = parse_device_spec("cpu-onnxruntime-1t")
    assert (ort.get("runtime"), ort.get("threads")) == ("onnxruntime", 1)
    cuda = load_profile(ROOT / "nagkit" / "resources" / "device_profiles" / "cuda.yaml")
    assert (cuda.kind, cuda.get("mode"), cuda.get("index")) == ("cuda", "graph", 0)
    # `cuda` alone stays the built-in spec, not the profile of the same name
    assert parse_device_spec("cuda").profile is None


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_profile_unknown_key_is_refused_with_suggestion(tmp_path):
    p = _write(tmp_path, "typo.yaml", """\
        device: cpu
        runtime: litert
        thread: 2
    """)
    with pytest.raises(BadInputError) as ei:
        parse_device_spec(str(p))
    assert "unknown profile key 'thread'" in ei.value.message
    assert "did you mean 'threads'" in ei.value.message and "typo.yaml" in ei.value.message


def test_profile_unknown_measure_key_is_refused_with_suggestion(tmp_path):
    p = _write(tmp_path, "m.yaml", """\
        device: cpu
        measure: {min_run: 5}
    """)
    with pytest.raises(BadInputError, match="did you mean 'min_runs'"):
        parse_device_spec(str(p))


@pytest.mark.parametrize("text, words", [
    ("runtime: litert\n", "no `device:` spec"),
    ("- cpu\n", "must be a YAML mapping"),
    ("device: cpu\nthreads: [1\n", "not valid YAML"),
    ("device: cpu\nruntime: mlx\n", "'mlx'"),
    ("device: cpu\nmeasure: {min_runs: 50, max_runs: 5}\n", "max_runs=5 < min_runs=50"),
])
def test_bad_profiles(tmp_path, text, words):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(BadInputError) as ei:
        parse_device_spec(str(p))
    assert words in str(ei.value)


def test_profile_found_by_name_on_the_profile_path(tmp_path, monkeypatch):
    _write(tmp_path, "mybox.yaml", """\
        description: my box
        device: cpu:runtime=onnxruntime
        threads: 2
        cores: 0-1
    """)
    monkeypatch.setenv("NAGKIT_PROFILE_PATH", str(tmp_path))
    ds = parse_device_spec("mybox")
    assert ds.opts == {"runtime": "onnxruntime", "threads": 2, "cores": (0, 1)}
    rows = {r["spec"]: r for r in list_devices(adb=False, cuda=False)}
    assert rows["mybox"]["available"] and rows["mybox"]["description"] == "my box"


def test_safe_load_refuses_python_tags(tmp_path):
    p = tmp_path / "evil.yaml"
    p.write_text("device: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(BadInputError, match="not valid YAML"):
        parse_device_spec(str(p))


# --------------------------------------------------------------------------- plugins


PLUGIN_MODULE = '''
from nagkit.devices.base import LatencyStats

class EchoDevice:
    """A third-party device: its 'latency' is the length of the model name."""
    kind = "echo"
    model_format = "tflite"

    def __init__(self, spec, **overrides):
        self.spec = spec
        self.overrides = overrides

    def info(self):
        return {"kind": "echo", "spec": self.spec}

    def runtime_info(self):
        return {"name": "echo", "version": "1"}

    def measure(self, model, input_shape, cfg=None):
        return LatencyStats.from_samples([float(len(str(model)))] * 3)

    def close(self):
        pass

def make(spec, **overrides):
    return EchoDevice(spec, **overrides)

def make_wrong(spec):
    return object()

def make_cpu(spec):
    raise AssertionError("a plugin named cpu must never shadow the built-in")
'''


@pytest.fixture
def plugin_dist(tmp_path, monkeypatch):
    """A real installed distribution (dist-info on sys.path) registering `nagkit.devices` entry points."""
    (tmp_path / "nagkit_echo_plugin.py").write_text(PLUGIN_MODULE)
    dist = tmp_path / "nagkit_echo_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nagkit-echo-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[nagkit.devices]\n"
        "echo = nagkit_echo_plugin:make\n"
        "wrong = nagkit_echo_plugin:make_wrong\n"
        "cpu = nagkit_echo_plugin:make_cpu\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path


def test_entry_point_plugin_is_registered(plugin_dist):
    dev = get_device("echo:lab-bench-3")
    assert dev.spec == "echo:lab-bench-3" and dev.kind == "echo"
    assert dev.measure("abcd", (1,)).median_ms == 4.0
    assert get_device("echo", threads=2).overrides == {"threads": 2}
    rows = [r for r in list_devices(adb=False, cuda=False) if r["kind"] == "plugin"]
    by_name = {r["spec"]: r for r in rows}
    assert by_name["echo"]["entry_point"] == "nagkit_echo_plugin:make"
    assert by_name["echo"]["package"] == "nagkit-echo-plugin" and by_name["echo"]["version"] == "0.1"
    assert "cpu" not in by_name


def test_plugin_returning_a_non_device_is_refused(plugin_dist):
    with pytest.raises(DeviceError, match="not a Device"):
        get_device("wrong")


def test_plugin_cannot_shadow_builtin(plugin_dist, caplog):
    from nagkit.devices.cpu import CpuDevice
    from nagkit.devices.plugins import plugin_names

    ds = parse_device_spec("cpu")
    assert ds.kind == "cpu" and ds.get("runtime") == "litert"
    dev = get_device("cpu:onnxruntime")  # the worker starts lazily, so this is cheap
    assert isinstance(dev, CpuDevice)
    dev.close()
    with caplog.at_level(logging.WARNING, logger="nagkit.devices.plugins"):
        names = plugin_names()
    assert "echo" in names and "cpu" not in names
    assert any("shadows a built-in" in r.getMessage() for r in caplog.records)


def test_unknown_spec_offers_plugins(plugin_dist):
    with pytest.raises(UnknownNameError) as ei:
        parse_device_spec("ecko")
    assert "did you mean 'echo'" in ei.value.message


# --------------------------------------------------------------------------- listing + CLI


def test_list_devices_reports_installed_runtimes_and_profiles():
    from importlib.metadata import version

    rows = list_devices(adb=False, cuda=False)
    cpu = {r["runtime"]: r for r in rows if r["kind"] == "cpu"}
    assert set(cpu) == {"litert", "onnxruntime", "torch"}
    assert cpu["onnxruntime"]["available"] and cpu["onnxruntime"]["version"] == version("onnxruntime")
    assert cpu["litert"]["spec"] == "cpu"
    profiles = {r["spec"]: r for r in rows if r["kind"] == "profile"}
    assert profiles["cpu-litert-1t"]["device"] == "cpu:runtime=litert,threads=1"
    assert any(s.endswith("cuda.yaml") for s in profiles)  # shadowed by `cuda`: listed by path


def test_list_devices_without_an_adb_server_says_how_phones_are_reached(monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("ADB_SERVER_SOCKET", f"tcp:127.0.0.1:{port}")
    rows = [r for r in list_devices(cuda=False) if r["kind"] == "adb"]
    assert len(rows) == 1 and not rows[0]["available"]
    assert "no adb server running" in rows[0]["note"] and "adb:HOST:PORT over TCP" in rows[0]["note"]


def test_the_shipped_android_profile_is_a_template_not_a_reachable_device():
    rows = {r["spec"]: r for r in list_devices(adb=False, cuda=False) if r["kind"] == "profile"}
    row = rows["android-typical"]
    assert row["available"] is False and "placeholder" in row["error"]
    assert "android-typical.yaml" in row["template"] and "`device:`" in row["template"]


def test_cli_devices_json(capsys):
    from nagkit.cli.main import main

    assert main(["devices", "--json", "--no-adb"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"cpu", "cpu:runtime=onnxruntime", "cpu-litert-1t"} <= {r["spec"] for r in rows}


def test_cli_devices_human(capsys):
    from nagkit.cli.main import main

    assert main(["devices", "--no-adb"]) == 0
    out = capsys.readouterr().out
    assert "CPU runtimes:" in out and "cpu-onnxruntime-1t" in out and "onnxruntime" in out


def test_cli_bad_spec_exits_2(capsys):
    from nagkit.cli.main import main

    assert main(["devices", "--device", "cpux"]) == 2
    err = capsys.readouterr().err
    assert "unknown device 'cpux'" in err and "nagkit devices" in err


def test_device_error_maps_to_exit_3():
    assert exit_code_for(DeviceError("runtime broke")) == 3


def test_adb_profile_goes_to_the_adb_device_with_its_keys(tmp_path):
    # The adb device connects lazily, so creating it needs no phone.
    p = _write(tmp_path, "phone.yaml", """\
        description: a phone on the lab network
        device: adb:192.168.1.20:5555
        threads: 4
        taskset: f0
        measure: {min_runs: 20}
    """)
    dev = get_device(str(p))
    assert dev.kind == "adb" and dev.model_format == "tflite"
    assert dev.target == "192.168.1.20:5555"
    assert dev.profile["threads"] == 4 and dev.profile["taskset"] == "f0"
    assert dev.profile["measure"].min_runs == 20
    typo = _write(tmp_path, "typo.yaml", "device: adb:SERIAL1\ntaskst: f0\n")
    with pytest.raises(BadInputError, match="did you mean 'taskset'"):
        parse_device_spec(str(typo))


def test_profiles_of_missing_runtimes_are_listed_as_unreachable(monkeypatch):
    from nagkit.runtimes import versions

    real = versions.runtime_status

    def without_litert():  # test double: this machine as if LiteRT were not installed (the GPU machine)
        rows = real()
        rows["litert"] = {"available": False, "package": "ai-edge-litert", "version": None}
        return rows

    monkeypatch.setattr(versions, "runtime_status", without_litert)
    rows = {r["spec"]: r for r in list_devices(adb=False, cuda=False)}
    assert not rows["cpu"]["available"] and rows["cpu"]["install"] == "pip install ai-edge-litert"
    assert not rows["cpu-litert-1t"]["available"] and "litert is not installed" in rows["cpu-litert-1t"]["note"]
    assert rows["cpu-onnxruntime-1t"]["available"]


def test_built_in_kinds_are_table_entries():
    from nagkit.devices.kinds import KINDS, profile_keys

    assert KINDS.names() == ["adb", "cpu", "cuda"]
    for name in KINDS:
        kind = KINDS.get(name)
        assert kind.name == name and kind.parse(name if name != "adb" else "adb:SERIAL1").kind == name
    assert profile_keys("cpu") == ("runtime", "threads", "cores") and "taskset" in profile_keys("adb")
    assert profile_keys("some-plugin") == ()
    with pytest.raises(ValueError, match="already registered"):
        KINDS.register("cpu", KINDS.get("cpu"))


# --------------------------------------------------------------------------- issue 13 D3, D12


@pytest.mark.parametrize("value", ["0-99999999999", "0-8192", "99999999999", "0-" + "9" * 5000, "٢", "0-٣", [10**12],
                                   [True], "1-0"])
def test_d3_cores_are_bounded_before_any_range_is_built(value):
    with pytest.raises(BadInputError) as ei:
        parse_cores(value, "device spec 'cpu'")
    assert "0..8191" in ei.value.message and len(ei.value.message) < 300


def test_d3_cores_bound_through_the_cli(capsys):
    from nagkit.cli.main import main

    assert main(["devices", "--device", "cpu:cores=0-99999999999"]) == 2
    err = capsys.readouterr().err
    assert "'0-99999999999'" in err and "0..8191" in err and "Traceback" not in err
    assert parse_cores("0-8191")[-1] == 8191  # the bound itself is fine


@pytest.mark.parametrize("spec", ["cpu:threads=99999999999999999999999", "cpu:threads=100000", "cpu:threads=257",
                                  "cpu:threads=٢", "cpu:threads=" + "9" * 5000, "cuda:99999999999999999999"])
def test_d12_thread_counts_and_indices_are_bounded(spec, capsys):
    from nagkit.cli.main import main

    assert main(["devices", "--device", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "must be an integer >= " in err and "<= " in err, err
    assert len(err.splitlines()) == 2 and len(err) < 500 and "Traceback" not in err, err  # message + hint
    assert parse_device_spec("cpu:threads=256").opts["threads"] == 256


def test_d12_adb_profile_threads_are_bounded(tmp_path):
    p = tmp_path / "phone.yaml"
    p.write_text("device: adb:R58M12ABCDE\nthreads: 100000\n")
    with pytest.raises(BadInputError, match=r"threads=100000 .*must be an integer >= 1 and <= 256"):
        get_device(str(p))


def test_d12_supernet_threads_option_is_bounded(capsys):
    from nagkit.cli.main import main

    assert main(["supernet", "train", "--threads", "99999999999999999999999"]) == 2
    err = capsys.readouterr().err
    assert "--threads" in err and "1..256" in err and len(err) < 1000


# --------------------------------------------------------------------------- issue 13 D2, D5: hostile profiles

_LOL = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))
HOSTILE_PROFILES = [
    ("alias bomb in description", "device: cpu\n" + _LOL.replace("a8: &a8", "description: &a8"), "refused"),
    ("description a list", "device: cpu\ndescription: [1, 2]\n", "`description:` must be a text"),
    ("non-utf8", b"device: cpu\ndescription: \xff\xfe\n", "not valid YAML"),
    ("20,000 deep", b"device: cpu\ndescription: " + b"[" * 20_000 + b"]" * 20_000 + b"\n", "nested more than"),
    ("huge integer", "device: cpu\nthreads: " + "9" * 5000 + "\n", "more than 100 characters"),
    ("long runtime", "device: cpu:" + "x" * 100_000 + "\n", "unknown cpu runtime"),
    ("long measure value", "device: cpu\nmeasure: {min_runs: " + "x" * 100_000 + "}\n", "min_runs="),
    ("window_ms inf", "device: cuda\nwindow_ms: .inf\n", "finite number > 0"),
    ("name too long for a file", "device: cp" + "9" * 5000 + "\n", "unknown device"),   # was OSError
    ("long adb taskset", "device: adb:R58M12ABCDE\ntaskset: " + "x" * 100_000 + "\n", "bad taskset mask"),
]


@pytest.mark.parametrize("text, words", [c[1:] for c in HOSTILE_PROFILES], ids=[c[0] for c in HOSTILE_PROFILES])
def test_d2_d5_hostile_profiles_are_one_short_line(tmp_path, text, words, capsys):
    """A device profile that is an alias bomb, not UTF-8, nested 20,000 deep or holds huge values
    fails at once with one short line naming the file, exit 2 (issue 13 D2, D5)."""
    from nagkit.cli.main import main

    p = tmp_path / "hostile.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(BadInputError) as ei:
        ds = load_profile(p)
        if ds.kind == "adb":  # what creating the device checks first
            from nagkit.devices.adb.device import validate_profile

            validate_profile(dict(ds.opts))
    assert words in ei.value.message and len(str(ei.value)) < 600, str(ei.value)[:300]
    assert main(["devices", "--device", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.splitlines()) <= 2 and len(err) < 800 and "Traceback" not in err
