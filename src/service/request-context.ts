// What the service knows about the caller of one request. The HTTP layer builds it once per
// request (the one place a principal is established); every service operation receives it.

export interface Principal {
  /** Stable identifier of the caller (a subject, an API key id). */
  id: string;
}

export interface RequestContext {
  requestId: string;
  /** null until authentication is configured: every caller is anonymous. */
  principal: Principal | null;
  /** Context entries from the body and from x-namespace-ctx-<key> headers (headers win). */
  context: Record<string, string>;
}
