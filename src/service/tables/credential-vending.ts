import { type Metrics, NO_METRICS } from '../../metrics/metrics.js';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { parseLocation } from '../../store/location.js';
import { type CredentialCache, type DataAccess, POLICY_WILDCARDS } from '../../vending/credential-vendor.js';
import { CATALOG_DIR, LATEST_HINT, VERSIONS_DIR } from '../catalog/layout.js';
import type { StoreDir } from '../catalog/locations.js';
import type { RequestContext, VendRecord } from '../context/request-context.js';

// Which storage options a response about a table carries (DescribeTable, DeclareTable,
// CreateTable): the store's client options (endpoint, region; never the service's own keys) and,
// when vending applies, short-lived credentials that reach only the table's directory. Read-write
// for a caller who may write the table's namespace, read-only otherwise; the service's own records
// in the directory are never writable, and for a table with managed versioning neither are its
// committed manifests (its commits go through the service). When nothing is vended but the caller
// asked, or vending is configured, the options say why under NO_CREDENTIALS_KEY.

/** The key that says why a response carries no credentials (Lance ignores keys it does not know). */
export const NO_CREDENTIALS_KEY = 'vended_credentials';

/**
 * Keys of a table directory that vended credentials may not write, relative to the directory: the
 * service's records (`.lance-*`, and `_catalog/` of main and of every branch, where a branch's
 * versions keep their sidecars) and, with managed versioning, the committed manifests and Lance's
 * hint of main and of every branch (a branch's history is `tree/<branch>/_versions/`; a branch name
 * may have '/'). Each pattern must hold on every store: AWS's `*` spans '/', radosgw's stops at the
 * first occurrence of the character after it (sts-credential-vendor.ts), so `tree/<branch>/` is
 * spelled once per depth, `*` per segment, for names of up to BRANCH_DEPTHS segments.
 */
export function protectedKeys(managedVersioning: boolean): string[] {
  const own = (dir: string) => [`${dir}${CATALOG_DIR}/*`];
  const history = (dir: string) => [`${dir}${VERSIONS_DIR}/*.manifest`, `${dir}${VERSIONS_DIR}/${LATEST_HINT}`];
  const keys = (dir: string) => (managedVersioning ? [...own(dir), ...history(dir)] : own(dir));
  const branches = Array.from({ length: BRANCH_DEPTHS }, (_, depth) => keys(`tree/${'*/'.repeat(depth + 1)}`)).flat();
  return ['.lance-*', ...keys(''), ...branches];
}

/**
 * How many segments of a branch's name the Deny spells out for a store whose `*` does not span '/'
 * (radosgw): a name with more has its tree's protected keys covered only where `*` spans '/' (AWS).
 */
const BRANCH_DEPTHS = 3;

export interface VendTarget {
  id: string[];
  dir: StoreDir;
  managedVersioning: boolean;
}

export class TableCredentials {
  /** `cache`: null when vending is not configured. */
  constructor(
    private readonly cache: CredentialCache | null,
    private readonly metrics: Metrics = NO_METRICS,
  ) {}

  /** Whether credentials are vended (credential_vending is configured). */
  get vends(): boolean {
    return this.cache !== null;
  }

  /** Reports a vend to the request (its audit record) and to the metrics. */
  private report(ctx: RequestContext, record: VendRecord): void {
    ctx.onVend?.(record);
    this.metrics.vend(record.access, record.outcome);
  }

  /**
   * The storage options for a response about `target`. `asked` is the request's
   * `vend_credentials`: false never vends; true vends or fails (503 code 17 when the vend fails);
   * unset vends when vending is configured and answers without credentials should the vend fail.
   */
  async storageOptions(ctx: RequestContext, target: VendTarget, asked: boolean | null | undefined): Promise<Record<string, string>> {
    const { dir } = target;
    const options = dir.store.clientStorageOptions();
    if (asked === false || (asked !== true && !this.cache)) return options;
    const access: DataAccess = ctx.may?.('write', target.id.slice(0, -1)) ? 'read-write' : 'read';
    const none = (reason: string, outcome: VendRecord['outcome'] = 'none'): Record<string, string> => {
      this.report(ctx, { access, outcome, reason });
      return { ...options, [NO_CREDENTIALS_KEY]: `none: ${reason}` };
    };
    const where = parseLocation(dir.store.location(dir.key));
    if (where?.kind !== 's3' || where.prefix === '')
      return none('the table is not in an S3 bucket (it is on a local disk), so there is nothing to vend: the service reads and writes it for its clients');
    if (!this.cache) return none('credential vending is not configured on this service (see credential_vending in the README)');
    const prefix = `${where.prefix}/`;
    if (POLICY_WILDCARDS.test(prefix)) return none(`the table's location holds a character ("*", "?" or "$") that a session policy cannot scope exactly`);
    try {
      const { credentials, fromCache } = await this.cache.get({ bucket: where.bucket, prefix, access, protectedKeys: protectedKeys(target.managedVersioning) });
      this.report(ctx, { access, outcome: fromCache ? 'cached' : 'vended', expires_at_millis: credentials.expiresAtMillis });
      return {
        ...options,
        aws_access_key_id: credentials.accessKeyId,
        aws_secret_access_key: credentials.secretAccessKey,
        aws_session_token: credentials.sessionToken,
        expires_at_millis: String(credentials.expiresAtMillis),
      };
    } catch (e) {
      // The caller learns that the vend failed and the error's name; the audit record (a log line) has its message,
      // which may name the service's own identity and role.
      const name = e instanceof Error ? e.name : 'Error';
      const detail = e instanceof Error ? e.message : String(e);
      const reason = `could not vend credentials for table ${JSON.stringify(target.id)}: the credential vendor failed (${name}); the service's audit log has the details under request id ${ctx.requestId}`;
      this.report(ctx, { access, outcome: 'failed', reason: `${name}: ${detail}` });
      if (asked !== true) return { ...options, [NO_CREDENTIALS_KEY]: `none: ${reason}` };
      throw new NamespaceError(ErrorCode.ServiceUnavailable, reason, { cause: e });
    }
  }
}
