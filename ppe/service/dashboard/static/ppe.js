/* PPE dashboard helpers shared by every page: API calls, formatting, DOM building, charts.
   Plain JavaScript, no framework: pages fetch the same JSON applications get, with the
   same-origin HttpOnly cookie set at login and the page's CSRF token in the X-PPE-CSRF header
   (the API refuses the cookie without it). */
"use strict";

window.PPE = (function () {
  const root = document.body.dataset.root || "";
  const API = root + "/api/v1";
  const csrfMeta = document.querySelector('meta[name="ppe-csrf"]');
  const CSRF = csrfMeta ? csrfMeta.content : "";

  let skewMs = 0; // server clock minus ours, from each response's Date header (1 s resolution)
  /** Unix seconds by the server's clock, so sample ages do not depend on this machine's clock. */
  function now() { return (Date.now() + skewMs) / 1000; }

  class ApiError extends Error {
    constructor(status, message, body) { super(message); this.status = status; this.body = body; }
  }

  function detailText(body) {
    if (body == null) return "";
    const d = typeof body === "object" && "detail" in body ? body.detail : body;
    if (typeof d === "string") return d;
    if (d && typeof d === "object" && !Array.isArray(d) && d.reason) {
      return d.reason + (finite(d.samples) && finite(d.needed) ? " (" + d.samples + " of " + d.needed + " samples)" : "");
    }
    if (Array.isArray(d)) {
      return d.map((p) => [p.index != null ? "item " + p.index : null, p.field, p.reason || p.msg]
        .filter((x) => x != null && x !== "").join(": ")).join("; ");
    }
    return JSON.stringify(d);
  }

  function here() {
    const path = location.pathname.slice(root.length) || "/";
    return path + location.search;
  }

  /** GET (or POST with `json`) an API path (or, with `base: ""`, one of this dashboard's data
      routes); a 401 sends the operator back to the login form. */
  function api(path, options = {}) {
    return fetchJson((options.base !== undefined ? options.base : API) + path, options);
  }

  /** Like `api` for any URL of this origin (the dashboard's own data routes). */
  async function fetchJson(url, options = {}) {
    const init = { credentials: "same-origin", headers: { Accept: "application/json" } };
    if (CSRF) init.headers["X-PPE-CSRF"] = CSRF;
    if (options.json !== undefined) {
      init.method = "POST";
      init.body = JSON.stringify(options.json);
      init.headers["Content-Type"] = "application/json";
    }
    if (options.method) init.method = options.method;
    if (options.signal) init.signal = options.signal;
    const res = await fetch(url, init);
    const date = Date.parse(res.headers.get("Date") || "");
    if (finite(date)) skewMs = date - Date.now();
    if (res.status === 401) {
      location.assign(root + "/login?next=" + encodeURIComponent(here()));
      throw new ApiError(401, "signed out");
    }
    const text = await res.text();
    let body = text;
    try { body = text ? JSON.parse(text) : null; } catch (e) { /* not JSON */ }
    if (!res.ok) throw new ApiError(res.status, detailText(body) || res.statusText, body);
    return body;
  }

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
    const s = q.toString();
    return s ? "?" + s : "";
  }

  /** Run `fn` over `items` with at most `limit` in flight; keeps the server's queue short. */
  async function pool(items, limit, fn) {
    const out = new Array(items.length);
    let next = 0;
    async function worker() {
      while (next < items.length) {
        const i = next++;
        try { out[i] = { ok: true, value: await fn(items[i], i) }; }
        catch (e) { out[i] = { ok: false, error: e }; }
      }
    }
    await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
    return out;
  }

  /* ---- DOM ---- */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k === "dataset") Object.assign(el.dataset, v);
      else if (k === "style") Object.assign(el.style, v);
      else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }
  const $ = (sel, ctx) => (ctx || document).querySelector(sel);
  const $$ = (sel, ctx) => Array.from((ctx || document).querySelectorAll(sel));
  function setText(sel, text, cls) {
    const el = typeof sel === "string" ? $(sel) : sel;
    if (!el) return;
    el.textContent = text;
    if (cls !== undefined) el.className = el.className.split(" ").filter((c) => !["bad", "warn", "ok"].includes(c)).concat(cls ? [cls] : []).join(" ");
  }

  /* ---- formatting ---- */
  const DASH = "—";
  const finite = (x) => typeof x === "number" && Number.isFinite(x);
  function num(x, digits = 3) {
    if (!finite(x)) return DASH;
    if (x === 0) return "0";
    const a = Math.abs(x);
    if (a >= 1e6 || a < 1e-3) return x.toExponential(Math.max(digits - 1, 1));
    return Number(x.toPrecision(digits)).toLocaleString("en-US", { maximumFractionDigits: 6 });
  }
  function pct(x, digits = 1) { return finite(x) ? (x * 100).toFixed(digits) + " %" : DASH; }
  function seconds(x) {
    if (!finite(x)) return DASH;
    const a = Math.abs(x);
    if (a < 1e-3) return num(x * 1e6, 3) + " µs";
    if (a < 1) return num(x * 1e3, 3) + " ms";
    if (a < 120) return num(x, 3) + " s";
    if (a < 7200) return num(x / 60, 3) + " min";
    return num(x / 3600, 3) + " h";
  }
  /** One unit for a set of durations, so a column or a chart does not mix seconds and minutes. */
  function timeUnit(values) {
    const m = Math.max(0, ...values.filter(finite).map(Math.abs));
    if (m >= 7200) return { div: 3600, suffix: "h" };
    if (m >= 120) return { div: 60, suffix: "min" };
    if (m >= 1 || m === 0) return { div: 1, suffix: "s" };
    if (m >= 1e-3) return { div: 1e-3, suffix: "ms" };
    return { div: 1e-6, suffix: "µs" };
  }
  function inUnit(x, unit, digits = 3) { return finite(x) ? num(x / unit.div, digits) + " " + unit.suffix : DASH; }
  /** "5.7 – 10.3 s": a duration range with its unit written once when both ends share it. */
  function secondsRange(lo, hi) {
    if (!finite(lo) || !finite(hi)) return DASH;
    const a = seconds(lo); const b = seconds(hi);
    const ua = a.split(" ").pop(); const ub = b.split(" ").pop();
    return ua === ub ? a.slice(0, -ua.length - 1) + " – " + b : a + " – " + b;
  }
  function rate(x) {
    if (!finite(x)) return DASH;
    const units = ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"];
    let i = 0; let v = x;
    while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i++; }
    return num(v, 3) + " " + units[i];
  }
  function age(s) {
    if (!finite(s)) return DASH;
    if (s < 0) s = 0;
    if (s < 90) return Math.round(s) + " s";
    if (s < 5400) return Math.round(s / 60) + " min";
    if (s < 172800) return (s / 3600).toFixed(1).replace(/\.0$/, "") + " h";
    return (s / 86400).toFixed(1).replace(/\.0$/, "") + " d";
  }
  function when(ts) {
    if (!finite(ts)) return DASH;
    const d = new Date(ts * 1000);
    const today = new Date();
    const sameDay = d.toDateString() === today.toDateString();
    return sameDay ? d.toLocaleTimeString() : d.toLocaleString();
  }
  const METRIC_LABEL = { cpu: "CPU available", bandwidth: "Bandwidth", latency: "Latency" };
  function metricValue(metric, x) {
    if (metric === "cpu") return pct(x);
    if (metric === "bandwidth") return rate(x);
    if (metric === "latency") return seconds(x);
    return num(x);
  }
  function interval(metric, iv) {
    if (!Array.isArray(iv) || iv.length !== 2) return DASH;
    return "[" + metricValue(metric, iv[0]) + ", " + metricValue(metric, iv[1]) + "]";
  }
  function confidenceLabel(c) { return finite(c) ? Math.round(c * 100) + " %" : "95 %"; }

  /* ---- forecasts ---- */
  /** What to show for a forecast: the next sample's value and interval, or, when a horizon was
      asked, the distribution of the average over that horizon (its mean and the shortest interval
      holding the confidence, which the service computes). */
  function forecastFigure(f, horizon) {
    if (!f || f.insufficient) return null;
    const v = finite(f.value) ? f.value : f.forecast;
    if (!horizon && finite(v)) {
      const iv = Array.isArray(f.value_interval) && f.value_interval.every(finite) ? f.value_interval : ivOf(f);
      return { mean: v, iv };
    }
    return { mean: f.mean, iv: ivOf(f) };
  }

  /* ---- stochastic values (docs/architecture.md's JSON shape) ---- */
  function ivOf(v) {
    if (!v) return null;
    if (Array.isArray(v.interval) && v.interval.length === 2) return v.interval;
    if (finite(v.mean) && finite(v.std)) return [v.mean - 1.96 * v.std, v.mean + 1.96 * v.std];
    return null;
  }
  /** Gaussian components of a value: its mixture components, else one normal, else none (a point). */
  function components(v) {
    if (!v) return [];
    const list = v.components || (v.distribution && v.distribution.components) || [];
    const comps = list.map((c) => Array.isArray(c) ? { weight: c[0], mean: c[1], std: c[2] } : c)
      .filter((c) => finite(c.mean));
    if (comps.length) return comps;
    if (finite(v.mean) && finite(v.std) && v.std > 0) return [{ weight: 1, mean: v.mean, std: v.std }];
    return [];
  }
  function normalPdf(x, m, s) {
    const z = (x - m) / s;
    return Math.exp(-0.5 * z * z) / (s * Math.sqrt(2 * Math.PI));
  }
  function mixturePdf(comps, xs) {
    const wsum = comps.reduce((a, c) => a + (finite(c.weight) ? c.weight : 1), 0) || 1;
    return xs.map((x) => comps.reduce((acc, c) => {
      const w = (finite(c.weight) ? c.weight : 1) / wsum;
      return c.std > 0 ? acc + w * normalPdf(x, c.mean, c.std) : acc;
    }, 0));
  }
  function linspace(a, b, n) {
    if (n < 2 || a === b) return [a];
    return Array.from({ length: n }, (_, i) => a + (b - a) * i / (n - 1));
  }
  /** A range that shows every component out to ±4σ. */
  function spanOf(comps, extra = []) {
    let lo = Infinity; let hi = -Infinity;
    for (const c of comps) { lo = Math.min(lo, c.mean - 4 * (c.std || 0)); hi = Math.max(hi, c.mean + 4 * (c.std || 0)); }
    for (const x of extra) if (finite(x)) { lo = Math.min(lo, x); hi = Math.max(hi, x); }
    if (!finite(lo) || !finite(hi)) return null;
    if (lo === hi) { lo -= 0.5; hi += 0.5; }
    return [lo, hi];
  }
  function quantile(sorted, q) {
    if (!sorted.length) return NaN;
    const pos = (sorted.length - 1) * q; const i = Math.floor(pos); const f = pos - i;
    return i + 1 < sorted.length ? sorted[i] * (1 - f) + sorted[i + 1] * f : sorted[i];
  }

  /* ---- colours ---- */
  const PALETTE = ["#3b5bdb", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#0c8599", "#e67700",
    "#5c940d", "#862e9c", "#1864ab", "#d6336c", "#495057"];
  const STRATEGY_COLORS = { block: "#868e96", static: "#a0793d", mean: "#3b5bdb",
    conservative: "#2b8a3e", quantile: "#c2255c", expected: "#e8590c" };
  function colorFor(key, index) { return PALETTE[index % PALETTE.length]; }
  function strategyColor(name, i) { return STRATEGY_COLORS[name] || PALETTE[(i + 5) % PALETTE.length]; }
  function hexA(hex, a) {
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16 & 255) + "," + (n >> 8 & 255) + "," + (n & 255) + "," + a + ")";
  }

  /* ---- charts ---- */
  const CONFIG = { displaylogo: false, responsive: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"] };
  function layout(extra) {
    const base = {
      margin: { l: 60, r: 16, t: 12, b: 48 },
      paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#ffffff",
      font: { family: getComputedStyle(document.body).fontFamily, size: 12, color: "#172033" },
      xaxis: { gridcolor: "#eef1f6", zeroline: false, automargin: true, linecolor: "#d5dbe6" },
      yaxis: { gridcolor: "#eef1f6", zeroline: false, automargin: true, linecolor: "#d5dbe6" },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", bgcolor: "rgba(0,0,0,0)", traceorder: "normal" },
      hoverlabel: { bgcolor: "#141b2d", bordercolor: "#141b2d", font: { color: "#fff" } },
      hovermode: "closest",
    };
    const out = { ...base, ...extra };
    for (const ax of ["xaxis", "yaxis"]) if (extra && extra[ax]) out[ax] = { ...base[ax], ...extra[ax] };
    return out;
  }
  function plot(el, traces, extraLayout) {
    const node = typeof el === "string" ? $(el) : el;
    if (!window.Plotly) { empty(node, "Charts are loading…"); return; }
    node.classList.remove("chart-empty");
    if (node.dataset.empty) { node.textContent = ""; delete node.dataset.empty; }
    return window.Plotly.react(node, traces, layout(extraLayout), CONFIG);
  }
  function empty(el, message) {
    const node = typeof el === "string" ? $(el) : el;
    if (window.Plotly && node.classList.contains("js-plotly-plot")) window.Plotly.purge(node);
    node.textContent = message;
    node.dataset.empty = "1";
    node.classList.add("chart-empty");
  }

  /* ---- live updates ---- */
  /** Call `fn` now and every `ms` while `enabled()`; skips ticks while the tab is hidden. */
  function every(ms, fn, enabled) {
    let running = false; let again = false;
    async function tick() {
      if (running) { again = true; return; } // a control changed mid-load: load once more after
      running = true;
      try { await fn(); } finally { running = false; }
      if (again) { again = false; tick(); }
    }
    setInterval(() => { if (!document.hidden && (!enabled || enabled())) tick(); }, ms);
    document.addEventListener("visibilitychange", () => { if (!document.hidden && (!enabled || enabled())) tick(); });
    return tick;
  }
  /** A job's status as one of "done", "failed", "queued", "running" (the badge and dot colours). */
  function jobState(status) {
    const s = String(status || "").toLowerCase();
    if (["done", "finished", "completed", "succeeded"].includes(s)) return "done";
    if (["failed", "error", "cancelled"].includes(s)) return "failed";
    if (["queued", "pending", "created"].includes(s)) return "queued";
    return "running";
  }
  /** A Cancel button for a queued or running job (`kind`: "replays" or "whatif"); nothing for
      one that has ended. `after` reloads the list once the job is cancelled. */
  function cancelButton(kind, job, after) {
    if (!["queued", "running"].includes(jobState(job.status))) return null;
    return h("button", {
      type: "button", class: "small", "aria-label": "Cancel job " + job.id,
      onclick: async (ev) => {
        ev.target.disabled = true;
        let failed = null;
        try {
          await api("/" + kind + "/" + encodeURIComponent(job.id) + "/cancel", { method: "POST" });
        } catch (e) {
          if (e.status !== 401) failed = "Job " + job.id + " not cancelled: " + e.message;
        }
        try { await after(); } catch (e) { /* the list's own refresh reports its failures */ }
        if (failed) liveStatus(false, failed);  // after the reload, which says "Updated"
      },
    }, "Cancel");
  }
  function liveStatus(ok, text) {
    const dot = $("#live-dot");
    if (dot) dot.className = "dot " + (ok ? "on" : "err");
    setText("#status", text);
  }

  function debounce(fn, ms) {
    let t = null;
    return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
  }

  /* ---- little widgets ---- */
  function meter(value, lo = 0, hi = 1, label) {
    const frac = finite(value) ? Math.max(0, Math.min(1, (value - lo) / (hi - lo))) : 0;
    const cls = frac < 0.25 ? "low" : frac < 0.6 ? "mid" : "high";
    return h("div", { class: "meter" },
      h("div", { class: "meter-track", "aria-hidden": "true" },
        h("div", { class: "meter-fill " + cls, style: { width: (frac * 100).toFixed(1) + "%" } })),
      h("span", { class: "meter-label" }, label));
  }
  /** An interval drawn on a [lo, hi] track with the mean marked, and its text below. */
  function intervalBar(mean, iv, lo, hi, text) {
    const clamp = (x) => Math.max(0, Math.min(1, (x - lo) / (hi - lo)));
    const track = h("div", { class: "ival-track", "aria-hidden": "true" });
    if (iv) track.append(h("div", { class: "ival-band", style: { left: (clamp(iv[0]) * 100) + "%", width: (Math.max(clamp(iv[1]) - clamp(iv[0]), 0.01) * 100) + "%" } }));
    if (finite(mean)) track.append(h("div", { class: "ival-mean", style: { left: (clamp(mean) * 100) + "%" } }));
    return h("div", { class: "ival" }, track, h("div", { class: "ival-text" }, text));
  }

  const SVG_NS = "http://www.w3.org/2000/svg"; // a namespace name, never fetched
  /** A small inline trend line of `values` on a fixed [lo, hi] scale. */
  function sparkline(values, lo, hi, label) {
    const w = 120; const hgt = 28; const pts = values.filter(finite);
    const svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + w + " " + hgt);
    svg.setAttribute("class", "spark");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", label);
    if (pts.length < 2) return svg;
    const x = (i) => (i / (pts.length - 1)) * w;
    const y = (v) => hgt - 2 - (Math.max(lo, Math.min(hi, v)) - lo) / (hi - lo) * (hgt - 4);
    const line = pts.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
    const area = document.createElementNS(SVG_NS, "polygon");
    area.setAttribute("points", "0," + hgt + " " + line + " " + w + "," + hgt);
    area.setAttribute("class", "spark-area");
    const poly = document.createElementNS(SVG_NS, "polyline");
    poly.setAttribute("points", line);
    poly.setAttribute("class", "spark-line");
    svg.append(area, poly);
    return svg;
  }

  return {
    sparkline, forecastFigure, root, API, ApiError, api, fetchJson, now, timeUnit, inUnit, secondsRange, query, pool, h, $, $$, setText, num, pct, seconds, rate, age, when,
    metricValue, interval, confidenceLabel, METRIC_LABEL, ivOf, components, mixturePdf, normalPdf,
    linspace, spanOf, quantile, colorFor, strategyColor, hexA, plot, empty, every, liveStatus,
    debounce, meter, intervalBar, finite, DASH, jobState, cancelButton,
  };
})();
