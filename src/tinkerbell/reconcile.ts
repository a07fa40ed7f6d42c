// The plan against what the cluster holds: each object is created, found imported already
// (unchanged), or refused because another object has its name (docs/decisions/0039). Pure: the
// caller reads the cluster and hands the records in.
//
// Imported already means:
//   hardware  a machine with the id whose interfaces, arch, uefi, allowWorkflow, iPXE settings,
//             metadata and BMC (address, user name, whether a password is set) are the ones the
//             import would store. allowPXE is not compared: the cluster turns it off when a
//             workflow succeeds. The BMC password is never read back, so it cannot be compared.
//   template  a template with the name and the same source text.
//   workflow  a workflow (in any state) of the template on the machine: Slipway's workflows
//             have no name, and Tinkerbell runs a Workflow once.
// A workflow to create is rendered here first, for its machine, as the cluster will render it:
// one that would be refused (a template that does not render for the machine, netboot without a
// BMC) refuses the whole import before anything is created.
import type { Hardware, HardwareInput } from '../model/records.js';
import { renderTemplate, TemplateError } from '../workflow/template.js';
import { ImportInputError, importProblemsMax, isMapping } from './objects.js';
import type { ImportPlan, PlannedHardware, PlannedTemplate, PlannedWorkflow } from './plan.js';

/** What the cluster holds, as the API gives it. */
export interface ClusterView {
  /** Every machine, as `hardware get -o json` shows it (no password: passwordSet). */
  readonly hardware: readonly Readonly<Record<string, unknown>>[];
  readonly templates: readonly { readonly name: string; readonly source: string; readonly version: number }[];
  readonly workflows: readonly {
    readonly id: string;
    readonly template: string;
    readonly hardwareId: string;
  }[];
}

export type ImportStep =
  | {
      readonly kind: 'template';
      readonly name: string;
      readonly exists: boolean;
      readonly template: PlannedTemplate;
    }
  | {
      readonly kind: 'hardware';
      readonly name: string;
      readonly exists: boolean;
      readonly hardware: PlannedHardware;
    }
  | {
      readonly kind: 'workflow';
      readonly name: string;
      /** The id of the workflow found for it, when imported already. */
      readonly existing?: string;
      readonly workflow: PlannedWorkflow;
    };

/** The steps in the order they run: templates, hardware, workflows. Throws ImportInputError. */
export function reconcile(plan: ImportPlan, view: ClusterView): ImportStep[] {
  const problems: string[] = [];
  const byId = new Map(view.hardware.map((h) => [String(h['id']), h]));
  const macOwners = new Map<string, string>();
  for (const h of view.hardware)
    for (const nic of Array.isArray(h['interfaces']) ? h['interfaces'] : [])
      if (isMapping(nic)) macOwners.set(String(nic['mac']), String(h['id']));
  const steps: ImportStep[] = [];
  for (const template of plan.templates) {
    const existing = view.templates.find((t) => t.name === template.name);
    if (existing !== undefined && existing.source !== template.source)
      problems.push(
        `Template ${template.name}: template "${template.name}" exists (version ${existing.version}) with another source; ` +
          `delete it (slipway template delete ${template.name}) or rename this one`,
      );
    else steps.push({ kind: 'template', name: template.name, exists: existing !== undefined, template });
  }
  for (const hardware of plan.hardware) {
    const problem = hardwareClash(hardware, byId.get(hardware.id), macOwners);
    if (problem !== undefined) problems.push(`Hardware ${hardware.id}: ${problem}`);
    else steps.push({ kind: 'hardware', name: hardware.id, exists: byId.has(hardware.id), hardware });
  }
  for (const workflow of plan.workflows) {
    const problem = workflowRefsProblem(workflow, plan, view, byId);
    if (problem !== undefined) {
      problems.push(`Workflow ${workflow.name}: ${problem}`);
      continue;
    }
    const found = view.workflows.find(
      (w) => w.template === workflow.template && w.hardwareId === workflow.hardwareId,
    );
    const refusal = found === undefined ? workflowProblem(workflow, plan, view) : undefined;
    if (refusal !== undefined) problems.push(`Workflow ${workflow.name}: ${refusal}`);
    steps.push({
      kind: 'workflow',
      name: workflow.name,
      workflow,
      ...(found === undefined ? {} : { existing: found.id }),
    });
  }
  if (problems.length > 0) throw new ImportInputError(problems.slice(0, importProblemsMax));
  return steps;
}

function workflowRefsProblem(
  workflow: PlannedWorkflow,
  plan: ImportPlan,
  view: ClusterView,
  hardware: ReadonlyMap<string, unknown>,
): string | undefined {
  if (!plan.hardware.some((h) => h.id === workflow.hardwareId) && !hardware.has(workflow.hardwareId))
    return `spec.hardwareRef "${workflow.hardwareId}" is neither a Hardware in the input nor a machine in the cluster`;
  if (
    !plan.templates.some((t) => t.name === workflow.template) &&
    !view.templates.some((t) => t.name === workflow.template)
  )
    return `spec.templateRef "${workflow.template}" is neither a Template in the input nor a template in the cluster`;
  return undefined;
}

/**
 * Why `workflow create` would refuse the workflow, found before anything is created: the template
 * does not render for the machine (as the cluster renders it), or it netboots a machine without a
 * BMC.
 */
function workflowProblem(workflow: PlannedWorkflow, plan: ImportPlan, view: ClusterView): string | undefined {
  const machines: Hardware[] = [
    ...plan.hardware.map(({ input }) => ({
      ...input,
      workerTokenSha256: '',
      createdMs: 0,
      updatedMs: 0,
      version: 0,
    })),
    ...view.hardware
      .filter((h) => !plan.hardware.some((p) => p.id === h['id']))
      .map((h) => h as unknown as Hardware),
  ];
  const hardware = machines.find((h) => h.id === workflow.hardwareId);
  const source =
    plan.templates.find((t) => t.name === workflow.template)?.source ??
    view.templates.find((t) => t.name === workflow.template)?.source;
  if (hardware === undefined || source === undefined) return undefined;
  if (workflow.netboot && hardware.bmc === undefined)
    return `bootOptions.bootMode netboot needs a BMC, and hardware "${hardware.id}" has none (give its Hardware a bmcRef)`;
  const byMac = new Map(machines.flatMap((h) => h.interfaces.map((nic) => [nic.mac, h.id] as const)));
  try {
    renderTemplate(source, {
      workflowId: workflow.name,
      hardware,
      hardwareMap: workflow.hardwareMap,
      resolveWorker: (value) =>
        machines.some((h) => h.id === value) ? value : byMac.get(value.toLowerCase().replaceAll('-', ':')),
    });
    return undefined;
  } catch (err) {
    if (!(err instanceof TemplateError)) throw err;
    return `template "${workflow.template}" does not render for hardware "${hardware.id}": ${err.message.replaceAll('\n', '; ')}`;
  }
}

/** Why the machine cannot be imported over what the cluster holds, or undefined. */
function hardwareClash(
  hardware: PlannedHardware,
  stored: Readonly<Record<string, unknown>> | undefined,
  macOwners: ReadonlyMap<string, string>,
): string | undefined {
  for (const [index, nic] of hardware.input.interfaces.entries()) {
    const owner = macOwners.get(nic.mac);
    if (owner !== undefined && owner !== hardware.id)
      return `interfaces[${index}].mac ${nic.mac} belongs to hardware "${owner}" already`;
  }
  if (stored === undefined) return undefined;
  const want = comparable(hardware.input);
  const have = storedComparable(stored);
  const differing = Object.keys(want).filter((key) => canonical(want[key]) !== canonical(have[key]));
  if (differing.length === 0) return undefined;
  return (
    `hardware "${hardware.id}" exists and differs in ${differing.join(', ')}; ` +
    `delete it (slipway hardware delete ${hardware.id}) or rename this Hardware`
  );
}

function comparable(input: HardwareInput): Record<string, unknown> {
  const { allowPXE: _allowPXE, ...netboot } = input.netboot;
  const bmc =
    input.bmc === undefined
      ? null
      : {
          address: input.bmc.address,
          username: input.bmc.username,
          passwordSet: input.bmc.password !== undefined,
        };
  return {
    interfaces: input.interfaces,
    arch: input.arch,
    uefi: input.uefi,
    netboot,
    metadata: input.metadata,
    bmc,
  };
}

function storedComparable(stored: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const netboot = isMapping(stored['netboot']) ? { ...stored['netboot'] } : {};
  delete netboot['allowPXE'];
  const bmc = isMapping(stored['bmc'])
    ? {
        address: stored['bmc']['address'],
        username: stored['bmc']['username'],
        passwordSet: stored['bmc']['passwordSet'],
      }
    : null;
  const { interfaces, arch, uefi, metadata } = stored;
  return { interfaces, arch, uefi, netboot, metadata, bmc };
}

/** JSON with mapping keys sorted and undefined fields left out: equal data, equal text. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    isMapping(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, v[k]]),
        )
      : v,
  );
}
