// zenith dashboard: the jobs list, cluster and services pages (see app.js).
"use strict";

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

// The serving API's /api/v1/services: one row per service, in a person's units (counts as
// integers, rates and latencies with their unit, times as local date-times, the whole URL).
function fmtInt(v) {
  return v == null ? "–" : Math.round(v).toLocaleString(undefined, { maximumFractionDigits: 0 });
}
function fmtRate(v, unit) {
  if (v == null) return "–";
  const digits = v === 0 || Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
  return `${v.toLocaleString(undefined, { maximumFractionDigits: digits })} ${unit}`;
}
const SERVICE_COLUMNS = [
  ["Service", (s) => `<a href="#/services/${encodeURIComponent(s.name)}"><b>${esc(s.name)}</b></a> ` +
    `<span class="muted">v${fmtInt(s.version)}</span>`],
  ["State", (s) => badge(s.state) + (s.reason ? `<div class="muted wrap">${esc(s.reason)}</div>` : "")],
  ["URL", (s) => (s.url ? `<a href="${esc(s.url)}">${esc(s.url)}</a>` : "–") +
    (s.ca_cert ? `<div class="muted">CA certificate: <code>${esc(s.ca_cert)}</code></div>` : "")],
  ["Replicas", (s) => fmtInt(s.replicas)],
  ["Requests", (s) => fmtInt(s.requests_total)],
  ["Rate", (s) => fmtRate(s.requests_per_s, "req/s")],
  ["Latency", (s) => fmtRate(s.latency_ms, "ms")],
  ["Crashes", (s) => fmtInt(s.crashes)],
  ["PID", (s) => (s.pid > 0 ? String(s.pid) : "–")],
  ["Updated", (s) => fmtTime(s.updated_at)],
];

function servicesPage() {
  const view = document.getElementById("view");
  view.innerHTML = `<h1>Services</h1><div class="card scroll" id="services"></div>`;
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
    box.innerHTML = `<table id="services-table"><thead><tr>${SERVICE_COLUMNS.map(([h]) =>
      `<th>${h}</th>`).join("")}</tr></thead><tbody>${list.map((s) => `<tr data-service="${esc(s.name)}">${
      SERVICE_COLUMNS.map(([h, cell]) => `<td data-col="${h.toLowerCase()}"${h === "URL" ? ' class="url"' : ""}>${
        cell(s)}</td>`).join("")}</tr>`).join("")}</tbody></table>`;
  };
  load().catch(showError);
  every(POLL_MS * 2.5, () => load().catch(() => {}));
}

// One service: its facts and, for an LLM service, live charts of what the platform samples from
// its /metrics each second (/api/v1/services/NAME/series: TTFT, inter-token latency, tokens/s,
// requests running and waiting, KV cache use; the last 10 minutes).
function servicePage(rawName) {
  const name = encodeURIComponent(rawName);
  const view = document.getElementById("view");
  view.innerHTML = `
    <h1 id="service-title">Service ${esc(rawName)}</h1>
    <div id="service-facts" class="facts"></div>
    <p id="service-no-series" class="muted" hidden></p>
    <div class="grid" id="service-charts">
      <div class="card chart" id="chart-llm-ttft"></div>
      <div class="card chart" id="chart-llm-itl"></div>
      <div class="card chart" id="chart-llm-tokens"></div>
      <div class="card chart" id="chart-llm-requests"></div>
      <div class="card chart" id="chart-llm-kv"></div>
    </div>`;
  const me = viewId;
  const load = async () => {
    const s = await api(`/api/v1/services/${name}`);
    if (me !== viewId) return;
    document.getElementById("service-facts").innerHTML = [
      ["Version", `v${fmtInt(s.version)}`], ["State", badge(s.state)],
      ["URL", s.url ? `<a href="${esc(s.url)}">${esc(s.url)}</a>` : "–"],
      ["Requests", fmtInt(s.requests_total)], ["Rate", fmtRate(s.requests_per_s, "req/s")],
      ["Latency", fmtRate(s.latency_ms, "ms")]].map(([k, v]) =>
      `<div><span class="muted">${k}</span> ${v}</div>`).join("");
    let series;
    try {
      series = await api(`/api/v1/services/${name}/series`);
    } catch (e) {
      if (e.status !== 404) throw e;
      series = null;
    }
    if (me !== viewId) return;
    const note = document.getElementById("service-no-series");
    note.hidden = !!series;
    note.textContent = series ? "" : "No LLM series: this service is not an LLM, or not sampled yet.";
    document.getElementById("service-charts").hidden = !series;
    if (!series) return;
    const x = series.time;
    const line = (label, y) => ({ label, x, y });
    const opts = { time: true, empty: "no samples yet (taken every second)" };
    lineChart("chart-llm-ttft", "Time to first token (ms)", [line("TTFT", series.ttft_ms)], opts);
    lineChart("chart-llm-itl", "Inter-token latency (ms)", [line("ITL", series.itl_ms)], opts);
    lineChart("chart-llm-tokens", "Generated tokens/s", [line("tokens/s", series.tokens_per_s)], opts);
    lineChart("chart-llm-requests", "Requests", [line("running", series.running),
                                                 line("waiting", series.waiting)], opts);
    lineChart("chart-llm-kv", "KV cache use (%)",
              [line("KV cache", series.kv_cache_usage.map((v) => v * 100))], opts);
  };
  load().catch(showError);
  every(POLL_MS / 2, () => load().catch(() => {}));
}
