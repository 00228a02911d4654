/* Runs page: live accuracy per strategy, each run's served interval against its actual time. */
"use strict";

(function () {
  const P = window.PPE;
  const { h, $ } = P;
  const RUNS_SHOWN = 200;

  function fillSelect(sel, values) {
    const keep = sel.value;
    sel.replaceChildren(h("option", { value: "" }, "all"), ...values.map((v) => h("option", { value: v }, v)));
    if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
  }

  function coverageClass(g) {
    if (!P.finite(g.coverage) || !g.coverage_interval || !P.finite(g.nominal)) return "";
    const [lo, hi] = g.coverage_interval;
    return g.nominal < lo || g.nominal > hi ? "bad" : "ok"; // the promise outside what the runs allow
  }

  function renderSummary(groups) {
    const body = $("#summary-body");
    body.replaceChildren(...(groups.length ? groups.map((g) => h("tr", {},
      h("td", {}, g.app), h("td", {}, g.strategy || P.DASH),
      h("td", { class: "num" }, String(g.completed)), h("td", { class: "num" }, String(g.failed)),
      h("td", { class: "num " + coverageClass(g) }, P.pct(g.coverage)),
      h("td", {}, g.coverage_interval ? P.pct(g.coverage_interval[0]) + " – " + P.pct(g.coverage_interval[1]) : P.DASH),
      h("td", { class: "num" }, P.pct(g.nominal, 0)),
      h("td", { class: "num" }, P.pct(g.mean_relative_error)),
      h("td", { class: "num" }, P.num(g.mean_ratio, 3))))
      : [h("tr", { class: "empty" }, h("td", { colspan: 9 }, "No run linked to a served schedule yet."))]));
  }

  function flatten(groups) {
    const runs = [];
    for (const g of groups) for (const j of g.judged) runs.push({ ...j, app: g.app, strategy: g.strategy });
    return runs.sort((a, b) => b.created_at - a.created_at).slice(0, RUNS_SHOWN);
  }

  function renderChart(groups) {
    const runs = flatten(groups);
    if (!runs.length) { P.empty("#chart-runs", "No judged runs yet."); return; }
    const unit = P.timeUnit(runs.flatMap((r) => [r.actual, r.interval[1]]));
    const order = runs.slice().reverse().map((r) => "#" + r.run_id);
    const traces = [];
    groups.forEach((g, i) => {
      const mine = runs.filter((r) => r.app === g.app && r.strategy === g.strategy).reverse();
      if (!mine.length) return;
      const color = P.strategyColor(g.strategy, i);
      const label = (groups.some((o) => o.app !== g.app) ? g.app + " · " : "") + (g.strategy || "none");
      const x = mine.map((r) => "#" + r.run_id); // one column per run, even when reported together
      traces.push({
        type: "scatter", mode: "markers", name: label + ": predicted", legendgroup: label, x,
        y: mine.map((r) => r.mean / unit.div),
        marker: { symbol: "line-ew-open", size: 12, color },
        error_y: { type: "data", symmetric: false, color: P.hexA(color, 0.55), thickness: 6, width: 0,
          array: mine.map((r) => (r.interval[1] - r.mean) / unit.div),
          arrayminus: mine.map((r) => (r.mean - r.interval[0]) / unit.div) },
        hovertemplate: "predicted %{y:.3g} " + unit.suffix + "<extra>" + label + "</extra>",
      });
      traces.push({
        type: "scatter", mode: "markers", name: label + ": actual", legendgroup: label, x,
        y: mine.map((r) => r.actual / unit.div),
        marker: { size: 8, color: mine.map((r) => (r.inside ? color : "#c92a2a")), line: { width: 1, color: "#fff" } },
        customdata: mine.map((r) => r.run_id),
        hovertemplate: "run %{customdata}: actual %{y:.3g} " + unit.suffix + "<extra>" + label + "</extra>",
      });
    });
    P.plot("#chart-runs", traces, {
      yaxis: { title: { text: "makespan (" + unit.suffix + ")" }, rangemode: "tozero" },
      xaxis: { title: { text: "run, oldest to newest" }, type: "category", categoryorder: "array", categoryarray: order },
    });
  }

  function renderRuns(groups) {
    const runs = flatten(groups);
    $("#runs-body").replaceChildren(...(runs.length ? runs.map((r) => h("tr", {},
      h("td", { class: "num" }, String(r.run_id)), h("td", {}, P.when(r.created_at)),
      h("td", {}, r.app), h("td", {}, r.strategy || P.DASH),
      h("td", { class: "num" }, P.seconds(r.mean)),
      h("td", {}, P.secondsRange(r.interval[0], r.interval[1]) + (r.scale !== 1 ? " (×" + P.num(r.scale, 3) + " iterations)" : "")),
      h("td", { class: "num" }, P.seconds(r.actual)),
      h("td", { class: "num" }, P.num(r.ratio, 3)),
      h("td", { class: r.inside ? "ok" : "bad" }, r.inside ? "inside" : "outside")))
      : [h("tr", { class: "empty" }, h("td", { colspan: 9 }, "No judged runs yet."))]));
  }

  async function load() {
    const groups = await P.api("/accuracy" + P.query({ app: $("#app").value, strategy: $("#strategy").value, last: $("#last").value }));
    if (!$("#app").value && !$("#strategy").value) {
      fillSelect($("#app"), [...new Set(groups.map((g) => g.app))].sort());
      fillSelect($("#strategy"), [...new Set(groups.map((g) => g.strategy).filter(Boolean))].sort());
    }
    renderSummary(groups);
    renderChart(groups);
    renderRuns(groups);
    P.liveStatus(true, "Updated " + new Date().toLocaleTimeString());
  }

  const refresh = P.every(15000, async () => {
    try { await load(); } catch (e) { if (e.status !== 401) P.liveStatus(false, "Update failed: " + e.message); }
  }, () => $("#live").checked);
  for (const id of ["#app", "#strategy", "#last"]) $(id).addEventListener("change", refresh);
  $("#controls").addEventListener("submit", (e) => e.preventDefault());
  refresh();
})();
