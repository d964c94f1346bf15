// ensure-fixture.ts - prints the folder of the tiny generated K3 checkpoint, generating it
// first if needed (test/support/fixtures.ts). `npm start` uses it as the model folder until
// the embedded default model exists.
import { ensureFixture } from '../../test/support/fixtures';

console.log(ensureFixture());
