// memoryd admin page. Plain JS, no build step.
// Memories are hostile input: every piece of server data is placed with textContent or
// input.value, never parsed as HTML.
"use strict";

const KEY_SLOT = "memoryd.key";
const $ = (id) => document.getElementById(id);

const state = {
  user: null,          // selected user id
  usersCursor: null,   // next page of /v1/users
  memCursor: null,     // next page of /v1/memories
  searching: false,    // showing search results instead of the list
  me: null,            // GET /v1/whoami: the key's tenant and scopes
};

// ---- HTTP -----------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code || "http_error";
  }
}

async function api(method, path, { params, body } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== null && v !== undefined && v !== "") url.searchParams.set(k, String(v));
  }
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY_SLOT) || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = response.headers.get("content-type")?.includes("json")
    ? await response.json() : null;
  if (!response.ok) {
    if (response.status === 401) logout("The key was refused: " + ((data && data.error
      && data.error.message) || "unauthorized"));
    throw new ApiError(response.status, data);
  }
  return data;
}

// ---- small DOM helpers ----------------------------------------------------------------

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function say(message, kind = "") {
  const status = $("status");
  status.textContent = message;
  status.className = kind;
}

function fail(err) {
  say(err instanceof ApiError ? `${err.code}: ${err.message}` : String(err), "error");
}

function fmtDate(value) {
  return value ? new Date(value).toLocaleString() : "";
}

// ---- session --------------------------------------------------------------------------

function showApp(on) {
  $("login").hidden = on;
  $("app").hidden = !on;
  $("session").hidden = !on;
}

function logout(message) {
  sessionStorage.removeItem(KEY_SLOT);
  state.user = null;
  showApp(false);
  if (message) say(message, "error");
}

// What the key may do comes from GET /v1/whoami (any key may ask), so the page calls only
// routes the key can use: a refused call would show as an error in the browser's console.
async function open() {
  showApp(true);
  $("index-info").textContent = "";
  let me;
  try {
    me = await api("GET", "/v1/whoami");
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) fail(err);
    return;
  }
  state.me = me;
  $("jobs-toggle").hidden = !me.scopes.includes("admin");
  showJobs(false);
  if (me.operator) {
    // A store-wide key: the index, and no tenant's data.
    $("users-panel").hidden = true;
    $("pick-hint").textContent =
      "An operator key reaches the store-wide routes only; open a tenant's key to see memories.";
    try {
      const index = await api("GET", "/v1/admin/index");
      $("index-info").textContent =
        `embedder ${index.embedder} (${index.dim}-d), generation ${index.generation}`;
    } catch (err) {
      fail(err);
    }
    return;
  }
  $("users-panel").hidden = false;
  $("pick-hint").textContent = "Pick a user on the left.";
  await loadUsers(true);
}

// ---- users ----------------------------------------------------------------------------

async function loadUsers(reset) {
  if (reset) {
    state.usersCursor = null;
    $("users").replaceChildren();
  }
  try {
    const page = await api("GET", "/v1/users", {
      params: { limit: 100, cursor: state.usersCursor, prefix: $("user-prefix").value.trim() },
    });
    for (const item of page.items) {
      const button = el("button");
      button.type = "button";
      button.dataset.user = item.user_id;
      button.append(el("span", item.user_id), el("span", item.memories, "count"));
      button.addEventListener("click", () => selectUser(item.user_id));
      const li = el("li");
      li.append(button);
      $("users").append(li);
    }
    state.usersCursor = page.next_cursor;
    $("users-more").hidden = !page.next_cursor;
    if (!$("users").children.length) $("users").append(el("li", "No users yet.", "muted"));
    markSelected();
  } catch (err) {
    fail(err);
  }
}

function markSelected() {
  for (const b of $("users").querySelectorAll("button")) {
    b.classList.toggle("selected", b.dataset.user === state.user);
  }
}

function selectUser(userId) {
  showJobs(false);
  state.user = userId;
  $("current-user").textContent = userId;
  $("user-view").hidden = false;
  $("pick-hint").hidden = true;
  markSelected();
  say("");
  loadMemories(true);
}

// ---- memories -------------------------------------------------------------------------

function filters() {
  return {
    type: $("f-type").value, tag: $("f-tag").value.trim(),
    enabled: $("f-enabled").value, text: $("f-text").value.trim().toLowerCase(),
  };
}

function keep(memory, f) {
  // type and tag are filtered by the server; enabled and text here, on the loaded page.
  if (f.enabled && String(memory.enabled) !== f.enabled) return false;
  if (f.text && !memory.content.toLowerCase().includes(f.text)) return false;
  return true;
}

async function loadMemories(reset) {
  state.searching = false;
  $("clear-search").hidden = true;
  if (reset) {
    state.memCursor = null;
    $("memories").replaceChildren();
  }
  const f = filters();
  try {
    const page = await api("GET", "/v1/memories", {
      params: { user_id: state.user, type: f.type, tag: f.tag, limit: 100,
        cursor: state.memCursor },
    });
    const shown = page.items.filter((m) => keep(m, f));
    for (const memory of shown) $("memories").append(renderMemory(memory));
    state.memCursor = page.next_cursor;
    $("memories-more").hidden = !page.next_cursor;
    const count = $("memories").children.length;
    $("result-info").textContent = count ? `${count} memories${page.next_cursor
      ? " (more available)" : ""}` : "No memories match.";
  } catch (err) {
    fail(err);
  }
}

async function runSearch(event) {
  event.preventDefault();
  const query = $("query").value.trim();
  if (!query || !state.user) return;
  const f = filters();
  const body = { user_id: state.user, query, top_k: 20, mode: $("mode").value, explain: true };
  if (f.type) body.types = [f.type];
  if (f.tag) body.tags = [f.tag];
  try {
    const found = await api("POST", "/v1/search", { body });
    state.searching = true;
    $("clear-search").hidden = false;
    $("memories-more").hidden = true;
    const hits = found.results.filter((h) => keep(h.memory, f));
    $("memories").replaceChildren(...hits.map((h) => renderMemory(h.memory, h)));
    $("result-info").textContent =
      `${hits.length} results for “${query}” in ${found.took_ms} ms (score: calibrated 0–1)`;
  } catch (err) {
    fail(err);
  }
}

const EXPLAIN_PARTS = [
  ["dense", "dense"], ["dense_rank", "dense rank"], ["keyword", "keyword"],
  ["keyword_rank", "keyword rank"], ["relevance", "relevance"], ["recency", "recency"],
  ["importance", "importance"], ["access", "access"], ["final", "final"],
];

function renderExplanation(table, explanation) {
  const head = el("tr");
  const row = el("tr");
  for (const [key, label] of EXPLAIN_PARTS) {
    head.append(el("th", label));
    const value = explanation[key];
    row.append(el("td", value === null || value === undefined ? "–"
      : Number.isInteger(value) ? value : Number(value).toFixed(3)));
  }
  table.tBodies[0].replaceChildren(head, row);
  table.hidden = false;
}

function renderMemory(memory, hit) {
  const node = $("memory-template").content.firstElementChild.cloneNode(true);
  node.dataset.id = memory.id;
  fillMemory(node, memory);
  if (hit) {
    const score = node.querySelector(".score");
    score.textContent = `${hit.score.toFixed(3)} ${hit.label}`;
    score.classList.toggle("high", hit.label === "high");
    score.hidden = false;
    if (hit.explanation) renderExplanation(node.querySelector(".explain"), hit.explanation);
  }
  node.querySelector(".edit").addEventListener("click", () => openEditor(node));
  node.querySelector(".cancel").addEventListener("click", () => {
    node.querySelector(".editor").hidden = true;
  });
  node.querySelector(".editor").addEventListener("submit", (e) => saveEdit(e, node));
  node.querySelector(".toggle").addEventListener("click", () => toggle(node));
  node.querySelector(".delete").addEventListener("click", () => remove(node));
  node.querySelector(".history").addEventListener("click", () => history(node));
  return node;
}

function fillMemory(node, memory) {
  node.memory = memory;
  node.classList.toggle("disabled", !memory.enabled);
  node.querySelector(".content").textContent = memory.content;
  node.querySelector(".type").textContent = memory.type;
  const stateTag = node.querySelector(".state");
  stateTag.textContent = memory.enabled ? "enabled" : "disabled";
  stateTag.classList.toggle("off", !memory.enabled);
  node.querySelector(".importance").textContent = `importance ${memory.importance}`;
  node.querySelector(".tags").textContent = memory.tags.length
    ? memory.tags.map((t) => `#${t}`).join(" ") : "";
  node.querySelector(".dates").textContent =
    `created ${fmtDate(memory.created_at)} · updated ${fmtDate(memory.updated_at)}`;
  node.querySelector(".toggle").textContent = memory.enabled ? "Disable" : "Enable";
}

function openEditor(node) {
  const form = node.querySelector(".editor");
  form.elements.content.value = node.memory.content;
  form.elements.tags.value = node.memory.tags.join(", ");
  form.elements.importance.value = node.memory.importance;
  form.hidden = false;
  form.elements.content.focus();
}

async function patch(node, changes, done) {
  const buttons = node.querySelectorAll("button");
  buttons.forEach((b) => { b.disabled = true; });
  try {
    const result = await api("PATCH", `/v1/memories/${encodeURIComponent(node.dataset.id)}`, {
      params: { user_id: state.user, wait: 15 }, body: changes,
    });
    if (result && result.memory) {
      fillMemory(node, result.memory);
      say(done, "ok");
    } else {
      say("Saved; the change is still being processed.", "ok");
    }
    return true;
  } catch (err) {
    fail(err);
    return false;
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
  }
}

async function saveEdit(event, node) {
  event.preventDefault();
  const form = event.currentTarget;
  const tags = form.elements.tags.value.split(",").map((t) => t.trim()).filter(Boolean);
  const changes = { content: form.elements.content.value.trim(), tags,
    importance: Number(form.elements.importance.value) };
  if (await patch(node, changes, "Memory saved.")) form.hidden = true;
}

function toggle(node) {
  const enabled = !node.memory.enabled;
  patch(node, { enabled }, enabled ? "Memory enabled." : "Memory disabled.");
}

async function remove(node) {
  if (!window.confirm("Forget this memory for good?")) return;
  try {
    await api("DELETE", `/v1/memories/${encodeURIComponent(node.dataset.id)}`, {
      params: { user_id: state.user, wait: 15 },
    });
    node.remove();
    say("Memory deleted.", "ok");
  } catch (err) {
    fail(err);
  }
}

function historyEvents(data) {
  if (Array.isArray(data)) return data;
  for (const key of ["events", "items", "history"]) {
    if (data && Array.isArray(data[key])) return data[key];
  }
  return [];
}

async function history(node) {
  const list = node.querySelector(".history-list");
  if (!list.hidden) {
    list.hidden = true;
    return;
  }
  list.replaceChildren();
  try {
    const data = await api("GET", `/v1/memories/${encodeURIComponent(node.dataset.id)}/history`,
      { params: { user_id: state.user } });
    const events = historyEvents(data);
    for (const e of events) {
      const when = fmtDate(e.at || e.created_at);
      const what = e.event || e.action || "";
      const change = e.before || e.after
        ? `: ${e.before ?? "∅"} → ${e.after ?? "∅"}` : "";
      list.append(el("li", `${when} ${what}${change}`));
    }
    if (!events.length) list.append(el("li", "No history recorded.", "muted"));
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 404) {
      fail(err);
      return;
    }
    list.append(el("li", "History is not available on this server.", "muted"));
  }
  list.hidden = false;
}

// ---- jobs -----------------------------------------------------------------------------

function showJobs(on) {
  $("jobs-view").hidden = !on;
  $("user-view").hidden = on || !state.user;
  $("pick-hint").hidden = on || Boolean(state.user);
  if (on) loadJobs();
}

function reasonOf(error) {
  if (!error) return "";
  return [error.code, error.message].filter(Boolean).join(": ");
}

function jobRow(job, status, when) {
  const li = el("li", null, "job");
  li.dataset.job = job.job_id;
  li.append(el("span", status, `status ${status}`), el("span", job.kind, "kind"),
    el("span", job.user_id ? `user ${job.user_id}` : "", "user"),
    el("span", `attempts ${job.attempts}`, "attempts"), el("span", fmtDate(when), "muted"),
    el("span", job.job_id, "id muted"));
  const reason = reasonOf(job.error);
  if (reason) li.append(el("span", reason, "reason"));
  return li;
}

async function loadJobs() {
  try {
    const [failed, recent] = await Promise.all([
      api("GET", "/v1/jobs", { params: { status: "failed", limit: 50 } }),
      api("GET", "/v1/jobs/recent", { params: { limit: 50 } }),
    ]);
    const failedRows = failed.items.map((job) => {
      const li = jobRow(job, "failed", job.failed_at);
      const retry = el("button", "Retry", "secondary retry");
      retry.type = "button";
      retry.addEventListener("click", () => retryJob(job.job_id, retry));
      li.append(retry);
      return li;
    });
    $("failed-jobs").replaceChildren(...(failedRows.length ? failedRows
      : [el("li", "No failed jobs.", "muted")]));
    const recentRows = recent.items.map((job) => jobRow(job, job.status,
      job.updated_at || job.created_at));
    $("recent-jobs").replaceChildren(...(recentRows.length ? recentRows
      : [el("li", "No jobs yet.", "muted")]));
  } catch (err) {
    fail(err);
  }
}

async function retryJob(jobId, button) {
  button.disabled = true;
  try {
    await api("POST", `/v1/jobs/${encodeURIComponent(jobId)}/retry`);
    say("Job queued again.", "ok");
    await loadJobs();
  } catch (err) {
    button.disabled = false;
    fail(err);
  }
}

// ---- wiring ---------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = $("key").value.trim();
    if (!key) return;
    sessionStorage.setItem(KEY_SLOT, key);
    $("key").value = "";
    say("");
    open();
  });
  $("logout").addEventListener("click", () => logout("Key forgotten."));
  $("jobs-toggle").addEventListener("click", () => showJobs($("jobs-view").hidden));
  $("jobs-refresh").addEventListener("click", () => loadJobs());
  $("jobs-close").addEventListener("click", () => showJobs(false));
  $("user-filter").addEventListener("submit", (e) => { e.preventDefault(); loadUsers(true); });
  $("users-more").addEventListener("click", () => loadUsers(false));
  $("user-manual").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = $("user-id").value.trim();
    if (id) selectUser(id);
  });
  $("search-form").addEventListener("submit", runSearch);
  $("clear-search").addEventListener("click", () => loadMemories(true));
  $("filters").addEventListener("submit", (e) => {
    e.preventDefault();
    if (state.searching) $("search-form").requestSubmit();
    else loadMemories(true);
  });
  $("memories-more").addEventListener("click", () => loadMemories(false));
  if (sessionStorage.getItem(KEY_SLOT)) open();
});
