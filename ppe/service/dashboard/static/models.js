/* Models page: pick an application's kernel, an x-axis parameter and a graph type; draw the
   measured runs, the fitted curve with its prediction band and the extrapolated point, the
   two-range surface and the kernel coupling table. The modelling is done by the server
   (ppe.empirical); this page only draws the JSON of its data route. */
"use strict";

(function () {
  const P = window.PPE;
  const { h, $ } = P;
  const DATA = $("#models-page").dataset.path;
  const csrfMeta = document.querySelector('meta[name="ppe-csrf"]');
  const CSRF = csrfMeta ? csrfMeta.content : "";
  const TYPE_LABEL = {
    search: "Automatic (model search)", unknown: "Unknown (Prophecy: least residual norm)",
    linear: "Linear", quadratic: "Quadratic", cubic: "Cubic", poly4: "4th-order polynomial",
    poly5: "5th-order polynomial", poly6: "6th-order polynomial", inverse_linear: "Inverse linear",
    inverse_quadratic: "Inverse quadratic", inverse_cubic: "Inverse cubic",
    inverse_poly4: "Inverse 4th-order", inverse_poly5: "Inverse 5th-order", inverse_poly6: "Inverse 6th-order",
  };
  let catalogue = null;
  let request = 0;

  /** GET the page's data route with the session cookie and the CSRF header (like PPE.api). */
  async function data(path) {
    const res = await fetch(DATA + path, {
      credentials: "same-origin", headers: { Accept: "application/json", "X-PPE-CSRF": CSRF },
    });
    if (res.status === 401) {
      location.assign(P.root + "/login?next=" + encodeURIComponent(location.pathname.slice(P.root.length) + location.search));
      throw new P.ApiError(401, "signed out");
    }
    const body = await res.json().catch(() => null);
    if (!res.ok) {
      const d = body && body.detail;
      const text = Array.isArray(d) ? d.map((p) => p.reason || p.message).join("; ") : (typeof d === "string" ? d : res.statusText);
      throw new P.ApiError(res.status, text);
    }
    return body;
  }

  function options(sel, items, keep) {
    sel.replaceChildren(...items.map(([value, label]) => h("option", { value }, label)));
    if (items.some(([v]) => v === keep)) sel.value = keep;
  }
  function kernelsOf(app) {
    const a = (catalogue.apps || []).find((x) => x.app === app);
    return a ? a.kernels : [];
  }
  function kernelInfo() { return kernelsOf($("#app").value).find((k) => k.kernel === $("#kernel").value) || null; }

  function fillKernels() {
    const ks = kernelsOf($("#app").value);
    options($("#kernel"), ks.map((k) => [k.kernel, k.kernel + " (" + k.runs + (k.runs === 1 ? " run)" : " runs)")]), $("#kernel").value);
    fillParams();
  }
  function fillParams() {
    const k = kernelInfo();
    const names = k ? Object.keys(k.params) : [];
    const ranging = names.filter((n) => k.params[n].length > 1);
    const keepX = $("#x").value;
    options($("#x"), names.map((n) => [n, n + " (" + k.params[n].length + " values)"]), keepX);
    if (!names.includes(keepX) && ranging.length) $("#x").value = ranging[0];
    fillSurface();
  }
  function fillSurface() {
    const k = kernelInfo();
    const x = $("#x").value;
    const others = k ? Object.keys(k.params).filter((n) => n !== x && k.params[n].length > 1) : [];
    options($("#y"), [["", "automatic"], ["none", "none"], ...others.map((n) => [n, n])], $("#y").value);
  }

  function showProblem(text) {
    const box = $("#problem");
    box.hidden = !text;
    box.textContent = text || "";
  }

  /* ---- drawing ---- */
  function drawCurve(d) {
    const unit = P.timeUnit(d.points.map((p) => p.mean));
    const scale = (v) => (P.finite(v) ? v / unit.div : null);
    const reps = { x: [], y: [] };
    for (const p of d.points) for (const v of p.values) { reps.x.push(p.x); reps.y.push(scale(v)); }
    const c = d.curve;
    const traces = [];
    if (c.lower && c.upper) {
      traces.push({ x: c.x, y: c.upper.map(scale), mode: "lines", line: { width: 0 }, showlegend: false, hoverinfo: "skip", name: "upper" });
      traces.push({ x: c.x, y: c.lower.map(scale), mode: "lines", line: { width: 0 }, fill: "tonexty",
        fillcolor: "rgba(59,91,219,0.16)", name: Math.round(d.confidence * 100) + " % prediction band", hoverinfo: "skip" });
    }
    traces.push({ x: c.x, y: c.mean.map(scale), mode: "lines", line: { color: "#3b5bdb", width: 2 }, name: "model" });
    traces.push({ x: reps.x, y: reps.y, mode: "markers", marker: { color: "#495057", size: 4, opacity: 0.55 }, name: "repetitions" });
    traces.push({ x: d.points.map((p) => p.x), y: d.points.map((p) => scale(p.mean)), mode: "markers",
      marker: { color: "#e8590c", size: 9, symbol: "circle-open", line: { width: 2 } }, name: "point means" });
    const e = d.extrapolated;
    const half = e.interval ? [scale(e.interval[1]) - scale(e.mean), scale(e.mean) - scale(e.interval[0])] : null;
    traces.push({ x: [e.point[d.x]], y: [scale(e.mean)], mode: "markers", name: "extrapolated",
      marker: { color: "#c2255c", size: 11, symbol: "diamond" },
      error_y: half && half.every(P.finite) ? { type: "data", symmetric: false, array: [half[0]], arrayminus: [half[1]], color: "#c2255c", thickness: 2, width: 8 } : undefined });
    const logX = d.curve.x.length > 1 && d.curve.x[0] > 0 && d.curve.x[d.curve.x.length - 1] / d.curve.x[0] >= 4;
    P.plot("#chart-curve", traces, {
      xaxis: { title: { text: d.x }, type: logX ? "log" : "linear" },
      yaxis: { title: { text: d.metric + " (" + unit.suffix + ")" }, rangemode: "tozero" },
    });
  }

  function drawSurface(d) {
    const note = $("#surface-note");
    if (!d.surface) {
      P.empty("#chart-surface", d.surface_note || "Pick a second parameter to draw a surface.");
      note.textContent = d.surface_note || "No surface requested.";
      return;
    }
    const s = d.surface;
    note.textContent = "Search model over " + s.x + " and " + s.y + ": " + s.formula;
    P.plot("#chart-surface", [
      { type: "surface", x: s.xs, y: s.ys, z: s.z, colorscale: "Blues", showscale: false, opacity: 0.9, name: "model" },
      { type: "scatter3d", mode: "markers", x: s.points.x, y: s.points.y, z: s.points.mean, name: "measured means",
        marker: { size: 4, color: "#e8590c" } },
    ], {
      margin: { l: 0, r: 0, t: 10, b: 0 },
      scene: { xaxis: { title: { text: s.x }, type: "log" }, yaxis: { title: { text: s.y }, type: "log" }, zaxis: { title: { text: d.metric } } },
    });
  }

  function drawCoupling(c) {
    const head = $("#coupling-head");
    const body = $("#coupling-body");
    const note = $("#coupling-note");
    if (!c) {
      head.replaceChildren(h("tr", {}, h("th", { scope: "col" }, "Input")));
      body.replaceChildren(h("tr", { class: "empty" }, h("td", {}, "No pair runs (kernel \"A+B\") for this application.")));
      return;
    }
    const coef = c.loop || [];
    head.replaceChildren(h("tr", {}, h("th", { scope: "col" }, "Input"),
      c.pairs.map((p) => h("th", { scope: "col", class: "num" }, "C " + p)),
      coef.map((k) => h("th", { scope: "col", class: "num" }, "α " + k))));
    body.replaceChildren(...c.rows.map((r) => h("tr", { "data-input": r.input }, h("th", { scope: "row" }, r.input),
      c.pairs.map((p) => h("td", { class: "num" }, P.num(r.couplings[p], 4))),
      coef.map((k) => h("td", { class: "num" }, r.coefficients ? P.num(r.coefficients[k], 4) : P.DASH)))));
    note.textContent = c.stability ? c.stability.message : (c.loop ? "Loop " + c.loop.join(" → ") + "." : "The pairs do not form one loop: no coefficients.");
  }

  function drawTiles(d) {
    const m = d.model;
    P.setText("#t-formula", m.formula);
    P.setText("#t-type", TYPE_LABEL[m.type] || m.type);
    P.setText("#t-error", P.finite(m.cv_error) ? "CV error " + P.pct(m.cv_error) : "residual norm " + P.num(m.residual_norm));
    P.setText("#t-points", m.n_points + " points · " + m.n_obs + " runs · " + m.noise + " noise");
    const e = d.extrapolated;
    P.setText("#t-pred", P.seconds(e.mean));
    P.setText("#t-interval", "at " + d.x + " = " + P.num(e.point[d.x]) + " · " + P.confidenceLabel(e.confidence) + " " + P.secondsRange(e.interval[0], e.interval[1]));
    const fixed = Object.entries(d.fixed);
    P.setText("#t-fixed", fixed.length ? fixed.map(([k, v]) => k + " = " + P.num(v)).join(", ") : "nothing");
    P.setText("#t-runs", d.metric + " of " + d.app + " / " + d.kernel);
  }

  async function load() {
    const k = kernelInfo();
    if (!k || !$("#x").value) return;
    const mine = ++request;
    P.liveStatus(true, "Fitting…");
    try {
      const d = await data("/fit" + P.query({ app: $("#app").value, kernel: k.kernel, x: $("#x").value,
        type: $("#type").value, y: $("#y").value, at: $("#at").value }));
      if (mine !== request) return;
      showProblem("");
      drawTiles(d);
      drawCurve(d);
      drawSurface(d);
      drawCoupling(d.coupling);
      P.liveStatus(true, "Fitted " + d.model.n_obs + " runs");
    } catch (e) {
      if (mine !== request) return;
      showProblem(e.message);
      P.empty("#chart-curve", "No model: " + e.message);
      P.liveStatus(false, "No model");
    }
  }

  async function start() {
    try {
      catalogue = await data("");
    } catch (e) {
      P.liveStatus(false, "Could not load runs: " + e.message);
      return;
    }
    options($("#type"), catalogue.types.map((t) => [t, TYPE_LABEL[t] || t]), "search");
    if (!catalogue.apps.length) {
      P.liveStatus(true, "No runs stored yet");
      P.empty("#chart-curve", "No runs stored yet: POST /api/v1/runs or ppe runs import.");
      P.empty("#chart-surface", "No runs stored yet.");
      drawCoupling(null);
      return;
    }
    options($("#app"), catalogue.apps.map((a) => [a.app, a.app]));
    fillKernels();
    $("#app").addEventListener("change", () => { fillKernels(); load(); });
    $("#kernel").addEventListener("change", () => { fillParams(); load(); });
    $("#x").addEventListener("change", () => { fillSurface(); load(); });
    for (const id of ["#type", "#y"]) $(id).addEventListener("change", load);
    $("#at").addEventListener("input", P.debounce(load, 400));
    $("#controls").addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
    await load();
  }

  start();
})();
