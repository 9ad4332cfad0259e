"""The web viewer in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`)
driven by Selenium opens `trajwiki serve`'s /view on a small store, follows namespace -> a
person's page -> one of its facts' source message -> that message's history (the trajectory
version citing it, with its claim edit), checks the text at each step, runs a query from the form and
saves a screenshot of each step. The test starts and stops the server itself.

Run by `scripts/ci-browser.sh` (which installs what it needs); `TRAJWIKI_BIN` names the binary,
`TRAJWIKI_SCREENSHOTS` a folder to keep the screenshots in. Skips when no Chromium is installed,
unless `TRAJWIKI_REQUIRE_BROWSER=1` (as in CI).
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("TRAJWIKI_BIN", str(ROOT / "target" / "debug" / "trajwiki"))
CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    not (CHROMEDRIVER and CHROMIUM) and os.environ.get("TRAJWIKI_REQUIRE_BROWSER") != "1",
    reason="no chromium / chromedriver (apt-get install chromium chromium-driver)",
)


def trajwiki(*args):
    done = subprocess.run([BIN, *args], capture_output=True, text=True)
    assert done.returncode == 0, f"trajwiki {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def server():
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        trajwiki("ingest", "--store", str(store), str(ROOT / "tests/fixtures/demo.jsonl"), "-q")
        trajwiki("build", "--store", str(store), "--namespace", "demo", "--model", "hashing",
                 "--flush", "-q")
        # Stored text that must stay text on the page.
        hostile = Path(tmp) / "hostile.jsonl"
        hostile.write_text(json.dumps({
            "namespace": "demo", "session": 3, "seq": 1, "speaker": "Maya",
            "text": "My <script>document.title='owned'</script> <b>bold</b> notes are in [here](http://evil.invalid).",
            "timestamp": "2024-05-01T09:00:00", "ref": "S3:1"}) + "\n")
        trajwiki("ingest", "--store", str(store), str(hostile), "-q")
        # A fact that changes: where Maya lives (sessions far apart, so the change is a REVISE
        # across trajectories).
        moved = Path(tmp) / "moved.jsonl"
        moved.write_text("".join(json.dumps({
            "namespace": "demo", "session": session, "seq": 1, "speaker": "Maya", "text": text,
            "timestamp": at, "ref": f"S{session}:1"}) + "\n" for session, text, at in [
                (4, "I live in Lisbon, in a flat near the river.", "2024-05-20T09:00:00"),
                (7, "Big news: I moved to Porto last week!", "2024-07-01T09:00:00")]))
        trajwiki("ingest", "--store", str(store), str(moved), "-q")
        trajwiki("build", "--store", str(store), "--namespace", "demo", "--model", "hashing",
                 "--flush", "-q")
        proc = subprocess.Popen(
            [BIN, "serve", "--store", str(store), "--port", "0", "--model", "hashing"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        try:
            url = None
            for line in proc.stderr:
                if "http://" in line:
                    url = line[line.index("http://"):].strip()
                    break
            assert url, "the server says where it listens"
            yield url
        finally:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots():
    keep = os.environ.get("TRAJWIKI_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        yield Path(keep)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield Path(tmp)


def shot(driver, folder, name):
    path = folder / f"{name}.png"
    # The whole page, not just the window.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(height, 600), 4000))
    assert driver.save_screenshot(str(path)), name
    assert path.stat().st_size > 10_000, f"{name}: the screenshot is nearly empty"
    driver.set_window_size(1280, 1000)


def click(driver, text):
    from selenium.webdriver.common.by import By

    links = driver.find_elements(By.PARTIAL_LINK_TEXT, text)
    assert links, f"no link {text!r} on {driver.current_url}"
    links[0].click()


def body(driver):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def test_page_trajectory_source_in_a_browser(server, browser, shots):
    from selenium.webdriver.common.by import By

    browser.get(f"{server}/view")
    assert "Namespaces" in body(browser)
    assert "demo — 15 messages, 0 runs" in body(browser)
    shot(browser, shots, "1-namespaces")

    click(browser, "demo")
    text = body(browser)
    assert "People, pets and places" in text and "Session 1" in text, text
    shot(browser, shots, "2-memory-index")

    # A person's page (people are listed first): what is about Maya, whoever said it, with
    # what changed and each fact's source.
    click(browser, "Maya")
    text = body(browser)
    assert "Entity page pg_" in text, text
    assert "What changed" in text, text
    assert "Maya kept three pieces: a bowl, a vase and a mug." in text, text
    assert "Maya moved to Porto" in text, text
    assert "Tom has been training" not in text, text
    shot(browser, shots, "3-person-page")

    # A fact's source: the session page, scrolled to the message.
    source = browser.find_elements(By.CSS_SELECTOR, "a[href*='sources/session-7.md#msg_']")
    assert source, browser.page_source[:3000]
    fact = [a for a in source if a.text == "S7:1"]
    assert fact, [a.text for a in source]
    anchor = fact[0].get_attribute("href").split("#", 1)[1]
    fact[0].click()
    assert browser.current_url.endswith(f"#{anchor}"), browser.current_url
    target = browser.find_element(By.ID, anchor)
    message = target.find_element(By.XPATH, "./ancestor-or-self::*[self::li or self::p][1]")
    assert "I moved to Porto" in message.text, message.text
    assert "Session 7" in body(browser)
    shot(browser, shots, "4-source-message")

    # The message's history: the trajectory version that cites it, with the claim edit (the
    # home it revised) and where the claim came from.
    cites = message.find_elements(By.CSS_SELECTOR, "a[href*='trajectories/trj_']")
    assert cites, message.get_attribute("innerHTML")
    cites[0].click()
    text = body(browser)
    assert "Trajectory trj_" in text and "REVISE" in text, text
    assert "Lisbon" in text, text
    shot(browser, shots, "5-fact-history")

    # The hostile message is shown as text: no script ran, no markup or link was made of it.
    browser.get(f"{server}/view/demo/sources/session-3.md")
    text = body(browser)
    assert "<script>document.title='owned'</script>" in text, text
    assert "owned" not in browser.title
    assert not browser.find_elements(By.CSS_SELECTOR, "a[href^='http://evil']")
    assert not browser.find_elements(By.XPATH, "//b[text()='bold']")

    # The query page from the form: the retrieval path with scores, then the context.
    browser.get(f"{server}/view/demo/")
    field = browser.find_element(By.CSS_SELECTOR, "form input[name='q']")
    field.send_keys("Which class did Maya sign up for?")
    field.submit()
    text = body(browser)
    assert "/view/demo/query" in browser.current_url
    assert "pottery workshop" in text, text
    for stage in ("Pages", "Trajectories", "Snapshots"):
        assert stage in text, (stage, text)
    shot(browser, shots, "6-query-retrieval-path")
