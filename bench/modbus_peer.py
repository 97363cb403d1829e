# A Modbus/TCP server and client (pymodbus, Debian's python3-pymodbus) for
# bench/record-conversations.sh: the client reads holding registers and coils and writes a
# register. Usage: modbus_peer.py server|client PORT
import sys
from pymodbus.datastore import ModbusSequentialDataBlock, ModbusServerContext, ModbusSlaveContext
if sys.argv[1] == "server":
    from pymodbus.server import StartTcpServer
    block = lambda: ModbusSequentialDataBlock(0, [7] * 100)
    store = ModbusSlaveContext(di=block(), co=block(), hr=block(), ir=block())
    StartTcpServer(context=ModbusServerContext(slaves=store, single=True), address=("127.0.0.1", int(sys.argv[2])))
else:
    from pymodbus.client import ModbusTcpClient
    c = ModbusTcpClient("127.0.0.1", port=int(sys.argv[2]))
    c.connect()
    assert not c.read_holding_registers(0, 10, slave=1).isError()
    assert not c.read_coils(0, 8, slave=1).isError()
    assert not c.write_register(3, 42, slave=1).isError()
    c.close()
