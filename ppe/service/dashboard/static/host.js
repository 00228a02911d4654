/* Host page: history with the forecast band, battery errors, fitted distribution, link forecasts,
   the forecast over a chosen horizon and the calibration of past horizon forecasts, the
   calibrated benchmark and the machine profile (PMaC, docs/pmac.md). */
"use strict";

(function () {
  const P = window.PPE;
  const { h, $ } = P;
  const host = $("#host-page").dataset.host;
  const hostPath = encodeURIComponent(host);
  let resource = null;
  let lastBattery = null;
  let showAllMembers = false;
  const BATTERY_TOP = 12;

  function selected() {
    const [metric, peer] = $("#series").value.split("|");
    return { metric, peer: peer || "" };
  }
  function seriesLabel(metric, peer) {
    return peer ? P.METRIC_LABEL[metric] + " → " + peer : P.METRIC_LABEL[metric] || metric;
  }
  function axisFor(metric) {
    if (metric === "cpu") return { tickformat: ".0%", rangemode: "tozero", title: { text: "CPU available" } };
    if (metric === "bandwidth") return { tickformat: ".3s", ticksuffix: "B/s", rangemode: "tozero", title: { text: "bandwidth" } };
    return { tickformat: ".2s", ticksuffix: "s", rangemode: "tozero", title: { text: "latency" } };
  }

  function fillSeriesSelect() {
    const sel = $("#series");
    const keep = sel.value;
    const opts = (resource.series || []).slice().sort((a, b) =>
      (a.peer ? 1 : 0) - (b.peer ? 1 : 0) || (a.peer || "").localeCompare(b.peer || "") || a.metric.localeCompare(b.metric));
    sel.replaceChildren(...opts.map((s) => h("option", { value: s.metric + "|" + (s.peer || "") }, seriesLabel(s.metric, s.peer))));
    if (!opts.length) sel.append(h("option", { value: "cpu|" }, "CPU availability"));
    if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
  }

  function showProps() {
    const p = resource.properties || {};
    const parts = [];
    if (P.finite(p.benchmark)) parts.push("benchmark " + P.seconds(p.benchmark) + " per element");
    if (P.finite(p.memory_bytes)) parts.push("memory " + P.num(p.memory_bytes / 2 ** 30, 3) + " GiB");
    const n = (resource.series || []).length;
    parts.push(n + (n === 1 ? " series" : " series"));
    P.setText("#props", parts.join(" · "));
  }

  async function forecastFor(metric, peer, horizon) {
    try {
      return await P.api("/forecasts/" + hostPath + "/" + metric + P.query({ peer, horizon, confidence: $("#confidence").value }));
    } catch (e) {
      if (e.status === 409) return { insufficient: true, message: e.message };
      throw e;
    }
  }

  /* ---- tiles ---- */
  function renderTiles(metric, series, f) {
    const latest = series ? series.latest_value : null;
    P.setText("#t-latest", P.metricValue(metric, latest));
    const age = series && P.finite(series.latest_timestamp) ? P.now() - series.latest_timestamp : null;
    P.setText("#t-age", age === null ? "no data" : "measured " + P.age(age) + " ago");
    if (!f || f.insufficient) {
      for (const id of ["#t-forecast", "#t-predictor", "#t-mode"]) P.setText(id, P.DASH);
      P.setText("#t-interval", f ? "too little data for a forecast yet" : "");
      P.setText("#t-errors", ""); P.setText("#t-samples", series ? series.samples + " samples" : "");
      return;
    }
    const horizonText = $("#horizon").selectedOptions[0].textContent;
    const fig = P.forecastFigure(f, $("#horizon").value);
    P.setText("#t-forecast", P.metricValue(metric, fig.mean));
    P.setText("#t-interval", P.confidenceLabel(f.confidence) + " " + P.interval(metric, fig.iv) + " · " + horizonText);
    P.setText("#t-predictor", f.predictor || P.DASH);
    P.setText("#t-errors", "MAE " + P.metricValue(metric, f.mae) + " · RMSE " + P.metricValue(metric, P.finite(f.mse) ? Math.sqrt(f.mse) : NaN));
    const d = f.distribution || {};
    const k = (d.components || []).length;
    P.setText("#t-mode", f.multimode ? "multi-mode (" + k + " modes)" : d.kind === "point" ? "constant" : "single mode");
    P.setText("#t-samples", (f.samples ?? f.n ?? (series && series.samples) ?? 0) + " samples · " + (d.kind || "normal") + " fit");
  }

  /* ---- history chart ---- */
  function medianStep(ts) {
    const d = [];
    for (let i = Math.max(1, ts.length - 50); i < ts.length; i++) d.push(ts[i] - ts[i - 1]);
    d.sort((a, b) => a - b);
    return d.length ? d[Math.floor(d.length / 2)] : 60;
  }

  function drawHistory(metric, hist, f, horizonS) {
    const ts = hist.timestamps || [];
    if (!ts.length) { P.empty("#chart-history", "No measurements in this series yet."); P.setText("#history-note", ""); return; }
    const x = ts.map((t) => new Date(t * 1000));
    const values = hist.values; const fc = hist.forecasts || []; const lo = hist.lower || []; const hi = hist.upper || [];
    const band = x.map((_, i) => i).filter((i) => P.finite(lo[i]) && P.finite(hi[i]));
    const conf = P.confidenceLabel(f && f.confidence);
    const traces = [
      { x: band.map((i) => x[i]), y: band.map((i) => hi[i]), mode: "lines", line: { width: 0, shape: "hv" }, hoverinfo: "skip", showlegend: false },
      { x: band.map((i) => x[i]), y: band.map((i) => lo[i]), mode: "lines", line: { width: 0, shape: "hv" }, fill: "tonexty",
        fillcolor: "rgba(59,91,219,0.16)", name: "forecast interval", hoverinfo: "skip" },
      { x, y: fc, mode: "lines", name: "one-step forecast", line: { color: "#3b5bdb", width: 1.6, dash: "dot" },
        hovertemplate: "forecast %{y}<extra></extra>" },
      { x, y: values, mode: "lines+markers", name: "measured", line: { color: "#172033", width: 1.2 }, marker: { size: 3 },
        hovertemplate: "%{x}<br>measured %{y}<extra></extra>" },
    ];
    const outside = band.filter((i) => values[i] < lo[i] || values[i] > hi[i]);
    if (outside.length) {
      traces.push({ x: outside.map((i) => x[i]), y: outside.map((i) => values[i]), mode: "markers", name: "outside interval",
        marker: { color: "#c92a2a", size: 6, symbol: "circle-open", line: { width: 1.6 } }, hoverinfo: "skip" });
    }
    if (f && !f.insufficient) traces.push(...nextForecastTraces(f, ts, horizonS));
    const yaxis = axisFor(metric);
    if (metric === "cpu") { yaxis.range = [0, 1.05]; delete yaxis.rangemode; }
    P.plot("#chart-history", traces, { yaxis, xaxis: { type: "date" }, hovermode: "x unified", margin: { l: 64, r: 16, t: 36, b: 40 } });
    const inside = band.length - outside.length;
    P.setText("#history-note", band.length
      ? inside + " of " + band.length + " measurements fell inside their " + conf + " interval (" + P.pct(inside / band.length) +
        "). Each forecast uses only the data strictly before its time."
      : "Forecasts start once the battery has enough history.");
  }

  /** The forecast ahead of the newest sample: a point with its interval, or a box over the horizon. */
  function nextForecastTraces(f, ts, horizonS) {
    const last = ts[ts.length - 1];
    const fig = P.forecastFigure(f, horizonS);
    const iv = fig && fig.iv;
    if (!iv) return [];
    const color = "#e8590c";
    if (horizonS) {
      const t0 = new Date(last * 1000); const t1 = new Date((last + horizonS) * 1000);
      return [
        { x: [t0, t1, t1, t0, t0], y: [iv[0], iv[0], iv[1], iv[1], iv[0]], mode: "lines", fill: "toself",
          fillcolor: P.hexA(color, 0.15), line: { color, width: 1 }, name: "forecast for the horizon", hoverinfo: "skip" },
        { x: [t0, t1], y: [fig.mean, fig.mean], mode: "lines", line: { color, width: 2.5 }, showlegend: false,
          hovertemplate: "horizon mean %{y}<extra></extra>" },
      ];
    }
    const t = new Date((last + medianStep(ts)) * 1000);
    return [{ x: [t], y: [fig.mean], mode: "markers", name: "next forecast",
      marker: { color, size: 9, symbol: "diamond" },
      error_y: { type: "data", symmetric: false, array: [iv[1] - fig.mean], arrayminus: [fig.mean - iv[0]], color, thickness: 2, width: 6 },
      hovertemplate: "next %{y}<extra></extra>" }];
  }

  /* ---- distribution chart ---- */
  /** Density histogram computed here, so the y range can keep the bars readable under a tall mode. */
  function histogram(values, lo, hi, bins) {
    const width = (hi - lo) / bins || 1;
    const counts = new Array(bins).fill(0);
    for (const v of values) counts[Math.min(bins - 1, Math.max(0, Math.floor((v - lo) / width)))]++;
    return { x: counts.map((_, i) => lo + (i + 0.5) * width), y: counts.map((c) => c / (values.length * width)), width };
  }

  function drawDistribution(metric, hist, f) {
    const values = (hist.values || []).filter(P.finite);
    if (!values.length) { P.empty("#chart-dist", "No measurements yet."); return; }
    let lo = Math.min(...values); let hi = Math.max(...values);
    const pad = Math.max((hi - lo) * 0.08, Math.abs(hi) * 0.02, 1e-9);
    lo -= pad; hi += pad;
    if (metric === "cpu") { lo = Math.max(lo, -0.02); hi = Math.min(hi, 1.02); }
    if (metric !== "cpu" && lo < 0 && Math.min(...values) >= 0) lo = 0;
    const hg = histogram(values, lo, hi, 30);
    const traces = [{ type: "bar", x: hg.x, y: hg.y, width: hg.width * 0.94, name: "recent values (" + values.length + ")",
      marker: { color: "rgba(23,32,51,0.22)", line: { color: "rgba(23,32,51,0.45)", width: 1 } },
      hovertemplate: "%{x}: density %{y:.3g}<extra></extra>" }];
    const histMax = Math.max(...hg.y);
    let curveMax = 0;
    const d = f && !f.insufficient ? (f.distribution || {}) : {};
    const comps = d.kind === "point" ? [] : P.components(d);
    const shapes = [];
    if (comps.length) {
      const xs = P.linspace(lo, hi, 400);
      const total = P.mixturePdf(comps, xs);
      curveMax = Math.max(...total);
      traces.push({ x: xs, y: total, mode: "lines", name: comps.length > 1 ? "fitted mixture" : "fitted normal",
        line: { color: "#e8590c", width: 2.5 } });
      if (comps.length > 1) {
        const wsum = comps.reduce((a, c) => a + c.weight, 0) || 1;
        comps.forEach((c, i) => traces.push({ x: xs, y: xs.map((x) => (c.weight / wsum) * P.normalPdf(x, c.mean, c.std)),
          mode: "lines", name: "mode " + (i + 1) + " (" + Math.round(100 * c.weight / wsum) + " %)",
          line: { color: P.colorFor(null, i + 2), width: 1.6, dash: "dash" } }));
      }
    } else if (f && !f.insufficient && P.finite(f.mean)) {
      const v = d.components && d.components[0] && P.finite(d.components[0].mean) ? d.components[0].mean : f.mean;
      shapes.push({ type: "line", x0: v, x1: v, yref: "paper", y0: 0, y1: 1, line: { color: "#e8590c", width: 3 } });
    }
    // A very narrow mode would flatten the bars: show it up to 3x the tallest bar, clipped above.
    const top = Math.max(histMax, Math.min(curveMax, 3 * histMax)) * 1.08;
    const xaxis = { ...axisFor(metric), range: [lo, hi] };
    delete xaxis.rangemode;
    P.plot("#chart-dist", traces, { xaxis, yaxis: { title: { text: "density" }, range: [0, top], showticklabels: false }, shapes,
      bargap: 0, margin: { l: 60, r: 16, t: 36, b: 48 } });
  }

  /* ---- battery chart ---- */
  /** Errors of every predictor over the shown history (the history view reports them), the
      current winner highlighted. */
  function drawBattery(metric, hist, f) {
    lastBattery = [metric, hist, f];
    const source = (hist && hist.members) || (f && f.members) || {};
    const members = Object.entries(source).map(([name, e]) => [name, {
      mae: e.mae, rmse: P.finite(e.rmse) ? e.rmse : (P.finite(e.mse) ? Math.sqrt(e.mse) : null) }])
      .filter(([, e]) => P.finite(e.mae));
    if (!members.length) { P.empty("#chart-battery", f && f.insufficient ? "The battery needs more history." : "No per-predictor errors reported."); return; }
    members.sort((a, b) => a[1].mae - b[1].mae);
    const all = members.length;
    const toggle = $("#battery-all");
    toggle.hidden = all <= BATTERY_TOP;
    toggle.textContent = showAllMembers ? "Show the best " + BATTERY_TOP : "Show all " + all;
    toggle.setAttribute("aria-pressed", String(showAllMembers));
    if (!showAllMembers && all > BATTERY_TOP) {
      const shown = members.slice(0, BATTERY_TOP);
      const w = members.find((m) => m[0] === (f && f.predictor));
      if (w && !shown.includes(w)) shown.push(w);
      members.length = 0; members.push(...shown);
    }
    const names = members.map((m) => m[0]);
    const winner = f && f.predictor;
    const colors = names.map((n) => n === winner ? "#3b5bdb" : "#b8c2d8");
    const node = $("#chart-battery");
    node.style.height = Math.max(320, 20 * names.length + 80) + "px";
    const scale = metric === "cpu" ? 100 : 1;
    P.plot(node, [{ type: "bar", orientation: "h", y: names, x: members.map((m) => m[1].mae * scale), marker: { color: colors },
      customdata: members.map((m) => P.finite(m[1].rmse) ? m[1].rmse * scale : null),
      hovertemplate: "%{y}<br>MAE %{x:.3g}<br>RMSE %{customdata:.3g}<extra></extra>" }],
    { yaxis: { autorange: "reversed", automargin: true, tickfont: { size: 11 } },
      xaxis: { title: { text: metric === "cpu" ? "mean absolute error (percentage points)" : "mean absolute error" } },
      margin: { l: 120, r: 16, t: 8, b: 48 }, bargap: 0.25, showlegend: false });
    P.setText("#battery-note", (winner ? "Winning now: " + winner + ". " : "") + "Mean absolute error of each of the " + all +
      " predictors over the " + (hist && hist.values ? hist.values.length + " " : "") + "samples shown" +
      (names.length < all ? "; the " + names.length + " best are drawn." : "."));
  }

  /* ---- links table ---- */
  async function renderLinks() {
    const links = (resource.series || []).filter((s) => s.peer);
    const body = $("#links-body");
    if (!links.length) { body.replaceChildren(h("tr", { class: "empty" }, h("td", { colspan: 8 }, "No link measurements from this host."))); return; }
    const results = await P.pool(links, 4, (s) => forecastFor(s.metric, s.peer, ""));
    body.replaceChildren(...links.map((s, i) => {
      const f = results[i].ok ? results[i].value : null;
      const age = P.finite(s.latest_timestamp) ? P.now() - s.latest_timestamp : null;
      const good = f && !f.insufficient;
      return h("tr", { dataset: { peer: s.peer, metric: s.metric } },
        h("td", {}, h("a", { href: P.root + "/hosts/" + encodeURIComponent(s.peer) }, s.peer)),
        h("td", {}, P.METRIC_LABEL[s.metric] || s.metric),
        h("td", { class: "num" }, P.metricValue(s.metric, s.latest_value)),
        h("td", {}, good ? h("span", {}, h("b", {}, P.metricValue(s.metric, P.forecastFigure(f, "").mean)), " ",
          h("span", { class: "muted" }, P.interval(s.metric, P.forecastFigure(f, "").iv)))
          : h("span", { class: "muted" }, f ? "too little data" : "unavailable")),
        h("td", {}, good ? (f.predictor || P.DASH) : P.DASH),
        h("td", { class: "num" }, String(s.samples)),
        h("td", { class: "num" }, P.age(age)),
        h("td", {}, h("button", { type: "button", class: "btn btn-small", "aria-label": "Show " + seriesLabel(s.metric, s.peer) + " in the charts",
          onclick: () => { $("#series").value = s.metric + "|" + s.peer; refresh(); window.scrollTo({ top: 0, behavior: "smooth" }); } }, "Show")));
    }));
  }

  /* ---- forecast over a horizon: the public forecast route, one call per horizon ---- */
  const HORIZONS = [...$("#hz-horizon").options].map((o) => [Number(o.value), o.textContent]);
  const HZ_CONFIDENCE = 0.95;
  const FALLBACK_TEXT = {
    blend: "blend: too few analogues, widened toward all past windows of this length",
    unconditional: "unconditional: the means of all past windows of this length (no analogues)",
  };
  /** Days past a day ("2 d", "14.3 d"), else as P.seconds writes it. */
  function span(s) {
    if (!P.finite(s) || s < 86400) return P.seconds(s);
    const d = s / 86400;
    return (Number.isInteger(d) ? String(d) : d.toFixed(1)) + " d";
  }
  function horizonLabel(s) {
    const found = HORIZONS.find(([v]) => v === s);
    return found ? found[1] : span(s);
  }

  async function renderHorizon() {
    const chosen = Number($("#hz-horizon").value);
    const results = await P.pool(HORIZONS, 3, ([s]) =>
      P.api("/forecasts/" + hostPath + "/cpu" + P.query({ horizon: s, confidence: HZ_CONFIDENCE })));
    const signedOut = results.find((r) => !r.ok && r.error.status === 401);
    if (signedOut) throw signedOut.error;
    const i = HORIZONS.findIndex(([v]) => v === chosen);
    const r = results[i];
    const dl = $("#hz-figures");
    if (!r.ok) {
      const why = r.error.status === 404 ? "no CPU measurements for this host"
        : r.error.status === 409 ? "too little data to forecast yet (" + r.error.message + ")" : r.error.message;
      dl.replaceChildren(h("dt", {}, "Status"), h("dd", {}, "No forecast: " + why));
      P.empty("#chart-hz", "No forecast to draw.");
      return;
    }
    const f = r.value;
    const rows = [
      ["Mean", h("b", {}, P.pct(f.mean))],
      [P.confidenceLabel(f.confidence) + " interval", P.interval("cpu", f.interval)],
      ["Distribution", f.kind + (f.multimode ? " (several modes)" : "")],
      ["Support", P.finite(f.support) ? f.support + (f.support === 1 ? " analogue" : " analogues") : "—"],
      ["Fallback", f.fallback ? (FALLBACK_TEXT[f.fallback] || f.fallback) : "none: enough analogues"],
      ["Fleet", P.finite(f.fleet) ? f.fleet + " outcomes of other hosts that were this idle" : "not borrowed"],
      ["From", f.n + " samples, newest " + P.age(P.now() - f.last_timestamp) + " ago"],
    ];
    dl.replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { dataset: { figure: String(k).toLowerCase() } }, v)]));
    const ok = results.map((x, k) => [x, k]).filter(([x]) => x.ok);
    const xs = ok.map(([, k]) => HORIZONS[k][1]);
    const fs = ok.map(([x]) => x.value);
    P.plot("#chart-hz", [{
      x: xs, y: fs.map((v) => v.mean), mode: "markers", type: "scatter", name: "mean and 95 % interval",
      marker: { size: ok.map(([, k]) => (k === i ? 13 : 8)), color: ok.map(([, k]) => (k === i ? "#e8590c" : "#3b5bdb")) },
      error_y: { type: "data", symmetric: false, array: fs.map((v) => v.interval[1] - v.mean),
        arrayminus: fs.map((v) => v.mean - v.interval[0]), thickness: 2, width: 6, color: "#3b5bdb" },
      customdata: fs.map((v) => [v.interval[0], v.interval[1], P.finite(v.support) ? v.support : "–", v.fallback || "none"]),
      hovertemplate: "%{x}: mean %{y:.1%}<br>interval %{customdata[0]:.1%} – %{customdata[1]:.1%}" +
        "<br>support %{customdata[2]}, fallback %{customdata[3]}<extra></extra>",
    }], { xaxis: { type: "category", title: { text: "horizon" } },
      yaxis: { tickformat: ".0%", range: [0, 1.05], title: { text: "mean CPU available" } },
      showlegend: false, margin: { l: 64, r: 16, t: 16, b: 48 } });
  }

  /* ---- calibration of past horizon forecasts: the dashboard's data route ---- */
  let hcalDrawn = null; // the series version drawn: the route's answer changes only with it
  const hcalPath = $("#horizon-card").dataset.calibration;

  async function renderHorizonCalibration(series) {
    const version = series ? series.samples + "|" + series.latest_timestamp : null;
    if (version !== null && version === hcalDrawn) return;
    let c;
    try {
      if (!series) throw new P.ApiError(404, "no CPU measurements for this host yet");
      c = await P.fetchJson(hcalPath);
    } catch (e) {
      if (e.status === 401) throw e;
      P.setText("#hcal-note", "No calibration: " + e.message + ".");
      $("#hcal-body").replaceChildren(h("tr", { class: "empty" }, h("td", { colspan: 8 }, "No calibration.")));
      P.empty("#chart-hcal-coverage", "Nothing to draw."); P.empty("#chart-hcal-pit", "Nothing to draw.");
      hcalDrawn = null;
      return;
    }
    const rows = c.horizons;
    const scored = rows.filter((r) => r.n > 0);
    const total = scored.reduce((a, r) => a + r.n, 0);
    P.setText("#hcal-note", "For each horizon, up to " + c.per_horizon + " past times T (seeded at random, " +
      "each with at least " + span(c.min_history_s) + " of history before it): the forecast the service would have " +
      "answered at T, from samples strictly before T only, against the mean CPU availability realised over the " +
      "following horizon. " + total + " cases over " + scored.length + " of " + rows.length + " horizons, from " +
      c.samples + " samples spanning " + span(c.span_s) + "." +
      (scored.length < rows.length ? " Where a horizon has no cases, the history is too short for it (see the note)." : ""));
    $("#hcal-body").replaceChildren(...rows.map((r) => h("tr", { dataset: { horizon: String(r.horizon_s) } },
      h("th", { scope: "row" }, horizonLabel(r.horizon_s)),
      h("td", { class: "num" }, String(r.n)),
      h("td", { class: "num" }, r.n ? P.pct(r.coverage) : P.DASH),
      h("td", {}, r.wilson ? P.pct(r.wilson[0]) + " – " + P.pct(r.wilson[1]) : P.DASH),
      h("td", { class: "num" }, r.n ? P.pct(r.width) : P.DASH),
      h("td", { class: "num" }, r.n ? P.pct(r.mae) : P.DASH),
      h("td", { class: "num" }, r.n ? P.pct(r.fallback_share, 0) : P.DASH),
      h("td", { class: "small" }, r.n ? (r.wilson[1] < c.confidence ? "covers less than the nominal " + P.pct(c.confidence, 0)
        : r.wilson[0] > c.confidence ? "wider than it needs to be" : "consistent with " + P.pct(c.confidence, 0))
        : "no cases: " + r.reason))));
    if (!scored.length) {
      P.empty("#chart-hcal-coverage", "No cases yet: the history is too short for every horizon.");
      P.empty("#chart-hcal-pit", "No cases yet.");
      hcalDrawn = version;
      return;
    }
    const labels = scored.map((r) => horizonLabel(r.horizon_s));
    P.plot("#chart-hcal-coverage", [
      { x: labels, y: scored.map((r) => r.coverage), mode: "lines+markers", name: "coverage",
        line: { color: "#3b5bdb", width: 2 }, marker: { size: 9 },
        error_y: { type: "data", symmetric: false, array: scored.map((r) => r.wilson[1] - r.coverage),
          arrayminus: scored.map((r) => r.coverage - r.wilson[0]), thickness: 1.5, width: 5 },
        customdata: scored.map((r) => [r.n, r.hits, r.wilson[0], r.wilson[1]]),
        hovertemplate: "%{x}: %{customdata[1]} of %{customdata[0]} covered (%{y:.1%})" +
          "<br>Wilson 95 %: %{customdata[2]:.1%} – %{customdata[3]:.1%}<extra></extra>" },
      { x: labels, y: labels.map(() => c.confidence), mode: "lines", name: "nominal " + P.pct(c.confidence, 0),
        line: { color: "#e8590c", width: 1.5, dash: "dash" }, hoverinfo: "skip" },
    ], { xaxis: { type: "category", title: { text: "horizon" } },
      yaxis: { tickformat: ".0%", range: [Math.min(0.5, ...scored.map((r) => r.wilson[0])) - 0.02, 1.02], title: { text: "coverage" } },
      margin: { l: 64, r: 16, t: 36, b: 48 } });
    const bins = c.pit_counts.length;
    const pooled = c.pit_counts.reduce((a, b) => a + b, 0);
    P.plot("#chart-hcal-pit", [
      { type: "bar", x: c.pit_counts.map((_, k) => (k + 0.5) / bins), y: c.pit_counts, width: 0.94 / bins,
        name: "cases", marker: { color: "rgba(59,91,219,0.55)" },
        hovertemplate: "PIT %{x:.2f}: %{y} cases<extra></extra>" },
      { x: [0, 1], y: [pooled / bins, pooled / bins], mode: "lines", name: "calibrated (flat)",
        line: { color: "#e8590c", width: 1.5, dash: "dash" }, hoverinfo: "skip" },
    ], { xaxis: { range: [0, 1], title: { text: "forecast CDF at the realised mean" } },
      yaxis: { title: { text: "cases" }, rangemode: "tozero" }, bargap: 0,
      margin: { l: 56, r: 16, t: 36, b: 48 } });
    hcalDrawn = version;
  }

  /* ---- benchmark calibrated from reported runs ---- */
  function perElement(x) { return P.finite(x) ? x.toExponential(3) + " s" : P.DASH; }
  function linkRows(bw) {
    if (!bw.links.length) return [["Link bandwidth", bw.reason]];
    return bw.links.map((l) => {
      if (l.bandwidth === null) return ["Link to " + l.peer, l.reason || P.DASH];
      const other = l.compared_with === "measured" ? l.measured_bandwidth : l.default_bandwidth;
      const verdict = l.agrees === false ? " — differs, check it" : l.agrees === true ? " — agrees" : "";
      return ["Link to " + l.peer,
        P.rate(l.bandwidth) + (P.finite(l.std_error) ? " ± " + P.rate(l.std_error) : "") +
        " from " + l.runs + " runs (latency " + l.latency_source + "); " + l.compared_with + " " +
        P.rate(other) + verdict + "; planning uses the " + l.used_by_planning + " value"];
    });
  }
  async function renderCalibration() {
    const dl = $("#calibration");
    let c;
    try { c = await P.api("/resources/" + hostPath + "/calibration"); } catch (e) {
      if (e.status === 401) throw e;
      dl.replaceChildren(h("dt", {}, "Status"), h("dd", {}, "Calibration unavailable: " + e.message));
      return;
    }
    const cal = c.calibrated;
    const verdict = c.agrees === false
      ? h("span", { class: "verdict bad" }, "differs: the configured value is outside the calibrated interval — check it")
      : c.agrees === true ? h("span", { class: "verdict ok" }, "agrees with the runs")
        : h("span", { class: "verdict" }, cal ? "nothing configured to compare" : "no usable runs yet");
    const used = c.used_by_planning === "calibrated" ? "the calibrated value"
      : c.used_by_planning === "configured" ? "the configured value"
        : "none: schedules over this host need a benchmark (" + c.min_runs + " runs calibrate one)";
    const rows = [
      ["Configured", perElement(c.configured)],
      ["Calibrated", cal ? perElement(cal.benchmark) + (P.finite(cal.std_error) ? " ± " + perElement(cal.std_error) + " (standard error)" : "") : P.DASH],
      ["Interval", cal && cal.interval ? Math.round(cal.confidence * 100) + " %: " + perElement(cal.interval[0]) + " – " + perElement(cal.interval[1]) : P.DASH],
      ["From", (cal ? cal.runs.length : 0) + " of " + c.runs_read + " reported runs" + (c.unusable_runs ? " (" + c.unusable_runs + " without cpu samples over their time)" : "")],
      ["Verdict", verdict],
      ["Planning uses", used],
      ...linkRows(c.bandwidth),
    ];
    dl.replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  }

  /* ---- machine profile ---- */
  const PATTERN_COLORS = { unit: "#3b5bdb", stride2: "#e8590c", random: "#2b8a3e" };
  const PATTERN_ORDER = ["unit", "stride2", "random"];
  const FIGURE_LABEL = {
    dense: "Flops, dense (matrix multiply, one BLAS thread)",
    stencil: "Flops, stencil (numpy 5-point, in cache)",
    call: "Overhead per numpy call (small strided views)",
    view: "Overhead per 2-D strided view",
  };
  let profileDrawn = null; // the version drawn, so a refresh redraws only for another one
  let profilePinned = false; // the operator picked a version: a newer one does not replace it

  function bytesLabel(b) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0; let v = b;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return P.num(v, 3) + " " + units[i];
  }
  function sd(samples) {
    const n = samples.length;
    if (n < 2) return 0;
    const m = samples.reduce((a, b) => a + b, 0) / n;
    return Math.sqrt(samples.reduce((a, b) => a + (b - m) ** 2, 0) / (n - 1));
  }
  /** Ticks at powers of 8 KiB apart, labelled in KiB/MiB/GiB, over the sizes shown. */
  function sizeAxis(sizes, title) {
    const lo = Math.min(...sizes); const hi = Math.max(...sizes);
    const ticks = [];
    for (let e = 0; 2 ** e <= hi * 2; e += 3) if (2 ** e >= lo / 2) ticks.push(2 ** e);
    return { type: "log", title: { text: title }, tickvals: ticks, ticktext: ticks.map(bytesLabel) };
  }

  function curveTrace(c) {
    const shared = c.copies > 1;
    const pts = c.points;
    return {
      x: pts.map((p) => p.bytes), y: pts.map((p) => p.value / 1e9), mode: "lines+markers",
      name: c.kind + " " + c.pattern + (shared ? ", " + c.copies + " copies (each)" : ""),
      line: { color: PATTERN_COLORS[c.pattern] || "#495057", width: shared ? 1.6 : 2.2, dash: shared ? "dash" : "solid" },
      marker: { size: shared ? 4 : 6 },
      error_y: { type: "data", array: pts.map((p) => sd(p.samples) / 1e9), visible: true, thickness: 1, width: 3 },
      customdata: pts.map((p) => [bytesLabel(p.bytes), p.samples.length]),
      hovertemplate: "%{fullData.name}<br>%{customdata[0]}: %{y:.3g} GB/s (%{customdata[1]} repetitions)<extra></extra>",
    };
  }

  function drawMemory(profile, kind) {
    const curves = (profile.memory || []).filter((c) => c.kind === kind)
      .sort((a, b) => a.copies - b.copies || PATTERN_ORDER.indexOf(a.pattern) - PATTERN_ORDER.indexOf(b.pattern));
    const sizes = curves.flatMap((c) => c.points.map((p) => p.bytes));
    P.plot("#chart-profile-" + kind, curves.map(curveTrace), {
      xaxis: sizeAxis(sizes, "working set"), yaxis: { title: { text: "GB/s (each copy)" }, rangemode: "tozero" },
      margin: { l: 60, r: 16, t: 36, b: 48 },
    });
  }

  function drawMessages(profile) {
    const curves = profile.messages || [];
    const node = $("#chart-profile-messages");
    if (!curves.length) {
      node.hidden = true;
      P.setText("#profile-messages-note", "No message figures in this profile (the probe does not measure them yet).");
      return;
    }
    node.hidden = false;
    P.setText("#profile-messages-note", "One-way time of one message of each size (mean of the repetitions).");
    const sizes = curves.flatMap((c) => c.points.map((p) => p.bytes)).filter((b) => b > 0);
    P.plot(node, curves.map((c, i) => ({
      x: c.points.map((p) => p.bytes), y: c.points.map((p) => p.value), mode: "lines+markers", name: "to " + c.peer,
      line: { color: P.colorFor(c.peer, i), width: 2 }, customdata: c.points.map((p) => bytesLabel(p.bytes)),
      hovertemplate: "to " + c.peer + "<br>%{customdata}: %{y:.3s}s<extra></extra>",
    })), { xaxis: sizeAxis(sizes.length ? sizes : [1, 1024], "message size"),
      yaxis: { type: "log", title: { text: "one-way seconds" } }, margin: { l: 64, r: 16, t: 36, b: 48 } });
  }

  function figureRows(figures, unitOf, nameOf) {
    return Object.entries(figures || {}).map(([kind, f]) => h("tr", { dataset: { figure: kind } },
      h("th", { scope: "row" }, FIGURE_LABEL[kind] || kind),
      h("td", { class: "num" }, unitOf(f.value)),
      h("td", { class: "num" }, P.pct(sd(f.samples) / f.value)),
      h("td", { class: "num" }, String(f.samples.length)),
      h("td", {}, h("code", {}, nameOf(kind)))));
  }

  function drawProfile(stored, versions) {
    const p = stored.profile;
    const m = p.machine || {};
    const loadAvg = Array.isArray(m.load_average) ? m.load_average.map((x) => P.num(x, 2)).join(", ") : null;
    const rows = [
      ["Version", stored.version + " of " + versions.length + (stored.version === versions[0].version ? " (newest)" : "")],
      ["Measured", P.when(stored.measured_at) + " (" + P.age(P.now() - stored.measured_at) + " ago)"],
      ["Method", stored.method || P.DASH],
      ["Quick", stored.quick ? "yes: fewer sizes and repetitions (ppe profile --quick)" : "no: the full sweep"],
      ["Machine", [m.cpu, P.finite(m.cpus) ? m.cpus + " CPUs" : null, m.numpy ? "numpy " + m.numpy : null,
        loadAvg ? "load average " + loadAvg : null].filter(Boolean).join(" · ") || P.DASH],
    ];
    $("#profile-meta").replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
    $("#profile-body").hidden = false; // before drawing: plotly sizes the charts to their box
    drawMemory(p, "read");
    drawMemory(p, "rmw");
    $("#profile-rates-body").replaceChildren(
      ...figureRows(p.flops, (v) => P.num(v / 1e9, 3) + " GFLOP/s", (k) => "flops_" + k),
      ...figureRows(p.overheads, P.seconds, (k) => k + "_s"));
    drawMessages(p);
  }

  function fillVersions(versions) {
    const sel = $("#profile-version");
    const keep = profilePinned ? sel.value : String(versions[0].version);
    sel.replaceChildren(...versions.map((v) => h("option", { value: String(v.version) },
      "v" + v.version + " · " + P.when(v.measured_at) + (v.quick ? " · quick" : ""))));
    sel.value = [...sel.options].some((o) => o.value === keep) ? keep : String(versions[0].version);
    $("#profile-pick").hidden = false;
  }

  async function renderProfile() {
    let versions;
    try { versions = await P.api("/resources/" + hostPath + "/profiles"); } catch (e) {
      if (e.status === 401) throw e;
      P.setText("#profile-note", "Profile unavailable: " + e.message);
      return;
    }
    if (!versions.length) {
      $("#profile-body").hidden = true; $("#profile-pick").hidden = true;
      $("#profile-note").replaceChildren("No profile yet: measure one with ", h("code", {}, "ppe profile --out " + host + ".json"),
        " and POST it to ", h("code", {}, "/api/v1/resources/" + host + "/profiles"), "; the sensor measures one daily.");
      profileDrawn = null;
      return;
    }
    fillVersions(versions);
    const version = Number($("#profile-version").value);
    if (version === profileDrawn) return;
    const stored = await P.api("/resources/" + hostPath + "/profile" + P.query({ version }));
    P.setText("#profile-note", "The rates this host's probe measured (PMaC machine profile, docs/pmac.md); " +
      "planning convolves them with an application's signature when the host has no other speed.");
    drawProfile(stored, versions);
    profileDrawn = version;
  }

  async function load() {
    try { resource = await P.api("/resources/" + hostPath); } catch (e) { e.unknownHost = e.status === 404; throw e; }
    fillSeriesSelect();
    showProps();
    const { metric, peer } = selected();
    const series = (resource.series || []).find((s) => s.metric === metric && (s.peer || "") === peer);
    const horizon = $("#horizon").value;
    const settled = await Promise.allSettled([
      forecastFor(metric, peer, ""),
      horizon ? forecastFor(metric, peer, horizon) : Promise.resolve(null),
      P.api("/resources/" + hostPath + "/history/" + metric + P.query({ peer, limit: $("#limit").value, confidence: $("#confidence").value })),
    ]);
    const failed = settled.find((r) => r.status === "rejected");
    const [base, ahead, hist] = settled.map((r) => (r.status === "fulfilled" ? r.value : null));
    const shown = ahead || base;
    renderTiles(metric, series, shown);
    if (hist) drawHistory(metric, hist, shown, horizon ? Number(horizon) : 0);
    else P.empty("#chart-history", "History unavailable: " + failed.reason.message);
    drawDistribution(metric, hist || { values: [] }, base);
    drawBattery(metric, hist, base);
    await renderLinks();
    // The calibration may take a second when the series has moved on: the other cards meanwhile.
    const cpu = (resource.series || []).find((s) => s.metric === "cpu" && !s.peer);
    const hcal = renderHorizonCalibration(cpu).then(() => null, (e) => e);
    await renderHorizon();
    await renderCalibration();
    await renderProfile();
    const hcalFailed = await hcal;
    if (hcalFailed) throw hcalFailed;
    if (failed) throw failed.reason;
    P.liveStatus(true, "Updated " + new Date().toLocaleTimeString());
  }

  const refresh = P.every(15000, async () => {
    try { await load(); } catch (e) {
      if (e.unknownHost) { P.liveStatus(false, "Unknown host " + host); P.setText("#props", "No measurements have been posted for this host."); }
      else if (e.status !== 401) P.liveStatus(false, "Update failed: " + e.message);
    }
  }, () => $("#live").checked);
  $("#battery-all").addEventListener("click", () => {
    showAllMembers = !showAllMembers;
    if (lastBattery) drawBattery(...lastBattery);
  });
  $("#profile-version").addEventListener("change", async () => {
    const sel = $("#profile-version");
    profilePinned = sel.selectedIndex > 0;
    try { await renderProfile(); } catch (e) {
      if (e.status !== 401) P.setText("#profile-note", "Profile unavailable: " + e.message);
    }
  });
  $("#hz-horizon").addEventListener("change", async () => {
    try { await renderHorizon(); } catch (e) {
      if (e.status !== 401) P.setText("#hz-note", "Forecast unavailable: " + e.message);
    }
  });
  $("#controls").addEventListener("submit", (e) => e.preventDefault());
  for (const id of ["#series", "#horizon", "#confidence", "#limit"]) $(id).addEventListener("change", refresh);
  $("#live").addEventListener("change", () => { if ($("#live").checked) refresh(); });
  refresh(); // deferred scripts run in order, so plotly (in <head>) is already loaded
})();
