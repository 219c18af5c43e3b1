"""HLO text in XLA's syntax (what ``HloModule::ToString()`` prints), parseable by XLA."""
from __future__ import annotations

import hashlib

import numpy as np

from .literals import literal_to_text
from .nodes import TEXT_PRINTERS, Computation, Instruction, Metadata, Module
from .ops import opdef
from .source_names import notebook_cell
from .windows import window_text

_DOT_ATTRS = ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims")


# XLA's order of the indexing ops' attributes (HloGatherInstruction / HloScatterInstruction
# ::ExtraAttributesToStringImpl); to_apply comes last, printed below for every op
_INDEXING_ATTRS = {
    "gather": (
        "offset_dims",
        "collapsed_slice_dims",
        "start_index_map",
        "operand_batching_dims",
        "start_indices_batching_dims",
        "index_vector_dim",
        "slice_sizes",
        "indices_are_sorted",
    ),
    "scatter": (
        "update_window_dims",
        "inserted_window_dims",
        "scatter_dims_to_operand_dims",
        "input_batching_dims",
        "scatter_indices_batching_dims",
        "index_vector_dim",
        "indices_are_sorted",
        "unique_indices",
    ),
    "dynamic-slice": ("dynamic_slice_sizes",),
}
_FLAGS = {"indices_are_sorted", "unique_indices"}
_OPTIONAL_LISTS = {"operand_batching_dims", "start_indices_batching_dims", "input_batching_dims",
                   "scatter_indices_batching_dims"}


def _braced(values) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def metadata_to_text(md: Metadata) -> str:
    """XLA's metadata; a notebook cell's temporary file is named as the cell (``cell [3]``)."""
    parts = []
    if md.op_name:
        parts.append(f'op_name="{_escape(md.op_name)}"')
    cell = notebook_cell(md.source_file)
    source_file, line_offset = cell if cell is not None else (md.source_file, 0)
    if source_file:
        parts.append(f'source_file="{_escape(source_file)}"')
    if md.source_line:
        parts.append(f"source_line={md.source_line + line_offset}")
    parts.extend(f"{k}={v}" for k, v in md.extra)
    return "metadata={" + " ".join(parts) + "}"


def _attributes(inst: Instruction) -> list[str]:
    a = inst.attrs
    op = inst.opcode
    out: list[str] = []
    if op == "iota":
        out.append(f"iota_dimension={a['iota_dimension']}")
    elif op == "compare":
        out.append(f"direction={a['direction']}")
        if a.get("type"):
            out.append(f"type={a['type']}")
    elif op in ("broadcast", "transpose", "reverse", "concatenate", "reduce"):
        out.append(f"dimensions={_braced(a.get('dimensions', ()))}")
    elif op == "slice":
        ranges = ", ".join(
            f"[{s}:{e}]" if st == 1 else f"[{s}:{e}:{st}]" for s, e, st in a["slice"])
        out.append("slice={" + ranges + "}")
    elif op == "reduce-window":
        out.append("window=" + window_text(a["window"]))
    elif op == "pad":
        out.append("padding=" + "x".join(
            f"{lo}_{hi}" if not it else f"{lo}_{hi}_{it}" for lo, hi, it in a["padding"]))
    elif op == "dot":
        for key in _DOT_ATTRS:
            if a.get(key):
                out.append(f"{key}={_braced(a[key])}")
        if a.get("operand_precision"):
            out.append(f"operand_precision={{{','.join(a['operand_precision'])}}}")
    elif op == "get-tuple-element":
        out.append(f"index={a['index']}")
    elif op == "fusion":
        out.append(f"kind={a['kind']}, calls=%{a['calls'].name}")
    elif op == "while":
        out.append(f"condition=%{a['condition'].name}, body=%{a['body'].name}")
    elif op == "conditional":
        if "branch_computations" in a:
            out.append(
                "branch_computations={"
                + ", ".join(f"%{c.name}" for c in a["branch_computations"])
                + "}"
            )
        else:
            out.append(f"true_computation=%{a['true_computation'].name}, "
                       f"false_computation=%{a['false_computation'].name}")
    elif op == "custom-call":
        out.append(f'custom_call_target="{_escape(a["custom_call_target"])}"')
        if a.get("backend_config"):
            out.append(f'backend_config="{_escape(a["backend_config"])}"')
    elif op == "sort":
        out.append(f"dimensions={_braced(a.get('dimensions', ()))}")
        if a.get("is_stable"):
            out.append("is_stable=true")
    elif op in _INDEXING_ATTRS:
        for key in _INDEXING_ATTRS[op]:
            value = a.get(key)
            if key in _FLAGS:
                if value:
                    out.append(f"{key}=true")
            elif key == "index_vector_dim":
                out.append(f"{key}={value}")
            elif value or key not in _OPTIONAL_LISTS:
                out.append(f"{key}={_braced(value or ())}")
    elif op in _COLLECTIVE_ATTRS:  # XLA's order: channel, groups, the flag, dimensions
        if a.get("channel_id") is not None:
            out.append(f"channel_id={a['channel_id']}")
        if op == "collective-permute":
            out.append("source_target_pairs={" + ",".join(
                f"{{{s},{t}}}" for s, t in a["source_target_pairs"]) + "}")
        else:
            out.append("replica_groups={" + ",".join(
                _braced(g) for g in a.get("replica_groups", ())) + "}")
        if a.get("use_global_device_ids") is not None:
            out.append(f"use_global_device_ids={str(a['use_global_device_ids']).lower()}")
        if "dimensions" in a:
            out.append(f"dimensions={_braced(a['dimensions'])}")
    if "to_apply" in a:
        out.append(f"to_apply=%{a['to_apply'].name}")
    return out


def _literal_digest(array: np.ndarray) -> str:
    """A large constant by its bytes: what fingerprints and structural keys need, at memory
    speed (writing 65,536 floats as text took 0.4 s, and a traced GPT-2 has 144 such masks)."""
    h = hashlib.sha1(f"{array.dtype.str}{array.shape}".encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return f"{{digest {h.hexdigest()}}}"


def instruction_to_text(inst: Instruction, is_root: bool = False, metadata: bool = True,
                        digest_literals: bool = False) -> str:
    """One instruction's line. ``digest_literals``: constants of more than 16 elements as a
    digest of their bytes, for keys and fingerprints (not parseable)."""
    if inst.opcode == "parameter":
        args = str(inst.attrs["parameter_number"])
    elif inst.opcode == "constant":
        literal = inst.attrs["literal"]
        args = _literal_digest(literal) if digest_literals and literal.size > 16 \
            else literal_to_text(literal)
    else:
        args = ", ".join(f"%{o.name}" for o in inst.operands)
    attrs = _attributes(inst)
    attrs.extend(f"{k}={v}" for k, v in inst.attrs.get("_raw", ()))
    if metadata and inst.metadata is not None:
        attrs.append(metadata_to_text(inst.metadata))
    text = f"{'ROOT ' if is_root else ''}%{inst.name} = {inst.shape} {inst.opcode}({args})"
    return text + "".join(", " + a for a in attrs)


def computation_to_text(comp: Computation, is_entry: bool = False, metadata: bool = True,
                        digest_literals: bool = False) -> str:
    params = ", ".join(f"{p.name}: {p.shape.to_text(layout=False)}" for p in comp.parameters)
    head = (
        f"{'ENTRY ' if is_entry else ''}%{comp.name} ({params}) -> "
        f"{comp.root.shape.to_text(layout=False)} {{"
    )
    lines = [head]
    for inst in comp.instructions:
        lines.append("  " + instruction_to_text(inst, inst is comp.root, metadata,
                                                digest_literals))
    lines.append("}")
    return "\n".join(lines)


def entry_computation_layout(module: Module) -> str:
    params = ", ".join(str(p.shape) for p in module.entry.parameters)
    return f"{{({params})->{module.entry.root.shape}}}"


def module_to_text(module: Module, metadata: bool = True, digest_literals: bool = False) -> str:
    header = f"HloModule {module.name}"
    # XLA's order: input_output_alias before entry_computation_layout
    attrs = [(k, v) for k, v in module.attributes if k == "input_output_alias"]
    attrs += [("entry_computation_layout", entry_computation_layout(module))]
    attrs += [
        (k, v)
        for k, v in module.attributes
        if k not in ("entry_computation_layout", "input_output_alias")
    ]
    header += "".join(f", {k}={v}" for k, v in attrs)
    blocks = [header]
    for comp in module.computations:
        blocks.append(computation_to_text(comp, comp is module.entry, metadata, digest_literals))
    return "\n\n".join(blocks) + "\n"


TEXT_PRINTERS["module"] = module_to_text  # Module.to_text and str(module)


_COLLECTIVE_ATTRS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                     "collective-permute")


def check_printer_covers_ops() -> None:
    """Raises if an op has attributes the printer does not know how to print."""
    known = {
        "parameter_number",
        "literal",
        "iota_dimension",
        "direction",
        "type",
        "dimensions",
        "slice",
        "padding",
        "window",
        "index",
        "to_apply",
        "kind",
        "calls",
        "operand_precision",
        "is_stable",
        "custom_call_target",
        "backend_config",
        *_DOT_ATTRS,
        "condition",
        "body",
        "true_computation",
        "false_computation",
        "branch_computations",
        "replica_groups",
        "source_target_pairs",
        "channel_id",
        "use_global_device_ids",
        *(k for keys in _INDEXING_ATTRS.values() for k in keys),
    }
    from .ops import OPS

    for name, op in OPS.items():
        missing = set(opdef(name).attributes) - known
        if missing:
            raise AssertionError(f"printer cannot print {name} attributes {missing}")
