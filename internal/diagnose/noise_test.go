package diagnose

import "testing"

// The lines a user's shell tools print at a shell's start go; whatever
// else a test printed stays, in order, blank lines included. The noise
// lines are real: pyenv's from `bash -ic` in the daemon's test jail on a
// machine whose ~/.bashrc runs `pyenv init -`, the others as pyenv, direnv
// and bash print them.
func TestQuiet(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"nothing to take out", "--- FAIL: TestX\n\tx_test.go:3: got 1, want 2\nFAIL\n", "--- FAIL: TestX\n\tx_test.go:3: got 1, want 2\nFAIL\n"},
		{"pyenv's shims read-only",
			"bash: cannot set terminal process group (1): Inappropriate ioctl for device\nbash: no job control in this shell\npyenv: cannot rehash: /root/.pyenv/shims isn't writable\nsh: 0: cannot open tests/x.sh: No such file\n",
			"sh: 0: cannot open tests/x.sh: No such file\n"},
		{"pyenv's lock", "pyenv: cannot rehash: couldn't acquire lock /root/.pyenv/shims/.pyenv-shim for 60 seconds. Last error message:\nE   assert 1 == 2\n", "E   assert 1 == 2\n"},
		{"pyenv saying something else stays", "pyenv: version `3.13' is not installed (set by /p/.python-version)\n", "pyenv: version `3.13' is not installed (set by /p/.python-version)\n"},
		{"direnv", "direnv: loading ~/src/shop/.envrc\ndirenv: export +VIRTUAL_ENV ~PATH\nok\n", "ok\n"},
		{"direnv refusing an .envrc", "direnv: error /home/alice/src/shop/.envrc is blocked. Run `direnv allow` to approve its content\nFAILED tests/test_x.py::test_x\n", "FAILED tests/test_x.py::test_x\n"},
		{"a locale the machine lacks", "bash: warning: setlocale: LC_ALL: cannot change locale (xx_XX.UTF-8)\n/bin/bash: line 1: warning: setlocale: LC_ALL: cannot change locale (en_US.UTF-8)\nnot ok 1 - adds\n", "not ok 1 - adds\n"},
		{"noise at the end, without a newline", "FAIL\npyenv: cannot rehash: /root/.pyenv/shims isn't writable", "FAIL\n"},
		{"carriage returns", "pyenv: cannot rehash: /root/.pyenv/shims isn't writable\r\nFAIL\r\n", "FAIL\r\n"},
		{"blank lines stay", "a\n\npyenv: cannot rehash: /x isn't writable\n\nb\n", "a\n\n\nb\n"},
		{"the words inside a line are the test's", "expected \"direnv: loading\" in the output\n", "expected \"direnv: loading\" in the output\n"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Quiet(tc.in); got != tc.want {
				t.Errorf("Quiet(%q)\n = %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}
