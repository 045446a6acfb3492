"""The history explorer in a real browser: Debian's chromium and chromium-driver,
headless, driven by Selenium against a live server (`make chromium` installs them).
It clicks through a snapshot, a key's timeline, a value at a version and a diff, and
saves a screenshot to `.artifacts/explorer.png` (git-ignored; docs/explorer.png is
one such screenshot)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.conftest import ServerProcess, start_temporalstore
from tests.test_http import http_port

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / ".artifacts"


def _browser() -> webdriver.Chrome:
    chromium = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    assert chromium and driver, "chromium and chromium-driver are needed: run `make chromium`"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",  # as root in a container
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the page's console
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    p = start_temporalstore(["--http-port", "0"])
    r = redis.Redis(port=p.port)
    r.execute_command("TS.META", "AUTHOR", "alice", "MESSAGE", "first draft")
    r.set("doc:plan", "draft")
    r.execute_command("TS.SEAL", "before-deploy", "TRIGGER", "deploy")
    r.execute_command("TS.META", "AUTHOR", "bob", "MESSAGE", "ship it")
    r.set("doc:plan", "final")
    r.hset("doc:config", mapping={"model": "gpt-4", "turns": "3"})
    r.execute_command("TS.META", "AUTHOR", "carol")
    r.append("doc:plan", " v2")
    r.execute_command("TS.BRANCH", "CREATE", "what-if")
    yield p
    p.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    b = _browser()
    yield b
    b.quit()


def _wait(browser: webdriver.Chrome, css: str, count: int = 1) -> list[WebElement]:
    """The elements matching `css`, once there are `count` of them."""
    found: list[WebElement] = []

    def ready(_: object) -> bool:
        found[:] = browser.find_elements(By.CSS_SELECTOR, css)
        return len(found) == count

    WebDriverWait(browser, 15).until(ready, f"{count} of {css!r}")
    return found


def _text(browser: webdriver.Chrome, css: str, expected: str) -> None:
    WebDriverWait(browser, 15).until(
        lambda _: expected in browser.find_element(By.CSS_SELECTOR, css).text,
        f"{expected!r} in {css!r}",
    )


def test_explorer_in_a_browser(server: ServerProcess, browser: webdriver.Chrome) -> None:
    r = redis.Redis(port=server.port)
    version = int(r.execute_command("TS.VERSION"))
    browser.get(f"http://127.0.0.1:{http_port(server)}/")
    _text(browser, "#version", str(version))
    _wait(browser, "#branches li[data-name='what-if']")
    # A snapshot: the keys as they were then.
    (snap,) = _wait(browser, "#snapshots li[data-name='before-deploy']")
    assert "deploy" in snap.text
    snap.click()
    _text(browser, "#keys-at", "at snapshot before-deploy")
    (key,) = _wait(browser, "#keys li[data-key='doc:plan']")
    assert "string" in key.text
    assert not browser.find_elements(By.CSS_SELECTOR, "#keys li[data-key='doc:config']")
    # Its timeline: three versions drawn, one per author; the value as of the snapshot.
    key.click()
    circles = _wait(browser, "#timeline svg circle", 3)
    rows = _wait(browser, "#versions tbody tr", 3)
    assert [row.text.split()[-1] for row in rows[1:]] == ["it", "draft"]  # messages
    assert "carol" in rows[0].text and "bob" in rows[1].text and "alice" in rows[2].text
    _text(browser, "#value", "draft")
    _text(browser, "#value-at", "string at version")
    _wait(browser, "#timeline svg line[data-snapshot='before-deploy']")
    # The value at the newest version, then at the oldest, by clicking the picture.
    circles[2].click()
    _text(browser, "#value", "final v2")
    assert circles[2].get_attribute("class") == "selected"
    circles[0].click()
    _text(browser, "#value", "draft")
    # Back to now: every key.
    browser.find_element(By.ID, "keys-now").click()
    _wait(browser, "#keys li", 2)
    # A hash: one version by bob, its fields in a table.
    browser.find_element(By.CSS_SELECTOR, "#keys li[data-key='doc:config']").click()
    _wait(browser, "#timeline svg circle", 1)
    _text(browser, "#value-at", "hash at version")
    cells = _wait(browser, "#value td", 4)
    assert [c.text for c in cells] == ["model", "gpt-4", "turns", "3"]
    # A diff between the snapshot and now, and a changed key's two values.
    a = browser.find_element(By.ID, "diff-a")
    a.clear()
    a.send_keys("snapshot:before-deploy")
    browser.find_element(By.ID, "diff-run").click()
    rows = _wait(browser, "#diff-result tr", 2)
    assert [row.text for row in rows] == ["doc:config added", "doc:plan changed"]
    rows[1].click()
    _text(browser, "#diff-values", "final v2")
    sides = _wait(browser, "#diff-values .value", 2)
    assert [s.text for s in sides] == ["draft", "final v2"]
    # Back to the timeline for the picture.
    browser.find_element(By.CSS_SELECTOR, "#keys li[data-key='doc:plan']").click()
    _wait(browser, "#timeline svg circle", 3)[1].click()
    _text(browser, "#value", "final")
    assert not browser.find_element(By.ID, "error").is_displayed()
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "explorer.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    # No script error, no refusal by the page's Content-Security-Policy.
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
    # Nothing the page did wrote a version.
    assert int(r.execute_command("TS.VERSION")) == version
