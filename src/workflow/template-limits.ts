// Limits on templates. Every one is checked with an error that names it, so a template that is
// too big is refused at `template create` rather than by the state machine later. Those the
// replicated state also enforces come from src/state/limits.ts, so the two can never disagree.
import {
  actionRetriesMax,
  controlCommandBytesMax,
  templateSourceBytesMax as stateTemplateSourceBytesMax,
  timeoutSMax as stateTimeoutSMax,
  workflowActionsMax,
  workflowTasksMax,
} from '../model/limits.js';

/** The template text as the operator gives it, in UTF-8 bytes. */
export const templateSourceBytesMax = stateTemplateSourceBytesMax;
/** The text after placeholders are filled: `{{#each}}` can multiply the source. */
export const renderedTemplateBytesMax = 1024 * 1024;
/**
 * The rendered spec as JSON (environments are merged into every action, so it can outgrow the
 * text). It travels inside the workflow.create command; the rest leaves room for ids and the
 * hardware map.
 */
export const renderedSpecBytesMax = controlCommandBytesMax - 64 * 1024;
export const tasksMax = workflowTasksMax;
/** Across all tasks: a workflow's flat action list is replicated with every change to it. */
export const actionsMax = workflowActionsMax;
export const nameLengthMax = 128;
/** Tinkerbell requires `timeout` on every action; here it may be left out and means this. */
export const actionTimeoutSDefault = 600;
/** Seven days: longer deadlines are almost certainly a unit mistake (ms written as seconds). */
export const timeoutSMax = stateTimeoutSMax;
export const retriesMax = actionRetriesMax;
export const environmentEntriesMax = 256;
export const volumesMax = 64;
export const commandPartsMax = 1024;
/** Per string field (an image, an argument, an environment value). */
export const fieldBytesMax = 64 * 1024;
