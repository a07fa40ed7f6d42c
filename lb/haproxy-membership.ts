// Keeps an HAProxy backend's servers in step with the cluster's membership (docs/decisions/0013,
// "Following the membership"): from who the members are and what HAProxy's runtime API shows,
// the runtime commands that close the gap. A new voter is added with its health check on; a
// member that left is drained first, so that its streams end by themselves, and deleted once it
// has none or its grace has passed (its remaining streams are then cut, and their clients
// reconnect to another node); a server leaves only when its member does. Pure: no socket, no
// clock; lb/haproxy-follower.ts drives it.
import { isIP } from 'node:net';
import { parseHostPort } from '../src/platform/host-port.js';
import { isMemberId } from '../src/model/member-id.js';

/** A member as MemberList and Status report it (proto/kv.proto MemberInfo). */
export interface Member {
  readonly id: string;
  readonly apiAddr: string;
  readonly voter: boolean;
}

export type AdminState = 'ready' | 'drain' | 'maint';

/** A server of the backend as the runtime API shows it. */
export interface RuntimeServer {
  readonly name: string;
  /** HOST:PORT, an IPv6 address in brackets. */
  readonly addr: string;
  readonly admin: AdminState;
  /** Streams (HAProxy sessions) it carries now. */
  readonly sessions: number;
}

/** One runtime API command and what its answer must be for it to have worked. */
export interface RuntimeCommand {
  readonly text: string;
  readonly ok: RegExp;
}

export type ChangeKind = 'add' | 'readdress' | 'ready' | 'drain' | 'delete';

/** The commands for one server, in order; a refused one ends that server's change. */
export interface ServerChange {
  readonly server: string;
  readonly kind: ChangeKind;
  readonly commands: readonly RuntimeCommand[];
}

/** A member the balancer does not take, and why. */
export interface SkippedMember {
  readonly member: string;
  readonly reason: string;
}

export interface FollowSettings {
  readonly backend: string;
  /** What follows address and id on an added server's line (haproxyServerOptions). */
  readonly serverOptions: string;
  /** How long a leaving server's streams may take to end by themselves. */
  readonly drainGraceMs: number;
  /** A member id's server id (haproxyServerId). */
  readonly serverId: (memberId: string) => number;
}

export interface FollowInput {
  readonly members: readonly Member[];
  readonly current: readonly RuntimeServer[];
  /**
   * Servers whose admin state this follower set (an add not yet seen ready, a drain), by name,
   * with when it did: a server of a member set to maint by an operator is left as it is.
   */
  readonly held: ReadonlyMap<string, number>;
  readonly now: number;
  readonly settings: FollowSettings;
}

export interface FollowPlan {
  readonly changes: readonly ServerChange[];
  /** `held` for the next round, as if every change succeeds: what is observed next corrects it. */
  readonly held: ReadonlyMap<string, number>;
  readonly skipped: readonly SkippedMember[];
}

const empty = /^$/;
const answers = {
  added: /^New server registered\./,
  deleted: /^Server deleted\./,
  readdressed: /^(IP changed from|no need to change the addr)/,
  none: empty,
} as const;

interface Wanted {
  readonly id: string;
  readonly apiAddr: string;
  /** HAProxy adds servers at run time by IP address only (it resolves no name for them). */
  readonly byIp: boolean;
}

/** The voters with an API address, each under its member id; the rest with the reason. */
export function wantedServers(
  members: readonly Member[],
  serverId: (memberId: string) => number,
): { wanted: Wanted[]; skipped: SkippedMember[] } {
  const wanted: Wanted[] = [];
  const skipped: SkippedMember[] = [];
  const ids = new Map<number, string>();
  for (const m of [...members].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
    const skip = (reason: string): void => void skipped.push({ member: m.id, reason });
    // A learner is still catching up: it joins the balancer when it is promoted.
    if (!m.voter) skip('a learner: taken once it is a voter');
    else if (m.apiAddr === '')
      skip('no API address in the membership (first members, from --peers, have none)');
    // A member id is also a valid HAProxy server name.
    else if (!isMemberId(m.id)) skip('its id is not a valid HAProxy server name');
    else {
      const hp = parseHostPort(m.apiAddr);
      const id = serverId(m.id);
      const other = ids.get(id);
      if (hp === undefined) skip(`API address "${m.apiAddr}" is not HOST:PORT`);
      else if (other !== undefined) skip(`its HAProxy server id ${id} is ${other}'s too`);
      else {
        ids.set(id, m.id);
        wanted.push({ id: m.id, apiAddr: m.apiAddr, byIp: isIP(bare(hp.host)) !== 0 });
      }
    }
  }
  return { wanted, skipped };
}

/** The changes that bring `current` to the membership. */
export function planFollow(input: FollowInput): FollowPlan {
  const { settings, now } = input;
  const { wanted, skipped } = wantedServers(input.members, settings.serverId);
  const held = new Map(input.held);
  // Servers gone from HAProxy need no memory (a later add starts afresh).
  for (const name of held.keys()) if (!input.current.some((s) => s.name === name)) held.delete(name);
  // No voter to send calls to is no reason to empty the balancer: change nothing.
  if (wanted.length === 0) return { changes: [], held, skipped: [] };
  const commands = runtimeCommands(settings);
  const changes: ServerChange[] = [];
  // Adds first, so that the backend never holds fewer live servers than it must.
  for (const w of wanted) {
    const s = input.current.find((c) => c.name === w.id);
    if (s === undefined) {
      if (w.byIp) {
        held.set(w.id, now);
        changes.push(commands.add(w));
      } else {
        skipped.push({ member: w.id, reason: `HAProxy adds servers by IP address only, not "${w.apiAddr}"` });
      }
      continue;
    }
    if (w.byIp && !sameAddr(s.addr, w.apiAddr)) changes.push(commands.readdress(w));
    if (s.admin === 'ready') held.delete(w.id);
    // Added or drained by this follower, and a member again: back into the rotation.
    else if (held.has(w.id)) changes.push(commands.ready(w.id));
  }
  const memberIds = new Set(input.members.map((m) => m.id));
  for (const s of input.current) {
    // A server leaves only with its member. A member the balancer does not take keeps a server
    // it has: the first members, given by --peers, have no API address in the membership.
    if (memberIds.has(s.name)) continue;
    if (s.admin === 'ready') {
      held.set(s.name, now);
      changes.push(commands.drain(s.name));
      continue;
    }
    const since = held.get(s.name) ?? now;
    held.set(s.name, since);
    if (s.sessions === 0 || now - since >= settings.drainGraceMs) changes.push(commands.delete(s));
  }
  // A member whose server HAProxy has is balanced, whatever kept it from being added.
  const unbalanced = skipped.filter((x) => !input.current.some((c) => c.name === x.member));
  return { changes, held, skipped: unbalanced };
}

/** Each kind of change as the runtime commands that make it. */
function runtimeCommands(settings: FollowSettings) {
  const server = (name: string): string => `${settings.backend}/${name}`;
  // HAProxy refuses to enable checks on a server added without them.
  const checked = /(^| )check( |$)/.test(settings.serverOptions);
  const ready = (name: string): RuntimeCommand[] => [
    ...(checked ? [{ text: `enable health ${server(name)}`, ok: answers.none }] : []),
    { text: `set server ${server(name)} state ready`, ok: answers.none },
  ];
  return {
    add: (w: Wanted): ServerChange => ({
      server: w.id,
      kind: 'add',
      commands: [
        {
          text: `add server ${server(w.id)} ${w.apiAddr} id ${settings.serverId(w.id)} ${settings.serverOptions}`,
          ok: answers.added,
        },
        // Checks of an added server start off, and the server itself in maintenance.
        ...ready(w.id),
      ],
    }),
    readdress: (w: Wanted): ServerChange => {
      const hp = parseHostPort(w.apiAddr)!;
      const text = `set server ${server(w.id)} addr ${bare(hp.host)} port ${hp.port}`;
      return { server: w.id, kind: 'readdress', commands: [{ text, ok: answers.readdressed }] };
    },
    ready: (name: string): ServerChange => ({ server: name, kind: 'ready', commands: ready(name) }),
    drain: (name: string): ServerChange => ({
      server: name,
      kind: 'drain',
      commands: [{ text: `set server ${server(name)} state drain`, ok: answers.none }],
    }),
    delete: (s: RuntimeServer): ServerChange => ({
      server: s.name,
      kind: 'delete',
      commands: [
        // Only a server in maintenance can be deleted, and only once it carries nothing.
        { text: `set server ${server(s.name)} state maint`, ok: answers.none },
        ...(s.sessions > 0 ? [{ text: `shutdown sessions server ${server(s.name)}`, ok: answers.none }] : []),
        { text: `del server ${server(s.name)}`, ok: answers.deleted },
      ],
    }),
  };
}

function bare(host: string): string {
  return host.replace(/^\[|\]$/g, '');
}

function sameAddr(a: string, b: string): boolean {
  const x = parseHostPort(a);
  const y = parseHostPort(b);
  return (
    x !== undefined &&
    y !== undefined &&
    x.port === y.port &&
    bare(x.host).toLowerCase() === bare(y.host).toLowerCase()
  );
}

/** srv_admin_state bits (management.txt, "show servers state"). */
const adminMaint = 0x01 | 0x02 | 0x04 | 0x20;
const adminDrain = 0x08 | 0x10;

/** A backend's servers from `show servers state BACKEND` and `show stat BACKEND 4 -1`. */
export function parseRuntimeServers(serversState: string, statCsv: string): RuntimeServer[] {
  const sessions = new Map<string, number>();
  const statRows = table(statCsv, ',');
  for (const row of statRows) sessions.set(row.get('svname') ?? '', Number(row.get('scur') ?? '0') || 0);
  return table(serversState, ' ').map((row) => {
    const name = row.get('srv_name') ?? '';
    const host = row.get('srv_addr') ?? '';
    const admin = Number(row.get('srv_admin_state') ?? '0');
    return {
      name,
      addr: `${host.includes(':') ? `[${host}]` : host}:${row.get('srv_port') ?? '0'}`,
      admin: admin & adminMaint ? 'maint' : admin & adminDrain ? 'drain' : 'ready',
      sessions: sessions.get(name) ?? 0,
    };
  });
}

/** The rows of a runtime API dump whose header line starts with '#', by column name. */
function table(text: string, separator: string): Map<string, string>[] {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const header = lines.findIndex((l) => l.startsWith('#'));
  if (header < 0) return [];
  const columns = lines[header]!.replace(/^#\s*/, '').split(separator);
  return lines
    .slice(header + 1)
    .filter((l) => !l.startsWith('#'))
    .map((l) => {
      const cells = l.split(separator);
      return new Map(columns.map((c, i) => [c, cells[i] ?? '']));
    });
}
