import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { prefixedRoutes } from '../../src/http/route.js';
import { routeGroups, type Services } from '../../src/http/server.js';
import { compileResponseWriter, NO_FAST_PATH } from '../../src/http/zod-serializer.js';
import { DescribeTableResponse, ListTablesResponse } from '../../src/model/tables.js';

/**
 * The writer's contract: text only where zod's parse succeeds, and then exactly JSON.stringify of
 * zod's output; NO_FAST_PATH for everything else (which the serializer hands to zod).
 */
function expectLikeZod(schema: z.ZodType, value: unknown): 'written' | 'declined' {
  const text = compileResponseWriter(schema)(value);
  const parsed = schema.safeParse(value);
  if (text === NO_FAST_PATH) return 'declined';
  expect(parsed.success).toBe(true);
  expect(text).toBe(JSON.stringify(parsed.data));
  return 'written';
}

class Instance {
  a = 'x';
}

describe('the compiled response writer', () => {
  const shapes = z.object({
    s: z.string(),
    n: z.number(),
    b: z.boolean(),
    nul: z.null(),
    opt: z.string().optional(),
    nullable: z.string().nullable(),
    list: z.array(z.string()),
    objects: z.array(z.object({ k: z.number().int().min(0), o: z.boolean().optional() })),
    optionals: z.array(z.string().optional()),
    map: z.record(z.string(), z.string()),
    optionalMap: z.record(z.string(), z.string().optional()),
    anything: z.record(z.string(), z.unknown()).optional(),
    kind: z.enum(['a', 'b']),
    lit: z.literal('x'),
    checked: z.string().min(2).optional(),
    union: z.union([z.string(), z.number()]).optional(),
    withDefault: z.string().default('d'),
    transformed: z
      .string()
      .transform((v) => v.toUpperCase())
      .optional(),
    loose: z.looseObject({ t: z.string() }).optional(),
    int: z.int().optional(),
    email: z.email().optional(),
  });
  const valid = {
    n: -0,
    s: 'é\u2028"\\\n',
    b: false,
    nul: null,
    nullable: null,
    list: ['a', 'b'],
    objects: [{ k: 1 }, { o: true, k: 2, extra: 3 }],
    optionals: [undefined, 'z'],
    map: { b: '1', a: '2', 10: '3' },
    optionalMap: { a: undefined, b: 'x' },
    anything: { deep: [1, { x: null }], gone: undefined },
    kind: 'b',
    lit: 'x',
    checked: 'ok',
    union: 3,
    transformed: 'up',
    loose: { t: 'x', kept: 1 },
    int: 7,
    email: 'a@example.com',
    unknownKey: 'dropped',
  };

  it('writes exactly what zod parses and stringifies, in the schema order, unknown keys dropped', () => {
    expect(expectLikeZod(shapes, valid)).toBe('written');
    expect(expectLikeZod(shapes, { ...valid, opt: 'here', nullable: 'v', anything: undefined })).toBe('written');
    expect(expectLikeZod(ListTablesResponse, { tables: ['t1', 't0'], page_token: null })).toBe('written');
    expect(expectLikeZod(ListTablesResponse, { tables: [], page_token: 'x' })).toBe('written');
    expect(
      expectLikeZod(DescribeTableResponse, {
        location: '/l',
        properties: null,
        managed_versioning: true,
        version: 3,
        stats: { num_deleted_rows: 0, num_fragments: 1 },
      }),
    ).toBe('written');
  });

  it('declines every value zod would refuse', () => {
    const bad: Array<[string, unknown]> = [
      ['s', 1],
      ['n', Number.NaN],
      ['n', Number.POSITIVE_INFINITY],
      ['n', '1'],
      ['b', 'true'],
      ['nul', undefined],
      ['nullable', undefined],
      ['list', ['a', 1]],
      ['list', 'a'],
      ['list', [undefined]],
      ['objects', [{ k: -1 }]],
      ['objects', [{ k: 1.5 }]],
      ['objects', [{}]],
      ['map', { a: 1 }],
      ['map', ['a']],
      ['kind', 'c'],
      ['lit', 'y'],
      ['checked', 'x'],
      ['union', true],
      ['int', 1.5],
      ['email', 'nope'],
      ['loose', { t: 1 }],
    ];
    for (const [key, value] of bad) {
      expect({ key, outcome: expectLikeZod(shapes, { ...valid, [key]: value }) }).toEqual({ key, outcome: 'declined' });
      expect(shapes.safeParse({ ...valid, [key]: value }).success).toBe(false);
    }
    for (const value of [null, undefined, 'x', [], new Instance()]) expect(expectLikeZod(shapes, value)).toBe('declined');
  });

  it('leaves to zod what it is not sure of: class instances, a "__proto__" key', () => {
    expect(expectLikeZod(z.object({ a: z.string() }), new Instance())).toBe('declined');
    expect(expectLikeZod(z.record(z.string(), z.string()), JSON.parse('{"__proto__":"x","b":"y"}'))).toBe('declined');
    expect(expectLikeZod(z.object({ a: z.string() }), Object.assign(Object.create(null) as object, { a: 'q' }))).toBe('written');
  });

  it('compiles a schema that contains itself', () => {
    const Node = z.object({
      name: z.string(),
      get children(): z.ZodOptional<z.ZodArray<typeof Node>> {
        return z.array(Node).optional();
      },
    });
    expect(expectLikeZod(Node, { name: 'a', children: [{ name: 'b', children: [] }, { name: 'c' }] })).toBe('written');
    expect(expectLikeZod(Node, { name: 'a', children: [{ name: 1 }] })).toBe('declined');
  });

  it("compiles every route's response schema", () => {
    const unused = new Proxy({}, { get: () => () => undefined }) as unknown;
    for (const route of prefixedRoutes(routeGroups(unused as Services))) {
      if (typeof route.response === 'object') expect(() => compileResponseWriter(route.response as z.ZodType)).not.toThrow();
    }
  });
});
