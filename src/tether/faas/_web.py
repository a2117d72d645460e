"""The service's web page: a user's endpoints and recent tasks.

A static page; its script asks for a token once (kept in the tab's ``sessionStorage``,
never in a cookie or the URL) and reads the same REST routes the SDK uses, so the page
sees exactly what the token's user may see. Text is inserted with ``textContent`` only.
"""

from __future__ import annotations

__all__ = ['PAGE']

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tether function service</title>
<style>
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 2em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: left; }
th { background: #f0f0f0; }
.online { color: #070; font-weight: bold; }
.offline { color: #a00; }
#error { color: #a00; }
code { font-size: 90%; }
</style>
</head>
<body>
<h1>tether function service</h1>
<form id="login">
  <label>Token <input id="token" type="password" size="50" autocomplete="off"></label>
  <button id="show" type="submit">Show</button>
</form>
<p id="error"></p>
<p id="user"></p>
<h2>Endpoints</h2>
<table id="endpoints">
<thead><tr><th>name</th><th>id</th><th>status</th><th>engine</th><th>workers</th>
<th>idle</th><th>queued</th><th>running</th></tr></thead>
<tbody></tbody>
</table>
<h2>Recent tasks</h2>
<table id="tasks">
<thead><tr><th>task</th><th>function</th><th>endpoint</th><th>status</th><th>submitted</th>
</tr></thead>
<tbody></tbody>
</table>
<script>
"use strict";
function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === undefined || text === null ? "" : String(text);
  if (cls) { td.className = cls; }
  row.appendChild(td);
}
function fill(table, items, mark, cells) {
  // The rows of a table: one an item, its data attributes mark(item), its cells
  // cells(item) (each [text, class]).
  const tbody = document.querySelector("#" + table + " tbody");
  tbody.replaceChildren();
  for (const item of items) {
    const row = document.createElement("tr");
    Object.assign(row.dataset, mark(item));
    for (const [text, cls] of cells(item)) { cell(row, text, cls); }
    tbody.appendChild(row);
  }
}
async function get(path) {
  const token = sessionStorage.getItem("tether-faas-token") || "";
  const r = await fetch(path, {headers: {"Authorization": "Bearer " + token}});
  const body = await r.json();
  if (!r.ok) { throw new Error(body.message || r.statusText); }
  return body;
}
async function refresh() {
  const err = document.getElementById("error");
  if (!sessionStorage.getItem("tether-faas-token")) { return; }
  try {
    const me = await get("/v1/whoami");
    document.getElementById("user").textContent = "user: " + me.name;
    const eps = (await get("/v1/endpoints")).endpoints;
    const online = (e) => (e.online ? "online" : "offline");
    fill("endpoints", eps, (e) => ({endpointId: e.endpoint_id}), (e) => [
      [e.name], [e.endpoint_id], [online(e), online(e)],
      [e.info.engine], [e.info.workers], [e.info.idle], [e.queued], [e.running],
    ]);
    const tasks = (await get("/v1/tasks?limit=50")).tasks;
    fill("tasks", tasks, (t) => ({taskId: t.task_id}), (t) => [
      [t.task_id], [t.function_name || t.function_id], [t.endpoint_id],
      [t.status, "status"], [new Date(t.created * 1000).toISOString()],
    ]);
    err.textContent = "";
  } catch (e) {
    err.textContent = "error: " + e.message;
  }
}
document.getElementById("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("tether-faas-token", document.getElementById("token").value);
  refresh();
});
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
"""
