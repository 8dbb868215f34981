"""Headless Chromium (Debian's, driven by Selenium through chromedriver) opens `tlaloc serve`'s
chat page, sends a message and waits for the streamed reply: the assistant's bubble must grow
while the reply streams (more than one content piece), finish without an error and show a usage
line; the page must log no JavaScript error. Saves a screenshot of the finished chat.

Usage: python serve_chat_page.py URL CHROMIUM CHROMEDRIVER SCREENSHOT.png
"""

import os
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

MESSAGE = "Hello! What is rain?"

# The server is on loopback: a proxy configured for the machine must not see these requests.
os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1"]))


def main():
    url, chromium, chromedriver, screenshot = sys.argv[1:5]
    with tempfile.TemporaryDirectory(prefix="tlaloc-chrome-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--no-first-run", "--no-proxy-server", "--window-size=900,640",
                    f"--user-data-dir={profile}"):
            options.add_argument(arg)
        # Keep the browser's console so that JavaScript errors on the page fail the test.
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
        try:
            driver.set_page_load_timeout(30)
            driver.get(url)
            # The page asks /v1/models for the name it shows in the header.
            WebDriverWait(driver, 10).until(
                lambda d: d.find_element(By.ID, "model").text.strip() != "",
                "the page never showed the model's name")
            driver.execute_script("document.getElementById('temp').value = '0';"
                                  "document.getElementById('max').value = '40';")
            box = driver.find_element(By.ID, "input")
            box.send_keys(MESSAGE)
            box.send_keys(Keys.ENTER)
            WebDriverWait(driver, 60).until(
                lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-done]"),
                "no finished assistant reply within 60 s")
            reply = driver.find_element(By.CSS_SELECTOR, ".msg.assistant")
            done = reply.get_attribute("data-done")
            pieces = int(reply.get_attribute("data-pieces") or 0)
            text = reply.find_element(By.TAG_NAME, "span").text
            meta = reply.find_element(By.CSS_SELECTOR, ".meta").text
            user = driver.find_element(By.CSS_SELECTOR, ".msg.user").text
            driver.save_screenshot(screenshot)
            # Uncaught exceptions and console errors; not network ones (e.g. no favicon.ico).
            errors = [e["message"] for e in driver.get_log("browser")
                      if e["level"] == "SEVERE" and e.get("source") != "network"]
        finally:
            driver.quit()
    assert not errors, "page errors: " + "; ".join(errors)
    assert done == "1", "the reply failed: " + text
    assert user == MESSAGE, "the user's message shows as " + repr(user)
    assert pieces >= 2, f"the reply came in {pieces} piece(s), not streamed"
    assert text, "the reply is empty"
    assert "tokens" in meta, "no usage line: " + repr(meta)
    print(f"ok: chat page streamed a reply in {pieces} pieces ({meta}); screenshot {screenshot}")


if __name__ == "__main__":
    main()
