"""A real headless browser for the dashboard's test: Debian's Chromium, driven by its own
chromedriver through selenium (WebDriver). Nothing is downloaded: both binaries come from the
``chromium`` and ``chromium-driver`` packages (infra/test.sh installs them)."""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def missing_browser() -> str | None:
    """Why no browser can start here, or None."""
    absent = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    return f"{', '.join(absent)} missing: apt-get install chromium chromium-driver (infra/test.sh does)" if absent else None


@contextmanager
def headless_chromium(width: int = 1280, height: int = 800) -> Iterator[webdriver.Chrome]:
    """A fresh headless Chromium (its own profile: empty sessionStorage) at ``width`` x ``height``."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                     "--disable-extensions", "--disable-background-networking", f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors, CSP refusals among them
    # Chromium's scratch folders (org.chromium.Chromium.*) go under a TMPDIR removed afterwards, not /tmp.
    with tempfile.TemporaryDirectory(prefix="poolq-chromium-") as scratch:
        service = Service(CHROMEDRIVER, log_output=os.devnull, env={**os.environ, "TMPDIR": scratch})
        driver = webdriver.Chrome(options=options, service=service)
        try:
            driver.set_page_load_timeout(60)
            yield driver
        finally:
            driver.quit()


def set_viewport(driver: webdriver.Chrome, width: int, height: int) -> None:
    """The page's viewport exactly ``width`` x ``height`` CSS pixels (a window's size includes its frame)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 700})


def artifacts_dir(default: Path) -> Path:
    """Where screenshots go: $POOLQ_TEST_ARTIFACTS if set, else ``default`` (under pytest's tmp dir)."""
    folder = Path(os.environ.get("POOLQ_TEST_ARTIFACTS") or default)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
