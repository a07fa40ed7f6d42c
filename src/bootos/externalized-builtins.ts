// Some distributions build Node.js with parts of its built-in JavaScript kept outside the binary
// and read at every start (Debian 13: --shared-builtin-*-path, e.g.
// /usr/share/nodejs/cjs-module-lexer/lexer.js). A runtime copied without them aborts at once
// ("Cannot load externalized builtin"). Their paths are written into the runtime (node, or
// libnode.so when node is linked against it); the boot OS copies what they name to the same paths.

const scriptEndings = ['.js\0', '.mjs\0', '.cjs\0'].map((s) => Buffer.from(s, 'latin1'));

/** Printable ASCII other than space: what a path written as a C string is made of here. */
function isPathByte(b: number): boolean {
  return b > 0x20 && b < 0x7f;
}

/**
 * The absolute paths under /usr/ of JavaScript files that `binary` holds as NUL-terminated
 * strings, sorted and without repeats. Pure: the caller decides which exist.
 */
export function embeddedScriptPaths(binary: Uint8Array): string[] {
  const bytes = Buffer.from(binary.buffer, binary.byteOffset, binary.byteLength);
  const found = new Set<string>();
  for (const ending of scriptEndings) {
    for (let at = bytes.indexOf(ending); at !== -1; at = bytes.indexOf(ending, at + 1)) {
      let start = at;
      while (start > 0 && isPathByte(bytes[start - 1]!)) start--;
      // A C string starts after a NUL; a run of printable bytes inside other data is not one.
      if (start > 0 && bytes[start - 1] !== 0) continue;
      const text = bytes.toString('latin1', start, at + ending.length - 1);
      if (text.startsWith('/usr/') && !text.includes('/../')) found.add(text);
    }
  }
  return [...found].sort();
}
