// Reading and rewriting datadriven scenario files in the style of cockroachdb/datadriven:
// a command line, a `----` line, the expected output, then a blank line. Comment lines
// (starting with #) and blank lines between cases are kept verbatim on rewrite.

export interface Case {
  readonly kind: 'case';
  /** 1-based line number of the command, for error messages. */
  readonly line: number;
  readonly command: string;
  readonly expected: readonly string[];
}

export interface Text {
  readonly kind: 'text';
  readonly text: string;
}

export type Item = Case | Text;

export function parseScenario(source: string, file: string): Item[] {
  const lines = source.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const items: Item[] = [];
  let i = 0;
  while (i < lines.length) {
    const text = lines[i]!;
    if (text.trim() === '' || text.startsWith('#')) {
      items.push({ kind: 'text', text });
      i++;
      continue;
    }
    const line = i + 1;
    if (lines[i + 1] !== '----') throw new Error(`${file}:${line}: expected a '----' line after the command`);
    i += 2;
    const expected: string[] = [];
    while (i < lines.length && lines[i]!.trim() !== '') {
      expected.push(lines[i]!);
      i++;
    }
    items.push({ kind: 'case', line, command: text, expected });
  }
  return items;
}

/** The file text with each case's output replaced by `actual` (in case order). */
export function renderScenario(items: readonly Item[], actual: readonly (readonly string[])[]): string {
  const out: string[] = [];
  let k = 0;
  for (const item of items) {
    if (item.kind === 'text') {
      out.push(item.text);
      continue;
    }
    out.push(item.command, '----', ...(actual[k] ?? item.expected));
    k++;
  }
  return out.join('\n') + '\n';
}
