// The process configuration of `slipway server`, from flags or a YAML/JSON file, validated
// once at the edge. Errors name the field and how to fix it.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import type { Member } from '../raft/core/types.js';

const hostPort = z
  .string()
  .regex(/^([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):\d{1,5}$/, 'must be HOST:PORT, for example 127.0.0.1:7001');
const memberId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, "must be 1-63 letters, digits, '.', '_' or '-'");

export const serverConfigSchema = z
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
    tickMs: z.number().int().min(5).max(1000).default(50),
    electionTicks: z.number().int().min(3).max(100).default(6),
    heartbeatTicks: z.number().int().min(1).max(50).default(1),
    snapshotEntries: z.number().int().min(0).default(10_000),
    logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal']).default('info'),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.heartbeatTicks >= c.electionTicks) {
      ctx.addIssue({
        code: 'custom',
        path: ['heartbeatTicks'],
        message: 'must be smaller than electionTicks',
      });
    }
    if (c.peers.length === 0) {
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
    const ids = new Set(c.peers.map((p) => p.id));
    if (ids.size !== c.peers.length)
      ctx.addIssue({ code: 'custom', path: ['peers'], message: 'has a duplicate id' });
  });

export type ServerConfig = z.infer<typeof serverConfigSchema>;

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Parses `n1=127.0.0.1:7001,n2=127.0.0.1:7002`. */
export function parsePeers(text: string): { id: string; addr: string }[] {
  return text
    .split(',')
    .filter((s) => s.trim() !== '')
    .map((item) => {
      const eq = item.indexOf('=');
      if (eq <= 0) throw new ConfigError(`--peers: "${item}" must be ID=HOST:PORT`);
      return { id: item.slice(0, eq).trim(), addr: item.slice(eq + 1).trim() };
    });
}

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

export function initialMembers(c: ServerConfig): Member[] {
  return c.peers.map((p) => ({ id: p.id, addr: p.addr, apiAddr: p.id === c.id ? c.apiAddr : '' }));
}
