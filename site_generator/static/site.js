/* kernelboard site: device tabs, sortable tables, tooltips, theme toggle.
   Everything here is an enhancement: without JavaScript every device section, table and
   chart is already on the page. */
(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.add("js");

  function initTheme() {
    var button = document.getElementById("theme-toggle");
    if (!button) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      var current = root.getAttribute("data-theme");
      if (!current) {
        current = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
      }
      var next = current === "dark" ? "light" : "dark";
      root.setAttribute("data-theme", next);
      try { localStorage.setItem("kb-theme", next); } catch (e) { /* private mode */ }
    });
  }

  function initTabs() {
    var tabs = Array.prototype.slice.call(document.querySelectorAll(".tabs [data-panel]"));
    if (!tabs.length) return;
    function select(id, updateHash) {
      var found = tabs.some(function (t) { return t.getAttribute("data-panel") === id; });
      if (!found) id = tabs[0].getAttribute("data-panel");
      tabs.forEach(function (tab) {
        var on = tab.getAttribute("data-panel") === id;
        tab.setAttribute("aria-selected", on ? "true" : "false");
        tab.tabIndex = on ? 0 : -1;
        var panel = document.getElementById(tab.getAttribute("data-panel"));
        if (panel) panel.hidden = !on;
      });
      if (updateHash && history.replaceState) history.replaceState(null, "", "#" + id);
    }
    tabs.forEach(function (tab, i) {
      tab.addEventListener("click", function (event) {
        event.preventDefault();
        select(tab.getAttribute("data-panel"), true);
      });
      tab.addEventListener("keydown", function (event) {
        var step = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
        if (!step) return;
        var next = tabs[(i + step + tabs.length) % tabs.length];
        select(next.getAttribute("data-panel"), true);
        next.focus();
      });
    });
    window.addEventListener("hashchange", function () { select(location.hash.slice(1), false); });
    select(location.hash.slice(1), false);
  }

  function cellValue(row, index, numeric) {
    var cell = row.cells[index];
    if (!cell) return numeric ? Infinity : "";
    var raw = cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    var n = parseFloat(raw);
    return isNaN(n) ? Infinity : n;
  }

  function initSortable() {
    document.querySelectorAll("table.sortable").forEach(function (table) {
      var headers = table.tHead ? table.tHead.rows[0].cells : [];
      Array.prototype.forEach.call(headers, function (th, index) {
        var kind = th.getAttribute("data-sort");
        if (!kind) return;
        th.tabIndex = 0;
        function sort() {
          var ascending = th.getAttribute("aria-sort") !== "ascending";
          Array.prototype.forEach.call(headers, function (h) { h.removeAttribute("aria-sort"); });
          th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
          var body = table.tBodies[0];
          var rows = Array.prototype.slice.call(body.rows);
          var numeric = kind === "num";
          rows.sort(function (a, b) {
            var x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
            var c = x < y ? -1 : x > y ? 1 : 0;
            return ascending ? c : -c;
          });
          rows.forEach(function (r) { body.appendChild(r); });
        }
        th.addEventListener("click", sort);
        th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); } });
      });
    });
  }

  function initTooltips() {
    var tip = null;
    // SVG marks carry <title> for browsers without JS; move it into data-tip to avoid double tooltips.
    document.querySelectorAll("svg.chart circle > title, .heatmap td[title]").forEach(function (node) {
      if (node.tagName.toLowerCase() === "title") {
        node.parentNode.setAttribute("data-tip", node.textContent);
        node.parentNode.removeChild(node);
      } else {
        node.setAttribute("data-tip", node.getAttribute("title"));
        node.removeAttribute("title");
      }
    });
    function show(event) {
      var target = event.target.closest ? event.target.closest("[data-tip]") : null;
      if (!target) return;
      if (!tip) {
        tip = document.createElement("div");
        tip.className = "tip";
        tip.setAttribute("role", "tooltip");
        document.body.appendChild(tip);
      }
      tip.textContent = target.getAttribute("data-tip");
      tip.hidden = false;
      var box = target.getBoundingClientRect();
      var x = Math.min(window.innerWidth - tip.offsetWidth - 8, Math.max(8, box.left + box.width / 2 - tip.offsetWidth / 2));
      var y = box.top - tip.offsetHeight - 8;
      tip.style.left = x + "px";
      tip.style.top = (y < 4 ? box.bottom + 8 : y) + "px";
    }
    function hide(event) {
      if (tip && event.target.closest && event.target.closest("[data-tip]")) tip.hidden = true;
    }
    document.addEventListener("mouseover", show);
    document.addEventListener("focusin", show);
    document.addEventListener("mouseout", hide);
    document.addEventListener("focusout", hide);
  }

  function ready(fn) {
    if (document.readyState !== "loading") fn();
    else document.addEventListener("DOMContentLoaded", fn);
  }
  ready(function () {
    initTheme();
    initTabs();
    initSortable();
    initTooltips();
  });
})();
