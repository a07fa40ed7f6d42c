// The alternate failure policy's leader duty (docs/decisions/0030-allocation-at-apply.md): while
// this node leads, a workflow that failed or timed out under `--on-failure alternate` is offered
// the next machines (ready, matching its selector, never tried), each with its template rendered,
// in a workflow.alternate; the replicated state picks among them at apply, or gives up saying why.
// A proposal for an end that is no longer the workflow's is refused as stale at apply, so a new
// leader repeating it, or two scans, change nothing twice.
import type { Logger } from 'pino';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import type { Workflow } from '../model/records.js';
import { parseSelector, SelectorError } from '../fleet/selector.js';
import { offerMachines, renderForMachine } from '../api/allocation-offer.js';
import { raceTriedOf } from '../state/control/race.js';
import type { Clock, Cancel } from '../platform/clock.js';

export const alternateScanMs = 250;

export interface AlternateScannerOptions {
  readonly control: ControlState;
  readonly isLeader: () => boolean;
  readonly propose: (command: ControlCommand) => Promise<ControlResult>;
  readonly logger: Logger;
  /** Its timers (src/platform/clock.ts: real ones in a node, virtual ones in the simulation). */
  readonly clock: Clock;
}

export class AlternateScanner {
  readonly #o: AlternateScannerOptions;
  /** Workflows with a proposal in flight, by the end it answers. */
  readonly #inFlight = new Map<string, number>();
  #stopTimer: Cancel | undefined;
  /** A scan is under way (each awaits its proposals): the next waits its turn. */
  #scanning = false;
  /** Decisions this node proposed that the state applied (moved or gave up). */
  decided = 0;

  constructor(options: AlternateScannerOptions) {
    this.#o = options;
  }

  start(): void {
    this.#stopTimer = this.#o.clock.every(alternateScanMs, () => {
      void this.scan();
    });
  }

  stop(): void {
    this.#stopTimer?.();
    this.#stopTimer = undefined;
  }

  /** Proposes a re-allocation for every workflow awaiting one (leader only). */
  async scan(): Promise<void> {
    if (!this.#o.isLeader() || this.#scanning) return;
    this.#scanning = true;
    try {
      await this.#scanOnce();
    } finally {
      this.#scanning = false;
    }
  }

  async #scanOnce(): Promise<void> {
    const all = this.#o.control.workflowsAwaitingAlternate();
    const ids = new Set(all.map((wf) => wf.id));
    for (const id of this.#inFlight.keys()) if (!ids.has(id)) this.#inFlight.delete(id);
    const waiting = all.filter((wf) => this.#inFlight.get(wf.id) !== wf.finishedMs);
    for (const wf of waiting) await this.#offer(wf);
  }

  async #offer(wf: Workflow): Promise<void> {
    const { control, logger } = this.#o;
    const finishedMs = wf.finishedMs ?? 0;
    this.#inFlight.set(wf.id, finishedMs);
    try {
      const selector = parseSelector(wf.selector ?? '');
      const template = control.template(wf.template);
      if (selector instanceof SelectorError || template === undefined) {
        logger.warn(
          { workflowId: wf.id, template: wf.template },
          'alternate: its template or selector is gone',
        );
        return;
      }
      // A race's lane (0037): never a machine either lane took; rendered for the request's id.
      const request = wf.race === undefined ? undefined : control.workflow(wf.race.request);
      let candidates;
      try {
        candidates = await offerMachines({
          fleet: control.hardwareList(),
          selector,
          template,
          workflowId: wf.race?.request ?? wf.id,
          hardwareMap: wf.hardwareMap,
          exclude: wf.race === undefined ? (wf.alternate?.tried ?? []) : raceTriedOf(wf, request),
          render: (t, hw, id, map) => Promise.resolve(renderForMachine(control, t, hw, id, map)),
        });
      } catch (err) {
        // The template no longer renders: said once for this end, not at every scan.
        logger.warn({ err, workflowId: wf.id }, 'alternate: the template does not render for the machines');
        return;
      }
      const res = await this.#o.propose({ type: 'workflow.alternate', id: wf.id, finishedMs, candidates });
      if (res.type === 'workflow') {
        this.decided++;
        const now = res.workflow;
        logger.info(
          { workflowId: wf.id, hardwareId: now.hardwareId, gaveUp: now.alternate?.gaveUp },
          now.alternate?.gaveUp === undefined ? 'alternate: re-allocated' : 'alternate: gave up',
        );
      } else if (res.type === 'error' && res.code === 'E_VERSION') {
        this.#inFlight.delete(wf.id); // overtaken: offer again at the next scan
        return;
      }
    } catch (err) {
      logger.debug({ err, workflowId: wf.id }, 'alternate: proposing failed; offered again');
      this.#inFlight.delete(wf.id);
      return;
    }
    // Applied, or refused as stale: this end is answered; keep the mark until it changes.
  }
}
