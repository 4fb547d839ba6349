"""Screenshots of the built site: the index, one leaderboard and one run page, at a laptop's
width and a phone's, as PNGs (for docs/site.md).

    python benchmarks/site_screenshots.py ROOT OUT [--now ISO] [--leaderboard NAME]
        [--run-leaderboard NAME] [--widths 1280 390] [--max-height 1100]

ROOT is a repository (leaderboards/ and results/), e.g. tests/fixtures/site; the site is built
from it into a temporary folder, served on 127.0.0.1, and photographed by headless Chromium
through Selenium (Debian's `chromium` and `chromium-driver`, or KB_CHROMIUM and
KB_CHROMEDRIVER). OUT receives index-<w>.png, leaderboard-<w>.png and run-<w>.png. The
leaderboard is the one with the most ranked entries unless named; the run page is the first
ranked entry of --run-leaderboard (default: the same leaderboard) on its first device. Each
shot is the top of the page, at most --max-height CSS pixels tall, one device pixel per CSS
pixel, which keeps the files small.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_kernelboard.utc import parse_utc  # noqa: E402
from site_generator.build import build_site  # noqa: E402
from site_generator.cli import serve  # noqa: E402

INSTALL = "apt-get install chromium chromium-driver"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-prefers-reduced-motion",
    "--force-color-profile=srgb",
]


def _find(env: str, *names: str) -> str | None:
    if os.environ.get(env):
        return os.environ[env]
    return next((found for name in names if (found := shutil.which(name))), None)


def start_browser(profile: Path):
    """Headless Chromium through Selenium with its profile in `profile` (the caller's temporary
    folder, removed with it), or SystemExit saying what to install."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = _find("KB_CHROMIUM", "chromium", "chromium-browser")
    driver = _find("KB_CHROMEDRIVER", "chromedriver")
    if not chromium or not driver:
        raise SystemExit(
            f"site_screenshots: headless Chromium and its driver are needed: {INSTALL}"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    return webdriver.Chrome(service=Service(driver), options=options)


def pages(site: Path, leaderboard: str | None, run_leaderboard: str | None) -> dict[str, str]:
    """name -> page path inside the built site, chosen from its exports (what ranks)."""
    exports = {
        (p.parent.name, p.stem): json.loads(p.read_text()) for p in site.glob("data/*/*.json")
    }
    if not exports:
        raise SystemExit(f"site_screenshots: {site} has no leaderboard exports")
    ranked: dict[str, int] = {}
    for (name, _device), doc in exports.items():
        ranked[name] = ranked.get(name, 0) + len(doc["ranking"])
    board = leaderboard or max(sorted(ranked), key=lambda name: ranked[name])
    run_board = run_leaderboard or board
    entries = [
        doc["ranking"][0]
        for (name, _device), doc in sorted(exports.items())
        if name == run_board and doc["ranking"]
    ]
    if not entries:
        raise SystemExit(f"site_screenshots: {run_board!r} has no ranked entry to show")
    first = entries[0]
    return {
        "index": "index.html",
        "leaderboard": f"lb/{board}/index.html",
        "run": f"lb/{run_board}/runs/{first['run_id']}-{first['evaluation']}.html",
    }


def shoot(driver, url: str, width: int, max_height: int) -> bytes:
    """The top of the page at `width` CSS pixels (a phone below 500: mobile viewport rules)."""
    metrics = {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 500}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    driver.get(url)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": min(height, max_height), "scale": 1},
        },
    )
    return base64.b64decode(shot["data"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="repository holding leaderboards/ and results/")
    parser.add_argument("out", type=Path, help="folder for the PNGs (created)")
    parser.add_argument("--now", help="build as if at this UTC time (ISO 8601; default: now)")
    parser.add_argument("--leaderboard", help="leaderboard page to show (default: most ranked)")
    parser.add_argument("--run-leaderboard", help="whose first-ranked run page to show")
    parser.add_argument(
        "--widths", type=int, nargs="+", default=[1280, 390], help="CSS pixels (default: 1280 390)"
    )
    parser.add_argument(
        "--max-height",
        type=int,
        default=1100,
        help="CSS pixels of each page's top to keep (default: 1100)",
    )
    args = parser.parse_args(argv)
    now = parse_utc(args.now) if args.now else dt.datetime.now(dt.UTC)
    with tempfile.TemporaryDirectory(prefix="kb-shots-site-") as tmp:
        site = Path(tmp) / "_site"
        build_site(args.root, site, now=now, workers=1)
        chosen = pages(site, args.leaderboard, args.run_leaderboard)
        server = serve(site, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        host, port = server.server_address[:2]
        driver = start_browser(Path(tmp) / "chromium-profile")
        args.out.mkdir(parents=True, exist_ok=True)
        try:
            # the server logs every request to stderr; what the shots are is printed below
            with open(os.devnull, "w") as quiet, contextlib.redirect_stderr(quiet):
                made = [
                    (
                        name,
                        path,
                        width,
                        shoot(driver, f"http://{host}:{port}/{path}", width, args.max_height),
                    )
                    for name, path in chosen.items()
                    for width in args.widths
                ]
        finally:
            driver.quit()
            server.shutdown()
            server.server_close()
    for name, path, width, png in made:
        target = args.out / f"{name}-{width}.png"
        target.write_bytes(png)
        print(f"{target}: {path} at {width} px, {len(png) // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
