"""A phone call's controls: hand the caller to a person with <Dial>, through Twilio's REST API.

``PhoneCallControl.transfer`` waits until the phone has played what the bot said before it
(a Media Streams ``mark`` queued after that audio, echoed by Twilio once played), then
redirects the live call to new TwiML, ``<Dial>BRISK_TRANSFER_NUMBER</Dial>``, with the
``twilio`` package's REST client (its asyncio HTTP client, so the call's loop never blocks).
Twilio then stops the media stream and dials the person; Brisk's side of the call ends.
``BRISK_TWILIO_API_URL`` points the client at a local stand-in in tests.
"""

from __future__ import annotations

import asyncio

import aiohttp

from loguru import logger
from pipecat.frames.frames import OutputTransportMessageFrame, TTSSpeakFrame
from twilio.base.exceptions import TwilioException
from twilio.http.async_http_client import AsyncTwilioHttpClient
from twilio.rest import Client
from twilio.twiml.voice_response import VoiceResponse

from agent.call.call_control import CallControl

# The goodbye before a transfer is a sentence or two; a phone that never echoes the mark
# (a lost message) must not keep the caller waiting for the person.
PLAYED_TIMEOUT_S = 15.0
TRANSFER_MARK = "transfer"


def dial_twiml(number: str) -> str:
    response = VoiceResponse()
    response.dial(number)
    return response.to_xml()


class PhoneCallControl(CallControl):
    """See the module docstring. ``phone`` is the call's ``agent.transports.twilio.PhoneCall``."""

    transport = "twilio"

    def __init__(self, phone, *, transfer_number: str | None, account_sid: str | None,
                 auth_token: str | None, api_url: str):
        super().__init__(phone.start.call_sid)
        self._task: asyncio.Task | None = None  # the hand-over, held so the loop keeps it
        self.phone = phone
        self.transfer_number = transfer_number
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.api_url = api_url

    @property
    def can_transfer(self) -> bool:
        return bool(self.transfer_number and self.account_sid and self.auth_token)

    async def transfer(self, worker, *, failed_text: str) -> None:
        self._task = asyncio.get_running_loop().create_task(self._hand_over(worker, failed_text))

    async def _hand_over(self, worker, failed_text: str) -> None:
        played = self.phone.wait_for_mark(TRANSFER_MARK)
        message = {"event": "mark", "streamSid": self.phone.start.stream_sid, "mark": {"name": TRANSFER_MARK}}
        # Not urgent: it goes out after the audio queued before it, so its echo means "heard".
        await worker.queue_frame(OutputTransportMessageFrame(message=message))
        try:
            await asyncio.wait_for(played.wait(), PLAYED_TIMEOUT_S)
        except asyncio.TimeoutError:
            logger.warning(f"call {self.call_id}: no echo of the transfer mark; transferring anyway")
        http = AsyncTwilioHttpClient()
        client = Client(self.account_sid, self.auth_token, http_client=http)
        client.api.base_url = self.api_url
        try:
            await client.calls(self.call_id).update_async(twiml=dial_twiml(self.transfer_number))
        except (TwilioException, aiohttp.ClientError, OSError, asyncio.TimeoutError) as error:
            logger.error(f"call {self.call_id}: the transfer failed, the call goes on: {error}")
            self.outcome = self.ended_by = None
            await worker.queue_frame(TTSSpeakFrame(failed_text))
            return
        finally:
            await http.close()
        logger.info(f"call {self.call_id}: handed to {self.transfer_number}")
        self.phone.end("handed over to a person")
