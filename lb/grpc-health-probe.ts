// A grpc.health.v1 Check as raw bytes, for proxies that can send bytes but not speak gRPC.
//
// HAProxy 2.6 has no gRPC health check, and its HTTP check cannot carry one: the request body
// of `http-check send` is a C string, and every gRPC message starts with a NUL flag byte and a
// 4-byte length (an empty HealthCheckRequest is five NULs). `tcp-check send-binary` takes any
// bytes, so the check speaks h2c itself: the connection preface, an empty SETTINGS, one HEADERS
// frame (HPACK literals, no Huffman, no dynamic table) and one DATA frame on stream 1. The
// node answers with HEADERS, a DATA frame holding HealthCheckResponse, and trailers; the check
// then looks for the response message's bytes. HTTP/2 lets a client send its request before it
// has seen the server's SETTINGS, so nothing needs to be acknowledged on the way.
//
// Pure: bytes in, bytes out.

const checkPath = '/grpc.health.v1.Health/Check';

/** HealthCheckResponse.ServingStatus values (proto/health.proto). */
export const servingStatus = { SERVING: 1, NOT_SERVING: 2 } as const;

const http2Preface = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';
const frameType = { DATA: 0x0, HEADERS: 0x1, SETTINGS: 0x4 } as const;
const endStream = 0x1;
const endHeaders = 0x4;

/**
 * The client side of one Check call on a fresh h2c connection. The request message is empty,
 * that is service "": the node as a whole (src/api/health-service.ts).
 */
export function healthCheckRequestBytes(authority: string): Uint8Array {
  const headerBlock = concat(
    indexed(3), // :method POST
    indexed(6), // :scheme http
    literalIndexedName(4, checkPath), // :path
    literalIndexedName(1, authority), // :authority
    literalIndexedName(31, 'application/grpc'), // content-type
    literalNewName('te', 'trailers'),
  );
  return concat(
    ascii(http2Preface),
    frame(frameType.SETTINGS, 0, 0, new Uint8Array(0)),
    frame(frameType.HEADERS, endHeaders, 1, headerBlock),
    frame(frameType.DATA, endStream, 1, grpcMessage(new Uint8Array(0))),
  );
}

/** The gRPC message (length prefix and protobuf) of a HealthCheckResponse with this status. */
export function healthCheckResponseMessage(status: number): Uint8Array {
  // Field 1 (status), varint: tag 0x08, then the value (all statuses fit one byte).
  return grpcMessage(Uint8Array.of(0x08, status));
}

export function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

function grpcMessage(protobuf: Uint8Array): Uint8Array {
  const prefix = new Uint8Array(5); // flag 0: not compressed
  new DataView(prefix.buffer).setUint32(1, protobuf.length);
  return concat(prefix, protobuf);
}

function frame(type: number, flags: number, streamId: number, payload: Uint8Array): Uint8Array {
  const header = new Uint8Array(9);
  const view = new DataView(header.buffer);
  view.setUint8(0, payload.length >>> 16);
  view.setUint16(1, payload.length & 0xffff);
  view.setUint8(3, type);
  view.setUint8(4, flags);
  view.setUint32(5, streamId);
  return concat(header, payload);
}

/** RFC 7541 6.1: a header field from the static table. */
function indexed(index: number): Uint8Array {
  return integer(index, 7, 0x80);
}

/** RFC 7541 6.2.2: literal without indexing, name from the static table. */
function literalIndexedName(nameIndex: number, value: string): Uint8Array {
  return concat(integer(nameIndex, 4, 0x00), stringLiteral(value));
}

/** RFC 7541 6.2.2: literal without indexing, new name. */
function literalNewName(name: string, value: string): Uint8Array {
  return concat(Uint8Array.of(0x00), stringLiteral(name), stringLiteral(value));
}

/** RFC 7541 5.2, without Huffman coding. */
function stringLiteral(text: string): Uint8Array {
  const bytes = ascii(text);
  return concat(integer(bytes.length, 7, 0x00), bytes);
}

/** RFC 7541 5.1: an integer with an N-bit prefix, the first byte's high bits set to `pattern`. */
function integer(value: number, prefixBits: number, pattern: number): Uint8Array {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Uint8Array.of(pattern | value);
  const out = [pattern | max];
  let rest = value - max;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest >>>= 7;
  }
  out.push(rest);
  return Uint8Array.from(out);
}

function ascii(text: string): Uint8Array {
  if (!/^[\x20-\x7e\r\n]*$/.test(text)) throw new Error(`"${text}" is not printable ASCII`);
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

function concat(...parts: Uint8Array[]): Uint8Array {
  return Buffer.concat(parts);
}
