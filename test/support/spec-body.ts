import { expect } from 'vitest';
import type { TestRoot } from './backends.js';

const SPEC_KEYS = ['code', 'error', 'instance', 'status', 'title', 'type'];

/** The error body has exactly the spec's fields, a numeric code, and no internals. */
export function expectSpecBody(json: Record<string, unknown>, status: number, code: number, root?: TestRoot): void {
  expect(
    Object.keys(json)
      .filter((k) => k !== 'detail')
      .sort(),
  ).toEqual(SPEC_KEYS);
  expect(json).toMatchObject({ code, status });
  const text = JSON.stringify(json);
  expect(text).not.toMatch(/\.rs:\d+/);
  expect(text).not.toMatch(/FST_ERR|ENOSPC|ENAMETOOLONG|statusCode/);
  if (root) {
    for (const form of [root.store.rootUri, root.store.location(''), root.store.objectPath('')].filter((f) => f.length > 1)) {
      expect(text).not.toContain(form);
    }
  }
}
