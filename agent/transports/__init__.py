"""How callers reach a pipeline: WebRTC from the browser, Twilio phone calls, LiveKit rooms."""
