// The control state's records are immutable values: every change builds a new object and
// freezes it, so callers can hold what a query returned without it changing, and cannot
// change the state through it (a write to a frozen object throws in strict mode).

/** Makes each optional field of T accept an explicit undefined, which record() drops. */
export type Loose<T> = { [K in keyof T]: T[K] | undefined };

/** `fields` without its undefined entries (optional fields stay absent, as in JSON), frozen. */
export function record<T extends object>(fields: Loose<T>): T {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) out[key] = value;
  // The one unchecked step: `out` holds the fields of a T minus its undefined optional ones.
  return Object.freeze(out) as T;
}

/** Freezes a JSON-shaped value and everything inside it. Returns it for chaining. */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  for (const inner of Object.values(value)) deepFreeze(inner);
  return Object.freeze(value);
}
