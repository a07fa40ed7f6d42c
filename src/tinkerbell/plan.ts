// What `slipway import` makes of a set of Tinkerbell objects, before it asks the cluster anything
// (docs/decisions/0039-tinkerbell-import.md). Pure: objects in, a plan or every problem out.
//
//   tinkerbell.org/v1alpha1 Hardware   → hardware (hardware.ts), with its Rufio Machine and Secret
//   tinkerbell.org/v1alpha1 Template   → template: spec.data, its `name` set to metadata.name
//                                        (Workflows name templates so)
//   tinkerbell.org/v1alpha1 Workflow   → workflow: templateRef, hardwareRef, hardwareMap;
//                                        bootOptions.bootMode netboot → `workflow create --netboot`;
//                                        one whose status.state says it ran (RUNNING, SUCCESS,
//                                        FAILED, TIMEOUT, POST) is skipped, not run again
//   bmc.tinkerbell.org/v1alpha1 Machine, v1 Secret → read through a Hardware's bmcRef only
// Any other kind or apiVersion is unknown: refused, or listed and skipped with skipUnknown.
import { isMap, isScalar, parseDocument } from 'yaml';
import type { HardwareInput } from '../model/records.js';
import { LocatedError } from '../workflow/template-yaml.js';
import { validateTemplateSource } from '../workflow/template.js';
import { mapHardware, type ImportNote, type MappingFindings } from './hardware.js';
import { ImportInputError, importProblemsMax, isMapping, objectLabel, type KubeObject } from './objects.js';

export interface PlannedHardware {
  readonly id: string;
  readonly input: HardwareInput;
}

export interface PlannedTemplate {
  readonly name: string;
  readonly source: string;
}

export interface PlannedWorkflow {
  /** The Tinkerbell Workflow's metadata.name (Slipway's workflows get an id when created). */
  readonly name: string;
  readonly template: string;
  readonly hardwareId: string;
  readonly hardwareMap: Readonly<Record<string, string>>;
  readonly netboot: boolean;
}

export interface SkippedObject {
  readonly object: string;
  readonly reason: string;
}

export interface ImportPlan {
  readonly hardware: readonly PlannedHardware[];
  readonly templates: readonly PlannedTemplate[];
  readonly workflows: readonly PlannedWorkflow[];
  readonly notes: readonly ImportNote[];
  readonly skipped: readonly SkippedObject[];
}

const tink = 'tinkerbell.org/v1alpha1';
const rufio = 'bmc.tinkerbell.org/v1alpha1';
const known: readonly (readonly [string, string])[] = [
  [tink, 'Hardware'],
  [tink, 'Template'],
  [tink, 'Workflow'],
  [rufio, 'Machine'],
  ['v1', 'Secret'],
];

function isKnown(object: KubeObject): boolean {
  return known.some(([api, kind]) => object.apiVersion === api && object.kind === kind);
}

/** Why a kind is not imported, for the message listing it. */
function unknownReason(object: KubeObject): string {
  if (object.apiVersion === rufio && (object.kind === 'Job' || object.kind === 'Task'))
    return 'one-off BMC jobs are not imported; run them with `slipway power`';
  if (known.some(([, kind]) => kind === object.kind))
    return `Slipway imports ${object.kind} of ${known.find(([, k]) => k === object.kind)?.[0] ?? ''}, not ${object.apiVersion}`;
  return `kind ${object.kind} of ${object.apiVersion} is not one Slipway imports (Hardware, Template, Workflow, Rufio Machine, Secret)`;
}

/** Two namespaces name the same place when equal, or when either object gave none. */
function sameNamespace(a: string, b: string): boolean {
  return a === '' || b === '' || a === b;
}

/** The plan for the objects; throws ImportInputError listing every problem. */
export function planImport(objects: readonly KubeObject[], options: { skipUnknown: boolean }): ImportPlan {
  const problems: string[] = [];
  const skipped: SkippedObject[] = [];
  for (const object of objects.filter((o) => !isKnown(o))) {
    const reason = unknownReason(object);
    if (options.skipUnknown) skipped.push({ object: `${objectLabel(object)} (${object.origin})`, reason });
    else
      problems.push(`${objectLabel(object)} (${object.origin}): ${reason}; give --skip-unknown to skip it`);
  }
  const ofKind = (kind: string): KubeObject[] => objects.filter((o) => isKnown(o) && o.kind === kind);
  problems.push(...duplicateNames(objects.filter(isKnown)));
  const find = (kind: string) => (name: string, namespace: string) =>
    ofKind(kind).find((o) => o.name === name && sameNamespace(o.namespace, namespace));
  const findings: MappingFindings = { notes: [], problems };
  const hardware = ofKind('Hardware').flatMap((object) => {
    const input = mapHardware(object, { machine: find('Machine'), secret: find('Secret') }, findings);
    return input === undefined ? [] : [{ id: input.id, input }];
  });
  const templates = ofKind('Template').flatMap((object) => mapTemplate(object, findings));
  const workflows = ofKind('Workflow').flatMap((object) => mapWorkflow(object, findings, skipped));
  skipped.push(...unusedBmcObjects(objects));
  if (problems.length > 0) throw new ImportInputError(problems.slice(0, importProblemsMax));
  return { hardware, templates, workflows, notes: findings.notes, skipped };
}

/** Slipway has one namespace: two objects of a kind with one name cannot both come in. */
function duplicateNames(objects: readonly KubeObject[]): string[] {
  const seen = new Map<string, KubeObject>();
  const problems: string[] = [];
  for (const object of objects) {
    const key = `${object.kind}/${object.name}`;
    const earlier = seen.get(key);
    if (earlier === undefined) seen.set(key, object);
    else if (object.kind !== 'Secret' || earlier.namespace === object.namespace)
      problems.push(
        `${objectLabel(object)} (${object.origin}): ${objectLabel(earlier)} (${earlier.origin}) has the same name; Slipway has one namespace, so rename one`,
      );
  }
  return problems;
}

/** Machines no Hardware names and Secrets no Machine names: listed, as they bring nothing in. */
function unusedBmcObjects(objects: readonly KubeObject[]): SkippedObject[] {
  const refName = (o: KubeObject, path: readonly string[]): unknown =>
    path.reduce<unknown>((v, key) => (isMapping(v) ? v[key] : undefined), o.body);
  const bmcRefs = objects
    .filter((o) => o.kind === 'Hardware')
    .map((o) => refName(o, ['spec', 'bmcRef', 'name']));
  const secretRefs = objects
    .filter((o) => o.kind === 'Machine')
    .map((o) => refName(o, ['spec', 'connection', 'authSecretRef', 'name']));
  return objects.flatMap((o) => {
    if (o.apiVersion === rufio && o.kind === 'Machine' && !bmcRefs.includes(o.name))
      return [{ object: objectLabel(o), reason: 'no Hardware names it in spec.bmcRef' }];
    if (o.apiVersion === 'v1' && o.kind === 'Secret' && !secretRefs.includes(o.name))
      return [{ object: objectLabel(o), reason: 'no Machine names it in spec.connection.authSecretRef' }];
    return [];
  });
}

function mapTemplate(object: KubeObject, findings: MappingFindings): PlannedTemplate[] {
  const label = objectLabel(object);
  const spec = isMapping(object.body['spec']) ? object.body['spec'] : {};
  const data = spec['data'];
  if (typeof data !== 'string' || data.trim() === '') {
    findings.problems.push(`${label}: spec.data (the template YAML) is missing`);
    return [];
  }
  const { source, renamedFrom } = withName(data, object.name);
  if (renamedFrom !== undefined)
    findings.notes.push({
      object: label,
      field: 'spec.data name',
      outcome: 'renamed',
      reason: `${JSON.stringify(renamedFrom)} becomes ${JSON.stringify(object.name)}: Workflows name a template by metadata.name`,
    });
  try {
    validateTemplateSource(source);
  } catch (err) {
    if (!(err instanceof LocatedError)) throw err;
    for (const line of err.message.split('\n')) findings.problems.push(`${label}: spec.data ${line}`);
    return [];
  }
  return [{ name: object.name, source }];
}

/**
 * The template text with its top-level `name` set to `name`, the rest byte for byte. Text that is
 * not YAML comes back as it is (the template check then says what is wrong with it).
 */
export function withName(data: string, name: string): { source: string; renamedFrom?: string } {
  const doc = parseDocument(data);
  if (doc.errors.length > 0 || !isMap(doc.contents)) return { source: data };
  const pair = doc.contents.items.find((p) => isScalar(p.key) && p.key.value === 'name');
  if (pair === undefined) return { source: `name: ${JSON.stringify(name)}\n${data}` };
  const value = pair.value;
  if (!isScalar(value) || value.range === undefined || value.range === null) return { source: data };
  if (value.value === name) return { source: data };
  const [start, end] = value.range;
  return {
    source: `${data.slice(0, start)}${JSON.stringify(name)}${data.slice(end)}`,
    renamedFrom: String(value.value),
  };
}

/** Workflow states (kubectl get -o yaml keeps status) of a run that has not started yet. */
const notStarted = new Set(['', 'PENDING', 'STATE_PENDING', 'PREPARING']);

function mapWorkflow(
  object: KubeObject,
  findings: MappingFindings,
  skipped: SkippedObject[],
): PlannedWorkflow[] {
  const label = objectLabel(object);
  const spec = isMapping(object.body['spec']) ? object.body['spec'] : {};
  const { templateRef, hardwareRef, hardwareMap } = spec;
  const problemsBefore = findings.problems.length;
  if (typeof templateRef !== 'string' || templateRef === '')
    findings.problems.push(`${label}: spec.templateRef is missing`);
  if (typeof hardwareRef !== 'string' || hardwareRef === '')
    findings.problems.push(`${label}: spec.hardwareRef is missing`);
  const map: Record<string, string> = {};
  if (isMapping(hardwareMap))
    for (const [key, value] of Object.entries(hardwareMap)) {
      if (typeof value === 'string') map[key] = value;
      else findings.problems.push(`${label}: spec.hardwareMap.${key} must be a string`);
    }
  const netboot = bootMode(spec['bootOptions'], label, findings);
  for (const key of Object.keys(spec))
    if (!['templateRef', 'hardwareRef', 'hardwareMap', 'bootOptions', 'disabled'].includes(key))
      findings.notes.push({
        object: label,
        field: `spec.${key}`,
        outcome: 'dropped',
        reason: 'Slipway has no such workflow setting',
      });
  if (findings.problems.length > problemsBefore) return [];
  const status = isMapping(object.body['status']) ? object.body['status'] : {};
  const state = typeof status['state'] === 'string' ? status['state'] : '';
  if (!notStarted.has(state)) {
    skipped.push({
      object: label,
      reason: `status.state is ${state}: it ran in Tinkerbell, and importing it would run it again`,
    });
    return [];
  }
  if (spec['disabled'] === true) {
    skipped.push({
      object: label,
      reason: 'spec.disabled is true; Slipway starts a workflow when it is created',
    });
    return [];
  }
  return [
    {
      name: object.name,
      template: String(templateRef),
      hardwareId: String(hardwareRef),
      hardwareMap: map,
      netboot,
    },
  ];
}

/** bootOptions.bootMode netboot → true; isoboot and customboot are refused. */
function bootMode(options: unknown, label: string, findings: MappingFindings): boolean {
  if (!isMapping(options)) return false;
  const mode = options['bootMode'];
  if (options['toggleAllowNetboot'] === true)
    findings.notes.push({
      object: label,
      field: 'spec.bootOptions.toggleAllowNetboot',
      outcome: 'dropped',
      reason: 'Slipway turns allowPXE off itself when a workflow on the machine succeeds',
    });
  if (mode === undefined || mode === '') return false;
  if (mode === 'netboot') return true;
  findings.problems.push(
    `${label}: spec.bootOptions.bootMode ${JSON.stringify(mode)}: Slipway boots machines from the network only (netboot)`,
  );
  return false;
}
