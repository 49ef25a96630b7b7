"""The inbox's one stylesheet and one script, served by the server (nothing inline, nothing
from elsewhere).

The script only makes a session's page follow its run: it listens to the page's event stream
(``/sessions/ID/events``) and, when the session has moved on, asks for the part of the page
that changed (``/sessions/ID/part``: HTML the server escaped), saying where the page stands
(``If-None-Match``; nothing comes back while that is still so) and its last step (``from``:
only the steps from there on come back, which it puts in place of its own from there). Without
it every page works; a reload shows the same.
"""

from __future__ import annotations

from miniagent.report.html import BASE_CSS

UI_CSS = """
body { max-width: 1100px; padding: 0 16px 32px; }
main { overflow-wrap: anywhere; }
header.top { display: flex; flex-wrap: wrap; gap: 6px 18px; align-items: center;
  border-bottom: 1px solid var(--line); padding: 10px 0; margin-bottom: 16px; }
header.top nav { display: flex; gap: 14px; align-items: center; }
header.top a { color: var(--fg); text-decoration: none; padding: 4px 2px; }
header.top a.brand { font-weight: 700; }
header.top .where { font-size: 12px; }
a { color: var(--accent); }
h1 .count { font-size: 14px; font-weight: 400; color: var(--muted); }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; margin: 12px 0;
  background: #fff; }
.card h2 { margin: 2px 0 4px; font-size: 16px; }
.call { border-top: 1px dashed var(--line); padding: 8px 0 4px; }
.card > .call:first-child { border-top: 0; }
.call .head { margin: 4px 0; }
.why { margin: 2px 0 6px; color: var(--warn); }
.kv { color: var(--muted); font-size: 12.5px; }
.args .arg { font: 600 12.5px ui-monospace, Menlo, Consolas, monospace; }
.args pre { margin: 2px 0 6px; }
form.decide, form.ask, form.cancel, form.fork, form.filter, form.login { display: flex;
  flex-wrap: wrap; gap: 6px 8px; align-items: center; margin: 8px 0; }
form.decide label, form.cancel label, form.fork label, form.fork span { font-size: 12.5px;
  color: var(--muted); }
form.fork input { width: 5em; }
form.decide input[name=reason] { flex: 1 1 220px; min-width: 0; }
form.ask { align-items: stretch; flex-direction: column; }
form.ask textarea { width: 100%; font: inherit; }
form.decide.all { border-top: 1px solid var(--line); padding-top: 8px; }
form.decide.edit { flex-direction: column; align-items: stretch; }
form.decide.edit textarea { width: 100%; font-family: ui-monospace, monospace; }
.buttons { display: flex; gap: 8px; }
input, select, textarea, button { font: inherit; padding: 5px 8px; border-radius: 6px;
  border: 1px solid var(--line); }
button { cursor: pointer; background: var(--panel); color: var(--fg); }
button.approve { background: var(--ok); color: #fff; border-color: var(--ok); }
button.deny { background: #fff; color: var(--bad); border-color: var(--bad); }
a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible,
textarea:focus-visible, summary:focus-visible { outline: 3px solid var(--accent);
  outline-offset: 2px; }
.flash { padding: 8px 12px; border-radius: 6px; border: 1px solid var(--line); }
.flash.ok { border-color: var(--ok); background: #eef8f1; }
.flash.bad { border-color: var(--bad); background: #fbeeed; }
.flash.run { border-color: var(--accent); background: #eef3fc; }
.actions { display: flex; flex-wrap: wrap; gap: 4px 18px; align-items: flex-start; }
.actions form { margin: 6px 0; }
.scroll { overflow-x: auto; }
table.sessions td.question { max-width: 420px; }
ol.steps { list-style: none; padding: 0; }
.step > summary { display: flex; flex-wrap: wrap; gap: 4px 10px; }
.step .idx { font-weight: 600; }
.step .what { flex: 1 1 200px; }
.observation.error { border-color: var(--bad); }
.id { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; }
@media (max-width: 600px) {
  body { padding: 0 10px 24px; font-size: 15px; }
  .wide { display: none; }
  th, td { padding: 4px 6px; }
  .buttons { width: 100%; }
  .buttons button { flex: 1; padding: 9px 8px; }
}
"""

STYLESHEET = BASE_CSS + UI_CSS

SCRIPT = """
(function () {
  'use strict';
  var live = document.getElementById('live');
  if (!live || !window.EventSource) { return; }
  var busy = false;
  var wanted = null;
  function openSteps() {
    return Array.prototype.map.call(live.querySelectorAll('details[id][open]'),
      function (d) { return d.id; });
  }
  function typing() {
    var a = document.activeElement;
    return a && live.contains(a) && (a.tagName === 'INPUT' || a.tagName === 'TEXTAREA') &&
      a.value !== '';
  }
  function lastStep() {
    var items = live.querySelectorAll('ol.steps > li[data-step]');
    return items.length ? items[items.length - 1].dataset.step : '0';
  }
  function merge(box) {
    // a partial list: keep the steps the page shows before its first one, and its links
    var list = box.querySelector('ol.steps[data-partial]');
    if (!list) { return; }
    var old = live.querySelector('ol.steps');
    var from = Number(list.dataset.from);
    var first = list.firstChild;
    if (old) {
      Array.prototype.filter.call(old.children, function (li) {
        return Number(li.dataset.step) < from;
      }).forEach(function (li) { list.insertBefore(li, first); });
      list.dataset.from = old.dataset.from;
    }
    var links = live.querySelector('nav.paging.steps');
    var slot = box.querySelector('nav.paging.steps');
    if (links && slot) { slot.parentNode.replaceChild(links, slot); }
    list.removeAttribute('data-partial');
  }
  function refresh() {
    if (busy || wanted === null || wanted === live.dataset.since || typing()) { return; }
    busy = true;
    var url = live.dataset.part + '?from=' + encodeURIComponent(lastStep());
    fetch(url, {credentials: 'same-origin', cache: 'no-store',
                headers: {'If-None-Match': '"' + live.dataset.since + '"'}})
      .then(function (r) { return r.status === 200 ? r.text() : null; })
      .then(function (html) {
        busy = false;
        if (html === null) { return; }
        var open = openSteps();
        var box = document.createElement('div');
        box.innerHTML = html;
        merge(box);
        live.innerHTML = '';
        while (box.firstChild) { live.appendChild(box.firstChild); }
        var inner = live.firstElementChild;
        if (inner && inner.dataset.since) {
          live.dataset.version = inner.dataset.version;
          live.dataset.since = inner.dataset.since;
        }
        open.forEach(function (id) {
          var d = document.getElementById(id);
          if (d) { d.open = true; }
        });
        refresh();
      }, function () { busy = false; });
  }
  var source = new EventSource(live.dataset.live);
  source.addEventListener('changed', function (e) { wanted = e.data; refresh(); });
  source.addEventListener('end', function () { source.close(); });
  document.addEventListener('focusout', function () { setTimeout(refresh, 0); });
})();
"""
