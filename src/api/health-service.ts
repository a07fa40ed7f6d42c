// grpc.health.v1: a node is SERVING while it knows a leader (it can answer reads and forward
// writes); NOT_SERVING otherwise, and during shutdown. Balancers drain on NOT_SERVING.
import { status } from '@grpc/grpc-js';
import type { Server, ServerWritableStream } from '@grpc/grpc-js';
import type { HealthCheckRequest, HealthCheckResponse, HealthServer } from '../gen/health.js';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthService as HealthDefinition,
} from '../gen/health.js';

/** The services a client may ask about by name; "" is the node as a whole. */
const knownServices = new Set(['', 'slipway.kv.v1.Kv']);
const watchPollMs = 250;

export class HealthService {
  private readonly serving: () => boolean;
  private shuttingDown = false;
  private readonly watchers = new Set<ServerWritableStream<HealthCheckRequest, HealthCheckResponse>>();

  constructor(serving: () => boolean) {
    this.serving = serving;
  }

  /** Serves Health on `server` as generated (a node serves handlers() through its call guard). */
  register(server: Server): void {
    server.addService(HealthDefinition, this.handlers());
  }

  handlers(): HealthServer {
    return {
      check: (call, callback) => {
        if (!knownServices.has(call.request.service)) {
          callback({ code: status.NOT_FOUND, details: `unknown service "${call.request.service}"` }, null);
          return;
        }
        callback(null, { status: this.current() });
      },
      watch: (call) => {
        this.watch(call);
      },
    };
  }

  shutdown(): void {
    this.shuttingDown = true;
    for (const w of this.watchers) {
      w.write({ status: ServingStatus.NOT_SERVING });
      w.end();
    }
    this.watchers.clear();
  }

  private current(): ServingStatus {
    return !this.shuttingDown && this.serving() ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
  }

  private watch(call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>): void {
    if (!knownServices.has(call.request.service)) {
      call.write({ status: ServingStatus.SERVICE_UNKNOWN });
    }
    let last = this.current();
    call.write({ status: last });
    this.watchers.add(call);
    const timer = setInterval(() => {
      const now = this.current();
      if (now !== last) {
        last = now;
        call.write({ status: now });
      }
    }, watchPollMs);
    call.on('cancelled', () => {
      clearInterval(timer);
      this.watchers.delete(call);
    });
  }
}
