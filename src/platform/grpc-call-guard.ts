// How a node's gRPC servers answer what a caller sent wrong, on the API and the peer port alike.
//  - A request that does not decode is INVALID_ARGUMENT naming the method and the reason.
//    grpc-js's own answer is INTERNAL "Error deserializing request", which tells the caller the
//    server broke and hides what was wrong with the request. So is a call that sends no request
//    message, or several, to a method that takes one (grpc-js: UNIMPLEMENTED, as if the method
//    did not exist).
//  - The generated decoders (ts-proto) take a field number 0, or an END_GROUP tag that no group
//    opened, for the end of the message, silently: a corrupted request would be served as a
//    shorter one (a Put whose value was cut off). The top level of every request is walked
//    first (wireProblem), and bytes that are not a protobuf message there are refused.
//  - A status message is cut to statusDetailsBytesMax. Messages quote the request (an unknown
//    id, an address that is not HOST:PORT), and the request may be megabytes long: a message
//    whose trailers exceed the header block Node's HTTP/2 will send (64 KiB, compressed) never
//    reaches the caller, so the call hangs until its deadline and every other call on that
//    connection stops being answered with it.
// The guarded service definitions (refusingUndecodable) and the interceptor (callGuard) go
// together: the definitions hand an undecodable request on as a marker, the interceptor answers
// it, and no handler ever sees it.
import {
  Metadata,
  ServerInterceptingCall,
  status,
  type ServerInterceptingCallInterface,
  type ServerInterceptor,
  type ServiceDefinition,
} from '@grpc/grpc-js';
import { headUtf8 } from './utf8-text.js';

/** The longest status message a node sends, in UTF-8 bytes (at most three times that on the wire). */
export const statusDetailsBytesMax = 4096;

/** Lone UTF-16 surrogates, which a cut string may end with and which grpc-js cannot encode. */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** `details` as sent: well-formed, and at most statusDetailsBytesMax bytes (cut with "…"). */
export function boundedDetails(details: string): string {
  return headUtf8(details.replace(loneSurrogate, '\uFFFD'), statusDetailsBytesMax);
}

/** Groups nest at most this deep, as the generated decoders nest messages. */
const groupDepthMax = 100;

/**
 * Why `bytes` are not a protobuf message, judged by the wire structure of their top level only
 * (tags, lengths, groups), or undefined. What the fields hold is the generated decoder's to judge.
 */
export function wireProblem(bytes: Uint8Array): string | undefined {
  let at = 0;
  /** A varint's value (exact up to 2^53, which covers tags and lengths), or undefined if cut or overlong. */
  const varint = (): number | undefined => {
    let value = 0;
    for (let i = 0; i < 10 && at < bytes.length; i++) {
      const byte = bytes[at++] ?? 0;
      value += (byte & 0x7f) * 2 ** (7 * i);
      if ((byte & 0x80) === 0) return value;
    }
    return undefined;
  };
  const groups: number[] = [];
  while (at < bytes.length) {
    const start = at;
    const tag = varint();
    if (tag === undefined) return `the tag at byte ${start} is cut short or too long`;
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (field < 1 || field > 2 ** 29 - 1)
      return `field number ${field} at byte ${start} is not a field number`;
    let end = at;
    switch (wire) {
      case 0:
        if (varint() === undefined)
          return `the varint of field ${field} at byte ${start} is cut short or too long`;
        end = at;
        break;
      case 1:
        end = at + 8;
        break;
      case 2: {
        const length = varint();
        end = length === undefined ? Infinity : at + length;
        break;
      }
      case 3:
        groups.push(field);
        if (groups.length > groupDepthMax) return `groups nest deeper than ${groupDepthMax} at byte ${start}`;
        break;
      case 4:
        if (groups.pop() !== field)
          return `the end of group ${field} at byte ${start} closes no group of its own`;
        break;
      case 5:
        end = at + 4;
        break;
      default:
        return `wire type ${wire} of field ${field} at byte ${start} does not exist`;
    }
    if (end > bytes.length) return `field ${field} at byte ${start} runs past the end of the message`;
    at = end;
  }
  const open = groups.at(-1);
  return open === undefined ? undefined : `group ${open} is never closed`;
}

/** What a guarded deserializer hands on in place of a request that does not decode. */
class UndecodableRequest {
  readonly reason: string;
  constructor(reason: string) {
    this.reason = reason;
  }
}

/**
 * `definition` with deserializers that never throw: a request that does not decode (or whose top
 * level is not a protobuf message, see wireProblem) becomes a marker, which callGuard answers.
 * Serve it only on a server that has callGuard.
 */
export function refusingUndecodable<D extends ServiceDefinition>(definition: D): D {
  const guarded: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(definition)) {
    guarded[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer): unknown => {
        const problem = wireProblem(bytes);
        if (problem !== undefined) return new UndecodableRequest(problem);
        try {
          return method.requestDeserialize(bytes);
        } catch (err) {
          return new UndecodableRequest(err instanceof Error ? err.message : String(err));
        }
      },
    };
  }
  return guarded as D;
}

/**
 * Answers with INVALID_ARGUMENT a request that does not decode, and a call to a method that
 * takes one request message that sends none or more than one (grpc-js answers those
 * UNIMPLEMENTED, as if the method did not exist); cuts every status message sent.
 */
export const callGuard: ServerInterceptor = (method, call: ServerInterceptingCallInterface) => {
  let messages = 0;
  let refused = false;
  const refuse = (details: string): void => {
    refused = true;
    call.sendStatus({
      code: status.INVALID_ARGUMENT,
      details: boundedDetails(details),
      metadata: new Metadata(),
    });
  };
  return new ServerInterceptingCall(call, {
    start: (next) => {
      next({
        onReceiveMessage: (message: unknown, pass: (message: unknown) => void) => {
          if (refused) return;
          messages += 1;
          if (message instanceof UndecodableRequest) {
            refuse(`the request to ${method.path} does not decode: ${message.reason}`);
          } else if (!method.requestStream && messages > 1) {
            refuse(`${method.path} takes one request message; the call sent more`);
          } else pass(message);
        },
        onReceiveHalfClose: (pass: () => void) => {
          if (refused) return;
          if (!method.requestStream && messages === 0) {
            refuse(`${method.path} takes one request message; the call sent none`);
          } else pass();
        },
      });
    },
    sendStatus: (sent, next) => {
      next({ ...sent, details: boundedDetails(sent.details) });
    },
  });
};
