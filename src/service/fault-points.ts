// Named points inside multi-step protocols where tests stop the process dead. The environment
// variable LANCE_NS_FAULT_POINT names one point; reaching it SIGKILLs the process, which is what a
// crash looks like to the store: no cleanup, no finally blocks. Unset, a fault point costs a
// string comparison.

const armed = process.env.LANCE_NS_FAULT_POINT;

export function faultPoint(name: string): void {
  if (armed !== undefined && armed === name) {
    process.stderr.write(`fault point ${name}: killing the process\n`);
    process.kill(process.pid, 'SIGKILL');
  }
}
