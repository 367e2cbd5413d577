// Berth console: live updates over one server-sent event stream, bars, and log following.
// No framework; the pages work without it (minus liveness).
(function () {
  "use strict";
  function bars(root) {
    root.querySelectorAll(".bar .fill[data-pct]").forEach(function (el) {
      var p = Math.max(0, Math.min(100, parseInt(el.getAttribute("data-pct"), 10) || 0));
      el.style.width = p + "%";
    });
  }
  var pending = false, busy = false;
  function editing() {
    var a = document.activeElement;
    return a && a.closest && a.closest("main") && (a.tagName === "INPUT" || a.tagName === "TEXTAREA" || a.tagName === "SELECT");
  }
  function refresh() {
    if (busy) { pending = true; return; }
    if (editing()) { pending = true; setTimeout(refresh, 1000); return; }
    busy = true; pending = false;
    fetch(location.href, { headers: { "X-Console-Partial": "1" }, credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        var main = document.getElementById("main");
        main.innerHTML = html;
        bars(main);
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () {})
      .then(function () { busy = false; if (pending) setTimeout(refresh, 250); });
  }
  function live() {
    var status = document.getElementById("live");
    if (!status || !window.EventSource) return;
    var es = new EventSource("/console/events");
    es.onopen = function () { status.textContent = "live"; status.classList.add("on"); };
    es.onerror = function () { status.textContent = "reconnecting…"; status.classList.remove("on"); };
    if (document.body.getAttribute("data-live") === "1") {
      es.addEventListener("change", refresh);
    }
  }
  function follow() {
    var box = document.getElementById("follow");
    var pre = document.getElementById("log-lines");
    if (!box || !pre) return;
    var es = null;
    var since = box.getAttribute("data-since") || "";
    box.addEventListener("change", function () {
      if (!box.checked) { if (es) es.close(); es = null; return; }
      var url = box.getAttribute("data-stream") + (since ? "?since=" + encodeURIComponent(since) : "");
      es = new EventSource(url);
      es.addEventListener("line", function (ev) {
        var l = JSON.parse(ev.data);
        since = l.time;
        var span = document.createElement("span");
        span.className = "line " + l.stream;
        var ts = document.createElement("span"); ts.className = "ts"; ts.textContent = l.time.substr(11, 12);
        var ctr = document.createElement("span"); ctr.className = "ctr"; ctr.textContent = l.container;
        span.appendChild(ts); span.appendChild(document.createTextNode(" "));
        span.appendChild(ctr); span.appendChild(document.createTextNode(" " + l.text));
        pre.appendChild(span); pre.appendChild(document.createTextNode("\n"));
        pre.scrollTop = pre.scrollHeight;
      });
      es.addEventListener("end", function () { es.close(); es = null; box.checked = false; });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { bars(document); live(); follow(); });
})();
