// sfemu status page: polls /v1/status (same origin) and draws tables and
// two SVG plots by hand; no libraries, nothing fetched from elsewhere.
"use strict";

const COLORS = ["#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#2c7a7b"];
const SVGNS = "http://www.w3.org/2000/svg";
const W = 600, H = 180, PAD_L = 44, PAD_B = 18, PAD_T = 8, PAD_R = 6;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function secs(v) {
  if (v === undefined || v === null) return "—";
  if (v < 1) return (v * 1000).toFixed(0) + " ms";
  if (v < 120) return v.toFixed(1) + " s";
  return (v / 60).toFixed(1) + " min";
}

function num(v) { return Number(v).toLocaleString("en-US"); }

function fillTable(id, rows) {
  const body = document.querySelector("#" + id + " tbody");
  const frag = document.createDocumentFragment();
  for (const cells of rows) {
    const tr = document.createElement("tr");
    for (const c of cells) {
      if (c instanceof Node) {
        const td = document.createElement("td");
        td.appendChild(c);
        tr.appendChild(td);
      } else if (typeof c === "object" && c !== null) {
        tr.appendChild(el("td", c.text, c.cls));
      } else {
        tr.appendChild(el("td", c));
      }
    }
    frag.appendChild(tr);
  }
  body.replaceChildren(frag);
}

function progressLine(p) {
  const pct = p.total > 0 ? (100 * p.done / p.total) : 0;
  const amt = (v) => p.unit === "s" ? v.toFixed(1) + "s" : p.unit === "%" ? v.toFixed(0) + "%" : num(Math.round(v)) + " " + p.unit;
  let s = `${p.what} ${pct.toFixed(0)}% (${amt(p.done)}/${amt(p.total)}) at ${amt(p.rate)}/s`;
  s += p.eta_seconds !== undefined ? ` ETA ${secs(p.eta_seconds)}` : " ETA unknown";
  return { pct, s };
}

function renderAdapter(doc) {
  const box = document.getElementById("adapter");
  const prog = document.getElementById("adapter-progress");
  const a = doc.adapter;
  if (!a) {
    box.replaceChildren(el("span", "no adapter reported", "muted"));
    prog.hidden = true;
    return;
  }
  const parts = [el("span", a.state, "state " + a.state)];
  if (a.reason) parts.push(el("span", a.reason, "reason"));
  parts.push(el("span", "epoch " + a.epoch));
  parts.push(el("span", "rows " + num(a.rows)));
  parts.push(el("span", "DDLs " + num(a.ddls)));
  parts.push(el("span", "buffered " + num(a.buffered_rows)));
  parts.push(el("span", "restarts " + a.restarts));
  parts.push(el("span", "checkpoint lag " + secs(a.checkpoint_lag_seconds)));
  box.replaceChildren(...parts);
  if (a.progress) {
    const p = progressLine(a.progress);
    prog.querySelector(".fill").style.width = Math.min(100, p.pct).toFixed(1) + "%";
    prog.querySelector(".line").textContent = p.s;
    prog.hidden = false;
  } else {
    prog.hidden = true;
  }
}

function renderCollections(doc) {
  fillTable("collections", doc.collections.map((c) => [
    c.name,
    { text: num(c.documents), cls: "num docs" },
    { text: num(c.tombstones), cls: "num" },
    { text: c.rebuild ? `${c.generation} · ${progressLine(c.rebuild).s}` : c.generation, cls: c.rebuild ? "rebuild" : "num" },
    { text: c.schema_version, cls: "num" },
    c.safe_ts,
    { text: secs(c.safe_lag_seconds), cls: "num" },
    { text: c.applied.map((m) => `${m.modality} ${secs(m.lag_seconds)}`).join(" · "), cls: "applied" },
  ]));
}

function renderPartitions(doc) {
  fillTable("partitions", doc.partitions.map((p) => [
    p.source_partition, p.collection, { text: p.epoch, cls: "num" }, { text: num(p.last_seq), cls: "num" },
    p.resolved_ts, { text: secs(p.lag_seconds), cls: "num" },
  ]));
}

function renderDDLs(doc) {
  fillTable("ddls", doc.ddls.map((d) => [
    d.ts, d.collection || d.table || "", (d.policy || "").replace("SCHEMA_UPDATE_POLICY_", ""),
    d.schema_version || "", { text: d.query || "", cls: "query" },
  ]));
}

function renderErrors(doc) {
  const ul = document.getElementById("errors");
  if (!doc.errors.length) {
    ul.replaceChildren(el("li", "none", "muted"));
    return;
  }
  ul.replaceChildren(...doc.errors.slice().reverse().map((e) => el("li", `${new Date(e.at).toLocaleTimeString()} ${e.message}`)));
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

// plot draws one line per series over [t0, t1]; series: [{name, pts: [[t, v]]}].
function plot(id, series, t0, t1, fmt) {
  const root = document.getElementById(id);
  let ymax = 0, n = 0;
  for (const s of series) for (const [, v] of s.pts) { ymax = Math.max(ymax, v); n++; }
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const x = (t) => PAD_L + (W - PAD_L - PAD_R) * (t - t0) / Math.max(1, t1 - t0);
  const y = (v) => PAD_T + (H - PAD_T - PAD_B) * (1 - v / ymax);
  const kids = [];
  for (const f of [0, 0.5, 1]) {
    const yy = y(ymax * f);
    kids.push(svg("line", { x1: PAD_L, x2: W - PAD_R, y1: yy, y2: yy, stroke: "#e3e7ef", "stroke-width": 1 }));
    const lab = svg("text", { x: PAD_L - 4, y: yy + 4, "text-anchor": "end", "font-size": 10, fill: "#6b7385" });
    lab.textContent = fmt(ymax * f);
    kids.push(lab);
  }
  const span = svg("text", { x: PAD_L, y: H - 4, "font-size": 10, fill: "#6b7385" });
  const spanS = (t1 - t0) / 1000;
  span.textContent = spanS >= 120 ? `last ${Math.round(spanS / 60)} min` : `last ${Math.round(spanS)} s`;
  kids.push(span);
  series.forEach((s, i) => {
    if (!s.pts.length) return;
    const pts = s.pts.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    kids.push(svg("polyline", { points: pts, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 1.5, "data-series": s.name }));
  });
  root.replaceChildren(...kids);
  root.dataset.points = String(n);
}

function renderPlots(doc) {
  const pts = doc.series.points;
  // The x axis spans the window, or less while the process is younger
  // than the window, so a fresh run's plot is not squeezed to the right.
  const t1 = Date.parse(doc.now);
  const t0 = pts.length ? Math.max(t1 - doc.series.window_seconds * 1000, pts[0].t - 1000) : t1 - 60000;
  plot("plot-rows", [{ name: "rows/s", pts: pts.map((p) => [p.t, p.rows_per_sec]) }], t0, t1, (v) => v.toFixed(0));
  const names = doc.collections.map((c) => c.name);
  const lag = names.map((name) => ({ name, pts: pts.filter((p) => p.safe_lag_seconds && name in p.safe_lag_seconds).map((p) => [p.t, p.safe_lag_seconds[name]]) }));
  plot("plot-lag", lag, t0, t1, (v) => v.toFixed(1));
  const legend = document.getElementById("lag-legend");
  legend.replaceChildren(...names.map((n, i) => { const s = el("span", "■ " + n); s.style.color = COLORS[i % COLORS.length]; return s; }));
}

function render(doc) {
  const up = doc.upstream;
  document.getElementById("upstream").textContent = up ? `upstream ${up.mode} · ${up.address}` : "upstream not reported";
  document.getElementById("updated").textContent = "updated " + new Date(doc.now).toLocaleTimeString();
  renderAdapter(doc);
  renderCollections(doc);
  renderPlots(doc);
  renderPartitions(doc);
  renderDDLs(doc);
  renderErrors(doc);
}

// The token (H15): sfemu run --token puts /v1/status behind a bearer token,
// which a browser does not send by itself. The page takes it from the
// address's fragment (#token=..., never sent to the server) or from the
// form it shows when /v1/status answers 401, keeps it in sessionStorage
// (this tab only, gone with it) and sends it on its own fetches.
const TOKEN_KEY = "sfemu.token";

function takeFragmentToken() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (!m) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  // Out of the address bar and the history: the token is a secret.
  history.replaceState(null, "", location.pathname + location.search);
}

function authHeaders() {
  const t = sessionStorage.getItem(TOKEN_KEY);
  return t ? { Authorization: "Bearer " + t } : {};
}

function askToken(refused) {
  const login = document.getElementById("login");
  document.getElementById("login-why").textContent = refused
    ? "sfemu refused this token: enter the --token it runs with."
    : "This sfemu runs with --token: enter it to see its status (kept in this tab only).";
  login.hidden = false;
  document.querySelector("main").hidden = true;
  document.getElementById("updated").textContent = "token needed";
  document.getElementById("login-token").focus();
}

function setupLogin() {
  document.getElementById("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = document.getElementById("login-token");
    const tok = input.value.trim();
    if (!tok) return;
    sessionStorage.setItem(TOKEN_KEY, tok);
    input.value = "";
    document.getElementById("login").hidden = true;
    document.querySelector("main").hidden = false;
    poll();
  });
}

async function poll() {
  try {
    const sent = authHeaders();
    const resp = await fetch("/v1/status", { cache: "no-store", headers: sent });
    if (resp.status === 401) {
      // Stop polling until the user gives a token (a refused one is dropped).
      const refused = "Authorization" in sent;
      sessionStorage.removeItem(TOKEN_KEY);
      askToken(refused);
      return;
    }
    if (resp.ok) {
      render(await resp.json());
      document.body.dataset.loaded = "1";
    } else {
      document.getElementById("updated").textContent = `status answered ${resp.status}`;
    }
  } catch (e) {
    document.getElementById("updated").textContent = "sfemu is not answering";
  }
  setTimeout(poll, 1000);
}

takeFragmentToken();
setupLogin();
poll();
