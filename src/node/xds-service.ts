// envoy.service.discovery.v3.AggregatedDiscoveryService on a node's API port: the thin driver
// around lb/xds/ (docs/decisions/0024-xds.md). Each stream gets an AdsStream (the pure protocol
// state); the MemberProber (started with the node) probes the voters and pushes new
// versions to every open stream when the membership or a member's health changes.
// No token: proxyless gRPC clients cannot send one to their xDS server, and what is served (the
// members' API addresses and health) is what `slipway balancer config` prints anyway.
import { status } from '@grpc/grpc-js';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { AggregatedDiscoveryServiceServer, DiscoveryRequest, DiscoveryResponse } from '../gen/xds.js';
import { AdsRequestError, AdsStream } from '../../lb/xds/ads-stream.js';
import type { AdsResponse } from '../../lb/xds/ads-stream.js';
import type { XdsServing } from '../../lb/xds/resources.js';
import { MemberProber, type MemberProberOptions } from '../../lb/xds/member-prober.js';
import { ApiError, toServiceError } from '../api/errors.js';

type Call = ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>;

/** Open xDS streams one node serves; each is one client process (a worker, the CLI, an Envoy). */
export const xdsStreamsMax = 10_000;

export class XdsService {
  readonly #prober: MemberProber;
  readonly #log: Logger;
  readonly #streams = new Map<Call, AdsStream>();
  readonly #serving: XdsServing;

  /** `serving.tls`: the node's API speaks TLS, so Envoy is told to as well (lb/xds/resources.ts). */
  constructor(probes: Omit<MemberProberOptions, 'onChange'>, logger: Logger, serving: XdsServing) {
    this.#prober = new MemberProber({ ...probes, onChange: () => this.#membersChanged() });
    this.#log = logger.child({ service: 'xds' });
    this.#serving = serving;
  }

  /** After the prober saw a change: every stream gets what changed for it. */
  #membersChanged(): void {
    const members = this.#prober.current();
    for (const [call, stream] of this.#streams) this.#send(call, stream.update(members));
  }

  /** Starts probing the members, so that the first client finds them probed. */
  start(): void {
    this.#prober.start();
  }

  get streams(): number {
    return this.#streams.size;
  }

  handlers(): AggregatedDiscoveryServiceServer {
    return {
      streamAggregatedResources: (call) => {
        this.#serve(call);
      },
    };
  }

  /** Stops probing and ends every stream (the node is stopping): clients move to another xDS server. */
  close(): void {
    this.#prober.stop();
    for (const call of this.#streams.keys()) call.end();
    this.#streams.clear();
  }

  #serve(call: Call): void {
    if (this.#streams.size >= xdsStreamsMax) {
      this.#fail(
        call,
        new ApiError(
          status.RESOURCE_EXHAUSTED,
          `this node serves at most ${xdsStreamsMax} xDS streams; try another node`,
        ),
      );
      return;
    }
    this.#prober.start();
    const stream = new AdsStream(this.#prober.current(), this.#serving);
    this.#streams.set(call, stream);
    const peer = call.getPeer();
    const drop = (): void => {
      this.#streams.delete(call);
    };
    call.on('data', (req: DiscoveryRequest) => {
      if (!this.#streams.has(call)) return;
      try {
        const step = stream.request(req);
        for (const note of step.notes) {
          if (note.kind === 'nack') this.#log.warn({ peer, ...note }, 'xDS client refused a resource');
          else this.#log.debug({ peer, ...note }, 'xDS request');
        }
        this.#send(call, step.responses);
      } catch (err) {
        if (!(err instanceof AdsRequestError)) throw err;
        drop();
        this.#fail(call, new ApiError(status.INVALID_ARGUMENT, err.message));
      }
    });
    call.on('end', () => {
      drop();
      call.end();
    });
    call.on('cancelled', drop);
    call.on('error', drop);
  }

  #send(call: Call, responses: readonly AdsResponse[]): void {
    for (const r of responses) {
      call.write({
        versionInfo: r.versionInfo,
        resources: [...r.resources],
        typeUrl: r.typeUrl,
        nonce: r.nonce,
      });
    }
  }

  #fail(call: Call, err: ApiError): void {
    call.emit('error', toServiceError(err));
  }
}
