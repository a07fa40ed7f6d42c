// The benchmarks' option checks, one message for every benchmark's flags.

/** `text` as a whole number from `min` to `max`, or a RangeError naming the flag and its range. */
export function wholeNumber(text: string, flag: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) {
    const range =
      max === Number.MAX_SAFE_INTEGER ? `${String(min)} or more` : `from ${String(min)} to ${String(max)}`;
    throw new RangeError(`--${flag} must be a whole number ${range}, got ${JSON.stringify(text)}`);
  }
  return n;
}
