// The API's calls: every answer that is not 2xx becomes an Error whose message is the server's
// bilingual detail ("中文 / English"), which the page shows as it is.
"use strict";

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
