// @ts-check
// The import-boundaries rule: which folder may import which. Each file belongs to a zone (the
// longest zone path that contains it); a relative import into another zone is allowed only when
// the importing zone lists it (or a folder that holds it), or when it is the importer's own
// subfolder. Zones outside src/ reach a src/ subsystem only through its public entry
// (index.ts), except the leaf libraries every layer shares. A zone may also be given entries it
// loads lazily: modules of zones it may not import, reached only by `await import()` (or by
// `import type`, which leaves nothing at run time), so that what does not use them starts
// without them. docs/decisions/0026 explains the layering.
import path from 'node:path';

/**
 * @typedef {{
 *   zones: Record<string, string[]>,
 *   entryOnly: string[],
 *   open: string[],
 *   lazy?: Record<string, string[]>,
 * }} Options
 * zones: zone path → the zones it may import ('*' for any). entryOnly: zones that reach src/
 * subsystems only through index.ts. open: zones whose every file is public. lazy: zone → the
 * files (repository paths, .ts) it may load only lazily.
 */

/** @param {string} file @param {string[]} zones */
function zoneOf(file, zones) {
  let best = '';
  for (const z of zones) if ((file === z || file.startsWith(`${z}/`)) && z.length > best.length) best = z;
  return best;
}

/** Whether `allowed` lets a file of zone `from` import zone `to`. @param {string[]} allowed @param {string} from @param {string} to */
function mayImport(allowed, from, to) {
  if (allowed.includes('*') || to.startsWith(`${from}/`)) return true;
  return allowed.some((z) => to === z || to.startsWith(`${z}/`));
}

/** A src/ subsystem's top folder: src/raft for src/raft/core. @param {string} zone */
function subsystemOf(zone) {
  return zone.startsWith('src/') ? zone.split('/').slice(0, 2).join('/') : zone;
}

/** @param {import('estree').Node} node */
function leavesNothingAtRunTime(node) {
  const kind = /** @type {{ importKind?: string, exportKind?: string }} */ (node);
  return kind.importKind === 'type' || kind.exportKind === 'type';
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
      lazy: '{{from}} loads {{target}} only lazily (`await import()`), so that the commands that do not use it start without it: see docs/decisions/0026-layout-and-boundaries.md',
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
    const lazy = options.lazy?.[from] ?? [];
    /** @param {import('estree').Node} node @param {unknown} source */
    const check = (node, source) => {
      if (typeof source !== 'string' || !source.startsWith('.')) return;
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), source));
      const targetTs = target.replace(/\.js$/, '.ts');
      const to = zoneOf(targetTs, zones);
      if (to === '' || to === from) return;
      if (lazy.includes(targetTs) && !mayImport(allowed, from, to)) {
        if (node.type !== 'ImportExpression' && !leavesNothingAtRunTime(node))
          context.report({ node, messageId: 'lazy', data: { from, target } });
        return;
      }
      if (!mayImport(allowed, from, to)) {
        context.report({ node, messageId: 'layer', data: { from, to, target } });
        return;
      }
      const subsystem = subsystemOf(to);
      if (options.entryOnly.includes(from) && to.startsWith('src/') && !options.open.includes(subsystem)) {
        if (targetTs !== `${subsystem}/index.ts`)
          context.report({ node, messageId: 'entry', data: { from, to: subsystem, target } });
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
