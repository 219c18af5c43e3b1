"""The Fusion tab (static report and widget): which program each decision belongs to, and the
memory traffic each fused edge saves, with no column of zeros for the rejections."""
import re
from html import unescape

import numpy as np

import toolkit as tk
from toolkit.widgets.report import fusion_section


def _rows(html: str, after: str) -> tuple[list[str], list[list[str]]]:
    table = html[html.index(after):]
    table = table[table.index("<table>"):table.index("</table>")]
    cells = [[unescape(re.sub("<[^>]+>", "", c)) for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", row)]
             for row in re.findall(r"<tr>(.*?)</tr>", table)]
    return cells[0], cells[1:]


def test_a_function_compiled_at_two_shapes_has_its_rows_told_apart():
    f = tk.jit(lambda x: np.exp(x - x.max(axis=-1, keepdims=True)), backend="interpreter")
    with tk.profile() as prof:
        f(np.ones((4, 8), np.float32))
        f(np.ones((2, 8), np.float32))
    html = fusion_section(prof)
    header, rejected = _rows(html, "not fused")
    assert header[0] == "program" and "bytes saved (est.)" not in header  # nothing saved there
    programs = {r[0] for r in rejected}
    assert len(programs) == 2, programs
    assert all("f32[4,8]" in p or "f32[2,8]" in p for p in programs), programs
    keyed = [tuple(r[:3]) for r in rejected]
    assert len(keyed) == len(set(keyed)), "no two rows alike"
    header, fused = _rows(html, "<summary>fused (")
    assert header[0] == "program" and header[-1] == "bytes saved (est.)"
    saved = [int(r[-1].replace(",", "")) for r in fused]
    assert all(b > 0 for b in saved)
    by_program = {p: sum(int(r[-1].replace(",", "")) for r in fused if r[0] == p) for p in programs}
    big, small = (by_program[p] for p in sorted(programs, key=lambda p: "f32[2,8]" in p))
    assert 1.9 * small <= big <= 2 * small  # twice the rows, twice the traffic (constants aside)
    total = sum(d.bytes_saved for d in prof.fusion_decisions)
    assert f"saving {total / 1e6:.2f} MB" in html
