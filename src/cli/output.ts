// Read commands print in the operator's chosen format: json (one document), yaml, or an
// aligned table (kubectl style). Tables take rows of flat records.
import { createRequire } from 'node:module';

/** yaml, loaded on the first -o yaml only: it is large, and most commands print a table. */
let yaml: typeof import('yaml') | undefined;
function toYaml(doc: unknown): string {
  yaml ??= createRequire(import.meta.url)('yaml') as typeof import('yaml');
  return yaml.stringify(doc);
}

export type OutputFormat = 'json' | 'yaml' | 'table' | 'wide';
/** `wide` is the table with the columns a command leaves out of it for width (the reasons). */
export const outputFormats: readonly OutputFormat[] = ['json', 'yaml', 'table', 'wide'];

export type Row = Record<string, string | number | boolean>;

export function parseOutputFormat(v: string): OutputFormat {
  if ((outputFormats as readonly string[]).includes(v)) return v as OutputFormat;
  throw new UsageError(`-o must be one of ${outputFormats.join(', ')}, got "${v}"`);
}

export function render(
  format: OutputFormat,
  doc: unknown,
  rows: readonly Row[],
  wideRows: readonly Row[] = rows,
): string {
  switch (format) {
    case 'json':
      return JSON.stringify(doc, null, 2);
    case 'yaml':
      return toYaml(doc).trimEnd();
    case 'table':
      return table(rows);
    case 'wide':
      return table(wideRows);
  }
}

export function table(rows: readonly Row[]): string {
  const first = rows[0];
  if (first === undefined) return '(none)';
  const cols = Object.keys(first);
  const cells = [cols.map((c) => c.toUpperCase()), ...rows.map((r) => cols.map((c) => String(r[c] ?? '')))];
  const widths = cols.map((_, i) => Math.max(...cells.map((row) => row[i]!.length)));
  return cells
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Bad flags or arguments: exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
