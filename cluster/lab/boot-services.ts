// Runs Slipway's boot services (DHCP, TFTP, HTTP) as one process over a fixed inventory, for
// the network-namespace lab: Node cannot enter a namespace in-process, so tests and benchmarks
// start this with `ip netns exec NS node --import tsx cluster/lab/boot-services.ts CONFIG.json`.
//
// stdout carries one line per event, "EVENT {json}" (see BootEvent), so the caller can wait on
// what the services saw; logs go to stderr. SIGTERM or SIGINT closes every server and prints a
// final "stopped" event with the DHCP counters.
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import type { Hardware } from '../../src/model/records.js';
import {
  staticInventory,
  type BootInventory,
  startDhcpServer,
  type DhcpCounters,
  type DhcpMode,
  type DhcpServer,
  hexWithColons,
  clientHardwareAddress,
  startHttpBootServer,
  type HttpBootServer,
  defaultBootArtifacts,
  startTftpServer,
  type TftpServer,
} from '../../src/boot/index.js';
import { addressFeedOf, LinkWatcher } from '../../src/platform/link-watch.js';
import { createLogger, type Logger } from '../../src/platform/logger.js';

export interface BootServicesConfig {
  readonly hardware: readonly Hardware[];
  /** http://VIP:PORT, as machines should reach the HTTP server. */
  readonly httpBaseUrl: string;
  readonly dhcp?: {
    readonly serverAddress: string;
    readonly mode: DhcpMode;
    readonly interfaceName?: string;
    readonly address?: string;
    readonly port?: number;
    readonly relayPort?: number;
    readonly clientPort?: number;
  };
  readonly tftp?: {
    readonly root: string;
    readonly host?: string;
    readonly port?: number;
    /** With host 0.0.0.0: a listener per local address, following the link watcher (as a node does). */
    readonly followAddresses?: boolean;
  };
  readonly http?: {
    readonly apiAddress: string;
    readonly host?: string;
    readonly port?: number;
    readonly artifactsDir?: string;
    readonly binariesDir?: string;
    readonly extraKernelArgs?: readonly string[];
  };
}

export type BootEvent =
  | {
      readonly event: 'ready';
      readonly dhcpPort?: number;
      readonly tftpPort?: number;
      readonly httpPort?: number;
    }
  | {
      readonly event: 'dhcp-reply';
      readonly mac: string;
      readonly request: string;
      readonly reply: string;
      readonly via: string;
      readonly to: string;
      readonly giaddr: string;
      readonly yiaddr: string;
      readonly bootfile: string;
      /** Option 82 as received and as sent back, colon hex; null when absent. */
      readonly requestAgentInfo: string | null;
      readonly replyAgentInfo: string | null;
    }
  | { readonly event: 'dhcp-ignore'; readonly mac: string; readonly request: string; readonly reason: string }
  | { readonly event: 'dhcp-malformed'; readonly from: string; readonly problem: string }
  | { readonly event: 'http'; readonly method: string; readonly url: string; readonly status: number }
  | { readonly event: 'tftp-start'; readonly filename: string; readonly client: string }
  | {
      readonly event: 'tftp-end';
      readonly filename: string;
      readonly client: string;
      readonly outcome: string;
      /** Why a failed transfer failed ('addressGone', 'timeout', ...); null otherwise. */
      readonly reason: string | null;
    }
  /** The local addresses with a TFTP listener of their own, after a change. */
  | { readonly event: 'tftp-listening'; readonly addresses: readonly string[] }
  | {
      readonly event: 'tftp-refused';
      readonly filename: string;
      readonly code: number;
      readonly message: string;
    }
  | { readonly event: 'error'; readonly message: string }
  | { readonly event: 'stopped'; readonly dhcpCounters: DhcpCounters | null };

/** The prefix of event lines on stdout. */
export const eventLinePrefix = 'EVENT ';

function emit(event: BootEvent): void {
  process.stdout.write(`${eventLinePrefix}${JSON.stringify(event)}\n`);
}

export interface RunningBootServices {
  readonly dhcp: DhcpServer | undefined;
  readonly tftp: TftpServer | undefined;
  readonly http: HttpBootServer | undefined;
  close(): Promise<void>;
}

export async function startBootServices(config: BootServicesConfig): Promise<RunningBootServices> {
  const logger = createLogger({ component: 'boot-lab' }, process.env['SLIPWAY_LOG_LEVEL'] ?? 'warn');
  const inventory = staticInventory(config.hardware);
  const errorEvent = (error: unknown): void =>
    emit({ event: 'error', message: error instanceof Error ? error.message : String(error) });
  const started: { close(): Promise<void> }[] = [];
  try {
    const http =
      config.http === undefined
        ? undefined
        : await startHttpBootServer({
            ...(config.http.host === undefined ? {} : { host: config.http.host }),
            ...(config.http.port === undefined ? {} : { port: config.http.port }),
            ...(config.http.artifactsDir === undefined ? {} : { artifactsDir: config.http.artifactsDir }),
            ...(config.http.binariesDir === undefined ? {} : { binariesDir: config.http.binariesDir }),
            inventory,
            script: {
              httpBaseUrl: config.httpBaseUrl,
              apiAddress: config.http.apiAddress,
              artifacts: defaultBootArtifacts,
              extraKernelArgs: config.http.extraKernelArgs ?? [],
            },
            logger,
            onRequest: (e) => emit({ event: 'http', method: e.method, url: e.url, status: e.status }),
          });
    if (http !== undefined) started.push(http);
    const links = config.tftp?.followAddresses === true ? await LinkWatcher.start({ logger }) : undefined;
    if (links !== undefined) started.push({ close: () => Promise.resolve(links.close()) });
    const tftp =
      config.tftp === undefined
        ? undefined
        : await startTftpServer({
            root: config.tftp.root,
            ...(config.tftp.host === undefined ? {} : { host: config.tftp.host }),
            ...(config.tftp.port === undefined ? {} : { port: config.tftp.port }),
            ...(links === undefined ? {} : { addresses: addressFeedOf(links) }),
            hooks: {
              onTransferStart: (e) =>
                emit({ event: 'tftp-start', filename: e.filename, client: e.client.address }),
              onTransferEnd: (e) =>
                emit({
                  event: 'tftp-end',
                  filename: e.filename,
                  client: e.client.address,
                  outcome: e.end,
                  reason: e.error?.reason ?? null,
                }),
              onListenersChanged: (addresses) => emit({ event: 'tftp-listening', addresses }),
              onRequestRefused: (e) =>
                emit({ event: 'tftp-refused', filename: e.filename, code: e.code, message: e.message }),
              onError: errorEvent,
            },
          });
    if (tftp !== undefined) started.push(tftp);
    const dhcp =
      config.dhcp === undefined
        ? undefined
        : await startDhcp(config.dhcp, config.httpBaseUrl, inventory, logger, errorEvent);
    if (dhcp !== undefined) started.push(dhcp);
    emit({
      event: 'ready',
      ...(dhcp === undefined ? {} : { dhcpPort: dhcp.port }),
      ...(tftp === undefined ? {} : { tftpPort: tftp.port }),
      ...(http === undefined ? {} : { httpPort: http.port }),
    });
    return { dhcp, tftp, http, close: () => closeAll(started) };
  } catch (error) {
    await closeAll(started);
    throw error;
  }
}

function startDhcp(
  dhcp: NonNullable<BootServicesConfig['dhcp']>,
  httpBaseUrl: string,
  inventory: BootInventory,
  logger: Logger,
  errorEvent: (error: unknown) => void,
): Promise<DhcpServer> {
  const hex = (bytes: Uint8Array | undefined): string | null =>
    bytes === undefined ? null : hexWithColons(bytes);
  return startDhcpServer({
    inventory,
    serverAddress: dhcp.serverAddress,
    httpBaseUrl,
    mode: dhcp.mode,
    ...(dhcp.interfaceName === undefined ? {} : { interfaceName: dhcp.interfaceName }),
    ...(dhcp.address === undefined ? {} : { address: dhcp.address }),
    ...(dhcp.port === undefined ? {} : { port: dhcp.port }),
    ...(dhcp.relayPort === undefined ? {} : { relayPort: dhcp.relayPort }),
    ...(dhcp.clientPort === undefined ? {} : { clientPort: dhcp.clientPort }),
    logger,
    hooks: {
      onReply: (e) =>
        emit({
          event: 'dhcp-reply',
          mac: clientHardwareAddress(e.request),
          request: e.request.options.messageType ?? 'BOOTP',
          reply: e.reply.options.messageType ?? 'BOOTP',
          via: e.via,
          to: `${e.to.address}:${e.to.port}`,
          giaddr: e.request.giaddr,
          yiaddr: e.reply.yiaddr,
          bootfile: e.reply.options.bootfileName ?? e.reply.file,
          requestAgentInfo: hex(e.request.options.relayAgentInfo?.raw),
          replyAgentInfo: hex(e.reply.options.relayAgentInfo?.raw),
        }),
      onIgnore: (e) =>
        emit({
          event: 'dhcp-ignore',
          mac: clientHardwareAddress(e.request),
          request: e.request.options.messageType ?? 'BOOTP',
          reason: e.reason,
        }),
      onMalformed: (e) =>
        emit({ event: 'dhcp-malformed', from: `${e.from.address}:${e.from.port}`, problem: e.error.problem }),
      onError: errorEvent,
    },
  });
}

async function closeAll(servers: readonly { close(): Promise<void> }[]): Promise<void> {
  await Promise.all(servers.map((server) => server.close()));
}

async function main(configPath: string | undefined): Promise<void> {
  if (configPath === undefined) {
    console.error('usage: node --import tsx cluster/lab/boot-services.ts CONFIG.json');
    process.exitCode = 2;
    return;
  }
  const config = JSON.parse(await readFile(configPath, 'utf8')) as BootServicesConfig;
  const services = await startBootServices(config);
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void services.close().then(() => {
      emit({
        event: 'stopped',
        dhcpCounters: services.dhcp === undefined ? null : { ...services.dhcp.counters },
      });
      process.exit(0);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main(process.argv[2]);
}
