// What a simulated machine of the storm benchmark speaks before its worker runs: DHCP as a PXE
// ROM, as iPXE and as the boot OS would (one shared client socket, replies matched by xid), a
// TFTP read with blksize (as PXE ROMs fetch iPXE), and HTTP from the machine's own address (the
// credential claim is checked against it). Every exchange retransmits on a timer, as firmware
// does, and gives up at the caller's deadline. Like EDK2, and most PXE stacks in server
// firmware, a machine takes replies only from the server it asked: a TFTP packet from any other
// address than the one the read request went to is ignored, and so is a DHCP ACK or NAK whose
// server identifier is not the one the REQUEST named.
import { createSocket, type Socket } from 'node:dgram';
import { request } from 'node:http';
import { createHash } from 'node:crypto';
import {
  broadcastFlag,
  decodeDhcpPacket,
  encodeDhcpPacket,
  type DhcpPacket,
  decodePacket,
  encodePacket,
  type TftpPacket,
} from '../src/boot/index.js';
import type { DhcpOptions } from '../src/boot/index.js';
import { Prng } from '../src/platform/prng.js';

/** Which DHCP client a machine is at this point of its boot. */
export type DhcpClientKind = 'pxe' | 'ipxe' | 'bootos';

export interface DhcpLease {
  readonly address: string;
  readonly serverId: string;
  /** siaddr: where the boot file is fetched from. */
  readonly nextServer: string;
  /** The boot file name (TFTP) or URL (iPXE script); empty when none was given. */
  readonly bootfile: string;
  /** DISCOVERs and REQUESTs sent again after a timeout. */
  readonly retransmits: number;
}

/** EDK2's check on an answer to a REQUEST: it must come from the server the REQUEST named. */
export function fromServerAsked(reply: DhcpPacket, serverId: string): boolean {
  return reply.options.serverId === serverId;
}

/**
 * How long each kind of client waits for an answer before it sends again, as the real ones do: a
 * PXE ROM or EDK2's DHCP 4, 8, 16, then 32 s (the PXE specification's schedule, and EDK2's
 * default); iPXE 1 s doubling to 10 s; the boot OS's udhcpc every 3 s. Sending every second
 * whatever the firmware, as this fleet once did, made a storm's DHCP load grow with how long
 * the machines waited, so with the square of their number.
 */
const retransmitScheduleMs: Readonly<Record<DhcpClientKind, readonly number[]>> = {
  pxe: [4000, 8000, 16_000, 32_000],
  ipxe: [1000, 2000, 4000, 8000, 10_000],
  bootos: [3000],
};

/** A REQUEST unanswered for this long starts the exchange over with a DISCOVER. */
function requestPatienceMs(kind: DhcpClientKind): number {
  const schedule = retransmitScheduleMs[kind];
  return [0, 1, 2, 3].reduce((sum, i) => sum + (schedule[Math.min(i, schedule.length - 1)] ?? 0), 0);
}

const zero = '0.0.0.0';

/** BIOS machines PXE-boot (iPXE over TFTP); UEFI ones use UEFI HTTP boot (iPXE over HTTP). */
export type Firmware = 'bios' | 'uefi';

function clientOptions(kind: DhcpClientKind, firmware: Firmware): DhcpOptions {
  const requested = { parameterRequestList: [1, 3, 6, 15, 43, 54, 60, 66, 67, 97, 128, 175] };
  const pxeClass =
    firmware === 'bios' ? 'PXEClient:Arch:00000:UNDI:002001' : 'PXEClient:Arch:00007:UNDI:003016';
  const arch = firmware === 'bios' ? 0 : 7;
  switch (kind) {
    case 'pxe':
      return firmware === 'bios'
        ? {
            ...requested,
            vendorClass: pxeClass,
            clientArch: [0],
            clientNdi: { type: 1, major: 2, minor: 1 },
            maxMessageSize: 1260,
          }
        : {
            ...requested,
            vendorClass: 'HTTPClient:Arch:00016:UNDI:003001',
            clientArch: [16],
            clientNdi: { type: 1, major: 3, minor: 1 },
            maxMessageSize: 1472,
          };
    case 'ipxe':
      return {
        ...requested,
        vendorClass: pxeClass,
        clientArch: [arch],
        userClass: { format: 'plain', classes: ['iPXE'] },
        maxMessageSize: 1472,
      };
    case 'bootos':
      return { parameterRequestList: [1, 3, 6, 12, 15, 28, 42], vendorClass: 'udhcp 1.36.1' };
  }
}

/** One DHCP client socket for every simulated machine in this process. */
export class FleetDhcp {
  readonly #socket: Socket;
  readonly #waiting = new Map<number, (reply: DhcpPacket) => void>();
  /** Spreads each wait by ±25 %, so a fleet powered on together does not retransmit in step. */
  readonly #jitter: Prng;
  #otherServer = 0;
  #nextXid: number;

  private constructor(socket: Socket, seed: number) {
    this.#socket = socket;
    this.#nextXid = seed >>> 0;
    this.#jitter = new Prng(seed ^ 0x6a177e2);
    socket.on('message', (bytes) => {
      let reply: DhcpPacket;
      try {
        reply = decodeDhcpPacket(bytes);
      } catch {
        return;
      }
      if (reply.op === 'reply') this.#waiting.get(reply.xid)?.(reply);
    });
  }

  static async open(seed: number): Promise<FleetDhcp> {
    const socket = createSocket({ type: 'udp4', reuseAddr: true });
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(68, zero, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    socket.setBroadcast(true);
    socket.setRecvBufferSize(8 << 20);
    return new FleetDhcp(socket, seed);
  }

  close(): void {
    this.#socket.close();
  }

  /** ACKs and NAKs ignored so far because another server than the one asked sent them. */
  get repliesFromOtherServers(): number {
    return this.#otherServer;
  }

  /** DISCOVER, OFFER, REQUEST, ACK; a NAK or a silent server starts over until `deadlineMs`. */
  async lease(
    mac: Uint8Array,
    kind: DhcpClientKind,
    firmware: Firmware,
    deadlineMs: number,
  ): Promise<DhcpLease> {
    let retransmits = 0;
    for (;;) {
      const xid = this.#xid();
      const options = clientOptions(kind, firmware);
      const offer = await this.#exchange(
        xid,
        mac,
        kind,
        'DISCOVER',
        options,
        'OFFER',
        deadlineMs,
        () => true,
      );
      retransmits += offer.sent - 1;
      const serverId = offer.reply.options.serverId ?? offer.reply.siaddr;
      const ack = await this.#exchange(
        xid,
        mac,
        kind,
        'REQUEST',
        { ...options, requestedIp: offer.reply.yiaddr, serverId },
        'ACK',
        Math.min(deadlineMs, Date.now() + requestPatienceMs(kind)),
        (reply) => fromServerAsked(reply, serverId),
      ).catch(() => undefined);
      if (ack === undefined || ack.reply.options.messageType !== 'ACK') {
        retransmits += 4;
        continue;
      }
      retransmits += ack.sent - 1;
      const reply = ack.reply;
      return {
        address: reply.yiaddr,
        serverId,
        nextServer: reply.siaddr,
        bootfile: reply.file !== '' ? reply.file : (reply.options.bootfileName ?? ''),
        retransmits,
      };
    }
  }

  #xid(): number {
    this.#nextXid = (this.#nextXid + 0x9e3779b1) >>> 0;
    return this.#nextXid;
  }

  /** Sends until an accepted reply of the wanted type (or a NAK) arrives; throws at the deadline. */
  #exchange(
    xid: number,
    mac: Uint8Array,
    kind: DhcpClientKind,
    type: 'DISCOVER' | 'REQUEST',
    options: DhcpOptions,
    wanted: 'OFFER' | 'ACK',
    deadlineMs: number,
    accept: (reply: DhcpPacket) => boolean,
  ): Promise<{ reply: DhcpPacket; sent: number }> {
    const chaddr = new Uint8Array(16);
    chaddr.set(mac);
    const bytes = encodeDhcpPacket({
      op: 'request',
      htype: 1,
      hlen: 6,
      hops: 0,
      xid,
      secs: 0,
      flags: broadcastFlag,
      ciaddr: zero,
      yiaddr: zero,
      siaddr: zero,
      giaddr: zero,
      chaddr,
      sname: '',
      file: '',
      options: { messageType: type, ...options },
    });
    return new Promise((resolve, reject) => {
      let sent = 0;
      let timer: NodeJS.Timeout | undefined;
      const finish = (): void => {
        clearTimeout(timer);
        this.#waiting.delete(xid);
      };
      const send = (): void => {
        if (Date.now() >= deadlineMs) {
          finish();
          reject(new Error(`DHCP ${type}: no ${wanted} before the deadline (${String(sent)} sent)`));
          return;
        }
        sent++;
        this.#socket.send(bytes, 67, '255.255.255.255');
        const schedule = retransmitScheduleMs[kind];
        const waitMs = schedule[Math.min(sent, schedule.length) - 1] ?? 1000;
        timer = setTimeout(send, Math.round(waitMs * (0.75 + 0.5 * this.#jitter.float())));
      };
      this.#waiting.set(xid, (reply) => {
        const got = reply.options.messageType;
        if (got !== wanted && got !== 'NAK') return;
        if (!accept(reply)) {
          this.#otherServer++;
          return;
        }
        finish();
        resolve({ reply, sent });
      });
      send();
    });
  }
}

export interface TftpResult {
  readonly bytes: number;
  readonly sha256: string;
  readonly retransmits: number;
  /** Packets ignored because they came from another address than the one the request went to. */
  readonly otherSource: number;
}

/**
 * Reads `filename` from `server`:`port` into memory, from `localAddress`, with blksize 1432 as
 * PXE ROMs ask. A transfer that stalls (its server died, or it answers from another address
 * than `server`) starts over with a new RRQ.
 */
export async function tftpRead(
  localAddress: string,
  server: string,
  filename: string,
  deadlineMs: number,
  port = 69,
): Promise<TftpResult> {
  let retransmits = 0;
  let otherSource = 0;
  for (;;) {
    if (Date.now() >= deadlineMs) {
      throw new Error(
        `TFTP ${filename}: not read before the deadline` +
          (otherSource === 0
            ? ''
            : `; ${String(otherSource)} packet(s) came from another address than ${server}`),
      );
    }
    const attempt = await tftpAttempt({ localAddress, server, port, filename, deadlineMs }).catch(
      (err: unknown) => {
        if (err instanceof TftpStall) return err;
        throw err;
      },
    );
    otherSource += attempt.otherSource;
    if (!(attempt instanceof TftpStall))
      return { ...attempt, retransmits: retransmits + attempt.retransmits, otherSource };
    retransmits += attempt.retransmits + 1;
  }
}

class TftpStall extends Error {
  readonly retransmits: number;
  readonly otherSource: number;
  constructor(retransmits: number, otherSource: number) {
    super('the TFTP transfer stalled');
    this.retransmits = retransmits;
    this.otherSource = otherSource;
  }
}

interface TftpAttempt {
  readonly localAddress: string;
  readonly server: string;
  readonly port: number;
  readonly filename: string;
  readonly deadlineMs: number;
}

const tftpBlockSize = 1432;
const tftpTimeoutMs = 1000;
const tftpTriesPerPacket = 4;

function tftpAttempt(a: TftpAttempt): Promise<TftpResult> {
  const { localAddress, server, filename, deadlineMs } = a;
  return new Promise((resolve, reject) => {
    const socket = createSocket('udp4');
    const hash = createHash('sha256');
    let bytes = 0;
    let expected = 1;
    let blockSize = 512;
    let peer: { address: string; port: number } | undefined;
    let last: Uint8Array = encodePacket({
      type: 'rrq',
      filename,
      mode: 'octet',
      options: new Map([
        ['blksize', String(tftpBlockSize)],
        ['tsize', '0'],
      ]),
    });
    let tries = 0;
    let retransmits = 0;
    let otherSource = 0;
    let timer: NodeJS.Timeout | undefined;
    const end = (error: Error | undefined, result?: TftpResult): void => {
      clearTimeout(timer);
      socket.close();
      if (error !== undefined) reject(error);
      else if (result !== undefined) resolve(result);
    };
    const send = (): void => {
      if (Date.now() >= deadlineMs || tries >= tftpTriesPerPacket) {
        end(new TftpStall(retransmits, otherSource));
        return;
      }
      if (tries > 0) retransmits++;
      tries++;
      socket.send(last, peer?.port ?? a.port, server);
      timer = setTimeout(send, tftpTimeoutMs);
    };
    const answer = (packet: TftpPacket): void => {
      last = encodePacket(packet);
      tries = 0;
      clearTimeout(timer);
      send();
    };
    socket.on('error', (err) => end(err));
    socket.on('message', (message, rinfo) => {
      // As EDK2: only the address the request went to. The transfer comes from a port of its own
      // (RFC 1350's TID), which the first answer fixes.
      if (rinfo.address !== server) {
        otherSource++;
        return;
      }
      if (peer === undefined) peer = { address: rinfo.address, port: rinfo.port };
      else if (rinfo.port !== peer.port) return;
      const decoded = decodePacket(message);
      if (!decoded.ok) return;
      const packet = decoded.packet;
      if (packet.type === 'error') {
        end(new Error(`TFTP ${filename}: error ${String(packet.code)} from ${server}: ${packet.message}`));
        return;
      }
      if (packet.type === 'oack') {
        blockSize = Number(packet.options.get('blksize') ?? '512');
        answer({ type: 'ack', block: 0 });
        return;
      }
      if (packet.type !== 'data') return;
      if (packet.block !== (expected & 0xffff)) {
        // A duplicate of the previous block: our ACK was lost; the retransmission timer re-sends it.
        return;
      }
      hash.update(packet.data);
      bytes += packet.data.length;
      expected++;
      if (packet.data.length < blockSize) {
        // The socket closes once the last ACK has left: closed at once, it dropped the ACK, and
        // the server kept the finished transfer's slot until its retransmissions ran out.
        const result = { bytes, sha256: hash.digest('hex'), retransmits, otherSource };
        clearTimeout(timer);
        socket.send(encodePacket({ type: 'ack', block: packet.block }), peer.port, peer.address, () =>
          end(undefined, result),
        );
        return;
      }
      answer({ type: 'ack', block: packet.block });
    });
    socket.bind(0, localAddress, () => send());
  });
}

export interface HttpAnswer {
  readonly status: number;
  readonly body: Buffer;
}

/** One HTTP request from `localAddress`, with a timeout; rejects on a broken connection. */
export function httpRequest(
  url: string,
  localAddress: string,
  options: { readonly method?: 'GET' | 'POST'; readonly json?: unknown; readonly timeoutMs: number },
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const body = options.json === undefined ? undefined : Buffer.from(JSON.stringify(options.json));
    const req = request(
      url,
      {
        method: options.method ?? 'GET',
        localAddress,
        agent: false,
        timeout: options.timeoutMs,
        headers:
          body === undefined ? {} : { 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () =>
      req.destroy(new Error(`HTTP ${url}: no answer within ${String(options.timeoutMs)} ms`)),
    );
    req.on('error', reject);
    req.end(body);
  });
}
