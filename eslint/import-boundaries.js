// @ts-check
// The import-boundaries rule: which folder may import which. Each file belongs to a zone (the
// longest zone path that contains it); a relative import into another zone is allowed only when
// the importing zone lists it. Zones outside src/ reach a src/ subsystem only through its public
// entry (index.ts), except the leaf libraries every layer shares. docs/decisions/0026 explains
// the layering.
import path from 'node:path';

/**
 * @typedef {{ zones: Record<string, string[]>, entryOnly: string[], open: string[] }} Options
 * zones: zone path → the zones it may import ('*' for any). entryOnly: zones that reach src/
 * subsystems only through index.ts. open: zones whose every file is public.
 */

/** @param {string} file @param {string[]} zones */
function zoneOf(file, zones) {
  let best = '';
  for (const z of zones) if ((file === z || file.startsWith(`${z}/`)) && z.length > best.length) best = z;
  return best;
}

/** @type {import('eslint').Rule.RuleModule} */
export const importBoundaries = {
  meta: {
    type: 'problem',
    docs: { description: 'keep the arrows between folders pointing the way the layering says' },
    schema: [{ type: 'object' }],
    messages: {
      layer: '{{from}} may not import {{to}} ({{target}}): see docs/decisions/0026-layout-and-boundaries.md',
      entry: '{{from}} reaches {{to}} only through {{to}}/index.ts, not {{target}}',
    },
  },
  create(context) {
    const options = /** @type {Options} */ (context.options[0]);
    const root = context.cwd;
    const zones = Object.keys(options.zones);
    const file = path.relative(root, context.filename).split(path.sep).join('/');
    const from = zoneOf(file, zones);
    if (from === '') return {};
    const allowed = options.zones[from] ?? [];
    /** @param {import('estree').Node} node @param {unknown} source */
    const check = (node, source) => {
      if (typeof source !== 'string' || !source.startsWith('.')) return;
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), source));
      const to = zoneOf(target.replace(/\.js$/, '.ts'), zones);
      if (to === '' || to === from) return;
      if (!allowed.includes('*') && !allowed.includes(to)) {
        context.report({ node, messageId: 'layer', data: { from, to, target } });
        return;
      }
      const entry = `${to}/index.ts`;
      if (options.entryOnly.includes(from) && to.startsWith('src/') && !options.open.includes(to)) {
        if (target.replace(/\.js$/, '.ts') !== entry)
          context.report({ node, messageId: 'entry', data: { from, to, target } });
      }
    };
    return {
      ImportDeclaration: (node) => check(node, node.source.value),
      ExportNamedDeclaration: (node) => check(node, node.source?.value),
      ExportAllDeclaration: (node) => check(node, node.source.value),
      ImportExpression: (node) => check(node, node.source.type === 'Literal' ? node.source.value : undefined),
    };
  },
};
