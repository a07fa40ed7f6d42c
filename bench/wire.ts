// The few protobuf messages the benchmark sends, hand-encoded, and one raw unary call over
// grpc-js. Both systems are driven through exactly this code, so neither gets a faster client:
// slipway's PutRequest {string key = 1; bytes value = 2} and etcd's etcdserverpb.PutRequest
// {bytes key = 1; bytes value = 2} have the same wire form, and so do GetRequest/RangeRequest
// with only the key set (slipway local=false, etcd serializable=false: both linearizable).
import { Client, credentials, Metadata } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';

export type System = 'slipway' | 'etcd';
export type Op = 'put' | 'get';

/** gRPC method paths per system. */
export const paths: Record<System, { put: string; get: string; status: string }> = {
  slipway: {
    put: '/slipway.kv.v1.Kv/Put',
    get: '/slipway.kv.v1.Kv/Get',
    status: '/slipway.kv.v1.Kv/Status',
  },
  etcd: {
    put: '/etcdserverpb.KV/Put',
    get: '/etcdserverpb.KV/Range',
    status: '/etcdserverpb.Maintenance/Status',
  },
};

function varint(n: number): number[] {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

function bytesField(field: number, data: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([...varint((field << 3) | 2), ...varint(data.byteLength)]), data]);
}

/** PutRequest (both systems): key = 1, value = 2. */
export function encodePut(key: string, value: Uint8Array): Buffer {
  return Buffer.concat([bytesField(1, Buffer.from(key)), bytesField(2, value)]);
}

/** slipway GetRequest / etcd RangeRequest with only the key: a linearizable single-key read. */
export function encodeGet(key: string): Buffer {
  return bytesField(1, Buffer.from(key));
}

/** Top-level fields of a message: varints as bigint (etcd ids are 64-bit), the rest as bytes. */
export function decodeFields(buf: Uint8Array): Map<number, bigint | Uint8Array> {
  const out = new Map<number, bigint | Uint8Array>();
  let pos = 0;
  const readVarint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (pos >= buf.byteLength) throw new Error('truncated varint');
      const b = buf[pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (pos < buf.byteLength) {
    const tag = Number(readVarint());
    const field = tag >>> 3;
    switch (tag & 7) {
      case 0:
        out.set(field, readVarint());
        break;
      case 1:
        out.set(field, buf.subarray(pos, pos + 8));
        pos += 8;
        break;
      case 2: {
        const len = Number(readVarint());
        out.set(field, buf.subarray(pos, pos + len));
        pos += len;
        break;
      }
      case 5:
        out.set(field, buf.subarray(pos, pos + 4));
        pos += 4;
        break;
      default:
        throw new Error(`unsupported wire type ${tag & 7}`);
    }
  }
  return out;
}

export function fieldString(m: Map<number, bigint | Uint8Array>, field: number): string {
  const v = m.get(field);
  return v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : '';
}

export function fieldVarint(m: Map<number, bigint | Uint8Array>, field: number): bigint {
  const v = m.get(field);
  return typeof v === 'bigint' ? v : 0n;
}

export function fieldMessage(
  m: Map<number, bigint | Uint8Array>,
  field: number,
): Map<number, bigint | Uint8Array> {
  const v = m.get(field);
  return v instanceof Uint8Array ? decodeFields(v) : new Map<number, bigint | Uint8Array>();
}

/**
 * One gRPC channel (its own HTTP/2 connection: grpc-js would otherwise share one subchannel
 * between all channels to the same address).
 */
export function openChannel(addr: string): Client {
  return new Client(addr, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
}

export function waitReady(c: Client, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    c.waitForReady(Date.now() + timeoutMs, (err) => {
      if (err === undefined || err === null) resolve();
      else reject(err);
    });
  });
}

const identity = (b: Buffer): Buffer => b;

/**
 * A unary call with raw bytes in and out, with `token` as `authorization: Bearer` when given.
 * Rejects with the grpc ServiceError.
 */
export function unary(
  c: Client,
  path: string,
  req: Buffer,
  deadlineMs: number,
  token?: string,
): Promise<Buffer> {
  const md = new Metadata();
  if (token !== undefined) md.set('authorization', `Bearer ${token}`);
  return new Promise((resolve, reject) => {
    c.makeUnaryRequest<Buffer, Buffer>(
      path,
      identity,
      identity,
      req,
      md,
      { deadline: Date.now() + deadlineMs },
      (err: ServiceError | null, res?: Buffer) => {
        if (err !== null) reject(err);
        else resolve(res ?? Buffer.alloc(0));
      },
    );
  });
}

export function errorCode(err: unknown): string {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = err.code;
    if (typeof code === 'number') return `grpc_${code}`;
  }
  return 'other';
}
