// Test-side helpers for the network-namespace lab: the boot services as a process inside a
// lab namespace (events read from its stdout, waited on with deadlines), and hardware records
// for the in-memory inventory.
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { eventLinePrefix, type BootEvent, type BootServicesConfig } from '../../cluster/lab/boot-services.js';
import type { LabProcess, NetnsLab } from '../../cluster/netns-lab.js';
import { findExecutable } from '../../src/platform/executable.js';
import type { Hardware, NetworkInterface } from '../../src/model/records.js';

export { NetnsLab, LabProcess, type RunResult } from '../../cluster/netns-lab.js';
export type { BootEvent, BootServicesConfig } from '../../cluster/lab/boot-services.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const bootServicesScript = path.join(repoRoot, 'cluster/lab/boot-services.ts');

/** tsx compiles the services on first start; on a loaded 2-core machine that takes a while. */
const readyTimeoutMs = 60_000;

type EventOf<K extends BootEvent['event']> = Extract<BootEvent, { event: K }>;

/** The boot services running inside a lab namespace. */
export class BootServicesProcess {
  readonly process: LabProcess;
  readonly ready: EventOf<'ready'>;

  private constructor(process: LabProcess, ready: EventOf<'ready'>) {
    this.process = process;
    this.ready = ready;
  }

  static async start(lab: NetnsLab, ns: string, config: BootServicesConfig): Promise<BootServicesProcess> {
    const configPath = path.join(lab.dir, `boot-services-${ns}.json`);
    await writeFile(configPath, JSON.stringify(config));
    const started = lab.spawn(ns, [process.execPath, '--import', 'tsx', bootServicesScript, configPath], {
      cwd: repoRoot,
    });
    await started.waitForOutput(
      (output) => parseEvents(output).some((e) => e.event === 'ready'),
      readyTimeoutMs,
      'boot services ready',
    );
    const ready = parseEvents(started.output).find((e): e is EventOf<'ready'> => e.event === 'ready');
    if (ready === undefined) throw new Error('ready event vanished');
    return new BootServicesProcess(started, ready);
  }

  /** Every event so far, in order. */
  events(): BootEvent[] {
    return parseEvents(this.process.output);
  }

  eventsOf<K extends BootEvent['event']>(kind: K): EventOf<K>[] {
    return this.events().filter((e): e is EventOf<K> => e.event === kind);
  }

  /** The first event of `kind` satisfying `matches`, waiting up to `timeoutMs`. */
  async waitFor<K extends BootEvent['event']>(
    kind: K,
    matches: (event: EventOf<K>) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<EventOf<K>> {
    const find = (output: string): EventOf<K> | undefined =>
      parseEvents(output)
        .filter((e): e is EventOf<K> => e.event === kind)
        .find(matches);
    const output = await this.process.waitForOutput((text) => find(text) !== undefined, timeoutMs, what);
    const found = find(output);
    if (found === undefined) throw new Error(`${what}: event vanished`);
    return found;
  }

  /** SIGTERM; resolves with the final counters once the process has exited. */
  async stop(): Promise<EventOf<'stopped'> | undefined> {
    await this.process.stop();
    return this.eventsOf('stopped')[0];
  }
}

function parseEvents(output: string): BootEvent[] {
  const events: BootEvent[] = [];
  for (const line of output.split('\n')) {
    if (!line.startsWith(eventLinePrefix)) continue;
    try {
      events.push(JSON.parse(line.slice(eventLinePrefix.length)) as BootEvent);
    } catch {
      // A line still being written; it is complete on the next read.
    }
  }
  return events;
}

export interface HardwareSpec {
  readonly id: string;
  readonly mac: string;
  /** "10.77.1.50/24"; absent: no reservation. */
  readonly ip?: string;
  readonly gateway?: string;
  readonly dns?: readonly string[];
  readonly hostname?: string;
  readonly leaseTimeS?: number;
  readonly allowPXE?: boolean;
  readonly uefi?: boolean;
  readonly ipxeScript?: string;
  readonly ipxeUrl?: string;
}

/** A complete hardware record as the replicated state would hold it. */
export function hardwareRecord(spec: HardwareSpec): Hardware {
  const [address, prefix] = spec.ip?.split('/') ?? [];
  const iface: NetworkInterface = {
    mac: spec.mac,
    ...(address === undefined ? {} : { ip: { address, prefix: Number(prefix ?? 24) } }),
    ...(spec.gateway === undefined ? {} : { gateway: spec.gateway }),
    dns: spec.dns ?? [],
    ...(spec.hostname === undefined ? {} : { hostname: spec.hostname }),
    leaseTimeS: spec.leaseTimeS ?? 3600,
  };
  return {
    id: spec.id,
    interfaces: [iface],
    arch: 'x86_64',
    uefi: spec.uefi ?? false,
    netboot: {
      allowPXE: spec.allowPXE ?? true,
      allowWorkflow: true,
      ...(spec.ipxeScript === undefined ? {} : { ipxeScript: spec.ipxeScript }),
      ...(spec.ipxeUrl === undefined ? {} : { ipxeUrl: spec.ipxeUrl }),
    },
    metadata: {},
    workerTokenSha256: createHash('sha256').update(`token-${spec.id}`).digest('hex'),
    createdMs: 0,
    updatedMs: 0,
    version: 1,
  };
}

/** Fails with the Debian packages to install when a client a test drives is missing. */
export function requireCommands(packages: Readonly<Record<string, string>>): Promise<void> {
  const missing = Object.entries(packages)
    .filter(
      ([command]) => findExecutable(command, [`/usr/sbin/${command}`, `/sbin/${command}`]) === undefined,
    )
    .map(([command, debianPackage]) => `${command} (apt-get install ${debianPackage})`);
  if (missing.length > 0)
    return Promise.reject(
      new Error(
        `missing test tools: ${missing.join(', ')}; \`sudo npm test\` installs them (test/setup.sh, test/README.md)`,
      ),
    );
  return Promise.resolve();
}
