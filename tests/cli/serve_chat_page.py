"""Headless Chromium (Debian's, driven by Selenium through chromedriver) opens `tlaloc serve`'s
chat page, sends a message and waits for the streamed reply: the assistant's bubble must grow
while the reply streams (more than one content piece), finish without an error and show a usage
line; the page must log no JavaScript error. Saves a screenshot of the finished chat.
A turn that fails (a budget the server refuses) shows an error and is left out of the history
the next request sends; the Stop button, shown while a reply streams, aborts it and keeps what
came so far as the assistant's turn (issue 38).

Usage: python serve_chat_page.py URL CHROMIUM CHROMEDRIVER SCREENSHOT.png
"""

import json
import os
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

MESSAGE = "Hello! What is rain?"
BAD_TURN = "This turn fails"
LONG_TURN = "Tell a long story"

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
            # Every request body the page sends, to check the history it carries.
            driver.execute_script(
                "window.sentBodies = []; const f = window.fetch;"
                "window.fetch = (u, o) => { if (o && o.body) window.sentBodies.push(o.body);"
                " return f(u, o); };")
            box = driver.find_element(By.ID, "input")
            # A failed turn: a budget of -5 is refused by the server (400).
            driver.execute_script("document.getElementById('temp').value = '0';"
                                  "document.getElementById('max').value = '-5';")
            box.send_keys(BAD_TURN)
            box.send_keys(Keys.ENTER)
            WebDriverWait(driver, 30).until(
                lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-done='error']"),
                "the refused turn did not show an error")
            driver.execute_script("document.getElementById('max').value = '40';")
            box.send_keys(MESSAGE)
            box.send_keys(Keys.ENTER)
            WebDriverWait(driver, 60).until(
                lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-done]")) >= 2,
                "no finished assistant reply within 60 s")
            reply = driver.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1]
            done = reply.get_attribute("data-done")
            pieces = int(reply.get_attribute("data-pieces") or 0)
            text = reply.find_element(By.TAG_NAME, "span").text
            meta = reply.find_element(By.CSS_SELECTOR, ".meta").text
            user = driver.find_elements(By.CSS_SELECTOR, ".msg.user")[-1].text
            sent = [json.loads(b) for b in driver.execute_script("return window.sentBodies;")]
            # Stop: a long reply, aborted once its first piece shows. The page clicks Stop itself,
            # from a DOM observer, the moment that piece lands: WebDriver polls every half second,
            # and the tiny model writes its 450 tokens in about that time on a fast CPU, so a
            # click from here found the reply done and the button gone.
            stop_button = driver.find_element(By.ID, "stop")
            stop_hidden_before = not stop_button.is_displayed()
            driver.execute_script(
                "document.getElementById('max').value = '450';"
                "window.stopShown = null;"
                "const before = document.querySelectorAll('.msg.assistant').length;"
                "const stop = document.getElementById('stop');"
                "const watch = new MutationObserver(() => {"
                "  const replies = document.querySelectorAll('.msg.assistant');"
                "  const span = replies.length > before ?"
                "      replies[replies.length - 1].querySelector('span') : null;"
                "  if (!span || span.textContent === '') return;"
                "  watch.disconnect();"
                "  window.stopShown = stop.offsetWidth > 0 && stop.offsetHeight > 0;"
                "  stop.click();"
                "});"
                "watch.observe(document.body,"
                "              {childList: true, subtree: true, characterData: true});")
            box.send_keys(LONG_TURN)
            box.send_keys(Keys.ENTER)
            WebDriverWait(driver, 30).until(
                lambda d: d.execute_script("return window.stopShown;") is not None,
                "the long reply never started")
            stop_shown = driver.execute_script("return window.stopShown;")
            WebDriverWait(driver, 30).until(
                lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1]
                .get_attribute("data-done"),
                "the stopped reply never ended")
            stopped = driver.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1]
            stopped_done = stopped.get_attribute("data-done")
            stopped_meta = stopped.find_element(By.CSS_SELECTOR, ".meta").text
            stop_hidden_after = not stop_button.is_displayed()
            send_enabled = driver.find_element(By.ID, "send").is_enabled()
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
    # The failed turn was sent once, and left out of the next request's history.
    assert len(sent) >= 2, sent
    assert sent[0]["messages"] == [{"role": "user", "content": BAD_TURN}], sent[0]
    assert sent[1]["messages"] == [{"role": "user", "content": MESSAGE}], (
        "the failed turn stayed in the history: " + json.dumps(sent[1]["messages"]))
    print("ok: a failed turn is dropped from the history the page sends")
    assert stop_hidden_before, "the Stop button shows while nothing streams"
    assert stop_shown, "the Stop button did not show while the reply streamed"
    assert stopped_done == "stopped", (
        f"Stop did not stop the reply (data-done {stopped_done!r}, {stopped_meta!r}); a reply "
        "that finished first would say '1'")
    assert stop_hidden_after and send_enabled, "after Stop, Send is not back or Stop still shows"
    print("ok: Stop aborts a streaming reply")


if __name__ == "__main__":
    main()
