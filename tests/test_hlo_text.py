"""HLO text: golden output, print -> parse -> print round trips, parse errors, JAX's text."""
import glob
import json
import os
import pathlib

import numpy as np
import pytest

import toolkit as tk
from toolkit.ir.parser import HloParseError
from toolkit.passes.cost_analysis import cost_analysis

import programs
from helpers import assert_outputs_match

HERE = pathlib.Path(__file__).parent
GOLDEN = HERE / "golden"
JAX_DATA = HERE / "data" / "jax"
UPDATE = os.environ.get("TOOLKIT_UPDATE_GOLDEN") == "1"


def _normalized_text(fn, args) -> str:
    text = tk.jit(fn).lower(*args).as_text()
    return text.replace(os.path.abspath(programs.__file__), "tests/programs.py")


@pytest.mark.parametrize(
    "name",
    [
        "add_one",
        "softmax",
        "layernorm",
        "mlp_layer",
        "indexing",
        "scatters",
        "sorting",
        "scan_grad",
        "checkpoint_grad",
        "complex_numbers",
    ],
)
def test_golden_hlo(name):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    text = _normalized_text(fn, args)
    path = GOLDEN / f"{name}.hlo"
    if UPDATE or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


def test_add_one_reads_like_xla():
    text = tk.jit(programs.add_one).lower(np.ones((10, 10), np.float32)).as_text(metadata=False)
    assert (
        text.splitlines()[0]
        == "HloModule jit_add_one, entry_computation_layout={(f32[10,10]{1,0})->f32[10,10]{1,0}}"
    )
    assert "ENTRY %main.1 (x.2: f32[10,10]) -> f32[10,10] {" in text
    assert "%x.2 = f32[10,10]{1,0} parameter(0)" in text
    assert "%constant.3 = f32[] constant(1)" in text
    assert "%broadcast.4 = f32[10,10]{1,0} broadcast(%constant.3), dimensions={}" in text
    assert "ROOT %add.5 = f32[10,10]{1,0} add(%x.2, %broadcast.4)" in text


@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_print_parse_print_round_trip(name):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    text = tk.jit(fn).lower(*args).as_text()
    module = tk.hlo.parse(text)
    assert module.to_text() == text
    # the parsed text runs as the traced program does (the optimiser may round differently:
    # power(x, 3) becomes x*x*x, where NumPy 2.4's float power is one pow per element)
    expected = tk.jit(fn, pipeline="none")(*args)
    got = tk.hlo.run(module, *args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(e, g)


JAX_PROGRAMS = sorted(pathlib.Path(p).stem for p in glob.glob(str(JAX_DATA / "*.hlo")))


def _load_npz(name):
    data = np.load(JAX_DATA / f"{name}.npz")
    args = [data[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in data))]
    outs = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data))]
    return args, outs


def test_jax_data_is_present():
    assert len(JAX_PROGRAMS) >= 15


@pytest.mark.parametrize("name", JAX_PROGRAMS)
def test_jax_printed_hlo_parses_round_trips_and_runs(name):
    text = (JAX_DATA / f"{name}.hlo").read_text()
    module = tk.hlo.parse(text)
    printed = module.to_text()
    assert tk.hlo.parse(printed).to_text() == printed
    args, expected = _load_npz(name)
    assert_outputs_match(tk.hlo.run(module, *args), expected, rtol=2e-6)


@pytest.mark.parametrize("name", JAX_PROGRAMS)
def test_cost_analysis_matches_xla(name):
    module = tk.hlo.parse((JAX_DATA / f"{name}.hlo").read_text())
    ours = cost_analysis(module)
    theirs = json.loads((JAX_DATA / f"{name}.cost.json").read_text())
    for key, value in theirs.items():
        if key.startswith("utilization"):
            continue  # not modelled
        assert ours.get(key) == value, f"{key}: toolkit {ours.get(key)} vs XLA {value}"


def test_parses_xla_optimized_dump_with_stack_frame_tables():
    text = (HERE / "data" / "xla_softmax_optimized.hlo").read_text()
    module = tk.hlo.parse(text)
    assert module.entry.root.opcode == "fusion"
    assert module.entry.root.attrs["kind"] == "kCustom"
    x = np.random.default_rng(0).standard_normal((4096, 1024)).astype(np.float32)[:4096]
    (y,) = tk.hlo.run(module, x)
    ref = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(y, ref / ref.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_long_form_operands_and_comments():
    text = """HloModule m, is_scheduled=true
    %add_f32 (x: f32[], y: f32[]) -> f32[] {
      %x = f32[] parameter(0)
      %y = f32[] parameter(1)
      ROOT %add = f32[] add(f32[] %x, f32[] %y)
    }
    ENTRY %e (p: f32[3]) -> (f32[], f32[3]) {
      %p = f32[3]{0} parameter(0)  // trailing comment
      %c = f32[] constant(0)
      %r = f32[] reduce(f32[3]{0} %p, f32[] %c), dimensions={0}, to_apply=%add_f32
      ROOT %t = (f32[], f32[3]{0}) tuple(/*index=0*/%r, %p)
    }
    """
    module = tk.hlo.parse(text)
    s, p = tk.hlo.run(module, np.array([1, 2, 3], np.float32))
    assert s == 6 and list(p) == [1, 2, 3]
    assert "is_scheduled=true" in module.to_text()


@pytest.mark.parametrize(
    "text,line,col,message",
    [
        ("HloMod m", 1, 1, "expects HloModule"),
        (
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] frobnicate(p)\n}",
            4,
            19,
            "unknown opcode 'frobnicate'",
        ),
        ("HloModule m\nENTRY e {\n  ROOT r = f32[2] negate(q)\n}", 3, 3, "undefined operand %q"),
        (
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[3] negate(p)\n}",
            4,
            3,
            "declared result f32[3] but operands give f32[2]",
        ),
        (
            "HloModule m\nENTRY e {\n  p = q99[2] parameter(0)\n}",
            3,
            7,
            "unknown element type 'q99'",
        ),
        (
            (
                "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n"
                "  ROOT r = f32[2] add(p, p), dimensions={x}\n}"
            ),
            4,
            42,
            "expected an integer",
        ),
        (
            "HloModule m\nENTRY e {\n  c = f32[2] constant({1, 2, 3})\n}",
            3,
            23,
            "constant has 3 values",
        ),
    ],
)
def test_parse_errors_have_line_and_column(text, line, col, message):
    with pytest.raises(HloParseError) as info:
        tk.hlo.parse(text)
    err = info.value
    assert message in str(err)
    assert (err.line, err.column) == (line, col), str(err)
    assert "^" in str(err)


def test_constants_round_trip_special_values():
    text = (
        "HloModule m\nENTRY e {\n  ROOT c = f32[6]{0} constant({nan, inf, -inf, -0, 1e-45, "
        "3.4028235e+38})\n}\n"
    )
    module = tk.hlo.parse(text)
    (c,) = tk.hlo.run(module)
    assert np.isnan(c[0]) and c[1] == np.inf and c[2] == -np.inf
    assert c[3] == 0 and np.signbit(c[3])
    assert c[4] == np.float32(1e-45) and c[5] == np.finfo(np.float32).max
    assert tk.hlo.parse(module.to_text()).to_text() == module.to_text()


def test_int64_and_f64_constants_keep_full_precision():
    text = (
        "HloModule m\nENTRY e {\n  a = s64[] constant(9007199254740993)\n"
        "  b = f64[] constant(0.1)\n"
        "  ROOT t = (s64[], f64[]) tuple(a, b)\n}\n"
    )
    module = tk.hlo.parse(text)
    assert int(module.entry.instructions[0].attrs["literal"]) == 9007199254740993
    assert "constant(9007199254740993)" in module.to_text()
    assert "constant(0.1)" in module.to_text()


def test_fingerprints_take_large_constants_by_their_bytes():
    """A traced GPT-2 holds 144 copies of a 256x256 mask: fingerprinting it as text took 23 s
    of its first call. Large constants enter the fingerprint as a digest of their bytes, which
    still tells any two values apart (-0.0 from 0.0 too)."""
    from toolkit.backends import get_backend
    from toolkit.ir.printer import instruction_to_text
    from toolkit.stages import hlo_fingerprint, lower_positional

    def program(mask_value):
        mask = np.zeros((64, 64), np.float32)
        mask[3, 5] = mask_value
        # (traced as an SPMD program is: the closure's array a constant, not lifted into a
        # parameter as tk.jit lifts it on a host backend)
        return lower_positional(lambda x: x + mask, "masked", (np.ones((64, 64), np.float32),),
                                get_backend("interpreter")).hlo

    a, b, c = program(0.0), program(-0.0), program(0.0)
    assert hlo_fingerprint(a) == hlo_fingerprint(c) != hlo_fingerprint(b)
    constant = next(i for i in a.entry.instructions if i.opcode == "constant")
    digest = instruction_to_text(constant, digest_literals=True)
    assert "{digest " in digest and len(digest) < 200
    assert len(instruction_to_text(constant)) > 64 * 64  # the printed text keeps every value


_FINGERPRINTED = (
    "HloModule m\n%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
    "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n"
    "ENTRY e {\n  %x = f32[8] parameter(0)\n  %c = f32[] constant(0)\n"
    "  %b = f32[8] broadcast(%c), dimensions={}\n  %m = f32[8] multiply(%x, %b)\n"
    "  ROOT %r = f32[] reduce(%m, %c), dimensions={0}, to_apply=%add\n}\n"
)


@pytest.mark.parametrize("changed", [
    ("constant(0)", "constant(-0)"),
    ("multiply(%x, %b)", "multiply(%b, %x)"),
    ("multiply(%x, %b)", "add(%x, %b)"),
    ("ROOT %s = f32[] add(%a, %b)", "ROOT %s = f32[] maximum(%a, %b)"),
    ("HloModule m\n", "HloModule m, input_output_alias={ {}: (0, {}, may-alias) }\n"),
])
def test_a_fingerprint_sees_what_changes_the_program_and_not_names(changed):
    """The compile record's fingerprint (ir/structural.fingerprint): the same for a program
    renamed and annotated differently, another for a different constant (the sign of zero), an
    operand order, an opcode, a called computation or a module attribute."""
    from toolkit.stages import hlo_fingerprint

    base = tk.hlo.parse(_FINGERPRINTED)
    renamed = tk.hlo.parse(_FINGERPRINTED.replace("%m", "%product.7").replace("%x", "%input")
                           .replace("%add", "%sum.2").replace(
                               "parameter(0)\n  %c", 'parameter(0), metadata={op_name="x"}\n  %c'))
    assert hlo_fingerprint(base) == hlo_fingerprint(renamed)
    old, new = changed
    assert old in _FINGERPRINTED
    other = tk.hlo.parse(_FINGERPRINTED.replace(old, new))
    assert hlo_fingerprint(other) != hlo_fingerprint(base)


def test_a_fingerprint_does_not_depend_on_which_shapes_and_attributes_are_shared():
    """The fingerprint finds an instruction's kind by the identity of its shape and attribute
    map (the builder shares them), yet numbers kinds by their text: the same program made with
    every shape and attribute map a copy of its own fingerprints the same."""
    import copy

    from toolkit.ir.nodes import Computation, Module
    from toolkit.stages import hlo_fingerprint

    base = tk.hlo.parse(_FINGERPRINTED.replace(
        "ROOT %r = f32[] reduce(%m, %c)", "%n = f32[8] multiply(%m, %b)\n"
        "  ROOT %r = f32[] reduce(%n, %c)"))
    entry = base.entry
    made = {}
    for inst in entry.instructions:
        made[inst] = type(inst)(inst.name, inst.opcode, copy.deepcopy(inst.shape),
                                tuple(made[o] for o in inst.operands),
                                {k: v for k, v in inst.attrs.items()}, inst.metadata)
    copied = Computation(entry.name, tuple(made[p] for p in entry.parameters),
                         tuple(made[i] for i in entry.instructions), made[entry.root])
    unshared = Module(base.name, base.computations[:-1] + (copied,), copied, base.attributes)
    assert hlo_fingerprint(unshared) == hlo_fingerprint(base)
