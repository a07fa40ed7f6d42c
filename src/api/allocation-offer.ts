// The machines an allocation offers the replicated state (docs/decisions/0030): the first ready,
// unowned, matching machines by id, none tried before, each with the template rendered for it,
// within a command's size. Used by `workflow create --selector` and by the leader's re-allocation
// under the alternate policy (src/node/alternate-scanner.ts); the state picks among them at apply.
import type { Hardware, RenderedTemplate, Template } from '../model/records.js';
import type { AllocationCandidate } from '../state/control/commands.js';
import { verdictOf } from '../fleet/allocation.js';
import type { Selector } from '../fleet/selector-terms.js';
import { status } from '@grpc/grpc-js';
import type { WorkflowCreateRequest } from '../gen/control.js';
import {
  allocationCandidatesMax,
  alternateAttemptsDefault,
  alternateAttemptsMax,
  raceAttemptsDefault,
} from '../model/limits.js';
import { ApiError } from './errors.js';
import type { ControlState } from '../state/control/control-state.js';
import { renderTemplate } from '../workflow/template.js';
import type { PoolVariables } from '../workflow/template-variables.js';

/** An allocation's offer, rendered specs in JSON bytes: well inside a command's 1 MiB. */
export const allocationOfferBytesMax = 512 * 1024;

/** The template rendered for a machine, as a workflow for it runs it; throws TemplateError. */
export function renderForMachine(
  control: ControlState,
  template: Template,
  hardware: Hardware,
  workflowId: string,
  hardwareMap: { readonly [k: string]: string },
  pool?: PoolVariables,
): RenderedTemplate {
  return renderTemplate(template.source, {
    workflowId,
    hardware,
    hardwareMap,
    ...(pool === undefined ? {} : { pool }),
    resolveWorker: (v) => control.hardware(v)?.id ?? control.hardwareByMac(v.toLowerCase())?.hardware.id,
  });
}

export type Render = (
  template: Template,
  hardware: Hardware,
  workflowId: string,
  hardwareMap: { readonly [k: string]: string },
) => Promise<RenderedTemplate>;

export interface OfferRequest {
  readonly fleet: readonly Hardware[];
  readonly selector: Selector;
  readonly template: Template;
  readonly workflowId: string;
  readonly hardwareMap: { readonly [k: string]: string };
  /** Machines never to offer (tried before). */
  readonly exclude?: readonly string[];
  /** A pool's offer: its own spares may be offered. */
  readonly forPool?: string;
  readonly render: Render;
}

/** The candidates, in id order (the fleet's); empty when no machine is ready for the selector. */
export async function offerMachines(request: OfferRequest): Promise<AllocationCandidate[]> {
  const exclude = new Set(request.exclude ?? []);
  const ready = request.fleet.filter(
    (hw) => !exclude.has(hw.id) && verdictOf(request.selector, hw, request.forPool).kind === 'selected',
  );
  const candidates: AllocationCandidate[] = [];
  let bytes = 0;
  for (const hardware of ready.slice(0, allocationCandidatesMax)) {
    const spec = await request.render(request.template, hardware, request.workflowId, request.hardwareMap);
    bytes += JSON.stringify(spec).length;
    if (candidates.length > 0 && bytes > allocationOfferBytesMax) break;
    candidates.push({ hardwareId: hardware.id, spec });
  }
  return candidates;
}

/** A create request's failure policy beyond retry: alternate, or race (two lanes, 0037). */
export interface FailurePolicy {
  /** At most this many machines, the first (both lanes, under race) included. */
  readonly attempts: number;
  readonly race: boolean;
}

/**
 * The failure policy from a create request, or undefined for the default policy (retry: each
 * action's retries on the same machine). INVALID_ARGUMENT on a bad combination.
 */
export function failurePolicy(req: WorkflowCreateRequest): FailurePolicy | undefined {
  const policy = req.onFailure ?? '';
  if (policy !== '' && policy !== 'retry' && policy !== 'alternate' && policy !== 'race') {
    throw new ApiError(
      status.INVALID_ARGUMENT,
      `on_failure must be retry, alternate or race, got "${policy}"`,
    );
  }
  if (policy !== 'alternate' && policy !== 'race') {
    if (req.attempts !== undefined)
      throw new ApiError(
        status.INVALID_ARGUMENT,
        'attempts counts machines: only with on_failure alternate or race',
      );
    return undefined;
  }
  if (req.netboot) {
    throw new ApiError(status.INVALID_ARGUMENT, `on_failure ${policy} does not take netboot yet`);
  }
  const race = policy === 'race';
  const least = race ? 2 : 1;
  const attempts = req.attempts ?? (race ? raceAttemptsDefault : alternateAttemptsDefault);
  if (attempts < least || attempts > alternateAttemptsMax) {
    throw new ApiError(
      status.INVALID_ARGUMENT,
      `attempts must be ${least}-${alternateAttemptsMax}${race ? ' (a race starts on two machines)' : ''}, got ${attempts}`,
    );
  }
  return { attempts, race };
}

/** Offers made for one `workflow create --selector` before its call fails with the state's word. */
export const allocationRoundsMax = 3;
