// The retention flags, one name per idea wherever something is kept for a while (audit entries,
// finished workflows): `--keep N` (at most this many, the newest) and `--max-age <duration>` (none
// older; 0: no age limit). Each group's names before them stay, hidden, for old scripts.
import { Option, type Command } from '@commander-js/extra-typings';
import { duration, wholeNumber } from './flags.js';
import { UsageError } from './output.js';

/** What a group keeps, and the flags it took before. */
export interface RetentionFlags {
  /** What `--keep` counts: "entries", "finished workflows". */
  readonly what: string;
  /** What --max-age removes: "entries older than this". */
  readonly aged: string;
  readonly keepMax: number;
  readonly keepDefault: number;
  readonly daysMax: number;
  readonly daysDefault: number;
  /** The flags before --keep and --max-age, as `--NAME <n>`. */
  readonly oldKeep: string;
  readonly oldDays: string;
}

/** The retention as given: each undefined when left out (it keeps its current value). */
export interface RetentionGiven {
  readonly keep: number | undefined;
  readonly days: number | undefined;
}

const dayMs = 86_400_000;

/** Adds --keep and --max-age, and the old flags hidden, to `command`. */
export function addRetentionFlags<C extends Command>(command: C, f: RetentionFlags): C {
  command
    .option(
      '--keep <n>',
      `keep at most this many ${f.what}, the newest (1 to ${f.keepMax}; default ${f.keepDefault})`,
    )
    .option(
      '--max-age <duration>',
      `remove ${f.aged}: 90d, 2160h, or a bare number of days; 0: no age limit ` +
        `(up to ${f.daysMax}d; default ${f.daysDefault === 0 ? 'no age limit' : `${f.daysDefault}d`})`,
    )
    .addOption(new Option(`${f.oldKeep} <n>`, 'the name before --keep').hideHelp())
    .addOption(new Option(`${f.oldDays} <n>`, 'the name before --max-age, in days').hideHelp());
  return command;
}

/** The retention the command line gives, checked: a bad or doubly given value is a UsageError. */
export function retentionGiven(o: Readonly<Record<string, unknown>>, f: RetentionFlags): RetentionGiven {
  const text = (key: string): string | undefined => {
    const v = o[key];
    return typeof v === 'string' ? v : undefined;
  };
  const keepFlag = one(text('keep'), '--keep', text(camel(f.oldKeep)), f.oldKeep);
  const daysFlag = one(text('maxAge'), '--max-age', text(camel(f.oldDays)), f.oldDays);
  const keep = keepFlag === undefined ? undefined : inRange(keepFlag, 1, f.keepMax);
  let days: number | undefined;
  if (daysFlag?.flag === '--max-age') {
    const ms = duration(daysFlag.text, '--max-age', 'd');
    if (ms % dayMs !== 0)
      throw new UsageError(`--max-age must be whole days (90d, 2160h), got "${daysFlag.text}"`);
    days = ms / dayMs;
    if (days > f.daysMax)
      throw new UsageError(`--max-age must be at most ${f.daysMax}d, got ${daysFlag.text}`);
  } else if (daysFlag !== undefined) days = inRange(daysFlag, 0, f.daysMax);
  return { keep, days };
}

interface Given {
  readonly flag: string;
  readonly text: string;
}

function one(
  value: string | undefined,
  flag: string,
  oldValue: string | undefined,
  oldFlag: string,
): Given | undefined {
  if (value !== undefined && oldValue !== undefined)
    throw new UsageError(`give ${flag} or ${oldFlag} (its name before), not both`);
  if (value !== undefined) return { flag, text: value };
  return oldValue === undefined ? undefined : { flag: oldFlag, text: oldValue };
}

function inRange(g: Given, min: number, max: number): number {
  const n = wholeNumber(g.text, g.flag);
  if (n < min || n > max) throw new UsageError(`${g.flag} must be ${min} to ${max}, got ${g.text}`);
  return n;
}

/** `--finished-max` → `finishedMax`, as commander names an option's value. */
function camel(flag: string): string {
  return flag.replace(/^--/, '').replace(/-(\w)/g, (_, c: string) => c.toUpperCase());
}
