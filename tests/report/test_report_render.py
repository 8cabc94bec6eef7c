"""The report's HTML comes from markdown-it-py (the Markdown report, rendered), and its plots have whole-number
step axes."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rlrecipes.cli import main
from rlrecipes.verl.run_metrics import load_run
from rlrecipes.report.plots import PANELS, panel_keys


def _console_run(tmp_path: Path, steps: int, extra: str = "") -> Path:
    log = tmp_path / "console-x.log"
    log.write_text("".join(f"(TaskRunner pid=1) step:{s} - critic/score/mean:{s / 10}{extra}\n"
                           for s in range(1, steps + 1)))
    return log


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_html_renders_the_markdown_code_and_tables(tmp_path):
    out = tmp_path / "rep"
    assert main(["report", "--log", str(_console_run(tmp_path, 4)), "--out", str(out),
                 "--title", "run <b>x</b> | `y`"]) == 0
    page = (out / "report.html").read_text()
    parsed = _Text()
    parsed.feed(page)
    text = "".join(parsed.text)
    # the hand renderer showed `critic/score/mean` with its backticks; Markdown makes it code
    assert "<code>critic/score/mean</code>" in page
    assert "`critic/score/mean`" not in text
    assert "<table>" in page and "<th>" in page
    # a title from the command line is text, never markup
    assert "<b>" not in page and "run &lt;b&gt;x&lt;/b&gt;" in page
    assert "b" not in parsed.tags
    # the plots are embedded: the page stands alone
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 1 and base64.b64decode(images[0])[:4] == b"\x89PNG"
    assert "reward.png" not in re.findall(r'src="([^"]+)"', page)


def test_a_pipe_in_a_table_cell_stays_in_its_cell(tmp_path):
    from rlrecipes.report.writer import _md_table

    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render("\n".join(_md_table(["a", "b"], [["x|y", "z"]])))
    assert html.count("<td>") == 2 and "<td>x|y</td>" in html


@pytest.mark.parametrize("steps", [2, 3, 5, 9])
def test_step_axes_have_whole_number_ticks(tmp_path, steps):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlrecipes.report.plots import _draw

    run = load_run(logs=[_console_run(tmp_path, steps)])
    panel = next(p for p in PANELS if p.name == "reward")
    fig, ax = plt.subplots()
    try:
        _draw(ax, run, panel, panel_keys(panel, run.keys))
        fig.canvas.draw()
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
    finally:
        plt.close(fig)
