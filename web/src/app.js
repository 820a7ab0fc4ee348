// zenith dashboard: jobs, job page (training curves, device use, communication, profile, logs,
// alerts, spec), cluster and services. Plain browser JavaScript over the server's JSON API
// (/api/v1/dashboard/*, bearer token); charts with uPlot. Pages poll while they are shown.
"use strict";

const TOKEN_KEY = "zenith.token";
const POLL_MS = 2000;
const COLORS = ["#2f6fde", "#d9480f", "#2b8a3e", "#7048e8", "#c2255c", "#0c8599", "#e67700",
                "#5c940d"];

const EPOCH_TICKS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];  // whole epochs only
let token = localStorage.getItem(TOKEN_KEY) || "";
let timers = [];    // intervals of the page on screen
let charts = {};    // chart id -> {plot, key}
let viewId = 0;     // bumps on every navigation; stale responses are dropped

// ---- API ------------------------------------------------------------------------------------

class HttpError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path) {
  const res = await fetch(path, { headers: { Authorization: "Bearer " + token } });
  if (res.status === 401) {
    showLogin("The token was refused; log in again.");
    throw new HttpError(401, "unauthorized");
  }
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new HttpError(res.status, body.error || res.statusText);
  return body;
}

// Saves the response to `path` (fetched with the token) as a file named `filename`.
async function download(path, filename) {
  const res = await fetch(path, { headers: { Authorization: "Bearer " + token } });
  if (!res.ok) throw new HttpError(res.status, res.statusText);
  const a = document.createElement("a");
  a.href = URL.createObjectURL(await res.blob());
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

// ---- small helpers --------------------------------------------------------------------------

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;", "'": "&#39;" })[c]);
}
function el(html) {
  const t = document.createElement("template");
  t.innerHTML = html.trim();
  return t.content.firstElementChild;
}
function fmtDuration(s) {
  if (!s) return "–";
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  return h ? `${h}h ${m}m` : m ? `${m}m ${r}s` : `${r}s`;
}
function fmtTime(t) { return t ? new Date(t * 1000).toLocaleString() : "–"; }
// "n1: ranks 0, 1 · n2: ranks 2, 3" for a job whose ranks span nodes; "" on one host.
function rankNodes(ranks) {
  const byHost = new Map();
  for (const r of ranks || []) {
    if (!r.host) continue;
    if (!byHost.has(r.host)) byHost.set(r.host, []);
    byHost.get(r.host).push(r.rank);
  }
  if (byHost.size < 2) return "";
  return [...byHost].map(([h, rs]) => `${esc(h)}: ranks ${rs.join(", ")}`).join(" · ");
}
function fmtBytes(b) {
  if (b == null || b < 0) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return `${b.toFixed(i ? 1 : 0)} ${u[i]}`;
}
function fmtNum(v) {
  if (v == null) return "–";
  return Math.abs(v) >= 100 ? v.toFixed(1) : v.toPrecision(4);
}
function badge(text) { return `<span class="badge ${esc(text)}">${esc(text)}</span>`; }
function every(ms, fn) { timers.push(setInterval(fn, ms)); }
function stopTimers() { timers.forEach(clearInterval); timers = []; }

// ---- charts ---------------------------------------------------------------------------------

// Draws (or updates) a line chart into #id. `lines` = [{label, x: [], y: []}]; series with
// different x are aligned with uPlot.join. `opts.time` puts wall-clock time on x.
function lineChart(id, title, lines, opts = {}) {
  const box = document.getElementById(id);
  if (!box) return;
  const points = lines.reduce((n, l) => n + l.x.length, 0);
  box.dataset.points = String(points);
  box.dataset.total = String(lines.reduce((n, l) => n + (l.total ?? l.x.length), 0));
  if (!points) {
    if (charts[id]) { charts[id].plot.destroy(); delete charts[id]; }
    box.innerHTML = `<h2>${esc(title)}</h2><div class="empty">${esc(opts.empty || "no data yet")}</div>`;
    return;
  }
  const data = uPlot.join(lines.map((l) => [l.x, l.y]));
  const key = lines.map((l) => l.label).join("|");
  const existing = charts[id];
  if (existing && existing.key === key) {
    existing.plot.setData(data);
    return;
  }
  if (existing) existing.plot.destroy();
  box.innerHTML = `<h2>${esc(title)}</h2>`;
  const plot = new uPlot({
    width: Math.max(300, box.clientWidth - 4),
    height: 220,
    scales: { x: { time: !!opts.time } },
    axes: [Object.assign({ label: opts.xLabel || "" }, opts.xLabel === "epoch" ? { incrs: EPOCH_TICKS } : {}),
           { label: opts.yLabel || "", size: 60 }],
    series: [{ label: opts.xLabel || (opts.time ? "time" : "x") }].concat(lines.map((l, i) => ({
      label: l.label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
      points: { show: l.x.length < 60 },
    }))),
    legend: { live: true },
  }, data, box);
  charts[id] = { plot, key };
}

function destroyCharts() {
  Object.values(charts).forEach((c) => c.plot.destroy());
  charts = {};
}

window.addEventListener("resize", () => {
  for (const [id, c] of Object.entries(charts)) {
    const box = document.getElementById(id);
    if (box) c.plot.setSize({ width: Math.max(300, box.clientWidth - 4), height: 220 });
  }
});

// ---- login ----------------------------------------------------------------------------------

function showLogin(message) {
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = message || "";
  document.getElementById("logout").hidden = true;
  document.getElementById("token").focus();
}

document.getElementById("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const candidate = document.getElementById("token").value.trim();
  const res = await fetch("/api/v1/dashboard/session",
                          { headers: { Authorization: "Bearer " + candidate } });
  if (!res.ok) {
    document.getElementById("login-error").textContent =
      res.status === 401 ? "That token is not this server's." : `Login failed (${res.status}).`;
    return;
  }
  token = candidate;
  localStorage.setItem(TOKEN_KEY, token);
  document.getElementById("login").hidden = true;
  document.getElementById("logout").hidden = false;
  route();
});

document.getElementById("logout").addEventListener("click", () => {
  token = "";
  localStorage.removeItem(TOKEN_KEY);
  stopTimers();
  destroyCharts();
  document.getElementById("view").innerHTML = "";
  showLogin();
});

// ---- jobs list ------------------------------------------------------------------------------

const STATES = ["", "pending", "running", "succeeded", "failed", "cancelled", "lost"];

function jobsPage(params) {
  const state = params.get("state") || "";
  const view = document.getElementById("view");
  view.innerHTML = `
    <h1>Jobs</h1>
    <div class="toolbar">
      <label>State <select id="state-filter">${STATES.map((s) =>
        `<option value="${s}" ${s === state ? "selected" : ""}>${s || "all"}</option>`).join("")}
      </select></label>
      <span id="jobs-count" class="muted"></span>
    </div>
    <table id="jobs"><thead><tr><th>ID</th><th>Name</th><th>State</th><th>Devices</th>
      <th>Duration</th><th>Last loss</th><th>Restarts</th><th>Submitted</th></tr></thead>
      <tbody></tbody></table>`;
  document.getElementById("state-filter").addEventListener("change", (e) => {
    location.hash = e.target.value ? `#/jobs?state=${e.target.value}` : "#/jobs";
  });
  const me = viewId;
  const load = async () => {
    const jobs = await api("/api/v1/dashboard/jobs" + (state ? `?state=${state}` : ""));
    if (me !== viewId) return;
    const body = document.querySelector("#jobs tbody");
    document.getElementById("jobs-count").textContent = `${jobs.length} job(s)`;
    body.innerHTML = jobs.length ? jobs.map((j) => `
      <tr class="click" data-job="${j.id}">
        <td>${j.id}</td><td>${esc(j.name)}</td><td>${badge(j.state)}</td>
        <td>${j.devices_requested} × ${esc(j.device_kind)}${j.devices.length ?
          ` <span class="muted">(${j.devices.join(",")})</span>` : ""}</td>
        <td>${fmtDuration(j.duration)}</td><td>${fmtNum(j.last_loss)}</td>
        <td>${j.restart_count}</td><td>${fmtTime(j.submitted_at)}</td></tr>`).join("")
      : `<tr><td colspan="8" class="empty-state">No jobs${state ? ` in state ${esc(state)}` : ""}.
         Submit one with <code>zenith submit job.yaml</code>.</td></tr>`;
    body.querySelectorAll("tr[data-job]").forEach((tr) =>
      tr.addEventListener("click", () => { location.hash = `#/jobs/${tr.dataset.job}`; }));
  };
  load().catch(showError);
  every(POLL_MS * 1.5, () => load().catch(() => {}));
}

// ---- job page -------------------------------------------------------------------------------

// Series of the job's metrics by name: [{rank, step, epoch, value, time, total}].
function byName(series) {
  const out = {};
  for (const s of series) (out[s.name] = out[s.name] || []).push(s);
  return out;
}

function perRank(list, xKey, label, scale = 1) {
  return (list || []).map((s) => ({
    label: label.includes("{rank}") ? label.replace("{rank}", s.rank)
      : list.length > 1 ? `${label} r${s.rank}` : label,
    x: s[xKey], y: s.value.map((v) => (v == null ? null : v * scale)), total: s.total,
  }));
}

// Communication throughput per rank in MB/s from any logged comm scalars: a bytes series over
// a seconds series where both exist (e.g. comm_bytes / comm_time), else a *_per_second series,
// else the raw comm series.
function commLines(named) {
  const names = Object.keys(named).filter((n) => /^comm|communication/.test(n));
  if (!names.length) return { lines: [], label: "" };
  const rate = names.find((n) => /per_s|_rate|throughput|bps/.test(n));
  if (rate) return { lines: perRank(named[rate], "step", "rank {rank}", /bytes/.test(rate) ? 1e-6 : 1), label: "MB/s" };
  const bytes = names.find((n) => /bytes/.test(n) && !/recv|received/.test(n)) || names.find((n) => /bytes/.test(n));
  const secs = names.find((n) => /time|seconds|_s$/.test(n));
  if (bytes && secs) {
    const lines = [];
    for (const b of named[bytes]) {
      const t = (named[secs] || []).find((s) => s.rank === b.rank);
      if (!t) continue;
      const tByStep = new Map(t.step.map((st, i) => [st, t.value[i]]));
      const x = [], y = [];
      b.step.forEach((st, i) => {
        const sec = tByStep.get(st);
        if (sec > 0 && b.value[i] != null) { x.push(st); y.push(b.value[i] / sec / 1e6); }
      });
      lines.push({ label: `rank ${b.rank}`, x, y, total: b.total });
    }
    if (lines.some((l) => l.x.length)) return { lines, label: "MB/s" };
  }
  return { lines: names.flatMap((n) => perRank(named[n], "step", `${n} rank {rank}`)), label: "" };
}

// The profiler's summary (`zenith train --profile`): the step split into phases as one stacked
// bar and a table, and the ops with the most self time.
function profileHtml(p) {
  const perStep = (ms) => (p.steps ? ms / p.steps : ms);
  const pct = (share) => `${(share * 100).toFixed(1)}%`;
  const bar = p.phases.filter((ph) => ph.share > 0).map((ph, i) =>
    `<i style="width:${pct(ph.share)};background:${COLORS[i % COLORS.length]}" title="${esc(ph.name)} ${pct(ph.share)}"></i>`).join("");
  const phases = p.phases.map((ph) => `<tr><td>${esc(ph.name)}</td><td>${fmtNum(perStep(ph.ms))}</td>
    <td>${pct(ph.share)}</td></tr>`).join("");
  const ops = p.ops.slice(0, 10).map((o) => `<tr><td>${esc(o.name)}</td><td>${o.calls}</td>
    <td>${fmtNum(o.self_ms)}</td><td>${pct(o.share)}</td>
    <td>${o.gflops_per_second ? fmtNum(o.gflops_per_second) : "–"}</td></tr>`).join("");
  return `<p class="muted">${p.steps} steps of rank ${p.rank}, ${fmtNum(p.ms_per_step)} ms per step,
      peak memory ${fmtBytes(p.peak_allocated_bytes)}${p.ranks ? `, ${p.ranks.length} ranks in the trace` : ""}</p>
    <div class="stack" id="profile-phase-bar">${bar}</div>
    <div class="grid">
      <table id="profile-phases"><thead><tr><th>Phase</th><th>ms / step</th><th>Share</th></tr></thead>
        <tbody>${phases}</tbody></table>
      <table id="profile-ops"><thead><tr><th>Op</th><th>Calls</th><th>Self ms</th><th>Share</th>
        <th>GFLOP/s</th></tr></thead><tbody>${ops}</tbody></table>
    </div>`;
}

function jobPage(rawId) {
  const id = encodeURIComponent(rawId);
  const view = document.getElementById("view");
  const started = performance.now();
  view.innerHTML = `
    <h1 id="job-title">Job ${esc(id)}</h1>
    <div id="job-facts" class="facts"></div>
    <div class="grid">
      <div class="card chart" id="chart-loss-step"></div>
      <div class="card chart" id="chart-loss-epoch"></div>
      <div class="card chart" id="chart-accuracy"></div>
      <div class="card chart" id="chart-epoch-time"></div>
      <div class="card chart" id="chart-device"></div>
      <div class="card chart" id="chart-memory"></div>
      <div class="card chart" id="chart-comm"></div>
      <div class="card chart" id="chart-lr"></div>
      <div class="card chart" id="chart-tokens"></div>
      <div class="card chart" id="chart-eval-step"></div>
    </div>
    <div class="card">
      <div class="toolbar"><h2 style="margin:0">Profile</h2>
        <button id="profile-download" hidden>Download trace (Perfetto, chrome://tracing)</button></div>
      <div id="job-profile"><p class="muted">Loading…</p></div>
    </div>
    <div class="card"><h2>Alerts</h2><div id="job-alerts"></div></div>
    <div class="card">
      <div class="toolbar"><h2 style="margin:0">Logs</h2>
        <label>Rank <select id="log-rank"></select></label>
        <label><input type="checkbox" id="log-follow" checked style="width:auto"> follow</label>
        <span id="log-status" class="muted"></span></div>
      <pre class="log" id="job-log"></pre>
    </div>
    <div class="card"><h2>Job spec</h2><pre class="spec" id="job-spec"></pre></div>`;
  const me = viewId;
  let job = null;
  let logRank = 0, logOffset = -1, logBusy = false;
  let profileShown = false;

  const loadJob = async () => {
    const j = await api(`/api/v1/dashboard/jobs/${id}`);
    if (me !== viewId) return;
    const first = !job;
    job = j;
    document.getElementById("job-title").innerHTML = `Job ${j.id}: ${esc(j.name)} ${badge(j.state)}`;
    const fact = (k, v) => `<div><span>${k}</span>${v}</div>`;
    document.getElementById("job-facts").innerHTML = [
      fact("devices", `${j.spec.devices ?? j.ranks.length} × ${esc(j.device_kind)}` +
           ((j.spec.nodes ?? 1) > 1 ? ` on each of ${j.spec.nodes} nodes` : "") +
           (j.devices.length ? ` (${j.devices.join(", ")})` : "")),
      rankNodes(j.ranks) ? fact("ranks", rankNodes(j.ranks)) : "",
      fact("backend", esc(j.backend)),
      fact("submitted", fmtTime(j.submitted_at)),
      fact("duration", fmtDuration(j.duration)),
      fact("restarts", j.restart_count),
      fact("exit code", j.exit_code ?? "–"),
      j.reason ? fact("reason", esc(j.reason)) : "",
    ].join("");
    document.getElementById("job-alerts").innerHTML = j.alerts.length
      ? `<table id="alerts-table"><thead><tr><th>Time</th><th>Kind</th><th>Message</th></tr></thead><tbody>${
          j.alerts.slice().reverse().map((a) => `<tr class="alert"><td>${fmtTime(a.created_at)}</td>
            <td>${badge(a.kind)}</td><td class="wrap">${esc(a.message)}</td></tr>`).join("")}</tbody></table>`
      : `<p class="muted">No alerts.</p>`;
    document.getElementById("job-spec").textContent = j.yaml || JSON.stringify(j.spec, null, 2);
    if (first) {
      const n = Math.max(1, j.ranks.length || (j.spec.devices || 1) * (j.spec.nodes || 1));
      document.getElementById("log-rank").innerHTML =
        Array.from({ length: n }, (_, r) => `<option value="${r}">${r}</option>`).join("");
      document.getElementById("log-rank").addEventListener("change", (e) => {
        logRank = Number(e.target.value);
        logOffset = -1;
        loadLog();
      });
      document.getElementById("log-follow").checked = !["succeeded", "failed", "cancelled", "lost"].includes(j.state);
      loadLog();
    }
  };

  const loadSeries = async () => {
    const [s, u] = await Promise.all([
      api(`/api/v1/dashboard/jobs/${id}/series?points=800`),
      api(`/api/v1/dashboard/jobs/${id}/usage?points=600`),
    ]);
    if (me !== viewId) return;
    const named = byName(s.series);
    lineChart("chart-loss-step", "Loss per step", perRank(named.loss, "step", "loss"),
              { xLabel: "step", empty: "no step losses logged yet" });
    lineChart("chart-loss-epoch", "Loss per epoch",
              perRank(named.epoch_loss, "epoch", "train").concat(perRank(named["eval/Loss"], "epoch", "eval")),
              { xLabel: "epoch" });
    const accNames = Object.keys(named).filter((n) => /accuracy/i.test(n));
    lineChart("chart-accuracy", "Accuracy per epoch",
              accNames.flatMap((n) => perRank(named[n], "epoch", n.replace(/^eval\//, ""))),
              { xLabel: "epoch", empty: "no accuracy yet (logged after each evaluation)" });
    lineChart("chart-epoch-time", "Epoch time (s)", perRank(named.epoch_time, "epoch", "seconds"),
              { xLabel: "epoch", empty: "no epoch finished yet" });
    const comm = commLines(named);
    lineChart("chart-comm", "Communication throughput" + (comm.label ? ` (${comm.label})` : ""),
              comm.lines, { xLabel: "step",
                            empty: "no communication metrics (single-rank job, or none logged)" });
    lineChart("chart-lr", "Learning rate", perRank(named.learning_rate, "step", "lr"),
              { xLabel: "step" });
    // zenith finetune's scalars: throughput and the held-out loss at its evaluation steps.
    lineChart("chart-tokens", "Tokens/s", perRank(named.tokens_per_second, "step", "tokens/s"),
              { xLabel: "step", empty: "no tokens/s logged (zenith finetune logs it each step)" });
    lineChart("chart-eval-step", "Eval loss per step", perRank(named["eval/loss"], "step", "eval"),
              { xLabel: "step", empty: "no eval loss per step (zenith finetune --eval-data)" });
    const dev = [], mem = [];
    for (const r of u.ranks) {
      dev.push({ label: `CPU % r${r.rank} (dev ${r.device})`, x: r.time,
                 y: r.cpu_utilization.map((v) => v * 100), total: r.total });
      if (r.gpu_utilization.some((v) => v >= 0))
        dev.push({ label: `GPU % r${r.rank}`, x: r.time,
                   y: r.gpu_utilization.map((v) => (v >= 0 ? v * 100 : null)), total: r.total });
      mem.push({ label: `RSS MiB r${r.rank}`, x: r.time,
                 y: r.memory_bytes.map((v) => v / 1048576), total: r.total });
      if (r.gpu_memory_bytes.some((v) => v >= 0))
        mem.push({ label: `GPU MiB r${r.rank}`, x: r.time,
                   y: r.gpu_memory_bytes.map((v) => (v >= 0 ? v / 1048576 : null)), total: r.total });
    }
    lineChart("chart-device", "Device utilisation (%)", dev,
              { time: true, empty: "no samples (taken every 2 s while the job runs)" });
    lineChart("chart-memory", "Memory (MiB)", mem, { time: true, empty: "no samples" });
    if (!document.body.dataset.renderMs) {
      document.body.dataset.renderMs = String(Math.round(performance.now() - started));
    }
  };

  // Once the job has written one; until then a hint, asked again on each poll.
  const loadProfile = async () => {
    if (profileShown) return;
    const box = document.getElementById("job-profile");
    let p;
    try {
      p = await api(`/api/v1/dashboard/jobs/${id}/profile`);
    } catch (e) {
      if (e.status !== 404) throw e;
      if (me === viewId) {
        box.innerHTML = `<p class="muted" id="profile-none">No profile yet: train with
          <code>zenith train --profile STEPS</code> to record one.</p>`;
      }
      return;
    }
    if (me !== viewId) return;
    profileShown = true;
    box.innerHTML = profileHtml(p);
    const button = document.getElementById("profile-download");
    button.textContent += ` ${fmtBytes(p.trace_bytes)}`;
    button.hidden = false;
    button.addEventListener("click", () =>
      download(`/api/v1/dashboard/jobs/${id}/profile/trace`, `job-${rawId}-trace.json`).catch(showError));
  };

  const loadLog = async () => {
    if (logBusy || !job) return;
    logBusy = true;
    try {
      const rank = logRank;
      const pre = document.getElementById("job-log");
      const q = logOffset < 0 ? "tail=500" : `offset=${logOffset}`;
      const r = await api(`/api/v1/dashboard/jobs/${id}/logs?rank=${rank}&${q}`);
      if (me !== viewId || rank !== logRank) return;
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 20;
      if (logOffset < 0) pre.textContent = r.text;
      else if (r.text) pre.textContent += r.text;
      logOffset = r.offset;
      if (atBottom) pre.scrollTop = pre.scrollHeight;
      document.getElementById("log-status").textContent =
        `rank ${rank}, ${fmtBytes(r.size)}${r.ended ? ", job ended" : ""}`;
    } finally {
      logBusy = false;
    }
  };

  loadJob().then(loadSeries).then(loadProfile).catch(showError);
  every(POLL_MS, () => {
    if (!job || ["pending", "running"].includes(job.state) || !document.body.dataset.renderMs) {
      loadJob().then(loadSeries).then(loadProfile).catch(() => {});
    }
  });
  every(1000, () => {
    if (document.getElementById("log-follow")?.checked) loadLog().catch(() => {});
  });
}

// ---- cluster --------------------------------------------------------------------------------

function clusterPage() {
  const view = document.getElementById("view");
  view.innerHTML = `<h1>Cluster</h1>
    <div class="card"><h2>Devices</h2><div id="devices"></div></div>
    <div class="card"><h2>Alerts</h2><div id="cluster-alerts"></div></div>`;
  const me = viewId;
  const load = async () => {
    const c = await api("/api/v1/dashboard/cluster");
    if (me !== viewId) return;
    const bar = (v) => `<span class="bar"><i style="width:${Math.round(Math.min(1, v) * 100)}%"></i></span>${Math.round(v * 100)}%`;
    document.getElementById("devices").innerHTML = `<table id="devices-table"><thead><tr>
      <th>Device</th><th>Kind</th><th>Cores</th><th>Held by</th><th>Rank</th><th>CPU</th>
      <th>Memory</th>${c.nvml ? "<th>GPU</th><th>GPU memory</th>" : ""}</tr></thead><tbody>${
      c.devices.map((d) => `<tr><td>${esc(d.name)}</td><td>${esc(d.kind)}</td><td>${d.cores}</td>
        <td>${d.job_id ? `<a href="#/jobs/${d.job_id}">job ${d.job_id}</a> ${esc(d.job_name)}` : '<span class="muted">free</span>'}</td>
        <td>${d.rank >= 0 ? d.rank : "–"}</td><td>${d.job_id ? bar(d.utilization) : "–"}</td>
        <td>${d.job_id ? fmtBytes(d.memory_used) : "–"} <span class="muted">/ ${fmtBytes(d.memory_total)}</span></td>
        ${c.nvml ? `<td>${d.gpu ? bar(d.gpu.utilization) : "–"}</td>
        <td>${d.gpu ? `${fmtBytes(d.gpu.memory_used)} / ${fmtBytes(d.gpu.memory_total)}` : "–"}</td>` : ""}
        </tr>`).join("")}</tbody></table>`;
    document.getElementById("cluster-alerts").innerHTML = c.alerts.length
      ? `<table><thead><tr><th>Time</th><th>Job</th><th>Kind</th><th>Message</th></tr></thead><tbody>${
          c.alerts.map((a) => `<tr><td>${fmtTime(a.created_at)}</td>
            <td><a href="#/jobs/${a.job_id}">job ${a.job_id}</a></td><td>${badge(a.kind)}</td>
            <td class="wrap">${esc(a.message)}</td></tr>`).join("")}</tbody></table>`
      : `<p class="muted">No alerts.</p>`;
  };
  load().catch(showError);
  every(POLL_MS, () => load().catch(() => {}));
}

// ---- services -------------------------------------------------------------------------------

// The serving API's /api/v1/services, shown as it comes: one row per service, one column per
// scalar field (request rate and latency among them once the server reports them).
function servicesPage() {
  const view = document.getElementById("view");
  view.innerHTML = `<h1>Services</h1><div class="card" id="services"></div>`;
  const me = viewId;
  const load = async () => {
    const box = document.getElementById("services");
    let list;
    try {
      list = await api("/api/v1/services");
    } catch (e) {
      if (me !== viewId) return;
      if (e.status === 404) {
        box.innerHTML = `<div class="empty-state">Model serving is not available on this server
          (no <code>/api/v1/services</code>).</div>`;
        return;
      }
      throw e;
    }
    if (me !== viewId) return;
    if (!Array.isArray(list)) list = list.services || [];
    if (!list.length) {
      box.innerHTML = `<div class="empty-state">No deployed models. Deploy one with
        <code>zenith deploy</code>.</div>`;
      return;
    }
    const cols = [];
    for (const s of list)
      for (const [k, v] of Object.entries(s))
        if (!cols.includes(k) && (v === null || typeof v !== "object")) cols.push(k);
    const cell = (v) => (typeof v === "number" ? fmtNum(v) : esc(v ?? "–"));
    box.innerHTML = `<table id="services-table"><thead><tr>${cols.map((c) => `<th>${esc(c)}</th>`).join("")}</tr></thead>
      <tbody>${list.map((s) => `<tr>${cols.map((c) => `<td>${cell(s[c])}</td>`).join("")}</tr>`).join("")}</tbody></table>`;
  };
  load().catch(showError);
  every(POLL_MS * 2.5, () => load().catch(() => {}));
}

// ---- routing --------------------------------------------------------------------------------

function showError(e) {
  if (e instanceof HttpError && e.status === 401) return;
  const view = document.getElementById("view");
  view.prepend(el(`<div class="card error" id="page-error">${esc(e.message || e)}</div>`));
}

function route() {
  stopTimers();
  destroyCharts();
  viewId++;
  delete document.body.dataset.renderMs;
  const hash = location.hash.replace(/^#/, "") || "/jobs";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  document.querySelectorAll("[data-nav]").forEach((a) =>
    a.classList.toggle("active", a.dataset.nav === parts[0]));
  if (!token) return showLogin();
  document.getElementById("logout").hidden = false;
  if (parts[0] === "jobs" && parts[1]) return jobPage(parts[1]);
  if (parts[0] === "cluster") return clusterPage();
  if (parts[0] === "services") return servicesPage();
  return jobsPage(params);
}

window.addEventListener("hashchange", route);
route();
