// Lists print everything: a paged list call (src/api/pages.ts) is repeated with each page's
// `continue` token until the last page. A token that does not move, or more pages than any
// list can have, ends with an error instead of a loop.
const pagesMax = 10_000;

/** Every page of a list call, in order; `fetchPage` asks for the page after `token` ('' first). */
export async function allPages<R extends { readonly continue: string }>(
  fetchPage: (token: string) => Promise<R>,
): Promise<R[]> {
  const pages: R[] = [];
  let token = '';
  for (let i = 0; i < pagesMax; i++) {
    const page = await fetchPage(token);
    pages.push(page);
    if (page.continue === '') return pages;
    if (page.continue === token) throw new Error('the server answered the same continue token twice');
    token = page.continue;
  }
  throw new Error(`the list did not end within ${pagesMax} pages`);
}
