// The boot services of one provisioner node (DHCP, TFTP, HTTP) over the replicated state.
// Every node runs them so that machines boot whichever node holds the VIP; in steady state only
// the leader (which alone holds the VIP, invariant 5) answers DHCP.
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ControlState } from '../state/control/control-state.js';
import { dynamicLeases, type LeaseLedger } from './dhcp/dynamic-leases.js';
import { parsePoolSpec } from './dhcp/pool.js';
import { reservedLeases, startDhcpServer } from './dhcp/server.js';
import type { DhcpMode, DhcpServer } from './dhcp/server.js';
import type { BootInventory } from './inventory.js';
import { defaultBootArtifacts } from './http/ipxe-script.js';
import { startHttpBootServer } from './http/server.js';
import type { CredentialClaims, HttpBootServer, RegisteredArtifacts } from './http/server.js';
import { startTftpServer } from './tftp/server.js';
import { polledAddressFeed } from './tftp/polled-address-feed.js';
import type { TftpServer } from './tftp/server.js';

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
}

export interface NodeBootServices {
  readonly dhcp: DhcpServer | undefined;
  readonly tftp: TftpServer | undefined;
  readonly http: HttpBootServer | undefined;
  close(): Promise<void>;
}

function missingLedger(): never {
  throw new Error('dynamic DHCP mode needs the replicated lease ledger');
}

export function inventoryOf(control: ControlState): BootInventory {
  return { byMac: (mac) => control.hardwareByMac(mac) };
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

export async function startNodeBootServices(
  cfg: NodeBootConfig,
  control: ControlState,
  isLeader: () => boolean,
  logger: Logger,
  /** Dynamic mode's committed leases. */
  ledger?: LeaseLedger,
): Promise<NodeBootServices> {
  const inventory = inventoryOf(control);
  const started: { close(): Promise<void> }[] = [];
  const closeAll = async (): Promise<void> => {
    await Promise.all(started.map((s) => s.close()));
  };
  try {
    // Machines reach the HTTP server at the advertised address (the VIP) on the configured port.
    const httpPort = cfg.httpAddr === undefined ? 80 : splitHostPort(cfg.httpAddr).port;
    const httpBaseUrl = `http://${cfg.advertise}${httpPort === 80 ? '' : `:${String(httpPort)}`}`;
    let http: HttpBootServer | undefined;
    if (cfg.httpAddr !== undefined) {
      http = await startHttp(cfg, cfg.httpAddr, httpBaseUrl, inventory, logger);
      started.push(http);
    }
    let tftp: TftpServer | undefined;
    if (cfg.tftpAddr !== undefined) {
      tftp = await startTftp(cfg, cfg.tftpAddr, logger.child({ service: 'tftp' }));
      started.push(tftp);
    }
    let dhcp: DhcpServer | undefined;
    if (cfg.dhcpInterface !== undefined || cfg.dhcpAddr !== undefined) {
      dhcp = await startDhcp(cfg, httpBaseUrl, inventory, isLeader, logger, ledger);
      started.push(dhcp);
    }
    return { dhcp, tftp, http, close: closeAll };
  } catch (err) {
    await closeAll();
    throw err;
  }
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
async function startTftp(cfg: NodeBootConfig, addr: string, log: Logger): Promise<TftpServer> {
  const { host, port } = splitHostPort(addr);
  const root = cfg.tftpRoot ?? prepareDefaultTftpRoot(cfg.dataDir);
  const tftp = await startTftpServer({
    host,
    port,
    root,
    // On 0.0.0.0, every local address (the VIP included) gets its own listener, so replies leave
    // from the address the client asked. TEMPORARY feed: the link watcher replaces the poll.
    ...(host === '0.0.0.0' ? { addresses: polledAddressFeed() } : {}),
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
): Promise<DhcpServer> {
  const where =
    cfg.dhcpInterface !== undefined
      ? { interfaceName: cfg.dhcpInterface }
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
    logger: logger.child({ service: 'dhcp' }),
  });
}
