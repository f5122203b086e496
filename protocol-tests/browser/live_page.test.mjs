// The live page in a real browser: starts `brook cluster` (3 nodes), opens the supervisor's
// page in Debian's headless Chromium (driven by playwright-core, no browser download),
// produces records with librdkafka (`live_produce`), kills the partition's leader with the
// page's own Kill button, and checks what the page shows: high watermark bars that advance,
// a new leader, and the ISR shrink and the kill on the timeline.
//
// BROOK_BIN and LIVE_PRODUCE_BIN name the binaries (default: the workspace's target/debug);
// LIVE_PAGE_SCREENSHOT, if set, is where the final screenshot goes (docs/live-page.png).
// Every wait has a deadline.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const BROOK = process.env.BROOK_BIN || join(ROOT, "target/debug/brook");
const PRODUCE = process.env.LIVE_PRODUCE_BIN || join(ROOT, "target/debug/live_produce");
const CHROMIUM = process.env.CHROMIUM_BIN || "/usr/bin/chromium";
const START_MS = 90_000;
const SETTLE_MS = 60_000;
const TOTAL_MS = 300_000;

const children = [];
function stopAll() {
  for (const c of children) if (c.exitCode === null) c.kill("SIGTERM");
}
process.on("exit", stopAll);
const overall = setTimeout(() => { console.error(`test took more than ${TOTAL_MS} ms`); stopAll(); process.exit(1); }, TOTAL_MS);

function say(msg) { console.log(`[live-page] ${msg}`); }

// Resolves with the first stdout line starting with `prefix`, within `ms`.
function lineWith(child, prefix, ms) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${prefix} line within ${ms} ms`)), ms);
    const rl = createInterface({ input: child.stdout });
    rl.on("line", (l) => { if (l.startsWith(prefix)) { clearTimeout(timer); resolve(l); } });
    child.on("exit", (code) => { clearTimeout(timer); reject(new Error(`exited (${code}) before ${prefix}`)); });
  });
}
const field = (line, key) => line.split(/\s+/).find((f) => f.startsWith(key + "="))?.slice(key.length + 1);

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "brook-live-page-"));
  const sup = spawn(BROOK, ["cluster", "--base-port", "0", "--supervisor-listener", "127.0.0.1:0", "--data-dir", dir,
    "--override", "broker.session.timeout.ms=3000", "--override", "broker.heartbeat.interval.ms=500",
    "--override", "replica.lag.time.max.ms=3000", "--override", "default.replication.factor=3",
    "--override", "num.partitions=1"], { stdio: ["ignore", "pipe", "inherit"] });
  children.push(sup);
  const ready = await lineWith(sup, "CLUSTER READY", START_MS);
  const supervisor = field(ready, "supervisor");
  const bootstrap = field(ready, "bootstrap");
  say(`cluster ready: supervisor ${supervisor}`);

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    page.on("pageerror", (e) => console.error("page error:", e));
    await page.goto(`http://${supervisor}/`);
    await page.waitForSelector('#nodes tr[data-node="3"]', { timeout: SETTLE_MS });

    const topic = `live-${Date.now()}`;
    const producer = spawn(PRODUCE, ["--bootstrap", bootstrap, "--topic", topic, "--records", "4000", "--interval-ms", "20"],
      { stdio: ["ignore", "inherit", "inherit"] });
    children.push(producer);
    const part = `.partition[data-topic="${topic}"][data-partition="0"]`;

    // The partition appears with a leader and a full ISR, and its high watermark moves.
    await page.waitForFunction((sel) => {
      const p = document.querySelector(sel);
      return p && Number(p.dataset.leader) > 0 && p.dataset.isr.split(",").length === 3;
    }, part, { timeout: SETTLE_MS });
    const leader = await page.$eval(part, (p) => p.dataset.leader);
    const hwOf = (node) => page.$eval(`${part} .replica[data-replica="${node}"]`, (r) => Number(r.dataset.hw));
    await page.waitForFunction((sel) => Number(document.querySelector(sel)?.dataset.hw) > 0,
      `${part} .replica[data-replica="${leader}"]`, { timeout: SETTLE_MS });
    const hw1 = await hwOf(leader);
    await page.waitForFunction(([sel, was]) => Number(document.querySelector(sel)?.dataset.hw) > was,
      [`${part} .replica[data-replica="${leader}"]`, hw1], { timeout: SETTLE_MS });
    say(`leader ${leader}, high watermark advancing past ${hw1}`);

    // Kill the leader with the page's own control.
    await page.click(`#nodes tr[data-node="${leader}"] button[data-action="kill"]`);
    await page.waitForSelector(`#nodes tr[data-node="${leader}"][data-state="down"]`, { timeout: SETTLE_MS });
    await page.waitForSelector(`#timeline li[data-type="node_killed"][data-node="${leader}"]`, { timeout: SETTLE_MS });
    await page.waitForFunction(([sel, old]) => {
      const p = document.querySelector(sel);
      return p && Number(p.dataset.leader) > 0 && p.dataset.leader !== old && !p.dataset.isr.split(",").includes(old);
    }, [part, leader], { timeout: SETTLE_MS });
    const newLeader = await page.$eval(part, (p) => p.dataset.leader);
    await page.waitForSelector(`#timeline li[data-type="isr_shrink"][data-topic="${topic}"]`, { timeout: SETTLE_MS });
    await page.waitForSelector(`#timeline li[data-type="leader_elected"][data-topic="${topic}"][data-node="${newLeader}"]`,
      { timeout: SETTLE_MS });
    say(`new leader ${newLeader}; the ISR shrink is on the timeline`);

    // Records still flow through the new leader.
    const hw2 = await hwOf(newLeader);
    await page.waitForFunction(([sel, was]) => Number(document.querySelector(sel)?.dataset.hw) > was,
      [`${part} .replica[data-replica="${newLeader}"]`, hw2], { timeout: SETTLE_MS });
    say(`high watermark advancing past ${hw2} on node ${newLeader}`);
    if (process.env.LIVE_PAGE_SCREENSHOT) {
      await page.screenshot({ path: process.env.LIVE_PAGE_SCREENSHOT, fullPage: true });
      say(`screenshot: ${process.env.LIVE_PAGE_SCREENSHOT}`);
    }
  } finally {
    await browser.close();
    stopAll();
    await new Promise((resolve) => { if (sup.exitCode !== null) resolve(); else sup.on("exit", resolve); });
    rmSync(dir, { recursive: true, force: true });
  }
  clearTimeout(overall);
  say("passed");
}

main().catch((e) => { console.error(e); stopAll(); process.exit(1); });
