// What the service knows about the caller of one request. The HTTP layer builds it once per
// request (the one place a principal is established); every service operation receives it.

export interface Principal {
  /** Stable identifier of the caller (a subject, an API key id). */
  id: string;
}

/** The caller of every request until authentication is configured. */
export const ANONYMOUS: Principal = Object.freeze({ id: 'anonymous' });

export interface RequestContext {
  requestId: string;
  /** ANONYMOUS for requests until authentication is configured; null for the service's own work (jobs, recovery). */
  principal: Principal | null;
  /** Context entries from the body and from x-namespace-ctx-<key> headers (headers win). */
  context: Record<string, string>;
}
