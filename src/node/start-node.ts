// Composition of one provisioner node, in named steps: checks before start, consensus (raft log,
// replicated state, raft node), the services, the API port (Kv, Control, Audit, Maintenance,
// Worker, health, reflection, xDS), boot services, the VIP; and the stop in reverse order.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server as HttpServer } from 'node:http';
import { join } from 'node:path';
import { credentials, Server, ServerCredentials } from '@grpc/grpc-js';
import type { ChannelOptions } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { AuditService as AuditServiceDefinition } from '../gen/audit.js';
import { ControlService as ControlServiceDefinition } from '../gen/control.js';
import { HealthService as HealthServiceDefinition } from '../gen/health.js';
import { InternalService } from '../gen/internal.js';
import { KvService as KvServiceDefinition } from '../gen/kv.js';
import { MaintenanceService as MaintenanceServiceDefinition } from '../gen/maintenance.js';
import { WorkerService as WorkerServiceDefinition } from '../gen/worker.js';
import { AggregatedDiscoveryServiceService as XdsServiceDefinition } from '../gen/xds.js';
import { RaftNode } from '../raft/node.js';
import { logStoreLocation, openLogStore } from '../raft/storage/level-log-store.js';
import type { PeerTls } from '../platform/peer-tls.js';
import { callGuard, refusingUndecodable } from '../platform/grpc-call-guard.js';
import { loadNodeTls } from '../platform/pki.js';
import { realClock } from '../platform/clock.js';
import { GrpcTransport } from '../raft/transport/grpc-transport.js';
import { ReplicatedState } from '../state/replicated-state.js';
import { ArtifactCatalogue } from '../artifacts/catalogue.js';
import { ContentStore } from '../artifacts/content-store.js';
import { ArtifactFetcher } from '../artifacts/fetcher.js';
import { GrpcPeerReader } from '../artifacts/peer-client.js';
import { artifactReadHandlers } from '../api/artifact-peer-service.js';
import { Authenticator, sha256Hex } from '../api/auth.js';
import { authModeOf } from './auth-mode.js';
import { AuditService } from '../api/audit-service.js';
import { CallAuditor } from '../api/audit-calls.js';
import { AuthFailureLimiter } from '../api/auth-failure-limiter.js';
import { ControlService } from '../api/control-service.js';
import { DeadlineScanner } from './deadline-scanner.js';
import { AlternateScanner } from './alternate-scanner.js';
import { PoolKeeper } from './pool-keeper.js';
import { WorkflowCollector } from './workflow-collector.js';
import { archiveTarget, WorkflowArchive } from './workflow-archive.js';
import { PowerExecutor } from '../power/executor.js';
import { IpmitoolDriver } from '../power/ipmitool.js';
import { PowerJobWaiters } from '../power/waiters.js';
import { EventHub, MachineEventHub } from '../api/event-hub.js';
import { HealthService } from '../api/health-service.js';
import { KvService } from '../api/kv-service.js';
import { MaintenanceService } from '../api/maintenance-service.js';
import { packageProtoDir, reflectionServiceNames, ServerReflection } from '../api/server-reflection.js';
import { serviceNameOf } from '../api/service-name.js';
import { NodeMetrics } from './metrics.js';
import { Proposer } from '../api/proposer.js';
import { clusterVersionRefusal } from '../state/versions.js';
import { ClusterVersionKeeper, versionCheckTimeoutMs } from './cluster-version-keeper.js';
import { ApiAddressKeeper } from './api-address-keeper.js';
import type { ServerConfig } from './config.js';
import { advertisedAddress, ConfigError, initialMembers } from './config.js';
import {
  httpBaseUrlOf,
  startNodeBootServices,
  type BootHost,
  type NodeBootServices,
} from './boot-services.js';
import { allServing, type BootServiceStates } from '../boot/service-state.js';
import { BootLeadership, peerBootTimeoutMs } from './boot-leadership.js';
import { BootServiceState as BootServiceStateProto } from '../gen/kv.js';
import { addressFeedOf, LinkWatcher } from '../platform/link-watch.js';
import { bootHealthChecks, bootServiceReport, configuredBootServices, noBootHost } from './boot-health.js';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import { insecureNetworkFlag, insecureNetworkKernelArg } from '../platform/plaintext-policy.js';
import { CredentialIssuer } from '../api/credential-issuer.js';
import { WorkerService } from '../api/worker-service.js';
import { NodeDrain } from '../api/node-drain.js';
import { ReplicatedLeaseLedger } from './lease-ledger.js';
import { VipError, VipManager } from '../../lb/vip-manager.js';
import { defaultHealthCheck } from '../model/balancer-spec.js';
import { XdsService } from './xds-service.js';

export interface RunningNode {
  readonly node: RaftNode;
  readonly apiPort: number;
  /**
   * Drains the node for `drainGraceMs` (default: the config's; 0: not at all), hands leadership
   * away (when leader), then stops every service and closes the log.
   */
  stop(opts?: { transfer?: boolean; drainGraceMs?: number }): Promise<void>;
}

/** What the API port serves: these, each through the call guard, and server reflection. */
const apiDefinitions = [
  KvServiceDefinition,
  ControlServiceDefinition,
  AuditServiceDefinition,
  MaintenanceServiceDefinition,
  WorkerServiceDefinition,
  HealthServiceDefinition,
  XdsServiceDefinition,
];
/** The services health checks and reflection name: every one a client can reach on the API port. */
const apiServiceNames = [...apiDefinitions.map(serviceNameOf), ...reflectionServiceNames];

export async function startNode(cfg: ServerConfig, logger: Logger): Promise<RunningNode> {
  const tls = nodeTls(cfg);
  let stopping: Promise<void> | null = null;
  // The VIP manager is built (and its host checked) before the raft node exists.
  const started: { node?: RaftNode } = {};
  const leading = (): boolean => stopping === null && started.node?.softState().role === 'leader';
  // Everything that can be refused is refused before the data dir is touched.
  const checked = checkBeforeStart(cfg, logger);
  const vip = vipManagerFor(cfg, leading, logger);
  // What has been started so far: a step that fails releases all of it before the error goes on,
  // so a node never runs half-started (no raft member without its API, no API without its boot).
  const held: Held = { vip, boot: bootStatus() };
  try {
    held.links = await linkWatcherFor(cfg, logger, vip !== undefined);
    const consensus = await openConsensus(cfg, logger, tls);
    held.consensus = consensus;
    started.node = consensus.node;
    const services = await buildServices(cfg, logger, tls, consensus, checked, leading, vip, held.boot);
    held.services = services;
    await startConsensus(cfg, consensus, services, checked);
    const { api, apiPort, xds } = await serveApi(cfg, logger, tls, consensus, services, checked.reflection);
    held.api = api;
    held.xds = xds;
    if (cfg.metricsAddr !== undefined) held.metricsServer = await services.metrics.listen(cfg.metricsAddr);
    held.bootServices = await startBoot(cfg, logger, apiPort, consensus, services, held.links);
    held.boot.states = held.bootServices.states;
    logger.info(
      { id: cfg.id, raftAddr: cfg.raftAddr, apiAddr: cfg.apiAddr, apiPort, metricsAddr: cfg.metricsAddr },
      'node serving',
    );
    // Only the leader with a live quorum holds the VIP (check-quorum makes a cut-off leader step down);
    // the VIP follows the same view of the interfaces as the boot services (linkWatcherFor).
    if (vip !== undefined && held.links !== undefined) vip.start(held.links);
    xds.start();
    const closers = closersOf(held, api, xds, held.bootServices);
    const stop = (opts?: { transfer?: boolean; drainGraceMs?: number }): Promise<void> => {
      stopping ??= stopNode(cfg, logger, consensus, services, closers, opts);
      return stopping;
    };
    return { node: consensus.node, apiPort, stop };
  } catch (err) {
    stopping = Promise.resolve();
    await releaseHeld(held, logger);
    throw err;
  }
}

/** The raft node's start and what follows it at once: the services on the raft port, duties. */
async function startConsensus(
  cfg: ServerConfig,
  consensus: Consensus,
  services: Services,
  checked: CheckedStart,
): Promise<void> {
  routeStateEvents(consensus.stateMachine.control, services);
  // Followers forward writes to the leader's raft address, so those services are served there too.
  // (The transport answers undecodable requests and cuts status messages as the API does.)
  const { transport } = consensus;
  transport.addService(KvServiceDefinition, services.kv.handlers());
  transport.addService(MaintenanceServiceDefinition, services.maintenance.handlers());
  transport.addService(InternalService, {
    ...services.proposer.handlers(),
    ...artifactReadHandlers(services.contentStore),
  });
  try {
    await consensus.node.start();
  } catch (err) {
    throw new Error(`cannot start the raft member on ${cfg.raftAddr}: ${(err as Error).message}`);
  }
  if (cfg.forceNewCluster) writeFileSync(checked.forcedMarker, `forced at ${new Date().toISOString()}\n`);
  // Everything registered before this start (the log replayed above, or a snapshot) is wanted.
  services.catalogue.sync();
  for (const duty of services.leaderDuties) duty.start();
  services.drain.start();
}

/** The boot services' states as the node reports them; empty until they start. */
export interface BootStatus {
  states: BootServiceStates;
}

function bootStatus(): BootStatus {
  return { states: new Map() };
}

/** What startNode has taken so far, released in reverse order when a later step fails. */
interface Held {
  readonly vip: VipManager | undefined;
  readonly boot: BootStatus;
  links?: LinkWatcher | undefined;
  consensus?: Consensus;
  services?: Services;
  api?: Server;
  xds?: XdsService;
  metricsServer?: HttpServer;
  bootServices?: NodeBootServices;
}

function closersOf(held: Held, api: Server, xds: XdsService, boot: NodeBootServices): Closers {
  return {
    vip: held.vip,
    xds,
    boot,
    api,
    links: held.links,
    closeMetrics: () => held.metricsServer?.close(),
  };
}

/** Releases what a failed start took: no handover, no drain; each step on its own. */
async function releaseHeld(held: Held, logger: Logger): Promise<void> {
  const steps: [string, () => unknown][] = [
    ['vip', () => held.vip?.stop()],
    ['boot services', () => held.bootServices?.close()],
    ['metrics', () => held.metricsServer?.close()],
    ['xds', () => held.xds?.close()],
    ['api', () => held.api?.forceShutdown()],
    ['services', () => (held.services === undefined ? undefined : closeServices(held.services))],
    ['raft', () => held.consensus?.node.stop()],
    ['link watcher', () => held.links?.close()],
  ];
  for (const [what, release] of steps) {
    try {
      await release();
    } catch (err) {
      logger.warn({ err, what }, 'releasing after a failed start failed');
    }
  }
}

/** Stops the services' own timers, streams and channels. */
function closeServices(s: Services): void {
  s.drain.stop();
  s.health.shutdown();
  for (const duty of s.leaderDuties) duty.stop();
  s.fetcher.stop();
  s.peerReader.close();
  s.workers.close();
  s.kv.close();
  s.maintenance.close();
  s.proposer.close();
}

/**
 * The link watcher, when a boot service or the VIP needs to know the interfaces: it sees them
 * with or without carrier, as os.networkInterfaces() does not (src/platform/link-watch.ts).
 */
async function linkWatcherFor(
  cfg: ServerConfig,
  logger: Logger,
  vip: boolean,
): Promise<LinkWatcher | undefined> {
  const needed =
    vip ||
    cfg.dhcpInterface !== undefined ||
    cfg.dhcpAddr !== undefined ||
    cfg.tftpAddr !== undefined ||
    cfg.httpAddr !== undefined;
  if (!needed) return undefined;
  try {
    return await LinkWatcher.start({ logger });
  } catch (err) {
    throw new ConfigError(
      `the boot services and the VIP cannot watch the network interfaces: ${(err as Error).message}`,
    );
  }
}

/** What checkBeforeStart found: the settings that could be refused, settled. */
interface CheckedStart {
  readonly authMode: ReturnType<typeof authModeOf>;
  readonly forcedMarker: string;
  readonly archive: WorkflowArchive | undefined;
  readonly reflection: ServerReflection;
}

/** Written once --force-new-cluster has rewritten the membership (see checkBeforeStart). */
const forcedMarkerName = 'force-new-cluster.done';

/** Refuses a configuration that cannot work, before anything starts or touches the data dir. */
function checkBeforeStart(cfg: ServerConfig, logger: Logger): CheckedStart {
  // Decided before the data dir is touched: whether it already holds a raft log.
  const authMode = authModeOf(cfg, !existsSync(logStoreLocation(cfg.dataDir)));
  logger.info(authMode.logFields, authMode.enabled ? 'API auth: tokens required' : 'API auth: off');
  if (cfg.insecureAllowNetwork) {
    logger.warn(
      { insecure: true, apiAddr: cfg.apiAddr, raftAddr: cfg.raftAddr },
      `${insecureNetworkFlag}: plaintext gRPC beyond loopback; anyone on the network can read and forge calls`,
    );
  }
  if (cfg.forceNewCluster && !existsSync(logStoreLocation(cfg.dataDir))) {
    throw new ConfigError(
      `--force-new-cluster restarts an existing member, but ${cfg.dataDir} holds no raft log; start a new cluster with --peers instead`,
    );
  }
  // Forcing again would drop every member added since the first time: refuse a flag left on.
  const forcedMarker = join(cfg.dataDir, forcedMarkerName);
  if (cfg.forceNewCluster && existsSync(forcedMarker)) {
    throw new ConfigError(
      `--force-new-cluster was already applied to ${cfg.dataDir} (${readFileSync(forcedMarker, 'utf8').trim()}): ` +
        'start the node without it; it runs with the membership it has now',
    );
  }
  // Checked before anything starts: a node must not find out at its first collection.
  const archive =
    cfg.workflowArchive === undefined
      ? undefined
      : new WorkflowArchive(archiveTarget(cfg.workflowArchive), cfg.id);
  const reflection = ServerReflection.load(packageProtoDir(), apiServiceNames);
  return { authMode, forcedMarker, archive, reflection };
}

/** The raft log, the replicated state and the raft node over its transport. */
interface Consensus {
  readonly stateMachine: ReplicatedState;
  readonly transport: GrpcTransport;
  readonly node: RaftNode;
}

async function openConsensus(
  cfg: ServerConfig,
  logger: Logger,
  tls: PeerTls | undefined,
): Promise<Consensus> {
  mkdirSync(cfg.dataDir, { recursive: true });
  const store = await openLogStore(cfg.dataDir);
  const stateMachine = new ReplicatedState();
  const transport = new GrpcTransport({ id: cfg.id, listenAddr: cfg.raftAddr, logger, tls });
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
    ...(cfg.forceNewCluster
      ? { forceNewCluster: { id: cfg.id, addr: cfg.raftAddr, apiAddr: cfg.apiAddr } }
      : {}),
  });
  return { stateMachine, transport, node };
}

/** Something the leader does on its own schedule; each checks leadership itself. */
interface LeaderDuty {
  start(): void;
  stop(): void;
}

/** The node's services and the parts they share, built but not yet serving. */
interface Services {
  readonly contentStore: ContentStore;
  readonly peerReader: GrpcPeerReader;
  readonly fetcher: ArtifactFetcher;
  readonly catalogue: ArtifactCatalogue;
  readonly kv: KvService;
  readonly maintenance: MaintenanceService;
  readonly proposer: Proposer;
  readonly auth: Authenticator;
  readonly auditor: CallAuditor;
  readonly events: EventHub;
  /** Machine transitions, for `hardware history --follow` (docs/decisions/0028). */
  readonly machineEvents: MachineEventHub;
  readonly powerWaiters: PowerJobWaiters;
  readonly control: ControlService;
  readonly workers: WorkerService;
  readonly drain: NodeDrain;
  readonly metrics: NodeMetrics;
  readonly health: HealthService;
  /** Deadlines, workflow collection, the cluster version and power jobs. */
  readonly leaderDuties: readonly LeaderDuty[];
}

async function buildServices(
  cfg: ServerConfig,
  logger: Logger,
  tls: PeerTls | undefined,
  { node, stateMachine }: Consensus,
  checked: CheckedStart,
  leading: () => boolean,
  vip: VipManager | undefined,
  boot: BootStatus,
): Promise<Services> {
  const control = stateMachine.control;
  const { contentStore, peerReader, fetcher, catalogue } = await openArtifacts(
    cfg,
    logger,
    tls,
    node,
    control,
  );
  const proposer = new Proposer(node, logger, tls, (command) =>
    command.type === 'control' ? clusterVersionRefusal(command.command, control.clusterVersion) : undefined,
  );
  const kv = new KvService({
    node,
    store: stateMachine,
    logger,
    peerTls: tls,
    drain: () => ({ drained: drain.drained, workerStreams: workers.connected }),
    bootServices: () => bootServiceReport(boot.states),
    apiAddr: cfg.apiAddr,
    proposer,
  });
  const maintenance = new MaintenanceService({ node, store: stateMachine, logger, peerTls: tls });
  const auth = newAuthenticator(cfg, node, control, checked);
  const events = new EventHub();
  const machineEvents = new MachineEventHub();
  const powerWaiters = new PowerJobWaiters(realClock);
  const auditor = new CallAuditor(auth, (command) => proposer.proposeControl(command), logger);
  const controlService = new ControlService({
    node,
    control,
    proposer,
    auth,
    events,
    machines: machineEvents,
    logger,
    powerWaiters,
    auditor,
    artifacts: { store: contentStore, local: (artifact) => catalogue.local(artifact) },
  });
  const workers = new WorkerService({
    control,
    proposer,
    auth,
    logger,
    catchUp: () => node.linearizableRead(),
    sessionsPerWorkerMax: cfg.workerSessionsMax,
    refusal: (): string | undefined => drain.refusal(),
    clock: realClock,
  });
  // Drained by `slipway node drain` or while stopping (docs/decisions/0022-node-drain.md).
  const drain = new NodeDrain({ node, control, workers, logger: logger.child({ component: 'drain' }) });
  const parts = { node, control, proposer, kv };
  const { collector, leaderDuties } = buildLeaderDuties(cfg, logger, parts, checked, leading, boot);
  const metrics = new NodeMetrics({
    node,
    control,
    connectedWorkers: () => workers.connected,
    drained: () => drain.drained,
    forwarding: () => proposer.forwarding,
    archivedWorkflows: () => collector.archived,
    ...(vip === undefined ? {} : { vipHeld: () => vip.held }),
    bootStates: () => boot.states,
  });
  const health = new HealthService(
    () => node.stoppedBy === null && node.softState().leader !== '' && !drain.drained,
    apiServiceNames,
    bootHealthChecks(cfg, boot),
  );
  return {
    contentStore,
    peerReader,
    fetcher,
    catalogue,
    kv,
    maintenance,
    proposer,
    auth,
    auditor,
    events,
    machineEvents,
    powerWaiters,
    control: controlService,
    workers,
    drain,
    metrics,
    health,
    leaderDuties,
  };
}

/**
 * Registered artifacts' content, the same on every node: stored by digest under the data dir
 * and fetched from peers when missing (docs/decisions/0017).
 */
async function openArtifacts(
  cfg: ServerConfig,
  logger: Logger,
  tls: PeerTls | undefined,
  node: RaftNode,
  control: ControlState,
): Promise<Pick<Services, 'contentStore' | 'peerReader' | 'fetcher' | 'catalogue'>> {
  const contentStore = await ContentStore.open(join(cfg.dataDir, 'artifacts'));
  const peerReader = new GrpcPeerReader(node, tls);
  const fetcher = new ArtifactFetcher({
    store: contentStore,
    peers: peerReader,
    logger: logger.child({ component: 'artifacts' }),
  });
  const catalogue = new ArtifactCatalogue(control, fetcher, contentStore);
  return { contentStore, peerReader, fetcher, catalogue };
}

/** Tokens checked against the replicated state, the bootstrap admin token, and failure limits. */
function newAuthenticator(
  cfg: ServerConfig,
  node: RaftNode,
  control: ControlState,
  checked: CheckedStart,
): Authenticator {
  return new Authenticator(
    control,
    {
      enabled: checked.authMode.enabled,
      bootstrapAdminSha256: readAdminTokenSha(checked.authMode.adminTokenFile),
      failures: new AuthFailureLimiter({
        failuresMax: cfg.authFailuresMax,
        windowMs: cfg.authFailureWindowS * 1000,
      }),
    },
    () => node.linearizableRead(),
  );
}

/** Hands leadership to, and holds elections for, a node whose boot services serve. */
function bootLeadershipOf(
  cfg: ServerConfig,
  logger: Logger,
  node: RaftNode,
  kv: KvService,
  boot: BootStatus,
): BootLeadership {
  return new BootLeadership({
    node,
    configured: configuredBootServices(cfg).length > 0,
    // Before the boot services start there is nothing to judge by: no hold, no handover.
    serving: () => allServing(boot.states),
    peerServing: async (member) => {
      const services = (await kv.peerStatus(member, peerBootTimeoutMs)).bootServices;
      return (
        services.length > 0 &&
        services.every((b) => b.state === BootServiceStateProto.BOOT_SERVICE_STATE_SERVING)
      );
    },
    logger: logger.child({ component: 'boot-leadership' }),
  });
}

/** What the leader does on its own schedule: deadlines, collection, the cluster version, power. */
function buildLeaderDuties(
  cfg: ServerConfig,
  logger: Logger,
  {
    node,
    control,
    proposer,
    kv,
  }: { node: RaftNode; control: ControlState; proposer: Proposer; kv: KvService },
  checked: CheckedStart,
  leading: () => boolean,
  boot: BootStatus,
): { collector: WorkflowCollector; leaderDuties: LeaderDuty[] } {
  const propose = (command: ControlCommand): Promise<ControlResult> => proposer.proposeControl(command);
  // Only the leader removes finished workflows past the retention (archiving them first).
  const collector = new WorkflowCollector({
    control,
    isLeader: leading,
    propose,
    ...(checked.archive === undefined ? {} : { archive: checked.archive }),
    logger: logger.child({ component: 'retention' }),
    clock: realClock,
  });
  const leaderDuties: LeaderDuty[] = [
    new DeadlineScanner({ control, isLeader: leading, propose, logger, clock: realClock }),
    // The alternate failure policy's re-allocations (0030).
    new AlternateScanner({
      control,
      isLeader: leading,
      propose,
      logger: logger.child({ component: 'alternate' }),
      clock: realClock,
    }),
    // Pools kept at their size (0035).
    new PoolKeeper({
      control,
      isLeader: leading,
      propose,
      logger: logger.child({ component: 'pools' }),
      artifactBaseUrl: httpBaseUrlOf(advertisedAddress(cfg), cfg.httpAddr),
      clock: realClock,
    }),
    collector,
    new ClusterVersionKeeper({
      node,
      control,
      stateVersionOf: async (member) => (await kv.peerStatus(member, versionCheckTimeoutMs)).stateVersion,
      propose,
      logger: logger.child({ component: 'versions' }),
      clock: realClock,
    }),
    // Not the leader's alone: every member records its own API address (0038).
    new ApiAddressKeeper({
      node,
      control,
      apiAddr: cfg.apiAddr,
      propose,
      logger: logger.child({ component: 'members' }),
      clock: realClock,
    }),
    // Only the leader carries out power jobs; any node's API may request them.
    new PowerExecutor({
      nodeId: cfg.id,
      control,
      propose,
      isLeader: leading,
      driver: new IpmitoolDriver(),
      logger: logger.child({ component: 'power' }),
      clock: realClock,
    }),
    // Not the leader's alone: every node holds its elections or hands leadership over (0033).
    bootLeadershipOf(cfg, logger, node, kv, boot),
  ];
  return { collector, leaderDuties };
}

/** What the replicated state tells the services as it applies (and restores) entries. */
function routeStateEvents(control: ControlState, s: Services): void {
  control.changes.subscribe((change) => {
    switch (change.kind) {
      case 'workflowEvent':
        s.events.publishEvent(change.event);
        s.metrics.observe(change.event);
        return;
      case 'workflow':
        s.workers.workflowChanged(change.workflow);
        return;
      case 'powerJob':
        s.powerWaiters.changed(change.job);
        return;
      case 'hardware':
        s.workers.hardwareChanged(change.id);
        if (control.hardware(change.id) === undefined) s.machineEvents.publish(change.id, 'deleted');
        return;
      case 'machineEvent':
        s.machineEvents.publish(change.hardwareId, change.event);
        return;
      case 'artifact':
        s.catalogue.sync();
        return;
      case 'workflowsCollected':
        s.metrics.collected(change.ids.length);
        return;
      case 'restore':
        s.catalogue.sync();
        // No workflow change tells a worker's session of what the snapshot brought: wake them all.
        s.workers.restored();
        setImmediate(() => s.drain.check());
        return;
      case 'drain':
        // Published from apply: act on it once the apply is done.
        setImmediate(() => s.drain.check());
        return;
      case 'workflowDeleted':
        return;
    }
  });
}

/** The API port: every service through the call guard, reflection, and xDS. */
async function serveApi(
  cfg: ServerConfig,
  logger: Logger,
  tls: PeerTls | undefined,
  { node, stateMachine }: Consensus,
  s: Services,
  reflection: ServerReflection,
): Promise<{ api: Server; apiPort: number; xds: XdsService }> {
  const api = new Server({ ...apiServerOptions(cfg), interceptors: [callGuard] });
  // With auth off every caller is the local admin; the guard still puts changes in the trail.
  api.addService(refusingUndecodable(KvServiceDefinition), s.kv.handlers(s.auth, s.auditor));
  api.addService(refusingUndecodable(ControlServiceDefinition), s.control.handlers());
  api.addService(
    refusingUndecodable(AuditServiceDefinition),
    new AuditService({
      node,
      control: stateMachine.control,
      proposer: s.proposer,
      auditor: s.auditor,
    }).handlers(),
  );
  api.addService(refusingUndecodable(MaintenanceServiceDefinition), s.maintenance.handlers(s.auditor));
  api.addService(refusingUndecodable(WorkerServiceDefinition), s.workers.handlers());
  api.addService(refusingUndecodable(HealthServiceDefinition), s.health.handlers());
  reflection.addTo(api);
  // xDS for Envoy and proxyless gRPC clients: the voters' API addresses and health (0024).
  const xds = new XdsService(
    {
      members: () => node.membership().voters,
      credentials: tls === undefined ? credentials.createInsecure() : credentials.createSsl(tls.ca),
      timing: defaultHealthCheck,
      logger: logger.child({ component: 'xds-probes' }),
      apiAddrOf: (m) => s.kv.apiAddrOf(m),
    },
    logger,
    { tls: tls !== undefined },
  );
  api.addService(refusingUndecodable(XdsServiceDefinition), xds.handlers());
  const apiPort = await new Promise<number>((resolve, reject) => {
    const creds =
      tls === undefined
        ? ServerCredentials.createInsecure()
        : ServerCredentials.createSsl(tls.ca, [{ cert_chain: tls.cert, private_key: tls.key }], false);
    api.bindAsync(cfg.apiAddr, creds, (err, port) => {
      if (err === null) {
        resolve(port);
        return;
      }
      api.forceShutdown();
      xds.close();
      reject(new Error(`cannot listen for the API on ${cfg.apiAddr}: ${err.message}`));
    });
  });
  return { api, apiPort, xds };
}

/** DHCP, TFTP and HTTP boot, answering from the replicated state. */
function startBoot(
  cfg: ServerConfig,
  logger: Logger,
  apiPort: number,
  { node, stateMachine }: Consensus,
  s: Services,
  links: LinkWatcher | undefined,
): Promise<NodeBootServices> {
  const control = stateMachine.control;
  const host: BootHost = links === undefined ? noBootHost : { links, addresses: addressFeedOf(links) };
  const advertise = advertisedAddress(cfg);
  return startNodeBootServices(
    {
      dataDir: cfg.dataDir,
      advertise,
      apiAddress: cfg.workerServer ?? `${advertise}:${String(apiPort)}`,
      dhcpInterface: cfg.dhcpInterface,
      dhcpAddr: cfg.dhcpAddr,
      dhcpMode: cfg.dhcpMode,
      dhcpPools: cfg.dhcpPools,
      dhcpLeaseTimeS: cfg.dhcpLeaseTimeS,
      tftpAddr: cfg.tftpAddr,
      tftpRoot: cfg.tftpRoot,
      tftpTransfersMax: cfg.tftpTransfersMax,
      httpAddr: cfg.httpAddr,
      artifactsDir: cfg.artifactsDir,
      bootOsDir: cfg.bootOsDir ?? join(cfg.dataDir, 'bootos'),
      registeredArtifacts: s.catalogue,
      // Booted workers may send their credential in the clear only to a node that itself serves
      // plaintext beyond loopback on purpose (src/bootos/init-script.ts reads this argument).
      kernelArgs: cfg.insecureAllowNetwork ? [insecureNetworkKernelArg, ...cfg.kernelArgs] : cfg.kernelArgs,
      credentials: new CredentialIssuer({
        control,
        proposer: s.proposer,
        logger: logger.child({ service: 'credentials' }),
        discovery: cfg.discovery,
      }),
      discovery: cfg.discovery,
    },
    control,
    // Only a leader with a live quorum answers DHCP (check-quorum makes a cut-off leader step down).
    () => node.softState().role === 'leader',
    logger,
    host,
    new ReplicatedLeaseLedger(control, (command) => s.proposer.proposeControl(command)),
  );
}

/** What stopNode closes beside the services. */
interface Closers {
  readonly vip: VipManager | undefined;
  readonly links: LinkWatcher | undefined;
  readonly xds: XdsService;
  readonly boot: NodeBootServices;
  readonly api: Server;
  readonly closeMetrics: () => void;
}

/** Drains (for the grace), hands leadership over, then closes everything and the log. */
async function stopNode(
  cfg: ServerConfig,
  logger: Logger,
  { node }: Consensus,
  s: Services,
  c: Closers,
  opts: { transfer?: boolean; drainGraceMs?: number } | undefined,
): Promise<void> {
  const graceMs = opts?.drainGraceMs ?? cfg.drainGraceMs;
  // Not serving from here on: balancers stop sending streams, worker streams end and move.
  const drained = graceMs > 0 ? s.drain.beginStop() : undefined;
  if (opts?.transfer !== false && node.softState().role === 'leader') {
    const to = node.bestTransferTarget();
    if (to !== null) {
      try {
        await node.transferLeadership(to, 2000);
        logger.info({ to }, 'handed leadership over before stopping');
        // Writes this node accepted as leader commit under the new one: answer them first.
        await node.proposalsSettled(1000);
      } catch (err) {
        logger.warn({ err, to }, 'leadership transfer before stopping failed');
      }
    }
  }
  if (drained !== undefined) {
    const left = await drained.untilGone(graceMs);
    if (left > 0)
      logger.warn({ workerStreams: left, graceMs }, 'worker streams still open after the drain grace');
    else logger.info('worker streams moved before stopping');
  }
  s.drain.stop();
  await c.vip?.stop();
  s.health.shutdown();
  c.xds.close();
  for (const duty of s.leaderDuties) duty.stop();
  s.fetcher.stop();
  s.peerReader.close();
  s.workers.close();
  c.closeMetrics();
  await c.boot.close();
  c.links?.close();
  await new Promise<void>((resolve) => c.api.tryShutdown(() => resolve()));
  s.kv.close();
  s.maintenance.close();
  s.proposer.close();
  await node.stop();
}

/**
 * Bounds on every call to the API: one message (a larger one ends its call with
 * RESOURCE_EXHAUSTED before it is parsed) and the streams one connection may hold open. The
 * status messages it answers with are bounded too (callGuard, src/platform/grpc-call-guard.ts).
 */
function apiServerOptions(cfg: ServerConfig): ChannelOptions {
  return {
    'grpc.max_receive_message_length': cfg.apiMessageBytesMax,
    'grpc.max_concurrent_streams': cfg.apiStreamsPerConnectionMax,
  };
}

/** The VIP manager when --vip-interface is given; the host is checked now, before anything starts. */
function vipManagerFor(cfg: ServerConfig, shouldHold: () => boolean, logger: Logger): VipManager | undefined {
  if (cfg.vipInterface === undefined || cfg.vip === undefined) return undefined;
  try {
    return new VipManager({ vip: cfg.vip, iface: cfg.vipInterface, shouldHold, logger });
  } catch (err) {
    if (err instanceof VipError) throw new ConfigError(err.message);
    throw err;
  }
}

function readAdminTokenSha(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  let token: string;
  try {
    token = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new ConfigError(`cannot read the admin token file ${file}: ${(err as Error).message}`);
  }
  if (token.length < 16)
    throw new ConfigError(`the admin token in ${file} is too short (at least 16 characters)`);
  return sha256Hex(token);
}

function nodeTls(cfg: ServerConfig): PeerTls | undefined {
  if (cfg.tlsDir === undefined) return undefined;
  try {
    return loadNodeTls(cfg.tlsDir, cfg.id);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}
