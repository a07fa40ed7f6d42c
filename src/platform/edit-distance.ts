// How far apart two short names are, for "did you mean ...?" in refusals: template and hardware
// fields, selector facts, configuration keys.

/** Levenshtein distance; names over 64 characters are infinitely far (the table stays small). */
export function editDistance(a: string, b: string): number {
  if (a.length > 64 || b.length > 64) return Number.POSITIVE_INFINITY;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? Number.POSITIVE_INFINITY;
}

/** The allowed name nearest to `name` (case aside) when it is fewer than `below` edits away. */
export function closestName(name: string, allowed: readonly string[], below = 3): string | undefined {
  let best: string | undefined;
  let bestDistance = below;
  for (const candidate of allowed) {
    const distance = editDistance(name.toLowerCase(), candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}
