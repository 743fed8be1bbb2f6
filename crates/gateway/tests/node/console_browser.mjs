// The console in a real browser (Debian's Chromium, driven by playwright-core): signs in with
// the keyboard, reads each page, checks keyboard navigation and the contrast of the text, and
// saves a screenshot of every page. Prints one JSON line of what it read; throws on a failed
// check. Run by crates/gateway/tests/console_browser.rs.
//
// Environment: CONSOLE_URL (the gateway), CONSOLE_KEY, CHROMIUM (the browser), SHOTS (the
// screenshot folder), SDK_REQUEST (a request id whose plan degraded a tool), SESSION (the
// Codex session), CODEX_REQUESTS (how many requests the Codex run made).

import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR, "node_modules/"));
const { chromium } = require("playwright-core");

const base = process.env.CONSOLE_URL;
const shots = process.env.SHOTS;
const seen = {};

function check(ok, message) {
  if (!ok) throw new Error(message);
}

// WCAG 2 contrast of each kind of text against the background it is drawn on.
async function contrasts(page) {
  return page.evaluate(() => {
    const parse = (c) => (c.match(/[\d.]+/g) || []).map(Number);
    const luminance = ([r, g, b]) => {
      const lin = (v) => {
        v /= 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      };
      return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
    };
    const background = (el) => {
      for (let e = el; e; e = e.parentElement) {
        const c = parse(getComputedStyle(e).backgroundColor);
        if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
      }
      return [255, 255, 255];
    };
    const out = [];
    const selectors = ["body", "td", "th", "caption", ".muted", "a", "header a", ".who",
      ".badge", "button", "label", "code", "pre"];
    for (const sel of selectors) {
      for (const el of Array.from(document.querySelectorAll(sel)).slice(0, 30)) {
        if (!el.textContent.trim()) continue;
        const fg = parse(getComputedStyle(el).color).slice(0, 3);
        const [l1, l2] = [luminance(fg), luminance(background(el))].sort((a, b) => b - a);
        out.push({ sel, text: el.textContent.trim().slice(0, 30), ratio: (l1 + 0.05) / (l2 + 0.05) });
      }
    }
    return out;
  });
}

async function readable(page, name) {
  const low = (await contrasts(page)).filter((c) => c.ratio < 4.5);
  check(low.length === 0, `${name}: text below 4.5:1 contrast: ${JSON.stringify(low.slice(0, 5))}`);
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });

  // Signing in: the form is reached and sent with the keyboard alone.
  await page.goto(`${base}/console`);
  check(page.url().endsWith("/console/login"), `no key: ${page.url()}`);
  await shot(page, "login");
  await page.keyboard.type(process.env.CONSOLE_KEY);
  await page.keyboard.press("Enter");
  await page.waitForURL(`${base}/console`);

  // Requests: the Codex session's requests and the SDK request are listed.
  const rows = await page.$$eval("tbody tr", (trs) =>
    trs.map((tr) => Array.from(tr.querySelectorAll("td")).map((td) => td.textContent.trim())));
  seen.request_rows = rows.length;
  const codexRows = rows.filter((r) => r[4] === "codex");
  check(codexRows.length >= Number(process.env.CODEX_REQUESTS),
    `the Codex requests are not all listed: ${JSON.stringify(rows)}`);
  check(rows.some((r) => r[1] === process.env.SDK_REQUEST), "the SDK request is not listed");
  check(await page.locator("svg[role=img] title").count() >= 1, "no latency chart");
  await readable(page, "requests");
  await shot(page, "requests");

  // Keyboard: the skip link first, then the navigation; focus is visible; Enter follows.
  await page.keyboard.press("Tab");
  seen.first_focus = await page.evaluate(() => document.activeElement.textContent.trim());
  check(seen.first_focus === "Skip to content", `first focus: ${seen.first_focus}`);
  await page.keyboard.press("Tab");
  await page.keyboard.press("Tab");
  const focused = await page.evaluate(() => {
    const el = document.activeElement;
    const style = getComputedStyle(el);
    return { text: el.textContent.trim(), outline: style.outlineStyle, width: style.outlineWidth };
  });
  seen.nav_focus = focused;
  check(focused.text === "Sessions", `third focus: ${JSON.stringify(focused)}`);
  check(focused.outline !== "none" && focused.width !== "0px", `focus not visible: ${JSON.stringify(focused)}`);
  await page.keyboard.press("Enter");
  await page.waitForURL(`${base}/console/sessions`);
  await readable(page, "sessions");
  await shot(page, "sessions");

  // One request: the plan shows each tool's decision and reason.
  await page.goto(`${base}/console/requests/${process.env.SDK_REQUEST}`);
  const plan = await page.$$eval("table", (tables) => {
    const table = tables.find((t) => t.querySelector("caption")?.textContent.includes("declared tool"));
    if (!table) return [];
    return Array.from(table.querySelectorAll("tbody tr")).map((tr) =>
      Array.from(tr.querySelectorAll("td")).map((td) => td.textContent.trim()));
  });
  seen.plan = plan;
  const patch = plan.find((r) => r[0].startsWith("apply_patch"));
  check(patch && patch[2] === "degraded" && patch[3].length > 0, `plan: ${JSON.stringify(plan)}`);
  const bodies = await page.locator("div.pair pre").count();
  check(bodies === 2, `the client's request and the upstream body side by side: ${bodies}`);
  const captured = await page.locator("details summary").first().textContent();
  check(captured.includes("response the client got"), `no captured response: ${captured}`);
  await readable(page, "request");
  await shot(page, "request");

  // The Codex session: its turns with their cached share, and the chart.
  await page.goto(`${base}/console/sessions`);
  await page.getByRole("link", { name: process.env.SESSION }).click();
  await page.waitForURL(/\/console\/sessions\/.+/);
  const turns = await page.$$eval("tbody tr", (trs) =>
    trs.map((tr) => Array.from(tr.querySelectorAll("td")).map((td) => td.textContent.trim())));
  seen.turns = turns.map((t) => ({ input: t[4], cached: t[5], share: t[8] }));
  check(turns.length === Number(process.env.CODEX_REQUESTS), `turns: ${JSON.stringify(turns)}`);
  check(turns.slice(1).every((t) => parseFloat(t[8]) > 50), `cached share: ${JSON.stringify(seen.turns)}`);
  check(await page.locator("svg[role=img] rect").count() >= 2 * turns.length, "no bars");
  await readable(page, "session");
  await shot(page, "session");

  // Providers: the matrix and the health table.
  await page.goto(`${base}/console/providers`);
  const matrix = await page.locator("pre").first().textContent();
  check(matrix.includes("tools:"), "no capability matrix");
  await readable(page, "providers");
  await shot(page, "providers");
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
