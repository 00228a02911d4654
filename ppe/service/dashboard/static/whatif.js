/* What-if: edit a spec, check it (problems beside the editor, their lines marked in the
   gutter), run it (at once, or as a job followed to its end) and draw the result: the points'
   table and the plots `ppe whatif --html` draws, which the API returns as plotly JSON
   (?figures=true), so no formula is repeated here. Previous jobs open with ?job=ID. */
"use strict";

(function () {
  const P = window.PPE;
  const { h, $ } = P;
  const EXAMPLES = $("#whatif-page").dataset.examples;
  const spec = $("#spec");
  const gutter = $("#gutter");
  const editor = $("#editor");
  let marked = new Map(); // line -> its problems
  let examples = [];
  let lines = 0;
  let following = null; // the job id being followed
  let jobsRunning = false;

  /* ---- the editor ---- */
  function drawGutter(force) {
    const n = spec.value.split("\n").length;
    if (n !== lines || force) {
      lines = n;
      gutter.replaceChildren(...Array.from({ length: n }, (_, i) => {
        const ps = marked.get(i + 1);
        return h("span", { class: ps ? "err" : null, title: ps ? ps.map((p) => p.reason).join("\n") : null,
          dataset: { line: String(i + 1) } }, String(i + 1));
      }));
    }
    gutter.scrollTop = spec.scrollTop;
  }
  function setSpec(text) {
    spec.value = text;
    spec.scrollTop = 0;
    showProblems(null);
  }
  /** Put the caret at a problem's line and column, and scroll the line into view. */
  function goTo(line, column) {
    if (!line) { spec.focus(); return; }
    const rows = spec.value.split("\n");
    let at = 0;
    for (let i = 0; i < line - 1 && i < rows.length; i++) at += rows[i].length + 1;
    const end = at + (rows[line - 1] || "").length;
    spec.focus();
    spec.setSelectionRange(Math.min(at + Math.max((column || 1) - 1, 0), end), end);
    const lh = parseFloat(getComputedStyle(spec).lineHeight) || 20;
    spec.scrollTop = Math.max(0, (line - 3) * lh);
    drawGutter();
  }

  /* ---- checks ---- */
  /** The problems of a 422 (the spec's own, with line and column, or the request's). */
  function problemsOf(err) {
    const d = err && err.body && err.body.detail;
    if (Array.isArray(d)) return d.map((p) => ({ field: p.field || "", line: p.line || null, column: p.column || null,
      reason: p.reason || p.msg || String(p) }));
    return [{ field: "", line: null, column: null, reason: (err && err.message) || "failed" }];
  }
  function showProblems(problems, ok) {
    marked = new Map();
    for (const p of problems || []) if (p.line) marked.set(p.line, [...(marked.get(p.line) || []), p]);
    const bad = !!(problems && problems.length);
    editor.classList.toggle("invalid", bad);
    spec.setAttribute("aria-invalid", bad ? "true" : "false");
    const box = $("#problems");
    if (bad) {
      box.replaceChildren(h("ol", { id: "problem-list" }, problems.map((p) => h("li", {
        class: "problem", dataset: { line: p.line ? String(p.line) : "", column: p.column ? String(p.column) : "", field: p.field },
      }, h("button", { type: "button", onclick: () => goTo(p.line, p.column) },
        h("span", { class: "where" }, p.line ? "line " + p.line + (p.column ? ", column " + p.column : "") : "spec"),
        p.field ? [" · ", h("span", { class: "field-name" }, p.field)] : null,
        h("span", { class: "reason" }, p.reason))))));
    } else if (ok) {
      box.replaceChildren(h("p", { class: "checked-ok", id: "checked-ok" }, ok));
    } else {
      box.replaceChildren(h("p", { class: "muted small" }, "Validate to check the spec; each problem names its line, column and field."));
    }
    drawGutter(true);
  }
  /** The run line: what happened last ("bad" in red). */
  function say(text, cls) { P.setText("#run-status", text, cls || ""); }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  async function validate() {
    const btn = $("#validate");
    btn.disabled = true;
    try {
      const v = await P.api("/whatif/validate", { json: { spec: spec.value } });
      const axes = v.axes.length ? " over " + v.axes.join(", ") : "";
      showProblems([], "Valid: " + plural(v.points, "point") + axes + ", at most " + plural(v.nodes, "node")
        + (v.job ? "; runs as a job." : "; answered at once."));
      return true;
    } catch (e) {
      if (e.status === 401) return false;
      showProblems(problemsOf(e));
      return false;
    } finally { btn.disabled = false; }
  }

  /* ---- running ---- */
  function options() {
    const c = Number($("#confidence").value);
    return { spec: spec.value, strategy: $("#strategy").value, confidence: c > 0 && c < 1 ? c : 0.95 };
  }
  function progress(done, total, text) {
    const box = $("#progress");
    box.hidden = total == null;
    if (total == null) return;
    $("#progress-bar").max = String(Math.max(total, 1));
    $("#progress-bar").value = String(done || 0);
    P.setText("#progress-text", text || (done || 0) + " / " + total + " points");
  }

  async function run() {
    const btn = $("#run");
    btn.disabled = true;
    say("Running…");
    try {
      const out = await P.api("/whatif?figures=true", { json: options() });
      showProblems([], "Valid.");
      if (out.id == null) {
        progress(null);
        say("Answered at once (one point).");
        history.replaceState(null, "", P.root + "/whatif");
        showResult(out.report, out.figures);
      } else {
        say("Queued as job " + out.id + ".");
        history.replaceState(null, "", P.root + "/whatif?job=" + out.id);
        await follow(out.id);
      }
    } catch (e) {
      if (e.status === 401) return;
      say(e.status === 422 ? "Not run: the spec has problems." : "Failed: " + e.message);
      if (e.status === 422) showProblems(problemsOf(e));
    } finally { btn.disabled = false; }
  }

  /** Poll a job until it ends, then draw its report (or say why it failed). */
  async function follow(id) {
    following = id;
    refreshJobs();
    for (;;) {
      if (following !== id) return;
      const job = await P.api("/whatif/" + encodeURIComponent(id));
      const state = P.jobState(job.status);
      progress(job.done, job.total, "job " + id + ": " + job.status + ", " + (job.done || 0) + " / " + job.total + " points");
      if (state === "done") {
        const full = await P.api("/whatif/" + encodeURIComponent(id) + "?figures=true");
        say("Job " + id + " done.");
        showResult(full.report, full.figures);
        refreshJobs();
        return;
      }
      if (state === "failed") {
        say("Job " + id + " failed: " + (job.error || "unknown error"), "bad");
        $("#result").hidden = true;
        refreshJobs();
        return;
      }
      await new Promise((r) => setTimeout(r, 700));
    }
  }

  /* ---- the result ---- */
  function valueText(v) { return Array.isArray(v) ? v.map(valueText).join("x") : typeof v === "number" ? P.num(v, 4) : String(v); }

  function showResult(report, figures) {
    $("#result").hidden = false;
    const conf = report.confidence;
    P.setText("#result-title", report.title || "Result");
    P.setText("#result-sub", "strategy " + report.strategy + " · " + plural(report.points.length, "point")
      + " · " + P.confidenceLabel(conf) + " intervals");
    // every nodeset any point has (number = 0 leaves one out of some points)
    const fullest = report.points.slice().sort((a, b) => b.nodesets.length - a.nodesets.length);
    const names = [...new Set(fullest.flatMap((p) => p.nodesets.map((n) => n.nodeset)))];
    $("#points-head").replaceChildren(h("tr", {},
      report.axes.map((a) => h("th", { scope: "col", class: "num" }, a)),
      h("th", { scope: "col", class: "num" }, "Mean"),
      h("th", { scope: "col", class: "num" }, P.confidenceLabel(conf) + " interval"),
      names.map((n) => [h("th", { scope: "col", class: "num" }, n + " rows/node"),
        h("th", { scope: "col", class: "num" }, n + " compute / comm / wait")])));
    $("#points-body").replaceChildren(...report.points.map((p) => h("tr", { dataset: { mean: String(p.makespan.mean) } },
      report.axes.map((a) => h("td", { class: "num" }, valueText(p.values[a]))),
      h("td", { class: "num" }, P.seconds(p.makespan.mean)),
      h("td", { class: "num" }, P.secondsRange(p.makespan.interval[0], p.makespan.interval[1])),
      names.map((name) => {
        const n = p.nodesets.find((x) => x.nodeset === name);
        if (!n) return [h("td", { class: "num muted" }, P.DASH), h("td", { class: "num muted" }, P.DASH)];
        const [lo, hi] = n.rows_per_node;
        return [h("td", { class: "num" }, lo === hi ? String(lo) : lo + "–" + hi),
          h("td", { class: "num" }, [n.compute_s, n.communication_s, n.waiting_s].map(P.seconds).join(" / "))];
      }))));
    const charts = $("#charts");
    charts.replaceChildren();
    const followers = new Set((report.together || []).flatMap((g) => g.slice(1)));
    const independent = report.axes.filter((a) => !followers.has(a)).length;
    if (!figures.length && independent > 2) {
      charts.append(h("p", { class: "muted" }, independent + " independent swept fields: the table only (plots show at most two)."));
    }
    figures.forEach((fig, i) => {
      const layout = { ...fig.layout };
      const title = layout.title && layout.title.text ? layout.title.text : "";
      delete layout.title;
      const el = h("div", { class: "chart chart-tall", id: "chart-" + i, role: "img", "aria-label": title || "what-if plot" });
      charts.append(h("h3", { class: "chart-title" }, title), el);
      P.plot(el, fig.data, { ...layout, margin: { l: 60, r: 16, t: 12, b: 48 } });
    });
    const notes = [...new Set(report.points.flatMap((p) => p.notes || []))];
    $("#notes").replaceChildren(...notes.map((n) => h("li", {}, n)));
  }

  /* ---- previous jobs ---- */
  function optionsText(o) {
    if (!o) return P.DASH;
    return ["strategy " + o.strategy, o.confidence && P.confidenceLabel(o.confidence)].filter(Boolean).join(" · ");
  }
  async function loadJobs() {
    const jobs = await P.api("/whatif?limit=50");
    jobsRunning = jobs.some((j) => ["queued", "running"].includes(P.jobState(j.status)));
    $("#jobs-body").replaceChildren(...(jobs.length ? jobs.map((job) => h("tr", { dataset: { id: String(job.id) } },
      h("td", { class: "num" }, String(job.id)),
      h("td", {}, h("span", { class: "badge " + P.jobState(job.status) }, job.status || "unknown"),
        job.error ? h("div", { class: "muted small" }, job.error) : null),
      h("td", {}, optionsText(job.options)),
      h("td", { class: "num" }, (job.done || 0) + " / " + (job.total || 0)),
      h("td", {}, P.when(job.created_at)),
      h("td", {}, h("a", { href: P.root + "/whatif?job=" + encodeURIComponent(job.id), onclick: (ev) => { ev.preventDefault(); openJob(job.id); } }, "Open →"),
        " ", P.cancelButton("whatif", job, loadJobs))))
      : [h("tr", { class: "empty" }, h("td", { colspan: 6 }, "No what-if jobs yet: run a sweep."))]));
  }
  const refreshJobs = P.every(5000, async () => {
    try { await loadJobs(); P.liveStatus(true, "Updated " + new Date().toLocaleTimeString()); } catch (e) {
      if (e.status !== 401) P.liveStatus(false, "Update failed: " + e.message);
    }
  }, () => jobsRunning);

  async function openJob(id) {
    history.replaceState(null, "", P.root + "/whatif?job=" + encodeURIComponent(id));
    try {
      const job = await P.api("/whatif/" + encodeURIComponent(id));
      setSpec(job.spec || "");
      if (job.options && job.options.strategy) $("#strategy").value = job.options.strategy;
      if (job.options && P.finite(job.options.confidence)) $("#confidence").value = String(job.options.confidence);
      say("Job " + id + ".");
      await follow(id);
    } catch (e) {
      if (e.status !== 401) say("Job " + id + ": " + e.message, "bad");
    }
  }

  /* ---- starting points ---- */
  async function loadCurrent() {
    say("Reading the registered hosts…");
    try {
      setSpec(await P.api("/whatif/current"));
      say("The hosts registered now, with their live forecasts.");
    } catch (e) {
      if (e.status !== 401) say("No spec of the current hosts: " + e.message, "bad");
    }
  }
  async function loadExamples() {
    try { examples = await P.api(EXAMPLES, { base: "" }); } catch (e) { examples = []; }
    const sel = $("#example");
    sel.replaceChildren(h("option", { value: "" }, examples.length ? "Choose…" : "none shipped"),
      ...examples.map((x) => h("option", { value: x.name }, x.name + " — " + x.title)));
  }

  spec.addEventListener("input", () => { drawGutter(); $("#example").value = ""; });
  spec.addEventListener("scroll", () => { gutter.scrollTop = spec.scrollTop; });
  spec.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); run(); }
  });
  $("#validate").addEventListener("click", validate);
  $("#run").addEventListener("click", run);
  $("#load-current").addEventListener("click", loadCurrent);
  $("#example").addEventListener("change", (ev) => {
    const x = examples.find((e) => e.name === ev.target.value);
    if (x) { setSpec(x.spec); say("Example " + x.name + "."); }
  });

  (async function start() {
    drawGutter(true);
    await loadExamples();
    refreshJobs();
    const job = new URLSearchParams(location.search).get("job");
    if (job) openJob(job);
    else if (examples.length) { const x = examples.find((e) => e.name === "homogeneous.toml") || examples[0]; setSpec(x.spec); $("#example").value = x.name; }
  })();
})();
