"""Malformed HLO: random mutations and truncations of the test corpus. Every outcome is a parsed
and verified module, or the parser's or verifier's error with a place; never another exception,
a hang or a crash. Derandomized in CI; HYPOTHESIS_PROFILE=thorough explores further."""
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolkit as tk

TESTS = pathlib.Path(__file__).resolve().parent
CORPUS = sorted(
    {p.read_text() for p in [*TESTS.glob("golden/*.hlo"), *TESTS.glob("data/**/*.hlo")]}
)
TOKENS = ["(", ")", "{", "}", "[", "]", ",", "=", "%", "-1", "0", "99999999999999999999999",
          "-9223372036854775809", "f32[", "pred[]", "s32[3,-1]", "u8[2]", "(f32[], (s32[]))",
          "ROOT ", "ENTRY ", "parameter(", "constant(", "tuple(", "\"", "/*", "*/", "//", "\n",
          "nan", "-inf", "metadata={", "source_line=", "dimensions={", "to_apply=", "calls=",
          "kind=kLoop", "index=7", "slice={[0:1:0]}", "padding=1_2_-3", "\\", "\x00", "é", " "]


def _parse_or_explain(text) -> None:
    try:
        tk.hlo.parse(text)
    except (tk.hlo.HloParseError, tk.hlo.VerificationError) as e:
        assert str(e)
        if isinstance(e, tk.hlo.HloParseError):
            assert e.line >= 1 and e.column >= 1


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 4))):
        n = len(text)
        kind = draw(st.sampled_from(["truncate", "delete", "insert", "duplicate-line", "swap-lines",
                                     "replace-digit"]))
        i = draw(st.integers(0, n))
        if kind == "truncate":
            text = text[:i]
        elif kind == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 40)):]
        elif kind == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        elif kind == "replace-digit":
            digits = [k for k, c in enumerate(text) if c.isdigit()]
            if digits:
                k = draw(st.sampled_from(digits))
                text = (
                    text[:k]
                    + draw(
                        st.sampled_from(["9" * 30, "-", "-1", "", "7", "0x", "1e9", "99999999999"])
                    )
                    + text[k + 1 :]
                )
        else:
            lines = text.split("\n")
            a, b = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if kind == "duplicate-line":
                lines.insert(b, lines[a])
            else:
                lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
    return text


def test_the_corpus_parses():
    assert len(CORPUS) >= 10
    for text in CORPUS:
        tk.hlo.parse(text)


@settings(max_examples=400)
@given(mutated())
def test_mutated_hlo_parses_or_raises_the_parsers_error(text):
    _parse_or_explain(text)


@given(st.sampled_from(CORPUS), st.data())
def test_every_truncation_parses_or_raises_the_parsers_error(text, data):
    cut = data.draw(st.integers(0, len(text)))
    _parse_or_explain(text[:cut])


@pytest.mark.parametrize(
    "text",
    [
        "",
        "HloModule",
        "HloModule m",
        "HloModule m\nENTRY e {",
        "HloModule m\nENTRY e { ROOT }",
        b"HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }\xff",
        "HloModule m\nENTRY e { ROOT p = " + "(" * 5000 + "f32[]" + ")" * 5000 + " parameter(0) }",
        "HloModule m\nENTRY e { ROOT c = f32[2] constant({" + "{" * 5000 + "}",
        "HloModule m\nENTRY e { ROOT c = s64[] constant(9223372036854775808) }",
        "HloModule m\nENTRY e { ROOT c = f32[] constant(1e99999) }",
        "HloModule m\nENTRY e { ROOT p = f32[99999999999999999999] parameter(0) }",
        (
            "HloModule m\nENTRY e { ROOT p = f32[] parameter(0), "
            "metadata={source_line=99999999999999999999} }"
        ),
        'HloModule m\nENTRY e { ROOT p = f32[] parameter(0), metadata={source_line="x"} }',
        "HloModule m\nENTRY e { ROOT p = f32[] parameter(99999999999999999999) }",
        (
            "HloModule m\nENTRY e { p = f32[2] parameter(0)\n"
            " ROOT i = s32[2] iota(), iota_dimension=99999999999999999999 }"
        ),
    ],
)
def test_hostile_inputs_raise_the_parsers_error(text):
    _parse_or_explain(text)


def test_a_long_chain_written_users_first_parses():
    n = 3000
    lines = [f"  {'ROOT ' if i == 0 else ''}a{i} = f32[] negate(a{i + 1})" for i in range(n)]
    lines.append(f"  a{n} = f32[] parameter(0)")
    module = tk.hlo.parse("HloModule m\nENTRY e {\n" + "\n".join(lines) + "\n}")
    assert len(module.entry.instructions) == n + 1
