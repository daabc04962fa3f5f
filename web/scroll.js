// The 春联 picture of a couplet and its SVG and PNG downloads (loaded after app.js, whose state
// and helpers it uses: shown, couplet).
"use strict";

let drawnScroll = null; // the 春联 on show: { written, upper, svg } (svg: the server's SVG text)

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
// A new answer: the picture was of the last answer's couplet.
function hideScroll() {
  $("scroll-box").hidden = true;
  drawnScroll = null;
}

document.addEventListener("DOMContentLoaded", () => {
  $("banner").addEventListener("change", redrawScroll);
  $("banner-order").addEventListener("change", redrawScroll);
  $("download-svg").addEventListener("click", downloadSvg);
  $("download-png").addEventListener("click", downloadPng);
});
