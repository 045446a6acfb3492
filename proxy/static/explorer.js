// TemporalStore history explorer: plain JavaScript over the JSON of /api/ (read-only).
// Bytes arrive as JSON strings decoded as UTF-8, with each byte that is not valid UTF-8
// as the code unit U+DC80..U+DCFF (Python's "surrogateescape"): shown as \xNN, and sent
// back as the exact bytes, percent-encoded.
"use strict";

const $ = (sel) => document.querySelector(sel);
const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#3b6fd4", "#d4573b", "#2f9e6a", "#9b4dca", "#c9961a", "#1a9bb0", "#b03a7a"];
const HISTORY_PAGE = 200;
const state = { at: null, branch: null, cursor: "0", key: null, version: null, snapshots: [] };

function bytesOf(text) {
  const out = [];
  const enc = new TextEncoder();
  for (const ch of text) {
    const c = ch.codePointAt(0);
    if (c >= 0xdc80 && c <= 0xdcff) out.push(c - 0xdc00);
    else out.push(...enc.encode(ch));
  }
  return out;
}

function q(text) {
  return bytesOf(String(text)).map((b) => "%" + b.toString(16).padStart(2, "0")).join("");
}

// A text node for `text`, escaped bytes in their own colour.
function shown(text) {
  const span = document.createElement("span");
  let plain = "";
  const flush = () => { if (plain) { span.append(plain); plain = ""; } };
  for (const ch of String(text)) {
    const c = ch.codePointAt(0);
    if (c >= 0xdc80 && c <= 0xdcff) {
      flush();
      const esc = document.createElement("span");
      esc.className = "esc";
      esc.textContent = "\\x" + (c - 0xdc00).toString(16).padStart(2, "0");
      span.append(esc);
    } else plain += ch;
  }
  flush();
  return span;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : shown(c));
  return e;
}

async function api(path, params) {
  const query = Object.entries(params || {})
    .filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => k + "=" + q(v)).join("&");
  const res = await fetch("api/" + path + (query ? "?" + query : ""), { cache: "no-store" });
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || res.statusText);
  $("#error").hidden = true;
  return body;
}

function fail(err) {
  $("#error").textContent = String(err.message || err);
  $("#error").hidden = false;
}

const db = () => $("#db").value || "0";
const when = (ms) => new Date(ms).toISOString().replace("T", " ").replace("Z", "");

function select(list, item) {
  for (const x of list.querySelectorAll(".selected")) x.classList.remove("selected");
  if (item) item.classList.add("selected");
}

// -- snapshots and branches -----------------------------------------------------------

async function loadOverview() {
  const o = await api("overview", {});
  $("#version").textContent = o.version;
  state.snapshots = o.snapshots;
  const snaps = $("#snapshots");
  snaps.replaceChildren();
  for (const s of o.snapshots) {
    const li = el("li", { "data-name": s.name }, s.name,
      el("span", { class: "meta" }, `v${s.version} · ${when(s.time)}${s.trigger ? " · " + s.trigger : ""}`));
    li.addEventListener("click", () => { select(snaps, li); select($("#branches"));
      browse("snapshot:" + s.name, null, "at snapshot " + s.name); });
    snaps.append(li);
  }
  if (!o.snapshots.length) snaps.append(el("li", { class: "meta" }, "none sealed"));
  const branches = $("#branches");
  branches.replaceChildren();
  for (const b of o.branches) {
    const li = el("li", { "data-name": b.name }, b.name,
      el("span", { class: "meta" },
        `${b.parent && b.parent !== "main" ? `of ${b.parent} ` : ""}from v${b.fork} · ${b.changed} changed`));
    li.addEventListener("click", () => { select(branches, li); select(snaps);
      browse(null, b.name, "on branch " + b.name); });
    branches.append(li);
  }
  if (!o.branches.length) branches.append(el("li", { class: "meta" }, "none"));
  const names = $("#point-names");
  names.replaceChildren(el("option", { value: "now" }));
  for (const s of o.snapshots) names.append(el("option", { value: "snapshot:" + s.name }));
  for (const b of o.branches) names.append(el("option", { value: "branch:" + b.name }));
  if (!$("#diff-a").value && o.snapshots.length) {
    $("#diff-a").value = "snapshot:" + o.snapshots[o.snapshots.length - 1].name;
  }
}

// -- keys ---------------------------------------------------------------------------

function browse(at, branch, label) {
  state.at = at; state.branch = branch;
  $("#keys-at").textContent = label;
  listKeys(true).catch(fail);
}

async function listKeys(fresh) {
  if (fresh) { state.cursor = "0"; $("#keys").replaceChildren(); }
  let page;
  // SCAN may answer empty pages before the end: go on until keys come or it ends.
  do {
    page = await api("keys", { db: db(), pattern: $("#pattern").value, cursor: state.cursor,
      count: 200, at: state.at, branch: state.branch });
    state.cursor = page.cursor;
  } while (!page.keys.length && page.cursor !== "0");
  for (const [key, type] of page.keys) {
    const li = el("li", { "data-key": key }, key, el("span", { class: "type" }, type));
    li.addEventListener("click", () => { select($("#keys"), li); openKey(key).catch(fail); });
    $("#keys").append(li);
  }
  $("#keys-more").hidden = state.cursor === "0";
}

// -- a key's timeline ---------------------------------------------------------------------

const colours = new Map();
function colour(author) {
  if (author === null) return "#9aa3b2";
  if (!colours.has(author)) colours.set(author, PALETTE[colours.size % PALETTE.length]);
  return colours.get(author);
}

async function openKey(key) {
  state.key = key;
  const h = await api("history", { db: db(), key, branch: state.branch, count: HISTORY_PAGE });
  $("#timeline-key").replaceChildren(shown(key),
    h.versions.length === HISTORY_PAGE ? ` (the newest ${HISTORY_PAGE} versions)` : "");
  const versions = h.versions.slice().reverse(); // oldest first
  drawTimeline(versions);
  const body = $("#versions tbody");
  body.replaceChildren();
  for (const v of h.versions) {
    const tr = el("tr", { "data-version": v.version }, el("td", {}, String(v.version)),
      el("td", {}, when(v.time)), el("td", {}, v.command), el("td", {}, v.author ?? ""),
      el("td", {}, v.message ?? ""));
    tr.addEventListener("click", () => showVersion(v.version).catch(fail));
    body.append(tr);
  }
  const point = state.at && state.at.startsWith("snapshot:")
    ? state.snapshots.find((s) => "snapshot:" + s.name === state.at) : null;
  const latest = point ? versions.filter((v) => v.version <= point.version).pop() : versions.at(-1);
  if (latest) await showVersion(latest.version);
  else $("#value").replaceChildren(el("i", {}, "no history in memory"));
}

function drawTimeline(versions) {
  const width = 640, height = 120, pad = 30;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("role", "img");
  const line = document.createElementNS(SVG, "line");
  Object.entries({ x1: pad, x2: width - pad, y1: 60, y2: 60, stroke: "#c3c9d4" })
    .forEach(([k, v]) => line.setAttribute(k, v));
  svg.append(line);
  const n = versions.length;
  const t0 = n ? versions[0].time : 0, t1 = n ? versions[n - 1].time : 0;
  // By time where the versions are spread out; by order where time would stack them.
  const spread = n > 1 && t1 > t0 && new Set(versions.map((v) => v.time)).size === n;
  const x = (v, i) => pad + (n < 2 ? (width - 2 * pad) / 2
    : (spread ? (v.time - t0) / (t1 - t0) : i / (n - 1)) * (width - 2 * pad));
  versions.forEach((v, i) => {
    const c = document.createElementNS(SVG, "circle");
    const gone = /(^|,)(del|unlink|expired|getdel)($|,)/.test(v.command);
    Object.entries({ cx: x(v, i), cy: 60, r: 7, fill: gone ? "#fff" : colour(v.author),
      "data-version": v.version }).forEach(([k, val]) => c.setAttribute(k, val));
    const title = document.createElementNS(SVG, "title");
    title.textContent = `v${v.version} ${when(v.time)} ${v.command}` +
      (v.author !== null ? ` by ${v.author}` : "") + (v.message !== null ? `: ${v.message}` : "");
    c.append(title);
    c.addEventListener("click", () => showVersion(v.version).catch(fail));
    svg.append(c);
    if (n <= 12 || i === 0 || i === n - 1) {
      const label = document.createElementNS(SVG, "text");
      label.setAttribute("x", x(v, i));
      label.setAttribute("y", i % 2 ? 90 : 40);
      label.setAttribute("text-anchor", "middle");
      label.textContent = "v" + v.version;
      svg.append(label);
    }
  });
  // Sealed snapshots within the timeline: a dashed mark between the versions around it.
  for (const s of state.snapshots) {
    const after = versions.findIndex((v) => v.version > s.version);
    if (after <= 0) continue;
    const sx = (x(versions[after - 1], after - 1) + x(versions[after], after)) / 2;
    const mark = document.createElementNS(SVG, "line");
    Object.entries({ x1: sx, x2: sx, y1: 22, y2: 98, stroke: "#8a93a3",
      "stroke-dasharray": "3 3", "data-snapshot": s.name })
      .forEach(([k, v]) => mark.setAttribute(k, v));
    const label = document.createElementNS(SVG, "text");
    label.setAttribute("x", sx + 3);
    label.setAttribute("y", 30);
    label.textContent = "◆ " + s.name;
    svg.append(mark, label);
  }
  const authors = [...new Set(versions.map((v) => v.author))];
  authors.forEach((a, i) => {
    const t = document.createElementNS(SVG, "text");
    t.setAttribute("x", pad + i * 110);
    t.setAttribute("y", 112);
    t.style.fill = colour(a);
    t.textContent = "● " + (a === null ? "(no author)" : a);
    svg.append(t);
  });
  if (n) {
    for (const [v, anchor, xx] of [[versions[0], "start", 2], [versions[n - 1], "end", width - 2]]) {
      const t = document.createElementNS(SVG, "text");
      t.setAttribute("x", xx); t.setAttribute("y", 14); t.setAttribute("text-anchor", anchor);
      t.textContent = when(v.time);
      svg.append(t);
    }
  }
  $("#timeline").replaceChildren(svg);
}

async function showVersion(version) {
  state.version = version;
  for (const c of document.querySelectorAll("#timeline circle")) {
    c.classList.toggle("selected", c.getAttribute("data-version") === String(version));
  }
  select($("#versions"), $(`#versions tr[data-version="${version}"]`));
  const v = await api("value", { db: db(), key: state.key, version, branch: state.branch });
  // Offer the version as a diff point ("two versions").
  if (!$(`#point-names option[value="version:${version}"]`)) {
    $("#point-names").append(el("option", { value: "version:" + version }));
  }
  $("#value-at").textContent = `${v.type ?? "no key"} at version ${version}`;
  $("#value").replaceChildren(render(v.type, v.value));
}

// A value in its read shape (TS.ASOF's reply), by type.
function render(type, value) {
  if (type === null) return el("i", {}, "(no key)");
  if (type === "string") return shown(value);
  const table = el("table", {});
  const row = (...cells) => table.append(el("tr", {}, ...cells.map((c) => el("td", {}, String(c)))));
  if (type === "hash") for (const [f, v] of value) row(f, v);
  else if (type === "zset") for (const [m, s] of value) row(m, s);
  else if (type === "stream") for (const [id, fields] of value) row(id, fields.join(" "));
  else value.forEach((item, i) => row(i, item));
  return table;
}

// -- diffs --------------------------------------------------------------------------

async function runDiff() {
  const a = $("#diff-a").value, b = $("#diff-b").value;
  const d = await api("diff", { db: db(), a, b, count: 500 });
  const body = $("#diff-result tbody");
  body.replaceChildren();
  for (const [key, change] of d.changes) {
    const tr = el("tr", { "data-key": key }, el("td", {}, key),
      el("td", { class: change }, change));
    tr.addEventListener("click", () => { select(body, tr); diffKey(key, d.a, d.b).catch(fail); });
    body.append(tr);
  }
  if (!d.changes.length) body.append(el("tr", {}, el("td", {}, "no differences")));
  $("#diff-values").replaceChildren();
}

// The key's value at each side of the diff (TS.ASOF at either point).
async function diffKey(key, a, b) {
  const sides = [];
  for (const point of [a, b]) {
    const [kind, ...rest] = point.split(" ");
    const v = await api("value", { db: db(), key, at: kind.toLowerCase() + ":" + rest.join(" ") });
    sides.push(el("div", {}, el("h2", {}, point), el("div", { class: "value" }, render(v.type, v.value))));
  }
  $("#diff-values").replaceChildren(...sides);
}

// -- wiring -------------------------------------------------------------------------

$("#keys-form").addEventListener("submit", (e) => { e.preventDefault(); listKeys(true).catch(fail); });
$("#keys-more").addEventListener("click", () => listKeys(false).catch(fail));
$("#keys-now").addEventListener("click", () => { select($("#snapshots")); select($("#branches"));
  browse(null, null, "now"); });
$("#diff-form").addEventListener("submit", (e) => { e.preventDefault(); runDiff().catch(fail); });
$("#refresh").addEventListener("click", () => loadOverview().catch(fail));
$("#db").addEventListener("change", () => { loadOverview().catch(fail); listKeys(true).catch(fail); });
loadOverview().then(() => listKeys(true)).catch(fail);
