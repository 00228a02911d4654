/* Schedule playground: one POST /api/v1/schedules per chosen strategy, compared side by side. */
"use strict";

(function () {
  const P = window.PPE;
  const { h, $, $$ } = P;
  let resources = [];
  const hostColor = new Map();

  function colorOf(name) {
    if (!hostColor.has(name)) hostColor.set(name, P.colorFor(name, hostColor.size));
    return hostColor.get(name);
  }

  async function loadHosts() {
    resources = await P.api("/resources");
    const box = $("#host-choices");
    if (!resources.length) { box.replaceChildren(h("span", { class: "muted" }, "No hosts yet: sensors have not posted measurements.")); return; }
    box.replaceChildren(...resources.map((r) => {
      const cpu = (r.series || []).find((s) => s.metric === "cpu" && !s.peer);
      colorOf(r.name);
      return h("label", {}, h("input", { type: "checkbox", name: "host", value: r.name, checked: !!cpu }),
        h("span", { class: "swatch", style: { background: colorOf(r.name) }, "aria-hidden": "true" }),
        r.name, cpu ? h("span", { class: "muted small" }, P.pct(cpu.latest_value, 0)) : h("span", { class: "muted small" }, "no CPU data"));
    }));
  }

  /** Built-in and registered application models, as the API knows them. */
  async function loadModels() {
    let models;
    try { models = await P.api("/models"); } catch (e) { return; } // keep the built-in pair
    if (!Array.isArray(models) || !models.length) return;
    const sel = $("#app");
    const keep = sel.value;
    const label = { sor: "SOR (red-black)", jacobi2d: "Jacobi2D" };
    sel.replaceChildren(...models.map((m) => h("option", { value: m.name },
      label[m.name] || (m.name + (m.builtin ? "" : " (registered)")))));
    if (models.some((m) => m.name === keep)) sel.value = keep;
  }

  function chosen(name) { return $$('input[name="' + name + '"]:checked').map((i) => i.value); }

  function requestFor(strategy) {
    const bench = parseFloat($("#benchmark").value);
    const hosts = chosen("host").map((name) => {
      const r = resources.find((x) => x.name === name);
      const registered = r && r.properties && P.finite(r.properties.benchmark);
      return P.finite(bench) && bench > 0 && !registered ? { name, benchmark: bench } : name;
    });
    const body = {
      app: $("#app").value, n: parseInt($("#n").value, 10), iterations: parseInt($("#iterations").value, 10),
      hosts, strategy, confidence: parseFloat($("#confidence").value),
    };
    const k = parseFloat($("#k").value); if (P.finite(k)) body.k = k;
    const bw = parseFloat($("#bandwidth").value); if (P.finite(bw)) body.bandwidth = bw;
    const lat = parseFloat($("#latency").value); if (P.finite(lat)) body.latency = lat;
    const q = parseFloat($("#quantile").value); if (P.finite(q)) body.quantile = q;
    if ($("#select").checked) body.select = true;
    return body;
  }

  function validate() {
    const problems = [];
    for (const input of [$("#n"), $("#iterations")]) {
      const ok = Number.isInteger(Number(input.value)) && Number(input.value) >= Number(input.min);
      input.setAttribute("aria-invalid", ok ? "false" : "true");
      if (!ok) problems.push($('label[for="' + input.id + '"]').textContent + " must be a whole number ≥ " + input.min);
    }
    if (!chosen("host").length) problems.push("pick at least one host");
    if (!chosen("strategy").length) problems.push("pick at least one strategy");
    return problems;
  }

  function status(text, error) {
    const el = $("#form-status");
    el.textContent = text;
    el.className = "status" + (error ? " error" : "");
  }

  async function submit(event) {
    event.preventDefault();
    const problems = validate();
    if (problems.length) { status("Cannot compute: " + problems.join("; ") + ".", true); return; }
    const strategies = chosen("strategy");
    const button = $("#submit");
    button.disabled = true;
    status("Computing " + strategies.length + " schedule" + (strategies.length > 1 ? "s" : "") + "…");
    try {
      const results = await P.pool(strategies, 3, (s) => P.api("/schedules", { json: requestFor(s) }));
      const ok = results.filter((r) => r.ok).length;
      render(strategies, results);
      const failed = results.filter((r) => !r.ok).map((r, i) => r.error.message);
      status(ok + " of " + strategies.length + " schedules computed" + (failed.length ? "; " + failed[0] : "") + ".", ok === 0);
      loadRecent();
    } finally {
      button.disabled = false;
    }
  }

  /* ---- results ---- */
  function stripPicture(allocation) {
    const total = allocation.reduce((a, x) => a + (x.rows || 0), 0) || 1;
    return h("div", { class: "strip-picture", role: "img",
      "aria-label": "Grid split into strips: " + allocation.map((a) => a.host + " " + a.rows + " rows").join(", ") },
    allocation.filter((a) => a.rows > 0).map((a) => h("div", { title: a.host + ": " + a.rows + " rows",
      style: { flexGrow: String(a.rows / total), background: colorOf(a.host) } })));
  }

  function card(strategy, i, result) {
    const color = P.strategyColor(strategy, i);
    const head = h("h3", {}, h("span", { class: "swatch", style: { background: color }, "aria-hidden": "true" }), strategy);
    if (!result.ok) {
      return h("article", { class: "card strategy-card", dataset: { strategy } }, head,
        h("p", { class: "strategy-error", role: "alert" }, result.error.message));
    }
    const r = result.value;
    const m = r.makespan || {};
    const rows = (r.allocation || []).map((a) => {
      const iv = P.ivOf(a.time);
      return h("tr", { dataset: { host: a.host, rows: String(a.rows) } },
        h("th", { scope: "row" }, h("span", { class: "swatch", style: { background: colorOf(a.host) }, "aria-hidden": "true" }), " ", a.host),
        h("td", { class: "num rows" }, String(a.rows)),
        h("td", { class: "num" }, P.seconds(a.time && a.time.mean),
          h("div", { class: "muted small" }, iv ? P.secondsRange(iv[0], iv[1]) : "")));
    });
    return h("article", { class: "card strategy-card", dataset: { strategy, id: String(r.id ?? "") } }, head,
      h("div", { class: "makespan" }, P.seconds(m.mean)),
      h("div", { class: "makespan-sub" }, "predicted makespan · " + P.confidenceLabel(m.confidence) + " " +
        (P.ivOf(m) ? P.secondsRange(P.ivOf(m)[0], P.ivOf(m)[1]) : P.DASH) +
        (P.finite(m.std) ? " · σ " + P.seconds(m.std) : "") + (r.id != null ? " · #" + r.id : "")),
      h("div", { class: "strategy-body" }, stripPicture(r.allocation || []),
        h("div", { class: "strip-table table-wrap" }, h("table", { class: "data strips" },
          h("caption", { class: "visually-hidden" }, "Strips for the " + strategy + " strategy"),
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Host"), h("th", { scope: "col", class: "num" }, "Rows"),
            h("th", { scope: "col", class: "num" }, "Time · " + P.confidenceLabel(m.confidence)))),
          h("tbody", {}, rows)))));
  }

  function render(strategies, results) {
    $("#results").hidden = false;
    $("#strategy-cards").replaceChildren(...strategies.map((s, i) => card(s, i, results[i])));
    const good = strategies.map((s, i) => ({ s, i, r: results[i] })).filter((x) => x.r.ok).map((x) => ({ ...x, r: x.r.value }));
    if (!good.length) {
      for (const id of ["#chart-strips", "#chart-makespan", "#chart-times"]) P.empty(id, "No schedule to draw.");
      return;
    }
    drawStrips(good); drawMakespan(good); drawTimes(good);
  }

  function drawStrips(good) {
    const hosts = [...new Set(good.flatMap((g) => (g.r.allocation || []).map((a) => a.host)))];
    const traces = hosts.map((host) => ({
      type: "bar", orientation: "h", name: host, y: good.map((g) => g.s),
      x: good.map((g) => { const a = (g.r.allocation || []).find((x) => x.host === host); return a ? a.rows : 0; }),
      marker: { color: colorOf(host), line: { color: "#fff", width: 1 } },
      text: good.map((g) => { const a = (g.r.allocation || []).find((x) => x.host === host); return a && a.rows ? String(a.rows) : ""; }),
      textposition: "inside", insidetextanchor: "middle", textfont: { color: "#fff" },
      hovertemplate: host + ": %{x} rows<extra>%{y}</extra>",
    }));
    P.plot("#chart-strips", traces, { barmode: "stack", xaxis: { title: { text: "rows" } }, yaxis: { autorange: "reversed" },
      margin: { l: 100, r: 16, t: 36, b: 48 } });
  }

  function drawMakespan(good) {
    const comps = good.map((g) => P.components(g.r.makespan).filter((c) => c.std > 0));
    const span = P.spanOf(comps.flat(), good.map((g) => g.r.makespan && g.r.makespan.mean));
    if (!span) { P.empty("#chart-makespan", "No makespan distribution reported."); return; }
    const xs = P.linspace(Math.max(0, span[0]), span[1], 300);
    const traces = []; const shapes = [];
    good.forEach((g, j) => {
      const color = P.strategyColor(g.s, g.i);
      const m = g.r.makespan || {};
      if (comps[j].length) {
        const approx = !(m.components && m.components.length) && m.kind && !["normal", "mixture"].includes(m.kind);
        traces.push({ x: xs, y: P.mixturePdf(comps[j], xs), mode: "lines", name: g.s + (approx ? " (normal approx.)" : ""),
          line: { color, width: 2.2 }, fill: "tozeroy", fillcolor: P.hexA(color, 0.08), hovertemplate: g.s + " %{x:.4g} s<extra></extra>" });
      } else if (P.finite(m.mean)) {
        shapes.push({ type: "line", x0: m.mean, x1: m.mean, yref: "paper", y0: 0, y1: 1, line: { color, width: 2 } });
      }
      const iv = P.ivOf(m);
      if (iv) shapes.push({ type: "rect", x0: iv[0], x1: iv[1], yref: "paper", y0: 0, y1: 0.03, fillcolor: color, opacity: 0.5, line: { width: 0 } });
    });
    P.plot("#chart-makespan", traces, { shapes, xaxis: { title: { text: "makespan (s)" } }, yaxis: { title: { text: "density" } },
      margin: { l: 60, r: 16, t: 36, b: 48 } });
  }

  function drawTimes(good) {
    const traces = good.map((g) => {
      const alloc = g.r.allocation || [];
      const color = P.strategyColor(g.s, g.i);
      const mean = alloc.map((a) => a.time && a.time.mean);
      const iv = alloc.map((a) => P.ivOf(a.time));
      return { type: "bar", name: g.s, x: alloc.map((a) => a.host), y: mean, marker: { color: P.hexA(color, 0.75) },
        customdata: alloc.map((a) => a.rows),
        error_y: { type: "data", symmetric: false, color: "#172033", thickness: 1.4, width: 4,
          array: iv.map((v, k) => v ? v[1] - mean[k] : 0), arrayminus: iv.map((v, k) => v ? mean[k] - v[0] : 0) },
        hovertemplate: "%{x}: %{y:.4g} s, %{customdata} rows<extra>" + g.s + "</extra>" };
    });
    P.plot("#chart-times", traces, { barmode: "group", yaxis: { title: { text: "predicted time (s)" }, rangemode: "tozero" },
      margin: { l: 60, r: 16, t: 36, b: 48 } });
  }

  /* ---- recent schedules ---- */
  async function loadRecent() {
    const body = $("#recent-body");
    let items;
    try { items = await P.api("/schedules" + P.query({ limit: 15 })); } catch (e) {
      if (e.status === 401) return;
      body.replaceChildren(h("tr", { class: "empty" }, h("td", { colspan: 6 }, "Could not load recent schedules: " + e.message)));
      return;
    }
    if (!items || !items.length) { body.replaceChildren(h("tr", { class: "empty" }, h("td", { colspan: 6 }, "No schedule has been served yet."))); return; }
    body.replaceChildren(...items.map((it) => {
      const req = it.request || {}; const res = it.response || {};
      const m = res.makespan || {};
      const iv = P.ivOf(m);
      return h("tr", { dataset: { id: String(it.id) } },
        h("td", { class: "num" }, String(it.id)),
        h("td", {}, P.when(it.created_at)),
        h("td", {}, (res.app || req.app || P.DASH) + (req.n ? " · n=" + req.n : "") + (req.iterations ? " × " + req.iterations : "")),
        h("td", {}, res.strategy || req.strategy || P.DASH),
        h("td", {}, h("div", { class: "inline-list" }, (res.allocation || []).map((a) => h("span", {},
          h("span", { class: "swatch", style: { background: colorOf(a.host) }, "aria-hidden": "true" }), " ", a.host + ": " + a.rows)))),
        h("td", { class: "nowrap" }, h("b", {}, P.seconds(m.mean)), " ", h("span", { class: "muted" }, iv ? P.secondsRange(iv[0], iv[1]) : "")));
    }));
  }

  $("#schedule-form").addEventListener("submit", submit);
  $("#hosts-all").addEventListener("click", () => $$('input[name="host"]').forEach((i) => { i.checked = true; }));
  $("#hosts-none").addEventListener("click", () => $$('input[name="host"]').forEach((i) => { i.checked = false; }));
  $("#recent-refresh").addEventListener("click", loadRecent);
  loadHosts().catch((e) => { if (e.status !== 401) $("#host-choices").replaceChildren(h("span", { class: "strategy-error" }, "Could not load hosts: " + e.message)); });
  loadModels();
  loadRecent();
})();
