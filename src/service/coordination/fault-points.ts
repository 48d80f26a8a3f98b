// Named points inside multi-step protocols where tests stop the process dead. The environment
// variable LANCE_NS_FAULT_POINT names one point; reaching it SIGKILLs the process, which is what a
// crash looks like to the store: no cleanup, no finally blocks. Unset, a fault point costs a
// string comparison.
//
// A point reached through pausePoint may instead be slowed down: LANCE_NS_PAUSE_POINTS names such
// points (comma-separated) and LANCE_NS_PAUSE_MS how long the process waits at each, alive (its
// timers, lease renewals and other requests go on): what a large batch or a slow store looks like
// to the other replicas. Unset, a pause point costs a set lookup.

const armed = process.env.LANCE_NS_FAULT_POINT;
const paused = new Set((process.env.LANCE_NS_PAUSE_POINTS ?? '').split(',').filter((p) => p !== ''));
const pauseMs = Number(process.env.LANCE_NS_PAUSE_MS ?? 0);

export function faultPoint(name: string): void {
  if (armed !== undefined && armed === name) {
    process.stderr.write(`fault point ${name}: killing the process\n`);
    process.kill(process.pid, 'SIGKILL');
  }
}

/** A fault point that may also be armed to pause (see above). */
export async function pausePoint(name: string): Promise<void> {
  faultPoint(name);
  if (!paused.has(name)) return;
  process.stderr.write(`pause point ${name}: waiting ${pauseMs} ms\n`);
  await new Promise((resolve) => setTimeout(resolve, pauseMs));
}
