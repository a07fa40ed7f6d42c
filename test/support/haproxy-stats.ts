// HAProxy's view of each node, from its status page (CSV), for tests of the balancer.
import { waitFor } from './wait.js';

export interface ServerState {
  /** UP, DOWN, or a transition such as "UP 1/2". */
  readonly status: string;
  /** The last check's result: L7OK when the grpc.health.v1 answer was SERVING. */
  readonly check: string;
}

/** The servers of the slipway_nodes backend, by name (the node id). */
export async function haproxyServerStates(statsAddr: string): Promise<Map<string, ServerState>> {
  const csv = await (await fetch(`http://${statsAddr}/;csv`)).text();
  const [header = '', ...rows] = csv.trim().split('\n');
  const columns = header.replace(/^# /, '').split(',');
  const col = (row: string[], name: string): string => row[columns.indexOf(name)] ?? '';
  const states = new Map<string, ServerState>();
  for (const row of rows.map((r) => r.split(','))) {
    if (col(row, 'pxname') !== 'slipway_nodes' || col(row, 'svname') === 'BACKEND') continue;
    states.set(col(row, 'svname'), { status: col(row, 'status'), check: col(row, 'check_status') });
  }
  return states;
}

/** Waits until HAProxy has `count` nodes, every one UP with a passed grpc.health.v1 check. */
export function waitForAllServing(statsAddr: string, count: number, what: string): Promise<void> {
  return waitFor(
    what,
    async () => {
      const states = [...(await haproxyServerStates(statsAddr)).values()];
      return states.length === count && states.every((s) => s.status === 'UP' && s.check === 'L7OK');
    },
    15_000,
  );
}
