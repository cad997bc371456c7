#if Inspector
/// The inspector's page: plain HTML, CSS and JavaScript, no build step. It reads `api/state`, and
/// again on every `change` event of `api/events`; its actions `POST`; every request carries the
/// session's token (the events' in their URL: `EventSource` cannot set a header).
///
/// Served by ``StrataInspector/page(template:)``: the script and the style carry the response's
/// nonce, the only ones its `Content-Security-Policy` runs, so the HTML has no `on…=` handler and
/// no `style=` attribute, and the script sets styles through `element.style` only.
enum InspectorPage {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="strata-token" content="{{TOKEN}}">
<title>Strata inspector</title>
<style nonce="{{NONCE}}">
  :root { --fresh:#1b7f3b; --stale:#a15c00; --fetching:#0b5cad; --paused:#6b4fa3; --inactive:#6b6b6b; --failed:#b3261e;
          font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color:#1d1d1f; background:#fafafa; }
  body { margin:0; }
  header { display:flex; flex-wrap:wrap; gap:.5rem; align-items:center; padding:.75rem 1rem; background:#fff; border-bottom:1px solid #ddd; }
  header h1 { font-size:1.1rem; margin:0 auto 0 0; }
  main { display:grid; grid-template-columns: minmax(0,1fr) minmax(0,1.3fr); gap:1rem; padding:1rem; }
  @media (max-width: 760px) { main { grid-template-columns: minmax(0,1fr); } }
  section { background:#fff; border:1px solid #ddd; border-radius:8px; padding:.75rem; min-width:0; }
  h2 { font-size:1rem; margin:1rem 0 .6rem; }
  section > h2:first-child { margin-top:.2rem; }
  table { width:100%; border-collapse:collapse; font-size:.9rem; }
  th, td { text-align:left; padding:.35rem .4rem; border-bottom:1px solid #eee; vertical-align:top; }
  tr.query { cursor:pointer; }
  tr.query:focus, tr.query[aria-selected="true"] { outline:2px solid var(--fetching); background:#eef5ff; }
  .badge { display:inline-block; padding:.1rem .45rem; border-radius:999px; color:#fff; font-size:.78rem; font-weight:600; }
  .fresh { background:var(--fresh); } .stale { background:var(--stale); } .fetching { background:var(--fetching); }
  .paused { background:var(--paused); } .inactive { background:var(--inactive); } .failed { background:var(--failed); }
  pre { background:#f4f4f6; padding:.5rem; border-radius:6px; overflow:auto; font-size:.8rem; margin:.3rem 0; }
  button { font:inherit; padding:.35rem .7rem; border-radius:6px; border:1px solid #bbb; background:#fff; cursor:pointer; }
  button:focus-visible { outline:2px solid var(--fetching); }
  .actions { display:flex; flex-wrap:wrap; gap:.4rem; margin:.5rem 0; }
  .muted { color:#666; font-size:.85rem; }
  .timeline { position:relative; }
  .bar { position:relative; height:1.3rem; margin:.15rem 0; font-size:.75rem; }
  .bar span.fill { position:absolute; top:0; bottom:0; border-radius:3px; opacity:.85; }
  .bar span.label { position:relative; padding-left:.3rem; white-space:nowrap; }
  .diff-add { color:var(--fresh); } .diff-del { color:var(--failed); }
  details > summary { cursor:pointer; }
  mark.served { background:#dff3e4; color:inherit; font-weight:700; }
  .flight { margin:.2rem 0; font-size:.88rem; }
  .tree { padding-left:1rem; }
</style>
</head>
<body>
<header>
  <h1>Strata inspector</h1>
  <span id="network" class="muted" aria-live="polite"></span>
  <button id="toggle-network" type="button">Simulate offline</button>
  <button id="export" type="button">Export JSON</button>
</header>
<main>
  <section aria-labelledby="queries-title">
    <h2 id="queries-title">Queries</h2>
    <table>
      <thead><tr><th scope="col">Key</th><th scope="col">State</th><th scope="col">Source</th><th scope="col">Observers</th><th scope="col">Age</th></tr></thead>
      <tbody id="queries"></tbody>
    </table>
    <h2>Loads in flight</h2>
    <div id="in-flight" aria-live="polite"></div>
    <h2>Recent loads</h2>
    <div id="timeline" class="timeline" aria-label="Recent loads, oldest first"></div>
  </section>
  <section aria-labelledby="detail-title">
    <h2 id="detail-title">Query</h2>
    <div id="detail" class="muted">Select a query (click, or Tab and Enter).</div>
    <h2>Circuit breakers</h2>
    <div id="circuits" class="muted"></div>
    <h2>Outboxes</h2>
    <div id="outboxes" class="muted"></div>
  </section>
</main>
<script nonce="{{NONCE}}">
"use strict";
const token = document.querySelector('meta[name="strata-token"]').content;
const authorized = { "X-Strata-Token": token };
const base = location.pathname.replace(/\/$/, "");
let state = null;
let selected = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    // Styles through the CSSOM: a style attribute is inline style, which the page's policy refuses.
    if (name === "class") node.className = value; else if (name === "style") Object.assign(node.style, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value); else node.setAttribute(name, value);
  }
  for (const child of children) if (child != null) node.append(child instanceof Node ? child : String(child));
  return node;
}
function age(seconds) {
  if (seconds == null) return "—";
  if (seconds < 60) return Math.round(seconds) + "s";
  if (seconds < 3600) return Math.floor(seconds / 60) + "m " + Math.round(seconds % 60) + "s";
  if (seconds < 86400) return Math.floor(seconds / 3600) + "h " + Math.floor(seconds % 3600 / 60) + "m";
  return Math.floor(seconds / 86400) + "d " + Math.floor(seconds % 86400 / 3600) + "h";
}
async function act(path) {
  const response = await fetch(base + path, { method: "POST", headers: authorized });
  if (!response.ok) alert("The inspector refused: " + response.status);
}
function jsonTree(text) {
  if (text == null) return el("p", { class: "muted" }, "Not shown (the value is not Encodable).");
  let value;
  try { value = JSON.parse(text); } catch { return el("pre", {}, text); }
  function node(key, value) {
    if (value !== null && typeof value === "object") {
      const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
      const details = el("details", { open: "" }, el("summary", {}, key + (Array.isArray(value) ? " [" + value.length + "]" : " {…}")));
      const list = el("div", { class: "tree" });
      for (const [k, v] of entries) list.append(node(String(k), v));
      details.append(list);
      return details;
    }
    return el("div", {}, key + ": ", el("code", {}, JSON.stringify(value)));
  }
  return node("value", value);
}
function diff(before, after) {
  if (before == null) return el("p", { class: "muted" }, "No previous version.");
  const old = before.split("\n"), now = after == null ? [] : after.split("\n");
  const pre = el("pre", { "aria-label": "Changes from the previous version" });
  const oldSet = new Set(old), nowSet = new Set(now);
  for (const line of old) if (!nowSet.has(line)) pre.append(el("div", { class: "diff-del" }, "- " + line));
  for (const line of now) if (!oldSet.has(line)) pre.append(el("div", { class: "diff-add" }, "+ " + line));
  if (!pre.childNodes.length) pre.append("(no change)");
  return pre;
}
function chainTree(query) {
  const pre = el("pre", { "aria-label": "The chain, outer to inner; the tier that served the last load is marked" });
  const lines = query.chain.split("\n");
  let served = -1;
  if (query.tier) {
    served = lines.findIndex(line => line.includes('named "' + query.tier + '"'));
    if (served < 0) served = lines.findIndex(line => line.includes(query.tier));
  }
  lines.forEach((line, index) => {
    if (index === served) pre.append(el("mark", { class: "served" }, line + "  ◀ served the last load"));
    else pre.append(line);
    if (index < lines.length - 1) pre.append("\n");
  });
  return pre;
}
function renderInFlight() {
  const running = state.queries.filter(q => q.inFlight);
  const now = Date.parse(state.generatedAt);
  document.getElementById("in-flight").replaceChildren(...(running.length ? running.map(q =>
    el("div", { class: "flight" }, el("span", { class: "badge fetching" }, q.key), " ", q.inFlight.reason + ", for " +
      age((now - Date.parse(q.inFlight.startedAt)) / 1000) + (q.inFlight.attempts ? ", retry " + q.inFlight.attempts : ""))
  ) : [el("span", { class: "muted" }, "None.")]));
}
function renderDetail() {
  const target = document.getElementById("detail");
  const query = state && state.queries.find(q => q.key === selected);
  if (!query) { target.className = "muted"; target.textContent = "Select a query (click, or Tab and Enter)."; return; }
  target.className = "";
  const key = encodeURIComponent(query.key);
  const flight = query.inFlight ? "Loading because " + query.inFlight.reason + ", for " + age((Date.parse(state.generatedAt) - Date.parse(query.inFlight.startedAt)) / 1000) + (query.inFlight.attempts ? ", " + query.inFlight.attempts + " failed attempts" : "") : "No load running.";
  target.replaceChildren(
    el("p", {}, el("strong", {}, query.key), " ", el("span", { class: "badge " + query.state }, query.state), " ", query.phase),
    el("p", { class: "muted" }, flight),
    el("p", { class: "muted" }, "Last load: " + (query.lastFetchReason || "none") + (query.lastError ? " — error: " + query.lastError : "") + (query.pendingWrites ? " — " + query.pendingWrites + " pending writes" : "")),
    el("div", { class: "actions" },
      el("button", { type: "button", onclick: () => act("/api/queries/refetch?key=" + key) }, "Refetch"),
      el("button", { type: "button", onclick: () => act("/api/queries/invalidate?key=" + key) }, "Invalidate"),
      el("button", { type: "button", onclick: () => act("/api/queries/fail?key=" + key) }, "Force an error"),
      el("button", { type: "button", onclick: () => act("/api/queries/remove?key=" + key) }, "Remove")),
    el("h3", {}, "Chain"), chainTree(query),
    el("h3", {}, "Value"), jsonTree(query.valueJSON),
    el("h3", {}, "Changes"), diff(query.previousValueJSON, query.valueJSON));
}
function render() {
  document.getElementById("network").textContent = state.online ? "Online" : "Offline (simulated or reported)";
  document.getElementById("toggle-network").textContent = state.online ? "Simulate offline" : "Back online";
  const rows = state.queries.map(query => {
    const row = el("tr", { class: "query", tabindex: "0", "aria-selected": String(query.key === selected),
      onclick: () => { selected = query.key; render(); },
      onkeydown: event => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); selected = query.key; render(); } } },
      el("td", {}, query.key),
      el("td", {}, el("span", { class: "badge " + query.state }, query.state)),
      el("td", {}, query.tier ? query.tier + (query.origin && query.origin !== query.tier ? " (" + query.origin + ")" : "") : "—"),
      el("td", {}, query.observers),
      el("td", {}, age(query.ageSeconds)));
    return row;
  });
  document.getElementById("queries").replaceChildren(...rows);
  const loads = state.loads.slice(-30);
  const timeline = document.getElementById("timeline");
  if (!loads.length) { timeline.replaceChildren(el("p", { class: "muted" }, "No loads recorded yet.")); }
  else {
    const now = Date.parse(state.generatedAt);
    const start = Math.min(...loads.map(l => Date.parse(l.startedAt)));
    const span = Math.max(now - start, 1);
    timeline.replaceChildren(...loads.map(load => {
      const from = Date.parse(load.startedAt), to = load.endedAt ? Date.parse(load.endedAt) : now;
      const colour = { running: "var(--fetching)", value: "var(--fresh)", failed: "var(--failed)", cancelled: "var(--inactive)" }[load.outcome];
      return el("div", { class: "bar", title: load.key + " — " + load.reason + " — " + load.outcome },
        el("span", { class: "fill", style: { left: ((from - start) / span * 100) + "%", width: Math.max((to - from) / span * 100, 1) + "%", background: colour } }),
        el("span", { class: "label" }, load.key + " · " + load.reason + " · " + load.outcome + (load.tier ? " · " + load.tier : "") + " · " + age((to - from) / 1000)));
    }));
  }
  document.getElementById("circuits").replaceChildren(...(state.circuits.length ? state.circuits.map(c => el("div", {}, c.name + ": " + c.state)) : [el("span", {}, "None registered.")]));
  document.getElementById("outboxes").replaceChildren(...(state.outboxes.length ? state.outboxes.map(o =>
    el("div", {}, el("p", {}, o.name + ": " + o.pending + " pending, " + o.parked + " parked" + (o.isDraining ? ", draining" : "") + (o.error ? " — " + o.error : "")),
      o.entries.length ? el("table", {}, el("tbody", {}, ...o.entries.map(e => el("tr", {},
        el("td", {}, e.request || e.kind), el("td", {}, e.state), el("td", {}, e.attempts + " attempts"), el("td", {}, e.lastFailure || ""))))) : "")
  ) : [el("span", {}, "None registered.")]));
  renderInFlight();
  renderDetail();
}
async function refresh() {
  const response = await fetch(base + "/api/state", { cache: "no-store", headers: authorized });
  if (!response.ok) { document.getElementById("network").textContent = "The inspector refused: " + response.status; return; }
  state = await response.json();
  render();
}
// The export needs the token too: fetched with it, then saved from memory.
async function exportState() {
  const response = await fetch(base + "/api/export", { cache: "no-store", headers: authorized });
  if (!response.ok) { alert("The inspector refused: " + response.status); return; }
  const link = el("a", { href: URL.createObjectURL(await response.blob()), download: "strata-inspector.json" });
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 60000);
}
document.getElementById("toggle-network").addEventListener("click", () => act("/api/network?online=" + String(!(state && state.online))));
document.getElementById("export").addEventListener("click", () => exportState());
const events = new EventSource(base + "/api/events?token=" + encodeURIComponent(token));
events.addEventListener("change", () => refresh());
refresh();
</script>
</body>
</html>
"""#
}
#endif
