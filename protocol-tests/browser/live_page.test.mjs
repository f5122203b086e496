// The live page in a real browser: starts `brook cluster` (3 nodes), opens the supervisor's
// page in Debian's headless Chromium (driven by playwright-core, no browser download),
// produces records with librdkafka (`live_produce`), leaves a transaction open on a second
// topic and commits a group's offset there (`live_consume`), kills the partition's leader
// with the page's own Kill button, and checks what the page shows: high watermark bars that
// advance, the last stable offset, the open transaction, the group's committed offset and lag
// and the coordinator's transactions as the broker's JSON views give them, the timeline's
// filters and export, an aborted transaction's range, the produce rate and latency plots, a new leader, the ISR shrink and
// the kill on the timeline, the under-replicated partition on the plots, and the timeline
// paused, scrubbed back and replayed.
//
// A share group member (`live_share`) leaves records in flight: the page shows each one's
// state and delivery count as the leader's /v1/share-partitions view gives them.
//
// BROOK_BIN, LIVE_PRODUCE_BIN, LIVE_CONSUME_BIN and LIVE_SHARE_BIN name the binaries (default: the
// workspace's target/debug);
// LIVE_PAGE_SCREENSHOT, if set, is where the final screenshot goes (docs/live-page.png).
// Every wait has a deadline.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { BROOK, CHROMIUM, binary, lineWith } from "./harness.mjs";

const PRODUCE = binary("LIVE_PRODUCE_BIN", "live_produce");
const CONSUME = binary("LIVE_CONSUME_BIN", "live_consume");
const SHARE = binary("LIVE_SHARE_BIN", "live_share");
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

// Resolves with the exit code of `child`, within `ms`.
function exited(child, ms) {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null) { resolve(child.exitCode); return; }
    const timer = setTimeout(() => reject(new Error(`did not exit within ${ms} ms`)), ms);
    child.on("exit", (code) => { clearTimeout(timer); resolve(code); });
  });
}
// A view of the supervisor, merged over the nodes: {nodeId: answer}.
async function merged(supervisor, path) {
  const r = await fetch(`http://${supervisor}${path}`);
  if (r.status !== 200) throw new Error(`GET ${path}: ${r.status}`);
  return (await r.json()).nodes;
}
const field = (line, key) => line.split(/\s+/).find((f) => f.startsWith(key + "="))?.slice(key.length + 1);

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "brook-live-page-"));
  const sup = spawn(BROOK, ["cluster", "--base-port", "0", "--supervisor-listener", "127.0.0.1:0", "--data-dir", dir,
    "--override", "broker.session.timeout.ms=3000", "--override", "broker.heartbeat.interval.ms=500",
    "--override", "replica.lag.time.max.ms=3000", "--override", "default.replication.factor=3",
    "--override", "num.partitions=1", "--override", "group.initial.rebalance.delay.ms=0",
    "--override", "offsets.topic.num.partitions=3", "--override", "transaction.state.log.num.partitions=3"],
  { stdio: ["ignore", "pipe", "inherit"] });
  children.push(sup);
  const ready = await lineWith(sup, "CLUSTER READY", START_MS);
  const supervisor = field(ready, "supervisor");
  const bootstrap = field(ready, "bootstrap");
  say(`cluster ready: supervisor ${supervisor}`);

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, acceptDownloads: true });
    page.on("pageerror", (e) => console.error("page error:", e));
    await page.goto(`http://${supervisor}/`);
    await page.waitForSelector('#nodes tr[data-node="3"]', { timeout: SETTLE_MS });

    const topic = `live-${Date.now()}`;
    const producer = spawn(PRODUCE, ["--bootstrap", bootstrap, "--topic", topic, "--records", "4000", "--interval-ms", "20",
      "--metrics-subscription", "live-page"],
      { stdio: ["ignore", "inherit", "inherit"] });
    children.push(producer);
    // The open transaction starts meanwhile; it is checked below.
    const opened = openTransaction(bootstrap);
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

    await producePlots(page, leader);
    await transactionsAndConsumers(page, supervisor, bootstrap, await opened);
    await abortedTransaction(page, supervisor, bootstrap);
    await sharePartition(page, supervisor, bootstrap);
    await clientMetrics(page, supervisor);
    await timelineFilters(page, topic);
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
    await underReplicatedPlot(page, supervisor, newLeader);

    // Records still flow through the new leader.
    const hw2 = await hwOf(newLeader);
    await page.waitForFunction(([sel, was]) => Number(document.querySelector(sel)?.dataset.hw) > was,
      [`${part} .replica[data-replica="${newLeader}"]`, hw2], { timeout: SETTLE_MS });
    say(`high watermark advancing past ${hw2} on node ${newLeader}`);
    await timelineReplay(page, leader);
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

// The steady producer's own metrics (KIP-714): once its subscription exists, librdkafka
// pushes its producer metrics to one node every second; the page lists each client
// instance with the pushes and metrics that node's /v1/client-metrics view holds.
async function clientMetrics(page, supervisor) {
  const row = '#client-metrics tr[data-client-instance]';
  await page.waitForSelector(`${row} .metric[data-metric^="org.apache.kafka.producer."]`, { timeout: SETTLE_MS });
  const shown = await page.$$eval(row, (rows) => rows.map((r) => ({ id: r.dataset.clientInstance, pushes: Number(r.dataset.pushes),
    metrics: [...r.querySelectorAll(".metric")].map((m) => m.dataset.metric) })));
  const known = Object.values(await merged(supervisor, "/v1/client-metrics")).flatMap((v) => (v && v.clients) || []);
  for (const s of shown) {
    const v = known.find((c) => c.client_instance_id === s.id);
    // A client that has fetched its subscription but not pushed yet is listed with 0 pushes
    // and no metrics; one that shows metrics has pushed them at least once.
    const consistent = v && v.pushes >= s.pushes && (s.pushes >= 1 || s.metrics.length === 0);
    if (!consistent) throw new Error(`client ${s.id}: page ${JSON.stringify(s)}, view ${JSON.stringify(v)}`);
    const names = v.metrics.map((m) => m.name + (m.attributes ? `{${m.attributes}}` : ""));
    const missing = s.metrics.filter((m) => !names.includes(m));
    if (missing.length) throw new Error(`client ${s.id}: the page shows metrics the node never received: ${missing}`);
  }
  const pushing = shown.filter((s) => s.pushes >= 1 && s.metrics.length > 0);
  if (!pushing.length) throw new Error(`no client instance on the page has pushed metrics: ${JSON.stringify(shown)}`);
  say(`client metrics: ${pushing.length} of ${shown.length} client instance(s) pushing, e.g. ${pushing[0].metrics[0]}`);
}

// Five records in a transaction left open on a topic of their own; resolves with the topic.
async function openTransaction(bootstrap) {
  const topic = `live-txn-${Date.now()}`;
  const txn = spawn(PRODUCE, ["--bootstrap", bootstrap, "--topic", topic, "--records", "5", "--interval-ms", "0",
    "--transactional-id", topic, "--hold-ms", "120000"], { stdio: ["ignore", "pipe", "inherit"] });
  children.push(txn);
  await lineWith(txn, "OPEN", SETTLE_MS);
  return topic;
}
// The transaction left open on `topic` and a group that committed part of it: the page
// shows the partition's last stable offset, the open transaction, the group's committed
// offset and lag, and the coordinator's entry, each as the broker's JSON views give them.
async function transactionsAndConsumers(page, supervisor, bootstrap, topic) {
  const group = `${topic}-group`;
  const consume = spawn(CONSUME, ["--bootstrap", bootstrap, "--topic", topic, "--group", group, "--records", "3"],
    { stdio: ["ignore", "pipe", "inherit"] });
  children.push(consume);
  const committed = Number((await lineWith(consume, "COMMITTED", SETTLE_MS)).split(" ")[1]);
  if (await exited(consume, SETTLE_MS) !== 0) throw new Error("live_consume failed");

  const parts = await merged(supervisor, `/v1/partitions?topic=${topic}`);
  const lead = Object.values(parts).flatMap((v) => v.partitions || []).find((p) => p.role === "leader");
  const open = lead.open_transactions;
  if (open.length !== 1 || lead.last_stable_offset !== open[0].first_offset || lead.high_watermark !== 5) {
    throw new Error(`JSON view: ${JSON.stringify(lead)}`);
  }
  const groups = Object.values(await merged(supervisor, "/v1/groups")).flatMap((v) => v.groups || []);
  const offset = groups.find((g) => g.group_id === group)?.offsets.find((o) => o.topic === topic);
  if (offset?.committed_offset !== committed) throw new Error(`groups view: ${JSON.stringify(groups)}`);
  const txns = Object.values(await merged(supervisor, "/v1/transactions")).flatMap((v) => v.transactions || []);
  const coordinated = txns.find((t) => t.transactional_id === topic);
  if (coordinated?.state !== "Ongoing" || coordinated.producer_id !== open[0].producer_id) {
    throw new Error(`transactions view: ${JSON.stringify(txns)}`);
  }

  const part = `.partition[data-topic="${topic}"][data-partition="0"]`;
  await page.waitForFunction(([sel, lso, hw]) => {
    const p = document.querySelector(sel);
    return p && Number(p.dataset.lastStable) === lso && Number(p.dataset.hw) === hw;
  }, [part, lead.last_stable_offset, lead.high_watermark], { timeout: SETTLE_MS });
  const t = open[0];
  await page.waitForSelector(`${part} .txn[data-producer="${t.producer_id}"][data-epoch="${t.producer_epoch}"]` +
    `[data-first-offset="${t.first_offset}"]`, { timeout: SETTLE_MS });
  await page.waitForSelector(`${part} .consumer[data-group="${group}"][data-committed="${committed}"]` +
    `[data-lag="${lead.high_watermark - committed}"]`, { timeout: SETTLE_MS });
  await page.waitForSelector(`#transactions tr[data-transactional-id="${topic}"][data-state="Ongoing"]` +
    `[data-producer="${t.producer_id}"]`, { timeout: SETTLE_MS });
  say(`${topic}: LSO ${lead.last_stable_offset} below HW ${lead.high_watermark}, open transaction of producer ` +
    `${t.producer_id}, group committed ${committed} with lag ${lead.high_watermark - committed}`);
}

// The timeline held: a paused timeline keeps new events (the killed node started again)
// without showing them; scrubbed to its oldest event it shows no kill; a replay plays the
// events forward and goes live again, showing the kill and the new start.
async function timelineReplay(page, killed) {
  const started = `#timeline li[data-type="node_started"][data-node="${killed}"]`;
  const kept = async () => Number((await page.textContent("#tl-count")).split(" of ")[1]);
  await page.click("#tl-pause");
  const [shownBefore, startsBefore, keptBefore] = [await page.$$eval("#timeline li", (l) => l.length),
    await page.$$eval(started, (l) => l.length), await kept()];
  await page.click(`#nodes tr[data-node="${killed}"] button[data-action="start"]`);
  await page.waitForSelector(`#nodes tr[data-node="${killed}"][data-state="up"]`, { timeout: SETTLE_MS });
  await page.waitForFunction(([n]) => Number(document.querySelector("#tl-count").textContent.split(" of ")[1]) > n,
    [keptBefore], { timeout: SETTLE_MS });
  const held = [await page.$$eval("#timeline li", (l) => l.length), await page.$$eval(started, (l) => l.length)];
  if (held[0] !== shownBefore || held[1] !== startsBefore) {
    throw new Error(`paused timeline changed: ${shownBefore} -> ${held[0]} items, ${startsBefore} -> ${held[1]} starts`);
  }
  await page.$eval("#tl-scrub", (r) => { r.value = "0"; r.dispatchEvent(new Event("input")); });
  if (await page.$("#timeline li[data-type=\"node_killed\"]")) throw new Error("scrubbed to the start, the kill is shown");
  await page.click("#tl-replay");
  await page.waitForFunction(() => document.querySelector("#tl-pause").textContent === "pause", null, { timeout: SETTLE_MS });
  await page.waitForSelector(`#timeline li[data-type="node_killed"][data-node="${killed}"]`, { timeout: SETTLE_MS });
  const after = await page.$$eval(started, (l) => l.length);
  if (after !== startsBefore + 1) throw new Error(`after the replay: ${after} starts of node ${killed}, not ${startsBefore + 1}`);
  say(`timeline: paused held node ${killed}'s start back (${await kept()} events kept); scrub and replay went live again`);
}

// The latest point of node `node`'s line on plot `plot`, once it is at least `min`.
async function plotPoint(page, plot, node, min) {
  const sel = `#plot-${plot} polyline[data-node="${node}"]`;
  const handle = await page.waitForFunction(([s, least]) => {
    const v = document.querySelector(s)?.dataset.latest;
    return v !== undefined && v !== "" && Number(v) >= least ? Number(v) : null;
  }, [sel, min], { timeout: SETTLE_MS });
  return handle.jsonValue();
}
// The produce plots of the leader, from its /metrics: a byte rate while the producer runs
// (about 4 KiB/s: 50 records a second) and a p99 latency from the Produce histogram.
async function producePlots(page, leader) {
  const rate = await plotPoint(page, "produce-rate", leader, Number.MIN_VALUE);
  const p99 = await plotPoint(page, "produce-p99", leader, Number.MIN_VALUE);
  say(`plots: node ${leader} takes ${Math.round(rate)} bytes/s, Produce p99 under ${p99} ms`);
}
// After the kill the new leader leads a partition whose ISR lost the old leader: the plot
// shows it under-replicated, as the node's own /metrics says.
async function underReplicatedPlot(page, supervisor, node) {
  const shown = await plotPoint(page, "under-replicated", node, 1);
  const text = await (await fetch(`http://${supervisor}/nodes/${node}/metrics`)).text();
  const gauge = Number(/^brook_under_replicated_partitions (\S+)$/m.exec(text)?.[1]);
  if (!(gauge >= 1)) throw new Error(`node ${node}'s /metrics: brook_under_replicated_partitions ${gauge}`);
  say(`plots: node ${node} shows ${shown} under-replicated partition(s); its /metrics says ${gauge}`);
}

// Three records in a transaction aborted at once: the leader's view lists the range up to
// the ABORT marker, and the page draws and names it.
async function abortedTransaction(page, supervisor, bootstrap) {
  const topic = `live-abort-${Date.now()}`;
  const txn = spawn(PRODUCE, ["--bootstrap", bootstrap, "--topic", topic, "--records", "3", "--interval-ms", "0",
    "--transactional-id", topic, "--hold-ms", "0"], { stdio: ["ignore", "pipe", "inherit"] });
  children.push(txn);
  await lineWith(txn, "ABORTED", SETTLE_MS);
  if (await exited(txn, SETTLE_MS) !== 0) throw new Error("live_produce (abort) failed");
  const part = `.partition[data-topic="${topic}"][data-partition="0"]`;
  const row = await page.waitForSelector(`${part} .aborted-txn`, { timeout: SETTLE_MS });
  const shown = await row.evaluate((r) => ({ ...r.dataset }));
  const parts = await merged(supervisor, `/v1/partitions?topic=${topic}`);
  const lead = Object.values(parts).flatMap((v) => v.partitions || []).find((p) => p.role === "leader");
  const a = lead.aborted_transactions;
  if (a.length !== 1 || a[0].first_offset !== 0 || a[0].marker_offset !== 3 || lead.last_stable_offset !== 4) {
    throw new Error(`JSON view of the aborted transaction: ${JSON.stringify(lead)}`);
  }
  if (Number(shown.firstOffset) !== 0 || Number(shown.markerOffset) !== 3 || Number(shown.producer) !== a[0].producer_id) {
    throw new Error(`page shows ${JSON.stringify(shown)}, the view ${JSON.stringify(a)}`);
  }
  say(`${topic}: aborted records 0..2 with the ABORT marker at 3, as the leader's view lists them`);
}

// A share group member acquires five records and releases the first: the leader's
// /v1/share-partitions view and the page show the first Available with delivery count 1 and
// the other four Acquired with delivery count 1.
async function sharePartition(page, supervisor, bootstrap) {
  const topic = `live-share-${Date.now()}`;
  const group = `${topic}-group`;
  const created = spawn(PRODUCE, ["--bootstrap", bootstrap, "--topic", topic, "--records", "1", "--interval-ms", "0"],
    { stdio: ["ignore", "inherit", "inherit"] });
  children.push(created);
  if (await exited(created, SETTLE_MS) !== 0) throw new Error("live_produce (share topic) failed");
  const member = spawn(SHARE, ["--bootstrap", bootstrap, "--topic", topic, "--group", group, "--records", "5",
    "--hold-ms", String(SETTLE_MS)], { stdio: ["ignore", "pipe", "inherit"] });
  children.push(member);
  const joined = lineWith(member, "JOINED", SETTLE_MS);
  await joined;
  const records = spawn(PRODUCE, ["--bootstrap", bootstrap, "--topic", topic, "--records", "5", "--interval-ms", "0"],
    { stdio: ["ignore", "inherit", "inherit"] });
  children.push(records);
  const held = (await lineWith(member, "HELD", SETTLE_MS)).trim().split(/\s+/).slice(1).map(Number);
  if (await exited(records, SETTLE_MS) !== 0) throw new Error("live_produce (share records) failed");
  const [first, last] = held;
  const views = Object.values(await merged(supervisor, `/v1/share-partitions?topic=${topic}`))
    .flatMap((v) => (v && v.share_partitions) || []);
  const sp = views.find((v) => v.group_id === group && v.partition === 0);
  const runs = JSON.stringify(sp?.in_flight.map((r) => [r.first_offset, r.last_offset, r.state, r.delivery_count]));
  if (last - first !== 4 || runs !== JSON.stringify([[first, first, "Available", 1], [first + 1, last, "Acquired", 1]])) {
    throw new Error(`held ${held}; /v1/share-partitions: ${JSON.stringify(views)}`);
  }
  const box = `.share-partition[data-group="${group}"][data-topic="${topic}"][data-partition="0"]`;
  await page.waitForSelector(`${box} .share-run[data-state="Available"][data-first="${first}"][data-last="${first}"]` +
    '[data-delivery-count="1"]', { timeout: SETTLE_MS });
  await page.waitForSelector(`${box} .share-run[data-state="Acquired"][data-first="${first + 1}"][data-last="${last}"]` +
    '[data-delivery-count="1"]', { timeout: SETTLE_MS });
  member.kill("SIGTERM");
  say(`${topic}: share group ${group} holds ${first + 1}..${last} Acquired, ${first} released and Available again`);
}

// The timeline hides internal topics until asked, filters by kind, node and topic, and
// exports what it shows.
async function timelineFilters(page, topic) {
  const items = () => page.$$eval("#timeline li", (lis) => lis.map((li) => ({ ...li.dataset })));
  if ((await items()).some((e) => e.topic.startsWith("__"))) throw new Error("internal topics shown by default");
  await page.check("#tl-internal");
  await page.waitForSelector('#timeline li[data-topic^="__"]', { timeout: SETTLE_MS });
  await page.uncheck("#tl-internal");
  await page.selectOption("#tl-kind", "leader_elected");
  await page.fill("#tl-topic", topic);
  const shown = await items();
  if (!shown.length || shown.some((e) => e.type !== "leader_elected" || e.topic !== topic)) {
    throw new Error(`kind and topic filters: ${JSON.stringify(shown)}`);
  }
  const node = shown[0].node;
  await page.selectOption("#tl-node", node);
  if ((await items()).some((e) => e.node !== node)) throw new Error("node filter");
  const [download] = await Promise.all([page.waitForEvent("download", { timeout: SETTLE_MS }), page.click("#tl-export")]);
  const exported = JSON.parse(readFileSync(await download.path(), "utf8"));
  const now = await items();
  if (exported.length !== now.length || exported.some((e, i) => e.type !== now[i].type || String(e.node) !== now[i].node)) {
    throw new Error(`export ${JSON.stringify(exported)} is not what is shown ${JSON.stringify(now)}`);
  }
  await page.selectOption("#tl-kind", "");
  await page.selectOption("#tl-node", "");
  await page.fill("#tl-topic", "");
  say(`timeline: internal topics hidden by default; filters and export agree (${exported.length} events)`);
}

main().catch((e) => { console.error(e); stopAll(); process.exit(1); });
