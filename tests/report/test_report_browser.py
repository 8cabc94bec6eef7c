"""report.html opened in a real browser (Debian's chromium, driven by playwright): the page renders, every
plot decodes, the contract table and the reference curve are there. Run on the canary's real GPU logs; the
page's screenshot is docs/img/canary-report.png (REFRESH_SCREENSHOT=1 rewrites it)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
from support.require import skip_or_fail

from rlrecipes.cli import main

# one xdist worker runs this module: its module fixtures are built once (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("report/test_report_browser")

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "docs" / "bench" / "gpu-data" / "canary" / "g3e4"
SCREENSHOT = REPO / "docs" / "img" / "canary-report.png"
# What a root CI container needs, and no calls home (the network here is closed).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        skip_or_fail("browser", "no chromium (Debian's package `chromium`: scripts/ci/install-system-deps.sh)")
    if importlib.util.find_spec("playwright") is None:
        skip_or_fail("browser", "playwright is not installed (it is in .venvs/dev: `make env`)")
    return path


@pytest.fixture(scope="module")
def page_of_report(tmp_path_factory):
    browser_path = chromium()
    from playwright.sync_api import sync_playwright

    out = tmp_path_factory.mktemp("report")
    code = main(["report", str(RUN), "--recipe", "canary-grpo-lora", "--profile", "any-1gpu", "--eval", str(RUN),
                 "--title", "Run report: canary-grpo-lora (one H200, run g3e4)", "--out", str(out)])
    assert code == 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.goto((out / "report.html").as_uri(), wait_until="load")
            yield page, out, errors
        finally:
            browser.close()


def test_every_plot_decodes_in_the_browser(page_of_report):
    page, out, errors = page_of_report
    images = page.eval_on_selector_all("img", "els => els.map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight])")
    pngs = sorted(p.stem for p in out.glob("*.png") if p.stem != "overview")  # overview.png: the panels again
    assert sorted(alt for alt, *_ in images) == pngs and len(images) >= 5, (images, pngs)
    for alt, complete, width, height in images:
        assert complete and width > 100 and height > 100, (alt, width, height)
    assert errors == []


def test_the_contract_table_and_the_reference_curve_are_on_the_page(page_of_report):
    page, _, _ = page_of_report
    text = page.inner_text("body")
    assert "canary-grpo-lora on any-1gpu" in text or "any-1gpu" in text
    tables = page.eval_on_selector_all("table", "ts => ts.map(t => t.innerText)")
    (contract,) = [t for t in tables if "accuracy gain" in t]
    assert contract.count("met") >= 6 and "missed" not in contract.replace("0 missed", "")
    assert "h200-canary-grpo-lora" in text and "docs/bench/gpu-canary.md" in text
    # the page is laid out: a body that is taller than one screen, not an empty or unstyled dump
    assert page.evaluate("document.body.scrollHeight") > 900


def test_the_page_screenshots_and_docs_keep_one(page_of_report):
    """docs/img/canary-report.png is taken here (REFRESH_SCREENSHOT=1); pixels vary with fonts, so it is not
    compared, only kept."""
    page, _, _ = page_of_report
    shot = page.screenshot(full_page=False)
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
    if os.environ.get("REFRESH_SCREENSHOT") == "1":
        SCREENSHOT.write_bytes(shot)
    assert SCREENSHOT.is_file() and SCREENSHOT.stat().st_size > 20_000, "REFRESH_SCREENSHOT=1 writes it"
