/// The web demo's page: plain HTML, CSS and JavaScript served by the binary, no build step. It
/// follows `api/events` (each event carries the whole ``FeedView``) and drives the scenario with
/// `POST`s; every request carries the session's token (the events' in their URL: `EventSource`
/// cannot set a header). Served by `StrataInspector.page(template:)`: the script and the style
/// carry the response's nonce, the only ones its `Content-Security-Policy` runs, so the HTML has no
/// `on…=` handler and no `style=` attribute.
enum FeedPage {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="strata-token" content="{{TOKEN}}">
<title>Strata demo: the offline-first feed</title>
<style nonce="{{NONCE}}">
  :root { --fresh:#1b7f3b; --stale:#a15c00; --loading:#0b5cad; --refreshing:#0b5cad; --paused:#6b4fa3; --failed:#b3261e;
          font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color:#1d1d1f; background:#f5f5f7; }
  body { margin:0; }
  header { background:#fff; border-bottom:1px solid #ddd; padding:.75rem 1rem; }
  header h1 { font-size:1.15rem; margin:0 0 .2rem; }
  header p { margin:0; color:#555; font-size:.88rem; }
  .layout { display:grid; grid-template-columns: minmax(0,18rem) minmax(0,1fr); gap:1rem; padding:1rem; max-width:64rem; margin:0 auto; }
  @media (max-width: 700px) { .layout { grid-template-columns: minmax(0,1fr); padding:.6rem; } }
  section, fieldset { background:#fff; border:1px solid #ddd; border-radius:10px; padding:.8rem; min-width:0; margin:0; }
  legend, h2 { font-weight:600; font-size:1rem; margin:0 0 .5rem; padding:0; }
  fieldset { display:flex; flex-direction:column; gap:.55rem; }
  button { font:inherit; padding:.45rem .8rem; border-radius:8px; border:1px solid #aaa; background:#fff; cursor:pointer; text-align:left; }
  button:hover { background:#f0f4ff; }
  button:focus-visible, input:focus-visible, a:focus-visible { outline:3px solid var(--loading); outline-offset:1px; }
  button[disabled] { opacity:.5; cursor:default; }
  form { display:flex; flex-direction:column; gap:.3rem; }
  label { font-size:.88rem; color:#333; }
  input { font:inherit; padding:.4rem .5rem; border-radius:8px; border:1px solid #aaa; min-width:0; }
  .world { font-size:.88rem; color:#333; display:grid; gap:.25rem; }
  .world strong { font-weight:600; }
  .status { display:flex; flex-wrap:wrap; align-items:center; gap:.5rem; margin-bottom:.6rem; }
  .badge { display:inline-block; padding:.2rem .6rem; border-radius:999px; color:#fff; font-size:.85rem; font-weight:600; }
  .badge.fresh { background:var(--fresh); } .badge.stale { background:var(--stale); } .badge.loading, .badge.refreshing { background:var(--loading); }
  .badge.paused { background:var(--paused); } .badge.failed { background:var(--failed); }
  #phase { margin:0; color:#333; font-size:.92rem; }
  ol { list-style:none; margin:0; padding:0; }
  li.item { border-top:1px solid #eee; padding:.6rem .2rem; }
  li.item:first-child { border-top:none; }
  li.item h3 { font-size:1rem; margin:0 0 .15rem; overflow-wrap:anywhere; }
  li.item p { margin:0; color:#444; font-size:.9rem; overflow-wrap:anywhere; }
  li.item .meta { font-size:.78rem; color:#666; margin-left:.3rem; font-weight:400; }
  li.pending { background:#fff8e6; border-left:4px solid var(--stale); padding-left:.5rem; }
  li.sending { background:#eef4ff; border-left:4px solid var(--loading); padding-left:.5rem; }
  .tag.sending { color:#0b3f7a; background:#cfe0ff; }
  .check { display:flex; align-items:center; gap:.4rem; font-size:.88rem; }
  .check input { width:1.1rem; height:1.1rem; margin:0; }
  .feed-head { display:flex; flex-wrap:wrap; align-items:baseline; justify-content:space-between; gap:.5rem; }
  #count { margin:0; color:#555; font-size:.85rem; }
  .newer { margin-bottom:.5rem; }
  .tag { display:inline-block; font-size:.72rem; font-weight:700; color:#7a4500; background:#ffe3a8; border-radius:4px; padding:.05rem .35rem; margin-left:.3rem; }
  .more { margin-top:.6rem; }
  .error { color:var(--failed); font-size:.88rem; overflow-wrap:anywhere; margin:0; }
  footer { text-align:center; font-size:.85rem; padding:0 1rem 1rem; }
  .world-section { margin-top:1rem; }
</style>
</head>
<body>
<header>
  <h1>Strata: the offline-first feed</h1>
  <p>The offline-first chain (fresh local 24 h → remote + cache → stale local → bundled default) in a live query, against a real server, on a simulated clock.</p>
</header>
<div class="layout">
  <div>
    <fieldset>
      <legend>Drive the scenario</legend>
      <button id="network" type="button">Go offline</button>
      <button id="clock" type="button">Move the clock a day</button>
      <button id="refresh" type="button">Refresh</button>
      <form id="post-form">
        <label for="post-title">A new post's title</label>
        <input id="post-title" name="title" maxlength="200" required placeholder="Written offline">
        <button id="post" type="submit">Post</button>
      </form>
      <label class="check" for="refuse-posts"><input id="refuse-posts" type="checkbox"> The server refuses posts (422)</label>
      <p id="post-error" class="error" role="alert" hidden></p>
    </fieldset>
    <section class="world-section" aria-labelledby="world-title">
      <h2 id="world-title">The world</h2>
      <div class="world">
        <span>Network: <strong id="network-state">…</strong></span>
        <span>Server: <strong id="server-state">…</strong></span>
        <span>Clock: <strong id="now">…</strong></span>
        <span>Outbox: <strong id="outbox">…</strong></span>
        <span>Feed requests: <strong id="requests">…</strong></span>
      </div>
    </section>
  </div>
  <section aria-labelledby="feed-title">
    <div class="feed-head">
      <h2 id="feed-title">Feed</h2>
      <p id="count" aria-live="polite">…</p>
    </div>
    <div class="status">
      <span id="badge" class="badge loading">loading</span>
      <p id="phase" aria-live="polite">Loading…</p>
    </div>
    <p id="error" class="error" role="alert" hidden></p>
    <button id="previous-page" class="newer" type="button" hidden>Load newer</button>
    <ol id="items" aria-label="Posts, newest first"></ol>
    <button id="next-page" class="more" type="button" disabled>Next page</button>
  </section>
</div>
<footer><a href="inspector">Open the inspector</a>: every query, its chain, loads and the outbox.</footer>
<script nonce="{{NONCE}}">
"use strict";
const token = document.querySelector('meta[name="strata-token"]').content;
let view = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value; else node.setAttribute(name, value);
  }
  for (const child of children) if (child != null) node.append(child instanceof Node ? child : String(child));
  return node;
}
async function act(path, init) {
  const response = await fetch("api/" + path, Object.assign({ method: "POST" }, init || {}, {
    headers: Object.assign({ "X-Strata-Token": token }, (init && init.headers) || {}) }));
  const error = document.getElementById("error");
  if (!response.ok) { error.hidden = false; error.textContent = "The demo refused: " + response.status + " " + (await response.text()); }
  else { error.hidden = true; }
  return response.ok;
}
function render() {
  const badge = document.getElementById("badge");
  badge.className = "badge " + view.state;
  badge.textContent = view.source ? view.source + " · " + (view.age === "just now" ? "just now" : view.age + " old") + (view.isStale ? " · stale" : "") : view.state;
  badge.setAttribute("aria-label", view.source ? "Served by " + view.source + ", " + (view.age || "") + (view.isStale ? ", stale" : ", fresh") : view.state);
  document.getElementById("phase").textContent = view.phase;
  document.getElementById("items").replaceChildren(...view.items.map(item =>
    el("li", { class: "item" + (item.pending ? " pending" : "") + (item.sending ? " sending" : ""), "data-id": item.id == null ? "" : String(item.id) },
      el("h3", {}, item.title, " ", item.sending ? el("span", { class: "tag sending" }, "Sending…")
        : item.pending ? el("span", { class: "tag" }, "Pending") : el("span", { class: "meta" }, "#" + item.id)),
      el("p", {}, item.body))));
  const count = view.counter.count;
  document.getElementById("count").textContent = (count == null ? "No posts yet" : count + (count === 1 ? " post" : " posts") + " shown")
    + " · counter changed " + view.counter.changes + (view.counter.changes === 1 ? " time" : " times");
  const newer = document.getElementById("previous-page");
  newer.hidden = !view.hasPreviousPage;
  const post = document.getElementById("post");
  post.disabled = view.posting === "pending";
  post.textContent = view.posting === "pending" ? "Posting…" : "Post";
  const postError = document.getElementById("post-error");
  postError.hidden = !(view.posting === "failed" && view.postError);
  postError.textContent = view.postError ? "Not posted: " + view.postError : "";
  document.getElementById("refuse-posts").checked = view.refusingPosts;
  const next = document.getElementById("next-page");
  next.disabled = !view.hasNextPage;
  next.textContent = view.hasNextPage ? "Next page" : "No more pages";
  document.getElementById("network").textContent = view.networkOnline ? "Go offline" : "Go online";
  document.getElementById("network-state").textContent = view.networkOnline ? "online" : "offline";
  document.getElementById("server-state").textContent = view.serverOnline ? "answering" : "refusing connections";
  document.getElementById("now").textContent = new Date(view.now).toLocaleString();
  document.getElementById("outbox").textContent = view.outboxPending + " waiting" + (view.outboxParked ? ", " + view.outboxParked + " parked" : "");
  document.getElementById("requests").textContent = String(view.feedRequests);
}
document.getElementById("network").addEventListener("click", () => act("network?online=" + String(!(view && view.networkOnline))));
document.getElementById("clock").addEventListener("click", () => act("clock?advance=86400"));
document.getElementById("refresh").addEventListener("click", () => act("refresh"));
document.getElementById("next-page").addEventListener("click", () => act("next-page"));
document.getElementById("previous-page").addEventListener("click", () => act("previous-page"));
document.getElementById("refuse-posts").addEventListener("change", event => act("write-fault?status=" + (event.target.checked ? "422" : "none")));
document.getElementById("post-form").addEventListener("submit", async event => {
  event.preventDefault();
  const input = document.getElementById("post-title");
  const title = input.value.trim();
  if (!title) { input.focus(); return; }
  if (await act("posts", { headers: { "Content-Type": "application/json" }, body: JSON.stringify({ title }) })) input.value = "";
});
const events = new EventSource("api/events?token=" + encodeURIComponent(token));
events.addEventListener("feed", event => { view = JSON.parse(event.data); render(); });
</script>
</body>
</html>
"""#
}
