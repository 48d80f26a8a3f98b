import { invalidInput } from '../../model/errors.js';
import type { MaintenancePolicyEntry } from '../../model/maintenance.js';

// A table's maintenance policy (issue 33), as properties of the table or of any namespace above it:
// the table's own value of a key wins, else that of the nearest namespace that sets it, else the
// default. Every `maintenance.*` property is checked here when it is set (a 400 code 13 naming the
// key, before anything is written), so a stored policy always parses.

export const MAINTENANCE_PREFIX = 'maintenance.';

export const POLICY_KEYS = {
  compact: 'maintenance.compact',
  minFragments: 'maintenance.min_fragments',
  targetRowsPerFragment: 'maintenance.target_rows_per_fragment',
  optimizeIndices: 'maintenance.optimize_indices',
  maxUnindexedRows: 'maintenance.max_unindexed_rows',
  cleanupOlderThan: 'maintenance.cleanup_older_than',
} as const;

/** What the scheduler does to a table, every key resolved. */
export interface MaintenancePolicy {
  compact: boolean;
  minFragments: number;
  targetRowsPerFragment: number;
  /** Compact also when at least this share of the stored rows is deleted (documented in docs/maintenance.md). */
  deletedShare: number;
  optimizeIndices: boolean;
  maxUnindexedRows: number;
  /** Versions older than this may be removed; null keeps every version. */
  cleanupOlderThanMs: number | null;
}

export const DEFAULT_POLICY: MaintenancePolicy = {
  compact: false,
  minFragments: 16,
  targetRowsPerFragment: 1_048_576,
  deletedShare: 0.1,
  optimizeIndices: false,
  maxUnindexedRows: 10_000,
  cleanupOlderThanMs: null,
};

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** A duration such as `7d`, `12h`, `30m`, `1s`, `500ms`, or null when it is not one. */
export function parseDuration(text: string): number | null {
  const m = /^(\d{1,12})(ms|s|m|h|d|w)$/.exec(text.trim());
  if (!m) return null;
  const ms = Number(m[1]) * (UNIT_MS[m[2] as string] as number);
  return Number.isSafeInteger(ms) && ms > 0 ? ms : null;
}

function parseFlag(text: string): boolean | null {
  const v = text.trim().toLowerCase();
  return v === 'true' ? true : v === 'false' ? false : null;
}

function parseCount(text: string, min: number): number | null {
  if (!/^\d{1,15}$/.test(text.trim())) return null;
  const n = Number(text.trim());
  return Number.isSafeInteger(n) && n >= min ? n : null;
}

type Parsed = Partial<Omit<MaintenancePolicy, 'deletedShare'>>;

/** Each key: what it accepts (for the error) and its parse into the policy. */
const PARSERS: Record<string, { accepts: string; parse: (text: string) => Parsed | null }> = {
  [POLICY_KEYS.compact]: { accepts: 'true or false', parse: (t) => nullOr(parseFlag(t), (compact) => ({ compact })) },
  [POLICY_KEYS.minFragments]: { accepts: 'an integer of at least 2', parse: (t) => nullOr(parseCount(t, 2), (minFragments) => ({ minFragments })) },
  [POLICY_KEYS.targetRowsPerFragment]: {
    accepts: 'a positive integer',
    parse: (t) => nullOr(parseCount(t, 1), (targetRowsPerFragment) => ({ targetRowsPerFragment })),
  },
  [POLICY_KEYS.optimizeIndices]: { accepts: 'true or false', parse: (t) => nullOr(parseFlag(t), (optimizeIndices) => ({ optimizeIndices })) },
  [POLICY_KEYS.maxUnindexedRows]: {
    accepts: 'a non-negative integer',
    parse: (t) => nullOr(parseCount(t, 0), (maxUnindexedRows) => ({ maxUnindexedRows })),
  },
  [POLICY_KEYS.cleanupOlderThan]: {
    accepts: 'a duration such as 7d, 12h, 30m, 1s or 500ms, or "none"',
    parse: (t) =>
      t.trim().toLowerCase() === 'none' ? { cleanupOlderThanMs: null } : nullOr(parseDuration(t), (cleanupOlderThanMs) => ({ cleanupOlderThanMs })),
  },
};

function nullOr<T>(value: T | null, wrap: (v: T) => Parsed): Parsed | null {
  return value === null ? null : wrap(value);
}

/** The maintenance keys a property map sets, parsed; a 400 code 13 naming the first key that is unknown or bad. */
export function parsePolicyProperties(properties: Record<string, string> | null | undefined): Parsed {
  const parsed: Parsed = {};
  for (const [key, value] of Object.entries(properties ?? {})) {
    if (!key.startsWith(MAINTENANCE_PREFIX)) continue;
    const parser = PARSERS[key];
    if (!parser) throw invalidInput(`properties: ${key} is not a maintenance property (known: ${Object.keys(PARSERS).join(', ')})`);
    const one = parser.parse(value);
    if (!one) throw invalidInput(`properties: ${key} must be ${parser.accepts}, got ${JSON.stringify(value)}`);
    Object.assign(parsed, one);
  }
  return parsed;
}

/** Whether a property map sets any maintenance key. */
export const setsPolicy = (properties: Record<string, string> | null | undefined): boolean =>
  Object.keys(properties ?? {}).some((k) => k.startsWith(MAINTENANCE_PREFIX));

/**
 * The policy of a table from its own properties and those of its namespaces, nearest first (its
 * namespace, then the parent, ... then the root). Values stored before this check existed and that
 * do not parse count as unset.
 */
export function effectivePolicy(own: Record<string, string>, namespacesNearestFirst: ReadonlyArray<Record<string, string>>): MaintenancePolicy {
  const layers = [own, ...namespacesNearestFirst];
  const policy: MaintenancePolicy = { ...DEFAULT_POLICY };
  // The farthest layer first, so that nearer ones overwrite it key by key.
  for (const layer of layers.reverse()) {
    for (const [key, value] of Object.entries(layer)) {
      const one = key.startsWith(MAINTENANCE_PREFIX) ? PARSERS[key]?.parse(value) : null;
      if (one) Object.assign(policy, one);
    }
  }
  return policy;
}

/** Whether the policy asks for anything at all. */
export const policyActs = (p: MaintenancePolicy): boolean => p.compact || p.optimizeIndices || p.cleanupOlderThanMs !== null;

/** Each policy key's default, as a property value. */
const DEFAULT_VALUES: Record<string, string> = {
  [POLICY_KEYS.compact]: String(DEFAULT_POLICY.compact),
  [POLICY_KEYS.minFragments]: String(DEFAULT_POLICY.minFragments),
  [POLICY_KEYS.targetRowsPerFragment]: String(DEFAULT_POLICY.targetRowsPerFragment),
  [POLICY_KEYS.optimizeIndices]: String(DEFAULT_POLICY.optimizeIndices),
  [POLICY_KEYS.maxUnindexedRows]: String(DEFAULT_POLICY.maxUnindexedRows),
  [POLICY_KEYS.cleanupOlderThan]: 'none',
};

/** Each policy key of a table as resolved: its value and where it comes from (the table, a namespace, the default). */
export function policyEntries(
  own: Record<string, string>,
  namespacesNearestFirst: ReadonlyArray<{ id: string[]; properties: Record<string, string> }>,
): MaintenancePolicyEntry[] {
  return Object.keys(PARSERS).map((key): MaintenancePolicyEntry => {
    if (own[key] !== undefined && PARSERS[key]?.parse(own[key])) return { key, value: own[key], from: 'table' };
    for (const ns of namespacesNearestFirst) {
      const value = ns.properties[key];
      if (value !== undefined && PARSERS[key]?.parse(value)) return { key, value, from: 'namespace', namespace: ns.id };
    }
    return { key, value: DEFAULT_VALUES[key] ?? '', from: 'default' };
  });
}
