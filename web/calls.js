// Brisk call records page: /api/calls (newest first, paged) and /api/calls/{id} (the turns and
// each turn's latency waterfall, and the recording from /api/calls/{id}/audio when one is kept). The operator key, when the server asks for one, is kept in
// this tab's sessionStorage only. Plain script, no build step.
"use strict";

(() => {
  const PAGE = 25;
  const STAGES = [
    ["vad_stop", "VAD stop"],
    ["stt_final", "final transcript"],
    ["turn_end", "turn end"],
    ["llm_request", "LLM request"],
    ["llm_first_token", "LLM first token"],
    ["tts_first_text", "TTS first text"],
    ["tts_first_audio", "TTS first audio"],
    ["first_audio_out", "voice-to-voice"],
  ];
  const ui = {
    form: document.getElementById("key-form"),
    key: document.getElementById("operator-key"),
    status: document.getElementById("calls-status"),
    rows: document.querySelector("#calls tbody"),
    more: document.getElementById("more"),
    panel: document.getElementById("call-panel"),
    summary: document.getElementById("call-summary"),
    turns: document.getElementById("call-turns"),
    audio: document.getElementById("call-audio"),
  };
  let next = null;
  // The surface automated tests read.
  const records = { calls: [], shown: null, error: "", audioBytes: 0 };
  window.briskCalls = records;

  function headers() {
    const key = sessionStorage.getItem("brisk-operator-key");
    return key ? { Authorization: `Bearer ${key}` } : {};
  }

  async function api(path) {
    const response = await fetch(path, { headers: headers() });
    if (response.status === 401) {
      ui.form.hidden = false;
      throw new Error("this server needs the operator key");
    }
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return response.json();
  }

  function when(iso) {
    return iso ? new Date(iso).toLocaleString() : "";
  }

  function duration(call) {
    if (!call.ended_at) return call.status === "in_progress" ? "in progress" : "";
    const s = Math.round((new Date(call.ended_at) - new Date(call.started_at)) / 1000);
    return s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
  }

  async function loadCalls(more = false) {
    try {
      const page = await api(`/api/calls?limit=${PAGE}${more && next ? `&cursor=${encodeURIComponent(next)}` : ""}`);
      if (!more) ui.rows.replaceChildren();
      for (const call of page.calls) addRow(call);
      records.calls.push(...page.calls);
      next = page.next;
      ui.more.hidden = !next;
      ui.status.textContent = records.calls.length ? "" : "No calls yet.";
      const wanted = new URLSearchParams(location.search).get("id");
      if (wanted && !records.shown) showCall(wanted);
    } catch (err) {
      records.error = err.message;
      ui.status.textContent = `Cannot list calls: ${err.message}`;
    }
  }

  function addRow(call) {
    const row = document.createElement("tr");
    row.dataset.id = call.id;
    const cells = [when(call.started_at), duration(call), call.transport, String(call.turn_count), call.status,
      call.v2v_p50_ms == null ? "" : `${Math.round(call.v2v_p50_ms)} ms`];
    for (const text of cells) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    row.children[4].className = `status-${call.status}`;
    row.addEventListener("click", () => showCall(call.id));
    ui.rows.append(row);
  }

  async function showCall(id) {
    try {
      const call = await api(`/api/calls/${encodeURIComponent(id)}`);
      records.shown = call;
      history.replaceState(null, "", `?id=${encodeURIComponent(id)}`);
      for (const row of ui.rows.children) row.setAttribute("aria-selected", String(row.dataset.id === id));
      ui.panel.hidden = false;
      ui.summary.textContent = `${when(call.started_at)} · ${call.transport} · ${call.status}` +
        (call.ended_by ? ` (${call.ended_by})` : "") + ` · ${call.turns.length} turns`;
      ui.turns.replaceChildren(...call.turns.map(turnEntry));
      await showAudio(call);
    } catch (err) {
      ui.summary.textContent = `Cannot show the call: ${err.message}`;
      ui.panel.hidden = false;
    }
  }

  // An <audio src> cannot send the operator key: the recording is fetched with it, then played
  // from memory.
  async function showAudio(call) {
    if (ui.audio.src) URL.revokeObjectURL(ui.audio.src);
    ui.audio.removeAttribute("src");
    ui.audio.hidden = true;
    records.audioBytes = 0;
    if (!call.has_audio) return;
    const response = await fetch(`/api/calls/${encodeURIComponent(call.id)}/audio`, { headers: headers() });
    if (!response.ok) return;
    const blob = await response.blob();
    records.audioBytes = blob.size;
    ui.audio.src = URL.createObjectURL(blob);
    ui.audio.hidden = false;
  }

  function said(who, text) {
    const p = document.createElement("p");
    p.className = "said";
    const name = document.createElement("span");
    name.className = "who";
    name.textContent = who;
    p.append(name, document.createTextNode(text || "—"));
    return p;
  }

  function turnEntry(turn) {
    const li = document.createElement("li");
    li.className = "call-turn panel";
    li.append(said("Caller", turn.user_text), said("Brisk", turn.bot_text));
    const tags = [];
    if (turn.interrupted) tags.push("interrupted");
    if (turn.speculative) tags.push("speculative");
    if (turn.fast_path) tags.push(`answered by ${turn.fast_path}`);
    for (const tool of turn.tool_calls || []) tags.push(`tool ${tool.name}(${JSON.stringify(tool.arguments)})`);
    if (tags.length) {
      const p = document.createElement("p");
      p.className = "tags";
      p.textContent = tags.join(" · ");
      li.append(p);
    }
    li.append(waterfall(turn.latency_ms || {}));
    return li;
  }

  function waterfall(stages) {
    const grid = document.createElement("div");
    grid.className = "waterfall";
    const measured = STAGES.filter(([key]) => stages[key] != null);
    const top = Math.max(1, ...measured.map(([key]) => stages[key]));
    for (const [key, label] of measured) {
      const name = document.createElement("span");
      name.textContent = label;
      const bar = document.createElement("span");
      bar.className = key === "first_audio_out" ? "bar v2v" : "bar";
      bar.style.width = `${Math.max(1, (100 * stages[key]) / top)}%`;
      const ms = document.createElement("span");
      ms.textContent = `${Math.round(stages[key])} ms`;
      grid.append(name, bar, ms);
    }
    return grid;
  }

  ui.form.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("brisk-operator-key", ui.key.value);
    ui.form.hidden = true;
    records.calls = [];
    loadCalls();
  });
  ui.more.addEventListener("click", () => loadCalls(true));
  loadCalls();
})();
