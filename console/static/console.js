// Baton console: the live parts of server-rendered pages.
//
// - Listens to the tenant's event stream (GET /api/v1/ws, filtered by the
//   page's data-stream) and, when an event arrives, re-reads the page and
//   swaps in the parts marked data-live. The database is never polled.
// - Counts down to each <time data-deadline>.
// - Sends each form[data-api] to the REST API as a request envelope with
//   the session's CSRF token, and shows the answer.
"use strict";

(function () {
  const stream = document.body.dataset.stream;
  let ended = false; // the session ended: stop listening, say so

  function csrf() {
    return document.querySelector('meta[name="csrf-token"]')?.content || "";
  }

  // ---- flash messages ----
  function flash(kind, text) {
    const el = document.getElementById("flash");
    if (!el) return;
    el.className = "flash " + kind;
    el.textContent = text;
    el.hidden = false;
  }

  // ---- live refresh ----
  let refreshing = false;
  let held = false; // a live part was left alone by the last re-read

  // busy reports whether someone is using a live part: it has the focus,
  // or a field in it differs from what the page rendered.
  function busy(el) {
    if (el.contains(document.activeElement) && document.activeElement !== document.body) return true;
    for (const f of el.querySelectorAll("input, textarea")) {
      if (f.type !== "hidden" && f.value !== f.defaultValue) return true;
    }
    return false;
  }
  let again = false;
  let timer = null;

  function scheduleRefresh() {
    if (timer) return;
    timer = setTimeout(() => { timer = null; refresh(); }, 150);
  }

  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      const res = await fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (res.redirected && new URL(res.url).pathname === "/console/signin") {
        ended = true;
        flash("error", "Your session has ended: reload the page to sign in again.");
        return;
      }
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const token = doc.querySelector('meta[name="csrf-token"]');
      const mine = document.querySelector('meta[name="csrf-token"]');
      if (token && mine) mine.content = token.content;
      held = false;
      for (const el of document.querySelectorAll("[data-live][id]")) {
        const fresh = doc.getElementById(el.id);
        if (!fresh || fresh.innerHTML === el.innerHTML) continue;
        // Leave a part alone while someone types in it or has edited one
        // of its fields; it is read again when they leave it.
        if (busy(el)) { held = true; continue; }
        el.innerHTML = fresh.innerHTML;
      }
      tick();
      document.dispatchEvent(new CustomEvent("baton:refreshed"));
    } catch (e) {
      // A refresh that fails (the server restarting) is retried by the
      // next event.
    } finally {
      refreshing = false;
      if (again) { again = false; scheduleRefresh(); }
    }
  }

  // ---- the event stream ----
  let last = -1;
  let backoff = 500;

  function connect() {
    const live = document.getElementById("live");
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    let url = proto + "//" + location.host + "/api/v1/ws";
    const params = new URLSearchParams(stream || "");
    if (last >= 0) params.set("since", String(last));
    const q = params.toString();
    if (q) url += "?" + q;
    const ws = new WebSocket(url);
    ws.onopen = () => {
      backoff = 500;
      // Whatever happened between the page's render (or the last
      // connection) and now: read the page once.
      scheduleRefresh();
      if (live) live.classList.add("on");
      document.body.dataset.live = "on";
    };
    ws.onmessage = (m) => {
      try {
        const ev = JSON.parse(m.data);
        if (typeof ev.event_id === "number") last = ev.event_id;
      } catch (e) { /* not an event */ }
      scheduleRefresh();
    };
    ws.onclose = () => {
      if (live) live.classList.remove("on");
      document.body.dataset.live = "off";
      if (ended) return;
      // A refused stream may mean the session ended: a re-read tells.
      scheduleRefresh();
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 10000);
    };
  }

  // ---- countdowns ----
  function human(ms) {
    const s = Math.floor(Math.abs(ms) / 1000);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    if (s < 172800) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
    return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
  }

  function tick() {
    const now = Date.now();
    for (const el of document.querySelectorAll("time[data-deadline]")) {
      const at = Date.parse(el.dataset.deadline);
      if (isNaN(at)) continue;
      const left = at - now;
      el.textContent = left >= 0 ? "in " + human(left) : human(left) + " ago";
      el.title = new Date(at).toISOString();
      el.classList.toggle("passed", left < 0);
    }
  }

  // ---- API forms ----
  function setPath(obj, path, value) {
    const keys = path.split(".");
    let o = obj;
    for (const k of keys.slice(0, -1)) {
      if (typeof o[k] !== "object" || o[k] === null) o[k] = {};
      o = o[k];
    }
    o[keys[keys.length - 1]] = value;
  }

  function envelope(form) {
    const env = { message_id: crypto.randomUUID(), payload: {} };
    for (const el of form.elements) {
      if (!el.name || el.disabled) continue;
      let v = el.value;
      if (el.hasAttribute("data-unique") && v === "") v = "console-" + crypto.randomUUID();
      if (v === "") continue;
      if (el.hasAttribute("data-json")) {
        try { v = JSON.parse(v); } catch (e) { throw new Error(el.name + " is not valid JSON: " + e.message); }
      } else if (el.hasAttribute("data-number")) {
        v = Number(v);
        if (!Number.isFinite(v)) throw new Error(el.name + " must be a number");
      }
      setPath(env, el.name, v);
    }
    return env;
  }

  async function submit(form) {
    const [method, path] = form.dataset.api.split(" ");
    let body;
    try {
      body = method === "DELETE" ? undefined : JSON.stringify(envelope(form));
    } catch (e) {
      flash("error", e.message);
      return;
    }
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    try {
      const res = await fetch(path, {
        method, body, credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
      });
      let answer = null;
      try { answer = await res.json(); } catch (e) { /* no JSON body */ }
      if (!res.ok) {
        const err = answer && answer.error;
        flash("error", err ? err.code + ": " + err.message : "the request failed with status " + res.status);
        return;
      }
      flash("ok", (answer && answer.type ? answer.type.domain + "." + answer.type.action : "done") + ": done");
      const then = form.dataset.then;
      const id = answer && answer.data && answer.data.execution_id;
      if (then === "execution" && id) {
        location.assign("/console/executions/" + encodeURIComponent(id));
        return;
      }
      form.reset();
      if (document.activeElement instanceof HTMLElement) document.activeElement.blur();
      refresh();
    } catch (e) {
      flash("error", "the server did not answer: " + e.message);
    } finally {
      if (button) button.disabled = false;
    }
  }

  // A part left alone while it was in use is read again once it is not.
  document.addEventListener("focusout", () => { if (held) setTimeout(scheduleRefresh, 0); });

  document.addEventListener("submit", (e) => {
    const form = e.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.api) return;
    e.preventDefault();
    submit(form);
  });

  tick();
  setInterval(tick, 1000);
  if (stream !== "none") connect();
})();
