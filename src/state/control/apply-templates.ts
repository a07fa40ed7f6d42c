// Templates at apply: a template stored by name under the expectVersion rule, or deleted.
import { templatesMax } from '../../model/limits.js';
import type { Template } from '../../model/records.js';
import { deleted, failure, versionRefusal, type Command } from './apply-outcome.js';
import type { ControlResult } from './commands.js';
import type { ControlTables } from './control-tables.js';
import { templateNameProblem, templateSourceProblem } from './validate.js';

export function putTemplate(
  t: ControlTables,
  command: Command<'template.put'>,
  nowMs: number,
): ControlResult {
  const problem = templateNameProblem('name', command.name) ?? templateSourceProblem(command.source);
  if (problem !== undefined) return failure('E_INVALID', problem);
  const existing = t.templates.get(command.name);
  const refusal = versionRefusal('template', command.name, existing?.version, command.expectVersion);
  if (refusal !== undefined) return refusal;
  if (existing === undefined && t.templates.size >= templatesMax) {
    return failure(
      'E_CONFLICT',
      `the state holds the maximum of ${templatesMax} templates; delete some first`,
    );
  }
  const template: Template = Object.freeze({
    name: command.name,
    source: command.source,
    createdMs: existing?.createdMs ?? nowMs,
    updatedMs: nowMs,
    version: (existing?.version ?? 0) + 1,
  });
  t.templates.set(template.name, template);
  return { type: 'template', template };
}

export function deleteTemplate(t: ControlTables, name: string): ControlResult {
  if (!t.templates.delete(name)) {
    return failure('E_NOT_FOUND', `template "${name}" does not exist`);
  }
  return deleted;
}
