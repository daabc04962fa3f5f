// The 藏头联 mode: a whole couplet (上联, 下联, 横批) from a name or a few characters, by POST
// /api/v1/compose, its hidden characters marked (loaded after view.js and api.js, whose helpers it
// uses: $, el, showError, announce, lineView, checkRulesView, api). The mode is offered where the
// model can compose (GET /api/v1/model's reverse_model, which app.js passes on as "duilian:model").
// POST /compose takes no register (语体), so none is offered here. Every piece of text goes in
// through textContent.
"use strict";

const MAX_NAME = 4; // the characters a name may have here (the API takes 2, or one a clause)
const CLAUSE_MARK = "，"; // between the clauses of a composed line (duilian/compose_seeds.py MARK)
// The lengths offered: a line's characters for a head of 2 (or 嵌字 of 1 or 3), clause lengths for
// a head of 4 (the upper line's two clauses begin with the first two, the lower's with the last two).
const LINE_LENGTHS = [["5", "五言"], ["7", "七言"], ["9", "九言"], ["11", "十一言"]];
const CLAUSE_LENGTHS = [["4,4", "四、四"], ["4,7", "四、七"], ["5,5", "五、五"], ["5,7", "五、七"], ["7,7", "七、七"]];

let composed = null; // the request of the couplets on show (换一批 asks it again with another seed)
let composeAsked = 0; // each request's number: an answer that is not the latest is dropped

function nameChars() {
  return [...$("compose-name").value.replace(/\s+/g, "")];
}

// The length choices follow the name: clause patterns for 4 characters, line lengths otherwise;
// a choice that still fits is kept.
function lengthsFor(count) {
  return count === 4 ? CLAUSE_LENGTHS : LINE_LENGTHS;
}

function updateLengths() {
  const select = $("compose-length");
  const choices = lengthsFor(nameChars().length);
  if ([...select.options].map((o) => o.value).join("|") === choices.map(([v]) => v).join("|")) return;
  const old = select.value;
  select.replaceChildren(...choices.map(([value, text]) => Object.assign(el("option", "", text), { value })));
  const keep = choices.some(([v]) => v === old);
  select.value = keep ? old : choices === CLAUSE_LENGTHS ? "4,7" : "7";
  $("compose-length-label").firstChild.textContent = choices === CLAUSE_LENGTHS ? "每联两个分句，字数 " : "每联字数 ";
}

// The request for the name typed: 2 or 4 characters are a head (藏头), 1 or 3 are placed in the lines
// (嵌字: the 1st and 3rd in the upper line, the 2nd in the lower), as the API takes them.
function composeBody(chars) {
  const text = chars.join("");
  const length = $("compose-length").value;
  const body = chars.length % 2 === 0 ? { head: text } : { keywords: text };
  return Object.assign(body, {
    length: length.includes(",") ? length : Number(length),
    n: Number($("compose-n").value),
    tone_mode: $("compose-tone-mode").value,
    seed: 0,
  });
}

// The places of the hidden characters in one line of a composed couplet: ``heads`` at the line's
// start (one head) or at its clauses' starts (one a clause), ``words`` (嵌字) where the line holds
// them. A map of position to "藏头" or "嵌字"; a character not found where it should be is not marked.
function hiddenPlaces(line, heads, words) {
  const chars = [...line];
  const starts = chars.flatMap((ch, i) => (i === 0 || chars[i - 1] === CLAUSE_MARK ? [i] : []));
  const at = heads.length === 1 ? [0] : starts;
  const places = new Map();
  [...heads].forEach((ch, k) => {
    if (chars[at[k]] === ch) places.set(at[k], "藏头");
  });
  for (const ch of words) {
    const i = chars.indexOf(ch);
    if (i >= 0 && !places.has(i)) places.set(i, "嵌字");
  }
  return places;
}

// One line of a couplet with its tone marks, the hidden characters marked (and said, in ``notes``).
function composedLine(side, text, tones, places, notes) {
  const row = el("div", "couplet-line");
  const line = lineView(text, tones);
  const chars = [...text];
  [...line.children].forEach((cell, i) => {
    if (!places.has(i)) return;
    cell.classList.add("hidden-char");
    cell.title = places.get(i);
    notes.push(`${side}第 ${i + 1} 字「${chars[i]}」`);
  });
  row.append(el("span", "couplet-side", side), line);
  return row;
}

function coupletView(couplet, answer) {
  const item = el("li", "candidate couplet");
  const upperHeads = answer.head.slice(0, answer.head.length / 2);
  const lowerHeads = answer.head.slice(answer.head.length / 2);
  const words = [...answer.keywords];
  const notes = [];
  const check = couplet.check;
  const upperPlaces = hiddenPlaces(couplet.upper, upperHeads, words.filter((_, i) => i % 2 === 0));
  const lowerPlaces = hiddenPlaces(couplet.lower, lowerHeads, words.filter((_, i) => i % 2 === 1));
  const upper = composedLine("上联", couplet.upper, check.upper_tones, upperPlaces, notes);
  const lower = composedLine("下联", couplet.lower, check.lower_tones, lowerPlaces, notes);
  upper.classList.add("couplet-upper");
  lower.classList.add("couplet-lower");
  item.append(upper, lower);
  if (couplet.banner) {
    const banner = el("div", "couplet-line couplet-banner");
    banner.append(el("span", "couplet-side", "横批"), el("span", "banner-text", couplet.banner));
    item.append(banner);
  }
  const kind = answer.head ? "藏头" : "嵌字";
  item.append(el("p", "hint hidden-note", notes.length ? `${kind}：${notes.join("，")}` : ""));
  const score = el("span", "score", `得分 ${couplet.score.toFixed(2)}`);
  score.title = "上联与下联的搜索得分（每字）之和；越接近 0 越好";
  item.append(score, checkRulesView(check.rules));
  return item;
}

function renderComposed(answer) {
  const count = answer.couplets.length;
  $("couplets").replaceChildren(...answer.couplets.map((c) => coupletView(c, answer)));
  $("couplets-label").textContent = `${answer.head || answer.keywords}：${answer.pattern} 字`;
  $("compose-none").textContent = count
    ? ""
    : "没有写出合乎全部规则（字数、平仄、不重字）的对联：换个字数，或点“换一批”再试。";
  $("compose-none").hidden = count > 0;
  $("compose-result").hidden = false;
  announce(count ? `写好了 ${count} 副对联` : "没有写出合乎规则的对联");
}

async function runCompose(body) {
  const number = ++composeAsked;
  const name = body.head || body.keywords;
  showError("", "compose-error");
  $("compose-busy").textContent = `正在为「${name}」写 ${body.length} 字的对联：先起草上联，再对下联，要几秒钟……`;
  $("compose-busy").hidden = false;
  $("compose-go").disabled = $("compose-more").disabled = true;
  try {
    const answer = await api("/api/v1/compose", body);
    if (number !== composeAsked) return;
    composed = body;
    renderComposed(answer);
  } catch (error) {
    if (number !== composeAsked) return;
    composed = null;
    $("compose-result").hidden = true;
    showError(error.message, "compose-error");
  } finally {
    if (number === composeAsked) {
      $("compose-busy").hidden = true;
      $("compose-go").disabled = $("compose-more").disabled = false;
    }
  }
}

function submitCompose(event) {
  event.preventDefault();
  const chars = nameChars();
  if (chars.length > MAX_NAME) {
    composeAsked++; // an answer still in flight is not shown over the refusal
    $("compose-result").hidden = true;
    showError(`最多 ${MAX_NAME} 个字：${chars.join("")} / At most ${MAX_NAME} characters: ${chars.join("")}`, "compose-error");
    return;
  }
  runCompose(composeBody(chars));
}

// 换一批: the same request with the next seed, other couplets.
function composeMore() {
  if (composed) runCompose({ ...composed, seed: composed.seed + 1 });
}

// The two modes: 对下联 (the form above, the default) and 藏头联; each keeps what it shows.
function modeChanged() {
  const compose = $("mode-compose").checked;
  $("answer-mode").hidden = compose;
  $("compose-mode").hidden = !compose;
  announce(compose ? "已改为藏头联：输入名字，写一副对联" : "已改为对下联");
}

document.addEventListener("DOMContentLoaded", () => {
  updateLengths();
  $("compose").addEventListener("submit", submitCompose);
  $("compose-name").addEventListener("input", updateLengths);
  $("compose-more").addEventListener("click", composeMore);
  $("mode-answer").addEventListener("change", modeChanged);
  $("mode-compose").addEventListener("change", modeChanged);
  document.addEventListener("duilian:model", (event) => {
    const can = Boolean(event.detail.reverse_model); // the upper lines are drafted by the reverse model
    $("mode").hidden = !can;
    $("lead-compose").hidden = !can;
    if (!can && $("mode-compose").checked) {
      $("mode-answer").checked = true;
      modeChanged();
    }
  });
});
