"""The soak script runs (its figures, over 10,000 calls and 1,000 compiles, are in the README)."""
import io

import toolkit.soak as soak


def test_the_soak_script_reports_every_phase():
    out = io.StringIO()
    phases = soak.run(calls=300, compiles=3, threads=3, backend="cpu", out=out)
    text = out.getvalue()
    assert len(phases) == 7 and "ERRORS" not in text
    assert "threads calling at once" in text and "B/compile" in text
    assert soak.rss_bytes() > 0
