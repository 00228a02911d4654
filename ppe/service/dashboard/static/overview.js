/* Overview: every host, its latest CPU availability, forecast with interval, mode, links, age. */
"use strict";

(function () {
  const P = window.PPE;
  const { h, $, $$ } = P;
  const state = { rows: [], sort: { key: "name", dir: 1 }, loaded: false };
  const STALE_KEY = "ppe.staleAfter";
  const SPARK_POINTS = 48;
  const sparks = new Map(); // host -> {key: newest timestamp, values}; refetched only on new data

  const staleSel = $("#stale-after");
  const saved = localStorage.getItem(STALE_KEY);
  if (saved && $$("option", staleSel).some((o) => o.value === saved)) staleSel.value = saved;

  function seriesOf(resource, metric, peer) {
    return (resource.series || []).find((s) => s.metric === metric && (s.peer || null) === (peer || null));
  }

  function linkFigures(resource) {
    const peers = new Map();
    for (const s of resource.series || []) {
      if (!s.peer) continue;
      const entry = peers.get(s.peer) || { peer: s.peer };
      entry[s.metric] = s.latest_value;
      peers.set(s.peer, entry);
    }
    return Array.from(peers.values()).sort((a, b) => a.peer.localeCompare(b.peer));
  }

  function newestTimestamp(resource) {
    const cpu = seriesOf(resource, "cpu");
    if (cpu && P.finite(cpu.latest_timestamp)) return cpu.latest_timestamp;
    const ts = (resource.series || []).map((s) => s.latest_timestamp).filter(P.finite);
    return ts.length ? Math.max(...ts) : null;
  }

  async function load() {
    const horizon = $("#horizon").value;
    const resources = await P.api("/resources");
    const rows = resources.map((r) => {
      const cpu = seriesOf(r, "cpu");
      return {
        name: r.name,
        cpu: cpu ? cpu.latest_value : null,
        samples: (r.series || []).reduce((a, s) => a + (s.samples || 0), 0),
        cpuSamples: cpu ? cpu.samples : 0,
        newest: newestTimestamp(r),
        links: linkFigures(r),
        hasCpu: !!cpu,
        forecast: null,
        forecastError: null,
        horizon,
      };
    });
    const withCpu = rows.filter((r) => r.hasCpu);
    const results = await P.pool(withCpu, 6, (row) =>
      P.api("/forecasts/" + encodeURIComponent(row.name) + "/cpu" + P.query({ horizon })));
    results.forEach((res, i) => {
      if (res.ok) withCpu[i].forecast = res.value;
      else withCpu[i].forecastError = res.error.status === 409 ? "too little data yet" : res.error.message;
    });
    await P.pool(withCpu, 6, async (row) => {
      const cached = sparks.get(row.name);
      if (cached && cached.key === row.newest) return;
      const hist = await P.api("/resources/" + encodeURIComponent(row.name) + "/history/cpu" + P.query({ limit: SPARK_POINTS }));
      sparks.set(row.name, { key: row.newest, values: hist.values || [], timestamps: hist.timestamps || [] });
    });
    state.rows = rows;
    state.loaded = true;
    render();
    P.liveStatus(true, "Updated " + new Date().toLocaleTimeString());
  }

  function staleAfter() { return Number(staleSel.value) || 900; }
  function ageOf(row) { return P.finite(row.newest) ? P.now() - row.newest : null; }
  function isStale(row) { const a = ageOf(row); return a === null || a > staleAfter(); }
  function isMulti(row) { return !!(row.forecast && row.forecast.multimode); }

  const SORT_KEYS = {
    name: (r) => r.name,
    cpu: (r) => r.cpu,
    forecast: (r) => { const fig = P.forecastFigure(r.forecast, r.horizon); return fig ? fig.mean : null; },
    mode: (r) => (r.forecast ? (r.forecast.multimode ? 1 : 0) : null),
    mae: (r) => r.forecast ? r.forecast.mae : null,
    links: (r) => r.links.length,
    samples: (r) => r.cpuSamples,
    age: (r) => ageOf(r),
  };

  const natural = (a, b) => a.localeCompare(b, undefined, { numeric: true, sensitivity: "base" });

  function compare(a, b) {
    const key = SORT_KEYS[state.sort.key];
    const va = key(a); const vb = key(b);
    if (va === vb) return natural(a.name, b.name);
    if (va === null || va === undefined) return 1; // missing values last, whatever the direction
    if (vb === null || vb === undefined) return -1;
    if (typeof va === "string") return natural(va, vb) * state.sort.dir;
    return (va < vb ? -1 : 1) * state.sort.dir;
  }

  function visible(row) {
    const text = $("#filter").value.trim().toLowerCase();
    if (text && !row.name.toLowerCase().includes(text)) return false;
    if ($("#only-stale").checked && !isStale(row)) return false;
    if ($("#only-multi").checked && !isMulti(row)) return false;
    return true;
  }

  function forecastCell(row) {
    const f = row.forecast;
    if (!f) return h("span", { class: "muted" }, row.hasCpu ? (row.forecastError || "…") : "no CPU series");
    const fig = P.forecastFigure(f, row.horizon);
    const text = [h("b", {}, P.pct(fig.mean)), " ", h("span", { class: "muted" }, P.interval("cpu", fig.iv))];
    return P.intervalBar(fig.mean, fig.iv, 0, 1, text);
  }

  function sparkCell(row) {
    const s = sparks.get(row.name);
    if (!s || s.values.length < 2) return h("span", { class: "muted" }, P.DASH);
    const span = s.timestamps.length > 1 ? s.timestamps[s.timestamps.length - 1] - s.timestamps[0] : 0;
    return P.sparkline(s.values, 0, 1, "CPU availability of " + row.name + " over the last " + P.age(span) +
      ", from " + P.pct(s.values[0]) + " to " + P.pct(s.values[s.values.length - 1]));
  }

  function modeCell(row) {
    const f = row.forecast;
    if (!f) return h("span", { class: "muted" }, P.DASH);
    const kind = f.distribution && f.distribution.kind;
    return f.multimode
      ? h("span", { class: "badge multi", title: "a Gaussian mixture fits the recent values better than one normal" }, "multi-mode")
      : h("span", { class: "badge single", title: kind ? "fitted: " + kind : "" }, kind === "point" ? "constant" : "single");
  }

  function linksCell(row) {
    if (!row.links.length) return h("span", { class: "muted" }, "none");
    return h("div", { class: "links-list" }, row.links.map((l) => h("span", {},
      h("span", { class: "peer" }, "→ " + l.peer), " ",
      [l.bandwidth !== undefined ? P.rate(l.bandwidth) : null, l.latency !== undefined ? P.seconds(l.latency) : null]
        .filter(Boolean).join(" · "))));
  }

  function renderRow(row) {
    const stale = isStale(row);
    const age = ageOf(row);
    const href = P.root + "/hosts/" + encodeURIComponent(row.name);
    const f = row.forecast;
    return h("tr", { class: stale ? "stale" : null, dataset: { host: row.name } },
      h("td", { "data-label": "Host" }, h("a", { class: "hostname", href }, row.name)),
      h("td", { "data-label": "CPU available" }, row.cpu === null ? h("span", { class: "muted" }, P.DASH)
        : P.meter(row.cpu, 0, 1, P.pct(row.cpu))),
      h("td", { "data-label": "Trend" }, sparkCell(row)),
      h("td", { "data-label": "Forecast" }, forecastCell(row)),
      h("td", { "data-label": "Mode" }, modeCell(row)),
      h("td", { "data-label": "Predictor · MAE" }, f
        ? h("span", {}, h("span", {}, f.predictor || P.DASH), h("br"), h("span", { class: "muted small" }, "MAE " + P.pct(f.mae, 2)))
        : h("span", { class: "muted" }, P.DASH)),
      h("td", { "data-label": "Links" }, linksCell(row)),
      h("td", { "data-label": "Samples", class: "num", title: "CPU samples stored" }, String(row.cpuSamples)),
      h("td", { "data-label": "Age", class: "num" }, stale
        ? h("span", { class: "badge stale", title: "no new sample for longer than the stale limit" }, age === null ? "no data" : P.age(age))
        : P.age(age)));
  }

  function render() {
    if (!state.loaded) return;
    const rows = state.rows.filter(visible).sort(compare);
    const body = $("#hosts-body");
    body.replaceChildren(...(rows.length ? rows.map(renderRow) : [h("tr", { class: "empty" },
      h("td", { colspan: 9 }, state.rows.length ? "No host matches the filter." : "No hosts yet: sensors have not posted any measurement."))]));
    renderTiles();
    const wanted = state.sort.key + ":" + state.sort.dir;
    const sortSel = $("#sort-by");
    if ([...sortSel.options].some((o) => o.value === wanted)) sortSel.value = wanted;
    for (const th of $$("#hosts th[data-sort]")) {
      th.setAttribute("aria-sort", th.dataset.sort === state.sort.key ? (state.sort.dir > 0 ? "ascending" : "descending") : "none");
    }
  }

  function renderTiles() {
    const all = state.rows;
    P.setText("#t-hosts", String(all.length));
    const cpus = all.map((r) => r.cpu).filter(P.finite);
    P.setText("#t-cpu", cpus.length ? P.pct(cpus.reduce((a, b) => a + b, 0) / cpus.length) : P.DASH);
    const multi = all.filter(isMulti).length;
    P.setText("#t-multi", String(multi));
    const stale = all.filter(isStale).length;
    P.setText("#t-stale", String(stale), stale ? "bad" : "");
  }

  // Sorting: click a header; a second click reverses.
  for (const th of $$("#hosts th[data-sort]")) {
    th.querySelector("button").addEventListener("click", () => {
      const key = th.dataset.sort;
      state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : 1 };
      render();
    });
  }
  $("#sort-by").addEventListener("change", () => {
    const [key, dir] = $("#sort-by").value.split(":");
    state.sort = { key, dir: Number(dir) };
    render();
  });
  $("#controls").addEventListener("submit", (e) => e.preventDefault());
  $("#filter").addEventListener("input", P.debounce(render, 120));
  for (const id of ["#only-stale", "#only-multi"]) $(id).addEventListener("change", render);
  staleSel.addEventListener("change", () => { localStorage.setItem(STALE_KEY, staleSel.value); render(); });

  const refresh = P.every(10000, async () => {
    try { await load(); } catch (e) { if (e.status !== 401) P.liveStatus(false, "Update failed: " + e.message); }
  }, () => $("#live").checked);
  $("#horizon").addEventListener("change", refresh);
  $("#live").addEventListener("change", () => { if ($("#live").checked) refresh(); else P.liveStatus(true, "Paused"); });
  refresh();
})();
