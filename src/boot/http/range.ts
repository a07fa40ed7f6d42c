// Which bytes of a file a GET asks for (RFC 9110 §14.1-14.2). Pure.
//
// One range is served as 206. Anything the server may ignore is answered with the whole file
// (200): a missing or syntactically invalid header, a unit other than bytes, several ranges
// (no multipart/byteranges: boot clients never ask for them), or an If-Range validator that
// no longer matches. A well-formed single range that starts past the end is 416.

export type RangeChoice =
  | { readonly kind: 'whole' }
  | { readonly kind: 'part'; readonly start: number; readonly end: number }
  | { readonly kind: 'unsatisfiable' };

export interface RangeRequest {
  readonly range: string | undefined;
  readonly ifRange: string | undefined;
  readonly size: number;
  /** The validators the response carries; If-Range must equal one of them. */
  readonly etag: string;
  readonly lastModified: string;
}

const whole: RangeChoice = { kind: 'whole' };
const digits = /^\d+$/;

/** `end` is inclusive, as in Content-Range. */
export function chooseRange(request: RangeRequest): RangeChoice {
  const { range, ifRange, size } = request;
  if (range === undefined) return whole;
  if (ifRange !== undefined && ifRange !== request.etag && ifRange !== request.lastModified) return whole;
  const match = /^\s*bytes\s*=\s*(.*)$/i.exec(range);
  if (match === null) return whole;
  const spec = (match[1] ?? '').trim();
  const parts = spec.split('-');
  if (spec.includes(',') || parts.length !== 2) return whole;
  const first = (parts[0] ?? '').trim();
  const last = (parts[1] ?? '').trim();
  if (first === '') {
    // Suffix range: the last N bytes.
    if (!digits.test(last)) return whole;
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'part', start: Math.max(0, size - suffix), end: size - 1 };
  }
  if (!digits.test(first) || (last !== '' && !digits.test(last))) return whole;
  const start = Number(first);
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (last !== '' && Number(last) < start) return whole;
  if (start >= size) return { kind: 'unsatisfiable' };
  return { kind: 'part', start, end };
}
