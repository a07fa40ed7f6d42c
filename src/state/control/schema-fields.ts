// The field readers the control plane's record readers (schema.ts) and command readers
// (command-schema.ts) share: bounded texts, flags, and the states records and results name.
import { auditTextBytesMax, controlCommandBytesMax } from '../../model/limits.js';
import { powerSteps, workflowStates } from '../../model/records.js';
import { array, literal, map, ShapeError, string, type Reader } from './shape.js';

// Sizes here only keep a reader from walking absurd input; the real bounds are the payload's
// (controlCommandBytesMax) and the domain limits apply checks with E_INVALID.
export const text = string(controlCommandBytesMax);

/** A flag kept only when set: true, or absent. */
export const onlyTrue: Reader<true> = (value, path) => {
  if (value !== true) throw new ShapeError(path, 'must be true (or left out)');
  return true;
};
export const texts = array(text, controlCommandBytesMax);
export const textMap = map(text, controlCommandBytesMax);
export const jsonDepthMax = 32;

export const workflowState = literal(workflowStates);
export const actionState = literal(workflowStates);

export const powerStep = literal(powerSteps);
export const powerState = literal(['on', 'off'] as const);

// Audit texts are bounded tighter than the payload: the trail keeps many of them.
export const auditText = string(auditTextBytesMax);
