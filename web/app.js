// The couplet page. Every piece of user or model text goes in through textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let shown = null; // the last answer of /api/v1/generate
// a character the server mirrors from the upper line (punctuation, symbols): no lock box
const PUNCTUATION = /[\p{P}\p{S}]/u;

const RULES = [
  ["length", "字数相等"],
  ["punctuation", "标点相对"],
  ["repeats", "叠字相对"],
  ["no_reuse", "不重上联字"],
  ["tone_end", "仄起平收"],
  ["no_three_level_tail", "无三平尾"],
];

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

async function api(path, body) {
  let response;
  try {
    response = await fetch(path, {
      method: body === undefined ? "GET" : "POST",
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (_) {
    // fetch rejects only when no answer came (server down, network gone): the browser's own
    // English text ("Failed to fetch") says nothing to the reader
    throw new Error("无法连接服务器，请稍后再试 / Cannot reach the server; try again later");
  }
  let data = null;
  try {
    data = await response.json();
  } catch (_) {
    data = null;
  }
  if (!response.ok) {
    const detail = data && data.detail;
    throw new Error(typeof detail === "string" ? detail : `出错了 / Error ${response.status}`);
  }
  return data;
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

// A line as characters, each with its tone mark (平/仄/中) above it.
function lineView(text, tones, onPick) {
  const line = el("span", "line");
  if (onPick) {
    line.setAttribute("role", "group");
    line.setAttribute("aria-label", `下联 ${text}（方向键选字，回车锁定）`);
    rovingFocus(line);
  }
  [...text].forEach((ch, i) => {
    const cell = el(onPick ? "button" : "span", "ch");
    if (onPick) {
      cell.type = "button";
      cell.tabIndex = i === 0 ? 0 : -1;
      cell.title = "锁定这个字";
      cell.setAttribute("aria-label", `锁定「${ch}」为下联第 ${i + 1} 字`);
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

function rebuildLocks() {
  const chars = upperChars().slice(0, 32);
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
    input.setAttribute("aria-label", `下联第 ${i + 1} 字（对上联「${ch}」）`);
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
  if (!input || input.disabled) return;
  input.value = input.value === ch ? "" : ch;
  announce(input.value ? `已锁定下联第 ${position + 1} 字「${ch}」` : `已解锁下联第 ${position + 1} 字`);
}

function reportView(report) {
  const list = el("ul", "report");
  for (const [key, label] of RULES) {
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
      upper: shown.upper,
      lower: candidate.text,
      vote: value,
      model_version: shown.model_version,
    });
    status.textContent = `已记录（编号 ${saved.id}）`;
  } catch (error) {
    status.textContent = error.message;
    buttons.forEach((button) => (button.disabled = false)); // not stored: may be sent again
  }
}

function candidateView(candidate) {
  const item = el("li", "candidate");
  item.append(lineView(candidate.text, candidate.tones, lockAt));
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
  votes.append(up, down, status);
  item.append(votes);
  return item;
}

function render(answer) {
  shown = answer;
  $("upper-shown").replaceWith(Object.assign(lineView(answer.upper, answer.upper_tones), { id: "upper-shown" }));
  const badge = $("badge");
  if (answer.in_training_set) {
    badge.textContent = answer.known_lower_lines.length
      ? `训练集中有这句上联，原下联：${answer.known_lower_lines.join(" ／ ")}`
      : "训练集中有这句上联";
    badge.hidden = false;
  } else {
    badge.hidden = true;
  }
  $("reversed").hidden = !answer.upper_ends_level;
  $("unknown").textContent = answer.unknown_chars.length ? `模型不认识这些字：${answer.unknown_chars.join("")}` : "";
  $("unknown").hidden = !answer.unknown_chars.length;
  $("candidates").replaceChildren(...answer.candidates.map(candidateView));
  $("none").hidden = answer.candidates.length > 0;
  $("own-result").hidden = true;
  $("result").hidden = false;
  announce(answer.candidates.length ? `得到 ${answer.candidates.length} 条下联` : "没有合适的下联");
}

async function ask(event) {
  event.preventDefault();
  showError("");
  $("busy").hidden = false;
  $("go").disabled = true;
  try {
    const body = { upper: $("upper").value, n: Number($("n").value), tone_mode: $("tone-mode").value };
    const locks = lockPattern();
    if (locks) body.locks = locks;
    if ($("required-first").value.trim()) body.required_first = $("required-first").value;
    if ($("required-chars").value.trim()) body.required_chars = $("required-chars").value;
    if ($("fast").checked) body.fast = true;
    if ($("diverse").checked) body.diverse = true;
    render(await api("/api/v1/generate", body));
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

async function submitOwn(event) {
  event.preventDefault();
  const result = $("own-result");
  const button = $("own").querySelector("button[type=submit]");
  if (!shown || button.disabled) return;
  button.disabled = true; // no second copy while the first is in flight
  try {
    const saved = await api("/api/v1/feedback", { kind: "own", upper: shown.upper, lower: $("own-lower").value });
    const broken = RULES.filter(([key]) => saved.report[key] === false).map(([, label]) => label);
    result.textContent = `已收到（编号 ${saved.id}）。` + (broken.length ? `不合规则：${broken.join("、")}` : "合乎基本规则，谢谢！");
  } catch (error) {
    result.textContent = error.message;
  } finally {
    button.disabled = false;
  }
  result.hidden = false;
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask").addEventListener("submit", ask);
  $("own").addEventListener("submit", submitOwn);
  $("upper").addEventListener("input", rebuildLocks);
  api("/api/v1/model")
    .then((info) => {
      $("model-version").textContent = `模型 ${info.version}`;
      $("fast-label").hidden = !info.fast_mode; // offered only when the model has a proposer
    })
    .catch(() => {});
});
