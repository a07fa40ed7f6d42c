// perfdhcp for the DHCP benchmark: its command line, a parser for its final report, and the
// bounded rate search. perfdhcp (Debian kea-admin) runs in the client namespace as ANCHORS §2
// ran it: `perfdhcp -4 -l IFACE -r RATE -R CLIENTS -p PERIOD SERVER`. With -l it takes the
// interface's address as its own and puts it in giaddr, so every exchange is relayed, and the
// server answers it by unicast to giaddr:67.

/** One half of a DORA exchange, as perfdhcp reports it. */
export interface ExchangeStats {
  readonly sent: number;
  readonly received: number;
  readonly drops: number;
  readonly dropPercent: number;
  readonly orphans: number;
  readonly delayMsMin: number | null;
  readonly delayMsAvg: number | null;
  readonly delayMsMax: number | null;
}

export interface PerfdhcpReport {
  /** "Rate: X 4-way exchanges/second": what perfdhcp achieved; null when it printed none. */
  readonly ratePerS: number | null;
  readonly discoverOffer: ExchangeStats | null;
  readonly requestAck: ExchangeStats | null;
}

export interface PerfdhcpRun {
  readonly iface: string;
  readonly server: string;
  readonly ratePerS: number;
  readonly clients: number;
  readonly periodS: number;
  /** One MAC a line; perfdhcp picks one at random for every new exchange. */
  readonly macFile: string;
}

export function perfdhcpArgv(run: PerfdhcpRun): string[] {
  return [
    'perfdhcp',
    '-4',
    ...['-l', run.iface, '-r', String(run.ratePerS), '-R', String(run.clients)],
    ...['-M', run.macFile, '-p', String(run.periodS), run.server],
  ];
}

/**
 * Reads perfdhcp's final report. Every field it failed to print is left out (null), never
 * guessed: a run the server never answered has no REQUEST-ACK section at all.
 */
export function parsePerfdhcp(output: string): PerfdhcpReport {
  const rate = /^Rate:\s*([\d.]+)\s/m.exec(output);
  const section = (title: string): string | null => {
    const at = output.indexOf(`Statistics for: ${title}`);
    if (at < 0) return null;
    const next = output.indexOf('Statistics for:', at + 1);
    return output.slice(at, next < 0 ? undefined : next);
  };
  return {
    ratePerS: rate === null ? null : Number(rate[1]),
    discoverOffer: exchangeStats(section('DISCOVER-OFFER')),
    requestAck: exchangeStats(section('REQUEST-ACK')),
  };
}

function exchangeStats(text: string | null): ExchangeStats | null {
  if (text === null) return null;
  const number = (label: string): number | null => {
    const m = new RegExp(`^${label}:\\s*([\\d.]+)`, 'm').exec(text);
    return m === null ? null : Number(m[1]);
  };
  const sent = number('sent packets');
  const received = number('received packets');
  if (sent === null || received === null) return null;
  const drops = number('drops') ?? Math.max(0, sent - received);
  return {
    sent,
    received,
    drops,
    dropPercent: number('drops ratio') ?? (sent === 0 ? 0 : (100 * drops) / sent),
    orphans: number('orphans') ?? 0,
    delayMsMin: number('min delay'),
    delayMsAvg: number('avg delay'),
    delayMsMax: number('max delay'),
  };
}

// ---------------------------------------------------------------------------------------------
// The rate search

/** A step passes with under this many percent drops, on DISCOVER-OFFER and on REQUEST-ACK. */
export const dropPercentMax = 1;
/** A step this far over the line ends the search at once: the server is saturated. */
const dropPercentSaturated = 10;
/** The search also ends after this many failed steps in a row. */
const failedStepsInARowMax = 2;
/** Refine between the last pass and the next failure when they are further apart than this. */
const refineGapPerSMin = 500;
const refineGranularityPerS = 250;

export interface SweepStep {
  readonly target_per_s: number;
  readonly achieved_per_s: number | null;
  /** REQUEST-ACK answers received per second of the period: completed exchanges. */
  readonly acks_per_s: number | null;
  readonly do_drop_pct: number | null;
  readonly ra_drop_pct: number | null;
  readonly do_avg_ms: number | null;
  readonly ra_avg_ms: number | null;
  readonly do_max_ms: number | null;
  readonly ra_max_ms: number | null;
  readonly do_sent: number | null;
  readonly pass: boolean;
  /**
   * CPU cores used while the step ran: the server's processes (all nodes), perfdhcp, the whole
   * machine, and what that leaves for everything else (other jobs on a shared machine).
   */
  readonly server_cores: number | null;
  /**
   * The server's CPU microseconds per completed exchange (server_cores over acks_per_s). Other
   * jobs move the rates a lot on a shared machine and this figure little: compare changes by it.
   */
  readonly server_cpu_us_per_exchange: number | null;
  readonly client_cores: number | null;
  readonly machine_busy_cores: number | null;
  readonly other_cores: number | null;
  /**
   * UDP datagrams the kernel dropped because a socket's receive buffer was full, in the server's
   * namespace and in perfdhcp's (Udp RcvbufErrors in /proc/net/snmp). Kea reads its requests
   * from a raw socket, which these do not count.
   */
  readonly udp_rcvbuf_errors?: { readonly server: number | null; readonly client: number | null };
  /** Packets dropped machine-wide because a CPU's input backlog was full (softnet_stat). */
  readonly backlog_drops?: number | null;
  /**
   * Slipway's leader: its event-loop delay during the step (beyond the probe's 10 ms timer) and
   * the loop's utilization. Raft's heartbeats wait in the same loop.
   */
  readonly server_event_loop_delay_ms?: {
    readonly p50_ms: number;
    readonly p99_ms: number;
    readonly max_ms: number;
    readonly elu: number;
  } | null;
  /** The server address perfdhcp aimed at (Slipway: the leader then). */
  readonly server?: string;
  /** A second try at a rate whose first try failed. */
  readonly retry?: boolean;
  /** Set when perfdhcp's output could not be read; its tail. */
  readonly error?: string;
}

export function stepOf(
  targetPerS: number,
  periodS: number,
  report: PerfdhcpReport,
  cpu: { server: number | null; client: number | null; machine: number | null },
): SweepStep {
  const { discoverOffer: dO, requestAck: rA } = report;
  const pass =
    report.ratePerS !== null &&
    dO !== null &&
    rA !== null &&
    dO.sent > 0 &&
    dO.dropPercent < dropPercentMax &&
    rA.dropPercent < dropPercentMax;
  return {
    target_per_s: targetPerS,
    achieved_per_s: report.ratePerS === null ? null : Math.round(report.ratePerS),
    acks_per_s: rA === null ? null : Math.round(rA.received / periodS),
    do_drop_pct: dO?.dropPercent ?? null,
    ra_drop_pct: rA?.dropPercent ?? null,
    do_avg_ms: dO?.delayMsAvg ?? null,
    ra_avg_ms: rA?.delayMsAvg ?? null,
    do_max_ms: dO?.delayMsMax ?? null,
    ra_max_ms: rA?.delayMsMax ?? null,
    do_sent: dO?.sent ?? null,
    pass,
    server_cores: cpu.server,
    server_cpu_us_per_exchange:
      cpu.server === null || rA === null || rA.received === 0
        ? null
        : Math.round((cpu.server * 1e6 * periodS) / rA.received),
    client_cores: cpu.client,
    machine_busy_cores: cpu.machine,
    other_cores:
      cpu.server === null || cpu.client === null || cpu.machine === null
        ? null
        : Math.max(0, Math.round((cpu.machine - cpu.server - cpu.client) * 100) / 100),
  };
}

export interface SweepResult {
  /** perfdhcp's achieved rate at the best passing step; null when no step passed. */
  readonly best_per_s: number | null;
  readonly best_step: SweepStep | null;
  readonly steps: readonly SweepStep[];
}

function worstDrop(step: SweepStep): number {
  return Math.max(step.do_drop_pct ?? 100, step.ra_drop_pct ?? 100);
}

function saturated(step: SweepStep): boolean {
  return worstDrop(step) >= dropPercentSaturated;
}

/**
 * Runs `run` at each of `rates` in ascending order, stopping at a saturated step or after
 * failedStepsInARowMax failed rates in a row; then, once, at the midpoint between the highest
 * passing rate and the failure just above it. A rate whose first step fails gets one more try,
 * both recorded: on a shared machine one burst of another job's work can sink a step. At most
 * 2 * (rates.length + 1) steps.
 */
export async function sweepRates(
  rates: readonly number[],
  run: (ratePerS: number) => Promise<SweepStep>,
): Promise<SweepResult> {
  const ascending = [...new Set(rates)].sort((a, b) => a - b);
  const steps: SweepStep[] = [];
  const tryRate = async (rate: number): Promise<SweepStep> => {
    const first = await run(rate);
    steps.push(first);
    if (first.pass) return first;
    const second: SweepStep = { ...(await run(rate)), retry: true };
    steps.push(second);
    return second.pass || worstDrop(second) < worstDrop(first) ? second : first;
  };
  let failedInARow = 0;
  for (const rate of ascending) {
    const step = await tryRate(rate);
    failedInARow = step.pass ? 0 : failedInARow + 1;
    if (!step.pass && (saturated(step) || failedInARow >= failedStepsInARowMax)) break;
  }
  const passed = steps.filter((s) => s.pass).map((s) => s.target_per_s);
  const highestPass = passed.length === 0 ? 0 : Math.max(...passed);
  const failAbove = steps
    .filter((s) => !s.pass && s.target_per_s > highestPass)
    .map((s) => s.target_per_s)
    .sort((a, b) => a - b)[0];
  if (highestPass > 0 && failAbove !== undefined && failAbove - highestPass > refineGapPerSMin) {
    const mid = Math.round((highestPass + failAbove) / 2 / refineGranularityPerS) * refineGranularityPerS;
    if (mid > highestPass && mid < failAbove) await tryRate(mid);
  }
  return bestOf(steps);
}

function bestOf(steps: readonly SweepStep[]): SweepResult {
  let best: SweepStep | null = null;
  for (const step of steps) {
    if (!step.pass || step.achieved_per_s === null) continue;
    if (best === null || step.achieved_per_s > (best.achieved_per_s ?? 0)) best = step;
  }
  return { best_per_s: best?.achieved_per_s ?? null, best_step: best, steps };
}
