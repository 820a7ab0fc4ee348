// zenith dashboard: the job page (charts, profile, alerts, logs, spec) (see app.js).
"use strict";

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
    <div class="grid" id="job-charts">
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
    <p id="job-unlogged" class="muted" hidden></p>
    <div class="card" id="profile-card">
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
  let profileShown = false, profileMissing = false;

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
      document.getElementById("log-follow").checked = !ENDED.includes(j.state);
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
    hideNeverFilled();
    if (!document.body.dataset.renderMs) {
      document.body.dataset.renderMs = String(Math.round(performance.now() - started));
    }
  };

  // Once the job has ended, a chart still empty (and a profile not written) can never fill:
  // hidden, and named in one line instead. While the job runs, each says what it waits for.
  const hideNeverFilled = () => {
    const ended = ENDED.includes(job?.state);
    const missing = [];
    document.querySelectorAll("#job-charts .chart").forEach((box) => {
      box.hidden = ended && box.dataset.points === "0";
      if (box.hidden) missing.push(box.dataset.title);
    });
    const profile = document.getElementById("profile-card");
    profile.hidden = ended && profileMissing;
    if (profile.hidden) missing.push("Profile (zenith train --profile STEPS)");
    const note = document.getElementById("job-unlogged");
    note.textContent = missing.length ? `Not logged by this job: ${missing.join(", ")}.` : "";
    note.hidden = !missing.length;
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
        profileMissing = true;
        hideNeverFilled();
      }
      return;
    }
    if (me !== viewId) return;
    profileShown = true;
    profileMissing = false;
    hideNeverFilled();
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
  // Polled while the job runs, and a little after it ended: its last metrics may come in late.
  every(POLL_MS, () => {
    if (!job || !ENDED.includes(job.state) || !document.body.dataset.renderMs ||
        Date.now() / 1000 - job.finished_at < 10) {
      loadJob().then(loadSeries).then(loadProfile).catch(() => {});
    }
  });
  every(1000, () => {
    if (document.getElementById("log-follow")?.checked) loadLog().catch(() => {});
  });
}
