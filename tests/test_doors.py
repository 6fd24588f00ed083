"""Every public door tried: no credential, a wrong one, an expired one, a replayed one, another
site's page, floods, oversized and malformed bodies, and fuzzed requests that must never be a 500.

The real FastAPI app (``agent.server.create_app``) over httpx's ASGI transport, configured as a
deployment is: a server-to-server key and the shop's own page origin. Its runtime is not
started, so a request that gets past the doors is told "still starting" (503): that is how these
tests see a door open without placing a call. The flood of offers against a call in progress is
a real call, in tests/test_doors_e2e.py.
"""

import hashlib
import hmac

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from livekit import api

from agent.config import ConfigError, load_config
from agent.runtime.runtime import Runtime
from agent.server import create_app
from agent.transports.twilio import stream_token, stream_token_valid

API_KEY = "server-to-server-key"
PAGE = "https://shop.example"
HOST = "brisk.example"
OFFER = {"sdp": "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n", "type": "offer"}
NOT_STARTED = 503  # past every door: the runtime was never started


def deployment(**settings):
    """A config as a deployment reachable from elsewhere has it (credentials configured)."""
    defaults = {"api_key": API_KEY, "allowed_origins": [PAGE], "operator_key": "operator-key",
                "livekit_url": "ws://livekit.test:7880", "livekit_api_key": "lk", "livekit_api_secret": "lk-secret",
                "twilio_auth_token": "tw-token", "rate_limit_per_minute": 600, "rate_limit_burst": 100}
    return load_config(**{**defaults, **settings})


def client(config, address: str = "203.0.113.7") -> httpx.AsyncClient:
    app = create_app(config, Runtime(config))
    transport = httpx.ASGITransport(app=app, client=(address, 50000))
    return httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}")


async def session_token(http: httpx.AsyncClient, origin: str = f"http://{HOST}") -> str:
    r = await http.post("/api/session", headers={"Origin": origin})
    assert r.status_code == 200, r.text
    return r.json()["token"]


async def test_an_offer_with_no_credential_or_a_wrong_one_is_refused_and_a_right_one_passes():
    async with client(deployment()) as http:
        assert (await http.post("/api/offer", json=OFFER)).status_code == 401
        wrong = await http.post("/api/offer", json=OFFER, headers={"Authorization": "Bearer not-the-key"})
        assert wrong.status_code == 401
        bogus = await http.post("/api/offer", json=OFFER, headers={"X-Brisk-Call-Token": "made-up"})
        assert bogus.status_code == 401
        keyed = await http.post("/api/offer", json=OFFER, headers={"Authorization": f"Bearer {API_KEY}"})
        assert keyed.status_code == NOT_STARTED


async def test_a_call_token_works_once_and_not_after_it_expires():
    config = deployment(call_token_ttl_secs=5)
    async with client(config) as http:
        token = await session_token(http)
        first = await http.post("/api/offer", json=OFFER, headers={"X-Brisk-Call-Token": token})
        replayed = await http.post("/api/offer", json=OFFER, headers={"X-Brisk-Call-Token": token})
        assert (first.status_code, replayed.status_code) == (NOT_STARTED, 401)
        assert "already used or expired" in replayed.json()["detail"]

        tokens = http._transport.app.state.access.tokens
        late = await session_token(http)
        now = tokens.clock()
        tokens.clock = lambda: now + 6
        expired = await http.post("/api/offer", json=OFFER, headers={"X-Brisk-Call-Token": late})
        assert expired.status_code == 401


async def test_the_page_gets_its_token_with_the_ice_servers_and_short_lived_turn_credentials():
    config = deployment(ice_servers=["stun:stun.example:3478", "turn:turn.example:3478"], turn_secret="coturn-secret")
    async with client(config) as http:
        r = await http.post("/api/session", headers={"Origin": PAGE})
    body = r.json()
    assert body["expires_in"] == config.call_token_ttl_secs and body["token"]
    stun, turn = body["ice_servers"]
    assert stun == {"urls": ["stun:stun.example:3478"]}
    assert turn["urls"] == ["turn:turn.example:3478"]
    expiry = int(turn["username"].split(":")[0])
    import base64
    import time
    assert time.time() < expiry <= time.time() + config.turn_ttl_secs + 1
    expected = base64.b64encode(hmac.new(b"coturn-secret", turn["username"].encode(), hashlib.sha1).digest()).decode()
    assert turn["credential"] == expected  # what coturn's use-auth-secret checks


async def test_another_sites_page_can_neither_get_a_token_nor_start_a_call():
    async with client(deployment()) as http:
        assert (await http.post("/api/session", headers={"Origin": "https://evil.example"})).status_code == 403
        # The classic cross-site form post: text/plain, no preflight, the visitor's browser.
        form = await http.post("/api/offer", content=b'{"sdp": "v=0", "type": "offer"}',
                               headers={"Origin": "https://evil.example", "Content-Type": "text/plain"})
        assert form.status_code == 403
        # A script with no Origin gets no token without the key.
        assert (await http.post("/api/session")).status_code == 401


async def test_on_loopback_with_nothing_configured_calls_stay_open_as_before():
    config = load_config()
    assert config.calls_open
    async with client(config, address="127.0.0.1") as http:
        assert (await http.post("/api/offer", json=OFFER)).status_code == NOT_STARTED
        assert (await http.post("/api/session")).status_code == 200


def test_listening_beyond_this_machine_with_no_credential_refuses_to_start_and_names_the_settings():
    with pytest.raises(ConfigError) as refused:
        load_config(host="0.0.0.0")
    for setting in ("BRISK_ALLOWED_ORIGINS", "BRISK_API_KEY", "BRISK_ALLOW_OPEN"):
        assert setting in str(refused.value)
    assert not load_config(host="0.0.0.0", api_key="k").calls_open
    assert load_config(host="0.0.0.0", allow_open=True).calls_open
    with pytest.raises(ConfigError, match="BRISK_TWILIO_AUTH_TOKEN"):
        load_config(public_url="https://brisk.example")


async def test_a_flood_from_one_client_gets_429_with_retry_after_and_others_are_not_held_up():
    config = deployment(rate_limit_per_minute=30, rate_limit_burst=10)
    app = create_app(config, Runtime(config))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=("198.51.100.1", 1)),
                                 base_url=f"http://{HOST}") as flood, \
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=("198.51.100.2", 1)),
                              base_url=f"http://{HOST}") as other:
        codes = [(await flood.post("/api/offer", json=OFFER, headers={"Authorization": f"Bearer {API_KEY}"}))
                 for _ in range(200)]
        assert [r.status_code for r in codes[:10]] == [NOT_STARTED] * 10
        limited = [r for r in codes if r.status_code == 429]
        assert len(limited) >= 185
        assert all(int(r.headers["retry-after"]) >= 1 for r in limited)
        assert (await other.post("/api/offer", json=OFFER, headers={"Authorization": f"Bearer {API_KEY}"})).status_code == NOT_STARTED
        # Each door has its own budget: the flood of offers leaves this client its ICE patches.
        assert (await flood.patch("/api/offer", json={"pc_id": "nobody", "candidates": []})).status_code == 404


async def test_a_body_is_capped_while_it_is_read_even_without_a_content_length():
    async def chunks():
        for _ in range(200):
            yield b"x" * 1024

    async with client(deployment()) as http:
        r = await http.post("/api/offer", content=chunks(), headers={"Authorization": f"Bearer {API_KEY}"})
        assert r.status_code == 413
        assert "content-length" not in {k.lower() for k in r.request.headers}


@pytest.mark.parametrize("patch", [
    {"pc_id": "x", "candidates": [{"candidate": "candidate:garbage", "sdp_mid": "0", "sdp_mline_index": 0}]},
    {"pc_id": "x", "candidates": [{"candidate": "candidate:1 1 udp", "sdp_mid": 0, "sdp_mline_index": "0"}]},
    {"pc_id": "x", "candidates": [{"nonsense": True}]},
    {"pc_id": 7, "candidates": []},
    {"candidates": "no"},
    [],
])
async def test_a_malformed_ice_candidate_is_a_400_not_a_500(patch):
    async with client(deployment()) as http:
        assert (await http.patch("/api/offer", json=patch)).status_code == 400


async def test_a_livekit_token_needs_a_credential_and_grants_only_a_fresh_room_the_server_chose():
    async with client(deployment()) as http:
        assert (await http.get("/api/livekit/token")).status_code == 401
        keyed = {"Authorization": f"Bearer {API_KEY}"}
        chosen = await http.get("/api/livekit/token", params={"room": "someone-elses-room"}, headers=keyed)
        assert chosen.status_code == 400
        first = (await http.get("/api/livekit/token", headers=keyed)).json()
        second = (await http.get("/api/livekit/token", headers={"X-Brisk-Call-Token": await session_token(http)})).json()
    assert first["room"] != second["room"]
    claims = api.TokenVerifier("lk", "lk-secret").verify(first["token"])
    assert claims.video.room == first["room"] and not claims.video.room_list and not claims.video.room_admin


async def test_phone_doors_without_an_auth_token_are_shut_when_calls_are_not_open():
    async with client(deployment(twilio_auth_token=None)) as http:
        r = await http.post("/twilio/voice", data={"CallSid": "CA1", "From": "+15551234567"})
    assert r.status_code == 403 and "BRISK_TWILIO_AUTH_TOKEN" in r.json()["detail"]


def test_a_stream_token_is_bound_to_its_call_and_expires():
    token = stream_token("tw-token", "CA1", expires=2_000_000_000)
    assert stream_token_valid("tw-token", "CA1", token, now=1_999_999_999)
    assert not stream_token_valid("tw-token", "CA2", token, now=1_999_999_999)
    assert not stream_token_valid("tw-token", "CA1", token, now=2_000_000_001)
    assert not stream_token_valid("other-token", "CA1", token, now=1_999_999_999)
    assert not stream_token_valid("tw-token", "CA1", "garbage", now=0)


async def test_public_healthz_says_ready_or_not_and_the_details_are_the_operators():
    async with client(deployment()) as http:
        public = await http.get("/healthz")
        operator = await http.get("/healthz", headers={"Authorization": "Bearer operator-key"})
    assert public.json() == {"ready": False}
    assert "components" in operator.json()


async def test_metrics_off_this_machine_answer_only_the_operator_key():
    async with client(deployment()) as http:
        nobody = await http.get("/metrics")
        caller = await http.get("/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
        operator = await http.get("/metrics", headers={"Authorization": "Bearer operator-key"})
    assert (nobody.status_code, caller.status_code, operator.status_code) == (401, 401, 200)
    assert "brisk_" in operator.text and "brisk_" not in nobody.text


async def test_with_no_operator_key_metrics_are_this_machines_only():
    config = deployment(operator_key=None)
    async with client(config) as http:
        assert (await http.get("/metrics")).status_code == 401
    async with client(config, address="127.0.0.1") as http:
        assert (await http.get("/metrics")).status_code == 200


_text = st.text(max_size=200)
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
                     max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method_path=st.sampled_from([("POST", "/api/offer"), ("PATCH", "/api/offer"), ("POST", "/api/session"),
                                    ("GET", "/api/livekit/token"), ("POST", "/twilio/voice"), ("GET", "/api/calls"),
                                    ("GET", "/healthz"), ("GET", "/metrics")]),
       body=st.one_of(_json.map(lambda v: ("json", v)), st.binary(max_size=300).map(lambda b: ("raw", b))),
       headers=st.dictionaries(st.sampled_from(["Authorization", "Origin", "X-Brisk-Call-Token", "Content-Type"]),
                               st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60),
                               max_size=4),
       query=st.dictionaries(st.sampled_from(["room", "limit", "cursor"]), _text, max_size=2))
# Found by the fuzzer: an Origin urlsplit cannot parse (an unclosed IPv6 host) once gave a 500.
@example(method_path=("POST", "/api/offer"), body=("raw", b""), headers={"Authorization": "", "Origin": "//["}, query={})
async def test_fuzzed_requests_to_the_public_routes_never_get_a_500(method_path, body, headers, query):
    method, path = method_path
    kind, value = body
    async with client(deployment()) as http:
        kwargs = {"json": value} if kind == "json" else {"content": value}
        r = await http.request(method, path, headers=headers, params=query, **kwargs)
    assert r.status_code < 500 or r.status_code == NOT_STARTED, (r.status_code, r.text)


def test_a_flood_of_twilio_stream_upgrades_is_refused_before_any_is_accepted():
    from starlette.testclient import TestClient
    from starlette.websockets import WebSocketDisconnect

    config = deployment(rate_limit_per_minute=30, rate_limit_burst=3)
    app = create_app(config, Runtime(config))
    refused = 0
    client = TestClient(app)  # no lifespan: the runtime stays unstarted
    for _ in range(10):
        try:
            with client.websocket_connect("/ws/twilio") as ws:
                ws.close()
        except WebSocketDisconnect as closed:
            refused += closed.code == 1013
    assert refused >= 7
