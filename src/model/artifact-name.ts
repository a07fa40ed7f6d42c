// An artifact's name (docs/decisions/0017-replicated-artifacts.md): the form that `slipway artifact add` checks before it
// uploads, the upload checks before it stores, and apply checks before the record is kept.
import { artifactNameLengthMax } from './limits.js';

// One path segment that starts with a letter or digit: never "." or "..", never hidden, safe
// in a URL and as a file name on every node.
const artifactNamePattern = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,${artifactNameLengthMax - 1}}$`);

/** What is wrong with an artifact's name (also a URL path segment, /artifacts/NAME, and a file name), or undefined. */
export function artifactNameProblem(name: string): string | undefined {
  if (artifactNamePattern.test(name)) return undefined;
  const quoted = JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
  return `name: ${quoted} must be 1-${artifactNameLengthMax} characters of A-Z a-z 0-9 . _ + -, starting with a letter or digit (one file name, no directories)`;
}
