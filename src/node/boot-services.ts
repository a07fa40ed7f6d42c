// The boot services of one provisioner node (DHCP, TFTP, HTTP) over the replicated state.
// Every node runs them so that machines boot whichever node holds the VIP; in steady state only
// the leader (which alone holds the VIP, invariant 5) answers DHCP.
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ControlState } from '../state/control/control-state.js';
import { discoveredHardware, discoveredHardwareId, wantsInventory } from '../state/control/discovery.js';
import { stateVersionFleet } from '../state/versions.js';
import { dynamicLeases, type LeaseLedger } from '../boot/dhcp/dynamic-leases.js';
import { parsePoolSpec } from '../boot/dhcp/pool.js';
import { newDhcpCounters, reservedLeases, startDhcpServer } from '../boot/dhcp/server.js';
import type { DhcpCounters, DhcpMode, DhcpServer, Subnet } from '../boot/dhcp/server.js';
import type { AddressFeed, LinkSource, LinkTable } from '../platform/link-watch.js';
import { LinkBoundService, type Readiness } from '../boot/link-bound-service.js';
import { addressReadiness, dhcpReadiness, dhcpUnicastAddresses } from '../boot/readiness.js';
import {
  bootServiceNames,
  BootServiceState,
  type BootServiceName,
  type BootServiceStates,
} from '../boot/service-state.js';
import type { BootInventory } from '../boot/inventory.js';
import { defaultBootArtifacts } from '../boot/http/ipxe-script.js';
import { startHttpBootServer } from '../boot/http/server.js';
import type { CredentialClaims, HttpBootServer, RegisteredArtifacts } from '../boot/http/server.js';
import { startTftpServer } from '../boot/tftp/server.js';
import type { TftpServer } from '../boot/tftp/server.js';

/** Where Debian's `ipxe` package puts the binaries machines chainload. */
export const debianIpxeDir = '/usr/lib/ipxe';

export interface NodeBootConfig {
  readonly dataDir: string;
  /** The address machines are told to use (option 54, next-server, script URLs). */
  readonly advertise: string;
  /** What the worker agents dial (HOST:PORT). */
  readonly apiAddress: string;
  readonly dhcpInterface?: string | undefined;
  readonly dhcpAddr?: string | undefined;
  readonly dhcpMode: DhcpMode;
  readonly dhcpPools: readonly string[];
  readonly dhcpLeaseTimeS: number;
  readonly tftpAddr?: string | undefined;
  readonly tftpRoot?: string | undefined;
  /** Default: SERVER_LIMITS_DEFAULT.transfersMax. */
  readonly tftpTransfersMax?: number | undefined;
  readonly httpAddr?: string | undefined;
  readonly artifactsDir?: string | undefined;
  /** The boot OS, served under /boot/ (created empty when missing). */
  readonly bootOsDir?: string | undefined;
  /** Artifacts registered in the replicated state, served ahead of the directories. */
  readonly registeredArtifacts?: RegisteredArtifacts | undefined;
  readonly kernelArgs: readonly string[];
  /** Answers booted machines' credential claims (POST /credential). */
  readonly credentials?: CredentialClaims | undefined;
  /**
   * `slipway server --discovery`: a MAC no machine has gets an inventory boot, and so does an
   * enrolled machine with no inventory (docs/decisions/0029-discovery.md).
   */
  readonly discovery?: boolean | undefined;
}

/** One boot service, opened when what it needs is on this host (link-bound-service.ts). */
export interface BootServiceHandle<T> {
  readonly state: BootServiceState;
  /** The open server, while there is one. */
  readonly current: T | undefined;
}

export interface NodeBootServices {
  readonly dhcp: BootServiceHandle<DhcpServer> | undefined;
  readonly tftp: BootServiceHandle<TftpServer> | undefined;
  readonly http: BootServiceHandle<HttpBootServer> | undefined;
  /** The configured services' states, in the order of bootServiceNames. */
  readonly states: BootServiceStates;
  /** DHCP's counters over every server it opened. */
  readonly dhcpCounters: Readonly<DhcpCounters>;
  close(): Promise<void>;
}

/** What the boot services learn about this host: its interfaces and addresses, as they change. */
export interface BootHost {
  readonly links: LinkSource;
  /** This host's IPv4 addresses (for the TFTP server's per-address sockets). */
  readonly addresses: AddressFeed;
}

function missingLedger(): never {
  throw new Error('dynamic DHCP mode needs the replicated lease ledger');
}

/**
 * The machines the boot services answer, from the applied state. An inspecting machine boots in
 * inventory mode; with `discovery` (slipway server --discovery), so does an enrolled machine with
 * no inventory yet, and a MAC no machine has gets an inventory boot as the machine it would be
 * enrolled as (docs/decisions/0029-discovery.md).
 */
export function inventoryOf(control: ControlState, discovery = false): BootInventory {
  return {
    byMac: (mac) => {
      const found = control.hardwareByMac(mac);
      if (found === undefined) {
        if (!discovery || control.clusterVersion < stateVersionFleet) return undefined;
        const hardware = discoveredHardware(discoveredHardwareId(mac), mac, '', undefined, 0);
        const iface = hardware.interfaces[0];
        return iface === undefined ? undefined : { hardware, iface, mode: 'inventory' };
      }
      const state = found.hardware.lifecycle?.state;
      const inventory = state === 'inspecting' || (discovery && wantsInventory(found.hardware));
      return inventory ? { ...found, mode: 'inventory' } : found;
    },
  };
}

/** Where machines reach this node's HTTP server: the advertised address (the VIP) and the port. */
export function httpBaseUrlOf(advertise: string, httpAddr: string | undefined): string {
  const httpPort = httpAddr === undefined ? 80 : splitHostPort(httpAddr).port;
  return `http://${advertise}${httpPort === 80 ? '' : `:${String(httpPort)}`}`;
}

function splitHostPort(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  return { host: addr.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(addr.slice(i + 1)) };
}

function ensureDirectory(dir: string): string {
  mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * The default TFTP root: a copy of Debian's iPXE binaries in the data dir. Debian links
 * /usr/lib/ipxe/ipxe.efi to /boot, and the TFTP server never follows a link out of its root,
 * so the files are copied rather than served in place.
 */
export function prepareDefaultTftpRoot(dataDir: string, source = debianIpxeDir): string {
  const root = join(dataDir, 'tftp-root');
  mkdirSync(root, { recursive: true });
  if (!existsSync(source)) return root;
  for (const name of readdirSync(source)) {
    if (!/\.(kpxe|efi|pxe|lkrn|usb)$/.test(name)) continue;
    const from = join(source, name);
    const to = join(root, name);
    const st = statSync(from);
    if (!st.isFile()) continue;
    if (existsSync(to) && statSync(to).size === st.size && statSync(to).mtimeMs >= st.mtimeMs) continue;
    copyFileSync(from, to);
  }
  return root;
}

/**
 * Starts the configured boot services, each waiting for its interface or address when it is not
 * there yet (the promise resolves without waiting for them): nothing here fails for a host that
 * is not ready; the states say what each service waits for.
 */
export async function startNodeBootServices(
  cfg: NodeBootConfig,
  control: ControlState,
  isLeader: () => boolean,
  logger: Logger,
  host: BootHost,
  /** Dynamic mode's committed leases. */
  ledger?: LeaseLedger,
): Promise<NodeBootServices> {
  const inventory = inventoryOf(control, cfg.discovery === true);
  // Machines reach the HTTP server at the advertised address (the VIP) on the configured port.
  const httpBaseUrl = httpBaseUrlOf(cfg.advertise, cfg.httpAddr);
  const dhcpCounters = newDhcpCounters();
  const states = new Map<BootServiceName, BootServiceState>();
  const bound: LinkBoundService<{ close(): Promise<void> }, unknown>[] = [];
  const follow = <T extends { close(): Promise<void> }, A>(
    name: BootServiceName,
    readiness: (links: LinkTable) => Readiness<A>,
    open: (arg: A) => Promise<T>,
    sync?: (service: T, links: LinkTable) => Promise<void>,
  ): BootServiceHandle<T> => {
    const state = new BootServiceState(name, logger, { state: 'waiting', reason: 'starting' });
    states.set(name, state);
    const service = new LinkBoundService<T, A>({
      links: host.links,
      state,
      readiness,
      open,
      logger,
      ...(sync === undefined ? {} : { sync }),
    });
    bound.push(service as unknown as LinkBoundService<{ close(): Promise<void> }, unknown>);
    return {
      state,
      get current() {
        return service.current;
      },
    };
  };
  const dhcp = !dhcpConfigured(cfg)
    ? undefined
    : follow(
        'dhcp',
        dhcpReadiness(cfg),
        (segment: readonly Subnet[]) =>
          startDhcp(cfg, httpBaseUrl, inventory, isLeader, logger, ledger, segment, dhcpCounters),
        (server, links) => server.setUnicastAddresses(dhcpUnicastAddresses(cfg, links)),
      );
  const tftpAddr = cfg.tftpAddr;
  const tftp =
    tftpAddr === undefined
      ? undefined
      : follow('tftp', addressReadiness(splitHostPort(tftpAddr).host), () =>
          startTftp(cfg, tftpAddr, host.addresses, logger.child({ service: 'tftp' })),
        );
  const httpAddr = cfg.httpAddr;
  const http =
    httpAddr === undefined
      ? undefined
      : follow('http', addressReadiness(splitHostPort(httpAddr).host), () =>
          startHttp(cfg, httpAddr, httpBaseUrl, inventory, logger),
        );
  await Promise.all(bound.map((b) => b.start()));
  const ordered = new Map(
    bootServiceNames.flatMap((n) => (states.has(n) ? [[n, states.get(n)!] as const] : [])),
  );
  return {
    dhcp,
    tftp,
    http,
    states: ordered,
    dhcpCounters,
    close: async () => {
      await Promise.all(bound.map((b) => b.close()));
    },
  };
}

function dhcpConfigured(cfg: NodeBootConfig): boolean {
  return cfg.dhcpInterface !== undefined || cfg.dhcpAddr !== undefined;
}

/** iPXE scripts, the boot OS, artifacts and credential claims over HTTP on `addr`. */
function startHttp(
  cfg: NodeBootConfig,
  addr: string,
  httpBaseUrl: string,
  inventory: BootInventory,
  logger: Logger,
): Promise<HttpBootServer> {
  const { host, port } = splitHostPort(addr);
  return startHttpBootServer({
    host,
    port,
    inventory,
    script: {
      httpBaseUrl,
      apiAddress: cfg.apiAddress,
      artifacts: defaultBootArtifacts,
      extraKernelArgs: cfg.kernelArgs,
    },
    ...(cfg.artifactsDir === undefined ? {} : { artifactsDir: cfg.artifactsDir }),
    ...(cfg.bootOsDir === undefined ? {} : { bootOsDir: ensureDirectory(cfg.bootOsDir) }),
    ...(cfg.credentials === undefined ? {} : { credentials: cfg.credentials }),
    ...(cfg.registeredArtifacts === undefined ? {} : { registered: cfg.registeredArtifacts }),
    binariesDir: cfg.tftpRoot ?? prepareDefaultTftpRoot(cfg.dataDir),
    logger: logger.child({ service: 'http' }),
    onRequest: (e) => {
      logger.debug({ service: 'http', ...e }, 'HTTP boot request');
    },
  });
}

/** The iPXE binaries over TFTP on `addr`, each transfer logged at debug level. */
async function startTftp(
  cfg: NodeBootConfig,
  addr: string,
  addresses: AddressFeed,
  log: Logger,
): Promise<TftpServer> {
  const { host, port } = splitHostPort(addr);
  const root = cfg.tftpRoot ?? prepareDefaultTftpRoot(cfg.dataDir);
  const tftp = await startTftpServer({
    host,
    port,
    root,
    // On 0.0.0.0, every local address (the VIP included) gets its own listener, following the
    // link watcher, so replies leave from the address the client asked.
    ...(host === '0.0.0.0' ? { addresses } : {}),
    // Transfers run on one worker thread per core (the server's default).
    ...(cfg.tftpTransfersMax === undefined ? {} : { limits: { transfersMax: cfg.tftpTransfersMax } }),
    hooks: {
      onTransferStart: (e) => {
        log.debug({ filename: e.filename, client: e.client }, 'TFTP transfer started');
      },
      onTransferEnd: (e) => {
        log.debug({ filename: e.filename, end: e.end, error: e.error }, 'TFTP transfer ended');
      },
      onRequestRefused: (e) => {
        log.info({ filename: e.filename, code: e.code, reason: e.message }, 'TFTP request refused');
      },
      // Debug only: in a storm every retransmission past the cap lands here, and the client
      // is served once a slot frees. droppedTotal tells how often it happens.
      onRequestDropped: (e) => {
        log.debug(
          { filename: e.filename, client: e.client, reason: e.reason, droppedTotal: e.droppedTotal },
          'TFTP request dropped',
        );
      },
      onListenersChanged: (addresses) => {
        log.info({ addresses }, 'TFTP listening on local addresses');
      },
      onError: (err) => {
        log.warn({ err }, 'TFTP server error');
      },
    },
  });
  log.info({ addr, root, workers: tftp.stats.workers }, 'TFTP serving');
  return tftp;
}

/** DHCP on the interface or address, answering only while `isLeader`; pools in dynamic mode. */
function startDhcp(
  cfg: NodeBootConfig,
  httpBaseUrl: string,
  inventory: BootInventory,
  isLeader: () => boolean,
  logger: Logger,
  ledger: LeaseLedger | undefined,
  segment: readonly Subnet[],
  counters: DhcpCounters,
): Promise<DhcpServer> {
  const where =
    cfg.dhcpInterface !== undefined
      ? { interfaceName: cfg.dhcpInterface, segment }
      : (() => {
          const { host, port } = splitHostPort(cfg.dhcpAddr ?? '');
          return { address: host, port };
        })();
  const leases =
    cfg.dhcpMode !== 'dynamic'
      ? undefined
      : dynamicLeases({
          pools: cfg.dhcpPools.map(parsePoolSpec),
          leaseTimeS: cfg.dhcpLeaseTimeS,
          reservations: reservedLeases(),
          ledger: ledger ?? missingLedger(),
        });
  return startDhcpServer({
    inventory,
    serverAddress: cfg.advertise,
    httpBaseUrl,
    mode: cfg.dhcpMode,
    ...(leases === undefined ? {} : { leases }),
    shouldAnswer: isLeader,
    ...where,
    counters,
    logger: logger.child({ service: 'dhcp' }),
  });
}
