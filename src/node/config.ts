// The process configuration of `slipway server`, from flags or a YAML/JSON file, validated
// once at the edge. Errors name the field and how to fix it.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { overlappingPools, parsePoolSpec, type DhcpPool } from '../boot/dhcp/pool.js';
import type { Member } from '../raft/core/types.js';
import { leaseTimeSMax } from '../model/limits.js';
import { isHostPort } from '../platform/host-port.js';
import { insecureNetworkFlag, isLoopbackAddress } from '../platform/plaintext-policy.js';
import { ConfigError } from '../platform/config-error.js';
import { memberIdForm, memberIdPattern } from '../model/member-id.js';
import { apiMessageBytesMaxLimit } from '../wire/contract.js';

export { ConfigError };

const hostPort = z
  .string()
  .refine(isHostPort, 'must be HOST:PORT with a port 1-65535, for example 127.0.0.1:7001');
const ipv4 = z
  .string()
  .regex(/^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/, 'must be an IPv4 address');
const memberId = z.string().regex(memberIdPattern, `must be ${memberIdForm}`);

/** A Linux interface name: at most 15 bytes (IFNAMSIZ), no slash or white space. */
const interfaceName = z.string().regex(/^[A-Za-z0-9_.:@-]{1,15}$/, 'must be an interface name');

const serverConfigFields = z
  .object({
    id: memberId,
    dataDir: z.string().min(1, 'must name a directory'),
    raftAddr: hostPort,
    apiAddr: hostPort,
    /**
     * The initial voters' raft addresses, itself included; ignored once the data dir exists.
     * With `join`: the existing members to answer until this node has the membership.
     */
    peers: z.array(z.object({ id: memberId, addr: hostPort })).default([]),
    /** Start empty and wait to be added with `slipway member add`. */
    join: z.boolean().default(false),
    /**
     * Disaster recovery (docs/decisions/0021): rewrite the stored membership to this node alone
     * and start as a one-node cluster, for a survivor whose majority is lost for good.
     */
    forceNewCluster: z.boolean().default(false),
    tickMs: z.number().int().min(5).max(1000).default(50),
    electionTicks: z.number().int().min(3).max(100).default(6),
    heartbeatTicks: z.number().int().min(1).max(50).default(1),
    snapshotEntries: z.number().int().min(0).default(10_000),
    logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal']).default('info'),
    /** The address machines are told to use (DHCP server id, next-server, URLs); default: the API host. */
    vip: ipv4.optional(),
    /**
     * Hold the VIP on this interface while this node is the leader with a live quorum
     * (lb/vip-manager.ts); without it, something else (keepalived, the operator) places the VIP.
     */
    vipInterface: interfaceName.optional(),
    /** Serve DHCP on this interface (broadcasts included). */
    dhcpInterface: interfaceName.optional(),
    /** Serve DHCP on this address only (relayed and unicast requests). */
    dhcpAddr: hostPort.optional(),
    dhcpMode: z.enum(['reservation', 'dynamic', 'proxy']).default('reservation'),
    /** Dynamic mode's pools, START-END/PREFIX[,router=IP][,dns=IP+IP] (src/boot/dhcp/pool.ts). */
    dhcpPools: z.array(z.string()).default([]),
    dhcpLeaseTimeS: z.number().int().min(60).max(leaseTimeSMax).default(3600),
    /**
     * Discovery (docs/decisions/0029-discovery.md): a machine whose MAC no machine has boots the
     * boot OS in inventory mode and is enrolled with its inventory. Dynamic or proxy mode only.
     */
    discovery: z.boolean().default(false),
    tftpAddr: hostPort.optional(),
    /** Default: a copy of Debian's iPXE binaries (/usr/lib/ipxe) in the data dir. */
    tftpRoot: z.string().min(1).optional(),
    /** TFTP transfers in progress at once; past it, requests are dropped for the client to retransmit. */
    tftpTransfersMax: z.number().int().min(1).max(1_000_000).optional(),
    httpAddr: hostPort.optional(),
    /** Kernels and initrds served under /artifacts/. */
    artifactsDir: z.string().min(1).optional(),
    /** The boot OS served under /boot/ (`slipway bootos build --out DIR`). Default: DATA_DIR/bootos. */
    bootOsDir: z.string().min(1).optional(),
    /**
     * What booted machines' workers dial (slipway.server in the iPXE script): the balancer on the
     * VIP in production. Default: the VIP (or this node) with this node's API port.
     */
    workerServer: hostPort.optional(),
    /** Extra kernel arguments in the generated iPXE scripts. */
    kernelArgs: z.array(z.string()).default([]),
    /**
     * Where the leader writes finished workflows, as JSON lines, before it removes them from the
     * state past the retention (docs/decisions/0020): a file, or a directory (one file per day).
     */
    workflowArchive: z.string().min(1).optional(),
    /** Where Prometheus scrapes /metrics; off when absent. */
    metricsAddr: hostPort.optional(),
    /**
     * The directory made by `slipway bootstrap`: ca.crt, ID.crt, ID.key (TLS on the API, mutual
     * TLS between nodes) and admin.token (tokens required on every call).
     */
    tlsDir: z.string().min(1).optional(),
    /** Plaintext and no tokens: for a development cluster on loopback only. */
    insecure: z.boolean().default(false),
    /**
     * With `insecure`: listen and talk to peers beyond loopback all the same (a lab's private
     * network). Tokens and worker credentials then cross the network in the clear.
     */
    insecureAllowNetwork: z.boolean().default(false),
    /** A file holding the bootstrap admin token; when set, every API call needs a token. */
    adminTokenFile: z.string().min(1).optional(),
    // ---- limits on the API (docs/decisions/0011-security.md, Limits) ----
    /**
     * One API message, in bytes (grpc.max_receive_message_length). Artifact uploads come in
     * 1 MiB chunks and the largest control command is 1 MiB of JSON, so 4 MiB leaves room.
     */
    apiMessageBytesMax: z
      .number()
      .int()
      .min(2 * 1024 * 1024)
      .max(apiMessageBytesMaxLimit)
      .default(4 * 1024 * 1024),
    /** Calls and streams one client connection may hold open at once (grpc.max_concurrent_streams). */
    apiStreamsPerConnectionMax: z.number().int().min(8).max(10_000).default(100),
    /** Worker streams one machine may hold on one node; a further stream closes the oldest. */
    workerSessionsMax: z.number().int().min(1).max(64).default(4),
    /**
     * On SIGTERM, how long the node drains before it stops: it answers NOT_SERVING, ends its
     * worker streams and waits this long at most for them to move. 0: stop at once.
     */
    drainGraceMs: z.number().int().min(0).max(600_000).default(5000),
    /**
     * Failed authentications one source address may make in a burst; beyond them its calls are
     * refused unchecked, and it earns one more every authFailureWindowS / authFailuresMax.
     */
    authFailuresMax: z.number().int().min(1).max(100_000).default(10),
    authFailureWindowS: z.number().int().min(1).max(86_400).default(60),
  })
  .strict();

type ConfigFields = z.infer<typeof serverConfigFields>;

export const serverConfigSchema = serverConfigFields.superRefine((c, ctx) => {
  checkRaft(c, ctx);
  checkTransportSecurity(c, ctx);
  checkBootServices(c, ctx);
  checkDhcpPools(c, ctx);
  const ids = new Set(c.peers.map((p) => p.id));
  if (ids.size !== c.peers.length)
    ctx.addIssue({ code: 'custom', path: ['peers'], message: 'has a duplicate id' });
});

/** Raft timing, and the members to start with or to join. */
function checkRaft(c: ConfigFields, ctx: z.RefinementCtx): void {
  if (c.heartbeatTicks >= c.electionTicks) {
    ctx.addIssue({
      code: 'custom',
      path: ['heartbeatTicks'],
      message: 'must be smaller than electionTicks',
    });
  }
  if (c.forceNewCluster && c.join) {
    ctx.addIssue({
      code: 'custom',
      path: ['forceNewCluster'],
      message: 'cannot be combined with --join (it restarts an existing member on its own)',
    });
  }
  if (c.peers.length === 0 && !c.forceNewCluster) {
    ctx.addIssue({
      code: 'custom',
      path: ['peers'],
      message: c.join
        ? "name the existing members' raft addresses (--peers n1=HOST:PORT,...)"
        : 'name the initial members (--peers n1=HOST:PORT,...), or pass --join to be added later',
    });
  }
  if (!c.join && c.peers.length > 0 && !c.peers.some((p) => p.id === c.id)) {
    ctx.addIssue({ code: 'custom', path: ['peers'], message: `must include this node (${c.id}) itself` });
  }
}

/** TLS or --insecure, and plaintext only on loopback unless the operator says otherwise. */
function checkTransportSecurity(c: ConfigFields, ctx: z.RefinementCtx): void {
  if (!c.insecure && c.tlsDir === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['tlsDir'],
      message:
        'TLS is on by default: pass --tls-dir DIR (made by `slipway bootstrap`), or --insecure for a development cluster',
    });
  }
  if (c.insecure && c.tlsDir !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['insecure'], message: 'give --tls-dir or --insecure, not both' });
  }
  if (c.insecureAllowNetwork && !c.insecure) {
    ctx.addIssue({
      code: 'custom',
      path: ['insecureAllowNetwork'],
      message: `${insecureNetworkFlag} goes with --insecure (with TLS, any address is allowed)`,
    });
  }
  if (c.insecure && !c.insecureAllowNetwork) {
    const plaintext: [string, string][] = [
      ['apiAddr', c.apiAddr],
      ['raftAddr', c.raftAddr],
      ...c.peers.map((p, i): [string, string] => [`peers.${String(i)}`, p.addr]),
    ];
    for (const [field, addr] of plaintext) {
      // An address that does not parse (a port 0) has its own error; "not loopback" would mislead.
      if (!isHostPort(addr) || isLoopbackAddress(addr)) continue;
      ctx.addIssue({
        code: 'custom',
        path: field.split('.'),
        message:
          `${addr} is not a loopback address, and --insecure serves plaintext gRPC with no tokens: ` +
          `use --tls-dir (\`slipway bootstrap\`), or for a lab on a private network add ${insecureNetworkFlag}`,
      });
    }
  }
}

/** The VIP and the DHCP listener the boot services need. */
function checkBootServices(c: ConfigFields, ctx: z.RefinementCtx): void {
  if (c.vipInterface !== undefined && c.vip === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['vipInterface'],
      message: 'names where to hold the VIP: pass --vip IP as well',
    });
  }
  if (c.dhcpInterface !== undefined && c.dhcpAddr !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['dhcpAddr'],
      message: 'give --dhcp-interface or --dhcp-addr, not both',
    });
  }
  checkBootAddresses(c, ctx);
  const bootOn =
    c.dhcpInterface !== undefined ||
    c.dhcpAddr !== undefined ||
    c.tftpAddr !== undefined ||
    c.httpAddr !== undefined;
  if (bootOn && c.vip === undefined && /^(0\.0\.0\.0|\[::\]|\[::0\]):/.test(c.apiAddr)) {
    ctx.addIssue({
      code: 'custom',
      path: ['vip'],
      message:
        'boot services need the address machines should use: pass --vip, or an --api-addr with a concrete host',
    });
  }
}

/**
 * The boot services' listen hosts: addresses a service can wait for (one not on this host yet is
 * waited for), never something no interface can ever hold; a node refuses those at start.
 */
function checkBootAddresses(c: ConfigFields, ctx: z.RefinementCtx): void {
  const fields = [
    ['dhcpAddr', '--dhcp-addr', c.dhcpAddr, false],
    ['tftpAddr', '--tftp-addr', c.tftpAddr, false],
    ['httpAddr', '--http-addr', c.httpAddr, true],
  ] as const;
  for (const [field, flag, addr, ipv6] of fields) {
    if (addr === undefined) continue;
    const host = addr.slice(0, addr.lastIndexOf(':'));
    const problem = listenHostProblem(host, ipv6);
    if (problem === undefined) continue;
    ctx.addIssue({
      code: 'custom',
      path: [field],
      message: `${flag} ${addr}: ${problem}; give 0.0.0.0 (every address) or an address of this host`,
    });
  }
}

/** Why `host` can never be a local address to listen on, or undefined when it can be. */
function listenHostProblem(host: string, ipv6Allowed: boolean): string | undefined {
  if (ipv6Allowed && /^\[[0-9a-fA-F:.]+\]$/.test(host) && isIP(host.slice(1, -1)) === 6) return undefined;
  if (isIP(host) !== 4)
    return `${host} is not an IPv4 address${ipv6Allowed ? ' or a bracketed IPv6 address' : ''}`;
  const first = Number(host.split('.')[0]);
  if (host === '255.255.255.255') return `${host} is the broadcast address, which no interface holds`;
  if (first >= 224 && first <= 239) return `${host} is a multicast address, which no interface holds`;
  if (first >= 240) return `${host} is a reserved (class E) address, which no interface holds`;
  return undefined;
}

/** Dynamic DHCP pools: only in dynamic mode, each well formed, none overlapping another. */
function checkDhcpPools(c: ConfigFields, ctx: z.RefinementCtx): void {
  if (c.discovery && c.dhcpMode === 'reservation') {
    ctx.addIssue({
      code: 'custom',
      path: ['discovery'],
      message:
        'discovery needs --dhcp-mode dynamic (pool addresses for unknown machines) or proxy (beside another DHCP server): in reservation mode an unknown machine gets no address',
    });
  }
  if (c.dhcpMode === 'dynamic' && c.dhcpPools.length === 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['dhcpPools'],
      message: 'dynamic mode needs at least one --dhcp-pool START-END/PREFIX',
    });
  }
  if (c.dhcpMode !== 'dynamic' && c.dhcpPools.length > 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['dhcpPools'],
      message: 'pools are used only with --dhcp-mode dynamic',
    });
  }
  const pools: DhcpPool[] = [];
  c.dhcpPools.forEach((spec, i) => {
    try {
      pools.push(parsePoolSpec(spec));
    } catch (error) {
      ctx.addIssue({
        code: 'custom',
        path: ['dhcpPools', i],
        message: error instanceof Error ? error.message : String(error),
      });
    }
  });
  const overlap = overlappingPools(pools);
  if (overlap !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['dhcpPools'],
      message: `pools ${overlap[0].spec} and ${overlap[1].spec} overlap`,
    });
  }
}

export type ServerConfig = z.infer<typeof serverConfigSchema>;

export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  let v: unknown;
  try {
    v = parseYaml(text);
  } catch (err) {
    throw new ConfigError(`config file ${path} is not valid YAML/JSON: ${(err as Error).message}`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new ConfigError(`config file ${path} must hold a mapping of settings`);
  }
  return v as Record<string, unknown>;
}

export function validateServerConfig(raw: Record<string, unknown>): ServerConfig {
  const r = serverConfigSchema.safeParse(raw);
  if (r.success) return r.data;
  const lines = r.error.issues.map((i) => `  ${i.path.join('.') || '(config)'}: ${i.message}`);
  throw new ConfigError(`invalid server configuration:\n${lines.join('\n')}`);
}

/** The address machines are told to use: the VIP, or this node's API host. */
export function advertisedAddress(c: ServerConfig): string {
  if (c.vip !== undefined) return c.vip;
  return c.apiAddr.slice(0, c.apiAddr.lastIndexOf(':')).replace(/^\[|\]$/g, '');
}

export function initialMembers(c: ServerConfig): Member[] {
  return c.peers.map((p) => ({ id: p.id, addr: p.addr, apiAddr: p.id === c.id ? c.apiAddr : '' }));
}
