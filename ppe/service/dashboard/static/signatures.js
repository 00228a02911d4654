/* Signatures page: the stored PAS2P phase signatures; one opened (?name=) shows its phases with
   each kept phase's share of the run, and the probes run with it with each host's probed speed
   over time. Everything comes from the page's data route (ppe.service.dashboard.signatures_data). */
"use strict";

(function () {
  const P = window.PPE;
  const { h, $ } = P;
  const DATA = $("#signatures-page").dataset.path;
  const PATTERN_SHOWN = 80; // characters; a pattern can be long, its full text is in the title
  const POST_HINT = "ppe pas2p analyze TRACE.0 TRACE.1 --post NAME --app APP";
  let current = new URLSearchParams(location.search).get("name") || "";

  const data = (path) => P.fetchJson(DATA + path);

  function showProblem(text) {
    const box = $("#problem");
    box.hidden = !text;
    box.textContent = text || "";
  }
  function emptyRow(cols, ...text) { return h("tr", { class: "empty" }, h("td", { colspan: cols }, ...text)); }
  function share(x) { return P.pct(x, 1); }

  function renderList(sigs) {
    $("#signatures-body").replaceChildren(...(sigs.length ? sigs.map((s) => h("tr", { dataset: { name: s.name }, class: s.name === current ? "selected" : null },
      h("td", {}, h("a", { href: P.root + "/signatures?name=" + encodeURIComponent(s.name),
        "aria-current": s.name === current ? "true" : null,
        onclick: (ev) => { ev.preventDefault(); openSignature(s.name); } }, s.name)),
      h("td", {}, s.app),
      h("td", { class: "num" }, String(s.version)),
      h("td", { class: "num" }, String(s.ranks)),
      h("td", {}, s.kept.slice().sort((a, b) => a - b).join(", ") + " of " + s.phases + (P.finite(s.kept_share) ? " (" + share(s.kept_share) + " of the run)" : "")),
      h("td", { class: "num" }, P.seconds(s.traced_s)),
      h("td", { class: "num" }, P.seconds(s.predicted_s)),
      h("td", {}, P.when(s.created_at)),
      h("td", { class: "num" }, String(s.probes))))
      : [emptyRow(9, "No phase signature stored yet. Trace a run and post its analysis: ", h("code", {}, POST_HINT), ".")]));
  }

  function renderPhases(d) {
    $("#phases-title").textContent = "Phases of " + d.name + " (version " + d.version + ", " + d.app + ")";
    $("#phases-note").textContent = d.phase_rows.length + " phases over " + P.seconds(d.traced_s) + " traced on " + d.ranks +
      " ranks; the signature keeps " + d.kept.length + (P.finite(d.keep) ? " (keep " + P.num(d.keep, 3) + ")" : "") +
      " and predicts " + P.seconds(d.predicted_s) + ".";
    $("#phases-body").replaceChildren(...d.phase_rows.map((p) => h("tr", { class: p.kept ? null : "muted" },
      h("td", { class: "num" }, String(p.id)),
      h("td", { title: p.pattern }, h("code", {}, p.pattern.length > PATTERN_SHOWN ? p.pattern.slice(0, PATTERN_SHOWN) + "…" : p.pattern)),
      h("td", { class: "num" }, String(p.weight)),
      h("td", { class: "num" }, P.num(p.mean_ms, 4)),
      h("td", { class: "num" }, P.num(p.sd_ms, 3)),
      h("td", { class: "num" }, share(p.share)),
      h("td", { class: "num" }, p.step === null || p.step === undefined ? P.DASH : String(p.step)),
      h("td", { class: p.kept ? "ok" : "" }, p.kept ? "kept" : "left out"))));
    const kept = d.phase_rows.filter((p) => p.kept);
    if (!kept.length) { P.empty("#chart-shares", "No kept phase."); return; }
    P.plot("#chart-shares", [{
      type: "bar", name: "share of the run", x: kept.map((p) => "phase " + p.id), y: kept.map((p) => p.share * 100),
      marker: { color: P.colorFor("share", 0) },
      customdata: kept.map((p) => [p.weight, p.mean_ms]),
      hovertemplate: "%{x}: %{y:.2f} % of the run<br>%{customdata[0]} × %{customdata[1]:.4g} ms<extra></extra>",
    }], {
      yaxis: { title: { text: "share of the traced run (%)" }, rangemode: "tozero" },
      xaxis: { type: "category" },
    });
  }

  function strip(s) { return s ? s.rows + " × " + s.columns : P.DASH; }

  function renderProbes(d) {
    const probes = d.probe_rows;
    $("#probes-body").replaceChildren(...(probes.length ? probes.map((p) => h("tr", { dataset: { id: String(p.id) } },
      h("td", { class: "num" }, String(p.id)),
      h("td", {}, h("a", { href: P.root + "/hosts/" + encodeURIComponent(p.host) }, p.host)),
      h("td", { class: "num" }, String(p.version)),
      h("td", {}, h("span", { class: "badge " + (p.status === "ok" ? "done" : "failed") }, p.status),
        p.reused === true ? " reused" : null),
      h("td", {}, P.when(p.created_at)),
      h("td", { class: "num" }, P.num(p.measured_benchmark, 4)),
      h("td", { class: "num" }, share(p.cpu_share)),
      h("td", { class: "num" }, P.num(p.benchmark, 4)),
      h("td", {}, strip(p.strip)),
      h("td", { class: p.error ? "bad" : "" }, p.error || "")))
      : [emptyRow(10, "No probe of this signature yet. A schedule request with ", h("code", {}, '"probe": "signature"'),
        " runs one on each host, or post one to ", h("code", {}, "/api/v1/signatures/phases/" + d.name + "/probes"), ".")]));
    const measured = probes.filter((p) => P.finite(p.benchmark)).slice().reverse(); // oldest first
    if (!measured.length) { P.empty("#chart-probes", "No probe measured a speed yet."); return; }
    const hosts = [...new Set(measured.map((p) => p.host))].sort();
    P.plot("#chart-probes", hosts.map((host, i) => {
      const mine = measured.filter((p) => p.host === host);
      return {
        type: "scatter", mode: "lines+markers", name: host,
        x: mine.map((p) => new Date(p.created_at * 1000)), y: mine.map((p) => p.benchmark),
        marker: { color: P.colorFor(host, i) }, line: { color: P.colorFor(host, i) },
        customdata: mine.map((p) => [p.id, P.num(p.measured_benchmark, 4), share(p.cpu_share)]),
        hovertemplate: host + ", probe %{customdata[0]}: %{y:.4g} s/element<br>measured %{customdata[1]}, CPU share %{customdata[2]}<extra></extra>",
      };
    }), {
      yaxis: { title: { text: "planned s per element update" }, rangemode: "tozero", exponentformat: "e" },
      xaxis: { title: { text: "probed at" }, type: "date" }, showlegend: true,
    });
  }

  async function loadDetail() {
    if (!current) { $("#detail").hidden = true; return; }
    try {
      const d = await data("/" + encodeURIComponent(current));
      $("#detail").hidden = false;
      renderPhases(d);
      renderProbes(d);
      showProblem("");
    } catch (e) {
      if (e.status === 401) return;
      $("#detail").hidden = true;
      showProblem(e.status === 404 ? "No phase signature " + current + "." : "Could not load " + current + ": " + e.message);
    }
  }

  let listed = [];
  async function load() {
    try {
      listed = await data("");
      renderList(listed);
      await loadDetail();
      P.liveStatus(true, listed.length + (listed.length === 1 ? " signature" : " signatures") + ", updated " + new Date().toLocaleTimeString());
    } catch (e) {
      if (e.status !== 401) P.liveStatus(false, "Update failed: " + e.message);
    }
  }

  function openSignature(name) {
    current = name;
    history.replaceState(null, "", P.root + "/signatures?name=" + encodeURIComponent(name));
    renderList(listed);
    loadDetail();
  }

  const refresh = P.every(30000, load, () => $("#live").checked);
  $("#controls").addEventListener("submit", (e) => e.preventDefault());
  refresh();
})();
