// A raw HTTP/2 client connection, its frames written by hand: it does what node:http2 and
// grpc-js never do, such as opening more streams than the server's SETTINGS allow (their
// nghttp2 holds such streams back until one ends). For tests and benchmarks of the API's limits.
// Headers go out as HPACK literals without indexing or Huffman coding, which every decoder
// accepts; what the server sends back is read as frames only (which streams it answered with
// HEADERS, which it reset and with what code, a GOAWAY), not decoded.
import { connect, type Socket } from 'node:net';

const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const frameType = {
  data: 0,
  headers: 1,
  rstStream: 3,
  settings: 4,
  ping: 6,
  goaway: 7,
} as const;

const flagEndStream = 0x1;
const flagAck = 0x1;
const flagEndHeaders = 0x4;

/** RST_STREAM and GOAWAY error codes (RFC 9113, section 7) by name, for messages. */
export const h2ErrorNames: Readonly<Record<number, string>> = {
  0: 'NO_ERROR',
  1: 'PROTOCOL_ERROR',
  2: 'INTERNAL_ERROR',
  3: 'FLOW_CONTROL_ERROR',
  7: 'REFUSED_STREAM',
  8: 'CANCEL',
  11: 'ENHANCE_YOUR_CALM',
};

export const settingMaxConcurrentStreams = 0x3;

function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an N-bit prefix (RFC 7541, 5.1), the prefix bits' pattern in `first`. */
function hpackInteger(value: number, prefixBits: number, first: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

function hpackString(text: string): Buffer {
  const bytes = Buffer.from(text, 'latin1');
  return Buffer.concat([Buffer.from(hpackInteger(bytes.length, 7, 0)), bytes]);
}

/** A header block of literals without indexing, new names (RFC 7541, 6.2.2). */
export function headerBlock(headers: readonly (readonly [string, string])[]): Buffer {
  return Buffer.concat(headers.flatMap(([n, v]) => [Buffer.from([0]), hpackString(n), hpackString(v)]));
}

/** The request headers of a gRPC call to `path`. */
export function grpcRequestHeaders(
  path: string,
  authority: string,
  extra: readonly (readonly [string, string])[] = [],
): (readonly [string, string])[] {
  return [
    [':method', 'POST'],
    [':scheme', 'http'],
    [':path', path],
    [':authority', authority],
    ['content-type', 'application/grpc'],
    ['te', 'trailers'],
    ...extra,
  ];
}

/** A gRPC message: uncompressed flag, 4-byte length, the bytes. */
export function grpcMessage(body: Buffer, claimedLength = body.length): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(claimedLength, 1);
  return Buffer.concat([head, body]);
}

export interface RawH2Options {
  readonly host: string;
  readonly port: number;
  /** The source address to dial from (any of 127.0.0.0/8 on Linux). */
  readonly localAddress?: string;
  /**
   * Acknowledge the server's SETTINGS: its limits then bind the client, and opening a stream
   * beyond them is a protocol error. Unacknowledged, nghttp2 refuses such streams one by one.
   */
  readonly ackSettings: boolean;
  readonly timeoutMs?: number;
}

export class RawH2Connection {
  readonly #socket: Socket;
  #buffered: Buffer = Buffer.alloc(0);
  #nextStreamId = 1;
  /** The server's SETTINGS (identifier to value). */
  readonly serverSettings = new Map<number, number>();
  /** Streams the server answered with HEADERS. */
  readonly answered = new Set<number>();
  /** Streams the server reset, with the error code. */
  readonly resets = new Map<number, number>();
  goaway: { lastStreamId: number; code: number } | undefined;
  closed = false;
  readonly #ackSettings: boolean;
  #onChange: (() => void)[] = [];

  private constructor(socket: Socket, ackSettings: boolean) {
    this.#socket = socket;
    this.#ackSettings = ackSettings;
    socket.on('data', (chunk: Buffer) => this.#read(chunk));
    socket.on('close', () => {
      this.closed = true;
      this.#changed();
    });
    // A reset connection is recorded as closed; the test or benchmark reads what it needs.
    socket.on('error', () => undefined);
  }

  /** Dials, sends the preface and empty SETTINGS, and waits for the server's SETTINGS. */
  static async open(o: RawH2Options): Promise<RawH2Connection> {
    const socket = connect({
      host: o.host,
      port: o.port,
      ...(o.localAddress === undefined ? {} : { localAddress: o.localAddress }),
    });
    socket.setNoDelay(true);
    const c = new RawH2Connection(socket, o.ackSettings);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    socket.write(Buffer.concat([preface, frame(frameType.settings, 0, 0, Buffer.alloc(0))]));
    await c.until(() => c.serverSettings.size > 0 || c.closed, "the server's SETTINGS", o.timeoutMs ?? 5000);
    return c;
  }

  get localAddress(): string | undefined {
    return this.#socket.localAddress;
  }

  /**
   * Opens `count` streams in one write (so the server reads them together): each HEADERS, then
   * `body` as DATA unless it is undefined. `endStream`: the request is complete (a unary call);
   * otherwise the stream stays open. Returns their ids.
   */
  openStreams(
    count: number,
    headers: readonly (readonly [string, string])[],
    body?: Buffer,
    endStream = true,
  ): number[] {
    const block = headerBlock(headers);
    const headersFlags = flagEndHeaders | (body === undefined && endStream ? flagEndStream : 0);
    const ids: number[] = [];
    const frames: Buffer[] = [];
    for (let i = 0; i < count; i++) {
      const id = this.#nextStreamId;
      this.#nextStreamId += 2;
      ids.push(id);
      frames.push(frame(frameType.headers, headersFlags, id, block));
      if (body !== undefined) frames.push(frame(frameType.data, endStream ? flagEndStream : 0, id, body));
    }
    if (!this.#socket.destroyed) this.#socket.write(Buffer.concat(frames));
    return ids;
  }

  /** Waits until `done()` holds, or fails after `timeoutMs`. */
  until(done: () => boolean, what: string, timeoutMs: number): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#onChange = this.#onChange.filter((f) => f !== check);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      const check = (): void => {
        if (!done()) return;
        clearTimeout(timer);
        this.#onChange = this.#onChange.filter((f) => f !== check);
        resolve();
      };
      this.#onChange.push(check);
    });
  }

  close(): void {
    this.#socket.destroy();
  }

  #changed(): void {
    for (const f of [...this.#onChange]) f();
  }

  #read(chunk: Buffer): void {
    this.#buffered = this.#buffered.length === 0 ? chunk : Buffer.concat([this.#buffered, chunk]);
    while (this.#buffered.length >= 9) {
      const length = this.#buffered.readUIntBE(0, 3);
      if (this.#buffered.length < 9 + length) break;
      const type = this.#buffered[3] ?? 0;
      const flags = this.#buffered[4] ?? 0;
      const streamId = this.#buffered.readUInt32BE(5) & 0x7fffffff;
      const payload = this.#buffered.subarray(9, 9 + length);
      this.#buffered = this.#buffered.subarray(9 + length);
      this.#frame(type, flags, streamId, payload);
    }
    this.#changed();
  }

  #frame(type: number, flags: number, streamId: number, payload: Buffer): void {
    switch (type) {
      case frameType.settings:
        if ((flags & flagAck) !== 0) return;
        for (let at = 0; at + 6 <= payload.length; at += 6)
          this.serverSettings.set(payload.readUInt16BE(at), payload.readUInt32BE(at + 2));
        // An empty SETTINGS still counts as received.
        if (payload.length === 0) this.serverSettings.set(0, 0);
        if (this.#ackSettings) this.#socket.write(frame(frameType.settings, flagAck, 0, Buffer.alloc(0)));
        return;
      case frameType.headers:
        this.answered.add(streamId);
        return;
      case frameType.rstStream:
        this.resets.set(streamId, payload.readUInt32BE(0));
        return;
      case frameType.ping:
        if ((flags & flagAck) === 0 && !this.#socket.destroyed)
          this.#socket.write(frame(frameType.ping, flagAck, 0, payload));
        return;
      case frameType.goaway:
        this.goaway = { lastStreamId: payload.readUInt32BE(0) & 0x7fffffff, code: payload.readUInt32BE(4) };
        return;
      default:
    }
  }
}
