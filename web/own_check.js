// The check of one's own line on the page (loaded after view.js, api.js and app.js, whose helpers it
// uses: $, el, api, lineView, checkRulesView, couplet, announce, shown, asked). Every piece of text
// goes in through textContent.
"use strict";

// ---- the check of one's own line (POST /api/v1/check) -----------------------------------------
// While a person writes their own line in the "我来对下联" box, the couplet it makes is checked
// (after a pause in typing): each character's tone, red where a rule is broken, each rule kept or
// broken, and the check's suggestions; one click puts a suggested character into the box and
// checks again. Suggestions are for a lower line, so in 下联求上联 only the marks and rules show.

const OWN_CHECK_PAUSE_MS = 400;
let ownCheckTimer = null;
let ownCheckAsked = 0; // each check's number: an answer that is not the latest is dropped

function scheduleOwnCheck() {
  clearTimeout(ownCheckTimer);
  ownCheckTimer = setTimeout(checkOwn, OWN_CHECK_PAUSE_MS);
}

async function checkOwn() {
  clearTimeout(ownCheckTimer);
  const line = $("own-lower").value.trim();
  const number = ++ownCheckAsked;
  if (!shown || !line) {
    $("own-check").hidden = true;
    return;
  }
  const reverse = shownDirection() === REVERSE;
  const body = { ...couplet(line), tone_mode: (asked && asked.tone_mode) || "modern", suggest: !reverse };
  try {
    const report = await api("/api/v1/check", body);
    if (number === ownCheckAsked) renderOwnCheck(report, reverse);
  } catch (error) {
    if (number !== ownCheckAsked) return;
    $("own-marks").replaceChildren();
    $("own-rules").replaceChildren();
    $("own-suggestions").replaceChildren();
    $("own-check-note").textContent = error.message;
    $("own-check").hidden = false;
  }
}

function renderOwnCheck(report, reverse) {
  const written = reverse ? report.upper : report.lower;
  const tones = reverse ? report.upper_tones : report.lower_tones;
  const broken = new Map(); // position -> the labels of the rules broken there
  for (const rule of report.rules) {
    if (rule.kept !== false) continue;
    for (const p of rule.positions) broken.set(p, [...(broken.get(p) || []), rule.label]);
  }
  const marks = lineView(written, tones);
  marks.id = "own-marks";
  [...marks.children].forEach((cell, i) => {
    if (!broken.has(i)) return;
    cell.classList.add("broken");
    cell.title = `不合：${broken.get(i).join("、")}`;
    cell.setAttribute("aria-label", `第 ${i + 1} 字「${written[i]}」不合：${broken.get(i).join("、")}`);
  });
  $("own-marks").replaceWith(marks);
  $("own-rules").replaceWith(checkRulesView(report.rules, "own-rules"));
  const labels = Object.fromEntries(report.rules.map((rule) => [rule.name, rule.label]));
  labels.pair = "词对";
  const s = report.suggestions;
  $("own-suggestions").replaceChildren(...s.items.map((item) => ownSuggestionView(item, labels)));
  $("own-check-note").textContent = reverse ? "改字建议只给下联。" : s.items.length ? "" : s.reason || "";
  $("own-check").hidden = false;
}

function ownSuggestionView(item, labels) {
  const entry = el("li", "own-suggestion");
  entry.dataset.position = String(item.position);
  const weak = item.weakness.map((w) => labels[w] || w).join("、");
  entry.append(el("span", "", `第 ${item.position + 1} 字「${item.current}」（${weak}）：`));
  if (!item.replacements.length) entry.append(el("span", "hint", item.note || ""));
  for (const rep of item.replacements) {
    const mends = rep.mends.map((m) => labels[m] || m).join("、");
    const button = el("button", "apply", `换成「${rep.char}」`);
    button.type = "button";
    button.title = `补救：${mends}；换后：${rep.text}`;
    button.setAttribute("aria-label", `第 ${item.position + 1} 字换成「${rep.char}」，补救${mends}`);
    button.addEventListener("click", () => applySuggestion(rep));
    entry.append(button);
  }
  return entry;
}

function applySuggestion(rep) {
  $("own-lower").value = rep.text;
  announce(`已换上「${rep.char}」：${rep.text}`);
  checkOwn();
}

document.addEventListener("DOMContentLoaded", () => {
  $("own-lower").addEventListener("input", scheduleOwnCheck);
  // a new answer: the box's check was of the last one's couplet
  $("ask").addEventListener("submit", () => {
    ownCheckAsked++;
    $("own-check").hidden = true;
  });
});
