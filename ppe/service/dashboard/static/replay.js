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

  const base = (path) => String(path).split("/").filter(Boolean).pop();
  function describeConfig(cfg) {
    if (!cfg || typeof cfg !== "object") return "";
    const parts = [];
    const traces = cfg.traces || [];
    if (traces.length) parts.push((traces.length <= 4 ? traces.map(base).join(", ") : traces.length + " traces"));
    if (cfg.app) parts.push(cfg.app + (cfg.n ? " n=" + cfg.n : "") + (cfg.iterations ? " × " + cfg.iterations : ""));
    if (cfg.hosts) parts.push(cfg.hosts + " hosts per run");
    if (cfg.starts) parts.push(cfg.starts + " starts");
    if (cfg.cases) parts.push(cfg.cases + " cases (" + (cfg.multi_mode_cases ?? "?") + " multi-mode)");
    if (cfg.confidence) parts.push(P.confidenceLabel(cfg.confidence) + " intervals");
    if (P.finite(cfg.k)) parts.push("k=" + cfg.k);
    return parts.join(" · ");
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
      h("td", { class: "num" }, (s.n ?? P.DASH) + (s.failed ? " (" + s.failed + " failed)" : "")),
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

  /** A log axis when the values span more than a factor of 20, as replays with bad starts do;
      ticks only at 1-2-5 steps (or decades, over a wide span) so the axis stays readable. */
  function scaleFor(values) {
    const v = values.filter((x) => P.finite(x) && x > 0);
    const span = v.length ? Math.max(...v) / Math.min(...v) : 1;
    if (span <= 20) return { type: "linear" };
    const steps = span > 1e3 ? [1] : [1, 2, 5];
    const ticks = [];
    for (let d = Math.floor(Math.log10(Math.min(...v))); d <= Math.ceil(Math.log10(Math.max(...v))); d++) {
      for (const m of steps) ticks.push(m * 10 ** d);
    }
    return { type: "log", tickmode: "array", tickvals: ticks, ticktext: ticks.map((t) => P.num(t, 3)) };
  }

  function boxes(names, valuesOf, withOracle) {
    const traces = names.map((name, i) => {
      const ys = valuesOf(name).filter(P.finite);
      const color = P.strategyColor(name, i);
      return { type: "box", name, y: ys, boxmean: true, boxpoints: ys.length <= 80 ? "all" : "outliers", jitter: 0.35, pointpos: 0,
        marker: { color, size: 4, opacity: 0.6 }, line: { color }, fillcolor: P.hexA(color, 0.15) };
    });
    if (withOracle) {
      const seen = new Map();
      for (const r of report.runs || []) if (!seen.has(r.start) && P.finite(r.oracle)) seen.set(r.start, r.oracle);
      traces.push({ type: "box", name: "oracle", y: [...seen.values()], boxmean: true, boxpoints: seen.size <= 80 ? "all" : "outliers",
        jitter: 0.35, pointpos: 0, marker: { color: "#172033", size: 4, opacity: 0.5 }, line: { color: "#172033" }, fillcolor: "rgba(23,32,51,0.08)" });
    }
    return traces.filter((t) => t.y.length);
  }

  function runsOf(rep, name) { return (rep.runs || []).filter((r) => r.strategy === name && !r.error); }

  function drawMakespans(rep) {
    const names = strategiesOf(rep);
    const traces = boxes(names, (n) => runsOf(rep, n).map((r) => meanOf(r.actual)), true);
    if (!traces.length) { P.empty("#chart-makespans", "No runs recorded yet."); return; }
    P.plot("#chart-makespans", traces, { showlegend: false,
      yaxis: { title: { text: "actual makespan (s)" }, ...scaleFor(traces.flatMap((t) => t.y)) },
      margin: { l: 64, r: 16, t: 12, b: 48 } });
    const ratios = boxes(names, (n) => runsOf(rep, n).map((r) => (P.finite(r.oracle) && r.oracle > 0 ? meanOf(r.actual) / r.oracle : NaN)), false);
    if (!ratios.length) { P.empty("#chart-ratio", "This report has no oracle makespans."); return; }
    P.plot("#chart-ratio", ratios, { showlegend: false,
      yaxis: { title: { text: "actual ÷ oracle" }, ...scaleFor(ratios.flatMap((t) => t.y)) },
      shapes: [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 1, y1: 1, line: { color: "#172033", width: 1, dash: "dot" } }],
      margin: { l: 64, r: 16, t: 12, b: 48 } });
  }

  function drawModes(rep) {
    const modes = Object.entries(rep.by_mode || {}).filter(([, v]) => v && Object.keys(v).length);
    if (!modes.length) { P.empty("#chart-modes", "No per-mode breakdown in this report."); return; }
    const names = strategiesOf(rep);
    const useOracle = modes.some(([, v]) => Object.values(v).some((s) => P.finite(s.vs_oracle)));
    const field = useOracle ? "vs_oracle" : "makespan_mean";
    const traces = names.map((name, i) => ({
      type: "bar", name, x: modes.map(([m]) => (m === "single" ? "hosts in one mode" : m === "multi" ? "a host switching modes" : m)),
      y: modes.map(([, v]) => (v[name] ? v[name][field] : null)), marker: { color: P.strategyColor(name, i) },
      hovertemplate: name + ": %{y:.4g}<extra>%{x}</extra>",
    }));
    const shapes = useOracle ? [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 1, y1: 1, line: { color: "#172033", width: 1, dash: "dot" } }] : [];
    P.plot("#chart-modes", traces, { barmode: "group", shapes,
      yaxis: { title: { text: useOracle ? "mean makespan ÷ oracle's" : "mean makespan (s)" },
        ...scaleFor(traces.flatMap((t) => t.y)) }, margin: { l: 64, r: 16, t: 36, b: 48 } });
  }

  function drawTime(rep) {
    const name = $("#strategy").value;
    const runs = runsOf(rep, name).filter((r) => P.finite(Number(r.start))).sort((a, b) => a.start - b.start);
    if (!runs.length) { P.empty("#chart-time", "No runs for this strategy."); P.setText("#time-note", ""); return; }
    const x = runs.map((r) => new Date(r.start * 1000));
    const iv = runs.map((r) => ivOfRun(r.predicted));
    const pm = runs.map((r) => meanOf(r.predicted));
    const actual = runs.map((r) => meanOf(r.actual));
    const all = runs.map((_, i) => i);
    const withIv = all.filter((i) => iv[i]);
    const inside = withIv.filter((i) => actual[i] >= iv[i][0] && actual[i] <= iv[i][1]);
    const outside = withIv.filter((i) => !inside.includes(i));
    const traces = [
      { x: withIv.map((i) => x[i]), y: withIv.map((i) => pm[i]), mode: "markers", name: "predicted mean and interval",
        marker: { color: "#3b5bdb", size: 7, symbol: "line-ew-open", line: { width: 2 } },
        error_y: { type: "data", symmetric: false, color: "rgba(59,91,219,0.55)", thickness: 6, width: 0,
          array: withIv.map((i) => iv[i][1] - pm[i]), arrayminus: withIv.map((i) => pm[i] - iv[i][0]) },
        hovertemplate: "predicted %{y:.4g} s<extra></extra>" },
      { x: inside.map((i) => x[i]), y: inside.map((i) => actual[i]), mode: "markers", name: "actual, inside the interval",
        marker: { color: "#172033", size: 7 }, hovertemplate: "actual %{y:.4g} s<extra></extra>" },
      { x: outside.map((i) => x[i]), y: outside.map((i) => actual[i]), mode: "markers", name: "actual, outside",
        marker: { color: "#c92a2a", size: 9, symbol: "x" }, hovertemplate: "actual %{y:.4g} s (outside)<extra></extra>" },
    ];
    const oracle = all.filter((i) => P.finite(runs[i].oracle));
    if (oracle.length) traces.push({ x: oracle.map((i) => x[i]), y: oracle.map((i) => runs[i].oracle), mode: "markers",
      name: "oracle", marker: { color: "#2b8a3e", size: 6, symbol: "diamond-open" }, hovertemplate: "oracle %{y:.4g} s<extra></extra>" });
    const noIv = all.filter((i) => !iv[i]);
    if (noIv.length) traces.push({ x: noIv.map((i) => x[i]), y: noIv.map((i) => actual[i]), mode: "markers", name: "actual", marker: { color: "#172033", size: 6 } });
    const ys = [...actual, ...withIv.flatMap((i) => iv[i])];
    P.plot("#chart-time", traces, { xaxis: { type: "date" }, yaxis: { title: { text: "makespan (s)" }, ...scaleFor(ys) },
      margin: { l: 64, r: 16, t: 36, b: 40 } });
    P.setText("#time-note", withIv.length ? inside.length + " of " + withIv.length + " actual makespans fell inside their predicted " +
      P.confidenceLabel(runs[0].predicted && runs[0].predicted.confidence) + " interval (" + P.pct(inside.length / withIv.length) + ")." : "");
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
    if (P.jobState(job.status) === "failed") P.liveStatus(false, "Failed");
    else P.liveStatus(true, finished ? "Finished" : "Running · updated " + new Date().toLocaleTimeString());
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
