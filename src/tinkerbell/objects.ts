// Kubernetes objects as Tinkerbell users keep them: YAML files of one or many documents (`---`),
// a document of kind List (or HardwareList, ...) holding `items`, JSON too (it is YAML). Pure:
// the caller reads the files and hands their text in.
import { parseAllDocuments } from 'yaml';

/** One object, where it came from, and the fields every kind has. */
export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  /** metadata.namespace; "" when absent (kubectl would use the current namespace). */
  readonly namespace: string;
  /** The whole object as parsed. */
  readonly body: Readonly<Record<string, unknown>>;
  /** "FILE: document N" (and "item M" inside a List), for messages. */
  readonly origin: string;
}

/** A file as given to `slipway import`. */
export interface InputFile {
  readonly path: string;
  readonly text: string;
}

/** Input that is not a set of objects at all: the files, the documents, their shape. */
export class ImportInputError extends Error {
  constructor(problems: readonly string[]) {
    super(problems.join('\n'));
    this.name = 'ImportInputError';
  }
}

export const importProblemsMax = 50;

export function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Every object in the files, Lists flattened, in file and document order. Throws ImportInputError. */
export function readObjects(files: readonly InputFile[]): KubeObject[] {
  const objects: KubeObject[] = [];
  const problems: string[] = [];
  for (const file of files) {
    parseAllDocuments(file.text).forEach((doc, index) => {
      const where = `${file.path}: document ${index + 1}`;
      const error = doc.errors[0];
      if (error !== undefined) {
        const line = error.linePos?.[0].line;
        problems.push(`${file.path}${line === undefined ? '' : `:${line}`}: ${error.message.split('\n')[0]}`);
        return;
      }
      const value: unknown = doc.toJS();
      if (value === null || value === undefined) return; // an empty document (a trailing ---)
      collect(value, where, objects, problems);
    });
  }
  if (problems.length > 0) throw new ImportInputError(problems.slice(0, importProblemsMax));
  return objects;
}

function collect(value: unknown, where: string, objects: KubeObject[], problems: string[]): void {
  if (!isMapping(value)) {
    problems.push(`${where}: not a Kubernetes object (a mapping with apiVersion, kind and metadata)`);
    return;
  }
  const kind = value['kind'];
  const items = value['items'];
  if (typeof kind === 'string' && kind.endsWith('List') && Array.isArray(items)) {
    items.forEach((item, index) => collect(item, `${where} item ${index + 1}`, objects, problems));
    return;
  }
  const object = kubeObject(value, where);
  if (typeof object === 'string') problems.push(object);
  else objects.push(object);
}

/** The object, or what is wrong with it. */
function kubeObject(value: Record<string, unknown>, where: string): KubeObject | string {
  const { apiVersion, kind, metadata } = value;
  if (typeof apiVersion !== 'string' || apiVersion === '') return `${where}: apiVersion is missing`;
  if (typeof kind !== 'string' || kind === '') return `${where}: kind is missing`;
  const name = isMapping(metadata) ? metadata['name'] : undefined;
  if (typeof name !== 'string' || name === '') return `${where}: ${kind} without metadata.name`;
  const namespace = isMapping(metadata) ? metadata['namespace'] : undefined;
  return {
    apiVersion,
    kind,
    name,
    namespace: typeof namespace === 'string' ? namespace : '',
    body: value,
    origin: where,
  };
}

/** "Hardware default/sm01" or "Hardware sm01": how messages name an object. */
export function objectLabel(object: Pick<KubeObject, 'kind' | 'name' | 'namespace'>): string {
  return `${object.kind} ${object.namespace === '' ? '' : `${object.namespace}/`}${object.name}`;
}
