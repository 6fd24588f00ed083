"""A WebRTC call's input audio goes on to the VAD as soon as it is in order, not after a playout delay."""

from aiortc import AudioStreamTrack, RTCConfiguration, RTCPeerConnection
from aiortc.rtp import RtpPacket
from pipecat.transports.smallwebrtc.connection import SmallWebRTCConnection

from agent.config import BriskConfig
from agent.transports.webrtc import _JITTER_BUFFER, hand_on_input_audio_sooner

OPUS_SAMPLES_PER_PACKET = 960  # 20 ms at 48 kHz


async def server_side_of_a_call() -> tuple[SmallWebRTCConnection, RTCPeerConnection]:
    """The server's connection for a caller's real offer (audio sent, RTVI data channel), answered."""
    caller = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    caller.addTransceiver(AudioStreamTrack(), direction="sendrecv")
    caller.createDataChannel("rtvi")
    await caller.setLocalDescription(await caller.createOffer())
    server = SmallWebRTCConnection(ice_servers=[])
    await server.initialize(sdp=caller.localDescription.sdp, type=caller.localDescription.type)
    return server, caller


def packet(n: int) -> RtpPacket:
    p = RtpPacket(payload_type=111, sequence_number=n, timestamp=n * OPUS_SAMPLES_PER_PACKET, payload=b"\xf8\xff\xfe")
    p._data = p.payload  # the receiver depayloads each packet into this before buffering it
    return p


def packets_until_the_first_goes_on(buffer) -> int:
    """How many packets had arrived when the buffer handed on the first one."""
    for n in range(1, 16):
        _, frame = buffer.add(packet(n))
        if frame is not None:
            assert frame.timestamp == OPUS_SAMPLES_PER_PACKET  # the first packet, in order
            return n
    raise AssertionError("nothing was handed on")


def audio_buffer(connection: SmallWebRTCConnection):
    (receiver,) = [r for r in connection.pc.getReceivers() if r.track is not None and r.track.kind == "audio"]
    return getattr(receiver, _JITTER_BUFFER)


async def test_a_packet_goes_on_when_the_next_arrives_where_aiortc_would_wait_for_four():
    assert BriskConfig().webrtc_input_prefetch_packets == 0
    as_aiortc_made_it, caller_a = await server_side_of_a_call()
    ours, caller_b = await server_side_of_a_call()
    try:
        hand_on_input_audio_sooner(ours, BriskConfig().webrtc_input_prefetch_packets)
        # Two calls at once: each has its own buffer, and only the one it was given changes.
        assert audio_buffer(ours) is not audio_buffer(as_aiortc_made_it)
        assert packets_until_the_first_goes_on(audio_buffer(as_aiortc_made_it)) == 5
        assert packets_until_the_first_goes_on(audio_buffer(ours)) == 2
    finally:
        for connection, caller in ((as_aiortc_made_it, caller_a), (ours, caller_b)):
            await connection.disconnect()
            await caller.close()


async def test_a_missing_packet_is_still_waited_for_so_the_audio_stays_in_order():
    connection, caller = await server_side_of_a_call()
    try:
        hand_on_input_audio_sooner(connection, 0)
        buffer = audio_buffer(connection)
        assert buffer.add(packet(1))[1] is None
        assert buffer.add(packet(3))[1] is None  # 2 is late: 1 is not known to be whole
        assert buffer.add(packet(4))[1] is None
        _, frame = buffer.add(packet(2))
        assert frame is not None and frame.timestamp == OPUS_SAMPLES_PER_PACKET
        _, frame = buffer.add(packet(5))
        assert frame is not None and frame.timestamp == 2 * OPUS_SAMPLES_PER_PACKET
    finally:
        await connection.disconnect()
        await caller.close()
