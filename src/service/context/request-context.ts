// What the service knows about the caller of one request. The HTTP layer builds it once per
// request (the one place a principal is established); every service operation receives it.

import type { DataAccess } from '../../vending/credential-vendor.js';

/** What a principal may do on a namespace subtree; they nest: manage includes write, write includes read. */
export type Privilege = 'read' | 'write' | 'manage';

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
  /**
   * Whether the caller holds `privilege` on a namespace (authorization), for what the service
   * decides beyond the operation's own privilege (vended access, a register location's owner);
   * absent for the service's own work, which is granted nothing of the kind.
   */
  may?: (privilege: Privilege, namespace: string[]) => boolean;
  /** Where the service reports a credential vend, for the request's audit record. */
  onVend?: (record: VendRecord) => void;
}

/** What one request's credential vend came to (no credentials in it). */
export interface VendRecord {
  access: DataAccess;
  /** vended: fresh from the vendor; cached: handed out again; none: nothing to vend (reason); failed: the vendor failed (reason). */
  outcome: 'vended' | 'cached' | 'none' | 'failed';
  reason?: string;
  expires_at_millis?: number;
}
