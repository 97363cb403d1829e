# A QUIC server and client (aioquic, from PyPI) for bench/record-conversations.sh: the client
# opens a stream, sends a line, the server echoes it and the client closes; once per QUIC version
# given (VERSION_1, VERSION_2). Usage: quic_peer.py server|client PORT CERT KEY [VERSION...]
import asyncio, ssl, sys
from aioquic.asyncio import connect, serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived
from aioquic.quic.packet import QuicProtocolVersion

class Echo(QuicConnectionProtocol):
    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived):
            self._quic.send_stream_data(event.stream_id, event.data, end_stream=event.end_stream)
            self.transmit()

async def main(role, port, cert, key, versions):
    if role == "server":
        config = QuicConfiguration(is_client=False, alpn_protocols=["echo"])
        config.load_cert_chain(cert, key)
        await serve("127.0.0.1", port, configuration=config, create_protocol=Echo)
        await asyncio.Future()
    for v in versions:
        config = QuicConfiguration(is_client=True, alpn_protocols=["echo"], verify_mode=ssl.CERT_NONE,
                                   server_name="localhost",
                                   supported_versions=[QuicProtocolVersion[v]])
        async with connect("127.0.0.1", port, configuration=config) as client:
            reader, writer = await client.create_stream()
            writer.write(b"hello over quic\n")
            writer.write_eof()
            await asyncio.wait_for(reader.read(), 5)

asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]))
