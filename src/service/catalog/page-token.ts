import { createHmac, timingSafeEqual } from 'node:crypto';
import { invalidInput } from '../../model/errors.js';

// Opaque page tokens: base64url of `kind \n scope \n after`, signed with an HMAC so a token can only
// continue the listing that issued it. Any replica configured with the same secret accepts it.
// A token that does not decode, carries a bad signature, or belongs to another listing is a 400.

export class PageTokens {
  constructor(private readonly secret: string) {}

  private sign(payload: string): string {
    return createHmac('sha256', this.secret).update(payload).digest('base64url').slice(0, 22);
  }

  /** `kind` names the listing (e.g. "namespaces"), `scope` its parent, `after` the last item returned. */
  encode(kind: string, scope: string, after: string): string {
    const payload = Buffer.from(JSON.stringify([kind, scope, after])).toString('base64url');
    return `${payload}.${this.sign(payload)}`;
  }

  /** Returns the `after` item of a token issued for this listing; empty/absent means "from the start". */
  decode(kind: string, scope: string, token: string | null | undefined): string | undefined {
    if (token === undefined || token === null || token === '') return undefined;
    const [payload, signature, extra] = token.split('.');
    const forged = () => invalidInput(`invalid page_token: it was not issued by this service for this ${kind} listing`);
    if (!payload || !signature || extra !== undefined) throw forged();
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw forged();
    let decoded: unknown;
    try {
      decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      throw forged();
    }
    if (!Array.isArray(decoded) || decoded.length !== 3 || decoded[0] !== kind || decoded[1] !== scope || typeof decoded[2] !== 'string') {
      throw forged();
    }
    return decoded[2];
  }
}

/**
 * Takes one page (at most `limit` items) of an ordered list and the token for the next one.
 * `limit: 0` is an empty page without a token, as the reference server answers: a token there
 * would lead a client that follows tokens round in a loop that never ends.
 */
export function paginate<T>(
  items: T[],
  limit: number | null | undefined,
  nameOf: (item: T) => string,
  nextToken: (lastName: string) => string,
): { page: T[]; pageToken: string | null } {
  if (limit === undefined || limit === null || items.length <= limit) return { page: items, pageToken: null };
  const last = items[limit - 1];
  if (last === undefined) return { page: [], pageToken: null };
  return { page: items.slice(0, limit), pageToken: nextToken(nameOf(last)) };
}
