// Reading a whole paged list (the API's list calls, src/api/pages.ts): the call is repeated with
// each page's `continue` token until the last page, which answers an empty one. Every caller
// that wants the whole answer (the CLI, the benchmarks, the lab, the balancer, the tests) goes
// through here, so none reads only the first page. A token that does not move, or more pages
// than any list can have, ends with an error instead of a loop.

/** More pages than any list holds (a page holds up to 1,000 items). */
const pagesMax = 10_000;

/** Every page of a list call, in order; `fetchPage` asks for the page after `token` ('' first). */
export async function allPages<R extends { readonly continue: string }>(
  fetchPage: (token: string) => Promise<R>,
  first = '',
): Promise<R[]> {
  const pages: R[] = [];
  let token = first;
  for (let i = 0; i < pagesMax; i++) {
    const page = await fetchPage(token);
    pages.push(page);
    if (page.continue === '') return pages;
    if (page.continue === token) throw new Error('the server answered the same continue token twice');
    token = page.continue;
  }
  throw new Error(`the list did not end within ${pagesMax} pages`);
}

/**
 * Every item of a list call, in the list's order: `fetchPage` asks for the page after `token`
 * ('' first), `itemsOf` names the page's items, e.g.
 * `allItems((t) => client.control('workflowList', { ..., continue: t }), (p) => p.workflows)`.
 */
export async function allItems<R extends { readonly continue: string }, T>(
  fetchPage: (token: string) => Promise<R>,
  itemsOf: (page: R) => readonly T[],
): Promise<T[]> {
  const items: T[] = [];
  for (const page of await allPages(fetchPage)) items.push(...itemsOf(page));
  return items;
}
