// Headless Chromium (Debian's, driven by puppeteer-core) opens `tlaloc serve`'s chat page,
// sends a message and waits for the streamed reply: the assistant's bubble must grow while the
// reply streams (more than one content piece) and finish without an error. Saves a screenshot.
// Usage: node serve_chat_page.mjs NODE_MODULES_DIR URL CHROMIUM SCREENSHOT.png
import { createRequire } from "node:module";

const [, , modules, url, chromium, screenshot] = process.argv;
const require = createRequire(modules + "/");
const puppeteer = require("puppeteer-core");

const browser = await puppeteer.launch({
  executablePath: chromium, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"] });
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 640 });
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  await page.goto(url, { waitUntil: "networkidle0", timeout: 30_000 });
  await page.waitForFunction(() => document.getElementById("model").textContent.length > 0,
                             { timeout: 10_000 });
  await page.$eval("#temp", el => { el.value = "0"; });
  await page.$eval("#max", el => { el.value = "40"; });
  await page.type("#input", "Hello! What is rain?");
  await page.keyboard.press("Enter");
  await page.waitForSelector(".msg.assistant[data-done]", { timeout: 60_000 });
  const result = await page.$eval(".msg.assistant", el => ({
    done: el.dataset.done, pieces: Number(el.dataset.pieces || 0),
    text: el.querySelector("span").textContent, meta: el.querySelector(".meta").textContent }));
  const user = await page.$eval(".msg.user", el => el.textContent);
  await page.screenshot({ path: screenshot });
  if (errors.length) throw new Error("page errors: " + errors.join("; "));
  if (result.done !== "1") throw new Error("the reply failed: " + result.text);
  if (user !== "Hello! What is rain?") throw new Error("the user's message shows as " + user);
  if (result.pieces < 2) throw new Error(`the reply came in ${result.pieces} piece(s), not streamed`);
  if (!/tokens/.test(result.meta)) throw new Error("no usage line: " + result.meta);
  console.log(`ok: chat page streamed a reply in ${result.pieces} pieces (${result.meta}); ` +
              `screenshot ${screenshot}`);
} finally {
  await browser.close();
}
