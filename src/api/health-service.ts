// grpc.health.v1: a node is SERVING while it knows a leader (it can answer reads and forward
// writes); NOT_SERVING otherwise, and during shutdown. Balancers drain on NOT_SERVING. It answers
// for the node as a whole ("") and for each service the API port serves, all alike; services
// with a check of their own (the boot services, slipway.boot.*) answer by that check.
import { status } from '@grpc/grpc-js';
import type { Server, ServerWritableStream } from '@grpc/grpc-js';
import type { HealthCheckRequest, HealthCheckResponse, HealthServer } from '../gen/health.js';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthService as HealthDefinition,
} from '../gen/health.js';
import { serviceNameOf } from './service-name.js';

const watchPollMs = 250;

export class HealthService {
  readonly #serving: () => boolean;
  /** The services a client may ask about by name; "" is the node as a whole. */
  readonly #knownServices: ReadonlySet<string>;
  /** Services whose health is their own check rather than the node's. */
  readonly #ownChecks: ReadonlyMap<string, () => boolean>;
  #shuttingDown = false;
  readonly #watchers = new Set<ServerWritableStream<HealthCheckRequest, HealthCheckResponse>>();

  /**
   * `services`: the full names of the services served beside this one (itself is known);
   * `ownChecks`: further names, each SERVING only while its check holds (and the node is not
   * shutting down).
   */
  constructor(
    serving: () => boolean,
    services: readonly string[] = [],
    ownChecks: ReadonlyMap<string, () => boolean> = new Map(),
  ) {
    this.#serving = serving;
    this.#ownChecks = ownChecks;
    this.#knownServices = new Set(['', serviceNameOf(HealthDefinition), ...services, ...ownChecks.keys()]);
  }

  /** Serves Health on `server` as generated (a node serves handlers() through its call guard). */
  register(server: Server): void {
    server.addService(HealthDefinition, this.handlers());
  }

  handlers(): HealthServer {
    return {
      check: (call, callback) => {
        if (!this.#knownServices.has(call.request.service)) {
          callback({ code: status.NOT_FOUND, details: `unknown service "${call.request.service}"` }, null);
          return;
        }
        callback(null, { status: this.#current(call.request.service) });
      },
      watch: (call) => {
        this.#watch(call);
      },
    };
  }

  shutdown(): void {
    this.#shuttingDown = true;
    for (const w of this.#watchers) {
      w.write({ status: ServingStatus.NOT_SERVING });
      w.end();
    }
    this.#watchers.clear();
  }

  #current(service: string): ServingStatus {
    const check = this.#ownChecks.get(service) ?? this.#serving;
    return !this.#shuttingDown && check() ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
  }

  #watch(call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>): void {
    this.#watchers.add(call);
    const stopWatching = (): void => {
      this.#watchers.delete(call);
    };
    // As the protocol asks: an unknown service is SERVICE_UNKNOWN, and the stream stays open.
    if (!this.#knownServices.has(call.request.service)) {
      call.write({ status: ServingStatus.SERVICE_UNKNOWN });
      call.on('cancelled', stopWatching);
      return;
    }
    const service = call.request.service;
    let last = this.#current(service);
    call.write({ status: last });
    const timer = setInterval(() => {
      const now = this.#current(service);
      if (now !== last) {
        last = now;
        call.write({ status: now });
      }
    }, watchPollMs);
    call.on('cancelled', () => {
      clearInterval(timer);
      stopWatching();
    });
  }
}
