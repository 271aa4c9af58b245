import json

import numpy as np
import pytest
from hypothesis import given, settings

from nagkit.errors import ArchError, UnknownNameError
from nagkit.space import Arch, get_space, list_spaces
from nagkit.space.sampling import crossover_arch as crossover, mutate_arch as mutate, sample, sample_many
from tests.fuzzing import arch_inputs, check_arch, fuzz_examples, run_campaign

W10 = get_space("ofa-mbv3-w1.0")
W12 = get_space("ofa-mbv3-w1.2")


def test_spaces_match_ofa_definition():
    assert W10.widths == (16, 16, 24, 40, 80, 112, 160, 960, 1280)
    assert W12.widths == (24, 24, 32, 48, 96, 136, 192, 1152, 1536)
    assert W10.stage_strides == (2, 2, 2, 1, 2)
    assert W10.stage_acts == ("relu", "relu", "h_swish", "h_swish", "h_swish")
    assert W10.stage_se == (False, True, False, True, True)
    assert W10.resolutions == tuple(range(128, 225, 4))
    assert W12.resolutions == tuple(range(160, 225, 4))
    assert (W10.ks_list, W10.expand_list, W10.depth_list) == ((3, 5, 7), (3, 4, 6), (2, 3, 4))
    assert set(list_spaces()) >= {"ofa-mbv3-w1.0", "ofa-mbv3-w1.2"}


def test_unknown_space_suggests_close_match():
    with pytest.raises(UnknownNameError) as ei:
        get_space("ofa-mbv3-w12")
    assert "did you mean" in str(ei.value) and "ofa-mbv3-w1.2" in str(ei.value)


def test_string_roundtrip_and_ofa_dict_roundtrip():
    rng = np.random.default_rng(0)
    for _ in range(50):
        a = sample(W10, rng)
        assert Arch.from_string(str(a)) == a
        d = W10.to_ofa_dict(a)
        assert len(d["ks"]) == 20 and len(d["e"]) == 20 and len(d["d"]) == 5
        assert W10.parse_arch(d) == a
        assert W10.parse_arch(json.dumps(d)) == a


@pytest.mark.parametrize("rkey", ["r", "image_size"])
def test_ofa_dict_variants_and_ignored_slots(rkey):
    ks = [7] * 20
    e = [6] * 20
    d = [2, 3, 4, 2, 2]
    a = W10.parse_arch({"ks": ks, "e": e, "d": d, rkey: 192})
    b = W10.parse_arch({"ks": ks, "e": e, "d": d, "r": [192]})
    assert a == b and a.depths == (2, 3, 4, 2, 2) and a.r == 192
    # slots beyond a stage's depth are ignored, as in OFA
    ks2 = list(ks)
    ks2[3] = 3  # stage 0 has depth 2: slot 3 is inactive
    assert W10.parse_arch({"ks": ks2, "e": e, "d": d, "r": 192}) == a


@pytest.mark.parametrize(
    "value, field",
    [
        ("r224-k3e4", "'d'"),
        ("r225-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4", "resolution"),
        ("r224-k9e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4", "kernel"),
        ("r224-k3e5.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4", "expand"),
        ("r224-k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4", "depth"),
        ("224-k3e4", "resolution"),
        ("r224-k3x4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4", "k<kernel>e<expand>"),
        ('{"ks": [3], "e": [3], "d": [1,1,1,1,1], "r": 224}', "'ks'"),
        ('{"ks": [3, 5], "d": [1]}', "missing"),
        ('{"ks": [', "JSON"),
    ],
)
def test_malformed_arch_names_field(value, field):
    with pytest.raises(ArchError) as ei:
        W10.parse_arch(value)
    assert field in str(ei.value)


def test_errors_list_allowed_values():
    with pytest.raises(ArchError, match=r"allowed kernels: 3, 5, 7"):
        W10.parse_arch("r224-k9e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4")
    with pytest.raises(ArchError, match=r"128\.\.224 in steps of 4"):
        W10.parse_arch("r230-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4-k3e4.k3e4")


def test_seeded_sampling_is_deterministic_and_covers_choices():
    a = sample_many(W10, 200, seed=3)
    b = sample_many(W10, 200, seed=3)
    c = sample_many(W10, 200, seed=4)
    assert a == b and a != c
    ks = {k for x in a for k, _ in x.blocks}
    ds = {d for x in a for d in x.depths}
    assert ks == {3, 5, 7} and ds == {2, 3, 4}
    assert all(W10.validate(x) for x in a)


def test_mutation_and_crossover_are_seeded_and_valid():
    rng = np.random.default_rng(1)
    p, q = sample(W10, rng), sample(W10, rng)
    m1 = mutate(W10, p, np.random.default_rng(5), prob=0.5)
    m2 = mutate(W10, p, np.random.default_rng(5), prob=0.5)
    assert m1 == m2 and m1 != p
    assert mutate(W10, p, np.random.default_rng(5), prob=0.0) == p
    c = crossover(W10, p, q, np.random.default_rng(7))
    W10.validate(c)
    assert c.r in (p.r, q.r)
    assert all(d in (dp, dq) for d, dp, dq in zip(c.depths, p.depths, q.depths))


def test_space_size_and_custom_space():
    small = W10.replace(name="small", resolutions=[28], stem_stride=1, in_channels=1, n_classes=10)
    assert small.resolutions == (28,) and small.in_channels == 1 and small.mean == (0.485,)
    a = small.smallest()
    assert small.layers(a)[0].out_hw == 28  # stem stride 1
    assert W10.size > 10**19


# ---- hostile input (issue 13) --------------------------------------------------------------

SMALL = str(W10.smallest())  # r128-k3e3.k3e3-k3e3.k3e3-...


@pytest.mark.parametrize("value, match", [
    ("r" + "9" * 5000 + "-k3e4", "the resolution has 5,000 digits"),
    ("r224-k" + "7" * 5000 + "e4", "kernel of stage 0 block 0 has 5,000 digits"),
    ("r224-k3e" + "4" * 5000, "expand ratio of stage 0 block 0 has 5,000 digits"),
    ('{"ks": [' + "3" * 5000 + '], "e": [3], "d": [1], "r": 224}', "unreadable value"),
    ({"ks": [10**5000] * 20, "e": [3] * 20, "d": [2] * 5, "r": 224}, "'ks' must be a list of integers"),
    ({"ks": [3] * 20, "e": [3] * 20, "d": [2] * 5, "r": 10**5000}, "positive integer resolution below"),
])
def test_d5_huge_integers_are_arch_errors(value, match):
    """D5: an integer of over 4,300 digits raised a raw ValueError (exit 3)."""
    with pytest.raises(ArchError, match=match) as ei:
        W10.parse_arch(value)
    assert len(ei.value.message) < 300


@pytest.mark.parametrize("depth", [100_000, 3_000])
def test_d5_deeply_nested_json_is_an_arch_error(depth):
    """D5: a 100,000-deep JSON arch (e.g. in an @FILE) raised RecursionError."""
    with pytest.raises(ArchError, match="nested too deeply|does not parse"):
        W10.parse_arch('{"ks": ' + "[" * depth + "]" * depth + "}")


def test_d5_arch_files_non_utf8_deep_or_huge(tmp_path):
    """D5: a non-UTF-8 @FILE raised UnicodeDecodeError; a deep one RecursionError."""
    from nagkit.space.arch import MAX_ARCH_FILE_BYTES, read_arch_arg

    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"r224-k3e4\xe9")
    with pytest.raises(ArchError, match="not UTF-8 text .byte 0xe9 at position 9"):
        read_arch_arg(f"@{bad}")
    deep = tmp_path / "deep.json"
    deep.write_text('{"ks": ' + "[" * 100_000)
    with pytest.raises(ArchError, match="nested too deeply|does not parse"):
        W10.parse_arch(read_arch_arg(f"@{deep}"))
    big = tmp_path / "big.txt"
    big.write_bytes(b"r" * (MAX_ARCH_FILE_BYTES + 1))
    with pytest.raises(ArchError, match="is 1,048,577 bytes; nagkit reads at most 1,048,576"):
        read_arch_arg(f"@{big}")
    ok = tmp_path / "ok.txt"
    ok.write_text(SMALL + "\n")
    assert read_arch_arg(f"@{ok}") == SMALL and read_arch_arg(SMALL) == SMALL


def test_d5_cli_non_utf8_arch_file_exits_2_with_one_line(tmp_path, capsys):
    from tests.cli.helpers import run_cli_inproc

    bad = tmp_path / "a.txt"
    bad.write_bytes(b"\xff\xfe" + b"r224" * 10)
    res = run_cli_inproc(["arch", "info", f"@{bad}", "--space", "ofa-mbv3-w1.0"], capsys)
    assert res.code == 2 and res.err.startswith("error: ") and res.err.count("\n") == 1
    assert "not UTF-8" in res.err


@pytest.mark.parametrize("value", [
    "r٢٢٤" + SMALL[4:],                      # Arabic-Indic digits pass \d but are not nagkit's
    SMALL.replace("k3e3", "k٣e3", 1),
    SMALL.replace("k3e3", "k3e３", 1),        # full-width digit
    SMALL.replace("k3e3.", "k3e3\n.", 1),   # a newline inside a block
    SMALL.replace("k3e3.", "k3e3 .", 1),
    SMALL.replace("-", "\n-", 1),
])
def test_d13_non_ascii_digits_and_whitespace_inside_are_refused(value):
    """D13: `\\d` and `$` let 'r٢٢٤' and 'k3e4\\n' through."""
    with pytest.raises(ArchError, match="malformed arch string"):
        W10.parse_arch(value)


def test_d13_messages_quote_at_most_80_characters_of_the_input():
    """D13: a 1 MB arch gave 1 MB on stderr."""
    for value in ("r224-" + "k3e4." * 200_000 + "x", "x" * 1_000_000, SMALL + "-" + "k3e9." * 200_000 + "k3e9",
                  {"ks": [3] * 1_000_000, "e": [3], "d": [1], "r": 224}, {"ks": "k" * 1_000_000, "e": [], "d": []}):
        with pytest.raises(ArchError) as ei:
            W10.parse_arch(value)
        assert len(ei.value.message) < 300, ei.value.message[:300]


# ---- property tests (hypothesis; issue 13) ------------------------------------------------


@given(arch_inputs())
@settings(max_examples=300, deadline=None)
def test_arch_parser_returns_a_round_tripping_arch_or_an_arch_error(value):
    check_arch(value)


@pytest.mark.slow
def test_arch_parser_long_fuzz_run():
    """NAGKIT_FUZZ_EXAMPLES inputs (default 500; benchmarks/fuzz/run_fuzz.py runs 100,000),
    none over 1 s (hypothesis re-runs a slow one before failing)."""
    camp = run_campaign("arch", fuzz_examples(), seed=11)
    assert camp.failure_count == 0, camp.failures[:5]
    assert camp.inputs >= fuzz_examples() * 0.9
