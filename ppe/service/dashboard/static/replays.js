/* Replay jobs with their progress; polls while any job is still running. */
"use strict";

(function () {
  const P = window.PPE;
  const { h, $ } = P;
  const FINISHED = new Set(["done", "finished", "completed", "succeeded", "failed", "error", "cancelled"]);
  let anyRunning = true;

  const badgeClass = (status) => P.jobState(status);

  function progressCell(job) {
    const total = Number(job.total) || 0; const done = Number(job.done) || 0;
    if (!total) return h("span", { class: "muted" }, P.DASH);
    return h("div", { class: "progress-line" },
      h("progress", { max: String(total), value: String(done), "aria-label": "Replay " + job.id + " progress" }),
      h("span", { class: "muted small" }, done + " / " + total + " (" + P.pct(done / total, 0) + ")"));
  }

  function setup(cfg) {
    if (!cfg) return P.DASH;
    const traces = (cfg.traces || []).length;
    return [cfg.app && cfg.app + (cfg.n ? " n=" + cfg.n : "") + (cfg.iterations ? " × " + cfg.iterations : ""),
      cfg.hosts && cfg.hosts + " hosts", cfg.starts && cfg.starts + " starts", traces && traces + " trace" + (traces > 1 ? "s" : ""),
      (cfg.strategies || []).join(", ")].filter(Boolean).join(" · ");
  }

  async function load() {
    const jobs = await P.api("/replays");
    const body = $("#jobs-body");
    anyRunning = jobs.some((j) => !FINISHED.has(String(j.status || "").toLowerCase()));
    const sorted = jobs.slice().sort((a, b) => (b.created_at || 0) - (a.created_at || 0));
    body.replaceChildren(...(sorted.length ? sorted.map((job) => h("tr", { dataset: { id: String(job.id) } },
      h("td", { class: "num" }, String(job.id)),
      h("td", {}, h("span", { class: "badge " + badgeClass(job.status) }, job.status || "unknown"),
        job.error ? h("div", { class: "muted small" }, job.error) : null),
      h("td", {}, setup(job.config)),
      h("td", {}, progressCell(job)),
      h("td", {}, P.when(job.created_at), P.finite(job.finished_at) && P.finite(job.created_at)
        ? h("div", { class: "muted small" }, "took " + P.age(job.finished_at - job.created_at)) : null),
      h("td", {}, h("a", { href: P.root + "/replays/" + encodeURIComponent(job.id) }, "Report →"),
        " ", P.cancelButton("replays", job, load))))
      : [h("tr", { class: "empty" }, h("td", { colspan: 6 }, "No replay jobs yet. Start one with ppe replay or POST /api/v1/replays."))]));
    P.liveStatus(true, (anyRunning ? "Watching running jobs · " : "") + "Updated " + new Date().toLocaleTimeString());
  }

  const refresh = P.every(5000, async () => {
    try { await load(); } catch (e) {
      if (e.status === 404) { P.liveStatus(false, "This server has no replay API yet"); anyRunning = false; }
      else if (e.status !== 401) P.liveStatus(false, "Update failed: " + e.message);
    }
  }, () => anyRunning);
  refresh();
})();
