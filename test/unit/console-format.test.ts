import { describe, expect, it } from 'vitest';
import { timestampLiteral } from '../../ui/format.js';

// The console's SQL time literal (ui/format.ts): the jobs list bounds its pages with it, so it
// must name the exact microsecond, on both sides of 1970.

describe('timestampLiteral', () => {
  it('keeps every microsecond', () => {
    expect(timestampLiteral(1_795_413_011_020_123n)).toBe("TIMESTAMP '2026-11-23T05:50:11.020123Z'");
    expect(timestampLiteral(1_795_413_011_020_000n)).toBe("TIMESTAMP '2026-11-23T05:50:11.020000Z'");
    expect(timestampLiteral(1n)).toBe("TIMESTAMP '1970-01-01T00:00:00.000001Z'");
    expect(timestampLiteral(0n)).toBe("TIMESTAMP '1970-01-01T00:00:00.000000Z'");
  });

  it('borrows a millisecond before 1970 instead of printing a negative fraction', () => {
    expect(timestampLiteral(-1n)).toBe("TIMESTAMP '1969-12-31T23:59:59.999999Z'");
    expect(timestampLiteral(-1_001n)).toBe("TIMESTAMP '1969-12-31T23:59:59.998999Z'");
    expect(timestampLiteral(-1_000n)).toBe("TIMESTAMP '1969-12-31T23:59:59.999000Z'");
  });
});
