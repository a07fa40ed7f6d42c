// One state-of-the-world ADS stream as a pure state machine (Envoy's xds_protocol.rst): requests
// and membership updates in, responses and notes out. Per resource type it keeps what the client
// subscribed to and what was last sent (version, nonce):
//  - a request whose response_nonce is not the last one sent for its type is stale: ignored;
//  - a request with error_detail is a NACK: noted, and the same content is not sent again;
//  - a request that echoes the last nonce is an ACK (or a change of subscription);
//  - a response goes out on a type's first request, when its subscription changes, and when the
//    content it selects changes (a new version), in the order CDS, EDS, LDS, RDS (make before break).
// A version is a digest of the content it names, so two nodes serving the same membership and
// health send the same versions, and a client that moves to another node sees no change.
// Pure: no clock, no sockets (nonces count up per stream).
import { createHash } from 'node:crypto';
import type { Any } from '../../src/gen/xds.js';
import type { XdsClient, XdsMember, XdsResource, XdsServing, XdsTypeUrl } from './resources.js';
import { envoyListenKey, isXdsTypeUrl, xdsResources, xdsTypeUrl } from './resources.js';

/** The fields of a DiscoveryRequest the server reads. */
export interface AdsRequest {
  readonly typeUrl: string;
  readonly resourceNames: readonly string[];
  readonly versionInfo: string;
  readonly responseNonce: string;
  readonly errorDetail?: { readonly code: number; readonly message: string } | undefined;
  readonly node?:
    | {
        readonly id: string;
        readonly metadata?:
          { readonly fields: Readonly<Record<string, { readonly stringValue: string }>> } | undefined;
      }
    | undefined;
}

export interface AdsResponse {
  readonly typeUrl: XdsTypeUrl;
  readonly versionInfo: string;
  readonly nonce: string;
  readonly resources: readonly Any[];
}

/** What happened, for the driver to log. */
export type AdsNote =
  | { readonly kind: 'ack'; readonly typeUrl: XdsTypeUrl; readonly version: string }
  | {
      readonly kind: 'nack';
      readonly typeUrl: XdsTypeUrl;
      readonly version: string;
      readonly message: string;
    }
  | { readonly kind: 'stale'; readonly typeUrl: XdsTypeUrl; readonly nonce: string }
  | { readonly kind: 'unknown-type'; readonly typeUrl: string };

export interface AdsStep {
  readonly responses: readonly AdsResponse[];
  readonly notes: readonly AdsNote[];
}

/** A request the server refuses (the stream ends with INVALID_ARGUMENT). */
export class AdsRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AdsRequestError';
  }
}

/** Bounds on one request: the few names a client has a use for, each of a sane length. */
export const resourceNamesMax = 64;
export const resourceNameBytesMax = 256;

interface Subscription {
  wildcard: boolean;
  names: ReadonlySet<string>;
  /** Undefined until the first response of this type on this stream. */
  sentVersion: string | undefined;
  sentNonce: string;
}

/** Responses go out in this order, so a client learns of a cluster before it is routed to. */
const sendOrder: readonly XdsTypeUrl[] = [
  xdsTypeUrl.cluster,
  xdsTypeUrl.endpoints,
  xdsTypeUrl.listener,
  xdsTypeUrl.route,
];

export class AdsStream {
  #members: readonly XdsMember[];
  #client: XdsClient = {};
  #clientKnown = false;
  #nonce = 0;
  readonly #subs = new Map<XdsTypeUrl, Subscription>();
  readonly #serving: XdsServing;

  constructor(members: readonly XdsMember[], serving: XdsServing = { tls: false }) {
    this.#members = members;
    this.#serving = serving;
  }

  /** Handles one request from the client; throws AdsRequestError on a request out of bounds. */
  request(req: AdsRequest): AdsStep {
    checkBounds(req);
    if (!this.#clientKnown && req.node !== undefined) {
      // The node is guaranteed only in a stream's first request.
      this.#clientKnown = true;
      this.#client = { envoyListenAddr: req.node.metadata?.fields[envoyListenKey]?.stringValue };
    }
    const typeUrl = req.typeUrl;
    if (!isXdsTypeUrl(typeUrl)) return { responses: [], notes: [{ kind: 'unknown-type', typeUrl }] };
    const sub = this.#subs.get(typeUrl);
    if (sub !== undefined && req.responseNonce !== '' && req.responseNonce !== sub.sentNonce) {
      return { responses: [], notes: [{ kind: 'stale', typeUrl, nonce: req.responseNonce }] };
    }
    const notes: AdsNote[] = [];
    if (sub?.sentVersion !== undefined && req.responseNonce !== '') {
      notes.push(
        req.errorDetail === undefined
          ? { kind: 'ack', typeUrl, version: req.versionInfo }
          : { kind: 'nack', typeUrl, version: sub.sentVersion, message: req.errorDetail.message },
      );
    }
    const names = req.resourceNames.filter((n) => n !== '*');
    const wildcard =
      req.resourceNames.includes('*') ||
      (req.resourceNames.length === 0 && (sub === undefined || sub.wildcard));
    const changed =
      sub === undefined ||
      sub.wildcard !== wildcard ||
      sub.names.size !== names.length ||
      names.some((n) => !sub.names.has(n));
    const next: Subscription = sub ?? {
      wildcard,
      names: new Set(names),
      sentVersion: undefined,
      sentNonce: '',
    };
    next.wildcard = wildcard;
    next.names = new Set(names);
    this.#subs.set(typeUrl, next);
    const all = xdsResources(this.#members, this.#client, this.#serving);
    const response = this.#respond(typeUrl, next, all, changed);
    return { responses: response === undefined ? [] : [response], notes };
  }

  /** The membership or a member's health changed: the responses whose content changed with it. */
  update(members: readonly XdsMember[]): readonly AdsResponse[] {
    this.#members = members;
    const all = xdsResources(members, this.#client, this.#serving);
    const out: AdsResponse[] = [];
    for (const typeUrl of sendOrder) {
      const sub = this.#subs.get(typeUrl);
      if (sub === undefined) continue;
      const response = this.#respond(typeUrl, sub, all, false);
      if (response !== undefined) out.push(response);
    }
    return out;
  }

  /** The response for `sub` when it is due (first, changed subscription, or new content). */
  #respond(
    typeUrl: XdsTypeUrl,
    sub: Subscription,
    all: ReadonlyMap<XdsTypeUrl, readonly XdsResource[]>,
    subscriptionChanged: boolean,
  ): AdsResponse | undefined {
    const selected = (all.get(typeUrl) ?? []).filter(
      (r) => (sub.wildcard && r.wildcard) || sub.names.has(r.name),
    );
    const version = versionOf(selected);
    if (sub.sentVersion === version && !subscriptionChanged) return undefined;
    this.#nonce += 1;
    sub.sentVersion = version;
    sub.sentNonce = String(this.#nonce);
    return { typeUrl, versionInfo: version, nonce: sub.sentNonce, resources: selected.map((r) => r.any) };
  }
}

/** A digest of the resources' names and bytes: equal content, equal version, on any node. */
export function versionOf(resources: readonly XdsResource[]): string {
  const hash = createHash('sha256');
  for (const r of resources) {
    hash.update(`${r.name}\n${r.any.typeUrl}\n${r.any.value.length}\n`);
    hash.update(r.any.value);
  }
  return hash.digest('hex').slice(0, 16);
}

function checkBounds(req: AdsRequest): void {
  if (req.resourceNames.length > resourceNamesMax) {
    throw new AdsRequestError(
      `a DiscoveryRequest names ${req.resourceNames.length} resources; at most ${resourceNamesMax}`,
    );
  }
  const long = req.resourceNames.find((n) => Buffer.byteLength(n) > resourceNameBytesMax);
  if (long !== undefined) {
    throw new AdsRequestError(
      `resource name "${long.slice(0, 40)}…" is longer than ${resourceNameBytesMax} bytes`,
    );
  }
}
