// The performance guard's budgets (bench/budgets.json) and the rule that holds figures to them:
// pure, so a unit test can hold the rule itself (test/unit/bench-guard-budgets.test.ts).
// A figure is a cost (CPU milliseconds per unit of work, lower is better); it passes while it
// is at most its budget plus the tolerance (30 %), and a failure names the figure, its
// measurement, its budget and the commit the budget was measured at.
import { z } from 'zod';

/** Where a budget came from: the run it was measured in. */
const measurementSchema = z.object({
  commit: z.string().min(1),
  date: z.string().min(1),
  machine: z.string().min(1),
  /** What ran it, e.g. `npm run bench -- guard`. */
  command: z.string().min(1),
  /** Each run's figure (the budget is their median). */
  runs: z.array(z.number().positive()).min(1),
});

const budgetSchema = z.object({
  /** The budget: CPU milliseconds per unit of work. */
  value: z.number().positive(),
  unit: z.string().min(1),
  measured: measurementSchema,
  /** Why a budget was raised on purpose, when it was (the commit that did says so too). */
  raised: z.string().optional(),
});

export const budgetsSchema = z.object({
  /** How far over its budget a figure may be before the guard fails: 0.3 is 30 %. */
  tolerance: z.number().min(0).max(10),
  figures: z.record(z.string(), budgetSchema),
});

export type Budgets = z.infer<typeof budgetsSchema>;
export type Budget = z.infer<typeof budgetSchema>;
export type Measurement = z.infer<typeof measurementSchema>;

/** Reads a budgets document; a malformed one is an error that says what is wrong where. */
export function parseBudgets(text: string, source: string): Budgets {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: not JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  const parsed = budgetsSchema.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new Error(`${source}: ${first?.path.join('.') ?? ''}: ${first?.message ?? 'invalid'}`);
  }
  return parsed.data;
}

export interface Verdict {
  readonly figure: string;
  /** This run's figure, or null when the run did not produce it. */
  readonly measured: number | null;
  readonly budget: number;
  /** measured / budget, rounded to 0.01 (null when not measured). */
  readonly ratio: number | null;
  readonly pass: boolean;
  /** Set when it fails: a sentence naming the figure and by how much. */
  readonly message?: string;
}

const round2 = (x: number): number => Math.round(x * 100) / 100;

/**
 * Each budgeted figure against this run's: pass while measured <= budget x (1 + tolerance).
 * A budgeted figure the run did not produce fails (a guard that measures nothing guards
 * nothing); a measured figure without a budget is not judged.
 */
export function judge(budgets: Budgets, measured: Readonly<Record<string, number | null>>): Verdict[] {
  const limitPct = Math.round(budgets.tolerance * 100);
  return Object.entries(budgets.figures).map(([figure, b]) => {
    const m = measured[figure] ?? null;
    if (m === null || !Number.isFinite(m))
      return {
        figure,
        measured: null,
        budget: b.value,
        ratio: null,
        pass: false,
        message: `${figure}: not measured in this run (budget ${String(b.value)} ${b.unit})`,
      };
    const ratio = m / b.value;
    const pass = m <= b.value * (1 + budgets.tolerance);
    return {
      figure,
      measured: m,
      budget: b.value,
      ratio: round2(ratio),
      pass,
      ...(pass
        ? {}
        : {
            message:
              `${figure}: ${String(m)} ${b.unit} is ${String(Math.round((ratio - 1) * 100))} % over its budget ` +
              `${String(b.value)} (at most +${String(limitPct)} %; budget measured at ${b.measured.commit} on ` +
              `${b.measured.date}). If the cost is meant, raise the budget as bench/README.md says ("The guard").`,
          }),
    };
  });
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * The budgets recorded from runs (each run's figures by name): each figure's budget is the
 * median of its runs, rounded up to 3 significant digits. Figures in `previous` that the runs
 * did not measure are kept; `raised` is set on every figure recorded when given.
 */
export function recordBudgets(
  previous: Budgets | undefined,
  runs: readonly Readonly<Record<string, number | null>>[],
  units: Readonly<Record<string, string>>,
  at: Omit<Measurement, 'runs'>,
  raised?: string,
): Budgets {
  const figures: Record<string, Budget> = { ...(previous?.figures ?? {}) };
  for (const [figure, unit] of Object.entries(units)) {
    const values = runs.map((r) => r[figure]).filter((v): v is number => typeof v === 'number' && v > 0);
    if (values.length === 0) continue;
    const m = median(values);
    const digits = Math.max(0, 2 - Math.floor(Math.log10(m)));
    const value = Math.ceil(m * 10 ** digits) / 10 ** digits;
    figures[figure] = {
      value,
      unit,
      measured: { ...at, runs: values },
      ...(raised !== undefined ? { raised } : {}),
    };
  }
  return { tolerance: previous?.tolerance ?? 0.3, figures };
}
