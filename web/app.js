// Brisk browser client: one SmallWebRTC call to the pipecat server, a live
// transcript from RTVI messages, and a latency waterfall per turn.
// Plain script, no build step and no network beyond the page's own server.
"use strict";

(() => {
  const RTVI_LABEL = "rtvi-ai";
  // The protocol pipecat 1.14 speaks (RTVI.PROTOCOL_VERSION); a 1.x client is
  // served the deprecated bot-output format.
  const RTVI_VERSION = "2.2.0";
  const OFFER_URL = "/api/offer";
  // A single-use call token and the ICE servers (TURN credentials short-lived) for one call.
  const SESSION_URL = "/api/session";
  // Non-trickle signalling: the offer carries every candidate, but a host that
  // never finishes gathering must not hold the call up.
  const ICE_GATHERING_CAP_MS = 2000;
  // Once pipecat's SmallWebRTCConnection has seen one ping it reports the
  // client disconnected after 3 s without another, and stops sending to it.
  const PING_INTERVAL_MS = 1000;
  const LEVEL_INTERVAL_MS = 50;
  const VISIBLE_TURNS = 10;
  const VOICE_TO_VOICE = "first_audio_out";
  const STAGES = [
    ["speech_end", "speech end"],
    ["vad_stop", "VAD stop"],
    ["stt_final", "final transcript"],
    ["turn_end", "turn end"],
    ["llm_request", "LLM request"],
    ["llm_first_token", "LLM first token"],
    ["tts_first_text", "TTS first text"],
    ["tts_first_audio", "TTS first audio"],
    [VOICE_TO_VOICE, "voice-to-voice"],
  ];
  const STAGE_LABELS = new Map(STAGES);
  const SVG_NS = "http://www.w3.org/2000/svg";

  const ui = {
    call: document.getElementById("call"),
    status: document.getElementById("status"),
    micLevel: document.getElementById("mic-level"),
    botLevel: document.getElementById("bot-level"),
    activity: document.getElementById("activity"),
    transcript: document.getElementById("transcript"),
    latency: document.getElementById("latency"),
    audio: document.getElementById("bot-audio"),
  };

  let audioContext = null;
  let levelBuffer = null;
  let session = null; // the call in progress, or null
  let conversation = newConversation();

  // The surface automated tests read.
  const brisk = {
    state: "idle",
    reason: "",
    turns: [],
    messages: [],
    maxRemoteAudioLevel: 0,
    handover: "", // what the page said when the bot handed the call to a person
    endedBy: "", // why the bot ended the call: end_call, idle, transfer
    remoteAudioLevel() {
      const level = rms(session && session.remoteAnalyser);
      brisk.maxRemoteAudioLevel = Math.max(brisk.maxRemoteAudioLevel, level);
      return level;
    },
  };
  window.brisk = brisk;

  // ---- state and status -------------------------------------------------

  const STATE_LABELS = { idle: "Idle", connecting: "Connecting…", connected: "Connected", error: "Error" };

  function setState(state, detail = "") {
    brisk.state = state;
    brisk.reason = detail;
    ui.status.dataset.state = state;
    ui.status.textContent = detail ? `${STATE_LABELS[state]} — ${detail}` : STATE_LABELS[state];
    const active = state === "connecting" || state === "connected";
    ui.call.textContent = active ? "Hang up" : "Call";
    ui.call.dataset.active = String(active);
  }

  function showConnected(s) {
    if (s.pc.connectionState !== "connected") return;
    setState("connected", s.botReady ? "bot ready, start talking" : "waiting for the bot");
  }

  // ---- the call ---------------------------------------------------------

  function newSession() {
    return {
      pc: null,
      dc: null,
      mic: null,
      pcId: null,
      abort: new AbortController(),
      sources: [],
      micAnalyser: null,
      remoteAnalyser: null,
      pingTimer: 0,
      levelTimer: 0,
      botReady: false,
      closed: false,
      endedBecause: "", // what the server said before it ended the call

    };
  }

  async function startCall() {
    const s = newSession();
    session = s;
    conversation = newConversation();
    setState("connecting");
    // Created inside the click so the autoplay policy lets it run.
    audioContext = audioContext || new AudioContext();
    audioContext.resume();
    s.levelTimer = setInterval(showLevels, LEVEL_INTERVAL_MS);
    try {
      s.mic = await openMicrophone();
      if (s.closed) return release(s);
      s.micAnalyser = analyse(s, s.mic);
      s.callSession = await openSession(s);
      if (s.closed) return release(s);
      s.pc = createPeerConnection(s, s.callSession.ice_servers || []);
      await negotiate(s);
    } catch (err) {
      if (!s.closed) fail(s, err.message || String(err));
    }
  }

  function end(s, state, detail) {
    if (!s || session !== s) return;
    release(s);
    setState(state, detail);
  }

  function fail(s, reason) {
    end(s, "error", reason);
  }

  // Safe to call more than once: a call hung up while an await was pending
  // calls it again to free what that await produced.
  function release(s) {
    s.closed = true;
    s.abort.abort();
    clearInterval(s.pingTimer);
    clearInterval(s.levelTimer);
    for (const source of s.sources) source.disconnect();
    s.sources = [];
    s.micAnalyser = null;
    s.remoteAnalyser = null;
    if (s.pc) s.pc.close();
    if (s.mic) for (const track of s.mic.getTracks()) track.stop();
    if (session !== s) return;
    session = null;
    ui.audio.srcObject = null;
    ui.micLevel.value = 0;
    ui.botLevel.value = 0;
    endConversation();
  }

  async function openMicrophone() {
    if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      throw new Error("no microphone access: open the page over https or on localhost");
    }
    try {
      // Echo cancellation stays on: the bot's voice from the speakers must not
      // reach the microphone, or the bot hears itself and interrupts itself.
      // It works because the bot's audio plays through an <audio> element,
      // which Chrome's canceller uses as its reference signal.
      return await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true },
        video: false,
      });
    } catch (err) {
      if (err.name === "NotAllowedError" || err.name === "SecurityError") {
        throw new Error("microphone permission denied");
      }
      if (err.name === "NotFoundError") throw new Error("no microphone found");
      throw new Error(`microphone unavailable: ${err.message || err.name}`);
    }
  }

  async function openSession(s) {
    let response;
    try {
      response = await fetch(SESSION_URL, { method: "POST", signal: s.abort.signal });
    } catch (err) {
      if (s.closed) return {};
      throw new Error(`server unreachable (${err.message})`);
    }
    if (!response.ok) {
      throw new Error(`no call token, HTTP ${response.status}: ${await errorText(response)}`);
    }
    return response.json();
  }

  function createPeerConnection(s, iceServers) {
    // The server's STUN/TURN (BRISK_ICE_SERVERS); none = host candidates only, enough on
    // one machine or a LAN.
    const pc = new RTCPeerConnection({ iceServers });
    // The server only listens for a data channel, so the client opens it.
    s.dc = pc.createDataChannel("brisk", { ordered: true });
    s.dc.addEventListener("open", () => onChannelOpen(s));
    s.dc.addEventListener("message", (event) => onChannelMessage(s, event.data));
    // The connection state can stay "connected" for ~30 s after the server
    // goes away; the channel closes at once.
    s.dc.addEventListener("close", () => end(s, "idle", s.endedBecause || "the server closed the connection"));
    // pipecat takes the first transceiver as the user's audio.
    pc.addTransceiver(s.mic.getAudioTracks()[0], { direction: "sendrecv", streams: [s.mic] });
    pc.addEventListener("track", (event) => onRemoteTrack(s, event));
    pc.addEventListener("connectionstatechange", () => onConnectionState(s));
    return pc;
  }

  async function negotiate(s) {
    const offer = await s.pc.createOffer();
    await s.pc.setLocalDescription(offer);
    await iceGatheringComplete(s.pc);
    if (s.closed) return;
    const body = { sdp: s.pc.localDescription.sdp, type: s.pc.localDescription.type };
    if (s.pcId) Object.assign(body, { pc_id: s.pcId, restart_pc: false });
    const headers = { "Content-Type": "application/json" };
    // The token works once: a renegotiation of the call in progress needs none.
    if (!s.pcId && s.callSession && s.callSession.token) headers["X-Brisk-Call-Token"] = s.callSession.token;
    let response;
    try {
      response = await fetch(OFFER_URL, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
        signal: s.abort.signal,
      });
    } catch (err) {
      if (s.closed) return;
      throw new Error(`server unreachable (${err.message})`);
    }
    if (!response.ok) {
      throw new Error(`offer failed, HTTP ${response.status}: ${await errorText(response)}`);
    }
    const answer = await response.json();
    if (s.closed) return;
    s.pcId = answer.pc_id;
    await s.pc.setRemoteDescription({ type: answer.type, sdp: answer.sdp });
  }

  function iceGatheringComplete(pc) {
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        pc.removeEventListener("icegatheringstatechange", check);
        resolve();
      };
      const check = () => {
        if (pc.iceGatheringState === "complete") done();
      };
      const timer = setTimeout(done, ICE_GATHERING_CAP_MS);
      pc.addEventListener("icegatheringstatechange", check);
    });
  }

  async function errorText(response) {
    const text = (await response.text()).trim();
    try {
      const detail = JSON.parse(text).detail;
      if (detail !== undefined) return typeof detail === "string" ? detail : JSON.stringify(detail);
    } catch {
      // Not JSON: show the body's text, without markup if it is an HTML page.
    }
    const isHtml = (response.headers.get("content-type") || "").includes("html");
    const plain = isHtml ? new DOMParser().parseFromString(text, "text/html").body.textContent : text;
    return plain.replace(/\s+/g, " ").trim().slice(0, 300) || response.statusText || "no details";
  }

  function onConnectionState(s) {
    if (s.closed) return;
    switch (s.pc.connectionState) {
      case "connected":
        showConnected(s);
        break;
      case "disconnected":
        setState(brisk.state, "connection interrupted, waiting for it to recover");
        break;
      case "failed":
        fail(s, "the connection to the server failed (no ICE path)");
        break;
    }
  }

  function onRemoteTrack(s, event) {
    if (event.track.kind !== "audio" || s.closed) return;
    const stream = event.streams[0] || new MediaStream([event.track]);
    // The element plays the bot, and Chrome only feeds a remote stream to
    // WebAudio while an element is playing it, so the analyser needs it too.
    ui.audio.srcObject = stream;
    ui.audio.play().catch((err) => note(`Audio playback blocked: ${err.message}`, "error"));
    s.remoteAnalyser = analyse(s, stream);
  }

  function onChannelOpen(s) {
    send(s, {
      label: RTVI_LABEL,
      type: "client-ready",
      id: randomId(),
      data: { version: RTVI_VERSION, about: { library: "brisk-web" } },
    });
    s.pingTimer = setInterval(() => {
      if (s.dc.readyState === "open") s.dc.send(`ping: ${Date.now()}`);
    }, PING_INTERVAL_MS);
  }

  function send(s, message) {
    if (s.dc && s.dc.readyState === "open") s.dc.send(JSON.stringify(message));
  }

  function randomId() {
    // crypto.randomUUID needs a secure context; getRandomValues does not.
    const bytes = crypto.getRandomValues(new Uint8Array(8));
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function onChannelMessage(s, raw) {
    if (s.closed) return;
    let message;
    try {
      message = JSON.parse(raw);
    } catch {
      console.warn("Ignoring a data channel message that is not JSON:", raw);
      return;
    }
    if (message.type === "signalling") {
      onSignalling(s, message.message || {});
    } else if (message.label === RTVI_LABEL) {
      brisk.messages.push(message.type);
      onRtvi(s, message);
    }
  }

  function onSignalling(s, message) {
    if (message.type === "renegotiate") {
      negotiate(s).catch((err) => fail(s, `renegotiation failed: ${err.message}`));
    } else if (message.type === "peerLeft") {
      end(s, "idle", s.endedBecause || "the bot ended the call");
    }
  }

  function onRtvi(s, message) {
    const data = message.data || {};
    switch (message.type) {
      case "bot-ready":
        s.botReady = true;
        showConnected(s);
        break;
      case "user-started-speaking":
        setActivity("user", true);
        break;
      case "user-stopped-speaking":
        setActivity("user", false);
        break;
      case "user-transcription":
      case "user-input":
        userText(message.type, data);
        break;
      case "bot-llm-started":
        conversation.llmStreaming = true;
        closeBot(false);
        break;
      case "bot-llm-stopped":
        conversation.llmStreaming = false;
        if (conversation.bot) conversation.bot.el.removeAttribute("aria-busy");
        break;
      case "bot-llm-text":
        botText(message.type, data.text);
        break;
      case "bot-output":
        // Each segment's first message carries its whole text; later ones
        // only report how much of it has been spoken.
        if (data.spoken_status === "new" || (data.spoken_status === undefined && !data.spoken)) {
          botText(message.type, data.text);
        }
        break;
      case "bot-started-speaking":
        setActivity("bot", true);
        break;
      case "bot-stopped-speaking":
        setActivity("bot", false);
        break;
      case "bot-interrupted":
        // pipecat sends this at every user turn start; it only cut something
        // off if the bot was talking or still writing.
        if (conversation.botSpeaking || conversation.llmStreaming) closeBot(true);
        conversation.llmStreaming = false;
        break;
      case "error":
        if (data.fatal) fail(s, `the bot stopped: ${data.error}`);
        else note(`Bot error: ${data.error}`, "error");
        break;
      case "error-response":
        note(`The bot rejected a message: ${data.error}`, "error");
        break;
      case "server-message":
        if (data.type === "turn-latency") addTurn(data);
        else if (data.type === "transfer") handOver(s, data);
        else if (data.type === "call-ending") callEnding(s, data);
        break;
    }
  }

  // The bot hands the caller to a person: say so on the page, and keep it
  // said once the call ends.
  function handOver(s, data) {
    brisk.handover = data.text || "A person is being connected.";
    s.endedBecause = "handed over to a person";
    setState("connected", brisk.handover);
    note(brisk.handover, "handover");
  }

  // The bot ends the call (the caller said goodbye, or stayed silent).
  function callEnding(s, data) {
    brisk.endedBy = data.by;
    if (data.outcome === "transferred") return;
    s.endedBecause = data.by === "idle" ? "the bot hung up: no one answered" : "the bot ended the call";
  }

  // ---- audio levels -----------------------------------------------------

  function analyse(s, stream) {
    const source = audioContext.createMediaStreamSource(stream);
    const analyser = audioContext.createAnalyser();
    analyser.fftSize = 2048;
    source.connect(analyser);
    s.sources.push(source);
    return analyser;
  }

  function rms(analyser) {
    if (!analyser) return 0;
    if (!levelBuffer || levelBuffer.length !== analyser.fftSize) {
      levelBuffer = new Float32Array(analyser.fftSize);
    }
    analyser.getFloatTimeDomainData(levelBuffer);
    let sum = 0;
    for (const sample of levelBuffer) sum += sample * sample;
    return Math.sqrt(sum / levelBuffer.length);
  }

  // Speech spans a wide range of RMS values; a -60..0 dBFS scale shows a
  // whisper and a shout on the same meter.
  function meterValue(level) {
    if (level <= 0) return 0;
    return Math.min(1, Math.max(0, (20 * Math.log10(level) + 60) / 60));
  }

  function showLevels() {
    if (!session) return;
    ui.micLevel.value = meterValue(rms(session.micAnalyser));
    ui.botLevel.value = meterValue(brisk.remoteAudioLevel());
  }

  // ---- transcript -------------------------------------------------------

  function newConversation() {
    return {
      userSource: null,
      botSource: null,
      partial: null,
      bot: null,
      userSpeaking: false,
      botSpeaking: false,
      llmStreaming: false,
    };
  }

  function endConversation() {
    if (conversation.partial) conversation.partial.remove();
    conversation.partial = null;
    closeBot(false);
    setActivity("user", false);
    setActivity("bot", false);
  }

  function entry(kind, who) {
    const el = document.createElement("li");
    el.className = `entry ${kind}`;
    if (who) {
      const name = document.createElement("span");
      name.className = "who";
      name.textContent = who;
      const colon = document.createElement("span");
      colon.className = "visually-hidden";
      colon.textContent = ": ";
      name.append(colon);
      el.append(name);
    }
    const text = document.createElement("span");
    text.className = "text";
    el.append(text);
    return el;
  }

  // Keeps the newest line in view unless the reader has scrolled up.
  function showInTranscript(change) {
    const list = ui.transcript;
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 48;
    change();
    if (atBottom) list.scrollTop = list.scrollHeight;
  }

  function userText(source, data) {
    // pipecat reports each transcript twice (user-input and the deprecated
    // user-transcription): follow whichever comes first.
    conversation.userSource = conversation.userSource || source;
    if (source !== conversation.userSource || typeof data.text !== "string") return;
    const text = data.text.trim();
    showInTranscript(() => {
      if (!data.final) {
        if (!conversation.partial) {
          conversation.partial = entry("user partial", "You");
          // Only the final is announced; partials would flood a screen reader.
          conversation.partial.setAttribute("aria-hidden", "true");
          ui.transcript.append(conversation.partial);
        }
        conversation.partial.querySelector(".text").textContent = text;
        return;
      }
      const partial = conversation.partial;
      conversation.partial = null;
      if (!text) {
        if (partial) partial.remove();
        return;
      }
      // What the bot says next answers this utterance.
      closeBot(false);
      const kind = data.input_type === "backchannel" ? "user backchannel" : "user";
      const final = entry(kind, "You");
      final.querySelector(".text").textContent = text;
      if (partial) partial.replaceWith(final);
      else ui.transcript.append(final);
    });
  }

  function botText(source, text) {
    // bot-llm-text streams tokens and bot-output repeats them as sentences:
    // follow whichever the server sends first.
    conversation.botSource = conversation.botSource || source;
    if (source !== conversation.botSource || !text) return;
    showInTranscript(() => {
      if (!conversation.bot) {
        const el = entry("bot", "Brisk");
        // Screen readers wait for the whole reply instead of reading tokens.
        if (conversation.llmStreaming) el.setAttribute("aria-busy", "true");
        ui.transcript.append(el);
        conversation.bot = { el, text: el.querySelector(".text") };
      }
      const span = conversation.bot.text;
      const separator = source === "bot-output" && span.textContent ? " " : "";
      span.textContent += separator + text;
    });
  }

  function closeBot(interrupted) {
    const bot = conversation.bot;
    if (!bot) return;
    conversation.bot = null;
    bot.el.removeAttribute("aria-busy");
    if (interrupted) {
      bot.el.classList.add("interrupted");
      const badge = document.createElement("span");
      badge.className = "badge";
      badge.textContent = "interrupted";
      bot.el.append(" ", badge);
    }
  }

  function note(text, kind = "") {
    showInTranscript(() => {
      const el = entry(`note ${kind}`.trim(), "");
      el.querySelector(".text").textContent = text;
      ui.transcript.append(el);
    });
  }

  function setActivity(who, speaking) {
    if (who === "user") conversation.userSpeaking = speaking;
    else conversation.botSpeaking = speaking;
    const parts = [];
    if (conversation.userSpeaking) parts.push("You are speaking");
    if (conversation.botSpeaking) parts.push("Brisk is speaking");
    ui.activity.textContent = parts.join(" · ");
  }

  // ---- latency waterfall ------------------------------------------------

  function addTurn(record) {
    brisk.turns.push(record);
    renderTurns();
  }

  function presentStages(record) {
    const stages = record.stages_ms || {};
    const known = STAGES.map(([key]) => key);
    const extra = Object.keys(stages).filter((key) => !STAGE_LABELS.has(key));
    return [...known, ...extra]
      .filter((key) => Number.isFinite(stages[key]))
      .map((key) => [key, stages[key]]);
  }

  function renderTurns() {
    // A later record for the same turn number replaces the earlier one.
    const byTurn = new Map();
    brisk.turns.forEach((record, index) => byTurn.set(record.turn ?? `#${index}`, record));
    const visible = [...byTurn.values()].slice(-VISIBLE_TURNS).reverse();
    // One scale for every visible chart, so bar lengths compare across turns.
    const values = visible.flatMap((record) => presentStages(record).map(([, ms]) => ms));
    const scale = { lo: Math.min(0, ...values), hi: Math.max(1, ...values) };
    ui.latency.replaceChildren(...visible.map((record) => turnCard(record, scale)));
  }

  function ms(value) {
    return `${Math.round(value)} ms`;
  }

  function turnCard(record, scale) {
    const card = document.createElement("li");
    card.className = "turn";
    const stages = presentStages(record);
    const v2v = (record.stages_ms || {})[VOICE_TO_VOICE];

    const head = document.createElement("div");
    head.className = "turn-head";
    const title = document.createElement("h3");
    title.textContent = `Turn ${record.turn ?? "?"}`;
    const total = document.createElement("span");
    total.className = Number.isFinite(v2v) ? "v2v" : "v2v missing";
    total.textContent = Number.isFinite(v2v) ? `voice-to-voice ${ms(v2v)}` : "no bot audio";
    head.append(title, total);
    card.append(head);

    for (const [who, text] of [["You", record.user_text], ["Brisk", record.bot_text]]) {
      if (!text) continue;
      const line = document.createElement("p");
      line.className = "turn-text";
      line.title = text;
      line.textContent = `${who}: ${text}`;
      card.append(line);
    }

    card.append(turnChart(record, stages, scale));

    const reference = document.createElement("p");
    reference.className = "turn-ref";
    reference.textContent =
      record.reference === "vad_estimate"
        ? "Measured from the VAD's estimate of the end of speech."
        : "Measured from the true end of speech.";
    card.append(reference);
    return card;
  }

  function svg(name, attributes = {}) {
    const el = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attributes)) el.setAttribute(key, String(value));
    return el;
  }

  // Percentages keep the chart as wide as its card while text stays at its CSS
  // size, which a scaled viewBox would not.
  const LABEL_END = 40;
  const BAR_END = 78;
  const ROW_HEIGHT = 20;
  const BAR_HEIGHT = 11;
  const MIN_BAR_WIDTH = 0.6;

  function turnChart(record, stages, scale) {
    const x = (value) => LABEL_END + ((value - scale.lo) / (scale.hi - scale.lo)) * (BAR_END - LABEL_END);
    const estimated = record.reference === "vad_estimate";
    const label = (key) =>
      key === "speech_end" && estimated ? "speech end (est.)" : STAGE_LABELS.get(key) || key.replaceAll("_", " ");
    const summary = stages.map(([key, value]) => `${label(key)} ${ms(value)}`).join(", ");
    const chart = svg("svg", {
      class: "turn-chart",
      width: "100%",
      height: stages.length * ROW_HEIGHT + 4,
      role: "img",
      "aria-label": `Turn ${record.turn ?? "?"} latency: ${summary || "no stages measured"}`,
    });
    chart.append(svg("line", { class: "axis", x1: `${x(0)}%`, x2: `${x(0)}%`, y1: 0, y2: "100%" }));

    stages.forEach(([key, value], row) => {
      const middle = row * ROW_HEIGHT + 2 + ROW_HEIGHT / 2;
      const highlight = key === VOICE_TO_VOICE;
      const group = svg("g", { class: highlight ? "row v2v" : "row" });
      const name = svg("text", { class: "label", x: 0, y: middle, "dominant-baseline": "central" });
      name.textContent = label(key);
      const start = x(Math.min(0, value));
      const bar = svg("rect", {
        class: highlight ? "bar v2v" : "bar",
        "data-stage": key,
        x: `${start}%`,
        y: middle - BAR_HEIGHT / 2,
        width: `${Math.max(MIN_BAR_WIDTH, x(Math.max(0, value)) - start)}%`,
        height: BAR_HEIGHT,
        rx: 2,
      });
      const tip = svg("title");
      tip.textContent = `${key}: ${ms(value)}`;
      bar.append(tip);
      const amount = svg("text", {
        class: "value",
        x: "100%",
        y: middle,
        "text-anchor": "end",
        "dominant-baseline": "central",
      });
      amount.textContent = ms(value);
      group.append(name, bar, amount);
      chart.append(group);
    });
    return chart;
  }

  // ---- wiring -------------------------------------------------------------

  ui.call.addEventListener("click", () => {
    if (session) end(session, "idle", "call ended");
    else startCall();
  });
  // Closing the tab hangs up, so the server frees the bot at once.
  window.addEventListener("pagehide", () => end(session, "idle"));
  setState("idle");
})();
