// zenith dashboard: jobs, job page (training curves, device use, communication, profile, logs,
// alerts, spec), cluster and services. Plain browser JavaScript over the server's JSON API
// (/api/v1/dashboard/*, bearer token); charts with uPlot. Pages poll while they are shown.
// This file: the API, helpers, charts, login and routing; pages.js: the jobs list, cluster and
// services pages; job.js: the job page. Classic scripts sharing one global scope, no bundler.
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
const ENDED = ["succeeded", "failed", "cancelled", "lost"];  // job states that are final

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
  box.dataset.title = title;
  if (!points) {
    if (charts[id]) { charts[id].plot.destroy(); delete charts[id]; }
    box.innerHTML = `<h2>${esc(title)}</h2><div class="empty">${esc(opts.empty || "no data yet")}</div>`;
    return;
  }
  box.hidden = false;  // before its width is measured
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
           { label: opts.yLabel || "", size: 60, values: tickLabels }],
    series: [{ label: opts.xLabel || (opts.time ? "time" : "x") }].concat(lines.map((l, i) => ({
      label: l.label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
      points: { show: l.x.length < 60 },
    }))),
    legend: { live: true },
  }, data, box);
  charts[id] = { plot, key };
}

// y tick labels with the decimals the step between ticks needs: uPlot's default stops at 3, so
// a learning rate of 3e-4 read "0" on every tick and an eval loss near 7.706 twice "7.707".
function tickLabels(u, splits, axis, space, incr) {
  if (!(incr > 0)) return splits.map((v) => fmtNum(v));
  const decimals = Math.max(0, Math.ceil(-Math.log10(incr) - 1e-9));
  if (decimals > 4) return splits.map((v) => (v === 0 ? "0" : v.toExponential(1)));
  return splits.map((v) => v.toLocaleString(undefined, { minimumFractionDigits: decimals,
                                                         maximumFractionDigits: decimals }));
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

// Checks `candidate` with the server and keeps it (in localStorage) when it is right; returns
// "" or why it was refused.
async function useToken(candidate) {
  const res = await fetch("/api/v1/dashboard/session",
                          { headers: { Authorization: "Bearer " + candidate } });
  if (!res.ok) return res.status === 401 ? "That token is not this server's." : `Login failed (${res.status}).`;
  token = candidate;
  localStorage.setItem(TOKEN_KEY, token);
  document.getElementById("login").hidden = true;
  document.getElementById("logout").hidden = false;
  return "";
}

document.getElementById("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const error = await useToken(document.getElementById("token").value.trim());
  if (error) {
    document.getElementById("login-error").textContent = error;
    return;
  }
  route();
});

// A link with `?token=` (the server's start banner prints one, as Jupyter does) logs in once:
// the token leaves the address bar (so history and bookmarks never hold it) before it is
// checked, and is then kept like a typed one. Returns "" or why it was refused.
async function loginFromUrl() {
  const params = new URLSearchParams(location.search);
  const candidate = params.get("token");
  if (candidate === null) return "";
  params.delete("token");
  const rest = params.toString();
  history.replaceState(history.state, "", location.pathname + (rest ? `?${rest}` : "") + location.hash);
  const error = await useToken(candidate.trim());
  return error ? `The link's token was refused: ${error}` : "";
}

document.getElementById("logout").addEventListener("click", () => {
  token = "";
  localStorage.removeItem(TOKEN_KEY);
  stopTimers();
  destroyCharts();
  document.getElementById("view").innerHTML = "";
  showLogin();
});

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
  if (parts[0] === "services" && parts[1]) return servicePage(decodeURIComponent(parts[1]));
  if (parts[0] === "services") return servicesPage();
  return jobsPage(params);
}

// After every script (pages.js, job.js) has run.
document.addEventListener("DOMContentLoaded", () => {
  window.addEventListener("hashchange", route);
  loginFromUrl().then((error) => (error ? showLogin(error) : route()),
                      (e) => showLogin(`Login failed: ${e.message || e}`));
});
