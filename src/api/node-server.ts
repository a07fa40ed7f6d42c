// Composition of one provisioner node: durable raft log, replicated store, raft transport,
// and the client API (Kv + grpc.health.v1). The CLI's `slipway server` calls startNode().
import { mkdirSync } from 'node:fs';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { KvService as KvServiceDefinition } from '../gen/kv.js';
import { RaftNode } from '../raft/node.js';
import { openLogStore } from '../raft/storage/level-log-store.js';
import { GrpcTransport } from '../raft/transport/grpc-transport.js';
import { KvStore } from '../state/kv-store.js';
import { HealthService } from './health-service.js';
import { KvService } from './kv-service.js';
import type { ServerConfig } from './server-config.js';
import { initialMembers } from './server-config.js';

export interface RunningNode {
  readonly node: RaftNode;
  readonly apiPort: number;
  /** Hands leadership away (when leader), then stops every service and closes the log. */
  stop(opts?: { transfer?: boolean }): Promise<void>;
}

export async function startNode(cfg: ServerConfig, logger: Logger): Promise<RunningNode> {
  mkdirSync(cfg.dataDir, { recursive: true });
  const store = await openLogStore(cfg.dataDir);
  const stateMachine = new KvStore();
  const transport = new GrpcTransport({ id: cfg.id, listenAddr: cfg.raftAddr, logger });
  const node = new RaftNode({
    id: cfg.id,
    store,
    transport,
    stateMachine,
    logger,
    bootstrapPeers: cfg.join ? [] : initialMembers(cfg),
    contactPeers: initialMembers(cfg),
    tickMs: cfg.tickMs,
    raft: { electionTicks: cfg.electionTicks, heartbeatTicks: cfg.heartbeatTicks },
    snapshotEntries: cfg.snapshotEntries,
  });
  const kv = new KvService({ node, store: stateMachine, logger });
  const health = new HealthService(() => node.softState().leader !== '');
  // Followers forward writes to the leader's raft address, so the Kv service is served there too.
  transport.addService(KvServiceDefinition, kv.handlers());
  await node.start();

  const api = new Server();
  api.addService(KvServiceDefinition, kv.handlers());
  health.register(api);
  const apiPort = await new Promise<number>((resolve, reject) => {
    api.bindAsync(cfg.apiAddr, ServerCredentials.createInsecure(), (err, port) => {
      if (err === null) resolve(port);
      else reject(new Error(`cannot listen for the API on ${cfg.apiAddr}: ${err.message}`));
    });
  });
  logger.info({ id: cfg.id, raftAddr: cfg.raftAddr, apiAddr: cfg.apiAddr, apiPort }, 'node serving');

  let stopping: Promise<void> | null = null;
  const stop = (opts?: { transfer?: boolean }): Promise<void> => {
    stopping ??= (async () => {
      if (opts?.transfer !== false && node.softState().role === 'leader') {
        const to = node.bestTransferTarget();
        if (to !== null) {
          try {
            await node.transferLeadership(to, 2000);
            logger.info({ to }, 'handed leadership over before stopping');
          } catch (err) {
            logger.warn({ err, to }, 'leadership transfer before stopping failed');
          }
        }
      }
      health.shutdown();
      await new Promise<void>((resolve) => api.tryShutdown(() => resolve()));
      kv.close();
      await node.stop();
    })();
    return stopping;
  };
  return { node, apiPort, stop };
}
