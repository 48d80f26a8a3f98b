import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Backend, backends, type TestRoot } from '../support/backends.js';
import { rootArgs, type ServiceProcess, startServiceProcess } from '../support/service-process.js';

// A Restrict drop of a namespace racing creators of its children, from two service processes on
// one root. Never a child in a dropped namespace, and every answer is true: a
// creator answers 404 only when the namespace is gone afterwards, a drop answers 409 only naming
// children that exist afterwards. The old code let creators that met the drop's mark roll back
// and answer 404 while the drop then failed on their (rolled back) children and the namespace
// stayed: creators were told "no such namespace" about a namespace that existed.

const LEASE_MS = 2_000;
const CREATORS = 6;

describe.each(backends())('Restrict drop vs. creators, two processes on $name', (backend: Backend) => {
  const rounds = backend.name === 'local' ? 20 : 10;
  const live = new Set<ChildProcess>();
  let root: TestRoot;
  let creatorSide: ServiceProcess;
  let dropperSide: ServiceProcess;

  beforeAll(async () => {
    root = await backend.newRoot();
    [creatorSide, dropperSide] = await Promise.all([
      startServiceProcess({ args: rootArgs(root, LEASE_MS), live }),
      startServiceProcess({ args: rootArgs(root, LEASE_MS), live }),
    ]);
  });
  afterAll(async () => {
    for (const child of live) child.kill('SIGKILL');
    await root?.dispose();
  });

  it(`${rounds} rounds: 404 only for a namespace that is gone, 409 only naming children that exist`, async () => {
    const lies: string[] = [];
    const outcomes = { dropped: 0, refused: 0 };
    for (let round = 0; round < rounds; round++) {
      const ns = `race${round}`;
      expect((await creatorSide.call('POST', `/v1/namespace/${ns}/create`, {})).status).toBe(200);
      // Tables and namespaces created on one process while the other drops; one side gets a
      // varying head start, so that every interleaving (and both outcomes) occurs.
      const lead = ((round % 5) - 2) * (backend.name === 'local' ? 3 : 25);
      const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
      const drop = pause(-lead).then(() => dropperSide.call('POST', `/v1/namespace/${ns}/drop`, {}));
      const creates = Array.from({ length: CREATORS }, (_, i) =>
        pause(lead).then(() =>
          i % 2 === 0 ? creatorSide.call('POST', `/v1/table/${ns}%24t${i}/declare`, {}) : creatorSide.call('POST', `/v1/namespace/${ns}%24n${i}/create`, {}),
        ),
      );
      const [dropped, ...created] = await Promise.all([drop, ...creates]);
      for (const c of created) expect([200, 404], c.text).toContain(c.status);
      // A 500 says why in the dropper's log, not in its answer: the failure shows the errors logged.
      const logged = () => JSON.stringify(dropperSide.lines.filter((l) => Number(l.level) >= 50).slice(-3));
      expect([200, 409], dropped.status === 500 ? `${dropped.text}; logged: ${logged()}` : dropped.text).toContain(dropped.status);
      const exists = (await creatorSide.call('POST', `/v1/namespace/${ns}/exists`, {})).status === 200;
      if (dropped.status === 200) {
        outcomes.dropped++;
        if (exists) lies.push(`round ${round}: the drop answered 200 and the namespace exists`);
        created.forEach((c, i) => {
          if (c.status === 200) lies.push(`round ${round}: child ${i} answered 200 in a dropped namespace`);
        });
        const left = (await root.store.list(`${ns}/`, { maxKeys: 10 })).objects.map((o) => o.key);
        if (left.length > 0) lies.push(`round ${round}: a dropped namespace left ${left.join(', ')}`);
      } else {
        outcomes.refused++;
        if (!exists) lies.push(`round ${round}: the drop answered 409 and the namespace is gone`);
        created.forEach((c, i) => {
          if (c.status === 404) lies.push(`round ${round}: child ${i} answered 404 "${String(c.json.error)}" while the namespace exists`);
        });
        // Every child the refusal names exists.
        for (const [, kind, name] of String(dropped.json.error).matchAll(/(table|namespace) ([a-z0-9]+)/g)) {
          const path = kind === 'table' ? `/v1/table/${ns}%24${name}/exists` : `/v1/namespace/${ns}%24${name}/exists`;
          if ((await creatorSide.call('POST', path, {})).status !== 200) lies.push(`round ${round}: the refusal names ${kind} ${name}, which does not exist`);
        }
      }
    }
    console.log(`outcomes on ${backend.name}:`, outcomes);
    expect(lies).toEqual([]);
    // Both outcomes happen, or the race was not a race.
    expect(outcomes.dropped + outcomes.refused).toBe(rounds);
  });
});
