#!/usr/bin/env python3
"""Screenshots of the web viewer on a LoCoMo conversation, for docs/.

    python3 scripts/viewer_screenshots.py [--data ../shared/data/locomo/locomo7.json]
        [--namespace conv-30] [--model minilm] [--out docs/screenshots]

Ingests the LoCoMo file into a temporary store, builds the namespace, serves it and drives
headless Chromium (Debian's `chromium` and `chromium-driver`, Selenium from PyPI; see
scripts/ci-browser.sh) along the index -> a trajectory (one with a REVISE, when there is one) ->
a speaker's page -> a source message, then a query page for the conversation's first question. Needs `cargo build` first.
"""

import argparse
import json
import re
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared/data/locomo/locomo7.json"))
    ap.add_argument("--namespace", default="conv-30")
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--out", default=str(ROOT / "docs/screenshots"))
    ap.add_argument("--bin", default=str(ROOT / "target/debug/trajwiki"))
    args = ap.parse_args()

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    conversations = json.loads(Path(args.data).read_text())
    conv = next(c for c in conversations if c["sample_id"] == args.namespace)
    question = next(q["question"] for q in conv["qa"] if q.get("category") in (1, 4))

    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "store")
        run = lambda *a: subprocess.run([args.bin, *a], check=True)  # noqa: E731
        run("ingest", "--store", store, args.data, "-q")
        run("build", "--store", store, "--namespace", args.namespace, "--model", args.model,
            "--flush", "-q")
        proc = subprocess.Popen(
            [args.bin, "serve", "--store", store, "--port", "0", "--model", args.model],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        try:
            url = next(l[l.index("http://"):].strip() for l in proc.stderr if "http://" in l)
            base = f"{url}/view/{args.namespace}/"
            index = urllib.request.urlopen(base).read().decode()
            trajectories = re.findall(r'href="(trajectories/trj_[0-9a-f]+\.md)"', index)
            # People are listed first, the most linked first: a speaker's page.
            person = re.findall(r'href="(pages/pg_[0-9a-f]+\.md)"', index)[0]
            revised = next(
                (t for t in trajectories
                 if "REVISE" in urllib.request.urlopen(base + t).read().decode()),
                trajectories[0])

            options = webdriver.ChromeOptions()
            options.binary_location = shutil.which("chromium")
            for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                      "--disable-gpu", "--window-size=1280,900", "--hide-scrollbars"):
                options.add_argument(a)
            driver = webdriver.Chrome(
                service=Service(executable_path=shutil.which("chromedriver")), options=options)

            def shot(name):
                driver.save_screenshot(str(out / f"{name}.png"))
                print(out / f"{name}.png", driver.title)

            driver.get(base)
            shot("viewer-index")
            driver.get(base + revised)
            shot("viewer-trajectory")
            page_href = base + person
            # The trajectory's timeline, where its REVISE is.
            timeline = driver.find_elements(By.XPATH, "//*[contains(text(), 'REVISE')]")
            if timeline:
                driver.execute_script("arguments[0].scrollIntoView({block: 'center'})",
                                      timeline[0])
                shot("viewer-trajectory-revise")
            source = driver.find_elements(By.CSS_SELECTOR, "a[href*='../sources/session-']")
            source_href = source[0].get_attribute("href")
            driver.get(page_href)
            shot("viewer-wiki-page")
            driver.get(source_href)
            shot("viewer-source")
            driver.get(base)
            field = driver.find_element(By.CSS_SELECTOR, "form input[name='q']")
            field.send_keys(question)
            field.submit()
            shot("viewer-query")
            driver.quit()
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
