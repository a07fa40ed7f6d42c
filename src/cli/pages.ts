// Lists print everything: a paged list call (src/api/pages.ts) is repeated with each page's
// `continue` token until the last page (src/platform/pages.ts, the one reader of whole lists).
//
// With --limit N a list prints at most N items and, when more remain, the token to carry on
// with (--continue TOKEN): in the document's `continue` field (-o json, -o yaml), and for a
// table on stderr, below it, as `slipway audit list` does.
import { status } from '@grpc/grpc-js';
import { isServiceError, pageItemsMax } from '../wire/contract.js';
import type { ClusterClient } from './client.js';
import { wholeNumber } from './flags.js';
import type { OutputFormat, Row } from './output.js';
import { render, UsageError } from './output.js';
import { allPages } from '../platform/pages.js';

const pagesMax = 10_000;

/** Help for the flags every paged list command takes. */
export const limitHelp = 'at most this many items, then the --continue token for the rest (default: all)';
export const continueHelp = "carry on after a previous listing's last item (its --continue token)";
/** Help for --local, which every read command takes. */
export const localHelp = "read this node's applied state without confirming leadership";

/** What --limit and --continue asked for, checked. */
export interface Paging {
  /** At most this many items; undefined: all of them. */
  readonly limit: number | undefined;
  /** The token to start after ('' from the first item). */
  readonly from: string;
}

/** A token is base64url, at most 1024 characters (src/api/pages.ts). */
const tokenPattern = /^[A-Za-z0-9_-]{1,1024}$/;

/** --limit and --continue as given on the command line; bad values are a UsageError naming the flag. */
export function paging(o: {
  readonly limit?: string | undefined;
  readonly continue?: string | undefined;
}): Paging {
  let limit: number | undefined;
  if (o.limit !== undefined) {
    limit = wholeNumber(o.limit, '--limit');
    if (limit < 1 || !Number.isSafeInteger(limit))
      throw new UsageError(`--limit must be a whole number from 1, got "${o.limit}"`);
  }
  const from = o.continue ?? '';
  if (o.continue !== undefined && !tokenPattern.test(from)) {
    throw new UsageError(
      `--continue must be the token a previous listing printed (letters, digits, '-' and '_'), got "${from}"`,
    );
  }
  return { limit, from };
}

/** A page request's paging fields. */
export interface PageRequestFields {
  readonly limit?: number;
  readonly continue: string;
}

/**
 * The pages of a list as --limit and --continue ask: all of them from the token, or pages until
 * `limit` items (`count` says how many a page holds). `next` is the token to carry on with, ''
 * when nothing remains. A token the node refuses is a UsageError naming --continue.
 */
export async function listPages<R extends { readonly continue: string }>(
  p: Paging,
  fetchPage: (req: PageRequestFields) => Promise<R>,
  count: (page: R) => number,
): Promise<{ pages: R[]; next: string }> {
  try {
    const limit = p.limit;
    if (limit === undefined)
      return { pages: await allPages((token) => fetchPage({ continue: token }), p.from), next: '' };
    const pages: R[] = [];
    let items = 0;
    let next = p.from;
    for (let i = 0; i < pagesMax; i++) {
      const page = await fetchPage({ limit: Math.min(limit - items, pageItemsMax), continue: next });
      pages.push(page);
      items += count(page);
      if (page.continue === '' || items >= limit) return { pages, next: page.continue };
      if (page.continue === next) throw new Error('the server answered the same continue token twice');
      next = page.continue;
    }
    throw new Error(`the list did not end within ${pagesMax} pages`);
  } catch (err) {
    if (
      p.from !== '' &&
      isServiceError(err) &&
      err.code === status.INVALID_ARGUMENT &&
      /continue token/.test(err.details)
    )
      throw new UsageError(`--continue: ${err.details}`);
    throw err;
  }
}

/** `doc` with the token to carry on with, when there is one. */
export function withContinue<D extends object>(doc: D, next: string): D & { continue?: string } {
  return next === '' ? doc : { ...doc, continue: next };
}

/** Below a table: how to get the rest, when more remain (on stderr, so the table stays parseable). */
export function printMore(output: OutputFormat, next: string, what: string): void {
  if (output === 'table' && next !== '')
    process.stderr.write(`more ${what}: add --continue ${next} (or raise --limit)\n`);
}

/** The flags a list command's read takes. */
export interface ListFlags {
  readonly local?: true | undefined;
  readonly limit?: string | undefined;
  readonly continue?: string | undefined;
}

/**
 * A list command's read: --limit and --continue checked before anything connects, then the pages
 * they ask for (listPages), each asked with the command's --local.
 */
export async function readList<R extends { readonly continue: string }>(
  o: ListFlags,
  connect: () => { client: ClusterClient; output: OutputFormat },
  fetchPage: (client: ClusterClient, req: PageRequestFields & { readonly local: boolean }) => Promise<R>,
  count: (page: R) => number,
): Promise<{ pages: R[]; next: string; output: OutputFormat }> {
  const page = paging(o);
  const { client, output } = connect();
  const { pages, next } = await listPages(
    page,
    (req) => fetchPage(client, { local: o.local === true, ...req }),
    count,
  );
  return { pages, next, output };
}

/** A list as read: `doc` with the token to carry on with, or `rows` as a table and how to get the rest. */
export function printList(
  output: OutputFormat,
  list: { readonly doc: object; readonly rows: Row[]; readonly wide?: Row[] },
  next: string,
  what: string,
): void {
  process.stdout.write(`${render(output, withContinue(list.doc, next), list.rows, list.wide)}\n`);
  printMore(output, next, what);
}
