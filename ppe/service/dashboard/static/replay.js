/* One replay's report: strategies compared, actual makespans, predicted interval vs actual. */
"use strict";

(function () {
  const P = window.PPE;
  const { h, $ } = P;
  const jobId = $("#replay-page").dataset.job;
  const FINISHED = new Set(["done", "finished", "completed", "succeeded", "failed", "error", "cancelled"]);
  let finished = false;
  let report = null;

  const meanOf = (v) => (v && typeof v === "object" ? v.mean : v);
  function ivOfRun(v) { return v && typeof v === "object" ? P.ivOf(v) : null; }

  function describeConfig(cfg) {
    if (!cfg || typeof cfg !== "object") return "";
    return Object.entries(cfg).slice(0, 10).map(([k, v]) => {
      let text;
      if (Array.isArray(v)) text = v.length <= 4 ? v.join(", ") : v.length + " items";
      else if (v && typeof v === "object") text = Object.keys(v).length + " settings";
      else text = String(v);
      return k + ": " + text;
    }).join(" · ");
  }

  function renderProgress(job) {
    const total = Number(job.total) || 0; const done = Number(job.done) || 0;
    $("#progress").max = total || 1;
    $("#progress").value = total ? done : (finished ? 1 : 0);
    P.setText("#progress-text", (job.status || "") + (total ? " · " + done + " / " + total + " runs (" + P.pct(done / total, 0) + ")" : ""));
  }

  function renderSummary(rep) {
    const entries = Object.entries(rep.strategies || {});
    const unit = P.timeUnit(entries.flatMap(([, s]) => [s.makespan_mean, s.makespan_p50, s.makespan_p95]));
    const best = entries.reduce((b, e) => (P.finite(e[1].makespan_mean) && (!b || e[1].makespan_mean < b[1].makespan_mean) ? e : b), null);
    $("#summary-body").replaceChildren(...entries.map(([name, s], i) => h("tr", { dataset: { strategy: name } },
      h("th", { scope: "row" }, h("span", { class: "swatch", style: { background: P.strategyColor(name, i) }, "aria-hidden": "true" }), " ", name,
        best && best[0] === name ? [" ", h("span", { class: "badge done" }, "best mean")] : null),
      h("td", { class: "num" }, P.inUnit(s.makespan_mean, unit)),
      h("td", { class: "num" }, P.inUnit(s.makespan_p50, unit)),
      h("td", { class: "num" }, P.inUnit(s.makespan_p95, unit)),
      h("td", { class: "num" }, P.finite(s.vs_oracle) ? "×" + P.num(s.vs_oracle, 3) : P.DASH),
      h("td", { class: "num" }, P.pct(s.coverage)),
      h("td", { class: "num" }, P.pct(s.mae_rel)))));
  }

  function strategiesOf(rep) {
    const names = Object.keys(rep.strategies || {});
    for (const r of rep.runs || []) if (!names.includes(r.strategy)) names.push(r.strategy);
    return names;
  }

  function drawMakespans(rep) {
    const names = strategiesOf(rep);
    const traces = names.map((name, i) => {
      const ys = (rep.runs || []).filter((r) => r.strategy === name).map((r) => meanOf(r.actual)).filter(P.finite);
      return { type: "box", name, y: ys, boxmean: true, boxpoints: ys.length <= 60 ? "all" : "outliers", jitter: 0.35, pointpos: 0,
        marker: { color: P.strategyColor(name, i), size: 4, opacity: 0.6 }, line: { color: P.strategyColor(name, i) },
        fillcolor: P.hexA(P.strategyColor(name, i), 0.15) };
    }).filter((t) => t.y.length);
    if (!traces.length) { P.empty("#chart-makespans", "No runs recorded yet."); return; }
    P.plot("#chart-makespans", traces, { showlegend: false, yaxis: { title: { text: "actual makespan (s)" }, rangemode: "tozero" },
      margin: { l: 64, r: 16, t: 12, b: 48 } });
  }

  function drawModes(rep) {
    const modes = Object.entries(rep.by_mode || {}).filter(([, v]) => v && Object.keys(v).length);
    if (!modes.length) { P.empty("#chart-modes", "No per-mode breakdown in this report."); return; }
    const names = strategiesOf(rep);
    const useOracle = modes.some(([, v]) => Object.values(v).some((s) => P.finite(s.vs_oracle)));
    const field = useOracle ? "vs_oracle" : "makespan_mean";
    const traces = names.map((name, i) => ({
      type: "bar", name, x: modes.map(([m]) => m + "-mode hosts"),
      y: modes.map(([, v]) => (v[name] ? v[name][field] : null)), marker: { color: P.strategyColor(name, i) },
      hovertemplate: name + ": %{y:.4g}<extra>%{x}</extra>",
    }));
    const shapes = useOracle ? [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 1, y1: 1, line: { color: "#172033", width: 1, dash: "dot" } }] : [];
    P.plot("#chart-modes", traces, { barmode: "group", shapes,
      yaxis: { title: { text: useOracle ? "makespan ÷ oracle's" : "mean makespan (s)" } }, margin: { l: 64, r: 16, t: 36, b: 48 } });
  }

  function drawTime(rep) {
    const name = $("#strategy").value;
    const runs = (rep.runs || []).filter((r) => r.strategy === name && P.finite(Number(r.start)))
      .sort((a, b) => a.start - b.start);
    if (!runs.length) { P.empty("#chart-time", "No runs for this strategy."); return; }
    const x = runs.map((r) => new Date(r.start * 1000));
    const iv = runs.map((r) => ivOfRun(r.predicted));
    const idx = iv.map((v, i) => i).filter((i) => iv[i]);
    const actual = runs.map((r) => meanOf(r.actual));
    const inside = idx.filter((i) => actual[i] >= iv[i][0] && actual[i] <= iv[i][1]);
    const outside = runs.map((_, i) => i).filter((i) => iv[i] && !inside.includes(i));
    const traces = [
      { x: idx.map((i) => x[i]), y: idx.map((i) => iv[i][1]), mode: "lines", line: { width: 0 }, hoverinfo: "skip", showlegend: false },
      { x: idx.map((i) => x[i]), y: idx.map((i) => iv[i][0]), mode: "lines", line: { width: 0 }, fill: "tonexty",
        fillcolor: "rgba(59,91,219,0.16)", name: "predicted interval", hoverinfo: "skip" },
      { x, y: runs.map((r) => meanOf(r.predicted)), mode: "lines", name: "predicted mean", line: { color: "#3b5bdb", width: 1.6, dash: "dot" } },
      { x: inside.map((i) => x[i]), y: inside.map((i) => actual[i]), mode: "markers", name: "actual (inside)",
        marker: { color: "#172033", size: 6 } },
      { x: outside.map((i) => x[i]), y: outside.map((i) => actual[i]), mode: "markers", name: "actual (outside)",
        marker: { color: "#c92a2a", size: 7, symbol: "x" } },
    ];
    const noIv = runs.map((_, i) => i).filter((i) => !iv[i]);
    if (noIv.length) traces.push({ x: noIv.map((i) => x[i]), y: noIv.map((i) => actual[i]), mode: "markers", name: "actual", marker: { color: "#172033", size: 6 } });
    P.plot("#chart-time", traces, { xaxis: { type: "date" }, yaxis: { title: { text: "makespan (s)" }, rangemode: "tozero" },
      hovermode: "x unified", margin: { l: 64, r: 16, t: 36, b: 40 } });
  }

  function renderReport(rep) {
    $("#report").hidden = false;
    renderSummary(rep);
    const sel = $("#strategy");
    const names = strategiesOf(rep);
    const keep = sel.value;
    sel.replaceChildren(...names.map((n) => h("option", { value: n }, n)));
    if (names.includes(keep)) sel.value = keep;
    else if (names.includes("conservative")) sel.value = "conservative";
    drawMakespans(rep); drawModes(rep); drawTime(rep);
  }

  async function load() {
    const job = await P.api("/replays/" + encodeURIComponent(jobId));
    finished = FINISHED.has(String(job.status || "").toLowerCase()) || (!job.status && !!(job.report || job.strategies));
    const rep = job.report || (job.strategies ? job : null);
    P.setText("#config", describeConfig((rep && rep.config) || job.config));
    renderProgress(job);
    if (rep && rep !== report) { report = rep; renderReport(rep); }
    if (job.error) P.setText("#progress-text", String(job.status || "failed") + ": " + job.error);
    P.liveStatus(true, finished ? "Finished" : "Running · updated " + new Date().toLocaleTimeString());
  }

  $("#strategy").addEventListener("change", () => report && drawTime(report));
  const refresh = P.every(4000, async () => {
    try { await load(); } catch (e) {
      if (e.status === 404) { finished = true; P.liveStatus(false, "No replay " + jobId); P.setText("#progress-text", "This replay does not exist."); }
      else if (e.status !== 401) P.liveStatus(false, "Update failed: " + e.message);
    }
  }, () => !finished);
  refresh();
})();
