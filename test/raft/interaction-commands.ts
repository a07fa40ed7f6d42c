// The scenario commands, one handler each, on top of InteractionEnv. A handler prints what
// happened; operating errors from the core (RaftError) are printed as `error: CODE message`,
// script mistakes (a node that is down, no held write) as `env error: ...`; anything else is
// a bug and fails the test.
import type { ConfChange } from '../../src/raft/core/types.js';
import { fmtEntry, fmtHardState, fmtMembership, fmtSoftStateFields } from './format.js';
import type { EnvNode, NodeOptions } from './interaction-env.js';
import { EnvError, InteractionEnv, memberOf } from './interaction-env.js';

const encoder = new TextEncoder();

class Args {
  readonly pos: string[] = [];
  private readonly kv = new Map<string, string>();
  private readonly used = new Set<string>();

  constructor(tokens: readonly string[]) {
    for (const t of tokens) {
      const eq = t.indexOf('=');
      if (eq > 0) this.kv.set(t.slice(0, eq), t.slice(eq + 1));
      else this.pos.push(t);
    }
  }

  at(i: number, what: string): string {
    const v = this.pos[i];
    if (v === undefined) throw new Error(`missing argument: ${what}`);
    return v;
  }

  str(key: string): string | undefined {
    this.used.add(key);
    return this.kv.get(key);
  }

  int(key: string, dflt: number): number {
    const v = this.str(key);
    if (v === undefined) return dflt;
    const n = Number(v);
    if (!Number.isInteger(n)) throw new Error(`${key}=${v} is not an integer`);
    return n;
  }

  bool(key: string, dflt: boolean): boolean {
    const v = this.str(key);
    if (v === undefined) return dflt;
    if (v !== 'true' && v !== 'false') throw new Error(`${key}=${v} is not a boolean`);
    return v === 'true';
  }

  list(key: string): string[] {
    const v = this.str(key);
    return v === undefined || v === '' ? [] : v.split(',');
  }

  /** Unknown options are script typos: refuse them rather than silently ignore them. */
  done(): void {
    for (const k of this.kv.keys()) if (!this.used.has(k)) throw new Error(`unknown option ${k}`);
  }
}

function toInt(s: string, what: string): number {
  const n = Number(s);
  if (!Number.isInteger(n)) throw new Error(`${what}: ${s} is not an integer`);
  return n;
}

type Handler = (env: InteractionEnv, a: Args) => void;

/**
 * Ticks `count` times, stopping early after the tick on which the node's role or term
 * changed, or (for `campaign`) it started a campaign that kept its role and sent requests.
 */
function tickN(env: InteractionEnv, n: EnvNode, count: number, stop: 'never' | 'role' | 'campaign'): void {
  const core = n.live();
  const start = core.softState();
  const hadReady = core.hasReady();
  for (let i = 0; i < count; i++) {
    core.tick();
    env.observe(n);
    const s = core.softState();
    if (stop === 'never') continue;
    if (s.role !== start.role || s.term !== start.term) return;
    if (stop === 'campaign' && !hadReady && core.hasReady()) return;
  }
}

function printStatus(env: InteractionEnv, n: EnvNode): void {
  const st = n.live().status();
  env.print(
    `${st.id}: ${st.role} term=${st.term} leader=${st.leader === '' ? '-' : st.leader} commit=${st.commit}` +
      ` applied=${st.applied} lastIndex=${st.lastIndex} snapshot=${st.snapshotIndex}`,
  );
  env.withIndent(() => {
    env.print(fmtMembership(st.membership));
    if (st.transferee !== '') env.print(`transferee=${st.transferee}`);
    for (const p of st.progress) {
      const flags = [p.learner ? 'learner' : '', p.recentActive ? '' : 'inactive'].filter((f) => f !== '');
      env.print(`${p.id}: match=${p.match} next=${p.next} ${p.state}${flags.map((f) => ` ${f}`).join('')}`);
    }
  });
}

const handlers: Record<string, Handler> = {
  'add-nodes': (env, a) => {
    const count = toInt(a.at(0, 'count'), 'count');
    env.seed = a.int('seed', env.seed);
    const opts: NodeOptions = {
      preVote: a.bool('prevote', true),
      checkQuorum: a.bool('checkquorum', true),
      electionTicks: a.int('election', 10),
      heartbeatTicks: a.int('heartbeat', 1),
      maxInflightMsgs: a.int('maxinflight', 64),
      maxUncommittedBytes: a.int('maxuncommitted', 64 << 20),
      maxMsgBytes: a.int('maxmsgbytes', 1 << 20),
    };
    const learners = a.list('learners');
    a.done();
    env.addNodes(count, opts, learners);
  },

  campaign: (env, a) => {
    const n = env.node(a.at(0, 'id'));
    n.live().campaignNow();
    env.observe(n);
  },

  // hold-campaigns ID on|off: the driver holds the node's elections (its boot services down).
  'hold-campaigns': (env, a) => {
    const n = env.node(a.at(0, 'id'));
    const on = a.at(1, 'on|off');
    if (on !== 'on' && on !== 'off') throw new Error(`hold-campaigns: ${on} is not on or off`);
    n.live().holdCampaigns(on === 'on');
    env.print(`${n.id} campaigns ${on === 'on' ? 'held' : 'released'}`);
  },

  tick: (env, a) => {
    const n = env.node(a.at(0, 'id'));
    tickN(env, n, a.pos[1] === undefined ? 1 : toInt(a.pos[1], 'count'), 'never');
  },

  // Followers and candidates: tick until the election timeout fires (at most twice the
  // election ticks, the top of the randomized range). Leaders: one check-quorum period.
  'tick-election': (env, a) => {
    const n = env.node(a.at(0, 'id'));
    const leader = n.live().softState().role === 'leader';
    if (leader) tickN(env, n, n.cfg.electionTicks, 'role');
    else tickN(env, n, 2 * n.cfg.electionTicks, 'campaign');
  },

  'tick-heartbeat': (env, a) => {
    const n = env.node(a.at(0, 'id'));
    tickN(env, n, n.cfg.heartbeatTicks, 'never');
  },

  propose: (env, a) => {
    const n = env.node(a.at(0, 'id'));
    const data = a.pos.slice(1).map((d) => encoder.encode(d));
    if (data.length === 0) throw new Error('propose: no data');
    env.attempt(() => {
      const r = n.live().propose(data);
      env.print(`proposed term=${r.term} index=${r.firstIndex}..${r.lastIndex}`);
    });
  },

  'propose-conf-change': (env, a) => {
    const n = env.node(a.at(0, 'id'));
    const type = a.at(1, 'type');
    const member = memberOf(a.at(2, 'node'));
    if (type !== 'addLearner' && type !== 'promote' && type !== 'remove')
      throw new Error(`unknown conf change type ${type}`);
    const cc: ConfChange = { type, member };
    env.attempt(() => {
      const r = n.live().proposeConfChange(cc);
      env.print(`proposed term=${r.term} index=${r.firstIndex}`);
    });
  },

  'transfer-leadership': (env, a) => {
    const n = env.node(a.at(0, 'from'));
    const to = a.at(1, 'to');
    env.attempt(() => n.live().transferLeadership(to));
    env.observe(n);
  },

  'read-index': (env, a) => {
    const n = env.node(a.at(0, 'id'));
    n.live().readIndex(toInt(a.at(1, 'request id'), 'request id'));
    env.observe(n);
  },

  'process-ready': (env, a) => {
    const persist = a.bool('persist', true);
    a.done();
    const many = a.pos.length > 1;
    for (const id of a.pos) {
      const n = env.node(id);
      if (many) env.print(`> ${id} handling Ready`);
      if (many) env.withIndent(() => env.processReady(n, persist));
      else env.processReady(n, persist);
    }
  },

  persist: (env, a) => {
    const n = env.node(a.at(0, 'id'));
    const rd = n.heldWrite;
    if (rd === null) throw new EnvError(`node ${n.id} has no held write`);
    n.heldWrite = null;
    env.persist(n, rd);
  },

  'deliver-msgs': (env, a) => {
    const drops = new Set(a.list('drop'));
    a.done();
    if (a.pos.length === 0) env.deliver(null, drops);
    for (const id of a.pos) env.deliver(env.node(id).id, drops);
  },

  stabilize: (env, a) => {
    env.stabilize(a.pos);
  },

  partition: (env, a) => {
    const groups: string[][] = [[]];
    for (const t of a.pos) {
      if (t === '/') groups.push([]);
      else groups[groups.length - 1]!.push(...t.split(',').filter((s) => s !== ''));
    }
    for (const [i, g] of groups.entries())
      for (const h of groups.slice(i + 1)) for (const x of g) for (const y of h) env.block(x, y);
    env.print(`partitioned: ${groups.map((g) => g.join(',')).join(' | ')}`);
  },

  /** Cuts single links, e.g. `cut 1-3,2-3`, both directions. */
  cut: (env, a) => {
    for (const link of a.pos.flatMap((t) => t.split(','))) {
      const [x, y] = link.split('-');
      if (x === undefined || y === undefined) throw new Error(`bad link ${link}`);
      env.block(x, y);
    }
  },

  isolate: (env, a) => {
    const id = env.node(a.at(0, 'id')).id;
    for (const n of env.nodes.values()) if (n.id !== id) env.block(id, n.id);
  },

  heal: (env) => {
    env.heal();
  },

  crash: (env, a) => {
    env.crash(env.node(a.at(0, 'id')));
  },

  restart: (env, a) => {
    env.restart(env.node(a.at(0, 'id')));
  },

  'report-unreachable': (env, a) => {
    const n = env.node(a.at(0, 'from'));
    n.live().reportUnreachable(a.at(1, 'to'));
  },

  // Takes a snapshot at the applied index and drops the log through INDEX (<= applied).
  compact: (env, a) => {
    const n = env.node(a.at(0, 'id'));
    const to = toInt(a.at(1, 'index'), 'index');
    const core = n.live();
    const meta = core.compact(core.status().applied, to);
    const compactTo = Math.min(to, meta.index);
    n.disk.snapshot = meta;
    n.disk.snapshotData = n.applied.slice(0, meta.index);
    n.disk.entries = n.disk.entries.filter((e) => e.index > compactTo);
    env.print(`snapshot at index=${meta.index} term=${meta.term}; log starts at ${core.log.firstIndex()}`);
  },

  status: (env, a) => {
    printStatus(env, env.node(a.at(0, 'id')));
  },

  'raft-log': (env, a) => {
    const n = env.node(a.at(0, 'id'));
    const d = n.disk;
    env.print(`hardState ${fmtHardState(d.hardState)} snapshot=${d.snapshot.index}/${d.snapshot.term}`);
    for (const e of d.entries) env.print(fmtEntry(e));
  },

  'raft-state': (env) => {
    for (const n of env.sortedNodes()) {
      if (n.core === null) {
        env.print(`${n.id}: down`);
        continue;
      }
      env.print(`${n.id}: ${fmtSoftStateFields(n.core.softState())}`);
    }
  },
};

/** Runs one command line and returns its output lines ("ok" when it printed nothing). */
export function runCommand(env: InteractionEnv, line: string): string[] {
  const [name, ...tokens] = line.trim().split(/\s+/);
  const handler = name === undefined ? undefined : handlers[name];
  if (handler === undefined) throw new Error(`unknown command: ${line}`);
  const args = new Args(tokens);
  try {
    handler(env, args);
    args.done();
  } catch (err) {
    if (!(err instanceof EnvError)) throw err;
    env.print(`env error: ${err.message}`);
  }
  const out = env.takeOutput();
  return out.length === 0 ? ['ok'] : out;
}

export { InteractionEnv };
