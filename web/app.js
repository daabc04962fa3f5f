// The couplet page. Every piece of user or model text goes in through textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let shown = null; // the last answer of /api/v1/generate
let asked = null; // the request that answer answered (its tone mode, 藏头, 嵌字 for the alternatives)
let drawnScroll = null; // the 春联 on show: { written, upper, svg } (svg: the server's SVG text)
let reverseModel = false; // the bundle writes upper lines for lower lines (GET /api/v1/model)
// a character the server mirrors from the given line (punctuation, symbols): no lock box
const PUNCTUATION = /[\p{P}\p{S}]/u;

// The two directions: lower lines for an upper line (上联求下联), or upper lines for a lower
// line (下联求上联). The line typed is the "given" line, the candidates are "written" lines.
const FORWARD = "upper_to_lower";
const REVERSE = "lower_to_upper";

function sides(direction) {
  return direction === REVERSE ? { given: "下联", written: "上联" } : { given: "上联", written: "下联" };
}

// The rule report's checks; no_reuse: the written line takes none of the given line's characters.
function rules(direction) {
  return [
    ["length", "字数相等"],
    ["punctuation", "标点相对"],
    ["repeats", "叠字相对"],
    ["no_reuse", `不重${sides(direction).given}字`],
    ["tone_end", "仄起平收"],
    ["no_three_level_tail", "无三平尾"],
  ];
}

// The direction the form asks in (the radio buttons, shown when the bundle has a reverse model).
function chosenDirection() {
  return $("direction-reverse").checked ? REVERSE : FORWARD;
}

// The direction of the answer on show (a server without the field: forward).
function shownDirection() {
  return (shown && shown.direction) || FORWARD;
}

function givenLine(answer) {
  return answer.direction === REVERSE ? answer.lower : answer.upper;
}

function givenTones(answer) {
  return (answer.direction === REVERSE ? answer.lower_tones : answer.upper_tones) || [];
}

// A written line and the answer's given line as the couplet they make, upper line first: the
// feedback, the 春联 and the alternatives take them so, in either direction.
function couplet(written) {
  return shownDirection() === REVERSE ? { upper: written, lower: shown.lower } : { upper: shown.upper, lower: written };
}

// The lock boxes belong to the form's direction; an answer of the other direction leaves them be.
function locksFollowShown() {
  return shown !== null && shownDirection() === chosenDirection();
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

function announce(message) {
  $("status").textContent = message; // a polite live region: screen readers hear it
}

async function send(path, body) {
  try {
    return await fetch(path, {
      method: body === undefined ? "GET" : "POST",
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (_) {
    // fetch rejects only when no answer came (server down, network gone): the browser's own
    // English text ("Failed to fetch") says nothing to the reader
    throw new Error("无法连接服务器，请稍后再试 / Cannot reach the server; try again later");
  }
}

async function refusal(response) {
  let data = null;
  try {
    data = await response.json();
  } catch (_) {
    data = null;
  }
  const detail = data && data.detail;
  return new Error(typeof detail === "string" ? detail : `出错了 / Error ${response.status}`);
}

async function api(path, body) {
  const response = await send(path, body);
  if (!response.ok) throw await refusal(response);
  return response.json();
}

// Arrow keys move between a line's character buttons; Tab enters the line once (at the
// character last focused) and leaves it, instead of stopping at every character.
function rovingFocus(line) {
  const cells = () => [...line.querySelectorAll("button.ch")];
  line.addEventListener("keydown", (event) => {
    const all = cells();
    const at = all.indexOf(document.activeElement);
    const step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[event.key];
    const to = event.key === "Home" ? 0 : event.key === "End" ? all.length - 1 : step ? at + step : -1;
    if (at < 0 || to < 0 || to >= all.length) return;
    event.preventDefault();
    all.forEach((cell, i) => (cell.tabIndex = i === to ? 0 : -1));
    all[to].focus();
  });
}

// A line as characters, each with its tone mark (平/仄/中) above it; ``name``: the side of a
// pickable line (下联, or 上联 when written for a lower line).
function lineView(text, tones, onPick, name = "下联") {
  const line = el("span", "line");
  if (onPick) {
    line.setAttribute("role", "group");
    line.setAttribute("aria-label", `${name} ${text}（方向键选字，回车看可换的字）`);
    rovingFocus(line);
  }
  [...text].forEach((ch, i) => {
    const cell = el(onPick ? "button" : "span", "ch");
    if (onPick) {
      cell.type = "button";
      cell.tabIndex = i === 0 ? 0 : -1;
      cell.title = "换字或锁定";
      cell.setAttribute("aria-label", `${name}第 ${i + 1} 字「${ch}」：换字或锁定`);
      cell.addEventListener("click", () => onPick(i, ch));
    }
    const tone = tones[i] || "";
    cell.append(el("span", "mark tone-" + ({ 平: "level", 仄: "oblique", 中: "either" }[tone] || "none"), tone || "\u00a0"));
    cell.append(el("span", "char", ch));
    line.append(cell);
  });
  return line;
}

function upperChars() {
  return [...$("upper").value.replace(/\s+/g, "")];
}

// One box per character of the given line, for the written line's character there.
function rebuildLocks() {
  const chars = upperChars().slice(0, 100);
  const { given, written } = sides(chosenDirection());
  const box = $("locks");
  const old = [...box.querySelectorAll("input")].map((input) => input.value);
  box.replaceChildren();
  chars.forEach((ch, i) => {
    const cell = el("label", "lock-cell");
    const input = el("input", "lock");
    input.maxLength = 1;
    if (PUNCTUATION.test(ch)) {
      input.value = ch; // punctuation is mirrored, never locked
      input.disabled = true;
    } else {
      input.value = old[i] && !PUNCTUATION.test(old[i]) ? old[i] : "";
    }
    input.setAttribute("aria-label", `${written}第 ${i + 1} 字（对${given}「${ch}」）`);
    cell.append(el("span", "lock-over", ch), input);
    box.append(cell);
  });
  $("locks-box").hidden = chars.length === 0;
}

function lockPattern() {
  const values = [...$("locks").querySelectorAll("input")].map((input) =>
    input.disabled ? "_" : input.value.trim() || "_",
  );
  return values.some((v) => v !== "_") ? values.join("") : null;
}

function lockAt(position, ch) {
  const input = $("locks").querySelectorAll("input")[position];
  if (!input || input.disabled || !locksFollowShown()) return;
  const { written } = sides(shownDirection());
  input.value = input.value === ch ? "" : ch;
  announce(input.value ? `已锁定${written}第 ${position + 1} 字「${ch}」` : `已解锁${written}第 ${position + 1} 字`);
}

// The lock pattern for the alternatives of the ``written`` line's position: the boxes that agree
// with the line (a box that disagrees is not this line's constraint), the clicked character's
// repeat group (the given line's repeats, which the written line mirrors) left free.
function locksFor(written, position) {
  if (!locksFollowShown()) return null;
  const given = [...givenLine(shown)];
  const chars = [...written];
  const boxes = [...$("locks").querySelectorAll("input")];
  if (boxes.length !== chars.length) return null;
  const values = boxes.map((input, i) => {
    const value = input.disabled ? "" : input.value.trim();
    return value && value === chars[i] && given[i] !== given[position] ? value : "_";
  });
  return values.some((v) => v !== "_") ? values.join("") : null;
}

// Clicking a character of a candidate lists the best characters for that place, the rest of the
// line kept and every rule with it (POST /api/v1/alternatives); choosing one replaces it (and its
// repeats) in the candidate, and the lock boxes of those places take it. The first button keeps
// the old click: lock the character as it is.
async function showAlternatives(item, candidate, position) {
  if (!shown) return;
  const old = item.querySelector(".alternatives");
  if (old) old.remove();
  const box = el("div", "alternatives");
  box.setAttribute("role", "group");
  const ch = [...candidate.text][position];
  box.setAttribute("aria-label", `${sides(shownDirection()).written}第 ${position + 1} 字「${ch}」可换的字`);
  const lock = el("button", "alt-lock", `锁定「${ch}」`);
  lock.type = "button";
  lock.addEventListener("click", () => {
    lockAt(position, ch);
    box.remove();
  });
  const close = el("button", "alt-close", "×");
  close.type = "button";
  close.setAttribute("aria-label", "关闭");
  close.addEventListener("click", () => box.remove());
  box.addEventListener("keydown", (event) => {
    if (event.key === "Escape") box.remove();
  });
  const list = el("ol", "alt-list");
  const status = el("span", "alt-status", "正在找可换的字……");
  box.append(el("span", "alt-title", `第 ${position + 1} 字可换：`), lock, close, status, list);
  item.querySelector(".line").after(box);
  lock.focus();
  // in 下联求上联 the candidate is the upper line, and ``position`` is in it
  const body = { ...couplet(candidate.text), position, n: 8, tone_mode: asked.tone_mode, direction: shownDirection() };
  const locks = locksFor(candidate.text, position);
  if (locks) body.locks = locks;
  if (asked.required_first) body.required_first = asked.required_first;
  if (asked.required_chars) body.required_chars = asked.required_chars;
  let found;
  try {
    found = await api("/api/v1/alternatives", body);
  } catch (error) {
    status.textContent = error.message;
    return;
  }
  if (!box.isConnected) return; // closed, or another character clicked meanwhile
  const own = found.alternatives.find((a) => a.original);
  status.textContent = found.positions.length > 1 ? `（叠字：第 ${found.positions.map((p) => p + 1).join("、")} 字一起换）` : "";
  for (const alt of found.alternatives) {
    const entry = el("li", "alt" + (alt.original ? " own" : ""));
    const button = el("button", "alt-choice");
    button.type = "button";
    const change = own ? alt.rank_score - own.rank_score : null;
    const tone = alt.tones[position] || "";
    button.append(el("span", "mark tone-" + ({ 平: "level", 仄: "oblique", 中: "either" }[tone] || "none"), tone || "\u00a0"));
    button.append(el("span", "char", alt.char));
    const delta = alt.original ? "原字" : change === null ? alt.rank_score.toFixed(2) : (change >= 0 ? "+" : "") + change.toFixed(2);
    button.append(el("span", "alt-score", delta));
    button.title = `${alt.text}（得分 ${alt.rank_score.toFixed(2)}）`;
    button.setAttribute("aria-label", `换成「${alt.char}」：${alt.text}`);
    button.addEventListener("click", () => chooseAlternative(item, candidate, found, alt, own));
    entry.append(button);
    list.append(entry);
  }
  announce(`第 ${position + 1} 字有 ${found.alternatives.length} 个可选的字`);
}

function chooseAlternative(item, candidate, found, alt, own) {
  // the line's 得分 moves by what the character changes in the search's score of the whole line
  const change = own ? alt.rank_score - own.rank_score : 0;
  const scoreChange = own ? alt.score - own.score : 0;
  Object.assign(candidate, {
    text: alt.text,
    tones: alt.tones,
    report: alt.report,
    rank_score: candidate.rank_score + change,
    score: candidate.score + scoreChange,
  });
  const boxes = locksFollowShown() ? $("locks").querySelectorAll("input") : [];
  for (const p of found.positions) {
    const input = boxes[p];
    if (input && !input.disabled) input.value = alt.char;
  }
  const fresh = candidateView(candidate);
  item.replaceWith(fresh);
  const cell = fresh.querySelectorAll("button.ch")[found.position];
  if (cell) cell.focus();
  const { written } = sides(shownDirection());
  announce(`已把${written}第 ${found.positions.map((p) => p + 1).join("、")} 字换成「${alt.char}」并锁定`);
}

function reportView(report) {
  const list = el("ul", "report");
  for (const [key, label] of rules(shownDirection())) {
    const value = report[key];
    const state = value === true ? "ok" : value === false ? "bad" : "unknown";
    list.append(el("li", "rule " + state, (state === "ok" ? "✓ " : state === "bad" ? "✗ " : "? ") + label));
  }
  if (report.rhythm !== null && report.rhythm !== undefined) {
    list.append(el("li", "rule info", `节奏点平仄相反 ${Math.round(report.rhythm * 100)}%`));
  }
  return list;
}

async function vote(item, candidate, value) {
  const status = item.querySelector(".vote-status");
  const buttons = item.querySelectorAll(".vote");
  if ([...buttons].some((button) => button.disabled)) return; // one vote per candidate
  buttons.forEach((button) => (button.disabled = true)); // until the answer: no second vote in flight
  try {
    const saved = await api("/api/v1/feedback", {
      kind: "vote",
      ...couplet(candidate.text), // the couplet upper line first, in either direction
      vote: value,
      model_version: shown.model_version,
    });
    status.textContent = `已记录（编号 ${saved.id}）`;
  } catch (error) {
    status.textContent = error.message;
    buttons.forEach((button) => (button.disabled = false)); // not stored: may be sent again
  }
}

// The 横批 the server ranked for this couplet, each with its tone marks; one click draws the
// 春联 with it.
function bannersView(candidate) {
  const box = el("div", "banners");
  box.append(el("span", "banners-label", "横批"));
  for (const banner of candidate.banners) {
    const button = el("button", "banner");
    button.type = "button";
    button.title = `以「${banner.text}」为横批画春联（契合度 ${banner.score.toFixed(2)}）`;
    button.setAttribute("aria-label", `横批「${banner.text}」，画成春联`);
    const line = lineView(banner.text, banner.tones);
    line.className = "banner-line"; // not a candidate's .line: its characters are no lower line
    button.append(line);
    button.addEventListener("click", () => {
      $("banner").value = banner.text;
      showScroll(candidate.text);
    });
    box.append(button);
  }
  return box;
}

function candidateView(candidate) {
  const item = el("li", "candidate");
  const name = sides(shownDirection()).written;
  item.append(lineView(candidate.text, candidate.tones, (i) => showAlternatives(item, candidate, i), name));
  const score = el("span", "score", `得分 ${candidate.rank_score.toFixed(2)}`);
  // The order's score (model, tagger and tone preferences together); the model's own in the tooltip.
  score.title = `排序得分（每字）；模型自身的对数概率 ${candidate.score.toFixed(2)}`;
  item.append(score);
  item.append(reportView(candidate.report));
  const votes = el("div", "votes");
  const up = el("button", "vote up", "好");
  const down = el("button", "vote down", "不好");
  up.type = down.type = "button";
  up.addEventListener("click", () => vote(item, candidate, 1));
  down.addEventListener("click", () => vote(item, candidate, -1));
  const status = el("span", "vote-status");
  status.setAttribute("role", "status");
  const toScroll = el("button", "to-scroll", "春联");
  toScroll.type = "button";
  toScroll.title = "画成春联，可下载打印";
  toScroll.addEventListener("click", () => {
    const best = candidate.banners && candidate.banners[0];
    if (best && !$("banner").value.trim()) $("banner").value = best.text;
    showScroll(candidate.text);
  });
  votes.append(up, down, toScroll, status);
  item.append(votes);
  if (candidate.banners && candidate.banners.length) item.append(bannersView(candidate));
  return item;
}

// The hint that the given line reads like the other side (an upper line ending 平, a lower line
// ending 仄), with a button that asks again the other way round.
function showReversed(answer) {
  const reverse = answer.direction === REVERSE;
  $("reversed-text").textContent = reverse
    ? "这一句以仄声收尾，像是上联；下联通常以平声收尾。"
    : "这一句以平声收尾，像是下联；上联通常以仄声收尾。";
  const button = $("reversed-switch");
  button.textContent = reverse ? "为它对下联 / Write lower lines for it" : "为它对上联 / Write upper lines for it";
  button.hidden = !reverse && !reverseModel; // upper lines only from a bundle with a reverse model
  $("reversed").hidden = !(answer.reads_reversed ?? answer.upper_ends_level);
}

function render(answer) {
  shown = answer;
  const { given, written } = sides(shownDirection());
  $("shown-label").textContent = given;
  $("upper-shown").replaceWith(Object.assign(lineView(givenLine(answer), givenTones(answer)), { id: "upper-shown" }));
  const badge = $("badge");
  if (answer.in_training_set) {
    badge.textContent = answer.known_lower_lines.length
      ? `训练集中有这句上联，原下联：${answer.known_lower_lines.join(" ／ ")}`
      : "训练集中有这句上联";
    badge.hidden = false;
  } else {
    badge.hidden = true;
  }
  showReversed(answer);
  $("unknown").textContent = answer.unknown_chars.length ? `模型不认识这些字：${answer.unknown_chars.join("")}` : "";
  $("unknown").hidden = !answer.unknown_chars.length;
  $("candidates-label").textContent = `${written}候选`;
  $("candidates").replaceChildren(...answer.candidates.map(candidateView));
  $("none").textContent = `没有合适的${written}。`;
  $("none").hidden = answer.candidates.length > 0;
  $("own-label").textContent = `我来对${written}`;
  $("own-lower").placeholder = `写下你自己的${written}`;
  $("own-result").hidden = true;
  $("scroll-box").hidden = true; // the picture was of the last answer's couplet
  drawnScroll = null;
  $("result").hidden = false;
  announce(answer.candidates.length ? `得到 ${answer.candidates.length} 条${written}` : `没有合适的${written}`);
}

async function ask(event) {
  event.preventDefault();
  showError("");
  $("busy").hidden = false;
  $("go").disabled = true;
  try {
    const direction = chosenDirection();
    const line = $("upper").value; // the given line: an upper line, or a lower line in 下联求上联
    const body = direction === REVERSE ? { lower: line, direction } : { upper: line };
    Object.assign(body, { n: Number($("n").value), tone_mode: $("tone-mode").value });
    const locks = lockPattern();
    if (locks) body.locks = locks;
    if ($("required-first").value.trim()) body.required_first = $("required-first").value;
    if ($("required-chars").value.trim()) body.required_chars = $("required-chars").value;
    if ($("fast").checked) body.fast = true;
    if ($("diverse").checked) body.diverse = true;
    // the register, where the model writes in several (GET /api/v1/model); the reverse model has none
    if (!$("register-label").hidden && direction !== REVERSE) body.register = $("register").value;
    const answer = await api("/api/v1/generate", body);
    asked = body;
    render(answer);
  } catch (error) {
    // The last answer goes: feedback given below it would be stored against a line the
    // input no longer shows
    shown = null;
    $("result").hidden = true;
    showError(error.message);
  } finally {
    $("busy").hidden = true;
    $("go").disabled = false;
  }
}

// The 春联: the server draws it (GET /api/v1/scroll.svg, one drawing for the page and for
// anyone embedding it); the page shows that SVG inline and makes the PNG from it.
async function showScroll(written) {
  if (!shown) return;
  const at = shown;
  const { upper, lower } = couplet(written); // the upper line on the right strip, in either direction
  const params = new URLSearchParams({ upper, lower, order: $("banner-order").value });
  const banner = $("banner").value.trim();
  if (banner) params.set("banner", banner);
  $("scroll-box").hidden = false;
  $("scroll-error").hidden = true;
  try {
    const response = await send("/api/v1/scroll.svg?" + params);
    if (!response.ok) throw await refusal(response);
    const svg = await response.text();
    const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
    const root = doc.documentElement;
    if (root.localName !== "svg" || doc.querySelector("parsererror")) {
      throw new Error("春联图片无法读取 / The picture could not be read");
    }
    if (shown !== at) return; // a newer answer came meanwhile
    $("scroll").replaceChildren(document.importNode(root, true));
    drawnScroll = { written, upper, svg };
    $("download-status").textContent = "";
    announce("春联已画好");
  } catch (error) {
    $("scroll-error").textContent = error.message;
    $("scroll-error").hidden = false;
  }
  $("scroll-box").scrollIntoView({ block: "nearest" });
}

function redrawScroll() {
  if (drawnScroll) showScroll(drawnScroll.written);
}

function save(blob, name) {
  const link = el("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60000);
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// The canvas writes no resolution: a pHYs chunk after IHDR tells printing programs the dpi.
async function withDpi(blob, dpi) {
  const png = new Uint8Array(await blob.arrayBuffer());
  if (String.fromCharCode(...png.subarray(12, 16)) !== "IHDR") return blob;
  const chunk = new Uint8Array(21);
  const view = new DataView(chunk.buffer);
  const perMetre = Math.round(dpi / 0.0254);
  view.setUint32(0, 9);
  chunk.set([0x70, 0x48, 0x59, 0x73], 4); // "pHYs"
  view.setUint32(8, perMetre);
  view.setUint32(12, perMetre);
  chunk[16] = 1; // the unit is the metre
  view.setUint32(17, crc32(chunk.subarray(4, 17)));
  return new Blob([png.subarray(0, 33), chunk, png.subarray(33)], { type: "image/png" });
}

// The PNG at print size: the server's SVG drawn on a canvas of (size in mm / 25.4 × dpi) pixels.
async function pngOf(svg) {
  const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
  const root = doc.documentElement;
  const dpi = Number(root.getAttribute("data-print-dpi")) || 300;
  const width = Math.round((Number(root.getAttribute("data-width-mm")) / 25.4) * dpi);
  const height = Math.round((Number(root.getAttribute("data-height-mm")) / 25.4) * dpi);
  root.setAttribute("width", width);
  root.setAttribute("height", height);
  // a data: URL, not a blob: one: the page's Content-Security-Policy allows images from data:
  const url = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(new XMLSerializer().serializeToString(doc));
  const canvas = document.createElement("canvas");
  try {
    const image = new Image();
    image.src = url;
    await image.decode();
    canvas.width = width;
    canvas.height = height;
    canvas.getContext("2d").drawImage(image, 0, 0, width, height);
    const png = await new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
    if (!png) throw new Error("图片太大，浏览器无法生成 PNG / The browser could not make a PNG this large");
    return { blob: await withDpi(png, dpi), width, height, dpi };
  } finally {
    canvas.width = canvas.height = 0; // hands the pixels back at once
  }
}

function scrollName(ext) {
  return `春联-${drawnScroll ? drawnScroll.upper.replace(/[\p{P}\p{S}\s]/gu, "") : "duilian"}.${ext}`;
}

function downloadSvg() {
  if (!drawnScroll) return;
  save(new Blob([drawnScroll.svg], { type: "image/svg+xml" }), scrollName("svg"));
}

async function downloadPng() {
  const button = $("download-png");
  if (!drawnScroll || button.disabled) return;
  button.disabled = true;
  $("download-status").textContent = "正在生成 PNG……";
  try {
    const png = await pngOf(drawnScroll.svg);
    save(png.blob, scrollName("png"));
    $("download-status").textContent = `PNG 已生成：${png.width} × ${png.height} 像素，${png.dpi} dpi`;
  } catch (error) {
    $("download-status").textContent = error.message || "PNG 生成失败 / The PNG could not be made";
  } finally {
    button.disabled = false;
  }
}

async function submitOwn(event) {
  event.preventDefault();
  const result = $("own-result");
  const button = $("own").querySelector("button[type=submit]");
  if (!shown || button.disabled) return;
  button.disabled = true; // no second copy while the first is in flight
  try {
    // one's own line is the written side: the lower line, or the upper line in 下联求上联
    const saved = await api("/api/v1/feedback", { kind: "own", ...couplet($("own-lower").value) });
    const broken = rules(shownDirection()).filter(([key]) => saved.report[key] === false).map(([, label]) => label);
    result.textContent = `已收到（编号 ${saved.id}）。` + (broken.length ? `不合规则：${broken.join("、")}` : "合乎基本规则，谢谢！");
  } catch (error) {
    result.textContent = error.message;
  } finally {
    button.disabled = false;
  }
  result.hidden = false;
}

// The form's labels follow the direction chosen; the lock boxes are for the written line, so a
// new direction empties them.
function directionChanged() {
  const direction = chosenDirection();
  const { given, written } = sides(direction);
  $("given-label").textContent = given;
  $("upper").placeholder = direction === REVERSE ? "例如：家和万事兴" : "例如：春风得意花千里";
  $("go").textContent = `对${written}`;
  $("locks-label").textContent = `锁定${written}的字（在格子里填字，留空不锁）`;
  $("busy").textContent = `正在对${written}……`;
  $("locks").querySelectorAll("input").forEach((input) => {
    if (!input.disabled) input.value = "";
  });
  rebuildLocks();
}

// The hint's button: the line on show asked again the other way round.
function switchDirection() {
  if (!shown) return;
  const to = shownDirection() === REVERSE ? FORWARD : REVERSE;
  $("upper").value = givenLine(shown);
  $(to === REVERSE ? "direction-reverse" : "direction-forward").checked = true;
  directionChanged();
  announce(to === REVERSE ? "已改为下联求上联" : "已改为上联求下联");
  $("ask").requestSubmit();
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask").addEventListener("submit", ask);
  $("direction-forward").addEventListener("change", directionChanged);
  $("direction-reverse").addEventListener("change", directionChanged);
  $("reversed-switch").addEventListener("click", switchDirection);
  $("own").addEventListener("submit", submitOwn);
  $("upper").addEventListener("input", rebuildLocks);
  $("banner").addEventListener("change", redrawScroll);
  $("banner-order").addEventListener("change", redrawScroll);
  $("download-svg").addEventListener("click", downloadSvg);
  $("download-png").addEventListener("click", downloadPng);
  api("/api/v1/model")
    .then((info) => {
      $("model-version").textContent = `模型 ${info.version}`;
      $("fast-label").hidden = !info.fast_mode; // offered only when the model has a proposer
      const registers = info.registers || ["general"];
      $("register-label").hidden = registers.length < 2; // offered only when the model has registers
      for (const option of $("register").options) option.hidden = !registers.includes(option.value);
      reverseModel = Boolean(info.reverse_model); // 下联求上联 offered only when the bundle can
      $("direction").hidden = !reverseModel;
      $("lead-reverse").hidden = !reverseModel;
      if (!reverseModel && chosenDirection() === REVERSE) {
        $("direction-forward").checked = true;
        directionChanged();
      }
      if (shown) showReversed(shown); // an answer that came first: its switch button now
    })
    .catch(() => {});
});
