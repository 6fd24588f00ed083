"""The post-call webhook: every ended call is delivered, signed, once, even across a receiver that
is down for a while or a restart of Brisk."""

import asyncio
import time

from agent.caller.loopback import free_port, serve_app
from agent.records.store import CallRecords
from agent.records.webhook import WebhookSender
from agent.security.signing import signature, verify
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.waiting import until

SECRET = "whsec-test"



async def a_call(records, call_id, turns=2):
    await records.open_call(call_id, transport="twilio", caller="***0142")
    for n in range(1, turns + 1):
        await records.add_turn(call_id, {"turn": n, "user_text": f"question {n}", "bot_text": f"answer {n}",
                                         "stages_ms": {"first_audio_out": 700.0}})
    await records.close_call(call_id, status="completed", ended_by="caller")


def test_a_signature_verifies_only_its_own_body_with_its_own_secret_while_fresh():
    now = int(time.time())
    header = signature(SECRET, b'{"a":1}', now)
    assert verify(SECRET, b'{"a":1}', header)
    assert not verify(SECRET, b'{"a":2}', header)
    assert not verify("another-secret", b'{"a":1}', header)
    assert not verify(SECRET, b'{"a":1}', signature(SECRET, b'{"a":1}', now - 3600))
    assert not verify(SECRET, b'{"a":1}', "garbage")


async def test_a_receiver_that_is_down_for_a_while_gets_the_call_once_it_is_back_once(records_url):
    records = CallRecords(records_url, webhook=True)
    await records.start()
    port = free_port()  # nothing listens there yet
    sender = WebhookSender(records, f"http://127.0.0.1:{port}/hooks/calls", SECRET, retry_s=0.2)
    sender.start()
    receiver = WebhookReceiver(SECRET, fail_next=1)  # and once back, it fails once more
    try:
        await a_call(records, "CA1")
        await until(lambda: sender.failed_attempts >= 2)
        assert await records.deliveries_owed() == 1
        async with serve_app(receiver.app(), port=port):
            await until(lambda: receiver.deliveries)
            await asyncio.sleep(1.5)  # several retry periods: nothing comes twice
        owed = await records.deliveries_owed()
    finally:
        await sender.stop()
        await records.close()
    assert len(receiver.deliveries) == 1 and owed == 0
    delivery = receiver.deliveries[0]
    assert delivery.signed and delivery.delivery_id
    call = delivery.body["call"]
    assert delivery.body["event"] == "call.ended"
    assert call["id"] == "CA1" and call["status"] == "completed" and call["caller"] == "***0142"
    assert [t["user_text"] for t in call["turns"]] == ["question 1", "question 2"]
    assert sender.failed_attempts >= 3  # two refused connections, one 503


async def test_a_delivery_owed_when_brisk_stops_is_sent_after_the_restart(records_url):
    receiver = WebhookReceiver(SECRET)
    async with serve_app(receiver.app()) as url:
        records = CallRecords(records_url, webhook=True)
        await records.start()
        await a_call(records, "CA2")  # Brisk stops before its sender ever ran
        await records.close()

        again = CallRecords(records_url, webhook=True)
        await again.start()
        sender = WebhookSender(again, f"{url}/hooks/calls", SECRET, retry_s=0.2)
        sender.start()
        try:
            await until(lambda: receiver.deliveries)
            await asyncio.sleep(0.5)
        finally:
            await sender.stop()
            await again.close()
    assert [d.body["call"]["id"] for d in receiver.deliveries] == ["CA2"]


async def test_calls_cut_off_by_a_crash_are_delivered_as_failed_and_other_servers_calls_are_left_alone(records_url):
    receiver = WebhookReceiver(SECRET)
    first = CallRecords(records_url, instance="brisk-1", webhook=True)
    other = CallRecords(records_url, instance="brisk-2", webhook=True)
    await first.start()
    await other.start()
    await first.open_call("CA-mine", transport="twilio")
    await first.add_turn("CA-mine", {"turn": 1, "user_text": "hello", "bot_text": "hi"})
    await other.open_call("CA-theirs", transport="twilio")
    await first.close()  # brisk-1 is killed; brisk-2 goes on

    restarted = CallRecords(records_url, instance="brisk-1", webhook=True)
    assert await restarted.start() == 1
    async with serve_app(receiver.app()) as url:
        sender = WebhookSender(restarted, f"{url}/hooks/calls", SECRET, retry_s=0.2)
        sender.start()
        try:
            await until(lambda: receiver.deliveries)
            theirs = await restarted.call("CA-theirs")
        finally:
            await sender.stop()
            await restarted.close()
            await other.close()
    call = receiver.deliveries[0].body["call"]
    assert call["id"] == "CA-mine" and call["status"] == "failed" and len(call["turns"]) == 1
    assert theirs["status"] == "in_progress"


async def test_two_servers_sending_from_one_outbox_deliver_each_call_once(records_url):
    receiver = WebhookReceiver(SECRET)
    a = CallRecords(records_url, instance="a", webhook=True)
    b = CallRecords(records_url, instance="b", webhook=True)
    await a.start()
    await b.start()
    async with serve_app(receiver.app()) as url:
        senders = [WebhookSender(r, f"{url}/hooks/calls", SECRET, retry_s=0.2) for r in (a, b)]
        for s in senders:
            s.start()
        try:
            await asyncio.gather(*[a_call(a if i % 2 else b, f"CA{i}", turns=1) for i in range(10)])
            await until(lambda: len(receiver.deliveries) >= 10)
            await asyncio.sleep(0.5)
        finally:
            for s in senders:
                await s.stop()
            await a.close()
            await b.close()
    assert sorted(d.body["call"]["id"] for d in receiver.deliveries) == sorted(f"CA{i}" for i in range(10))
