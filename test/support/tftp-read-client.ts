// A TFTP read client that checks where every reply comes from, as EDK2 does: a packet from any
// address other than the server's it was sent to is recorded and ignored. Run inside a lab
// namespace (Node cannot enter one in-process):
//   node --import tsx test/support/tftp-read-client.ts SERVER PORT FILENAME [--stall]
// It asks with tsize and blksize (so the first reply is an OACK), ACKs every DATA, retransmits
// after 1 s of silence and gives up after 5 tries. It prints one JSON line (ReadResult) and exits
// 0 when the read completed or the server answered with an ERROR, 1 otherwise. With --stall it
// prints {"stalled":true} after the first DATA and then answers nothing more, recording what
// arrives until it is stopped (or 60 s pass), so that the transfer stays in flight.
import { createHash } from 'node:crypto';
import dgram from 'node:dgram';
import { decodePacket, encodePacket, type TftpPacket } from '../../src/boot/index.js';

export interface ReadResult {
  /** 'done': every byte read; 'error': the server sent ERROR; 'timeout': it went silent. */
  readonly outcome: 'done' | 'error' | 'timeout' | 'stalled';
  readonly bytes: number;
  readonly sha256: string;
  /** Every packet received, by source address, in order: [address, packet type]. */
  readonly received: readonly (readonly [string, string])[];
  readonly errorCode?: number;
}

const blockSize = 1468;
const retryMs = 1000;
const triesMax = 5;
const stallMaxMs = 60_000;

async function main(argv: readonly string[]): Promise<number> {
  const [server, portText, filename] = argv;
  const stall = argv.includes('--stall');
  if (server === undefined || portText === undefined || filename === undefined) {
    console.error('usage: tftp-read-client.ts SERVER PORT FILENAME [--stall]');
    return 2;
  }
  const result = await read(server, Number(portText), filename, stall);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  return result.outcome === 'done' || result.outcome === 'error' || result.outcome === 'stalled' ? 0 : 1;
}

function read(server: string, port: number, filename: string, stall: boolean): Promise<ReadResult> {
  const socket = dgram.createSocket('udp4');
  const received: [string, string][] = [];
  const chunks: Buffer[] = [];
  const hash = createHash('sha256');
  let bytes = 0;
  let tid: number | null = null;
  let expected = 1;
  let last: TftpPacket = {
    type: 'rrq',
    filename,
    mode: 'octet',
    options: new Map([
      ['tsize', '0'],
      ['blksize', String(blockSize)],
    ]),
  };
  let tries = 0;
  let timer: NodeJS.Timeout | null = null;
  return new Promise((resolve) => {
    const finish = (outcome: ReadResult['outcome'], errorCode?: number): void => {
      if (timer !== null) clearTimeout(timer);
      socket.close();
      for (const chunk of chunks) hash.update(chunk);
      resolve({
        outcome,
        bytes,
        sha256: hash.digest('hex'),
        received,
        ...(errorCode === undefined ? {} : { errorCode }),
      });
    };
    const send = (packet: TftpPacket): void => {
      last = packet;
      tries = 0;
      socket.send(encodePacket(packet), tid ?? port, server);
      arm();
    };
    const arm = (): void => {
      if (timer !== null) clearTimeout(timer);
      timer = setTimeout(() => {
        if (++tries >= triesMax) return finish('timeout');
        socket.send(encodePacket(last), tid ?? port, server);
        arm();
      }, retryMs);
    };
    socket.on('message', (message, from) => {
      const decoded = decodePacket(message);
      const type = decoded.ok ? decoded.packet.type : 'malformed';
      received.push([from.address, type]);
      // As EDK2: only the address asked, and once the transfer has a TID, only that port.
      if (from.address !== server || (tid !== null && from.port !== tid) || !decoded.ok) return;
      tid = from.port;
      const packet = decoded.packet;
      if (packet.type === 'error') return finish('error', packet.code);
      if (packet.type === 'oack' && expected === 1) return send({ type: 'ack', block: 0 });
      if (packet.type !== 'data' || packet.block !== (expected & 0xffff)) return;
      chunks.push(Buffer.from(packet.data));
      bytes += packet.data.length;
      expected += 1;
      if (stall) {
        if (timer !== null) clearTimeout(timer);
        process.stdout.write('{"stalled":true}\n');
        timer = setTimeout(() => finish('stalled'), stallMaxMs);
        socket.removeAllListeners('message');
        socket.on('message', (_m, f) => received.push([f.address, 'late']));
        process.once('SIGTERM', () => finish('stalled'));
        return;
      }
      if (packet.data.length < blockSize) {
        // The last ACK must leave before the socket closes, or the server retransmits for ~30 s.
        if (timer !== null) clearTimeout(timer);
        socket.send(encodePacket({ type: 'ack', block: packet.block }), tid, server, () => finish('done'));
        return;
      }
      send({ type: 'ack', block: packet.block });
    });
    socket.bind(0, () => send(last));
  });
}

process.exitCode = await main(process.argv.slice(2));
