// Kea 2.2 for the DHCP benchmark: its configuration, as shared/anchors/config/kea/kea-dhcp4.json
// has it (raw socket, memfile with persist on and lfc off, multi-threading off: the 2.2
// default), on the benchmark's subnet; and the tools the benchmark needs, found or explained.
import { spawnSync } from 'node:child_process';

export const installCommand =
  'apt-get update && apt-get install -y kea-dhcp4-server kea-admin' +
  ' && (systemctl disable --now kea-dhcp4-server 2>/dev/null || true)';

export interface KeaSubnet {
  /** "10.96.0.0/24". */
  readonly cidr: string;
  readonly router: string;
  /** First and last address of the pool ("10.96.0.10", "10.96.0.250"). */
  readonly pool: readonly [string, string];
}

export interface KeaReservation {
  readonly mac: string;
  readonly ip: string;
}

export interface KeaConfigSpec {
  readonly iface: string;
  readonly subnet: KeaSubnet;
  readonly leaseFile: string;
  readonly logFile: string;
  readonly leaseTimeS: number;
  /**
   * Host reservations instead of the pool: the subnet then has no pool, so Kea, like Slipway's
   * reservation mode, answers only the machines it knows.
   */
  readonly reservations?: readonly KeaReservation[];
}

export function keaConfig(spec: KeaConfigSpec): object {
  const reserved = spec.reservations !== undefined;
  return {
    Dhcp4: {
      'interfaces-config': { interfaces: [spec.iface], 'dhcp-socket-type': 'raw' },
      'lease-database': { type: 'memfile', persist: true, name: spec.leaseFile, 'lfc-interval': 0 },
      'valid-lifetime': spec.leaseTimeS,
      'renew-timer': Math.floor(spec.leaseTimeS / 4),
      'rebind-timer': Math.floor(spec.leaseTimeS / 2),
      'multi-threading': { 'enable-multi-threading': false },
      subnet4: [
        {
          id: 1,
          subnet: spec.subnet.cidr,
          pools: reserved ? [] : [{ pool: `${spec.subnet.pool[0]} - ${spec.subnet.pool[1]}` }],
          ...(reserved
            ? {
                'reservations-in-subnet': true,
                'reservations-out-of-pool': true,
                reservations: spec.reservations.map((r) => ({ 'hw-address': r.mac, 'ip-address': r.ip })),
              }
            : {}),
          'option-data': [{ name: 'routers', data: spec.subnet.router }],
        },
      ],
      loggers: [{ name: 'kea-dhcp4', output_options: [{ output: spec.logFile }], severity: 'WARN' }],
    },
  };
}

export interface Tools {
  readonly kea: string | null;
  readonly perfdhcp: string | null;
}

/** The versions of kea-dhcp4 and perfdhcp, null for a missing one. */
export function findTools(): Tools {
  const version = (command: string, args: readonly string[]): string | null => {
    const r = spawnSync(command, args, { encoding: 'utf8', env: { ...process.env, PATH: sbinPath() } });
    if (r.error !== undefined) return null;
    const text = `${r.stdout}${r.stderr}`.trim();
    return /\d+\.\d+\.\d+/.exec(text)?.[0] ?? (text.split('\n')[0] || 'unknown');
  };
  return { kea: version('kea-dhcp4', ['-v']), perfdhcp: version('perfdhcp', ['-v']) };
}

/** PATH with the sbin directories, where Debian puts both tools. */
export function sbinPath(): string {
  const path = (process.env['PATH'] ?? '').split(':');
  for (const dir of ['/usr/sbin', '/sbin', '/usr/local/sbin']) if (!path.includes(dir)) path.push(dir);
  return path.join(':');
}
