// A machine's view of DHCP, for benchmarks that cut links: run inside a lab namespace
// (`ip netns exec NS node --import tsx bench/dhcp-probe.ts ADDRESS MAC EVERY_MS DURATION_MS`),
// it broadcasts a DISCOVER for MAC every EVERY_MS (a new xid each) and prints one JSON line per
// OFFER heard: {"atMs": epoch ms, "serverId": option 54, "from": source address}. ADDRESS is its
// interface's IPv4 address: a socket bound there sends the broadcast out of that interface with no
// default route (as the DHCP server's do, src/boot/dhcp/socket-driver.ts), and one on 0.0.0.0
// hears the broadcast answers. Nothing else in the namespace may use port 68.
import dgram from 'node:dgram';
import { pathToFileURL } from 'node:url';
import {
  clientHardwareAddress,
  decodeDhcpPacket,
  encodeDhcpPacket,
  type DhcpPacket,
} from '../src/boot/index.js';

/** One OFFER the probe heard. */
export interface HeardOffer {
  readonly atMs: number;
  readonly serverId: string;
  readonly from: string;
}

function discover(mac: string, xid: number): Uint8Array {
  const chaddr = new Uint8Array(16);
  chaddr.set(mac.split(':').map((byte) => parseInt(byte, 16)));
  const packet: DhcpPacket = {
    op: 'request',
    htype: 1,
    hlen: 6,
    hops: 0,
    xid,
    secs: 0,
    // Broadcast answers: the probe has no lease to be unicast to.
    flags: 0x8000,
    ciaddr: '0.0.0.0',
    yiaddr: '0.0.0.0',
    siaddr: '0.0.0.0',
    giaddr: '0.0.0.0',
    chaddr,
    sname: '',
    file: '',
    options: { messageType: 'DISCOVER', parameterRequestList: [1, 3, 54] },
  };
  return encodeDhcpPacket(packet);
}

async function bound(address: string): Promise<dgram.Socket> {
  const socket = dgram.createSocket({ type: 'udp4', reuseAddr: true });
  await new Promise<void>((resolve) => socket.bind(68, address, resolve));
  socket.setBroadcast(true);
  return socket;
}

async function probe(address: string, mac: string, everyMs: number, durationMs: number): Promise<void> {
  const listener = await bound('0.0.0.0');
  const sender = await bound(address);
  const wanted = mac.toLowerCase();
  const hear = (message: Buffer, from: dgram.RemoteInfo): void => {
    try {
      const reply = decodeDhcpPacket(message);
      if (reply.op !== 'reply' || reply.options.messageType !== 'OFFER') return;
      if (clientHardwareAddress(reply) !== wanted) return;
      const offer: HeardOffer = {
        atMs: Date.now(),
        serverId: reply.options.serverId ?? '',
        from: from.address,
      };
      process.stdout.write(`${JSON.stringify(offer)}\n`);
    } catch {
      // Not a DHCP reply for us.
    }
  };
  listener.on('message', hear);
  sender.on('message', hear);
  let xid = Math.floor(Math.random() * 0x7fff_0000) + 1;
  const timer = setInterval(() => {
    xid += 1;
    sender.send(discover(mac, xid), 67, '255.255.255.255', (err) => {
      if (err !== null) process.stderr.write(`send: ${err.message}\n`);
    });
  }, everyMs);
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  clearInterval(timer);
  listener.close();
  sender.close();
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [address, mac, everyMs, durationMs] = process.argv.slice(2);
  if (address === undefined || mac === undefined || everyMs === undefined || durationMs === undefined) {
    process.stderr.write('usage: dhcp-probe.ts ADDRESS MAC EVERY_MS DURATION_MS\n');
    process.exitCode = 2;
  } else {
    await probe(address, mac, Number(everyMs), Number(durationMs));
  }
}
