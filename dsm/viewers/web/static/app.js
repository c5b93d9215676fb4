// dsm serve: a little plain JavaScript. Pages work without it; this adds clicks on rows, copying deep links,
// arrow-key paging, polling of running jobs and cutovers, and the episode player. No library, no network
// beyond this server.
"use strict";

(function () {
  function typing(event) {
    const t = event.target;
    return t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA" || t.isContentEditable);
  }

  // A click anywhere on a table row opens it (links and controls inside keep their own behaviour).
  document.addEventListener("click", function (event) {
    if (event.target.closest("a, button, input, select, audio, video")) return;
    const row = event.target.closest("tr[data-href]");
    if (row) window.location.href = row.dataset.href;
  });

  // Deep links: copy the absolute URL.
  document.querySelectorAll("[data-copy]").forEach(function (el) {
    el.addEventListener("click", function (event) {
      const url = new URL(el.dataset.copy, window.location.href).href;
      if (!navigator.clipboard) return;
      event.preventDefault();
      navigator.clipboard.writeText(url).then(function () {
        el.classList.add("copied");
        el.textContent = "link copied";
      }, function () { window.location.href = url; });
    });
  });

  // Arrow keys follow rel=prev / rel=next (unless the episode player owns them).
  document.addEventListener("keydown", function (event) {
    if (typing(event) || event.altKey || event.ctrlKey || event.metaKey || document.getElementById("player")) return;
    const rel = event.key === "ArrowLeft" ? "prev" : event.key === "ArrowRight" ? "next" : null;
    if (!rel) return;
    const link = document.querySelector('a[rel="' + rel + '"]');
    if (link) window.location.href = link.href;
  });

  // Pages of running work poll their JSON twin: reload when the job is done (or the cutover moved on).
  document.querySelectorAll("[data-poll]").forEach(function (el) {
    let last = null;
    const bar = el.querySelector("progress");
    function tick() {
      fetch(el.dataset.poll, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) { return r.text(); })
        .then(function (text) {
          if (el.dataset.reloadOnChange) {
            if (last !== null && text !== last) { window.location.reload(); return; }
            last = text;
          } else {
            const data = JSON.parse(text);
            const job = data.job || {};
            if (job.state === "done" || job.state === "failed" || data.error) { window.location.reload(); return; }
            if (bar && job.progress && job.progress.fraction !== null) bar.value = job.progress.fraction;
          }
          window.setTimeout(tick, 1500);
        })
        .catch(function () { window.setTimeout(tick, 3000); });
    }
    window.setTimeout(tick, 1000);
  });

  // The episode player: a slider over the steps, play/pause, the current step shown beside the plot.
  const player = document.getElementById("player");
  const source = document.getElementById("episode-data");
  if (player && source) {
    const data = JSON.parse(source.textContent);
    const steps = data.steps;
    const slider = document.getElementById("slider");
    const play = document.getElementById("play");
    const cursor = document.getElementById("cursor");
    const rows = document.querySelectorAll("#steps tbody tr");
    const strip = document.querySelectorAll(".strip img");
    let timer = null;
    let at = 0;

    function text(id, value) {
      const el = document.getElementById(id);
      if (el) el.textContent = value === null || value === undefined ? "-" : String(value);
    }

    function show(index) {
      at = Math.max(0, Math.min(steps.length - 1, index));
      const step = steps[at];
      slider.value = String(at);
      text("step-label", "step " + step.index + " (" + (at + 1) + " of " + steps.length + ")");
      const rowLink = document.createElement("a");
      rowLink.href = "/d/" + data.dataset + "/row/" + step.position;
      rowLink.textContent = String(step.position);
      const rowCell = document.getElementById("now-row");
      rowCell.replaceChildren(rowLink);
      text("now-step", step.step === null ? step.index : step.step);
      text("now-action", step.action ? step.action.summary : null);
      text("now-reward", step.reward);
      text("now-done", step.done);
      document.getElementById("now-terminal").hidden = data.terminal !== step.index;
      const obs = document.getElementById("now-observation");
      if (step.observation && step.observation.media && step.observation.media_kind === "image") {
        const img = document.createElement("img");
        img.src = step.observation.media;
        img.alt = "observation of step " + step.index;
        obs.replaceChildren(img);
      } else if (step.observation) {
        const code = document.createElement("code");
        code.textContent = step.observation.summary;
        obs.replaceChildren(code);
      }
      if (cursor && data.xs[at] !== undefined) {
        cursor.setAttribute("x1", data.xs[at]);
        cursor.setAttribute("x2", data.xs[at]);
      }
      rows.forEach(function (tr) { tr.classList.toggle("current", Number(tr.dataset.index) === at); });
      strip.forEach(function (img) { img.classList.toggle("current", Number(img.dataset.index) === at); });
      player.dataset.step = String(at);
    }

    function stop() {
      if (timer !== null) window.clearInterval(timer);
      timer = null;
      play.textContent = "▶ play";
    }

    function start() {
      if (at >= steps.length - 1) show(0);
      play.textContent = "⏸ pause";
      timer = window.setInterval(function () {
        if (at >= steps.length - 1) { stop(); return; }
        show(at + 1);
      }, Number(player.dataset.interval || 600));
    }

    player.addEventListener("click", function (event) {
      const button = event.target.closest("button[data-step]");
      if (!button) return;
      const what = button.dataset.step;
      if (what === "play") { if (timer === null) start(); else stop(); return; }
      stop();
      if (what === "first") show(0);
      else if (what === "last") show(steps.length - 1);
      else if (what === "previous") show(at - 1);
      else if (what === "next") show(at + 1);
    });
    slider.addEventListener("input", function () { stop(); show(Number(slider.value)); });
    rows.forEach(function (tr) { tr.addEventListener("click", function (event) {
      if (event.target.closest("a")) return;
      stop(); show(Number(tr.dataset.index));
    }); });
    strip.forEach(function (img) { img.addEventListener("click", function () { stop(); show(Number(img.dataset.index)); }); });
    document.addEventListener("keydown", function (event) {
      if (typing(event)) return;
      if (event.key === " ") { event.preventDefault(); if (timer === null) start(); else stop(); }
      else if (event.key === "ArrowRight") { stop(); show(at + 1); }
      else if (event.key === "ArrowLeft") { stop(); show(at - 1); }
    });
    show(0);
  }
})();
