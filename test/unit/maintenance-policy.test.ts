import { describe, expect, it } from 'vitest';
import type { MaintenanceInspection } from '../../src/engine/ports/maintenance.js';
import { NamespaceError } from '../../src/model/errors.js';
import { CLOCK_ALLOWANCE_MS, cleanupCandidates, dueSteps, readerWindow } from '../../src/service/maintenance/maintenance-plan.js';
import { DEFAULT_POLICY, effectivePolicy, parseDuration, parsePolicyProperties, policyActs } from '../../src/service/maintenance/policy.js';

// The maintenance policy as properties (issue 33 point 1) and the scheduler's decisions from an inspection (point 2).

function refusal(properties: Record<string, string>): NamespaceError {
  try {
    parsePolicyProperties(properties);
  } catch (e) {
    if (e instanceof NamespaceError) return e;
    throw e;
  }
  throw new Error(`accepted ${JSON.stringify(properties)}`);
}

describe('maintenance properties', () => {
  it('parses durations with a unit, and nothing else', () => {
    expect(parseDuration('7d')).toBe(7 * 86_400_000);
    expect(parseDuration('12h')).toBe(12 * 3_600_000);
    expect(parseDuration('1s')).toBe(1000);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2w')).toBe(14 * 86_400_000);
    for (const bad of ['', '7', 'd', '-1d', '1.5h', '0s', '7 days', '1y', '99999999999999d']) expect(parseDuration(bad), bad).toBeNull();
  });

  it('refuses a bad value with code 13 naming the key', () => {
    const cases: Array<[string, string]> = [
      ['maintenance.compact', 'yes'],
      ['maintenance.min_fragments', '1'],
      ['maintenance.min_fragments', 'many'],
      ['maintenance.target_rows_per_fragment', '0'],
      ['maintenance.optimize_indices', ''],
      ['maintenance.max_unindexed_rows', '-5'],
      ['maintenance.cleanup_older_than', '7'],
      ['maintenance.cleanup_older_than', 'forever'],
      ['maintenance.compaction', 'true'],
    ];
    for (const [key, value] of cases) {
      const e = refusal({ other: 'x', [key]: value });
      expect(e.code, `${key}=${value}`).toBe(13);
      expect(e.message).toContain(key);
    }
  });

  it('accepts good values and leaves other properties alone', () => {
    expect(
      parsePolicyProperties({
        'maintenance.compact': 'TRUE',
        'maintenance.min_fragments': '4',
        'maintenance.cleanup_older_than': 'none',
        'maintenance.max_unindexed_rows': '0',
        anything: 'else',
      }),
    ).toEqual({ compact: true, minFragments: 4, cleanupOlderThanMs: null, maxUnindexedRows: 0 });
  });

  it('a table inherits each key from the nearest namespace that sets it, and its own value wins', () => {
    const root = { 'maintenance.compact': 'true', 'maintenance.min_fragments': '8', 'maintenance.cleanup_older_than': '7d' };
    const parent = { 'maintenance.min_fragments': '4' };
    const own = { 'maintenance.cleanup_older_than': '1h' };
    const policy = effectivePolicy(own, [parent, root]);
    expect(policy).toEqual({ ...DEFAULT_POLICY, compact: true, minFragments: 4, cleanupOlderThanMs: 3_600_000 });
    expect(effectivePolicy({ 'maintenance.compact': 'false' }, [parent, root]).compact).toBe(false);
    expect(policyActs(effectivePolicy({}, [{}]))).toBe(false);
  });
});

const NOW = 1_000_000_000_000;
const LEASE = 30_000;

function inspection(over: Partial<MaintenanceInspection> = {}): MaintenanceInspection {
  return {
    version: 1,
    fragments: 1,
    smallFragments: 1,
    rows: 100,
    deletedRows: 0,
    indices: [],
    versions: [{ version: 1, timestampMillis: NOW - 1000 }],
    ...over,
  };
}

describe('when a run is due', () => {
  it('compacts at min_fragments small fragments, or at the deleted share', () => {
    const policy = { ...DEFAULT_POLICY, compact: true, minFragments: 16 };
    expect(dueSteps(policy, inspection({ smallFragments: 15 }), [], NOW, LEASE)).toEqual([]);
    expect(dueSteps(policy, inspection({ smallFragments: 16 }), [], NOW, LEASE)).toEqual(['compact']);
    expect(dueSteps(policy, inspection({ rows: 90, deletedRows: 10 }), [], NOW, LEASE)).toEqual(['compact']);
    expect(dueSteps(policy, inspection({ rows: 91, deletedRows: 9 }), [], NOW, LEASE)).toEqual([]);
    expect(dueSteps({ ...policy, compact: false }, inspection({ smallFragments: 99 }), [], NOW, LEASE)).toEqual([]);
  });

  it('optimizes indices once max_unindexed_rows rows are outside one', () => {
    const policy = { ...DEFAULT_POLICY, optimizeIndices: true, maxUnindexedRows: 100 };
    expect(dueSteps(policy, inspection({ indices: [{ name: 'i', unindexedRows: 99 }] }), [], NOW, LEASE)).toEqual([]);
    expect(dueSteps(policy, inspection({ indices: [{ name: 'i', unindexedRows: 100 }] }), [], NOW, LEASE)).toEqual(['optimize_indices']);
    expect(dueSteps({ ...policy, maxUnindexedRows: 0 }, inspection({ indices: [{ name: 'i', unindexedRows: 0 }] }), [], NOW, LEASE)).toEqual([]);
  });

  it('brings indices up to date before it compacts (Lance merges no indexed fragment with an unindexed one)', () => {
    const policy = { ...DEFAULT_POLICY, compact: true, minFragments: 2, optimizeIndices: true, maxUnindexedRows: 1 };
    expect(dueSteps(policy, inspection({ smallFragments: 5, indices: [{ name: 'i', unindexedRows: 5 }] }), [], NOW, LEASE)).toEqual([
      'optimize_indices',
      'compact',
    ]);
  });

  it('keeps every version that was the latest within the reader window, and the latest', () => {
    const versions = [
      { version: 1, timestampMillis: NOW - 10 * LEASE },
      { version: 2, timestampMillis: NOW - 5 * LEASE },
      // 2 was the latest until 3 came, within the window: a reader may have been handed 2.
      { version: 3, timestampMillis: NOW - LEASE / 2 },
      { version: 4, timestampMillis: NOW - LEASE / 4 },
    ];
    expect([...readerWindow(versions, NOW, LEASE)].sort()).toEqual([2, 3, 4]);
    // Just outside the window (with the clock allowance): 2 goes too.
    const later = NOW - LEASE / 2 + LEASE + CLOCK_ALLOWANCE_MS + 1;
    expect([...readerWindow(versions, later, LEASE)].sort()).toEqual([3, 4]);
    expect(cleanupCandidates(versions, LEASE, NOW, LEASE)).toEqual([1]);
    // The latest stays however old.
    expect(cleanupCandidates([{ version: 9, timestampMillis: 0 }], 1, NOW, LEASE)).toEqual([]);
  });

  it('cleans up when a version could go that the last cleanup did not find kept', () => {
    const policy = { ...DEFAULT_POLICY, cleanupOlderThanMs: 60_000 };
    const versions = [
      { version: 1, timestampMillis: NOW - 10 * LEASE },
      { version: 2, timestampMillis: NOW - 9 * LEASE },
      { version: 3, timestampMillis: NOW - 8 * LEASE },
    ];
    expect(dueSteps(policy, inspection({ version: 3, versions }), [], NOW, LEASE)).toEqual(['cleanup']);
    const run = { job_id: 'j', status: 'Succeeded', finished_at: '', version: 3, steps: ['cleanup'], kept: [1, 2] };
    expect(dueSteps(policy, inspection({ version: 3, versions }), [run], NOW, LEASE)).toEqual([]);
    expect(dueSteps(policy, inspection({ version: 3, versions }), [{ ...run, kept: [1] }], NOW, LEASE)).toEqual(['cleanup']);
    expect(dueSteps(policy, inspection({ version: 3, versions }), [{ ...run, status: 'Failed' }], NOW, LEASE)).toEqual(['cleanup']);
  });
});
