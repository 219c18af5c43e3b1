"""What the parser and the verifier must reject, each with the parser's error at its place or
the verifier's error naming the instruction, before any backend sees the module."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.ir import dtypes as dt
from toolkit.ir.builder import ModuleBuilder
from toolkit.ir.nodes import Module
from toolkit.ir.shape_inference import ShapeError
from toolkit.ir.shapes import Shape
from toolkit.ir.verifier import VerificationError, verify

P = "HloModule m\nENTRY e {\n"


@pytest.mark.parametrize(
    "body, line, column, message",
    [
        (
            "  ROOT c = s32[] constant(99999999999999)\n}",
            3,
            27,
            "s32 literal 99999999999999 is out of range",
        ),
        ("  ROOT c = pred[] constant(2)\n}", 3, 28, "bad pred literal"),
        ("  ROOT p = f32[] parameter(-1)\n}", 3, 28, "parameter number -1"),
        (
            "  ROOT p = f32[] parameter(0), metadata={source_line=abc}\n}",
            3,
            54,
            "source_line must be a line number",
        ),
        ("  p = f32[6] parameter(0)\n  ROOT r = f32[-2,-3] reshape(p)\n}", 4, 16, "dimension -2"),
        (
            "  p = f32[2] parameter(0)\n  ROOT r = f32[2] reverse(p), dimnsions={0}\n}",
            4,
            31,
            "reverse has no attribute 'dimnsions' (did you mean 'dimensions'?)",
        ),
        (
            (
                "  p = f32[2] parameter(0)\n"
                "  ROOT r = pred[] dot(p, p), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}"
            ),
            4,
            3,
            "cannot produce pred",
        ),
        (
            "  ROOT p = " + "(" * 100 + "f32[]" + ")" * 100 + " parameter(0)\n}",
            3,
            76,
            "nested deeper than 64",
        ),
    ],
)
def test_the_parser_rejects_with_line_and_column(body, line, column, message):
    with pytest.raises(tk.hlo.HloParseError) as info:
        tk.hlo.parse(P + body)
    assert message in str(info.value)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)


def test_two_computations_with_one_name_are_rejected_not_merged():
    text = (
        "HloModule m\nr {\n  ROOT p = f32[] parameter(0)\n}\nr {\n  ROOT q = s32[] parameter(0)\n"
        "}\n"
        "ENTRY e {\n  ROOT x = f32[] parameter(0)\n}"
    )
    with pytest.raises(tk.hlo.HloParseError, match="5:1: computation %r is defined twice"):
        tk.hlo.parse(text)


def test_bytes_are_read_as_utf8_and_bad_bytes_are_a_parse_error():
    assert (
        tk.hlo.parse((P + "  ROOT p = f32[] parameter(0)\n}").encode()).entry.root.opcode
        == "parameter"
    )
    with pytest.raises(tk.hlo.HloParseError, match="not valid UTF-8"):
        tk.hlo.parse(b"HloModule m\xff")


def test_attributes_xla_prints_but_toolkit_does_not_model_are_kept():
    text = (
        P + '  ROOT p = f32[] parameter(0), sharding={replicated}, frontend_attributes={a="b"}\n}'
    )
    assert "sharding={replicated}" in tk.hlo.to_text(tk.hlo.parse(text))


def test_the_builder_rejects_negative_dimensions_and_unknown_attributes():
    b = ModuleBuilder("m").computation("main")
    p = b.parameter(0, Shape(dt.F32, (6,)))
    with pytest.raises(ShapeError, match="negative dimension"):
        b.add("reshape", [p], shape=Shape(dt.F32, (-2, -3)))
    with pytest.raises(ShapeError, match="did you mean 'dimensions'"):
        b.add("reverse", [p], {"dimnsions": (0,)})


def test_the_verifier_rejects_two_computations_with_one_name():
    mb = ModuleBuilder("m")
    comps = []
    for _ in range(2):
        b = mb.computation("main")
        comps.append(b.build(b.parameter(0, Shape(dt.F32, ()))))
    renamed = type(comps[1])(
        comps[0].name, comps[1].parameters, comps[1].instructions, comps[1].root
    )
    with pytest.raises(VerificationError, match="two computations are named"):
        verify(Module("m", (comps[0], renamed), renamed))


def test_a_reshape_to_negative_dimensions_never_reaches_a_backend():
    text = P + "  p = f32[6] parameter(0)\n  ROOT r = f32[-2,-3] reshape(p)\n}"
    with pytest.raises(tk.hlo.HloParseError):
        tk.hlo.run(tk.hlo.parse(text), np.ones(6, np.float32), backend="cpu")
