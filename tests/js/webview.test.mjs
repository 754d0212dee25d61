// The web view at / in headless Chromium (Debian's chromium, driven by playwright-core):
// load the page, send a message, see the reply stream in and the slot geometry change,
// take a screenshot. DOM assertions throughout.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import { startServer, FACT, QUESTION } from "./server.mjs";

const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const SHOT = process.env.WEBVIEW_SCREENSHOT || path.resolve("webview.png");
let server, browser;

before(async () => {
  server = await startServer(["--temp", "0", "--slots", "640", "--recall-slots", "16"]);
  // The page's session "web", created here with the fact in its anchors.
  const r = await fetch(server.base + "/v1/sessions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name: "web", system: FACT }),
  });
  assert.equal(r.status, 201);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu"] });
});
after(async () => {
  await browser?.close();
  assert.equal(await server.stop(), 0);
});

test("the page shows the conversation and a live ring", { timeout: 120000 }, async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(server.base + "/");
  await page.waitForSelector("#status:has-text('live')");
  // The geometry is drawn from the first state event: 640 slots, anchors holding the fact.
  await page.waitForFunction(() => document.querySelector("#slots").textContent === "640");
  const anchors = await page.textContent("#anchors");
  assert.match(anchors, /^\d+ tokens, 1 spans$/);
  const clock0 = Number(await page.textContent("#clock"));
  assert.ok(clock0 > 10);
  assert.equal(await page.locator("#spans .span[data-type=system]").count(), 1);

  // Send a message: it appears, the reply streams in, the geometry grows.
  await page.fill("#input", QUESTION);
  await page.click("#send");
  await page.waitForSelector(".msg.user");
  assert.equal(await page.textContent(".msg.user"), QUESTION);
  await page.waitForFunction(() => {
    const m = document.querySelector(".msg.assistant");
    return m && !m.classList.contains("streaming") && m.textContent.length > 0;
  }, null, { timeout: 60000 });
  assert.equal(await page.textContent(".msg.assistant"), "48213.");
  const clock1 = Number(await page.textContent("#clock"));
  assert.ok(clock1 > clock0, `clock ${clock0} -> ${clock1}`);
  assert.ok(await page.locator("#spans .span[data-type=user]").count() >= 1);
  assert.ok(await page.locator("#spans .span[data-type=response_sentence]").count() >= 1);
  const windowWidth = await page.evaluate(() => parseFloat(document.querySelector("#tier-window").style.width));
  assert.ok(windowWidth > 0);

  // More turns than the 640-slot ring holds: spans are evicted and the view says so.
  for (let i = 0; i < 24 && (await page.textContent("#evicted-count")) === "0"; i++) {
    const before = await page.locator(".msg.assistant").count();
    await page.fill("#input", `Question ${i}: what does the word harbour mean in the old texts of the town, and what did the keepers of the harbour write about it in the long winters?`);
    await page.click("#send");
    await page.waitForFunction((n) => {
      const all = document.querySelectorAll(".msg.assistant");
      return all.length > n && !all[all.length - 1].classList.contains("streaming");
    }, before, { timeout: 60000 });
  }
  assert.ok(Number(await page.textContent("#evicted-count")) > 0, "no eviction shown");
  assert.notEqual(await page.textContent("#last-evicted"), "none");
  await page.screenshot({ path: SHOT, fullPage: true });
  assert.ok(fs.statSync(SHOT).size > 10000);
  assert.deepEqual(errors, []);
});
