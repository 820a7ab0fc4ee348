// Drives the dashboard in headless Chromium (playwright-core) for tests/e2e/dashboard.sh.
// Environment: ZENITH_URL, ZENITH_TOKEN, TRAIN_ID, FAIL_ID, BIG_ID, FINETUNE_ID, ARTIFACTS,
// CHROMIUM, ZENITH_BIN (to deploy the training job's checkpoint and examples/llm/fortunes-llama),
// TRAIN_WORK (its working dir, the folder of its YAML).
"use strict";
const { chromium } = require("playwright-core");
const { execFileSync } = require("child_process");
const fs = require("fs");
const https = require("https");
const path = require("path");

const url = process.env.ZENITH_URL;
const token = process.env.ZENITH_TOKEN;
const { TRAIN_ID, FAIL_ID, BIG_ID, FINETUNE_ID, ARTIFACTS, CHROMIUM, ZENITH_BIN, TRAIN_WORK } = process.env;
// Every ok() below runs on every pass: the test fails when fewer (or more) checks ran.
const EXPECTED_CHECKS = 20;
let checks = 0;

function ok(message) {
  checks++;
  console.log(`ok: ${message}`);
}
function assert(cond, message) {
  if (!cond) throw new Error(message);
}
async function get(p, withToken = true) {
  const res = await fetch(url + p, withToken ? { headers: { Authorization: `Bearer ${token}` } } : {});
  return { status: res.status, body: await res.text() };
}
async function waitFor(what, fn, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
const points = (page, id) => page.$eval(`#${id}`, (e) => Number(e.dataset.points || 0)).catch(() => 0);

// A chat completion from an LLM service over HTTPS, trusting the platform's CA certificate.
function chat(service, serviceToken, content) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model: service.name, messages: [{ role: "user", content }],
                                  max_tokens: 48, temperature: 0 });
    const req = https.request(`${service.url}/v1/chat/completions`, {
      method: "POST", ca: fs.readFileSync(service.ca_cert),
      headers: { authorization: `Bearer ${serviceToken}`, "content-type": "application/json" },
    }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(text))
                                                   : reject(new Error(`chat: ${res.statusCode} ${text}`))));
    });
    req.on("error", reject);
    req.end(body);
  });
}

(async () => {
  // --- the API behind the pages.
  for (const p of ["/api/v1/dashboard/jobs", `/api/v1/dashboard/jobs/${TRAIN_ID}/series`,
                   `/api/v1/dashboard/jobs/${TRAIN_ID}/logs`, "/api/v1/dashboard/cluster"]) {
    const r = await get(p, false);
    assert(r.status === 401, `${p} without a token: ${r.status} ${r.body}`);
  }
  ok("the API behind the pages answers 401 without the token");

  // The 100k-point job must be ingested before its page is timed.
  await waitFor("100k points ingested", async () => {
    const r = await get(`/api/v1/dashboard/jobs/${BIG_ID}/series?points=800`);
    const s = JSON.parse(r.body).series || [];
    return s.length && s[0].total === 100000;
  }, 120000);

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    // en-US: the numbers and dates checked below are written the way that locale writes them.
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, locale: "en-US" });
    const page = await context.newPage();
    page.on("pageerror", (e) => console.log(`page error: ${e.message}`));
    const shot = (name) => page.screenshot({ path: path.join(ARTIFACTS, name), fullPage: true });

    // --- a link with ?token= (the server's banner prints one on a terminal) logs in once: the
    // token is stored and leaves the address bar; a reload stays logged in without it.
    {
      const linkContext = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
      const link = await linkContext.newPage();
      await link.goto(`${url}/?token=${token}#/jobs`);
      await link.waitForSelector(`#jobs tr[data-job="${TRAIN_ID}"]`);
      const address = await link.evaluate(() => location.href);
      assert(!address.includes("token") && !address.includes(token) && address.endsWith("/#/jobs"),
             `the address still holds the token: ${address}`);
      assert(await link.evaluate(() => localStorage.getItem("zenith.token")) === token,
             "the link's token was not stored");
      assert(await link.isHidden("#login"), "the login form is shown after a ?token= link");
      await link.reload();
      await link.waitForSelector(`#jobs tr[data-job="${TRAIN_ID}"]`);
      assert(await link.isHidden("#login"), "logged out after a reload");
      ok(`?token= link: logged in, the token stored and removed from the address (${address})`);
      // A wrong one is refused, and also leaves the address bar.
      const wrongContext = await browser.newContext();
      const wrong = await wrongContext.newPage();
      await wrong.goto(`${url}/?token=not-this-servers#/jobs`);
      await wrong.waitForSelector("#login:not([hidden])");
      const error = await wrong.textContent("#login-error");
      const wrongAddress = await wrong.evaluate(() => location.href);
      assert(/link's token was refused/.test(error), `error for a wrong ?token=: ${error}`);
      assert(!wrongAddress.includes("token"), `a wrong token stays in the address: ${wrongAddress}`);
      assert(await wrong.evaluate(() => localStorage.getItem("zenith.token")) === null,
             "a refused token was stored");
      ok("a wrong ?token= is refused on the login form, not stored, and removed from the address");
      await wrongContext.close();
      await linkContext.close();
    }

    // --- login with the token from the data dir.
    await page.goto(url + "/");
    await page.waitForSelector("#login:not([hidden])");
    await page.fill("#token", "wrong-token");
    await page.click("#login-form button");
    await page.waitForFunction(() => document.getElementById("login-error").textContent.length > 0);
    await page.fill("#token", token);
    await page.click("#login-form button");
    await page.waitForSelector("#login", { state: "hidden" });
    await page.waitForSelector(`#jobs tr[data-job="${TRAIN_ID}"]`);
    ok("login with the token; a wrong token is refused");
    await shot("jobs.png");

    // --- the training job's page, live.
    await page.goto(`${url}/#/jobs/${TRAIN_ID}`);
    await page.waitForFunction(
      () => Number(document.getElementById("chart-loss-step")?.dataset.points || 0) >= 5,
      null, { timeout: 240000 });
    const firstPoints = await points(page, "chart-loss-step");
    await page.waitForFunction(
      () => Number(document.getElementById("chart-device")?.dataset.points || 0) >= 2,
      null, { timeout: 60000 });
    await page.waitForFunction(
      () => Number(document.getElementById("chart-comm")?.dataset.points || 0) >= 2,
      null, { timeout: 60000 });
    await page.waitForSelector("#chart-loss-step canvas");
    await page.waitForSelector("#chart-device canvas");
    await shot("job-running.png");
    ok(`job page: loss curve (${firstPoints} points), device utilisation and communication ` +
       "throughput of both ranks while it runs");
    // While it runs, no panel is hidden (each says what it waits for).
    const running = await page.evaluate(() => ({
      title: document.getElementById("job-title").textContent,
      hidden: [...document.querySelectorAll("#job-charts .chart[hidden], #profile-card[hidden]")].map((e) => e.id),
    }));
    assert(/running/.test(running.title),
           `the training job ended before its live checks ran (${running.title}): make it longer`);
    assert(!running.hidden.length, `panels hidden while the job runs: ${running.hidden}`);
    ok("no panel is hidden while the job runs");
    // The curve grows without a reload while the job runs.
    await page.waitForFunction(
      (n) => Number(document.getElementById("chart-loss-step").dataset.points) > n ||
             /succeeded|failed/.test(document.getElementById("job-title").textContent),
      firstPoints, { timeout: 60000 });
    const now = await points(page, "chart-loss-step");
    assert(now > firstPoints, `the loss curve did not grow (${firstPoints} -> ${now})`);
    ok(`the loss curve updates live (${firstPoints} -> ${now} points without a reload)`);
    // The cluster page shows which job holds which device.
    await page.goto(`${url}/#/cluster`);
    const held = await page.waitForSelector(`#devices-table a[href="#/jobs/${TRAIN_ID}"]`,
                                            { timeout: 10000 }).catch(() => null);
    const after = JSON.parse((await get(`/api/v1/dashboard/jobs/${TRAIN_ID}`)).body).state;
    assert(held, `the cluster page does not show the running job's device (job ${after})`);
    await shot("cluster-running.png");
    ok("cluster page shows the training job holding its device");
    await page.goto(`${url}/#/jobs/${TRAIN_ID}`);
    await page.waitForFunction(() => /seedcnn|training/i.test(document.getElementById("job-log").textContent),
                               null, { timeout: 30000 });
    await page.selectOption("#log-rank", "1");
    await page.waitForFunction(() => /^rank 1,/.test(document.getElementById("log-status").textContent) &&
                               /Rank 1 started|rank 1/i.test(document.getElementById("job-log").textContent));
    ok("rank 0's log is tailed on the page, and rank 1's on choosing it");
    // Epoch curves once both epochs are done.
    await page.waitForFunction(
      () => Number(document.getElementById("chart-loss-epoch")?.dataset.points || 0) >= 2 &&
            Number(document.getElementById("chart-accuracy")?.dataset.points || 0) >= 2 &&
            Number(document.getElementById("chart-epoch-time")?.dataset.points || 0) >= 2,
      null, { timeout: 300000 });
    await page.waitForFunction(() => /succeeded/.test(document.getElementById("job-title").textContent),
                               null, { timeout: 60000 });
    const spec = await page.textContent("#job-spec");
    assert(spec.includes("seedcnn"), `job spec shown: ${spec}`);
    await shot("job-finished.png");
    ok("loss, accuracy and epoch time per epoch; the job spec; state succeeded");

    // --- the profile of steps 2..21: phase split, top ops, and the trace behind the token.
    await page.goto(`${url}/?profile#/jobs/${TRAIN_ID}`);
    await page.waitForSelector("#profile-phases tbody tr", { timeout: 30000 });
    const phases = await page.$$eval("#profile-phases tbody td:first-child", (t) => t.map((e) => e.textContent));
    for (const p of ["data wait", "forward", "backward", "optimizer", "communication wait"])
      assert(phases.includes(p), `phase ${p} in ${phases}`);
    const ops = await page.$$eval("#profile-ops tbody td:first-child", (t) => t.map((e) => e.textContent));
    assert(ops.includes("conv2d_backward_weights") || ops.includes("conv2d"), `top ops: ${ops}`);
    const bars = await page.$$eval("#profile-phase-bar i", (b) => b.length);
    assert(bars >= 3, `phase bar segments: ${bars}`);
    assert((await get(`/api/v1/dashboard/jobs/${TRAIN_ID}/profile/trace`, false)).status === 401,
           "the trace without a token");
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#profile-download")]);
    const trace = JSON.parse(require("fs").readFileSync(await download.path(), "utf8"));
    const pids = new Set(trace.traceEvents.map((e) => e.pid));
    const steps = trace.traceEvents.filter((e) => e.ph === "X" && e.cat === "step").length;
    assert(pids.has(0) && pids.has(1) && steps === 40, `trace: pids ${[...pids]}, ${steps} steps`);
    await shot("job-profile.png");
    ok(`profile card: ${phases.length} phases, top op ${ops[0]}; trace download (${download.suggestedFilename()}, ` +
       `2 ranks, ${steps} steps) and 401 without the token`);

    // --- a job that exits non-zero shows its alert.
    await page.goto(`${url}/#/jobs/${FAIL_ID}`);
    await page.waitForFunction(
      () => /abnormal_exit/.test(document.getElementById("job-alerts")?.textContent || ""),
      null, { timeout: 60000 });
    await page.waitForFunction(() => /about to fail/.test(document.getElementById("job-log").textContent),
                               null, { timeout: 30000 });
    await shot("job-failed.png");
    ok("the failed job's page shows its abnormal_exit alert and its log");

    // --- a zenith finetune job: tokens/s and eval loss per step charted, its loss spike an alert.
    await page.goto(`${url}/#/jobs/${FINETUNE_ID}`);
    await page.waitForFunction(
      () => Number(document.getElementById("chart-tokens")?.dataset.points || 0) >= 12 &&
            Number(document.getElementById("chart-eval-step")?.dataset.points || 0) >= 4,
      null, { timeout: 120000 });
    await page.waitForFunction(
      () => /training_event[\s\S]*step 10: spike/.test(document.getElementById("job-alerts")?.textContent || ""),
      null, { timeout: 60000 });
    await page.waitForSelector("#chart-tokens canvas");
    await page.waitForSelector("#chart-eval-step canvas");
    ok(`finetune job: tokens/s (${await points(page, "chart-tokens")} points) and eval loss ` +
       `(${await points(page, "chart-eval-step")} points) charted, its loss spike an alert`);
    // It has ended: the panels it never filled (no accuracy, epochs or communication in a
    // one-rank fine-tune, no profile) are hidden and named once; those with data stay.
    // The profile's 404 arrives on its own poll, after the series: wait for both.
    await page.waitForFunction(() => /succeeded/.test(document.getElementById("job-title").textContent) &&
                               !document.getElementById("job-unlogged").hidden &&
                               /Profile/.test(document.getElementById("job-unlogged").textContent),
                               null, { timeout: 60000 });
    const panels = await page.evaluate(() => ({
      hidden: [...document.querySelectorAll("#job-charts .chart")].filter((b) => b.hidden).map((b) => b.id),
      shown: [...document.querySelectorAll("#job-charts .chart")].filter((b) => !b.hidden)
        .map((b) => [b.id, Number(b.dataset.points || 0)]),
      profile: document.getElementById("profile-card").hidden,
      note: document.getElementById("job-unlogged").textContent,
    }));
    for (const id of ["chart-accuracy", "chart-epoch-time", "chart-comm"])
      assert(panels.hidden.includes(id), `${id} shown for the finished fine-tune: hidden ${panels.hidden}`);
    for (const id of ["chart-loss-step", "chart-tokens", "chart-eval-step"])
      assert(panels.shown.some(([s]) => s === id), `${id} hidden: shown ${panels.shown}`);
    assert(panels.shown.every(([, n]) => n > 0), `an empty panel is shown: ${panels.shown}`);
    assert(panels.profile && /Accuracy per epoch/.test(panels.note) && /Profile/.test(panels.note),
           `the profile card or the note: ${panels.profile}, ${panels.note}`);
    await shot("job-finetune.png");
    ok(`finished fine-tune: ${panels.hidden.length} empty panels and the profile hidden ` +
       `(${panels.note}); ${panels.shown.length} with data shown`);

    // --- a wrong id shows an error, never another job's logs.
    await page.goto(`${url}/#/jobs/${FAIL_ID}x`);
    await page.waitForSelector("#page-error");
    await page.waitForTimeout(1500);
    const wrongLog = await page.textContent("#job-log");
    assert(!/about to fail/.test(wrongLog) && wrongLog.trim() === "", `logs under a wrong id: ${wrongLog}`);
    const err = await page.textContent("#page-error");
    assert(/no job with id/.test(err), `error shown: ${err}`);
    ok("a wrong job id shows an error and no logs");

    // --- cluster: devices, holders, alerts across jobs.
    await page.goto(`${url}/#/cluster`);
    await page.waitForSelector("#devices-table tbody tr");
    await page.waitForFunction(() => /abnormal_exit/.test(document.getElementById("cluster-alerts").textContent));
    const rows = await page.$$eval("#devices-table tbody tr", (r) => r.length);
    assert(rows === 2, `2 devices listed, got ${rows}`);
    await shot("cluster.png");
    ok("cluster page lists devices and alerts across jobs");

    // --- services: the training job's checkpoint deployed, shown in a person's units.
    await page.goto(`${url}/#/services`);
    await page.waitForSelector("#services .empty-state");
    const ckpt = path.join(TRAIN_WORK, "out", "checkpoint_epoch_3.safetensors");
    assert(fs.existsSync(ckpt), `no ${ckpt}: ${fs.readdirSync(path.dirname(ckpt))}`);
    console.log(execFileSync(ZENITH_BIN, ["deploy", "--model", ckpt, "--name", "fmnist-seedcnn"],
                             { encoding: "utf8", timeout: 120000 }).trim());
    const service = await waitFor("the service running", async () =>
      JSON.parse((await get("/api/v1/services")).body).find((s) => s.state === "running"), 60000);
    await page.waitForSelector('#services-table tr[data-service="fmnist-seedcnn"] .badge.running',
                               { timeout: 30000 });
    const row = await page.evaluate(() => {
      const tr = document.querySelector('#services-table tr[data-service="fmnist-seedcnn"]');
      const cells = Object.fromEntries([...tr.cells].map((td) => [td.dataset.col, td.textContent.trim()]));
      const a = tr.querySelector("td.url a"), card = document.getElementById("services");
      const r = a.getBoundingClientRect(), c = card.getBoundingClientRect();
      return { cells, heads: [...document.querySelectorAll("#services-table th")].map((t) => t.textContent),
               link: a.textContent, href: a.getAttribute("href"),
               inside: r.left >= c.left && r.right <= c.right && r.right <= window.innerWidth,
               scrolls: card.scrollWidth > card.clientWidth };
    });
    const local = await page.evaluate((t) => new Date(t * 1000).toLocaleString(), service.updated_at);
    console.log(`services row: ${JSON.stringify(row.cells)}`);
    const integer = /^\d+(,\d{3})*$/;  // 2532, 12,345 (en-US); never 1.000 or 7071.0
    for (const col of ["replicas", "requests", "crashes", "pid"])
      assert(integer.test(row.cells[col]), `${col}: '${row.cells[col]}' is not an integer`);
    assert(row.cells.service === "fmnist-seedcnn v1", `service: ${row.cells.service}`);
    assert(/^[\d.,]+ req\/s$/.test(row.cells.rate) && /^[\d.,]+ ms$/.test(row.cells.latency),
           `rate ${row.cells.rate}, latency ${row.cells.latency}`);
    assert(row.cells.updated === local, `updated: '${row.cells.updated}', expected the local time ${local}`);
    assert(row.link === service.url && row.href === service.url, `URL shown ${row.link}, API ${service.url}`);
    assert(row.inside && !row.scrolls, `the URL is cut off (inside the card: ${row.inside})`);
    assert(!row.heads.some((h) => /_/.test(h)), `raw field names as headings: ${row.heads}`);
    await shot("services.png");
    ok(`services page: ${row.cells.service} at ${row.link}, updated ${row.cells.updated}, ` +
       `counts as integers, rate and latency with units`);

    // --- an LLM service's page: live TTFT, inter-token latency, tokens/s, requests running and
    // waiting and KV cache use, sampled by the platform from the service's /metrics each second.
    const llmStarted = Date.now();
    const llmDir = path.join(__dirname, "..", "..", "examples", "llm", "fortunes-llama");
    const deployed = execFileSync(ZENITH_BIN, ["deploy", "--model", llmDir, "--name", "fortunes"],
                                  { encoding: "utf8", timeout: 120000 });
    const llmToken = (/^\s*token:\s+(\S+)/m.exec(deployed) || [])[1];
    assert(llmToken, `no token in: ${deployed}`);
    const llm = await waitFor("the LLM service running", async () =>
      JSON.parse((await get("/api/v1/services")).body).find((s) => s.name === "fortunes" &&
                                                               s.state === "running"), 60000);
    await page.goto(`${url}/#/services`);
    await page.click('#services-table tr[data-service="fortunes"] a[href="#/services/fortunes"]');
    await page.waitForSelector("#service-title");
    // Four clients chat for 4 s: every 1-second sample sees requests in flight.
    let answers = 0;
    const until = Date.now() + 4000;
    await Promise.all([0, 1, 2, 3].map(async (i) => {
      while (Date.now() < until) {
        const r = await chat(llm, llmToken, `Tell me fortune number ${i}.`);
        assert(r.choices[0].message.content.length > 0, `empty answer: ${JSON.stringify(r)}`);
        answers++;
      }
    }));
    const LLM_CHARTS = ["chart-llm-ttft", "chart-llm-itl", "chart-llm-tokens", "chart-llm-requests",
                        "chart-llm-kv"];
    // Each chart holds a point above zero (uPlot's data: [x, ...series]).
    const positive = () => page.evaluate((ids) => ids.filter((id) => !(charts[id] &&
      charts[id].plot.data.slice(1).some((ys) => ys.some((v) => v > 0)))), LLM_CHARTS);
    let empty = [];
    await waitFor("every LLM chart to show a point above zero", async () =>
      (empty = await positive()).length === 0, 15000).catch((e) => {
      throw new Error(`${e.message}; still without one: ${empty.join(", ")}`);
    });
    const drawn = await page.evaluate((ids) => ids.map((id) => charts[id].plot.data[1].length), LLM_CHARTS);
    await shot("service-llm.png");
    execFileSync(ZENITH_BIN, ["services", "undeploy", "fortunes"], { encoding: "utf8", timeout: 60000 });
    ok(`LLM service page: ${answers} chats, TTFT, ITL, tokens/s, running/waiting and KV cache ` +
       `charts above zero (${drawn.join(", ")} samples) in ${((Date.now() - llmStarted) / 1000).toFixed(1)} s`);

    // --- jobs list filtered by state.
    await page.goto(`${url}/#/jobs?state=failed`);
    await page.waitForSelector(`#jobs tr[data-job="${FAIL_ID}"]`);
    const listed = await page.$$eval("#jobs tr[data-job]", (r) => r.map((e) => e.dataset.job));
    assert(listed.length === 1 && listed[0] === String(FAIL_ID), `failed filter: ${listed}`);
    ok("jobs list filtered by state");

    // --- 100k points render in under 2 s (downsampled on the server).
    const renders = [];
    for (let i = 0; i < 3; i++) {
      // A full page load each time (new URL): scripts, API calls, downsampled data, drawing.
      const t0 = Date.now();
      await page.goto(`${url}/?load=${i}#/jobs/${BIG_ID}`);
      await page.waitForFunction(() => document.body.dataset.renderMs &&
                                 Number(document.getElementById("chart-loss-step").dataset.points) > 0);
      renders.push(Date.now() - t0);
    }
    const total = await page.$eval("#chart-loss-step", (e) => Number(e.dataset.total));
    const shown = await points(page, "chart-loss-step");
    await shot("job-100k-points.png");
    const best = Math.min(...renders);
    console.log(`100k points: rendered in ${renders.join(", ")} ms (${shown} of ${total} points drawn)`);
    assert(total === 100000 && shown <= 800, `downsampled: ${shown} of ${total}`);
    assert(Math.max(...renders) < 2000, `100k-point job page took ${Math.max(...renders)} ms`);
    ok(`100k-point job page renders in ${best}..${Math.max(...renders)} ms (< 2000)`);
  } finally {
    await browser.close();
  }
  assert(checks === EXPECTED_CHECKS, `${checks} checks ran, ${EXPECTED_CHECKS} expected`);
  console.log(`dashboard_browser: all ${checks} checks passed`);
})().catch((e) => {
  console.error(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
