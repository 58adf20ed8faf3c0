package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every credential store of SecretPaths reads nothing in the real jail,
// whether it is a file (~/.netrc, ~/.npmrc, ~/.git-credentials,
// ~/.claude.json…) or a directory (~/.ssh, ~/.aws…), and whether the home
// directory holds it or a link to it (a dotfiles repository's): neither
// the link nor what it leads to is readable, while a file of the home
// directory that is no credential store is.
func TestSecretPathsAreUnreadableInTheJail(t *testing.T) {
	for _, kind := range []string{"file", "dir", "link to a file", "link to a dir"} {
		t.Run(kind, func(t *testing.T) {
			// The jail has a /tmp of its own: the home directory (and the
			// link's targets) are seen through a writable directory of
			// the jail, as a person's sandbox.allow_write could hold the
			// home directory or ~/.config, and must not bring a secret
			// back.
			root := t.TempDir()
			home, elsewhere := filepath.Join(root, "home"), filepath.Join(root, "elsewhere")
			secrets := SecretPaths(home)
			var reads []string
			for i, p := range secrets {
				mark := "SECRET-" + filepath.Base(p)
				target := p
				if strings.HasPrefix(kind, "link") {
					target = filepath.Join(elsewhere, "dotfiles", filepath.Base(p)+"-"+string(rune('a'+i)))
				}
				file := target
				if strings.HasSuffix(kind, "dir") {
					file = filepath.Join(target, "key")
				}
				if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(mark+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if target != p {
					if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(target, p); err != nil {
						t.Fatal(err)
					}
				}
				// Read through the secret's own path and through the
				// link's target, where there is one.
				reads = append(reads, strings.TrimPrefix(file, target), target, p)
			}
			var script strings.Builder
			for i := 0; i < len(reads); i += 3 {
				rest, target, p := reads[i], reads[i+1], reads[i+2]
				script.WriteString("cat " + p + rest + " " + target + rest + " 2>/dev/null; ")
			}
			if err := os.MkdirAll(home, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, ".profile"), []byte("NOT-A-SECRET\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			script.WriteString("cat " + filepath.Join(home, ".profile") + "; true")
			dir := t.TempDir()
			j := TestJail{Checkout: dir, Mount: dir, Secrets: secrets, Writable: []string{root}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}}
			var out bytes.Buffer
			if _, err := j.Run(t.Context(), script.String(), &out); err != nil {
				t.Fatalf("the jail: %v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "NOT-A-SECRET") {
				t.Fatalf("the jail read nothing of the home directory, so this test shows nothing:\n%s", out.String())
			}
			if strings.Contains(out.String(), "SECRET-") {
				t.Errorf("a secret was read in the jail:\n%s", out.String())
			}
		})
	}
}
