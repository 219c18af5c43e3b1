"""Shared colours: one per fusion kind, used by every plot and the HTML reports."""
KIND_COLORS = {
    "kLoop": "#4C72B0", "kInput": "#DD8452", "kOutput": "#55A868", "kCustom": "#8172B3",
    "dot": "#C44E52", "fusion": "#4C72B0",
}
PHASE_COLORS = {"trace": "#9ecae1", "passes": "#6baed6", "llvm_ir": "#fdae6b",
                "llvm_optimize": "#fd8d3c", "machine_code": "#e6550d", "cache_load": "#31a354",
                "backend_compile": "#fd8d3c"}
OTHER = "#999999"


def kind_color(kind: str) -> str:
    return KIND_COLORS.get(kind, OTHER)


def literal(text: str) -> str:
    """User text (function, kernel and file names, recompile causes, device names) shown as
    typed: matplotlib reads ``$...$`` as math text, and a name like ``cost$`` would otherwise
    make drawing raise."""
    return str(text).replace("$", r"\$")
