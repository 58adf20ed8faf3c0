import { test, expect } from 'vitest';
test('adds', () => { expect(1 + 2).toBe(3); });
test('subtracts', () => { expect(3 - 1).toBe(2); });
test.skip('later', () => {});
