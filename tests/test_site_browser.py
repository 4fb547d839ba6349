"""The built site in a real browser: headless Chromium (Debian's `chromium` and
`chromium-driver`), driven through Selenium, against a local HTTP server.

Screenshots land in test-artifacts/site/ (git-ignored). Without the browser the tests skip,
saying how to install it; with KERNELBOARD_REQUIRE_SYSTEM_TOOLS=1 (CI) they fail instead.
The layout is checked at a laptop's width (1280 px) and a phone's (390 px).
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import BROWSER_INSTALL, REQUIRE_SYSTEM_TOOLS, missing_system_tool

from pytest_kernelboard.spec.discovery import load_catalog
from site_generator.build import build_site
from site_generator.cli import serve

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "site"
ARTIFACTS = REPO / "test-artifacts" / "site"
NOW = dt.datetime(2025, 6, 15, 12, 0, tzinfo=dt.UTC)
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-prefers-reduced-motion",
]


def _find(env: str, *names: str) -> str | None:
    if os.environ.get(env):
        return os.environ[env]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_tools(what: str) -> tuple[str, str]:
    """(chromium, chromedriver), or skip saying which of the two this machine lacks (fail under
    KERNELBOARD_REQUIRE_SYSTEM_TOOLS=1): Debian packages them apart, and a browser without its
    driver cannot be driven."""
    chromium = _find("KB_CHROMIUM", "chromium", "chromium-browser")
    driver = _find("KB_CHROMEDRIVER", "chromedriver")
    if chromium and driver:
        return chromium, driver
    if chromium:
        lacking = f"chromedriver (chromium is installed, at {chromium}, but not its driver)"
    elif driver:
        lacking = f"chromium (chromedriver is installed, at {driver}, but not the browser)"
    else:
        lacking = "headless Chromium and its driver"
    missing_system_tool(
        f"{what} needs {lacking}; KB_CHROMIUM and KB_CHROMEDRIVER may name them", BROWSER_INSTALL
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "_site"
    build_site(FIXTURE, out, now=NOW)
    server = serve(out, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("the browser test needs the `selenium` package (pip install selenium)")
    chromium, driver_path = browser_tools("the browser test")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="kb-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument("--window-size=1280,900")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def screenshot(driver, name: str, width: int = 1280, mobile: bool = False) -> Path:
    """A full-page PNG under test-artifacts/site/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.execute_script("window.scrollTo(0, 0)")
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": mobile},
    )
    height = driver.execute_script("return document.documentElement.scrollHeight")
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 8000), "scale": 1},
        },
    )
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    path = ARTIFACTS / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def click(driver, element) -> None:
    """Click after scrolling the element to the middle (the header is sticky)."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def visible_panel(driver):
    panels = [p for p in driver.find_elements("css selector", "section.panel") if p.is_displayed()]
    assert len(panels) == 1, "exactly one device panel is shown when JavaScript runs"
    return panels[0]


def ranking_authors(panel) -> list[str]:
    return [
        row.get_attribute("data-author")
        for row in panel.find_elements("css selector", "table.ranking tbody tr.entry")
    ]


def test_site_in_browser(site, browser):
    driver = browser
    by = "css selector"

    # --- index: every leaderboard, status, podium with medals
    driver.get(site + "index.html")
    names = sorted(t.get_attribute("data-leaderboard") for t in driver.find_elements(by, "li.tile"))
    assert names == sorted(load_catalog(FIXTURE).tasks)
    tile = driver.find_element(by, 'li.tile[data-leaderboard="vecadd"]')
    assert tile.find_element(by, ".status").text.lower() == "closing in 5 days"
    status = driver.find_element(by, 'li.tile[data-leaderboard="softmax"] .status').text.lower()
    assert status == "closed"
    podium = tile.find_elements(by, ".tile-device")[0].find_elements(by, ".podium li")
    assert [li.find_element(by, "a").text for li in podium] == ["alice", "bob", "carol"]
    medals = [li.find_element(by, ".medal").get_attribute("class").split()[-1] for li in podium]
    assert medals == ["gold", "silver", "bronze"]
    assert console_errors(driver) == []
    screenshot(driver, "index")
    screenshot(driver, "index-phone", width=390, mobile=True)

    # --- leaderboard: order, medals, ties, baseline, charts, heat map, tabs
    click(driver, tile.find_element(by, "h2 a"))
    assert driver.current_url.endswith("lb/vecadd/index.html")
    panel = visible_panel(driver)
    assert panel.get_attribute("data-device") == "H100"
    assert ranking_authors(panel) == ["alice", "bob", "carol", "dave", "erin"]
    rows = panel.find_elements(by, "table.ranking tbody tr.entry")
    assert [r.find_elements(by, ".medal")[0].get_attribute("title") for r in rows[:3]] == [
        "gold",
        "silver",
        "bronze",
    ]
    assert not rows[3].find_elements(by, ".medal")
    tied = [
        r.get_attribute("data-author") for r in rows if "tied" in r.get_attribute("class").split()
    ]
    assert tied == ["bob"]
    assert "tied with #1" in rows[1].text
    baseline = panel.find_element(by, "table.ranking tr.baseline")
    assert "reference" in baseline.text

    history = panel.find_element(by, "svg.chart.history")
    assert history.size["width"] > 200 and history.size["height"] > 80
    assert len(history.find_element(by, "path.best-line").get_attribute("d")) > 10
    assert len(history.find_elements(by, "circle.best")) >= 2
    fastp = panel.find_element(by, "svg.chart.fastp")
    assert len(fastp.find_elements(by, "g.series")) == 5
    cells = panel.find_elements(by, "table.heatmap td.cell")
    assert len(cells) == 5 * 4
    colours = {c.value_of_css_property("background-color") for c in cells}
    assert len(colours) > 3, "heat map cells are coloured by speedup"
    dave = [r for r in panel.find_elements(by, "table.heatmap tbody tr") if "dave" in r.text][0]
    assert "7.50" in dave.text

    # sortable: by author, then back by rank
    author_header = panel.find_elements(by, "table.ranking thead th")[1]
    click(driver, author_header)
    click(driver, author_header)
    assert ranking_authors(panel) == ["erin", "dave", "carol", "bob", "alice"]
    click(driver, panel.find_elements(by, "table.ranking thead th")[0])
    assert ranking_authors(panel)[0] == "alice"

    # tooltip on a chart mark
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).move_to_element(history.find_elements(by, "circle.best")[-1]).perform()
    tip = driver.find_element(by, ".tip")
    assert "alice" in tip.text
    screenshot(driver, "leaderboard")
    screenshot(driver, "leaderboard-phone", width=390, mobile=True)

    # device tabs switch
    click(driver, driver.find_element(by, '.tabs a[data-panel="dev-A100"]'))
    panel = visible_panel(driver)
    assert panel.get_attribute("data-device") == "A100"
    assert ranking_authors(panel) == ["carol", "alice", "bob"]
    assert (
        driver.find_element(by, '.tabs a[data-panel="dev-A100"]').get_attribute("aria-selected")
        == "true"
    )
    assert driver.current_url.endswith("#dev-A100")

    # dark theme toggle
    click(driver, driver.find_element(by, "#theme-toggle"))
    theme = driver.execute_script("return document.documentElement.getAttribute('data-theme')")
    assert theme in ("dark", "light")
    if theme == "light":
        click(driver, driver.find_element(by, "#theme-toggle"))
    screenshot(driver, "leaderboard-dark")
    driver.execute_script("localStorage.removeItem('kb-theme')")
    assert console_errors(driver) == []

    # --- submission before the deadline: no code
    driver.get(site + "lb/vecadd/index.html#dev-H100")
    click(
        driver,
        visible_panel(driver).find_element(by, "table.ranking tbody tr.entry td:nth-child(3) a"),
    )
    assert "/lb/vecadd/runs/" in driver.current_url
    assert not driver.find_elements(by, "#code .hl")
    assert (
        "after the deadline, 2025-06-20 12:00 UTC" in driver.find_element(by, "#code-hidden").text
    )
    assert "--kb-replay results/vecadd/H100/" in driver.find_element(by, "pre.command").text
    assert console_errors(driver) == []

    # --- submission after the deadline (softmax closed): highlighted code, capsule, spread
    driver.get(site + "lb/softmax/index.html")
    click(
        driver,
        visible_panel(driver).find_element(by, "table.ranking tbody tr.entry td:nth-child(3) a"),
    )
    tokens = driver.find_elements(by, "#code .hl span.k, #code .hl span.kn, #code .hl span.nf")
    assert len(tokens) >= 3, "code is highlighted by Pygments"
    capsule = driver.find_element(by, ".capsule").text
    for needle in ("H100 80GB", "1980 MHz", "550.54.15", "12.4", "3f2a9c1", "seeds"):
        assert needle in capsule
    assert driver.find_elements(by, "table.cases svg.spread")
    assert console_errors(driver) == []
    screenshot(driver, "submission")
    screenshot(driver, "submission-phone", width=390, mobile=True)


# -- layout at a laptop's width and a phone's ---------------------------------------------------

WIDTHS = {"laptop": 1280, "phone": 390}
SOFTMAX_RUN = "lb/softmax/runs/1fa5b83d397986f6621e717a723c68f7-0.html"


@pytest.fixture
def viewport(browser):
    """Emulate a screen `width` CSS pixels wide (a phone below 500: mobile viewport rules)."""

    def set_width(width: int) -> None:
        browser.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 500},
        )

    yield set_width
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def page_overflow_px(driver) -> int:
    """How far the page is wider than the screen (0: no sideways scrolling of the page)."""
    return driver.execute_script(
        "const e = document.documentElement; return e.scrollWidth - e.clientWidth"
    )


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_no_page_scrolls_sideways(site, browser, viewport, width):
    viewport(width)
    for path in ("index.html", "lb/vecadd/index.html", "lb/softmax/index.html", SOFTMAX_RUN):
        browser.get(site + path)
        assert page_overflow_px(browser) <= 0, f"{path} at {width} px"
        assert console_errors(browser) == []


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_device_tabs_have_no_vertical_scrollbar(site, browser, viewport, width):
    viewport(width)
    browser.get(site + "lb/vecadd/index.html#dev-A100")
    tabs = browser.find_element("css selector", ".tabs")
    sizes = browser.execute_script(
        "const t = arguments[0]; return [t.scrollHeight, t.clientHeight]", tabs
    )
    assert sizes[0] <= sizes[1], f"the tab bar overflows vertically: {sizes}"


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_per_case_table_is_fully_reachable(site, browser, viewport, width):
    viewport(width)
    browser.get(site + SOFTMAX_RUN)
    reach = browser.execute_script(
        """
        const table = document.querySelector("table.cases");
        const box = table.closest(".scroll");
        const before = box.scrollWidth - box.clientWidth;
        box.scrollLeft = box.scrollWidth;  // as far right as a finger or a scrollbar goes
        const cells = [...table.tHead.rows[0].cells].filter(c => c.offsetParent !== null);
        const last = cells[cells.length - 1].getBoundingClientRect();
        const edge = box.getBoundingClientRect();
        return {overflow: before, scrolls: getComputedStyle(box).overflowX,
                lastRight: last.right, boxRight: edge.right, boxLeft: edge.left,
                screen: document.documentElement.clientWidth, columns: cells.length};
        """
    )
    assert reach["boxLeft"] >= 0 and reach["boxRight"] <= reach["screen"], reach
    assert reach["lastRight"] <= reach["boxRight"] + 1, (
        f"the last column stays out of reach: {reach}"
    )
    if width >= 1280:
        assert reach["overflow"] <= 0, f"cut off at {width} px: {reach}"  # it simply fits
        assert reach["columns"] == 9
    else:
        assert reach["scrolls"] in ("auto", "scroll"), reach  # scrolls inside its own box


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_tile_text_keeps_the_characters_of_code(site, browser, viewport, width):
    viewport(width)
    browser.get(site + "index.html")
    summary = browser.find_element("css selector", 'li.tile[data-leaderboard="softmax"] .summary')
    assert "x * scale" in summary.get_attribute("textContent")


def test_screenshot_script_photographs_three_pages_at_each_width(tmp_path):
    """benchmarks/site_screenshots.py, which makes docs/site/*.png."""
    import importlib.util
    import struct

    browser_tools("the screenshot script")
    spec = importlib.util.spec_from_file_location(
        "site_screenshots", REPO / "benchmarks" / "site_screenshots.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "shots"
    args = [str(FIXTURE), str(out), "--now", "2025-06-15T12:00:00Z", "--max-height", "600"]
    assert script.main([*args, "--widths", "1280", "390"]) == 0
    shots = sorted(p.name for p in out.iterdir())
    assert shots == [
        f"{page}-{w}.png" for page in ("index", "leaderboard", "run") for w in (1280, 390)
    ]
    for name in shots:
        png = (out / name).read_bytes()
        width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and width == int(name[:-4].rsplit("-", 1)[1])
        assert 300 <= height <= 600


@pytest.mark.parametrize("present", ["chromium", "chromedriver"])
def test_half_a_browser_install_skips_naming_the_missing_half(tmp_path, monkeypatch, present):
    """chromium without chromium-driver (or the other way round) is a machine without the
    browser test: a skip that says what to install, not a failure inside Selenium; with
    KERNELBOARD_REQUIRE_SYSTEM_TOOLS=1 it fails as any missing tool does."""
    tool = tmp_path / present
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("KB_CHROMIUM", raising=False)
    monkeypatch.delenv("KB_CHROMEDRIVER", raising=False)
    monkeypatch.delenv(REQUIRE_SYSTEM_TOOLS, raising=False)
    lacking = "chromium" if present == "chromedriver" else "chromedriver"
    with pytest.raises(pytest.skip.Exception, match=f"needs {lacking} .*{present} is installed"):
        browser_tools("the browser test")
    monkeypatch.setenv(REQUIRE_SYSTEM_TOOLS, "1")
    with pytest.raises(pytest.fail.Exception, match=f"needs {lacking} .*required here"):
        browser_tools("the browser test")
