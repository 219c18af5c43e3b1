"""IPython magics: ``%%xla``, ``%xla_profile``/``%%xla_profile``, ``%xla_hlo``,
``%xla_recompiles``."""
from __future__ import annotations

import ast
import html
import statistics
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from IPython.core.magic import Magics, cell_magic, line_cell_magic, line_magic, magics_class
from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from .. import api
from ..backends import backend_names
from ..frontend.errors import ToolkitError
from ..frontend.source_info import user_location
from ..ir.ops import GroupOp
from ..ir.source_names import display_location, notebook_cell, register_cell_resolver
from ..profiler import Profile, profile
from ..profiler.report import recompile_text
from ..widgets.report import SECTIONS
from .cell import analyze, build_function, is_array_value


def extra_output_notes(compiled, outputs) -> list[str]:
    """What returning intermediates costs: an output that other values of the cell are computed
    from must be written to memory whole, where it would otherwise stay inside a fused kernel.
    (``_name`` keeps a name local; ``--out`` chooses the outputs.)"""
    root = compiled.hlo.entry.root
    values = list(root.operands) if root.opcode == "tuple" else [root]
    users = compiled.hlo.entry.users()
    costly = []
    for name, inst in zip(outputs, values):
        if any(u is not root for u in users.get(inst, ())) and inst.opcode not in GroupOp.GIVEN:
            costly.append((name, inst.shape))
    if not costly:
        return []
    listed = ", ".join(f"{n} ({s.to_text(False)}, {s.nbytes / 1e6:.2f} MB)" for n, s in costly)
    kept = [n for n in outputs if n not in {c for c, _ in costly}]
    return [
        f"{', '.join(n for n, _ in costly)} "
        f"{'is an intermediate' if len(costly) == 1 else 'are intermediates'} "
        f"the cell also returns: each is written to memory whole ({listed}) and ends a fused "
        "kernel early. "
        f"Name {'it' if len(costly) == 1 else 'them'} with a leading underscore to keep "
        f"{'it' if len(costly) == 1 else 'them'} "
        f"local, or choose the outputs with --out {','.join(kept) or 'NAMES'}."
    ]


def _fail(message: str):
    """A bad magic invocation (an unknown option, backend or tab) fails the cell (Run All stops,
    ``nbconvert --execute`` exits non-zero) as IPython's UsageError: one line, no traceback
    (IPython shows that type, exactly, without one)."""
    raise UsageError(message) from None


def _fail_as_cell(error: BaseException, message: str):
    """The user's code failed: the cell fails with that error (its own type, e.g. ``NameError``,
    is what a kernel reports as ``ename``), shown as the one line ``message``. IPython renders
    an exception with ``_render_traceback_`` by that method, instead of a traceback."""
    error._render_traceback_ = lambda: [message]
    raise error.with_traceback(None) from None


MAX_CELL_NAMES = 1024  # %%xla cells' files whose notebook cells are remembered
_cell_names: OrderedDict[str, str] = OrderedDict()  # %%xla cell file -> "cell [5]"


def _running_cell() -> str | None:
    """``cell [5]``: the notebook cell running this magic (the first frame outside toolkit and
    IPython is the cell's code, whose file the shell maps to its execution count)."""
    here = user_location(1)
    found = notebook_cell(here.file) if here is not None else None
    return found[0] if found is not None else None


def _remember_cell(filename: str, cell_name: str | None) -> None:
    if cell_name is not None:
        _cell_names[filename] = cell_name
        _cell_names.move_to_end(filename)
        while len(_cell_names) > MAX_CELL_NAMES:
            _cell_names.popitem(last=False)


def xla_cell_name(filename: str) -> tuple[str, int] | None:
    """A ``%%xla`` cell's file as the cell that ran it: ``cell [5]``, whose line 1 is the
    ``%%xla`` line (so the body's line 1 is the cell's line 2)."""
    if not filename.startswith("<xla-cell-"):
        return None
    name = _cell_names.get(filename)
    return (name, 1) if name is not None else ("%%xla cell", 0)


register_cell_resolver(xla_cell_name)


def _cell_line(error: BaseException, filename: str) -> int | None:
    """The line of the ``%%xla`` cell where ``error`` was raised, from its traceback."""
    line, tb = None, error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


@dataclass
class CellResult:
    """What ``%%xla -o VAR`` stores: the outputs, the profile, the compiled program, timings."""

    outputs: dict
    profile: Profile
    compiled: object
    timings: list[float] = field(default_factory=list)  # seconds per steady-state run
    recompiled: bool = False

    @property
    def best(self) -> float | None:
        return min(self.timings) if self.timings else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.timings) if self.timings else None

    def __repr__(self) -> str:
        t = f", best {self.best * 1e3:.3f} ms" if self.timings else ""
        return f"<%%xla result: {', '.join(self.outputs)}{t}>"


def _steady_state(fn, call_args, args) -> list[float]:
    """Seconds of each of ``--repeat`` runs after ``--warmup`` more (none without --repeat)."""
    timings: list[float] = []
    if args.repeat:
        for _ in range(args.warmup):
            fn(*call_args)
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fn(*call_args)
            timings.append(time.perf_counter() - t0)
    return timings


def _print_timings(timings: list[float], args) -> None:
    if timings:
        print(
            f"{len(timings)} runs after {args.warmup} warm-up: best {min(timings) * 1e3:.3f} "
            "ms, "
            f"median {statistics.median(timings) * 1e3:.3f} ms, spread "
            f"{(max(timings) - min(timings)) * 1e3:.3f} ms (compile time excluded)"
        )


def _dashboard(prof, compiled, tabs, title):
    from ..widgets.dashboard import Dashboard

    ceilings = None
    if "Roofline" in tabs and prof.kernels:
        from ..roofline import measure_ceilings

        ceilings = measure_ceilings(progress=False)
    return Dashboard(prof, ceilings, compiled, title, tabs)


def _tabs(spec: str | None) -> tuple:
    if not spec:
        return SECTIONS
    wanted = [s.strip().lower() for s in spec.split(",") if s.strip()]
    by_name = {s.lower(): s for s in SECTIONS}
    unknown = [w for w in wanted if w not in by_name]
    if unknown:
        raise ValueError(f"unknown tab(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    return tuple(by_name[w] for w in wanted)


def _parse(magic, line: str):
    """Options; bad ones fail the cell with the usage and a one-line error (never a traceback)."""
    try:
        return parse_argstring(magic, line)
    except SystemExit:  # --help: argparse printed it and exits
        return None
    except UsageError as e:
        usage = magic.parser.format_usage().strip()
        raise UsageError(f"{e}\n{usage}") from None


MAX_CELLS = 32  # %%xla cells whose compiled functions are kept (least recently run go first)


def _cell_id(shell) -> str | None:
    """The notebook cell being run, where the front end says (JupyterLab and Notebook 7 send
    ``cellId`` in the request's metadata); None in terminal IPython."""
    kernel = getattr(shell, "kernel", None)
    try:
        parent = kernel.get_parent() if kernel is not None else None
    except Exception:  # noqa: BLE001 - older kernels keep it elsewhere; the LRU bound still holds
        parent = None
    metadata = (parent or {}).get("metadata") or {}
    cell_id = metadata.get("cellId")
    return cell_id if isinstance(cell_id, str) else None


@magics_class
class XlaMagics(Magics):
    def __init__(self, shell):
        super().__init__(shell)
        # (cell source, backend, static names) -> jitted function, least recently run first
        self._cells: OrderedDict = OrderedDict()
        self._key_of_cell: dict[str, tuple] = {}  # notebook cell id -> its current key
        self._last_cell = None  # the program the last %%xla cell ran: what a bare %xla_hlo shows

    def _function_for(self, key: tuple, make):
        """The jitted function of a cell: an edited cell drops its old function (and the
        compiled programs it holds); past MAX_CELLS cells the least recently run goes."""
        cell_id = _cell_id(self.shell)
        if cell_id is not None:
            previous = self._key_of_cell.get(cell_id)
            if previous is not None and previous != key:
                self._cells.pop(previous, None)
            self._key_of_cell[cell_id] = key
        fn = self._cells.get(key)
        if fn is None:
            fn = self._cells[key] = make()
        self._cells.move_to_end(key)
        while len(self._cells) > MAX_CELLS:
            dropped, _ = self._cells.popitem(last=False)
            for cid in [c for c, k in self._key_of_cell.items() if k == dropped]:
                del self._key_of_cell[cid]
        return fn

    @cell_magic
    @magic_arguments()
    @argument("--backend", default=None, help="cpu, gpu, interpreter (default: the best available)")
    @argument(
        "--out",
        default=None,
        help="comma-separated names the cell returns (default: every name it "
        "assigns that does not start with _)",
    )
    @argument(
        "--repeat", type=int, default=0, help="time this many steady-state runs after warm-up"
    )
    @argument("--warmup", type=int, default=1, help="warm-up runs before --repeat timing")
    @argument("--static", default="", help="comma-separated names to treat as static")
    @argument("--show", default=None, help="comma-separated tabs: " + ", ".join(SECTIONS))
    @argument("-o", dest="output", default=None, help="store the result object in this variable")
    @argument("--quiet", action="store_true", help="no dashboard")
    @argument("--fullgraph", action="store_true",
              help="one compiled program or an error: a graph break fails the cell")
    @argument("--trace", default=None, help="write a Chrome/Perfetto trace to this file")
    @argument("--ranks", type=int, default=0,
              help="run the cell on N host devices, as tk.shard_map over a 1-d mesh whose axis "
                   "is --axis (tk.lax.psum(x, 'ranks') ... inside the cell)")
    @argument("--axis", default="ranks", help="the mesh axis name for --ranks (default: ranks)")
    @argument("--split", default="",
              help="with --ranks: comma-separated inputs and outputs split along their first "
                   "dimension over the devices (the others are the same on every device)")
    def xla(self, line, cell):
        """Compile the cell as one computation and run it; show what the compiler did."""
        args = _parse(self.xla, line)
        if args is None:
            return None
        try:
            tabs = _tabs(args.show)
        except ValueError as e:
            _fail(str(e))
        if args.backend is not None and args.backend not in backend_names():
            _fail(f"unknown backend {args.backend!r}; choose from {', '.join(backend_names())}")
        ns = self.shell.user_ns
        running = _running_cell()
        try:
            info = analyze(cell)
        except SyntaxError as e:  # the cell's line e.lineno + 1: its line 1 is the %%xla line
            # (a UsageError: IPython shows any SyntaxError as a parse error of the cell's text)
            where = f"{running or 'the %%xla cell'}, line {(e.lineno or 0) + 1}"
            _fail(f"SyntaxError at {where}: {e.msg}")
        _remember_cell(info.filename, running)
        forced_static = {s.strip() for s in args.static.split(",") if s.strip()}
        params, statics = [], []
        for name in info.inputs:
            if name not in ns:
                continue  # a builtin or an error the cell itself will raise
            value = ns[name]
            if name in forced_static:
                statics.append(name)
            elif is_array_value(value):
                params.append(name)
            elif isinstance(value, (int, float, bool, str, tuple, type(None))):
                statics.append(name)
        if args.out is not None:
            outputs = tuple(n.strip() for n in args.out.split(",") if n.strip())
            unknown = [n for n in outputs if n not in info.outputs]
            if unknown:
                _fail(f"--out names {', '.join(unknown)}, which the cell does not assign")
        else:  # _names stay local to the cell: no output, no kernel to write them
            outputs = tuple(n for n in info.outputs if not n.startswith("_"))
        if args.ranks:
            return self._xla_ranks(args, info, params, statics, outputs, ns, tabs)
        key = (cell, args.backend, tuple(statics), outputs, args.fullgraph)

        def make():
            made = api.jit(
                build_function(info, params + statics, ns, outputs),
                static_argnames=tuple(statics),
                backend=args.backend,
                on_recompile="ignore",
                fullgraph=args.fullgraph,
            )
            made.call_site_hint = "%%xla cell"
            return made

        fn = self._function_for(key, make)
        call_args = [ns[n] for n in params] + [ns[n] for n in statics]
        before = fn.recompile_count
        try:
            with profile(name="%%xla") as prof:
                outputs = fn(*call_args)
                timings = _steady_state(fn, call_args, args)
        except ToolkitError as e:
            _fail_as_cell(e, f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - the cell's own error (a NameError ...): fail, name the line
            line_no = _cell_line(e, info.filename)
            if line_no is None:
                raise  # toolkit's own error: the whole traceback
            where = display_location(info.filename, line_no)
            _fail_as_cell(e, f"{type(e).__name__} at {where}: {e}")
        ns.update(outputs)
        # the program this run used (cached: no compile); a cell that broke its graph ran in
        # segments, which the profile's graph-break events show instead
        compiled = None if fn.runs_in_segments(*call_args) else fn.compiled(*call_args)
        recompiled = fn.recompile_count > before
        if compiled is not None:
            self._last_cell = compiled
            prof.notes.extend(extra_output_notes(compiled, outputs))
        if compiled is not None and not prof.compiles:  # a re-run: the program came from the cache
            prof.adopt_compile(
                compiled,
                f"compiled earlier (compile #{compiled.compile_id}), reused from the cache",
            )
        if recompiled:
            print(recompile_text(fn.recompiles[-1]))
        _print_timings(timings, args)
        if args.trace:
            prof.to_chrome_trace(args.trace)
            print(f"trace written to {args.trace} (open it in https://ui.perfetto.dev)")
        result = CellResult(outputs, prof, compiled, timings, recompiled)
        if args.output:
            ns[args.output] = result
        if not args.quiet:
            display(_dashboard(prof, {"cell": compiled} if compiled else {}, tabs, "%%xla"))
        return None

    def _xla_ranks(self, args, info, params, statics, outputs, ns, tabs):
        """``%%xla --ranks N``: the cell is every device's program (tk.shard_map over a 1-d mesh
        of N host devices); ``--split`` names the inputs split along their first dimension and
        the outputs assembled along it; every other output is JAX's promise that the devices
        agree, checked."""
        from ..frontend.collectives import Mesh, P
        from ..spmd import shard_map

        if args.ranks < 1:
            _fail(f"--ranks {args.ranks}: give a number of devices >= 1")
        split = {n.strip() for n in args.split.split(",") if n.strip()}
        unknown = sorted(split - set(params) - set(outputs))
        if unknown:
            _fail(f"--split names {', '.join(unknown)}, which is neither an array the cell reads "
                  "nor a name it assigns")
        static_values = tuple((n, ns[n]) for n in statics)
        key = ("ranks", args.ranks, args.axis, info.source, args.backend, static_values, outputs,
               tuple(sorted(split)))

        def make():
            body = build_function(info, params + statics, ns, outputs)
            mesh = Mesh((args.ranks,), (args.axis,))

            def xla_cell(*arrays):
                result = body(*arrays, *(v for _, v in static_values))
                missing = [n for n in outputs if n not in result]
                if missing:
                    raise NameError(f"the cell did not assign {', '.join(missing)} on this "
                                    "device: with --ranks every output must be assigned")
                return tuple(result[n] for n in outputs)
            return shard_map(xla_cell, mesh,
                             in_specs=tuple(P(args.axis) if n in split else P() for n in params),
                             out_specs=tuple(P(args.axis) if n in split else P()
                                             for n in outputs),
                             backend=args.backend)

        fn = self._function_for(key, make)
        call_args = [ns[n] for n in params]
        try:
            with profile(name=f"%%xla --ranks {args.ranks}") as prof:
                values = fn(*call_args)
                timings = _steady_state(fn, call_args, args)
        except ToolkitError as e:
            _fail_as_cell(e, f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - the cell's own error, or a broken promise
            line_no = _cell_line(e, info.filename)
            where = display_location(info.filename, line_no) if line_no else "the %%xla cell"
            _fail_as_cell(e, f"{type(e).__name__} at {where}: {e}")
        results = dict(zip(outputs, values))
        ns.update(results)
        programs = fn.compiled_programs()
        compiled = programs[-1] if programs else None
        _print_timings(timings, args)
        if args.trace:
            prof.to_chrome_trace(args.trace)
            print(f"trace written to {args.trace} (open it in https://ui.perfetto.dev)")
        if args.output:
            ns[args.output] = CellResult(results, prof, compiled, timings)
        if not args.quiet:
            display(_dashboard(prof, {"device program": compiled} if compiled else {}, tabs,
                               f"%%xla --ranks {args.ranks}"))
        return None

    @line_cell_magic
    def xla_profile(self, line, cell=None):
        """Run Python code and profile every tk.jit function it calls."""
        code = cell if cell is not None else line
        if cell is None and line.strip() in ("-h", "--help"):
            print(self.xla_profile.__doc__)
            return None
        with profile(name="%xla_profile") as prof:
            self.shell.run_cell(code, store_history=False)
        self.shell.user_ns["_xla_profile"] = prof
        display(_dashboard(prof, {}, SECTIONS[:-1], "%xla_profile"))

    @line_magic
    @magic_arguments()
    @argument(
        "--stage",
        default="optimized_hlo",
        choices=["hlo", "optimized_hlo", "llvm", "asm", "ptx", "sass"],
    )
    @argument(
        "expression",
        nargs="*",
        help="a call of a jitted function, e.g. f(x) (default: the last %%xla cell)",
    )
    def xla_hlo(self, line):
        """The IR of a jitted call at a stage, highlighted; bare, the last ``%%xla`` cell's."""
        args = _parse(self.xla_hlo, line)
        if args is None:
            return None
        if not args.expression:
            if self._last_cell is None:
                _fail("no %%xla cell has run yet: run one, or name a call such as %xla_hlo f(x)")
            self._show_ir(self._last_cell, args.stage)
            return None
        source = " ".join(args.expression)
        try:
            call = ast.parse(source, mode="eval").body
            if not isinstance(call, ast.Call):
                raise ValueError
        except (SyntaxError, ValueError):
            _fail(f"%xla_hlo expects a call such as f(x), got {source!r}")
        ns = self.shell.user_ns
        try:
            fn = eval(compile(ast.Expression(call.func), "<xla_hlo>", "eval"), ns)  # noqa: S307
            values = [eval(compile(ast.Expression(a), "<xla_hlo>", "eval"), ns) for a in call.args]  # noqa: S307
        except Exception as e:  # noqa: BLE001 - the user's expression: one line, no traceback
            _fail_as_cell(e, f"cannot evaluate {source!r}: {type(e).__name__}: {e}")
        if not isinstance(fn, api.JitFunction):
            _fail(f"{ast.unparse(call.func)} is not a function made by tk.jit")
        try:  # compiled through the function's cache: its history (%xla_recompiles) counts it
            compiled = fn.compiled(*values)
        except (ToolkitError, ValueError, RuntimeError) as e:
            _fail_as_cell(e, f"{type(e).__name__}: {e}")
        self._show_ir(compiled, args.stage)
        return None

    @staticmethod
    def _show_ir(compiled, stage: str) -> None:
        try:
            text = compiled.as_text(stage)
        except ValueError as e:  # a stage this backend does not have: the option was wrong
            _fail(str(e))
        display(_Text(text, highlight(text)))

    @line_magic
    def xla_recompiles(self, line):
        """The session's recompilation report, or one function's."""
        name = line.strip()
        fn = None
        if name:
            fn = self.shell.user_ns.get(name)
            if not isinstance(fn, api.JitFunction):
                _fail(f"{name} is not a function made by tk.jit")
        display(api.explain_recompiles(fn))
        return None


class _Text:
    """A display with HTML for notebooks and the plain text for terminals (text/plain)."""

    def __init__(self, text: str, html_text: str):
        self._text, self._html = text, html_text

    def _repr_html_(self) -> str:
        return self._html

    def __repr__(self) -> str:
        return self._text


XlaMagics.xla.parser.prog = "%xla"  # the usage line prefixes one more %: "%%xla", a cell magic

_KEYWORDS = ("ENTRY", "ROOT", "HloModule", "define", "ret", "fusion", "kind=")


def highlight(text: str) -> str:
    """HLO/LLVM text as HTML: opcodes after '=' in bold, comments grey; everything escaped."""
    out = []
    for line in text.splitlines():
        esc = html.escape(line)
        if line.lstrip().startswith((";", "//", "#")):
            out.append(f"<span style='color:#6a737d'>{esc}</span>")
            continue
        for kw in _KEYWORDS:
            esc = esc.replace(kw, f"<b>{kw}</b>")
        out.append(esc)
    return "<pre style='font-size:11px'>" + "\n".join(out) + "</pre>"
