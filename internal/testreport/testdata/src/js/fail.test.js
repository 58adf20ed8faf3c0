test('adds', () => { expect(1 - 2).toBe(3); });
test('ok', () => { expect(1).toBe(1); });
