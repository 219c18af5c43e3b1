"""The syntax of HLO text: a hand-written recursive-descent reader that turns the text into raw
computations and instructions (names, shapes, operand names, attribute text), with errors that
carry line and column. ``parser`` turns those into IR nodes."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import dtypes as dt
from .nodes import Metadata
from .ops import KEPT_VERBATIM, OPS, GroupOp
from .shapes import AnyShape, Shape, TupleShape
from .windows import parse_window

COLLECTIVE_OPCODES = GroupOp.COLLECTIVE

# (the reader's lexemes as compiled patterns: one C-level match each, where a loop over
# characters in Python cost ~100 us an instruction on a 20,000-instruction module)
_SPACE = re.compile(r"(?:[ \t\r\n]+|/\*.*?\*/|//[^\n]*|#[^\n]*)*", re.S)
_SPACE_STARTS = frozenset(" \t\r\n/#")
_WORD = re.compile(r"[A-Za-z0-9_.\-]*")
_INTEGER = re.compile(r"-?[0-9]*")
_PLAIN_STRING = re.compile(r'"([^"\\]*)"')  # a string without escapes (nearly all)
_INT_LIST_ATTRS = {"dimensions", "lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims",
                   "rhs_contracting_dims", "offset_dims", "collapsed_slice_dims", "start_index_map",
                   "operand_batching_dims", "start_indices_batching_dims", "slice_sizes",
                   "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                   "input_batching_dims", "scatter_indices_batching_dims", "dynamic_slice_sizes"}
_BOOL_ATTRS = {"indices_are_sorted", "unique_indices", "is_stable"}
_TABLE_SECTIONS = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}
MAX_TUPLE_DEPTH = 64  # XLA's tuples nest a few levels; deeper text is hostile, not a program
MAX_DIMENSION = 2 ** 63 - 1


class HloParseError(ValueError):
    def __init__(self, message: str, text: str, pos: int):
        line = text.count("\n", 0, pos) + 1
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        col = pos - start + 1
        src = text[start: end if end >= 0 else len(text)]
        super().__init__(f"{line}:{col}: {message}\n  {src}\n  {' ' * (col - 1)}^")
        self.line, self.column, self.reason = line, col, message


@dataclass
class RawInstruction:
    name: str
    shape: AnyShape
    opcode: str
    operands: list[str]
    payload: Any  # parameter number or constant literal text span
    attrs: dict[str, Any]
    raw_attrs: list[tuple[str, str]]
    metadata: Metadata | None
    is_root: bool
    pos: int


@dataclass
class RawComputation:
    name: str
    is_entry: bool
    instructions: list[RawInstruction] = field(default_factory=list)
    pos: int = 0


class HloReader:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self._tuple_depth = 0

    # ---- characters -------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> HloParseError:
        return HloParseError(message, self.text, self.pos if pos is None else pos)

    def skip(self) -> None:
        if self.text[self.pos: self.pos + 1] not in _SPACE_STARTS:  # (usually: nothing to skip)
            return
        self.pos = _SPACE.match(self.text, self.pos).end()
        if self.text.startswith("/*", self.pos):
            raise self.error("unterminated /* comment")

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def accept(self, s: str) -> bool:
        self.skip()
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str = "") -> None:
        if not self.accept(s):
            found = self.text[self.pos: self.pos + 12].split("\n")[0] or "end of input"
            raise self.error(f"expected '{s}'{' ' + what if what else ''}, found '{found}'")

    def word(self) -> str:
        self.skip()
        start = self.pos
        self.pos = _WORD.match(self.text, start).end()
        return self.text[start: self.pos]

    def accept_keyword(self, keyword: str) -> bool:
        """Consume ``keyword`` as a whole word if it comes next (``ENTRY``, ``ROOT``)."""
        save = self.pos
        if self.word() == keyword:
            return True
        self.pos = save
        return False

    def name(self, what: str = "a name") -> str:
        self.accept("%")
        n = self.word()
        if not n:
            raise self.error(f"expected {what}")
        return n

    def integer(self) -> int:
        self.skip()
        start = self.pos
        self.pos = _INTEGER.match(self.text, start).end()
        try:
            return int(self.text[start: self.pos])
        except ValueError:
            self.pos = start
            raise self.error("expected an integer") from None

    def int_list(self, opening: str = "{", closing: str = "}") -> tuple[int, ...]:
        """``{0,1,2}`` (or ``[2,2]`` with other delimiters)."""
        self.expect(opening)
        return tuple(self.separated(closing, self.integer))

    def separated(self, closing: str, item) -> list:
        """``item()`` repeated, separated by commas, up to ``closing`` (consumed; the opening
        delimiter is the caller's)."""
        items = []
        while not self.accept(closing):
            items.append(item())
            if not self.accept(","):
                self.expect(closing)
                break
        return items

    def int_lists(self) -> tuple[tuple[int, ...], ...]:
        """``{{0,1},{2,3}}`` (or ``{}``)."""
        self.expect("{")
        return tuple(self.separated("}", self.int_list))

    def replica_groups(self) -> tuple[tuple[int, ...], ...]:
        """Listed (``{{0,1},{2,3}}``, ``{}``) or XLA's iota form (``[2,2]<=[4]``,
        ``[3,10]<=[6,5]T(1,0)``), expanded to the listed form."""
        if self.peek() != "[":
            return self.int_lists()
        from .collectives import iota_groups

        start = self.pos
        dims = self.int_list("[", "]")
        if len(dims) != 2:
            raise self.error("iota replica groups are [groups,size]", start)
        self.expect("<=")
        reshape = self.int_list("[", "]")
        transpose = None
        if self.accept("T"):
            transpose = self.int_list("(", ")")
        try:
            return iota_groups((dims[0], dims[1]), reshape, transpose)
        except ValueError as e:
            raise self.error(str(e), start) from None

    def string(self) -> str:
        self.skip()
        plain = _PLAIN_STRING.match(self.text, self.pos)
        if plain is not None:
            self.pos = plain.end()
            return plain.group(1)
        self.expect('"')
        out = []
        t = self.text
        while self.pos < len(t) and t[self.pos] != '"':
            if t[self.pos] == "\\" and self.pos + 1 < len(t):
                nxt = t[self.pos + 1]
                out.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
                self.pos += 2
            else:
                out.append(t[self.pos])
                self.pos += 1
        self.expect('"')
        return "".join(out)

    def raw_value(self) -> str:
        """Text of a value up to the next top-level ',' or line end, with balanced brackets."""
        self.skip()
        start, depth, t = self.pos, 0, self.text
        while self.pos < len(t):
            c = t[self.pos]
            if c == '"':
                self.string()
                continue
            if c in "{([":
                depth += 1
            elif c in "})]":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and c in ",\n":
                break
            self.pos += 1
        return t[start: self.pos].strip()

    # ---- shapes -------------------------------------------------------------------------
    def shape(self) -> AnyShape:
        self.skip()
        start = self.pos
        if self.accept("("):
            if self._tuple_depth >= MAX_TUPLE_DEPTH:
                raise self.error(f"tuple shape nested deeper than {MAX_TUPLE_DEPTH} levels", start)
            self._tuple_depth += 1
            elements = self.separated(")", self.shape)
            self._tuple_depth -= 1
            return TupleShape(tuple(elements))
        type_name = self.word()
        if type_name not in dt.BY_NAME:
            raise self.error(f"unsupported or unknown element type '{type_name}'"
                             if type_name else "expected a shape", start)
        self.expect("[")
        dims: list[int] = []
        while not self.accept("]"):
            if self.peek() == "<":
                raise self.error("dynamic (bounded) dimensions are not supported")
            dim_pos = self.pos
            dim = self.integer()
            if not 0 <= dim <= MAX_DIMENSION:
                raise self.error(f"dimension {dim} is not a size from 0 to 2^63-1", dim_pos)
            dims.append(dim)
            if not self.accept(","):
                self.expect("]")
                break
        layout = None
        if self.text.startswith("{", self.pos):  # a layout is printed right after ']'
            layout = self.layout()
        if layout is not None and (
            len(layout) != len(dims) or sorted(layout) != list(range(len(dims)))
        ):
            raise self.error(
                f"layout {{{','.join(map(str, layout))}}} does not fit rank {len(dims)}", start
            )
        default = tuple(range(len(dims) - 1, -1, -1))
        return Shape(
            dt.from_name(type_name), tuple(dims), None if layout in (None, default) else layout
        )

    def layout(self) -> tuple[int, ...]:
        self.expect("{")
        values: list[int] = []
        while self.peek() not in ("}", ":", ""):
            values.append(self.integer())
            self.accept(",")
        if self.accept(":"):  # tiling and memory-space annotations: not modelled
            depth = 1
            while depth and self.pos < len(self.text):
                c = self.text[self.pos]
                depth += (c == "{") - (c == "}")
                self.pos += 1
            return tuple(values)
        self.expect("}")
        return tuple(values)

    def looks_like_shape(self) -> bool:
        self.skip()
        if self.peek() == "(":
            return True
        save = self.pos
        w = self.word()
        ok = w in dt.BY_NAME and self.text.startswith("[", self.pos)
        self.pos = save
        return ok

    # ---- module -------------------------------------------------------------------------
    def module(self) -> tuple[str, list[tuple[str, str]], list[RawComputation]]:
        start = self.pos
        if self.word() != "HloModule":
            raise self.error("expects HloModule", start)
        name = self.name("a module name")
        attrs = []
        while self.accept(","):
            key = self.word()
            self.expect("=")
            attrs.append((key, self.raw_value()))
        comps = []
        while self.peek():
            save = self.pos
            w = self.word()
            if w in _TABLE_SECTIONS:
                end = self.text.find("\n\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
                continue
            self.pos = save
            comps.append(self.computation())
        return name, attrs, comps

    def computation(self) -> RawComputation:
        self.skip()
        pos = self.pos
        is_entry = self.accept_keyword("ENTRY")
        comp = RawComputation(self.name("a computation name"), is_entry, pos=pos)
        if self.peek() == "(":  # long form: (p: shape, ...) -> shape
            self.expect("(")
            while not self.accept(")"):
                self.name("a parameter name")
                self.expect(":")
                self.shape()
                self.accept(",")
            self.expect("->")
            self.shape()
        self.expect("{", "to open the computation body")
        while not self.accept("}"):
            if not self.peek():
                raise self.error(f"computation %{comp.name} is not closed with '}}'")
            comp.instructions.append(self.instruction())
        return comp

    def instruction(self) -> RawInstruction:
        self.skip()
        pos = self.pos
        is_root = self.accept_keyword("ROOT")
        name = self.name("an instruction name")
        self.expect("=", "in instruction")
        shape = self.shape()
        self.skip()
        op_pos = self.pos
        opcode = self.word()
        if opcode not in OPS:
            raise self.error(
                f"unknown opcode '{opcode}'" if opcode else "expected an opcode", op_pos
            )
        self.expect("(")
        operands: list[str] = []
        payload: Any = None
        if opcode == "parameter":
            self.skip()
            number_pos = self.pos
            payload = self.integer()
            if not 0 <= payload < 2 ** 31:
                raise self.error(f"parameter number {payload} must be from 0 to 2^31-1", number_pos)
            self.expect(")")
        elif opcode == "constant":
            payload = (self.pos, self.literal_text())
        else:
            while not self.accept(")"):
                if self.looks_like_shape():
                    self.shape()
                operands.append(self.name("an operand name"))
                if not self.accept(","):
                    self.expect(")", "after operands")
                    break
        attrs: dict[str, Any] = {}
        raw: list[tuple[str, str]] = []
        metadata = None
        while self.accept(","):
            self.skip()
            key_pos = self.pos
            key = self.word()
            if not key:
                raise self.error("expected an attribute name")
            self.expect("=", f"after attribute '{key}'")
            if key in _INT_LIST_ATTRS:
                attrs[key] = self.int_list()
            elif (
                opcode == "custom-call"
                and key in ("custom_call_target", "backend_config")
                and self.peek() == '"'
            ):
                attrs[key] = self.string()
            elif key in _BOOL_ATTRS:
                flag = self.word()
                if flag not in ("true", "false"):
                    raise self.error(f"{key} must be true or false, found '{flag}'", key_pos)
                attrs[key] = flag == "true"
            elif key == "replica_groups" and opcode in COLLECTIVE_OPCODES:
                attrs[key] = self.replica_groups()
            elif key == "source_target_pairs" and opcode == "collective-permute":
                pairs = self.int_lists()
                if any(len(p) != 2 for p in pairs):
                    raise self.error("source_target_pairs are {source,target} pairs", key_pos)
                attrs[key] = pairs
            elif key == "channel_id" and opcode in COLLECTIVE_OPCODES:
                attrs[key] = self.integer()
            elif key == "use_global_device_ids" and opcode in COLLECTIVE_OPCODES:
                flag = self.word()
                if flag not in ("true", "false"):
                    raise self.error(f"{key} must be true or false, found '{flag}'", key_pos)
                attrs[key] = flag == "true"
            elif key in ("iota_dimension", "index", "index_vector_dim"):
                attrs[key] = self.integer()
            elif key in ("direction", "type") and opcode == "compare":
                attrs[key] = self.word()
            elif key == "kind" and opcode == "fusion":
                attrs[key] = self.word()
            elif key in (
                "to_apply",
                "calls",
                "condition",
                "body",
                "true_computation",
                "false_computation",
            ):
                attrs[key] = self.name("a computation name")
            elif key == "branch_computations":
                self.expect("{")
                names = []
                while not self.accept("}"):
                    names.append(self.name("a computation name"))
                    self.accept(",")
                attrs[key] = tuple(names)
            elif key == "slice":
                attrs[key] = self.slice_spec()
            elif key == "padding":
                attrs[key] = self.padding_spec()
            elif key == "window" and opcode == "reduce-window":
                attrs[key] = self.window_spec()
            elif key == "metadata":
                metadata = self.metadata()
            elif key == "operand_precision" and opcode == "dot":
                attrs[key] = tuple(self.raw_value().strip("{}").split(","))
            elif key in KEPT_VERBATIM:
                raw.append((key, self.raw_value()))
            else:
                from .shape_inference import unknown_attribute_message

                raise self.error(unknown_attribute_message(opcode, key), key_pos)
        return RawInstruction(
            name, shape, opcode, operands, payload, attrs, raw, metadata, is_root, pos
        )

    def literal_text(self) -> str:
        depth, start, t = 1, self.pos, self.text
        while self.pos < len(t) and depth:
            c = t[self.pos]
            depth += (c == "(") - (c == ")")
            self.pos += 1
        if depth:
            raise self.error("unterminated constant literal", start)
        return t[start: self.pos - 1]

    def slice_spec(self) -> tuple[tuple[int, int, int], ...]:
        self.expect("{")
        out = []
        while not self.accept("}"):
            self.expect("[")
            start = self.integer()
            self.expect(":")
            limit = self.integer()
            stride = self.integer() if self.accept(":") else 1
            self.expect("]")
            out.append((start, limit, stride))
            self.accept(",")
        return tuple(out)

    def window_spec(self):
        start = self.pos
        text = self.raw_value()
        try:
            return parse_window(text.strip().removeprefix("{").removesuffix("}"))
        except ValueError as e:
            raise self.error(f"bad window '{text}': {e}", start) from None

    def padding_spec(self) -> tuple[tuple[int, int, int], ...]:
        start = self.pos
        text = self.raw_value()
        out = []
        try:
            for part in text.split("x"):
                nums = [int(v) for v in part.split("_")]
                if len(nums) not in (2, 3):
                    raise ValueError
                out.append((nums[0], nums[1], nums[2] if len(nums) == 3 else 0))
        except ValueError:
            raise self.error(
                f"bad padding '{text}' (want lo_hi[_interior] joined by 'x')", start
            ) from None
        return tuple(out)

    def metadata(self) -> Metadata:
        self.expect("{")
        fields: dict[str, Any] = {}
        extra = []
        while not self.accept("}"):
            key = self.word()
            if not key:
                raise self.error("expected a metadata key")
            self.expect("=")
            value_pos = self.pos
            if self.peek() == '"':
                value_pos = self.pos
                value: Any = self.string()
                text = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
            else:
                value = self.raw_metadata_value()
                text = value
            if key in ("op_name", "source_file"):
                fields[key] = value
            elif key == "source_line":
                if not (isinstance(value, str) and value.isdigit() and len(value) < 10):
                    raise self.error(f"source_line must be a line number, got {text}", value_pos)
                fields[key] = int(value)
            else:
                extra.append((key, text))
            self.accept(",")
        return Metadata(fields.get("op_name", ""), fields.get("source_file", ""),
                        fields.get("source_line", 0), tuple(extra))

    def raw_metadata_value(self) -> str:
        self.skip()
        start, t = self.pos, self.text
        while self.pos < len(t) and t[self.pos] not in " \t\n,}":
            self.pos += 1
        return t[start: self.pos]
