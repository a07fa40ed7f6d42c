// The leader's duties on a simulated server: the production DeadlineScanner
// (src/node/deadline-scanner.ts) and PowerExecutor (src/power/executor.ts), on the incarnation's
// virtual clock (they die with it and wait while it is paused), proposing through its RaftNode
// as a leader's Proposer does (the proposing node stamps its time), the executor driving the
// simulated BMCs (sim-bmc.ts). Each checks that it leads before it acts, as in a node.
import type { Logger } from 'pino';
import { DeadlineScanner } from '../../src/node/deadline-scanner.js';
import { powerClaimMsMin } from '../../src/model/limits.js';
import type { PowerStep } from '../../src/model/records.js';
import { PowerExecutor } from '../../src/power/executor.js';
import { runPowerStep } from '../../src/power/steps.js';
import type { RaftNode } from '../../src/raft/node.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import type { ReplicatedState } from '../../src/state/replicated-state.js';
import { decodeResult, encodeCommand } from '../../src/state/store-command.js';
import type { Claimed, SimBmcs, StepAttempt } from './sim-bmc.js';
import type { SimProcess } from './sim-process.js';

/** Deliberate defects in the duties, for the tests that prove the checks catch them. */
export type DutyBug =
  /**
   * The deadline scanner fires each deadline twice, the second time as an apply that does not
   * re-check the deadline against the leader's stamp would take it.
   */
  | 'deadlineTwice'
  /** The power executor carries out the last step it finished once more when it next leads. */
  | 'powerStepTwice';

/** Settle waits short enough for the simulated BMCs, bounded as in production. */
const stepOptions = { settleMs: 400, pollMs: 20 };
const stampAheadMs = 3_600_000;

export interface DutyEnv {
  readonly bmcs: SimBmcs;
  readonly logger: Logger;
  readonly bug: DutyBug | undefined;
}

/** Starts the duties of one server incarnation; they stop when its process dies. */
export function startDuties(
  id: string,
  proc: SimProcess,
  node: RaftNode,
  kv: ReplicatedState,
  env: DutyEnv,
): void {
  const isLeader = (): boolean => node.softState().role === 'leader';
  const proposeStamped = async (command: ControlCommand, stampMs: number): Promise<ControlResult> => {
    await Promise.resolve(); // a refusal thrown at once becomes a rejection, as over the wire
    const res = decodeResult(await node.propose(encodeCommand({ type: 'control', stampMs, command })));
    if (res.type !== 'control') throw new Error(`a control command answered ${res.type}`);
    return res.result;
  };
  const propose = (command: ControlCommand): Promise<ControlResult> =>
    proposeStamped(command, Math.floor(proc.clock.now()));

  new DeadlineScanner({
    control: kv.control,
    isLeader,
    propose:
      env.bug === 'deadlineTwice'
        ? async (command) => {
            const res = await propose(command);
            if (res.type === 'workflow' && command.type === 'deadline.expire')
              void proposeStamped(command, Math.floor(proc.clock.now()) + stampAheadMs).catch(
                () => undefined,
              );
            return res;
          }
        : propose,
    logger: env.logger,
    clock: proc.clock,
  }).start();

  const claimed: Claimed = new Map();
  const driver = env.bmcs.driverFor(proc, claimed);
  let lastDone:
    { readonly attempt: StepAttempt; readonly host: string; readonly step: PowerStep } | undefined;
  new PowerExecutor({
    nodeId: id,
    control: kv.control,
    isLeader,
    propose: async (command) => {
      const res = await propose(command);
      // The claim the executor got back names the attempt it carries out next.
      if (command.type === 'power.claim' && res.type === 'powerJob') {
        const job = res.job;
        if (job.state === 'RUNNING' && job.claimedBy === id)
          claimed.set(job.hardwareId, { jobId: job.id, stepIndex: job.stepIndex, attempt: job.attempt });
      }
      if (command.type === 'power.step' && command.ok && res.type === 'powerJob') {
        const job = res.job;
        const step = job.steps[command.stepIndex];
        if (step !== undefined)
          lastDone = {
            attempt: { jobId: job.id, stepIndex: command.stepIndex, attempt: command.attempt },
            host: job.hardwareId,
            step,
          };
      }
      return res;
    },
    driver,
    logger: env.logger,
    clock: proc.clock,
    leaseMs: powerClaimMsMin,
    step: stepOptions,
  }).start();

  if (env.bug === 'powerStepTwice') {
    let term = 0;
    proc.clock.every(20, () => {
      const ss = node.softState();
      if (ss.role !== 'leader' || ss.term === term) return;
      term = ss.term;
      const again = lastDone;
      if (again === undefined) return;
      lastDone = undefined;
      claimed.set(again.host, again.attempt);
      const target = { host: again.host, port: 623 };
      runPowerStep(driver, target, again.step, { uefi: false, clock: proc.clock, ...stepOptions }).catch(
        () => undefined,
      );
    });
  }
}
