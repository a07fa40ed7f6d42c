// The --selector flag of `hardware list` and `workflow create`: its help, and the check of what
// was typed, whose parser (src/fleet/selector.ts) loads only when a selector is given, so the
// commands that take one start as fast as the others.
import { UsageError } from '../output.js';

/** A selector's terms, for the flags' help. */
export const selectorHelp =
  'terms joined by commas: labels (rack=a, rack in (a,b), rack!=a, gpu, !gpu) and inventory facts ' +
  '(memory>=64Gi, cpu.cores>=16, disks.count>=2, disks.size>=1T, firmware=uefi, arch=x86_64)';

/** The selector as typed, checked here first: a bad one is exit 2 with a caret at the term. */
export async function selectorFlag(text: string): Promise<string> {
  const { parseSelector, pointAt, SelectorError } = await import('../../fleet/index.js');
  const parsed = parseSelector(text);
  if (parsed instanceof SelectorError) throw new UsageError(pointAt(text, parsed));
  return text;
}
